package rpc

import (
	"fmt"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// benchContent is content_json of n bytes, as an agent sends it.
func benchContent(n int) string {
	const env = `{"type":"text","text":""}`
	return `{"type":"text","text":"` + strings.Repeat("lorem ipsum ", n/12+1)[:max(n-len(env), 0)] + `"}`
}

// BenchmarkValidateSave is the request validation of every SaveCheckpoint:
// a Point A of one 2 KiB message and one pending tool use, as savepoint-load
// and the benchmark send it, and a save appending 100 such messages. Its
// cost is O(bytes of the request): JSON validation of each message.
func BenchmarkValidateSave(b *testing.B) {
	cfg := DefaultLimits()
	for _, n := range []int{1, 100} {
		msgs := make([]*savepointv1.Message, n)
		for i := range msgs {
			msgs[i] = &savepointv1.Message{Role: "assistant", ContentJson: benchContent(2048)}
		}
		req := &savepointv1.SaveCheckpointRequest{
			SessionId: "bench-session-1", ExpectedRevision: 7, Epoch: 1,
			RequestId: "0b7f3c2e-51a4-4d6c-9a51-7d1e2f3a4b5c", Task: "savepoint-bench", Turn: 4,
			AppendMessages: msgs,
			PendingToolUses: []*savepointv1.ToolUse{{
				ToolUseId: "toolu_01A09q90qw90lq917835lq9", Name: "send_email", InputJson: `{"to":"a@example.com","subject":"hi"}`,
				EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true,
			}},
			Labels: map[string]string{"team": "support", "env": "prod"},
		}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n * 2048))
			for b.Loop() {
				if _, err := validateSave(cfg, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateRecord is the validation of a RecordEffect carrying a
// 2 KiB tool output.
func BenchmarkValidateRecord(b *testing.B) {
	cfg := DefaultLimits()
	req := &savepointv1.RecordEffectRequest{
		SessionId: "bench-session-1", ToolUseId: "toolu_01A09q90qw90lq917835lq9", Name: "send_email", Output: benchContent(2048),
	}
	b.SetBytes(2048)
	for b.Loop() {
		if _, err := validateRecord(cfg, req); err != nil {
			b.Fatal(err)
		}
	}
}

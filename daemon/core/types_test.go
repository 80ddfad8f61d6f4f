package core

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func fingerprintRequest() *SaveRequest {
	keep := uint64(3)
	return &SaveRequest{
		SessionID: "s", ExpectedRevision: 4, Epoch: 2, RequestID: "ignored", Task: "t", Turn: 5, TokensUsed: 6,
		KeepMessages:    &keep,
		AppendMessages:  []Message{{Role: "user", ContentJSON: `"` + strings.Repeat("m", 2048) + `"`}},
		PendingToolUses: []ToolUse{{ID: "toolu_1", Name: "send", InputJSON: `{}`, Class: Idempotent, BeginTracked: true}},
		StateJSON:       `{"k":1}`,
		Labels:          map[string]string{"b": "2", "a": "1"},
	}
}

// TestFingerprint pins the digest: request records stored by earlier
// versions hold it, and a retry must still match them.
func TestFingerprint(t *testing.T) {
	r := fingerprintRequest()
	const want = "abe1c7759c2ed1a19dcf9765ea7e660648c3bbdfe1c378d870c9d9cb80ccd030"
	got := hex.EncodeToString(r.Fingerprint())
	if again := hex.EncodeToString(r.Fingerprint()); again != got {
		t.Fatalf("two digests of one request: %s, %s", got, again)
	}
	if got != want {
		t.Errorf("Fingerprint() = %s, want %s", got, want)
	}
	other := fingerprintRequest()
	other.RequestID = "another"
	if !bytes.Equal(other.Fingerprint(), r.Fingerprint()) {
		t.Error("the request id changed the digest")
	}
	other.Labels["a"] = "x"
	if bytes.Equal(other.Fingerprint(), r.Fingerprint()) {
		t.Error("a label's value did not change the digest")
	}
}

func BenchmarkFingerprint(b *testing.B) {
	r := fingerprintRequest()
	for b.Loop() {
		r.Fingerprint()
	}
}

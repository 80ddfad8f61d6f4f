package ui

import (
	"encoding/json"
	stdhtml "html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestGraphPages(t *testing.T) {
	s, base, c, d := inspector(t, false)
	g := savepointv1.NewGraphCheckpointServiceClient(d.Conn)
	seedThread(t, g)
	code, body := fetch(t, c, base+"/graph")
	if code != 200 {
		t.Fatalf("graph: %d %s", code, text(body))
	}
	wantText(t, "threads", body, "thread-1 20", "Last page")
	code, body = fetch(t, c, base+"/graph/thread?id=thread-1")
	if code != 200 {
		t.Fatalf("thread: %d %s", code, text(body))
	}
	wantText(t, "thread", body, "Namespace (root)", "Checkpoint 2 · parent 1", "Checkpoint value no value stored", `"source": "loop"`,
		`messages 2 { "messages": [ "hi" ], "n": 3 } msgpack, 17 B`,
		`plan 1 { "steps": [ "draft", "send" ] } json`,
		"secret 1 pickle, 13 B: serde type pickle is not decoded (the inspector never unpickles)",
		"Task task-a (~__pregel_pull, agent)", `0 messages [ "tool call" ] json`,
		`(root) call_doubt send_email side effect 1 begun`, `none recorded in doubt: attempt 1 began without an outcome and the tool has side effects`,
		`(root) call_sent send_email side effect 1 succeeded`, `"sent #42" json, 10 B reuse: attempt 1 returned a result`)
	// A value over 16 KiB is cut, with a link to the whole of it.
	big := `"` + strings.Repeat("x", 40<<10) + `"`
	if _, err := g.PutCheckpoint(t.Context(), &savepointv1.PutCheckpointRequest{
		Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: "big/1", CheckpointNs: "sub", CheckpointId: "1", MetadataJson: "{}", ChannelVersions: map[string]string{"doc": "1"}},
		Blobs:      []*savepointv1.ChannelBlob{{Channel: "doc", Version: "1", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(big)}}},
	}); err != nil {
		t.Fatal(err)
	}
	_, body = fetch(t, c, base+"/graph/thread?id=big%2F1")
	wantText(t, "big value", body, "Namespace sub", "cut at 16 KiB Show all")
	all := regexp.MustCompile(`href="(/graph/value\?[^"]+)"`).FindStringSubmatch(body)
	if all == nil {
		t.Fatalf("no show-all link:\n%s", body)
	}
	code, body = fetch(t, c, base+stdhtml.UnescapeString(all[1]))
	if code != 200 || strings.TrimSpace(body) != big {
		t.Errorf("the whole value: %d, %d bytes, want %d", code, len(body), len(big))
	}
	if code, body := fetch(t, c, base+"/graph/thread?id=nothing"); code != 404 || !strings.Contains(body, "THREAD_NOT_FOUND") {
		t.Errorf("unknown thread: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/graph/copy", url.Values{"id": {"thread-1"}, "target": {"thread-2"}})
	if code != 200 || !strings.Contains(text(body), "Copied 2 checkpoints of thread thread-1 into thread thread-2.") {
		t.Errorf("copy: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/graph/prune", url.Values{"id": {"thread-2"}, "strategy": {"keep_latest"}})
	if code != 200 || !strings.Contains(text(body), "Pruned thread thread-2: 1 checkpoints deleted.") {
		t.Errorf("prune: %d %s", code, text(body))
	}
	code, body = submit(t, s, c, base, "/graph/delete", url.Values{"id": {"thread-2"}})
	if code != 200 || !strings.Contains(text(body), "Deleted thread thread-2") {
		t.Errorf("delete: %d %s", code, text(body))
	}
	if code, _ := fetch(t, c, base+"/graph/thread?id=thread-2"); code != 404 {
		t.Errorf("deleted thread: %d", code)
	}
}

func TestDecodeMsgpack(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{0x93, 0x01, 0xff, 0xcc, 0xc8}, `[1,-1,200]`},
		{[]byte{0x81, 0x01, 0xc3}, `{"1":true}`},
		{[]byte{0xc4, 0x02, 0x00, 0x01}, `"\u003c2 bytes\u003e"`},
		{[]byte{0xd4, 0x05, 0x07}, `{"ext":5,"value":7}`},
		{[]byte{0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, `1.5`},
		{[]byte{0xd9, 0x03, 'a', 'b', 'c'}, `"abc"`},
	} {
		v, err := decodeMsgpack(c.in)
		got := jsonText(v)
		if err != nil || got != c.want {
			t.Errorf("% x: %s %v, want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{{0x92, 0x01}, {0xc1}, {0xdb, 0xff, 0xff, 0xff, 0xff}, {0x01, 0x02}} {
		if _, err := decodeMsgpack(bad); err == nil {
			t.Errorf("% x decoded", bad)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

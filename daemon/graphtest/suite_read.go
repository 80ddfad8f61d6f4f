package graphtest

import (
	"bytes"
	"slices"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func testList(t *testing.T, e *Env) {
	mustPut(t, e, cp("t1", "", "01", "", `{"source":"input","step":0,"run_id":"r1"}`, nil))
	mustPut(t, e, cp("t1", "", "03", "01", `{"source":"loop","step":1,"nested":{"k":[1,2]}}`, nil))
	mustPut(t, e, cp("t1", "child:1", "02", "", `{"source":"loop","step":1.0}`, nil))
	mustPut(t, e, cp("t2", "", "04", "", `{"source":"input","step":2}`, nil))
	mustWrites(t, e, "t1", "", "03", "task", "", cw(0, "ch", `"v"`))

	for _, tc := range []struct {
		name string
		req  *savepointv1.ListCheckpointsRequest
		want []string
	}{
		{"thread, every namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1"}, []string{"03", "02", "01"}},
		{"root namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns("")}, []string{"03", "01"}},
		{"child namespace", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns("child:1")}, []string{"02"}},
		{"every thread", &savepointv1.ListCheckpointsRequest{}, []string{"04", "03", "02", "01"}},
		{"every thread, root", &savepointv1.ListCheckpointsRequest{CheckpointNs: ns("")}, []string{"04", "03", "01"}},
		{"before", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", BeforeCheckpointId: "03"}, []string{"02", "01"}},
		{"before is strict", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", BeforeCheckpointId: "01"}, nil},
		{"limit", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", Limit: 2}, []string{"03", "02"}},
		{"limit and before", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", Limit: 1, BeforeCheckpointId: "03"}, []string{"02"}},
		{"filter string", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"input"`}}, []string{"04", "01"}},
		{"filter number (1 equals 1.0)", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", MetadataFilter: map[string]string{"step": "1"}}, []string{"03", "02"}},
		{"filter two keys", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"input"`, "step": "2"}}, []string{"04"}},
		{"filter object", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"nested": `{"k": [1, 2]}`}}, []string{"03"}},
		{"filter missing key", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"nope": `null`}}, nil},
		{"filter no match", &savepointv1.ListCheckpointsRequest{ThreadId: "t1", MetadataFilter: map[string]string{"source": `"update"`}}, nil},
		{"filter is not a substring match", &savepointv1.ListCheckpointsRequest{MetadataFilter: map[string]string{"source": `"in"`}}, nil},
		{"unknown thread", &savepointv1.ListCheckpointsRequest{ThreadId: "t3"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { wantIDs(t, list(t, e, tc.req), tc.want...) })
	}
	// Listed tuples carry their writes and metadata as stored.
	ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t1", CheckpointNs: ns(""), Limit: 1})
	if got := writesOf(ts[0]); !slices.Equal(got, []string{`/task/0/ch="v"`}) || ts[0].Checkpoint.MetadataJson != `{"source":"loop","step":1,"nested":{"k":[1,2]}}` {
		t.Fatalf("listed tuple: writes %q metadata %s", got, ts[0].Checkpoint.MetadataJson)
	}
}

// testBudgetChunking stores values just under the request limit in
// several writes and blobs and reads them back through messages that each
// stay under the response budget.
func testBudgetChunking(t *testing.T, e *Env) {
	payload := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	// Each big value needs at least two messages, and one fits a request.
	size := min(e.Budget+e.Budget/3, 3<<20+1<<19)
	c := cp("t", "", "1", "", "{}", map[string]string{"a": "1", "b": "1", "e": "1"})
	mustPut(t, e, c, &savepointv1.ChannelBlob{Channel: "a", Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 2)}})
	c.Checkpoint = &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 1)}
	mustPut(t, e, c,
		&savepointv1.ChannelBlob{Channel: "b", Version: "1", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(10, 3)}},
		&savepointv1.ChannelBlob{Channel: "e", Version: "1", Value: &savepointv1.TypedValue{Type: "empty"}})
	mustWrites(t, e, "t", "", "1", "task", "", &savepointv1.ChannelWrite{Idx: 0, Channel: "w", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(size, 4)}})
	mustWrites(t, e, "t", "", "1", "task", "", &savepointv1.ChannelWrite{Idx: 1, Channel: "w", Value: &savepointv1.TypedValue{Type: "bytes", Data: payload(3, 5)}})
	check := func(tp *Tuple) {
		t.Helper()
		if !bytes.Equal(tp.Checkpoint.GetCheckpoint().GetData(), payload(size, 1)) {
			t.Fatal("checkpoint value not intact")
		}
		if len(tp.Blobs) != 3 || !bytes.Equal(tp.Blobs[0].GetValue().GetData(), payload(size, 2)) ||
			!bytes.Equal(tp.Blobs[1].GetValue().GetData(), payload(10, 3)) || tp.Blobs[2].GetValue().GetType() != "empty" || len(tp.Blobs[2].GetValue().GetData()) != 0 {
			t.Fatalf("blobs not intact: %d", len(tp.Blobs))
		}
		if len(tp.Writes) != 2 || !bytes.Equal(tp.Writes[0].GetValue().GetData(), payload(size, 4)) || !bytes.Equal(tp.Writes[1].GetValue().GetData(), payload(3, 5)) {
			t.Fatal("writes not intact")
		}
	}
	check(get(t, e, "t", "", "1"))
	mustPut(t, e, cp("t", "", "2", "", "{}", nil))
	ts := list(t, e, &savepointv1.ListCheckpointsRequest{ThreadId: "t"})
	wantIDs(t, ts, "2", "1")
	check(ts[1])
}

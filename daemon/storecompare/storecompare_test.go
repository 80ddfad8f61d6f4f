package storecompare_test

import (
	"context"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/storecompare"
)

func open(t *testing.T) *badgerstore.Store {
	t.Helper()
	s, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSession compares a store with itself (equal) and with stores that
// lack the session, a revision or a message (each named).
func TestSession(t *testing.T) {
	ctx := context.Background()
	save := func(s core.Store, rev uint64, text string) {
		t.Helper()
		if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: rev, Task: "task",
			AppendMessages: []core.Message{{Role: "user", ContentJSON: `"` + text + `"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := open(t), open(t), open(t)
	save(a, 0, "one")
	save(a, 1, "two")
	save(c, 0, "one")
	for _, tc := range []struct {
		name string
		b    core.Store
		want string // "" for equal
	}{
		{"itself", a, ""},
		{"no such session", b, `session "s": the latest checkpoint differs`},
		{"one revision behind", c, `session "s": the latest checkpoint differs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := storecompare.Session(ctx, a, tc.b, "s")
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Session = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestGraphRecords checks that the first differing record is named, and
// that a missing record on either side is.
func TestGraphRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		want, got []string
		err       string
	}{
		{"equal", []string{"head", "checkpoint a"}, []string{"head", "checkpoint a"}, ""},
		{"both empty", nil, nil, ""},
		{"one differs", []string{"head", "checkpoint a", "write x"}, []string{"head", "checkpoint b", "write x"},
			"the records differ from the 2-th on (3 and 3 records; source checkpoint a, target checkpoint b)"},
		{"target lost the last", []string{"head", "effect e"}, []string{"head"},
			"the records differ from the 2-th on (2 and 1 records; source effect e, target none)"},
		{"target holds one more", []string{"head"}, []string{"head", "blob b"},
			"the records differ from the 2-th on (1 and 2 records; source none, target blob b)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := storecompare.GraphRecords("t", tc.want, tc.got)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("GraphRecords = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestGraphRecordDigests checks that a digest covers a value's bytes: two
// dumps that differ only there describe the same checkpoint differently.
func TestGraphRecordDigests(t *testing.T) {
	dump := func(value string) *core.GraphThreadDump {
		c := core.GraphCheckpoint{ThreadID: "t", ID: "1", Value: core.GraphValue{Type: "json", Size: int64(len(value)), Data: []byte(value)}}
		return &core.GraphThreadDump{ThreadID: "t", Checkpoints: []core.GraphCheckpointDump{{GraphCheckpoint: c}}}
	}
	a, err := storecompare.GraphRecordDigests(dump("abc"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := storecompare.GraphRecordDigests(dump("abd"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(b) != 2 || a[0] != b[0] || a[1] == b[1] {
		t.Errorf("digests of dumps differing in a value's byte: %q and %q", a, b)
	}
	if err := storecompare.GraphRecords("t", a, b); err == nil {
		t.Error("GraphRecords found the dumps equal")
	}
	// A value whose bytes are not its declared size is an error, not a digest.
	short := dump("abc")
	short.Checkpoints[0].Value.Size = 4
	if _, err := storecompare.GraphRecordDigests(short); err == nil {
		t.Error("GraphRecordDigests of a value shorter than its size succeeded")
	}
}

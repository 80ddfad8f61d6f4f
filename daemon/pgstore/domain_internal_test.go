package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
)

// TestHeadSegments: a save takes the history's segments from the head, and
// from the latest revision when the head's are not that revision's (a head
// written by an older savepointd, which kept no segments, or one whose
// segments are stale), so the next revision's history is always whole.
func TestHeadSegments(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "head_segments"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	msg := func(c string) []core.Message { return []core.Message{{Role: "user", ContentJSON: `"` + c + `"`}} }

	for _, tc := range []struct {
		name  string
		alter func(h *sessionRec)
	}{
		{"kept", func(*sessionRec) {}},
		{"older savepointd", func(h *sessionRec) { h.Segments, h.SegmentsRevision = nil, 0 }},
		{"stale", func(h *sessionRec) {
			h.Segments = []segment{{FirstSeq: 0, Count: 1}}
			h.SegmentsRevision = h.Revision - 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := "s-" + tc.name
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, AppendMessages: msg("a")}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: 1, AppendMessages: msg("b")}); err != nil {
				t.Fatal(err)
			}
			if err := s.write(ctx, sid, func(ctx context.Context, q *query) error {
				h, err := q.mustHead(ctx, sid, true)
				if err != nil {
					return err
				}
				if h.SegmentsRevision != 2 || segmentsCount(h.Segments) != 2 {
					t.Errorf("head after two saves: segments %v of revision %d", h.Segments, h.SegmentsRevision)
				}
				tc.alter(h)
				return q.putHead(ctx, sid, h, false)
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: sid, ExpectedRevision: 2, AppendMessages: msg("c")}); err != nil {
				t.Fatal(err)
			}
			ms, err := s.Messages(ctx, sid, 0, 0, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, m := range ms {
				got += m.ContentJSON
			}
			if got != `"a""b""c"` {
				t.Errorf("history of revision 3: %s, want \"a\"\"b\"\"c\"", got)
			}
		})
	}
}

// TestHeadSegmentsMissingRevision: a head without its segments whose latest
// revision is gone is CHECKPOINT_CORRUPT for the next save, as before.
func TestHeadSegmentsMissingRevision(t *testing.T) {
	srv := pgtest.Shared(t)
	s, err := Open(context.Background(), srv.URL("postgres"), Options{Schema: "head_segments_missing"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", AppendMessages: []core.Message{{Role: "user", ContentJSON: `"a"`}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.write(ctx, "s", func(ctx context.Context, q *query) error {
		h, err := q.mustHead(ctx, "s", true)
		if err != nil {
			return err
		}
		h.Segments, h.SegmentsRevision = nil, 0
		if err := q.putHead(ctx, "s", h, false); err != nil {
			return err
		}
		_, err = q.tx.Exec(ctx, "DELETE FROM "+s.table("revisions")+" WHERE session_id = $1", []byte("s"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "s", ExpectedRevision: 1})
	if !errors.Is(err, core.ErrCheckpointCorrupt) {
		t.Fatalf("save over a head whose revision is gone: %v, want CHECKPOINT_CORRUPT", err)
	}
}

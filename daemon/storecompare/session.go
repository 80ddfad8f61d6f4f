// Package storecompare compares what two stores hold, through core.Store
// and core.GraphStore as the daemon reads them and record by record with
// digests of every field and value byte, so that a copy (savepointd
// migrate-store) is proven equal before it is served. Each function returns
// nil when the two agree, and otherwise an error naming the session or
// thread and the first difference.
package storecompare

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Session reads one live session from both stores through core.Store and
// returns how they differ, nil when they do not: every kept revision with
// all its messages, the pending tool uses, the ledger and the head's
// counters.
func Session(ctx context.Context, a, b core.Store, sid string) error {
	latest, err := a.Checkpoint(ctx, sid, 0)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if got, err := b.Checkpoint(ctx, sid, 0); err != nil || !sameCheckpoint(latest, got) {
		return fmt.Errorf("session %q: the latest checkpoint differs (%v)", sid, err)
	}
	for rev := uint64(1); rev <= latest.Revision; rev++ {
		want, err := a.Checkpoint(ctx, sid, rev)
		if errors.Is(err, core.ErrRevisionNotFound) {
			if _, err := b.Checkpoint(ctx, sid, rev); !errors.Is(err, core.ErrRevisionNotFound) {
				return fmt.Errorf("session %q revision %d: not kept in the source, but read in the target (%v)", sid, rev, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("session %q revision %d: source: %w", sid, rev, err)
		}
		if got, err := b.Checkpoint(ctx, sid, rev); err != nil || !sameCheckpoint(want, got) {
			return fmt.Errorf("session %q revision %d: the checkpoint differs (%v)", sid, rev, err)
		}
		wm, err := allMessages(ctx, a, sid, rev)
		if err != nil {
			return fmt.Errorf("session %q revision %d: source: %w", sid, rev, err)
		}
		gm, err := allMessages(ctx, b, sid, rev)
		if err != nil || !slices.Equal(wm, gm) {
			return fmt.Errorf("session %q revision %d: the messages differ (%d and %d; %v)", sid, rev, len(wm), len(gm), err)
		}
	}
	wr, wc, err := a.PendingToolUses(ctx, sid)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if gr, gc, err := b.PendingToolUses(ctx, sid); err != nil || gr != wr || !reflect.DeepEqual(normalizePending(wc), normalizePending(gc)) {
		return fmt.Errorf("session %q: the pending tool uses differ (%v)", sid, err)
	}
	we, err := allEffects(ctx, a, sid)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	if ge, err := allEffects(ctx, b, sid); err != nil || !reflect.DeepEqual(we, ge) {
		return fmt.Errorf("session %q: the ledger differs (%d and %d entries; %v)", sid, len(we), len(ge), err)
	}
	return sameCounters(ctx, a, b, sid)
}

// sameCounters compares the counters the session's head keeps beside its
// ledger, which ListSessions and WatchSessions report.
func sameCounters(ctx context.Context, a, b core.Store, sid string) error {
	sa, err := a.Summary(ctx, sid)
	if err != nil {
		return fmt.Errorf("session %q: source: %w", sid, err)
	}
	sb, err := b.Summary(ctx, sid)
	if err != nil {
		return fmt.Errorf("session %q: target: %w", sid, err)
	}
	if sa.AwaitingApproval != sb.AwaitingApproval || sa.ResolvedByVerify != sb.ResolvedByVerify || sa.ResolvedByPerson != sb.ResolvedByPerson {
		return fmt.Errorf("session %q: the head's counters differ (awaiting approval %d and %d, resolved by a verify hook %d and %d, by a person %d and %d)",
			sid, sa.AwaitingApproval, sb.AwaitingApproval, sa.ResolvedByVerify, sb.ResolvedByVerify, sa.ResolvedByPerson, sb.ResolvedByPerson)
	}
	return nil
}

// sameCheckpoint compares two checkpoints, times to the nanosecond.
func sameCheckpoint(a, b core.Checkpoint) bool {
	eq := a.SaveTime.Equal(b.SaveTime) && a.CompleteTime.Equal(b.CompleteTime) && a.CreateTime.Equal(b.CreateTime) &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.PendingToolUses, b.PendingToolUses)
	a.SaveTime, b.SaveTime, a.CompleteTime, b.CompleteTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	a.CreateTime, b.CreateTime = time.Time{}, time.Time{}
	a.Labels, b.Labels, a.PendingToolUses, b.PendingToolUses = nil, nil, nil, nil
	return eq && reflect.DeepEqual(a, b)
}

func allMessages(ctx context.Context, s core.Store, sid string, rev uint64) ([]core.Message, error) {
	var out []core.Message
	for {
		page, err := s.Messages(ctx, sid, rev, uint64(len(out)), 4<<20, 0)
		if err != nil || len(page) == 0 {
			return out, err
		}
		out = append(out, page...)
	}
}

func allEffects(ctx context.Context, s core.Store, sid string) ([]core.LedgerEntry, error) {
	var out []core.LedgerEntry
	after := ""
	for {
		page, err := s.Effects(ctx, sid, after, 500)
		if err != nil || len(page) == 0 {
			return normalizeTimes(out), err
		}
		out = append(out, page...)
		after = page[len(page)-1].ToolUseID
	}
}

// normalizeTimes puts every time of the entries in UTC, so that
// reflect.DeepEqual compares instants, not locations.
func normalizeTimes(es []core.LedgerEntry) []core.LedgerEntry {
	for i := range es {
		es[i].BeginTime = es[i].BeginTime.UTC()
		if e := es[i].Effect; e != nil {
			c := *e
			c.RecordTime = c.RecordTime.UTC()
			es[i].Effect = &c
		}
	}
	return es
}

// normalizePending puts the pending tool uses' effects' times in UTC.
func normalizePending(cs []core.PendingToolUse) []core.PendingToolUse {
	for i := range cs {
		if e := cs[i].Effect; e != nil {
			c := *e
			c.RecordTime = c.RecordTime.UTC()
			cs[i].Effect = &c
		}
	}
	return cs
}

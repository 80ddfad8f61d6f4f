package badgerstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/daemon/core"
	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// BeginThreadEffect implements core.GraphStore. It holds the thread's lock
// shared and the call's stripe exclusively, as PutWrites does for a task,
// so that the entry it reads is the one it rewrites.
func (s *Store) BeginThreadEffect(ctx context.Context, b *core.ThreadEffectBegin) (core.ThreadEffectBeginResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	defer s.graphShare(b.ThreadID, "\x00effect\x00"+b.NS+"\x00"+b.ToolUseID)()
	var fp []byte
	if b.RequestID != "" {
		fp = b.Fingerprint()
	}
	var res core.ThreadEffectBeginResult
	err := s.update(func(t *tx) error {
		res = core.ThreadEffectBeginResult{}
		key := graphEffectKey(b.ThreadID, b.NS, b.ToolUseID)
		cur, err := getThreadEffect(t, b.ThreadID, b.NS, b.ToolUseID, key)
		if err != nil {
			return err
		}
		if b.RequestID != "" {
			var r storagev1.GraphRequestRecord
			found, err := graphGet(t, b.ThreadID, graphRequestKey(b.ThreadID, b.RequestID), &r)
			if err != nil {
				return err
			}
			already, err := core.GraphReplay(b.ThreadID, b.RequestID, r.Fingerprint, found, fp)
			if err != nil {
				return err
			}
			// A caught duplicate is answered afresh below, writing nothing.
			if already && (cur == nil || cur.DuplicateOf == "") {
				res = core.ReplayThreadEffectBegin(cur, r.EffectAttempt)
				return nil
			}
		}
		h, err := threadHead(t, b.ThreadID)
		if err != nil {
			return err
		}
		if cur == nil && b.CheckpointID != "" && h != nil && core.LateWrite(h.Deleted, h.DeletedThrough, b.CheckpointID) {
			_, exists, err := t.get(graphCheckpointKey(b.ThreadID, b.NS, b.CheckpointID))
			if err != nil {
				return err
			}
			if !exists {
				res = core.ThreadEffectBeginResult{Decision: core.DecisionRun, DroppedLate: true}
				return nil
			}
		}
		next, r, err := core.ApplyThreadEffectBeginGuarded(guardReader{t}, cur, b, s.now())
		if err != nil || next == nil {
			res = r
			return err
		}
		res = r
		if err := put(t, key, threadEffectRecord(next)); err != nil {
			return err
		}
		if err := s.touchThread(t, b.ThreadID, h); err != nil {
			return err
		}
		if b.RequestID == "" || r.Decision != core.DecisionRun {
			// A begin that started no attempt is answered anew on a retry.
			return nil
		}
		return put(t, graphRequestKey(b.ThreadID, b.RequestID), &storagev1.GraphRequestRecord{Fingerprint: fp, EffectAttempt: next.Attempts})
	})
	if err != nil {
		return core.ThreadEffectBeginResult{}, err
	}
	return res, nil
}

// guardReader is core.ThreadGuardReader over a transaction.
type guardReader struct{ t *tx }

func (g guardReader) EachNamespaceEffect(thread, ns string, fn func(*core.ThreadEffect) (bool, error)) error {
	prefix := graphScope(kindGraphEffect, thread, ns)
	it := g.t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(prefix); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		e, err := decodeThreadEffect(it.Item(), thread, key)
		if err != nil {
			return err
		}
		if more, err := fn(&e); err != nil || !more {
			return err
		}
	}
	return nil
}

func (g guardReader) NewestCheckpointExcept(thread, ns, except string) (string, error) {
	prefix := graphScope(kindGraphCheckpoint, thread, ns)
	it := g.t.r.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	for it.Seek(append(slices.Clone(prefix), 0xff)); it.Valid(); it.Next() {
		if id := string(it.Item().Key()[len(prefix):]); id != except {
			return id, nil
		}
	}
	return "", nil
}

// updateThreadEffect applies c as core.ThreadEffectChange asks, under the
// locks BeginThreadEffect takes, in one commit.
func updateThreadEffect[R any](ctx context.Context, s *Store, c core.ThreadEffectChange[R]) (R, error) {
	var res, zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	defer s.graphShare(c.ThreadID, "\x00effect\x00"+c.NS+"\x00"+c.ToolUseID)()
	err := s.update(func(t *tx) error {
		res = zero
		key := graphEffectKey(c.ThreadID, c.NS, c.ToolUseID)
		cur, err := getThreadEffect(t, c.ThreadID, c.NS, c.ToolUseID, key)
		if err != nil {
			return err
		}
		if already, err := checkRequest(t, c.ThreadID, c.RequestID, c.Fingerprint); err != nil || already {
			if cur != nil {
				res = c.Replay(*cur)
			}
			return err
		}
		h, err := threadHead(t, c.ThreadID)
		if err != nil {
			return err
		}
		if c.Late != nil && cur == nil && h != nil && h.Deleted {
			res = *c.Late
			return nil
		}
		if c.HiddenAbsent && hidden(h) {
			cur = nil // being deleted or copied over: its ledger is going
		}
		next, r, err := c.Apply(cur, s.now())
		res = r
		if err != nil || next == nil {
			return err
		}
		if err := put(t, key, threadEffectRecord(next)); err != nil {
			return err
		}
		if err := s.touchThread(t, c.ThreadID, h); err != nil {
			return err
		}
		return putRequest(t, c.ThreadID, c.RequestID, c.Fingerprint)
	})
	if err != nil {
		return zero, err
	}
	return res, nil
}

// RecordThreadEffect implements core.GraphStore (updateThreadEffect).
func (s *Store) RecordThreadEffect(ctx context.Context, r *core.ThreadEffectRecord) (core.ThreadEffectRecordResult, error) {
	return updateThreadEffect(ctx, s, r.Change())
}

// ResolveThreadEffect implements core.GraphStore (updateThreadEffect).
func (s *Store) ResolveThreadEffect(ctx context.Context, r *core.ThreadEffectResolve) (core.ThreadEffectResolveResult, error) {
	return updateThreadEffect(ctx, s, r.Change())
}

// ApproveThreadEffect implements core.GraphStore (updateThreadEffect).
func (s *Store) ApproveThreadEffect(ctx context.Context, r *core.ThreadEffectApprove) (core.ThreadEffectApproveResult, error) {
	return updateThreadEffect(ctx, s, r.Change())
}

// ListThreadEffects implements core.GraphStore, reading the entries' values
// one at a time. A thread a delete or copy hides has no entries.
func (s *Store) ListThreadEffects(ctx context.Context, thread string, after core.ThreadEffectKey, limit, maxOutputBytes int) ([]core.ThreadEffect, error) {
	var out []core.ThreadEffect
	err := s.view(ctx, func(t *tx) error {
		out = out[:0]
		budget := core.OutputBudget{Bytes: maxOutputBytes}
		h, err := threadHead(t, thread)
		if err != nil || hidden(h) {
			return err
		}
		prefix := graphKey(kindGraphEffect, thread)
		it := t.r.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		seek := prefix
		if after != (core.ThreadEffectKey{}) {
			seek = graphEffectKey(thread, after.NS, after.ToolUseID)
		}
		for it.Seek(seek); it.Valid() && len(out) < limit; it.Next() {
			key := it.Item().KeyCopy(nil)
			e, err := decodeThreadEffect(it.Item(), thread, key)
			if err != nil {
				return err
			}
			if (core.ThreadEffectKey{NS: e.NS, ToolUseID: e.ToolUseID}) == after {
				continue
			}
			budget.Trim(&e)
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

func decodeThreadEffect(item *badger.Item, thread string, key []byte) (core.ThreadEffect, error) {
	_, parts, rest, ok := splitGraphKey(key, 2)
	if !ok || len(parts) != 2 || rest != nil {
		return core.ThreadEffect{}, graphCorrupt(thread, fmt.Errorf("malformed graph effect key %x", key))
	}
	var r storagev1.GraphEffectRecord
	if err := item.Value(func(v []byte) error { return decodeValue(key, v, &r) }); err != nil {
		return core.ThreadEffect{}, graphCorrupt(thread, err)
	}
	return threadEffect(thread, parts[0], parts[1], &r), nil
}

// getThreadEffect reads one entry; nil when the call has none.
func getThreadEffect(t *tx, thread, ns, toolUseID string, key []byte) (*core.ThreadEffect, error) {
	var r storagev1.GraphEffectRecord
	found, err := graphGet(t, thread, key, &r)
	if err != nil || !found {
		return nil, err
	}
	e := threadEffect(thread, ns, toolUseID, &r)
	return &e, nil
}

func threadEffectRecord(e *core.ThreadEffect) *storagev1.GraphEffectRecord {
	r := &storagev1.GraphEffectRecord{
		Name: e.Name, InputJson: e.InputJSON, InputDigest: e.InputDigest, EffectClass: int32(e.Class),
		IdempotencyKey: e.IdempotencyKey, Attempts: e.Attempts, State: int32(e.State),
		OutputDigest: e.OutputDigest, BeginTime: timestamppb.New(e.BeginTime), CheckpointId: e.CheckpointID,
		DuplicateOf: e.DuplicateOf, RunId: e.RunID,
	}
	if e.State.Recorded() {
		r.Output = inlineValue(e.Output)
		r.RecordTime = timestamppb.New(e.RecordTime)
	}
	r.Resolution = resolutionRecord(e.Resolution)
	r.Approval = approvalRecord(e.Approval)
	r.EarlierResolutions, r.EarlierApprovals = earlierRecords(e.EarlierResolutions, e.EarlierApprovals)
	return r
}

func threadEffect(thread, ns, toolUseID string, r *storagev1.GraphEffectRecord) core.ThreadEffect {
	e := core.ThreadEffect{
		ThreadID: thread, NS: ns, ToolUseID: toolUseID, Name: r.Name, InputJSON: r.InputJson, InputDigest: r.InputDigest,
		Class: core.EffectClass(r.EffectClass), IdempotencyKey: r.IdempotencyKey, Attempts: r.Attempts,
		State: core.ThreadEffectState(r.State), OutputDigest: r.OutputDigest, BeginTime: timeOf(r.BeginTime),
		RecordTime: timeOf(r.RecordTime), CheckpointID: r.CheckpointId, Resolution: resolutionFromRecord(r.Resolution),
		DuplicateOf: r.DuplicateOf, RunID: r.RunId,
		Approval: approvalFromRecord(r.Approval),
	}
	e.EarlierResolutions, e.EarlierApprovals = earlierFromRecords(r.EarlierResolutions, r.EarlierApprovals)
	if r.Output != nil {
		e.Output = core.GraphValue{Type: r.Output.Type, Size: int64(len(r.Output.Data)), Data: r.Output.Data}
	}
	return e
}

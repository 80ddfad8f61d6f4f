package storecompare

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// GraphReads compares what a and b answer for the thread of d through
// core.GraphStore, returning nil when they answer alike: the listing of
// every checkpoint, the latest checkpoint of each namespace, and the
// listing of the thread's ledger. Only d's ThreadID and checkpoints' NS
// are read.
func GraphReads(ctx context.Context, a, b core.GraphStore, d *core.GraphThreadDump) error {
	list := func(s core.GraphStore) ([]string, error) {
		var out []string
		err := s.ListCheckpoints(ctx, core.GraphListQuery{ThreadID: d.ThreadID}, func(tp *core.GraphTuple) error {
			sum, err := tupleDigest(tp)
			out = append(out, sum)
			return err
		})
		return out, err
	}
	wl, err := list(a)
	if err != nil {
		return fmt.Errorf("graph thread %q: source: %w", d.ThreadID, err)
	}
	gl, err := list(b)
	if err != nil {
		return fmt.Errorf("graph thread %q: %w", d.ThreadID, err)
	}
	if i := firstDifference(wl, gl); i >= 0 {
		return fmt.Errorf("graph thread %q: ListCheckpoints differs from the %d-th tuple on (%d and %d tuples)", d.ThreadID, i+1, len(wl), len(gl))
	}
	var namespaces []string
	for _, c := range d.Checkpoints {
		if !slices.Contains(namespaces, c.NS) {
			namespaces = append(namespaces, c.NS)
		}
	}
	for _, ns := range namespaces {
		get := func(s core.GraphStore) (string, error) {
			var sum string
			found, err := s.GetCheckpoint(ctx, d.ThreadID, ns, "", func(tp *core.GraphTuple) error {
				var err error
				sum, err = tupleDigest(tp)
				return err
			})
			if err == nil && !found {
				sum = "not found"
			}
			return sum, err
		}
		want, err := get(a)
		if err != nil {
			return fmt.Errorf("graph thread %q namespace %q: source: %w", d.ThreadID, ns, err)
		}
		if got, err := get(b); err != nil || got != want {
			return fmt.Errorf("graph thread %q namespace %q: the latest checkpoint differs (%v)", d.ThreadID, ns, err)
		}
	}
	wl, err = listedEffects(ctx, a, d.ThreadID)
	if err != nil {
		return fmt.Errorf("graph thread %q: source: %w", d.ThreadID, err)
	}
	gl, err = listedEffects(ctx, b, d.ThreadID)
	if err != nil {
		return fmt.Errorf("graph thread %q: %w", d.ThreadID, err)
	}
	if i := firstDifference(wl, gl); i >= 0 {
		return fmt.Errorf("graph thread %q: ListThreadEffects differs from the %d-th entry on (%d and %d entries; %s)", d.ThreadID, i+1, len(wl), len(gl), describeAt(wl, gl, i))
	}
	return nil
}

// listedEffects describes each entry ListThreadEffects gives of the
// thread's ledger, as GraphRecordDigests does.
func listedEffects(ctx context.Context, s core.GraphStore, thread string) ([]string, error) {
	const page = 500
	var out []string
	var after core.ThreadEffectKey
	for {
		es, err := s.ListThreadEffects(ctx, thread, after, page, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			sum, err := effectDigest(e)
			if err != nil {
				return nil, err
			}
			out = append(out, sum)
			after = core.ThreadEffectKey{NS: e.NS, ToolUseID: e.ToolUseID}
		}
		if len(es) < page {
			return out, nil
		}
	}
}

// effectDigest describes a ledger entry with a digest of all its fields
// and its output's bytes.
func effectDigest(e core.ThreadEffect) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q", []any{e.NS, e.ToolUseID, e.Name, e.InputJSON, fmt.Sprintf("%x", e.InputDigest), e.Class.String(), e.IdempotencyKey,
		fmt.Sprint(e.Attempts), fmt.Sprint(int(e.State)), fmt.Sprintf("%x", e.OutputDigest), instant(e.BeginTime), instant(e.RecordTime), e.CheckpointID})
	if err := digestValue(h, e.Output); err != nil {
		return "", err
	}
	return fmt.Sprintf("effect %q/%q %x", e.NS, e.ToolUseID, h.Sum(nil)), nil
}

// GraphRecordDigests describes each record of d, in d's order, with a
// digest of all its fields and its value's bytes; it reads every value.
// Two dumps hold the same records when GraphRecords finds their digests
// equal.
func GraphRecordDigests(d *core.GraphThreadDump) ([]string, error) {
	out := []string{fmt.Sprintf("head deleted=%v through=%q updated=%s", d.Deleted, d.DeletedThrough, instant(d.UpdateTime))}
	add := func(what string, v *core.GraphValue, fields ...any) error {
		h := sha256.New()
		fmt.Fprintf(h, "%q", fields)
		if v != nil {
			if err := digestValue(h, *v); err != nil {
				return err
			}
		}
		out = append(out, fmt.Sprintf("%s %x", what, h.Sum(nil)))
		return nil
	}
	for _, c := range d.Checkpoints {
		if err := add(fmt.Sprintf("checkpoint %q/%q", c.NS, c.ID), &c.Value, c.ThreadID, c.NS, c.ID, c.ParentID, c.MetadataJSON,
			fmt.Sprintf("%q", c.ChannelVersions), instant(c.PutTime)); err != nil {
			return nil, err
		}
	}
	for _, b := range d.Blobs {
		if err := add(fmt.Sprintf("blob %q/%q/%q", b.NS, b.Channel, b.Version), &b.Value, b.NS, b.Channel, b.Version); err != nil {
			return nil, err
		}
	}
	for _, w := range d.Writes {
		if err := add(fmt.Sprintf("write %q/%q/%q/%d", w.NS, w.CheckpointID, w.TaskID, w.Idx), &w.Value, w.NS, w.CheckpointID, w.TaskID,
			w.TaskPath, fmt.Sprint(w.Idx), w.Channel); err != nil {
			return nil, err
		}
	}
	for _, r := range d.Requests {
		if err := add(fmt.Sprintf("request %q", r.RequestID), nil, r.RequestID, fmt.Sprintf("%x", r.Fingerprint), fmt.Sprint(r.EffectAttempt)); err != nil {
			return nil, err
		}
	}
	for _, e := range d.Effects {
		sum, err := effectDigest(e)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// tupleDigest is a digest of every field of a checkpoint tuple and of all
// its values' bytes.
func tupleDigest(tp *core.GraphTuple) (string, error) {
	h := sha256.New()
	c := tp.Checkpoint
	fmt.Fprintf(h, "%q", []any{c.ThreadID, c.NS, c.ID, c.ParentID, c.MetadataJSON, fmt.Sprintf("%q", c.ChannelVersions)})
	if err := digestValue(h, c.Value); err != nil {
		return "", err
	}
	for _, b := range tp.Blobs {
		fmt.Fprintf(h, "%q", []any{"blob", b.Channel, b.Version})
		if err := digestValue(h, b.Value); err != nil {
			return "", err
		}
	}
	for _, w := range tp.Writes {
		fmt.Fprintf(h, "%q", []any{"write", w.TaskID, w.TaskPath, fmt.Sprint(w.Idx), w.Channel})
		if err := digestValue(h, w.Value); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s/%s %x", c.NS, c.ID, h.Sum(nil)), nil
}

// digestValue adds v's type, length and bytes to h; it fails when v's
// bytes are not its declared size.
func digestValue(h hash.Hash, v core.GraphValue) error {
	vh := sha256.New()
	var n int64
	if err := v.Each(func(p []byte) error {
		vh.Write(p)
		n += int64(len(p))
		return nil
	}); err != nil {
		return err
	}
	if n != v.Size {
		return fmt.Errorf("a value of %d bytes read as %d bytes", v.Size, n)
	}
	fmt.Fprintf(h, "%q %d %x", v.Type, n, vh.Sum(nil))
	return nil
}

// instant writes t as nanoseconds since the epoch, the zero time as 0.
func instant(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return fmt.Sprint(t.UnixNano())
}

// firstDifference is the first index where a and b differ, -1 when equal.
func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// describeAt names the i-th entries of a (the source) and b (the target).
func describeAt(a, b []string, i int) string {
	at := func(s []string) string {
		if i < len(s) {
			return s[i]
		}
		return "none"
	}
	return fmt.Sprintf("source %s, target %s", at(a), at(b))
}

// GraphRecords compares the record digests (GraphRecordDigests) of one
// thread read from the source (want) and the target (got), returning nil
// when equal and otherwise which record first differs.
func GraphRecords(thread string, want, got []string) error {
	if i := firstDifference(want, got); i >= 0 {
		return fmt.Errorf("graph thread %q: the records differ from the %d-th on (%d and %d records; %s)", thread, i+1, len(want), len(got), describeAt(want, got, i))
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// writeFlags are the ownership flags of every command that writes: exactly
// one of --epoch N and --take-over.
type writeFlags struct {
	epoch    uint64
	epochSet bool
	takeOver bool
}

func (w *writeFlags) register(fs *flag.FlagSet) {
	fs.Func("epoch", "the session's current epoch `N`, as the last Resume or save returned it", func(s string) error {
		_, err := fmt.Sscan(s, &w.epoch)
		w.epochSet = err == nil
		if err != nil {
			return fmt.Errorf("want an epoch number, not %q", s)
		}
		return nil
	})
	fs.BoolVar(&w.takeOver, "take-over", false, "call Resume first and use its new epoch; this fences the agent running the session")
}

func (w *writeFlags) check() error {
	switch {
	case w.epochSet && w.takeOver:
		return usagef("give --epoch or --take-over, not both")
	case !w.epochSet && !w.takeOver:
		return usagef("a write needs --epoch N (the session's current epoch) or --take-over (Resume first, fencing its agent)")
	}
	return nil
}

// ownEpoch returns the epoch to write session id under: the one given, or
// a new one from Resume with --take-over.
func (w *writeFlags) ownEpoch(ctx context.Context, raw savepointv1.SavepointServiceClient, id string) (uint64, error) {
	if !w.takeOver {
		return w.epoch, nil
	}
	r, err := raw.Resume(ctx, &savepointv1.ResumeRequest{SessionId: id})
	// A session that cannot be decoded cannot be resumed; its error carries
	// the epoch, which is all a delete of it needs.
	if e, ok := errors.AsType[*client.Error](err); ok && errors.Is(err, client.ErrCheckpointCorrupt) && e.CurrentEpoch > 0 {
		return e.CurrentEpoch, nil
	}
	if err != nil {
		return 0, err
	}
	return r.GetEpoch(), nil
}

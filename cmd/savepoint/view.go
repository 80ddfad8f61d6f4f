package main

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// sessionView is what show and export print: one revision with its whole
// history and, when it is the latest, what Reconcile decides for it.
type sessionView struct {
	checkpoint *savepointv1.Checkpoint
	// latest is the session's latest revision when the view was read.
	latest uint64
	// reconcile is nil unless checkpoint is the latest revision: Reconcile
	// decides only the latest revision's pending tool uses.
	reconcile *savepointv1.ReconcileResponse
	// counts is set by show for the latest revision: its calls in doubt and
	// the ledger's calls resolved.
	counts *cli.LedgerCounts
	// ledger is set with counts: the session's ledger entries by tool use
	// id, for their earlier resolutions and approvals.
	ledger map[string]*savepointv1.LedgerEntry
}

// countLedger sets v.counts from Reconcile's answer and the session's
// ledger; it does nothing for an older revision.
func (v *sessionView) countLedger(ctx context.Context, c *client.Client) error {
	if v.reconcile == nil {
		return nil
	}
	var entries []*savepointv1.LedgerEntry
	for token, first := "", true; first || token != ""; first = false {
		page, err := c.Raw().ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: v.checkpoint.GetSessionId(), PageSize: 1000, PageToken: token})
		if err != nil {
			return err
		}
		entries = append(entries, page.GetEntries()...)
		token = page.GetNextPageToken()
	}
	n := cli.CountSessionLedger(entries, v.reconcile)
	v.counts = &n
	v.ledger = map[string]*savepointv1.LedgerEntry{}
	for _, l := range entries {
		v.ledger[l.GetToolUseId()] = l
	}
	return nil
}

// loadView reads revision (0: the latest) of session id and reconciles it.
// A session saved between the two reads is read again, a few times.
func loadView(ctx context.Context, c *client.Client, id string, revision uint64) (*sessionView, error) {
	for attempt := 0; ; attempt++ {
		cp, err := c.GetSession(ctx, id, revision)
		if err != nil {
			return nil, err
		}
		rec, err := c.ReconcileView(ctx, id)
		if err != nil {
			return nil, err
		}
		v := &sessionView{checkpoint: cp, latest: rec.GetRevision()}
		if rec.GetRevision() == cp.GetRevision() {
			v.reconcile = rec
			return v, nil
		}
		if revision != 0 || attempt == 2 {
			return v, nil
		}
	}
}

// formatTime prints a timestamp in UTC to the second; "-" when unset.
func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

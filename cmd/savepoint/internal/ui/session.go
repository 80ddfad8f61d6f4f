package ui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// maxTimeline is how many of the latest revisions the timeline reads.
const maxTimeline = 50

// maxMessages is how many messages the Session page shows unless "show all"
// is asked for.
const maxMessages = 200

type revisionEntry struct {
	Revision     uint64
	Turn         uint32
	Point        string // "Point A", "Point B" or "save"
	MessageCount uint64
	Pending      int
	Rewritten    bool // the history shrank: a rewind or a compaction
	Messages     []messageView
}

type turnGroup struct {
	Turn      uint32
	Revisions []revisionEntry
}

type pendingView struct {
	ToolUse             *savepointv1.ToolUse
	InputJSON           string
	Decision, Reason    string
	Class               string // the decision as a CSS class
	ToolResultText, Key string
	Begun               bool
	InDoubt             bool            // Reconcile answers IN_DOUBT: a person may resolve it
	Resolution          *resolutionView // how it was settled when it was in doubt
	Approval            *approvalView   // its approval record, for a call that requires approval
	Duplicate           *duplicateView  // set when the duplicate-intent guard caught it: it was not run
}

type ledgerRow struct {
	E                  *savepointv1.LedgerEntry
	Class, Begun, Rec  string
	Size               int
	Digest             string
	IsError, Late, Has bool
	Output             *outputView     // the recorded output; nil when none is
	Resolution         *resolutionView // how the call was settled when it was in doubt
	Approval           *approvalView   // its approval record, for a call that requires approval
	Duplicate          *duplicateView  // set when the duplicate-intent guard caught the call: it was not run
	Earlier            earlierView     // the resolutions and approval decisions before the current ones
}

type sessionData struct {
	ID        string
	CP        *savepointv1.Checkpoint
	Latest    uint64
	IsLatest  bool
	State     string
	Bytes     int
	Labels    string
	StateJSON string
	Turns     []turnGroup
	Kept      []uint64 // the kept revisions the timeline found, newest first
	Shown     int      // messages shown
	All       bool
	Pending   []pendingView
	Ledger    []ledgerRow
	LedgerCut bool
	Counts    *cli.LedgerCounts // the latest revision's calls in doubt and the ledger's resolved; nil for an older one
}

// decisionReason names Reconcile's decision and the rule that made it, as
// daemon/core/reconcile.go decides.
func decisionReason(r *savepointv1.Resolution) (string, string) {
	switch r.GetDecision() {
	case savepointv1.Decision_DECISION_REUSE:
		return "reuse", "its effect is recorded: the recorded output becomes the tool result, and the tool does not run again"
	case savepointv1.Decision_DECISION_RUN:
		switch r.GetToolUse().GetEffectClass() {
		case savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY:
			return "re-run", "read-only: running it again is safe"
		case savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT:
			return "re-run", "idempotent: it runs again with the same idempotency key"
		}
		return "re-run", "begin-tracked and never begun: it never ran"
	case savepointv1.Decision_DECISION_IN_DOUBT:
		if r.GetBegun() {
			return "in doubt", "side-effecting, begun and never recorded: it may have taken effect; a person must check before it is retried"
		}
		return "in doubt", "side-effecting and not begin-tracked, with no recorded effect: it may have run; a person must check before it is retried"
	}
	return r.GetDecision().String(), ""
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// ledger reads up to 1000 entries of a session's ledger.
func (s *Server) ledger(ctx context.Context, id string) ([]ledgerRow, bool, error) {
	var rows []ledgerRow
	token := ""
	for {
		resp, err := s.opts.Client.Raw().ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: id, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, false, err
		}
		for _, e := range resp.GetEntries() {
			row := ledgerRow{E: e, Class: effectClassText(e.GetEffectClass()), Begun: "-", Rec: "-"}
			if e.GetBegun() {
				row.Begun = formatTime(e.GetBeginTime())
			}
			if ef := e.GetEffect(); ef != nil {
				row.Has, row.Rec, row.Size, row.Digest, row.IsError, row.Late = true, formatTime(ef.GetRecordTime()), len(ef.GetOutput()), digest(ef.GetOutput()), ef.GetIsError(), ef.GetLate()
				row.Output = newOutput(ef.GetOutput(), sessionOutputURL(id, e.GetToolUseId()))
			}
			row.Resolution = newResolution(e.GetResolution())
			row.Approval = newApproval(e.GetApproval())
			row.Earlier = newEarlier(e.GetResolutions(), e.GetApprovals(), e.GetApproval())
			rows = append(rows, row)
		}
		token = resp.GetNextPageToken()
		if token == "" || len(rows) >= 1000 {
			markDuplicates(rows)
			return rows, token != "", nil
		}
	}
}

// markDuplicates sets the Duplicate of each row the duplicate-intent guard
// caught, saying what the ledger holds of the earlier call it repeats.
func markDuplicates(rows []ledgerRow) {
	byID := make(map[string]*ledgerRow, len(rows))
	for i := range rows {
		byID[rows[i].E.GetToolUseId()] = &rows[i]
	}
	for i := range rows {
		of := rows[i].E.GetDuplicateOf()
		if of == "" {
			continue
		}
		e := byID[of]
		rows[i].Duplicate = &duplicateView{Of: of, State: earlierState(e != nil, e != nil && e.Has, e != nil && e.IsError)}
	}
}

// timeline reads the kept revisions up to latest, at most maxTimeline of
// them, and returns them (newest first) with the timeline up to cp's
// revision, where cp's messages are placed at the revision that appended
// them.
func (s *Server) timeline(ctx context.Context, cp *savepointv1.Checkpoint, latest uint64, msgs []messageView) ([]turnGroup, []uint64, error) {
	var revs []revisionEntry
	var kept []uint64
	first := uint64(1)
	if latest > maxTimeline {
		first = latest - maxTimeline + 1
	}
	for r := first; r <= latest; r++ {
		rc := r
		resp, err := s.opts.Client.Raw().GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: cp.GetSessionId(), Revision: &rc})
		if errors.Is(err, client.ErrRevisionNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		kept = append([]uint64{r}, kept...)
		if r > cp.GetRevision() {
			continue
		}
		c := resp.GetCheckpoint()
		revs = append(revs, revisionEntry{Revision: r, Turn: c.GetTurn(), MessageCount: c.GetMessageCount(), Pending: len(c.GetPendingToolUses())})
	}
	var prev uint64
	prevPending := 0
	for i := range revs {
		e := &revs[i]
		switch {
		case e.Pending > 0:
			e.Point = "Point A: tool uses pending"
		case prevPending > 0:
			e.Point = "Point B: tool results saved"
		default:
			e.Point = "save"
		}
		if e.MessageCount < prev {
			e.Rewritten, prev = true, 0
		}
		for j := prev; j < e.MessageCount && int(j) < len(msgs); j++ {
			e.Messages = append(e.Messages, msgs[j])
		}
		prev, prevPending = e.MessageCount, e.Pending
	}
	var groups []turnGroup
	for _, e := range revs {
		if n := len(groups); n > 0 && groups[n-1].Turn == e.Turn {
			groups[n-1].Revisions = append(groups[n-1].Revisions, e)
			continue
		}
		groups = append(groups, turnGroup{Turn: e.Turn, Revisions: []revisionEntry{e}})
	}
	return groups, kept, nil
}

// revisionParam reads the optional revision query parameter.
func revisionParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("The %s %q is not a revision number.", name, v)
	}
	return n, nil
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rev, err := revisionParam(r, "revision")
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "BAD_REVISION", err.Error())
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	cp, err := s.opts.Client.GetSession(ctx, id, rev)
	if err != nil {
		s.failSession(w, r, err, id)
		return
	}
	rec, err := s.opts.Client.ReconcileView(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := sessionData{ID: id, CP: cp, Latest: rec.GetRevision(), IsLatest: rec.GetRevision() == cp.GetRevision(),
		Labels: labelText(cp.GetLabels()), StateJSON: prettyJSON(cp.GetStateJson()), All: r.URL.Query().Get("all") != ""}
	d.State = statusName(cp.GetStatus())
	msgs := make([]messageView, 0, len(cp.GetMessages()))
	for i, m := range cp.GetMessages() {
		d.Bytes += len(m.GetContentJson()) + len(m.GetRole())
		if d.All || i < maxMessages {
			msgs = append(msgs, viewMessage(i, m))
		}
	}
	d.Shown = len(msgs)
	d.Bytes += len(cp.GetStateJson())
	decisions := map[string]*savepointv1.Resolution{}
	if d.IsLatest {
		for _, res := range rec.GetResolutions() {
			decisions[res.GetToolUse().GetToolUseId()] = res
		}
	}
	if d.Ledger, d.LedgerCut, err = s.ledger(ctx, id); err != nil {
		s.fail(w, r, err)
		return
	}
	caught := map[string]*duplicateView{}
	for _, row := range d.Ledger {
		if row.Duplicate != nil {
			caught[row.E.GetToolUseId()] = row.Duplicate
		}
	}
	inDoubt := 0
	for _, p := range cp.GetPendingToolUses() {
		d.Bytes += len(p.GetInputJson())
		pv := pendingView{ToolUse: p}
		pv.InputJSON, _ = cut(prettyJSON(p.GetInputJson()))
		pv.Duplicate = caught[p.GetToolUseId()]
		if res := decisions[p.GetToolUseId()]; res != nil {
			pv.Decision, pv.Reason = decisionReason(res)
			pv.Class = "decision-" + strings.ReplaceAll(pv.Decision, " ", "-")
			pv.ToolResultText, pv.Key, pv.Begun = res.GetToolResultText(), res.GetIdempotencyKey(), res.GetBegun()
			pv.Resolution = newResolution(res.GetResolution())
			pv.Approval = newApproval(res.GetApproval())
			if res.GetDecision() == savepointv1.Decision_DECISION_IN_DOUBT {
				inDoubt++
				// A caught duplicate never ran: the earlier call it
				// repeats is the one to resolve.
				pv.InDoubt = pv.Duplicate == nil
			}
		}
		d.Pending = append(d.Pending, pv)
	}
	if d.State == "active" && d.IsLatest {
		switch {
		case inDoubt > 0:
			d.State = "in doubt"
		case len(d.Pending) > 0:
			d.State = "waiting"
		}
	}
	if d.Turns, d.Kept, err = s.timeline(ctx, cp, d.Latest, msgs); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.IsLatest {
		entries := make([]*savepointv1.LedgerEntry, len(d.Ledger))
		for i, row := range d.Ledger {
			entries[i] = row.E
		}
		n := cli.CountSessionLedger(entries, rec)
		d.Counts = &n
	}
	s.render(w, r, http.StatusOK, "session", "Session "+id, "sessions", d)
}

// message serves one whole message of a revision as indented JSON, for the
// "show all" of a message the page cut.
func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rev, err := revisionParam(r, "revision")
	i, ierr := strconv.ParseUint(r.PathValue("index"), 10, 64)
	if err != nil || ierr != nil {
		s.refuse(w, r, http.StatusBadRequest, "BAD_REVISION", "The message index and revision must be numbers.")
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	resp, err := s.opts.Client.Raw().ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: id, Revision: rev, PageSize: 1})
	for err == nil && resp.GetFirstIndex()+uint64(len(resp.GetMessages())) <= i && resp.GetNextPageToken() != "" {
		// Page tokens carry the position; this walks one page per step
		// from the start, which a history of thousands of messages allows.
		resp, err = s.opts.Client.Raw().ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: id, Revision: rev, PageToken: resp.GetNextPageToken(), PageSize: 1000})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	k := i - resp.GetFirstIndex()
	if i < resp.GetFirstIndex() || k >= uint64(len(resp.GetMessages())) {
		s.refuse(w, r, http.StatusNotFound, "NO_SUCH_MESSAGE", fmt.Sprintf("Revision %d of %s has no message %d.", resp.GetRevision(), id, i))
		return
	}
	m := resp.GetMessages()[k]
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%s message %d of revision %d (%s)\n\n%s\n", id, i, resp.GetRevision(), m.GetRole(), prettyJSON(m.GetContentJson()))
}

package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// confirmData is what an action's confirmation page shows.
type confirmData struct {
	ID, Action string
	Revision   uint64 // fork, rewind: the revision acted on
	Latest     uint64
	Epoch      uint64 // the session's epoch now, shown, never pre-filled
	NewID      string // fork: a suggested id for the new session
	Done       []*savepointv1.LedgerEntry
	InDoubt    []*savepointv1.LedgerEntry
	Status     string
}

// resultData is what an accepted action's page shows: the daemon's answer.
type resultData struct {
	ID, Action string
	Lines      []string
	Performed  []*savepointv1.LedgerEntry
	InDoubt    []*savepointv1.LedgerEntry
	Truncated  bool
	Next       string // the page to go on to
}

var sessionActions = map[string]string{"fork": "Fork", "rewind": "Rewind", "complete": "Complete", "delete": "Delete"}

// confirm shows an action's confirmation: what it will do, and the epoch to
// write under or the take-over it needs.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if sessionActions[action] == "" {
		s.refuse(w, r, http.StatusNotFound, "NO_SUCH_PAGE", "The inspector has no page at "+r.URL.Path+".")
		return
	}
	if s.opts.ReadOnly {
		s.refuse(w, r, http.StatusForbidden, "READ_ONLY", "This inspector was started with --read-only: it takes no action.")
		return
	}
	rev, err := revisionParam(r, "revision")
	if err == nil && action == "rewind" && rev == 0 {
		err = errors.New("A rewind needs the revision to make the latest again.")
	}
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "BAD_REVISION", err.Error())
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	d := confirmData{ID: id, Action: action}
	resp, err := s.opts.Client.Raw().GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: id})
	if err != nil && !(action == "delete" && errors.Is(err, client.ErrCheckpointCorrupt)) {
		s.fail(w, r, err)
		return
	}
	d.Latest, d.Epoch, d.Status = resp.GetCheckpoint().GetRevision(), resp.GetCheckpoint().GetEpoch(), statusName(resp.GetCheckpoint().GetStatus())
	if e, ok := errors.AsType[*client.Error](err); ok {
		d.Epoch = e.CurrentEpoch
	}
	if d.Revision = rev; rev == 0 {
		d.Revision = d.Latest
	}
	if action == "fork" {
		cp, err := s.opts.Client.GetSession(ctx, id, d.Revision)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ids := toolUseIDs(cp.GetMessages())
		for _, p := range cp.GetPendingToolUses() {
			ids[p.GetToolUseId()] = true
		}
		rows, _, err := s.ledger(ctx, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, row := range rows {
			switch {
			case !ids[row.E.GetToolUseId()]:
			case row.Has:
				d.Done = append(d.Done, row.E)
			case row.E.GetBegun():
				d.InDoubt = append(d.InDoubt, row.E)
			}
		}
		d.NewID = fmt.Sprintf("%s-fork-r%d", id, d.Revision)
	}
	s.render(w, r, http.StatusOK, "confirm", sessionActions[action]+" "+id, "sessions", d)
}

// ownEpoch returns the epoch a write to id goes under: the one the form
// names, or, for a take-over, a new one from Resume (which fences the agent
// running the session).
func (s *Server) ownEpoch(ctx context.Context, r *http.Request, id string) (uint64, error) {
	switch r.PostFormValue("own") {
	case "epoch":
		n, err := strconv.ParseUint(strings.TrimSpace(r.PostFormValue("epoch")), 10, 64)
		if err != nil {
			return 0, errBadForm(fmt.Sprintf("The epoch %q is not a number: give the session's current epoch, or take it over.", r.PostFormValue("epoch")))
		}
		return n, nil
	case "take-over":
		res, err := s.opts.Client.Raw().Resume(ctx, &savepointv1.ResumeRequest{SessionId: id})
		// A session that cannot be decoded cannot be resumed; its error
		// carries the epoch, which is all a delete of it needs.
		if e, ok := errors.AsType[*client.Error](err); ok && errors.Is(err, client.ErrCheckpointCorrupt) && e.CurrentEpoch > 0 {
			return e.CurrentEpoch, nil
		}
		if err != nil {
			return 0, err
		}
		return res.GetEpoch(), nil
	}
	return 0, errBadForm("A write needs the epoch to write under (the session's current epoch) or a take-over (Resume first, fencing its agent).")
}

// formError is a form the inspector refuses before asking the daemon.
type formError string

func (e formError) Error() string { return string(e) }

func errBadForm(msg string) error { return formError(msg) }

// act takes a confirmed action and shows what the daemon answered.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx, cancel := s.rpc(r)
	defer cancel()
	res, err := s.sessionAction(ctx, r, id, action)
	if fe, ok := errors.AsType[formError](err); ok {
		s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", string(fe))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.ID, res.Action = id, action
	s.render(w, r, http.StatusOK, "result", sessionActions[action]+" "+id, "sessions", res)
}

func (s *Server) sessionAction(ctx context.Context, r *http.Request, id, action string) (*resultData, error) {
	raw := s.opts.Client.Raw()
	var rev uint64
	if v := r.PostFormValue("revision"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, errBadForm(fmt.Sprintf("The revision %q is not a number.", v))
		}
		rev = n
	}
	switch action {
	case "fork":
		newID := strings.TrimSpace(r.PostFormValue("new_session_id"))
		if newID == "" {
			return nil, errBadForm("A fork needs the id of the new session.")
		}
		resp, err := raw.ForkSession(ctx, &savepointv1.ForkSessionRequest{SourceSessionId: id, Revision: rev, NewSessionId: newID, RequestId: uuid.NewString()})
		if err != nil {
			return nil, err
		}
		return &resultData{Lines: []string{fmt.Sprintf("Forked %s at revision %d into %s: revision %d, epoch %d, %d messages.", id, rev, newID, resp.GetRevision(), resp.GetEpoch(), resp.GetMessageCount())},
			Performed: resp.GetPerformedAfter(), InDoubt: resp.GetInDoubtAfter(), Truncated: resp.GetListsTruncated(), Next: "/sessions/" + newID}, nil
	case "rewind", "complete", "delete":
	default:
		return nil, formError("The inspector has no action " + action + ".")
	}
	epoch, err := s.ownEpoch(ctx, r, id)
	if err != nil {
		return nil, err
	}
	switch action {
	case "rewind":
		if rev == 0 {
			return nil, errBadForm("A rewind needs the revision to make the latest again.")
		}
		resp, err := raw.RewindSession(ctx, &savepointv1.RewindSessionRequest{SessionId: id, Epoch: epoch, Revision: rev, RequestId: uuid.NewString()})
		if err != nil {
			return nil, err
		}
		return &resultData{Lines: []string{fmt.Sprintf("Rewound %s to revision %d: its latest is now revision %d (epoch %d, %d messages).", id, rev, resp.GetRevision(), resp.GetEpoch(), resp.GetMessageCount())},
			Performed: resp.GetPerformedAfter(), InDoubt: resp.GetInDoubtAfter(), Truncated: resp.GetListsTruncated(), Next: "/sessions/" + id}, nil
	case "complete":
		st := savepointv1.SessionStatus_SESSION_STATUS_COMPLETED
		if r.PostFormValue("status") == "failed" {
			st = savepointv1.SessionStatus_SESSION_STATUS_FAILED
		}
		resp, err := raw.CompleteSession(ctx, &savepointv1.CompleteSessionRequest{SessionId: id, Epoch: epoch, Status: st, FinalOutput: r.PostFormValue("final_output"), RequestId: uuid.NewString()})
		if err != nil {
			return nil, err
		}
		line := fmt.Sprintf("%s is %s (revision %d, epoch %d).", id, statusName(resp.GetStatus()), resp.GetRevision(), resp.GetEpoch())
		if resp.GetAlreadyCompleted() {
			line = fmt.Sprintf("%s was %s already, with this final output; nothing changed.", id, statusName(resp.GetStatus()))
		}
		return &resultData{Lines: []string{line}, Next: "/sessions/" + id}, nil
	default: // delete
		resp, err := raw.DeleteSession(ctx, &savepointv1.DeleteSessionRequest{SessionId: id, Epoch: epoch})
		if err != nil {
			return nil, err
		}
		return &resultData{Lines: []string{fmt.Sprintf("Deleted %s: its checkpoints, history and ledger are gone; epochs up to %d stay fenced.", id, resp.GetTombstoneEpoch())}, Next: "/sessions"}, nil
	}
}

package ui

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// A person approves or denies a call that waits for approval as they
// resolve a call in doubt (resolve.go): GET .../approve shows the call, its
// input and the digest of that input, with an approve and a deny form; the
// form's POST without confirmed=yes changes nothing and shows the decision
// back with a request id; the confirmation's POST records it with
// ApproveEffect or ApproveThreadEffect, as a person (no epoch), bound to the
// input digest the page showed: a call whose input changed since is the
// daemon's APPROVAL_INPUT_MISMATCH, and nothing is written.

// approvalView is a call's approval record as a page says it.
type approvalView struct {
	Status string // "waiting", "approved" or "denied"
	By     string
	Note   string
	Asked  string // when a begin first asked
	Time   string // when it was decided
	Spent  bool
}

func newApproval(a *savepointv1.EffectApproval) *approvalView {
	if a == nil {
		return nil
	}
	v := &approvalView{By: a.GetDecidedBy(), Note: a.GetNote(), Asked: formatTime(a.GetRequestTime()), Time: formatTime(a.GetDecideTime()), Spent: a.GetSpent()}
	switch a.GetStatus() {
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		v.Status = "approved"
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED:
		v.Status = "denied"
	default:
		v.Status = "waiting"
	}
	if v.By == "" {
		v.By = "-"
	}
	return v
}

// approveData is what the approval form and its confirmation show.
type approveData struct {
	Thread    bool
	ID, NS    string
	ToolUseID string
	Name      string
	InputJSON string
	Digest    string // hex: the input digest the decision is bound to
	Asked     string
	Action    string
	Back      string

	Confirm   bool
	Deny      bool
	Note, By  string
	RequestID string
}

func (d *approveData) page() string {
	if d.Thread {
		return "/graph/thread?" + url.Values{"id": {d.ID}}.Encode()
	}
	return "/sessions/" + url.PathEscape(d.ID)
}

// lookup reads the call d names from the daemon: it fills d's tool name,
// input and when approval was asked, and returns the call's approval
// record (nil when the call has none or is not found).
func (s *Server) lookup(ctx context.Context, d *approveData) (*savepointv1.EffectApproval, error) {
	if d.Thread {
		effects, err := s.opts.Client.ThreadEffects(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range effects {
			if e.GetCheckpointNs() == d.NS && e.GetToolUseId() == d.ToolUseID {
				d.Name, d.Asked = e.GetName(), formatTime(e.GetApproval().GetRequestTime())
				d.InputJSON, _ = cut(prettyJSON(e.GetInputJson()))
				return e.GetApproval(), nil
			}
		}
		return nil, nil
	}
	rows, _, err := s.ledger(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	var a *savepointv1.EffectApproval
	for _, row := range rows {
		if row.E.GetToolUseId() == d.ToolUseID {
			a, d.Name, d.Asked = row.E.GetApproval(), row.E.GetName(), formatTime(row.E.GetApproval().GetRequestTime())
		}
	}
	d.InputJSON = "(not pending in the latest revision)"
	if cp, err := s.opts.Client.GetSession(ctx, d.ID, 0); err == nil {
		for _, p := range cp.GetPendingToolUses() {
			if p.GetToolUseId() == d.ToolUseID {
				d.InputJSON, _ = cut(prettyJSON(p.GetInputJson()))
			}
		}
	}
	return a, nil
}

// approveForm shows the approval form of a session's call (thread false)
// or a thread's.
func (s *Server) approveForm(thread bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ReadOnly {
			s.refuse(w, r, http.StatusForbidden, "READ_ONLY", "This inspector was started with --read-only: it takes no action.")
			return
		}
		q := r.URL.Query()
		d := &approveData{Thread: thread, ID: r.PathValue("id"), ToolUseID: q.Get("tool_use_id"), By: s.opts.Person}
		nav, what := "sessions", fmt.Sprintf("Tool use %q of %s", d.ToolUseID, d.ID)
		d.Action = "/sessions/" + url.PathEscape(d.ID) + "/approve"
		if thread {
			d.ID, d.NS, d.Action, nav = q.Get("id"), q.Get("ns"), "/graph/approve", "graph"
			what = fmt.Sprintf("Tool call %q of thread %q (namespace %s)", d.ToolUseID, d.ID, nsName(d.NS))
		}
		d.Back = d.page()
		ctx, cancel := s.rpc(r)
		defer cancel()
		a, err := s.lookup(ctx, d)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if a.GetStatus() != savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING {
			s.refuse(w, r, http.StatusConflict, "APPROVAL_NOT_WAITING", what+" does not wait for approval now. Nothing was changed.")
			return
		}
		d.Digest = hex.EncodeToString(a.GetInputDigest())
		s.render(w, r, http.StatusOK, "approve", "Approve or deny "+d.ToolUseID, nav, d)
	}
}

// approvePost takes the approval form's POST: without confirmed=yes it
// shows the decision back and changes nothing; with it, it records it.
func (s *Server) approvePost(thread bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := &approveData{Thread: thread, ID: r.PathValue("id"), ToolUseID: r.PostFormValue("tool_use_id"), Name: r.PostFormValue("name"),
			Digest: r.PostFormValue("input_digest"), Note: strings.TrimSpace(r.PostFormValue("note")), By: strings.TrimSpace(r.PostFormValue("by")),
			RequestID: r.PostFormValue("request_id")}
		nav := "sessions"
		d.Action = "/sessions/" + url.PathEscape(d.ID) + "/approve"
		if thread {
			d.ID, d.NS, d.Action, nav = r.PostFormValue("id"), r.PostFormValue("ns"), "/graph/approve", "graph"
		}
		d.Back = d.page()
		switch r.PostFormValue("decision") {
		case "approve":
		case "deny":
			d.Deny = true
		default:
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A decision is approve or deny. Nothing was changed.")
			return
		}
		digest, err := hex.DecodeString(d.Digest)
		if d.ID == "" || d.ToolUseID == "" || err != nil || len(digest) != 32 {
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A decision names the call (its session or thread, and its tool_use_id) and the digest of the input it is for. Nothing was changed.")
			return
		}
		if r.PostFormValue("confirmed") != "yes" {
			// The call as it is now, for the person to read once more; the
			// decision stays bound to the digest the form carried.
			ctx, cancel := s.rpc(r)
			defer cancel()
			if _, err := s.lookup(ctx, d); err != nil {
				s.fail(w, r, err)
				return
			}
			d.Confirm, d.RequestID = true, uuid.NewString()
			s.render(w, r, http.StatusOK, "approve", "Confirm: "+map[bool]string{false: "approve ", true: "deny "}[d.Deny]+d.ToolUseID, nav, d)
			return
		}
		if _, err := uuid.Parse(d.RequestID); err != nil {
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "The confirmation lacks its request id. Go back to the call's page and decide again. Nothing was changed.")
			return
		}
		ctx, cancel := s.rpc(r)
		defer cancel()
		res, err := s.approve(ctx, d, digest)
		if err != nil {
			s.failResolve(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "result", map[bool]string{false: "Approved ", true: "Denied "}[d.Deny]+d.ToolUseID, nav, res)
	}
}

// approve records d's decision as a person's, bound to digest.
func (s *Server) approve(ctx context.Context, d *approveData, digest []byte) (*resultData, error) {
	status := savepointv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	if d.Deny {
		status = savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED
	}
	res := &resultData{ID: d.ID, Action: "approve", Next: d.Back}
	var a *savepointv1.EffectApproval
	var already bool
	var what string
	if d.Thread {
		resp, err := s.opts.Client.Graph().ApproveThreadEffect(ctx, &savepointv1.ApproveThreadEffectRequest{ThreadId: d.ID, CheckpointNs: d.NS, ToolUseId: d.ToolUseID,
			Decision: status, InputDigest: digest, DecidedBy: d.By, Note: d.Note, RequestId: d.RequestID})
		if err != nil {
			return nil, err
		}
		a, already = resp.GetEffect().GetApproval(), resp.GetAlreadyDecided()
		what = fmt.Sprintf("Thread %s, namespace %s: %s (%s)", d.ID, nsName(d.NS), d.ToolUseID, resp.GetEffect().GetName())
	} else {
		resp, err := s.opts.Client.Raw().ApproveEffect(ctx, &savepointv1.ApproveEffectRequest{SessionId: d.ID, ToolUseId: d.ToolUseID,
			Decision: status, InputDigest: digest, DecidedBy: d.By, Note: d.Note, RequestId: d.RequestID})
		if err != nil {
			return nil, err
		}
		a, already = resp.GetEntry().GetApproval(), resp.GetAlreadyDecided()
		what = fmt.Sprintf("%s %s (%s)", d.ID, d.ToolUseID, resp.GetEntry().GetName())
	}
	v := newApproval(a)
	verb := "is"
	if already {
		verb = "was already, with this same decision: nothing changed;"
	}
	res.Lines = []string{fmt.Sprintf("%s %s %s by %s (a person) at %s.", what, verb, v.Status, v.By, v.Time)}
	if d.Deny {
		res.Lines = append(res.Lines, "It will not run: the agent gives the model your note as the tool result.")
	} else {
		res.Lines = append(res.Lines, "The agent's next begin of this call, with this input, runs it once and spends the approval; a call with other input needs a new approval.")
	}
	return res, nil
}

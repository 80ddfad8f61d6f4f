package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// A person resolves a call in doubt from the inspector in three steps, as
// "savepoint resolve" does from a shell: GET .../resolve shows the call and
// a form for what was found (done, with its output, or not done); its POST
// without confirmed=yes changes nothing and shows the finding back for a
// confirmation, with a request id; the confirmation's POST records it with
// ResolveEffect or ResolveThreadEffect as a person (resolver kind PERSON,
// no epoch: a finding is a fact and fences no one). Every POST passes the
// CSRF and origin checks of ServeHTTP; a read-only inspector refuses them.

// resolveData is what the resolve form and its confirmation show.
type resolveData struct {
	Thread    bool   // a graph thread's call, not a session's
	ID        string // the session, or the thread
	NS        string // the thread's namespace
	ToolUseID string
	Name      string
	InputJSON string
	Key       string // the idempotency key
	Begun     string // when it was begun, "-" when not begin-tracked
	Why       string // why it is in doubt
	Action    string // the form's address
	Back      string // the page the call is on

	// The finding, on the confirmation.
	Confirm   bool
	Done      bool
	Output    string
	IsError   bool
	Note, By  string
	RequestID string
}

// page returns the address of the session's or thread's page.
func (d *resolveData) page() string {
	if d.Thread {
		return "/graph/thread?" + url.Values{"id": {d.ID}}.Encode()
	}
	return "/sessions/" + url.PathEscape(d.ID)
}

func (d *resolveData) title() string {
	return "Resolve " + d.ToolUseID
}

// errNotInDoubt refuses the form of a call that is not in doubt now.
func (s *Server) errNotInDoubt(w http.ResponseWriter, r *http.Request, what, decision string) {
	s.refuse(w, r, http.StatusConflict, "CALL_NOT_IN_DOUBT", fmt.Sprintf("%s is not in doubt now (%s): only a call whose outcome is unknown is resolved. Nothing was changed.", what, decision))
}

// resolveForm shows the form for a session's call in doubt.
func (s *Server) resolveForm(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReadOnly {
		s.refuse(w, r, http.StatusForbidden, "READ_ONLY", "This inspector was started with --read-only: it takes no action.")
		return
	}
	id, tu := r.PathValue("id"), r.URL.Query().Get("tool_use_id")
	ctx, cancel := s.rpc(r)
	defer cancel()
	rec, err := s.opts.Client.ReconcileView(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, res := range rec.GetResolutions() {
		u := res.GetToolUse()
		if u.GetToolUseId() != tu {
			continue
		}
		decision, why := decisionReason(res)
		if res.GetDecision() != savepointv1.Decision_DECISION_IN_DOUBT {
			s.errNotInDoubt(w, r, fmt.Sprintf("Tool use %q of %s", tu, id), "Reconcile answers "+decision)
			return
		}
		d := &resolveData{ID: id, ToolUseID: tu, Name: u.GetName(), InputJSON: prettyJSON(u.GetInputJson()), Key: res.GetIdempotencyKey(),
			Begun: "-", Why: why, Action: "/sessions/" + url.PathEscape(id) + "/resolve", By: s.opts.Person}
		d.InputJSON, _ = cut(d.InputJSON)
		d.Back = d.page()
		rows, _, err := s.ledger(ctx, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, row := range rows {
			if row.E.GetToolUseId() == tu {
				d.Begun = row.Begun
			}
		}
		s.render(w, r, http.StatusOK, "resolve", d.title(), "sessions", d)
		return
	}
	s.errNotInDoubt(w, r, fmt.Sprintf("Tool use %q", tu), fmt.Sprintf("it is not pending in the latest revision of %s", id))
}

// threadResolveForm shows the form for a thread's call in doubt.
func (s *Server) threadResolveForm(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReadOnly {
		s.refuse(w, r, http.StatusForbidden, "READ_ONLY", "This inspector was started with --read-only: it takes no action.")
		return
	}
	q := r.URL.Query()
	id, ns, tu := q.Get("id"), q.Get("ns"), q.Get("tool_use_id")
	ctx, cancel := s.rpc(r)
	defer cancel()
	effects, err := s.opts.Client.ThreadEffects(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, e := range effects {
		if e.GetCheckpointNs() != ns || e.GetToolUseId() != tu {
			continue
		}
		dec, why := client.NextBegin(e)
		if dec != savepointv1.Decision_DECISION_IN_DOUBT {
			s.errNotInDoubt(w, r, fmt.Sprintf("Tool call %q of thread %q", tu, id), "its next begin is answered "+strings.TrimPrefix(dec.String(), "DECISION_"))
			return
		}
		d := &resolveData{Thread: true, ID: id, NS: ns, ToolUseID: tu, Name: e.GetName(), Key: e.GetIdempotencyKey(),
			Begun: formatTime(e.GetBeginTime()), Why: why, Action: "/graph/resolve", By: s.opts.Person}
		d.InputJSON, _ = cut(prettyJSON(e.GetInputJson()))
		d.Back = d.page()
		s.render(w, r, http.StatusOK, "resolve", d.title(), "graph", d)
		return
	}
	s.errNotInDoubt(w, r, fmt.Sprintf("Tool call %q", tu), fmt.Sprintf("thread %q has no such call in namespace %s", id, nsName(ns)))
}

// resolvePost takes the resolve form's POST for a session's call (thread
// false) or a thread's: without confirmed=yes it shows the finding back
// for a confirmation and changes nothing; with it, it records the finding.
func (s *Server) resolvePost(thread bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// A browser sends a textarea's line breaks as CRLF; what a person
		// typed is recorded with the LFs they typed.
		d := &resolveData{Thread: thread, ID: r.PathValue("id"), ToolUseID: r.PostFormValue("tool_use_id"), Name: r.PostFormValue("name"),
			Output: strings.ReplaceAll(r.PostFormValue("output"), "\r\n", "\n"), IsError: r.PostFormValue("is_error") != "", Note: strings.TrimSpace(r.PostFormValue("note")),
			By: strings.TrimSpace(r.PostFormValue("by")), RequestID: r.PostFormValue("request_id")}
		nav := "sessions"
		d.Action = "/sessions/" + url.PathEscape(d.ID) + "/resolve"
		if thread {
			d.ID, d.NS, d.Action, nav = r.PostFormValue("id"), r.PostFormValue("ns"), "/graph/resolve", "graph"
		}
		d.Back = d.page()
		switch r.PostFormValue("outcome") {
		case "done":
			d.Done = true
		case "not_done":
			if d.Output != "" || d.IsError {
				s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "An output (or is_error) is recorded only for a call that was done; a call not done has none. Nothing was changed.")
				return
			}
		default:
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A resolution is done or not done. Nothing was changed.")
			return
		}
		if d.ID == "" || d.ToolUseID == "" {
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A resolution names the call: its session (or thread) and its tool_use_id. Nothing was changed.")
			return
		}
		if r.PostFormValue("confirmed") != "yes" {
			// The confirmation: the finding shown back, with the request
			// id its POST carries, so that sending it twice records it once.
			d.Confirm, d.RequestID = true, uuid.NewString()
			s.render(w, r, http.StatusOK, "resolve", "Confirm: "+d.title(), nav, d)
			return
		}
		if _, err := uuid.Parse(d.RequestID); err != nil {
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "The confirmation lacks its request id. Go back to the call's page and resolve it again. Nothing was changed.")
			return
		}
		ctx, cancel := s.rpc(r)
		defer cancel()
		res, err := s.resolve(ctx, d)
		if err != nil {
			s.failResolve(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "result", "Resolved "+d.ToolUseID, nav, res)
	}
}

// resolve records d's finding as a person's and says what the agent's next
// resume will do with it.
func (s *Server) resolve(ctx context.Context, d *resolveData) (*resultData, error) {
	outcome := savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_NOT_DONE
	if d.Done {
		outcome = savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE
	}
	res := &resultData{ID: d.ID, Action: "resolve", Next: d.Back}
	already := func(b bool) string {
		if b {
			return "was already resolved, with this same finding: nothing changed"
		}
		return "is resolved"
	}
	if !d.Thread {
		resp, err := s.opts.Client.Raw().ResolveEffect(ctx, &savepointv1.ResolveEffectRequest{SessionId: d.ID, ToolUseId: d.ToolUseID,
			Outcome: outcome, Output: d.Output, IsError: d.IsError, Note: d.Note, ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON,
			ResolvedBy: d.By, RequestId: d.RequestID})
		if err != nil {
			return nil, err
		}
		e := resp.GetEntry()
		res.Lines = []string{fmt.Sprintf("%s %s (%s) %s: %s.", d.ID, d.ToolUseID, e.GetName(), already(resp.GetAlreadyResolved()), resolutionSentence(e.GetResolution()))}
		switch {
		case d.Done:
			res.Lines = append(res.Lines, "Its output is recorded as its effect: the agent's next resume reuses it as the tool result, and the tool does not run again.")
		case e.GetIdempotencyKey() != "":
			res.Lines = append(res.Lines, "The agent's next resume runs it again, as a new attempt with idempotency key "+e.GetIdempotencyKey()+".")
		default:
			res.Lines = append(res.Lines, "The agent's next resume runs it again.")
		}
		return res, nil
	}
	req := &savepointv1.ResolveThreadEffectRequest{ThreadId: d.ID, CheckpointNs: d.NS, ToolUseId: d.ToolUseID, Outcome: outcome,
		IsError: d.IsError, Note: d.Note, ResolverKind: savepointv1.ResolverKind_RESOLVER_KIND_PERSON, ResolvedBy: d.By, RequestId: d.RequestID}
	if d.Done {
		// A person's text is a JSON string, as savepoint resolve --thread
		// records it: LangGraph's serializer reads it back as the text.
		data, _ := json.Marshal(d.Output)
		req.Output = &savepointv1.TypedValue{Type: "json", Data: data}
	}
	resp, err := s.opts.Client.Graph().ResolveThreadEffect(ctx, req)
	if err != nil {
		return nil, err
	}
	e := resp.GetEffect()
	res.Lines = []string{fmt.Sprintf("Thread %s, namespace %s: %s (%s) attempt %d %s: %s.", d.ID, nsName(d.NS), d.ToolUseID, e.GetName(), e.GetAttempts(),
		already(resp.GetAlreadyResolved()), resolutionSentence(e.GetResolution()))}
	if d.Done {
		res.Lines = append(res.Lines, "Its output is recorded: the node's next run reuses it, and the tool does not run again.")
	} else {
		res.Lines = append(res.Lines, fmt.Sprintf("The node's next run runs it again, as attempt %d with idempotency key %s.", e.GetAttempts()+1, e.GetIdempotencyKey()))
	}
	return res, nil
}

// resolutionSentence is r as the result page says it: "done by alice (a
// person) at TIME".
func resolutionSentence(r *savepointv1.EffectResolution) string {
	v := newResolution(r)
	if v == nil {
		return "no resolution recorded"
	}
	return fmt.Sprintf("%s by %s (%s) at %s", v.Outcome, v.By, v.Kind, v.Time)
}

// failResolve is fail for a refused resolution: the daemon refused it
// before writing (not in doubt, a conflicting finding, bad input), so the
// page says that nothing changed.
func (s *Server) failResolve(w http.ResponseWriter, r *http.Request, err error) {
	d := describe(err)
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.InvalidArgument, codes.NotFound, codes.Aborted, codes.OutOfRange, codes.ResourceExhausted:
		d.Msg += " Nothing was changed."
	}
	s.render(w, r, d.Status, "error", http.StatusText(d.Status), "", d)
}

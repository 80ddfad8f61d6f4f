package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// What a tool returned, as the ledgers of the Session and Thread pages show
// it: the recorded output, folded when long, and how a call in doubt was
// settled (ResolveEffect, ResolveThreadEffect). Every output is the tool's
// text, untrusted: html/template escapes it, and the whole-output pages
// serve it as text/plain under nosniff.

// An output longer than foldBytes or foldLines is folded in a <details>
// that a click opens; one longer than maxShown is cut there, with a link to
// the whole of it.
const (
	foldBytes = 300
	foldLines = 5
)

// outputView is one recorded output as a page shows it.
type outputView struct {
	Text  string // the output, cut at maxShown
	Size  int    // its whole size in bytes
	Lines int    // its lines
	Fold  bool   // long: shown folded
	Cut   bool   // Text is its first maxShown bytes only
	All   string // the whole output's address, when Cut
	Note  string // for a thread output that is not decoded: why
	Type  string // for a thread output: its serializer's type tag
}

// newOutput returns the view of output s, whose whole text all serves.
func newOutput(s, all string) *outputView {
	v := &outputView{Size: len(s), Lines: strings.Count(s, "\n") + 1}
	v.Text, v.Cut = cut(s)
	v.Fold = v.Size > foldBytes || v.Lines > foldLines
	if v.Cut {
		v.All = all
	}
	return v
}

// threadOutput returns the view of a thread's recorded output, decoded as
// the Thread page decodes values; all serves the whole of it.
func threadOutput(o *savepointv1.TypedValue, all string) *outputView {
	d := decodeValue(o.GetType(), o.GetData(), o.GetTotalSize())
	if !d.Decoded {
		return &outputView{Size: int(d.Size), Note: fmt.Sprintf("%s, %s: %s", d.Type, formatBytes(int(d.Size)), d.Note)}
	}
	v := newOutput(d.Text, all)
	v.Size, v.Cut, v.Type = int(d.Size), d.Cut, d.Type
	v.Fold = v.Fold || v.Size > foldBytes
	if v.Cut {
		v.All = all
	}
	return v
}

// resolutionView is how a call in doubt was settled, as a page says it.
type resolutionView struct {
	Outcome    string // "done" or "not done"
	By         string // the resolver's name, "-" when none was given
	Kind       string // "a person" or "a verify hook"
	Time       string
	Note       string
	RetryBegun bool // not done, and the new attempt it allowed has begun
}

// newResolution returns the view of r, or nil when r is nil.
func newResolution(r *savepointv1.EffectResolution) *resolutionView {
	if r == nil {
		return nil
	}
	v := &resolutionView{Outcome: "not done", By: r.GetResolvedBy(), Kind: "a person", Time: formatTime(r.GetResolveTime()),
		Note: r.GetNote(), RetryBegun: r.GetRetryBegun()}
	if r.GetOutcome() == savepointv1.ResolutionOutcome_RESOLUTION_OUTCOME_DONE {
		v.Outcome = "done"
	}
	if r.GetResolverKind() == savepointv1.ResolverKind_RESOLVER_KIND_VERIFY {
		v.Kind = "a verify hook"
	}
	if v.By == "" {
		v.By = "-"
	}
	return v
}

// earlierView is what a call's resolutions and approval decisions were
// before its current ones, oldest first, each with its author.
type earlierView struct {
	Resolutions []*resolutionView
	Approvals   []*approvalView
}

// newEarlier returns the view of a call's earlier decisions, from its
// resolutions and approvals lists and its current approval (cli.Earlier).
func newEarlier(rs []*savepointv1.EffectResolution, as []*savepointv1.EffectApproval, approval *savepointv1.EffectApproval) earlierView {
	var v earlierView
	rs, as = cli.Earlier(rs, as, approval)
	for _, r := range rs {
		v.Resolutions = append(v.Resolutions, newResolution(r))
	}
	for _, a := range as {
		v.Approvals = append(v.Approvals, newApproval(a))
	}
	return v
}

// duplicateView is a call the duplicate-intent guard caught, as a page says
// it: it was not run, and the model was told the outcome of the earlier call
// it repeats.
type duplicateView struct {
	Of    string // the earlier call's tool use id
	State string // what the ledger holds of the earlier call now
}

// earlierState says what the ledger holds of the earlier call a caught
// duplicate repeats: recorded (failed or not) or not recorded, its outcome
// unknown.
func earlierState(found, recorded, failed bool) string {
	switch {
	case !found:
		return "not in this ledger page"
	case failed:
		return "recorded as failed; the model was told its error"
	case recorded:
		return "recorded; the model was given its output"
	}
	return "not recorded, its outcome unknown; the model was told it may have taken effect"
}

// sessionOutputURL is the address of a session call's whole output.
func sessionOutputURL(id, toolUseID string) string {
	return "/sessions/" + url.PathEscape(id) + "/output?" + url.Values{"tool_use_id": {toolUseID}}.Encode()
}

// threadOutputURL is the address of a thread call's whole output.
func threadOutputURL(thread, ns, toolUseID string) string {
	return "/graph/output?" + url.Values{"id": {thread}, "ns": {ns}, "tool_use_id": {toolUseID}}.Encode()
}

// sessionOutput serves the whole recorded output of one of a session's
// calls as plain text, for the "show all" of an output the page cut.
func (s *Server) sessionOutput(w http.ResponseWriter, r *http.Request) {
	id, tu := r.PathValue("id"), r.URL.Query().Get("tool_use_id")
	ctx, cancel := s.rpc(r)
	defer cancel()
	rows, _, err := s.ledger(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, row := range rows {
		if row.E.GetToolUseId() == tu && row.Has {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, row.E.GetEffect().GetOutput())
			return
		}
	}
	s.refuse(w, r, http.StatusNotFound, "NO_SUCH_OUTPUT", fmt.Sprintf("The ledger of %s has no recorded output for tool use %q.", id, tu))
}

// threadOutputPage serves the whole recorded output of one of a thread's
// calls as plain text, decoded as the Thread page decodes it.
func (s *Server) threadOutputPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctx, cancel := s.rpc(r)
	defer cancel()
	effects, err := s.opts.Client.ThreadEffects(ctx, q.Get("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, e := range effects {
		if e.GetCheckpointNs() == q.Get("ns") && e.GetToolUseId() == q.Get("tool_use_id") && e.GetOutput() != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, wholeValueText(e.GetOutput()))
			return
		}
	}
	s.refuse(w, r, http.StatusNotFound, "NO_SUCH_OUTPUT", fmt.Sprintf("The ledger of thread %q has no recorded output for tool use %q in namespace %s.", q.Get("id"), q.Get("tool_use_id"), nsName(q.Get("ns"))))
}

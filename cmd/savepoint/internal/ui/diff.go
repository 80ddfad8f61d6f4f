package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

type fieldChange struct{ Field, From, To string }

type diffData struct {
	ID               string
	From, To         uint64
	Fields           []fieldChange
	Common           int // the messages both histories share, from the start
	Removed, Added   []messageView
	PendingRemoved   []*savepointv1.ToolUse
	PendingAdded     []*savepointv1.ToolUse
	PendingUnchanged int
}

// diffRevisions compares two revisions of a session: their fields, their
// histories (the shared prefix, then what each has after it) and their
// pending tool uses by tool_use_id.
func diffRevisions(a, b *savepointv1.Checkpoint) diffData {
	d := diffData{ID: a.GetSessionId(), From: a.GetRevision(), To: b.GetRevision()}
	field := func(name, x, y string) {
		if x != y {
			d.Fields = append(d.Fields, fieldChange{name, x, y})
		}
	}
	field("task", a.GetTask(), b.GetTask())
	field("turn", fmt.Sprint(a.GetTurn()), fmt.Sprint(b.GetTurn()))
	field("tokens used", fmt.Sprint(a.GetTokensUsed()), fmt.Sprint(b.GetTokensUsed()))
	field("messages", fmt.Sprint(a.GetMessageCount()), fmt.Sprint(b.GetMessageCount()))
	field("state", prettyJSON(a.GetStateJson()), prettyJSON(b.GetStateJson()))
	field("labels", labelText(a.GetLabels()), labelText(b.GetLabels()))
	am, bm := a.GetMessages(), b.GetMessages()
	for d.Common < len(am) && d.Common < len(bm) && proto.Equal(am[d.Common], bm[d.Common]) {
		d.Common++
	}
	for i := d.Common; i < len(am) && i < d.Common+maxMessages; i++ {
		d.Removed = append(d.Removed, viewMessage(i, am[i]))
	}
	for i := d.Common; i < len(bm) && i < d.Common+maxMessages; i++ {
		d.Added = append(d.Added, viewMessage(i, bm[i]))
	}
	inA := map[string]*savepointv1.ToolUse{}
	for _, p := range a.GetPendingToolUses() {
		inA[p.GetToolUseId()] = p
	}
	for _, p := range b.GetPendingToolUses() {
		if q, ok := inA[p.GetToolUseId()]; ok && proto.Equal(p, q) {
			d.PendingUnchanged++
			delete(inA, p.GetToolUseId())
			continue
		}
		d.PendingAdded = append(d.PendingAdded, p)
	}
	for _, p := range a.GetPendingToolUses() {
		if _, ok := inA[p.GetToolUseId()]; ok {
			d.PendingRemoved = append(d.PendingRemoved, p)
		}
	}
	return d
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	from, err1 := revisionParam(r, "from")
	to, err2 := revisionParam(r, "to")
	if err := cmpErr(err1, err2); err != nil || from == 0 || to == 0 {
		msg := "A diff needs two revisions, from and to."
		if err != nil {
			msg = err.Error()
		}
		s.refuse(w, r, http.StatusBadRequest, "BAD_REVISION", msg)
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	a, err := s.opts.Client.GetSession(ctx, id, from)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.opts.Client.GetSession(ctx, id, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "diff", fmt.Sprintf("%s: revision %d to %d", id, from, to), "sessions", diffRevisions(a, b))
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// export serves a revision as `savepoint export` prints it: the checkpoint
// with its whole history, the latest revision, and Reconcile's view when
// the revision is the latest.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
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
		s.fail(w, r, err)
		return
	}
	rec, err := s.opts.Client.ReconcileView(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Checkpoint     json.RawMessage `json:"checkpoint"`
		LatestRevision string          `json:"latestRevision"`
		Reconcile      json.RawMessage `json:"reconcile,omitempty"`
	}{LatestRevision: strconv.FormatUint(rec.GetRevision(), 10)}
	out.Checkpoint, _ = protojson.Marshal(cp)
	if rec.GetRevision() == cp.GetRevision() {
		out.Reconcile, _ = protojson.Marshal(rec)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		s.refuse(w, r, http.StatusInternalServerError, "EXPORT_FAILED", "The export could not be encoded: "+err.Error()+".")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-r%d.json"`, id, cp.GetRevision()))
	buf.WriteTo(w)
}

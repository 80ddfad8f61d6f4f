package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/internal/cli"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// maxGraphRead bounds the checkpoints one graph page reads.
const maxGraphRead = 5000

// tuple is one checkpoint as ListCheckpoints streams it, its values whole.
type tuple struct {
	CP     *savepointv1.GraphCheckpoint
	Blobs  []*savepointv1.ChannelBlob
	Writes []*savepointv1.PendingWrite
}

// tuplePart is a message of a GetCheckpoint or ListCheckpoints stream.
type tuplePart interface {
	GetCheckpoint() *savepointv1.GraphCheckpoint
	GetBlobs() []*savepointv1.ChannelBlob
	GetPendingWrites() []*savepointv1.PendingWrite
	GetValueChunk() []byte
}

// readTuples reads a GetCheckpoint or ListCheckpoints stream into tuples,
// joining each value continued in value_chunk, and stops after limit
// tuples (cut is then true).
func readTuples[M any, PM interface {
	*M
	tuplePart
}](stream grpc.ServerStreamingClient[M], limit int) (out []*tuple, cut bool, err error) {
	var open *savepointv1.TypedValue // the last value, while incomplete
	track := func(v *savepointv1.TypedValue) {
		if v != nil && int64(len(v.GetData())) < v.GetTotalSize() {
			open = v
		}
	}
	for {
		msg, err := stream.Recv()
		m := PM(msg)
		if errors.Is(err, io.EOF) {
			return out, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if c := m.GetValueChunk(); len(c) > 0 && open != nil {
			open.Data = append(open.Data, c...)
			if int64(len(open.Data)) >= open.GetTotalSize() {
				open = nil
			}
			continue
		}
		if m.GetCheckpoint() != nil {
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, &tuple{CP: m.GetCheckpoint()})
			track(m.GetCheckpoint().GetCheckpoint())
		}
		if len(out) == 0 {
			continue
		}
		t := out[len(out)-1]
		for _, b := range m.GetBlobs() {
			t.Blobs = append(t.Blobs, b)
			track(b.GetValue())
		}
		for _, w := range m.GetPendingWrites() {
			t.Writes = append(t.Writes, w)
			track(w.GetValue())
		}
	}
}

// threads lists the graph threads a page at a time (ListThreads), with
// when each was last written.
func (s *Server) threads(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.rpc(r)
	defer cancel()
	resp, err := s.opts.Client.Graph().ListThreads(ctx, &savepointv1.ListThreadsRequest{PageSize: 100, PageToken: r.URL.Query().Get("page")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	next := ""
	if t := resp.GetNextPageToken(); t != "" {
		next = "/graph?" + url.Values{"page": {t}}.Encode()
	}
	// Each thread's ledger is read for its counts: one ListThreadEffects
	// per thread of the page (at most 100).
	rows := make([]threadRow, 0, len(resp.GetThreads()))
	for _, th := range resp.GetThreads() {
		effects, err := s.opts.Client.ThreadEffects(ctx, th.GetThreadId())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rows = append(rows, threadRow{GraphThread: th, Calls: len(effects), Counts: cli.CountThreadLedger(effects)})
	}
	s.render(w, r, http.StatusOK, "threads", "Graph threads", "graph", struct {
		Threads  []threadRow
		NextPage string
	}{rows, next})
}

// threadRow is one thread of the Graph threads page, with its ledger's
// counts.
type threadRow struct {
	*savepointv1.GraphThread
	Calls  int
	Counts cli.LedgerCounts
}

func nsName(ns string) string {
	if ns == "" {
		return "(root)"
	}
	return ns
}

type blobView struct {
	Channel, Version string
	Value            decodedValue
	All              string // the whole value's URL, when Value was cut
}

type writeView struct {
	Idx     int32
	Channel string
	Value   decodedValue
	All     string
}

type taskView struct {
	TaskID, TaskPath string
	Writes           []writeView
}

type checkpointView struct {
	ID, Parent, Metadata string
	Versions             string
	Value                decodedValue
	All                  string
	Blobs                []blobView
	Tasks                []taskView
}

type namespaceView struct {
	Name        string
	Checkpoints []checkpointView
}

func (s *Server) thread(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		s.refuse(w, r, http.StatusBadRequest, "MISSING_THREAD", "Name the thread: /graph/thread?id=THREAD.")
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	stream, err := s.opts.Client.Graph().ListCheckpoints(ctx, &savepointv1.ListCheckpointsRequest{ThreadId: id})
	var tuples []*tuple
	var cut bool
	if err == nil {
		tuples, cut, err = readTuples(stream, maxGraphRead)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	effects, err := s.opts.Client.ThreadEffects(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(tuples) == 0 && len(effects) == 0 {
		s.refuse(w, r, http.StatusNotFound, "THREAD_NOT_FOUND", fmt.Sprintf("No checkpoint and no ledger entry is stored for thread %q.", id))
		return
	}
	var nss []*namespaceView
	byNS := map[string]*namespaceView{}
	for _, t := range tuples {
		ns := nsName(t.CP.GetCheckpointNs())
		nv := byNS[ns]
		if nv == nil {
			nv = &namespaceView{Name: ns}
			byNS[ns] = nv
			nss = append(nss, nv)
		}
		cv := checkpointView{ID: t.CP.GetCheckpointId(), Parent: t.CP.GetParentCheckpointId(), Metadata: prettyJSON(t.CP.GetMetadataJson()),
			Versions: labelText(t.CP.GetChannelVersions())}
		at := url.Values{"id": {id}, "ns": {t.CP.GetCheckpointNs()}, "checkpoint": {t.CP.GetCheckpointId()}}
		all := func(v decodedValue, extra ...string) string {
			if !v.Cut {
				return ""
			}
			u := maps.Clone(at)
			for i := 0; i+1 < len(extra); i += 2 {
				u.Set(extra[i], extra[i+1])
			}
			return "/graph/value?" + u.Encode()
		}
		if v := t.CP.GetCheckpoint(); v != nil {
			cv.Value = decodeValue(v.GetType(), v.GetData(), v.GetTotalSize())
			cv.All = all(cv.Value)
		}
		for _, b := range t.Blobs {
			bv := blobView{Channel: b.GetChannel(), Version: b.GetVersion(), Value: decodeValue(b.GetValue().GetType(), b.GetValue().GetData(), b.GetValue().GetTotalSize())}
			bv.All = all(bv.Value, "channel", b.GetChannel(), "version", b.GetVersion())
			cv.Blobs = append(cv.Blobs, bv)
		}
		for _, pw := range t.Writes {
			n := len(cv.Tasks)
			if n == 0 || cv.Tasks[n-1].TaskID != pw.GetTaskId() || cv.Tasks[n-1].TaskPath != pw.GetTaskPath() {
				cv.Tasks = append(cv.Tasks, taskView{TaskID: pw.GetTaskId(), TaskPath: pw.GetTaskPath()})
				n++
			}
			wv := writeView{Idx: pw.GetIdx(), Channel: pw.GetChannel(), Value: decodeValue(pw.GetValue().GetType(), pw.GetValue().GetData(), pw.GetValue().GetTotalSize())}
			wv.All = all(wv.Value, "task", pw.GetTaskId(), "idx", fmt.Sprint(pw.GetIdx()))
			cv.Tasks[n-1].Writes = append(cv.Tasks[n-1].Writes, wv)
		}
		nv.Checkpoints = append(nv.Checkpoints, cv)
	}
	s.render(w, r, http.StatusOK, "thread", "Thread "+id, "graph", struct {
		ID         string
		Namespaces []*namespaceView
		Cut        bool
		Ledger     []threadEffectView
		Counts     cli.LedgerCounts
	}{id, nss, cut, threadEffectViews(effects), cli.CountThreadLedger(effects)})
}

// threadEffectView is one row of a thread's ledger: the entry and what a
// node running the call again is answered (client.NextBegin).
type threadEffectView struct {
	E          *savepointv1.ThreadEffect
	NS         string
	Class      string
	State      string
	Begun      string
	Recorded   string
	Output     *outputView     // the recorded output; nil while begun
	Resolution *resolutionView // how the call was settled when it was in doubt
	Approval   *approvalView   // its approval record, for a call that requires approval
	Duplicate  *duplicateView  // set when the duplicate-intent guard caught the call: it never ran
	Earlier    earlierView     // the resolutions and approval decisions before the current ones
	Next       string
	Why        string
}

func threadEffectViews(effects []*savepointv1.ThreadEffect) []threadEffectView {
	type key struct{ ns, id string }
	byID := make(map[key]*savepointv1.ThreadEffect, len(effects))
	for _, e := range effects {
		byID[key{e.GetCheckpointNs(), e.GetToolUseId()}] = e
	}
	var out []threadEffectView
	for _, e := range effects {
		d, why := client.NextBegin(e)
		next := map[savepointv1.Decision]string{savepointv1.Decision_DECISION_REUSE: "reuse",
			savepointv1.Decision_DECISION_RUN: "re-run", savepointv1.Decision_DECISION_IN_DOUBT: "in doubt",
			savepointv1.Decision_DECISION_AWAIT_APPROVAL: "awaits approval", savepointv1.Decision_DECISION_DENIED: "denied"}[d]
		v := threadEffectView{E: e, NS: nsName(e.GetCheckpointNs()), Class: effectClassText(e.GetEffectClass()),
			State: strings.ToLower(strings.TrimPrefix(e.GetState().String(), "THREAD_EFFECT_STATE_")),
			Begun: formatTime(e.GetBeginTime()), Recorded: formatTime(e.GetRecordTime()), Next: next, Why: why}
		if o := e.GetOutput(); o != nil {
			v.Output = threadOutput(o, threadOutputURL(e.GetThreadId(), e.GetCheckpointNs(), e.GetToolUseId()))
		}
		v.Resolution = newResolution(e.GetResolution())
		v.Approval = newApproval(e.GetApproval())
		v.Earlier = newEarlier(e.GetResolutions(), e.GetApprovals(), e.GetApproval())
		if of := e.GetDuplicateOf(); of != "" {
			v.Next, v.State, v.Begun = "not run", "not run", "-"
			p := byID[key{e.GetCheckpointNs(), of}]
			v.Duplicate = &duplicateView{Of: of, State: earlierState(p != nil, p.GetOutput() != nil,
				p.GetState() == savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED)}
		}
		out = append(out, v)
	}
	return out
}

var graphActions = map[string]string{"copy": "Copy thread", "prune": "Prune thread", "delete": "Delete thread"}

func (s *Server) graphConfirm(w http.ResponseWriter, r *http.Request) {
	action, id := r.PathValue("action"), r.URL.Query().Get("id")
	if graphActions[action] == "" {
		s.refuse(w, r, http.StatusNotFound, "NO_SUCH_PAGE", "The inspector has no page at "+r.URL.Path+".")
		return
	}
	if s.opts.ReadOnly {
		s.refuse(w, r, http.StatusForbidden, "READ_ONLY", "This inspector was started with --read-only: it takes no action.")
		return
	}
	s.render(w, r, http.StatusOK, "graphconfirm", graphActions[action]+" "+id, "graph", struct{ ID, Action string }{id, action})
}

func (s *Server) graphAct(w http.ResponseWriter, r *http.Request) {
	action, id := r.PathValue("action"), r.PostFormValue("id")
	if graphActions[action] == "" || id == "" {
		s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A graph action needs its thread and one of copy, prune or delete.")
		return
	}
	ctx, cancel := s.rpc(r)
	defer cancel()
	g := s.opts.Client.Graph()
	res := &resultData{ID: id, Action: action, Next: "/graph"}
	switch action {
	case "copy":
		target := strings.TrimSpace(r.PostFormValue("target"))
		if target == "" {
			s.refuse(w, r, http.StatusBadRequest, "BAD_FORM", "A copy needs the id of the target thread.")
			return
		}
		resp, err := g.CopyThread(ctx, &savepointv1.CopyThreadRequest{SourceThreadId: id, TargetThreadId: target})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		res.Lines = []string{fmt.Sprintf("Copied %d checkpoints of thread %s into thread %s.", resp.GetCopiedCheckpoints(), id, target)}
	case "prune":
		st := savepointv1.PruneStrategy_PRUNE_STRATEGY_KEEP_LATEST
		if r.PostFormValue("strategy") == "delete" {
			st = savepointv1.PruneStrategy_PRUNE_STRATEGY_DELETE
		}
		resp, err := g.Prune(ctx, &savepointv1.PruneRequest{ThreadIds: []string{id}, Strategy: st})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		res.Lines = []string{fmt.Sprintf("Pruned thread %s: %d checkpoints deleted.", id, resp.GetDeletedCheckpoints())}
	case "delete":
		if _, err := g.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: id}); err != nil {
			s.fail(w, r, err)
			return
		}
		res.Lines = []string{fmt.Sprintf("Deleted thread %s: its checkpoints and writes are gone.", id)}
	}
	s.render(w, r, http.StatusOK, "result", graphActions[action]+" "+id, "graph", res)
}

// value serves one whole value of a checkpoint, decoded as the thread page
// decodes it, for the "show all" of a value the page cut: the checkpoint's
// own value, a channel's (channel, version) or a pending write's (task,
// idx).
func (s *Server) value(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctx, cancel := s.rpc(r)
	defer cancel()
	stream, err := s.opts.Client.Graph().GetCheckpoint(ctx, &savepointv1.GetCheckpointRequest{ThreadId: q.Get("id"), CheckpointNs: q.Get("ns"), CheckpointId: q.Get("checkpoint")})
	var tuples []*tuple
	if err == nil {
		tuples, _, err = readTuples(stream, 1)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var v *savepointv1.TypedValue
	if len(tuples) == 1 {
		t := tuples[0]
		switch {
		case q.Has("channel"):
			for _, b := range t.Blobs {
				if b.GetChannel() == q.Get("channel") && b.GetVersion() == q.Get("version") {
					v = b.GetValue()
				}
			}
		case q.Has("task"):
			for _, pw := range t.Writes {
				if pw.GetTaskId() == q.Get("task") && fmt.Sprint(pw.GetIdx()) == q.Get("idx") {
					v = pw.GetValue()
				}
			}
		default:
			v = t.CP.GetCheckpoint()
		}
	}
	if v == nil {
		s.refuse(w, r, http.StatusNotFound, "NO_SUCH_VALUE", "The checkpoint has no such value.")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, wholeValueText(v)+"\n")
}

// wholeValueText is the whole of v as text: decoded as decodeValue decodes
// it, but never cut; a value it does not decode is named by its type, size
// and why.
func wholeValueText(v *savepointv1.TypedValue) string {
	d := decodeValue(v.GetType(), v.GetData(), v.GetTotalSize())
	if !d.Decoded {
		return fmt.Sprintf("%s, %d bytes: %s", v.GetType(), v.GetTotalSize(), d.Note)
	}
	if v.GetType() == "msgpack" {
		x, _ := decodeMsgpack(v.GetData())
		b, _ := json.MarshalIndent(x, "", "  ")
		return string(b)
	}
	return prettyJSON(string(v.GetData()))
}

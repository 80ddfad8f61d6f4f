package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/savepoint-dev/savepoint/daemon/graphtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The graph harness's short form (go test, make test) is 3 cycles of 8
// writers; make crashtest-graph passes -graph-cycles and -graph-clients.
var (
	flagGraphCycles  = flag.Int("graph-cycles", 3, "crash cycles of the graph harness (make crashtest-graph: CYCLES)")
	flagGraphClients = flag.Int("graph-clients", 8, "concurrent graph writers, each on its own thread (make crashtest-graph: CLIENTS)")
)

// TestGraphCrashDurability runs concurrent GraphCheckpointService writers
// (checkpoints with blobs, pending writes, special-index upserts, streamed
// uploads of several MiB, thread deletes, the thread ledger's begins and
// records) against the real savepointd while
// it is killed with SIGKILL at random moments. After each restart every
// writer retries its write in flight at the kill (the same request id), and
// every write acknowledged so far is read back and compared byte for byte;
// a delete must stay deleted. Any lost or torn write fails the test.
func TestGraphCrashDurability(t *testing.T) {
	rep := runGraphCrash(t, binary(t, false), *flagGraphCycles, *flagGraphClients, *flagSeed)
	fmt.Println(rep.line())
	if rep.lost > 0 || rep.unexpected > 0 || rep.acked == 0 {
		t.Fatalf("%s unexpected=%d: %v", rep.line(), rep.unexpected, rep.notes)
	}
}

// TestGraphCrashHarnessDetectsLoss runs the graph harness against the build
// that acknowledges before it commits, and requires it to report losses.
func TestGraphCrashHarnessDetectsLoss(t *testing.T) {
	rep := runGraphCrash(t, binary(t, true), 2, 6, *flagSeed)
	fmt.Printf("broken build (the broken fault), graph harness: %s\n", rep.line())
	if rep.lost == 0 {
		t.Fatalf("the graph harness did not detect the losses of the broken build: %s", rep.line())
	}
}

type graphReport struct {
	cycles            int
	acked, lost       int64
	unexpected        int64
	notes             []string
	uploads, inDoubts int64
	ledger            int64
}

func (r graphReport) line() string {
	return fmt.Sprintf("graph crash-cycles=%d acked-graph-writes=%d (uploads %d, ledger begins and records %d, in doubt at a kill %d) lost=%d",
		r.cycles, r.acked, r.uploads, r.ledger, r.inDoubts, r.lost)
}

// graphWriter owns one thread and the model of what it must hold.
type graphWriter struct {
	id     int
	thread string
	rng    *rand.Rand
	next   int                    // next checkpoint number; ids only grow
	model  map[string]*graphModel // checkpoint id -> acknowledged content
	dead   map[string]bool        // ids acknowledged deleted (by DeleteThread)
	fresh  map[string]bool        // ids written or deleted since the last verify
	flight *graphOp               // the write in flight at the kill
	// The thread's ledger as acknowledged: tool use id -> entry; open is
	// the call begun and not yet recorded ("" for none); calls numbers them.
	effects map[string]*effectModel
	open    string
	calls   int
}

type effectModel struct {
	attempts uint32
	state    savepointv1.ThreadEffectState
	output   string
	input    string
	class    savepointv1.EffectClass
}

type graphModel struct {
	metadata string
	blobs    map[string][32]byte // channel -> digest
	writes   map[string]string   // "task/idx" -> value
}

type graphOp struct {
	put    *savepointv1.PutCheckpointRequest
	upload bool
	writes *savepointv1.PutWritesRequest
	delete bool
	begin  *savepointv1.BeginThreadEffectRequest
	record *savepointv1.RecordThreadEffectRequest
	// The answers of an acknowledged begin or record.
	begun    *savepointv1.BeginThreadEffectResponse
	recorded *savepointv1.RecordThreadEffectResponse
}

type graphRun struct {
	mu                      sync.Mutex
	notes                   []string
	acked, lost, unexpected atomic.Int64
	uploads, inDoubts       atomic.Int64
	ledger                  atomic.Int64
	graph                   savepointv1.GraphCheckpointServiceClient
	budget                  int
}

func (r *graphRun) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.notes) < 20 {
		r.notes = append(r.notes, fmt.Sprintf(format, args...))
	}
}

func runGraphCrash(t *testing.T, bin string, cycles, clients int, seed uint64) graphReport {
	p := newProc(t, bin)
	p.mustStart()
	return runGraphFaults(t, p, cycles, clients, seed, graphFault{crash: p.kill, recover: func() *proc {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		return p
	}})
}

// graphFault is the fault the graph harness injects each cycle: crash makes
// it happen (the load stops with it), down, when set, runs while it holds,
// and recover ends it and returns the daemon the writes in flight are
// retried, and the acknowledged ones read back, through.
type graphFault struct {
	crash   func()
	down    func(g savepointv1.GraphCheckpointServiceClient)
	recover func() *proc
}

// runGraphFaults runs the graph harness on the running daemon p: cycles
// times it loads p with clients writers, injects f, recovers, retries the
// writes in flight and reads back every acknowledged write; at the end it
// runs Verify.
func runGraphFaults(t *testing.T, p *proc, cycles, clients int, seed uint64, f graphFault) graphReport {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("graph crash harness: %d cycles, %d writers, seed %d (rerun with -seed=%d)", cycles, clients, seed, seed)
	run := &graphRun{budget: 3 << 20}
	run.graph = savepointv1.NewGraphCheckpointServiceClient(p.conn)
	rng := rand.New(rand.NewPCG(seed, 99))
	ws := make([]*graphWriter, clients)
	for i := range ws {
		ws[i] = &graphWriter{id: i, thread: fmt.Sprintf("g%d-%s", i, uuid.NewString()[:8]), rng: rand.New(rand.NewPCG(seed, uint64(i)+1000)),
			model: map[string]*graphModel{}, dead: map[string]bool{}, fresh: map[string]bool{}, effects: map[string]*effectModel{}}
	}
	all := func(fn func(w *graphWriter)) {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() { defer wg.Done(); fn(w) }()
		}
		wg.Wait()
	}
	done := 0
	for cycle := 1; cycle <= cycles; cycle++ {
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() { defer wg.Done(); run.load(w, &stop) }()
		}
		loadFor := 200*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond)))
		time.Sleep(loadFor)
		f.crash()
		stop.Store(true)
		wg.Wait()
		done++
		if f.down != nil {
			f.down(run.graph)
		}
		p = f.recover()
		run.graph = savepointv1.NewGraphCheckpointServiceClient(p.conn)
		all(func(w *graphWriter) { run.resolve(w) })
		all(func(w *graphWriter) { run.verify(w, false) })
		t.Logf("cycle %d/%d: fault after %v; %d graph writes acknowledged so far, lost=%d", cycle, cycles,
			loadFor.Round(time.Millisecond), run.acked.Load(), run.lost.Load())
	}
	if p.running() {
		all(func(w *graphWriter) { run.verify(w, true) })
		ctx, cancel := ctxVerify()
		vr, err := p.client.Verify(ctx, &savepointv1.VerifyRequest{})
		cancel()
		if err != nil || len(vr.DamagedSessions) > 0 {
			run.unexpected.Add(1)
			run.note("Verify: %v %v", err, vr.GetDamagedSessions())
		}
	}
	for _, n := range run.notes {
		t.Log(n)
	}
	return graphReport{cycles: done, acked: run.acked.Load(), lost: run.lost.Load(), unexpected: run.unexpected.Load(),
		notes: run.notes, uploads: run.uploads.Load(), inDoubts: run.inDoubts.Load(), ledger: run.ledger.Load()}
}

func graphData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return b
}

// nextOp makes the writer's next write.
func (w *graphWriter) nextOp() *graphOp {
	id := fmt.Sprintf("%08d", w.next)
	switch r := w.rng.IntN(20); {
	case r == 0 && len(w.model) > 0:
		return &graphOp{delete: true}
	case r >= 16:
		return w.effectOp()
	case r < 7 && w.next > 0:
		// Writes to the latest checkpoint, deleted or not: plain indexes,
		// or an upsert of special ones.
		latest := fmt.Sprintf("%08d", w.next-1)
		req := &savepointv1.PutWritesRequest{ThreadId: w.thread, CheckpointId: latest, TaskId: fmt.Sprintf("task%d", w.rng.IntN(3)),
			TaskPath: "p", RequestId: uuid.NewString()}
		if w.rng.IntN(3) == 0 {
			req.Writes = []*savepointv1.ChannelWrite{{Idx: -1, Channel: "__error__", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(fmt.Sprintf(`"e%d"`, w.rng.IntN(1000)))}}}
		} else {
			for i := range 1 + w.rng.IntN(4) {
				req.Writes = append(req.Writes, &savepointv1.ChannelWrite{Idx: int32(i), Channel: "c", Value: &savepointv1.TypedValue{Type: "json", Data: graphData(w.rng, 8+w.rng.IntN(64))}})
			}
		}
		return &graphOp{writes: req}
	}
	w.next++
	upload := w.rng.IntN(8) == 0
	versions := map[string]string{"a": id, "b": id}
	req := &savepointv1.PutCheckpointRequest{RequestId: uuid.NewString(), Checkpoint: &savepointv1.GraphCheckpoint{
		ThreadId: w.thread, CheckpointId: id, ParentCheckpointId: fmt.Sprintf("%08d", w.next-2),
		Checkpoint:      &savepointv1.TypedValue{Type: "json", Data: graphData(w.rng, 64)},
		ChannelVersions: versions, MetadataJson: fmt.Sprintf(`{"step":%d,"writer":%d}`, w.next, w.id),
	}}
	for _, ch := range []string{"a", "b"} {
		n := 16 + w.rng.IntN(4<<10)
		switch {
		case upload:
			n = 1<<20 + w.rng.IntN(2<<20) // several staged chunks each
		case w.rng.IntN(10) == 0:
			n = 1<<20 + w.rng.IntN(256<<10) // over Badger's value threshold
		}
		req.Blobs = append(req.Blobs, &savepointv1.ChannelBlob{Channel: ch, Version: id, Value: &savepointv1.TypedValue{Type: "bytes", Data: graphData(w.rng, n)}})
	}
	return &graphOp{put: req, upload: upload}
}

// effectOp makes the writer's next ledger write: the record of its open
// call, a new attempt of a failed call, or the begin of a new call.
func (w *graphWriter) effectOp() *graphOp {
	if id := w.open; id != "" {
		e := w.effects[id]
		out := fmt.Sprintf(`"out %d"`, w.rng.IntN(1000))
		return &graphOp{record: &savepointv1.RecordThreadEffectRequest{ThreadId: w.thread, ToolUseId: id, Attempt: e.attempts,
			Output: &savepointv1.TypedValue{Type: "json", Data: []byte(out)}, IsError: w.rng.IntN(3) == 0, RequestId: uuid.NewString()}}
	}
	for id, e := range w.effects {
		if e.state == savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED && w.rng.IntN(2) == 0 {
			return &graphOp{begin: &savepointv1.BeginThreadEffectRequest{ThreadId: w.thread, ToolUseId: id, Name: "tool",
				InputJson: e.input, EffectClass: e.class, RequestId: uuid.NewString()}}
		}
	}
	w.calls++
	return &graphOp{begin: &savepointv1.BeginThreadEffectRequest{ThreadId: w.thread, ToolUseId: fmt.Sprintf("call_%d", w.calls),
		Name: "tool", InputJson: fmt.Sprintf(`{"n": %d}`, w.calls), EffectClass: savepointv1.EffectClass(w.rng.IntN(4)),
		RequestId: uuid.NewString()}}
}

func (r *graphRun) send(ctx context.Context, w *graphWriter, o *graphOp) error {
	switch {
	case o.begin != nil:
		res, err := r.graph.BeginThreadEffect(ctx, o.begin)
		o.begun = res
		return err
	case o.record != nil:
		res, err := r.graph.RecordThreadEffect(ctx, o.record)
		o.recorded = res
		return err
	case o.delete:
		_, err := r.graph.DeleteThread(ctx, &savepointv1.DeleteThreadRequest{ThreadId: w.thread})
		return err
	case o.writes != nil:
		_, err := r.graph.PutWrites(ctx, o.writes)
		return err
	case o.upload:
		_, err := graphtest.Upload(ctx, r.graph, o.put, 1<<20)
		return err
	default:
		_, err := r.graph.PutCheckpoint(ctx, o.put)
		return err
	}
}

// ack applies an acknowledged write to the writer's model.
func (r *graphRun) ack(w *graphWriter, o *graphOp) {
	r.acked.Add(1)
	switch {
	case o.delete:
		for id := range w.model {
			w.dead[id], w.fresh[id] = true, true
		}
		clear(w.model)
		clear(w.effects)
		w.open = ""
	case o.begin != nil:
		r.ledger.Add(1)
		if o.begun.GetDecision() != savepointv1.Decision_DECISION_RUN || o.begun.GetDroppedLate() {
			r.unexpected.Add(1)
			r.note("writer %d: begin of %s answered %v (dropped late %v), want RUN", w.id, o.begin.ToolUseId, o.begun.GetDecision(), o.begun.GetDroppedLate())
			return
		}
		class := o.begin.EffectClass
		if class == savepointv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
			class = savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT
		}
		w.effects[o.begin.ToolUseId] = &effectModel{attempts: o.begun.GetEffect().GetAttempts(),
			state: savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_BEGUN, input: o.begin.InputJson, class: class}
		w.open = o.begin.ToolUseId
	case o.record != nil:
		r.ledger.Add(1)
		w.open = ""
		e := w.effects[o.record.ToolUseId]
		if e == nil || o.recorded.GetDroppedLate() {
			return // the thread was deleted after the begin
		}
		e.state, e.output = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_SUCCEEDED, string(o.record.Output.Data)
		if o.record.IsError {
			e.state = savepointv1.ThreadEffectState_THREAD_EFFECT_STATE_FAILED
		}
	case o.writes != nil:
		m := w.model[o.writes.CheckpointId]
		if m == nil {
			return // the checkpoint was deleted: the write was dropped late
		}
		w.fresh[o.writes.CheckpointId] = true
		upsert := o.writes.Writes[0].Idx < 0
		for _, x := range o.writes.Writes {
			k := fmt.Sprintf("%s/%d", o.writes.TaskId, x.Idx)
			if _, ok := m.writes[k]; ok && !upsert {
				continue // insert-or-ignore: the first write stands
			}
			m.writes[k] = string(x.Value.Data)
		}
	default:
		if o.upload {
			r.uploads.Add(1)
		}
		m := &graphModel{metadata: o.put.Checkpoint.MetadataJson, blobs: map[string][32]byte{}, writes: map[string]string{}}
		for _, b := range o.put.Blobs {
			m.blobs[b.Channel] = sha256.Sum256(b.Value.Data)
		}
		w.model[o.put.Checkpoint.CheckpointId] = m
		w.fresh[o.put.Checkpoint.CheckpointId] = true
	}
}

func (r *graphRun) load(w *graphWriter, stop *atomic.Bool) {
	for !stop.Load() {
		o := w.nextOp()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := r.send(ctx, w, o)
		cancel()
		switch {
		case err == nil:
			r.ack(w, o)
		case outcomeUnknown(err):
			w.flight = o
			r.inDoubts.Add(1)
			return
		default:
			r.unexpected.Add(1)
			r.note("writer %d: %v", w.id, err)
			return
		}
	}
}

// resolve retries the write in flight at the kill: its request id (or, for
// a delete, its idempotence) makes the retry safe either way.
func (r *graphRun) resolve(w *graphWriter) {
	o := w.flight
	w.flight = nil
	if o == nil {
		return
	}
	ctx, cancel := ctxT()
	defer cancel()
	if err := r.send(ctx, w, o); err != nil {
		r.unexpected.Add(1)
		r.note("writer %d: retry after restart: %v", w.id, err)
		return
	}
	r.ack(w, o)
}

// verify reads back what the writer's model holds of the checkpoints
// written or deleted since the last verify (all of them with all), checks
// that deleted checkpoints stay deleted, and reads back the ledger.
func (r *graphRun) verify(w *graphWriter, all bool) {
	ctx, cancel := ctxT()
	if all {
		ctx, cancel = ctxVerify()
	}
	defer cancel()
	ids := w.fresh
	if all {
		ids = map[string]bool{}
		for id := range w.model {
			ids[id] = true
		}
		for id := range w.dead {
			ids[id] = true
		}
	}
	w.fresh = map[string]bool{}
	for id := range ids {
		m := w.model[id]
		if m == nil {
			continue // deleted: checked below
		}
		tp, err := graphtest.Get(ctx, r.graph, &savepointv1.GetCheckpointRequest{ThreadId: w.thread, CheckpointId: id}, r.budget)
		if err != nil {
			r.unexpected.Add(1)
			r.note("writer %d: get %s: %v", w.id, id, err)
			continue
		}
		if tp == nil {
			r.lost.Add(1)
			r.note("writer %d: acknowledged checkpoint %s is gone", w.id, id)
			continue
		}
		bad := tp.Checkpoint.MetadataJson != m.metadata || len(tp.Blobs) != len(m.blobs)
		for _, b := range tp.Blobs {
			bad = bad || sha256.Sum256(b.Value.Data) != m.blobs[b.Channel]
		}
		got := map[string]string{}
		for _, x := range tp.Writes {
			got[fmt.Sprintf("%s/%d", x.TaskId, x.Idx)] = string(x.Value.Data)
		}
		for k, v := range m.writes {
			if g, ok := got[k]; !ok || !bytes.Equal([]byte(g), []byte(v)) {
				bad = true
			}
		}
		if bad {
			r.lost.Add(1)
			r.note("writer %d: checkpoint %s differs from what was acknowledged", w.id, id)
		}
	}
	r.verifyEffects(ctx, w)
	for id := range ids {
		if _, alive := w.model[id]; alive || !w.dead[id] {
			continue
		}
		tp, err := graphtest.Get(ctx, r.graph, &savepointv1.GetCheckpointRequest{ThreadId: w.thread, CheckpointId: id}, r.budget)
		if err == nil && tp != nil {
			r.lost.Add(1) // a delete that did not hold is a lost write too
			r.note("writer %d: deleted checkpoint %s is back", w.id, id)
		}
	}
}

// verifyEffects reads back the thread's ledger: every acknowledged begin
// and record, with its attempt, state and output, and nothing else (the
// write in flight at the kill has been retried and acknowledged by now).
func (r *graphRun) verifyEffects(ctx context.Context, w *graphWriter) {
	got := map[string]*savepointv1.ThreadEffect{}
	for token, first := "", true; first || token != ""; first = false {
		page, err := r.graph.ListThreadEffects(ctx, &savepointv1.ListThreadEffectsRequest{ThreadId: w.thread, PageToken: token})
		if err != nil {
			r.unexpected.Add(1)
			r.note("writer %d: list effects: %v", w.id, err)
			return
		}
		for _, e := range page.GetEffects() {
			got[e.GetToolUseId()] = e
		}
		token = page.GetNextPageToken()
	}
	for id, m := range w.effects {
		e := got[id]
		switch {
		case e == nil:
			r.lost.Add(1)
			r.note("writer %d: acknowledged ledger entry %s is gone", w.id, id)
		case e.GetAttempts() != m.attempts || e.GetState() != m.state || string(e.GetOutput().GetData()) != m.output || e.GetEffectClass() != m.class:
			r.lost.Add(1)
			r.note("writer %d: ledger entry %s is attempt %d %v %q, acknowledged attempt %d %v %q", w.id, id,
				e.GetAttempts(), e.GetState(), e.GetOutput().GetData(), m.attempts, m.state, m.output)
		}
		delete(got, id)
	}
	for id := range got {
		r.unexpected.Add(1)
		r.note("writer %d: ledger entry %s was never acknowledged", w.id, id)
	}
}

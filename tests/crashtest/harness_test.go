package crashtest

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The short form runs in `go test ./...` (make test); make crashtest passes
// -cycles=$(CYCLES) -clients=$(CLIENTS) for the long one.
var (
	flagCycles  = flag.Int("cycles", 5, "crash cycles: kill -9 and restart savepointd this many times (make crashtest: CYCLES=50)")
	flagClients = flag.Int("clients", 32, "concurrent clients, each with its own sessions (make crashtest: CLIENTS=32)")
	flagSeed    = flag.Uint64("seed", 0, "random seed of the crash harness; 0 picks one from the clock (it is logged)")
	flagMaxLoad = flag.Duration("maxload", 700*time.Millisecond, "longest load between a restart and the next kill")
)

// TestCrashDurability runs -clients clients saving, beginning and recording
// effects against the real savepointd while it is killed with SIGKILL at
// random moments, -cycles times. After each restart it resolves the writes
// that were in flight at the kill (retrying them with the same request), reads
// back every write acknowledged since the last restart, and resumes every
// session; at the end it reads back every write acknowledged in the whole
// run. Any lost, torn or unreadable write fails the test.
func TestCrashDurability(t *testing.T) {
	cfg := crashConfig{cycles: *flagCycles, clients: *flagClients, seed: *flagSeed, maxLoad: *flagMaxLoad, big: true}
	rep := runCrash(t, binary(t, false), cfg)
	t.Logf("%d in doubt at a kill (%d had been applied before the retry), %d unexpected answers, %v",
		rep.inDoubt, rep.hadApplied, rep.unexpected, rep.elapsed.Round(time.Millisecond))
	// The one closing line (stdout, so that make crashtest shows it last).
	fmt.Println(rep.line())
	if rep.lost+rep.torn+rep.unread > 0 || rep.unexpected > 0 || rep.acked == 0 {
		t.Fatalf("%s unexpected=%d", rep.line(), rep.unexpected)
	}
}

// TestCrashHarnessDetectsLoss is the proof that the harness can fail: it
// runs the same harness against savepointd built with -tags
// the broken fault, which acknowledges each write 100 ms before it commits
// it, and requires it to report lost writes.
func TestCrashHarnessDetectsLoss(t *testing.T) {
	cfg := crashConfig{cycles: 3, clients: 8, seed: *flagSeed, maxLoad: 400 * time.Millisecond, broken: true}
	rep := runCrash(t, binary(t, true), cfg)
	fmt.Printf("broken build (the broken fault): %s (unexpected answers: %d)\n", rep.line(), rep.unexpected)
	if rep.lost == 0 {
		t.Fatalf("the harness did not detect the losses of the broken build: %s", rep.line())
	}
}

type crashConfig struct {
	cycles, clients int
	seed            uint64
	maxLoad         time.Duration
	big             bool // append an occasional message over Badger's 1 MiB value threshold
	broken          bool // the daemon under test is the broken build: expect anomalies
	// retain is the daemon's --retain-revisions: a save's revision older
	// than a session's last retain acknowledged ones may be gone (pruned,
	// as promised), but if it is read it must be exact. 0 keeps them all.
	retain int
	args   []string // extra savepointd flags (the power-cut harness)
	// verifyEach runs the Verify RPC after each restart of the power-cut
	// harness, keeping the durable image (in the system's temporary
	// directory) when it finds damage, for a look at what the restart found.
	verifyEach bool
}

type crashReport struct {
	cycles                          int
	acked                           int64
	lost, torn, unread              int
	inDoubt, hadApplied, unexpected int64
	elapsed                         time.Duration
}

func (r crashReport) line() string {
	return fmt.Sprintf("crash-cycles=%d acked-writes=%d lost=%d torn=%d unreadable=%d", r.cycles, r.acked, r.lost, r.torn, r.unread)
}

type harness struct {
	t     testing.TB
	cfg   crashConfig
	tally *tally
}

func runCrash(t *testing.T, bin string, cfg crashConfig) crashReport {
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash harness: %d cycles, %d clients, seed %d (rerun with -seed=%d)", cfg.cycles, cfg.clients, cfg.seed, cfg.seed)
	begin := time.Now()
	h := &harness{t: t, cfg: cfg, tally: newTally()}
	p := newProc(t, bin)
	p.mustStart()
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	workers := make([]*worker, cfg.clients)
	for i := range workers {
		workers[i] = &worker{h: h, id: i, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i)+1))}
	}
	all := func(fn func(w *worker)) {
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); fn(w) }()
		}
		wg.Wait()
	}
	cycles := 0
	for cycle := 1; cycle <= cfg.cycles; cycle++ {
		// Load until the kill.
		var stop atomic.Bool
		c := p.client
		acked0 := h.tally.acked.Load()
		loadFor := time.Duration(rng.Int64N(int64(cfg.maxLoad)))
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); w.load(c, &stop) }()
		}
		time.Sleep(loadFor)
		p.kill()
		stop.Store(true)
		wg.Wait()
		cycles++
		inFlight := 0
		for _, w := range workers {
			if w.inDoubt != nil {
				inFlight++
			}
		}

		// Restart; resolve the writes in flight at the kill; read back what
		// was acknowledged; resume every session.
		if err := p.start(); err != nil {
			if !cfg.broken {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			t.Logf("cycle %d: restart failed: %v", cycle, err)
			break
		}
		c = p.client
		t0 := time.Now()
		all(func(w *worker) { w.resolve(c) })
		all(func(w *worker) { w.verifyAcks(c) })
		all(func(w *worker) { w.resume(c) })
		lost, torn, unread := h.tally.counts()
		t.Logf("cycle %d/%d: killed after %v of load, %d writes acknowledged, %d in flight; restarted in %v; resolved, read back and resumed in %v (lost=%d torn=%d unreadable=%d so far)",
			cycle, cfg.cycles, loadFor.Round(time.Millisecond), h.tally.acked.Load()-acked0, inFlight,
			p.started.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), lost, torn, unread)
	}

	// Read back every write acknowledged during the whole run.
	if p.running() {
		t0 := time.Now()
		c := p.client
		all(func(w *worker) { w.verifyAll(c) })
		ctx, cancel := ctxVerify()
		vr, err := c.Verify(ctx, &savepointv1.VerifyRequest{})
		cancel()
		switch {
		case err != nil:
			h.tally.weird("Verify RPC: %v", err)
		case len(vr.DamagedSessions) > 0:
			h.tally.weird("Verify RPC lists damaged sessions: %v", vr.DamagedSessions)
		}
		if code := p.stop(); code != 0 && !cfg.broken {
			h.tally.weird("savepointd exited %d on SIGTERM", code)
		}
		if code, out, errOut := runBin(bin, "verify", "--data-dir", p.dir); code != 0 {
			h.tally.weird("savepointd verify exited %d: %s %s", code, out, errOut)
		}
		t.Logf("final read-back of every acknowledged write, Verify RPC and savepointd verify: %v", time.Since(t0).Round(time.Millisecond))
	}
	for _, n := range h.tally.notes {
		t.Log(n)
	}
	lost, torn, unread := h.tally.counts()
	return crashReport{
		cycles: cycles, acked: h.tally.acked.Load(), lost: lost, torn: torn, unread: unread,
		inDoubt: h.tally.inDoubt.Load(), hadApplied: h.tally.hadApplied.Load(), unexpected: h.tally.unexpected.Load(),
		elapsed: time.Since(begin),
	}
}

// worker is one client. It drives its current session like an agent loop
// (save with pending tool uses, begin the tracked ones, record each effect,
// save the results) and remembers every acknowledged write.
type worker struct {
	h        *harness
	id       int
	rng      *rand.Rand
	s        *session   // current session; nil starts a new one
	sessions []*session // every session this worker made
	gen      int
	inDoubt  *op   // the write in flight at the kill
	acks     []ack // acknowledged since the last read-back
}

type op struct {
	kind     int
	s        *session
	save     *savepointv1.SaveCheckpointRequest
	hist     []*savepointv1.Message // the history the save makes
	newCalls []*call
	compact  bool // set the session's compact flag once saved
	tuID     string
	rec      *savepointv1.RecordEffectRequest
}

func (w *worker) load(c savepointv1.SavepointServiceClient, stop *atomic.Bool) {
	for !stop.Load() {
		o := w.next()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.do(ctx, c, o)
		cancel()
		switch {
		case err == nil:
		case outcomeUnknown(err):
			w.inDoubt = o
			return
		default:
			if !w.h.cfg.broken {
				w.h.tally.weird("client %d: %s of %s: %v", w.id, kindNames[o.kind], o.s.id, err)
			} else {
				w.h.tally.unexpected.Add(1)
			}
			w.s = nil // abandon the session; its acknowledged writes are still checked
		}
	}
}

// do sends o once and, when it is acknowledged, records the acknowledgement.
func (w *worker) do(ctx context.Context, c savepointv1.SavepointServiceClient, o *op) error {
	switch o.kind {
	case kindSave:
		resp, err := c.SaveCheckpoint(ctx, o.save)
		if err != nil {
			return err
		}
		return w.applySave(o, resp)
	case kindBegin:
		cl := o.s.calls[o.tuID]
		resp, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: o.s.id, ToolUseId: o.tuID, Epoch: o.s.epoch})
		if err != nil {
			return err
		}
		if cl.key != "" && cl.key != resp.IdempotencyKey {
			return fmt.Errorf("BeginEffect returned key %s, earlier %s", resp.IdempotencyKey, cl.key)
		}
		cl.key = resp.IdempotencyKey
		w.acked(ack{kind: kindBegin, s: o.s, tuID: o.tuID})
		return nil
	default:
		cl := o.s.calls[o.tuID]
		resp, err := c.RecordEffect(ctx, o.rec)
		if err != nil {
			return err
		}
		e := resp.Effect
		if e.GetOutput() != cl.output || e.GetIsError() != cl.isErr || e.GetName() != cl.tu.Name || e.GetToolUseId() != o.tuID || e.GetLate() {
			return fmt.Errorf("RecordEffect answered effect %v for %s", e, o.tuID)
		}
		cl.effect = e
		w.acked(ack{kind: kindRecord, s: o.s, tuID: o.tuID})
		return nil
	}
}

func (w *worker) applySave(o *op, resp *savepointv1.SaveCheckpointResponse) error {
	s, r := o.s, o.save
	if resp.Revision != r.ExpectedRevision+1 || resp.MessageCount != uint64(len(o.hist)) {
		return fmt.Errorf("save on revision %d answered revision %d with %d messages, want %d with %d",
			r.ExpectedRevision, resp.Revision, resp.MessageCount, r.ExpectedRevision+1, len(o.hist))
	}
	s.rev, s.epoch = resp.Revision, resp.Epoch
	s.hist, s.pending = o.hist, r.PendingToolUses
	s.revs[s.rev] = &savedRev{req: r, hist: o.hist}
	s.turn, s.tokens, s.compact = r.Turn, r.TokensUsed, o.compact
	for _, cl := range o.newCalls {
		s.calls[cl.tu.ToolUseId] = cl
		s.nextTU++
	}
	w.acked(ack{kind: kindSave, s: s, rev: s.rev})
	return nil
}

func (w *worker) acked(a ack) {
	w.acks = append(w.acks, a)
	w.h.tally.acked.Add(1)
}

// next is the session's next step, like an agent loop's.
func (w *worker) next() *op {
	if w.s == nil {
		w.gen++
		w.s = newSession(fmt.Sprintf("c%02d-%d", w.id, w.gen))
		w.sessions = append(w.sessions, w.s)
	}
	s := w.s
	for _, tu := range s.pending {
		cl := s.calls[tu.ToolUseId]
		if cl.effect != nil {
			continue
		}
		if tu.BeginTracked && cl.key == "" {
			return &op{kind: kindBegin, s: s, tuID: tu.ToolUseId}
		}
		name := tu.Name
		if w.rng.IntN(2) == 0 {
			name = "" // the pending tool use's name
		}
		return &op{kind: kindRecord, s: s, tuID: tu.ToolUseId, rec: &savepointv1.RecordEffectRequest{
			SessionId: s.id, ToolUseId: tu.ToolUseId, Name: name, Output: cl.output, IsError: cl.isErr}}
	}
	return w.nextSave(s)
}

var classes = []savepointv1.EffectClass{
	savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY,
	savepointv1.EffectClass_EFFECT_CLASS_IDEMPOTENT,
	savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT,
}

func (w *worker) nextSave(s *session) *op {
	rng := w.rng
	turn := s.turn + 1
	o := &op{kind: kindSave, s: s}
	base := s.hist
	var keep *uint64
	if s.compact || len(s.hist) > 40 {
		k := uint64(min(len(s.hist), 4))
		keep, base = &k, s.hist[:k]
	}
	msg := func(role string, i int, pad int) *savepointv1.Message {
		return &savepointv1.Message{Role: role, ContentJson: fmt.Sprintf(`{"session":%q,"turn":%d,"i":%d,"text":%q}`,
			s.id, turn, i, padding(rng, pad))}
	}
	var msgs []*savepointv1.Message
	if len(s.pending) == 0 {
		msgs = append(msgs, msg("user", len(msgs), rng.IntN(400)))
	}
	for _, tu := range s.pending {
		cl := s.calls[tu.ToolUseId]
		msgs = append(msgs, &savepointv1.Message{Role: "user", ContentJson: fmt.Sprintf(
			`{"type":"tool_result","tool_use_id":%q,"content":%q,"is_error":%t}`, tu.ToolUseId, cl.output, cl.isErr)})
	}
	if w.h.cfg.big && len(base)+len(msgs) >= 4 && rng.IntN(300) == 0 {
		// Over Badger's 1 MiB value threshold: this message goes to the value log.
		msgs = append(msgs, msg("assistant", len(msgs), 1100<<10))
		o.compact = true // drop it again at the next save, to keep read-back cheap
	}
	pad := rng.IntN(1500)
	if rng.IntN(50) == 0 {
		pad = 20 << 10
	}
	msgs = append(msgs, msg("assistant", len(msgs), pad))
	var pending []*savepointv1.ToolUse
	for i := range rng.IntN(4) {
		id := fmt.Sprintf("tu-%d", s.nextTU+i)
		class := classes[rng.IntN(len(classes))]
		tu := &savepointv1.ToolUse{
			ToolUseId: id, Name: "tool_" + strings.ToLower(strings.TrimPrefix(class.String(), "EFFECT_CLASS_")),
			InputJson: fmt.Sprintf(`{"turn":%d,"n":%d}`, turn, i), EffectClass: class,
			BeginTracked: class != savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY && rng.IntN(4) != 0,
		}
		pending = append(pending, tu)
		o.newCalls = append(o.newCalls, &call{tu: tu, output: fmt.Sprintf("output of %s %s: %d", s.id, id, rng.IntN(1e9)), isErr: rng.IntN(8) == 0})
	}
	o.save = &savepointv1.SaveCheckpointRequest{
		SessionId: s.id, ExpectedRevision: s.rev, Epoch: s.epoch, RequestId: uuid.NewString(),
		Task: "crash harness task of " + s.id, Turn: turn, TokensUsed: s.tokens + uint64(rng.IntN(5000)),
		KeepMessages: keep, AppendMessages: msgs, PendingToolUses: pending,
		StateJson: fmt.Sprintf(`{"turn":%d,"client":%d}`, turn, w.id),
		Labels:    map[string]string{"client": strconv.Itoa(w.id), "parity": strconv.Itoa(int(turn % 2))},
	}
	o.hist = append(slices.Clone(base), msgs...)
	return o
}

func padding(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(rng.IntN(26))
	}
	return string(b)
}

func waitCtx() (context.Context, context.CancelFunc) { return ctxT() }

// resolve settles the write that was in flight at the kill: it checks that
// an unacknowledged save is either absent or exactly as sent, then retries
// the same request (same request_id), which must apply it exactly once.
func (w *worker) resolve(c savepointv1.SavepointServiceClient) {
	o := w.inDoubt
	if o == nil {
		return
	}
	w.inDoubt = nil
	t := w.h.tally
	t.inDoubt.Add(1)
	ctx, cancel := waitCtx()
	defer cancel()
	s := o.s
	switch o.kind {
	case kindSave:
		r := o.save
		rev := r.ExpectedRevision + 1
		gs, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: s.id})
		switch {
		case err != nil && notFound(err) && r.ExpectedRevision == 0: // never created
		case err != nil:
			t.weird("in-doubt save %s@%d: GetSession: %v", s.id, rev, err)
		case gs.Checkpoint.Revision == r.ExpectedRevision: // not applied
		case gs.Checkpoint.Revision == rev:
			t.hadApplied.Add(1)
			cp, msgs, err := readRevision(ctx, c, s.id, rev)
			if err != nil {
				t.bad("unreadable", saveID(s, rev), "unacknowledged save: "+err.Error())
			} else if d := diffRevision(cp, msgs, rev, &savedRev{req: r, hist: o.hist}); d != "" {
				t.bad("torn", saveID(s, rev), "unacknowledged save visible in part: "+d)
			}
		default:
			t.weird("in-doubt save %s@%d: the session is at revision %d", s.id, rev, gs.Checkpoint.Revision)
		}
		resp, err := c.SaveCheckpoint(ctx, r)
		if err == nil {
			err = w.applySave(o, resp)
		}
		if err != nil {
			t.weird("retry of in-doubt save %s@%d with the same request_id: %v", s.id, rev, err)
			w.abandon(s)
			return
		}
		// Applied once: the retry made no second revision.
		if gs, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: s.id}); err != nil || gs.Checkpoint.Revision != rev {
			t.weird("after retrying save %s@%d the latest revision is %v (err %v)", s.id, rev, gs.GetCheckpoint().GetRevision(), err)
		}
	case kindBegin:
		before := ""
		rc, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.id})
		if err != nil {
			t.weird("in-doubt begin %s/%s: Reconcile: %v", s.id, o.tuID, err)
		}
		for _, r := range rc.GetResolutions() {
			if r.ToolUse.GetToolUseId() == o.tuID && r.Begun {
				before = r.IdempotencyKey
				t.hadApplied.Add(1)
			}
		}
		if err := w.do(ctx, c, o); err != nil {
			t.weird("retry of in-doubt begin %s/%s: %v", s.id, o.tuID, err)
			w.abandon(s)
			return
		}
		if k := s.calls[o.tuID].key; before != "" && k != before {
			t.weird("in-doubt begin %s/%s: the retry returned key %s, Reconcile showed %s", s.id, o.tuID, k, before)
		}
	case kindRecord:
		rc, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.id})
		if err != nil {
			t.weird("in-doubt record %s/%s: Reconcile: %v", s.id, o.tuID, err)
		}
		for _, r := range rc.GetResolutions() {
			if r.ToolUse.GetToolUseId() == o.tuID && r.Effect != nil {
				t.hadApplied.Add(1)
			}
		}
		if err := w.do(ctx, c, o); err != nil {
			t.weird("retry of in-doubt record %s/%s: %v", s.id, o.tuID, err)
			w.abandon(s)
		}
	}
}

func (w *worker) abandon(s *session) {
	if w.s == s {
		w.s = nil
	}
}

// verifyAcks reads back the writes acknowledged since the last read-back.
func (w *worker) verifyAcks(c savepointv1.SavepointServiceClient) {
	acks := w.acks
	w.acks = nil
	for _, a := range acks {
		w.check(c, a)
	}
}

// verifyAll reads back every write acknowledged during the run.
func (w *worker) verifyAll(c savepointv1.SavepointServiceClient) {
	w.acks = nil
	for _, s := range w.sessions {
		for _, rev := range slices.Sorted(maps.Keys(s.revs)) {
			w.check(c, ack{kind: kindSave, s: s, rev: rev})
		}
		for id, cl := range s.calls {
			if cl.key != "" {
				w.check(c, ack{kind: kindBegin, s: s, tuID: id})
			}
			if cl.effect != nil {
				w.check(c, ack{kind: kindRecord, s: s, tuID: id})
			}
		}
	}
}

func (w *worker) check(c savepointv1.SavepointServiceClient, a ack) {
	t := w.h.tally
	ctx, cancel := waitCtx()
	defer cancel()
	s := a.s
	switch a.kind {
	case kindSave:
		id := saveID(s, a.rev)
		cp, msgs, err := readRevision(ctx, c, s.id, a.rev)
		switch {
		case notFound(err) && w.h.cfg.retain > 0 && a.rev+uint64(w.h.cfg.retain) <= s.rev &&
			strings.Contains(reason(err), "REVISION_NOT_FOUND"):
			// Pruned by --retain-revisions, as promised.
		case notFound(err):
			t.bad("lost", id, reason(err))
		case err != nil:
			t.bad("unreadable", id, err.Error())
		default:
			if d := diffRevision(cp, msgs, a.rev, s.revs[a.rev]); d != "" {
				t.bad("torn", id, d)
			}
		}
	case kindBegin:
		cl := s.calls[a.tuID]
		if cl.effect != nil || !slices.ContainsFunc(s.pending, func(tu *savepointv1.ToolUse) bool { return tu.ToolUseId == a.tuID }) {
			return // no longer pending: a repeat cannot show the key (Resume's Reconcile checks recorded ones)
		}
		id := callID(kindBegin, s, a.tuID)
		resp, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: s.id, ToolUseId: a.tuID, Epoch: s.epoch})
		switch {
		case err != nil && (notFound(err) || strings.Contains(reason(err), "CALL_NOT_PENDING")):
			t.bad("lost", id, reason(err))
		case err != nil:
			t.bad("unreadable", id, err.Error())
		case resp.IdempotencyKey != cl.key || !resp.AlreadyBegun:
			t.bad("lost", id, fmt.Sprintf("a repeat answered key %s (already_begun %t), acknowledged %s", resp.IdempotencyKey, resp.AlreadyBegun, cl.key))
		}
	case kindRecord:
		cl := s.calls[a.tuID]
		id := callID(kindRecord, s, a.tuID)
		resp, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: s.id, ToolUseId: a.tuID, Name: cl.tu.Name, Output: cl.output, IsError: cl.isErr})
		switch {
		case notFound(err):
			t.bad("lost", id, reason(err))
		case err != nil && strings.Contains(reason(err), "EFFECT_CONFLICT"):
			t.bad("torn", id, err.Error())
		case err != nil:
			t.bad("unreadable", id, err.Error())
		case !resp.AlreadyRecorded:
			t.bad("lost", id, "a repeat was recorded anew (already_recorded false)")
		case !proto.Equal(resp.Effect, cl.effect):
			t.bad("torn", id, fmt.Sprintf("stored effect %v, acknowledged %v", resp.Effect, cl.effect))
		}
	}
}

// resume takes every session over again, as a restarted agent would, and
// checks that it resumes at its last acknowledged revision with the
// acknowledged begins and effects of its pending tool uses.
func (w *worker) resume(c savepointv1.SavepointServiceClient) {
	t := w.h.tally
	ctx, cancel := waitCtx()
	defer cancel()
	for _, s := range w.sessions {
		if s.rev == 0 {
			continue // its create was never acknowledged
		}
		id := saveID(s, s.rev)
		rr, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: s.id})
		switch {
		case notFound(err):
			t.bad("lost", id, "Resume: "+reason(err))
			w.abandon(s)
			continue
		case err != nil:
			t.bad("unreadable", id, "Resume: "+err.Error())
			w.abandon(s)
			continue
		}
		cp := rr.Checkpoint
		switch {
		case cp.Revision < s.rev:
			t.bad("lost", id, fmt.Sprintf("Resume returned revision %d", cp.Revision))
			w.abandon(s)
			continue
		case cp.Revision > s.rev:
			t.weird("Resume of %s returned revision %d, beyond the last acknowledged %d", s.id, cp.Revision, s.rev)
			w.abandon(s)
			continue
		case rr.Epoch <= s.epoch:
			t.weird("Resume of %s returned epoch %d, not above %d", s.id, rr.Epoch, s.epoch)
		}
		s.epoch = rr.Epoch
		if n := len(cp.Messages); cp.MessageCount != uint64(len(s.hist)) || n > len(s.hist) || !sameMessages(cp.Messages, s.hist[:n]) ||
			!sameToolUses(cp.PendingToolUses, s.pending) {
			t.bad("torn", id, "Resume returned a checkpoint that differs from the acknowledged save")
		}
		rc, err := c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: s.id})
		if err != nil {
			t.bad("unreadable", id, "Reconcile: "+err.Error())
			continue
		}
		if rc.Revision != s.rev || len(rc.Resolutions) != len(s.pending) {
			t.weird("Reconcile of %s: revision %d with %d resolutions, want %d with %d", s.id, rc.Revision, len(rc.Resolutions), s.rev, len(s.pending))
			continue
		}
		for i, r := range rc.Resolutions {
			tu := s.pending[i]
			cl := s.calls[tu.ToolUseId]
			if !proto.Equal(r.ToolUse, tu) {
				t.bad("torn", id, fmt.Sprintf("Reconcile returned tool use %v, saved %v", r.ToolUse, tu))
			}
			if cl.key != "" && (!r.Begun || r.IdempotencyKey != cl.key) {
				t.bad("lost", callID(kindBegin, s, tu.ToolUseId), fmt.Sprintf("Reconcile: begun %t key %q", r.Begun, r.IdempotencyKey))
			}
			if cl.effect != nil && (r.Decision != savepointv1.Decision_DECISION_REUSE || !proto.Equal(r.Effect, cl.effect)) {
				t.bad("lost", callID(kindRecord, s, tu.ToolUseId), fmt.Sprintf("Reconcile: %v with effect %v", r.Decision, r.Effect))
			}
			if want := decision(tu, cl); r.Decision != want && (cl.effect != nil) == (r.Effect != nil) {
				t.weird("Reconcile of %s/%s: %v, want %v", s.id, tu.ToolUseId, r.Decision, want)
			}
		}
	}
}

// decision is what Reconcile must answer for a pending tool use.
func decision(tu *savepointv1.ToolUse, cl *call) savepointv1.Decision {
	switch {
	case cl.effect != nil:
		return savepointv1.Decision_DECISION_REUSE
	case tu.EffectClass != savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT:
		return savepointv1.Decision_DECISION_RUN
	case tu.BeginTracked && cl.key == "":
		return savepointv1.Decision_DECISION_RUN
	default:
		return savepointv1.Decision_DECISION_IN_DOUBT
	}
}

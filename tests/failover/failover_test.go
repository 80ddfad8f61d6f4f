// Package failover_test is the failover harness (make failover): writers
// against two savepointd on one PostgreSQL primary with a streaming
// standby, while the harness kills the primary, promotes the standby, cuts
// connections through fault proxies and brings the old primary back as the
// new standby; then an oracle checks every acknowledged write on the last
// primary. Its controls (an asynchronous standby, retries without request
// ids) must make the oracle fail, and TestFailoverControls checks that
// they do.
package failover_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/core"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

var (
	cycles  = flag.Int("cycles", 2, "failovers (kills of the primary) in TestFailover")
	writers = flag.Int("writers", 4, "writers, each with its own session and graph thread")
)

// TestFailover: the harness with a synchronous standby and request-id
// retries: the oracle finds nothing lost, nothing applied twice.
func TestFailover(t *testing.T) {
	r := run(t, setup{cycles: *cycles, writers: *writers, synchronous: true, requestIDs: true})
	t.Log(r)
	if r.lost != 0 || r.twice != 0 || len(r.faults) != 0 {
		t.Fatalf("the oracle failed:\n%s", r)
	}
	if r.failovers != *cycles {
		t.Fatalf("%d failovers survived, want %d", r.failovers, *cycles)
	}
}

// TestFailoverControls: each control breaks one guarantee the harness
// relies on, and the oracle must catch it: an asynchronous standby loses
// acknowledged writes at a failover, and retrying an ambiguous commit
// without its request id applies it twice.
func TestFailoverControls(t *testing.T) {
	t.Run("asynchronous standby", func(t *testing.T) {
		r := run(t, setup{cycles: 2, writers: *writers, synchronous: false, requestIDs: true})
		t.Log(r)
		if r.lost == 0 {
			t.Fatalf("with an asynchronous standby the oracle found no lost write:\n%s", r)
		}
	})
	t.Run("retries without request ids", func(t *testing.T) {
		r := run(t, setup{cycles: 1, writers: *writers, synchronous: true, requestIDs: false})
		t.Log(r)
		if r.twice == 0 {
			t.Fatalf("retrying without request ids, the oracle found nothing applied twice:\n%s", r)
		}
	})
}

type setup struct {
	cycles, writers int
	synchronous     bool // a synchronous standby; false: asynchronous (control)
	requestIDs      bool // retries keep their request id; false: a naive client (control)
}

// report is what a run saw and what its oracle found.
type report struct {
	failovers       int
	acked           atomic.Int64 // acknowledged writes
	retries         atomic.Int64 // UNAVAILABLE answers retried
	unknown         atomic.Int64 // COMMIT_OUTCOME_UNKNOWN among them
	noWritable      atomic.Int64 // NO_WRITABLE_HOST among them
	cuts            int64
	lost, twice     int
	faults          []string
	unwritable      []time.Duration // per failover: the kill until a write succeeds
	recover         []time.Duration // per failover: the kill until a synchronous standby streams again
	mu              sync.Mutex
	writerFailures  []string
	unexpectedState int
}

func (r *report) String() string {
	return fmt.Sprintf("failovers survived %d; acknowledged writes %d; lost %d; applied twice %d; retried %d (COMMIT_OUTCOME_UNKNOWN %d, NO_WRITABLE_HOST %d); proxy cuts %d; "+
		"without a writable host %s; to recover %s; faults %d%s",
		r.failovers, r.acked.Load(), r.lost, r.twice, r.retries.Load(), r.unknown.Load(), r.noWritable.Load(), r.cuts,
		spread(r.unwritable), spread(r.recover), len(r.faults), first(r.faults, 20))
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	var sum, most time.Duration
	for _, d := range ds {
		sum += d
		most = max(most, d)
	}
	return fmt.Sprintf("mean %v max %v", (sum / time.Duration(len(ds))).Round(time.Millisecond), most.Round(time.Millisecond))
}

func first(s []string, n int) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > n {
		s = append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return "\n  " + strings.Join(s, "\n  ")
}

func (r *report) fault(format string, args ...any) {
	r.mu.Lock()
	r.faults = append(r.faults, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// cluster is two PostgreSQL nodes, one primary and one standby, whose roles
// swap at each failover; the standby replicates through a proxy with
// latency, so that an asynchronous standby lags as one on a network does.
type cluster struct {
	nodes   [2]*pgtest.Server
	primary int
	repl    *pgtest.Proxy    // the standby's replication connection, to the primary
	proxies [2]*pgtest.Proxy // savepointd's connections to each node
}

func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		c.proxies[0].Port, c.proxies[1].Port)
}

func newCluster(t *testing.T, synchronous bool) *cluster {
	a := pgtest.New(t)
	if err := a.Replicated(synchronous); err != nil {
		t.Fatal(err)
	}
	c := &cluster{}
	c.repl = pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", a.Port))
	// 20 ms each way on the replication link; an asynchronous standby
	// gets 200 ms, so that it is behind at every kill, as one under load
	// on a real network often is.
	c.repl.SetLatency(20 * time.Millisecond)
	if !synchronous {
		c.repl.SetLatency(200 * time.Millisecond)
	}
	b, err := a.NewStandbyVia(c.repl.Port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Remove)
	c.nodes = [2]*pgtest.Server{a, b}
	for i, n := range c.nodes {
		c.proxies[i] = pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", n.Port))
	}
	if err := a.WaitStreaming(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// failover kills the primary, promotes the standby and makes the old
// primary its standby, returning the time from the kill to the first
// write that succeeded (probe) and to a standby streaming again.
func (c *cluster) failover(t *testing.T, synchronous bool, probe func() error) (unwritable, recovered time.Duration, err error) {
	old, next := c.nodes[c.primary], c.nodes[1-c.primary]
	start := time.Now()
	if err := old.Kill(mrand.IntN(2) == 0); err != nil {
		return 0, 0, err
	}
	c.proxies[c.primary].CutAll()
	time.Sleep(time.Duration(mrand.IntN(500)) * time.Millisecond) // the time a person or Patroni takes to decide
	if err := next.Promote(); err != nil {
		return 0, 0, err
	}
	c.primary = 1 - c.primary
	c.repl.SetTarget(fmt.Sprintf("127.0.0.1:%d", next.Port))
	c.repl.CutAll()
	// With a synchronous standby the new primary waits for one at each
	// commit: writes resume once the old primary streams from it again.
	rebuilt := make(chan error, 1)
	go func() { rebuilt <- old.FollowVia(next, c.repl.Port) }()
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if probe() == nil {
			unwritable = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("no write succeeded within 120s of the kill")
		}
	}
	if err := <-rebuilt; err != nil {
		return 0, 0, err
	}
	if err := next.WaitStreaming(60 * time.Second); err != nil {
		return 0, 0, err
	}
	if synchronous {
		if err := next.WaitSyncStandby(60 * time.Second); err != nil {
			return 0, 0, err
		}
	}
	return unwritable, time.Since(start), nil
}

// host is one savepointd on the cluster, in this process.
type host struct {
	store *pgstore.Store
	conn  *grpc.ClientConn
	sp    savepointv1.SavepointServiceClient
	graph savepointv1.GraphCheckpointServiceClient
}

func startHost(t *testing.T, url string) *host {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, url, pgstore.Options{Schema: "savepoint", StatementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemon.DefaultConfig()
	cfg.Listen = "unix:" + daemontest.SocketPath(t)
	cfg.DataDir = t.TempDir()
	rctx, cancel := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() { exited <- daemon.Run(rctx, cfg, store, slog.New(slog.DiscardHandler)) }()
	socket := strings.TrimPrefix(cfg.Listen, "unix:")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("savepointd does not listen on %s", socket)
		}
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		<-exited
		store.Close()
	})
	return &host{store: store, conn: conn, sp: savepointv1.NewSavepointServiceClient(conn), graph: savepointv1.NewGraphCheckpointServiceClient(conn)}
}

func uuid() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// writer is one client: a session saved twice per turn (Point A with a
// pending tool use, BeginEffect, RecordEffect, Point B) and a graph thread
// (a checkpoint and one write per turn), each call on either host, retried
// on UNAVAILABLE as the clients retry: the same request, request id
// included, until it is answered.
type writer struct {
	id      int
	hosts   []*host
	r       *report
	set     setup
	session string
	rev     uint64
	msgs    []string          // acknowledged messages, in order
	keys    map[string]string // tool use id -> acknowledged idempotency key
	outputs map[string]string // tool use id -> acknowledged record
	graph   []string          // acknowledged checkpoint ids
	turn    int
}

func (w *writer) host() *host { return w.hosts[mrand.IntN(len(w.hosts))] }

// call runs fn until it is answered with something other than
// UNAVAILABLE, for up to three minutes; ambiguous reports whether an
// UNAVAILABLE came before the answer.
func (w *writer) call(fn func(h *host) error) (err error, ambiguous bool) {
	deadline := time.Now().Add(3 * time.Minute)
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		err = fn(w.host())
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
			return err, ambiguous
		}
		ambiguous = true
		w.r.retries.Add(1)
		switch reasonOf(err) {
		case "COMMIT_OUTCOME_UNKNOWN":
			w.r.unknown.Add(1)
		case "NO_WRITABLE_HOST":
			w.r.noWritable.Add(1)
		}
		if time.Now().After(deadline) {
			return err, ambiguous
		}
		time.Sleep(backoff)
	}
}

func rpcCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// save appends msg (with pending tool uses) at the writer's revision. A
// naive client (the control) retries without a request id and, answered
// REVISION_MISMATCH after an ambiguous try, reads the revision and saves
// again.
func (w *writer) save(msg string, pending []*savepointv1.ToolUse) error {
	req := &savepointv1.SaveCheckpointRequest{SessionId: w.session, ExpectedRevision: w.rev, RequestId: uuid(),
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: fmt.Sprintf("%q", msg)}}, PendingToolUses: pending}
	if !w.set.requestIDs {
		req.RequestId = ""
	}
	for {
		var res *savepointv1.SaveCheckpointResponse
		err, ambiguous := w.call(func(h *host) (err error) {
			ctx, cancel := rpcCtx()
			defer cancel()
			res, err = h.sp.SaveCheckpoint(ctx, req)
			return err
		})
		if reasonOf(err) == "REVISION_MISMATCH" && (ambiguous && !w.set.requestIDs || !w.set.synchronous) {
			// The naive client re-reads and saves again; with an
			// asynchronous standby, the revision it knew may have been lost.
			rev, gerr := w.revision()
			if gerr != nil {
				return gerr
			}
			w.rev, req.ExpectedRevision = rev, rev
			continue
		}
		if err != nil {
			return fmt.Errorf("save %s: %v", msg, err)
		}
		w.rev = res.Revision
		w.msgs = append(w.msgs, msg)
		w.r.acked.Add(1)
		return nil
	}
}

func (w *writer) revision() (uint64, error) {
	var rev uint64
	err, _ := w.call(func(h *host) error {
		ctx, cancel := rpcCtx()
		defer cancel()
		res, err := h.sp.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: w.session})
		if err == nil {
			rev = res.Checkpoint.Revision
		}
		return err
	})
	return rev, err
}

// step is one turn: Point A, BeginEffect, RecordEffect, Point B, and a
// graph checkpoint with one write.
func (w *writer) step() error {
	w.turn++
	use := fmt.Sprintf("u%d", w.turn)
	if err := w.save(fmt.Sprintf("%s A%d", w.session, w.turn), []*savepointv1.ToolUse{{ToolUseId: use, Name: "pay", InputJson: `{}`, BeginTracked: true}}); err != nil {
		return err
	}
	var key string
	err, _ := w.call(func(h *host) error {
		ctx, cancel := rpcCtx()
		defer cancel()
		res, err := h.sp.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: w.session, ToolUseId: use})
		if err == nil {
			key = res.IdempotencyKey
		}
		return err
	})
	if err != nil && !(reasonOf(err) == "CALL_NOT_PENDING" && !w.set.synchronous) {
		return fmt.Errorf("BeginEffect %s: %v", use, err)
	}
	if err == nil {
		w.keys[use] = key
		w.r.acked.Add(1)
		output := fmt.Sprintf("%q", "paid "+w.session+" "+use)
		err, _ = w.call(func(h *host) error {
			ctx, cancel := rpcCtx()
			defer cancel()
			_, err := h.sp.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: w.session, ToolUseId: use, Name: "pay", Output: output})
			return err
		})
		if err != nil && w.set.synchronous {
			return fmt.Errorf("RecordEffect %s: %v", use, err)
		}
		if err == nil {
			w.outputs[use] = output
			w.r.acked.Add(1)
		}
	}
	if err := w.save(fmt.Sprintf("%s B%d", w.session, w.turn), nil); err != nil {
		return err
	}
	return w.graphStep()
}

func (w *writer) graphStep() error {
	thread, id := w.session, fmt.Sprintf("%08d", w.turn)
	value := &savepointv1.TypedValue{Type: "json", Data: []byte(`{}`), TotalSize: 2}
	put := &savepointv1.PutCheckpointRequest{RequestId: uuid(), Checkpoint: &savepointv1.GraphCheckpoint{ThreadId: thread, CheckpointId: id,
		Checkpoint: value, ChannelVersions: map[string]string{"a": id}, MetadataJson: `{}`},
		Blobs: []*savepointv1.ChannelBlob{{Channel: "a", Version: id, Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`"` + id + `"`), TotalSize: int64(len(id) + 2)}}}}
	err, _ := w.call(func(h *host) error {
		ctx, cancel := rpcCtx()
		defer cancel()
		_, err := h.graph.PutCheckpoint(ctx, put)
		return err
	})
	if err != nil {
		return fmt.Errorf("PutCheckpoint %s: %v", id, err)
	}
	w.r.acked.Add(1)
	writes := &savepointv1.PutWritesRequest{RequestId: uuid(), ThreadId: thread, CheckpointId: id, TaskId: "task",
		Writes: []*savepointv1.ChannelWrite{{Idx: 0, Channel: "a", Value: &savepointv1.TypedValue{Type: "json", Data: []byte(`1`), TotalSize: 1}}}}
	err, _ = w.call(func(h *host) error {
		ctx, cancel := rpcCtx()
		defer cancel()
		_, err := h.graph.PutWrites(ctx, writes)
		return err
	})
	if err != nil {
		return fmt.Errorf("PutWrites %s: %v", id, err)
	}
	w.r.acked.Add(1)
	w.graph = append(w.graph, id)
	return nil
}

func run(t *testing.T, set setup) *report {
	r := &report{}
	c := newCluster(t, set.synchronous)
	hosts := []*host{startHost(t, c.url()), startHost(t, c.url())}
	ws := make([]*writer, set.writers)
	for i := range ws {
		ws[i] = &writer{id: i, hosts: hosts, r: r, set: set, session: fmt.Sprintf("w%d", i), keys: map[string]string{}, outputs: map[string]string{}}
		if err := ws[i].save(ws[i].session+" created", nil); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.step(); err != nil {
					r.mu.Lock()
					r.writerFailures = append(r.writerFailures, fmt.Sprintf("writer %d: %v", w.id, err))
					r.mu.Unlock()
					return
				}
			}
		}()
	}
	// Proxy cuts run all along: an ambiguous commit every few hundred
	// milliseconds on one of the hosts' connections, and now and then
	// another kind of cut or a burst of latency.
	cutsDone := make(chan struct{})
	go func() {
		defer close(cutsDone)
		kinds := []pgtest.Cut{pgtest.CutAfterCommit, pgtest.CutAfterCommit, pgtest.CutBeforeCommit, pgtest.CutMidTransaction, pgtest.CutBeforeStatement}
		every := func() time.Duration { return time.Duration(100+mrand.IntN(300)) * time.Millisecond }
		if !set.requestIDs {
			// The control's naive retries need commits whose answer was
			// lost: cut after COMMIT only, and more often.
			kinds = []pgtest.Cut{pgtest.CutAfterCommit}
			every = func() time.Duration { return time.Duration(30+mrand.IntN(70)) * time.Millisecond }
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(every()):
			}
			p := c.proxies[mrand.IntN(2)]
			p.Arm(kinds[mrand.IntN(len(kinds))])
			if mrand.IntN(20) == 0 {
				p.SetLatency(time.Duration(mrand.IntN(100)) * time.Millisecond)
			} else {
				p.SetLatency(0)
			}
		}
	}()
	probeID := "probe"
	probe := func() error {
		ctx, cancel := rpcCtx()
		defer cancel()
		_, err := hosts[mrand.IntN(2)].sp.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprintf("%s-%s", probeID, uuid())})
		return err
	}
	for i := range set.cycles {
		time.Sleep(time.Duration(1000+mrand.IntN(2000)) * time.Millisecond)
		unwritable, recovered, err := c.failover(t, set.synchronous, probe)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("failover %d: %v", i+1, err)
		}
		r.failovers++
		r.unwritable = append(r.unwritable, unwritable)
		r.recover = append(r.recover, recovered)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	<-cutsDone
	for _, p := range c.proxies {
		r.cuts += p.Cuts()
		p.Arm(pgtest.CutNone)
		p.SetLatency(0)
	}
	for _, f := range r.writerFailures {
		r.fault("%s", f)
	}
	check(t, r, c, ws, hosts)
	return r
}

// check is the oracle: on the last primary, every acknowledged message is
// in its session's history, in order and once; every acknowledged begin
// has its key and record its output; every acknowledged graph checkpoint
// and write is there, once. Then, through the hosts, a takeover fences the
// old owner and Reconcile decides each kind of tool use right.
func check(t *testing.T, r *report, c *cluster, ws []*writer, hosts []*host) {
	ctx := context.Background()
	direct := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.nodes[c.primary].Port)
	s, err := pgstore.Open(ctx, direct, pgstore.Options{Schema: "savepoint"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, w := range ws {
		stored, err := s.Messages(ctx, w.session, 0, 0, 1<<30, 0)
		if err != nil {
			r.fault("%s: reading its history: %v", w.session, err)
			continue
		}
		count := map[string]int{}
		var got []string
		for _, m := range stored {
			var text string
			fmt.Sscanf(m.ContentJSON, "%q", &text)
			count[text]++
			got = append(got, text)
		}
		for _, m := range w.msgs {
			switch count[m] {
			case 0:
				r.lost++
				r.fault("%s: acknowledged message %q is missing", w.session, m)
			case 1:
			default:
				r.twice++
				r.fault("%s: message %q is stored %d times", w.session, m, count[m])
			}
		}
		for _, m := range got {
			if !contains(w.msgs, m) {
				r.fault("%s: message %q was never acknowledged", w.session, m)
			}
		}
		ledger, err := s.Effects(ctx, w.session, "", 1<<20)
		if err != nil {
			r.fault("%s: reading its ledger: %v", w.session, err)
			continue
		}
		entries := map[string]core.LedgerEntry{}
		for _, e := range ledger {
			entries[e.ToolUseID] = e
		}
		for use, key := range w.keys {
			if e, ok := entries[use]; !ok || !e.Begun {
				r.lost++
				r.fault("%s: acknowledged begin of %s is missing", w.session, use)
			} else if e.IdempotencyKey != key {
				r.twice++
				r.fault("%s: %s was begun with key %s, the client was answered %s", w.session, use, e.IdempotencyKey, key)
			}
		}
		for use, out := range w.outputs {
			if e, ok := entries[use]; !ok || e.Effect == nil {
				r.lost++
				r.fault("%s: acknowledged record of %s is missing", w.session, use)
			} else if e.Effect.Output != out {
				r.fault("%s: %s's record is %q, the client recorded %q", w.session, use, e.Effect.Output, out)
			}
		}
		for _, id := range w.graph {
			var writes int
			found, err := s.GetCheckpoint(ctx, w.session, "", id, func(tp *core.GraphTuple) error { writes = len(tp.Writes); return nil })
			switch {
			case err != nil:
				r.fault("%s: reading graph checkpoint %s: %v", w.session, id, err)
			case !found:
				r.lost++
				r.fault("%s: acknowledged graph checkpoint %s is missing", w.session, id)
			case writes != 1:
				r.fault("%s: graph checkpoint %s has %d writes, want 1", w.session, id, writes)
			}
		}
	}
	if r.lost != 0 || r.twice != 0 {
		return // the controls end here: the rest needs sessions intact
	}
	for i, w := range ws {
		resumeAndReconcile(r, w, hosts[i%2], hosts[1-i%2])
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// resumeAndReconcile leaves w's session at a Point A with three tool uses,
// one recorded, one begun only, one never begun; the other host then
// resumes it (a new epoch), the old owner's save is SESSION_FENCED, and
// Reconcile decides REUSE, IN_DOUBT and RUN.
func resumeAndReconcile(r *report, w *writer, owner, other *host) {
	w.hosts = []*host{owner}
	ctx, cancel := rpcCtx()
	defer cancel()
	res, err := owner.sp.Resume(ctx, &savepointv1.ResumeRequest{SessionId: w.session})
	if err != nil {
		r.fault("%s: Resume: %v", w.session, err)
		return
	}
	epoch, rev := res.Epoch, res.Checkpoint.Revision
	pending := []*savepointv1.ToolUse{{ToolUseId: "r", Name: "pay", InputJson: `{}`, BeginTracked: true},
		{ToolUseId: "d", Name: "pay", InputJson: `{}`, BeginTracked: true}, {ToolUseId: "n", Name: "pay", InputJson: `{}`, BeginTracked: true}}
	if _, err := owner.sp.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: w.session, ExpectedRevision: rev, Epoch: epoch, RequestId: uuid(), PendingToolUses: pending}); err != nil {
		r.fault("%s: Point A: %v", w.session, err)
		return
	}
	for _, use := range []string{"r", "d"} {
		if _, err := owner.sp.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: w.session, ToolUseId: use, Epoch: epoch}); err != nil {
			r.fault("%s: BeginEffect %s: %v", w.session, use, err)
			return
		}
	}
	if _, err := owner.sp.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: w.session, ToolUseId: "r", Name: "pay", Output: `"done"`}); err != nil {
		r.fault("%s: RecordEffect: %v", w.session, err)
		return
	}
	taken, err := other.sp.Resume(ctx, &savepointv1.ResumeRequest{SessionId: w.session})
	if err != nil || taken.Epoch <= epoch {
		r.fault("%s: the takeover: %v (epoch %d after %d)", w.session, err, taken.GetEpoch(), epoch)
		return
	}
	_, err = owner.sp.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: w.session, ExpectedRevision: rev + 1, Epoch: epoch, RequestId: uuid()})
	if reasonOf(err) != "SESSION_FENCED" {
		r.fault("%s: the old owner's save after the takeover: %v, want SESSION_FENCED", w.session, err)
	}
	rec, err := other.sp.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: w.session})
	if err != nil {
		r.fault("%s: Reconcile: %v", w.session, err)
		return
	}
	want := map[string]savepointv1.Decision{"r": savepointv1.Decision_DECISION_REUSE, "d": savepointv1.Decision_DECISION_IN_DOUBT, "n": savepointv1.Decision_DECISION_RUN}
	for _, res := range rec.Resolutions {
		id := res.GetToolUse().GetToolUseId()
		if res.Decision != want[id] {
			r.fault("%s: Reconcile decided %v for %s, want %v", w.session, res.Decision, id, want[id])
		}
		delete(want, id)
	}
	if len(want) != 0 {
		r.fault("%s: Reconcile did not resolve %v", w.session, want)
	}
}

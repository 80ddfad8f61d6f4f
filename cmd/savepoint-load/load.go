package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	spaddr "github.com/savepoint-dev/savepoint/internal/addr"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// Config is one load run.
type Config struct {
	Addr         string        // unix:PATH or a loopback HOST:PORT
	Sessions     int           // concurrent sessions
	Duration     time.Duration // stop after this long
	MaxSaves     int64         // stop after this many saves (0: no limit)
	History      int           // messages appended per save
	MessageBytes int           // content_json bytes per message
	PID          int           // savepointd's pid for RSS and CPU; 0: the socket's peer
	MaxRSSGrowth float64       // end anonymous RSS / warm-up anonymous RSS allowed (0: no check)
	MaxAnonRSS   int64         // largest anonymous RSS sampled allowed, in bytes (0: no check)
	RPCTimeout   time.Duration // deadline of each RPC
	Wait         time.Duration // how long to wait for savepointd to serve
	Settle       time.Duration // after the load, wait this long and sample RSS again
	AllowReasons []string      // reasons or codes that do not fail the run
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := dialTarget(c.Addr); err != nil {
		errs = append(errs, err)
	}
	if c.Sessions < 1 {
		errs = append(errs, fmt.Errorf("--sessions %d: need at least 1", c.Sessions))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %v: need a positive duration", c.Duration))
	}
	if c.MaxSaves < 0 {
		errs = append(errs, fmt.Errorf("--max-saves %d is negative", c.MaxSaves))
	}
	if c.History < 0 {
		errs = append(errs, fmt.Errorf("--history %d is negative", c.History))
	}
	if c.MessageBytes < minMessageBytes {
		errs = append(errs, fmt.Errorf("--message-bytes %d: need at least %d", c.MessageBytes, minMessageBytes))
	}
	if c.MaxRSSGrowth < 0 {
		errs = append(errs, fmt.Errorf("--max-rss-growth %v is negative", c.MaxRSSGrowth))
	}
	if c.MaxAnonRSS < 0 {
		errs = append(errs, fmt.Errorf("--max-anon-rss-mib %d is negative", c.MaxAnonRSS>>20))
	}
	if c.RPCTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--rpc-timeout %v: need a positive duration", c.RPCTimeout))
	}
	return errors.Join(errs...)
}

// dialTarget returns the gRPC target for addr and, for a Unix socket, its
// path. Anything but a Unix socket or a loopback address is refused: this
// tool is for a local daemon only.
func dialTarget(addr string) (target, socket string, err error) {
	if addr == "" {
		return "", "", errors.New("--addr: no address; give unix:PATH or a loopback HOST:PORT (or set SAVEPOINT_ADDR)")
	}
	network, address, err := spaddr.Parse(addr)
	if err != nil {
		return "", "", fmt.Errorf("--addr: %v", err)
	}
	if network == "unix" {
		return "unix:" + address, address, nil
	}
	host, _, _ := net.SplitHostPort(address)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", "", fmt.Errorf("--addr %q: not a loopback address; savepoint-load only loads a local savepointd", addr)
	}
	return "passthrough:///" + address, "", nil
}

// The RPCs of one turn, in order, as reported.
const (
	rpcPointA = iota
	rpcBegin
	rpcRecord
	rpcPointB
	rpcTurn // the whole turn, for reference
	numRPCs
)

var rpcNames = [numRPCs]string{
	"SaveCheckpoint (Point A)",
	"BeginEffect",
	"RecordEffect",
	"SaveCheckpoint (Point B)",
	"turn (all four)",
}

// Run loads the daemon at cfg.Addr as cfg says, printing progress and the
// report to out. It returns an error only when the run could not start.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conn, socket, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res := &Result{Config: cfg}
	rss, how, err := sampleIdle(cfg, socket, res)
	if err != nil {
		return nil, err
	}
	printStart(out, cfg, res.PID, how, res.RSSIdle)

	l := &load{cfg: cfg, client: savepointv1.NewSavepointServiceClient(conn), stop: make(chan struct{}),
		runID: uuid.NewString()[:8]}
	start := time.Now()
	l.start = start
	l.markWarm = func() {
		l.warmOnce.Do(func() {
			res.WarmAt = time.Since(start)
			res.WarmSaves = l.saves.Load()
			res.WarmRPCs = l.rpcs.Load()
			if rss != nil {
				res.RSSWarm, _ = rss.read()
				res.WarmAnon, _ = rss.readField("RssAnon:") // joins AnonMax at the end: the sampler owns it
				res.CPUWarm, _ = rss.cpu()
			}
		})
	}
	warmTimer := time.AfterFunc(cfg.Duration/10, l.markWarm)
	defer warmTimer.Stop()
	stopTimer := time.AfterFunc(cfg.Duration, l.halt)
	defer stopTimer.Stop()
	go func() {
		select {
		case <-ctx.Done():
			l.halt()
		case <-l.stop:
		}
	}()

	samplerDone := l.sample(out, rss, res)
	workers := l.runWorkers(start)
	res.Elapsed = time.Since(start)
	l.halt()
	<-samplerDone
	l.markWarm() // a run too short to reach its warm-up end
	if rss != nil && res.RSSErr == nil {
		sampleEnd(ctx, cfg, rss, res)
	}
	res.Saves, res.Turns = l.saves.Load(), l.turns.Load()
	collect(res, cfg, workers)
	res.Print(out)
	return res, nil
}

// connect dials cfg.Addr and waits, up to cfg.Wait, until savepointd
// serves; socket is the Unix socket's path, or "".
func connect(ctx context.Context, cfg Config) (conn *grpc.ClientConn, socket string, err error) {
	target, socket, _ := dialTarget(cfg.Addr)
	conn, err = grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, "", err
	}
	wctx, wcancel := context.WithTimeout(ctx, cfg.Wait)
	err = client.WaitServing(wctx, cfg.Addr)
	wcancel()
	if err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("savepointd at %s: %w", cfg.Addr, err)
	}
	return conn, socket, nil
}

// sampleIdle finds savepointd's pid, from --pid or else the socket's peer,
// and records its idle RSS in res; rss is nil when the pid is unknown, and
// how says where the pid came from.
func sampleIdle(cfg Config, socket string, res *Result) (rss *rssSampler, how string, err error) {
	pid, how := cfg.PID, "--pid"
	if pid == 0 && socket != "" {
		if p, err := peerPID(socket); err == nil && p > 0 {
			pid, how = p, "the socket's peer"
		}
	}
	if pid <= 0 {
		return nil, how, nil
	}
	rss = &rssSampler{pid: pid}
	if res.RSSIdle, err = rss.read(); err != nil {
		return nil, how, fmt.Errorf("savepointd pid %d (from %s): %w", pid, how, err)
	}
	res.IdleAnon, _ = rss.readField("RssAnon:")
	res.PID = pid
	return rss, how, nil
}

// printStart says what the run will do, and savepointd's RSS before it.
func printStart(out io.Writer, cfg Config, pid int, how string, idle int64) {
	fmt.Fprintf(out, "savepoint-load: %d sessions, %v", cfg.Sessions, cfg.Duration)
	if cfg.MaxSaves > 0 {
		fmt.Fprintf(out, " or %d saves", cfg.MaxSaves)
	}
	fmt.Fprintf(out, ", %d message(s) of %d bytes per save, against %s\n", cfg.History, cfg.MessageBytes, cfg.Addr)
	if pid > 0 {
		fmt.Fprintf(out, "savepointd pid %d (from %s): RSS %s before the load\n", pid, how, mib(idle))
	} else {
		fmt.Fprintln(out, "savepointd's pid unknown (no --pid, not a Unix socket): RSS not sampled")
	}
}

// sample samples RSS (when rss is not nil) every second into res, and
// prints progress every ten, until the load stops; the channel it returns
// is closed when it has.
func (l *load) sample(out io.Writer, rss *rssSampler, res *Result) <-chan struct{} {
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			line := fmt.Sprintf("  %3ds: %d saves", n, l.saves.Load())
			if rss != nil {
				v, err := rss.read()
				if err != nil {
					res.RSSErr = err
					l.halt()
					return
				}
				res.RSSMax = max(res.RSSMax, v)
				anon, _ := rss.readField("RssAnon:")
				res.AnonMax = max(res.AnonMax, anon)
				line += ", RSS " + mib(v) + " (anon " + mib(anon) + ")"
			}
			if n%10 == 0 {
				fmt.Fprintln(out, line)
			}
		}
	}()
	return samplerDone
}

// runWorkers runs one agent loop per session until the load stops.
func (l *load) runWorkers(start time.Time) []*worker {
	workers := make([]*worker, l.cfg.Sessions)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{load: l, id: i, rng: rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano()))), errs: map[errKey]*ErrorCount{}}
		workers[i] = w
		wg.Go(w.run)
	}
	wg.Wait()
	return workers
}

// sampleEnd records savepointd's RSS, peak and CPU at the end of the load,
// and, after cfg.Settle, its settled RSS.
func sampleEnd(ctx context.Context, cfg Config, rss *rssSampler, res *Result) {
	var err error
	if res.RSSEnd, err = rss.read(); err != nil {
		res.RSSErr = err
	}
	res.RSSMax = max(res.RSSMax, res.RSSEnd, res.RSSWarm)
	res.RSSPeak, _ = rss.readField("VmHWM:")
	res.EndAnon, _ = rss.readField("RssAnon:")
	res.EndFile, _ = rss.readField("RssFile:")
	res.AnonMax = max(res.AnonMax, res.EndAnon, res.WarmAnon)
	res.CPUEnd, _ = rss.cpu()
	if cfg.Settle > 0 {
		select {
		case <-time.After(cfg.Settle):
		case <-ctx.Done():
		}
		res.RSSSettled, _ = rss.read()
		res.SettledAnon, _ = rss.readField("RssAnon:")
	}
}

// collect sums the workers' latencies per RPC and their errors into res.
func collect(res *Result, cfg Config, workers []*worker) {
	errs := map[errKey]*ErrorCount{}
	for i := range numRPCs {
		st := RPCStats{Name: rpcNames[i]}
		for _, w := range workers {
			st.latencies = append(st.latencies, w.lat[i]...)
		}
		st.summarize()
		res.RPCs = append(res.RPCs, st)
	}
	for _, w := range workers {
		for k, e := range w.errs {
			if t, ok := errs[k]; ok {
				t.Count += e.Count
			} else {
				errs[k] = e
			}
		}
	}
	for _, e := range errs {
		e.Allowed = slices.Contains(cfg.AllowReasons, e.Reason) || slices.Contains(cfg.AllowReasons, e.Code)
		res.Errors = append(res.Errors, *e)
	}
	slices.SortFunc(res.Errors, func(a, b ErrorCount) int { return b.Count - a.Count })
}

type load struct {
	cfg    Config
	client savepointv1.SavepointServiceClient
	runID  string
	start  time.Time

	stop     chan struct{}
	stopOnce sync.Once
	warmOnce sync.Once
	markWarm func()

	claimed      atomic.Int64 // saves claimed against MaxSaves
	saves, turns atomic.Int64
	rpcs         atomic.Int64 // successful durable RPCs
}

func (l *load) halt() { l.stopOnce.Do(func() { close(l.stop) }) }

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

type errKey struct{ rpc, code, reason string }

// worker is one agent loop. It owns its latencies and error counts.
type worker struct {
	*load
	id   int
	rng  *rand.Rand
	lat  [numRPCs][]time.Duration
	errs map[errKey]*ErrorCount
}

// minMessageBytes fits the JSON envelope of a tool result.
const minMessageBytes = 96

func (w *worker) run() {
	for gen := 0; !w.stopped(); gen++ {
		// A session that hit an error is abandoned; a new one starts.
		w.session(fmt.Sprintf("load-%s-%d-%d", w.runID, w.id, gen))
		if !w.stopped() {
			select {
			case <-w.stop:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// session runs turns on a new session until the load stops or an RPC fails.
// A turn once begun runs to its end, so stopping cancels nothing.
func (w *worker) session(sid string) {
	var rev, epoch uint64
	for turn := uint32(1); !w.stopped(); turn++ {
		if w.cfg.MaxSaves > 0 && w.claimed.Add(2) > w.cfg.MaxSaves {
			w.halt()
			return
		}
		turnStart := time.Now()
		toolUseID := fmt.Sprintf("toolu_%s_%d", sid, turn)

		// Point A: the model's reply, naming one side-effecting tool call.
		a, err := call(w, rpcPointA, func(ctx context.Context) (*savepointv1.SaveCheckpointResponse, error) {
			return w.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
				SessionId: sid, ExpectedRevision: rev, Epoch: epoch, RequestId: uuid.NewString(),
				Task: "savepoint-load", Turn: turn, TokensUsed: uint64(turn) * 1000,
				AppendMessages: w.messages("assistant", toolUseID),
				PendingToolUses: []*savepointv1.ToolUse{{
					ToolUseId: toolUseID, Name: "send_email", InputJson: fmt.Sprintf(`{"turn":%d}`, turn),
					EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true,
				}},
			})
		})
		if err != nil {
			return
		}
		w.saved()
		rev, epoch = a.Revision, a.Epoch

		// Just before the tool runs.
		if _, err := call(w, rpcBegin, func(ctx context.Context) (*savepointv1.BeginEffectResponse, error) {
			return w.client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: toolUseID, Epoch: epoch})
		}); err != nil {
			return
		}
		// Just after it ran.
		output := w.filler(w.cfg.MessageBytes)
		if _, err := call(w, rpcRecord, func(ctx context.Context) (*savepointv1.RecordEffectResponse, error) {
			return w.client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: toolUseID, Output: output})
		}); err != nil {
			return
		}

		// Point B: the tool's result; nothing pending.
		b, err := call(w, rpcPointB, func(ctx context.Context) (*savepointv1.SaveCheckpointResponse, error) {
			return w.client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
				SessionId: sid, ExpectedRevision: rev, Epoch: epoch, RequestId: uuid.NewString(),
				Task: "savepoint-load", Turn: turn, TokensUsed: uint64(turn)*1000 + 500,
				AppendMessages: w.messages("user", toolUseID),
			})
		})
		if err != nil {
			return
		}
		w.saved()
		rev = b.Revision
		w.lat[rpcTurn] = append(w.lat[rpcTurn], time.Since(turnStart))
		w.turns.Add(1)
	}
}

func (w *worker) saved() {
	n := w.saves.Add(1)
	if w.cfg.MaxSaves > 0 && n == max(w.cfg.MaxSaves/10, 1) {
		w.markWarm()
	}
}

// call runs one RPC with its own deadline (never the run's stop, so a turn
// finishes), timing it or counting its error.
func call[T any](w *worker, rpc int, fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RPCTimeout)
	defer cancel()
	t0 := time.Now()
	resp, err := fn(ctx)
	if err != nil {
		w.countErr(rpcNames[rpc], err)
		return resp, err
	}
	w.lat[rpc] = append(w.lat[rpc], time.Since(t0))
	w.rpcs.Add(1)
	return resp, nil
}

func (w *worker) countErr(rpc string, err error) {
	st := status.Convert(err)
	k := errKey{rpc: rpc, code: st.Code().String()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			k.reason = info.GetReason()
		}
	}
	if e, ok := w.errs[k]; ok {
		e.Count++
		return
	}
	msg := st.Message()
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	w.errs[k] = &ErrorCount{RPC: k.rpc, Code: k.code, Reason: k.reason, Count: 1, Example: msg}
}

// messages returns History messages of about MessageBytes of content each.
func (w *worker) messages(role, toolUseID string) []*savepointv1.Message {
	out := make([]*savepointv1.Message, w.cfg.History)
	for i := range out {
		var env string
		if role == "user" {
			env = `{"type":"tool_result","tool_use_id":"` + toolUseID + `","content":"%s"}`
		} else {
			env = `{"type":"text","text":"%s"}`
		}
		pad := max(w.cfg.MessageBytes-len(env)+2, 0)
		out[i] = &savepointv1.Message{Role: role, ContentJson: fmt.Sprintf(env, w.filler(pad))}
	}
	return out
}

// filler is n bytes of random letters: content that does not compress, like
// real text would not compress to nothing.
func (w *worker) filler(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(letters[w.rng.IntN(len(letters))])
	}
	return b.String()
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

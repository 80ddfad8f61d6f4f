package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// savepointdTarget saves through a running savepointd over its Unix socket,
// one gRPC connection per session (each agent loop is its own process),
// with the raw generated stubs. Open does not start the daemon: scenarios
// share one daemon so its footprint can be read.
type savepointdTarget struct {
	d      *Daemon
	prefix string // makes session ids unique across Opens on one daemon
	opens  int
	// name, when set, is the row's name in place of "savepointd".
	name string
	// store, when set, counts the write_bytes of the daemon's store
	// beside the daemon's own (a PostgreSQL server's processes).
	store writeCounter
	// written, when set, counts the row's bytes written in place of the
	// daemon's write_bytes and store (the device under its data directory).
	written writeCounter
}

// deviceCounted is savepointd on its embedded store d, named name ("" for
// "savepointd"), its bytes written counted at its data directory's block
// device: Badger writes its files through memory maps and savepointd its
// log by rewriting a synced page, both of which write_bytes overcounts
// (parseIOWriteBytes).
func deviceCounted(d *Daemon, prefix, name string) *savepointdTarget {
	return &savepointdTarget{d: d, prefix: prefix, name: name, written: deviceWrites{d.DataDir}}
}

func (t *savepointdTarget) Name() string {
	if t.name != "" {
		return t.name
	}
	return "savepointd"
}

func (t *savepointdTarget) Open(ctx context.Context, _ string) (Store, error) {
	t.opens++
	return &savepointdStore{t: t, run: fmt.Sprintf("%s-%d", t.prefix, t.opens)}, nil
}

type savepointdStore struct {
	t     *savepointdTarget
	run   string
	conns []*grpc.ClientConn
}

func (s *savepointdStore) Session(ctx context.Context, i int) (Writer, error) {
	conn, err := s.t.d.Dial()
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, conn)
	w := &savepointdWriter{c: savepointv1.NewSavepointServiceClient(conn), id: fmt.Sprintf("bench-%s-%d", s.run, i)}
	resp, err := w.c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: w.id, RequestId: uuid.NewString(), Task: benchTask})
	if err != nil {
		return nil, fmt.Errorf("creating session %s: %w", w.id, err)
	}
	w.rev, w.epoch = resp.GetRevision(), resp.GetEpoch()
	return w, nil
}

// WriteBytes is what the daemon, and its store's processes, wrote.
func (s *savepointdStore) WriteBytes() (int64, error) {
	if s.t.written != nil {
		return s.t.written.WriteBytes()
	}
	n, err := s.t.d.Proc.WriteBytes()
	if err != nil || s.t.store == nil {
		return n, err
	}
	m, err := s.t.store.WriteBytes()
	return n + m, err
}

// Resume builds a session of msgs as scenario 4 does and times the Go
// client's Resume of it to the last message.
func (s *savepointdStore) Resume(ctx context.Context, msgs []*savepointv1.Message) (time.Duration, error) {
	conn, err := s.t.d.Dial()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	sid := fmt.Sprintf("bench-%s-resume", s.run)
	if err := buildSession(ctx, savepointv1.NewSavepointServiceClient(conn), sid, msgs); err != nil {
		return 0, err
	}
	c, err := client.Dial(ctx, "unix:"+s.t.d.Socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	t0 := time.Now()
	sess, err := c.Resume(ctx, sid)
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if got := len(sess.Messages()); got != len(msgs) {
		return 0, fmt.Errorf("resumed %d messages, want %d", got, len(msgs))
	}
	return took, nil
}

func (s *savepointdStore) Close() error {
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type savepointdWriter struct {
	c          savepointv1.SavepointServiceClient
	id         string
	rev, epoch uint64
	turn       uint32
	base       string
	restarts   int
}

// Restart creates a new session on the same connection and saves to it.
func (w *savepointdWriter) Restart(ctx context.Context) error {
	if w.base == "" {
		w.base = w.id
	}
	w.restarts++
	w.id = fmt.Sprintf("%s-c%d", w.base, w.restarts)
	resp, err := w.c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: w.id, RequestId: uuid.NewString(), Task: benchTask})
	if err != nil {
		return fmt.Errorf("creating session %s: %w", w.id, err)
	}
	w.rev, w.epoch, w.turn = resp.GetRevision(), resp.GetEpoch(), 0
	return nil
}

func (w *savepointdWriter) Save(ctx context.Context, s *Save) error {
	if len(s.Pending) > 0 || w.turn == 0 {
		w.turn++ // a turn begins with Point A
	}
	resp, err := w.c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{
		SessionId: w.id, ExpectedRevision: w.rev, Epoch: w.epoch, RequestId: uuid.NewString(),
		Task: benchTask, Turn: w.turn, AppendMessages: s.Messages, PendingToolUses: s.Pending,
	})
	if err != nil {
		return fmt.Errorf("SaveCheckpoint %s at revision %d: %w", w.id, w.rev, err)
	}
	w.rev = resp.GetRevision()
	return nil
}

// emptyRPCTarget calls the gRPC health Check of a running savepointd instead
// of saving: an RPC that reads and writes nothing, so its CPU per call is
// what gRPC's transport and the daemon's interceptors cost alone.
type emptyRPCTarget struct{ d *Daemon }

func (t emptyRPCTarget) Name() string { return "savepointd, empty RPC (health Check)" }

func (t emptyRPCTarget) Open(context.Context, string) (Store, error) {
	return &emptyRPCStore{d: t.d}, nil
}

type emptyRPCStore struct {
	d     *Daemon
	conns []*grpc.ClientConn
}

func (s *emptyRPCStore) Session(context.Context, int) (Writer, error) {
	conn, err := s.d.Dial()
	if err != nil {
		return nil, err
	}
	s.conns = append(s.conns, conn)
	return emptyRPCWriter{healthpb.NewHealthClient(conn)}, nil
}

func (s *emptyRPCStore) Close() error {
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type emptyRPCWriter struct{ c healthpb.HealthClient }

func (w emptyRPCWriter) Save(ctx context.Context, _ *Save) error {
	resp, err := w.c.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("health Check: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health Check: %v", resp.GetStatus())
	}
	return nil
}

// sequenceTarget makes each save an empty RPC to a running savepointd and
// then a write+fdatasync of the save's bytes, one after the other and timed
// together: the two costs of the floor paid in the order a save pays them,
// so that what the machine adds to a sync that follows a wait on the
// socket (most likely an idle CPU woken again) is in the floor too.
type sequenceTarget struct{ d *Daemon }

func (t sequenceTarget) Name() string { return "empty RPC, then write+fdatasync" }

func (t sequenceTarget) Open(ctx context.Context, dir string) (Store, error) {
	f, err := fsyncTarget{}.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &sequenceStore{rpc: &emptyRPCStore{d: t.d}, fsync: f}, nil
}

type sequenceStore struct {
	rpc   *emptyRPCStore
	fsync Store
}

func (s *sequenceStore) Session(ctx context.Context, i int) (Writer, error) {
	r, err := s.rpc.Session(ctx, i)
	if err != nil {
		return nil, err
	}
	f, err := s.fsync.Session(ctx, i)
	if err != nil {
		return nil, err
	}
	return sequenceWriter{r, f}, nil
}

func (s *sequenceStore) Close() error { return errors.Join(s.rpc.Close(), s.fsync.Close()) }

type sequenceWriter struct{ rpc, fsync Writer }

func (w sequenceWriter) Save(ctx context.Context, s *Save) error {
	if err := w.rpc.Save(ctx, s); err != nil {
		return err
	}
	return w.fsync.Save(ctx, s)
}

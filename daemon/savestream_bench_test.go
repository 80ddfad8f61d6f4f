package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/rpc"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// BenchmarkSaveTransport measures what a stream of saves saves over unary
// calls, the transport alone (docs/profiles.md, "How to profile it"; the
// API's stream is CallStream, daemon/rpc's BenchmarkCallStream). It sends one
// session's saves (a 2 KiB message each) as unary SaveCheckpoint calls, and
// the same requests as the messages of one bidirectional stream per
// session, to a server built as Run builds it (its interceptors, request
// codec and stream workers) over a Unix socket, on a Badger store in the
// test's directory. Each stream message is handled as a call is: the same
// SaveCheckpoint handler, and the same call log line. The stream service is
// an experiment of this benchmark, not part of the API. cpu-us/op is the
// process's CPU, client and server together, per save.
func BenchmarkSaveTransport(b *testing.B) {
	dir := b.TempDir()
	store, err := badgerstore.Open(filepath.Join(dir, "data"), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := DefaultConfig()
	unary, stream := interceptors(cfg, nil, logger)
	srv := grpc.NewServer(serverOptions(insecure.NewCredentials(), cfg.MaxRequestBytes, unary, stream)...)
	api := rpc.NewServer(store, rpc.Options{Limits: cfg.Limits(), Logger: logger})
	savepointv1.RegisterSavepointServiceServer(srv, api)
	srv.RegisterService(&saveStreamDesc, saveStream{api: api, logger: logger})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("unix", filepath.Join(dir, "b.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix:"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := savepointv1.NewSavepointServiceClient(conn)
	hc := healthpb.NewHealthClient(conn)
	content := fmt.Sprintf("%q", strings.Repeat("m", 2040))
	var sessions atomic.Int64

	// save returns a function making one session's next save, as a unary
	// call or on the session's stream.
	save := func(b *testing.B, streamed bool) func() {
		sid := fmt.Sprintf("bench-%d", sessions.Add(1))
		var rev uint64
		var st grpc.ClientStream
		if streamed {
			var err error
			if st, err = conn.NewStream(context.Background(), &saveStreamDesc.Streams[0], "/"+saveStreamDesc.ServiceName+"/Saves"); err != nil {
				b.Fatal(err)
			}
		}
		return func() {
			req := &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: rev, Task: "bench", Turn: uint32(rev),
				AppendMessages: []*savepointv1.Message{{Role: "assistant", ContentJson: content}}}
			var resp *savepointv1.SaveCheckpointResponse
			var err error
			if streamed {
				resp = new(savepointv1.SaveCheckpointResponse)
				if err = st.SendMsg(req); err == nil {
					err = st.RecvMsg(resp)
				}
			} else {
				resp, err = client.SaveCheckpoint(context.Background(), req)
			}
			if err != nil {
				b.Error(err)
				return
			}
			rev = resp.GetRevision()
		}
	}
	// empty returns a function making one empty call: a health Check, or an
	// empty message echoed on a stream of its own.
	empty := func(b *testing.B, streamed bool) func() {
		if !streamed {
			return func() {
				if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
					b.Error(err)
				}
			}
		}
		st, err := conn.NewStream(context.Background(), &saveStreamDesc.Streams[1], "/"+saveStreamDesc.ServiceName+"/Echo")
		if err != nil {
			b.Fatal(err)
		}
		return func() {
			if err := st.SendMsg(&emptypb.Empty{}); err != nil {
				b.Error(err)
			} else if err := st.RecvMsg(new(emptypb.Empty)); err != nil {
				b.Error(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		call func(*testing.B, bool) func()
	}{{"empty", empty}, {"save", save}} {
		for _, streamed := range []bool{false, true} {
			name := c.name + "/" + map[bool]string{false: "unary", true: "stream"}[streamed]
			runCallers(b, name, func(b *testing.B) func() { return c.call(b, streamed) })
		}
	}
}

// runCallers runs the sub-benchmarks name/sessions=1, one caller, and
// name/sessions=64, 64 callers at once, each with a function of its own from
// caller, reporting the process's CPU per call.
func runCallers(b *testing.B, name string, caller func(*testing.B) func()) {
	b.Run(name+"/sessions=1", func(b *testing.B) {
		next := caller(b)
		cpu := cpuTime()
		for b.Loop() {
			next()
		}
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	})
	b.Run(name+"/sessions=64", func(b *testing.B) {
		b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)) // goroutines: this times GOMAXPROCS
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			next := caller(b)
			for pb.Next() {
				next()
			}
		})
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	})
}

// saveStream is the experiment's stream service: each SaveCheckpointRequest
// the client sends is answered, in order, by SaveCheckpoint's response, and
// logged as a call is.
type saveStream struct {
	api    *rpc.Server
	logger *slog.Logger
}

var saveStreamDesc = grpc.ServiceDesc{
	ServiceName: "savepoint.experiment.SaveStream",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Saves", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, st grpc.ServerStream) error { return srv.(saveStream).serve(st) },
	}, {
		StreamName: "Echo", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, st grpc.ServerStream) error { return echo(st) },
	}},
}

// echo answers each empty message with an empty message.
func echo(st grpc.ServerStream) error {
	for {
		if err := st.RecvMsg(new(emptypb.Empty)); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := st.SendMsg(&emptypb.Empty{}); err != nil {
			return err
		}
	}
}

func (s saveStream) serve(st grpc.ServerStream) error {
	ctx := st.Context()
	for {
		req := new(savepointv1.SaveCheckpointRequest)
		if err := st.RecvMsg(req); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		start := time.Now()
		resp, err := s.api.SaveCheckpoint(ctx, req)
		logCall(ctx, s.logger, "/savepoint.v1.SavepointService/SaveCheckpoint", start, err, "", req)
		if err != nil {
			return err
		}
		if err := st.SendMsg(resp); err != nil {
			return err
		}
	}
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

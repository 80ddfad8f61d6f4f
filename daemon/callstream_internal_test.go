package daemon

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCallStreamInterceptors: a call carried on CallStream passes the
// daemon's unary interceptors as a unary call does: the RPC metrics count it
// under its unary method, the domain metrics observe it, the call log
// names it.
func TestCallStreamInterceptors(t *testing.T) {
	store, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs syncBuffer
	logger, err := NewLogger(&logs, "text", -4)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics(store)
	srv, _, _ := newServer(DefaultConfig(), insecure.NewCredentials(), store, m, logger)
	sock := filepath.Join(t.TempDir(), "c.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cs, err := savepointv1.NewCallStreamServiceClient(conn).CallStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range []*savepointv1.SaveCheckpointRequest{{SessionId: "metered"}, {SessionId: ""}} {
		if err := cs.Send(&savepointv1.CallStreamRequest{Id: uint64(i), Request: &savepointv1.CallStreamRequest_SaveCheckpoint{SaveCheckpoint: req}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	for code, want := range map[string]float64{"OK": 1, "InvalidArgument": 1} {
		if got := counter(t, m, "grpc_server_handled_total", map[string]string{"grpc_method": "SaveCheckpoint", "grpc_code": code}); got != want {
			t.Errorf("grpc_server_handled_total SaveCheckpoint %s = %v, want %v", code, got, want)
		}
	}
	if got := counter(t, m, "savepoint_saved_bytes_total", nil); got <= 0 {
		t.Errorf("savepoint_saved_bytes_total = %v after a streamed save", got)
	}
	for _, want := range []string{"method=/savepoint.v1.SavepointService/SaveCheckpoint code=OK", "reason=INVALID_SESSION_ID"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the call log lacks %q:\n%s", want, logs.String())
		}
	}
}

// counter is the value of the counter name with the labels given, from m's
// registry.
func counter(t *testing.T, m *metrics, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, mt := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range mt.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return mt.GetCounter().GetValue()
		}
	}
	return 0
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// saveThree opens t in a new directory, saves three checkpoints in each of
// sessions sessions, closes the store and returns the directory and saves.
func saveThree(t *testing.T, tg Target, sessions int) (string, []*Save) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	saves := []*Save{
		newSave([]*savepointv1.Message{textMessage(rng, "assistant", 300)},
			[]*savepointv1.ToolUse{{ToolUseId: "toolu_1", Name: "send_email", InputJson: `{"n":1}`}}),
		newSave([]*savepointv1.Message{textMessage(rng, "user", 300)}, nil),
		newSave([]*savepointv1.Message{textMessage(rng, "assistant", 300)}, nil),
	}
	dir := t.TempDir()
	st, err := tg.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sessions {
		w, err := st.Session(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range saves {
			if err := w.Save(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, saves
}

// The baselines must store what they are timed for: a benchmark of a store
// that drops its writes would flatter it.

func TestFsyncTargetWrites(t *testing.T) {
	dir, saves := saveThree(t, fsyncTarget{}, 1)
	b, err := os.ReadFile(filepath.Join(dir, "floor.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join([][]byte{saves[0].Bytes, saves[1].Bytes, saves[2].Bytes}, nil)
	if !bytes.HasPrefix(b, want) || len(b) != fsyncFileBytes {
		t.Errorf("floor.log: %d bytes, prefix match %v; want the three saves' bytes at the start of %d", len(b), bytes.HasPrefix(b, want), fsyncFileBytes)
	}
	st, err := fsyncTarget{}.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Session(context.Background(), 0)
	if _, err := st.Session(context.Background(), 1); err == nil {
		t.Error("a second session of write+fdatasync was accepted")
	}
}

func TestBadgerTargetWrites(t *testing.T) {
	dir, saves := saveThree(t, badgerTarget{}, 2)
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithReadOnly(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var values [][]byte
	if err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			values = append(values, v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(values) != 6 {
		t.Fatalf("%d keys, want 6 (3 saves in each of 2 sessions)", len(values))
	}
	for i, v := range values {
		if !bytes.Equal(v, saves[i%3].Bytes) {
			t.Errorf("value %d is not save %d's bytes", i, i%3)
		}
	}
}

func TestJSONTargetWrites(t *testing.T) {
	for _, whole := range []bool{false, true} {
		dir, saves := saveThree(t, jsonTarget{whole: whole}, 1)
		b, err := os.ReadFile(filepath.Join(dir, "session-0.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cp jsonCheckpoint
		if err := json.Unmarshal(b, &cp); err != nil {
			t.Fatalf("whole=%v: %v", whole, err)
		}
		want := 1
		if whole {
			want = 3
		}
		if cp.Revision != 3 || len(cp.Messages) != want {
			t.Errorf("whole=%v: revision %d with %d messages, want revision 3 with %d", whole, cp.Revision, len(cp.Messages), want)
		}
		last := cp.Messages[len(cp.Messages)-1]
		if string(last.Content) != saves[2].Messages[0].GetContentJson() {
			t.Errorf("whole=%v: the last message is not the last save's", whole)
		}
		if _, err := os.Stat(filepath.Join(dir, "session-0.json.tmp")); !os.IsNotExist(err) {
			t.Errorf("whole=%v: the .tmp file is left behind (%v)", whole, err)
		}
	}
}

func TestSQLiteTargetWrites(t *testing.T) {
	dir, saves := saveThree(t, sqliteTarget{}, 2)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q, %v; want wal (it persists in the file)", mode, err)
	}
	rows, err := db.Query("SELECT revision, data FROM checkpoints ORDER BY session, revision")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var rev int
		var data []byte
		if err := rows.Scan(&rev, &data); err != nil {
			t.Fatal(err)
		}
		if rev != n%3+1 || !bytes.Equal(data, saves[n%3].Bytes) {
			t.Errorf("row %d: revision %d, data of %d bytes; want revision %d with save %d's bytes", n, rev, len(data), n%3+1, n%3)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Errorf("%d rows, want 6", n)
	}
}

// countingHealth answers every Check SERVING and counts them.
type countingHealth struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int64
}

func (h *countingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.n.Add(1)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestSequenceTargetCallsAndWrites: each save of the floor in sequence is
// one health Check of the daemon and the save's bytes written to the file.
func TestSequenceTargetCallsAndWrites(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHealth{}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go srv.Serve(lis)
	defer srv.Stop()
	dir, saves := saveThree(t, sequenceTarget{d: &Daemon{Socket: sock}}, 1)
	b, err := os.ReadFile(filepath.Join(dir, "floor.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join([][]byte{saves[0].Bytes, saves[1].Bytes, saves[2].Bytes}, nil)
	if !bytes.HasPrefix(b, want) || h.n.Load() != 3 {
		t.Errorf("floor.log prefix match %v, %d health checks; want the three saves' bytes and 3 checks", bytes.HasPrefix(b, want), h.n.Load())
	}
}

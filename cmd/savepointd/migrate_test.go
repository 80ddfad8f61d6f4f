package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore"
	"github.com/savepoint-dev/savepoint/daemon/pgstore/pgtest"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// fillStore writes, through core.Store, the sessions the migration tests
// copy: a long history with resumes, kept-message cuts and request ids, one
// with a begun call in doubt and a recorded one, a completed session and a
// deleted one.
func fillStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// "hist": 40 revisions of 3 messages each, the history cut twice, resumed
	// every 10 revisions.
	rev, epoch := uint64(0), uint64(0)
	for i := range 40 {
		req := &core.SaveRequest{SessionID: "hist", ExpectedRevision: rev, Epoch: epoch, RequestID: requestID(i),
			Task: "long", Turn: uint32(i), TokensUsed: uint64(100 * i), StateJSON: fmt.Sprintf(`{"i":%d}`, i),
			Labels: map[string]string{"team": "a", "i": fmt.Sprint(i % 3)}}
		for j := range 3 {
			req.AppendMessages = append(req.AppendMessages, core.Message{Role: "user", ContentJSON: fmt.Sprintf(`"m%d.%d"`, i, j)})
		}
		if i == 15 || i == 30 {
			keep := uint64(5)
			req.KeepMessages = &keep
		}
		res, err := s.SaveCheckpoint(ctx, req)
		must(err)
		rev, epoch = res.Revision, res.Epoch
		if i%10 == 9 {
			cp, err := s.Resume(ctx, "hist", false)
			must(err)
			epoch = cp.Epoch
		}
	}
	// "calls": three pending tool uses: one begun and recorded, one begun (in
	// doubt), one never begun.
	res, err := s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "calls", Task: "tools", RequestID: requestID(100),
		AppendMessages: []core.Message{{Role: "assistant", ContentJSON: `"use tools"`}},
		PendingToolUses: []core.ToolUse{
			{ID: "t1", Name: "send_email", InputJSON: `{"to":"x"}`, BeginTracked: true},
			{ID: "t2", Name: "charge", InputJSON: `{"amount":5}`, Class: core.Idempotent, BeginTracked: true},
			{ID: "t3", Name: "search", InputJSON: `{}`, Class: core.ReadOnly},
		}})
	must(err)
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "calls", ToolUseID: "t1", Epoch: res.Epoch})
	must(err)
	_, _, err = s.RecordEffect(ctx, "calls", core.Effect{ToolUseID: "t1", Name: "send_email", Output: `"sent"`})
	must(err)
	_, err = s.BeginEffect(ctx, &core.BeginRequest{SessionID: "calls", ToolUseID: "t2", Epoch: res.Epoch})
	must(err)
	// "done": completed with a final output.
	res, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "done", Task: "short",
		AppendMessages: []core.Message{{Role: "user", ContentJSON: `"hi"`}}})
	must(err)
	_, err = s.CompleteSession(ctx, &core.CompleteRequest{SessionID: "done", Epoch: res.Epoch, Status: core.StatusCompleted,
		FinalOutput: `"bye"`, RequestID: requestID(101)})
	must(err)
	// "gone": resumed twice, then deleted: a tombstone at epoch 3.
	res, err = s.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "gone", Task: "x"})
	must(err)
	_, err = s.Resume(ctx, "gone", false)
	must(err)
	cp, err := s.Resume(ctx, "gone", false)
	must(err)
	_, err = s.DeleteSession(ctx, "gone", cp.Epoch)
	must(err)
}

// requestID is the i-th request id of fillStore, a UUID as the API wants.
func requestID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// TestMigrateStore copies an embedded store into PostgreSQL, then serves
// the copy and the original with savepointd and makes the same calls on
// both: every answer is the same.
func TestMigrateStore(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dir := t.TempDir()
	fillStore(t, dir)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db)}, envOf(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("migrate-store: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"4 sessions (3 live, 1 tombstone)", ", 3 effects, ", "every live session compared equal", "0 damaged"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "copied 4/4 sessions") || !strings.Contains(stderr.String(), "compared 3/3 live sessions") {
		t.Errorf("no progress lines:\n%s", stderr.String())
	}

	// Migrating again into the same schema is refused, writing nothing.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db)}, envOf(nil), &stdout, &stderr); code != exitData ||
		!strings.Contains(stderr.String(), "holds sessions or graph threads already") {
		t.Errorf("migrate into a non-empty schema: exit %d\n%s", code, stderr.String())
	}
	// With --allow-non-empty a session in both is refused by name.
	stderr.Reset()
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db), "--allow-non-empty"}, envOf(nil), io.Discard, &stderr); code != exitData ||
		!strings.Contains(stderr.String(), `session "calls" is in schema`) && !strings.Contains(stderr.String(), `rows of session "calls"`) {
		t.Errorf("migrate over a copied session: exit %d\n%s", code, stderr.String())
	}

	bin := daemontest.Binary(t)
	onBadger := daemontest.StartBinary(t, bin, "--data-dir", dir)
	onPG := daemontest.StartBinary(t, bin, "--store-url", srv.URL(db))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	same := func(what string, call func(c savepointv1.SavepointServiceClient) (proto.Message, error)) {
		t.Helper()
		want, werr := call(onBadger.Client)
		got, gerr := call(onPG.Client)
		if testing.Verbose() {
			t.Logf("%s: %v %v", what, got, gerr)
		}
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !proto.Equal(want, got) {
			t.Errorf("%s differs:\n badger: %v %v\n postgres: %v %v", what, want, werr, got, gerr)
		}
	}
	for _, sid := range []string{"hist", "calls", "done"} {
		same("GetSession "+sid, func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
			return c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		})
		same("Resume "+sid, func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
			return c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid})
		})
		same("Reconcile "+sid, func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
			return c.Reconcile(ctx, &savepointv1.ReconcileRequest{SessionId: sid})
		})
		same("ListEffects "+sid, func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
			return c.ListEffects(ctx, &savepointv1.ListEffectsRequest{SessionId: sid})
		})
	}
	for rev := uint64(1); rev <= 40; rev += 13 {
		same(fmt.Sprint("ListMessages hist revision ", rev), func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
			return c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: "hist", Revision: rev, PageSize: 1000})
		})
	}
	same("ListSessions", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.ListSessions(ctx, &savepointv1.ListSessionsRequest{PageSize: 10})
	})
	// A retried save answers from its request id; a stale epoch is fenced;
	// the deleted session is re-created above its tombstone's epoch; the
	// in-doubt call's begin marker and key are kept.
	same("retried save", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "hist", ExpectedRevision: 39, Epoch: 4, RequestId: requestID(39),
			Task: "long", Turn: 39, TokensUsed: 3900, StateJson: `{"i":39}`, Labels: map[string]string{"team": "a", "i": "0"},
			AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `"m39.0"`}, {Role: "user", ContentJson: `"m39.1"`}, {Role: "user", ContentJson: `"m39.2"`}}})
	})
	same("stale save", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "hist", ExpectedRevision: 40, Epoch: 4})
	})
	same("re-create over the tombstone", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "gone", Task: "again"})
	})
	same("begin of the in-doubt call", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: "calls", ToolUseId: "t2", Epoch: 2})
	})
	same("record of the recorded call", func(c savepointv1.SavepointServiceClient) (proto.Message, error) {
		return c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: "calls", ToolUseId: "t1", Name: "send_email", Output: `"sent"`})
	})
}

// TestMigrateStoreRefusals: a running daemon on the directory, a bad
// target, missing flags; each refused with its exit code, nothing copied.
func TestMigrateStoreRefusals(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	bin := daemontest.Binary(t)
	running := daemontest.StartBinary(t, bin)
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"daemon running", []string{"--data-dir", running.DataDir, "--to", srv.URL(db)}, exitLocked, "lock"},
		{"no target", []string{"--data-dir", t.TempDir()}, exitConfig, "--to is required"},
		{"not postgres", []string{"--data-dir", t.TempDir(), "--to", "mysql://u:s3cret@h/db"}, exitConfig, "not a postgres://"},
		{"no data dir", []string{"--to", srv.URL(db)}, exitConfig, "--data-dir is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(append([]string{"migrate-store"}, tc.args...), envOf(nil), io.Discard, &stderr); code != tc.code ||
				!strings.Contains(stderr.String(), tc.says) || strings.Contains(stderr.String(), "s3cret") {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, tc.code, tc.says, stderr.String())
			}
		})
	}
	if got, err := running.Client.ListSessions(context.Background(), &savepointv1.ListSessionsRequest{PageSize: 1}); err != nil || len(got.GetSessions()) != 0 {
		t.Errorf("the running daemon's store: %v %v", got, err)
	}
}

// TestMigrateStoreRefusesEpochFloor: a store that has removed expired
// tombstones keeps their epochs only as its epoch floor, which the
// PostgreSQL store has no place for, so the copy is refused and nothing
// reaches the schema.
func TestMigrateStoreRefusesEpochFloor(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src, err := badgerstore.Open(dir, badgerstore.Options{Now: func() time.Time { return now }, TombstoneRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.SaveCheckpoint(ctx, &core.SaveRequest{SessionID: "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteSession(ctx, "gone", 0); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if rep, err := src.Maintain(ctx, badgerstore.Retention{}); err != nil || rep.ExpiredTombstones != 1 {
		t.Fatalf("maintenance pass: %+v, %v; want the tombstone removed", rep, err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(db)}, envOf(nil), io.Discard, &stderr); code != exitData ||
		!strings.Contains(stderr.String(), "removed expired tombstones up to epoch 1") || !strings.Contains(stderr.String(), "nothing copied") {
		t.Fatalf("migrate-store of a store with an epoch floor: exit %d, want %d\n%s", code, exitData, stderr.String())
	}
	dst, err := pgstore.Open(ctx, srv.URL(db), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got, err := dst.ListSessions(ctx, "", 10, core.SessionFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("the schema after the refusal: %v %v; want no session", got, err)
	}
}

// TestMigrateStoreGraphThreads: a store holding a graph thread is copied
// whole; with --skip-graph-threads its sessions are copied and the thread
// left behind, said on stderr and in the summary.
func TestMigrateStoreGraphThreads(t *testing.T) {
	srv := pgtest.Shared(t)
	dir := t.TempDir()
	fillStore(t, dir)
	s, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.PutCheckpoint(context.Background(), &core.GraphPut{Checkpoint: core.GraphCheckpoint{
		ThreadID: "thread-1", ID: "1", MetadataJSON: "{}", Value: core.GraphValue{Type: "json", Data: []byte(`{}`), Size: 2}}})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(srv.NewDatabase(t))}, envOf(nil), &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "copied 1 graph thread (0 tombstones), 1 checkpoint") || !strings.Contains(stdout.String(), "4 sessions (3 live, 1 tombstone)") {
		t.Fatalf("a store with graph threads: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"migrate-store", "--data-dir", dir, "--to", srv.URL(srv.NewDatabase(t)), "--skip-graph-threads"}, envOf(nil), &stdout, &stderr); code != exitOK ||
		!strings.Contains(stderr.String(), "WARNING: skipping 1 graph thread") || !strings.Contains(stdout.String(), "skipped 1 graph thread") ||
		!strings.Contains(stdout.String(), "4 sessions (3 live, 1 tombstone)") || strings.Contains(stdout.String(), "copied 1 graph") {
		t.Fatalf("--skip-graph-threads: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

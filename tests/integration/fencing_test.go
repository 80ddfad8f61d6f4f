package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// dialAgent opens a connection of its own to the daemon on socket, as a
// separate agent process would.
func dialAgent(t *testing.T, socket string, opts ...grpc.DialOption) sp {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+socket, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return savepointv1.NewSavepointServiceClient(conn)
}

// agentMsg is a message an agent appends, tagged with the agent's name.
func agentMsg(role, agent string, n int) *savepointv1.Message {
	b, _ := json.Marshal(map[string]any{"agent": agent, "n": n})
	return &savepointv1.Message{Role: role, ContentJson: string(b)}
}

// readHistory returns every message of a revision, paging with a small
// page size.
func readHistory(t *testing.T, c sp, sid string, rev uint64) []*savepointv1.Message {
	t.Helper()
	var out []*savepointv1.Message
	for token, first := "", true; first || token != ""; first = false {
		lm, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: sid, Revision: rev, PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatalf("ListMessages %s@%d: %v", sid, rev, err)
		}
		if lm.FirstIndex != uint64(len(out)) {
			t.Fatalf("ListMessages %s@%d: page at %d after %d messages", sid, rev, lm.FirstIndex, len(out))
		}
		out = append(out, lm.Messages...)
		token = lm.NextPageToken
	}
	return out
}

// TestFencingRace: two agent processes, each with its own connection to one
// savepointd, resume the same session at the same moment, then both carry
// on. Both resumes succeed with distinct epochs; the holder of the lower
// epoch is fenced (ABORTED SESSION_FENCED) at its next BeginEffect or
// SaveCheckpoint, the other continues; and the history holds, after the
// common prefix, only the winner's messages, in every revision. The race
// runs 20 times on distinct sessions, half of them continuing with
// BeginEffect, half with SaveCheckpoint.
func TestFencingRace(t *testing.T) {
	d := daemontest.Start(t)
	names := [2]string{"A", "B"}
	agents := [2]sp{dialAgent(t, d.Socket), dialAgent(t, d.Socket)}
	prefix := []*savepointv1.Message{userMsg("the task"), {Role: "assistant", ContentJson: `[{"type":"tool_use","id":"call"}]`}}
	var wins [2]int

	for i := range 20 {
		sid := fmt.Sprintf("race-%02d", i)
		useBegin := i%2 == 0
		mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: sid, AppendMessages: prefix[:1]})
		mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, Turn: 1, AppendMessages: prefix[1:],
			PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "call", Name: "deploy", EffectClass: savepointv1.EffectClass_EFFECT_CLASS_SIDE_EFFECT, BeginTracked: true}}})

		type result struct {
			epoch     uint64
			resumeErr error
			writeErr  error // the first write that failed; nil when all succeeded
		}
		var res [2]result
		start := make(chan struct{})
		var resumed, done sync.WaitGroup
		resumed.Add(2)
		done.Add(2)
		for a := range 2 {
			go func() {
				defer done.Done()
				c, me := agents[a], names[a]
				<-start
				r, err := c.Resume(ctx, &savepointv1.ResumeRequest{SessionId: sid})
				res[a].resumeErr = err
				// Both resumes are in before either agent writes: the
				// question is what happens to the one resumed first.
				resumed.Done()
				resumed.Wait()
				if err != nil {
					return
				}
				epoch, rev := r.Epoch, r.Checkpoint.Revision
				res[a].epoch = epoch
				res[a].writeErr = func() error {
					if useBegin {
						if _, err := c.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "call", Epoch: epoch}); err != nil {
							return err
						}
						if _, err := c.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "call", Output: "deployed by " + me}); err != nil {
							return err
						}
					}
					// Point B, then one more turn.
					for n, role := range []string{"user", "assistant"} {
						s, err := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: rev, Epoch: epoch,
							RequestId: uuid.NewString(), Turn: uint32(2 + n), AppendMessages: []*savepointv1.Message{agentMsg(role, me, n)}})
						if err != nil {
							return err
						}
						rev = s.Revision
					}
					return nil
				}()
			}()
		}
		close(start)
		done.Wait()

		for a := range 2 {
			if res[a].resumeErr != nil {
				t.Fatalf("%s: agent %s's Resume: %v", sid, names[a], res[a].resumeErr)
			}
		}
		if res[0].epoch == res[1].epoch || min(res[0].epoch, res[1].epoch) != 2 || max(res[0].epoch, res[1].epoch) != 3 {
			t.Fatalf("%s: epochs %d and %d, want 2 and 3", sid, res[0].epoch, res[1].epoch)
		}
		win, lose := 0, 1
		if res[1].epoch > res[0].epoch {
			win, lose = 1, 0
		}
		wins[win]++
		if res[win].writeErr != nil {
			t.Fatalf("%s: the owner (epoch %d) failed: %v", sid, res[win].epoch, res[win].writeErr)
		}
		md := wantReason(t, res[lose].writeErr, codes.Aborted, "SESSION_FENCED")
		if md["current_epoch"] != fmt.Sprint(res[win].epoch) {
			t.Fatalf("%s: fenced with metadata %v, want current_epoch %d", sid, md, res[win].epoch)
		}
		// The fenced agent stays fenced, whatever it tries next.
		stale, loser := res[lose].epoch, agents[lose]
		_, err := loser.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 4, Epoch: stale,
			AppendMessages: []*savepointv1.Message{agentMsg("user", names[lose], 9)}})
		wantReason(t, err, codes.Aborted, "SESSION_FENCED")
		_, err = loser.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "call", Epoch: stale})
		wantReason(t, err, codes.Aborted, "SESSION_FENCED")

		// Read back: revisions 3 and 4 are the winner's alone.
		g, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		if cp := g.Checkpoint; cp.Revision != 4 || cp.Epoch != res[win].epoch || cp.MessageCount != 4 || len(cp.PendingToolUses) != 0 {
			t.Fatalf("%s: latest revision %d epoch %d, %d messages, %d pending; want 4, %d, 4, 0",
				sid, cp.Revision, cp.Epoch, cp.MessageCount, len(cp.PendingToolUses), res[win].epoch)
		}
		for rev := uint64(1); rev <= 4; rev++ {
			msgs := readHistory(t, d.Client, sid, rev)
			if want := int(rev); len(msgs) != want { // one message per revision
				t.Fatalf("%s@%d: %d messages, want %d", sid, rev, len(msgs), want)
			}
			for j, m := range msgs {
				var w *savepointv1.Message
				if j < len(prefix) {
					w = prefix[j]
				} else {
					w = agentMsg([]string{"user", "assistant"}[j-2], names[win], j-2)
				}
				if !proto.Equal(m, w) {
					t.Fatalf("%s@%d: message %d is %v, want %v (winner %s)", sid, rev, j, m, w, names[win])
				}
			}
		}
		if useBegin {
			// The ledger holds the winner's run of the call, and only it.
			r, err := d.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "call", Output: "deployed by " + names[win]})
			if err != nil || !r.AlreadyRecorded {
				t.Fatalf("%s: the winner's effect: %v %v", sid, r, err)
			}
		}
	}
	t.Logf("wins: A %d, B %d", wins[0], wins[1])
}

// replyDropper is a client interceptor that lets a SaveCheckpoint reach the
// daemon and be applied, then loses the reply: the caller gets UNAVAILABLE,
// as after a connection cut between the daemon's commit and its answer.
type replyDropper struct {
	drops atomic.Int32 // how many more replies to lose

	mu   sync.Mutex
	lost []*savepointv1.SaveCheckpointResponse // the replies lost, in order
	ids  []string                              // the request_id of every save that reached the daemon
}

func (r *replyDropper) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method != savepointv1.SavepointService_SaveCheckpoint_FullMethodName {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, req.(*savepointv1.SaveCheckpointRequest).GetRequestId())
	if err == nil && r.drops.Add(-1) >= 0 {
		resp := reply.(*savepointv1.SaveCheckpointResponse)
		r.lost = append(r.lost, proto.CloneOf(resp))
		proto.Reset(resp)
		return status.Error(codes.Unavailable, "test: the reply was lost after the daemon applied the save")
	}
	return err
}

func (r *replyDropper) seen() (ids []string, lost []*savepointv1.SaveCheckpointResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...), append([]*savepointv1.SaveCheckpointResponse(nil), r.lost...)
}

// TestRequestIDRetryAfterLostReply: a save whose reply is lost was applied;
// retrying it with the same request_id returns the response the first call
// would have returned and applies nothing more, for a create and for an
// append, and still after the session has moved on.
func TestRequestIDRetryAfterLostReply(t *testing.T) {
	d := daemontest.Start(t)
	drop := &replyDropper{}
	c := dialAgent(t, d.Socket, grpc.WithUnaryInterceptor(drop.intercept))
	const sid = "lost-reply"
	state := func() (rev, count uint64) {
		t.Helper()
		g, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		return g.Checkpoint.Revision, g.Checkpoint.MessageCount
	}
	// lostThenRetried sends req with its reply lost, checks the save was
	// applied, retries it and returns the retry's response.
	lostThenRetried := func(req *savepointv1.SaveCheckpointRequest, wantRev, wantCount uint64) *savepointv1.SaveCheckpointResponse {
		t.Helper()
		drop.drops.Store(1)
		if _, err := c.SaveCheckpoint(ctx, req); status.Code(err) != codes.Unavailable {
			t.Fatalf("save with its reply dropped: %v, want UNAVAILABLE", err)
		}
		if rev, count := state(); rev != wantRev || count != wantCount {
			t.Fatalf("after the lost reply: revision %d, %d messages; want %d, %d (the save reached the daemon)", rev, count, wantRev, wantCount)
		}
		retry, err := c.SaveCheckpoint(ctx, proto.CloneOf(req))
		if err != nil {
			t.Fatalf("retry with the same request_id: %v", err)
		}
		_, lost := drop.seen()
		if !proto.Equal(retry, lost[len(lost)-1]) {
			t.Fatalf("retry answered %v, the lost reply was %v", retry, lost[len(lost)-1])
		}
		if rev, count := state(); rev != wantRev || count != wantCount {
			t.Fatalf("after the retry: revision %d, %d messages; want %d, %d (applied once)", rev, count, wantRev, wantCount)
		}
		return retry
	}

	// A create: without the request_id the retry would be SESSION_EXISTS.
	create := &savepointv1.SaveCheckpointRequest{SessionId: sid, RequestId: uuid.NewString(), Task: "t", AppendMessages: []*savepointv1.Message{userMsg("go")}}
	if r := lostThenRetried(create, 1, 1); r.Revision != 1 || r.MessageCount != 1 || r.Epoch != 1 {
		t.Fatalf("create: %v", r)
	}
	// Point A appending two messages: without it, REVISION_MISMATCH.
	pointA := &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 1, Epoch: 1, RequestId: uuid.NewString(), Task: "t", Turn: 1,
		AppendMessages:  []*savepointv1.Message{{Role: "assistant", ContentJson: `[{"type":"text","text":"calling"}]`}, {Role: "assistant", ContentJson: `[{"type":"tool_use","id":"t1"}]`}},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "t1", Name: "w"}}}
	if r := lostThenRetried(pointA, 2, 3); r.Revision != 2 || r.MessageCount != 3 || r.Epoch != 1 {
		t.Fatalf("point A: %v", r)
	}
	msgs := readHistory(t, d.Client, sid, 2)
	if want := append([]*savepointv1.Message{userMsg("go")}, pointA.AppendMessages...); len(msgs) != len(want) {
		t.Fatalf("history %v, want %v", msgs, want)
	} else {
		for i := range want {
			if !proto.Equal(msgs[i], want[i]) {
				t.Fatalf("message %d is %v, want %v", i, msgs[i], want[i])
			}
		}
	}

	// The session moves on; a late retry of Point A still gets its own
	// response and appends nothing.
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: sid, ExpectedRevision: 2, Epoch: 1, RequestId: uuid.NewString(), Task: "t", Turn: 1,
		AppendMessages: []*savepointv1.Message{{Role: "user", ContentJson: `[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]`}}})
	late, err := c.SaveCheckpoint(ctx, proto.CloneOf(pointA))
	if _, lost := drop.seen(); err != nil || !proto.Equal(late, lost[1]) {
		t.Fatalf("late retry: %v %v, want %v", late, err, lost[1])
	}
	if rev, count := state(); rev != 3 || count != 4 {
		t.Fatalf("after the late retry: revision %d, %d messages; want 3, 4", rev, count)
	}
	// The same id with another payload is refused, and changes nothing.
	other := proto.CloneOf(pointA)
	other.AppendMessages = other.AppendMessages[:1]
	_, err = c.SaveCheckpoint(ctx, other)
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED")
	if rev, count := state(); rev != 3 || count != 4 {
		t.Fatalf("after the reuse: revision %d, %d messages; want 3, 4", rev, count)
	}
}

// TestClientRetryAfterLostReply: the Go client's own retry of a save whose
// reply was lost resends the same request_id, so the daemon applies the save
// once; and a Session whose save failed with its outcome unknown reuses the
// request_id when the caller tries the same save again.
func TestClientRetryAfterLostReply(t *testing.T) {
	d := daemontest.Start(t)
	drop := &replyDropper{}
	quiet := client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	fast := client.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	// WithChainUnaryInterceptor puts the dropper inside the client's
	// retrying interceptor, between it and the wire.
	cl, err := client.Dial(ctx, "unix:"+d.Socket, client.WithDialOptions(grpc.WithChainUnaryInterceptor(drop.intercept)), client.WithRetry(fast), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	check := func(sid string, wantRev, wantCount uint64) {
		t.Helper()
		g, err := d.Client.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid})
		if err != nil || g.Checkpoint.Revision != wantRev || g.Checkpoint.MessageCount != wantCount {
			t.Fatalf("%s: %v %v; want revision %d with %d messages", sid, g.GetCheckpoint(), err, wantRev, wantCount)
		}
		if n := len(readHistory(t, d.Client, sid, wantRev)); uint64(n) != wantCount {
			t.Fatalf("%s: %d messages read, want %d", sid, n, wantCount)
		}
	}
	// sameIDTwice checks that the last two saves reaching the daemon carried
	// one request_id, unlike the save before them.
	sameIDTwice := func() {
		t.Helper()
		ids, _ := drop.seen()
		n := len(ids)
		if n < 2 || ids[n-1] == "" || ids[n-1] != ids[n-2] || (n > 2 && ids[n-3] == ids[n-1]) {
			t.Fatalf("request ids reaching the daemon: %q", ids)
		}
	}

	drop.drops.Store(1)
	s, err := cl.Start(ctx, "cli-1", "task", &client.StartOptions{Messages: []client.Message{{Role: "user", ContentJSON: `"go"`}}})
	if err != nil {
		t.Fatalf("Start with its first reply lost: %v", err)
	}
	sameIDTwice()
	if s.Revision() != 1 || s.MessageCount() != 1 {
		t.Fatalf("session at revision %d with %d messages", s.Revision(), s.MessageCount())
	}
	check("cli-1", 1, 1)

	drop.drops.Store(1)
	calls := []client.ToolUse{{ToolUseID: "t1", Name: "read", EffectClass: client.ReadOnly}}
	if err := s.PointA(ctx, client.Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"t1"}]`}, calls); err != nil {
		t.Fatalf("PointA with its first reply lost: %v", err)
	}
	sameIDTwice()
	if s.Revision() != 2 || s.MessageCount() != 2 {
		t.Fatalf("session at revision %d with %d messages", s.Revision(), s.MessageCount())
	}
	check("cli-1", 2, 2)

	// No retries in the client: the save fails with its outcome unknown, and
	// the caller's own retry of the same save reuses its request_id.
	once, err := client.Dial(ctx, "unix:"+d.Socket, client.WithDialOptions(grpc.WithChainUnaryInterceptor(drop.intercept)),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 1}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	s2, err := once.Start(ctx, "cli-2", "task", nil)
	if err != nil {
		t.Fatal(err)
	}
	drop.drops.Store(1)
	assistant := client.Message{Role: "assistant", ContentJSON: `[{"type":"tool_use","id":"t2"}]`}
	calls = []client.ToolUse{{ToolUseID: "t2", Name: "send", EffectClass: client.SideEffect}}
	if err := s2.PointA(ctx, assistant, calls); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("PointA with its reply lost and no retries: %v, want ErrUnavailable", err)
	}
	check("cli-2", 2, 1) // applied, though the caller does not know
	if err := s2.PointA(ctx, assistant, calls); err != nil {
		t.Fatalf("PointA again: %v", err)
	}
	sameIDTwice()
	if s2.Revision() != 2 || s2.MessageCount() != 1 || len(s2.Pending()) != 1 {
		t.Fatalf("session at revision %d with %d messages, %d pending", s2.Revision(), s2.MessageCount(), len(s2.Pending()))
	}
	check("cli-2", 2, 1)
}

// TestBeginRequestIDRetry: BeginEffect of a pending tool use with a
// request_id, sent again as a client retries one whose reply was lost, is
// answered as the first was (already_begun false, the same key), where a
// begin without one says already_begun; the id on another tool use is
// REQUEST_ID_REUSED. RecordEffect with a request_id likewise.
func TestBeginRequestIDRetry(t *testing.T) {
	d := daemontest.Start(t)
	const sid = "begin-rid"
	mustSave(t, d.Client, &savepointv1.SaveCheckpointRequest{SessionId: sid, RequestId: uuid.NewString(), Task: "t",
		AppendMessages:  []*savepointv1.Message{userMsg("go")},
		PendingToolUses: []*savepointv1.ToolUse{{ToolUseId: "t1", Name: "w"}, {ToolUseId: "t2", Name: "w"}}})
	req := &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "t1", Epoch: 1, RequestId: uuid.NewString()}
	first, err := d.Client.BeginEffect(ctx, req)
	if err != nil || first.GetAlreadyBegun() || first.GetIdempotencyKey() == "" {
		t.Fatalf("BeginEffect with a request_id: %v %v", first, err)
	}
	retry, err := d.Client.BeginEffect(ctx, proto.CloneOf(req))
	if err != nil || !proto.Equal(retry, first) {
		t.Fatalf("its retry: %v %v, want the first answer %v", retry, err, first)
	}
	plain, err := d.Client.BeginEffect(ctx, &savepointv1.BeginEffectRequest{SessionId: sid, ToolUseId: "t1", Epoch: 1})
	if err != nil || !plain.GetAlreadyBegun() || plain.GetIdempotencyKey() != first.GetIdempotencyKey() {
		t.Fatalf("a begin without a request_id: %v %v, want already begun with the same key", plain, err)
	}
	other := proto.CloneOf(req)
	other.ToolUseId = "t2"
	_, err = d.Client.BeginEffect(ctx, other)
	wantReason(t, err, codes.InvalidArgument, "REQUEST_ID_REUSED")

	// RecordEffect likewise.
	rec := &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "t1", Output: "done", RequestId: uuid.NewString()}
	firstRec, err := d.Client.RecordEffect(ctx, rec)
	if err != nil || firstRec.GetAlreadyRecorded() {
		t.Fatalf("RecordEffect with a request_id: %v %v", firstRec, err)
	}
	if again, err := d.Client.RecordEffect(ctx, proto.CloneOf(rec)); err != nil || !proto.Equal(again, firstRec) {
		t.Fatalf("its retry: %v %v, want the first answer %v", again, err, firstRec)
	}
	if plain, err := d.Client.RecordEffect(ctx, &savepointv1.RecordEffectRequest{SessionId: sid, ToolUseId: "t1", Output: "done"}); err != nil || !plain.GetAlreadyRecorded() {
		t.Fatalf("a record without a request_id: %v %v, want already recorded", plain, err)
	}
}

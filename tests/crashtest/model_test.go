package crashtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The model: what a client knows it was told. Every acknowledged write is
// kept here, and read back after each restart.

// session is one client's session as acknowledged by the daemon.
type session struct {
	id      string
	epoch   uint64
	rev     uint64                 // latest acknowledged revision
	hist    []*savepointv1.Message // history of rev
	pending []*savepointv1.ToolUse // pending tool uses of rev
	revs    map[uint64]*savedRev
	calls   map[string]*call
	nextTU  int
	turn    uint32
	tokens  uint64
	compact bool // the next save drops the history after its first messages
}

// savedRev is an acknowledged save: the request as sent and the full history
// the revision must have.
type savedRev struct {
	req  *savepointv1.SaveCheckpointRequest
	hist []*savepointv1.Message
}

// call is a tool use the session named, with its acknowledged begin and
// effect.
type call struct {
	tu     *savepointv1.ToolUse
	key    string              // idempotency key from an acknowledged BeginEffect
	effect *savepointv1.Effect // acknowledged RecordEffect
	output string              // the outcome the client records
	isErr  bool
}

func newSession(id string) *session {
	return &session{id: id, revs: map[uint64]*savedRev{}, calls: map[string]*call{}}
}

// Kinds of writes.
const (
	kindSave = iota
	kindBegin
	kindRecord
)

var kindNames = [...]string{"save", "begin", "record"}

// ack names one acknowledged write.
type ack struct {
	kind int
	s    *session
	rev  uint64 // save
	tuID string // begin, record
}

func (a ack) String() string {
	if a.kind == kindSave {
		return fmt.Sprintf("save %s@%d", a.s.id, a.rev)
	}
	return fmt.Sprintf("%s %s/%s", kindNames[a.kind], a.s.id, a.tuID)
}

// tally counts what the checks found. Each acknowledged write is counted at
// most once as lost, torn or unreadable, however often it is checked.
type tally struct {
	acked      atomic.Int64
	inDoubt    atomic.Int64 // writes whose outcome the client did not learn
	hadApplied atomic.Int64 // ... of which the daemon had applied before the retry
	unexpected atomic.Int64 // answers no correct daemon gives, outside the three counts

	mu       sync.Mutex
	lost     int
	torn     int
	unread   int
	reported map[string]bool
	notes    []string
}

func newTally() *tally { return &tally{reported: map[string]bool{}} }

const maxNotes = 40

func (t *tally) note(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.notes) < maxNotes {
		t.notes = append(t.notes, s)
	}
}

// bad counts one problem with the write named by id, once.
func (t *tally) bad(what string, id, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported[id] {
		return
	}
	t.reported[id] = true
	switch what {
	case "lost":
		t.lost++
	case "torn":
		t.torn++
	case "unreadable":
		t.unread++
	default:
		panic(what)
	}
	if len(t.notes) < maxNotes {
		t.notes = append(t.notes, fmt.Sprintf("%s: %s: %s", what, id, detail))
	}
}

func (t *tally) weird(format string, args ...any) {
	t.unexpected.Add(1)
	t.note("unexpected: " + fmt.Sprintf(format, args...))
}

func (t *tally) counts() (lost, torn, unread int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost, t.torn, t.unread
}

func saveID(s *session, rev uint64) string { return fmt.Sprintf("save %s@%d", s.id, rev) }
func callID(kind int, s *session, tu string) string {
	return fmt.Sprintf("%s %s/%s", kindNames[kind], s.id, tu)
}

// readRevision reads revision rev of a session in full: GetSession, then
// the rest of its messages through ListMessages, then the whole history once
// more through ListMessages in small pages.
func readRevision(ctx context.Context, c savepointv1.SavepointServiceClient, sid string, rev uint64) (*savepointv1.Checkpoint, []*savepointv1.Message, error) {
	resp, err := c.GetSession(ctx, &savepointv1.GetSessionRequest{SessionId: sid, Revision: proto.Uint64(rev)})
	if err != nil {
		return nil, nil, err
	}
	cp := resp.Checkpoint
	msgs := slices.Clone(cp.Messages)
	for tok := resp.NextPageToken; tok != ""; {
		lm, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: sid, Revision: cp.Revision, PageToken: tok})
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, lm.Messages...)
		tok = lm.NextPageToken
	}
	var paged []*savepointv1.Message
	for tok, first := "", true; first || tok != ""; first = false {
		lm, err := c.ListMessages(ctx, &savepointv1.ListMessagesRequest{SessionId: sid, Revision: cp.Revision, PageToken: tok, PageSize: 16})
		if err != nil {
			return nil, nil, err
		}
		paged = append(paged, lm.Messages...)
		tok = lm.NextPageToken
	}
	if !sameMessages(msgs, paged) {
		return nil, nil, fmt.Errorf("revision %d: GetSession and ListMessages return different histories (%d and %d messages)", cp.Revision, len(msgs), len(paged))
	}
	return cp, msgs, nil
}

func sameMessages(a, b []*savepointv1.Message) bool {
	return slices.EqualFunc(a, b, func(x, y *savepointv1.Message) bool { return proto.Equal(x, y) })
}

func sameToolUses(a, b []*savepointv1.ToolUse) bool {
	return slices.EqualFunc(a, b, func(x, y *savepointv1.ToolUse) bool { return proto.Equal(x, y) })
}

// diffRevision says how a read revision differs from the save that made it;
// "" when it matches exactly.
func diffRevision(cp *savepointv1.Checkpoint, msgs []*savepointv1.Message, rev uint64, want *savedRev) string {
	r := want.req
	var d []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			d = append(d, fmt.Sprintf(format, args...))
		}
	}
	check(cp.SessionId == r.SessionId, "session_id %q", cp.SessionId)
	check(cp.Revision == rev, "revision %d, want %d", cp.Revision, rev)
	check(cp.Task == r.Task, "task %q, want %q", cp.Task, r.Task)
	check(cp.Turn == r.Turn, "turn %d, want %d", cp.Turn, r.Turn)
	check(cp.TokensUsed == r.TokensUsed, "tokens_used %d, want %d", cp.TokensUsed, r.TokensUsed)
	check(cp.StateJson == r.StateJson, "state_json %q, want %q", cp.StateJson, r.StateJson)
	check(maps.Equal(cp.Labels, r.Labels) || len(cp.Labels)+len(r.Labels) == 0, "labels %v, want %v", cp.Labels, r.Labels)
	check(sameToolUses(cp.PendingToolUses, r.PendingToolUses), "pending tool uses %v, want %v", ids(cp.PendingToolUses), ids(r.PendingToolUses))
	check(cp.MessageCount == uint64(len(want.hist)), "message_count %d, want %d", cp.MessageCount, len(want.hist))
	if !sameMessages(msgs, want.hist) {
		i := 0
		for i < len(msgs) && i < len(want.hist) && proto.Equal(msgs[i], want.hist[i]) {
			i++
		}
		d = append(d, fmt.Sprintf("history of %d messages differs from the %d sent from message %d on", len(msgs), len(want.hist), i))
	}
	return strings.Join(d, "; ")
}

func ids(tus []*savepointv1.ToolUse) []string {
	var out []string
	for _, t := range tus {
		out = append(out, t.ToolUseId)
	}
	return out
}

// notFound reports an answer that says the thing read does not exist.
func notFound(err error) bool { return status.Code(err) == codes.NotFound }

// outcomeUnknown reports an error after which the client cannot know
// whether its write was applied: the daemon went away mid-call.
func outcomeUnknown(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// reason returns the ErrorInfo reason of an error, or its code.
func reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	for _, d := range st.Details() {
		if ei, ok := d.(interface{ GetReason() string }); ok {
			return st.Code().String() + " " + ei.GetReason()
		}
	}
	return st.Code().String()
}

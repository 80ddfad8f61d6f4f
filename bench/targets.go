package main

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// latencyBaselines are the rows of scenario 1 after savepointd, and
// throughputBaselines those of scenario 2. A later row (LangGraph's saver
// driven from a Python script, a PostgreSQL table) is one more Target added
// here: the scenarios time and tabulate every Target alike.
func latencyBaselines() []Target {
	return []Target{fsyncTarget{}, badgerTarget{}, jsonTarget{}, sqliteTarget{}}
}

func throughputBaselines() []Target { return []Target{badgerTarget{}, sqliteTarget{}} }

// A Target is a system a checkpoint can be saved to: savepointd, or a
// baseline doing the same durable write. Open may start a process (a
// Python script, a database server) and its Writers talk to it.
type Target interface {
	// Name is the row's name in the tables.
	Name() string
	// Open prepares a fresh store in dir, an empty directory the caller
	// removes. The caller closes the Store.
	Open(ctx context.Context, dir string) (Store, error)
}

// A Store is an open Target.
type Store interface {
	// Session prepares session i (creating it is not timed) and returns its
	// writer. Writers of different sessions are used concurrently, each by
	// one goroutine.
	Session(ctx context.Context, i int) (Writer, error)
	// Close releases the store and every writer.
	Close() error
}

// A Writer saves one session's checkpoints.
type Writer interface {
	// Save makes s durable, returning when it is.
	Save(ctx context.Context, s *Save) error
}

// What a Store or Writer may do besides saving, which the checkpointer
// comparison (checkpointers.go) uses where a system has it.
type (
	// timedWriter is a Writer that times its saves itself: a store in
	// another process, whose own figure leaves out the pipe to it.
	timedWriter interface {
		SaveTimed(ctx context.Context, s *Save) (time.Duration, error)
	}
	// restarter is a Writer that can start a new conversation (a new
	// session, thread or file, empty) in place of the one it saves to.
	restarter interface {
		Restart(ctx context.Context) error
	}
	// prefiller is a Writer of a store that writes the whole conversation
	// at every save: Prefill appends msgs to it without writing them, so a
	// long conversation is reached without writing every turn of it.
	prefiller interface {
		Prefill(msgs []*savepointv1.Message) error
	}
	// resumer is a Store that can hold a conversation of msgs (made
	// without timing) and read it back whole as an agent resuming it
	// would, returning how long that reading took.
	resumer interface {
		Resume(ctx context.Context, msgs []*savepointv1.Message) (time.Duration, error)
	}
	// writeCounter is a Store whose writes are done by other processes
	// (savepointd, PostgreSQL): WriteBytes is their write_bytes so far.
	// A Store without it writes from this process.
	writeCounter interface {
		WriteBytes() (int64, error)
	}
)

// timedSave saves s through w and returns how long the save took: the
// writer's own figure when it is a timedWriter, else the time Save took.
func timedSave(ctx context.Context, w Writer, s *Save) (time.Duration, error) {
	if tw, ok := w.(timedWriter); ok {
		return tw.SaveTimed(ctx, s)
	}
	t0 := time.Now()
	err := w.Save(ctx, s)
	return time.Since(t0), err
}

// Save is one checkpoint: the messages it appends, the tool uses it leaves
// pending, and Bytes, the SaveCheckpointRequest as savepointd receives it,
// which is what a baseline writes ("the same bytes").
type Save struct {
	Messages []*savepointv1.Message
	Pending  []*savepointv1.ToolUse
	Bytes    []byte
}

// newSave builds a save of msgs and pending; its Bytes encode the request
// of session "bench-session" at turn 1.
func newSave(msgs []*savepointv1.Message, pending []*savepointv1.ToolUse) *Save {
	req := &savepointv1.SaveCheckpointRequest{
		SessionId: "bench-session", ExpectedRevision: 1, Epoch: 1, RequestId: uuid.NewString(),
		Task: benchTask, Turn: 1, AppendMessages: msgs, PendingToolUses: pending,
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err) // a request of valid strings always encodes
	}
	return &Save{Messages: msgs, Pending: pending, Bytes: b}
}

const benchTask = "savepoint-bench"

// filler returns n bytes of random letters: text that does not compress
// away, as a real message would not.
func filler(rng *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// textMessage is a message whose content_json is size bytes.
func textMessage(rng *rand.Rand, role string, size int) *savepointv1.Message {
	const env = `{"type":"text","text":""}`
	return &savepointv1.Message{Role: role, ContentJson: `{"type":"text","text":"` + filler(rng, max(size-len(env), 0)) + `"}`}
}

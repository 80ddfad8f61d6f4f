package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/savepoint-dev/savepoint/daemon"
	"github.com/savepoint-dev/savepoint/daemon/badgerstore"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestBackupRPC streams a backup of a few MiB through the Backup RPC, in
// chunks of at most 1 MiB, and restores the file into a new store.
func TestBackupRPC(t *testing.T) {
	d := daemontest.StartInProcess(t, daemon.Config{})
	c := d.Client
	big := `"` + strings.Repeat("x", 200<<10) + `"`
	for i := range 20 {
		var ms []*savepointv1.Message
		for range 2 {
			ms = append(ms, &savepointv1.Message{Role: "user", ContentJson: big})
		}
		mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: fmt.Sprintf("s%02d", i), AppendMessages: ms})
	}
	read := func(req *savepointv1.BackupRequest) (file []byte, last *savepointv1.BackupResponse) {
		t.Helper()
		stream, err := c.Backup(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return buf.Bytes(), last
			}
			if err != nil {
				t.Fatal(err)
			}
			if last != nil && last.GetNextSinceVersion() != 0 {
				t.Fatal("a response after the one with next_since_version")
			}
			if len(r.GetData()) > 1<<20 {
				t.Fatalf("a response of %d bytes", len(r.GetData()))
			}
			buf.Write(r.GetData())
			last = r
		}
	}
	file, last := read(&savepointv1.BackupRequest{Plaintext: true})
	if len(file) < 7<<20 || last.GetNextSinceVersion() == 0 || last.GetEncrypted() {
		t.Fatalf("backup of %d bytes, last response %v", len(file), last)
	}
	mustSave(t, c, &savepointv1.SaveCheckpointRequest{SessionId: "later"})
	inc, last2 := read(&savepointv1.BackupRequest{Plaintext: true, SinceVersion: last.GetNextSinceVersion()})
	if len(inc) >= len(file)/10 || last2.GetNextSinceVersion() <= last.GetNextSinceVersion() {
		t.Fatalf("incremental of %d bytes (full %d), next %d", len(inc), len(file), last2.GetNextSinceVersion())
	}

	s, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range [][]byte{file, inc} {
		if _, err := s.Restore(bytes.NewReader(f)); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := s.ListSessions(ctx, "", 100, core.SessionFilter{})
	if err != nil || len(sums) != 21 || sums[20].SessionID != "s19" || sums[0].SessionID != "later" {
		t.Fatalf("restored %d sessions, %v", len(sums), err)
	}
	ms, err := s.Messages(ctx, "s07", 0, 0, 8<<20, 0)
	if err != nil || len(ms) != 2 || ms[1].ContentJSON != big {
		t.Fatalf("restored messages: %d, %v", len(ms), err)
	}
}

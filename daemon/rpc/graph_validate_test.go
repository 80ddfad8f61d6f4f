package rpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// FuzzValidateGraph decodes arbitrary bytes as PutCheckpoint, PutWrites and
// ListCheckpoints requests: validation must never panic, and what it
// accepts must respect the limits the store relies on (no NUL in a key, a
// header within the response budget, a JSON object of metadata).
func FuzzValidateGraph(f *testing.F) {
	seed, _ := proto.Marshal(&savepointv1.PutCheckpointRequest{Checkpoint: &savepointv1.GraphCheckpoint{
		ThreadId: "t", CheckpointId: "1", MetadataJson: `{"a":1}`, ChannelVersions: map[string]string{"a": "1"}},
		Blobs: []*savepointv1.ChannelBlob{{Channel: "a", Version: "1", Value: &savepointv1.TypedValue{Type: "json", Data: []byte("1")}}}})
	f.Add(seed)
	w, _ := proto.Marshal(&savepointv1.PutWritesRequest{ThreadId: "t", CheckpointId: "1", TaskId: "x", Writes: []*savepointv1.ChannelWrite{{Idx: -1, Channel: "c"}}})
	f.Add(w)
	cfg := DefaultLimits()
	f.Fuzz(func(t *testing.T, raw []byte) {
		var put savepointv1.PutCheckpointRequest
		if proto.Unmarshal(raw, &put) == nil {
			for _, upload := range []bool{false, true} {
				p, err := validateGraphPut(cfg, put.GetCheckpoint(), put.GetBlobs(), put.GetRequestId(), upload)
				if err != nil {
					continue
				}
				c := p.Checkpoint
				if strings.ContainsRune(c.ThreadID+c.NS+c.ID+c.ParentID, 0) || c.ThreadID == "" || c.ID == "" {
					t.Fatalf("accepted keys %q %q %q %q", c.ThreadID, c.NS, c.ID, c.ParentID)
				}
				var md map[string]json.RawMessage
				if json.Unmarshal([]byte(c.MetadataJSON), &md) != nil || md == nil || len(c.MetadataJSON) > graphHeaderLimit(cfg) {
					t.Fatalf("accepted metadata %q", c.MetadataJSON)
				}
				for _, b := range p.Blobs {
					if strings.ContainsRune(b.Channel+b.Version, 0) || b.Channel == "" || b.Version == "" {
						t.Fatalf("accepted blob key %q %q", b.Channel, b.Version)
					}
				}
			}
		}
		var pw savepointv1.PutWritesRequest
		if proto.Unmarshal(raw, &pw) == nil {
			if w, err := validatePutWrites(&pw, false); err == nil {
				seen := map[int32]bool{}
				for _, x := range w.Writes {
					if x.Idx < core.GraphIdxResume || seen[x.Idx] || strings.ContainsRune(x.Channel, 0) {
						t.Fatalf("accepted write %+v", x)
					}
					seen[x.Idx] = true
				}
			}
		}
		var lr savepointv1.ListCheckpointsRequest
		if proto.Unmarshal(raw, &lr) == nil {
			validateListCheckpoints(&lr)
		}
	})
}

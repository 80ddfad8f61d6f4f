package client

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// TestEffectClassFromMCP runs the MCP annotation cases that every client's
// mapping is tested against (testdata/mcp_annotations.json).
func TestEffectClassFromMCP(t *testing.T) {
	// TestMain changes the working directory: find testdata beside this file.
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "testdata", "mcp_annotations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name        string          `json:"name"`
			Annotations json.RawMessage `json:"annotations"`
			Effect      string          `json:"effect"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no cases in testdata/mcp_annotations.json")
	}
	for _, c := range file.Cases {
		want, ok := savepointv1.EffectClass_value["EFFECT_CLASS_"+c.Effect]
		if !ok {
			t.Fatalf("%s: unknown effect %q", c.Name, c.Effect)
		}
		got, err := EffectClassFromMCP(c.Annotations)
		if err != nil || got != EffectClass(want) {
			t.Errorf("%s: EffectClassFromMCP(%s) = %v, %v; want %v", c.Name, c.Annotations, got, err, EffectClass(want))
		}
	}
	if got, err := EffectClassFromMCP(nil); err != nil || got != SideEffect {
		t.Errorf("no annotations at all: %v, %v; want SideEffect", got, err)
	}
	for _, bad := range []string{`[true]`, `"readOnlyHint"`, `{"readOnlyHint":`} {
		if got, err := EffectClassFromMCP(json.RawMessage(bad)); err == nil || got != SideEffect {
			t.Errorf("EffectClassFromMCP(%s) = %v, %v; want SideEffect and an error", bad, got, err)
		}
	}
}

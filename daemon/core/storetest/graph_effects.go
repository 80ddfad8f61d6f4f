package storetest

import (
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// testThreadEffectOutputBudget checks that the store's ListThreadEffects
// trims the outputs of the entries it lists to maxOutputBytes, as
// core.OutputBudget says, and keeps them whole with 0. Every store of
// savepointd serves the graph service.
func testThreadEffectOutputBudget(t *testing.T, store core.Store) {
	s, ok := store.(core.GraphStore)
	if !ok {
		t.Fatalf("%T is not a core.GraphStore", store)
	}
	sizes := map[string]int{"a": 100, "b": 300, "c": 50}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.BeginThreadEffect(ctx, &core.ThreadEffectBegin{ThreadID: "budget", ToolUseID: id, Name: "fetch",
			InputJSON: `{}`, Class: core.ReadOnly}); err != nil {
			t.Fatal(err)
		}
		out := []byte(`"` + strings.Repeat(id, sizes[id]-2) + `"`)
		if _, err := s.RecordThreadEffect(ctx, &core.ThreadEffectRecord{ThreadID: "budget", ToolUseID: id, Attempt: 1,
			Output: core.GraphValue{Type: "json", Data: out, Size: int64(len(out))}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		budget int
		whole  map[string]bool
	}{
		{0, map[string]bool{"a": true, "b": true, "c": true}},
		{200, map[string]bool{"a": true, "c": true}}, // b would pass it; c still fits
		{450, map[string]bool{"a": true, "b": true, "c": true}},
		{99, map[string]bool{"c": true}},
	} {
		es, err := s.ListThreadEffects(ctx, "budget", core.ThreadEffectKey{}, 10, tc.budget)
		if err != nil || len(es) != 3 {
			t.Fatalf("budget %d: %d entries, %v", tc.budget, len(es), err)
		}
		for _, e := range es {
			want := 0
			if tc.whole[e.ToolUseID] {
				want = sizes[e.ToolUseID]
			}
			if len(e.Output.Data) != want || e.Output.Size != int64(sizes[e.ToolUseID]) {
				t.Errorf("budget %d: entry %s has %d of its output's bytes and size %d, want %d and %d",
					tc.budget, e.ToolUseID, len(e.Output.Data), e.Output.Size, want, sizes[e.ToolUseID])
			}
		}
	}
}

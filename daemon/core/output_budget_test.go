package core_test

import (
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

func TestOutputBudget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int
		sizes []int
		kept  []bool
	}{
		{"no limit", 0, []int{5, 500, 5}, []bool{true, true, true}},
		{"all fit", 20, []int{5, 10, 5}, []bool{true, true, true}},
		{"a large one is dropped, a later small one kept", 20, []int{5, 30, 10}, []bool{true, false, true}},
		{"exactly at the budget", 10, []int{4, 6, 1}, []bool{true, true, false}},
		{"an empty output is kept", 1, []int{0, 2, 1}, []bool{true, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := core.OutputBudget{Bytes: tc.bytes}
			for i, n := range tc.sizes {
				e := core.ThreadEffect{Output: core.GraphValue{Type: "json", Data: make([]byte, n), Size: int64(n)}}
				b.Trim(&e)
				if kept := e.Output.Data != nil || n == 0; kept != tc.kept[i] || e.Output.Size != int64(n) {
					t.Errorf("output %d of %d bytes: kept %v, size %d; want kept %v, size %d", i, n, kept, e.Output.Size, tc.kept[i], n)
				}
			}
		})
	}
}

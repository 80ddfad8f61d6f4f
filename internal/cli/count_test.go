package cli

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "message", "0 messages"},
		{1, "message", "1 message"},
		{2, "message", "2 messages"},
		{1, "entry", "1 entry"},
		{3, "entry", "3 entries"},
		{2, "day", "2 days"},
		{1, "pending tool use", "1 pending tool use"},
		{5, "pending tool use", "5 pending tool uses"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
	if got := Count(uint64(1), "record"); got != "1 record" {
		t.Errorf("Count(uint64(1)) = %q", got)
	}
}

package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		dir  string
		v    bool
	}{
		{[]string{"--data-dir", "D", "full.bak", "inc.bak"}, []string{"full.bak", "inc.bak"}, "D", false},
		{[]string{"full.bak", "inc.bak", "--data-dir", "D"}, []string{"full.bak", "inc.bak"}, "D", false},
		{[]string{"full.bak", "--data-dir=D", "inc.bak", "-v"}, []string{"full.bak", "inc.bak"}, "D", true},
		{[]string{"-", "--data-dir", "D"}, []string{"-"}, "D", false},
		{[]string{"--data-dir", "D", "--", "-v", "--x"}, []string{"-v", "--x"}, "D", false},
		{[]string{"a", "--", "--data-dir"}, []string{"a", "--data-dir"}, "", false},
		{[]string{"--data-dir", "D"}, nil, "D", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		dir := fs.String("data-dir", "", "")
		v := fs.Bool("v", false, "")
		pos, err := Interspersed(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !slices.Equal(pos, tc.pos) {
			t.Errorf("%q: positional %q, want %q", tc.args, pos, tc.pos)
		}
		if *dir != tc.dir || *v != tc.v {
			t.Errorf("%q: --data-dir %q, -v %v", tc.args, *dir, *v)
		}
	}
}

func TestInterspersedBadFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := Interspersed(fs, []string{"a", "--nope"}); err == nil {
		t.Error("an undefined flag after a positional argument was accepted")
	}
}

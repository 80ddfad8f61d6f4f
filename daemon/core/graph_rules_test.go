package core_test

import (
	"errors"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

func TestGraphReplay(t *testing.T) {
	for _, tc := range []struct {
		name        string
		id          string
		stored      []byte
		found       bool
		wantAlready bool
		wantErr     error
	}{
		{name: "no id", stored: []byte("fp"), found: true},
		{name: "new id", id: "r"},
		{name: "retry", id: "r", stored: []byte("fp"), found: true, wantAlready: true},
		{name: "reused", id: "r", stored: []byte("other"), found: true, wantErr: core.ErrRequestIDReused},
	} {
		already, err := core.GraphReplay("th", tc.id, tc.stored, tc.found, []byte("fp"))
		if already != tc.wantAlready || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("%s: already=%v err=%v, want %v %v", tc.name, already, err, tc.wantAlready, tc.wantErr)
		}
	}
}

func TestLateWrite(t *testing.T) {
	for _, tc := range []struct {
		deleted  bool
		through  string
		id       string
		wantLate bool
	}{
		{false, "", "a", false},
		{true, "c", "b", true},
		{true, "c", "c", true},
		{true, "c", "d", false},
	} {
		if got := core.LateWrite(tc.deleted, tc.through, tc.id); got != tc.wantLate {
			t.Errorf("LateWrite(%v, %q, %q) = %v, want %v", tc.deleted, tc.through, tc.id, got, tc.wantLate)
		}
	}
}

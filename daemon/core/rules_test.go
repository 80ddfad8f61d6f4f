package core

import (
	"errors"
	"testing"
)

func TestFence(t *testing.T) {
	tests := []struct {
		name           string
		owner, epoch   uint64
		resumed, fence bool
	}{
		{"owner", 3, 3, true, false},
		{"older", 3, 2, true, true},
		{"newer", 3, 4, true, true},
		{"zero before the first resume", 1, 0, false, false},
		{"zero once resumed", 2, 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Fence("s", tt.owner, 7, tt.resumed, tt.epoch)
			if (err != nil) != tt.fence {
				t.Fatalf("Fence = %v, want fenced=%v", err, tt.fence)
			}
			var se *StateError
			if tt.fence && (!errors.Is(err, ErrSessionFenced) || !errors.As(err, &se) || se.CurrentEpoch != tt.owner || se.CurrentRevision != 7) {
				t.Fatalf("Fence = %#v, want ErrSessionFenced with epoch %d, revision 7", err, tt.owner)
			}
		})
	}
}

func TestHasLabels(t *testing.T) {
	labels := map[string]string{"team": "infra", "env": "prod"}
	for _, tt := range []struct {
		filter map[string]string
		want   bool
	}{
		{nil, true},
		{map[string]string{"team": "infra"}, true},
		{map[string]string{"team": "infra", "env": "prod"}, true},
		{map[string]string{"team": "web"}, false},
		{map[string]string{"owner": ""}, false},
	} {
		if got := HasLabels(labels, tt.filter); got != tt.want {
			t.Errorf("HasLabels(%v) = %v, want %v", tt.filter, got, tt.want)
		}
	}
}

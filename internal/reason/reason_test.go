package reason

import (
	"testing"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		r    savepointv1.ErrorReason
		wire string
	}{
		{savepointv1.ErrorReason_ERROR_REASON_SESSION_FENCED, "SESSION_FENCED"},
		{savepointv1.ErrorReason_ERROR_REASON_INTERNAL, "INTERNAL"},
		{savepointv1.ErrorReason_ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE, "KEEP_MESSAGES_OUT_OF_RANGE"},
		{savepointv1.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE, "REQUEST_TOO_LARGE"},
		{savepointv1.ErrorReason_ERROR_REASON_INVALID_UTF8, "INVALID_UTF8"},
	}
	for _, tt := range tests {
		if got := String(tt.r); got != tt.wire {
			t.Errorf("String(%v) = %q, want %q", tt.r, got, tt.wire)
		}
		if got, ok := Parse(tt.wire); !ok || got != tt.r {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.wire, got, ok, tt.r)
		}
	}
	for _, s := range []string{"", "UNSPECIFIED", "ERROR_REASON_SESSION_FENCED", "session_fenced", "SOMETHING_NEW"} {
		if r, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %v, want no value", s, r)
		}
	}
	if s := String(savepointv1.ErrorReason_ERROR_REASON_UNSPECIFIED); s != "" {
		t.Errorf("String(UNSPECIFIED) = %q, want \"\"", s)
	}
	if s := String(9999); s != "" {
		t.Errorf("String(9999) = %q, want \"\"", s)
	}
}

func TestAll(t *testing.T) {
	got := All()
	if want := len(savepointv1.ErrorReason_name) - 1; len(got) != want {
		t.Fatalf("All() has %d values, the enum %d besides UNSPECIFIED", len(got), want)
	}
	seen := map[string]bool{}
	for _, r := range got {
		s := String(r)
		if s == "" || seen[s] || "ERROR_REASON_"+s != r.String() {
			t.Errorf("value %v: wire form %q (duplicate: %v)", r, s, seen[s])
		}
		seen[s] = true
	}
	got[0] = 0
	if All()[0] == 0 {
		t.Error("All returns its own slice")
	}
}

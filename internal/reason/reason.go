// Package reason converts between the ErrorReason enum of savepoint.v1 and
// the google.rpc.ErrorInfo reasons on the wire, so that the daemon and the Go
// client name every reason from the proto and never spell one out again.
package reason

import (
	"strings"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// prefix is buf's STANDARD enum value prefix, absent on the wire.
const prefix = "ERROR_REASON_"

// names and values are read once from the generated enum descriptor.
var names, values, all = func() (map[savepointv1.ErrorReason]string, map[string]savepointv1.ErrorReason, []savepointv1.ErrorReason) {
	vs := savepointv1.ErrorReason(0).Descriptor().Values()
	n := make(map[savepointv1.ErrorReason]string, vs.Len())
	v := make(map[string]savepointv1.ErrorReason, vs.Len())
	var a []savepointv1.ErrorReason
	for i := range vs.Len() {
		r := savepointv1.ErrorReason(vs.Get(i).Number())
		if r == savepointv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		s := strings.TrimPrefix(string(vs.Get(i).Name()), prefix)
		n[r], v[s] = s, r
		a = append(a, r)
	}
	return n, v, a
}()

// String returns the wire form of r, its value name without the
// "ERROR_REASON_" prefix (ERROR_REASON_SESSION_FENCED is "SESSION_FENCED");
// it returns "" for ERROR_REASON_UNSPECIFIED and numbers the enum lacks.
func String(r savepointv1.ErrorReason) string { return names[r] }

// Parse returns the enum value whose wire form is s; false when there is
// none (an empty reason, or one from a newer daemon).
func Parse(s string) (savepointv1.ErrorReason, bool) {
	r, ok := values[s]
	return r, ok
}

// All returns every value of the enum but ERROR_REASON_UNSPECIFIED, in
// declaration order; the caller may modify the slice.
func All() []savepointv1.ErrorReason { return append([]savepointv1.ErrorReason(nil), all...) }

package rpc

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// errorInfo returns the ErrorInfo of st, failing the test when it has none.
func errorInfo(t *testing.T, st *status.Status) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("status %v has no ErrorInfo", st)
	return nil
}

func TestToStatus(t *testing.T) {
	tests := []struct {
		err    error
		code   codes.Code
		reason string
		md     map[string]string
	}{
		{core.ErrSessionNotFound, codes.NotFound, "SESSION_NOT_FOUND", nil},
		{core.ErrSessionExists, codes.AlreadyExists, "SESSION_EXISTS", nil},
		{core.ErrSessionFenced, codes.Aborted, "SESSION_FENCED", nil},
		{core.ErrRevisionMismatch, codes.Aborted, "REVISION_MISMATCH", nil},
		{core.ErrRevisionNotFound, codes.NotFound, "REVISION_NOT_FOUND", nil},
		{core.ErrRequestIDReused, codes.InvalidArgument, "REQUEST_ID_REUSED", nil},
		{core.ErrKeepMessagesOutOfRange, codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE", nil},
		{core.ErrCallAlreadyRecorded, codes.FailedPrecondition, "CALL_ALREADY_RECORDED", nil},
		{core.ErrCallNotPending, codes.FailedPrecondition, "CALL_NOT_PENDING", nil},
		{core.ErrCallUnknown, codes.NotFound, "CALL_UNKNOWN", nil},
		{core.ErrToolNameMismatch, codes.FailedPrecondition, "TOOL_NAME_MISMATCH", nil},
		{core.ErrEffectConflict, codes.AlreadyExists, "EFFECT_CONFLICT", nil},
		{core.ErrCheckpointCorrupt, codes.DataLoss, "CHECKPOINT_CORRUPT", nil},
		{core.ErrInvalidPageToken, codes.InvalidArgument, "INVALID_PAGE_TOKEN", nil},
		{core.ErrUnavailable, codes.Unavailable, "UNAVAILABLE", nil},
		{core.ErrDiskFull, codes.ResourceExhausted, "DISK_FULL", nil},
		{core.ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT", nil},
		{context.Canceled, codes.Canceled, "CANCELED", nil},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED", nil},
		{
			&core.StateError{Err: core.ErrSessionFenced, Msg: "epoch 2 < 3", CurrentRevision: 7, CurrentEpoch: 3},
			codes.Aborted, "SESSION_FENCED",
			map[string]string{"current_revision": "7", "current_epoch": "3"},
		},
		{
			&core.StateError{Err: core.ErrRevisionMismatch, Msg: "expected 4", CurrentRevision: 18446744073709551615, CurrentEpoch: 1},
			codes.Aborted, "REVISION_MISMATCH",
			map[string]string{"current_revision": "18446744073709551615", "current_epoch": "1"},
		},
		{
			&core.StateError{Err: core.ErrSessionExists, CurrentRevision: 1, CurrentEpoch: 1},
			codes.AlreadyExists, "SESSION_EXISTS",
			map[string]string{"current_revision": "1", "current_epoch": "1"},
		},
		{ErrRequestTooLarge, codes.ResourceExhausted, "REQUEST_TOO_LARGE", nil},
		{
			&requestSizeError{Size: 4194305, Limit: 4194304},
			codes.ResourceExhausted, "REQUEST_TOO_LARGE",
			map[string]string{"request_bytes": "4194305", "max_request_bytes": "4194304"},
		},
		{
			&fieldError{Field: "labels", Reason: reasonInvalidUTF8, Msg: "has a key that is not valid UTF-8"},
			codes.InvalidArgument, "INVALID_UTF8",
			map[string]string{"field": "labels"},
		},
		{
			&fieldError{Field: "append_messages[0].content_json", Reason: reasonInvalidJSON, Msg: "is not valid JSON"},
			codes.InvalidArgument, "INVALID_JSON",
			map[string]string{"field": "append_messages[0].content_json"},
		},
	}
	for _, tt := range tests {
		for _, err := range []error{tt.err, fmt.Errorf("save s1: %w", tt.err)} {
			t.Run(err.Error(), func(t *testing.T) {
				st := ToStatus(err)
				if st.Code() != tt.code {
					t.Errorf("code = %v, want %v", st.Code(), tt.code)
				}
				info := errorInfo(t, st)
				if info.Reason != tt.reason || info.Domain != ErrorDomain {
					t.Errorf("ErrorInfo = %s/%s, want %s/%s", info.Domain, info.Reason, ErrorDomain, tt.reason)
				}
				if !maps.Equal(info.Metadata, tt.md) {
					t.Errorf("metadata = %v, want %v", info.Metadata, tt.md)
				}
				if code, ok := Reasons()[info.Reason]; !ok || code != tt.code {
					t.Errorf("Reasons()[%s] = %v, %v; want %v", info.Reason, code, ok, tt.code)
				}
				if !strings.Contains(st.Message(), tt.err.Error()) {
					t.Errorf("message %q does not say %q", st.Message(), tt.err.Error())
				}
			})
		}
	}
}

func TestToStatusInternal(t *testing.T) {
	err := fmt.Errorf("badger: value log /secret/path: %w", errors.New("checksum"))
	st := ToStatus(err)
	if st.Code() != codes.Internal {
		t.Fatalf("code = %v, want Internal", st.Code())
	}
	if info := errorInfo(t, st); info.Reason != ReasonInternal {
		t.Errorf("reason = %s, want %s", info.Reason, ReasonInternal)
	}
	if strings.Contains(st.Message(), "secret") || strings.Contains(st.Message(), "checksum") {
		t.Errorf("message %q leaks the internal error", st.Message())
	}
}

func TestToStatusNil(t *testing.T) {
	if st := ToStatus(nil); st.Code() != codes.OK || st.Err() != nil {
		t.Errorf("ToStatus(nil) = %v, want OK", st)
	}
}

// wire is the reason r as the service sends it.
func wire(r savepointv1.ErrorReason) string { return reason.String(r) }

// TestReasonsAreTheEnum checks that the service returns exactly the reasons
// of the ErrorReason enum: a value without a row in errorKinds, or a row the
// enum does not name, fails it.
func TestReasonsAreTheEnum(t *testing.T) {
	got := Reasons()
	want := map[string]bool{}
	vals := savepointv1.ErrorReason(0).Descriptor().Values()
	for i := range vals.Len() {
		if n := string(vals.Get(i).Name()); n != "ERROR_REASON_UNSPECIFIED" {
			want[strings.TrimPrefix(n, "ERROR_REASON_")] = true
		}
	}
	for r := range want {
		if _, ok := got[r]; !ok {
			t.Errorf("the enum has %s, which Reasons() lacks: add a row to errorKinds", r)
		}
	}
	for r := range got {
		if !want[r] {
			t.Errorf("Reasons() has %q, which is no ErrorReason value", r)
		}
	}
	if len(got) != len(errorKinds) {
		t.Errorf("Reasons() has %d reasons for %d rows of errorKinds: a reason is listed twice", len(got), len(errorKinds))
	}
}

// TestAPIDocListsEveryReason checks that the error tables of docs/api.md
// have one row for each reason the service returns, and no other.
func TestAPIDocListsEveryReason(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|").FindAllSubmatch(doc, -1) {
		rows[string(m[1])]++
	}
	reasons := Reasons()
	for r := range reasons {
		if rows[r] != 1 {
			t.Errorf("docs/api.md has %d rows for %s, want 1", rows[r], r)
		}
	}
	for r := range rows {
		if _, ok := reasons[r]; !ok {
			t.Errorf("docs/api.md lists %s, which the service never returns", r)
		}
	}
}

// TestFieldReasonsToStatus checks that every reason without a sentinel of
// its own reaches the client, through a *fieldError, with its row's code.
func TestFieldReasonsToStatus(t *testing.T) {
	for _, k := range errorKinds {
		if k.err != nil || k.reason == savepointv1.ErrorReason_ERROR_REASON_INTERNAL {
			continue
		}
		st := ToStatus(&fieldError{Field: "f", Reason: k.reason, Msg: "is bad"})
		info := errorInfo(t, st)
		if st.Code() != k.code || info.Reason != wire(k.reason) || info.Metadata["field"] != "f" {
			t.Errorf("%v: status %v %s %v, want %v", k.reason, st.Code(), info.Reason, info.Metadata, k.code)
		}
	}
}

// TestErrorKindsCoverSentinels makes sure each sentinel declared in core's
// errors.go and in this package's has a row.
func TestErrorKindsCoverSentinels(t *testing.T) {
	sentinels := map[string]error{
		"ErrInvalidArgument": core.ErrInvalidArgument, "ErrSessionNotFound": core.ErrSessionNotFound,
		"ErrSessionExists": core.ErrSessionExists, "ErrSessionFenced": core.ErrSessionFenced,
		"ErrRevisionMismatch": core.ErrRevisionMismatch, "ErrRevisionNotFound": core.ErrRevisionNotFound,
		"ErrRequestIDReused": core.ErrRequestIDReused, "ErrKeepMessagesOutOfRange": core.ErrKeepMessagesOutOfRange,
		"ErrCallAlreadyRecorded": core.ErrCallAlreadyRecorded, "ErrCallNotPending": core.ErrCallNotPending,
		"ErrCallUnknown": core.ErrCallUnknown, "ErrToolNameMismatch": core.ErrToolNameMismatch,
		"ErrEffectConflict": core.ErrEffectConflict, "ErrCheckpointCorrupt": core.ErrCheckpointCorrupt,
		"ErrInvalidPageToken": core.ErrInvalidPageToken, "ErrUnavailable": core.ErrUnavailable,
		"ErrDiskFull": core.ErrDiskFull, "ErrRequestTooLarge": ErrRequestTooLarge,
		"ErrSessionCompleted": core.ErrSessionCompleted, "ErrPlaintextBackup": core.ErrPlaintextBackup,
		"ErrBackupUnsupported": core.ErrBackupUnsupported, "ErrPermissionDenied": ErrPermissionDenied,
		"ErrUploadAborted": core.ErrUploadAborted, "ErrEffectInputMismatch": core.ErrEffectInputMismatch,
		"ErrEffectNotBegun": core.ErrEffectNotBegun, "ErrCallNotInDoubt": core.ErrCallNotInDoubt,
		"ErrResolutionConflict": core.ErrResolutionConflict,
		"ErrApprovalNotWaiting": core.ErrApprovalNotWaiting, "ErrApprovalConflict": core.ErrApprovalConflict,
		"ErrApprovalInputMismatch": core.ErrApprovalInputMismatch,
		"ErrCommitOutcomeUnknown":  core.ErrCommitOutcomeUnknown, "ErrNoWritableHost": core.ErrNoWritableHost,
	}
	for _, path := range []string{"../core/errors.go", "errors.go"} {
		checkSentinelsListed(t, path, sentinels)
	}
	for name, s := range sentinels {
		found := false
		for _, k := range errorKinds {
			found = found || k.err == s
		}
		if !found {
			t.Errorf("no errorKinds row for %s", name)
		}
	}
}

// checkSentinelsListed fails for each Err variable the file at path declares
// that sentinels does not name.
func checkSentinelsListed(t *testing.T, path string, sentinels map[string]error) {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if _, ok := sentinels[name.Name]; !ok && strings.HasPrefix(name.Name, "Err") {
					t.Errorf("%s declares %s: add it to errorKinds in status.go and to this test", path, name.Name)
				}
			}
		}
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		{ErrSessionNotFound, codes.NotFound, "SESSION_NOT_FOUND", nil},
		{ErrSessionExists, codes.AlreadyExists, "SESSION_EXISTS", nil},
		{ErrSessionFenced, codes.Aborted, "SESSION_FENCED", nil},
		{ErrRevisionMismatch, codes.Aborted, "REVISION_MISMATCH", nil},
		{ErrRevisionNotFound, codes.NotFound, "REVISION_NOT_FOUND", nil},
		{ErrRequestIDReused, codes.InvalidArgument, "REQUEST_ID_REUSED", nil},
		{ErrKeepOutOfRange, codes.InvalidArgument, "KEEP_MESSAGES_OUT_OF_RANGE", nil},
		{ErrCallAlreadyRecorded, codes.FailedPrecondition, "CALL_ALREADY_RECORDED", nil},
		{ErrCallNotPending, codes.FailedPrecondition, "CALL_NOT_PENDING", nil},
		{ErrCallUnknown, codes.NotFound, "CALL_UNKNOWN", nil},
		{ErrToolNameMismatch, codes.FailedPrecondition, "TOOL_NAME_MISMATCH", nil},
		{ErrEffectConflict, codes.AlreadyExists, "EFFECT_CONFLICT", nil},
		{ErrCorrupt, codes.DataLoss, "CHECKPOINT_CORRUPT", nil},
		{ErrInvalidPageToken, codes.InvalidArgument, "INVALID_PAGE_TOKEN", nil},
		{ErrUnavailable, codes.Unavailable, "UNAVAILABLE", nil},
		{ErrDiskFull, codes.ResourceExhausted, "DISK_FULL", nil},
		{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT", nil},
		{context.Canceled, codes.Canceled, "CANCELED", nil},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED", nil},
		{
			&StateError{Err: ErrSessionFenced, Msg: "epoch 2 < 3", CurrentRevision: 7, CurrentEpoch: 3},
			codes.Aborted, "SESSION_FENCED",
			map[string]string{"current_revision": "7", "current_epoch": "3"},
		},
		{
			&StateError{Err: ErrRevisionMismatch, Msg: "expected 4", CurrentRevision: 18446744073709551615, CurrentEpoch: 1},
			codes.Aborted, "REVISION_MISMATCH",
			map[string]string{"current_revision": "18446744073709551615", "current_epoch": "1"},
		},
		{
			&StateError{Err: ErrSessionExists, CurrentRevision: 1, CurrentEpoch: 1},
			codes.AlreadyExists, "SESSION_EXISTS",
			map[string]string{"current_revision": "1", "current_epoch": "1"},
		},
		{
			&FieldError{Field: "append_messages[0].content_json", Reason: "INVALID_JSON", Msg: "is not valid JSON"},
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

// TestErrorKindsCoverSentinels makes sure each sentinel declared in
// errors.go has a row and each reason one meaning.
func TestErrorKindsCoverSentinels(t *testing.T) {
	sentinels := map[string]error{
		"ErrInvalidArgument": ErrInvalidArgument, "ErrSessionNotFound": ErrSessionNotFound,
		"ErrSessionExists": ErrSessionExists, "ErrSessionFenced": ErrSessionFenced,
		"ErrRevisionMismatch": ErrRevisionMismatch, "ErrRevisionNotFound": ErrRevisionNotFound,
		"ErrRequestIDReused": ErrRequestIDReused, "ErrKeepOutOfRange": ErrKeepOutOfRange,
		"ErrCallAlreadyRecorded": ErrCallAlreadyRecorded, "ErrCallNotPending": ErrCallNotPending,
		"ErrCallUnknown": ErrCallUnknown, "ErrToolNameMismatch": ErrToolNameMismatch,
		"ErrEffectConflict": ErrEffectConflict, "ErrCorrupt": ErrCorrupt,
		"ErrInvalidPageToken": ErrInvalidPageToken, "ErrUnavailable": ErrUnavailable,
		"ErrDiskFull": ErrDiskFull,
	}
	file, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
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
					t.Errorf("errors.go declares %s: add it to errorKinds in status.go and to this test", name.Name)
				}
			}
		}
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
	seen := map[string]bool{}
	for _, k := range errorKinds {
		if seen[k.reason] {
			t.Errorf("reason %s listed twice", k.reason)
		}
		seen[k.reason] = true
	}
	for _, r := range fieldReasons {
		if seen[r] {
			t.Errorf("field reason %s also names a sentinel", r)
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func TestTranslateReasons(t *testing.T) {
	tests := []struct {
		reason string
		code   codes.Code
		want   []error
	}{
		{"SESSION_NOT_FOUND", codes.NotFound, []error{ErrSessionNotFound}},
		{"SESSION_EXISTS", codes.AlreadyExists, []error{ErrSessionExists}},
		{"SESSION_FENCED", codes.Aborted, []error{ErrSessionFenced}},
		{"REVISION_MISMATCH", codes.Aborted, []error{ErrRevisionMismatch}},
		{"REVISION_NOT_FOUND", codes.NotFound, []error{ErrRevisionNotFound}},
		{"REQUEST_ID_REUSED", codes.InvalidArgument, []error{ErrRequestIDReused, ErrInvalidArgument}},
		{"KEEP_MESSAGES_OUT_OF_RANGE", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"CALL_ALREADY_RECORDED", codes.FailedPrecondition, []error{ErrCallAlreadyRecorded}},
		{"CALL_NOT_PENDING", codes.FailedPrecondition, []error{ErrCallNotPending}},
		{"CALL_UNKNOWN", codes.NotFound, []error{ErrCallUnknown}},
		{"TOOL_NAME_MISMATCH", codes.FailedPrecondition, []error{ErrToolNameMismatch}},
		{"EFFECT_CONFLICT", codes.AlreadyExists, []error{ErrEffectConflict}},
		{"CHECKPOINT_CORRUPT", codes.DataLoss, []error{ErrCheckpointCorrupt}},
		{"INVALID_PAGE_TOKEN", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"UNAVAILABLE", codes.Unavailable, []error{ErrUnavailable}},
		{"INTERNAL", codes.Internal, []error{ErrInternal}},
		{"DISK_FULL", codes.ResourceExhausted, []error{ErrDiskFull}},
		{"PERMISSION_DENIED", codes.PermissionDenied, []error{ErrPermissionDenied}},
		{"REQUEST_TOO_LARGE", codes.ResourceExhausted, []error{ErrRequestTooLarge}},
		{"CANCELED", codes.Canceled, []error{context.Canceled}},
		{"DEADLINE_EXCEEDED", codes.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{"INVALID_ARGUMENT", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_SESSION_ID", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_TOOL_USE_ID", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_REQUEST_ID", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"MISSING_FIELD", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_JSON", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"MESSAGE_TOO_LARGE", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"STATE_TOO_LARGE", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_EFFECT_CLASS", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"DUPLICATE_TOOL_USE_ID", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"TOOL_USE_ID_MISMATCH", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_LABEL", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_PAGE_SIZE", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"FIELD_TOO_LARGE", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_UTF8", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_GRAPH_KEY", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"INVALID_UPLOAD", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"SESSION_COMPLETED", codes.FailedPrecondition, []error{ErrSessionCompleted}},
		{"INVALID_SESSION_STATUS", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"PLAINTEXT_BACKUP", codes.FailedPrecondition, []error{ErrPlaintextBackup}},
		{"BACKUP_UNSUPPORTED", codes.Unimplemented, []error{ErrBackupUnsupported}},
		{"INVALID_ORDER_BY", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"UPLOAD_ABORTED", codes.Aborted, []error{ErrUploadAborted}},
		{"EFFECT_INPUT_MISMATCH", codes.FailedPrecondition, []error{ErrEffectInputMismatch}},
		{"EFFECT_NOT_BEGUN", codes.FailedPrecondition, []error{ErrEffectNotBegun}},
		{"CALL_NOT_IN_DOUBT", codes.FailedPrecondition, []error{ErrCallNotInDoubt}},
		{"RESOLUTION_CONFLICT", codes.AlreadyExists, []error{ErrResolutionConflict}},
		{"INVALID_RESOLUTION", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"APPROVAL_NOT_WAITING", codes.FailedPrecondition, []error{ErrApprovalNotWaiting}},
		{"APPROVAL_CONFLICT", codes.AlreadyExists, []error{ErrApprovalConflict}},
		{"APPROVAL_INPUT_MISMATCH", codes.FailedPrecondition, []error{ErrApprovalInputMismatch}},
		{"INVALID_APPROVAL", codes.InvalidArgument, []error{ErrInvalidArgument}},
		{"COMMIT_OUTCOME_UNKNOWN", codes.Unavailable, []error{ErrCommitOutcomeUnknown, ErrUnavailable}},
		{"NO_WRITABLE_HOST", codes.Unavailable, []error{ErrNoWritableHost, ErrUnavailable}},
	}
	all := []error{ErrSessionFenced, ErrRevisionMismatch, ErrSessionNotFound, ErrSessionExists, ErrRevisionNotFound,
		ErrRequestIDReused, ErrCallAlreadyRecorded, ErrCallNotPending, ErrCallUnknown, ErrToolNameMismatch,
		ErrEffectConflict, ErrCheckpointCorrupt, ErrDiskFull, ErrRequestTooLarge, ErrPermissionDenied, ErrInternal, ErrInvalidArgument, ErrUnavailable,
		ErrUploadAborted, ErrEffectInputMismatch, ErrEffectNotBegun, ErrCallNotInDoubt, ErrResolutionConflict,
		ErrApprovalNotWaiting, ErrApprovalConflict, ErrApprovalInputMismatch, ErrCommitOutcomeUnknown, ErrNoWritableHost, context.Canceled, context.DeadlineExceeded}
	var tested []string
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			md := map[string]string{"current_revision": "7", "current_epoch": "3", "field": "x"}
			err := translate(infoErr(tt.code, tt.reason, md))
			for _, s := range all {
				if got, want := errors.Is(err, s), slices.Contains(tt.want, s); got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, want)
				}
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("%T is not an *Error", err)
			}
			if e.Reason != tt.reason || e.Code != tt.code || e.CurrentRevision != 7 || e.CurrentEpoch != 3 || e.Metadata["field"] != "x" {
				t.Errorf("got %+v", e)
			}
			if status.Code(err) != tt.code {
				t.Errorf("status.Code = %v, want %v", status.Code(err), tt.code)
			}
			// Wrapping keeps it usable.
			if w := fmt.Errorf("saving: %w", err); !errors.Is(w, tt.want[0]) {
				t.Errorf("wrapped error does not match %v", tt.want[0])
			}
		})
		tested = append(tested, tt.reason)
	}
	for _, r := range reason.All() {
		if !slices.Contains(tested, reason.String(r)) {
			t.Errorf("no case for %s: add one to the table", reason.String(r))
		}
	}
}

// TestEveryReasonHasASentinel fails when the ErrorReason enum has a value
// that the client maps to no sentinel error.
func TestEveryReasonHasASentinel(t *testing.T) {
	vals := savepointv1.ErrorReason(0).Descriptor().Values()
	for i := range vals.Len() {
		r := savepointv1.ErrorReason(vals.Get(i).Number())
		if r == savepointv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		if reasons[r] == nil {
			t.Errorf("%s has no sentinel error: add it to reasons in errors.go", vals.Get(i).Name())
		}
	}
	if _, ok := reasons[savepointv1.ErrorReason_ERROR_REASON_UNSPECIFIED]; ok {
		t.Error("ERROR_REASON_UNSPECIFIED is never sent and must map to nothing")
	}
	if len(reasons) != vals.Len()-1 {
		t.Errorf("reasons has %d entries, the enum %d values besides UNSPECIFIED", len(reasons), vals.Len()-1)
	}
}

// TestDeprecatedNames: each old sentinel name is the same error as the
// reason-named one that replaced it, so errors.Is matches both ways, also
// through a translated daemon error.
func TestDeprecatedNames(t *testing.T) {
	tests := []struct {
		old, now error
		reason   string
		code     codes.Code
	}{
		{ErrFenced, ErrSessionFenced, "SESSION_FENCED", codes.Aborted},
		{ErrNotFound, ErrSessionNotFound, "SESSION_NOT_FOUND", codes.NotFound},
		{ErrCorrupt, ErrCheckpointCorrupt, "CHECKPOINT_CORRUPT", codes.DataLoss},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			if !errors.Is(tt.old, tt.now) || !errors.Is(tt.now, tt.old) {
				t.Errorf("%v and %v are not the same error", tt.old, tt.now)
			}
			err := translate(infoErr(tt.code, tt.reason, nil))
			if !errors.Is(err, tt.old) || !errors.Is(err, tt.now) {
				t.Errorf("%v matches old %v, new %v; want both", err, errors.Is(err, tt.old), errors.Is(err, tt.now))
			}
		})
	}
}

func TestTranslateWithoutReason(t *testing.T) {
	foreign, err := status.New(codes.NotFound, "x").WithDetails(&errdetails.ErrorInfo{Domain: "other.example", Reason: "SESSION_NOT_FOUND"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error // nil: no sentinel
	}{
		{"daemon down", status.Error(codes.Unavailable, "connection refused"), ErrUnavailable},
		{"bare invalid argument", status.Error(codes.InvalidArgument, "bad"), ErrInvalidArgument},
		{"request over 4x the limit, refused by gRPC", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (16777217 vs. 16777216)"), nil},
		{"foreign domain", foreign.Err(), nil},
		{"context canceled", status.Error(codes.Canceled, "context canceled"), context.Canceled},
		{"deadline", status.Error(codes.DeadlineExceeded, "deadline exceeded"), context.DeadlineExceeded},
		{"unknown reason", infoErr(codes.FailedPrecondition, "SOMETHING_NEW", nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := translate(tt.err)
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("%T is not an *Error", err)
			}
			if tt.want == nil && len(e.Unwrap()) != 0 {
				t.Errorf("matches %v, want no sentinel", e.Unwrap())
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.want)
			}
			if errors.Is(err, ErrSessionNotFound) {
				t.Error("a reason must count only in the savepoint.v1 domain")
			}
		})
	}
	plain := errors.New("not a status")
	if translate(plain) != plain || translate(nil) != nil {
		t.Error("non-status errors must pass unchanged")
	}
	once := translate(status.Error(codes.Unavailable, "x"))
	if translate(once) != once {
		t.Error("translating twice must not wrap again")
	}
}

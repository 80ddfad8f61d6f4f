import assert from "node:assert/strict";
import { test } from "node:test";

import { Metadata, status as Code, type ServiceError } from "@grpc/grpc-js";

import {
  CallAlreadyRecordedError,
  CallNotPendingError,
  CallUnknownError,
  CanceledError,
  CheckpointCorruptError,
  codeName,
  DeadlineExceededError,
  DiskFullError,
  EffectConflictError,
  EffectInputMismatchError,
  EffectNotBegunError,
  CallNotInDoubtError,
  ResolutionConflictError,
  ApprovalNotWaitingError,
  ApprovalConflictError,
  ApprovalInputMismatchError,
  CommitOutcomeUnknownError,
  NoWritableHostError,
  ErrorReason,
  InternalError,
  InvalidArgumentError,
  PermissionDeniedError,
  PlaintextBackupError,
  BackupUnsupportedError,
  reasonName,
  reasonValue,
  RequestIdReusedError,
  RequestTooLargeError,
  RevisionMismatchError,
  RevisionNotFoundError,
  SavepointError,
  SessionCompletedError,
  SessionExistsError,
  SessionFencedError,
  SessionNotFoundError,
  ToolNameMismatchError,
  translate,
  UnavailableError,
  UploadAbortedError,
} from "../index.js";
import { Any } from "../gen/google/protobuf/any.js";
import { ErrorInfo } from "../gen/google/rpc/error_details.js";
import { Status } from "../gen/google/rpc/status.js";

/** A grpc-js error as the daemon's status would arrive: code, message and an ErrorInfo in grpc-status-details-bin. */
function statusError(code: Code, details: string, info?: { reason: string; domain?: string; metadata?: Record<string, string> }): ServiceError {
  const md = new Metadata();
  if (info) {
    const ei = ErrorInfo.encode({ reason: info.reason, domain: info.domain ?? "savepoint.v1", metadata: info.metadata ?? {} }).finish();
    const st = Status.encode({
      code,
      message: details,
      details: [Any.fromPartial({ typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from(ei) })],
    }).finish();
    md.set("grpc-status-details-bin", Buffer.from(st));
  }
  return Object.assign(new Error(`${code} ${Code[code]}: ${details}`), { code, details, metadata: md }) as ServiceError;
}

// Every reason the daemon sends, with the code it sends it with and the
// class it must become, grouped as the Go client's sentinels are.
const cases: [ErrorReason, Code, new (...a: never[]) => SavepointError][] = [
  [ErrorReason.ERROR_REASON_INTERNAL, Code.INTERNAL, InternalError],
  [ErrorReason.ERROR_REASON_SESSION_NOT_FOUND, Code.NOT_FOUND, SessionNotFoundError],
  [ErrorReason.ERROR_REASON_SESSION_EXISTS, Code.ALREADY_EXISTS, SessionExistsError],
  [ErrorReason.ERROR_REASON_SESSION_FENCED, Code.ABORTED, SessionFencedError],
  [ErrorReason.ERROR_REASON_REVISION_MISMATCH, Code.ABORTED, RevisionMismatchError],
  [ErrorReason.ERROR_REASON_REVISION_NOT_FOUND, Code.NOT_FOUND, RevisionNotFoundError],
  [ErrorReason.ERROR_REASON_REQUEST_ID_REUSED, Code.INVALID_ARGUMENT, RequestIdReusedError],
  [ErrorReason.ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_CALL_ALREADY_RECORDED, Code.FAILED_PRECONDITION, CallAlreadyRecordedError],
  [ErrorReason.ERROR_REASON_CALL_NOT_PENDING, Code.FAILED_PRECONDITION, CallNotPendingError],
  [ErrorReason.ERROR_REASON_CALL_UNKNOWN, Code.NOT_FOUND, CallUnknownError],
  [ErrorReason.ERROR_REASON_TOOL_NAME_MISMATCH, Code.FAILED_PRECONDITION, ToolNameMismatchError],
  [ErrorReason.ERROR_REASON_EFFECT_CONFLICT, Code.ALREADY_EXISTS, EffectConflictError],
  [ErrorReason.ERROR_REASON_CHECKPOINT_CORRUPT, Code.DATA_LOSS, CheckpointCorruptError],
  [ErrorReason.ERROR_REASON_INVALID_PAGE_TOKEN, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_DISK_FULL, Code.RESOURCE_EXHAUSTED, DiskFullError],
  [ErrorReason.ERROR_REASON_UNAVAILABLE, Code.UNAVAILABLE, UnavailableError],
  [ErrorReason.ERROR_REASON_CANCELED, Code.CANCELLED, CanceledError],
  [ErrorReason.ERROR_REASON_DEADLINE_EXCEEDED, Code.DEADLINE_EXCEEDED, DeadlineExceededError],
  [ErrorReason.ERROR_REASON_INVALID_ARGUMENT, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_SESSION_ID, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_TOOL_USE_ID, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_REQUEST_ID, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_MISSING_FIELD, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_JSON, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_MESSAGE_TOO_LARGE, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_STATE_TOO_LARGE, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_EFFECT_CLASS, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_DUPLICATE_TOOL_USE_ID, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_TOOL_USE_ID_MISMATCH, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_LABEL, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_PAGE_SIZE, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_FIELD_TOO_LARGE, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_REQUEST_TOO_LARGE, Code.RESOURCE_EXHAUSTED, RequestTooLargeError],
  [ErrorReason.ERROR_REASON_PERMISSION_DENIED, Code.PERMISSION_DENIED, PermissionDeniedError],
  [ErrorReason.ERROR_REASON_INVALID_GRAPH_KEY, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_INVALID_UPLOAD, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_UPLOAD_ABORTED, Code.ABORTED, UploadAbortedError],
  [ErrorReason.ERROR_REASON_INVALID_UTF8, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_SESSION_COMPLETED, Code.FAILED_PRECONDITION, SessionCompletedError],
  [ErrorReason.ERROR_REASON_INVALID_SESSION_STATUS, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_PLAINTEXT_BACKUP, Code.FAILED_PRECONDITION, PlaintextBackupError],
  [ErrorReason.ERROR_REASON_BACKUP_UNSUPPORTED, Code.UNIMPLEMENTED, BackupUnsupportedError],
  [ErrorReason.ERROR_REASON_INVALID_ORDER_BY, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_EFFECT_INPUT_MISMATCH, Code.FAILED_PRECONDITION, EffectInputMismatchError],
  [ErrorReason.ERROR_REASON_EFFECT_NOT_BEGUN, Code.FAILED_PRECONDITION, EffectNotBegunError],
  [ErrorReason.ERROR_REASON_CALL_NOT_IN_DOUBT, Code.FAILED_PRECONDITION, CallNotInDoubtError],
  [ErrorReason.ERROR_REASON_RESOLUTION_CONFLICT, Code.ALREADY_EXISTS, ResolutionConflictError],
  [ErrorReason.ERROR_REASON_INVALID_RESOLUTION, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_APPROVAL_NOT_WAITING, Code.FAILED_PRECONDITION, ApprovalNotWaitingError],
  [ErrorReason.ERROR_REASON_APPROVAL_CONFLICT, Code.ALREADY_EXISTS, ApprovalConflictError],
  [ErrorReason.ERROR_REASON_APPROVAL_INPUT_MISMATCH, Code.FAILED_PRECONDITION, ApprovalInputMismatchError],
  [ErrorReason.ERROR_REASON_INVALID_APPROVAL, Code.INVALID_ARGUMENT, InvalidArgumentError],
  [ErrorReason.ERROR_REASON_COMMIT_OUTCOME_UNKNOWN, Code.UNAVAILABLE, CommitOutcomeUnknownError],
  [ErrorReason.ERROR_REASON_NO_WRITABLE_HOST, Code.UNAVAILABLE, NoWritableHostError],
];

/** Every value of the generated ErrorReason enum the daemon can send (all but UNSPECIFIED). */
const sentReasons = Object.values(ErrorReason).filter(
  (v): v is ErrorReason => typeof v === "number" && v !== ErrorReason.ERROR_REASON_UNSPECIFIED && v !== ErrorReason.UNRECOGNIZED,
);

test("every ErrorReason the daemon can send has an error class", () => {
  assert.ok(sentReasons.length >= 34, `only ${sentReasons.length} reasons in the generated enum`);
  for (const r of sentReasons) {
    const name = reasonName(r);
    assert.match(name, /^[A-Z][A-Z0-9_]*$/, `${ErrorReason[r]}: wire name ${name}`);
    assert.equal(reasonValue(name), r);
    // A code no class is chosen by: only the reason can pick the class.
    const e = translate(statusError(Code.UNKNOWN, "x", { reason: name }));
    assert.ok(e instanceof SavepointError, `${name}: ${String(e)}`);
    assert.equal(e.reason, name);
    assert.equal(e.errorReason, r);
    assert.notEqual(e.constructor, SavepointError, `${name} has no class of its own: add it to reasonClasses in errors.ts`);
  }
  assert.deepEqual(
    cases.map(([r]) => r).sort((a, b) => a - b),
    [...sentReasons].sort((a, b) => a - b),
    "the table below covers exactly the generated enum",
  );
});

test("translate picks the class of each reason", () => {
  for (const [r, code, cls] of cases) {
    const name = reasonName(r);
    const e = translate(statusError(code, "the message", { reason: name, metadata: { current_revision: "7", current_epoch: "3", field: "f" } }));
    assert.ok(e instanceof cls, `${name}: got ${(e as Error).constructor.name}, want ${cls.name}`);
    assert.ok(e instanceof SavepointError);
    assert.equal(e.code, code);
    assert.equal(e.reason, name);
    assert.equal(e.details, "the message");
    assert.equal(e.currentRevision, 7n);
    assert.equal(e.currentEpoch, 3n);
    assert.equal(e.metadata.field, "f");
    assert.equal(e.message, `savepoint: ${name} (${codeName(code)}): the message.`);
    assert.equal(e.name, cls.name);
    assert.ok((e as Error).cause, "the original grpc-js error is the cause");
  }
  // REQUEST_ID_REUSED is an invalid argument too, as ErrRequestIDReused also matches ErrInvalidArgument.
  assert.ok(translate(statusError(Code.INVALID_ARGUMENT, "x", { reason: "REQUEST_ID_REUSED" })) instanceof InvalidArgumentError);
});

test("codes are named as grpc-go names them", () => {
  assert.equal(codeName(Code.NOT_FOUND), "NotFound");
  assert.equal(codeName(Code.CANCELLED), "Canceled");
  assert.equal(codeName(Code.INVALID_ARGUMENT), "InvalidArgument");
  assert.equal(codeName(Code.OK), "OK");
  assert.equal(codeName(Code.DATA_LOSS), "DataLoss");
});

test("an error without a reason gets the class of its code", () => {
  const byCode: [Code, new (...a: never[]) => SavepointError][] = [
    [Code.INVALID_ARGUMENT, InvalidArgumentError],
    [Code.UNAVAILABLE, UnavailableError],
    [Code.CANCELLED, CanceledError],
    [Code.DEADLINE_EXCEEDED, DeadlineExceededError],
    [Code.RESOURCE_EXHAUSTED, SavepointError],
    [Code.INTERNAL, SavepointError],
  ];
  for (const [code, cls] of byCode) {
    const e = translate(statusError(code, "transport says no"));
    assert.ok(e instanceof SavepointError && e.constructor === cls, `${Code[code]}: ${(e as Error).constructor.name}, want ${cls.name}`);
    assert.equal(e.reason, "");
    assert.equal(e.message, `savepoint: ${codeName(code)}: transport says no.`);
  }
  // Another domain's ErrorInfo is not Savepoint's reason; an unknown reason falls back to the code.
  const other = translate(statusError(Code.ABORTED, "x", { reason: "SESSION_FENCED", domain: "example.com" }));
  assert.ok(other instanceof SavepointError && !(other instanceof SessionFencedError));
  assert.equal(other.reason, "");
  const future = translate(statusError(Code.INVALID_ARGUMENT, "x", { reason: "SOME_NEW_REASON" }));
  assert.ok(future instanceof InvalidArgumentError);
  assert.equal(future.reason, "SOME_NEW_REASON");
  assert.equal(future.errorReason, ErrorReason.UNRECOGNIZED);
  // Details that do not decode keep the code and message.
  const md = new Metadata();
  md.set("grpc-status-details-bin", Buffer.from([0xff, 0xff, 0xff]));
  const junk = translate(Object.assign(new Error("x"), { code: Code.UNAVAILABLE, details: "down", metadata: md }));
  assert.ok(junk instanceof UnavailableError);
  // What is not a gRPC error passes unchanged, and translating twice changes nothing.
  const plain = new TypeError("not grpc");
  assert.equal(translate(plain), plain);
  const once = translate(statusError(Code.ABORTED, "x", { reason: "SESSION_FENCED" }));
  assert.equal(translate(once), once);
});

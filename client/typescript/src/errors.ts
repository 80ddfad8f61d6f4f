import { status as Code, type ServiceError } from "@grpc/grpc-js";

import { Any } from "./gen/google/protobuf/any.js";
import { ErrorInfo } from "./gen/google/rpc/error_details.js";
import { Status } from "./gen/google/rpc/status.js";
import { ErrorReason } from "./gen/savepoint/v1/savepoint.js";

export { ErrorReason };

/** The google.rpc.ErrorInfo domain of every Savepoint error. */
export const DOMAIN = "savepoint.v1";

const REASON_PREFIX = "ERROR_REASON_";
const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";

/**
 * The name of a gRPC code as grpc-go spells it ("NotFound", "Canceled"), so
 * that an error reads the same in every Savepoint client.
 */
export function codeName(code: Code): string {
  if (code === Code.CANCELLED) return "Canceled";
  if (code === Code.OK) return "OK";
  const name = Code[code];
  if (name === undefined) return `Code(${code})`;
  return name
    .toLowerCase()
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");
}

/**
 * Returns text as the end of an error message: a full sentence. It drops
 * the empty "Resolution note:" that grpc-js appends to a connection
 * failure, trims, and adds a period unless text ends with ".", "!" or "?";
 * empty text says that no details were given.
 */
export function sentence(text: string): string {
  const s = text.replace(/\s*Resolution note:\s*$/, "").trim();
  if (s === "") return "No details were given.";
  return /[.!?]$/.test(s) ? s : s + ".";
}

/** The fields of a Savepoint error, as translate fills them in. */
export interface SavepointErrorInit {
  code: Code;
  /** The ErrorInfo reason; "" when there was none. */
  reason?: string;
  message: string;
  metadata?: Record<string, string>;
  cause?: unknown;
}

/**
 * A failed Savepoint RPC (or a refusal the Session makes before asking the
 * daemon, with the code and reason the daemon would give). Every RPC error a
 * Client throws is a SavepointError, of the subclass of its ErrorInfo reason
 * (SessionFencedError, RevisionMismatchError, InvalidArgumentError, ...), so
 * callers branch with instanceof, never on message text.
 */
export class SavepointError extends Error {
  /** The gRPC status code. */
  readonly code: Code;
  /**
   * The ErrorInfo reason, such as "SESSION_FENCED": the ErrorReason value's
   * name without "ERROR_REASON_". Empty when the status carried no ErrorInfo
   * of the savepoint.v1 domain (a transport error).
   */
  readonly reason: string;
  /** The status message, meant for people (without grpc-js's empty "Resolution note:"). */
  readonly details: string;
  /** The ErrorInfo metadata, such as current_revision; empty when none. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The session's revision from the metadata (conflicts, fencing), else 0n. */
  readonly currentRevision: bigint;
  /** The session's epoch from the metadata (conflicts, fencing), else 0n. */
  readonly currentEpoch: bigint;

  constructor(init: SavepointErrorInit) {
    const reason = init.reason ?? "";
    const code = codeName(init.code);
    const text = sentence(init.message);
    super(reason === "" ? `savepoint: ${code}: ${text}` : `savepoint: ${reason} (${code}): ${text}`, {
      cause: init.cause,
    });
    this.name = new.target.name;
    this.code = init.code;
    this.reason = reason;
    this.details = init.message.replace(/\s*Resolution note:\s*$/, "");
    this.metadata = { ...init.metadata };
    this.currentRevision = parseUint(this.metadata.current_revision);
    this.currentEpoch = parseUint(this.metadata.current_epoch);
  }

  /** The ErrorReason enum value of reason; UNSPECIFIED when there is none. */
  get errorReason(): ErrorReason {
    return reasonValue(this.reason);
  }
}

/** SESSION_FENCED: another process resumed the session; this one no longer owns it and must stop. */
export class SessionFencedError extends SavepointError {}
/** REVISION_MISMATCH: the session changed since the revision this write built on. */
export class RevisionMismatchError extends SavepointError {}
/** SESSION_NOT_FOUND: no such session; nothing to resume from. */
export class SessionNotFoundError extends SavepointError {}
/** SESSION_EXISTS: a session with this id exists already. */
export class SessionExistsError extends SavepointError {}
/** REVISION_NOT_FOUND: the revision is not kept. */
export class RevisionNotFoundError extends SavepointError {}
/** CALL_ALREADY_RECORDED: a tool use set pending already has a ledger entry. */
export class CallAlreadyRecordedError extends SavepointError {}
/** CALL_NOT_PENDING: the tool use is not pending in the latest revision. */
export class CallNotPendingError extends SavepointError {}
/** CALL_UNKNOWN: the tool use was never pending in the session. */
export class CallUnknownError extends SavepointError {}
/** TOOL_NAME_MISMATCH: the recorded name differs from the pending tool use's name. */
export class ToolNameMismatchError extends SavepointError {}
/** EFFECT_CONFLICT: a different outcome is recorded for the tool use already; the first record wins. */
export class EffectConflictError extends SavepointError {}
/** CHECKPOINT_CORRUPT: the session's stored data cannot be trusted; delete the session. */
export class CheckpointCorruptError extends SavepointError {}
/** DISK_FULL: the daemon could not write for lack of space; reads are still served. */
export class DiskFullError extends SavepointError {}
/** REQUEST_TOO_LARGE: the whole request is over the daemon's request size limit. */
export class RequestTooLargeError extends SavepointError {}
/** PERMISSION_DENIED: the daemon does not allow this process's uid or gid (its --allow-uid and --allow-gid). */
export class PermissionDeniedError extends SavepointError {}
/** UPLOAD_ABORTED: the thread was deleted or copied over while the upload was staged; nothing was stored. */
export class UploadAbortedError extends SavepointError {}
/** EFFECT_INPUT_MISMATCH: the thread's tool use id was begun before with another tool name or input; nothing was written. */
export class EffectInputMismatchError extends SavepointError {}
/** EFFECT_NOT_BEGUN: a record for a thread's tool use never begun, or for an attempt other than the latest one begun. */
export class EffectNotBegunError extends SavepointError {}
/** CALL_NOT_IN_DOUBT: resolveEffect of a tool use that is not in doubt (recorded, not pending, or one reconcile runs); nothing was written. */
export class CallNotInDoubtError extends SavepointError {}
/** RESOLUTION_CONFLICT: the tool use was resolved already with another finding; the first resolution stands. */
export class ResolutionConflictError extends SavepointError {}
/** APPROVAL_NOT_WAITING: approveEffect of a tool use that cannot take a decision (begun without one, recorded, or neither waiting nor pending); nothing was written. */
export class ApprovalNotWaitingError extends SavepointError {}
/** APPROVAL_CONFLICT: the tool use was decided already otherwise; the first decision stands. */
export class ApprovalConflictError extends SavepointError {}
/** APPROVAL_INPUT_MISMATCH: the approval's input digest is not the call's; the approver saw other input. */
export class ApprovalInputMismatchError extends SavepointError {}
/** SESSION_COMPLETED: the session is completed or failed; saves and BeginEffect need a Resume with reopen first. */
export class SessionCompletedError extends SavepointError {}
/** PLAINTEXT_BACKUP: the daemon's store has no encryption key, so its backup would be plaintext; set plaintext to accept that. */
export class PlaintextBackupError extends SavepointError {}
/** BACKUP_UNSUPPORTED: the daemon's store cannot stream a backup (PostgreSQL: use the database's own tools, such as pg_dump). */
export class BackupUnsupportedError extends SavepointError {}
/** INTERNAL: a daemon bug or an unexpected store failure. */
export class InternalError extends SavepointError {}
/**
 * Any INVALID_ARGUMENT answer: the field reasons (INVALID_SESSION_ID,
 * INVALID_JSON, MESSAGE_TOO_LARGE, INVALID_UTF8, ...; metadata "field" names
 * the field) and KEEP_MESSAGES_OUT_OF_RANGE, INVALID_PAGE_TOKEN,
 * INVALID_ARGUMENT. reason says which.
 */
export class InvalidArgumentError extends SavepointError {}
/** REQUEST_ID_REUSED: a request id was sent again with a different payload. */
export class RequestIdReusedError extends InvalidArgumentError {}
/**
 * The daemon cannot be reached (gRPC UNAVAILABLE: down, restarting, or its
 * store is closed). Calls that are safe to repeat were retried first.
 */
export class UnavailableError extends SavepointError {}
/**
 * COMMIT_OUTCOME_UNKNOWN: the daemon's connection to its database failed after
 * COMMIT was sent, so the write may or may not be stored; the same request
 * again (its request id, or its tool use id) is answered from what was stored
 * or performed once, and the client retried it so first. An UnavailableError.
 */
export class CommitOutcomeUnknownError extends UnavailableError {}
/** NO_WRITABLE_HOST: no host of the daemon's database accepts writes (a failover); nothing was written. An UnavailableError. */
export class NoWritableHostError extends UnavailableError {}
/** CANCELED: the call was canceled (its AbortSignal fired). */
export class CanceledError extends SavepointError {}
/** DEADLINE_EXCEEDED: the call's deadline passed. */
export class DeadlineExceededError extends SavepointError {}

type ErrorClass = new (init: SavepointErrorInit) => SavepointError;

/** The reasons the daemon sends: every ErrorReason value but UNSPECIFIED. */
type SentReason = Exclude<ErrorReason, ErrorReason.ERROR_REASON_UNSPECIFIED | ErrorReason.UNRECOGNIZED>;

/**
 * The error class of every reason, keyed by the generated enum: a reason
 * added to the proto does not compile until it has a class here.
 */
const reasonClasses: Record<SentReason, ErrorClass> = {
  [ErrorReason.ERROR_REASON_INTERNAL]: InternalError,
  [ErrorReason.ERROR_REASON_SESSION_NOT_FOUND]: SessionNotFoundError,
  [ErrorReason.ERROR_REASON_SESSION_EXISTS]: SessionExistsError,
  [ErrorReason.ERROR_REASON_SESSION_FENCED]: SessionFencedError,
  [ErrorReason.ERROR_REASON_REVISION_MISMATCH]: RevisionMismatchError,
  [ErrorReason.ERROR_REASON_REVISION_NOT_FOUND]: RevisionNotFoundError,
  [ErrorReason.ERROR_REASON_REQUEST_ID_REUSED]: RequestIdReusedError,
  [ErrorReason.ERROR_REASON_KEEP_MESSAGES_OUT_OF_RANGE]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_CALL_ALREADY_RECORDED]: CallAlreadyRecordedError,
  [ErrorReason.ERROR_REASON_CALL_NOT_PENDING]: CallNotPendingError,
  [ErrorReason.ERROR_REASON_CALL_UNKNOWN]: CallUnknownError,
  [ErrorReason.ERROR_REASON_TOOL_NAME_MISMATCH]: ToolNameMismatchError,
  [ErrorReason.ERROR_REASON_EFFECT_CONFLICT]: EffectConflictError,
  [ErrorReason.ERROR_REASON_CHECKPOINT_CORRUPT]: CheckpointCorruptError,
  [ErrorReason.ERROR_REASON_INVALID_PAGE_TOKEN]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_DISK_FULL]: DiskFullError,
  [ErrorReason.ERROR_REASON_UNAVAILABLE]: UnavailableError,
  [ErrorReason.ERROR_REASON_CANCELED]: CanceledError,
  [ErrorReason.ERROR_REASON_DEADLINE_EXCEEDED]: DeadlineExceededError,
  [ErrorReason.ERROR_REASON_INVALID_ARGUMENT]: InvalidArgumentError,
  // Field reasons: a bad request field; metadata "field" names it.
  [ErrorReason.ERROR_REASON_INVALID_SESSION_ID]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_TOOL_USE_ID]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_REQUEST_ID]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_MISSING_FIELD]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_JSON]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_MESSAGE_TOO_LARGE]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_STATE_TOO_LARGE]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_EFFECT_CLASS]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_DUPLICATE_TOOL_USE_ID]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_TOOL_USE_ID_MISMATCH]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_LABEL]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_PAGE_SIZE]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_FIELD_TOO_LARGE]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_REQUEST_TOO_LARGE]: RequestTooLargeError,
  [ErrorReason.ERROR_REASON_PERMISSION_DENIED]: PermissionDeniedError,
  // GraphCheckpointService's own reasons.
  [ErrorReason.ERROR_REASON_INVALID_GRAPH_KEY]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_INVALID_UPLOAD]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_UPLOAD_ABORTED]: UploadAbortedError,
  [ErrorReason.ERROR_REASON_INVALID_UTF8]: InvalidArgumentError,
  // Session status.
  [ErrorReason.ERROR_REASON_SESSION_COMPLETED]: SessionCompletedError,
  [ErrorReason.ERROR_REASON_INVALID_SESSION_STATUS]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_PLAINTEXT_BACKUP]: PlaintextBackupError,
  [ErrorReason.ERROR_REASON_BACKUP_UNSUPPORTED]: BackupUnsupportedError,
  [ErrorReason.ERROR_REASON_INVALID_ORDER_BY]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_EFFECT_INPUT_MISMATCH]: EffectInputMismatchError,
  [ErrorReason.ERROR_REASON_EFFECT_NOT_BEGUN]: EffectNotBegunError,
  // Resolving a tool use in doubt.
  [ErrorReason.ERROR_REASON_CALL_NOT_IN_DOUBT]: CallNotInDoubtError,
  [ErrorReason.ERROR_REASON_RESOLUTION_CONFLICT]: ResolutionConflictError,
  [ErrorReason.ERROR_REASON_INVALID_RESOLUTION]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_APPROVAL_NOT_WAITING]: ApprovalNotWaitingError,
  [ErrorReason.ERROR_REASON_APPROVAL_CONFLICT]: ApprovalConflictError,
  [ErrorReason.ERROR_REASON_APPROVAL_INPUT_MISMATCH]: ApprovalInputMismatchError,
  [ErrorReason.ERROR_REASON_INVALID_APPROVAL]: InvalidArgumentError,
  [ErrorReason.ERROR_REASON_COMMIT_OUTCOME_UNKNOWN]: CommitOutcomeUnknownError,
  [ErrorReason.ERROR_REASON_NO_WRITABLE_HOST]: NoWritableHostError,
};

/** The classes of errors that carry no reason, by gRPC code. */
const codeClasses: Partial<Record<Code, ErrorClass>> = {
  [Code.INVALID_ARGUMENT]: InvalidArgumentError,
  [Code.UNAVAILABLE]: UnavailableError,
  [Code.CANCELLED]: CanceledError,
  [Code.DEADLINE_EXCEEDED]: DeadlineExceededError,
};

/** The wire reason of an ErrorReason value: its name without "ERROR_REASON_". */
export function reasonName(r: ErrorReason): string {
  const name = ErrorReason[r];
  if (name === undefined || r === ErrorReason.ERROR_REASON_UNSPECIFIED || r === ErrorReason.UNRECOGNIZED) return "";
  return name.slice(REASON_PREFIX.length);
}

/** The ErrorReason value of a wire reason; UNSPECIFIED for "", UNRECOGNIZED for a reason this client does not know. */
export function reasonValue(reason: string): ErrorReason {
  if (reason === "") return ErrorReason.ERROR_REASON_UNSPECIFIED;
  const v = (ErrorReason as unknown as Record<string, ErrorReason | undefined>)[REASON_PREFIX + reason];
  return typeof v === "number" && v > 0 ? v : ErrorReason.UNRECOGNIZED;
}

/**
 * The class of the error with this reason and code: the reason's class when
 * the reason is known, else the code's (InvalidArgumentError,
 * UnavailableError, CanceledError, DeadlineExceededError), else
 * SavepointError.
 */
export function errorClass(reason: string, code: Code): ErrorClass {
  const v = reasonValue(reason);
  if (v in reasonClasses) return reasonClasses[v as SentReason];
  return codeClasses[code] ?? SavepointError;
}

/** Makes the error of a reason, for a refusal the client makes itself. */
export function newError(reason: ErrorReason, code: Code, message: string, metadata?: Record<string, string>): SavepointError {
  const name = reasonName(reason);
  return new (errorClass(name, code))({ code, reason: name, message, metadata });
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as ServiceError).code === "number" && "details" in err && "metadata" in err;
}

/**
 * Turns a gRPC error into a SavepointError of its reason's class: the one
 * place statuses become client errors (every Client call, raw ones too,
 * goes through it). The reason comes from the google.rpc.ErrorInfo of the
 * savepoint.v1 domain in the grpc-status-details-bin trailer. Anything
 * that is not a gRPC error is returned unchanged.
 */
export function translate(err: unknown): unknown {
  if (err instanceof SavepointError || !isServiceError(err)) return err;
  let reason = "";
  let metadata: Record<string, string> = {};
  for (const bin of err.metadata?.get("grpc-status-details-bin") ?? []) {
    if (typeof bin === "string") continue;
    let st: Status;
    try {
      st = Status.decode(bin);
    } catch {
      continue; // undecodable details: keep the code and message
    }
    const info = errorInfo(st.details);
    if (info) {
      reason = info.reason;
      metadata = info.metadata;
      break;
    }
  }
  return new (errorClass(reason, err.code))({ code: err.code, reason, message: err.details, metadata, cause: err });
}

function errorInfo(details: Any[]): ErrorInfo | undefined {
  for (const d of details) {
    if (d.typeUrl !== ERROR_INFO_TYPE) continue;
    try {
      const info = ErrorInfo.decode(d.value);
      if (info.domain === DOMAIN) return info;
    } catch {
      // not an ErrorInfo after all
    }
  }
  return undefined;
}

/** A uint64 from ErrorInfo metadata; 0n when absent, not decimal digits, or above 2^64-1. */
function parseUint(s: string | undefined): bigint {
  if (s === undefined || !/^[0-9]{1,20}$/.test(s)) return 0n;
  const n = BigInt(s);
  return n <= 0xffff_ffff_ffff_ffffn ? n : 0n;
}

/** The agent's own errors, found before asking the daemon. */

/** The session has pending tool uses that pointB has not answered, so it cannot name new ones or change its history. */
export class ToolUsesPendingError extends Error {
  constructor(message = "savepoint: tool uses still pending; answer them with pointB first.") {
    super(sentence(message));
    this.name = "ToolUsesPendingError";
  }
}

/** The results given to pointB do not answer every pending tool use exactly once. */
export class ResultsMismatchError extends Error {
  constructor(detail: string) {
    super(`savepoint: tool results do not answer the pending tool uses exactly once: ${sentence(detail)}`);
    this.name = "ResultsMismatchError";
  }
}

/** The session ran this tool use already; it never runs one twice. */
/**
 * Thrown by runTool and reconcile for a call of a tool that requires
 * approval (DialOptions.approvalRequired) with none for its call and input:
 * the tool did not run. Approve it (`savepoint approve SESSION TOOL_USE_ID`,
 * or client.approveEffect), then run it again (reconcile after a resume).
 */
export class AwaitingApprovalError extends Error {
  /** The call waiting: its session and tool use id, name and input. */
  readonly sessionId: string;
  readonly toolUseId: string;
  readonly toolName: string;
  /** The daemon's record of the request: its input digest and when it was asked. */
  readonly approval: unknown;
  constructor(sessionId: string, toolUseId: string, toolName: string, approval: unknown) {
    super(
      `savepoint: tool use ${JSON.stringify(toolUseId)} (${toolName}) of session ${JSON.stringify(sessionId)} not run: ` +
        `it waits for approval (savepoint approve ${sessionId} ${toolUseId}).`,
    );
    this.name = "AwaitingApprovalError";
    this.sessionId = sessionId;
    this.toolUseId = toolUseId;
    this.toolName = toolName;
    this.approval = approval;
  }
}

export class AlreadyRunError extends Error {
  constructor(detail: string) {
    super(`savepoint: tool use already run by this session: ${sentence(detail)}`);
    this.name = "AlreadyRunError";
  }
}

/** A result given to pointB to record claims an outcome that no tool of this session returned. */
export class NotRunError extends Error {
  constructor(detail: string) {
    super(`savepoint: result not produced by running the tool: ${sentence(detail)}`);
    this.name = "NotRunError";
  }
}

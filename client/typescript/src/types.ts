/**
 * The types the client's modules share: a message of the history, a tool
 * use and its result, call options, and what a Session needs of its Client.
 * It imports no other module of the client but the generated code, so no
 * module depends on another through it in a circle.
 */
import type { DeepPartial, EffectClass, Decision, DuplicateToolUse, Effect as PbEffect, SavepointServiceService } from "./gen/savepoint/v1/savepoint.js";
import type { Logger } from "./log.js";

/**
 * One entry of a session's history: the provider's role and its content as
 * JSON text (for Anthropic, the content array or a string).
 */
export interface Message {
  role: string;
  contentJson: string;
}

/** The optional parts of a new session. */
export interface StartOptions {
  /**
   * Deletes an existing session with the same id (history and ledger)
   * before creating the new one. Without it, an existing session makes start
   * throw SessionExistsError.
   */
  replace?: boolean;
  /** The initial history, such as the user's prompt. */
  messages?: Message[];
  /** Opaque client state as JSON text, kept until a save changes it. */
  stateJson?: string;
  /** Labels for listSessions filtering, kept until a save changes them. */
  labels?: Record<string, string>;
}

/**
 * How resume takes a session over. Its signal and deadline are the call's
 * when resume is given no CallOptions of its own (resume's second argument
 * was CallOptions before reopen).
 */
export interface ResumeOptions extends CallOptions {
  /**
   * Makes a completed or failed session active again (its status ACTIVE,
   * its final output cleared), so that it continues. Without it such a
   * session is loaded as it is, and saves to it throw SessionCompletedError.
   */
  reopen?: boolean;
}

/** A generic save: unset fields keep their value. */
export interface SaveOptions {
  task?: string;
  turn?: number;
  /** A uint64 on the wire, so a bigint. */
  tokensUsed?: bigint;
  /** Opaque client state as JSON text; "" removes it. */
  stateJson?: string;
  /** Replaces the labels when set ({} removes them). */
  labels?: Record<string, string>;
  /** Rewinds or compacts: only the first keepMessages messages are kept before append. Older revisions stay readable as they were. */
  keepMessages?: bigint;
  /** Messages appended to the history. */
  append?: Message[];
}

/**
 * A tool call the model named, with the proto's field names. It is pending
 * from pointA until pointB answers it. A tool function receives it with
 * every field set (Required<ToolUse>).
 */
export interface ToolUse {
  /** The provider's id of the call (Anthropic's tool_use id, OpenAI's call_id): the proto's tool_use_id. */
  toolUseId: string;
  /** The tool's name, as the model named it. */
  name: string;
  /** The tool's input as JSON text; "" (or unset) means {}. */
  inputJson?: string;
  /** What running the tool does; unset or UNSPECIFIED means SIDE_EFFECT. */
  effectClass?: EffectClass;
  /**
   * Exempts the call from the daemon's duplicate-intent guard (docs/api.md
   * "The same action under a new id"): set it for a tool that may
   * legitimately repeat a call with the same input after a restart.
   */
  repeatable?: boolean;
}

/**
 * What registerToolUse returns: the call's idempotency key, whether it had
 * been begun before, and for a call whose outcome is recorded already that
 * outcome (effect): then the tool must not run again.
 */
export interface Registration {
  idempotencyKey: string;
  alreadyBegun: boolean;
  effect?: PbEffect;
  /**
   * Set when the daemon's duplicate-intent guard caught the call (it repeats
   * a call an earlier, interrupted run made): the tool must not run; answer
   * the model with duplicate.toolResultText (an error when duplicate.isError).
   */
  duplicate?: DuplicateToolUse;
}

/**
 * One content block of a tool result, as the provider's JSON object
 * (Anthropic: {type: "text", text}, {type: "image", source},
 * {type: "document", source}).
 */
export interface ContentBlock {
  type: string;
  [key: string]: unknown;
}

/** What a tool returns: text, or a list of content blocks. */
export type ToolContent = string | ContentBlock[];

/** Answers one tool use. */
export interface ToolResult {
  toolUseId: string;
  /** The tool's output (text or content blocks), or its error text when isError is set. */
  content: ToolContent;
  /** The tool ran and failed, or, after reconcile, its outcome is in doubt. */
  isError: boolean;
  /** Set by reconcile to the decision that made this result; UNSPECIFIED for runTool's results. */
  decision: Decision;
  /**
   * Set when the tool ran but its outcome could not be written to the
   * ledger. content and isError are still the tool's real outcome: append
   * it, because telling the model it failed would make it retry with a new
   * tool use and repeat the side effect. The failure was logged and passed
   * to onLedgerError; pointB tries to record it once more. If the agent
   * stops before pointB, reconcile will report the call as in doubt.
   */
  ledgerError?: unknown;
  /**
   * Set when the tool did not run because the daemon's duplicate-intent
   * guard found that an earlier, interrupted run made the same call: the
   * earlier tool use id. content is then the daemon's text saying the action
   * was already taken (with its output) or may have been (isError).
   */
  duplicateOf?: string;
}

/** A moment in the life of a tool use that DialOptions.toolHook observes, in the order they happen. */
export type ToolStage =
  /** reconcile has the daemon's decision for a pending tool use and is about to act on it. */
  | "decided"
  /** beginEffect marked the tool use as dispatched; the tool has not run yet. Read-only tools skip it. */
  | "begun"
  /** The tool returned (result); its outcome is not in the ledger yet. */
  | "ran"
  /** recordEffect wrote the outcome to the ledger. */
  | "recorded";

/** What a tool hook is told. */
export interface ToolEvent {
  stage: ToolStage;
  sessionId: string;
  call: Required<ToolUse>;
  /** At "decided": the daemon's decision, and whether beginEffect had marked the tool use before the agent stopped. */
  decision?: Decision;
  begun?: boolean;
  /** At "ran" and "recorded": the tool's outcome. */
  result?: ToolResult;
}

/**
 * Runs a tool: key is the idempotency key to pass to an external API that
 * accepts one ("" for read-only tools). What it returns is the output; what
 * it throws is the tool's failure and becomes an isError result with the
 * error's message.
 */
export type ToolFunc = (call: Required<ToolUse>, key: string, signal?: AbortSignal) => Promise<ToolContent> | ToolContent;

/**
 * What a verify hook found about a tool use in doubt: "done" with its
 * outcome (output, isError), "notDone", or "unknown". note is kept with the
 * resolution.
 */
export type Verified =
  | { status: "done"; output: ToolContent; isError?: boolean; note?: string }
  | { status: "notDone"; note?: string }
  | { status: "unknown" };

/**
 * Asks the world whether a tool use in doubt took effect: given the call and
 * the idempotency key it was begun with ("" if never begun). A throw counts
 * as "unknown".
 */
export type VerifyFunc = (call: Required<ToolUse>, key: string, signal?: AbortSignal) => Promise<Verified> | Verified;

/** Session.reconcile's options: the call options, and a verify hook. */
export interface ReconcileOptions extends CallOptions {
  /**
   * Asked about each tool use in doubt; its answer is recorded
   * (ResolveEffect, resolver VERIFY): "done" is reused as the result
   * (REUSE), "notDone" runs the tool again with the same key (RUN),
   * "unknown" or a throw leaves it in doubt.
   */
  verify?: VerifyFunc;
}

/** Turns the results of one turn, in the order their tool uses were named, into the message(s) pointB appends. */
export type ToolResultsFunc = (results: ToolResult[]) => Message[];

type Service = typeof SavepointServiceService;
/**
 * A unary method of SavepointService, named as the generated client names
 * it (saveCheckpoint, ...): the raw client's. Backup, which streams its
 * response, is not one.
 */
export type Method = { [K in keyof Service]: Service[K]["responseStream"] extends true ? never : K }[keyof Service];

export type Req<M extends Method> = Parameters<Service[M]["requestSerialize"]>[0];
export type Res<M extends Method> = ReturnType<Service[M]["responseDeserialize"]>;

/** Per-call options. */
export interface CallOptions {
  /** Cancels the call (and its retries): it then fails with CanceledError. */
  signal?: AbortSignal;
  /** The call's deadline, retries included; past it the call fails with DeadlineExceededError. */
  deadline?: Date | number;
}

/**
 * The generated service's methods as promises, through the Client's retries
 * and error translation: for the calls a Session does not cover. Requests
 * may leave fields out; they take their zero values.
 */
export type RawClient = {
  [M in Method]: (request: DeepPartial<Req<M>>, options?: CallOptions) => Promise<Res<M>>;
};

/** What sessions need of their client. */
export interface ClientConfig {
  readonly logger: Logger;
  readonly toolResults: ToolResultsFunc;
  readonly onLedgerError?: (call: ToolUse, result: ToolResult, err: unknown) => void;
  readonly toolHook?: (ev: ToolEvent) => void;
  /** The names of the tools that require a person's approval. */
  readonly approvalRequired?: ReadonlySet<string>;
}

/** What a Session uses of its Client: the raw calls and the configuration. */
export interface SessionHost {
  readonly raw: RawClient;
  /** @internal */
  readonly config: ClientConfig;
}

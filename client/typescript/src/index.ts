/**
 * The TypeScript client of savepointd, the checkpoint daemon that lets an
 * agent loop killed at any point resume without repeating a side effect it
 * already performed and without pretending to know what it cannot.
 *
 * dial connects; a Session does the protocol's bookkeeping (revision, epoch,
 * history, pending tool uses, request ids), so an agent loop says only what
 * happened: pointA before any tool runs, runTool (begin, run, record) for
 * each, pointB with the results. After a crash the loop resumes, reconciles
 * what was pending, and goes on. Errors are SavepointError subclasses chosen
 * by the ErrorInfo reason the daemon sends. README.md shows the loop.
 */
export { defaultAddr, ENV_ADDR, grpcTarget, parseAddr, stateDir, type Endpoint } from "./addr.js";
export { Autostart, ENV_AUTOSTART, ENV_DAEMON_PATH, findBinary, platformPackage, type Resolved, resolveAddress, SYSTEM_ADDR } from "./autostart.js";
export {
  channelReady,
  Client,
  DEFAULT_RECONNECT_WAIT_MS,
  DEFAULT_RETRY_POLICY,
  dial,
  type DialOptions,
  ENV_TLS_CA,
  ENV_TLS_CERT,
  ENV_TLS_KEY,
  retryAgain,
  retryBackoff,
  type RetryPolicy,
  retrySafe,
  serviceClient,
  type ServiceClientConstructor,
  tlsFromEnv,
  type TlsOptions,
  unaryMethods,
} from "./client.js";
export * from "./errors.js";
export { RETRY_RULES, type RetryRule } from "./retry_rules.js";
export { consoleLogger, discardLogger, type Level, type Logger } from "./log.js";
export { Session } from "./session.js";
export { deniedText } from "./run.js";
export { CallStream, Unsupported as CallStreamUnsupported } from "./stream.js";
export {
  SessionWatch,
  type WatchChanged,
  type WatchEvent,
  WatchEventType,
  type WatchOptions,
  type WatchRemoved,
  type WatchSignal,
} from "./watch.js";
export {
  anthropicToolResults,
  Decision,
  EffectClass,
  effectClassFromAnnotations,
  effectiveClass,
  normalizeContent,
  type ToolAnnotations,
  toolContent,
  toolOutput,
} from "./tool.js";
export type {
  CallOptions,
  ContentBlock,
  Message,
  Method,
  RawClient,
  Registration,
  ResumeOptions,
  SaveOptions,
  StartOptions,
  ToolContent,
  ToolEvent,
  ReconcileOptions,
  ToolFunc,
  ToolResult,
  ToolResultsFunc,
  ToolStage,
  ToolUse,
  Verified,
  VerifyFunc,
} from "./types.js";
/** The generated messages and service of savepoint.v1, for raw calls. */
export { SessionStatus } from "./gen/savepoint/v1/savepoint.js";
export * as pb from "./gen/savepoint/v1/savepoint.js";
/** The generated messages and service of GraphCheckpointService (LangGraph checkpoints), for @savepoint-dev/langgraph. */
export * as graphPb from "./gen/savepoint/v1/graph.js";

/**
 * The OpenAI Agents SDK (TypeScript) on savepointd. SavepointSession is the
 * SDK's Session stored durably in savepointd: run(agent, input, { session:
 * new SavepointSession("my-id") }) in place of a MemorySession. durableTool
 * is the SDK's tool() with savepointd's side-effects ledger: after a crash, a
 * resumed run gets each interrupted call's recorded output, a re-run where
 * that is safe, or an error output saying its outcome is unknown.
 * docs/frameworks/openai-agents.md says what is guaranteed.
 */
export { MAX_ATTEMPTS, SavepointSession, type SavepointSessionOptions, SessionClosedError, SessionContentionError, STATE_KEY, TASK } from "./session.js";
export { DurableToolError, type Effect, idempotencyKey, type VerifyHook } from "./ledger.js";
export { DEFAULT_ERROR_OUTPUT, durableTool, type DurableToolOptions } from "./tool.js";

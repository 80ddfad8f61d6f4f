/** The agent stopped without a final answer; the session stays as it was saved. */
export class AgentError extends Error {
  constructor(message: string, readonly stopReason: string) {
    super(message);
    this.name = new.target.name;
  }
}
/** The session reached maxTurns; it stays active, and a run with a larger maxTurns goes on. */
export class MaxTurnsError extends AgentError {}
/** The reply was cut off (max_tokens, model_context_window_exceeded) or had an unknown stop reason; nothing of it was saved. */
export class StopReasonError extends AgentError {}
/** The model refused; the session is marked FAILED with the refusal's text. */
export class RefusalError extends AgentError {}
/** The session was marked FAILED earlier. */
export class SessionFailedError extends AgentError {}

/**
 * Durable agents on Anthropic's TypeScript SDK: DurableAgent checkpoints
 * every turn in savepointd and runs every tool through its ledger, so a
 * killed agent resumes without running a side effect twice.
 * docs/frameworks/anthropic.md is the reference.
 */
export {
  AgentError,
  type AgentTool,
  type ApprovalOptions,
  type ApprovalRequest,
  DurableAgent,
  type DurableAgentOptions,
  definitionOf,
  durable,
  type Effect,
  effectOf,
  MaxTurnsError,
  Paused,
  RefusalError,
  SessionFailedError,
  StopReasonError,
} from "./agent.js";
export { DurableToolRunner, type DurableToolRunnerOptions, durableBetaTool, durableToolRunner } from "./runner.js";

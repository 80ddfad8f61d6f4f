/**
 * The SDK test files run (relative to agents-core's test folder), and the
 * tests of them left out of the project "savepoint", each with its reason:
 * only tests of MemorySession's own internals, never behaviour a user of a
 * session meets. src/tests/sdk-exclusions.test.ts fails when the list grows.
 */
export const FILES: string[] = [
  "memorySession.test.ts",
  "session.test.ts",
  "historyMutations.test.ts",
  "runner/sessionPersistence.test.ts",
  "runner/sessionPersistence.extended.test.ts",
  "run.outputGuardrailReplaySession.test.ts",
  "run.outputGuardrailRedaction.test.ts",
  "run.approvalGuardrailSession.test.ts",
  "run.sessionRunContext.test.ts",
  "hitlMemorySessionScenario.test.ts",
  "run.test.ts",
  "agentScenarios.test.ts",
];

export interface Exclusion {
  /** The test's file (relative to the test folder), " > ", and its full name as vitest gives it (its describe blocks and its name, joined by spaces). */
  name: string;
  reason: string;
}

const LOGGING = "reads MemorySession's debug log lines (SavepointSession logs no item)";

export const EXCLUDED: Exclusion[] = [
  { name: "memorySession.test.ts > MemorySession preserves item diagnostics when model and tool logging are enabled", reason: LOGGING },
];

/** The reasons an exclusion may give. */
export const REASONS = [LOGGING];

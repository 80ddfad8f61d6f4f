/**
 * Compiled, not run, by `make check-claude-agent-ts` against the real
 * @anthropic-ai/claude-agent-sdk's types: what @savepoint-dev/anthropic/claude-agent
 * writes structurally is what the SDK's Options take.
 */
import type { CanUseTool, HookCallback, HookCallbackMatcher, HookEvent, Options, SessionKey, SessionStore } from "@anthropic-ai/claude-agent-sdk";
import { foldSessionSummary } from "@anthropic-ai/claude-agent-sdk";
import { SavepointSessionStore, type SessionKey as OurKey } from "@savepoint-dev/anthropic/claude-agent";

declare const s: SavepointSessionStore;
declare const policy: CanUseTool;

export const store: SessionStore = s;
// The optional methods, with the SDK's signatures, and the SDK's fold as the option.
export const listSessions: NonNullable<SessionStore["listSessions"]> = s.listSessions.bind(s);
export const listSessionSummaries: NonNullable<SessionStore["listSessionSummaries"]> = s.listSessionSummaries.bind(s);
export const listSubkeys: NonNullable<SessionStore["listSubkeys"]> = s.listSubkeys.bind(s);
export const remove: NonNullable<SessionStore["delete"]> = s.delete.bind(s);
export const folding = new SavepointSessionStore(undefined as never, { foldSessionSummary });
export const key: OurKey = {} as SessionKey;
export const hooks: Partial<Record<HookEvent, HookCallbackMatcher[]>> = s.hooks("mcp__notes__.*");
export const pre: HookCallback = s.preToolUse;
export const post: HookCallback = s.postToolUse;
export const failure: HookCallback = s.postToolUseFailure;
export const wrapped: CanUseTool = s.canUseTool(policy);
export const inline: CanUseTool = s.canUseTool(async (_name, _input, o) => ({ behavior: "deny", message: "no " + o.toolUseID }));
export const options: Options = {
  sessionStore: s,
  sessionStoreFlush: "eager",
  hooks: { ...s.hooks(), Stop: [] },
  canUseTool: s.canUseTool(),
};

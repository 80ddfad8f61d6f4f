/**
 * @savepoint-dev/anthropic/claude-agent against a real savepointd, its hooks
 * and store called the way @anthropic-ai/claude-agent-sdk 0.3.337 calls them
 * (sdk.mjs): a hook callback as callback(request.input, request.tool_use_id,
 * { signal }) with the CLI's hook input (snake_case: session_id, tool_name,
 * tool_input, tool_use_id, tool_response or error); canUseTool as
 * canUseTool(tool_name, input, { signal, suggestions, ..., toolUseID,
 * agentID, requestId }); SessionStore.append(key, entries) and
 * load({ projectKey, sessionId }). The SDK itself is not needed here.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { type Client, consoleLogger, Decision, dial, EffectClass, type pb, SessionFencedError } from "@savepoint-dev/client";

// The TypeScript client's test daemon helper (client/typescript/src/tests/daemon.ts).
import { Daemon } from "../../../typescript/dist/tests/daemon.js";
import {
  danglingToolUses,
  fillTemplate,
  INTERRUPTED,
  NEVER_STARTED,
  SavepointSessionStore,
  type SessionKey,
  type SessionStoreEntry,
  sessionIdFor,
  type ToolHookInput,
} from "../claude_agent.js";

const quiet = consoleLogger("error");
let d: Daemon;
const clients: Client[] = [];

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  for (const c of clients) c.close();
  await d.close();
});

async function client(): Promise<Client> {
  const c = await dial(d.addr, { logger: quiet });
  clients.push(c);
  return c;
}

/** The SDK's third hook argument. */
const opts = () => ({ signal: new AbortController().signal });

function pre(sdk: string, tid: string, name: string, toolInput: unknown = {}): ToolHookInput {
  return { session_id: sdk, transcript_path: "/tmp/t.jsonl", cwd: "/tmp", hook_event_name: "PreToolUse", tool_name: name, tool_input: toolInput, tool_use_id: tid } as ToolHookInput;
}
function post(sdk: string, tid: string, name: string, response: unknown): ToolHookInput {
  return { ...pre(sdk, tid, name), hook_event_name: "PostToolUse", tool_response: response };
}
function failure(sdk: string, tid: string, name: string, error: string, interrupt = false): ToolHookInput {
  return { ...pre(sdk, tid, name), hook_event_name: "PostToolUseFailure", error, is_interrupt: interrupt };
}
/** The SDK's canUseTool options for the call tid, as sdk.mjs builds them. */
function permission(tid: string) {
  return { signal: new AbortController().signal, suggestions: [], toolUseID: tid, agentID: undefined, requestId: randomUUID() };
}

function assistant(sdk: string, parent: string | null, ...toolUses: [string, string][]): SessionStoreEntry {
  return {
    parentUuid: parent,
    isSidechain: false,
    type: "assistant",
    uuid: randomUUID(),
    sessionId: sdk,
    timestamp: "2026-12-07T14:21:46.305Z",
    cwd: "/tmp",
    version: "2.1.327",
    message: { id: "msg_1", type: "message", role: "assistant", content: toolUses.map(([id, name]) => ({ type: "tool_use", id, name, input: {} })) },
  };
}
function result(sdk: string, parent: string, tid: string, text: string): SessionStoreEntry {
  return {
    parentUuid: parent,
    isSidechain: false,
    type: "user",
    uuid: randomUUID(),
    sessionId: sdk,
    message: { role: "user", content: [{ tool_use_id: tid, type: "tool_result", content: [{ type: "text", text }] }] },
  };
}

async function ledger(sid: string): Promise<Map<string, pb.LedgerEntry>> {
  const c = await client();
  return new Map((await c.raw.listEffects({ sessionId: sid })).entries.map((e) => [e.toolUseId, e]));
}

test("the hooks put every call on the ledger: parallel PreToolUse, PostToolUse, PostToolUseFailure", async () => {
  const sdk = randomUUID();
  const store = new SavepointSessionStore(await client(), { readOnly: ["mcp__notes__read_notes"] });
  const { PreToolUse, PostToolUse, PostToolUseFailure } = store.hooks();
  for (const m of [PreToolUse, PostToolUse, PostToolUseFailure]) assert.equal(m[0]!.onFailure, "block");
  const [preHook, postHook, failHook] = [PreToolUse[0]!.hooks[0]!, PostToolUse[0]!.hooks[0]!, PostToolUseFailure[0]!.hooks[0]!];

  // PreToolUse of parallel calls: none contends on the revision.
  const ids = Array.from({ length: 8 }, (_, i) => `toolu_${i}`);
  const outs = await Promise.all(ids.map((t) => preHook(pre(sdk, t, "mcp__notes__write_report"), t, opts())));
  assert.deepEqual(outs, ids.map(() => ({})));
  assert.deepEqual(await preHook(pre(sdk, "toolu_r", "mcp__notes__read_notes"), "toolu_r", opts()), {});
  const blocks = [{ type: "text", text: "sales up 12%" }];
  assert.deepEqual(await postHook(post(sdk, "toolu_r", "mcp__notes__read_notes", blocks), "toolu_r", opts()), {});
  assert.deepEqual(await postHook(post(sdk, "toolu_0", "mcp__notes__write_report", "written"), "toolu_0", opts()), {});
  assert.deepEqual(await failHook(failure(sdk, "toolu_1", "mcp__notes__write_report", "disk full"), "toolu_1", opts()), {});
  // An interrupted call's outcome is unknown: nothing is recorded.
  await failHook(failure(sdk, "toolu_2", "mcp__notes__write_report", "interrupted", true), "toolu_2", opts());

  const led = await ledger(sessionIdFor(sdk));
  assert.deepEqual([...led.keys()].sort(), [...ids, "toolu_r"].sort());
  for (const e of led.values()) assert.ok(e.begun && e.registered && e.beginTracked, e.toolUseId);
  assert.equal(led.get("toolu_r")!.effectClass, EffectClass.EFFECT_CLASS_READ_ONLY);
  assert.equal(led.get("toolu_0")!.effectClass, EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  assert.deepEqual(JSON.parse(led.get("toolu_r")!.effect!.output), blocks);
  assert.equal(JSON.parse(led.get("toolu_0")!.effect!.output), "written");
  assert.ok(!led.get("toolu_0")!.effect!.isError);
  assert.ok(led.get("toolu_1")!.effect!.isError);
  assert.equal(JSON.parse(led.get("toolu_1")!.effect!.output), "disk full");
  assert.equal(led.get("toolu_2")!.effect, undefined);
});

test("a recorded call is answered with its recorded output, not run again", async () => {
  const sdk = randomUUID();
  const first = new SavepointSessionStore(await client());
  await first.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts());
  await first.postToolUse(post(sdk, "toolu_w", "write_report", [{ type: "text", text: "report.txt written" }]), "toolu_w", opts());
  // Another process sees the same call again (a resumed model re-issues it).
  const second = new SavepointSessionStore(await client());
  const out = await second.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts());
  const hso = out.hookSpecificOutput!;
  assert.equal(hso.hookEventName, "PreToolUse");
  assert.equal(hso.permissionDecision, "deny");
  assert.match(hso.permissionDecisionReason, /already ran/);
  assert.match(hso.permissionDecisionReason, /report\.txt written/);
});

test("the same call under a new id from a resumed process is denied with the daemon's text; twice in one process it runs", async () => {
  const sdk = randomUUID();
  const report = { path: "report.txt", text: "Q3" };
  const first = new SavepointSessionStore(await client());
  for (const tid of ["toolu_w1", "toolu_w2"]) {
    assert.deepEqual(await first.preToolUse(pre(sdk, tid, "write_report", report), tid, opts()), {});
    await first.postToolUse(post(sdk, tid, "write_report", [{ type: "text", text: "report.txt written" }]), tid, opts());
  }
  // The killed process's reply is lost; the resumed model re-issues the call under a new id.
  const second = new SavepointSessionStore(await client());
  const out = await second.preToolUse(pre(sdk, "toolu_w3", "write_report", { text: "Q3", path: "report.txt" }), "toolu_w3", opts());
  const hso = out.hookSpecificOutput!;
  assert.equal(hso.permissionDecision, "deny");
  assert.match(hso.permissionDecisionReason, /toolu_w3.*tool_use_id toolu_w2 .*report\.txt written/s);
});

test("a side-effecting call begun by a killed process is denied with the in-doubt text; a read-only one runs", async () => {
  const sdk = randomUUID();
  const first = new SavepointSessionStore(await client(), { readOnly: ["read_notes"] });
  assert.deepEqual(await first.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts()), {});
  assert.deepEqual(await first.preToolUse(pre(sdk, "toolu_r", "read_notes"), "toolu_r", opts()), {});
  // Killed inside both tools: no PostToolUse.
  const c = await client();
  const second = new SavepointSessionStore(c, { readOnly: ["read_notes"] });
  const out = await second.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts());
  const hso = out.hookSpecificOutput!;
  assert.equal(hso.permissionDecision, "deny");
  // The daemon's own in-doubt text, word for word.
  const [res] = await (await c.resume(sessionIdFor(sdk))).reconcileToolUses(["toolu_w"]);
  assert.equal(hso.permissionDecisionReason, res!.toolResultText);
  assert.match(hso.permissionDecisionReason, /unknown/);
  assert.match(hso.permissionDecisionReason, /toolu_w/);
  // A read-only call is safe to run again.
  const third = new SavepointSessionStore(await client(), { readOnly: ["read_notes"] });
  assert.deepEqual(await third.preToolUse(pre(sdk, "toolu_r", "read_notes"), "toolu_r", opts()), {});
});

test("a call canUseTool refuses is recorded as refused, never run, and is not in doubt", async () => {
  const sdk = randomUUID();
  const c = await client();
  const store = new SavepointSessionStore(c);
  const check = store.canUseTool(async () => ({ behavior: "deny", message: "writing reports is not allowed" }) as const);
  // The CLI fires PreToolUse, then asks the permission callback.
  await store.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts());
  const res = await check("write_report", {}, permission("toolu_w"));
  assert.deepEqual(res, { behavior: "deny", message: "writing reports is not allowed" });
  // An allowed call is left alone.
  await store.preToolUse(pre(sdk, "toolu_ok", "write_report"), "toolu_ok", opts());
  assert.deepEqual(await store.canUseTool()("write_report", {}, permission("toolu_ok")), { behavior: "allow" });

  const led = await ledger(sessionIdFor(sdk));
  const e = led.get("toolu_w")!.effect!;
  assert.ok(e.refused && e.isError);
  assert.equal(JSON.parse(e.output), "writing reports is not allowed");
  assert.equal(led.get("toolu_ok")!.effect, undefined);
  // After a crash: reused as a refusal, not in doubt.
  const [r] = await (await c.resume(sessionIdFor(sdk))).reconcileToolUses(["toolu_w"]);
  assert.equal(r!.decision, Decision.DECISION_REUSE);
  assert.ok(r!.effect!.refused);
});

test("a call the transcript shows denied by the CLI's permission mode is recorded as refused", async () => {
  // Such a call fires PreToolUse and no other hook; its transcript entry (as
  // CLI 2.1.327 writes it) says so, and append records the refusal.
  const sdk = randomUUID();
  const key: SessionKey = { projectKey: "-tmp", sessionId: sdk };
  const a = assistant(sdk, null, ["toolu_w", "write_report"]);
  const denial: SessionStoreEntry = {
    ...result(sdk, a.uuid!, "toolu_w", ""),
    toolDenialKind: "permission-rule",
    permissionDecision: { decision: "reject", source: "config", reasonType: "mode", reasonCode: "mode:dontAsk" },
    message: {
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "toolu_w",
          is_error: true,
          content: "Permission to use write_report has been denied because Claude Code is running in don't ask mode.",
        },
      ],
    },
  };
  const accepted = { ...result(sdk, a.uuid!, "toolu_r", "notes"), permissionDecision: { decision: "accept", source: "config" } };
  const store = new SavepointSessionStore(await client());
  await store.preToolUse(pre(sdk, "toolu_w", "write_report"), "toolu_w", opts());
  await store.preToolUse(pre(sdk, "toolu_r", "read_notes"), "toolu_r", opts());
  await store.append(key, [a, denial, accepted]);
  // A refusal recorded already stands: no conflict.
  await store.append(key, [{ ...denial, uuid: randomUUID() }]);

  const led = await ledger(sessionIdFor(sdk));
  assert.ok(led.get("toolu_w")!.effect!.refused);
  assert.match(JSON.parse(led.get("toolu_w")!.effect!.output), /don't ask mode/);
  assert.equal(led.get("toolu_r")!.effect, undefined);
});

test("load() after a crash answers each dangling call with Reconcile's decision", async () => {
  const sdk = randomUUID();
  const key: SessionKey = { projectKey: "-tmp", sessionId: sdk };
  const prompt: SessionStoreEntry = { type: "user", uuid: randomUUID(), parentUuid: null, message: { role: "user", content: "write the report" } };
  const a1 = assistant(sdk, prompt.uuid!, ["toolu_r", "read_notes"]);
  const r1 = result(sdk, a1.uuid!, "toolu_r", "sales up 12%");
  const a2 = assistant(
    sdk,
    r1.uuid!,
    ["toolu_done", "write_report"],
    ["toolu_doubt", "send_mail"],
    ["toolu_never", "send_mail"],
    ["toolu_refused", "delete_all"],
    ["toolu_ro", "read_notes"],
  );

  // The killed process.
  const old = new SavepointSessionStore(await client(), { readOnly: ["read_notes"] });
  await old.append(key, [{ type: "queue-operation", operation: "enqueue", sessionId: sdk }, prompt, a1]);
  await old.append(key, [r1, a2]);
  await old.append(key, [r1, a2]); // a batch the SDK retried
  for (const [tid, name] of [
    ["toolu_done", "write_report"],
    ["toolu_doubt", "send_mail"],
    ["toolu_refused", "delete_all"],
    ["toolu_ro", "read_notes"],
  ] as const) {
    assert.deepEqual(await old.preToolUse(pre(sdk, tid, name), tid, opts()), {});
  }
  await old.postToolUse(post(sdk, "toolu_done", "write_report", [{ type: "text", text: "report.txt written" }]), "toolu_done", opts());
  await old.canUseTool(async () => ({ behavior: "deny", message: "no deletes" }) as const)("delete_all", {}, permission("toolu_refused"));
  // Killed here: toolu_doubt and toolu_ro ran with no record, toolu_never never started.

  const c = await client();
  const store = new SavepointSessionStore(c, { readOnly: ["read_notes"] });
  assert.equal(await store.load({ projectKey: "-tmp", sessionId: randomUUID() }), null);
  const entries = await store.load(key);
  assert.ok(entries);
  // The retried batch was kept once, and the answer comes last.
  assert.deepEqual(
    entries.slice(0, -1).map((e) => e.uuid),
    [undefined, prompt.uuid, a1.uuid, r1.uuid, a2.uuid],
  );
  const answer = entries[entries.length - 1]!;
  assert.equal(answer.type, "user");
  assert.equal(answer.parentUuid, a2.uuid);
  assert.equal(answer.sessionId, sdk);
  assert.equal(answer.cwd, "/tmp");
  const content = (answer.message as { content: Record<string, unknown>[] }).content;
  const blocks = new Map(content.map((b) => [b.tool_use_id as string, b]));
  assert.deepEqual([...blocks.keys()], ["toolu_done", "toolu_doubt", "toolu_never", "toolu_refused", "toolu_ro"]);
  assert.deepEqual(blocks.get("toolu_done"), { type: "tool_result", tool_use_id: "toolu_done", content: [{ type: "text", text: "report.txt written" }] });
  assert.equal(blocks.get("toolu_doubt")!.is_error, true);
  assert.match(blocks.get("toolu_doubt")!.content as string, /unknown/);
  assert.deepEqual(blocks.get("toolu_never"), {
    type: "tool_result",
    tool_use_id: "toolu_never",
    content: fillTemplate(NEVER_STARTED, "send_mail", "toolu_never"),
    is_error: true,
  });
  assert.equal(blocks.get("toolu_refused")!.is_error, true);
  assert.equal(blocks.get("toolu_refused")!.content, "no deletes");
  assert.equal(blocks.get("toolu_ro")!.content, fillTemplate(INTERRUPTED, "read_notes", "toolu_ro"));
  assert.deepEqual(danglingToolUses(entries), []);
  // The answer is saved: loading again gives the same transcript, through JSON as the SDK writes it.
  assert.deepEqual(await new SavepointSessionStore(c).load(key), JSON.parse(JSON.stringify(entries)));
  // The old process is fenced from the session.
  await assert.rejects(old.preToolUse(pre(sdk, "toolu_late", "write_report"), "toolu_late", opts()), SessionFencedError);
});

test("delete() removes the session; a session id is the Python one", async () => {
  const sdk = randomUUID();
  const key: SessionKey = { projectKey: "-tmp", sessionId: sdk };
  const store = new SavepointSessionStore(await client());
  await store.append(key, [{ type: "user", uuid: randomUUID(), message: { role: "user", content: "hi" } }]);
  assert.equal((await store.load(key))!.length, 1);
  await store.delete(key);
  assert.equal(await new SavepointSessionStore(await client()).load(key), null);

  assert.equal(sessionIdFor("6374f0cd-b2dd-4a8b-a654-88983251d26a"), "claude.6374f0cd-b2dd-4a8b-a654-88983251d26a");
  assert.equal(sessionIdFor("abc", "subagents/agent-1"), "claude.abc.subagents:agent-1");
  assert.equal(sessionIdFor("a b"), "claude.a_b");
  assert.throws(() => sessionIdFor("x".repeat(130)), RangeError);
});

/** A stand-in for the SDK's foldSessionSummary (same signature and result shape): it counts entries and keeps the first prompt. */
const fold = (prev: { sessionId: string; mtime: number; data: Record<string, unknown> } | undefined, key: SessionKey, entries: SessionStoreEntry[]) => {
  const data: Record<string, unknown> = { ...(prev?.data ?? { n: 0 }) };
  data.n = (data.n as number) + entries.length;
  for (const e of entries) if (e.type === "user" && !("firstPrompt" in data)) data.firstPrompt = (e.message as { content: string }).content;
  return { sessionId: key.sessionId, mtime: prev?.mtime ?? 0, data };
};

test("listSessions, listSessionSummaries and listSubkeys select by the SDK key, take nothing over; delete cascades", async () => {
  const [a, b, other] = [randomUUID(), randomUUID(), randomUUID()];
  const proj = `-work-${randomUUID().slice(0, 8)}`;
  const user = (text: string): SessionStoreEntry => ({ type: "user", uuid: randomUUID(), message: { role: "user", content: text } });
  const writer = new SavepointSessionStore(await client(), { foldSessionSummary: fold });
  // a's session is first made by a hook, which does not know the project: append labels it.
  assert.deepEqual(await writer.preToolUse(pre(a, "toolu_1", "write_report"), "toolu_1", opts()), {});
  await writer.append({ projectKey: proj, sessionId: a }, [user("first a"), user("again a")]);
  await writer.append({ projectKey: proj, sessionId: a }, [user("third a")]);
  await writer.append({ projectKey: proj, sessionId: a, subpath: "subagents/agent-1" }, [user("sub 1")]);
  await writer.append({ projectKey: proj, sessionId: a, subpath: "subagents/agent-2" }, [user("sub 2")]);
  await writer.append({ projectKey: proj, sessionId: b }, [user("first b")]);
  await writer.append({ projectKey: `${proj}-x`, sessionId: other }, [user("elsewhere")]);

  const store = new SavepointSessionStore(await client()); // another process
  const listed = await store.listSessions(proj);
  assert.deepEqual(listed.map((e) => e.sessionId).sort(), [a, b].sort());
  assert.ok(listed.every((e) => Number.isInteger(e.mtime) && e.mtime > 1_700_000_000_000));
  const summaries = new Map((await store.listSessionSummaries(proj)).map((e) => [e.sessionId, e]));
  assert.deepEqual(summaries.get(a)!.data, { n: 3, firstPrompt: "first a" });
  assert.deepEqual(summaries.get(b)!.data, { n: 1, firstPrompt: "first b" });
  assert.deepEqual(Object.fromEntries(listed.map((e) => [e.sessionId, e.mtime])), Object.fromEntries([...summaries].map(([k, v]) => [k, v.mtime])));
  assert.deepEqual((await store.listSubkeys({ projectKey: proj, sessionId: a })).sort(), ["subagents/agent-1", "subagents/agent-2"]);
  assert.deepEqual(await store.listSubkeys({ projectKey: proj, sessionId: b }), []);
  assert.deepEqual(await store.listSessions("-nowhere"), []);
  // The writer still owns a: listing took nothing over.
  assert.deepEqual(await writer.preToolUse(pre(a, "toolu_2", "write_report"), "toolu_2", opts()), {});

  await store.delete({ projectKey: proj, sessionId: a });
  assert.deepEqual((await store.listSessions(proj)).map((e) => e.sessionId), [b]);
  assert.deepEqual(await store.listSubkeys({ projectKey: proj, sessionId: a }), []);
  // A targeted delete removes only that subagent transcript.
  await store.append({ projectKey: proj, sessionId: b, subpath: "subagents/x" }, [user("sub b")]);
  await store.delete({ projectKey: proj, sessionId: b, subpath: "subagents/x" });
  assert.deepEqual(await store.listSubkeys({ projectKey: proj, sessionId: b }), []);
  assert.deepEqual((await store.listSessions(proj)).map((e) => e.sessionId), [b]);
});

test("without the SDK's foldSessionSummary (not installed here) no summary is kept", async () => {
  const sdk = randomUUID();
  const proj = `-p-${randomUUID().slice(0, 8)}`;
  const store = new SavepointSessionStore(await client());
  await store.append({ projectKey: proj, sessionId: sdk }, [{ type: "user", uuid: "u1", message: { role: "user", content: "hi" } }]);
  assert.deepEqual((await store.listSessions(proj)).map((e) => e.sessionId), [sdk]);
  assert.deepEqual(await store.listSessionSummaries(proj), []);
});

test("approvalRequired: PreToolUse defers the call until a person decides; approved it runs once, denied the model gets the note", async () => {
  const sdk = randomUUID();
  const sid = sessionIdFor(sdk);
  const key = { projectKey: "p", sessionId: sdk };
  const pay = { to: "acme", amount: 5 };
  const store = new SavepointSessionStore(await client(), { approvalRequired: ["mcp__bank__pay"] });
  const a = assistant(sdk, null, ["toolu_pay", "mcp__bank__pay"], ["toolu_no", "mcp__bank__pay"]);
  await store.append(key, [a]);
  const deferred = { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "defer", permissionDecisionReason: `This mcp__bank__pay call (tool_use_id toolu_pay) waits for a person's approval: savepoint approve ${sid} toolu_pay` } };
  assert.deepEqual(await store.preToolUse(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", opts()), deferred);
  assert.equal((await store.preToolUse(pre(sdk, "toolu_no", "mcp__bank__pay", pay), "toolu_no", opts())).hookSpecificOutput?.permissionDecision, "defer");
  // A tool not named runs as before.
  assert.deepEqual(await store.preToolUse(pre(sdk, "toolu_read", "mcp__bank__balance"), "toolu_read", opts()), {});

  // The SDK's resume: load leaves the deferred calls unanswered, so that the SDK asks PreToolUse again.
  const resumed = new SavepointSessionStore(await client(), { approvalRequired: ["mcp__bank__pay"] });
  assert.deepEqual(await resumed.load(key), [a]);
  // Still undecided: deferred again. An approval for other input is refused and unlocks nothing.
  assert.equal((await resumed.preToolUse(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", opts())).hookSpecificOutput?.permissionDecision, "defer");
  const c = await client();
  const w = (await ledger(sid)).get("toolu_pay")!.approval!;
  assert.equal(w.status, 1); // APPROVAL_STATUS_WAITING
  const other = Buffer.alloc(32, 7);
  await assert.rejects(c.approveEffect(sid, "toolu_pay", { inputDigest: other }), /APPROVAL_INPUT_MISMATCH|input/);
  assert.equal((await resumed.preToolUse(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", opts())).hookSpecificOutput?.permissionDecision, "defer");

  // Approved for the input shown: PreToolUse lets it run, once; denied: the model gets the note.
  await c.approveEffect(sid, "toolu_pay", { decidedBy: "alice", inputDigest: w.inputDigest });
  await c.approveEffect(sid, "toolu_no", { deny: true, note: "not this month", decidedBy: "bob" });
  assert.deepEqual(await resumed.preToolUse(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", opts()), {});
  assert.deepEqual(await resumed.preToolUse(pre(sdk, "toolu_no", "mcp__bank__pay", pay), "toolu_no", opts()), {
    hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: "This call was denied by bob; it did not run. Their note: not this month" },
  });
  const led = await ledger(sid);
  assert.ok(led.get("toolu_pay")!.begun && led.get("toolu_pay")!.approval!.spent);
  assert.ok(led.get("toolu_no")!.effect!.refused && !led.get("toolu_no")!.begun);

  // Killed after the begin, before PostToolUse: a new process's PreToolUse of the same call does not run it again.
  const third = new SavepointSessionStore(await client(), { approvalRequired: ["mcp__bank__pay"] });
  const again = await third.preToolUse(pre(sdk, "toolu_pay", "mcp__bank__pay", pay), "toolu_pay", opts());
  assert.equal(again.hookSpecificOutput?.permissionDecision, "deny");
  assert.match(again.hookSpecificOutput!.permissionDecisionReason, /toolu_pay/);
});

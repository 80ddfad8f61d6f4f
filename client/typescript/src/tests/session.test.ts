import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AlreadyRunError,
  CallNotPendingError,
  type Client,
  consoleLogger,
  Decision,
  dial,
  EffectClass,
  InvalidArgumentError,
  type Message,
  NotRunError,
  pb,
  ResultsMismatchError,
  RevisionMismatchError,
  SavepointError,
  SessionCompletedError,
  SessionExistsError,
  SessionFencedError,
  SessionNotFoundError,
  SessionStatus,
  type ToolEvent,
  ToolNameMismatchError,
  type ToolUse,
  ToolUsesPendingError,
} from "../index.js";
import { Daemon } from "./daemon.js";

const quiet = consoleLogger("error");
let d: Daemon;
let c: Client;

before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr, { logger: quiet });
});
after(async () => {
  c.close();
  await d.close();
});

const prompt: Message = { role: "user", contentJson: '[{"type":"text","text":"go"}]' };
function assistantFor(...calls: ToolUse[]): Message {
  return { role: "assistant", contentJson: JSON.stringify(calls.map((u) => ({ type: "tool_use", id: u.toolUseId, name: u.name, input: {} }))) };
}
const ro = (id: string, name = "read_notes"): ToolUse => ({ toolUseId: id, name, effectClass: EffectClass.EFFECT_CLASS_READ_ONLY });
const side = (id: string, name = "write_report"): ToolUse => ({ toolUseId: id, name, effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT });
const idem = (id: string, name = "send_mail"): ToolUse => ({ toolUseId: id, name, effectClass: EffectClass.EFFECT_CLASS_IDEMPOTENT });

/** Counts real runs, so a repeated side effect shows, and remembers the keys. */
class Tools {
  runs = new Map<string, number>();
  keys: string[] = [];
  run = (call: Required<ToolUse>, key: string): string => {
    this.runs.set(call.name, (this.runs.get(call.name) ?? 0) + 1);
    this.keys.push(key);
    return `${call.name} done`;
  };
}

/** The whole history as the daemon holds it, read without taking ownership. */
async function history(id: string): Promise<Message[]> {
  const g = await c.raw.getSession({ sessionId: id });
  const msgs = g.checkpoint!.messages.map((m) => ({ role: m.role, contentJson: m.contentJson }));
  for (let token = g.nextPageToken; token !== ""; ) {
    const p = await c.raw.listMessages({ sessionId: id, revision: g.checkpoint!.revision, pageToken: token });
    msgs.push(...p.messages.map((m) => ({ role: m.role, contentJson: m.contentJson })));
    token = p.nextPageToken;
  }
  return msgs;
}

test("the session cycle: start, Point A, run, Point B, final answer, resume", async () => {
  const s = await c.start("cycle", "write a report", { messages: [prompt], labels: { team: "ts" }, stateJson: '{"k":1}' });
  assert.equal(s.revision, 1n);
  assert.ok(s.epoch >= 1n);
  assert.equal(s.turn, 0);
  const tools = new Tools();
  const calls = [ro("c1"), side("c2")];
  s.addTokens(120);
  await s.pointA(assistantFor(...calls), calls);
  assert.equal(s.revision, 2n);
  assert.equal(s.turn, 1);
  assert.deepEqual(
    s.pending.map((p) => [p.toolUseId, p.effectClass]),
    [
      ["c1", EffectClass.EFFECT_CLASS_READ_ONLY],
      ["c2", EffectClass.EFFECT_CLASS_SIDE_EFFECT],
    ],
  );
  const g = await c.raw.getSession({ sessionId: "cycle" });
  assert.deepEqual(
    g.checkpoint!.pendingToolUses.map((p) => [p.toolUseId, p.beginTracked]),
    [
      ["c1", false],
      ["c2", true],
    ],
    "begin_tracked exactly for the tool uses the client begins",
  );
  const results = await s.runTools(calls, tools.run);
  assert.deepEqual(
    results.map((r) => [r.toolUseId, r.content, r.isError, r.ledgerError]),
    [
      ["c1", "read_notes done", false, undefined],
      ["c2", "write_report done", false, undefined],
    ],
  );
  assert.equal(tools.keys[0], "", "a read-only tool gets no idempotency key");
  assert.match(tools.keys[1], /^[0-9a-f]{16,}$/, "a side-effecting tool gets beginEffect's key");
  await s.pointB(results);
  assert.equal(s.revision, 3n);
  assert.equal(s.pending.length, 0);
  await s.pointA({ role: "assistant", contentJson: '[{"type":"text","text":"done"}]' }, []);
  assert.equal(s.turn, 2);
  assert.equal(s.messageCount, 4n);
  assert.deepEqual(await history("cycle"), s.messages);
  const last = JSON.parse(s.messages[2].contentJson);
  assert.deepEqual(last, [
    { type: "tool_result", tool_use_id: "c1", content: "read_notes done" },
    { type: "tool_result", tool_use_id: "c2", content: "write_report done" },
  ]);

  const r = await c.resume("cycle");
  assert.equal(r.revision, s.revision);
  assert.equal(r.epoch, s.epoch + 1n, "resume takes ownership: the epoch goes up");
  assert.deepEqual(r.messages, s.messages);
  assert.equal(r.turn, 2);
  assert.equal(r.tokensUsed, 120n);
  assert.equal(r.task, "write a report");
  assert.equal(r.stateJson, '{"k":1}');
  assert.deepEqual(r.labels, { team: "ts" });
  assert.deepEqual(await r.reconcile(), [], "nothing pending");
  await r.pointB([]); // nothing pending, nothing to do
  assert.equal(r.revision, s.revision);
  await r.save({ tokensUsed: 200n, labels: {} });
  assert.equal(r.revision, s.revision + 1n);
  assert.equal(r.tokensUsed, 200n);
  assert.deepEqual((await c.raw.getSession({ sessionId: "cycle" })).checkpoint!.labels, {});
  await r.save({ keepMessages: 2n, append: [{ role: "user", contentJson: '"rewound"' }] });
  assert.equal(r.messageCount, 3n);
  assert.deepEqual(await history("cycle"), r.messages);
  await r.delete();
  await assert.rejects(c.resume("cycle"), SessionNotFoundError);
});

test("the session refuses what the protocol forbids, before asking the daemon", async () => {
  const s = await c.start("guards", "t", { messages: [prompt] });
  const calls = [side("g1"), ro("g2")];
  await s.pointA(assistantFor(...calls), calls);
  await assert.rejects(s.pointA(assistantFor(ro("g3")), [ro("g3")]), ToolUsesPendingError);
  await assert.rejects(s.save({ append: [prompt] }), ToolUsesPendingError);
  await assert.rejects(s.save({ keepMessages: 1n }), ToolUsesPendingError);
  await assert.rejects(s.runTool(ro("nope"), () => "x"), CallNotPendingError);
  await assert.rejects(s.runTool({ toolUseId: "g1", name: "other" }, () => "x"), ToolNameMismatchError);
  const tools = new Tools();
  const [r1] = await s.runTools([calls[0]], tools.run);
  await assert.rejects(s.runTool(calls[0], () => "again"), AlreadyRunError);
  assert.equal(tools.runs.get("write_report"), 1);
  const failed = await s.runTool(calls[1], () => {
    throw new Error("disk on fire");
  });
  assert.deepEqual([failed.content, failed.isError], ["disk on fire", true], "a tool's failure is its result, recorded");
  await assert.rejects(s.pointB([r1]), ResultsMismatchError);
  await assert.rejects(s.pointB([r1, r1, failed]), ResultsMismatchError);
  await assert.rejects(s.pointB([r1, failed, { ...r1, toolUseId: "extra" }]), ResultsMismatchError);
  // A result made by hand, claiming a ledger failure so that pointB records it: refused.
  await assert.rejects(s.pointB([{ ...r1, content: "null", ledgerError: new Error("record me") }, failed]), NotRunError);
  const rev = s.revision;
  await s.pointB([failed, r1]); // any order; saved in the order named
  assert.equal(s.revision, rev + 1n);
  assert.deepEqual(
    JSON.parse(s.messages.at(-1)!.contentJson).map((b: { tool_use_id: string; is_error?: boolean }) => [b.tool_use_id, b.is_error]),
    [
      ["g1", undefined],
      ["g2", true],
    ],
  );
  const rec = await c.raw.reconcile({ sessionId: "guards" });
  assert.equal(rec.resolutions.length, 0);
});

test("start: an existing session is SessionExistsError unless replaced", async () => {
  const s1 = await c.start("exists", "t", { messages: [prompt] });
  await assert.rejects(c.start("exists", "t"), SessionExistsError);
  const owner = await c.resume("exists");
  // Once resumed, a create (epoch 0) is fenced: still SessionExistsError.
  await assert.rejects(c.start("exists", "t"), (e: unknown) => e instanceof SessionExistsError && e.reason === "SESSION_FENCED");
  const s2 = await c.start("exists", "t2", { replace: true, messages: [prompt] });
  assert.equal(s2.revision, 1n);
  assert.ok(s2.epoch > owner.epoch, "the new session starts above the deleted one's epoch");
  // Both earlier owners are fenced.
  for (const old of [s1, owner]) {
    await assert.rejects(old.save({ tokensUsed: 1n }), (e: unknown) => e instanceof SessionFencedError && e.currentEpoch === s2.epoch);
  }
  await assert.rejects(c.resume("never-was"), SessionNotFoundError);
});

test("fencing and revision errors arrive as classes, with the session's revision and epoch", async () => {
  const s = await c.start("fence", "t", { messages: [prompt] });
  const calls = [side("f1")];
  await s.pointA(assistantFor(...calls), calls);
  const other = await c.resume("fence");
  const tools = new Tools();
  // The fenced process may not start a tool the new owner may be running.
  await assert.rejects(s.runTools(calls, tools.run), (e: unknown) => {
    assert.ok(e instanceof SessionFencedError, String(e));
    assert.equal(e.reason, "SESSION_FENCED");
    assert.equal(e.currentEpoch, other.epoch);
    assert.match(e.message, /tool use "f1" \(write_report\) not run: BeginEffect/);
    return true;
  });
  assert.equal(tools.runs.size, 0, "no tool ran");
  await assert.rejects(s.pointB([]), ResultsMismatchError);
  await assert.rejects(s.save({ tokensUsed: 5n }), SessionFencedError);
  // A stale revision under the right epoch.
  await assert.rejects(
    c.raw.saveCheckpoint({ sessionId: "fence", expectedRevision: 1n, epoch: other.epoch, task: "t" }),
    (e: unknown) => e instanceof RevisionMismatchError && e.currentRevision === other.revision && e.code === 10,
  );
  // Another process writes after this one's resume: reconcile says so.
  const third = await c.resume("fence");
  await third.save({ tokensUsed: 9n });
  await assert.rejects(other.reconcile(tools.run), RevisionMismatchError);
  // Bad input: the field reasons are InvalidArgumentError, metadata naming the field.
  await assert.rejects(c.start("bad id!", "t"), (e: unknown) => {
    assert.ok(e instanceof InvalidArgumentError, String(e));
    assert.equal(e.reason, "INVALID_SESSION_ID");
    assert.equal(e.metadata.field, "session_id");
    return true;
  });
  await assert.rejects(c.start("badjson", "t", { messages: [{ role: "user", contentJson: "{nope" }] }), (e: unknown) => {
    return e instanceof InvalidArgumentError && e.reason === "INVALID_JSON";
  });
});

test("every reconcile rule", async () => {
  // The crash moments, made with the Session and raw calls, then resumed
  // by a new process; what reconcile answers and does for each.
  const s = await c.start("rules", "t", { messages: [prompt] });
  const calls = [
    side("recorded", "write_a"), // ran and recorded: REUSE
    side("failed", "write_b"), // ran, failed, recorded: REUSE of the failure
    ro("ro", "read_c"), // read-only, not recorded: RUN
    idem("idem-begun", "mail_d"), // idempotent, begun, not recorded: RUN with the same key
    idem("idem-new", "mail_e"), // idempotent, never begun: RUN
    side("never", "write_f"), // side-effecting, never begun: RUN (safe)
    side("begun", "write_g"), // side-effecting, begun, not recorded: IN_DOUBT
  ];
  await s.pointA(assistantFor(...calls), calls);
  await s.runTool(calls[0], () => "a written");
  await s.runTool(calls[1], () => {
    throw new Error("b failed");
  });
  const begun = await c.raw.beginEffect({ sessionId: "rules", toolUseId: "idem-begun", epoch: s.epoch });
  await c.raw.beginEffect({ sessionId: "rules", toolUseId: "begun", epoch: s.epoch });
  // A side-effecting tool use saved without begin_tracked (a client that never begins): IN_DOUBT.
  const raw = await c.start("rules-untracked", "t", { messages: [prompt] });
  await c.raw.saveCheckpoint({
    sessionId: "rules-untracked",
    expectedRevision: raw.revision,
    epoch: raw.epoch,
    task: "t",
    turn: 1,
    appendMessages: [assistantFor(side("u1"))],
    pendingToolUses: [{ toolUseId: "u1", name: "write_report", effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT, beginTracked: false }],
  });

  const events: ToolEvent[] = [];
  const c2 = await dial(d.addr, { logger: quiet, toolHook: (ev) => events.push(ev) });
  try {
    const r = await c2.resume("rules");
    const tools = new Tools();
    const results = await r.reconcile(tools.run);
    assert.deepEqual(
      results.map((x) => [x.toolUseId, Decision[x.decision], x.content, x.isError]),
      [
        ["recorded", "DECISION_REUSE", "a written", false],
        ["failed", "DECISION_REUSE", "b failed", true],
        ["ro", "DECISION_RUN", "read_c done", false],
        ["idem-begun", "DECISION_RUN", "mail_d done", false],
        ["idem-new", "DECISION_RUN", "mail_e done", false],
        ["never", "DECISION_RUN", "write_f done", false],
        ["begun", "DECISION_IN_DOUBT", results[6].content, true],
      ],
    );
    assert.match(results[6].content as string, /unknown/, "the in-doubt text says the outcome is unknown");
    assert.deepEqual([...tools.runs.keys()], ["read_c", "mail_d", "mail_e", "write_f"], "only the RUN tool uses ran, each once");
    assert.equal(tools.keys[0], "", "read-only: no key");
    assert.equal(tools.keys[1], begun.idempotencyKey, "a begun idempotent tool runs again with its key");
    assert.ok(tools.keys[2] !== "" && tools.keys[3] !== "", "never-begun tools are begun before they run");
    assert.deepEqual(
      events.filter((e) => e.stage === "decided").map((e) => [e.call.toolUseId, e.begun]),
      calls.map((u) => [u.toolUseId, ["recorded", "failed", "idem-begun", "begun"].includes(u.toolUseId)]),
      "begun: every tool use beginEffect marked, the recorded ones included",
    );
    assert.deepEqual(
      events.filter((e) => e.stage !== "decided").map((e) => `${e.stage}:${e.call.toolUseId}`),
      ["ran:ro", "recorded:ro", "begun:idem-begun", "ran:idem-begun", "recorded:idem-begun", "begun:idem-new", "ran:idem-new",
        "recorded:idem-new", "begun:never", "ran:never", "recorded:never"],
    );
    // Asking again (reconcile writes nothing but the runs' records) reuses what ran.
    const again = await (await c.resume("rules")).reconcile();
    assert.deepEqual(
      again.map((x) => Decision[x.decision]),
      ["DECISION_REUSE", "DECISION_REUSE", "DECISION_REUSE", "DECISION_REUSE", "DECISION_REUSE", "DECISION_REUSE", "DECISION_IN_DOUBT"],
    );
    // A run function is needed when something must run.
    const u = await c2.resume("rules-untracked");
    const ur = await u.reconcile();
    assert.deepEqual(ur.map((x) => [Decision[x.decision], x.isError]), [["DECISION_IN_DOUBT", true]]);
    assert.equal(events.at(-1)!.begun, false);
    await u.pointB(ur);
  } finally {
    c2.close();
  }
  // A fenced reconcile runs nothing.
  const f = await c.start("rules-fenced", "t", { messages: [prompt] });
  await f.pointA(assistantFor(side("x1")), [side("x1")]);
  const r1 = await c.resume("rules-fenced");
  await c.resume("rules-fenced");
  const tools = new Tools();
  await assert.rejects(r1.reconcile(tools.run), SessionFencedError);
  assert.equal(tools.runs.size, 0);
  // Without a run function, a tool use that must run is an error, and nothing ran.
  const n = await c.resume("rules-fenced");
  await assert.rejects(n.reconcile(), /must run, but no run function was given/);
});

test("a ledger write that fails keeps the real result, and pointB records it", async () => {
  const failures: string[] = [];
  const c2 = await dial(d.addr, { logger: quiet, reconnectWaitMs: 0, onLedgerError: (call) => failures.push(call.toolUseId) });
  try {
    const s = await c2.start("ledger", "t", { messages: [prompt] });
    await s.pointA(assistantFor(side("l1")), [side("l1")]);
    // The tool closes the daemon's door behind itself: kill the daemon while it runs.
    const r = await s.runTool(side("l1"), async () => {
      await d.kill();
      return "written";
    });
    assert.equal(r.content, "written");
    assert.equal(r.isError, false, "never turned into a failure");
    assert.ok(r.ledgerError instanceof SavepointError, String(r.ledgerError));
    assert.deepEqual(failures, ["l1"]);
    await d.restart();
    await s.pointB([r]);
    const rec = await c.raw.getSession({ sessionId: "ledger" });
    assert.equal(rec.checkpoint!.pendingToolUses.length, 0);
    assert.equal(JSON.parse(s.messages.at(-1)!.contentJson)[0].content, "written");
  } finally {
    c2.close();
  }
});

test("the tools of one turn may run at once; the hook sees each stage once it happened", async () => {
  const events: string[] = [];
  const c2 = await dial(d.addr, { logger: quiet, toolHook: (ev) => events.push(`${ev.stage}:${ev.call.toolUseId}`) });
  try {
    const s = await c2.start("concurrent", "t", { messages: [prompt] });
    const calls = [ro("p1"), side("p2"), ro("p3")];
    await s.pointA(assistantFor(...calls), calls);
    let running = 0;
    let most = 0;
    const results = await Promise.all(
      calls.map((call) =>
        s.runTool(call, async () => {
          most = Math.max(most, ++running);
          await new Promise((r) => setTimeout(r, 50));
          running--;
          return `${call.toolUseId} out`;
        }),
      ),
    );
    assert.ok(most >= 2, `at most ${most} tools ran at once`);
    await s.pointB(results);
    assert.deepEqual(
      JSON.parse(s.messages.at(-1)!.contentJson).map((b: { content: string }) => b.content),
      ["p1 out", "p2 out", "p3 out"],
    );
    for (const call of calls) {
      const mine = events.filter((e) => e.endsWith(`:${call.toolUseId}`));
      const want = call.effectClass === EffectClass.EFFECT_CLASS_READ_ONLY ? ["ran", "recorded"] : ["begun", "ran", "recorded"];
      assert.deepEqual(mine, want.map((st) => `${st}:${call.toolUseId}`));
    }
  } finally {
    c2.close();
  }
});

test("a tool function, a hook and a result name the call by the proto's fields (toolUseId, effectClass)", async () => {
  // The proto's ToolUse fields, but beginTracked, which the session sets itself.
  const protoFields = Object.keys(pb.ToolUse.fromPartial({})).filter((k) => k !== "beginTracked").sort();
  const seen: Record<string, unknown>[] = [];
  const c2 = await dial(d.addr, { logger: quiet, toolHook: (ev) => seen.push({ ...ev.call }) });
  try {
    const s = await c2.start("names", "t", { messages: [prompt] });
    const calls = [idem("n1"), { toolUseId: "n2", name: "bare" }];
    await s.pointA(assistantFor(...calls), calls);
    const results = await s.runTools(calls, (call, key) => {
      seen.push({ ...call });
      return key;
    });
    await s.pointB(results);
    assert.deepEqual(Object.keys(results[0]).sort(), ["content", "decision", "isError", "toolUseId"]);
    assert.deepEqual(results.map((r) => r.toolUseId), ["n1", "n2"]);
    assert.ok(seen.length >= 4);
    for (const call of seen) assert.deepEqual(Object.keys(call).sort(), protoFields);
    assert.deepEqual(seen.find((c) => c.toolUseId === "n2"), {
      toolUseId: "n2",
      name: "bare",
      inputJson: "",
      effectClass: EffectClass.EFFECT_CLASS_SIDE_EFFECT,
      repeatable: false,
    });
  } finally {
    c2.close();
  }
});

test("complete ends the session: its status, its final output, and saves refused after it", async () => {
  const s = await c.start("complete", "t", { messages: [prompt] });
  assert.equal(s.status, SessionStatus.SESSION_STATUS_ACTIVE);
  await s.pointA({ role: "assistant", contentJson: '"done"' }, []);
  await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, "the answer");
  assert.equal(s.status, SessionStatus.SESSION_STATUS_COMPLETED);
  assert.equal(s.finalOutput, "the answer");
  await assert.rejects(s.save({ task: "more" }), SessionCompletedError);
  await s.complete(SessionStatus.SESSION_STATUS_COMPLETED, "the answer"); // again: no change
  const r = await c.resume("complete");
  assert.equal(r.status, SessionStatus.SESSION_STATUS_COMPLETED);
  assert.equal(r.finalOutput, "the answer");
  assert.equal(r.epoch, s.epoch, "resuming a completed session does not take it over");
  // reopen makes it active again, under a new epoch, and it continues.
  const o = await c.resume("complete", { reopen: true });
  assert.equal(o.status, SessionStatus.SESSION_STATUS_ACTIVE);
  assert.equal(o.finalOutput, "");
  assert.ok(o.epoch > s.epoch);
  await o.save({ task: "more" });
  assert.equal((await c.resume("complete")).task, "more");
});

test("a socket path with odd characters dials as given", async () => {
  const odd = await Daemon.start([], "odd #%?.sock");
  try {
    const c2 = await dial(`unix://${odd.socket}`, { logger: quiet });
    try {
      const s = await c2.start("odd", "t", {});
      assert.equal(s.revision, 1n);
    } finally {
      c2.close();
    }
  } finally {
    await odd.close();
  }
});

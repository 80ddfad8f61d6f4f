import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  Agent,
  type AgentInputItem,
  MemorySession,
  OutputGuardrailTripwireTriggered,
  run,
  type SessionHistoryTransactionArgs,
  setTracingDisabled,
  UserError,
} from "@openai/agents-core";
import { assistantMessage, ScriptedModel } from "@openai/agents-core/testing";
import { dial, InvalidArgumentError, RequestTooLargeError } from "@savepoint-dev/client";

import { MAX_ATTEMPTS, SavepointSession, SessionClosedError, SessionContentionError, TASK } from "../index.js";
import { Daemon, runNode } from "./daemon.js";
import { trippingAgent } from "./guardrail.js";

setTracingDisabled(true);
let d: Daemon;
before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

let n = 0;
const fresh = (opts: { limit?: number } = {}) => new SavepointSession(`s${++n}-${process.pid}`, { address: d.addr, ...opts });
const user = (text: string): AgentInputItem => ({ role: "user", content: text });
const texts = (items: AgentInputItem[]) => items.map((it) => (it as { content: string }).content);

test("getSessionId returns the savepointd session id", async () => {
  const s = new SavepointSession("my-id", { address: d.addr });
  assert.equal(await s.getSessionId(), "my-id");
});

test("a new session has no items, pops nothing, and clears without creating the session", async () => {
  const s = fresh();
  try {
    assert.deepEqual(await s.getItems(), []);
    assert.equal(await s.popItem(), undefined);
    await s.clearSession();
    await s.addItems([]);
    const c = await s.client();
    await assert.rejects(c.raw.getSession({ sessionId: s.sessionId }), /SESSION_NOT_FOUND/);
  } finally {
    await s.close();
  }
});

test("items come back in order, every field kept, from one or many addItems", async () => {
  const s = fresh();
  try {
    const call = { type: "function_call", callId: "call_1", name: "lookup", arguments: '{"q":"ü"}', status: "completed" } as AgentInputItem;
    const out = { type: "function_call_result", callId: "call_1", name: "lookup", status: "completed", output: { type: "text", text: "found" } } as AgentInputItem;
    await s.addItems([user("one"), call]);
    await s.addItems([out]);
    await s.addItems([{ role: "assistant", status: "completed", content: [{ type: "output_text", text: "two" }] } as AgentInputItem]);
    const items = await s.getItems();
    assert.deepEqual(items.slice(0, 3), [user("one"), call, out]);
    assert.equal(items.length, 4);
    // A second object (a second connection) sees the same items.
    const t = new SavepointSession(s.sessionId, { address: d.addr });
    assert.deepEqual(await t.getItems(), items);
    await t.close();
    // On the daemon: one message per item, its role the item's role or type.
    const c = await s.client();
    const r = await c.raw.getSession({ sessionId: s.sessionId });
    assert.equal(r.checkpoint!.task, TASK);
    assert.deepEqual(r.checkpoint!.messages.map((m) => m.role), ["user", "function_call", "function_call_result", "assistant"]);
  } finally {
    await s.close();
  }
});

test("getItems(limit) returns the latest limit items in order; the limit option is the default", async () => {
  const s = fresh({ limit: 2 });
  try {
    await s.addItems(["a", "b", "c", "d", "e"].map(user));
    assert.deepEqual(texts(await s.getItems()), ["d", "e"]);
    assert.deepEqual(texts(await s.getItems(3)), ["c", "d", "e"]);
    assert.deepEqual(texts(await s.getItems(1)), ["e"]);
    assert.deepEqual(await s.getItems(0), []);
    assert.deepEqual(texts(await s.getItems(50)), ["a", "b", "c", "d", "e"]);
    assert.deepEqual(await s.getItems(-1), []); // as the SDK's MemorySession: zero or less returns none
    await assert.rejects(s.getItems(1.5), RangeError);
    assert.throws(() => new SavepointSession("x", { limit: 1.5 }), RangeError);
  } finally {
    await s.close();
  }
});

test("a closed session refuses every call with SessionClosedError and writes nothing; close is idempotent", async () => {
  const s = fresh();
  await s.addItems([user("kept")]);
  await s.close();
  await s.close();
  assert.equal(s.closed, true);
  for (const call of [
    () => s.addItems([user("lost")]),
    () => s.addItems([]),
    () => s.getItems(),
    () => s.popItem(),
    () => s.clearSession(),
    () => s.applyHistoryTransaction({ operationId: "op", transaction: { type: "append_items", items: [user("lost")] } }),
    () => s.applyHistoryMutations({ mutations: [] }),
  ]) {
    await assert.rejects(call(), SessionClosedError);
  }
  const t = new SavepointSession(s.sessionId, { address: d.addr });
  assert.deepEqual(texts(await t.getItems()), ["kept"]);
  await t.close();
});

test("popItem removes and returns the latest item, until none is left", async () => {
  const s = fresh();
  try {
    await s.addItems(["a", "b", "c"].map(user));
    assert.deepEqual(await s.popItem(), user("c"));
    assert.deepEqual(texts(await s.getItems()), ["a", "b"]);
    assert.deepEqual(await s.popItem(), user("b"));
    assert.deepEqual(await s.popItem(), user("a"));
    assert.equal(await s.popItem(), undefined);
    assert.deepEqual(await s.getItems(), []);
    await s.addItems([user("again")]);
    assert.deepEqual(texts(await s.getItems()), ["again"]);
  } finally {
    await s.close();
  }
});

test("clearSession removes every item and keeps the session usable and its other state", async () => {
  const s = fresh();
  try {
    await s.addItems(["a", "b"].map(user));
    await s.clearSession();
    assert.deepEqual(await s.getItems(), []);
    await s.addItems([user("c")]);
    assert.deepEqual(texts(await s.getItems()), ["c"]);
  } finally {
    await s.close();
  }
});

test("a bad item is refused before anything is stored", async () => {
  const s = fresh();
  try {
    await s.addItems([user("a")]);
    await assert.rejects(s.addItems([user("b"), null as unknown as AgentInputItem]), TypeError);
    assert.deepEqual(texts(await s.getItems()), ["a"]);
  } finally {
    await s.close();
  }
});

test("two session objects writing at once in one process lose and reorder nothing", async () => {
  const a = fresh();
  const b = new SavepointSession(a.sessionId, { address: d.addr });
  try {
    await Promise.all([
      (async () => {
        for (let i = 0; i < 20; i++) await a.addItems([user(`a-${i}`)]);
      })(),
      (async () => {
        for (let i = 0; i < 20; i++) await b.addItems([user(`b-${i}`)]);
      })(),
    ]);
    const got = texts(await a.getItems());
    assert.equal(got.length, 40);
    for (const tag of ["a", "b"]) assert.deepEqual(got.filter((t) => t.startsWith(tag)), Array.from({ length: 20 }, (_, i) => `${tag}-${i}`));
  } finally {
    await a.close();
    await b.close();
  }
});

test("two processes adding to one session lose and reorder none of each other's items", async () => {
  const s = fresh();
  try {
    const N = 25;
    await s.addItems([user("start")]);
    const c = await s.client();
    const epoch = (await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.epoch;
    const [x, y] = await Promise.all([runNode("session-worker.js", ["add", d.addr, s.sessionId, "x", String(N)]), runNode("session-worker.js", ["add", d.addr, s.sessionId, "y", String(N)])]);
    assert.equal(x.code, 0, x.stderr);
    assert.equal(y.code, 0, y.stderr);
    const got = texts(await s.getItems()).slice(1);
    assert.equal(got.length, 2 * N);
    for (const tag of ["x", "y"]) assert.deepEqual(got.filter((t) => t.startsWith(tag + "-")), Array.from({ length: N }, (_, i) => `${tag}-${i}`));
    // Neither fenced the other: the session was never resumed, so its epoch is the one it was created with.
    assert.equal((await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.epoch, epoch);
  } finally {
    await s.close();
  }
});

test("two processes popping one session at once pop each item exactly once", async () => {
  const s = fresh();
  try {
    const all = Array.from({ length: 30 }, (_, i) => `p-${i}`);
    await s.addItems(all.map(user));
    const [x, y] = await Promise.all([runNode("session-worker.js", ["pop", d.addr, s.sessionId, "15"]), runNode("session-worker.js", ["pop", d.addr, s.sessionId, "15"])]);
    assert.equal(x.code, 0, x.stderr);
    assert.equal(y.code, 0, y.stderr);
    const popped = [...x.stdout.trim().split("\n"), ...y.stdout.trim().split("\n")];
    assert.equal(popped.length, 30);
    assert.deepEqual([...popped].sort(), [...all].sort(), "every item popped once, none twice, none invented");
    assert.deepEqual(await s.getItems(), []);
  } finally {
    await s.close();
  }
});

test("items survive a daemon killed with SIGKILL and restarted", async () => {
  const s = fresh();
  try {
    await s.addItems(["before-1", "before-2"].map(user));
    await s.popItem();
    await d.kill();
    await d.restart();
    const t = new SavepointSession(s.sessionId, { address: d.addr });
    assert.deepEqual(texts(await t.getItems()), ["before-1"]);
    await t.addItems([user("after")]);
    assert.deepEqual(texts(await s.getItems()), ["before-1", "after"]);
    await t.close();
  } finally {
    await s.close();
  }
});

test("the SDK's Runner keeps a conversation in a SavepointSession across runs", async () => {
  const s = fresh();
  try {
    const model = new ScriptedModel([[assistantMessage("Hello, Ada.")], [assistantMessage("Your name is Ada.")]]);
    const agent = new Agent({ name: "greeter", model });
    const r1 = await run(agent, "My name is Ada.", { session: s });
    assert.equal(r1.finalOutput, "Hello, Ada.");
    // A new process's session object: the second run sees the first's history.
    const again = new SavepointSession(s.sessionId, { address: d.addr });
    const r2 = await run(agent, "What is my name?", { session: again });
    assert.equal(r2.finalOutput, "Your name is Ada.");
    const sent = JSON.stringify(model.lastCall!.request.input);
    assert.match(sent, /My name is Ada\./);
    assert.match(sent, /Hello, Ada\./);
    const items = await s.getItems();
    assert.equal(items.length, 4);
    assert.deepEqual((items[0] as { content: string }).content, "My name is Ada.");
    assert.deepEqual((items[2] as { content: string }).content, "What is my name?");
    await again.close();
    // The connection the session dialed is not the one a user passes.
    const c = await dial(d.addr);
    const shared = new SavepointSession(s.sessionId, { client: c });
    assert.equal((await shared.getItems()).length, 4);
    await shared.close();
    await c.raw.getServerInfo({}); // still open
    c.close();
  } finally {
    await s.close();
  }
});

test("sessions with different ids are separate", async () => {
  const a = fresh();
  const b = fresh();
  try {
    await a.addItems([user("for a")]);
    await b.addItems([user("for b")]);
    assert.deepEqual(texts(await a.getItems()), ["for a"]);
    assert.deepEqual(texts(await b.getItems()), ["for b"]);
    await a.clearSession();
    assert.deepEqual(texts(await b.getItems()), ["for b"]);
  } finally {
    await a.close();
    await b.close();
  }
});

test("an item over the daemon's message limit, or a batch over its request limit, is refused with its reason and stores nothing", async () => {
  const s = fresh();
  try {
    await s.addItems([user("kept")]);
    await assert.rejects(s.addItems([user("small"), user("x".repeat(3 << 20))]), (err: unknown) => {
      assert.ok(err instanceof InvalidArgumentError, String(err));
      assert.equal(err.reason, "MESSAGE_TOO_LARGE");
      return true;
    });
    const third = "y".repeat(1.5 * (1 << 20));
    await assert.rejects(s.addItems([user(third), user(third), user(third)]), (err: unknown) => {
      assert.ok(err instanceof RequestTooLargeError, String(err));
      assert.equal(err.reason, "REQUEST_TOO_LARGE");
      return true;
    });
    assert.deepEqual(texts(await s.getItems()), ["kept"]);
  } finally {
    await s.close();
  }
});

test("concurrent writers keep each batch whole and in order", async () => {
  const writers = Array.from({ length: 4 }, () => fresh());
  const id = writers[0].sessionId;
  const ss = [writers[0], ...writers.slice(1).map(() => new SavepointSession(id, { address: d.addr }))];
  try {
    await Promise.all(ss.map(async (s, w) => {
      for (let b = 0; b < 5; b++) await s.addItems([0, 1, 2].map((i) => user(`w${w}-b${b}-${i}`)));
    }));
    const got = texts(await ss[0].getItems());
    assert.equal(got.length, 60);
    for (let i = 0; i < got.length; i += 3) {
      const m = /^(w\d-b\d)-0$/.exec(got[i]);
      assert.ok(m, `a batch starts at ${i}: ${got[i]}`);
      assert.deepEqual(got.slice(i, i + 3), [0, 1, 2].map((k) => `${m[1]}-${k}`));
    }
  } finally {
    await Promise.all([...ss, ...writers.slice(1)].map((s) => s.close()));
  }
});

test("a session another client resumed (a new epoch) is followed, not fenced", async () => {
  const s = fresh();
  try {
    await s.addItems([user("a")]);
    const c = await s.client();
    const r = await c.raw.resume({ sessionId: s.sessionId });
    assert.ok(r.epoch > 0n);
    await s.addItems([user("b")]);
    assert.equal(await s.popItem().then((it) => (it as { content: string }).content), "b");
    assert.deepEqual(texts(await s.getItems()), ["a"]);
  } finally {
    await s.close();
  }
});

test("a change the session keeps moving under gives up after MAX_ATTEMPTS with SessionContentionError", async () => {
  const s = fresh();
  const other = new SavepointSession(s.sessionId, { address: d.addr });
  try {
    await s.addItems([user("start")]);
    let tries = 0;
    await assert.rejects(
      s.mutate(async () => {
        tries++;
        await other.addItems([user(`in the way ${tries}`)]);
        return { append: [user("never")] };
      }),
      (err: unknown) => err instanceof SessionContentionError && /changed under every one of 200 attempts/.test((err as Error).message),
    );
    assert.equal(tries, MAX_ATTEMPTS);
    assert.ok(!texts(await s.getItems()).includes("never"));
  } finally {
    await s.close();
    await other.close();
  }
});

test("a streamed run keeps its conversation in the session", async () => {
  const s = fresh();
  try {
    const agent = new Agent({ name: "streamer", model: new ScriptedModel([[assistantMessage("streamed hello")]]) });
    const r = await run(agent, "hi", { session: s, stream: true });
    for await (const _ of r) void _;
    await r.completed;
    const items = await s.getItems();
    assert.equal(items.length, 2);
    assert.equal((items[0] as { content: string }).content, "hi");
  } finally {
    await s.close();
  }
});

test("applyHistoryTransaction appends or replaces a suffix in one save, once per operation id", async () => {
  const s = fresh();
  try {
    const c = await s.client();
    const rev = async () => (await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.revision;
    await s.addItems([user("a"), user("b")]);
    const r0 = await rev();
    const append = { operationId: "op-1", transaction: { type: "append_items" as const, items: [user("c"), user("d")] } };
    await s.applyHistoryTransaction(append);
    assert.equal(await rev(), r0 + 1n); // one durable step
    assert.deepEqual(texts(await s.getItems()), ["a", "b", "c", "d"]);
    // A retry with the same id and transaction, from another process's object, changes nothing.
    const t = new SavepointSession(s.sessionId, { address: d.addr });
    await t.applyHistoryTransaction(structuredClone(append));
    assert.equal(await rev(), r0 + 1n);
    // The same id with another transaction is refused.
    await assert.rejects(
      t.applyHistoryTransaction({ operationId: "op-1", transaction: { type: "append_items", items: [user("x")] } }),
      (err: Error) => err instanceof UserError && /different transaction/.test(err.message),
    );
    const replace = { operationId: "op-2", transaction: { type: "replace_suffix" as const, expectedSuffix: [user("c"), user("d")], replacement: [user("cd")] } };
    await s.applyHistoryTransaction(replace);
    assert.equal(await rev(), r0 + 2n);
    assert.deepEqual(texts(await t.getItems()), ["a", "b", "cd"]);
    await s.applyHistoryTransaction(replace); // retried: done already
    assert.deepEqual(texts(await t.getItems()), ["a", "b", "cd"]);
    // A suffix that no longer matches is refused and changes nothing.
    await assert.rejects(
      s.applyHistoryTransaction({ operationId: "op-3", transaction: { type: "replace_suffix", expectedSuffix: [user("b")], replacement: [] } }),
      (err: Error) => err instanceof UserError && /no longer matches/.test(err.message),
    );
    await assert.rejects(s.applyHistoryTransaction({ operationId: " ", transaction: append.transaction }), UserError);
    await assert.rejects(s.applyHistoryTransaction({ operationId: "op-4", transaction: { type: "nope" } as never }), UserError);
    assert.equal(await rev(), r0 + 2n);
    // clearSession forgets the operation ids, as MemorySession does.
    await s.clearSession();
    await s.applyHistoryTransaction(append);
    assert.deepEqual(texts(await s.getItems()), ["c", "d"]);
    await t.close();
  } finally {
    await s.close();
  }
});

test("applyHistoryTransaction reads its arguments once and refuses what is not plain protocol data, changing nothing and recording no id", async () => {
  const s = fresh();
  try {
    await s.addItems([user("start")]);
    let reads = 0;
    const args = { transaction: { type: "append_items" as const, items: [user("once")] } } as SessionHistoryTransactionArgs;
    Object.defineProperty(args, "operationId", { enumerable: true, get: () => (++reads === 1 ? "op-once" : "changed") });
    await s.applyHistoryTransaction(args);
    assert.equal(reads, 1);
    const throwing = {} as SessionHistoryTransactionArgs;
    Object.defineProperty(throwing, "operationId", {
      get: () => {
        throw new Error("api-key-secret");
      },
    });
    await assert.rejects(s.applyHistoryTransaction(throwing), (err: Error) => err instanceof UserError && err.message === "Session history transaction arguments are invalid.");
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const hidden = user("hidden");
    Object.defineProperty(hidden, "providerData", { enumerable: false, value: { x: 1 } });
    const bad: unknown[][] = [
      [{ ...user("date"), providerData: { at: new Date(0) } }],
      [{ ...user("cycle"), providerData: cycle }],
      [{ ...user("bigint"), providerData: { n: 42n } }],
      [{ ...user("typed"), providerData: { v: new Uint16Array([300]) } }],
      new Array(1),
      [hidden],
      new Proxy([user("proxied")], {}),
      [42],
    ];
    for (const items of bad) {
      await assert.rejects(
        s.applyHistoryTransaction({ operationId: "op-bad", transaction: { type: "append_items", items: items as AgentInputItem[] } }),
        (err: Error) => err instanceof UserError && err.message === "Session history transaction items contain invalid or unsupported data.",
      );
    }
    await assert.rejects(
      s.applyHistoryTransaction({ operationId: "op-bad", transaction: { type: "append_items", items: [], extra: 1 } as never }),
      (err: Error) => err instanceof UserError && /append transaction fields are invalid/.test(err.message),
    );
    assert.deepEqual(texts(await s.getItems()), ["start", "once"]);
    // None of the refusals recorded op-bad: it applies now.
    await s.applyHistoryTransaction({ operationId: "op-bad", transaction: { type: "append_items", items: [user("retry")] } });
    assert.deepEqual(texts(await s.getItems()), ["start", "once", "retry"]);
  } finally {
    await s.close();
  }
});

test("applyHistoryMutations replaces a function call in place in one save", async () => {
  const s = fresh();
  try {
    const call = { type: "function_call", callId: "c1", name: "f", arguments: "{}", status: "completed" } as AgentInputItem;
    const out = { type: "function_call_result", callId: "c1", name: "f", status: "completed", output: { type: "text", text: "ok" } } as AgentInputItem;
    await s.addItems([user("a"), call, out]);
    const c = await s.client();
    const r0 = (await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.revision;
    const replacement = { ...call, arguments: '{"fixed":true}' } as AgentInputItem;
    await s.applyHistoryMutations({ mutations: [{ type: "replace_function_call", callId: "c1", replacement } as never] });
    assert.equal((await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.revision, r0 + 1n);
    const mem = new MemorySession({ initialItems: [user("a"), call, out] });
    await mem.applyHistoryMutations({ mutations: [{ type: "replace_function_call", callId: "c1", replacement } as never] });
    assert.deepEqual(await s.getItems(), await mem.getItems());
    await s.applyHistoryMutations({ mutations: [] });
    assert.equal((await c.raw.getSession({ sessionId: s.sessionId })).checkpoint!.revision, r0 + 1n);
  } finally {
    await s.close();
  }
});

test("a guardrail-tripped run keeps its tool call and output, as MemorySession does, through a SIGKILL and a resume in another process", async () => {
  // The reference: the SDK's MemorySession in this process.
  const mem = new MemorySession();
  await assert.rejects(run(trippingAgent(), "look up Ada", { session: mem }), OutputGuardrailTripwireTriggered);
  const want = await mem.getItems();
  assert.ok(want.some((it) => (it as { type?: string }).type === "function_call"));
  assert.ok(want.some((it) => (it as { type?: string }).type === "function_call_result"));

  const s = fresh();
  const p = spawn(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), "guardrail-worker.js"), d.addr, s.sessionId], { stdio: ["ignore", "pipe", "pipe"] });
  try {
    let out = "";
    let err = "";
    p.stderr!.on("data", (b: Buffer) => (err += b.toString()));
    await new Promise<void>((res, rej) => {
      p.stdout!.on("data", (b: Buffer) => {
        out += b.toString();
        if (out.includes("\n")) res();
      });
      p.on("exit", () => rej(new Error(`the worker exited: ${out}${err}`)));
    });
    assert.equal(out.trim(), "tripped");
  } finally {
    p.kill("SIGKILL");
  }
  try {
    // Another process's view (this one): the tripped run's items, as MemorySession kept them.
    const got = await s.getItems();
    assert.deepEqual(got, want);
    // A resume here sends the tool call and its output to the model.
    const model = new ScriptedModel([[assistantMessage("Ada was found.")]]);
    const r = await run(new Agent({ name: "looker", model }), "what did you find?", { session: s });
    assert.equal(r.finalOutput, "Ada was found.");
    const sent = JSON.stringify(model.lastCall!.request.input);
    assert.match(sent, /call_ada/);
    assert.match(sent, /Ada was found/);
  } finally {
    await s.close();
  }
});

/**
 * DurableToolNode's verify hooks: durableproc.ts killed during
 * send_invoice (after its effect, before its outcome is recorded) and
 * resumed from a new process whose send_invoice has a verify hook.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { dial, graphPb, pb } from "@savepoint-dev/client";

import { Connection } from "../conn.js";
import { inDoubtText } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

const program = fileURLToPath(new URL("./durableproc.js", import.meta.url));
let d: Daemon;
let conn: Connection;
let root: string;

before(async () => {
  d = await startDaemon();
  conn = new Connection({ address: d.addr });
  root = mkdtempSync(join(tmpdir(), "splvt"));
});
after(async () => {
  conn.close();
  await stopDaemon(d);
  rmSync(root, { recursive: true, force: true });
});

/** Runs durableproc.js with env; with a kill point, SIGKILLs it once it prints the point's name. */
function run(args: string[], env: Record<string, string>, killOn?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawn(process.execPath, [program, ...args], { env: { ...process.env, ...env } });
  let stdout = "";
  let stderr = "";
  p.stdout.on("data", (b: Buffer) => {
    stdout += b.toString();
    if (killOn && stdout.includes(`${killOn}\n`)) p.kill("SIGKILL");
  });
  p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => p.kill("SIGKILL"), 30_000);
  return new Promise((res) =>
    p.on("close", (code, signal) => {
      clearTimeout(timer);
      res({ code: code ?? (signal === "SIGKILL" ? 137 : null), stdout, stderr });
    }),
  );
}

const lines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : []);

async function sendEffect(thread: string): Promise<graphPb.ThreadEffect | undefined> {
  const res = await conn.unary<graphPb.ListThreadEffectsRequest, graphPb.ListThreadEffectsResponse>(
    "listThreadEffects",
    graphPb.ListThreadEffectsRequest.fromPartial({ threadId: thread }),
  );
  return res.effects.find((e) => e.toolUseId === "call_send");
}

for (const verify of ["done", "notDone", "unknown", "throw"] as const) {
  test(`killed during send_invoice, a resume whose verify says ${verify}`, async () => {
    const thread = `verify-${verify}`;
    const dir = join(root, verify);
    mkdirSync(dir);
    const first = await run(["start", d.addr, thread, dir, "during"], {}, "during");
    assert.equal(first.code, 137, first.stderr);
    assert.equal(lines(join(dir, "sent")).length, 1, "sent once before the kill");
    const resumed = await run(["resume", d.addr, thread, dir], { VERIFY: verify });
    assert.equal(resumed.code, 0, resumed.stderr);
    const got = JSON.parse(resumed.stdout) as { messages: { type: string; content: string; status?: string; tool_call_id?: string }[] };
    const answer = got.messages.find((m) => m.type === "tool" && m.tool_call_id === "call_send");
    const asked = lines(join(dir, "verify"));
    assert.equal(asked.length, 1, asked.join(" | "));
    const key = /^verify ([0-9a-f-]+) \{"invoice":42,"to":"acme"\}$/.exec(asked[0])?.[1];
    assert.ok(key, asked[0]);
    const sent = lines(join(dir, "sent"));
    const e = await sendEffect(thread);
    assert.equal(sent[0], `invoice 42 to acme key ${key}`, "verify was given the call's idempotency key");
    if (verify === "done") {
      assert.deepEqual([answer?.status, answer?.content], ["success", `found invoice sent under key ${key}`], "the model gets what verify found");
      assert.equal(sent.length, 1, "the tool did not run again");
      assert.equal(e?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
      assert.equal(e?.resolution?.outcome, pb.ResolutionOutcome.RESOLUTION_OUTCOME_DONE);
      assert.equal(e?.resolution?.resolverKind, pb.ResolverKind.RESOLVER_KIND_VERIFY);
    } else if (verify === "notDone") {
      assert.deepEqual([answer?.status, answer?.content], ["success", "invoice 42 sent to acme"]);
      assert.deepEqual(sent, [`invoice 42 to acme key ${key}`, `invoice 42 to acme key ${key}`], "run once more, with the same idempotency key");
      assert.equal(e?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
      assert.equal(e?.attempts, 2);
    } else {
      assert.deepEqual([answer?.status, answer?.content], ["error", inDoubtText("send_invoice", "call_send")]);
      assert.equal(sent.length, 1, "a call verify could not settle is not run");
      assert.equal(e?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_BEGUN);
    }
  });
}

test("the TypeScript client's resolveThreadEffect settles a thread's call in doubt, and a replay with its request id changes nothing", async () => {
  const thread = "client-resolve";
  await conn.unary<graphPb.BeginThreadEffectRequest, graphPb.BeginThreadEffectResponse>(
    "beginThreadEffect",
    graphPb.BeginThreadEffectRequest.fromPartial({
      threadId: thread,
      toolUseId: "t1",
      name: "send_invoice",
      inputJson: "{}",
      effectClass: pb.EffectClass.EFFECT_CLASS_SIDE_EFFECT,
      requestId: "00000000-0000-4000-8000-000000000001",
    }),
  );
  const c = await dial(d.addr);
  try {
    const req = {
      threadId: thread,
      toolUseId: "t1",
      outcome: pb.ResolutionOutcome.RESOLUTION_OUTCOME_DONE,
      output: { type: "json", data: Buffer.from('"sent"'), totalSize: 6n },
      resolverKind: pb.ResolverKind.RESOLVER_KIND_PERSON,
      resolvedBy: "ops",
      requestId: "00000000-0000-4000-8000-000000000002",
    };
    const r = await c.resolveThreadEffect(req);
    assert.equal(r.effect?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
    assert.equal(r.effect?.resolution?.resolvedBy, "ops");
    const again = await c.resolveThreadEffect(req);
    assert.equal(again.effect?.state, graphPb.ThreadEffectState.THREAD_EFFECT_STATE_SUCCEEDED);
    // Without a request id the client makes one.
    const fresh = await c.resolveThreadEffect({ ...req, requestId: "" });
    assert.equal(fresh.alreadyResolved, true);
  } finally {
    c.close();
  }
});

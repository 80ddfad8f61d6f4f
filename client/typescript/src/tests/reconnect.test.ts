/**
 * After a daemon outage of 5 s or more, gRPC reconnects only when its
 * backoff (up to 2 s) runs out, which can outlast the retries: the first
 * call after the restart must wait for the connection (reconnectWaitMs)
 * and succeed.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Client, DEFAULT_RECONNECT_WAIT_MS, dial, UnavailableError } from "../index.js";
import { Daemon } from "./daemon.js";

const OUTAGE_MS = 5000;
const REPEATS = 3;
const noRetry = { maxAttempts: 1, initialBackoffMs: 0, maxBackoffMs: 0 };

let d: Daemon;
before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d.close();
});

/**
 * Stops the daemon for OUTAGE_MS while each client's channel keeps trying
 * to connect (as an agent calling during the outage makes it), restarts it
 * on the same socket, and returns the outcome of each client's first call.
 */
async function outage(clients: Client[]): Promise<(true | Error)[]> {
  await d.stop();
  const down = AbortSignal.timeout(OUTAGE_MS);
  await Promise.all(clients.map((c) => assert.rejects(c.waitReady(down), UnavailableError)));
  await d.restart();
  return Promise.all(
    clients.map((c) =>
      c.raw.getSession({ sessionId: "reconnect" }).then(
        () => true as const,
        (e: Error) => e,
      ),
    ),
  );
}

test(`the first call after a ${OUTAGE_MS / 1000} s outage succeeds: it waits for the reconnect (a control without the wait fails)`, async (t) => {
  assert.equal(DEFAULT_RECONNECT_WAIT_MS, 5000);
  // No retries in either, so that only the wait for the connection differs.
  const waits = await dial(d.addr, { retry: noRetry });
  const control = await dial(d.addr, { retry: noRetry, reconnectWaitMs: 0 });
  const defaults = await dial(d.addr);
  try {
    await (await waits.start("reconnect", "t", { replace: true })).save({ task: "t" });
    for (const c of [waits, control, defaults]) await c.raw.getSession({ sessionId: "reconnect" });
    let controlFailures = 0;
    for (let i = 0; i < REPEATS; i++) {
      const started = Date.now();
      const [w, ctl, def] = await outage([waits, control, defaults]);
      assert.equal(w, true, `repeat ${i + 1}: the first call with the wait failed: ${w === true ? "" : w.message}`);
      assert.equal(def, true, `repeat ${i + 1}: the first call with the default options failed: ${def === true ? "" : def.message}`);
      if (ctl !== true) {
        assert.ok(ctl instanceof UnavailableError, `repeat ${i + 1}: the control failed otherwise: ${ctl.message}`);
        controlFailures++;
      }
      assert.ok(Date.now() - started < OUTAGE_MS + 20_000, `repeat ${i + 1} took ${Date.now() - started} ms`);
    }
    t.diagnostic(`the control failed ${controlFailures} of ${REPEATS} first calls; the client with the wait 0`);
    assert.ok(controlFailures > 0, `the control (reconnectWaitMs 0) never failed in ${REPEATS} outages: the test shows nothing`);
  } finally {
    for (const c of [waits, control, defaults]) c.close();
  }
});

test("the wait is bounded: by reconnectWaitMs, and by the call's deadline", async () => {
  await d.stop();
  try {
    const c = await dial(d.addr, { retry: noRetry, reconnectWaitMs: 600 });
    let t = Date.now();
    await assert.rejects(c.raw.getSession({ sessionId: "reconnect" }), UnavailableError);
    let took = Date.now() - t;
    assert.ok(took >= 500 && took < 3000, `reconnectWaitMs 600: failed after ${took} ms`);
    c.close();
    const long = await dial(d.addr, { retry: noRetry });
    t = Date.now();
    await assert.rejects(long.raw.getSession({ sessionId: "reconnect" }, { deadline: Date.now() + 300 }));
    took = Date.now() - t;
    assert.ok(took < 2000, `a 300 ms deadline: failed after ${took} ms`);
    long.close();
  } finally {
    await d.restart();
  }
});

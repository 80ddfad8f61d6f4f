/**
 * Client.watchSessions against a real savepointd: the first event is a
 * heartbeat, a save arrives as CHANGED with its summary, a session the
 * filters stop selecting as REMOVED, refused filters are
 * InvalidArgumentError, close() and leaving the loop end the call, a signal
 * makes it CanceledError, and a stopped daemon ends it with
 * UnavailableError.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { status as Code, type StatusObject } from "@grpc/grpc-js";

import {
  CanceledError,
  type Client,
  dial,
  InvalidArgumentError,
  pb,
  serviceClient,
  SessionStatus,
  SessionWatch,
  UnavailableError,
  type WatchEvent,
  WatchEventType,
} from "../index.js";
import { Daemon } from "./daemon.js";

let d: Daemon;
let c: Client;
before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr, { waitReady: true });
});
after(async () => {
  c.close();
  await d.close();
});

/** The next event of it within ms, or a failure. */
async function next(it: AsyncIterator<WatchEvent>, ms = 5000): Promise<WatchEvent> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms);
  });
  try {
    const r = await Promise.race([it.next(), timeout]);
    assert.ok(!r.done, "the watch ended");
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}

/** The next event that is not a heartbeat. */
async function nextChange(it: AsyncIterator<WatchEvent>): Promise<WatchEvent> {
  for (;;) {
    const ev = await next(it);
    if (ev.type !== WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT) return ev;
  }
}

test("a save arrives as CHANGED with its summary, a session the label filter stops selecting as REMOVED, then heartbeats", async () => {
  const w = c.watchSessions({ labelFilter: { team: "watch-1" }, heartbeatIntervalMs: 200 });
  const it = w[Symbol.asyncIterator]();
  try {
    const first = await next(it);
    assert.equal(first.type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
    assert.ok(first.sendTime instanceof Date && Math.abs(Date.now() - first.sendTime.getTime()) < 5000, `send time ${first.sendTime}`);

    const s = await c.start("watch-1", "watched", { labels: { team: "watch-1" }, replace: true });
    let ev = await nextChange(it);
    assert.equal(ev.type, WatchEventType.WATCH_EVENT_TYPE_CHANGED);
    if (ev.type !== WatchEventType.WATCH_EVENT_TYPE_CHANGED) return;
    assert.equal(ev.sessionId, "watch-1");
    assert.equal(ev.session.sessionId, "watch-1");
    assert.equal(ev.session.revision, 1n);
    assert.equal(ev.session.task, "watched");
    assert.equal(ev.session.status, SessionStatus.SESSION_STATUS_ACTIVE);
    assert.deepEqual(ev.session.labels, { team: "watch-1" });
    assert.ok(ev.session.createTime !== undefined);

    await s.save({ turn: 3 });
    ev = await nextChange(it);
    assert.ok(ev.type === WatchEventType.WATCH_EVENT_TYPE_CHANGED, `after a save: ${JSON.stringify(ev, (_, v) => (typeof v === "bigint" ? `${v}` : v))}`);
    assert.equal(ev.session.revision, 2n);
    assert.equal(ev.session.turn, 3);

    await s.save({ labels: { team: "other" } });
    ev = await nextChange(it);
    assert.deepEqual({ type: ev.type, sessionId: "sessionId" in ev ? ev.sessionId : "", session: "session" in ev }, {
      type: WatchEventType.WATCH_EVENT_TYPE_REMOVED,
      sessionId: "watch-1",
      session: false,
    });

    const t0 = Date.now();
    assert.equal((await next(it)).type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
    assert.equal((await next(it)).type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
    assert.ok(Date.now() - t0 < 3000);
  } finally {
    await it.return?.();
  }
});

test("the status filter: a completed session is REMOVED; leaving a for await loop ends the watch", async () => {
  const w = c.watchSessions({ labelFilter: { team: "watch-2" }, statusFilter: SessionStatus.SESSION_STATUS_ACTIVE });
  const seen: WatchEvent[] = [];
  let s: Awaited<ReturnType<Client["start"]>> | undefined;
  for await (const ev of w) {
    seen.push(ev);
    if (ev.type === WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT && s === undefined) {
      s = await c.start("watch-2", "t", { labels: { team: "watch-2" }, replace: true });
    } else if (ev.type === WatchEventType.WATCH_EVENT_TYPE_CHANGED) {
      await s!.complete(SessionStatus.SESSION_STATUS_COMPLETED, "done");
    } else if (ev.type === WatchEventType.WATCH_EVENT_TYPE_REMOVED) {
      break;
    }
  }
  assert.deepEqual(
    seen.map((e) => e.type),
    [WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT, WatchEventType.WATCH_EVENT_TYPE_CHANGED, WatchEventType.WATCH_EVENT_TYPE_REMOVED],
  );
  assert.throws(() => w[Symbol.asyncIterator](), /iterated once/);
});

test("leaving the loop cancels the call", async () => {
  const stub = serviceClient(pb.SavepointServiceClient, d.addr);
  const ended = new Promise<StatusObject>((resolve) => {
    const w = new SessionWatch((request) => {
      const call = stub.watchSessions(request);
      call.on("status", resolve);
      return call;
    }, { heartbeatIntervalMs: 60_000 });
    void (async () => {
      for await (const ev of w) {
        assert.equal(ev.type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
        break;
      }
    })();
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const st = await Promise.race([ended, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the call did not end")), 5000)))]);
    assert.equal(st.code, Code.CANCELLED);
  } finally {
    clearTimeout(timer);
    stub.close();
  }
});

test("filters the daemon refuses are InvalidArgumentError; a duration that is no number is refused at once", async () => {
  for (const [options, reason] of [
    [{ minIdleMs: -1 }, "INVALID_ARGUMENT"],
    [{ heartbeatIntervalMs: 10 }, "INVALID_ARGUMENT"],
    [{ heartbeatIntervalMs: 2 * 3600_000 }, "INVALID_ARGUMENT"],
    [{ statusFilter: 7 as SessionStatus }, "INVALID_SESSION_STATUS"],
    [{ labelFilter: { "": "x" } }, "INVALID_LABEL"],
  ] as const) {
    const w = c.watchSessions(options);
    await assert.rejects(
      (async () => {
        for await (const ev of w) assert.fail(`an event: ${ev.type}`);
      })(),
      (err: unknown) => err instanceof InvalidArgumentError && err.reason === reason,
      JSON.stringify(options),
    );
  }
  assert.throws(() => c.watchSessions({ heartbeatIntervalMs: Number.NaN }), InvalidArgumentError);
});

test("close() ends a waiting iteration quietly; a signal makes it CanceledError", async () => {
  const w = c.watchSessions({ heartbeatIntervalMs: 60_000 });
  const it = w[Symbol.asyncIterator]();
  assert.equal((await next(it)).type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
  const waiting = it.next();
  setTimeout(() => w.close(), 50);
  assert.deepEqual(await waiting, { done: true, value: undefined });

  const ac = new AbortController();
  const it2 = c.watchSessions({ heartbeatIntervalMs: 60_000, signal: ac.signal })[Symbol.asyncIterator]();
  assert.equal((await next(it2)).type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
  setTimeout(() => ac.abort(), 50);
  await assert.rejects(it2.next(), CanceledError);
});

test("the watch ends with UnavailableError when the daemon stops", async () => {
  const own = await Daemon.start();
  const oc = await dial(own.addr, { waitReady: true });
  try {
    const it = oc.watchSessions({ heartbeatIntervalMs: 60_000 })[Symbol.asyncIterator]();
    assert.equal((await next(it)).type, WatchEventType.WATCH_EVENT_TYPE_HEARTBEAT);
    const t0 = Date.now();
    const stopped = own.stop();
    await assert.rejects(next(it, 10_000), UnavailableError);
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(await stopped, 0);
  } finally {
    oc.close();
    await own.close();
  }
});

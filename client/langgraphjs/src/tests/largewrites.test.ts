/**
 * Pending writes over the daemon's request limit (4 MiB by default, as a
 * user runs it): a 5 MB interrupt() value and a 5 MB Command({ resume })
 * of a real StateGraph, and a 64 MiB channel write, go through UploadWrites
 * and read back intact, while the daemon's anonymous memory stays under its
 * 64 MiB memory limit: the value is staged, never held whole.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { Worker } from "node:worker_threads";

import { Annotation, Command, END, INTERRUPT, interrupt, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";

import { SavepointSaver } from "../index.js";
import { type Daemon, startDaemon, stopDaemon } from "./initializer.js";

/** The --memory-limit the test gives its daemons: under the default, so that a value held whole could not stay under the bound. */
const MEMORY_LIMIT = 64 << 20;
let d: Daemon;
let saver: SavepointSaver;

before(async () => {
  d = await startDaemon(["--memory-limit", "64MiB"]); // and the default 4 MiB request limit
  saver = new SavepointSaver({ address: d.addr });
});
after(async () => {
  saver.close();
  await stopDaemon(d);
});

/** A string of n characters that are not all the same, so that a chunk out of place shows. */
function text(n: number): string {
  return randomBytes(Math.ceil((n * 3) / 4) + 3).toString("base64").slice(0, n);
}

/** A figure of /proc/PID/status in bytes (VmHWM: the peak resident set; RssAnon: the anonymous part of it now). */
function procStatus(pid: number, field: string): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith(field + ":"));
  assert.ok(line, `/proc/${pid}/status has no ${field}`);
  return Number(line.split(/\s+/)[1]) * 1024;
}

/**
 * Samples the process's RssAnon every 2 ms in a thread of its own (so that
 * a busy event loop here misses no sample) until stop() returns its peak.
 * The kernel keeps a peak only of the whole resident set (VmHWM), which
 * also counts the pages of Badger's memory-mapped files; the Go runtime's
 * memory limit bounds the anonymous part.
 */
function sampleAnon(pid: number): { stop: () => Promise<number> } {
  const code = `
    const { parentPort, workerData } = require("node:worker_threads");
    const { readFileSync } = require("node:fs");
    const stop = new Int32Array(workerData.flag);
    let peak = 0;
    while (Atomics.load(stop, 0) === 0) {
      const m = /RssAnon:\\s+(\\d+)/.exec(readFileSync("/proc/${pid}/status", "utf8"));
      if (m) peak = Math.max(peak, Number(m[1]) * 1024);
      Atomics.wait(stop, 0, 0, 2);
    }
    parentPort.postMessage(peak);`;
  const flag = new SharedArrayBuffer(4);
  const w = new Worker(code, { eval: true, workerData: { flag } });
  const peak = new Promise<number>((res, rej) => {
    w.once("message", res);
    w.once("error", rej);
  });
  return {
    stop: async () => {
      Atomics.store(new Int32Array(flag), 0, 1);
      const p = await peak;
      await w.terminate();
      return p;
    },
  };
}

test("a 5 MB interrupt() value and a 5 MB Command({ resume }) of a StateGraph are saved and read back whole", async () => {
  const question = text(5_000_000);
  const reply = text(5_000_000);
  const State = Annotation.Root({ answer: Annotation<string>() });
  const app = new StateGraph(State)
    .addNode("ask", () => ({ answer: interrupt(question) as string }))
    .addEdge(START, "ask")
    .addEdge("ask", END)
    .compile({ checkpointer: saver });
  const config = { configurable: { thread_id: "big-interrupt" } };

  const out = await app.invoke({ answer: "" }, config);
  assert.ok(INTERRUPT in out, "the graph stopped at its interrupt()");
  const state = await app.getState(config);
  assert.deepEqual(state.next, ["ask"]);
  const asked = state.tasks.flatMap((t) => t.interrupts.map((i) => i.value as string));
  assert.equal(asked.length, 1, "getState shows the question");
  assert.equal(asked[0].length, question.length);
  assert.ok(asked[0] === question, "the question reads back intact");
  const t = await saver.getTuple(config);
  const stored = t?.pendingWrites?.filter(([, channel]) => channel === INTERRUPT) ?? [];
  assert.equal(stored.length, 1, "getTuple has the interrupt's pending write");

  const done = await app.invoke(new Command({ resume: reply }), config);
  assert.ok(done.answer === reply, "the resume value reached the node intact");
  const final = await app.getState(config);
  assert.deepEqual(final.next, []);
  assert.ok(final.values.answer === reply, "and its state was saved");
});

test("a 64 MiB channel write is uploaded in chunks and read back whole by getTuple, the daemon's anonymous memory under its memory limit", async (t) => {
  const own = await startDaemon(["--memory-limit", "64MiB"]); // a daemon of its own, so that its figures are this test's
  const s = new SavepointSaver({ address: own.addr });
  try {
    const cfg = await s.put(
      { configurable: { thread_id: "big-write", checkpoint_ns: "" } },
      { ...emptyCheckpoint(), id: uuid6(1) },
      { source: "loop", step: 0, parents: {} },
      {},
    );
    const value = text(64 << 20);
    const pid = own.proc.pid!;
    const before = procStatus(pid, "VmHWM");
    const sampler = sampleAnon(pid);
    let anonPeak: number;
    let got;
    try {
      await s.putWrites(cfg, [["big", value], ["small", { n: 1 }]], "task-big");
      got = await s.getTuple(cfg);
    } finally {
      anonPeak = await sampler.stop();
    }
    const hwm = procStatus(pid, "VmHWM");
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    t.diagnostic(`daemon VmHWM ${mib(before)} before, ${mib(hwm)} after the write and its read (RssFile ${mib(procStatus(pid, "RssFile"))} now); RssAnon peak ${mib(anonPeak)}`);
    const writes = got?.pendingWrites ?? [];
    assert.deepEqual(
      writes.map(([task, ch]) => [task, ch]),
      [
        ["task-big", "big"],
        ["task-big", "small"],
      ],
    );
    const big = writes[0][2] as string;
    assert.equal(big.length, value.length);
    assert.ok(big === value, "the 64 MiB value reads back intact");
    assert.deepEqual(writes[1][2], { n: 1 });
    assert.ok(anonPeak > 0, "the sampler read the daemon's RssAnon");
    assert.ok(anonPeak < MEMORY_LIMIT, `the daemon's anonymous memory peaked at ${mib(anonPeak)}, at or over its ${mib(MEMORY_LIMIT)} memory limit: the value was held whole`);
  } finally {
    s.close();
    await stopDaemon(own);
  }
});

/**
 * The crash matrix of cmd/savepoint-demo/matrix_test.go, run for the
 * TypeScript demo: killed at every crash point of every turn of both
 * scripts (and during some resumes), then resumed, against one real
 * savepointd. Each case must finish with the uncrashed run's history (an
 * is_error result exactly where a side-effecting call was in doubt), write
 * the report at most once (exactly once unless in doubt), answer every
 * tool_use with exactly one tool_result, and decide on each resume what the
 * Go demo decided: the table it prints must equal the Go matrix's golden
 * file, cmd/savepoint-demo/testdata/crash-matrix.txt, line for line.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { type Client, consoleLogger, dial, EffectClass } from "../index.js";
import { labels } from "../demo/crash.js";
import { FINAL_ANSWER, type Response, scripts } from "../demo/model.js";
import { classOf, countWrites, NOTES_FILE, SAMPLE_NOTES } from "../demo/tools.js";
import { Daemon, describe as show, pool, repoRoot, runDemo } from "./daemon.js";

const golden = readFileSync(join(repoRoot, "cmd/savepoint-demo/testdata/crash-matrix.txt"), "utf8");

let d: Daemon;
let c: Client;
before(async () => {
  d = await Daemon.start();
  c = await dial(d.addr, { logger: consoleLogger("error") });
});
after(async () => {
  c.close();
  await d.close();
});

interface Case {
  script: string;
  crashes: string[];
  na: string;
  decisions: string[];
  writes: number;
  problems: string[];
}

interface Row {
  script: string;
  crashes: string[];
  decision: string;
  writes: number;
  pass: string;
}

/** The golden table's rows (its cells are padded with at least two spaces). */
function goldenRows(): Row[] {
  return golden
    .trimEnd()
    .split("\n")
    .slice(1)
    .map((line) => {
      const [script, crashes, decision, writes, pass] = line.split(/ {2,}/);
      return { script, crashes: crashes.split(" -> "), decision, writes: Number(writes), pass };
    });
}

const toolUses = (r: Response) => r.content.flatMap((b) => (b.type === "tool_use" ? [b] : []));

/**
 * Every label at every turn of a script, as the Go matrix lists them: one
 * row per crash point, one per tool use in a turn that names several, a
 * not-applicable row where the label cannot fire; then the golden's chains
 * (cases in which a resume is killed too).
 */
function matrixCases(script: string): Case[] {
  const out: Case[] = [];
  const add = (crashes: string[], na = "") => out.push({ script, crashes, na, decisions: [], writes: 0, problems: [] });
  scripts[script].forEach((reply, i) => {
    const turn = i + 1;
    const calls = toolUses(reply);
    for (const label of labels) {
      const spec = `${label}:${turn}`;
      const readOnly = (name: string) => classOf(name) === EffectClass.EFFECT_CLASS_READ_ONLY;
      if (label === "after-save-a") add([spec]);
      else if (calls.length === 0) add([spec], `turn ${turn} is the final answer: no tool runs, no Point B`);
      else if (label === "after-save-b") add([spec]);
      else if (calls.length === 1) add([spec], label === "after-begin" && readOnly(calls[0].name) ? `${calls[0].name} is read-only: never begun` : "");
      else {
        for (const call of calls) {
          add([`${spec}:${call.name}`], label === "after-begin" && readOnly(call.name) ? `${call.name} is read-only: never begun` : "");
        }
      }
    }
  });
  for (const row of goldenRows()) if (row.script === script && row.crashes.length > 1) add(row.crashes);
  return out;
}

function workdir(): string {
  const dir = mkdtempSync(join(tmpdir(), "spm"));
  writeFileSync(join(dir, NOTES_FILE), SAMPLE_NOTES);
  return dir;
}

async function history(id: string): Promise<{ role: string; contentJson: string }[]> {
  const g = await c.raw.getSession({ sessionId: id });
  const msgs = [...g.checkpoint!.messages];
  for (let token = g.nextPageToken; token !== ""; ) {
    const p = await c.raw.listMessages({ sessionId: id, revision: g.checkpoint!.revision, pageToken: token });
    msgs.push(...p.messages);
    token = p.nextPageToken;
  }
  assert.equal(BigInt(msgs.length), g.checkpoint!.messageCount);
  return msgs;
}

/** What a resumed run printed about its pending tool uses, short, as the Go matrix's decisions(). */
function decisions(stdout: string): string[] {
  const out: string[] = [];
  for (const line of stdout.split("\n")) {
    if (line.startsWith("[resume] read ") && line.endsWith(" pending=none")) out.push("nothing pending");
    const m = /^\[resume\]\[reconcile\] tool_use_id=(\S+) name=(\S+) (.*)$/.exec(line);
    if (!m) continue;
    const text = m[3];
    let dec = "?" + text;
    if (text.startsWith("ledger hit, reusing result, not re-running")) dec = "REUSE";
    else if (text.startsWith("ledger miss, read-only tool, re-running")) dec = "RUN(read-only)";
    else if (text.includes("never started")) dec = "RUN(never begun)";
    else if (text.includes("in doubt") && text.endsWith("appending is_error")) dec = "IN_DOUBT";
    out.push(`${m[2]}=${dec}`);
  }
  return out;
}

type Block = { type?: string; id?: string; tool_use_id?: string; is_error?: boolean; content?: unknown };
const blocks = (json: string): Block[] => {
  const v: unknown = JSON.parse(json);
  return Array.isArray(v) ? (v as Block[]) : [];
};

/** Every tool_use answered by exactly one tool_result with its id, in the next message, and no other tool_result. */
function checkPairing(msgs: { role: string; contentJson: string }[]): string[] {
  const problems: string[] = [];
  let open: string[] = [];
  msgs.forEach((m, i) => {
    const bs = blocks(m.contentJson);
    const uses = bs.filter((b) => b.type === "tool_use").map((b) => b.id ?? "");
    const results = bs.filter((b) => b.type === "tool_result").map((b) => b.tool_use_id ?? "");
    if (open.length > 0 || results.length > 0) {
      if (m.role !== "user" || [...results].sort().join(",") !== [...open].sort().join(",")) {
        problems.push(`message ${i} (${m.role}) answers [${results}], want exactly one tool_result for each of [${open}]`);
      }
    }
    open = m.role === "assistant" ? uses : [];
  });
  if (open.length > 0) problems.push(`tool uses [${open}] never answered`);
  return problems;
}

/** Canonical JSON: keys sorted. */
function canon(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canon).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * Compares a history with the uncrashed one as canonical JSON, allowing a
 * difference only in the tool_result of a tool use in doubt, which must then
 * be an is_error result saying the outcome is unknown.
 */
function compareHistory(base: { role: string; contentJson: string }[], got: { role: string; contentJson: string }[], inDoubt: Set<string>): string[] {
  if (got.length !== base.length) return [`${got.length} messages, the uncrashed run has ${base.length}`];
  const problems: string[] = [];
  const seen = new Set<string>();
  got.forEach((m, i) => {
    const g = JSON.parse(m.contentJson);
    const b = JSON.parse(base[i].contentJson);
    if (m.role === base[i].role && canon(g) === canon(b)) return;
    if (m.role !== base[i].role || !Array.isArray(g) || !Array.isArray(b) || g.length !== b.length) {
      problems.push(`message ${i} differs:\n got ${canon(g)}\nwant ${canon(b)}`);
      return;
    }
    g.forEach((gb: Block, j: number) => {
      const bb = b[j] as Block;
      if (canon(gb) === canon(bb)) return;
      const id = gb.tool_use_id ?? "";
      if (gb.type === "tool_result" && id === bb.tool_use_id && inDoubt.has(id) && gb.is_error === true &&
          String(gb.content).includes("unknown") && bb.is_error === undefined) {
        seen.add(id);
        return;
      }
      problems.push(`message ${i} block ${j} differs:\n got ${canon(gb)}\nwant ${canon(bb)}`);
    });
  });
  for (const id of [...inDoubt].sort()) if (!seen.has(id)) problems.push(`tool use ${id} was in doubt, but its result is not an is_error one`);
  return problems;
}

/** The cases as the Go matrix prints them (text/tabwriter, padding 2). */
function matrixTable(cases: Case[]): string {
  const rows = [["SCRIPT", "CRASH_AFTER (run 1 -> resumes)", "DECISION ON EACH RESUME", "WRITES", "PASS"]];
  for (const k of cases) {
    let pass = k.problems.length > 0 ? "FAIL" : "ok";
    let decision = k.decisions.join(" -> ");
    if (k.na !== "") {
      decision = "n/a: " + k.na;
      if (pass === "ok") pass = "n/a (did not fire)";
    }
    rows.push([k.script, k.crashes.join(" -> "), decision, String(k.writes), pass]);
  }
  const widths = rows[0].slice(0, -1).map((_, col) => Math.max(...rows.map((r) => r[col].length)) + 2);
  return rows.map((r) => r.map((cell, col) => (col < widths.length ? cell.padEnd(widths[col]) : cell)).join("")).join("\n") + "\n";
}

async function runCase(k: Case, base: { role: string; contentJson: string }[], wantDecisions: string[], wantWrites: number): Promise<void> {
  const dir = workdir();
  const id = `m.${k.script}.${k.crashes.join(".then.")}`;
  const runs = k.na !== "" ? 1 : k.crashes.length + 1;
  for (let i = 0; i < runs; i++) {
    const crash = k.crashes[i] ?? "";
    const r = await runDemo({ addr: d.addr, dir, session: id, script: k.script, resume: i > 0, crash });
    if (i > 0) {
      const got = decisions(r.stdout).join(", ");
      k.decisions.push(got);
      if (got !== wantDecisions[i - 1]) k.problems.push(`run ${i + 1} decided ${JSON.stringify(got)}, want ${JSON.stringify(wantDecisions[i - 1])}\n${show(r)}`);
    }
    if (i < runs - 1) {
      if (r.code !== 137 || !r.stdout.endsWith(`[kill] simulated kill at ${crash}\n`)) {
        k.problems.push(`run ${i + 1}: want it killed at ${crash}\n${show(r)}`);
        return;
      }
      continue;
    }
    if (r.code !== 0 || !(r.stdout.endsWith(`[done] ${FINAL_ANSWER}\n`) || r.stdout.includes(`[done] ${FINAL_ANSWER}\n[check] `))) {
      k.problems.push(`run ${i + 1} did not finish\n${show(r)}`);
      return;
    }
    if (k.na !== "" && r.stdout.includes("[kill]")) k.problems.push(`not applicable, yet it fired\n${show(r)}`);
  }
  const inDoubt = new Set<string>();
  for (const ds of k.decisions) {
    for (const dec of ds.split(", ")) {
      const [name, what] = dec.split("=");
      if (what !== "IN_DOUBT") continue;
      for (const reply of scripts[k.script]) for (const u of toolUses(reply)) if (u.name === name) inDoubt.add(u.id);
    }
  }
  k.writes = countWrites(dir);
  if (k.writes !== wantWrites || k.writes > 1 || (k.writes === 0 && inDoubt.size === 0)) {
    k.problems.push(`report written ${k.writes} times, want ${wantWrites} (at most once, exactly once unless in doubt)`);
  }
  const g = await c.raw.getSession({ sessionId: id });
  if (g.checkpoint!.pendingToolUses.length !== 0) k.problems.push("finished with pending tool uses");
  const msgs = await history(id);
  const last = msgs.at(-1)!;
  if (last.role !== "assistant" || canon(JSON.parse(last.contentJson)) !== canon([{ type: "text", text: FINAL_ANSWER }])) {
    k.problems.push("the history does not end with the final answer");
  }
  k.problems.push(...checkPairing(msgs), ...compareHistory(base, msgs, inDoubt));
}

test("the crash matrix: every label at every turn of both scripts, for the TypeScript demo", async () => {
  const started = Date.now();
  const base: Record<string, { role: string; contentJson: string }[]> = {};
  for (const script of Object.keys(scripts)) {
    const dir = workdir();
    const r = await runDemo({ addr: d.addr, dir, session: `base.${script}`, script });
    assert.equal(r.code, 0, show(r));
    assert.equal(countWrites(dir), 1);
    base[script] = await history(`base.${script}`);
    assert.deepEqual(checkPairing(base[script]), []);
  }
  const cases = ["seed", "parallel"].flatMap(matrixCases);
  const want = goldenRows();
  assert.deepEqual(
    cases.map((k) => `${k.script} ${k.crashes.join(" -> ")}`),
    want.map((r) => `${r.script} ${r.crashes.join(" -> ")}`),
    "the TypeScript demo's labels and turns make the Go matrix's rows",
  );
  await pool(
    4,
    cases.map((k, i) => () => runCase(k, base[k.script], want[i].decision.startsWith("n/a: ") ? [] : want[i].decision.split(" -> "), want[i].writes)),
  );
  const table = matrixTable(cases);
  const failures = cases.filter((k) => k.problems.length > 0);
  assert.deepEqual(
    failures.map((k) => `${k.script} ${k.crashes.join(" -> ")}:\n  ${k.problems.join("\n  ")}`),
    [],
    `failed cases; the table:\n${table}`,
  );
  assert.equal(table, golden, "the matrix differs from cmd/savepoint-demo/testdata/crash-matrix.txt");
  console.log(`crash matrix: ${cases.length} cases against one savepointd in ${((Date.now() - started) / 1000).toFixed(1)} s`);
});

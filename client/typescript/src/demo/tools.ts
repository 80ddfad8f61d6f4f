import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

import { EffectClass, type ToolFunc } from "../index.js";

/** The files the demo keeps in its work directory. */
export const NOTES_FILE = "sales-notes.txt";
export const REPORT_FILE = "report.txt";
/**
 * Gets one line per real write of report.txt, so a double write is visible:
 * after a finished run it must hold exactly one line, or none when the write
 * was in doubt and had not happened.
 */
export const WRITES_FILE = "report.writes";

/** Written to the work directory when it has no sales-notes.txt at a fresh start (the Go demo's sales-notes.txt). */
export const SAMPLE_NOTES =
  "Q3 sales notes, West region.\n" +
  "Acme Corp signed the annual plan for $18,000.\n" +
  "Globex renewed two seats for $9,000.\n" +
  "Initech converted its trial after the demo for $15,000.\n" +
  "Umbrella asked for a quote; follow up in November.\n" +
  "Hooli is waiting on legal review.\n";

interface ToolInput {
  file?: unknown;
  text?: unknown;
}

/**
 * One of the demo's tools: what it does to the world (its effect class,
 * which the daemon uses to decide what is safe after a crash) and how to
 * run it.
 */
interface Tool {
  class: EffectClass;
  run(dir: string, input: ToolInput, key: string): string;
}

/** The seed's toolImpls, each with its effect class. */
export const toolImpls: Record<string, Tool> = {
  read_notes: { class: EffectClass.EFFECT_CLASS_READ_ONLY, run: (dir, input) => readFile(dir, input.file) },
  count_words: {
    class: EffectClass.EFFECT_CLASS_READ_ONLY,
    run: (dir, input) => `${readFile(dir, input.file).split(/\s+/).filter((w) => w !== "").length} words`,
  },
  write_report: { class: EffectClass.EFFECT_CLASS_SIDE_EFFECT, run: writeReport },
};

/** A tool's effect class; an unknown tool counts as side-effecting, the safe assumption. */
export function classOf(name: string): EffectClass {
  return Object.hasOwn(toolImpls, name) ? toolImpls[name].class : EffectClass.EFFECT_CLASS_SIDE_EFFECT;
}

/** The ToolFunc that runs the model's tool calls in dir. */
export function runTool(dir: string): ToolFunc {
  return (call, key) => {
    if (!Object.hasOwn(toolImpls, call.name)) throw new Error(`unknown tool ${JSON.stringify(call.name)}`);
    let input: ToolInput = {};
    if (call.inputJson !== "") {
      try {
        input = JSON.parse(call.inputJson) as ToolInput;
      } catch (err) {
        throw new Error(`bad input for ${call.name}: ${(err as Error).message}`);
      }
    }
    return toolImpls[call.name].run(dir, input ?? {}, key);
  };
}

/** Checks that name is a plain file name and returns it inside dir. */
function path(dir: string, name: unknown): string {
  const s = typeof name === "string" ? name : "";
  if (s === "" || s !== basename(s) || s === "." || s === "..") {
    throw new Error(`file ${JSON.stringify(s)}: want a plain file name in the work directory`);
  }
  return join(dir, s);
}

function readFile(dir: string, name: unknown): string {
  const p = path(dir, name);
  if (!existsSync(p)) throw new Error(`${String(name)} does not exist`);
  return readFileSync(p, "utf8");
}

/**
 * The side effect: replaces the report (write to a temp file, then rename)
 * and appends a line to report.writes, the count of real writes.
 */
function writeReport(dir: string, input: ToolInput, key: string): string {
  const p = path(dir, input.file);
  const text = typeof input.text === "string" ? input.text : "";
  writeFileSync(p + ".tmp", text);
  renameSync(p + ".tmp", p);
  appendFileSync(join(dir, WRITES_FILE), `${String(input.file)} key=${key}\n`);
  return `Wrote ${Buffer.byteLength(text)} bytes to ${String(input.file)}`;
}

/** How many times write_report really wrote, from report.writes. */
export function countWrites(dir: string): number {
  const p = join(dir, WRITES_FILE);
  if (!existsSync(p)) return 0;
  return (readFileSync(p, "utf8").match(/\n/g) ?? []).length;
}

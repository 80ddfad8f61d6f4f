#!/usr/bin/env node
/**
 * The seed's agent.js on Savepoint: it turns sales-notes.txt into a short
 * report with three tools, read_notes and count_words (read-only) and
 * write_report (side-effecting). Its runAgent is the seed's, with the
 * hand-written checkpoint.json and effects.json replaced by a Session:
 * saveCheckpoint at Point A and Point B become session.pointA and
 * session.pointB, runToolUses' saveEffect becomes session.runTools (begin,
 * run, record), and loadCheckpoint + reconcile become client.resume and
 * session.reconcile. Kill it anywhere, run it again with --resume, and it
 * finishes without writing the report twice and without pretending to know
 * what it cannot. It is the TypeScript twin of cmd/savepoint-demo: the same
 * flags, CRASH_AFTER and PAUSE_AFTER points, files and output lines.
 *
 * Usage:
 *
 *   node dist/demo.js [--addr unix:PATH] [--session ID] [--workdir DIR] [--script seed|parallel] [--resume]
 *
 * Exit status: 0 when the task is complete, 1 on an error (the message says
 * what to do), 2 for bad flags or environment, 137 after a simulated kill.
 * At the end it completes the session with the final answer, so that
 * `savepoint ls` shows the task done.
 */
import { existsSync, mkdirSync, readSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import {
  type Client,
  consoleLogger,
  Decision,
  defaultAddr,
  dial,
  EffectClass,
  type Message,
  type Session,
  SessionFencedError,
  SessionNotFoundError,
  SessionStatus,
  type ToolEvent,
  type ToolUse,
  UnavailableError,
} from "./index.js";
import { type Label, labels, matches, parsePoint, type Point } from "./demo/crash.js";
import { makeStubClient, type ModelClient, type Response, scriptNames } from "./demo/model.js";
import { classOf, NOTES_FILE, runTool, SAMPLE_NOTES, WRITES_FILE } from "./demo/tools.js";

const TASK = "Turn sales-notes.txt into a short report and write it to report.txt.";
const MAX_TURNS = 20;

interface Options {
  addr: string;
  session: string;
  resume: boolean;
  workdir: string;
  script: string;
}

/** An error of the agent itself, saying where it happened; cause is what failed. */
class AgentError extends Error {}

const out = (line: string) => process.stdout.write(line + "\n");
const err = (line: string) => process.stderr.write(line + "\n");

/** The crash and pause points, and the session they watch (for its turn). */
class Harness {
  session: Session | undefined;
  #paused = false;
  constructor(
    readonly crash: Point | undefined,
    readonly pause: Point | undefined,
  ) {}

  /**
   * The seed's crashPoint: a simulated kill is a real exit, at once, with
   * nothing cleaned up. PAUSE_AFTER waits for a line on stdin there.
   */
  at(label: Label, turn: number, tool = ""): void {
    if (!this.#paused && matches(this.pause, label, turn, tool)) {
      this.#paused = true;
      out(`[pause] paused at ${this.pause!.raw}; press Enter to continue`);
      readLine();
    }
    if (matches(this.crash, label, turn, tool)) {
      out(`[kill] simulated kill at ${this.crash!.raw}`);
      process.exit(137);
    }
  }

  /**
   * Sees every stage of every tool use the session runs or reconciles: it
   * prints the reconcile decisions and fires the crash points inside
   * runTools and reconcile.
   */
  hook = (ev: ToolEvent): void => {
    const turn = this.session?.turn ?? 0;
    switch (ev.stage) {
      case "decided":
        out(`[resume][reconcile] tool_use_id=${ev.call.toolUseId} name=${ev.call.name} ${decisionText(ev)}`);
        break;
      case "begun":
        this.at("after-begin", turn, ev.call.name);
        break;
      case "ran":
        this.at("after-tool", turn, ev.call.name);
        break;
      case "recorded":
        this.at("after-effect-write", turn, ev.call.name);
        break;
    }
  };
}

/**
 * The seed's runAgent on a Session: start (or resume and reconcile), then
 * while the model asks for a tool, save Point A, run the tools, save Point
 * B, and ask the model again.
 */
async function runAgent(sp: Client, h: Harness, opts: Options): Promise<string> {
  const tools: unknown[] = [];
  const run = runTool(opts.workdir);
  let session: Session;
  if (opts.resume) {
    try {
      session = await sp.resume(opts.session);
    } catch (e) {
      if (e instanceof SessionNotFoundError) {
        throw new AgentError(`session ${JSON.stringify(opts.session)} does not exist, run without --resume to start it: ${e.message}`, { cause: e });
      }
      throw new AgentError(`resuming session ${JSON.stringify(opts.session)}: ${(e as Error).message}`, { cause: e });
    }
    h.session = session;
    const pending = session.pending;
    out(`[resume] read turn=${session.turn} pending=${names(pending)}`);
    if (pending.length > 0) {
      // The hook prints one [resume][reconcile] line per decision, before
      // acting on it.
      const results = await step(`turn ${session.turn}: reconciling the pending tool uses`, () => session.reconcile(run));
      await step(`turn ${session.turn}: saving Point B after resume`, () => session.pointB(results));
      out(`[turn ${session.turn}][save B] filled in this turn's ${results.length > 1 ? "tool results" : "tool result"} after resume`);
      h.at("after-save-b", session.turn);
    }
    const done = finished(session.messages);
    if (done !== undefined) return finish(session, done); // it died after saving the final answer
  } else {
    prepare(opts.workdir);
    session = await step(`starting session ${JSON.stringify(opts.session)}`, () =>
      sp.start(opts.session, TASK, {
        replace: true, // start over: the old checkpoints and ledger go
        messages: [{ role: "user", contentJson: goJSON([{ type: "text", text: TASK }]) }],
      }),
    );
    h.session = session;
  }

  // The scripted model continues from the checkpoint's turn.
  const client: ModelClient = makeStubClient(opts.script, session.turn);
  let response = checkReply(await client.messages.create({ tools, messages: session.messages }));
  session.addTokens(response.usage.input_tokens + response.usage.output_tokens);
  while (response.stop_reason === "tool_use") {
    if (session.turn >= MAX_TURNS) throw new AgentError(`reached the limit of ${MAX_TURNS} turns, stopping`);
    const turn = session.turn + 1;
    const toolUses = toolUsesOf(response);
    // —— Point A: right after the model response, the assistant message and
    // this turn's dangling tool calls, before any tool runs ——
    await step(`turn ${turn}: saving Point A`, () => session.pointA(assistantMessage(response), toolUses));
    out(`[turn ${turn}][save A] pending=${names(toolUses)}`);
    h.at("after-save-a", turn);

    // runToolUses: each tool is begun (unless read-only), run, and its
    // outcome written to the ledger the moment it returns.
    const toolResults = await step(`turn ${turn}`, () => session.runTools(toolUses, run));

    // —— Point B: the tool results are in the history (and the ledger),
    // the dangling calls cleared ——
    await step(`turn ${turn}: saving Point B`, () => session.pointB(toolResults));
    out(`[turn ${turn}][save B]`);
    h.at("after-save-b", turn);

    response = checkReply(await client.messages.create({ tools, messages: session.messages }));
    session.addTokens(response.usage.input_tokens + response.usage.output_tokens);
  }
  // The final answer is saved too, as a Point A that names no tool.
  const turn = session.turn + 1;
  await step(`turn ${turn}: saving Point A`, () => session.pointA(assistantMessage(response), []));
  h.at("after-save-a", turn);
  return finish(session, responseText(response));
}

/** Completes the session with the final answer, so that `savepoint ls` shows the task done, and returns the answer. */
async function finish(session: Session, answer: string): Promise<string> {
  await step(`completing session ${JSON.stringify(session.id)}`, () => session.complete(SessionStatus.SESSION_STATUS_COMPLETED, answer));
  return answer;
}

/** Runs f, saying which step of the agent failed; the cause keeps the client's error class. */
async function step<T>(what: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw new AgentError(`${what}: ${(e as Error).message}`, { cause: e });
  }
}

/** A response whose stop_reason says whether it names tools. */
function checkReply(response: Response): Response {
  const n = toolUsesOf(response).length;
  if ((response.stop_reason === "tool_use") !== n > 0) {
    throw new AgentError(`model: stop_reason ${JSON.stringify(response.stop_reason)} with ${n} tool uses`);
  }
  return response;
}

/** The response's tool_use blocks as the client's tool uses, each with the effect class its tool declares. */
function toolUsesOf(response: Response): ToolUse[] {
  return response.content.flatMap((b) =>
    b.type === "tool_use" ? [{ toolUseId: b.id, name: b.name, inputJson: goJSON(b.input), effectClass: classOf(b.name) }] : [],
  );
}

function assistantMessage(response: Response): Message {
  return { role: "assistant", contentJson: goJSON(response.content) };
}

function responseText(response: Response): string {
  return response.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
}

/** JSON as Go's encoding/json writes it (HTML characters and line separators escaped), so both demos save the same bytes. */
function goJSON(v: unknown): string {
  return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

function decisionText(ev: ToolEvent): string {
  switch (ev.decision) {
    case Decision.DECISION_REUSE:
      return "ledger hit, reusing result, not re-running";
    case Decision.DECISION_RUN:
      switch (ev.call.effectClass) {
        case EffectClass.EFFECT_CLASS_READ_ONLY:
          return "ledger miss, read-only tool, re-running";
        case EffectClass.EFFECT_CLASS_IDEMPOTENT:
          return "ledger miss, idempotent tool, re-running with its idempotency key";
        default:
          return "ledger miss, side-effecting tool was never started (not begun), running it safely";
      }
    case Decision.DECISION_IN_DOUBT:
      return ev.begun
        ? "ledger miss with side effects, begun but not recorded: in doubt, not re-running, appending is_error"
        : "ledger miss with side effects, not begin-tracked: in doubt, not re-running, appending is_error";
  }
  return `unknown decision ${ev.decision}`;
}

/** Readies the work directory for a fresh start. */
function prepare(dir: string): void {
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(dir, NOTES_FILE))) {
    writeFileSync(join(dir, NOTES_FILE), SAMPLE_NOTES);
    out(`[setup] no ${NOTES_FILE} in ${dir}: wrote a sample`);
  }
  rmSync(join(dir, WRITES_FILE), { force: true });
}

/** Any content block, for reading the history back. */
interface AnyBlock {
  type?: string;
  text?: string;
  id?: string;
  name?: string;
  tool_use_id?: string;
  is_error?: boolean;
}

/** A message's Anthropic content: an array of blocks, or a string (one text block). */
function contentBlocks(m: Message): AnyBlock[] {
  try {
    const v: unknown = JSON.parse(m.contentJson);
    if (Array.isArray(v)) return v as AnyBlock[];
    if (typeof v === "string") return [{ type: "text", text: v }];
  } catch {
    // not JSON: no blocks
  }
  return [];
}

/** The final answer's text when the history ends with it (an assistant message naming no tool). */
function finished(msgs: Message[]): string | undefined {
  const last = msgs.at(-1);
  if (!last || last.role !== "assistant") return undefined;
  const texts: string[] = [];
  for (const b of contentBlocks(last)) {
    if (b.type === "tool_use") return undefined;
    if (b.type === "text") texts.push(b.text ?? "");
  }
  return texts.join("\n");
}

/** Points at tool uses that ended as is_error (in doubt after a crash, or failed), which a person may need to look at. */
function check(session: Session): void {
  const toolNames = new Map<string, string>();
  for (const m of session.messages) {
    for (const b of contentBlocks(m)) {
      if (b.type === "tool_use") toolNames.set(b.id ?? "", b.name ?? "");
      else if (b.type === "tool_result" && b.is_error) {
        out(
          `[check] tool_use_id=${b.tool_use_id} name=${toolNames.get(b.tool_use_id ?? "") ?? ""} ended as is_error (in doubt or failed): check its effect by hand`,
        );
      }
    }
  }
}

function names(calls: { name: string }[]): string {
  return calls.length === 0 ? "none" : calls.map((c) => c.name).join(",");
}

/** The first error of class C in err's chain of causes. */
function causeOf<C>(e: unknown, cls: abstract new (...args: never[]) => C): C | undefined {
  for (let cur = e; cur instanceof Error; cur = cur.cause) if (cur instanceof cls) return cur;
  return undefined;
}

/** Explains an error and what to do next. */
function fail(e: unknown, opts: Options, h: Harness): void {
  err(`[error] ${(e as Error).message ?? String(e)}`);
  const addr = opts.addr || defaultAddr();
  const again = h.session === undefined && !opts.resume ? "run again" : "run again with --resume to continue from the last checkpoint";
  if (causeOf(e, UnavailableError)) err(`[error] savepointd at ${addr} is unavailable: start it, then ${again}`);
  else if (causeOf(e, SessionFencedError)) err(`[error] another process resumed session ${JSON.stringify(opts.session)} and owns it now; this one stops`);
  else if (!causeOf(e, SessionNotFoundError)) err(`[error] ${again}`);
}

/** Reads a line from stdin, blocking (PAUSE_AFTER stops the whole process, like the Go demo's). */
function readLine(): void {
  const buf = Buffer.alloc(1);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buf, 0, 1, null);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EAGAIN") {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
        continue;
      }
      return;
    }
    if (n === 0 || buf[0] === 0x0a) return;
  }
}

const usage = `usage: savepoint-demo [flags]

Turns sales-notes.txt into report.txt with a scripted model, checkpointed by savepointd.
CRASH_AFTER=LABEL:N[:TOOL] simulates a kill (exit 137); PAUSE_AFTER=LABEL:N[:TOOL] waits for Enter.
Labels: ${labels.join(", ")}.

  -addr string
    \tsavepointd address, unix:PATH or HOST:PORT (default: $SAVEPOINT_ADDR, else
    \t$XDG_RUNTIME_DIR/savepoint/savepoint.sock, else /run/savepoint/savepoint.sock)
  -resume
    \tresume the session from its latest checkpoint instead of starting over
  -script string
    \tscripted model: ${scriptNames.join(" or ")} (default "seed")
  -session string
    \tsession id (default "sales-report")
  -workdir string
    \tdirectory holding sales-notes.txt, report.txt and report.writes (default ".")
`;

/** Parses the flags as Go's flag package does (-name, --name, -name=value, -name value); a number is an exit status. */
function parseFlags(args: string[]): Options | number {
  const o: Options = { addr: "", session: "sales-report", resume: false, workdir: ".", script: "seed" };
  const strings = new Set(["addr", "session", "workdir", "script"]);
  const bad = (msg: string) => {
    err(msg);
    process.stderr.write(usage);
    return 2;
  };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === "--") {
      i++;
      break;
    }
    if (!a.startsWith("-") || a === "-") break;
    const body = a.replace(/^--?/, "");
    const eq = body.indexOf("=");
    const name = eq < 0 ? body : body.slice(0, eq);
    const value = eq < 0 ? undefined : body.slice(eq + 1);
    if (name === "h" || name === "help") {
      process.stderr.write(usage);
      return 0;
    }
    if (name === "resume") {
      const v = value ?? "true";
      if (["1", "t", "T", "true", "TRUE", "True"].includes(v)) o.resume = true;
      else if (["0", "f", "F", "false", "FALSE", "False"].includes(v)) o.resume = false;
      else return bad(`invalid boolean value ${JSON.stringify(v)} for -resume: parse error`);
    } else if (strings.has(name)) {
      let v = value;
      if (v === undefined) {
        if (i + 1 >= args.length) return bad(`flag needs an argument: -${name}`);
        v = args[++i];
      }
      (o as unknown as Record<string, string>)[name] = v;
    } else {
      return bad(`flag provided but not defined: -${name}`);
    }
  }
  if (i < args.length) {
    err(`savepoint-demo: unexpected arguments [${args.slice(i).map((a) => JSON.stringify(a)).join(" ")}]`);
    return 2;
  }
  if (!scriptNames.includes(o.script)) {
    err(`savepoint-demo: unknown --script ${JSON.stringify(o.script)} (have ${scriptNames.join(", ")})`);
    return 2;
  }
  return o;
}

async function main(): Promise<number> {
  const opts = parseFlags(process.argv.slice(2));
  if (typeof opts === "number") return opts;
  let crash: Point | undefined;
  let pause: Point | undefined;
  try {
    crash = parsePoint(process.env.CRASH_AFTER ?? "");
  } catch (e) {
    err(`savepoint-demo: CRASH_AFTER=${(e as Error).message}`);
    return 2;
  }
  try {
    pause = parsePoint(process.env.PAUSE_AFTER ?? "");
  } catch (e) {
    err(`savepoint-demo: PAUSE_AFTER=${(e as Error).message}`);
    return 2;
  }
  const h = new Harness(crash, pause);
  let sp: Client;
  try {
    sp = await dial(opts.addr, {
      logger: consoleLogger("warn"),
      toolHook: h.hook,
      onLedgerError: (call, _result, e) =>
        err(
          `[ledger write failed] tool_use_id=${call.toolUseId} name=${call.name}: the tool ran and its side effect may have happened, ` +
            `but its outcome is not recorded; if this run stops before Point B, resume reports it in doubt: ${(e as Error).message}`,
        ),
    });
  } catch (e) {
    err(`[error] ${(e as Error).message}`);
    return 2;
  }
  try {
    const result = await runAgent(sp, h, opts);
    out(`[done] ${result}`);
    check(h.session!);
    return 0;
  } catch (e) {
    fail(e, opts, h);
    return 1;
  } finally {
    sp.close();
  }
}

process.exitCode = await main();

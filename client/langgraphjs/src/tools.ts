import { randomUUID } from "node:crypto";

import { isBaseMessage, type ToolCall, ToolMessage } from "@langchain/core/messages";
import * as langgraph from "@langchain/langgraph";
import { Command, type CommandParams, interrupt, isCommand, isGraphInterrupt, type LangGraphRunnableConfig, Send, type SendOptions } from "@langchain/langgraph";
import { ToolNode, type ToolNodeOptions } from "@langchain/langgraph/prebuilt";
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { graphPb, pb, type Verified } from "@savepoint-dev/client";

import { Connection, type SaverOptions } from "./conn.js";

/**
 * The key of the run config's `configurable` under which a tool run by a
 * DurableToolNode finds its call's idempotency key: the same for every
 * attempt of one tool call, to pass to an API that accepts one.
 */
export const IDEMPOTENCY_KEY = "savepoint_idempotency_key";

/** A tool's effect class, from its metadata's `savepoint_effect`; `side_effect` when it has none. */
export type EffectClassName = "read_only" | "idempotent" | "side_effect";

/**
 * This process's run id, sent with every BeginThreadEffect: the daemon's
 * duplicate-intent guard (docs/api.md "The thread ledger") tells an
 * earlier, interrupted run's calls from this run's by it, so two identical
 * calls of this process both run.
 */
export const RUN_ID = randomUUID();

/**
 * The metadata key (a tool's metadata) that exempts its calls from the
 * daemon's duplicate-intent guard: set it true for a tool that may
 * legitimately repeat a call with the same input after a restart.
 */
export const REPEATABLE = "savepoint_repeatable";

const CLASSES: Record<EffectClassName, pb.EffectClass> = {
  read_only: pb.EffectClass.EFFECT_CLASS_READ_ONLY,
  idempotent: pb.EffectClass.EFFECT_CLASS_IDEMPOTENT,
  side_effect: pb.EffectClass.EFFECT_CLASS_SIDE_EFFECT,
};

/** The options of a DurableToolNode: ToolNode's, where the daemon is (as for SavepointSaver), and how outcomes are serialized. */
export interface DurableToolNodeOptions extends ToolNodeOptions, SaverOptions {
  /** Serializes the recorded ToolMessages and Commands (default LangGraph's JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /** Verify hooks by tool name, asked about a call of that tool in doubt (VerifyHook). */
  verify?: Record<string, VerifyHook>;
  /**
   * The names of the tools that require a person's approval, bound to the
   * call and its input (docs/api.md, ApproveEffect). A call of one without
   * an approval stops the graph with LangGraph's interrupt(), its value
   * `{ savepointApproval: { threadId, checkpointNs, toolUseId, name, args,
   * inputDigest } }`; resume it with `new Command({ resume: { approved, note,
   * by } })`, which records the decision (ApproveThreadEffect, for the input
   * the call waits with), or with any other value once the decision was
   * recorded elsewhere (savepoint approve --thread). An approved call runs
   * once; a denied one is answered with an error ToolMessage holding the note.
   */
  approvalRequired?: string[];
}

/** The text of the error ToolMessage answering a call a person denied. */
export function deniedText(a: pb.EffectApproval | undefined): string {
  const by = a?.decidedBy || "a person";
  if (!a?.note) return `This call was denied by ${by}; it did not run.`;
  return `This call was denied by ${by}; it did not run. Their note: ${a.note}`;
}

/**
 * A tool's verify hook: given the idempotency key of a call in doubt and the
 * call's args, it says whether the call took effect, as the client's
 * Verified: { status: "done", output } (recorded and answered as the call's
 * ToolMessage), { status: "notDone" } (the tool runs again as a new attempt
 * under the same key) or { status: "unknown" } (in doubt, as is a throw).
 */
export type VerifyHook = (idempotencyKey: string, args: unknown) => Verified | Promise<Verified>;

type Tool = ToolNode["tools"][number];

/** The text of the error ToolMessage a DurableToolNode answers for a side-effecting call begun and never recorded. */
export function inDoubtText(name: string, toolCallId: string): string {
  return (
    `The outcome of this ${name} call (tool_use_id ${toolCallId}) is unknown: it was started, but the agent ` +
    "stopped before its outcome was recorded. It was not run again, to avoid repeating a side effect. Check " +
    "whether it took effect before retrying it."
  );
}

/** The effect class of a tool, from its metadata's `savepoint_effect` (unset: side_effect); anything else throws. */
export function effectClassOf(tool: Tool): EffectClassName {
  const v = (tool as { metadata?: Record<string, unknown> }).metadata?.savepoint_effect;
  if (v === undefined || v === null) return "side_effect";
  if (typeof v === "string" && Object.hasOwn(CLASSES, v)) return v as EffectClassName;
  throw new Error(`tool ${JSON.stringify(tool.name)} has metadata savepoint_effect ${JSON.stringify(v)}; want "read_only", "idempotent" or "side_effect"`);
}

/** Where a tool use's effect is in a thread's ledger. */
interface EffectKey {
  threadId: string;
  ns: string;
  toolUseId: string;
  checkpointId: string;
}

/**
 * The ledger's key of a tool use made by a node running with config: its
 * thread, the namespace of the graph the node runs in (the task's
 * checkpoint_ns without the task's own last segment: "" in the root
 * graph), and the checkpoint the task runs from.
 */
function effectKey(call: ToolCall, config: LangGraphRunnableConfig): EffectKey {
  const c = (config.configurable ?? {}) as Record<string, unknown>;
  const threadId = c.thread_id;
  if (threadId === undefined || threadId === null || threadId === "") {
    throw new Error("DurableToolNode needs configurable.thread_id: run it in a graph compiled with a checkpointer, or pass one in the config");
  }
  if (!call.id) throw new Error(`DurableToolNode: the call of tool ${JSON.stringify(call.name)} has no id; the ledger keys a call by its tool_call_id`);
  let ns = typeof c.checkpoint_ns === "string" ? c.checkpoint_ns : "";
  const task = c.__pregel_task_id;
  if (typeof task === "string" && task !== "" && ns.endsWith(`:${task}`)) {
    const bar = ns.lastIndexOf("|");
    ns = bar < 0 ? "" : ns.slice(0, bar);
  }
  const map = c.checkpoint_map as Record<string, unknown> | undefined;
  const cp = map?.[ns] ?? c.checkpoint_id;
  return { threadId: String(threadId), ns, toolUseId: call.id, checkpointId: typeof cp === "string" ? cp : "" };
}

/**
 * A drop-in for LangGraph.js's ToolNode (same arguments, same outputs,
 * handleToolErrors included) whose tool calls go through savepointd's
 * graph-thread ledger, keyed by (thread_id, namespace, tool_call_id): each
 * call is begun (BeginThreadEffect) before its tool runs and its outcome
 * recorded (RecordThreadEffect) the moment the tool returns or throws. A
 * call whose result is recorded is answered with it without running the
 * tool; a side-effecting call begun and never recorded (its process died
 * mid-call) is answered with an error ToolMessage saying so (inDoubtText),
 * never run again; a read-only or idempotent one is run again, with the
 * same idempotency key (configurable.savepoint_idempotency_key). A tool's
 * effect class comes from its metadata's `savepoint_effect`.
 *
 * `new DurableToolNode(tools)` resolves the daemon's address as
 * `new SavepointSaver()` does; close() it when done. Ledger calls that fail
 * throw the client's SavepointError classes (EffectInputMismatchError when
 * a tool_call_id is reused for another call), whatever handleToolErrors
 * says.
 */
export class DurableToolNode<T = any> extends ToolNode<T> {
  readonly #conn: Connection;

  /** The daemon's address: the given one, else, once the first call resolved it, where the saver connected (the per-user daemon, the system's, or one started on demand). */
  get address(): string {
    return this.#conn.address;
  }
  readonly #serde: SerializerProtocol;
  readonly #verify: Map<string, VerifyHook>;
  readonly #approval: Set<string>;

  constructor(tools: Tool[], options: DurableToolNodeOptions = {}) {
    const { name, tags, handleToolErrors, serde, verify, approvalRequired, ...conn } = options;
    super(tools, { name, tags, handleToolErrors });
    for (const t of tools) effectClassOf(t);
    for (const [n, hook] of Object.entries(verify ?? {})) {
      if (!tools.some((t) => t.name === n)) throw new Error(`DurableToolNode: verify names ${JSON.stringify(n)}, which is not one of its tools`);
      if (typeof hook !== "function") throw new Error(`DurableToolNode: verify[${JSON.stringify(n)}] is not a function`);
    }
    this.#verify = new Map(Object.entries(verify ?? {}));
    for (const n of approvalRequired ?? []) {
      if (!tools.some((t) => t.name === n)) throw new Error(`DurableToolNode: approvalRequired names ${JSON.stringify(n)}, which is not one of its tools`);
    }
    this.#approval = new Set(approvalRequired ?? []);
    this.#conn = new Connection(conn);
    this.#serde = serde ?? new JsonPlusSerializer();
  }

  /** Waits until the daemon accepts the connection, or signal fires (then it throws UnavailableError). */
  waitReady(signal?: AbortSignal): Promise<void> {
    return this.#conn.waitReady(signal);
  }

  /** Closes the connection; calls in flight fail. */
  close(): void {
    this.#conn.close();
  }

  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown): Promise<ToolMessage | Command> {
    const tool = this.tools.find((t) => t.name === call.name);
    // No such tool: nothing runs, so ToolNode answers as it does.
    if (tool === undefined) return super.runTool(call, config, state);
    const cls = effectClassOf(tool);
    const key = effectKey(call, config);
    const begin = () =>
      this.#conn.unary<graphPb.BeginThreadEffectRequest, graphPb.BeginThreadEffectResponse>(
        "beginThreadEffect",
        graphPb.BeginThreadEffectRequest.fromPartial({
          threadId: key.threadId,
          checkpointNs: key.ns,
          toolUseId: key.toolUseId,
          name: call.name,
          inputJson: JSON.stringify(call.args ?? {}),
          effectClass: CLASSES[cls],
          checkpointId: key.checkpointId,
          requestId: randomUUID(),
          requiresApproval: this.#approval.has(call.name),
          runId: RUN_ID,
          repeatable: (tool as { metadata?: Record<string, unknown> }).metadata?.[REPEATABLE] === true,
        }),
      );
    let begun = await begin();
    if (begun.duplicateOf) return this.#duplicate(begun, call, key);
    while (begun.decision === pb.Decision.DECISION_AWAIT_APPROVAL) {
      const decided: unknown = interrupt({
        savepointApproval: {
          threadId: key.threadId,
          checkpointNs: key.ns,
          toolUseId: key.toolUseId,
          name: call.name,
          args: call.args,
          inputDigest: Buffer.from(begun.effect?.inputDigest ?? []).toString("hex"),
        },
      });
      if (decided !== null && typeof decided === "object" && "approved" in decided) {
        const d = decided as { approved: unknown; note?: unknown; by?: unknown };
        await this.#conn.unary<graphPb.ApproveThreadEffectRequest, graphPb.ApproveThreadEffectResponse>(
          "approveThreadEffect",
          graphPb.ApproveThreadEffectRequest.fromPartial({
            threadId: key.threadId,
            checkpointNs: key.ns,
            toolUseId: key.toolUseId,
            decision: d.approved ? pb.ApprovalStatus.APPROVAL_STATUS_APPROVED : pb.ApprovalStatus.APPROVAL_STATUS_DENIED,
            inputDigest: Buffer.from(begun.effect?.inputDigest ?? []),
            note: typeof d.note === "string" ? d.note : "",
            decidedBy: typeof d.by === "string" ? d.by : "",
            requestId: randomUUID(),
          }),
        );
      }
      begun = await begin();
    }
    if (begun.decision === pb.Decision.DECISION_DENIED) {
      return new ToolMessage({ status: "error", name: call.name, tool_call_id: key.toolUseId, content: deniedText(begun.effect?.approval) });
    }
    const v = await this.#verified(begun, call, key);
    if (v) {
      // Recorded with ResolveThreadEffect: done is this call's answer from
      // now on; not done lets the next begin start a new attempt.
      if (v.status === "done") {
        const found = new ToolMessage({
          status: v.isError ? "error" : "success",
          name: call.name,
          tool_call_id: key.toolUseId,
          content: v.output as ToolMessage["content"],
        });
        await this.#resolve(key, v, await this.#dump(found));
        return found;
      }
      await this.#resolve(key, v, undefined);
      begun = await begin();
    }
    const effect = begun.effect;
    switch (begun.decision) {
      case pb.Decision.DECISION_REUSE:
        if (!effect?.output) throw new Error(`BeginThreadEffect answered REUSE for tool use ${key.toolUseId} without its output`);
        return this.#load(effect.output);
      case pb.Decision.DECISION_IN_DOUBT:
        return new ToolMessage({ status: "error", name: call.name, tool_call_id: key.toolUseId, content: inDoubtText(call.name, key.toolUseId) });
      case pb.Decision.DECISION_RUN:
        break;
      default:
        throw new Error(`BeginThreadEffect answered decision ${begun.decision} for tool use ${key.toolUseId}`);
    }
    // A begin the late-write rule dropped (the thread was deleted since its
    // checkpoint) stored nothing: the tool runs, and nothing is recorded.
    const attempt = begun.droppedLate ? 0 : (effect?.attempts ?? 0);
    const runConfig: LangGraphRunnableConfig = {
      ...config,
      configurable: { ...config.configurable, [IDEMPOTENCY_KEY]: effect?.idempotencyKey ?? "" },
    };
    let out: ToolMessage | Command;
    try {
      // ToolNode's own runTool runs the tool and wraps its output, on a view
      // of this node that holds only this tool and lets its errors through.
      const view = Object.create(this, { tools: { value: [tool] }, handleToolErrors: { value: false } }) as this;
      out = await super.runTool.call(view, call, runConfig, state);
    } catch (e) {
      if (attempt > 0) await this.#record(key, attempt, await this.#serde.dumpsTyped({ error: errorValue(e) }), true);
      // As ToolNode: an interrupt() or a drain passes through, other errors are answered when handleToolErrors.
      if (!this.handleToolErrors || isGraphInterrupt(e) || isDrained(e)) throw e;
      return new ToolMessage({
        status: "error",
        content: `Error: ${(e as Error).message}\n Please fix your mistakes.`,
        name: call.name,
        tool_call_id: call.id ?? "",
      });
    }
    if (attempt > 0) await this.#record(key, attempt, await this.#dump(out), false);
    return out;
  }

  /**
   * The definite answer of the call's verify hook to an IN_DOUBT begin;
   * undefined when it has none, it cannot tell, or it throws (a warning).
   */
  async #verified(begun: graphPb.BeginThreadEffectResponse, call: ToolCall, key: EffectKey): Promise<Exclude<Verified, { status: "unknown" }> | undefined> {
    const hook = this.#verify.get(call.name);
    if (begun.decision !== pb.Decision.DECISION_IN_DOUBT || !hook) return undefined;
    let v: Verified;
    try {
      v = await hook(begun.effect?.idempotencyKey ?? "", call.args);
    } catch (e) {
      process.emitWarning(`savepoint: verify of tool use ${key.toolUseId} of thread ${key.threadId} failed (${(e as Error)?.message ?? e}); it stays in doubt`, {
        code: "SAVEPOINT_VERIFY_FAILED",
      });
      return undefined;
    }
    if (v?.status === "done" || v?.status === "notDone") return v;
    process.emitWarning(`savepoint: verify could not tell whether tool use ${key.toolUseId} of thread ${key.threadId} took effect; it stays in doubt`, {
      code: "SAVEPOINT_VERIFY_UNKNOWN",
    });
    return undefined;
  }

  /** ResolveThreadEffect of v (resolver VERIFY), retried with its request id; output is the serialized ToolMessage for done. */
  async #resolve(key: EffectKey, v: Exclude<Verified, { status: "unknown" }>, output: [string, Uint8Array] | undefined): Promise<void> {
    const done = v.status === "done";
    await this.#conn.unary<graphPb.ResolveThreadEffectRequest, graphPb.ResolveThreadEffectResponse>(
      "resolveThreadEffect",
      graphPb.ResolveThreadEffectRequest.fromPartial({
        threadId: key.threadId,
        checkpointNs: key.ns,
        toolUseId: key.toolUseId,
        outcome: done ? pb.ResolutionOutcome.RESOLUTION_OUTCOME_DONE : pb.ResolutionOutcome.RESOLUTION_OUTCOME_NOT_DONE,
        output: output ? { type: output[0], data: Buffer.from(output[1]), totalSize: output[1].length } : undefined,
        isError: done ? (v.isError ?? false) : false,
        note: v.note ?? "",
        resolverKind: pb.ResolverKind.RESOLVER_KIND_VERIFY,
        resolvedBy: "verify",
        requestId: randomUUID(),
      }),
    );
  }

  /**
   * Records the attempt's outcome. A record that fails (after the
   * connection's retries) is a warning, not an error: the tool ran, and its
   * result is returned; the ledger keeps the attempt begun, so a later
   * begin of a side-effecting call answers it in doubt.
   */
  async #record(key: EffectKey, attempt: number, [type, data]: [string, Uint8Array], isError: boolean): Promise<void> {
    try {
      await this.#conn.unary<graphPb.RecordThreadEffectRequest, graphPb.RecordThreadEffectResponse>(
        "recordThreadEffect",
        graphPb.RecordThreadEffectRequest.fromPartial({
          threadId: key.threadId,
          checkpointNs: key.ns,
          toolUseId: key.toolUseId,
          attempt,
          output: { type, data: Buffer.from(data), totalSize: data.length },
          isError,
          requestId: randomUUID(),
        }),
      );
    } catch (e) {
      process.emitWarning(
        `savepoint: the outcome of tool use ${key.toolUseId} of thread ${key.threadId} could not be recorded (${(e as Error).message}); ` +
          "it ran, and a later run of a side-effecting call will report it in doubt",
        { code: "SAVEPOINT_RECORD_FAILED" },
      );
    }
  }

  /** A tool's ToolMessage or Command, serialized so that #load rebuilds it. */
  #dump(out: ToolMessage | Command): Promise<[string, Uint8Array]> {
    if (!isCommand(out)) return this.#serde.dumpsTyped({ message: out });
    const gotos = out.goto === undefined ? [] : Array.isArray(out.goto) ? out.goto : [out.goto];
    const goto = gotos.map((g) => (typeof g === "string" ? { node: g } : { send: { node: g.node, args: g.args, timeout: g.timeout } }));
    return this.#serde.dumpsTyped({ command: { graph: out.graph, update: out.update, resume: out.resume, goto } });
  }

  /** The ToolMessage or Command a recorded output holds. */
  /**
   * The answer to a call the daemon's duplicate-intent guard caught: the
   * daemon's text, the one wording every client gives the model, followed
   * for a REUSE answer by the earlier call's output; an error when the
   * earlier call is in doubt.
   */
  async #duplicate(begun: graphPb.BeginThreadEffectResponse, call: ToolCall, key: EffectKey): Promise<ToolMessage> {
    let text = begun.toolResultText;
    const earlier = begun.duplicateOf?.output;
    const reuse = begun.decision === pb.Decision.DECISION_REUSE && earlier !== undefined;
    if (reuse) {
      const out = await this.#load(earlier);
      const body = out instanceof ToolMessage ? out.content : out;
      text += typeof body === "string" ? body : JSON.stringify(body);
    }
    return new ToolMessage({ status: reuse ? "success" : "error", name: call.name, tool_call_id: key.toolUseId, content: text });
  }

  async #load(v: graphPb.TypedValue): Promise<ToolMessage | Command> {
    const got = (await this.#serde.loadsTyped(v.type, v.data)) as { message?: unknown; command?: Record<string, unknown> };
    if (got?.command) {
      const c = got.command;
      const goto = ((c.goto as { node?: string; send?: { node: string; args: unknown; timeout?: unknown } }[]) ?? []).map((g) =>
        g.send ? new Send(g.send.node, g.send.args, { timeout: g.send.timeout as SendOptions["timeout"] }) : (g.node as string),
      );
      return new Command({ graph: c.graph as string | undefined, update: c.update as CommandParams["update"], resume: c.resume, goto });
    }
    if (isBaseMessage(got?.message) && got.message.getType() === "tool") return got.message as ToolMessage;
    throw new Error(`a recorded tool output of type ${v.type} is neither a ToolMessage nor a Command`);
  }
}

/** LangGraph's isGraphDrained, where the installed version has it. */
function isDrained(e: unknown): boolean {
  const f = (langgraph as Record<string, unknown>).isGraphDrained;
  return typeof f === "function" && Boolean(f(e));
}

/** An error as recorded: its name and message. */
function errorValue(e: unknown): { name: string; message: string } {
  return e instanceof Error ? { name: e.name, message: e.message } : { name: "Error", message: String(e) };
}

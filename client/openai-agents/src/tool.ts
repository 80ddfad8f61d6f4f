/**
 * durableTool: the SDK's tool() with savepointd's side-effects ledger, for
 * runs whose session is a SavepointSession.
 */
import { type FunctionTool, type RunContext, tool, type ToolInputParameters, type ToolOptions } from "@openai/agents-core";

import { ask, content, DurableToolError, type Effect, EFFECT_CLASSES, findSession, registry, runCall, text, type VerifyHook, withKey } from "./ledger.js";

/** The SDK's error output for a failed tool when no errorFunction is given (the SDK's own default text). */
export const DEFAULT_ERROR_OUTPUT = "An error occurred while running the tool. Please try again.";

/** A thrown error that was already recorded and must reach the SDK as it is. */
const RAISED = new WeakSet<object>();

/** The options of durableTool: tool()'s, and what running the tool does. */
export type DurableToolOptions<TParameters extends ToolInputParameters, Context> = ToolOptions<TParameters, Context> & {
  /** "read_only", "idempotent" or "side_effect" (the default, the safe one): whether a call interrupted by a crash may be run again. */
  effect?: Effect;
  /**
   * The tool's verify hook, verify(idempotencyKey, input): on resume a call
   * in doubt is asked of it; { status: "done", output } is recorded
   * (ResolveEffect) and given as the call's output, { status: "notDone" }
   * runs the call again with the same key, and { status: "unknown" } or a
   * throw leaves it in doubt.
   */
  verify?: VerifyHook;
  /**
   * Exempts the tool's calls from the daemon's duplicate-intent guard
   * (docs/api.md "The same action under a new id"): set it for a tool that
   * may legitimately repeat a call with the same input after a restart.
   */
  repeatable?: boolean;
};

type AnyOptions = {
  name?: string;
  execute: (input: unknown, context?: RunContext<unknown>, details?: { toolCall?: { callId: string; name: string; arguments: string } }) => unknown;
  errorFunction?: ((context: RunContext<unknown>, error: unknown, details?: unknown) => unknown) | null;
  effect?: Effect;
  verify?: VerifyHook;
  repeatable?: boolean;
  outputSchema?: unknown;
  needsApproval?: boolean | ((runContext: RunContext<unknown>, input: unknown, callId?: string) => boolean | Promise<boolean>);
};

/**
 * The SDK's tool() (the same options, and effect) whose calls go through
 * savepointd's ledger when the run's session is a SavepointSession: a call is
 * never run twice unless effect says that is safe, and a call interrupted by
 * a crash is answered on resume by its recorded output, a re-run, or an error
 * output saying its outcome is unknown. The output is recorded as text: a
 * non-string return value as JSON; structured output (an array of the SDK's
 * text, image and file objects) reaches the model as such, on the first run
 * and on a resume. A failed call is recorded and answered by
 * errorFunction as tool() answers it (null rethrows, after recording). In a
 * run whose session is not a SavepointSession the tool throws
 * DurableToolError, which fails the run. With needsApproval, a call the
 * SDK stops the run for waits in savepointd too (`savepoint ls` counts it,
 * `savepoint approve` decides it, and the resumed RunState finds that
 * decision); a call the SDK approved (state.approve) is approved in
 * savepointd too (ApproveEffect, bound to its input), and its begin spends
 * that approval, so a replay of the approved RunState never runs it a
 * second time; a state.reject is recorded as a denial.
 */
export function durableTool<TParameters extends ToolInputParameters = undefined, Context = unknown>(
  options: DurableToolOptions<TParameters, Context>,
): FunctionTool<Context, TParameters, string> {
  const o = options as unknown as AnyOptions;
  const effect: Effect = o.effect ?? "side_effect";
  if (!(effect in EFFECT_CLASSES)) {
    throw new TypeError(`durableTool: effect must be "read_only", "idempotent" or "side_effect", not ${JSON.stringify(effect)}.`);
  }
  if (o.verify !== undefined && typeof o.verify !== "function") throw new TypeError("durableTool: verify must be a function (idempotencyKey, input) => Verified.");
  if (o.outputSchema !== undefined) throw new TypeError("durableTool: an outputSchema is not supported: a durable tool's output is text.");
  const onError =
    o.errorFunction === undefined ? () => DEFAULT_ERROR_OUTPUT : o.errorFunction === null ? null : o.errorFunction;
  let name = "";
  const approval = o.needsApproval !== undefined && o.needsApproval !== false;

  /** Runs the user's execute and turns its outcome into the recorded text; a failure the user wants rethrown is marked so. */
  const run = async (input: unknown, ctx: RunContext<unknown>, details: unknown): Promise<{ output: string; isError: boolean; error?: unknown }> => {
    try {
      return { output: text(await o.execute(input, ctx, details as never)), isError: false };
    } catch (err) {
      if (onError === null) return { output: err instanceof Error ? err.message : String(err), isError: true, error: err };
      return { output: text(await onError(ctx, err, details)), isError: true };
    }
  };
  const rethrow = (out: { output: string; isError?: boolean; error?: unknown }) => {
    if (out.error !== undefined) {
      if (out.error && typeof out.error === "object") RAISED.add(out.error);
      throw out.error;
    }
    // Structured output (text, image, file) reaches the model as such, on the first run and on a resume.
    return (out.isError ? out.output : content(out.output)) as string;
  };

  /** A re-run by a resume: the SDK's invoke parses the arguments; RERUN tells execute to skip the ledger (the resume does it). */
  const RERUN = Symbol("savepoint rerun");

  /**
   * The tool's own approval policy, and, when it asks, the call registered
   * with savepointd as waiting (ask), which may find it decided there
   * (`savepoint approve`): then the SDK runs the tool, whose run spends the
   * approval or answers the denial.
   */
  const needsApproval = async (runContext: RunContext<unknown>, input: unknown, callId?: string): Promise<boolean> => {
    const policy = o.needsApproval;
    if (!(typeof policy === "function" ? await policy(runContext, input, callId) : policy === true)) return false;
    const s = callId ? await findSession(runContext, callId) : undefined;
    if (!s || !callId) return true; // the SDK asks; run, the tool says it needs a SavepointSession
    return ask(s, { name, effect, repeatable: o.repeatable === true }, callId, JSON.stringify(input ?? {}));
  };

  const t = tool({
    ...(options as object),
    ...(approval ? { needsApproval } : {}),
    errorFunction: (ctx: RunContext<unknown>, err: unknown, details: unknown) => {
      if (err instanceof DurableToolError || (err && typeof err === "object" && RAISED.has(err))) throw err;
      if (onError === null) throw err;
      return onError(ctx, err, details);
    },
    execute: async (input: unknown, ctx?: RunContext<unknown>, details?: Record<string | symbol, unknown>) => {
      const runContext = ctx!;
      const rerun = details?.[RERUN] as { key: string; isError: boolean } | undefined;
      if (rerun) {
        const r = await withKey(rerun.key, () => run(input, runContext, details));
        rerun.isError = r.isError;
        return rethrow(r);
      }
      const call = (details?.toolCall ?? {}) as { callId?: string; arguments?: string };
      const s = await findSession(runContext, call.callId ?? "");
      if (!s) {
        throw new DurableToolError(
          `durable tool ${JSON.stringify(name)} ran in a run whose session is not a SavepointSession; pass { session: new SavepointSession(...) } to run().`,
        );
      }
      if (!call.callId) throw new DurableToolError(`durable tool ${JSON.stringify(name)} was called without a call id; it was not run.`);
      let raised: unknown;
      // A call the SDK approved (state.approve) is approved in savepointd too, and its begin spends that approval.
      const approved = approval && runContext.isToolApproved({ toolName: name, callId: call.callId }) === true;
      const out = await runCall(s, { name, effect, repeatable: o.repeatable === true, approved }, { callId: call.callId, arguments: call.arguments ?? "" }, async () => {
        const r = await run(input, runContext, details);
        raised = r.error;
        return r;
      });
      return rethrow({ output: out.output, isError: out.isError, error: raised });
    },
  } as never) as FunctionTool<Context, TParameters, string>;
  name = t.name;
  registry.set(name, {
    name,
    effect,
    verify: o.verify,
    // A resume has no RunState: a call of a tool that always needs approval runs only against the approval its run recorded.
    approval: o.needsApproval === true,
    rerun: async (ctx, call, key) => {
      const slot = { key, isError: false };
      const out = await t.invoke(ctx as RunContext<Context>, call.arguments, { toolCall: { type: "function_call", ...call }, [RERUN]: slot } as never);
      return { output: text(out), isError: slot.isError };
    },
  });
  return t;
}

/**
 * A LangGraph.js StateGraph on SavepointSaver, run as its own process by
 * graph.test.ts: `start` runs it until its interrupt() and then waits to be
 * killed; `resume` (a new process) shows the saved state and resumes it.
 * Each node appends its name to DIR/runs, so the test sees what ran, and
 * how often.
 *
 * Usage: node graphproc.js start|resume ADDR THREAD DIR
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";

import { Annotation, Command, END, interrupt, START, StateGraph } from "@langchain/langgraph";

import { SavepointSaver } from "../index.js";

const [mode, address, threadId, dir] = process.argv.slice(2);
const ran = (node: string) => appendFileSync(join(dir, "runs"), node + "\n");

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  answer: Annotation<string>(),
});

const graph = new StateGraph(State)
  .addNode("prepare", () => {
    ran("prepare");
    return { log: ["prepared"] };
  })
  .addNode("ask", () => {
    ran("ask");
    const reply = interrupt({ question: "send the report?" }) as string;
    return { log: [`asked: ${reply}`] };
  })
  .addNode("act", (s: typeof State.State) => {
    ran("act");
    return { log: ["acted"], answer: `done after ${s.log.length} steps` };
  })
  .addEdge(START, "prepare")
  .addEdge("prepare", "ask")
  .addEdge("ask", "act")
  .addEdge("act", END);

const saver = new SavepointSaver({ address });
const app = graph.compile({ checkpointer: saver });
const config = { configurable: { thread_id: threadId } };

if (mode === "start") {
  const out = await app.invoke({ log: ["start"] }, config);
  process.stdout.write(JSON.stringify({ interrupted: "__interrupt__" in out }) + "\n");
  // Wait to be killed (SIGKILL), with the interrupt saved.
  setInterval(() => undefined, 1000);
} else {
  const before = await app.getState(config);
  const interrupts = before.tasks.flatMap((t) => t.interrupts.map((i) => i.value));
  const out = await app.invoke(new Command({ resume: "yes" }), config);
  const after = await app.getState(config);
  process.stdout.write(JSON.stringify({ next: before.next, interrupts, log: out.log, answer: out.answer, nextAfter: after.next }) + "\n");
  saver.close();
}

// docrun prelude (TypeScript): `builder`, a one-node StateGraph that counts
// its runs in the thread's state, and its `input`.
import * as lg from "@langchain/langgraph";

const CountState = lg.Annotation.Root({ count: lg.Annotation<number>(), runs: lg.Annotation<number>() });
const builder = new lg.StateGraph(CountState)
  .addNode("step", (s: { runs?: number }) => ({ runs: (s.runs ?? 0) + 1 }))
  .addEdge(lg.START, "step")
  .addEdge("step", lg.END);
const input = { count: 0 };

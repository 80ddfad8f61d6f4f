// docrun prelude (TypeScript): what docs/frameworks/langgraphjs.md's
// one-line change takes as given: `builder`, a one-node StateGraph. After
// the block, the compiled graph runs a thread twice: the checkpointer keeps
// its state between the runs.
// INCLUDE langgraph_builder.ts
// BLOCK
const config = { configurable: { thread_id: "docrun-1" } };
await graph.invoke(input, config);
const second = await graph.invoke({ count: 0 }, config);
if (second.runs !== 2) throw new Error(`the second run saw ${JSON.stringify(second)}`);
console.log(second);

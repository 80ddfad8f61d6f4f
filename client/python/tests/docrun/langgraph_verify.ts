// docrun prelude (TypeScript): the tools and the builder of
// langgraph_tools.ts, DurableToolNode, and `billing`, which finds no
// invoice; after the block, the graph runs with its tools node.
// INCLUDE langgraph_tools.ts
import * as lgSavepoint from "@savepoint-dev/langgraph";

const { DurableToolNode } = lgSavepoint;
const billing = { find: async (_key: string) => undefined as string | undefined };
// BLOCK
// INCLUDE langgraph_run.ts

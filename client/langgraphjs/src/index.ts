/**
 * @savepoint-dev/langgraph: SavepointSaver, a LangGraph.js checkpointer
 * (a BaseCheckpointSaver of @langchain/langgraph-checkpoint) whose storage
 * is savepointd's GraphCheckpointService, and DurableToolNode, a ToolNode
 * whose tool calls go through the daemon's graph-thread ledger. README.md
 * shows the one-line changes from MemorySaver and ToolNode.
 */
export type { SaverOptions } from "./conn.js";
export { SavepointSaver, type SavepointSaverOptions } from "./saver.js";
export { DurableToolNode, type DurableToolNodeOptions, type EffectClassName, IDEMPOTENCY_KEY, inDoubtText, REPEATABLE, RUN_ID, type VerifyHook } from "./tools.js";

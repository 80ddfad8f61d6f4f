/**
 * @savepoint-dev/langgraph: SavepointSaver, a LangGraph.js checkpointer
 * (a BaseCheckpointSaver of @langchain/langgraph-checkpoint) whose storage
 * is savepointd's GraphCheckpointService. README.md shows the one-line
 * change from MemorySaver.
 */
export type { SaverOptions } from "./conn.js";
export { SavepointSaver, type SavepointSaverOptions } from "./saver.js";

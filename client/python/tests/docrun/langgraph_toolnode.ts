// docrun prelude (TypeScript): the tools and the builder of
// langgraph_tools.ts; after the block, which makes `tools`, the graph with
// that tools node runs a thread, and send_invoice ran once.
// INCLUDE langgraph_tools.ts
// BLOCK
// INCLUDE langgraph_run.ts

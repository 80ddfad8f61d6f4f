// docrun prelude (TypeScript): client/langgraphjs's README durable tools:
// the tools and the builder of langgraph_tools.ts; after the block,
// send_invoice ran once.
// INCLUDE langgraph_tools.ts
// BLOCK
if (sent.length !== 1) throw new Error(`send_invoice ran ${sent.length} times`);

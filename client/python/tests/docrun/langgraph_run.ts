{
  const graph = builder
    .addNode("tools", tools)
    .addEdge("tools", "agent")
    .compile({ checkpointer: new lgraph.MemorySaver() });
  const out = await graph.invoke(input, { configurable: { thread_id: "docrun-tools" }, durability: "sync" });
  if (sent.length !== 1 || out.messages.at(-1).content !== "done") throw new Error(`send_invoice ran ${sent.length} times; ${JSON.stringify(out.messages.at(-1))}`);
  console.log(out.messages.map((m: lcMessages.BaseMessage) => m.content));
}

// docrun prelude (TypeScript): what the effect-class and idempotency-key
// examples take as given: `tool`, a function `fn`, a `schema`, and
// `payments`, which checks that it is given the call's key. After the
// block, a graph whose agent calls the tool once runs it through a
// DurableToolNode, which gives it the key.
import * as lcMessages from "@langchain/core/messages";
import * as lcTools from "@langchain/core/tools";
import * as lgraph from "@langchain/langgraph";
import * as lgSavepoint from "@savepoint-dev/langgraph";

const tool = lcTools.tool;
const schema = { type: "object", properties: { name: { type: "string" }, amount: { type: "number" } } };
const fn = async ({ name }: { name?: string }) => `${name}: acme@example.com`;
const keys: string[] = [];
const payments = {
  charge: async ({ amount, idempotencyKey }: { amount: number; idempotencyKey: string }) => {
    if (typeof idempotencyKey !== "string" || idempotencyKey === "") throw new Error(`no idempotency key: ${idempotencyKey}`);
    keys.push(idempotencyKey);
    return `charged ${amount}`;
  },
};
// BLOCK
{
  const theTool = typeof charge !== "undefined" ? charge : lookupCustomer;
  const tools = new lgSavepoint.DurableToolNode([theTool]);
  let asked = false;
  const graph = new lgraph.StateGraph(lgraph.MessagesAnnotation)
    .addNode("agent", () => {
      if (asked) return { messages: [new lcMessages.AIMessage("done")] };
      asked = true;
      return { messages: [new lcMessages.AIMessage({ content: "", tool_calls: [{ id: "call_1", name: theTool.name, args: { name: "acme", amount: 5 } }] })] };
    })
    .addNode("tools", tools)
    .addEdge(lgraph.START, "agent")
    .addEdge("agent", "tools")
    .addEdge("tools", lgraph.END)
    .compile({ checkpointer: new lgraph.MemorySaver() });
  const out = await graph.invoke({ messages: [new lcMessages.HumanMessage("go")] }, { configurable: { thread_id: "docrun-tool" }, durability: "sync" });
  const result = out.messages.at(-1);
  if (result.getType() !== "tool" || result.status === "error") throw new Error(`the tool answered ${JSON.stringify(result)}`);
  if (typeof charge !== "undefined" && keys.length !== 1) throw new Error(`payments.charge ran ${keys.length} times`);
  console.log(result.content);
  tools.close();
}

// docrun prelude (TypeScript): the LangGraph.js examples' tools
// (lookupCustomer, read-only; sendInvoice, side-effecting, counting its
// runs in `sent`), `builder`, a graph whose scripted agent asks for both
// once and then answers, to which the example adds the "tools" node, and
// its `input`.
import * as lcMessages from "@langchain/core/messages";
import * as lcTools from "@langchain/core/tools";
import * as lgraph from "@langchain/langgraph";
import * as lgPrebuilt from "@langchain/langgraph/prebuilt";

const sent: string[] = [];
const lookupCustomer = lcTools.tool(async ({ name }: { name: string }) => `${name}: acme@example.com`, {
  name: "lookup_customer",
  description: "Look a customer up.",
  schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  metadata: { savepoint_effect: "read_only" },
});
const sendInvoice = lcTools.tool(
  async ({ invoice }: { invoice: number }) => {
    sent.push(String(invoice));
    return `invoice ${invoice} sent`;
  },
  {
    name: "send_invoice",
    description: "Send an invoice.",
    schema: { type: "object", properties: { invoice: { type: "number" } }, required: ["invoice"] },
    metadata: { savepoint_effect: "side_effect" },
  },
);
function scriptedAgent({ messages }: { messages: lcMessages.BaseMessage[] }) {
  if (messages.at(-1)!.getType() === "tool") return { messages: [new lcMessages.AIMessage("done")] };
  return {
    messages: [
      new lcMessages.AIMessage({
        content: "",
        tool_calls: [
          { id: "call_1", name: "lookup_customer", args: { name: "acme" } },
          { id: "call_2", name: "send_invoice", args: { invoice: 42 } },
        ],
      }),
    ],
  };
}
const builder = new lgraph.StateGraph(lgraph.MessagesAnnotation)
  .addNode("agent", scriptedAgent)
  .addEdge(lgraph.START, "agent")
  .addConditionalEdges("agent", lgPrebuilt.toolsCondition, ["tools", lgraph.END]);
const input = { messages: [new lcMessages.HumanMessage("invoice acme")] };

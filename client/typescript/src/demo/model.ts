/**
 * The verification harness's model: a stub of the Anthropic client whose
 * messages.create hands out a fixed queue of responses in order and fails
 * loudly once drained, instead of inventing an answer. The scripts are the
 * Go demo's (cmd/savepoint-demo/model.go), response for response, so both
 * demos save the same history.
 */

/** One Anthropic content block. */
export type Block =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

/** One model response, shaped like an Anthropic Messages API response. */
export interface Response {
  content: Block[];
  /** "tool_use" when content names tools to run, else "end_turn" (the final answer). */
  stop_reason: "tool_use" | "end_turn";
  usage: { input_tokens: number; output_tokens: number };
}

/** The part of the Anthropic client the agent uses. */
export interface ModelClient {
  messages: { create(req: { tools: unknown[]; messages: unknown[] }): Promise<Response> };
}

export const FINAL_ANSWER = "Report written to report.txt, task complete.";

export const REPORT_TEXT =
  "Q3 sales report, West region\n\n" +
  "Closed: Acme Corp ($18,000), Globex ($9,000), Initech ($15,000): $42,000 in total.\n" +
  "Open: Umbrella (quote, follow up in November), Hooli (legal review).\n" +
  "Source: sales-notes.txt, 43 words.\n";

const text = (t: string): Block => ({ type: "text", text: t });
const toolUse = (id: string, name: string, input: Record<string, unknown>): Block => ({ type: "tool_use", id, name, input });
const reply = (stop_reason: Response["stop_reason"], input_tokens: number, output_tokens: number, ...content: Block[]): Response => ({
  content,
  stop_reason,
  usage: { input_tokens, output_tokens },
});

const notes = { file: "sales-notes.txt" };
const report = { file: "report.txt", text: REPORT_TEXT };

/** The demo's fixed conversations, one response per turn. */
export const scripts: Record<string, Response[]> = {
  // parallel: the second turn names two tool calls at once, a read-only one
  // and a side-effecting one; they run one after the other, in order.
  parallel: [
    reply("tool_use", 100, 20, text("I'll start by reading the sales notes."), toolUse("toolu_01", "read_notes", notes)),
    reply(
      "tool_use",
      220,
      40,
      text("I'll count the words and write the report in one go."),
      toolUse("toolu_02", "count_words", notes),
      toolUse("toolu_03", "write_report", report),
    ),
    reply("end_turn", 80, 10, text(FINAL_ANSWER)),
  ],
  // seed: the seed's task, one tool per turn: read_notes, count_words,
  // write_report, then the final answer.
  seed: [
    reply("tool_use", 100, 20, text("I'll start by reading the sales notes."), toolUse("toolu_01", "read_notes", notes)),
    reply("tool_use", 150, 30, text("Now I'll count the words in the notes."), toolUse("toolu_02", "count_words", notes)),
    reply("tool_use", 220, 40, text("Writing the report."), toolUse("toolu_03", "write_report", report)),
    reply("end_turn", 80, 10, text(FINAL_ANSWER)),
  ],
};

export const scriptNames = Object.keys(scripts).sort();

/**
 * The seed's makeStubClient over the named script, continuing after turn
 * fromTurn: 0 for a fresh run, the checkpoint's turn on --resume.
 */
export function makeStubClient(name: string, fromTurn: number): ModelClient {
  const replies = scripts[name];
  if (!replies) throw new Error(`unknown script ${JSON.stringify(name)} (have ${scriptNames.join(", ")})`);
  const queue = replies.slice(Math.min(fromTurn, replies.length));
  let served = 0;
  let turn = fromTurn + 1;
  return {
    messages: {
      async create({ messages }) {
        const r = queue.shift();
        if (!r) {
          throw new Error(
            `scripted model ${JSON.stringify(name)}: response queue drained after ${served} responses: the script has no response for turn ${turn} (history of ${messages.length} messages)`,
          );
        }
        served++;
        turn++;
        return r;
      },
    },
  };
}

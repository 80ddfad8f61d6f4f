/**
 * A local fake of the Messages API, the TypeScript twin of
 * client/python/tests/fake_anthropic.py: stateless replies for the seed's
 * task, and a 400 for an unpaired tool_use/tool_result, a duplicate id, or
 * an assistant message not sent back exactly as it was returned.
 */
import { createServer, type Server } from "node:http";

type Block = { type: string; [k: string]: unknown };
type Msg = { role: string; content: string | Block[] };

export const REPORT = "Sales report: 3 deals closed, 12 words of notes.";
export const FINAL = "Report written to report.txt.";
export const UNSURE = "I could not confirm whether report.txt was written; please check it before writing it again.";

export function turn(k: number, hist: Msg[]): [Block[], string] {
  if (k === 0)
    return [
      [
        { type: "thinking", thinking: "Read the notes first.", signature: "sig-0" },
        { type: "text", text: "I will read the notes." },
        { type: "tool_use", id: "toolu_01", name: "read_notes", input: { path: "sales-notes.txt" } },
      ],
      "tool_use",
    ];
  if (k === 1) return [[{ type: "tool_use", id: "toolu_02", name: "count_words", input: { path: "sales-notes.txt" } }], "tool_use"];
  if (k === 2) return [[{ type: "tool_use", id: "toolu_03", name: "write_report", input: { text: REPORT } }], "tool_use"];
  const last = hist[hist.length - 1]?.content;
  const doubt = Array.isArray(last) && last.some((b) => b.tool_use_id === "toolu_03" && b.is_error);
  return [[{ type: "text", text: doubt ? UNSURE : FINAL }], "end_turn"];
}

export function pairingError(msgs: Msg[]): string {
  const seen = new Set<string>();
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    const blocks = Array.isArray(m.content) ? m.content : [];
    if (m.role === "assistant") {
      const ids = blocks.filter((b) => b.type === "tool_use").map((b) => String(b.id));
      for (const id of ids) {
        if (seen.has(id)) return `messages.${i}: tool_use ids must be unique: ${id}`;
        seen.add(id);
      }
      if (ids.length) {
        const next = msgs[i + 1];
        const res = next && Array.isArray(next.content) ? next.content.filter((b) => b.type === "tool_result").map((b) => String(b.tool_use_id)) : [];
        if (!next || next.role !== "user" || [...res].sort().join() !== [...ids].sort().join()) return `messages.${i + 1}: tool_use ids ${ids} need exactly one tool_result each, got ${res}`;
      }
    } else {
      const prev = msgs[i - 1];
      const prevIds = prev?.role === "assistant" && Array.isArray(prev.content) ? prev.content.filter((b) => b.type === "tool_use").map((b) => String(b.id)) : [];
      for (const b of blocks) if (b.type === "tool_result" && !prevIds.includes(String(b.tool_use_id))) return `messages.${i}: unexpected tool_use_id ${b.tool_use_id}`;
    }
  }
  return "";
}

export class Fake {
  readonly requests: { messages: Msg[] }[] = [];
  readonly errors: string[] = [];
  #server: Server;
  url = "";

  /** reply, when given, plays another agent: it gets a request's messages and returns the reply's content and stop_reason (the pairing checks still apply). */
  constructor(reply?: (msgs: Msg[]) => [Block[], string]) {
    this.#server = createServer((req, res) => {
      let data = "";
      req.on("data", (c) => (data += c));
      req.on("end", () => {
        const body = JSON.parse(data) as { messages: Msg[]; model: string };
        this.requests.push(body);
        let err = pairingError(body.messages);
        let k = 0;
        body.messages.forEach((m, i) => {
          if (m.role !== "assistant") return;
          if (!err && !reply && JSON.stringify(m.content) !== JSON.stringify(turn(k, body.messages.slice(0, i))[0])) err = `messages.${i}: assistant content differs from the reply it came from`;
          k++;
        });
        const send = (code: number, obj: unknown) => {
          res.writeHead(code, { "content-type": "application/json" });
          res.end(JSON.stringify(obj));
        };
        if (err) {
          this.errors.push(err);
          return send(400, { type: "error", error: { type: "invalid_request_error", message: err } });
        }
        const [content, reason] = reply ? reply(body.messages) : turn(k, body.messages);
        send(200, { id: `msg_${this.requests.length}`, type: "message", role: "assistant", model: body.model, content, stop_reason: reason, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 5 } });
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen(0, "127.0.0.1", r));
    const a = this.#server.address();
    this.url = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  }

  close(): Promise<void> {
    return new Promise((r) => this.#server.close(() => r()));
  }
}

// docrun prelude (TypeScript): what client/typescript's README loop takes
// as given: `anthropic`, Anthropic's client pointed at the fake Messages API
// of client/anthropic's tests (it asks for read_notes, count_words and
// write_report, then answers, and answers 400 for a history not sent back
// as it returned it), the tools' definitions and functions, their effect
// classes, the model and the task. After the block: report.txt was written
// once and the session is completed.
import AnthropicSDK from "@anthropic-ai/sdk";
import * as savepoint from "@savepoint-dev/client";
import * as fs from "node:fs";

const { Fake } = await import(`${process.env.DOCRUN_REPO}/client/anthropic/dist/tests/fake.js`);
const fake = new Fake();
await fake.start();
const anthropic = new AnthropicSDK({ baseURL: fake.url, apiKey: "sk-fake", maxRetries: 0 });
fs.writeFileSync("sales-notes.txt", "Q3: three deals closed.\n");
const model = "claude-sonnet-4-5";
const max_tokens = 1024;
const task = "Turn sales-notes.txt into a short report and write it to report.txt.";
const resume = false;
const file = { type: "object" as const, properties: { path: { type: "string" } }, required: ["path"] };
const tools = [
  { name: "read_notes", description: "Read a notes file.", input_schema: file },
  { name: "count_words", description: "Count the words of a file.", input_schema: file },
  { name: "write_report", description: "Write report.txt.", input_schema: { type: "object" as const, properties: { text: { type: "string" } }, required: ["text"] } },
];
const handlers: Record<string, (input: any, idempotencyKey: string) => Promise<string>> = {
  read_notes: async ({ path }) => fs.readFileSync(path, "utf8"),
  count_words: async ({ path }) => `${fs.readFileSync(path, "utf8").split(/\s+/).filter(Boolean).length} words`,
  write_report: async ({ text }) => {
    fs.appendFileSync("report.txt", text + "\n");
    return "report.txt written";
  },
};
const effectClasses: Record<string, savepoint.EffectClass> = {
  read_notes: savepoint.EffectClass.EFFECT_CLASS_READ_ONLY,
  count_words: savepoint.EffectClass.EFFECT_CLASS_READ_ONLY,
  write_report: savepoint.EffectClass.EFFECT_CLASS_SIDE_EFFECT,
};
// BLOCK
const written = fs.readFileSync("report.txt", "utf8").trim().split("\n");
if (written.length !== 1) throw new Error(`report.txt: ${JSON.stringify(written)}`);
if (fake.errors.length) throw new Error(`the fake refused: ${fake.errors}`);
const check = await savepoint.dial();
const done = await check.resume("sales-report");
if (done.status !== savepoint.SessionStatus.SESSION_STATUS_COMPLETED) throw new Error(`status ${done.status}`);
console.log(done.finalOutput);

// docrun prelude (TypeScript): what docs/frameworks/anthropic.md's examples
// take as given: the seed's three tools as betaTool objects, MODEL, TASK,
// `client`, and Anthropic's client pointed at the fake Messages API of
// client/anthropic's tests (read_notes, count_words, write_report, then the
// answer; a 400 for a history not sent back as it returned it). After the
// block: report.txt was written once and the fake refused nothing.
import * as sdk from "@anthropic-ai/sdk";
import * as jsonSchema from "@anthropic-ai/sdk/helpers/beta/json-schema";
import * as agents from "@savepoint-dev/anthropic";
import * as fs from "node:fs";

const { Fake } = await import(`${process.env.DOCRUN_REPO}/client/anthropic/dist/tests/fake.js`);
const fake = new Fake();
await fake.start();
process.env.ANTHROPIC_BASE_URL = fake.url;
process.env.ANTHROPIC_API_KEY = "sk-fake";
const Anthropic = sdk.default;
const { DurableAgent, durableBetaTool, durableToolRunner } = agents;
fs.writeFileSync("sales-notes.txt", "Q3: three deals closed.\n");
const MODEL = "claude-sonnet-4-5";
const TASK = "Turn sales-notes.txt into a short report and write it to report.txt.";
const client = new Anthropic();
const file = { type: "object", properties: { path: { type: "string" } }, required: ["path"] } as const;
const readNotes = jsonSchema.betaTool({ name: "read_notes", description: "Read a notes file.", inputSchema: file, run: ({ path }) => fs.readFileSync(path, "utf8") });
const countWords = agents.durable(
  jsonSchema.betaTool({
    name: "count_words",
    description: "Count the words of a file.",
    inputSchema: file,
    run: ({ path }) => `${fs.readFileSync(path, "utf8").split(/\s+/).filter(Boolean).length} words`,
  }),
  { effect: "read_only" },
);
const writeReport = jsonSchema.betaTool({
  name: "write_report",
  description: "Write the report to report.txt.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } as const,
  run: ({ text }) => {
    fs.appendFileSync("report.txt", text + "\n");
    return "report.txt written";
  },
});
// BLOCK
const written = fs.readFileSync("report.txt", "utf8").trim().split("\n");
if (written.length !== 1) throw new Error(`report.txt: ${JSON.stringify(written)}`);
if (fake.errors.length) throw new Error(`the fake refused: ${fake.errors}`);

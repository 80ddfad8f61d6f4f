// docrun prelude (TypeScript): what the README's agent loop takes as given:
// dial, the session's id, task and first message, a fake model that names
// one write_report call and then answers, and runTool. The block runs as
// the body of an agent function; its answer and the ledger are checked.
import * as savepoint from "@savepoint-dev/client";

const { dial } = savepoint;
const id = "docrun-loop";
const task = "Turn sales-notes.txt into a short report and write it to report.txt.";
const prompt: savepoint.Message = { role: "user", contentJson: JSON.stringify(task) };
let turns = 0;
const model = {
  async create(_messages: savepoint.Message[]) {
    turns++;
    if (turns === 1) {
      const content = [{ type: "tool_use", id: "toolu_01", name: "write_report", input: { text: "Q3: sales up 12%" } }];
      const toolUses: savepoint.ToolUse[] = [{ toolUseId: "toolu_01", name: "write_report", inputJson: JSON.stringify(content[0]!.input), effectClass: savepoint.EffectClass.EFFECT_CLASS_SIDE_EFFECT }];
      return { message: { role: "assistant", contentJson: JSON.stringify(content) }, toolUses, text: "" };
    }
    const content = [{ type: "text", text: "The report is written." }];
    return { message: { role: "assistant", contentJson: JSON.stringify(content) }, toolUses: [] as savepoint.ToolUse[], text: "The report is written." };
  },
};
let ran = 0;
const runTool = async (call: Required<savepoint.ToolUse>, _key: string) => {
  ran++;
  return `${call.name} done`;
};

async function agent(): Promise<string> {
  // BLOCK
}

const answer = await agent();
if (answer !== "The report is written." || ran !== 1) throw new Error(`answer ${JSON.stringify(answer)}, ${ran} tool runs`);
const check = await dial();
const { entries: effects } = await check.raw.listEffects({ sessionId: id });
check.close();
if (effects.length !== 1 || effects[0]!.toolUseId !== "toolu_01") throw new Error(`ledger: ${JSON.stringify(effects)}`);
console.log(answer);

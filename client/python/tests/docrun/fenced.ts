// docrun prelude (TypeScript): what client/typescript's README error
// handling takes as given: a session, the assistant message of a turn and
// its tool uses, and the error classes. After the block, Point A is saved.
import * as savepoint from "@savepoint-dev/client";

const { SessionFencedError, UnavailableError } = savepoint;
const sp = await savepoint.dial();
const session = await sp.start("docrun-fenced", "task", { messages: [{ role: "user", contentJson: '"hi"' }] });
const calls: savepoint.ToolUse[] = [{ toolUseId: "toolu_01", name: "write_report", inputJson: "{}" }];
const assistant: savepoint.Message = { role: "assistant", contentJson: JSON.stringify([{ type: "tool_use", id: "toolu_01", name: "write_report", input: {} }]) };
// BLOCK
if (session.pending.length !== 1) throw new Error(`pending: ${JSON.stringify(session.pending)}`);
sp.close();

/**
 * A second process sharing a session with the tests: `add ADDR SESSION TAG N`
 * adds N items one by one; `pop ADDR SESSION N` pops N items and prints each
 * popped item's text on its own line.
 */
import { SavepointSession } from "../index.js";

const [op, addr, id, a, b] = process.argv.slice(2);
const s = new SavepointSession(id, { address: addr });
if (op === "add") {
  for (let i = 0; i < Number(b); i++) await s.addItems([{ role: "user", content: `${a}-${i}` }]);
} else if (op === "pop") {
  for (let i = 0; i < Number(a); i++) {
    const it = (await s.popItem()) as { content?: string } | undefined;
    process.stdout.write((it?.content ?? "<none>") + "\n");
  }
}
await s.close();

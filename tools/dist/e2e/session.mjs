// One step of the end-to-end test (run.sh) for npm: dial() with no address.
// "first" starts session e2e and saves a turn; "resume" checks that the
// session holds what was acknowledged, saves another turn and checks again.
import { dial } from "@savepoint-dev/client";

const mode = process.argv[2];
const c = await dial();
const user = { role: "user", contentJson: JSON.stringify("hello") };
const turn = (n) => ({ role: "assistant", contentJson: JSON.stringify(`turn ${n}`) });
if (mode === "first") {
  const s = await c.start("e2e", "the task", { replace: true, messages: [user] });
  await s.pointA(turn(1), []);
  if (s.messages.length !== 2) throw new Error(`after one turn: ${JSON.stringify(s.messages)}`);
} else {
  const s = await c.resume("e2e");
  if (JSON.stringify(s.messages) !== JSON.stringify([user, turn(1)])) throw new Error(`the acknowledged turn is not there: ${JSON.stringify(s.messages)}`);
  await s.pointA(turn(2), []);
  const again = await c.resume("e2e");
  if (again.messages.length !== 3) throw new Error(`after the second turn: ${JSON.stringify(again.messages)}`);
}
c.close();
console.log("ok", mode);

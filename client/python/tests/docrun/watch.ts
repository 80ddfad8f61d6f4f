// docrun prelude (TypeScript): what client/typescript's README watch loop
// takes as given: render, which exits once a session started by another
// connection after the watch began is shown active.
import * as savepoint from "@savepoint-dev/client";

const other = await savepoint.dial();
let started = false;
function render(shown: Map<string, savepoint.pb.SessionSummary> | undefined): void {
  if (!started) {
    started = true;
    void other.start("docrun-watched", "watch me");
  }
  if (shown?.has("docrun-watched")) {
    console.log(`shown: ${[...shown.keys()].join(", ")}`);
    process.exit(0);
  }
}
setTimeout(() => {
  console.error("the watch never showed the new session");
  process.exit(1);
}, 30_000).unref();
// BLOCK

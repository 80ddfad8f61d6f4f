// launch(name) runs the binary `name` of the platform package npm installed
// with @savepoint-dev/client (@savepoint-dev/savepointd-OS-CPU), as esbuild's
// and biome's launchers do, with this process's arguments and stdio; it
// exits as the binary exits. Both `npx savepointd` and `npx savepoint` use it.
import { spawnSync } from "node:child_process";
import { findBinary, platformPackage } from "../dist/autostart.js";

export function launch(name) {
  const bin = findBinary(name);
  if (bin === undefined) {
    console.error(
      `${name}: no ${platformPackage()} is installed, and no ${name} is on PATH: npm installs it with @savepoint-dev/client on linux and darwin (x64, arm64), unless optional dependencies are off; elsewhere, see docs/install.md`,
    );
    process.exit(1);
  }
  const r = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
  if (r.error) {
    console.error(`${name}: ${bin}: ${r.error.message}`);
    process.exit(1);
  }
  if (r.signal) process.kill(process.pid, r.signal);
  process.exit(r.status ?? 1);
}

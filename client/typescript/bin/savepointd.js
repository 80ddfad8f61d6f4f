#!/usr/bin/env node
// Runs the savepointd binary of the platform package npm installed with
// @savepoint-dev/client (@savepoint-dev/savepointd-OS-CPU), as esbuild's and
// biome's launchers do, so that `npx savepointd` works in a project that
// installed the client.
import { spawnSync } from "node:child_process";
import { findBinary, platformPackage } from "../dist/autostart.js";

const bin = findBinary("savepointd");
if (bin === undefined) {
  console.error(
    `savepointd: no ${platformPackage()} is installed, and no savepointd is on PATH: npm installs it with @savepoint-dev/client on linux and darwin (x64, arm64), unless optional dependencies are off; elsewhere, see docs/install.md`,
  );
  process.exit(1);
}
const r = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (r.error) {
  console.error(`savepointd: ${bin}: ${r.error.message}`);
  process.exit(1);
}
if (r.signal) process.kill(process.pid, r.signal);
process.exit(r.status ?? 1);

/**
 * @openai/agents-core's own session tests (from a checkout of
 * openai-agents-js, $SDK_TESTS: its packages/agents-core/test folder) run
 * against the SDK release ../node_modules holds (the one package.json pins),
 * twice: in the project "memory" as they are, beside the SDK's own
 * MemorySession (the control), and in the project "savepoint" with every
 * MemorySession they build, or extend, a SavepointSession on a real
 * savepointd (memorySession.ts here). Their `../src/<module>` imports are
 * the package's dist/<module>.mjs, so both projects and SavepointSession
 * share one copy of the SDK. The tests in excluded.ts are left out of
 * "savepoint" only, each with its reason. make test-openai-agents-sdk-js
 * runs it.
 */
import { existsSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

import { defineConfig, type Plugin } from "vitest/config";

import { EXCLUDED, FILES } from "./excluded";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..");
const core = join(pkg, "node_modules", "@openai", "agents-core");
const tests = resolve(process.env.SDK_TESTS ?? join(here, "..", "..", "..", "bin", "openai-agents-js-tests", "test"));
const src = join(dirname(tests), "src");

/** Resolves the tests' imports of the SDK's sources to the installed package's modules; with swap, its MemorySession to SavepointSession's. */
function sdk(swap: boolean): Plugin {
  return {
    name: `savepoint-sdk-${swap ? "savepoint" : "memory"}`,
    enforce: "pre",
    resolveId(source, importer) {
      if (!importer || !source.startsWith(".") || !importer.startsWith(tests + sep)) return null;
      const target = resolve(dirname(importer), source);
      if (target !== src && !target.startsWith(src + sep)) return null;
      const mod = relative(src, target).split(sep).join("/").replace(/\.(js|ts)$/, "") || "index";
      if (swap && (mod === "index" || mod === "memory/memorySession")) return join(here, mod === "index" ? "index.ts" : "memorySession.ts");
      for (const f of [`dist/${mod}.mjs`, `dist/${mod}/index.mjs`]) if (existsSync(join(core, f))) return join(core, f);
      throw new Error(`the test ${importer} imports ${source}, which @openai/agents-core ${core} does not have`);
    },
  };
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function project(name: "memory" | "savepoint") {
  const swap = name === "savepoint";
  return {
    plugins: [sdk(swap)],
    resolve: { alias: { zod: join(pkg, "node_modules", "zod"), vitest: join(here, "node_modules", "vitest") } },
    test: {
      name,
      root: dirname(tests),
      include: FILES.map((f) => `test/${f}`),
      setupFiles: [join(here, "setup.ts")],
      globalSetup: swap ? [join(here, "daemon.ts")] : [],
      // vitest matches the pattern against "<describe blocks> <name>" (the file is not part of it).
      testNamePattern: swap && EXCLUDED.length ? new RegExp(`^(?!(${EXCLUDED.map((e) => escape(e.name.slice(e.name.indexOf(" > ") + 3))).join("|")})$)`) : undefined,
    },
  };
}

export default defineConfig({
  server: { fs: { strict: false } },
  test: {
    pool: "forks",
    maxWorkers: 2,
    projects: [project("memory"), project("savepoint")],
  },
});

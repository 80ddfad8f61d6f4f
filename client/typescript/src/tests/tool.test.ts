import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { EffectClass, effectClassFromAnnotations, type ToolAnnotations } from "../index.js";
import { repoRoot } from "./daemon.js";

/** The MCP annotation cases every client's effect-class mapping is tested against. */
const shared: { cases: { name: string; annotations: ToolAnnotations | null; effect: string }[] } = JSON.parse(
  readFileSync(join(repoRoot, "client/testdata/mcp_annotations.json"), "utf8"),
);

test("effect classes from MCP tool annotations: the shared cases (client/testdata/mcp_annotations.json)", () => {
  assert.ok(shared.cases.length >= 10, `only ${shared.cases.length} cases`);
  for (const c of shared.cases) {
    const want = EffectClass[`EFFECT_CLASS_${c.effect}` as keyof typeof EffectClass];
    assert.equal(typeof want, "number", `${c.name}: unknown effect ${c.effect}`);
    assert.equal(EffectClass[effectClassFromAnnotations(c.annotations)], EffectClass[want], c.name);
  }
});

test("effect classes from MCP tool annotations: no annotations object at all", () => {
  assert.equal(effectClassFromAnnotations(undefined), EffectClass.EFFECT_CLASS_SIDE_EFFECT);
  assert.equal(effectClassFromAnnotations(), EffectClass.EFFECT_CLASS_SIDE_EFFECT);
});

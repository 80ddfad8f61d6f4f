/**
 * The saver's retries follow the proto's declarations, as the TypeScript
 * client's do: every GraphCheckpointService method is retried after
 * UNAVAILABLE exactly when the client's RETRY_RULES (written from the
 * proto by make generate) allow it, so a rule kept here by hand, or a new
 * RPC the table lacks, fails this test.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { status as Code } from "@grpc/grpc-js";
import { graphPb, RETRY_RULES, retrySafe, UnavailableError } from "@savepoint-dev/client";

import { Connection, type GraphMethod, retryable } from "../conn.js";

const METHODS = Object.keys(graphPb.GraphCheckpointServiceService) as GraphMethod[];
const WITH_ID = { requestId: "00000000-0000-4000-8000-000000000001" };
const WITHOUT_ID = { requestId: "" };

test("every GraphCheckpointService method has a rule read from the proto", () => {
  assert.ok(METHODS.length >= 10, `only ${METHODS.length} methods`);
  for (const m of METHODS) {
    const rule = RETRY_RULES[graphPb.GraphCheckpointServiceService[m].path];
    assert.ok(rule === "always" || rule === "requestId" || rule === "never", `${m}: rule ${rule}`);
  }
});

test("retryable is the client's retrySafe for every method, with and without a request id", () => {
  for (const m of METHODS) {
    const path = graphPb.GraphCheckpointServiceService[m].path;
    for (const req of [WITH_ID, WITHOUT_ID, {}]) assert.equal(retryable(m, req), retrySafe(path, req), `${m} ${JSON.stringify(req)}`);
  }
  // The rules' three kinds, spelt out, so that the test cannot pass on a table that allows everything.
  assert.equal(retryable("getCheckpoint", {}), true);
  assert.equal(retryable("putCheckpoint", WITH_ID), true);
  assert.equal(retryable("putCheckpoint", WITHOUT_ID), false);
  assert.equal(retryable("listThreads", WITH_ID), false);
});

test("Connection.call tries a call as often as the rule allows", async () => {
  // No daemon is needed: the attempt fails with UNAVAILABLE by itself, and
  // reconnectWaitMs 0 sends at once.
  const conn = new Connection({ address: "unix:/nonexistent/savepoint.sock", reconnectWaitMs: 0, retry: { maxAttempts: 3, initialBackoffMs: 1, maxBackoffMs: 1 } });
  try {
    for (const m of METHODS) {
      for (const req of [WITH_ID, WITHOUT_ID]) {
        let tries = 0;
        await assert.rejects(
          conn.call(m, req, async () => {
            tries++;
            throw Object.assign(new Error("down"), { code: Code.UNAVAILABLE, details: "down", metadata: undefined });
          }),
          UnavailableError,
        );
        assert.equal(tries, retrySafe(graphPb.GraphCheckpointServiceService[m].path, req) ? 3 : 1, `${m} ${JSON.stringify(req)}`);
      }
    }
  } finally {
    conn.close();
  }
});

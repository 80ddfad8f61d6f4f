/**
 * Revision and epoch 2^63-1 through a real savepointd: its PostgreSQL store
 * (whose BIGINT keys make 2^63-1 the largest revision it keeps) is edited,
 * with savepointd stopped, so that a session stands at revision 2^63-1 and
 * epoch 2^63-2; the restarted daemon then answers with them, and the
 * client must decode them exactly (a JS number would round them to 2^63).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Client, dial, RevisionMismatchError, SessionFencedError } from "../index.js";
import { Daemon } from "./daemon.js";
import { Postgres, rowChecksum, u64key } from "./postgres.js";

const MAX = 2n ** 63n - 1n;
const ID = "u64pg";

let pg: Postgres;
let d: Daemon;
let c: Client;

before(async () => {
  pg = await Postgres.start();
  d = await Daemon.start(["--store-url", pg.url()]);
  c = await dial(d.addr);
});
after(async () => {
  c?.close();
  await d?.close();
  await pg?.close();
});

/** The JSON record of a row, as text. */
function record(table: string, where: string): string {
  const out = pg.query(`SELECT convert_from(record, 'UTF8') FROM savepoint.${table} WHERE ${where}`);
  assert.notEqual(out, "", `no ${table} row where ${where}`);
  return out;
}

/** Sets the uint64 fields of a JSON record to exact values (JSON.parse would round them). */
function withFields(json: string, fields: Record<string, bigint>): string {
  const o = JSON.parse(json) as Record<string, unknown>;
  for (const k of Object.keys(fields)) o[k] = `@${k}@`;
  let s = JSON.stringify(o);
  for (const [k, v] of Object.entries(fields)) s = s.replace(`"@${k}@"`, String(v));
  return s;
}

const hex = (b: Buffer) => `'\\x${b.toString("hex")}'::bytea`;

test("a session at revision 2^63-1 and epoch 2^63-1 in a real daemon's store reads back exactly", async () => {
  await c.start(ID, "t", { messages: [{ role: "user", contentJson: '"go"' }] });
  assert.equal(await d.stop(), 0);

  // The revision: a copy of revision 1 at revision MAX, epoch MAX-1.
  const key = Buffer.from(ID);
  const rev = Buffer.from(withFields(record("revisions", `session_id = ${hex(key)} AND revision = 1`), { revision: MAX, epoch: MAX - 1n }));
  pg.query(
    `INSERT INTO savepoint.revisions (session_id, revision, record, checksum) VALUES (${hex(key)}, ${MAX}, ${hex(rev)}, ${rowChecksum("revisions", [key, u64key(MAX)], rev)})`,
  );
  // The head: at revision MAX (its segments those of revision MAX), owned by epoch MAX-1.
  const head = Buffer.from(withFields(record("sessions", `session_id = ${hex(key)}`), { revision: MAX, epoch: MAX - 1n, segments_revision: MAX }));
  pg.query(`UPDATE savepoint.sessions SET record = ${hex(head)}, checksum = ${rowChecksum("sessions", [key], head)} WHERE session_id = ${hex(key)}`);

  await d.restart();
  const g = await c.raw.getSession({ sessionId: ID });
  assert.equal(g.checkpoint!.revision, MAX);
  assert.equal(g.checkpoint!.epoch, MAX - 1n);

  // Resume takes ownership: epoch MAX.
  const s = await c.resume(ID);
  assert.equal(s.revision, MAX);
  assert.equal(s.epoch, MAX);
  assert.deepEqual(s.messages, [{ role: "user", contentJson: '"go"' }]);

  // The daemon's refusals carry them in ErrorInfo metadata, decoded exactly.
  await assert.rejects(
    c.raw.saveCheckpoint({ sessionId: ID, expectedRevision: MAX, epoch: MAX - 1n, task: "t" }),
    (e: unknown) => e instanceof SessionFencedError && e.currentEpoch === MAX && e.currentRevision === MAX,
  );
  await assert.rejects(
    c.raw.saveCheckpoint({ sessionId: ID, expectedRevision: MAX - 1n, epoch: MAX, task: "t" }),
    (e: unknown) => e instanceof RevisionMismatchError && e.currentRevision === MAX,
  );
});

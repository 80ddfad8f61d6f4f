/**
 * Test helper: a real PostgreSQL server from the system's binaries
 * (/usr/lib/postgresql/N/bin), as daemon/pgstore/pgtest runs it: initdb into
 * a temporary directory, a unix socket there, a free loopback port, fsync
 * off; as root, initdb and postgres run as the postgres user.
 */
import { type ChildProcess, spawn, spawnSync, type SpawnSyncOptions } from "node:child_process";
import { chmodSync, chownSync, existsSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

import { shortTempDir } from "./daemon.js";

/** The newest /usr/lib/postgresql/N/bin with initdb and postgres, or undefined. */
function binDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => /^[0-9]+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  return versions.map((v) => join(root, v, "bin")).find((d) => existsSync(join(d, "initdb")) && existsSync(join(d, "postgres")));
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const r = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
  const g = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
  if (r.status !== 0 || g.status !== 0) throw new Error("running as root, PostgreSQL needs the postgres user to run as.");
  return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

export class Postgres {
  #proc: ChildProcess | undefined;

  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly bin: string,
    readonly user: { uid: number; gid: number } | undefined,
  ) {}

  /** The postgres:// URL of database db over the unix socket. */
  url(db = "postgres"): string {
    return `postgres://postgres@/${db}?host=${this.dir}&port=${this.port}`;
  }

  /** Runs initdb and starts postgres; it throws, saying why, when PostgreSQL is not installed. */
  static async start(): Promise<Postgres> {
    const bin = binDir();
    if (!bin) throw new Error("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): apt-get install postgresql.");
    const user = postgresUser();
    const dir = shortTempDir("pg");
    if (user) chownSync(dir, user.uid, user.gid);
    chmodSync(dir, 0o700);
    const pg = new Postgres(dir, await freePort(), bin, user);
    const init = spawnSync(join(bin, "initdb"), ["-D", join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"], pg.#opts());
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}${init.stdout}`);
    pg.#proc = spawn(
      join(bin, "postgres"),
      ["-D", join(dir, "data"), "-k", dir, "-h", "127.0.0.1", "-p", String(pg.port), "-c", "fsync=off", "-c", "full_page_writes=off"],
      { ...pg.#opts(), stdio: "ignore" },
    );
    const deadline = Date.now() + 60_000;
    while (pg.psql("SELECT 1").status !== 0) {
      if (pg.#proc.exitCode !== null || Date.now() > deadline) throw new Error("postgres did not start.");
      await new Promise((r) => setTimeout(r, 100));
    }
    return pg;
  }

  #opts(): SpawnSyncOptions {
    return { cwd: this.dir, encoding: "utf8", ...(this.user ? { uid: this.user.uid, gid: this.user.gid } : {}) };
  }

  /** Runs sql with psql (tuples only, unaligned, stopping at the first error). */
  psql(sql: string): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync("psql", ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", this.dir, "-p", String(this.port), "-U", "postgres", "-d", "postgres", "-c", sql], {
      encoding: "utf8",
    });
    return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
  }

  /** psql that must succeed; returns its output. */
  query(sql: string): string {
    const r = this.psql(sql);
    if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`);
    return r.stdout.trim();
  }

  /** Stops postgres and removes its directory. */
  async close(): Promise<void> {
    const p = this.#proc;
    if (p && p.exitCode === null) {
      const exited = new Promise((res) => p.once("exit", res));
      p.kill("SIGINT");
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const CRC32C = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

function crc32c(crc: number, data: Uint8Array): number {
  let c = ~crc >>> 0;
  for (const b of data) c = CRC32C[(c ^ b) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * The checksum column of a PostgreSQL store row, as daemon/pgstore/records.go
 * computes it: the CRC-32C of the table's name, each key part (its length as
 * 8 big-endian bytes, then the part) and the record.
 */
export function rowChecksum(table: string, key: Uint8Array[], record: Uint8Array): bigint {
  let c = crc32c(0, Buffer.from(table));
  for (const k of key) {
    const n = Buffer.alloc(8);
    n.writeBigUInt64BE(BigInt(k.length));
    c = crc32c(crc32c(c, n), k);
  }
  return BigInt(crc32c(c, record));
}

/** A uint64 key part: 8 big-endian bytes. */
export function u64key(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(v);
  return b;
}

import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, chmodSync, closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { connect } from "node:net";
import { delimiter, dirname, join } from "node:path";

import { Client as GrpcClient, status as Code, credentials, Metadata } from "@grpc/grpc-js";

import { defaultAddr, ENV_ADDR, grpcTarget, parseAddr, stateDir } from "./addr.js";
import { UnavailableError } from "./errors.js";
import { GetServerInfoRequest, type GetServerInfoResponse, SavepointServiceService } from "./gen/savepoint/v1/savepoint.js";

/** Set to "0", stops the client from starting savepointd on demand. */
export const ENV_AUTOSTART = "SAVEPOINT_AUTOSTART";
/** The savepointd binary to start on demand (unset: the platform package's, else savepointd on PATH). */
export const ENV_DAEMON_PATH = "SAVEPOINTD_PATH";

/** The system's daemon, the socket contrib/systemd's savepointd.socket creates. */
export const SYSTEM_ADDR = "unix:/run/savepoint/savepoint.sock";

/** How long to wait for the daemon started to report SERVING, in ms. */
const START_TIMEOUT_MS = 30_000;
/** Once the daemon started exited (another's took the lock), how long to wait for that one, in ms. */
const GRACE_MS = 5_000;

/**
 * Where a client connects: address, and the Autostart that started the
 * daemon there on demand and starts it again when it is gone (undefined
 * when the caller chose the address, start on demand is off, or the
 * system's daemon answered).
 */
export interface Resolved {
  address: string;
  autostart: Autostart | undefined;
}

/**
 * Resolves the address a client connects to, in the order every Savepoint
 * client follows (docs/install.md): addr when given; else $SAVEPOINT_ADDR;
 * else the per-user default when a daemon answers there; else the
 * system's daemon (SYSTEM_ADDR, the systemd socket) when one answers there;
 * else the per-user default after starting savepointd there on demand
 * (unless SAVEPOINT_AUTOSTART=0, or there is no per-user default, when it
 * is the default address as it is). dial and the LangGraph.js saver both
 * resolve with it. Rejects with UnavailableError when a start fails.
 */
export async function resolveAddress(addr?: string): Promise<Resolved> {
  let autostart = addr ? undefined : Autostart.fromEnv();
  if (autostart) {
    addr = await autostart.ensure();
    if (addr !== autostart.addr) autostart = undefined; // the system's daemon: nothing to start, now or later
  }
  return { address: addr || defaultAddr(), autostart };
}

/** The npm package carrying savepointd for this machine, as esbuild's are named. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
  return `@savepoint-dev/savepointd-${platform}-${arch}`;
}

/**
 * Returns the path of a binary ("savepointd" or "savepoint") of the
 * platform package installed for this machine (an optional dependency of
 * @savepoint-dev/client), else of the one on PATH; savepointd's is
 * SAVEPOINTD_PATH when set. Undefined when there is none.
 */
export function findBinary(name: "savepointd" | "savepoint", env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (name === "savepointd" && env[ENV_DAEMON_PATH]) return env[ENV_DAEMON_PATH];
  try {
    const pkg = createRequire(import.meta.url).resolve(`${platformPackage()}/package.json`);
    return join(dirname(pkg), "bin", name);
  } catch {
    // not installed: no package for this platform, or --no-optional
  }
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

function answers(sock: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(sock);
    s.setTimeout(1000);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
    s.once("timeout", () => {
      s.destroy();
      resolve(false);
    });
  });
}

/** Creates dir (0700) when missing; checks that this user owns it and no one else may enter it. */
function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) throw new Error(`${dir} belongs to uid ${st.uid}, not to this user (uid ${uid})`);
  if ((st.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

function unary(c: GrpcClient, path: string, ser: (v: never) => Buffer, de: (b: Buffer) => unknown, req: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    c.makeUnaryRequest(path, ser, de, req as never, new Metadata(), { deadline: Date.now() + 1000 }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

/** The daemon's pid once health says SERVING, else undefined. */
async function servingPid(target: string): Promise<number | undefined> {
  const c = new GrpcClient(target, credentials.createInsecure());
  try {
    const id = (b: Buffer) => b;
    // HealthCheckRequest{} is empty; HealthCheckResponse{status: SERVING} is field 1 = 1.
    const h = (await unary(c, "/grpc.health.v1.Health/Check", id as never, id, Buffer.alloc(0))) as Buffer;
    if (!h.equals(Buffer.from([0x08, 0x01]))) return undefined;
    const def = SavepointServiceService.getServerInfo;
    const info = (await unary(c, def.path, def.requestSerialize as never, def.responseDeserialize, GetServerInfoRequest.fromPartial({}))) as GetServerInfoResponse;
    return info.pid;
  } catch {
    return undefined;
  } finally {
    c.close();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function unavailable(message: string): UnavailableError {
  return new UnavailableError({ code: Code.UNAVAILABLE, message });
}

/**
 * The last lines the daemon wrote to its log from offset from on (from the start when the daemon
 * rotated the log meanwhile and it is shorter now), to end an error with.
 */
function logTail(path: string, from: number): string {
  try {
    const b = readFileSync(path);
    const lines = b.subarray(b.length < from ? 0 : from).toString("utf8").trimEnd().split("\n").slice(-10);
    if (lines.length === 0 || lines[0] === "") return "";
    return `; the last lines of its log (${path}):\n${lines.join("\n")}`;
  } catch {
    return "";
  }
}

/**
 * Starts savepointd on demand at the per-user default address, as the Go
 * and Python clients do (docs/install.md): detached, its data in
 * STATE/data and its log in STATE/savepointd.log.
 */
export class Autostart {
  /** The system's daemon fromEnv's autostarts look for: SYSTEM_ADDR; tests point it elsewhere. */
  static systemAddr = SYSTEM_ADDR;
  readonly sock: string;
  #pending: Promise<string> | undefined;

  constructor(
    readonly addr: string,
    readonly state: string,
    readonly systemAddr: string = Autostart.systemAddr,
  ) {
    this.sock = addr.slice("unix:".length);
  }

  /**
   * The autostart of a client that chose no address, or undefined when it
   * is off (SAVEPOINT_AUTOSTART=0), SAVEPOINT_ADDR chose the address, or
   * there is no per-user default (no XDG_STATE_HOME, no HOME).
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): Autostart | undefined {
    if (env[ENV_ADDR] || env[ENV_AUTOSTART] === "0" || process.platform === "win32") return undefined;
    const state = stateDir(env);
    return state ? new Autostart(defaultAddr(env), state) : undefined;
  }

  /**
   * Resolves to the address to use once something answers there: the
   * per-user default when a daemon answers there; else the system's daemon
   * (SYSTEM_ADDR, contrib/systemd) when one answers there, which starts
   * nothing; else the per-user default after starting savepointd there.
   * Rejects with UnavailableError, quoting the
   * last lines of its log when the daemon started failed. Concurrent calls
   * share one start.
   */
  ensure(): Promise<string> {
    this.#pending ??= this.#ensure().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #ensure(): Promise<string> {
    if (await answers(this.sock)) return this.addr;
    if (this.addr !== this.systemAddr && (await answers(this.systemAddr.slice("unix:".length)))) return this.systemAddr;
    await this.#start();
    return this.addr;
  }

  async #start(): Promise<void> {
    const bin = findBinary("savepointd");
    if (bin === undefined) {
      throw unavailable(
        `nothing answers at ${this.addr} and no savepointd was found to start on demand: ` +
          `no ${platformPackage()} is installed (packages exist for linux and darwin, x64 and arm64) and none is on PATH; ` +
          `install savepointd from a release archive or with make install (see docs/install.md), or set ${ENV_ADDR} to a running daemon's address`,
      );
    }
    try {
      privateDir(this.state);
    } catch (err) {
      throw unavailable(`cannot start savepointd on demand: ${(err as Error).message}`);
    }
    const logPath = join(this.state, "savepointd.log");
    const data = join(this.state, "data");
    const fd = openSync(logPath, "a", 0o600);
    const from = fstatSync(fd).size;
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("SAVEPOINT_")) env[k] = v;
    let child: ChildProcess;
    try {
      child = spawn(bin, ["--data-dir", data, "--listen", this.addr, "--started-on-demand", "--log-file", logPath], {
        detached: true, // its own session and process group
        stdio: ["ignore", fd, fd],
        cwd: this.state,
        env,
      });
    } finally {
      closeSync(fd);
    }
    let exited = false;
    const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
    child.once("error", () => (exited = true));
    child.once("exit", () => (exited = true));
    child.unref();
    const target = grpcTarget(parseAddr(this.addr));
    const end = Date.now() + START_TIMEOUT_MS;
    let graceEnd = Infinity;
    let pid: number | undefined;
    while (Date.now() < Math.min(end, graceEnd)) {
      if ((await answers(this.sock)) && (pid = await servingPid(target)) !== undefined) break;
      if (exited && graceEnd === Infinity) graceEnd = Date.now() + GRACE_MS;
      await sleep(50);
    }
    if (pid === undefined) {
      const why = await Promise.race([spawnError.then((e) => `: ${e.message}`), sleep(0).then(() => "")]);
      throw unavailable(`savepointd started on demand at ${this.addr} did not start${why}${logTail(logPath, from)}`);
    }
    if (pid === child.pid) {
      process.stderr.write(`savepoint: started savepointd on demand at ${this.addr} (pid ${pid}), data in ${data}, log in ${logPath}\n`);
    }
  }
}

import { isIP } from "node:net";
import { isAbsolute, join } from "node:path";

/** The environment variable that overrides the default address. */
export const ENV_ADDR = "SAVEPOINT_ADDR";

/**
 * Returns the address dial uses when given none: $SAVEPOINT_ADDR when set,
 * else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when XDG_RUNTIME_DIR is
 * set, else unix:$XDG_STATE_HOME/savepoint/savepoint.sock (XDG_STATE_HOME
 * defaulting to ~/.local/state; a directory the user owns, mode 0700), else,
 * with no home either, unix:/run/savepoint/savepoint.sock. savepointd and the
 * Go client resolve their default address the same way.
 */
export function defaultAddr(env: NodeJS.ProcessEnv = process.env): string {
  const addr = env[ENV_ADDR];
  if (addr) return addr;
  const dir = env.XDG_RUNTIME_DIR;
  if (dir) return "unix:" + join(dir, "savepoint", "savepoint.sock");
  const state = stateDir(env);
  if (state) return "unix:" + join(state, "savepoint.sock");
  return "unix:/run/savepoint/savepoint.sock";
}

/**
 * Returns the per-user directory of a daemon started on demand:
 * $XDG_STATE_HOME/savepoint when XDG_STATE_HOME is an absolute path, else
 * $HOME/.local/state/savepoint when HOME is set, else "".
 */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const state = env.XDG_STATE_HOME;
  if (state && isAbsolute(state)) return join(state, "savepoint");
  const home = env.HOME;
  if (home) return join(home, ".local", "state", "savepoint");
  return "";
}

/** A parsed address: a unix socket path, or a TCP host and port. */
export type Endpoint = { network: "unix"; path: string } | { network: "tcp"; host: string; port: string };

/**
 * Parses "unix:PATH" (also "unix://PATH" with an absolute PATH) or
 * "HOST:PORT" (an IPv6 host in brackets, a port in 0-65535), exactly as
 * savepointd and the Go client do (internal/addr); anything else throws an
 * Error whose message quotes the address and says what is wrong.
 */
export function parseAddr(addr: string): Endpoint {
  if (addr.startsWith("unix:")) {
    let path = addr.slice("unix:".length);
    if (path.startsWith("//")) {
      path = path.slice(2);
      if (!path.startsWith("/")) throw new Error(`savepoint: address ${quote(addr)}: unix:// must be followed by an absolute path.`);
    }
    if (path === "") throw new Error(`savepoint: address ${quote(addr)}: the socket path is empty.`);
    return { network: "unix", path };
  }
  const hp = splitHostPort(addr);
  if (hp === undefined || hp.host.includes("/")) {
    throw new Error(`savepoint: address ${quote(addr)} is neither unix:PATH nor HOST:PORT.`);
  }
  if (!/^[0-9]+$/.test(hp.port) || Number(hp.port) > 65535) {
    throw new Error(`savepoint: address ${quote(addr)}: port ${quote(hp.port)} is not a number in 0-65535.`);
  }
  if (hp.host === "") {
    throw new Error(`savepoint: address ${quote(addr)}: the host is empty; give a loopback address such as 127.0.0.1.`);
  }
  return { network: "tcp", ...hp };
}

/**
 * Go's net.SplitHostPort: "HOST:PORT" or "[HOST]:PORT" (the port may be
 * empty), undefined when malformed.
 */
function splitHostPort(s: string): { host: string; port: string } | undefined {
  const i = s.lastIndexOf(":");
  if (i < 0) return undefined;
  let host: string;
  let j = 0;
  let k = 0;
  if (s.startsWith("[")) {
    const end = s.indexOf("]");
    if (end < 0 || end + 1 !== i) return undefined; // the "]" must come just before the last ":"
    host = s.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = s.slice(0, i);
    if (host.includes(":")) return undefined;
  }
  if (s.slice(j).includes("[") || s.slice(k).includes("]")) return undefined;
  return { host, port: s.slice(i + 1) };
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\x07": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\v": "\\v",
};

/**
 * Quotes s as Go's %q does, for the error texts every client shares: in
 * double quotes, with backslash escapes for quotes, backslashes and ASCII
 * control characters.
 */
function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ESCAPES[ch] !== undefined) out += ESCAPES[ch];
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + '"';
}

/** The grpc-js target for an endpoint. */
export function grpcTarget(ep: Endpoint): string {
  // grpc-js takes the rest of "unix:PATH" as the path, verbatim.
  if (ep.network === "unix") return "unix:" + ep.path;
  return isIP(ep.host) === 6 ? `ipv6:[${ep.host}]:${ep.port}` : `dns:${ep.host}:${ep.port}`;
}

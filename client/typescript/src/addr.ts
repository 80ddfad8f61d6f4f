import { isIP } from "node:net";
import { join } from "node:path";

/** The environment variable that overrides the default address. */
export const ENV_ADDR = "SAVEPOINT_ADDR";

/**
 * Returns the address dial uses when given none: $SAVEPOINT_ADDR when set,
 * else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when XDG_RUNTIME_DIR is
 * set, else unix:/run/savepoint/savepoint.sock. savepointd and the Go client
 * resolve their default address the same way.
 */
export function defaultAddr(env: NodeJS.ProcessEnv = process.env): string {
  const addr = env[ENV_ADDR];
  if (addr) return addr;
  const dir = env.XDG_RUNTIME_DIR;
  if (dir) return "unix:" + join(dir, "savepoint", "savepoint.sock");
  return "unix:/run/savepoint/savepoint.sock";
}

/** A parsed address: a unix socket path, or a TCP host and port. */
export type Endpoint = { network: "unix"; path: string } | { network: "tcp"; host: string; port: string };

/**
 * Parses "unix:PATH" (also "unix://PATH" with an absolute PATH) or
 * "HOST:PORT" (an IPv6 host in brackets), the syntax of every Savepoint
 * client and of savepointd's --listen; anything else throws.
 */
export function parseAddr(addr: string): Endpoint {
  if (addr.startsWith("unix:")) {
    let path = addr.slice("unix:".length);
    if (path.startsWith("//")) {
      path = path.slice(2);
      if (!path.startsWith("/")) throw new Error(`savepoint: address ${JSON.stringify(addr)}: unix://PATH needs an absolute PATH`);
    }
    if (path === "") throw new Error(`savepoint: address ${JSON.stringify(addr)}: empty socket path`);
    return { network: "unix", path };
  }
  const hp = splitHostPort(addr);
  if (hp === undefined || hp.port === "" || hp.host.includes("/")) {
    throw new Error(`savepoint: address ${JSON.stringify(addr)} is neither unix:PATH nor HOST:PORT`);
  }
  if (!/^[0-9]+$/.test(hp.port) || Number(hp.port) > 65535) {
    throw new Error(`savepoint: address ${JSON.stringify(addr)}: port ${JSON.stringify(hp.port)} is not a number in 0-65535`);
  }
  if (hp.host === "") {
    throw new Error(`savepoint: address ${JSON.stringify(addr)}: the host is empty; give a loopback address such as 127.0.0.1`);
  }
  return { network: "tcp", ...hp };
}

/** Go's net.SplitHostPort: "host:port" or "[host]:port", undefined if malformed. */
function splitHostPort(s: string): { host: string; port: string } | undefined {
  const i = s.lastIndexOf(":");
  if (i < 0) return undefined;
  let host = s.slice(0, i);
  const port = s.slice(i + 1);
  if (host.startsWith("[")) {
    if (!host.endsWith("]")) return undefined;
    host = host.slice(1, -1);
    if (host.includes("[") || host.includes("]")) return undefined;
  } else if (host.includes(":") || host.includes("[") || host.includes("]") || port.includes("]")) {
    return undefined;
  }
  return { host, port };
}

/** The grpc-js target for an endpoint. */
export function grpcTarget(ep: Endpoint): string {
  // grpc-js takes the rest of "unix:PATH" as the path, verbatim.
  if (ep.network === "unix") return "unix:" + ep.path;
  return isIP(ep.host) === 6 ? `ipv6:[${ep.host}]:${ep.port}` : `dns:${ep.host}:${ep.port}`;
}

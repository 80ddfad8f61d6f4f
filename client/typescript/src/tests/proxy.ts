/**
 * A grpc-js server in front of a real savepointd that forwards every call
 * and records it, and can fail calls on purpose: UNAVAILABLE before
 * forwarding (the daemon never saw it) or after (applied, then the answer
 * lost). It can listen with TLS, to test the client's TLS against a real
 * daemon behind it.
 */
import { join } from "node:path";
import { rmSync } from "node:fs";

import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServiceError,
  status as Code,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";

import { unaryMethods } from "../client.js";
import type { Method } from "../types.js";
import { SavepointServiceClient, SavepointServiceService } from "../gen/savepoint/v1/savepoint.js";
import { shortTempDir } from "./daemon.js";

export interface Seen {
  method: Method;
  request: Record<string, unknown>;
  at: number;
}

export interface Faults {
  /** Answer the next N calls UNAVAILABLE without forwarding them. */
  before?: number;
  /** Forward the next N calls, then answer UNAVAILABLE. */
  after?: number;
}

export class FaultProxy {
  readonly seen: Seen[] = [];
  readonly faults: Partial<Record<Method, Faults>> = {};
  readonly addr: string;
  readonly #server: Server;
  readonly #upstream: SavepointServiceClient;
  readonly #dir: string | undefined;

  private constructor(server: Server, upstream: SavepointServiceClient, addr: string, dir?: string) {
    this.#server = server;
    this.#upstream = upstream;
    this.addr = addr;
    this.#dir = dir;
  }

  /**
   * Starts a proxy to the daemon at upstream: on a unix socket, or with tls
   * on 127.0.0.1 with that server certificate, requiring client
   * certificates signed by clientCa when it is given.
   */
  static async start(upstream: string, tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer }): Promise<FaultProxy> {
    const server = new Server();
    const client = new SavepointServiceClient(upstream, credentials.createInsecure());
    let dir: string | undefined;
    let bindAddr: string;
    let creds = ServerCredentials.createInsecure();
    if (tls) {
      bindAddr = "127.0.0.1:0";
      creds = ServerCredentials.createSsl(tls.clientCa ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.clientCa !== undefined);
    } else {
      dir = shortTempDir("spp");
      bindAddr = "unix:" + join(dir, "p.sock");
    }
    const port = await new Promise<number>((res, rej) => server.bindAsync(bindAddr, creds, (err, p) => (err ? rej(err) : res(p))));
    const p = new FaultProxy(server, client, tls ? `127.0.0.1:${port}` : bindAddr, dir);
    server.addService(SavepointServiceService, p.#handlers());
    return p;
  }

  /** The calls of one method the proxy saw, in order. */
  calls(method: Method): Seen[] {
    return this.seen.filter((s) => s.method === method);
  }

  #handlers(): UntypedServiceImplementation {
    const impl: UntypedServiceImplementation = {};
    for (const m of unaryMethods) {
      const def = SavepointServiceService[m];
      impl[m] = (call: { request: Record<string, unknown> }, cb: (err: Partial<ServiceError> | null, resp?: unknown) => void) => {
        this.seen.push({ method: m, request: call.request, at: Date.now() });
        const f = this.faults[m];
        const unavailable = { code: Code.UNAVAILABLE, details: `proxy: ${m} failed on purpose` };
        if (f?.before) {
          f.before--;
          cb(unavailable);
          return;
        }
        this.#upstream.makeUnaryRequest(
          def.path,
          def.requestSerialize as (v: unknown) => Buffer,
          def.responseDeserialize as (b: Buffer) => unknown,
          call.request,
          new Metadata(),
          {},
          (err, resp) => {
            if (f?.after) {
              f.after--;
              cb(unavailable);
            } else if (err) cb({ code: err.code, details: err.details, metadata: err.metadata });
            else cb(null, resp);
          },
        );
      };
    }
    return impl;
  }

  async close(): Promise<void> {
    this.#upstream.close();
    await new Promise<void>((res) => this.#server.tryShutdown(() => res()));
    if (this.#dir) rmSync(this.#dir, { recursive: true, force: true });
  }
}

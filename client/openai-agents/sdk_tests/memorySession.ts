/**
 * What the project "savepoint" gives the SDK's tests for MemorySession: a
 * SavepointSession on the daemon daemon.ts started, a session of its own per
 * object (as every MemorySession is a store of its own), holding the
 * initialItems before any method runs. getSessionId answers the id the test
 * gave; the savepointd session id is unique to the object.
 */
import { randomUUID } from "node:crypto";

import type { AgentInputItem, Logger, RunContext, SessionHistoryRewriteArgs, SessionHistoryTransactionArgs } from "@openai/agents-core";

import { SavepointSession } from "../src/session";

export interface MemorySessionOptions {
  sessionId?: string;
  initialItems?: AgentInputItem[];
  logger?: Logger;
}

export class MemorySession extends SavepointSession {
  readonly #id: string;
  #ready: Promise<void> | undefined;

  constructor(options: MemorySessionOptions = {}) {
    const address = process.env.SAVEPOINT_ADDR;
    if (!address) throw new Error("SAVEPOINT_ADDR is not set: the project 'savepoint' starts savepointd in daemon.ts");
    super(`sdk-${randomUUID()}`, { address });
    this.#id = options.sessionId ?? randomUUID();
    const seed = options.initialItems?.map((it) => structuredClone(it)) ?? [];
    if (seed.length > 0) this.#ready = super.addItems(seed);
  }

  /** Waits until the initial items are saved. */
  async #seeded(): Promise<void> {
    if (this.#ready) await this.#ready;
  }

  override async getSessionId(): Promise<string> {
    return this.#id;
  }

  override async getItems(limit?: number, runContext?: RunContext<unknown>): Promise<AgentInputItem[]> {
    await this.#seeded();
    return super.getItems(limit, runContext);
  }

  override async addItems(items: AgentInputItem[], runContext?: RunContext<unknown>): Promise<void> {
    await this.#seeded();
    return super.addItems(items, runContext);
  }

  override async popItem(runContext?: RunContext<unknown>): Promise<AgentInputItem | undefined> {
    await this.#seeded();
    return super.popItem(runContext);
  }

  override async clearSession(runContext?: RunContext<unknown>): Promise<void> {
    await this.#seeded();
    return super.clearSession(runContext);
  }

  override async applyHistoryTransaction(args: SessionHistoryTransactionArgs, runContext?: RunContext<unknown>): Promise<void> {
    await this.#seeded();
    return super.applyHistoryTransaction(args, runContext);
  }

  override async applyHistoryMutations(args: SessionHistoryRewriteArgs): Promise<void> {
    await this.#seeded();
    return super.applyHistoryMutations(args);
  }
}

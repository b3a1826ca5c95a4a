/**
 * A simulated client: registers a session, then sends one request at a time (create or delete a
 * stream), retrying the same request (same number, same checksum) on timeout against the next
 * replica until a reply arrives. After an eviction it starts over with a new client id, so the
 * (client, request) pairs the checkers see are never reused.
 */
import { Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Prng } from '../stdx/prng.js';
import { buildFrame } from '../vsr/frame.js';
import { Operation, type EvictionHeader, type ReplyHeader } from '../vsr/header.js';
import { decodeRegisterPayload, encodeRegisterBody, parseResultBody } from '../vsr/reply.js';
import { TestOperation } from './test-state-machine.js';

export interface ClientRequest {
  readonly client: bigint;
  readonly request: number;
  readonly operation: number;
  readonly body: Uint8Array;
  readonly frame: Uint8Array;
}

export interface ClientOptions {
  readonly cluster: bigint;
  readonly replicaCount: number;
  /** Ticks before a request is resent to the next replica. */
  readonly requestTimeoutTicks: number;
  /** Requests this client sends before it goes idle. */
  readonly requestsMax: number;
  /** The group its requests name (absent: 0, the metadata group clients address directly). */
  readonly group?: bigint;
  /** The next request's operation and body (absent: create or delete a test stream). */
  readonly operation?: (prng: Prng) => [number, Uint8Array];
}

export class SimClient {
  readonly index: number;
  client: bigint;
  private readonly prng: Prng;
  private readonly kernels: Kernels;
  private readonly options: ClientOptions;
  session = 0;
  private requestNext = 1;
  inflight: ClientRequest | null = null;
  private sentAtTick = 0;
  private target = 0;
  requestsSent = 0;
  repliesReceived = 0;
  evictions = 0;
  private now = 0;

  constructor(index: number, prng: Prng, kernels: Kernels, options: ClientOptions) {
    this.index = index;
    this.prng = prng;
    this.kernels = kernels;
    this.options = options;
    this.client = prng.u128();
    this.target = prng.int(options.replicaCount);
  }

  get idle(): boolean {
    const allSent = this.requestsSent >= this.options.requestsMax;
    return this.inflight === null && allSent && this.session > 0;
  }

  /** Scenarios: the in-flight request is retried against `target` on the next tick. */
  retryNow(target: number): void {
    this.target = (target + this.options.replicaCount - 1) % this.options.replicaCount;
    this.sentAtTick = Number.NEGATIVE_INFINITY;
  }

  /** Returns (target replica, frame) when something must be sent this tick. */
  tick(): { target: number; frame: Uint8Array } | null {
    this.now += 1;
    if (this.inflight !== null) {
      if (this.now - this.sentAtTick < this.options.requestTimeoutTicks) return null;
      this.target = (this.target + 1) % this.options.replicaCount;
      this.sentAtTick = this.now;
      return { target: this.target, frame: this.inflight.frame };
    }
    if (this.session === 0) {
      this.inflight = this.build(Operation.register, 0, encodeRegisterBody(0));
    } else if (this.requestsSent < this.options.requestsMax) {
      this.inflight = this.build(...this.randomOperation());
      this.requestsSent += 1;
    } else {
      return null;
    }
    this.sentAtTick = this.now;
    return { target: this.target, frame: this.inflight.frame };
  }

  private randomOperation(): [number, number, Uint8Array] {
    const request = this.requestNext++;
    if (this.options.operation !== undefined) {
      const [operation, body] = this.options.operation(this.prng);
      return [operation, request, body];
    }
    if (this.prng.chance(0.3)) {
      const body = new Uint8Array(4);
      new DataView(body.buffer).setUint32(0, this.prng.int(8), true);
      return [TestOperation.deleteStream, request, body];
    }
    const name = new TextEncoder().encode(`stream-${this.prng.int(12)}`);
    return [TestOperation.createStream, request, name];
  }

  private build(operation: number, request: number, body: Uint8Array): ClientRequest {
    const frame = buildFrame(
      this.kernels,
      {
        command: Command.request,
        cluster: this.options.cluster,
        view: 0,
        release: 0,
        replica: 0,
        client: this.client,
        requestChecksum: operation === Operation.register ? 0n : this.kernels.xxh3_64(body),
        timestamp: 0,
        request,
        operation,
        session: operation === Operation.register ? 0 : this.session,
        userId: 0,
        legacyCommand: 0,
        group: this.options.group ?? 0n,
      },
      body,
    );
    return { client: this.client, request, operation, body, frame };
  }

  /** A reply addressed to this client; returns the request it completes, if any. */
  onReply(header: ReplyHeader, body: Uint8Array): ClientRequest | null {
    const inflight = this.inflight;
    if (inflight === null) return null;
    if (header.client !== this.client || header.request !== inflight.request) return null;
    if (header.operation !== inflight.operation && header.status === 0) return null;
    this.inflight = null;
    this.repliesReceived += 1;
    if (inflight.operation === Operation.register) {
      const parsed = parseResultBody(body);
      assert(parsed.ok, 'a register reply succeeds');
      const payload = decodeRegisterPayload(parsed.payload);
      assert(payload !== null, 'a register reply carries the session');
      this.session = payload.session;
    }
    return inflight;
  }

  /** Evicted: forget the session and come back as a new client. */
  onEviction(header: EvictionHeader): void {
    if (header.client !== this.client) return;
    this.evictions += 1;
    this.client = this.prng.u128();
    this.session = 0;
    this.inflight = null;
    this.requestNext = 1;
  }
}

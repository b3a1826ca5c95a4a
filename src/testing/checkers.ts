/**
 * Online checkers for the simulator (TigerBeetle's StateChecker and auditor, simplified):
 *
 * - Commit history: there is one canonical, hash-chained history of committed prepares. Every
 *   replica's every applied op must match it (same identity, same requests in the same order, same
 *   reply bytes). A batch prepare carries several requests at one op; each is checked on its own.
 * - Replies: every reply a client accepts must be the canonical reply of its op, and must answer
 *   the request the client sent.
 * - Model: an independent reference model of the test state machine, applied in canonical order,
 *   must produce the same result code and payload as the replicas did.
 * - Exactly once: no (client, request) is committed twice.
 * - Checkpoints: every replica's checkpoint id at op N is the same.
 * - Durability: every reply a client received names an op that every converged replica applied.
 */
import { HEADER_SIZE } from '../constants.js';
import type { Prng } from '../stdx/prng.js';
import { Operation, decodeHeader, type PrepareHeader } from '../vsr/header.js';
import type { BatchPosition } from '../vsr/replica.js';
import { parseResultBody } from '../vsr/reply.js';
import {
  TEST_ERROR_INVALID,
  TEST_ERROR_NAME_EXISTS,
  TEST_ERROR_NOT_FOUND,
  TestOperation,
} from './test-state-machine.js';

export class CheckFailure extends Error {
  override readonly name = 'CheckFailure';
}

interface CanonicalRequest {
  readonly client: bigint;
  readonly request: number;
  readonly operation: number;
  readonly reply: Uint8Array;
  /** Held until the reference model applied it. */
  body: Uint8Array | null;
}

interface CanonicalEntry {
  readonly checksum: bigint;
  readonly parent: bigint;
  /** Requests the prepare carries (1, or a batch's count). */
  readonly count: number;
  /** In apply order; complete once `count` long (the first replica to apply fills it at once). */
  readonly requests: CanonicalRequest[];
}

const PLAIN: BatchPosition = { index: 0, count: 1 };

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let index = 0; index < a.byteLength; index++) if (a[index] !== b[index]) return false;
  return true;
}

/**
 * What the reply checker holds replicas to: an independent model of the plane's state machine,
 * applied to every committed request in commit order, whose result every reply must equal.
 */
export interface SimModel {
  apply(operation: number, body: Uint8Array): { errorCode: number; payload: Uint8Array };
}

/** A plane's client side under the simulator: what clients send, and the model of the replies. */
export interface SimWorkload {
  /** The next request's operation and body (`prng` is the client's own stream). */
  readonly operation: (prng: Prng) => [number, Uint8Array];
  readonly model: () => SimModel;
}

/** An independent model of TestStateMachine: names and lowest-free ids. */
export class ReferenceModel implements SimModel {
  private readonly streams = new Map<number, string>();

  apply(operation: number, body: Uint8Array): { errorCode: number; payload: Uint8Array } {
    if (operation === TestOperation.createStream) {
      let name: string;
      try {
        name = new TextDecoder('utf-8', { fatal: true }).decode(body);
      } catch {
        return { errorCode: TEST_ERROR_INVALID, payload: new Uint8Array(0) };
      }
      if (name.length === 0 || body.byteLength > 64) {
        return { errorCode: TEST_ERROR_INVALID, payload: new Uint8Array(0) };
      }
      if ([...this.streams.values()].includes(name)) {
        return { errorCode: TEST_ERROR_NAME_EXISTS, payload: new Uint8Array(0) };
      }
      let id = 0;
      while (this.streams.has(id)) id++;
      this.streams.set(id, name);
      const payload = new Uint8Array([id & 0xff, (id >>> 8) & 0xff, (id >>> 16) & 0xff, id >>> 24]);
      return { errorCode: 0, payload };
    }
    if (operation === TestOperation.deleteStream) {
      if (body.byteLength !== 4) {
        return { errorCode: TEST_ERROR_INVALID, payload: new Uint8Array(0) };
      }
      const id = body[0]! | (body[1]! << 8) | (body[2]! << 16) | (body[3]! * 0x100_0000);
      if (!this.streams.delete(id)) {
        return { errorCode: TEST_ERROR_NOT_FOUND, payload: new Uint8Array(0) };
      }
      return { errorCode: 0, payload: new Uint8Array(0) };
    }
    return { errorCode: TEST_ERROR_INVALID, payload: new Uint8Array(0) };
  }
}

export class ClusterChecker {
  private readonly history = new Map<number, CanonicalEntry>();
  private readonly committedRequests = new Map<string, number>();
  private readonly checkpointIds = new Map<number, bigint>();
  private readonly model: SimModel;
  private modelOp = 0;
  /** Batch prepares committed (ops carrying several requests) and the requests they carried. */
  batchesCommitted = 0;
  requestsBatched = 0;
  /** Highest op whose reply a client accepted. */
  ackedOpMax = 0;
  readonly acked = new Set<number>();
  repliesChecked = 0;

  constructor(model: SimModel = new ReferenceModel()) {
    this.model = model;
  }

  /**
   * A replica applied `header` (its reply is `reply`): a plain prepare, or request `position.index`
   * of a batch of `position.count`, whose header is the per-request view (the prepare's op and
   * identity with that request's client fields).
   */
  onCommitted(
    replica: number,
    header: PrepareHeader,
    body: Uint8Array,
    reply: Uint8Array,
    position: BatchPosition = PLAIN,
  ): void {
    const { client, operation } = header;
    const request: CanonicalRequest = {
      client,
      request: header.request,
      operation,
      reply,
      body: null,
    };
    const applied = `replica ${replica} applied op ${header.op}`;
    const known = this.history.get(header.op);
    if (known !== undefined) {
      if (known.checksum !== header.checksum) {
        throw new CheckFailure(
          `${applied} ${hex(header.checksum)}, canonical is ${hex(known.checksum)}`,
        );
      }
      if (known.count !== position.count) {
        throw new CheckFailure(
          `${applied} as ${position.count} requests, canonical is ${known.count}`,
        );
      }
      const canonical = known.requests[position.index];
      if (canonical === undefined) {
        if (position.index !== known.requests.length) {
          throw new CheckFailure(`replica ${replica} skipped a request of op ${header.op}`);
        }
        this.addRequest(header, known, request, body);
        return;
      }
      if (canonical.client !== request.client || canonical.request !== request.request) {
        throw new CheckFailure(
          `replica ${replica} applied request ${position.index} of op ${header.op} ` +
            'for another client or request',
        );
      }
      if (!equalBytes(canonical.reply, reply)) {
        throw new CheckFailure(`replica ${replica} reply bytes differ at op ${header.op}`);
      }
      return;
    }
    this.checkNewOp(replica, header, position);
    const entry: CanonicalEntry = {
      checksum: header.checksum,
      parent: header.parent,
      count: position.count,
      requests: [],
    };
    this.history.set(header.op, entry);
    if (position.count > 1) {
      this.batchesCommitted += 1;
      this.requestsBatched += position.count;
    }
    this.addRequest(header, entry, request, body);
  }

  /** The first request of an op no replica applied before must chain onto its neighbours. */
  private checkNewOp(replica: number, header: PrepareHeader, position: BatchPosition): void {
    if (position.index !== 0) {
      const begun = `replica ${replica} began op ${header.op}`;
      throw new CheckFailure(`${begun} at request ${position.index}`);
    }
    const previous = this.history.get(header.op - 1);
    if (previous !== undefined && previous.checksum !== header.parent) {
      throw new CheckFailure(
        `replica ${replica} op ${header.op} does not chain onto the canonical op ${header.op - 1}`,
      );
    }
    const next = this.history.get(header.op + 1);
    if (next !== undefined && next.parent !== header.checksum) {
      throw new CheckFailure(
        `replica ${replica} op ${header.op} is not the parent of the canonical op ${header.op + 1}`,
      );
    }
  }

  private addRequest(
    header: PrepareHeader,
    entry: CanonicalEntry,
    request: CanonicalRequest,
    body: Uint8Array,
  ): void {
    if (header.operation !== Operation.register && header.operation !== Operation.logout) {
      const key = `${header.client}:${header.request}`;
      const first = this.committedRequests.get(key);
      if (first !== undefined) {
        throw new CheckFailure(`request ${key} committed twice: ops ${first} and ${header.op}`);
      }
      this.committedRequests.set(key, header.op);
    }
    request.body = body.slice();
    entry.requests.push(request);
    this.advanceModel();
  }

  /** Applies canonical ops to the reference model as soon as they are contiguous and complete. */
  private advanceModel(): void {
    for (;;) {
      const entry = this.history.get(this.modelOp + 1);
      // A snapshot boot or transfer can start the history above op 1: the model waits for op 1.
      if (entry === undefined || entry.requests.length < entry.count) return;
      this.modelOp += 1;
      for (const request of entry.requests) {
        const body = request.body;
        request.body = null;
        if (request.operation === Operation.register) continue;
        if (request.operation === Operation.logout) continue;
        if (body === null) {
          throw new CheckFailure(`op ${this.modelOp}: a request reached the model twice`);
        }
        const expected = this.model.apply(request.operation, body);
        const parsed = parseResultBody(request.reply.subarray(HEADER_SIZE));
        const actualCode = parsed.ok ? 0 : parsed.errorCode;
        if (actualCode !== expected.errorCode) {
          throw new CheckFailure(
            `op ${this.modelOp}: replicas answered ${actualCode}, the model ${expected.errorCode}`,
          );
        }
        if (parsed.ok && !equalBytes(parsed.payload, expected.payload)) {
          throw new CheckFailure(`op ${this.modelOp}: reply payload differs from the model`);
        }
      }
    }
  }

  /** A client accepted `reply` for the request it had in flight. */
  onClientReply(client: bigint, request: number, reply: Uint8Array): void {
    const decoded = decodeHeader(reply);
    if (!decoded.ok || decoded.header.command !== 8) {
      throw new CheckFailure('client accepted a non-reply');
    }
    const header = decoded.header;
    if (header.client !== client || header.request !== request) {
      throw new CheckFailure('reply answers another request');
    }
    this.repliesChecked += 1;
    if (header.status !== 0) return; // a deny (already applied): never entered the log now
    const entry = this.history.get(header.op);
    const op = header.op;
    if (entry === undefined) {
      throw new CheckFailure(`client got a reply for op ${op} that no replica committed`);
    }
    const canonical = entry.requests.find(
      (candidate) => candidate.client === client && candidate.request === request,
    );
    if (canonical === undefined) {
      throw new CheckFailure(`client got a reply for op ${op}, which does not carry its request`);
    }
    if (!equalBytes(canonical.reply, reply)) {
      throw new CheckFailure(`client reply for op ${op} differs from the canonical reply`);
    }
    this.acked.add(header.op);
    this.ackedOpMax = Math.max(this.ackedOpMax, header.op);
  }

  /** Scenario tests that provoke divergence on purpose turn this off to watch the replicas. */
  checkpointChecks = true;

  onCheckpoint(replica: number, op: number, id: bigint): void {
    if (!this.checkpointChecks) return;
    const known = this.checkpointIds.get(op);
    if (known === undefined) this.checkpointIds.set(op, id);
    else if (known !== id) {
      throw new CheckFailure(
        `replica ${replica} checkpoint id at op ${op} differs: ${hex(id)} vs ${hex(known)}`,
      );
    }
  }

  /** Committed ops (a batch is one op however many requests it carries). */
  get historyLength(): number {
    return this.history.size;
  }

  /** Committed client requests: each plain op is one, each batch as many as it carries. */
  get requestsCommitted(): number {
    return this.history.size - this.batchesCommitted + this.requestsBatched;
  }

  canonicalChecksum(op: number): bigint | undefined {
    return this.history.get(op)?.checksum;
  }
}

function hex(value: bigint): string {
  return value.toString(16).padStart(16, '0');
}

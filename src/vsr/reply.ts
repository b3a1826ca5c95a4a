/**
 * Reply bodies and frames. A reply is built only from the committed prepare's header and the
 * deterministic apply result, so every replica caches byte-identical replies and a client retry
 * answered by a new primary gets exactly the bytes the old one would have sent.
 *
 * Body: the result section (iggy-metadata-plane.md §1.5) `count u32`, then `count` x
 * `{index u32, result u32}`, then the payload. Success is count 0 followed by the payload; a
 * committed business rejection is count 1, index 0, result = the error code, no payload.
 */
import { Command } from '../constants.js';
import { assert } from '../stdx/assert.js';
import type { CachedReply } from './client-table.js';
import { buildFrame, type ChecksumKernels } from './frame.js';
import { EvictionReason, Operation, type PrepareHeader } from './header.js';

export const RESULT_SECTION_SIZE_MIN = 4;

export function resultBody(errorCode: number, payload: Uint8Array): Uint8Array {
  assert(
    Number.isInteger(errorCode) && errorCode >= 0 && errorCode <= 0xffff_ffff,
    'error code is a u32',
  );
  if (errorCode !== 0) {
    assert(payload.byteLength === 0, 'a rejection carries no payload');
    const body = new Uint8Array(12);
    const view = new DataView(body.buffer);
    view.setUint32(0, 1, true);
    view.setUint32(4, 0, true);
    view.setUint32(8, errorCode, true);
    return body;
  }
  const body = new Uint8Array(4 + payload.byteLength);
  body.set(payload, 4);
  return body;
}

export type ParsedResult =
  | { readonly ok: true; readonly payload: Uint8Array }
  | { readonly ok: false; readonly errorCode: number }
  | { readonly ok: false; readonly errorCode: -1; readonly malformed: true };

/** Parses a result section; a malformed section decodes as an error, never as success. */
export function parseResultBody(body: Uint8Array): ParsedResult {
  if (body.byteLength < RESULT_SECTION_SIZE_MIN) {
    return { ok: false, errorCode: -1, malformed: true };
  }
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const count = view.getUint32(0, true);
  if (count === 0) return { ok: true, payload: body.subarray(4) };
  if (count !== 1 || body.byteLength !== 12 || view.getUint32(4, true) !== 0) {
    return { ok: false, errorCode: -1, malformed: true };
  }
  return { ok: false, errorCode: view.getUint32(8, true) };
}

/**
 * The reply to a committed prepare. `view` is 0 and `replica` the preparer's index: the prepare's
 * view is outside its identity (re-stamped on retransmit), so using it would let two replicas
 * cache different bytes for the same op.
 */
export function buildReply(
  kernels: ChecksumKernels,
  prepare: PrepareHeader,
  body: Uint8Array,
): Uint8Array {
  return buildFrame(
    kernels,
    {
      command: Command.reply,
      cluster: prepare.cluster,
      view: 0,
      release: 0,
      replica: prepare.replica,
      requestChecksum: prepare.requestChecksum,
      client: prepare.client,
      op: prepare.op,
      commit: prepare.op,
      timestamp: prepare.timestamp,
      request: prepare.request,
      operation: prepare.operation,
      status: 0,
    },
    body,
  );
}

/** A reply that never entered the log (a pre-commit deny such as RequestAlreadyApplied). */
export function buildDenyReply(
  kernels: ChecksumKernels,
  options: {
    cluster: bigint;
    replica: number;
    view: number;
    client: bigint;
    request: number;
    operation: number;
    status: number;
  },
): Uint8Array {
  assert(options.status !== 0, 'a deny reply carries a status');
  return buildFrame(kernels, {
    command: Command.reply,
    cluster: options.cluster,
    view: options.view,
    release: 0,
    replica: options.replica,
    requestChecksum: 0n,
    client: options.client,
    op: 0,
    commit: 0,
    timestamp: 0,
    request: options.request,
    operation:
      options.operation === Operation.reserved ? Operation.nonReplicated : options.operation,
    status: options.status,
  });
}

export function buildEviction(
  kernels: ChecksumKernels,
  options: {
    cluster: bigint;
    replica: number;
    view: number;
    client: bigint;
    reason: EvictionReason;
  },
): Uint8Array {
  assert(options.reason !== EvictionReason.reserved, 'an eviction names its reason');
  return buildFrame(kernels, {
    command: Command.eviction,
    cluster: options.cluster,
    view: options.view,
    release: 0,
    replica: options.replica,
    client: options.client,
    serverProtocolVersion: 0,
    serverProtocolVersionMin: 0,
    reason: options.reason,
  });
}

/** Register request body: the user id the receiving node authenticated (u32 LE). */
export function encodeRegisterBody(userId: number): Uint8Array {
  const body = new Uint8Array(4);
  new DataView(body.buffer).setUint32(0, userId, true);
  return body;
}

export function decodeRegisterBody(body: Uint8Array): number | null {
  if (body.byteLength !== 4) return null;
  return new DataView(body.buffer, body.byteOffset, 4).getUint32(0, true);
}

/** Register reply payload: user id u32, session (the epoch) u64. */
export function encodeRegisterPayload(userId: number, session: number): Uint8Array {
  const payload = new Uint8Array(12);
  const view = new DataView(payload.buffer);
  view.setUint32(0, userId, true);
  view.setBigUint64(4, BigInt(session), true);
  return payload;
}

export function decodeRegisterPayload(
  payload: Uint8Array,
): { userId: number; session: number } | null {
  if (payload.byteLength !== 12) return null;
  const view = new DataView(payload.buffer, payload.byteOffset, 12);
  return { userId: view.getUint32(0, true), session: Number(view.getBigUint64(4, true)) };
}

/**
 * A committed request's reply as the client table caches it, built into its wire bytes at the
 * first read of `bytes`: the same bytes `buildReply` gives, whenever they are built.
 *
 * Only a primary sends a reply when it commits. A backup, and every replica replaying its WAL at
 * boot, applies ops whose replies are read only if the client retries (a duplicate answered from
 * the table) or a checkpoint records the latest one per client; building each at once cost a
 * restart with a full WAL two copies of every reply body (a topic's details with hundreds of
 * partitions: ~30 ms and its garbage at 64 MiB, `bench transfer`, profiled). The inputs are kept
 * instead: the committed prepare's header (immutable) and the apply result's payload (a fresh
 * buffer of the state machine's, never written again).
 */
export class CommittedReply implements CachedReply {
  readonly request: number;
  readonly commit: number;
  #source: {
    readonly kernels: ChecksumKernels;
    readonly prepare: PrepareHeader;
    readonly errorCode: number;
    readonly payload: Uint8Array;
  } | null;
  #bytes: Uint8Array | null = null;

  constructor(
    kernels: ChecksumKernels,
    prepare: PrepareHeader,
    errorCode: number,
    payload: Uint8Array,
  ) {
    // What resultBody asserts, checked at commit rather than at a later read.
    assert(
      Number.isInteger(errorCode) && errorCode >= 0 && errorCode <= 0xffff_ffff,
      'error code is a u32',
    );
    assert(errorCode === 0 || payload.byteLength === 0, 'a rejection carries no payload');
    this.request = prepare.request;
    this.commit = prepare.op;
    this.#source = { kernels, prepare, errorCode, payload };
  }

  /** Whether the wire bytes were built yet (tests; the table never needs to know). */
  get built(): boolean {
    return this.#bytes !== null;
  }

  get bytes(): Uint8Array {
    if (this.#bytes === null) {
      const source = this.#source;
      assert(source !== null, 'an unbuilt reply keeps its inputs');
      const body = resultBody(source.errorCode, source.payload);
      this.#bytes = buildReply(source.kernels, source.prepare, body);
      this.#source = null;
    }
    return this.#bytes;
  }
}

/**
 * The batch envelope: the body of a prepare whose operation is `Operation.batch`, carrying several
 * client requests in one op (one prepare, one WAL append, one PrepareOk per backup for all of
 * them). Each request applies in order as if it were its own prepare at that op.
 *
 * Layout (little-endian), guarded by the frame's body checksum like any prepare body:
 *
 *   envelope header (8 bytes): count u32, reserved u32 (zero)
 *   per request, in apply order, an entry header (56 bytes) then its body:
 *     client u128 @0, request_checksum u128 @16, request u64 @32, user_id u32 @40,
 *     body_size u32 @44, operation u8 @48, reserved 7 bytes @49 (zero)
 *
 * The header fields of a batch prepare that name one client (client, request, request_checksum,
 * user_id) are zero; the entries carry them. Bodies arrive from the network and from disk, so
 * `decodeBatch` validates every byte and returns a reason; it never asserts. The encoding is
 * canonical: a lone request is a plain prepare (never a batch of one), reserved bytes are zero,
 * and nothing follows the last entry.
 */
import { MESSAGE_BODY_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import {
  Operation,
  readU128,
  readU32,
  readU64Safe,
  writeU128,
  writeU32,
  writeU64Number,
} from './header.js';

/**
 * Requests one batch may carry, whatever `prepare_batch_max` says: the bound decode enforces, so a
 * backup configured with a smaller `prepare_batch_max` still accepts its primary's batches.
 */
export const BATCH_REQUESTS_MAX = 256;
export const BATCH_ENVELOPE_HEADER_SIZE = 8;
export const BATCH_ENTRY_HEADER_SIZE = 56;

const EntryOffset = {
  client: 0,
  requestChecksum: 16,
  request: 32,
  userId: 40,
  bodySize: 44,
  operation: 48,
  reserved: 49,
} as const;

/** One client request inside a batch: the fields a plain prepare carries in its header. */
export interface BatchRequest {
  readonly client: bigint;
  readonly request: number;
  readonly requestChecksum: bigint;
  readonly operation: number;
  /** Stamped by the primary from the client table, as for a plain prepare. */
  readonly userId: number;
  readonly body: Uint8Array;
}

/** Why an envelope was refused. Stable snake_case strings (logged, and pinned by tests). */
export const BatchRejection = {
  envelopeTruncated: 'envelope_truncated',
  reservedNonzero: 'reserved_nonzero',
  /** A lone request travels as a plain prepare: a batch of 0 or 1 is never built. */
  countBelowTwo: 'count_below_two',
  countAboveMax: 'count_above_max',
  entryTruncated: 'entry_truncated',
  entryBodyTruncated: 'entry_body_truncated',
  trailingBytes: 'trailing_bytes',
  clientZero: 'client_zero',
  /** A client has at most one request in flight, so at most one entry per batch. */
  clientDuplicate: 'client_duplicate',
  /** Plain requests belong to a session and count from 1. */
  requestZero: 'request_zero',
  requestAboveSafeInteger: 'request_above_safe_integer',
  /** Register, logout, non-replicated, reserved and batch itself never ride in a batch. */
  operationNotBatchable: 'operation_not_batchable',
} as const;
export type BatchRejection = (typeof BatchRejection)[keyof typeof BatchRejection];

export type BatchDecodeResult =
  | { readonly ok: true; readonly requests: readonly BatchRequest[] }
  | {
      readonly ok: false;
      readonly reason: BatchRejection;
      /** Entry index, null for the envelope. */
      readonly index: number | null;
    };

/**
 * Operations that apply through the state machine's default path and so may share a prepare.
 * Register and logout change the client table in ways apply() special-cases; non-replicated
 * requests never belong in the log; Reserved and Batch are not requests.
 */
export function isBatchable(operation: number): boolean {
  return (
    operation !== Operation.reserved &&
    operation !== Operation.register &&
    operation !== Operation.nonReplicated &&
    operation !== Operation.logout &&
    operation !== Operation.batch
  );
}

/** Envelope bytes one request adds (its entry header and body). */
export function batchEntrySize(bodySize: number): number {
  return BATCH_ENTRY_HEADER_SIZE + bodySize;
}

/**
 * Encodes a batch. The caller (the primary) asserts what decode validates: 2..BATCH_REQUESTS_MAX
 * batchable requests from distinct clients whose envelope fits one frame.
 */
export function encodeBatch(requests: readonly BatchRequest[]): Uint8Array {
  const count = requests.length;
  assert(count >= 2 && count <= BATCH_REQUESTS_MAX, 'a batch holds 2..BATCH_REQUESTS_MAX requests');
  let size = BATCH_ENVELOPE_HEADER_SIZE;
  for (const request of requests) size += batchEntrySize(request.body.byteLength);
  assert(size <= MESSAGE_BODY_SIZE_MAX, 'a batch envelope fits one frame');
  const out = new Uint8Array(size);
  writeU32(out, 0, count);
  let offset = BATCH_ENVELOPE_HEADER_SIZE;
  const clients = new Set<bigint>();
  for (const request of requests) {
    assert(request.client !== 0n && !clients.has(request.client), 'distinct non-zero clients');
    assert(isBatchable(request.operation), 'only plain requests are batched');
    assert(Number.isSafeInteger(request.request) && request.request >= 1, 'a plain request number');
    const userId = request.userId;
    assert(Number.isInteger(userId) && userId >= 0 && userId <= 0xffff_ffff, 'user id is a u32');
    clients.add(request.client);
    writeU128(out, offset + EntryOffset.client, request.client);
    writeU128(out, offset + EntryOffset.requestChecksum, request.requestChecksum);
    writeU64Number(out, offset + EntryOffset.request, request.request);
    writeU32(out, offset + EntryOffset.userId, request.userId);
    writeU32(out, offset + EntryOffset.bodySize, request.body.byteLength);
    out[offset + EntryOffset.operation] = request.operation;
    offset += BATCH_ENTRY_HEADER_SIZE;
    out.set(request.body, offset);
    offset += request.body.byteLength;
  }
  assert(offset === size, 'the envelope is filled exactly');
  return out;
}

function zero(bytes: Uint8Array, start: number, end: number): boolean {
  for (let index = start; index < end; index++) if (bytes[index] !== 0) return false;
  return true;
}

/**
 * Decodes and validates an envelope. Entry bodies are views into `body` (no copy). Work is bounded
 * by BATCH_REQUESTS_MAX entries and the body length; a malformed byte is a rejection with a reason.
 */
export function decodeBatch(body: Uint8Array): BatchDecodeResult {
  const refuse = (reason: BatchRejection, index: number | null = null): BatchDecodeResult => ({
    ok: false,
    reason,
    index,
  });
  if (body.byteLength < BATCH_ENVELOPE_HEADER_SIZE) return refuse(BatchRejection.envelopeTruncated);
  const count = readU32(body, 0);
  if (!zero(body, 4, BATCH_ENVELOPE_HEADER_SIZE)) return refuse(BatchRejection.reservedNonzero);
  if (count < 2) return refuse(BatchRejection.countBelowTwo);
  if (count > BATCH_REQUESTS_MAX) return refuse(BatchRejection.countAboveMax);
  const requests: BatchRequest[] = [];
  const clients = new Set<bigint>();
  let offset = BATCH_ENVELOPE_HEADER_SIZE;
  for (let index = 0; index < count; index++) {
    if (body.byteLength - offset < BATCH_ENTRY_HEADER_SIZE) {
      return refuse(BatchRejection.entryTruncated, index);
    }
    if (!zero(body, offset + EntryOffset.reserved, offset + BATCH_ENTRY_HEADER_SIZE)) {
      return refuse(BatchRejection.reservedNonzero, index);
    }
    const client = readU128(body, offset + EntryOffset.client);
    const request = readU64Safe(body, offset + EntryOffset.request);
    const operation = body[offset + EntryOffset.operation]!;
    const bodySize = readU32(body, offset + EntryOffset.bodySize);
    if (client === 0n) return refuse(BatchRejection.clientZero, index);
    if (clients.has(client)) return refuse(BatchRejection.clientDuplicate, index);
    if (request === -1) return refuse(BatchRejection.requestAboveSafeInteger, index);
    if (request === 0) return refuse(BatchRejection.requestZero, index);
    if (!isBatchable(operation)) return refuse(BatchRejection.operationNotBatchable, index);
    const start = offset + BATCH_ENTRY_HEADER_SIZE;
    if (body.byteLength - start < bodySize) return refuse(BatchRejection.entryBodyTruncated, index);
    clients.add(client);
    requests.push({
      client,
      request,
      requestChecksum: readU128(body, offset + EntryOffset.requestChecksum),
      operation,
      userId: readU32(body, offset + EntryOffset.userId),
      body: body.subarray(start, start + bodySize),
    });
    offset = start + bodySize;
  }
  if (offset !== body.byteLength) return refuse(BatchRejection.trailingBytes);
  return { ok: true, requests };
}

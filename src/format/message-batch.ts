/**
 * Iggy's message batch: one layout for the wire, the partition log, the segment files and poll
 * replies (`core/binary_protocol/src/batch.rs`, cc269ef70; iggy-partition-plane.md §2). All
 * little-endian. Pure layout: reading, writing and walking; hashing is the kernels' job
 * (`messageBatchVerify`, `messageBatchChecksum`), which sit above this layer.
 *
 * Batch = 256-byte header, then `message_count` frames back to back that tile the rest exactly.
 *
 *   header: partition_id u64 @0 · base_offset u64 @8 · base_timestamp u64 @16 (µs, the primary's
 *   prepare timestamp) · origin_timestamp u64 @24 (µs, the producer's) · batch_length u64 @32
 *   (256 + blob) · batch_checksum u64 @40 · message_count u32 @48 · 204 reserved bytes, zero.
 *
 *   frame: checksum u64 @0 (XXH3-64 of frame[8..end]) · id u128 @8 · offset_delta u32 @24 ·
 *   timestamp_delta u32 @28 · user_headers_length u32 @32 · payload_length u32 @36 · reserved
 *   u64 @40, zero · then the payload, then the user headers. `offset_delta` is the frame's index
 *   in the batch as written by the producer (a poll may slice a batch, keeping the deltas: see
 *   `BatchDeltas`).
 *
 * The batch checksum is XXH3-64 of `partition_id ‖ base_offset ‖ base_timestamp ‖
 * origin_timestamp ‖ batch_length` (u64 each) `‖ message_count` (u32) `‖` every frame's stored
 * checksum in order (44 + 8N bytes): bodies are bound only through their frame checksums, so a
 * validating read re-hashes every frame as well.
 *
 * Offsets and timestamps are held as numbers: both fit 2^53 for any log this server can hold (a
 * µs timestamp reaches 2^53 in the year 2255), and a field beyond it is refused as a layout fault
 * rather than rounded.
 */
import { assert } from '../stdx/assert.js';

export const BATCH_HEADER_SIZE = 256;
export const MESSAGE_HEADER_SIZE = 48;

export const BatchHeaderOffset = {
  partitionId: 0,
  baseOffset: 8,
  baseTimestamp: 16,
  originTimestamp: 24,
  batchLength: 32,
  batchChecksum: 40,
  messageCount: 48,
  reserved: 52,
} as const;

export const MessageHeaderOffset = {
  checksum: 0,
  id: 8,
  offsetDelta: 24,
  timestampDelta: 28,
  userHeadersLength: 32,
  payloadLength: 36,
  reserved: 40,
} as const;

/** The bytes the batch checksum covers before the frame checksums. */
export const BATCH_CHECKSUM_PREFIX_SIZE = 44;

/**
 * A batch is at most one client frame (Iggy's `[message_bus] max_message_size`, 64 MiB), so a
 * count or length beyond it is a lie about the bytes that follow.
 */
export const BATCH_SIZE_MAX = 64 * 1024 * 1024;
/** Every frame takes at least its header, so a batch of BATCH_SIZE_MAX holds at most this many. */
export const BATCH_MESSAGES_MAX = Math.floor(
  (BATCH_SIZE_MAX - BATCH_HEADER_SIZE) / MESSAGE_HEADER_SIZE,
);

export interface BatchHeader {
  readonly partitionId: number;
  readonly baseOffset: number;
  readonly baseTimestampUs: number;
  readonly originTimestampUs: number;
  readonly batchLength: number;
  readonly batchChecksum: bigint;
  readonly messageCount: number;
}

export interface MessageHeader {
  readonly checksum: bigint;
  readonly id: bigint;
  readonly offsetDelta: number;
  readonly timestampDelta: number;
  readonly userHeadersLength: number;
  readonly payloadLength: number;
}

/** Why bytes are not a batch, by the first rule they break (the walk's order). */
export const BatchFault = {
  /** Fewer than 256 bytes, or `batch_length` runs past the bytes given. */
  headerTruncated: 'header_truncated',
  /** A header field beyond its bound (u64 above 2^53, length below 256 or above the maximum). */
  headerField: 'header_field',
  headerReserved: 'header_reserved',
  /** `batch_length` differs from the bytes given (a whole-batch read). */
  length: 'length',
  /** A frame header or its payload and user headers run past `batch_length`. */
  frameTruncated: 'frame_truncated',
  frameReserved: 'frame_reserved',
  /**
   * A frame's `offset_delta` is not its index (for a slice: the first frame's delta plus its
   * index, below BATCH_MESSAGES_MAX): offsets are base + delta, so any other value would give the
   * partition holes or repeats (the SDKs write the index).
   */
  offsetDelta: 'offset_delta',
  /** The frames end before `batch_length`, or more frames than `message_count`. */
  tiling: 'tiling',
  /** Fewer frames than `message_count`. */
  count: 'count',
  empty: 'empty',
} as const;
export type BatchFault = (typeof BatchFault)[keyof typeof BatchFault];

/**
 * Which `offset_delta` values a walk accepts. Two rule sets, because a batch has two lives:
 * - `index`: every delta is the frame's index (0, 1, ...). What producers write, what admission
 *   requires, and so what the journal, the log and the segment files hold: each stored batch was
 *   admitted whole.
 * - `contiguous`: the deltas run on by one from the first frame's, each below BATCH_MESSAGES_MAX
 *   (an index some batch can hold). A poll reply's slice of a stored batch (reference §5.3) keeps
 *   the deltas of the frames it holds, so its first delta is where it was cut. The set is closed
 *   under slicing, so a slice of a slice walks too. Never for admission: a producer's batch with
 *   a first delta of 3 would take offsets base + 3.. and leave base .. base + 2 unassigned.
 */
export const BatchDeltas = { index: 'index', contiguous: 'contiguous' } as const;
export type BatchDeltas = (typeof BatchDeltas)[keyof typeof BatchDeltas];

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A u64 field as a number, or -1 when it exceeds 2^53 - 1. */
function safeU64(data: DataView, at: number): number {
  const low = data.getUint32(at, true);
  const high = data.getUint32(at + 4, true);
  if (high > 0x1f_ffff) return -1;
  return high * 0x1_0000_0000 + low;
}

function allZero(bytes: Uint8Array, from: number, to: number): boolean {
  for (let index = from; index < to; index += 1) if (bytes[index] !== 0) return false;
  return true;
}

export type HeaderRead =
  | { readonly ok: true; readonly header: BatchHeader }
  | { readonly ok: false; readonly fault: BatchFault };

/**
 * Reads the batch header at `at`. Checks the header's own rules (fields in bounds, reserved
 * zero, `batch_length` within the bytes), not the frames.
 */
export function readBatchHeader(bytes: Uint8Array, at = 0): HeaderRead {
  if (at < 0 || bytes.byteLength - at < BATCH_HEADER_SIZE) {
    return { ok: false, fault: BatchFault.headerTruncated };
  }
  const data = view(bytes);
  const partitionId = safeU64(data, at + BatchHeaderOffset.partitionId);
  const baseOffset = safeU64(data, at + BatchHeaderOffset.baseOffset);
  const baseTimestampUs = safeU64(data, at + BatchHeaderOffset.baseTimestamp);
  const originTimestampUs = safeU64(data, at + BatchHeaderOffset.originTimestamp);
  const batchLength = safeU64(data, at + BatchHeaderOffset.batchLength);
  const messageCount = data.getUint32(at + BatchHeaderOffset.messageCount, true);
  if (partitionId < 0 || baseOffset < 0 || baseTimestampUs < 0 || originTimestampUs < 0) {
    return { ok: false, fault: BatchFault.headerField };
  }
  if (batchLength < BATCH_HEADER_SIZE || batchLength > BATCH_SIZE_MAX) {
    return { ok: false, fault: BatchFault.headerField };
  }
  if (!allZero(bytes, at + BatchHeaderOffset.reserved, at + BATCH_HEADER_SIZE)) {
    return { ok: false, fault: BatchFault.headerReserved };
  }
  if (bytes.byteLength - at < batchLength) return { ok: false, fault: BatchFault.headerTruncated };
  const batchChecksum = data.getBigUint64(at + BatchHeaderOffset.batchChecksum, true);
  const header = {
    partitionId,
    baseOffset,
    baseTimestampUs,
    originTimestampUs,
    batchLength,
    batchChecksum,
    messageCount,
  };
  return { ok: true, header };
}

/** Writes every header field and zeroes the reserved bytes. */
export function writeBatchHeader(target: Uint8Array, at: number, header: BatchHeader): void {
  const data = view(target);
  data.setBigUint64(at + BatchHeaderOffset.partitionId, BigInt(header.partitionId), true);
  data.setBigUint64(at + BatchHeaderOffset.baseOffset, BigInt(header.baseOffset), true);
  data.setBigUint64(at + BatchHeaderOffset.baseTimestamp, BigInt(header.baseTimestampUs), true);
  data.setBigUint64(at + BatchHeaderOffset.originTimestamp, BigInt(header.originTimestampUs), true);
  data.setBigUint64(at + BatchHeaderOffset.batchLength, BigInt(header.batchLength), true);
  data.setBigUint64(at + BatchHeaderOffset.batchChecksum, header.batchChecksum, true);
  data.setUint32(at + BatchHeaderOffset.messageCount, header.messageCount, true);
  target.fill(0, at + BatchHeaderOffset.reserved, at + BATCH_HEADER_SIZE);
}

/**
 * Sets the fields the server owns (admission stamps the partition, the primary the offset and
 * time). The batch checksum covers them: recompute it afterwards (`messageBatchChecksum`).
 */
export function stampBatch(
  batch: Uint8Array,
  stamp: {
    readonly partitionId: number;
    readonly baseOffset: number;
    readonly baseTimestampUs: number;
  },
): void {
  const data = view(batch);
  data.setBigUint64(BatchHeaderOffset.partitionId, BigInt(stamp.partitionId), true);
  data.setBigUint64(BatchHeaderOffset.baseOffset, BigInt(stamp.baseOffset), true);
  data.setBigUint64(BatchHeaderOffset.baseTimestamp, BigInt(stamp.baseTimestampUs), true);
}

export function setBatchChecksum(batch: Uint8Array, checksum: bigint): void {
  view(batch).setBigUint64(BatchHeaderOffset.batchChecksum, checksum, true);
}

/** Reads the frame header at `at` without bounds checks beyond DataView's own. */
export function readMessageHeader(bytes: Uint8Array, at: number): MessageHeader {
  const data = view(bytes);
  const idLow = data.getBigUint64(at + MessageHeaderOffset.id, true);
  const idHigh = data.getBigUint64(at + MessageHeaderOffset.id + 8, true);
  return {
    checksum: data.getBigUint64(at + MessageHeaderOffset.checksum, true),
    id: (idHigh << 64n) | idLow,
    offsetDelta: data.getUint32(at + MessageHeaderOffset.offsetDelta, true),
    timestampDelta: data.getUint32(at + MessageHeaderOffset.timestampDelta, true),
    userHeadersLength: data.getUint32(at + MessageHeaderOffset.userHeadersLength, true),
    payloadLength: data.getUint32(at + MessageHeaderOffset.payloadLength, true),
  };
}

export type BatchWalk =
  | { readonly ok: true; readonly header: BatchHeader; readonly frameStarts: readonly number[] }
  | {
      readonly ok: false;
      readonly fault: BatchFault;
      readonly position: number;
      readonly messageIndex: number;
    };

/** A fault of the batch as a whole, before any frame is read. */
function wholeBatchFault(fault: BatchFault): BatchWalk {
  return { ok: false, fault, position: 0, messageIndex: -1 };
}

/** Payload plus user headers of the frame at `at`: the bytes after its header. */
function frameBodyLength(data: DataView, at: number): number {
  const userHeadersLength = data.getUint32(at + MessageHeaderOffset.userHeadersLength, true);
  return data.getUint32(at + MessageHeaderOffset.payloadLength, true) + userHeadersLength;
}

/**
 * Whether the frame at `messageIndex` carries a delta the rule set accepts, given the first
 * frame's (`firstDelta`, equal to `delta` for the first frame itself).
 */
function deltaAccepted(
  deltas: BatchDeltas,
  delta: number,
  firstDelta: number,
  messageIndex: number,
): boolean {
  const expected = deltas === BatchDeltas.index ? messageIndex : firstDelta + messageIndex;
  return delta === expected && delta < BATCH_MESSAGES_MAX;
}

/**
 * Checks the layout of the whole batch `bytes` (exactly one batch): the header's rules, then that
 * `message_count` frames, reserved bytes zero, deltas as `deltas` says, tile the blob exactly.
 * Returns each frame's start. No hashing: this is the readable statement of the rules the verify
 * kernels enforce, and their TypeScript implementation walks with it.
 */
export function walkBatch(bytes: Uint8Array, deltas: BatchDeltas = BatchDeltas.index): BatchWalk {
  const read = readBatchHeader(bytes, 0);
  if (!read.ok) return wholeBatchFault(read.fault);
  const { header } = read;
  if (header.batchLength !== bytes.byteLength) return wholeBatchFault(BatchFault.length);
  if (header.messageCount === 0) return wholeBatchFault(BatchFault.empty);
  const data = view(bytes);
  const frameStarts: number[] = [];
  let position = BATCH_HEADER_SIZE;
  let firstDelta = 0;
  while (position < bytes.byteLength) {
    const messageIndex = frameStarts.length;
    if (messageIndex === header.messageCount) {
      return { ok: false, fault: BatchFault.tiling, position, messageIndex };
    }
    if (bytes.byteLength - position < MESSAGE_HEADER_SIZE) {
      return { ok: false, fault: BatchFault.frameTruncated, position, messageIndex };
    }
    const frameSize = MESSAGE_HEADER_SIZE + frameBodyLength(data, position);
    if (frameSize > bytes.byteLength - position) {
      return { ok: false, fault: BatchFault.frameTruncated, position, messageIndex };
    }
    if (!allZero(bytes, position + MessageHeaderOffset.reserved, position + MESSAGE_HEADER_SIZE)) {
      return { ok: false, fault: BatchFault.frameReserved, position, messageIndex };
    }
    const delta = data.getUint32(position + MessageHeaderOffset.offsetDelta, true);
    if (messageIndex === 0) firstDelta = delta;
    if (!deltaAccepted(deltas, delta, firstDelta, messageIndex)) {
      return { ok: false, fault: BatchFault.offsetDelta, position, messageIndex };
    }
    frameStarts.push(position);
    position += frameSize;
  }
  if (frameStarts.length !== header.messageCount) {
    return { ok: false, fault: BatchFault.count, position, messageIndex: frameStarts.length };
  }
  return { ok: true, header, frameStarts };
}

/**
 * The 44 + 8N bytes the batch checksum hashes, from the header and each frame's stored checksum
 * at `frameStarts` (a walked batch).
 */
export function batchChecksumInput(batch: Uint8Array, frameStarts: readonly number[]): Uint8Array {
  const input = new Uint8Array(BATCH_CHECKSUM_PREFIX_SIZE + 8 * frameStarts.length);
  input.set(batch.subarray(0, 40), 0);
  input.set(batch.subarray(BatchHeaderOffset.messageCount, BatchHeaderOffset.messageCount + 4), 40);
  let at = BATCH_CHECKSUM_PREFIX_SIZE;
  for (const start of frameStarts) {
    input.set(batch.subarray(start, start + 8), at);
    at += 8;
  }
  return input;
}

/** The last offset a batch holds (its offsets are base .. base + count - 1). */
export function batchLastOffset(header: BatchHeader): number {
  return header.baseOffset + header.messageCount - 1;
}

/** One message of a producer batch. */
export interface ProducerMessage {
  /** u128, as the producer gave or minted it. */
  readonly id: bigint;
  readonly payload: Uint8Array;
  /** Encoded user headers; empty or absent for none. */
  readonly userHeaders?: Uint8Array;
}

/** The hashes a producer batch is sealed with (the kernels' own, passed in by the caller). */
export interface ProducerBatchHashes {
  xxh3_64(bytes: Uint8Array): bigint;
  messageBatchChecksum(batch: Uint8Array): bigint;
}

/** The bytes `messages` take as one batch (header and frames). */
export function producerBatchLength(messages: readonly ProducerMessage[]): number {
  let length = BATCH_HEADER_SIZE;
  for (const message of messages) {
    const userHeaders = message.userHeaders?.byteLength ?? 0;
    length += MESSAGE_HEADER_SIZE + message.payload.byteLength + userHeaders;
  }
  return length;
}

/**
 * A batch as a producer sends it: partition, offsets and time of arrival 0 (the server stamps
 * them), `offset_delta` the frame's index, `timestamp_delta` 0, each frame's XXH3-64 over the
 * frame after its checksum field, and the batch checksum.
 */
export function encodeProducerBatch(
  hashes: ProducerBatchHashes,
  messages: readonly ProducerMessage[],
  fields: { readonly partitionId?: number; readonly originTimestampUs: number },
): Uint8Array {
  const batchLength = producerBatchLength(messages);
  const batch = new Uint8Array(batchLength);
  writeBatchHeader(batch, 0, {
    partitionId: fields.partitionId ?? 0,
    baseOffset: 0,
    baseTimestampUs: 0,
    originTimestampUs: fields.originTimestampUs,
    batchLength,
    batchChecksum: 0n,
    messageCount: messages.length,
  });
  const data = view(batch);
  let at = BATCH_HEADER_SIZE;
  for (const [index, message] of messages.entries()) {
    const { id, payload } = message;
    const userHeaders = message.userHeaders ?? new Uint8Array(0);
    assert(id >= 0n && id < 1n << 128n, 'a message id is a u128');
    data.setBigUint64(at + MessageHeaderOffset.id, id & 0xffff_ffff_ffff_ffffn, true);
    data.setBigUint64(at + MessageHeaderOffset.id + 8, id >> 64n, true);
    data.setUint32(at + MessageHeaderOffset.offsetDelta, index, true);
    data.setUint32(at + MessageHeaderOffset.userHeadersLength, userHeaders.byteLength, true);
    data.setUint32(at + MessageHeaderOffset.payloadLength, payload.byteLength, true);
    batch.set(payload, at + MESSAGE_HEADER_SIZE);
    batch.set(userHeaders, at + MESSAGE_HEADER_SIZE + payload.byteLength);
    const end = at + MESSAGE_HEADER_SIZE + payload.byteLength + userHeaders.byteLength;
    const checksum = hashes.xxh3_64(batch.subarray(at + MessageHeaderOffset.id, end));
    data.setBigUint64(at + MessageHeaderOffset.checksum, checksum, true);
    at = end;
  }
  setBatchChecksum(batch, hashes.messageBatchChecksum(batch));
  return batch;
}

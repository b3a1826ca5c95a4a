/**
 * Message-batch kernels (TypeScript): the readable reference the WASM build matches.
 * The layout rules are `walkBatch`'s (src/format/message-batch.ts); this adds the hashing: each
 * frame's checksum is XXH3-64 of the frame after its first 8 bytes, and the batch checksum
 * XXH3-64 of `batchChecksumInput`.
 */
import {
  BATCH_HEADER_SIZE,
  batchChecksumInput,
  BatchDeltas,
  MESSAGE_HEADER_SIZE,
  setBatchChecksum,
  walkBatch,
  writeBatchHeader,
} from '../format/message-batch.js';
import type { BatchVerify } from './kernel.js';
import { xxh3_64 } from './xxh3-ts.js';

function frameEnd(batch: Uint8Array, frameStarts: readonly number[], index: number): number {
  return index + 1 < frameStarts.length ? frameStarts[index + 1]! : batch.byteLength;
}

export function messageBatchVerifyTs(batch: Uint8Array, deltas: BatchDeltas = BatchDeltas.index): BatchVerify {
  const walk = walkBatch(batch, deltas);
  if (!walk.ok) return { status: 'layout', fault: walk.fault, position: walk.position, messageIndex: walk.messageIndex };
  const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  for (let index = 0; index < walk.frameStarts.length; index += 1) {
    const start = walk.frameStarts[index]!;
    const stored = data.getBigUint64(start, true);
    const computed = xxh3_64(batch.subarray(start + 8, frameEnd(batch, walk.frameStarts, index)));
    if (stored !== computed) return { status: 'message_checksum', messageIndex: index, position: start, stored, computed };
  }
  const computed = xxh3_64(batchChecksumInput(batch, walk.frameStarts));
  const stored = walk.header.batchChecksum;
  if (stored !== computed) return { status: 'batch_checksum', stored, computed };
  return { status: 'valid', messageCount: walk.header.messageCount, checksum: computed };
}

/** The error both implementations throw for bytes whose layout is not a batch. */
export function notABatch(kernel: string, fault: string, position: number): Error {
  return new Error(`${kernel}: not a batch (${fault} at ${position})`);
}

export function messageBatchChecksumTs(batch: Uint8Array, deltas: BatchDeltas = BatchDeltas.index): bigint {
  const walk = walkBatch(batch, deltas);
  if (!walk.ok) throw notABatch('messageBatchChecksum', walk.fault, walk.position);
  return xxh3_64(batchChecksumInput(batch, walk.frameStarts));
}

/**
 * Refuses slice arguments that are not an index and a count: both implementations check them
 * before reading the batch, and throw the same errors.
 */
export function checkSliceArguments(fromIndex: number, count: number): void {
  if (!Number.isSafeInteger(fromIndex) || fromIndex < 0) {
    throw new RangeError(`messageBatchSlice: fromIndex ${fromIndex} is not an index`);
  }
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new RangeError(`messageBatchSlice: count ${count} is not a count of at least 1`);
  }
}

/** The error for a `fromIndex` at or past the batch's last frame. */
export function sliceOutOfRange(fromIndex: number, messageCount: number): RangeError {
  return new RangeError(`messageBatchSlice: fromIndex ${fromIndex} is not below the batch's ${messageCount} messages`);
}

/**
 * Frames [fromIndex, min(fromIndex + count, message_count)) of a batch as a new batch (reference
 * §5.3 "Slicing"): the header copied, `batch_length` and `message_count` rewritten, the batch
 * checksum recomputed over the slice; base offset, timestamps and the frames (their deltas
 * included) unchanged. The input walks under the `contiguous` delta rules, which a stored batch
 * and any slice of one both keep, and so does the result. Frames are not re-hashed: the caller
 * verified the batch.
 */
export function messageBatchSliceTs(batch: Uint8Array, fromIndex: number, count: number): Uint8Array {
  checkSliceArguments(fromIndex, count);
  const walk = walkBatch(batch, BatchDeltas.contiguous);
  if (!walk.ok) throw notABatch('messageBatchSlice', walk.fault, walk.position);
  const { header, frameStarts } = walk;
  if (fromIndex >= header.messageCount) throw sliceOutOfRange(fromIndex, header.messageCount);
  const end = Math.min(fromIndex + count, header.messageCount);
  const blobStart = frameStarts[fromIndex]!;
  const blobEnd = frameEnd(batch, frameStarts, end - 1);
  const slice = new Uint8Array(BATCH_HEADER_SIZE + blobEnd - blobStart);
  slice.set(batch.subarray(blobStart, blobEnd), BATCH_HEADER_SIZE);
  const sliceHeader = { ...header, batchLength: slice.byteLength, messageCount: end - fromIndex, batchChecksum: 0n };
  writeBatchHeader(slice, 0, sliceHeader);
  const sliceStarts = frameStarts.slice(fromIndex, end).map((start) => start - blobStart + BATCH_HEADER_SIZE);
  setBatchChecksum(slice, xxh3_64(batchChecksumInput(slice, sliceStarts)));
  return slice;
}

/** Frame size at `start` (header, payload, user headers), for encoders and tests. */
export function frameSizeAt(batch: Uint8Array, start: number): number {
  const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  return MESSAGE_HEADER_SIZE + data.getUint32(start + 36, true) + data.getUint32(start + 32, true);
}

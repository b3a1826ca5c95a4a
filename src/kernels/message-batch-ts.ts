/**
 * Message-batch verification (TypeScript kernel): the readable reference the WASM build matches.
 * The layout rules are `walkBatch`'s (src/format/message-batch.ts); this adds the hashing: each
 * frame's checksum is XXH3-64 of the frame after its first 8 bytes, and the batch checksum
 * XXH3-64 of `batchChecksumInput`.
 */
import { batchChecksumInput, MESSAGE_HEADER_SIZE, walkBatch } from '../format/message-batch.js';
import type { BatchVerify } from './kernel.js';
import { xxh3_64 } from './xxh3-ts.js';

function frameEnd(batch: Uint8Array, frameStarts: readonly number[], index: number): number {
  return index + 1 < frameStarts.length ? frameStarts[index + 1]! : batch.byteLength;
}

export function messageBatchVerifyTs(batch: Uint8Array): BatchVerify {
  const walk = walkBatch(batch);
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

export function messageBatchChecksumTs(batch: Uint8Array): bigint {
  const walk = walkBatch(batch);
  if (!walk.ok) throw new Error(`messageBatchChecksum: not a batch (${walk.fault} at ${walk.position})`);
  return xxh3_64(batchChecksumInput(batch, walk.frameStarts));
}

/** Frame size at `start` (header, payload, user headers), for encoders and tests. */
export function frameSizeAt(batch: Uint8Array, start: number): number {
  const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  return MESSAGE_HEADER_SIZE + data.getUint32(start + 36, true) + data.getUint32(start + 32, true);
}

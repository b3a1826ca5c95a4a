/**
 * Builds Iggy message batches for tests, written from the layout in iggy-partition-plane.md §2
 * (as the Node SDK's `serializeSendMessages` does), independently of src/format/message-batch.ts so
 * that tests of the codec compare it against a second reading of the spec.
 */
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';

export interface TestMessage {
  readonly id?: bigint;
  readonly payload: Uint8Array;
  readonly userHeaders?: Uint8Array;
  /** µs after the batch's origin timestamp. */
  readonly timestampDelta?: number;
}

export interface TestBatchFields {
  readonly partitionId?: number;
  readonly baseOffset?: number;
  readonly baseTimestampUs?: number;
  readonly originTimestampUs?: number;
  /**
   * The first frame's offset_delta (default 0; a producer's batch). A poll's slice of a batch
   * keeps its frames' deltas, so its frames are those of the whole batch from index `firstDelta`.
   */
  readonly firstDelta?: number;
}

function u64(data: DataView, at: number, value: number | bigint): void {
  data.setBigUint64(at, BigInt(value), true);
}

/** One frame: 48-byte header, payload, user headers; its checksum over bytes 8.. of the frame. */
export function encodeFrame(message: TestMessage, index: number): Uint8Array {
  const headers = message.userHeaders ?? new Uint8Array(0);
  const frame = new Uint8Array(48 + message.payload.byteLength + headers.byteLength);
  const data = new DataView(frame.buffer);
  const id = message.id ?? BigInt(index + 1);
  u64(data, 8, id & 0xffff_ffff_ffff_ffffn);
  u64(data, 16, id >> 64n);
  data.setUint32(24, index, true);
  data.setUint32(28, message.timestampDelta ?? 0, true);
  data.setUint32(32, headers.byteLength, true);
  data.setUint32(36, message.payload.byteLength, true);
  frame.set(message.payload, 48);
  frame.set(headers, 48 + message.payload.byteLength);
  u64(data, 0, xxh3_64(frame.subarray(8)));
  return frame;
}

/** A whole batch with a correct batch checksum. */
export function encodeBatch(messages: readonly TestMessage[], fields: TestBatchFields = {}): Uint8Array {
  const frames = messages.map((message, index) => encodeFrame(message, (fields.firstDelta ?? 0) + index));
  const blob = frames.reduce((sum, frame) => sum + frame.byteLength, 0);
  const batch = new Uint8Array(256 + blob);
  const data = new DataView(batch.buffer);
  u64(data, 0, fields.partitionId ?? 0);
  u64(data, 8, fields.baseOffset ?? 0);
  u64(data, 16, fields.baseTimestampUs ?? 0);
  u64(data, 24, fields.originTimestampUs ?? 1_700_000_000_000_000);
  u64(data, 32, batch.byteLength);
  data.setUint32(48, frames.length, true);
  let at = 256;
  for (const frame of frames) {
    batch.set(frame, at);
    at += frame.byteLength;
  }
  u64(data, 40, batchChecksumOf(batch, frames.length));
  return batch;
}

/** The batch checksum, recomputed from the spec (44 + 8N bytes). */
export function batchChecksumOf(batch: Uint8Array, count: number): bigint {
  const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  const input = new Uint8Array(44 + 8 * count);
  input.set(batch.subarray(0, 40), 0);
  input.set(batch.subarray(48, 52), 40);
  let at = 256;
  for (let index = 0; index < count; index += 1) {
    input.set(batch.subarray(at, at + 8), 44 + 8 * index);
    at += 48 + data.getUint32(at + 36, true) + data.getUint32(at + 32, true);
  }
  return xxh3_64(input);
}

export function textMessages(count: number, prefix = 'message'): TestMessage[] {
  return Array.from({ length: count }, (_, index) => ({ payload: new TextEncoder().encode(`${prefix}-${index}`) }));
}

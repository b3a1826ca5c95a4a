/**
 * Fixtures for the partition store suites: stamped batches built by the independent spec encoder
 * (test/support/message-batches.ts, which computes the batch checksum from the spec), a model of
 * where rotation must cut, and the index bytes the log implies, written from the layout.
 */
import { PartitionLog, type PartitionLogOptions } from '../../src/storage/partition-log.js';
import type { Disk } from '../../src/storage/disk.js';
import type { Kernels } from '../../src/kernels/kernel.js';
import { encodeBatch, textMessages } from '../support/message-batches.js';
import { recordingLogger } from './storage-fixtures.js';

export const PARTITION = 3;
/** base_timestamp of the batch at offset 0; each later batch is stamped later. */
export const BASE_TIME_US = 1_800_000_000_000_000;

export interface StoredBatch {
  readonly baseOffset: number;
  readonly count: number;
  readonly timestampUs: number;
  readonly bytes: Uint8Array;
}

/** One stamped batch of `count` messages at `baseOffset`. */
export function stampedBatch(baseOffset: number, count: number, timestampUs = BASE_TIME_US + baseOffset * 10): StoredBatch {
  const bytes = encodeBatch(textMessages(count, `p${PARTITION}-o${baseOffset}`), {
    partitionId: PARTITION,
    baseOffset,
    baseTimestampUs: timestampUs,
  });
  return { baseOffset, count, timestampUs, bytes };
}

/** Batches with `counts[i]` messages each, offsets dense from `firstOffset`. */
export function batchRun(counts: readonly number[], firstOffset = 0): StoredBatch[] {
  const out: StoredBatch[] = [];
  let offset = firstOffset;
  for (const count of counts) {
    out.push(stampedBatch(offset, count));
    offset += count;
  }
  return out;
}

/**
 * The segments rotation must produce, from the rule alone: a segment is sealed by the batch that
 * brings its bytes to `segmentSizeBytes` or more; the next starts at the following batch.
 */
export function expectedSegments(batches: readonly StoredBatch[], segmentSizeBytes: number): StoredBatch[][] {
  const segments: StoredBatch[][] = [[]];
  let bytes = 0;
  for (const batch of batches) {
    if (bytes >= segmentSizeBytes) {
      segments.push([]);
      bytes = 0;
    }
    segments[segments.length - 1]!.push(batch);
    bytes += batch.bytes.byteLength;
  }
  return segments;
}

/** `offset u64 | timestamp u64 | position u64` per batch, little-endian, from the layout. */
export function expectedIndex(segment: readonly StoredBatch[]): Uint8Array {
  const out = new Uint8Array(24 * segment.length);
  const data = new DataView(out.buffer);
  let position = 0;
  segment.forEach((batch, index) => {
    data.setBigUint64(24 * index, BigInt(batch.baseOffset), true);
    data.setBigUint64(24 * index + 8, BigInt(batch.timestampUs), true);
    data.setBigUint64(24 * index + 16, BigInt(position), true);
    position += batch.bytes.byteLength;
  });
  return out;
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

export function name20(startOffset: number, extension: 'log' | 'index'): string {
  return `${String(startOffset).padStart(20, '0')}.${extension}`;
}

export function openLog(
  disk: Disk,
  kernels: Kernels,
  segmentSizeBytes: number,
  extra: Partial<PartitionLogOptions> = {},
): { log: PartitionLog; logger: ReturnType<typeof recordingLogger> } {
  const logger = recordingLogger();
  const log = PartitionLog.open(disk, kernels, { partitionId: PARTITION, segmentSizeBytes, logger, ...extra });
  return { log, logger };
}

export function appendAll(log: PartitionLog, batches: readonly StoredBatch[]): void {
  for (const batch of batches) log.append(batch.bytes);
}

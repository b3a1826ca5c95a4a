/**
 * One partition segment on disk (iggy-partition-plane.md §3.1-3.3): `{start:020}.log` holds
 * stamped batch records back to back, walked by `batch_length`; `{start:020}.index` holds one
 * 24-byte entry `offset u64 | timestamp u64 | position u64` (absolute, little-endian) per batch.
 *
 * The log is the truth and the index is derived: every read checks what the index pointed at
 * against the batch it finds there, and open rebuilds an index that disagrees with the log.
 *
 * Reads here are bounded: a walk holds one window of the file (WINDOW_BYTES, or one batch when a
 * batch is larger), never the whole segment.
 */
import {
  BATCH_HEADER_SIZE,
  BATCH_MESSAGES_MAX,
  BATCH_SIZE_MAX,
  BatchHeaderOffset,
  MESSAGE_HEADER_SIZE,
  readBatchHeader,
  type BatchHeader,
} from '../format/message-batch.js';
import type { BatchVerify, Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import { DiskError, type Disk } from './disk.js';

export const INDEX_ENTRY_SIZE = 24;
export const SEGMENT_NAME_DIGITS = 20;
/** How much of a file one walk holds at a time (one batch when a batch is larger). */
export const WINDOW_BYTES = 1024 * 1024;
/** The smallest batch: a header and one frame with an empty payload. */
export const BATCH_SIZE_MIN = BATCH_HEADER_SIZE + MESSAGE_HEADER_SIZE;

const LOG_NAME = /^(\d{20})\.log$/;
const INDEX_NAME = /^(\d{20})\.index$/;

function stem(startOffset: number): string {
  assert(Number.isSafeInteger(startOffset) && startOffset >= 0, `segment start ${startOffset}`);
  return String(startOffset).padStart(SEGMENT_NAME_DIGITS, '0');
}

export function segmentLogName(startOffset: number): string {
  return `${stem(startOffset)}.log`;
}

export function segmentIndexName(startOffset: number): string {
  return `${stem(startOffset)}.index`;
}

/** The start offset a segment file name encodes, or null when the name is not a segment's. */
export function parseSegmentName(name: string, kind: 'log' | 'index'): number | null {
  const match = (kind === 'log' ? LOG_NAME : INDEX_NAME).exec(name);
  if (match === null) return null;
  const value = Number(match[1]);
  return Number.isSafeInteger(value) ? value : null;
}

export interface IndexEntry {
  readonly offset: number;
  readonly timestampUs: number;
  readonly position: number;
}

export function writeIndexEntry(target: Uint8Array, at: number, entry: IndexEntry): void {
  const data = new DataView(target.buffer, target.byteOffset, target.byteLength);
  data.setBigUint64(at, BigInt(entry.offset), true);
  data.setBigUint64(at + 8, BigInt(entry.timestampUs), true);
  data.setBigUint64(at + 16, BigInt(entry.position), true);
}

/** An entry as read, or null when a field exceeds 2^53 (it cannot be one this store wrote). */
export function readIndexEntry(bytes: Uint8Array, at: number): IndexEntry | null {
  const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields: number[] = [];
  for (let field = 0; field < 3; field += 1) {
    const value = data.getBigUint64(at + 8 * field, true);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) return null;
    fields.push(Number(value));
  }
  return { offset: fields[0]!, timestampUs: fields[1]!, position: fields[2]! };
}

/** The index entry of a batch whose header was read at `position`. */
export function indexEntryOf(header: BatchHeader, position: number): IndexEntry {
  return { offset: header.baseOffset, timestampUs: header.baseTimestampUs, position };
}

/**
 * Sequential reads of one file through a bounded window. `range` returns a view that is valid
 * until the next call.
 */
export class FileWindow {
  private readonly disk: Disk;
  readonly file: string;
  readonly sizeBytes: number;
  private window = new Uint8Array(0);
  private windowStart = 0;

  constructor(disk: Disk, file: string, sizeBytes: number) {
    this.disk = disk;
    this.file = file;
    this.sizeBytes = sizeBytes;
  }

  /** `length` bytes at `position` (both within the file), read from disk when not held. */
  range(position: number, length: number): Uint8Array {
    assert(position >= 0 && length >= 0 && position + length <= this.sizeBytes, 'window range within the file');
    const held = position >= this.windowStart && position + length <= this.windowStart + this.window.byteLength;
    if (!held) this.fill(position, length);
    const at = position - this.windowStart;
    return this.window.subarray(at, at + length);
  }

  private fill(position: number, length: number): void {
    const size = Math.min(Math.max(WINDOW_BYTES, length), this.sizeBytes - position);
    if (this.window.byteLength !== size) this.window = new Uint8Array(size);
    const count = this.disk.read(this.file, position, this.window);
    if (count !== size) {
      throw new DiskError('read', this.file, new Error(`short read ${count}/${size} at ${position}`));
    }
    this.windowStart = position;
  }
}

/**
 * The cheap test a byte position passes before the probe for a later valid batch verifies it:
 * a sane length and count and 204 reserved bytes that are zero. Payload bytes rarely pass it, so
 * the probe hashes almost nothing.
 */
export function plausibleBatchAt(
  bytes: Uint8Array,
  at: number,
  position: number,
  fileSizeBytes: number,
): number | null {
  assert(at >= 0 && bytes.byteLength - at >= BATCH_HEADER_SIZE, 'a whole header');
  const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (data.getUint32(at + BatchHeaderOffset.batchLength + 4, true) !== 0) return null;
  const length = data.getUint32(at + BatchHeaderOffset.batchLength, true);
  if (length < BATCH_SIZE_MIN || length > BATCH_SIZE_MAX || position + length > fileSizeBytes) return null;
  const count = data.getUint32(at + BatchHeaderOffset.messageCount, true);
  if (count === 0 || count > BATCH_MESSAGES_MAX) return null;
  for (let index = at + BatchHeaderOffset.reserved; index < at + BATCH_HEADER_SIZE; index += 1) {
    if (bytes[index] !== 0) return null;
  }
  return length;
}

/** Why a batch read from a file is not trusted: a BatchFault, or a checksum mismatch. */
export function verifyFailureReason(verify: Exclude<BatchVerify, { status: 'valid' }>): string {
  switch (verify.status) {
    case 'layout':
      return verify.fault;
    case 'message_checksum':
      return `message_checksum (message ${verify.messageIndex})`;
    case 'batch_checksum':
      return 'batch_checksum';
  }
}

export type BatchAt =
  | { readonly ok: true; readonly header: BatchHeader; readonly batch: Uint8Array }
  | { readonly ok: false; readonly reason: string };

/**
 * Reads and verifies the batch at `position` of a file of `fileSizeBytes` (the size this store
 * knows it wrote): header bounds first, so a lying `batch_length` never makes it read past the
 * file or allocate beyond BATCH_SIZE_MAX. The batch is a new array the caller owns.
 */
export function readBatchAt(disk: Disk, kernels: Kernels, file: string, position: number, fileSizeBytes: number): BatchAt {
  if (fileSizeBytes - position < BATCH_HEADER_SIZE) return { ok: false, reason: 'header_truncated' };
  const head = new Uint8Array(BATCH_HEADER_SIZE);
  if (disk.read(file, position, head) !== BATCH_HEADER_SIZE) return { ok: false, reason: 'short_read' };
  const length = plausibleBatchAt(head, 0, position, fileSizeBytes);
  if (length === null) {
    // The header's own reading names the rule it breaks, when it breaks one; a header that
    // reads cleanly here lies about its size (below one frame, or past the file's end).
    const read = readBatchHeader(head, 0);
    return { ok: false, reason: read.ok ? 'header_field' : read.fault };
  }
  const batch = new Uint8Array(length);
  if (disk.read(file, position, batch) !== length) return { ok: false, reason: 'short_read' };
  return verifiedBatch(kernels, batch);
}

/** Verifies `batch` (exactly one batch) with the kernel; the header is read only once it holds. */
export function verifiedBatch(kernels: Kernels, batch: Uint8Array): BatchAt {
  const verify = kernels.messageBatchVerify(batch);
  if (verify.status !== 'valid') return { ok: false, reason: verifyFailureReason(verify) };
  const read = readBatchHeader(batch, 0);
  assert(read.ok, 'a verified batch has a valid header');
  return { ok: true, header: read.header, batch };
}

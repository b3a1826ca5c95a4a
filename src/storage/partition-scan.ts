/**
 * The open-time walk of one segment: verifies every batch of the `.log` with the kernel, checks
 * that each one belongs where it is (this partition, dense offsets from the segment's start,
 * non-decreasing timestamps), compares the `.index` against what the log implies, and classifies
 * the first failure the way the WAL does (wal.ts):
 * - nothing that verifies after the damage: a torn tail, the remains of a flush that never
 *   completed, which the owner may truncate (in the last segment only);
 * - a batch that verifies somewhere after it: interior damage, refused, because the bytes after
 *   it were flushed and the damaged batch may have been acknowledged.
 * The probe tries every later byte position (a damaged `batch_length` says nothing about where
 * the next batch starts). A payload that happens to hold a whole valid batch makes a torn tail
 * look interior: that errs towards refusing, never towards deleting flushed data.
 */
import { BATCH_HEADER_SIZE, batchLastOffset, readBatchHeader } from '../format/message-batch.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Disk } from './disk.js';
import { RefusalReason } from './refusal.js';
import {
  BATCH_SIZE_MIN,
  FileWindow,
  INDEX_ENTRY_SIZE,
  indexEntryOf,
  plausibleBatchAt,
  readIndexEntry,
  segmentIndexName,
  segmentLogName,
  verifiedBatch,
  WINDOW_BYTES,
  writeIndexEntry,
  type IndexEntry,
} from './partition-segment.js';

export interface SegmentScanFailure {
  /** Byte position of the batch at fault in the `.log`. */
  readonly position: number;
  /**
   * `damaged`: the bytes there are not a batch that verifies. `misplaced`: they verify, but the
   * batch names another partition, does not continue the offsets, or goes back in time.
   */
  readonly kind: 'damaged' | 'misplaced';
  readonly reason: string;
  /** Where a batch that verifies starts after the damage, or null (a torn tail). */
  readonly validAfter: number | null;
  /** XXH3-64 of the bytes at fault: two reads agree only when they read the same bytes. */
  readonly digest: bigint;
}

export interface SegmentScan {
  readonly startOffset: number;
  readonly fileSizeBytes: number;
  /** End of the verified prefix: the bytes of its batches. */
  readonly validEnd: number;
  readonly batchCount: number;
  readonly messageCount: number;
  /** The last offset of the verified prefix; startOffset - 1 when it holds no batch. */
  readonly lastOffset: number;
  /** base_timestamp of the last verified batch (0 when none). */
  readonly maxTimestampUs: number;
  readonly failure: SegmentScanFailure | null;
  /**
   * Null when the `.index` holds exactly one entry per verified batch, each naming that batch;
   * otherwise why it must be rebuilt.
   */
  readonly indexProblem: string | null;
}

/** Compares the `.index` against the log's batches as the walk produces them. */
class IndexCheck {
  private readonly window: FileWindow | null;
  private readonly sizeBytes: number;
  problem: string | null = null;

  constructor(disk: Disk, file: string) {
    const exists = disk.exists(file);
    this.sizeBytes = exists ? disk.size(file) : 0;
    this.window = exists ? new FileWindow(disk, file, this.sizeBytes) : null;
    if (!exists) this.problem = 'missing';
  }

  expect(entryIndex: number, entry: IndexEntry): void {
    if (this.problem !== null || this.window === null) return;
    const at = entryIndex * INDEX_ENTRY_SIZE;
    if (at + INDEX_ENTRY_SIZE > this.sizeBytes) {
      this.problem = `short: ${this.sizeBytes} bytes, entry ${entryIndex} missing`;
      return;
    }
    const stored = readIndexEntry(this.window.range(at, INDEX_ENTRY_SIZE), 0);
    const agrees =
      stored !== null &&
      stored.offset === entry.offset &&
      stored.timestampUs === entry.timestampUs &&
      stored.position === entry.position;
    if (!agrees) this.problem = `entry ${entryIndex} disagrees with the log`;
  }

  finish(batchCount: number): string | null {
    if (this.problem === null && this.sizeBytes !== batchCount * INDEX_ENTRY_SIZE) {
      this.problem = `${this.sizeBytes} bytes for ${batchCount} batches`;
    }
    return this.problem;
  }
}

interface WalkState {
  position: number;
  expectedOffset: number;
  batchCount: number;
  messageCount: number;
  maxTimestampUs: number;
}

/**
 * Walks and verifies one segment, reading it once through a bounded window. `floorTimestampUs`:
 * the previous segment's newest base_timestamp (time never goes back across segments either).
 */
export function scanSegment(
  disk: Disk,
  kernels: Kernels,
  startOffset: number,
  partitionId: number,
  floorTimestampUs = 0,
): SegmentScan {
  const file = segmentLogName(startOffset);
  const fileSizeBytes = disk.size(file);
  const window = new FileWindow(disk, file, fileSizeBytes);
  const index = new IndexCheck(disk, segmentIndexName(startOffset));
  const walk: WalkState = {
    position: 0,
    expectedOffset: startOffset,
    batchCount: 0,
    messageCount: 0,
    maxTimestampUs: floorTimestampUs,
  };
  let failure: SegmentScanFailure | null = null;
  while (walk.position < fileSizeBytes && failure === null) {
    failure = walkOne(kernels, window, walk, partitionId, index);
  }
  if (failure !== null && failure.kind === 'damaged') {
    failure = { ...failure, validAfter: probeValidBatch(kernels, window, failure.position + 1) };
  }
  return {
    startOffset,
    fileSizeBytes,
    validEnd: walk.position,
    batchCount: walk.batchCount,
    messageCount: walk.messageCount,
    lastOffset: walk.expectedOffset - 1,
    maxTimestampUs: walk.batchCount > 0 ? walk.maxTimestampUs : 0,
    failure,
    indexProblem: index.finish(walk.batchCount),
  };
}

/** Verifies the batch at `walk.position` and advances past it, or returns why it cannot. */
function walkOne(
  kernels: Kernels,
  window: FileWindow,
  walk: WalkState,
  partitionId: number,
  index: IndexCheck,
): SegmentScanFailure | null {
  const { position } = walk;
  const remaining = window.sizeBytes - position;
  const fail = (kind: SegmentScanFailure['kind'], reason: string, length: number): SegmentScanFailure => ({
    position,
    kind,
    reason,
    validAfter: null,
    digest: kernels.xxh3_64(window.range(position, Math.min(length, remaining))),
  });
  if (remaining < BATCH_HEADER_SIZE) return fail('damaged', 'header_truncated', remaining);
  const head = window.range(position, BATCH_HEADER_SIZE);
  const length = plausibleBatchAt(head, 0, position, window.sizeBytes);
  if (length === null) {
    const read = readBatchHeader(head.slice(), 0);
    return fail('damaged', read.ok ? 'header_field' : read.fault, BATCH_HEADER_SIZE);
  }
  const verified = verifiedBatch(kernels, window.range(position, length));
  if (!verified.ok) return fail('damaged', verified.reason, length);
  const { header } = verified;
  if (header.partitionId !== partitionId) {
    return fail('misplaced', `partition ${header.partitionId}, expected ${partitionId}`, length);
  }
  if (header.baseOffset !== walk.expectedOffset) {
    return fail('misplaced', `base offset ${header.baseOffset}, expected ${walk.expectedOffset}`, length);
  }
  if (header.baseTimestampUs < walk.maxTimestampUs) {
    return fail('misplaced', `timestamp ${header.baseTimestampUs} before ${walk.maxTimestampUs}`, length);
  }
  index.expect(walk.batchCount, indexEntryOf(header, position));
  walk.position += length;
  walk.expectedOffset = batchLastOffset(header) + 1;
  walk.batchCount += 1;
  walk.messageCount += header.messageCount;
  walk.maxTimestampUs = header.baseTimestampUs;
  return null;
}

/** The first position at or after `from` where a whole batch verifies, or null. */
function probeValidBatch(kernels: Kernels, window: FileWindow, from: number): number | null {
  const size = window.sizeBytes;
  let chunkStart = from;
  while (chunkStart + BATCH_SIZE_MIN <= size) {
    // Chunks overlap by a header, so every position gets a whole header to look at.
    const chunkLength = Math.min(WINDOW_BYTES, size - chunkStart);
    const positions = chunkLength - BATCH_HEADER_SIZE + 1;
    let chunk = window.range(chunkStart, chunkLength);
    for (let offset = 0; offset < positions; offset += 1) {
      const length = plausibleBatchAt(chunk, offset, chunkStart + offset, size);
      if (length === null) continue;
      const position = chunkStart + offset;
      if (verifiedBatch(kernels, window.range(position, length)).ok) return position;
      chunk = window.range(chunkStart, chunkLength); // the candidate's read may have moved it
    }
    chunkStart += positions;
  }
  return null;
}

/**
 * Rewrites `{start}.index` from the first `validEnd` bytes of the log, which `scanSegment` has
 * verified: one entry per batch, then the file cut to exactly that and fsynced. Returns whether
 * the file had to be created (the caller fsyncs the directory).
 */
export function rebuildIndex(disk: Disk, startOffset: number, validEnd: number): { entries: number; created: boolean } {
  const log = new FileWindow(disk, segmentLogName(startOffset), validEnd);
  const file = segmentIndexName(startOffset);
  const created = !disk.exists(file);
  const chunkEntries = WINDOW_BYTES / INDEX_ENTRY_SIZE;
  const chunk = new Uint8Array(chunkEntries * INDEX_ENTRY_SIZE);
  let entries = 0;
  let pending = 0;
  let position = 0;
  const writePending = (): void => {
    if (pending === 0) return;
    disk.write(file, (entries - pending) * INDEX_ENTRY_SIZE, chunk.subarray(0, pending * INDEX_ENTRY_SIZE));
    pending = 0;
  };
  while (position < validEnd) {
    const head = log.range(position, BATCH_HEADER_SIZE);
    const length = plausibleBatchAt(head, 0, position, validEnd);
    assert(length !== null, 'the scan verified every batch of the prefix');
    const read = readBatchHeader(log.range(position, length), 0);
    assert(read.ok, 'the scan verified every batch of the prefix');
    writeIndexEntry(chunk, pending * INDEX_ENTRY_SIZE, indexEntryOf(read.header, position));
    pending += 1;
    entries += 1;
    if (pending === chunkEntries) writePending();
    position += length;
  }
  writePending();
  if (created && entries === 0) disk.write(file, 0, new Uint8Array(0));
  disk.truncate(file, entries * INDEX_ENTRY_SIZE);
  disk.fsync(file);
  return { entries, created };
}

export type ScanVerdict =
  | { readonly verdict: 'torn_tail' }
  | { readonly verdict: 'refuse'; readonly reason: RefusalReason; readonly detail: string };

/**
 * What boot does with a scan's failure (shared with `vrmeta inspect partition`, so that "inspect
 * says valid" means "boot accepts it"): only damage with nothing valid after it, in the last
 * segment, is a torn tail.
 */
export function judgeScanFailure(scan: SegmentScan, isLast: boolean): ScanVerdict {
  const failure = scan.failure;
  assert(failure !== null, 'a failure to judge');
  const verified = `${scan.batchCount} batches verified before it`;
  if (failure.kind === 'misplaced') {
    return { verdict: 'refuse', reason: RefusalReason.segmentBatchMisplaced, detail: `batch verifies but ${failure.reason}; ${verified}` };
  }
  if (!isLast) {
    const detail = `batch fails verification (${failure.reason}) in a sealed segment (a later segment exists); ${verified}`;
    return { verdict: 'refuse', reason: RefusalReason.segmentSealedCorrupt, detail };
  }
  if (failure.validAfter !== null) {
    const detail = `batch fails verification (${failure.reason}) and a valid batch follows at ${failure.validAfter}; ${verified}`;
    return { verdict: 'refuse', reason: RefusalReason.segmentInteriorCorruption, detail };
  }
  return { verdict: 'torn_tail' };
}

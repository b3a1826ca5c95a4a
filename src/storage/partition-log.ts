/**
 * One partition's message store over ONE `Disk` (the partition's directory): segments
 * `{start:020}.log` + `{start:020}.index` (iggy-partition-plane.md §3; partition-segment.ts has
 * the layout), offsets dense from 0, each batch taking `message_count` consecutive offsets.
 *
 * Writes. `append` keeps the batch in memory (reads see it at once); `flush` writes everything
 * appended since the last flush with ONE write per file, then fsyncs the log, the index and, when
 * it created them, the directory. One write per file per flush is what makes recovery exact: a
 * crash can then only tear the tail of the last flush (a prefix lands, the rest is lost, zeroed or
 * garbage), never leave a lost batch with a later one applied after it, which would read as
 * interior damage and refuse boot after an ordinary power loss. A device that persists a later
 * page of one write before an earlier one still can; that ends in a refusal, never in a
 * truncation of flushed data. Pending bytes are bounded (`pendingBytesMax`): beyond it `append`
 * flushes on its own, which is always safe.
 *
 * Rotation (§3.6), deterministic across replicas because it keys on appended bytes only: after an
 * append, a segment whose log holds >= `segmentSizeBytes` is flushed and sealed, and the next
 * append starts a new segment at its end + 1. Sealing flushes first, so a segment is durable
 * before its successor exists: a sealed segment can never be torn by a crash, and any damage in
 * one refuses boot.
 *
 * Open (§3.10, stricter): orphan `.index` files are removed; every segment is walked and every
 * batch verified (partition-scan.ts); a torn tail of the LAST segment is truncated and fsynced
 * once a second read agrees (`readUntilStable`), interior damage, a damaged sealed segment, a
 * misplaced batch, or a hole or overlap between segments refuse with a StorageRefusal. An index
 * that is missing or disagrees with the log is rebuilt from the log, with a log line.
 *
 * Reads verify every batch they take from a file with the kernel (checksums and layout) and check
 * it is the batch expected there; anything else is a fault result naming file, position and
 * reason, never data. The index only says where to start: a position that does not hold the batch
 * it names makes the read walk the segment from its first byte instead (and log it).
 *
 * Purge (§3.9): the partition restarts at offset 0, as in the reference (its superblock frontier
 * goes to 0 and the log resets to one empty segment at 0). Clearing consumer offsets is the
 * caller's part (partition-offsets.ts). Removal goes oldest first, each unlink made durable
 * before the next, so a crash inside a purge leaves a suffix of the old log: never a hole, and
 * never an end offset that went back (which would let offsets be reused for other messages
 * before the purge completed). Boot accepts it as it would after retention, and the caller, which
 * knows a purge was under way, runs it again.
 *
 * Any IO failure of a write path poisons the instance (as the WAL): its view of the files may be
 * wrong, so everything is refused until it is reopened.
 */
import { batchLastOffset, type BatchHeader } from '../format/message-batch.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Logger } from '../vsr/io.js';
import type { Disk } from './disk.js';
import { readUntilStable, StoragePoisoned } from './durable-file.js';
import { judgeScanFailure, rebuildIndex, scanSegment, type SegmentScan } from './partition-scan.js';
import {
  INDEX_ENTRY_SIZE,
  indexEntryOf,
  parseSegmentName,
  readBatchAt,
  readIndexEntry,
  segmentIndexName,
  segmentLogName,
  verifiedBatch,
  writeIndexEntry,
  type IndexEntry,
} from './partition-segment.js';
import { RefusalReason, silentLogger, StorageRefusal } from './refusal.js';

/** Segments one partition tracks: 64 Ki segments of the 1 GiB default are 64 TiB. */
export const PARTITION_SEGMENTS_MAX = 64 * 1024;
/** Default bound on appended, unflushed bytes before `append` flushes on its own. */
export const PENDING_BYTES_MAX_DEFAULT = 16 * 1024 * 1024;
/** Default bound on the bytes one `readFrom` returns (it always returns at least one batch). */
export const READ_BYTES_MAX_DEFAULT = 16 * 1024 * 1024;

export interface PartitionLogOptions {
  /** Every batch of this partition carries this `partition_id`. */
  readonly partitionId: number;
  /** A segment is sealed once its log holds at least this many bytes (§3.6). */
  readonly segmentSizeBytes: number;
  readonly pendingBytesMax?: number;
  readonly logger?: Logger;
}

export interface PartitionLogStats {
  /** Messages in the retained segments. */
  readonly messagesCount: number;
  /** Sum of `batch_length` over the retained batches (the `.log` bytes). */
  readonly sizeBytes: number;
  readonly segmentsCount: number;
  /** The first retained offset (the oldest segment's start). */
  readonly startOffset: number;
  /** The last appended offset, or null when the partition holds no message. */
  readonly endOffset: number | null;
  /** The last offset a crash cannot lose, or null. */
  readonly durableEndOffset: number | null;
}

export interface PartitionOpenReport {
  readonly stats: PartitionLogStats;
  /** The directory held no segment and one empty segment at offset 0 was created. */
  readonly created: boolean;
  readonly tornTail: {
    readonly segment: string;
    readonly position: number;
    readonly reason: string;
    readonly droppedBytes: number;
  } | null;
  readonly indexesRebuilt: readonly { readonly segment: string; readonly reason: string }[];
  readonly orphanIndexesRemoved: readonly string[];
}

/** A batch read from a file failed verification, or is not the one expected where it was. */
export interface PartitionReadFault {
  readonly file: string;
  readonly position: number;
  readonly reason: string;
}

export type PartitionRead =
  | { readonly ok: true; readonly batches: readonly Uint8Array[] }
  | { readonly ok: false; readonly fault: PartitionReadFault };

export type PartitionTimestampRead =
  | { readonly ok: true; readonly batch: Uint8Array | null }
  | { readonly ok: false; readonly fault: PartitionReadFault };

export interface SegmentInfo {
  readonly startOffset: number;
  /** startOffset - 1 while the segment holds no batch. */
  readonly lastOffset: number;
  readonly sizeBytes: number;
  readonly batchCount: number;
  /** base_timestamp of the newest batch (0 while empty): timestamps never decrease. */
  readonly maxTimestampUs: number;
  readonly sealed: boolean;
}

interface Segment {
  readonly startOffset: number;
  lastOffset: number;
  /** Log bytes including pending batches. */
  sizeBytes: number;
  batchCount: number;
  maxTimestampUs: number;
  sealed: boolean;
  /** What the files hold (written and fsynced by a flush). */
  fileSizeBytes: number;
  fileBatchCount: number;
  /** The last offset in the files. */
  fileLastOffset: number;
  /** The files' directory entries are durable. */
  filesDurable: boolean;
}

interface FlushPlan {
  readonly segment: Segment;
  readonly log: string;
  readonly index: string;
  /** The flush creates the segment's files: the directory is fsynced too. */
  readonly createsFiles: boolean;
  readonly sizeBytes: number;
  readonly batchCount: number;
  readonly lastOffset: number;
}

interface PendingBatch {
  readonly batch: Uint8Array;
  readonly header: BatchHeader;
  /** Where the batch goes in the active segment's log. */
  readonly position: number;
}

const HANDED_OVER = Symbol('handed over segments');

/** Segments one log handed over for another to adopt (`handOverSegments`). */
export interface AdoptableSegments {
  readonly [HANDED_OVER]: readonly Segment[];
  /** Their start offsets, oldest first (their file names). */
  readonly startOffsets: readonly number[];
}

/** What `truncateTo` did (see there). */
export type TruncateOutcome =
  | { readonly kind: 'cut'; readonly nextOffset: number; readonly droppedMessages: number }
  | { readonly kind: 'behind'; readonly nextOffset: number }
  | { readonly kind: 'not_a_boundary'; readonly nextOffset: number };

/** Where a cut leaves a segment: its bytes, batches, last offset and newest timestamp. */
interface CutPoint {
  readonly position: number;
  readonly batchCount: number;
  readonly lastOffset: number;
  readonly maxTimestampUs: number;
}

/** What one batch of a walk contributes; `stop` ends the walk after it. */
type Visit = 'skip' | 'take' | 'stop';

export class PartitionLog {
  private readonly disk: Disk;
  private readonly kernels: Kernels;
  private readonly logger: Logger;
  readonly partitionId: number;
  readonly segmentSizeBytes: number;
  private readonly pendingBytesMax: number;
  /** Oldest first; never empty; every one but the last is sealed; contiguous offsets. */
  private segments: Segment[];
  /** Batches appended since the last flush, all in the last segment. */
  private pending: PendingBatch[] = [];
  private pendingBytes = 0;
  private poisonedBy: unknown = null;
  /** An async flush is between its writes and its last fsync. */
  private flushing = false;
  readonly openReport: PartitionOpenReport;

  private constructor(disk: Disk, kernels: Kernels, options: PartitionLogOptions, opened: Opened) {
    this.disk = disk;
    this.kernels = kernels;
    this.logger = options.logger ?? silentLogger;
    this.partitionId = options.partitionId;
    this.segmentSizeBytes = options.segmentSizeBytes;
    this.pendingBytesMax = options.pendingBytesMax ?? PENDING_BYTES_MAX_DEFAULT;
    this.segments = opened.segments;
    this.openReport = { ...opened.report, stats: this.stats() };
  }

  /**
   * Opens the partition directory, creating one empty segment at offset 0 when it holds none.
   * Throws StorageRefusal when the bytes cannot be trusted, DiskError when IO fails.
   */
  static open(disk: Disk, kernels: Kernels, options: PartitionLogOptions): PartitionLog {
    assert(Number.isSafeInteger(options.partitionId) && options.partitionId >= 0, 'partition id');
    assert(
      Number.isSafeInteger(options.segmentSizeBytes) && options.segmentSizeBytes > 0 && options.segmentSizeBytes <= 1 << 30,
      `segment size ${options.segmentSizeBytes}`,
    );
    const pendingBytesMax = options.pendingBytesMax ?? PENDING_BYTES_MAX_DEFAULT;
    assert(Number.isSafeInteger(pendingBytesMax) && pendingBytesMax > 0, 'pending bytes bound');
    const opened = openSegments(disk, kernels, options, options.logger ?? silentLogger);
    return new PartitionLog(disk, kernels, options, opened);
  }

  get poisoned(): boolean {
    return this.poisonedBy !== null;
  }

  /** The offset the next batch must start at. */
  get nextOffset(): number {
    return this.lastSegment().lastOffset + 1;
  }

  stats(): PartitionLogStats {
    let messagesCount = 0;
    let sizeBytes = 0;
    for (const segment of this.segments) {
      messagesCount += segment.lastOffset - segment.startOffset + 1;
      sizeBytes += segment.sizeBytes;
    }
    const last = this.lastSegment();
    const durable = last.fileLastOffset;
    return {
      messagesCount,
      sizeBytes,
      segmentsCount: this.segments.length,
      startOffset: this.segments[0]!.startOffset,
      endOffset: last.lastOffset >= 0 ? last.lastOffset : null,
      durableEndOffset: durable >= 0 ? durable : null,
    };
  }

  /** The segments, oldest first. */
  segmentInfos(): SegmentInfo[] {
    return this.segments.map((segment) => ({
      startOffset: segment.startOffset,
      lastOffset: segment.lastOffset,
      sizeBytes: segment.sizeBytes,
      batchCount: segment.batchCount,
      maxTimestampUs: segment.maxTimestampUs,
      sealed: segment.sealed,
    }));
  }

  /**
   * Appends one stamped batch. Preconditions (asserted: a violation is a bug in the caller): it
   * verifies, carries this partition's id, starts at `nextOffset`, and its base_timestamp is not
   * before the previous batch's. Durable only after the next `flush` (or a rotation's).
   */
  append(batch: Uint8Array): void {
    this.checkWritable();
    // Re-verified here, once, because a batch that does not verify would be written, read back
    // as damage at the next boot, and either truncated as a torn tail or refuse boot.
    const verified = verifiedBatch(this.kernels, batch);
    assert(verified.ok, `partition append of a batch that does not verify (${verified.ok ? '' : verified.reason})`);
    const header = verified.header;
    assert(header.partitionId === this.partitionId, `partition append of partition ${header.partitionId}`);
    assert(header.baseOffset === this.nextOffset, `partition append at ${header.baseOffset}, next offset ${this.nextOffset}`);
    assert(header.baseTimestampUs >= this.newestTimestampUs(), 'partition append goes back in time');
    let segment = this.lastSegment();
    if (segment.sealed) segment = this.startSegment(header.baseOffset);
    if (this.pending.length > 0 && this.pendingBytes + batch.byteLength > this.pendingBytesMax) this.flush();
    this.pending.push({ batch: batch.slice(), header, position: segment.sizeBytes });
    this.pendingBytes += batch.byteLength;
    segment.sizeBytes += batch.byteLength;
    segment.batchCount += 1;
    segment.lastOffset = batchLastOffset(header);
    segment.maxTimestampUs = header.baseTimestampUs;
    if (segment.sizeBytes >= this.segmentSizeBytes) {
      this.flush();
      segment.sealed = true;
      this.logger.log('info', 'partition_segment_sealed', {
        segment: segmentLogName(segment.startOffset),
        lastOffset: segment.lastOffset,
        sizeBytes: segment.sizeBytes,
      });
    }
  }

  /**
   * Makes every appended batch durable: one write per file, fsync of the log and the index, and
   * of the directory when this flush created the files. For the caller's group commit.
   */
  flush(): void {
    this.checkWritable();
    const plan = this.writePending();
    if (plan === null) return;
    try {
      this.disk.fsync(plan.log);
      this.disk.fsync(plan.index);
      if (plan.createsFiles) this.disk.fsyncDirectory();
    } catch (error) {
      this.poison(error);
      throw error;
    }
    this.flushed(plan);
  }

  /** The disk can run `flushAsync`'s fsyncs off the event loop. */
  get canFlushAsync(): boolean {
    return this.disk.fsyncAsync !== undefined && this.disk.fsyncDirectoryAsync !== undefined;
  }

  /**
   * `flush` with its fsyncs on the thread pool (the writes into the page cache stay synchronous):
   * `done` runs on a later turn with null once the batches are durable, or with the error (the
   * log is then poisoned, as after a failed `flush`). Reads may run meanwhile; any other call is
   * a bug until `done` (an append could otherwise flush the same bytes a second time).
   */
  flushAsync(done: (error: Error | null) => void): void {
    this.checkWritable();
    const fsyncAsync = this.disk.fsyncAsync;
    const fsyncDirectoryAsync = this.disk.fsyncDirectoryAsync;
    assert(fsyncAsync !== undefined && fsyncDirectoryAsync !== undefined, 'flushAsync needs a disk with async fsyncs');
    const plan = this.writePending();
    if (plan === null) {
      setImmediate(() => done(null));
      return;
    }
    this.flushing = true;
    const finish = (error: Error | null): void => {
      this.flushing = false;
      if (error !== null) this.poison(error);
      else this.flushed(plan);
      done(error);
    };
    fsyncAsync.call(this.disk, plan.log, (logError) => {
      if (logError !== null) return finish(logError);
      fsyncAsync.call(this.disk, plan.index, (indexError) => {
        if (indexError !== null || !plan.createsFiles) return finish(indexError);
        fsyncDirectoryAsync.call(this.disk, finish);
      });
    });
  }

  /** Writes the pending batches (one write per file), nothing synced; null when nothing to do. */
  private writePending(): FlushPlan | null {
    const segment = this.lastSegment();
    if (this.pending.length === 0 && segment.filesDurable) return null;
    const log = segmentLogName(segment.startOffset);
    const index = segmentIndexName(segment.startOffset);
    const logImage = new Uint8Array(this.pendingBytes);
    const indexImage = new Uint8Array(this.pending.length * INDEX_ENTRY_SIZE);
    let at = 0;
    for (const [ordinal, entry] of this.pending.entries()) {
      assert(entry.position === segment.fileSizeBytes + at, 'pending batches continue the file');
      logImage.set(entry.batch, at);
      writeIndexEntry(indexImage, ordinal * INDEX_ENTRY_SIZE, indexEntryOf(entry.header, entry.position));
      at += entry.batch.byteLength;
    }
    try {
      this.disk.write(log, segment.fileSizeBytes, logImage);
      this.disk.write(index, segment.fileBatchCount * INDEX_ENTRY_SIZE, indexImage);
    } catch (error) {
      this.poison(error);
      throw error;
    }
    return {
      segment,
      log,
      index,
      createsFiles: !segment.filesDurable,
      sizeBytes: logImage.byteLength,
      batchCount: this.pending.length,
      lastOffset: segment.lastOffset,
    };
  }

  private flushed(plan: FlushPlan): void {
    const { segment } = plan;
    assert(this.pending.length === plan.batchCount && segment === this.lastSegment(), 'nothing appended during a flush');
    segment.fileSizeBytes += plan.sizeBytes;
    segment.fileBatchCount += plan.batchCount;
    segment.fileLastOffset = plan.lastOffset;
    segment.filesDurable = true;
    this.pending = [];
    this.pendingBytes = 0;
  }

  /**
   * The batches that hold offsets from `offset` on (below the retained start: from the start),
   * oldest first, whole: the first may start before `offset` and the last may reach past
   * `ceilingOffset` (the caller slices). No batch starting above `ceilingOffset` is returned.
   * Stops once `maxMessages` offsets in [offset, ceilingOffset] are covered, or before exceeding
   * `bytesMax` (one batch always fits).
   */
  readFrom(offset: number, maxMessages: number, ceilingOffset: number, bytesMax = READ_BYTES_MAX_DEFAULT): PartitionRead {
    this.checkUsable();
    assert(Number.isSafeInteger(offset) && offset >= 0, `read offset ${offset}`);
    assert(Number.isSafeInteger(maxMessages) && maxMessages >= 1, `read count ${maxMessages}`);
    assert(Number.isSafeInteger(ceilingOffset) && ceilingOffset >= -1, `read ceiling ${ceilingOffset}`);
    assert(Number.isSafeInteger(bytesMax) && bytesMax > 0, 'read byte bound');
    const from = Math.max(offset, this.segments[0]!.startOffset);
    const end = Math.min(ceilingOffset, this.lastSegment().lastOffset);
    const batches: Uint8Array[] = [];
    if (from > end) return { ok: true, batches };
    let covered = 0;
    let bytes = 0;
    const visit = (header: BatchHeader, batch: Uint8Array): Visit => {
      const last = batchLastOffset(header);
      if (last < from) return 'skip';
      if (header.baseOffset > end) return 'stop';
      if (batches.length > 0 && bytes + batch.byteLength > bytesMax) return 'stop';
      batches.push(batch);
      bytes += batch.byteLength;
      covered += Math.min(last, end) - Math.max(header.baseOffset, from) + 1;
      return covered >= maxMessages || last >= end ? 'stop' : 'take';
    };
    for (let index = this.segmentIndexOf(from); index < this.segments.length; index += 1) {
      const segment = this.segments[index]!;
      const start = this.indexLowerBound(segment, (entry) => entry.offset <= from);
      const outcome = this.walk(segment, start, visit);
      if (outcome !== null && outcome !== 'stop') return { ok: false, fault: outcome };
      if (outcome === 'stop') break;
    }
    return { ok: true, batches };
  }

  /**
   * The first batch whose base_timestamp is >= `timestampUs` (§5.3: the append time, not the
   * producer's), or null when every batch is older.
   */
  findByTimestamp(timestampUs: number): PartitionTimestampRead {
    this.checkUsable();
    assert(Number.isSafeInteger(timestampUs) && timestampUs >= 0, `timestamp ${timestampUs}`);
    // Timestamps never decrease (append asserts it, open refuses a file where they do), so the
    // first segment whose newest batch is recent enough holds the answer.
    const segment = this.segments.find((candidate) => candidate.batchCount > 0 && candidate.maxTimestampUs >= timestampUs);
    if (segment === undefined) return { ok: true, batch: null };
    let found: Uint8Array | null = null;
    const start = this.indexLowerBound(segment, (entry) => entry.timestampUs < timestampUs);
    const outcome = this.walk(segment, start, (header, batch) => {
      if (header.baseTimestampUs < timestampUs) return 'skip';
      found = batch;
      return 'stop';
    });
    if (outcome !== null && outcome !== 'stop') return { ok: false, fault: outcome };
    return { ok: true, batch: found };
  }

  /** base_timestamp of the newest batch (0 when the log holds none). */
  get lastTimestampUs(): number {
    return this.newestTimestampUs();
  }

  /**
   * Hands this log's segments over to the log of the same partition that continues it (see
   * `adoptOlderSegments`): flushed, every one sealed, in a form only that method reads. The caller
   * moves the files; this instance is unusable afterwards (its files are no longer its own).
   */
  handOverSegments(): AdoptableSegments {
    this.checkWritable();
    this.flush();
    assert(this.nextOffset > this.segments[0]!.startOffset, 'a hand-over carries batches');
    const segments = this.segments
      .filter((segment) => segment.batchCount > 0)
      .map((segment) => ({ ...segment, sealed: true, filesDurable: true }));
    this.poisonedBy = new Error('segments handed over to the log that continues them');
    return { [HANDED_OVER]: segments, startOffsets: segments.map((segment) => segment.startOffset) };
  }

  /**
   * Takes `older`'s segments in front of this log's, once their files are this log's (renamed by
   * the caller, newest first, so that a crash in between leaves a contiguous log that merely
   * starts later). They must end right where this log starts.
   */
  adoptOlderSegments(older: AdoptableSegments): void {
    this.checkWritable();
    const adopted = older[HANDED_OVER];
    assert(adopted.length > 0, 'segments to adopt');
    const first = this.segments[0]!;
    assert(adopted[adopted.length - 1]!.lastOffset + 1 === first.startOffset, 'adopted segments end where this log starts');
    assert(adopted.length + this.segments.length <= PARTITION_SEGMENTS_MAX, 'adopted segments fit the segment bound');
    this.segments = [...adopted.map((segment) => ({ ...segment })), ...this.segments];
    this.logger.log('info', 'partition_segments_adopted', { partitionId: this.partitionId, segments: adopted.length, startOffset: adopted[0]!.startOffset });
  }

  /**
   * Takes `newer`'s segments after this log's, once their files are this log's (renamed by the
   * caller, oldest first: a crash in between leaves this log merely shorter). They must start
   * right where this log ends. An empty last segment of this log gives way to them (its files
   * are the first one's name, replaced by the rename); a non-empty one is sealed.
   */
  adoptNewerSegments(newer: AdoptableSegments): void {
    this.checkWritable();
    assert(this.pending.length === 0, 'the log is flushed before newer segments follow it');
    const adopted = newer[HANDED_OVER];
    assert(adopted.length > 0, 'segments to adopt');
    assert(adopted[0]!.startOffset === this.nextOffset, 'adopted segments start where this log ends');
    const last = this.lastSegment();
    if (last.batchCount === 0) this.segments.pop();
    else last.sealed = true;
    assert(adopted.length + this.segments.length <= PARTITION_SEGMENTS_MAX, 'adopted segments fit the segment bound');
    const taken = adopted.map((segment) => ({ ...segment }));
    // The newest adopted segment is the active one again, below the rotation size.
    const active = taken[taken.length - 1]!;
    active.sealed = active.sizeBytes >= this.segmentSizeBytes;
    this.segments = [...this.segments, ...taken];
    this.logger.log('info', 'partition_segments_adopted', { partitionId: this.partitionId, segments: adopted.length, startOffset: adopted[0]!.startOffset });
  }

  /** Leading segments that may be removed: sealed, and never the last one (it names the next offset). */
  get removableSegmentCount(): number {
    return this.segments.length - 1;
  }

  /**
   * Removes the `count` oldest segments (at most `removableSegmentCount`), durably. Oldest first,
   * each unlink made durable before the next, so a crash leaves a suffix: never a hole.
   */
  removeOldestSegments(count: number): { readonly messagesCount: number; readonly sizeBytes: number } {
    this.checkWritable();
    assert(Number.isSafeInteger(count) && count >= 0 && count <= this.removableSegmentCount, `remove ${count} segments`);
    let messagesCount = 0;
    let sizeBytes = 0;
    for (let removed = 0; removed < count; removed += 1) {
      const segment = this.segments[0]!;
      assert(segment.sealed && segment.filesDurable && this.segments.length > 1, 'only durable sealed segments are removed');
      this.unlinkSegment(segment);
      this.segments.shift();
      messagesCount += segment.lastOffset - segment.startOffset + 1;
      sizeBytes += segment.sizeBytes;
      this.logger.log('info', 'partition_segment_removed', { segment: segmentLogName(segment.startOffset) });
    }
    return { messagesCount, sizeBytes };
  }

  /**
   * Cuts the log back so that `nextOffset` becomes `offset`, durably (a crash afterwards finds
   * the log ending there), and reports how it went:
   * - `cut`: batches at and above `offset` were dropped (pending ones, file bytes, whole later
   *   segments), or there were none (`droppedMessages` 0);
   * - `behind`: the log ends before `offset` (it lost flushed data, or never had it), nothing
   *   changed;
   * - `not_a_boundary`: `offset` falls inside a batch, or below the retained start, nothing
   *   changed.
   * A replicated partition restores its checkpoint with this: the log may hold batches applied
   * after the checkpoint (the page cache flushed them), which the journal then applies again.
   * A segment cut back below the rotation size is active again, so the replay rotates where the
   * first application did (rotation keys on bytes only).
   */
  truncateTo(offset: number): TruncateOutcome {
    this.checkWritable();
    assert(Number.isSafeInteger(offset) && offset >= 0, `truncate offset ${offset}`);
    if (offset > this.nextOffset) return { kind: 'behind', nextOffset: this.nextOffset };
    if (offset < this.segments[0]!.startOffset) return { kind: 'not_a_boundary', nextOffset: this.nextOffset };
    const index = this.segmentIndexOf(offset);
    const segment = this.segments[index]!;
    const cut = this.cutPosition(segment, offset);
    if (cut === null) return { kind: 'not_a_boundary', nextOffset: this.nextOffset };
    if ('file' in cut) throw new StorageRefusal(cut.file, RefusalReason.segmentInteriorCorruption, cut.reason, cut.position);
    const droppedMessages = this.nextOffset - offset;
    // A cut at a segment's start keeps the previous segment whole (and sealed): the replay's
    // next append starts a new segment at `offset`, as the first application did.
    const keepSegment = cut.position > 0 || index === 0;
    const lastKept = keepSegment ? index : index - 1;
    this.pending = this.pending.filter((entry) => entry.header.baseOffset < offset);
    this.pendingBytes = this.pending.reduce((sum, entry) => sum + entry.batch.byteLength, 0);
    while (this.segments.length - 1 > lastKept) {
      this.unlinkSegment(this.lastSegment());
      this.segments.pop();
    }
    if (keepSegment) this.cutSegment(segment, cut);
    // Batches kept from the pending ones are flushed too: after a crash the log ends at `offset`.
    this.flush();
    if (droppedMessages > 0) this.logger.log('info', 'partition_log_truncated', { partitionId: this.partitionId, nextOffset: offset, droppedMessages });
    return { kind: 'cut', nextOffset: offset, droppedMessages };
  }

  /**
   * Where `offset` starts in `segment`: its byte position, its batch ordinal and the batch
   * before it; null when no batch of the segment starts there (or it is not the segment's end);
   * the fault when the walk met bytes it cannot trust.
   */
  private cutPosition(segment: Segment, offset: number): CutPoint | PartitionReadFault | null {
    if (offset === segment.startOffset) return { position: 0, batchCount: 0, lastOffset: offset - 1, maxTimestampUs: 0 };
    let position = 0;
    let batchCount = 0;
    const found: CutPoint[] = [];
    let lastOffset = segment.startOffset - 1;
    let maxTimestampUs = 0;
    const outcome = this.walk(segment, null, (header, batch) => {
      if (header.baseOffset === offset) {
        found.push({ position, batchCount, lastOffset, maxTimestampUs });
        return 'stop';
      }
      position += batch.byteLength;
      batchCount += 1;
      lastOffset = batchLastOffset(header);
      maxTimestampUs = header.baseTimestampUs;
      return 'take';
    });
    if (outcome !== null && outcome !== 'stop') return outcome;
    if (found.length > 0) return found[0]!;
    return lastOffset + 1 === offset ? { position, batchCount, lastOffset, maxTimestampUs } : null;
  }

  /** Shrinks the last segment's files (and its record) to `cut`, durably. */
  private cutSegment(segment: Segment, cut: CutPoint): void {
    assert(segment === this.lastSegment(), 'only the last segment is cut');
    const log = segmentLogName(segment.startOffset);
    const index = segmentIndexName(segment.startOffset);
    if (cut.position < segment.fileSizeBytes) {
      try {
        this.disk.truncate(log, cut.position);
        this.disk.truncate(index, cut.batchCount * INDEX_ENTRY_SIZE);
        this.disk.fsync(log);
        this.disk.fsync(index);
      } catch (error) {
        this.poison(error);
        throw error;
      }
      segment.fileSizeBytes = cut.position;
      segment.fileBatchCount = cut.batchCount;
      segment.fileLastOffset = cut.lastOffset;
    }
    segment.sizeBytes = cut.position;
    segment.batchCount = cut.batchCount;
    segment.lastOffset = cut.lastOffset;
    segment.maxTimestampUs = cut.maxTimestampUs;
    segment.sealed = cut.position >= this.segmentSizeBytes;
  }

  /**
   * Drops every message and restarts the partition at `startOffset` (0, as a purge does; higher
   * for a replica that must continue a log whose earlier bytes it lost): one empty segment
   * there, durable when this returns. Pending batches are dropped too.
   */
  purge(startOffset = 0): void {
    this.checkWritable();
    assert(Number.isSafeInteger(startOffset) && startOffset >= 0, `purge to ${startOffset}`);
    this.pending = [];
    this.pendingBytes = 0;
    while (this.segments.length > 0) {
      this.unlinkSegment(this.segments[0]!);
      this.segments.shift();
    }
    try {
      createEmptySegment(this.disk, startOffset);
    } catch (error) {
      this.poison(error);
      throw error;
    }
    this.segments = [emptySegment(startOffset)];
    this.logger.log('info', 'partition_purged', { partitionId: this.partitionId, startOffset });
  }

  private unlinkSegment(segment: Segment): void {
    try {
      this.disk.remove(segmentLogName(segment.startOffset));
      this.disk.remove(segmentIndexName(segment.startOffset));
      this.disk.fsyncDirectory();
    } catch (error) {
      this.poison(error);
      throw error;
    }
  }

  private startSegment(startOffset: number): Segment {
    assert(this.pending.length === 0, 'sealing flushed the previous segment');
    assert(this.segments.length < PARTITION_SEGMENTS_MAX, `more than ${PARTITION_SEGMENTS_MAX} segments: retention must remove some`);
    const segment: Segment = { ...emptySegment(startOffset), filesDurable: false };
    this.segments.push(segment);
    return segment;
  }

  /**
   * base_timestamp of the newest batch, 0 when there is none. Not just the last segment's: after a
   * crash lost a new segment's first flush, the last segment is empty and its predecessor is not.
   */
  private newestTimestampUs(): number {
    for (let index = this.segments.length - 1; index >= 0; index -= 1) {
      const segment = this.segments[index]!;
      if (segment.batchCount > 0) return segment.maxTimestampUs;
    }
    return 0;
  }

  private lastSegment(): Segment {
    const last = this.segments[this.segments.length - 1];
    assert(last !== undefined, 'a partition log always has a segment');
    return last;
  }

  /** The last segment whose start is <= `offset` (`offset` >= the retained start). */
  private segmentIndexOf(offset: number): number {
    let low = 0;
    let high = this.segments.length - 1;
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (this.segments[middle]!.startOffset <= offset) low = middle;
      else high = middle - 1;
    }
    return low;
  }

  /**
   * The index entry of the last batch in the segment's files for which `before` holds (`before`
   * is monotone: true, then false), by binary search over the `.index`; null when none does
   * (start at byte 0). An entry that cannot be one this store wrote also gives null.
   */
  private indexLowerBound(segment: Segment, before: (entry: IndexEntry) => boolean): IndexEntry | null {
    const file = segmentIndexName(segment.startOffset);
    const scratch = new Uint8Array(INDEX_ENTRY_SIZE);
    let low = 0;
    let high = segment.fileBatchCount - 1;
    let best: IndexEntry | null = null;
    while (low <= high) {
      const middle = Math.floor((low + high) / 2);
      const count = this.disk.read(file, middle * INDEX_ENTRY_SIZE, scratch);
      const entry = count === INDEX_ENTRY_SIZE ? readIndexEntry(scratch, 0) : null;
      if (entry === null || entry.position >= segment.fileSizeBytes) return this.indexUnusable(file, middle);
      if (before(entry)) {
        best = entry;
        low = middle + 1;
      } else {
        high = middle - 1;
      }
    }
    return best;
  }

  private indexUnusable(file: string, entryIndex: number): null {
    this.logger.log('warn', 'partition_index_unusable', { file, entryIndex, action: 'walking the log from its start' });
    return null;
  }

  /**
   * Walks the segment's batches from `start` (an index entry, or null: byte 0), file first, then
   * the pending batches when this is the last segment. Returns null when the batches ran out,
   * 'stop' when `visit` stopped, or the fault of a batch that cannot be trusted.
   */
  private walk(segment: Segment, start: IndexEntry | null, visit: (header: BatchHeader, batch: Uint8Array) => Visit): PartitionReadFault | 'stop' | null {
    const file = segmentLogName(segment.startOffset);
    let position = start?.position ?? 0;
    let expected = start?.offset ?? segment.startOffset;
    while (position < segment.fileSizeBytes) {
      const read = readBatchAt(this.disk, this.kernels, file, position, segment.fileSizeBytes);
      const atIndexed = start !== null && position === start.position;
      const misplaced =
        read.ok &&
        (read.header.baseOffset !== expected ||
          read.header.partitionId !== this.partitionId ||
          (atIndexed && read.header.baseTimestampUs !== start.timestampUs));
      if (atIndexed && (!read.ok || misplaced)) {
        // The index pointed at something other than the batch it names. It is derived data, so
        // the log decides: walk the segment from its first batch.
        this.indexUnusable(segmentIndexName(segment.startOffset), -1);
        return this.walk(segment, null, visit);
      }
      if (!read.ok) return { file, position, reason: read.reason };
      const { header } = read;
      if (misplaced) {
        const found = `partition ${header.partitionId} offset ${header.baseOffset}`;
        return { file, position, reason: `misplaced batch: ${found}, expected partition ${this.partitionId} offset ${expected}` };
      }
      const outcome = visit(header, read.batch);
      if (outcome === 'stop') return 'stop';
      position += header.batchLength;
      expected = batchLastOffset(header) + 1;
    }
    if (segment !== this.lastSegment()) return null;
    for (const entry of this.pending) {
      if (entry.header.baseOffset < expected) continue;
      if (visit(entry.header, entry.batch) === 'stop') return 'stop';
    }
    return null;
  }

  /** As `checkUsable`, for calls that write: none may run inside an async flush. */
  private checkWritable(): void {
    this.checkUsable();
    assert(!this.flushing, 'partition log write during an async flush');
  }

  private checkUsable(): void {
    if (this.poisonedBy !== null) throw new StoragePoisoned(this.disk.location, this.poisonedBy);
  }

  private poison(cause: unknown): void {
    this.poisonedBy ??= cause;
    this.logger.log('error', 'partition_log_poisoned', { location: this.disk.location, error: String(cause) });
  }
}

function emptySegment(startOffset: number): Segment {
  return {
    startOffset,
    lastOffset: startOffset - 1,
    sizeBytes: 0,
    batchCount: 0,
    maxTimestampUs: 0,
    sealed: false,
    fileSizeBytes: 0,
    fileBatchCount: 0,
    fileLastOffset: startOffset - 1,
    filesDurable: true,
  };
}

/** Creates `{start}.log` and `{start}.index` empty, durably (files and directory entries). */
function createEmptySegment(disk: Disk, startOffset: number): void {
  const log = segmentLogName(startOffset);
  const index = segmentIndexName(startOffset);
  disk.write(log, 0, new Uint8Array(0));
  disk.write(index, 0, new Uint8Array(0));
  disk.fsync(log);
  disk.fsync(index);
  disk.fsyncDirectory();
}

interface Opened {
  readonly segments: Segment[];
  readonly report: Omit<PartitionOpenReport, 'stats'>;
}

function scanKey(scan: SegmentScan): string {
  const failure = scan.failure;
  if (failure === null) return 'ok';
  return `${failure.kind}:${failure.position}:${failure.reason}:${failure.validAfter}:${failure.digest}:${scan.validEnd}`;
}

function openSegments(disk: Disk, kernels: Kernels, options: PartitionLogOptions, logger: Logger): Opened {
  const names = disk.list();
  const starts = names.map((name) => parseSegmentName(name, 'log')).filter((start) => start !== null);
  starts.sort((a, b) => a - b);
  const orphanIndexesRemoved = removeOrphanIndexes(disk, names, new Set(starts), logger);
  if (starts.length > PARTITION_SEGMENTS_MAX) {
    throw new StorageRefusal(
      segmentLogName(starts[0]!),
      RefusalReason.segmentCountTooLarge,
      `${starts.length} segments exceed ${PARTITION_SEGMENTS_MAX}`,
    );
  }
  const indexesRebuilt: { segment: string; reason: string }[] = [];
  if (starts.length === 0) {
    createEmptySegment(disk, 0);
    logger.log('info', 'partition_log_created', { location: disk.location });
    return { segments: [emptySegment(0)], report: { created: true, tornTail: null, indexesRebuilt, orphanIndexesRemoved } };
  }
  const segments: Segment[] = [];
  let tornTail: PartitionOpenReport['tornTail'] = null;
  let indexCreated = false;
  let newestTimestampUs = 0;
  for (const [ordinal, startOffset] of starts.entries()) {
    const isLast = ordinal === starts.length - 1;
    const previous = segments[segments.length - 1];
    if (previous !== undefined) checkContiguous(previous, startOffset);
    const file = segmentLogName(startOffset);
    const scan = readUntilStable(
      file,
      () => scanSegment(disk, kernels, startOffset, options.partitionId, newestTimestampUs),
      (result) => result.failure === null,
      scanKey,
    );
    if (scan.failure !== null) {
      tornTail = refuseOrTruncate(disk, scan, isLast, logger);
    }
    if (scan.indexProblem !== null) {
      const rebuilt = rebuildIndex(disk, startOffset, scan.validEnd);
      indexCreated ||= rebuilt.created;
      indexesRebuilt.push({ segment: file, reason: scan.indexProblem });
      logger.log('warn', 'partition_index_rebuilt', { segment: file, reason: scan.indexProblem, entries: rebuilt.entries });
    }
    if (scan.batchCount > 0) newestTimestampUs = scan.maxTimestampUs;
    segments.push({
      startOffset,
      lastOffset: scan.lastOffset,
      sizeBytes: scan.validEnd,
      batchCount: scan.batchCount,
      maxTimestampUs: scan.maxTimestampUs,
      // A recovered last segment already at the cap is sealed before the next append (§3.6).
      sealed: !isLast || scan.validEnd >= options.segmentSizeBytes,
      fileSizeBytes: scan.validEnd,
      fileBatchCount: scan.batchCount,
      fileLastOffset: scan.lastOffset,
      filesDurable: true,
    });
  }
  // A rebuilt index that had to be created is a new directory entry.
  if (indexCreated) disk.fsyncDirectory();
  return { segments, report: { created: false, tornTail, indexesRebuilt, orphanIndexesRemoved } };
}

/** Segments continue each other's offsets: the next starts right after the previous ends. */
function checkContiguous(previous: Segment, startOffset: number): void {
  const expected = previous.lastOffset + 1;
  if (startOffset === expected) return;
  const kind = startOffset > expected ? `a hole: offsets ${expected}..${startOffset - 1} are missing` : `an overlap of ${expected - startOffset} offsets`;
  throw new StorageRefusal(
    segmentLogName(startOffset),
    RefusalReason.segmentDiscontinuity,
    `starts at ${startOffset} but ${segmentLogName(previous.startOffset)} ends at ${previous.lastOffset}: ${kind}`,
  );
}

/** Refuses a failure that cannot be a torn tail; truncates (and fsyncs) one that is. */
function refuseOrTruncate(disk: Disk, scan: SegmentScan, isLast: boolean, logger: Logger): PartitionOpenReport['tornTail'] {
  const failure = scan.failure;
  assert(failure !== null, 'a failure to classify');
  const file = segmentLogName(scan.startOffset);
  const judged = judgeScanFailure(scan, isLast);
  if (judged.verdict === 'refuse') throw new StorageRefusal(file, judged.reason, judged.detail, failure.position);
  const tornTail = { segment: file, position: failure.position, reason: failure.reason, droppedBytes: scan.fileSizeBytes - scan.validEnd };
  logger.log('warn', 'partition_torn_tail_truncated', tornTail);
  disk.truncate(file, scan.validEnd);
  disk.fsync(file);
  return tornTail;
}

/** Removes `.index` files without their `.log` (a crash between the two unlinks or creates). */
function removeOrphanIndexes(disk: Disk, names: readonly string[], logStarts: ReadonlySet<number>, logger: Logger): string[] {
  const removed: string[] = [];
  for (const name of names) {
    const start = parseSegmentName(name, 'index');
    if (start === null || logStarts.has(start)) continue;
    disk.remove(name);
    removed.push(name);
    logger.log('warn', 'partition_orphan_index_removed', { file: name });
  }
  if (removed.length > 0) disk.fsyncDirectory();
  return removed;
}

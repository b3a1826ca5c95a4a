/**
 * Partition store recovery and damage: a torn tail of the last segment is truncated once a second
 * read agrees; interior damage, a damaged sealed segment, a misplaced batch and a hole or overlap
 * refuse with their reason; an index that disagrees with the log is rebuilt; reads never return
 * a damaged batch. SimDisk for every kernel implementation, and FsDisk for the file cases.
 */
import { appendFileSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Disk, DiskFileReader } from '../../src/storage/disk.js';
import { FsDisk } from '../../src/storage/fs-disk.js';
import type { PartitionLog } from '../../src/storage/partition-log.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { Prng } from '../../src/stdx/prng.js';
import { encodeBatch, textMessages } from '../support/message-batches.js';
import {
  appendAll,
  BASE_TIME_US,
  batchRun,
  concat,
  expectedIndex,
  expectedSegments,
  name20,
  openLog,
  PARTITION,
  stampedBatch,
  type StoredBatch,
} from './partition-fixtures.js';
import { kernelVariants, tempDirectory, tsKernels } from './storage-fixtures.js';

const COUNTS = [3, 1, 4, 1, 5, 2, 6, 2, 3, 5, 1];
const SEGMENT_BYTES = 1000;
/** Large enough that every batch of COUNTS stays in segment 0. */
const ONE_SEGMENT = 1 << 20;

const bytesOf = (batches: readonly StoredBatch[]): Uint8Array[] => batches.map((batch) => batch.bytes);
const positionOf = (batches: readonly StoredBatch[], index: number): number =>
  batches.slice(0, index).reduce((sum, batch) => sum + batch.bytes.byteLength, 0);

function readAll(log: PartitionLog): Uint8Array[] {
  const read = log.readFrom(0, 1_000_000, log.nextOffset - 1);
  if (!read.ok) throw new Error(`read fault ${JSON.stringify(read.fault)}`);
  return [...read.batches];
}

function refusalOf(open: () => unknown): StorageRefusal {
  try {
    open();
  } catch (error) {
    if (error instanceof StorageRefusal) return error;
    throw error;
  }
  throw new Error('expected a StorageRefusal');
}

/** A disk that flips one bit in the first read of `name` that covers `position` (transient). */
class FlakyReads implements Disk {
  private armed = true;
  readonly location: string;
  private readonly inner: Disk;
  private readonly name: string;
  private readonly position: number;

  constructor(inner: Disk, name: string, position: number) {
    this.location = inner.location;
    this.inner = inner;
    this.name = name;
    this.position = position;
  }

  read(name: string, offset: number, target: Uint8Array): number {
    const count = this.inner.read(name, offset, target);
    if (this.armed && name === this.name && offset <= this.position && this.position < offset + count) {
      this.armed = false;
      target[this.position - offset]! ^= 0x10;
    }
    return count;
  }

  exists(name: string): boolean { return this.inner.exists(name); }
  size(name: string): number { return this.inner.size(name); }
  readAll(name: string): Uint8Array { return this.inner.readAll(name); }
  openRead(name: string): DiskFileReader { return this.inner.openRead(name); }
  write(name: string, offset: number, bytes: Uint8Array): void { this.inner.write(name, offset, bytes); }
  truncate(name: string, sizeBytes: number): void { this.inner.truncate(name, sizeBytes); }
  fsync(name: string): void { this.inner.fsync(name); }
  rename(from: string, to: string): void { this.inner.rename(from, to); }
  remove(name: string): void { this.inner.remove(name); }
  fsyncDirectory(): void { this.inner.fsyncDirectory(); }
  list(): string[] { return this.inner.list(); }
  close(): void { this.inner.close(); }
}

describe.each(kernelVariants())('partition recovery ($label kernels)', ({ kernels }) => {
  function filled(segmentBytes = ONE_SEGMENT): { disk: SimDisk; log: PartitionLog; batches: StoredBatch[] } {
    const disk = new SimDisk(new Prng(5));
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, segmentBytes);
    appendAll(log, batches);
    log.flush();
    return { disk, log, batches };
  }

  const next = (batches: readonly StoredBatch[]): StoredBatch => {
    const last = batches[batches.length - 1]!;
    return stampedBatch(last.baseOffset + last.count, 2, BASE_TIME_US + 1_000_000);
  };

  it.each([
    ['a header cut short', 100, 'header_truncated'],
    ['a whole header and part of the frames', 300, 'header_truncated'],
  ])('truncates a torn tail (%s), logs it, fsyncs it, and appends after it', (_label, tornBytes, reason) => {
    const { disk, batches } = filled();
    const log0 = name20(0, 'log');
    const end = disk.size(log0);
    const torn = next(batches);
    // What a flush that died leaves once the device wrote part of it: durable torn bytes, so
    // that only the truncation's own fsync can make the cut survive the next crash.
    disk.write(log0, end, torn.bytes.subarray(0, tornBytes));
    disk.fsync(log0);
    const { log, logger } = openLog(disk, kernels, ONE_SEGMENT);
    expect(log.openReport.tornTail).toEqual({ segment: log0, position: end, reason, droppedBytes: tornBytes });
    expect(logger.records.map((record) => record.event)).toContain('partition_torn_tail_truncated');
    expect(disk.durableBytes(log0)?.byteLength).toBe(end);
    expect(readAll(log)).toEqual(bytesOf(batches));
    log.append(torn.bytes);
    log.flush();
    expect(readAll(openLog(disk, kernels, ONE_SEGMENT).log)).toEqual([...bytesOf(batches), torn.bytes]);
  });

  it('truncates a whole-length tail that fails its checksum when nothing valid follows', () => {
    const { disk, batches } = filled();
    const log0 = name20(0, 'log');
    const end = disk.size(log0);
    const damaged = next(batches).bytes.slice();
    damaged[damaged.byteLength - 2]! ^= 0xff; // the last payload byte: a garbage-filled torn write
    disk.write(log0, end, damaged);
    const { log } = openLog(disk, kernels, ONE_SEGMENT);
    expect(log.openReport.tornTail).toMatchObject({ position: end, reason: 'message_checksum (message 1)' });
    expect(readAll(log)).toEqual(bytesOf(batches));
  });

  it('does not truncate when one read of the tail flips a bit that the next read does not', () => {
    const { disk, batches } = filled();
    const position = positionOf(batches, batches.length - 1) + 300;
    const { log } = openLog(new FlakyReads(disk, name20(0, 'log'), position), kernels, ONE_SEGMENT);
    expect(log.openReport.tornTail).toBeNull();
    expect(readAll(log)).toEqual(bytesOf(batches));
  });

  it('does not refuse when one read of an interior batch flips a bit', () => {
    const { disk, batches } = filled();
    const position = positionOf(batches, 3) + 260;
    const { log } = openLog(new FlakyReads(disk, name20(0, 'log'), position), kernels, ONE_SEGMENT);
    expect(readAll(log)).toEqual(bytesOf(batches));
  });

  it.each([
    ['a payload byte', 300],
    ['the batch_length field', 32],
    ['the base_offset field', 8],
  ])('refuses damage to %s of an interior batch of the last segment', (_label, within) => {
    const { disk, batches } = filled();
    const position = positionOf(batches, 4);
    disk.corrupt(name20(0, 'log'), position + within, 2);
    const refusal = refusalOf(() => openLog(disk, kernels, ONE_SEGMENT));
    expect(refusal.reason).toBe(RefusalReason.segmentInteriorCorruption);
    expect(refusal.file).toBe(name20(0, 'log'));
    expect(refusal.offset).toBe(position);
    expect(refusal.message).toMatch(/valid batch follows at \d+/);
    expect(refusal.message).toMatch(/remedy: wipe the data directory and restart the replica with --rejoin/);
    // Nothing was truncated.
    expect(disk.size(name20(0, 'log'))).toBe(positionOf(batches, batches.length));
  });

  it('refuses a damaged sealed segment, its tail included', () => {
    const batches = batchRun(COUNTS);
    const segments = expectedSegments(batches, SEGMENT_BYTES);
    const firstBytes = concat(bytesOf(segments[0]!)).byteLength;
    for (const damage of ['tail_bit', 'tail_cut'] as const) {
      const { disk } = filled(SEGMENT_BYTES);
      if (damage === 'tail_bit') disk.corrupt(name20(0, 'log'), firstBytes - 1, 0);
      else disk.truncateAtRest(name20(0, 'log'), firstBytes - 5);
      const refusal = refusalOf(() => openLog(disk, kernels, SEGMENT_BYTES));
      expect(refusal.reason, damage).toBe(RefusalReason.segmentSealedCorrupt);
      expect(refusal.file).toBe(name20(0, 'log'));
      expect(refusal.offset).toBe(positionOf(segments[0]!, segments[0]!.length - 1));
    }
  });

  it('refuses a verifying batch that belongs elsewhere: another partition, or offsets that skip', () => {
    const cases: [string, Uint8Array][] = [
      ['another partition', encodeBatch(textMessages(1), { partitionId: PARTITION + 1, baseOffset: 33, baseTimestampUs: BASE_TIME_US + 10_000 })],
      ['an offset gap', encodeBatch(textMessages(1), { partitionId: PARTITION, baseOffset: 34, baseTimestampUs: BASE_TIME_US + 10_000 })],
      ['time going back', encodeBatch(textMessages(1), { partitionId: PARTITION, baseOffset: 33, baseTimestampUs: 1 })],
    ];
    for (const [label, batch] of cases) {
      const { disk } = filled();
      disk.write(name20(0, 'log'), disk.size(name20(0, 'log')), batch);
      disk.fsync(name20(0, 'log'));
      const refusal = refusalOf(() => openLog(disk, kernels, ONE_SEGMENT));
      expect(refusal.reason, label).toBe(RefusalReason.segmentBatchMisplaced);
    }
  });

  it('refuses a segment whose first batch is older than its predecessor\'s newest', () => {
    const disk = new SimDisk(new Prng(8));
    const { log } = openLog(disk, kernels, 1);
    appendAll(log, batchRun([2, 2]));
    disk.write(name20(4, 'log'), 0, stampedBatch(4, 1, BASE_TIME_US).bytes); // older than offset 2's
    disk.fsync(name20(4, 'log'));
    const refusal = refusalOf(() => openLog(disk, kernels, 1));
    expect(refusal.reason).toBe(RefusalReason.segmentBatchMisplaced);
    expect(refusal.file).toBe(name20(4, 'log'));
    expect(refusal.detail).toMatch(/timestamp .* before/);
  });

  it('refuses a hole and an overlap between segments, naming both segments', () => {
    const batches = batchRun(COUNTS);
    const segments = expectedSegments(batches, SEGMENT_BYTES);
    const start = (index: number): number => segments[index]![0]!.baseOffset;
    const hole = filled(SEGMENT_BYTES).disk;
    hole.remove(name20(start(1), 'log'));
    hole.remove(name20(start(1), 'index'));
    const holeRefusal = refusalOf(() => openLog(hole, kernels, SEGMENT_BYTES));
    expect(holeRefusal.reason).toBe(RefusalReason.segmentDiscontinuity);
    expect(holeRefusal.file).toBe(name20(start(2), 'log'));
    expect(holeRefusal.message).toContain(`a hole: offsets ${start(1)}..${start(2) - 1} are missing`);
    expect(holeRefusal.message).toContain('put back the segment files');

    const overlap = filled(SEGMENT_BYTES).disk;
    overlap.rename(name20(start(2), 'log'), name20(start(2) - 1, 'log'));
    const overlapRefusal = refusalOf(() => openLog(overlap, kernels, SEGMENT_BYTES));
    expect(overlapRefusal.reason).toBe(RefusalReason.segmentDiscontinuity);
    expect(overlapRefusal.message).toContain(`${name20(start(1), 'log')} ends at ${start(2) - 1}`);
  });

  it.each([
    ['missing', (disk: SimDisk) => disk.remove(name20(0, 'index'))],
    ['short', (disk: SimDisk) => disk.truncateAtRest(name20(0, 'index'), 24 * 4 + 5)],
    ['an entry disagreeing', (disk: SimDisk) => disk.corrupt(name20(0, 'index'), 24 * 2 + 17, 3)],
    ['longer than the log', (disk: SimDisk) => disk.write(name20(0, 'index'), disk.size(name20(0, 'index')), new Uint8Array(24))],
  ])('rebuilds an index that is %s from the log, and says so', (_label, damage) => {
    const { disk, batches } = filled();
    damage(disk);
    const { log, logger } = openLog(disk, kernels, ONE_SEGMENT);
    expect(log.openReport.indexesRebuilt.map((entry) => entry.segment)).toEqual([name20(0, 'log')]);
    expect(logger.records.find((record) => record.event === 'partition_index_rebuilt')?.fields).toMatchObject({ entries: batches.length });
    expect(disk.durableBytes(name20(0, 'index'))).toEqual(expectedIndex(batches));
    expect(readAll(log)).toEqual(bytesOf(batches));
  });

  it('rebuilds the index after truncating a torn tail', () => {
    const { disk, batches } = filled();
    const extra = next(batches);
    const { log } = openLog(disk, kernels, ONE_SEGMENT);
    log.append(extra.bytes);
    log.flush();
    disk.truncateAtRest(name20(0, 'log'), disk.size(name20(0, 'log')) - 10);
    const reopened = openLog(disk, kernels, ONE_SEGMENT).log;
    expect(reopened.openReport.tornTail).not.toBeNull();
    expect(disk.readAll(name20(0, 'index'))).toEqual(expectedIndex(batches));
  });

  it('removes an index without its log', () => {
    const { disk } = filled();
    disk.write(name20(500, 'index'), 0, new Uint8Array(24));
    const { log } = openLog(disk, kernels, ONE_SEGMENT);
    expect(log.openReport.orphanIndexesRemoved).toEqual([name20(500, 'index')]);
    expect(disk.exists(name20(500, 'index'))).toBe(false);
  });

  it('reads around an index damaged after open by walking the log, and logs it', () => {
    const { disk, batches } = filled();
    const { log, logger } = openLog(disk, kernels, ONE_SEGMENT);
    disk.corrupt(name20(0, 'index'), 24 * 6 + 16, 5); // entry 6's position, under the open log
    const target = batches[6]!;
    expect(log.readFrom(target.baseOffset, 1, 1000)).toEqual({ ok: true, batches: [target.bytes] });
    // The timestamp search starts at the last entry older than the time: entry 6 again.
    expect(log.findByTimestamp(batches[7]!.timestampUs)).toEqual({ ok: true, batch: batches[7]!.bytes });
    const unusable = logger.records.filter((record) => record.event === 'partition_index_unusable');
    expect(unusable).toHaveLength(2);
    // An index entry naming a batch that is not there (offset changed, same position).
    disk.corrupt(name20(0, 'index'), 24 * 6 + 16, 5); // restore the position
    disk.corrupt(name20(0, 'index'), 24 * 6, 0); // entry 6 now names offset + 1
    expect(log.readFrom(target.baseOffset + 1, 1, 1000)).toEqual({ ok: true, batches: [target.bytes] });
  });

  it('never returns a batch damaged at rest after open: a fault naming file, position and reason', () => {
    const { disk, log, batches } = filled();
    const position = positionOf(batches, 5);
    disk.corrupt(name20(0, 'log'), position + 270, 1);
    const end = log.nextOffset - 1;
    const before = log.readFrom(0, batches[5]!.baseOffset, end);
    expect(before).toEqual({ ok: true, batches: bytesOf(batches.slice(0, 5)) });
    const fault = { file: name20(0, 'log'), position, reason: 'message_checksum (message 0)' };
    expect(log.readFrom(0, 1000, end)).toEqual({ ok: false, fault });
    expect(log.readFrom(batches[5]!.baseOffset, 1, end)).toEqual({ ok: false, fault });
    expect(log.findByTimestamp(batches[5]!.timestampUs)).toEqual({ ok: false, fault });
    // A file cut at rest reads as a fault too, not a crash.
    disk.truncateAtRest(name20(0, 'log'), position + 100);
    expect(log.readFrom(batches[6]!.baseOffset, 1, end)).toMatchObject({ ok: false, fault: { file: name20(0, 'log') } });
  });
});

describe('partition recovery on FsDisk', () => {
  const kernels = tsKernels();
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  function filledDirectory(segmentBytes: number): { path: string; batches: StoredBatch[] } {
    const directory = tempDirectory('vrmeta-partition-');
    cleanups.push(directory.cleanup);
    const disk = new FsDisk(directory.path);
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, segmentBytes);
    appendAll(log, batches);
    log.flush();
    disk.close();
    return { path: directory.path, batches };
  }

  const reopen = (path: string, segmentBytes: number): ReturnType<typeof openLog> => {
    const disk = new FsDisk(path);
    cleanups.push(() => disk.close());
    return openLog(disk, kernels, segmentBytes);
  };

  it('truncates a torn tail and refuses interior damage', () => {
    const torn = filledDirectory(ONE_SEGMENT);
    const file = join(torn.path, name20(0, 'log'));
    const size = readFileSync(file).byteLength;
    appendFileSync(file, new Uint8Array(77).fill(0xab));
    const { log } = reopen(torn.path, ONE_SEGMENT);
    expect(log.openReport.tornTail).toMatchObject({ position: size, droppedBytes: 77 });
    expect(readFileSync(file).byteLength).toBe(size);
    expect(readAll(log)).toEqual(bytesOf(torn.batches));

    const interior = filledDirectory(ONE_SEGMENT);
    const bytes = readFileSync(join(interior.path, name20(0, 'log')));
    bytes[positionOf(interior.batches, 2) + 280]! ^= 4;
    writeFileSync(join(interior.path, name20(0, 'log')), bytes);
    expect(refusalOf(() => reopen(interior.path, ONE_SEGMENT)).reason).toBe(RefusalReason.segmentInteriorCorruption);
  });

  it('rebuilds a deleted index and refuses a missing middle segment', () => {
    const { path, batches } = filledDirectory(SEGMENT_BYTES);
    unlinkSync(join(path, name20(0, 'index')));
    const first = expectedSegments(batches, SEGMENT_BYTES)[0]!;
    const { log } = reopen(path, SEGMENT_BYTES);
    expect(log.openReport.indexesRebuilt).toHaveLength(1);
    expect(new Uint8Array(readFileSync(join(path, name20(0, 'index'))))).toEqual(expectedIndex(first));
    const second = expectedSegments(batches, SEGMENT_BYTES)[1]![0]!.baseOffset;
    renameSync(join(path, name20(second, 'log')), join(path, 'moved-away'));
    expect(refusalOf(() => reopen(path, SEGMENT_BYTES)).reason).toBe(RefusalReason.segmentDiscontinuity);
  });
});

/**
 * The partition segment store: append, rotation, reads and reopen round trips over SimDisk and
 * over FsDisk in a temp dir, crash semantics of unflushed batches, maintenance (removal, purge,
 * retention). Recovery and damage: partition-log-recovery.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { retentionFloor, type RetentionPolicy } from '../../src/partition/retention.js';
import { FsyncError, type Disk } from '../../src/storage/disk.js';
import { StoragePoisoned } from '../../src/storage/durable-file.js';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { PartitionLog } from '../../src/storage/partition-log.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { Prng } from '../../src/stdx/prng.js';
import {
  appendAll,
  BASE_TIME_US,
  batchRun,
  concat,
  expectedIndex,
  expectedSegments,
  name20,
  openLog,
  stampedBatch,
  type StoredBatch,
} from './partition-fixtures.js';
import { kernelVariants, tempDirectory, tsKernels } from './storage-fixtures.js';

const SEGMENT_BYTES = 1000;
const COUNTS = [3, 1, 4, 1, 5, 2, 6, 2, 3, 5, 1];

function readAllBatches(log: PartitionLog, from = 0): Uint8Array[] {
  const read = log.readFrom(from, 1_000_000, log.nextOffset - 1);
  if (!read.ok) throw new Error(`read fault ${JSON.stringify(read.fault)}`);
  return [...read.batches];
}

const bytesOf = (batches: readonly StoredBatch[]): Uint8Array[] => batches.map((batch) => batch.bytes);

interface DiskCase {
  readonly label: string;
  readonly make: () => { disk: Disk; reopen: () => Disk };
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const diskCases: DiskCase[] = [
  {
    label: 'SimDisk',
    make: () => {
      const disk = new SimDisk(new Prng(7));
      return { disk, reopen: () => disk };
    },
  },
  {
    label: 'FsDisk',
    make: () => {
      const directory = tempDirectory('vrmeta-partition-');
      cleanups.push(directory.cleanup);
      let disk = new FsDisk(directory.path);
      return {
        disk,
        reopen: () => {
          disk.close();
          disk = new FsDisk(directory.path);
          cleanups.push(() => disk.close());
          return disk;
        },
      };
    },
  },
];

describe.each(diskCases)('partition log round trips ($label)', ({ make }) => {
  const kernels = tsKernels();

  it('creates one empty durable segment at offset 0 in an empty directory', () => {
    const { disk } = make();
    const { log, logger } = openLog(disk, kernels, SEGMENT_BYTES);
    expect(disk.list()).toEqual([name20(0, 'index'), name20(0, 'log')]);
    expect(log.openReport.created).toBe(true);
    expect(log.stats()).toEqual({ messagesCount: 0, sizeBytes: 0, segmentsCount: 1, startOffset: 0, endOffset: null, durableEndOffset: null });
    expect(log.readFrom(0, 10, 100)).toEqual({ ok: true, batches: [] });
    expect(logger.records.map((record) => record.event)).toContain('partition_log_created');
  });

  it('rotates where the size rule says, writes the layout, and reads everything back after reopen', () => {
    const { disk, reopen } = make();
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    appendAll(log, batches);
    log.flush();
    const segments = expectedSegments(batches, SEGMENT_BYTES);
    expect(segments.length).toBeGreaterThan(2);
    const names = segments.flatMap((segment) => [name20(segment[0]!.baseOffset, 'index'), name20(segment[0]!.baseOffset, 'log')]);
    expect(disk.list()).toEqual(names.sort());
    for (const segment of segments) {
      const start = segment[0]!.baseOffset;
      expect(disk.readAll(name20(start, 'log'))).toEqual(concat(bytesOf(segment)));
      expect(disk.readAll(name20(start, 'index'))).toEqual(expectedIndex(segment));
    }
    const total = COUNTS.reduce((sum, count) => sum + count, 0);
    const sizeBytes = batches.reduce((sum, batch) => sum + batch.bytes.byteLength, 0);
    const stats = { messagesCount: total, sizeBytes, segmentsCount: segments.length, startOffset: 0, endOffset: total - 1, durableEndOffset: total - 1 };
    expect(log.stats()).toEqual(stats);
    expect(log.segmentInfos()).toEqual(
      segments.map((segment, index) => ({
        startOffset: segment[0]!.baseOffset,
        lastOffset: segment[segment.length - 1]!.baseOffset + segment[segment.length - 1]!.count - 1,
        sizeBytes: concat(bytesOf(segment)).byteLength,
        batchCount: segment.length,
        maxTimestampUs: segment[segment.length - 1]!.timestampUs,
        // The last one is sealed too when its bytes reached the size: the next append rotates.
        sealed: index < segments.length - 1 || concat(bytesOf(segment)).byteLength >= SEGMENT_BYTES,
      })),
    );
    expect(readAllBatches(log)).toEqual(bytesOf(batches));

    const reopened = openLog(reopen(), kernels, SEGMENT_BYTES).log;
    expect(reopened.openReport.stats).toEqual(stats);
    expect(reopened.openReport.indexesRebuilt).toEqual([]);
    expect(reopened.openReport.tornTail).toBeNull();
    expect(readAllBatches(reopened)).toEqual(bytesOf(batches));
    // Appending continues where the log ended, in the open segment or a new one.
    const next = stampedBatch(total, 2, BASE_TIME_US + 1_000_000);
    reopened.append(next.bytes);
    reopened.flush();
    expect(readAllBatches(openLog(reopen(), kernels, SEGMENT_BYTES).log)).toEqual([...bytesOf(batches), next.bytes]);
  });

  it('reads from any offset: the batch holding it first, up to the count and never past the ceiling', () => {
    const { disk } = make();
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    appendAll(log, batches);
    log.flush();
    const end = log.nextOffset - 1;
    for (let offset = 0; offset <= end; offset += 1) {
      const holding = batches.findIndex((batch) => offset < batch.baseOffset + batch.count);
      const read = log.readFrom(offset, 1, end);
      expect(read).toEqual({ ok: true, batches: [batches[holding]!.bytes] });
    }
    // Count: batches until `count` offsets from `offset` are covered.
    const read = log.readFrom(4, 6, end);
    expect(read.ok && read.batches).toEqual(bytesOf(batches.slice(2, 5))); // 4..7 | 8 | 9..13
    // Ceiling: a batch straddling it is whole, none starting above it.
    const ceiling = batches[5]!.baseOffset; // the first offset of batch 5
    const capped = log.readFrom(0, 1000, ceiling);
    expect(capped.ok && capped.batches).toEqual(bytesOf(batches.slice(0, 6)));
    expect(log.readFrom(end + 1, 10, end + 10)).toEqual({ ok: true, batches: [] });
    expect(log.readFrom(3, 10, 2)).toEqual({ ok: true, batches: [] });
    // Byte bound: stops before exceeding it, but always returns one batch.
    const small = log.readFrom(0, 1000, end, 1);
    expect(small.ok && small.batches).toEqual([batches[0]!.bytes]);
  });

  it('serves appended batches before the flush, and findByTimestamp finds the first batch at or after a time', () => {
    const { disk } = make();
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    appendAll(log, batches.slice(0, 7));
    log.flush();
    appendAll(log, batches.slice(7));
    expect(log.stats().durableEndOffset).toBeLessThan(log.stats().endOffset!);
    expect(readAllBatches(log)).toEqual(bytesOf(batches));
    for (const [index, batch] of batches.entries()) {
      expect(log.findByTimestamp(batch.timestampUs)).toEqual({ ok: true, batch: batch.bytes });
      expect(log.findByTimestamp(batch.timestampUs - 1)).toEqual({ ok: true, batch: batches[index]!.bytes });
    }
    expect(log.findByTimestamp(0)).toEqual({ ok: true, batch: batches[0]!.bytes });
    expect(log.findByTimestamp(batches[batches.length - 1]!.timestampUs + 1)).toEqual({ ok: true, batch: null });
  });
});

describe('partition log appends', () => {
  const kernels = tsKernels();

  it('asserts the next offset, the partition, monotone time and a batch that verifies', () => {
    const disk = new SimDisk(new Prng(1));
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    log.append(stampedBatch(0, 2).bytes);
    expect(() => log.append(stampedBatch(3, 1).bytes)).toThrow(AssertionError);
    expect(() => log.append(stampedBatch(1, 1).bytes)).toThrow(AssertionError);
    expect(() => log.append(stampedBatch(2, 1, BASE_TIME_US - 1).bytes)).toThrow(AssertionError);
    const damaged = stampedBatch(2, 1).bytes;
    damaged[damaged.byteLength - 1]! ^= 1;
    expect(() => log.append(damaged)).toThrow(AssertionError);
    log.append(stampedBatch(2, 1).bytes);
    expect(log.nextOffset).toBe(3);
  });

  it('keeps time monotone across segments, even when the last segment is empty', () => {
    const disk = new SimDisk(new Prng(1));
    const batches = batchRun([3, 3, 3]);
    const { log } = openLog(disk, kernels, 1);
    appendAll(log, batches); // every batch seals its segment: the next append starts a new one
    expect(log.stats().segmentsCount).toBe(3);
    // What a crash leaves when a new segment's files were created but its first flush was lost.
    disk.write(name20(9, 'log'), 0, new Uint8Array(0));
    disk.write(name20(9, 'index'), 0, new Uint8Array(0));
    const reopened = openLog(disk, kernels, 1).log;
    expect(reopened.stats().segmentsCount).toBe(4);
    expect(reopened.nextOffset).toBe(9);
    expect(() => reopened.append(stampedBatch(9, 1, batches[2]!.timestampUs - 1).bytes)).toThrow(AssertionError);
    reopened.append(stampedBatch(9, 1, batches[2]!.timestampUs).bytes);
    expect(reopened.findByTimestamp(batches[2]!.timestampUs)).toEqual({ ok: true, batch: batches[2]!.bytes });
  });

  it('flushes on its own once the pending bytes would exceed the bound', () => {
    const disk = new SimDisk(new Prng(1));
    const batches = batchRun([2, 2, 2]);
    const { log } = openLog(disk, kernels, 1 << 20, { pendingBytesMax: batches[0]!.bytes.byteLength + 1 });
    appendAll(log, batches);
    expect(log.stats().durableEndOffset).toBe(3); // the first two; the third is pending
    expect(disk.durableBytes(name20(0, 'log'))).toEqual(concat(bytesOf(batches.slice(0, 2))));
  });
});

describe.each(kernelVariants())('partition log crashes ($label kernels)', ({ kernels }) => {
  it('a crash after appends without a flush loses only the unflushed batches', () => {
    for (let seed = 1; seed <= 40; seed += 1) {
      const random = new Prng(seed);
      const disk = new SimDisk(random, {
        tornWriteProbability: 0.4,
        lostWriteProbability: 0.3,
        lostDirectoryOperationProbability: 0.3,
      });
      const batches = batchRun(COUNTS);
      const { log } = openLog(disk, kernels, SEGMENT_BYTES);
      const flushed = 1 + random.int(batches.length - 1);
      appendAll(log, batches.slice(0, flushed));
      log.flush();
      const durable = log.stats().durableEndOffset;
      appendAll(log, batches.slice(flushed));
      disk.crash();
      const reopened = openLog(disk, kernels, SEGMENT_BYTES).log;
      const end = reopened.stats().endOffset;
      expect(end, `seed ${seed}`).toBeGreaterThanOrEqual(durable!);
      const kept = readAllBatches(reopened);
      // A prefix of what was appended, and at least everything flushed.
      expect(kept, `seed ${seed}`).toEqual(bytesOf(batches.slice(0, kept.length)));
      expect(kept.length, `seed ${seed}`).toBeGreaterThanOrEqual(flushed);
      // And the store accepts the next batch after whatever survived.
      const next = stampedBatch(reopened.nextOffset, 1, BASE_TIME_US + 1_000_000);
      reopened.append(next.bytes);
      reopened.flush();
      expect(readAllBatches(openLog(disk, kernels, SEGMENT_BYTES).log), `seed ${seed}`).toEqual([...kept, next.bytes]);
    }
  });

  it('a crash at any disk operation of a run never refuses boot and keeps every flushed batch', () => {
    const batches = batchRun(COUNTS);
    let maintaining = false;
    const run = (disk: SimDisk, flushedOffsets: number[]): void => {
      maintaining = false;
      const { log } = openLog(disk, kernels, SEGMENT_BYTES);
      for (const [index, batch] of batches.entries()) {
        log.append(batch.bytes);
        if (index % 3 === 2) {
          log.flush();
          flushedOffsets.push(log.stats().durableEndOffset!);
        }
      }
      log.flush();
      maintaining = true;
      log.removeOldestSegments(2);
      log.purge();
    };
    const probe = new SimDisk(new Prng(99));
    run(probe, []);
    const operations = probe.mutatingOperationCount;
    for (let crashAt = 1; crashAt <= operations; crashAt += 1) {
      const disk = new SimDisk(new Prng(crashAt), { tornWriteProbability: 0.5, lostDirectoryOperationProbability: 0.5 });
      disk.crashAtOperation(crashAt);
      const flushedOffsets: number[] = [];
      expect(() => run(disk, flushedOffsets)).toThrow();
      disk.crash();
      const reopened = openLog(disk, kernels, SEGMENT_BYTES).log;
      const kept = readAllBatches(reopened, reopened.stats().startOffset);
      const first = batches.findIndex((batch) => batch.baseOffset === reopened.stats().startOffset);
      expect(kept, `crash at ${crashAt}`).toEqual(bytesOf(batches.slice(first, first + kept.length)));
      const durable = flushedOffsets[flushedOffsets.length - 1];
      if (!maintaining && durable !== undefined) {
        expect(reopened.stats().endOffset, `crash at ${crashAt}`).toBeGreaterThanOrEqual(durable);
      }
    }
  });
});

describe('partition log maintenance', () => {
  const kernels = tsKernels();

  function filled(): { disk: SimDisk; log: PartitionLog; batches: StoredBatch[]; segments: StoredBatch[][] } {
    const disk = new SimDisk(new Prng(3));
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    appendAll(log, batches);
    log.flush();
    return { disk, log, batches, segments: expectedSegments(batches, SEGMENT_BYTES) };
  }

  it('removes the oldest sealed segments durably, never the last one', () => {
    const { disk, log, batches, segments } = filled();
    expect(log.removableSegmentCount).toBe(segments.length - 1);
    expect(() => log.removeOldestSegments(segments.length)).toThrow(AssertionError);
    const removed = log.removeOldestSegments(2);
    const gone = [...segments[0]!, ...segments[1]!];
    expect(removed).toEqual({
      messagesCount: gone.reduce((sum, batch) => sum + batch.count, 0),
      sizeBytes: gone.reduce((sum, batch) => sum + batch.bytes.byteLength, 0),
    });
    const start = segments[2]![0]!.baseOffset;
    expect(disk.exists(name20(0, 'log'))).toBe(false);
    expect(disk.exists(name20(segments[1]![0]!.baseOffset, 'index'))).toBe(false);
    expect(log.stats().startOffset).toBe(start);
    expect(log.stats().segmentsCount).toBe(segments.length - 2);
    // Reads below the retained start begin at it.
    expect(readAllBatches(log, 0)).toEqual(bytesOf(batches.slice(gone.length)));
    disk.crash();
    const reopened = openLog(disk, kernels, SEGMENT_BYTES).log;
    expect(reopened.stats()).toEqual(log.stats());
    expect(readAllBatches(reopened, 0)).toEqual(bytesOf(batches.slice(gone.length)));
  });

  it('truncateTo cuts back to any batch boundary durably, and a replay rotates as the first run', () => {
    const all = batchRun([...COUNTS, 2, 3]);
    const total = all.reduce((sum, batch) => sum + batch.count, 0);
    const segments = expectedSegments(all, SEGMENT_BYTES);
    const names = segments.flatMap((segment) => [0, 1].map((k) => name20(segment[0]!.baseOffset, k === 0 ? 'index' : 'log')));
    for (const offset of [...all.map((batch) => batch.baseOffset), total]) {
      const disk = new SimDisk(new Prng(offset));
      const { log } = openLog(disk, kernels, SEGMENT_BYTES);
      // The last two batches stay pending: the cut drops file bytes and pending batches alike.
      appendAll(log, all.slice(0, -2));
      log.flush();
      appendAll(log, all.slice(-2));
      expect(log.truncateTo(offset)).toEqual({ kind: 'cut', nextOffset: offset, droppedMessages: total - offset });
      expect(log.nextOffset).toBe(offset);
      expect(readAllBatches(log)).toEqual(bytesOf(all.filter((batch) => batch.baseOffset < offset)));
      disk.crash();
      const reopened = openLog(disk, kernels, SEGMENT_BYTES).log;
      expect(reopened.nextOffset).toBe(offset);
      appendAll(reopened, all.filter((batch) => batch.baseOffset >= offset));
      reopened.flush();
      // Byte for byte the files of a log that never truncated: rotation cut in the same places.
      expect(disk.list()).toEqual([...names].sort());
      for (const segment of segments) {
        expect(disk.readAll(name20(segment[0]!.baseOffset, 'log'))).toEqual(concat(bytesOf(segment)));
        expect(disk.readAll(name20(segment[0]!.baseOffset, 'index'))).toEqual(expectedIndex(segment));
      }
    }
  });

  it('truncateTo refuses an offset inside a batch or past the end, and changes nothing', () => {
    const { log, batches } = filled();
    const end = log.nextOffset;
    const inside = batches[2]!.baseOffset + 1;
    expect(log.truncateTo(inside)).toEqual({ kind: 'not_a_boundary', nextOffset: end });
    expect(log.truncateTo(end + 1)).toEqual({ kind: 'behind', nextOffset: end });
    expect(log.truncateTo(end)).toEqual({ kind: 'cut', nextOffset: end, droppedMessages: 0 });
    expect(readAllBatches(log)).toEqual(bytesOf(batches));
    log.removeOldestSegments(1);
    expect(log.truncateTo(0)).toEqual({ kind: 'not_a_boundary', nextOffset: end });
  });

  it('purge restarts the partition at offset 0 with one empty durable segment', () => {
    const { disk, log } = filled();
    log.append(stampedBatch(log.nextOffset, 1, BASE_TIME_US + 1_000_000).bytes); // pending, dropped too
    log.purge();
    expect(disk.list()).toEqual([name20(0, 'index'), name20(0, 'log')]);
    expect(log.stats()).toEqual({ messagesCount: 0, sizeBytes: 0, segmentsCount: 1, startOffset: 0, endOffset: null, durableEndOffset: null });
    disk.crash();
    const reopened = openLog(disk, kernels, SEGMENT_BYTES).log;
    expect(reopened.nextOffset).toBe(0);
    const again = batchRun([2, 3]);
    appendAll(reopened, again);
    expect(readAllBatches(reopened)).toEqual(bytesOf(again));
  });

  it('retention: expired sealed segments and a byte budget, from the oldest, stopping at the barrier', () => {
    const { log, segments } = filled();
    // Retention's rule (src/partition/retention.ts) over this log's segments: how many it lets go.
    const going = (policy: RetentionPolicy, nowUs: number, barrierOffset: number | null): number => {
      const floor = retentionFloor({ segments: log.segmentInfos(), policy, nowUs, barrierOffset, floor: 0 });
      return floor === null ? 0 : log.segmentInfos().findIndex((segment) => segment.startOffset === floor);
    };
    const expired = { expiredSegmentCount: (nowUs: number, expiryUs: number, barrier: number | null = null) => going({ expiryUs, budgetBytes: null }, nowUs, barrier) };
    const budget = { overBudgetSegmentCount: (budgetBytes: number, barrier: number | null = null) => going({ expiryUs: null, budgetBytes }, 0, barrier) };
    const maxTime = (segment: readonly StoredBatch[]): number => segment[segment.length - 1]!.timestampUs;
    const expiry = 1000;
    // Exactly at max + expiry a segment has expired (§3.8: <= now).
    expect(expired.expiredSegmentCount(maxTime(segments[1]!) + expiry, expiry)).toBe(2);
    expect(expired.expiredSegmentCount(maxTime(segments[1]!) + expiry - 1, expiry)).toBe(1);
    expect(expired.expiredSegmentCount(Number.MAX_SAFE_INTEGER - expiry, expiry)).toBe(segments.length - 1);
    expect(expired.expiredSegmentCount(0, expiry)).toBe(0);
    const lastOf = (segment: readonly StoredBatch[]): number => segment[segment.length - 1]!.baseOffset + segment[segment.length - 1]!.count - 1;
    expect(expired.expiredSegmentCount(Number.MAX_SAFE_INTEGER - expiry, expiry, lastOf(segments[0]!))).toBe(1);
    expect(expired.expiredSegmentCount(Number.MAX_SAFE_INTEGER - expiry, expiry, lastOf(segments[0]!) - 1)).toBe(0);
    const bytes = (segment: readonly StoredBatch[]): number => segment.reduce((sum, batch) => sum + batch.bytes.byteLength, 0);
    const sealed = segments.slice(0, -1).reduce((sum, segment) => sum + bytes(segment), 0);
    expect(budget.overBudgetSegmentCount(sealed)).toBe(0);
    expect(budget.overBudgetSegmentCount(sealed - 1)).toBe(1);
    expect(budget.overBudgetSegmentCount(sealed - bytes(segments[0]!))).toBe(1);
    expect(budget.overBudgetSegmentCount(sealed - bytes(segments[0]!) - 1)).toBe(2);
    expect(budget.overBudgetSegmentCount(0)).toBe(segments.length - 1);
    expect(budget.overBudgetSegmentCount(0, lastOf(segments[1]!))).toBe(2);
  });
});

/** SimDisk with its fsyncs offered off the calling turn, as FsDisk offers them. */
class AsyncSimDisk extends SimDisk {
  fsyncAsync(name: string, done: (error: FsyncError | null) => void): void {
    setImmediate(() => done(this.settle(() => this.fsync(name))));
  }

  fsyncDirectoryAsync(done: (error: FsyncError | null) => void): void {
    setImmediate(() => done(this.settle(() => this.fsyncDirectory())));
  }

  private settle(sync: () => void): FsyncError | null {
    try {
      sync();
      return null;
    } catch (error) {
      if (error instanceof FsyncError) return error;
      throw error;
    }
  }
}

const flushAsync = (log: PartitionLog): Promise<Error | null> => new Promise((resolve) => log.flushAsync(resolve));

describe('partition log async flush', () => {
  const kernels = tsKernels();

  it('is durable only once done ran, refuses writes meanwhile, and serves reads meanwhile', async () => {
    const disk = new AsyncSimDisk(new Prng(11), { lostWriteProbability: 1, lostDirectoryOperationProbability: 1 });
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    expect(log.canFlushAsync).toBe(true);
    appendAll(log, batches.slice(0, 2));
    let answered: Error | null | undefined;
    log.flushAsync((error) => {
      answered = error;
    });
    expect(answered).toBeUndefined();
    expect(log.stats().durableEndOffset).toBeNull();
    expect(() => log.append(batches[2]!.bytes)).toThrow(AssertionError);
    expect(readAllBatches(log)).toEqual(bytesOf(batches.slice(0, 2)));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(answered).toBeNull();
    expect(log.stats().durableEndOffset).toBe(3);
    // The rest, across rotations (a flush that creates files fsyncs the directory too).
    for (const batch of batches.slice(2)) {
      log.append(batch.bytes);
      expect(await flushAsync(log)).toBeNull();
    }
    disk.crash(); // every unsynced write and directory operation is lost
    expect(readAllBatches(openLog(disk, kernels, SEGMENT_BYTES).log)).toEqual(bytesOf(batches));
  });

  it('a failed async fsync poisons the log', async () => {
    const disk = new AsyncSimDisk(new Prng(12));
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    log.append(stampedBatch(0, 2).bytes);
    disk.failNextFsync(name20(0, 'index'));
    expect(await flushAsync(log)).toBeInstanceOf(FsyncError);
    expect(log.poisoned).toBe(true);
    expect(() => log.readFrom(0, 1, 10)).toThrow(StoragePoisoned);
  });

  it('runs on FsDisk, which offers async fsyncs', async () => {
    const directory = tempDirectory('vrmeta-partition-');
    cleanups.push(directory.cleanup);
    const disk = new FsDisk(directory.path);
    cleanups.push(() => disk.close());
    const batches = batchRun(COUNTS);
    const { log } = openLog(disk, kernels, SEGMENT_BYTES);
    appendAll(log, batches);
    expect(await flushAsync(log)).toBeNull();
    expect(log.stats().durableEndOffset).toBe(log.nextOffset - 1);
    const again = new FsDisk(directory.path);
    cleanups.push(() => again.close());
    expect(readAllBatches(openLog(again, kernels, SEGMENT_BYTES).log)).toEqual(bytesOf(batches));
  });
});

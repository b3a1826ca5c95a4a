/**
 * The WAL: append + fsync, boot scan (torn tail truncated, interior corruption refused),
 * last-wins duplicates, truncateFrom / remove / drain through temp + rename, slot accounting, the chain
 * invariant, and poisoning after IO failures. On SimDisk, for every kernel implementation.
 */
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE } from '../../src/constants.js';
import { FsyncError } from '../../src/storage/disk.js';
import { DurableWriteError, StoragePoisoned } from '../../src/storage/durable-file.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { Wal, WAL_FILE, WAL_TEMP_FILE, walFileEntriesMax } from '../../src/storage/wal.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { Prng } from '../../src/stdx/prng.js';
import { chain, CLUSTER, kernelVariants, prepare, recordingLogger, type Prepare } from './storage-fixtures.js';

const SLOTS = 8;

describe.each(kernelVariants())('WAL ($label kernels)', ({ kernels }) => {
  function fresh(seed = 1, slotCount = SLOTS, checkpointOp = 0): { disk: SimDisk; wal: Wal } {
    const disk = new SimDisk(new Prng(seed));
    return { disk, wal: Wal.open(disk, kernels, { slotCount, checkpointOp, cluster: CLUSTER }) };
  }

  function reopen(disk: SimDisk, checkpointOp = 0, logger = recordingLogger()): Wal {
    return Wal.open(disk, kernels, { slotCount: SLOTS, checkpointOp, cluster: CLUSTER, logger });
  }

  function appendAll(wal: Wal, prepares: readonly Prepare[]): void {
    for (const entry of prepares) wal.append(entry.frame);
  }

  const ops = (wal: Wal): number[] => wal.entries().map((entry) => entry.op);

  it('creates the file durably and survives a crash with every appended entry', () => {
    const { disk, wal } = fresh();
    const prepares = chain(1, 5);
    appendAll(wal, prepares);
    expect(wal.headOp).toBe(5);
    disk.crash();
    const reopened = reopen(disk);
    expect(ops(reopened)).toEqual([1, 2, 3, 4, 5]);
    expect(reopened.get(3)?.identity).toBe(prepares[2]!.identity);
    expect(reopened.get(3)?.frame).toEqual(prepares[2]!.frame);
    expect(reopened.openReport.tornTail).toBeNull();
  });

  it('truncates and fsyncs a torn final append, and logs it', () => {
    const { disk, wal } = fresh();
    const prepares = chain(1, 4);
    appendAll(wal, prepares.slice(0, 3));
    const end = disk.size(WAL_FILE);
    disk.write(WAL_FILE, end, prepares[3]!.frame.subarray(0, HEADER_SIZE + 3)); // never fsynced
    const logger = recordingLogger();
    const reopened = reopen(disk, 0, logger);
    expect(ops(reopened)).toEqual([1, 2, 3]);
    expect(reopened.openReport.tornTail).toEqual({ offset: end, reason: 'body_truncated', droppedBytes: HEADER_SIZE + 3 });
    expect(logger.records.map((record) => record.event)).toContain('wal_torn_tail_truncated');
    expect(disk.durableBytes(WAL_FILE)?.byteLength).toBe(end);
    // The next append lands where the torn one started.
    reopened.append(prepares[3]!.frame);
    expect(ops(reopen(disk))).toEqual([1, 2, 3, 4]);
  });

  it('refuses interior corruption with the offset and the remedy', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 4));
    const offset = wal.get(2)!.offset;
    disk.corrupt(WAL_FILE, offset + HEADER_SIZE + 1);
    const refusal = catchRefusal(() => reopen(disk));
    expect(refusal.reason).toBe(RefusalReason.walInteriorCorruption);
    expect(refusal.file).toBe(WAL_FILE);
    expect(refusal.offset).toBe(offset);
    expect(refusal.message).toMatch(/wipe the data directory and restart the replica with --rejoin; it rejoins by state transfer/);
  });

  it('does not refuse boot when two reads in a row flip different bits of the same entry', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 4));
    const offset = wal.get(1)!.offset + HEADER_SIZE;
    // The first two reads each flip a different body bit of op 1 (both fail it as interior
    // damage, for the same reason at the same offset); the third reads the file as it is.
    let reads = 0;
    const read = disk.read.bind(disk);
    disk.read = (name, at, target) => {
      const count = read(name, at, target);
      if (name === WAL_FILE && reads < 2) target[offset - at + reads] = target[offset - at + reads]! ^ 0x10;
      if (name === WAL_FILE) reads += 1;
      return count;
    };
    expect(ops(reopen(disk))).toEqual([1, 2, 3, 4]);
    expect(reads).toBe(3);
  });

  it('does not truncate on a transient read fault', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 6));
    const size = disk.size(WAL_FILE);
    disk.setFaults({ readBitFlipProbability: 0.25 });
    for (let attempt = 0; attempt < 10; attempt++) {
      const reopened = reopen(disk);
      expect(ops(reopened)).toEqual([1, 2, 3, 4, 5, 6]);
    }
    expect(disk.size(WAL_FILE)).toBe(size);
  });

  it('duplicate ops: the later append wins, also after reopening', () => {
    const { disk, wal } = fresh();
    const prepares = chain(1, 3);
    appendAll(wal, prepares);
    // A retransmit of op 3 with the same identity (the view is outside the identity).
    wal.append(prepares[2]!.frame);
    const reopened = reopen(disk);
    expect(reopened.openReport.supersededEntryCount).toBe(1);
    expect(reopened.get(3)!.offset).toBe(wal.get(3)!.offset);
    expect(ops(reopened)).toEqual([1, 2, 3]);
  });

  it('truncateFrom removes the suffix durably through the temp file', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 6));
    wal.truncateFrom(4);
    expect(ops(wal)).toEqual([1, 2, 3]);
    expect(disk.exists(WAL_TEMP_FILE)).toBe(false);
    disk.crash();
    expect(ops(reopen(disk))).toEqual([1, 2, 3]);
    // A divergent op 4 can now be appended.
    const replacement = prepare(4, wal.get(3)!.identity, 5);
    wal.append(replacement.frame);
    expect(reopen(disk).get(4)!.identity).toBe(replacement.identity);
  });

  it('truncateFrom above the head is a no-op; at or below the checkpoint it is a bug', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 3));
    const before = disk.mutatingOperationCount;
    wal.truncateFrom(9);
    expect(disk.mutatingOperationCount).toBe(before);
    expect(() => wal.truncateFrom(0)).toThrow(AssertionError);
  });

  it('remove drops only the named entries, durably, and keeps the ones above them', () => {
    const { disk, wal } = fresh();
    const prepares = chain(1, 6);
    appendAll(wal, prepares);
    wal.remove([2, 3]);
    expect(ops(wal)).toEqual([1, 4, 5, 6]);
    expect(disk.exists(WAL_TEMP_FILE)).toBe(false);
    disk.crash();
    const reopened = reopen(disk);
    expect(ops(reopened)).toEqual([1, 4, 5, 6]);
    expect(reopened.get(5)!.identity).toBe(prepares[4]!.identity);
    // The gap is repaired with the canonical bodies: they chain on both sides again.
    reopened.append(prepares[2]!.frame);
    reopened.append(prepares[1]!.frame);
    expect(ops(reopen(disk))).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('remove of ops it does not hold is a no-op; at or below the checkpoint it is a bug', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 3));
    const before = disk.mutatingOperationCount;
    wal.remove([5, 7]);
    expect(disk.mutatingOperationCount).toBe(before);
    expect(() => wal.remove([2, 0])).toThrow(AssertionError);
    expect(ops(wal)).toEqual([1, 2, 3]);
  });

  it('drain keeps the entry at the checkpoint op and advances the checkpoint', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 7));
    wal.drain(5);
    expect(wal.checkpointOp).toBe(5);
    expect(ops(wal)).toEqual([5, 6, 7]);
    expect(wal.get(4)).toBeNull();
    disk.crash();
    expect(ops(reopen(disk, 5))).toEqual([5, 6, 7]);
  });

  it('drain past the head (state transfer) leaves an empty WAL at the new checkpoint', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 3));
    wal.drain(100);
    expect(wal.entries()).toEqual([]);
    expect(wal.headOp).toBe(100);
    expect(disk.size(WAL_FILE)).toBe(0);
    const next = prepare(101, 0xabcn);
    wal.append(next.frame);
    expect(ops(reopen(disk, 100))).toEqual([101]);
  });

  it('entries below the checkpoint (a crash before drain) are ignored, then dropped by the next rewrite', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 6));
    const reopened = reopen(disk, 4);
    expect(reopened.openReport.staleEntryCount).toBe(3);
    expect(ops(reopened)).toEqual([4, 5, 6]);
    reopened.drain(4);
    expect(reopen(disk, 4).openReport.fileEntryCount).toBe(3);
  });

  it('slot accounting: an op whose slot holds an op above the checkpoint is refused until a drain', () => {
    const { wal } = fresh();
    const prepares = chain(1, SLOTS + 2);
    appendAll(wal, prepares.slice(0, SLOTS));
    // op SLOTS lands in slot 0, which is free (op 0 was never journaled).
    expect(wal.hasRoomFor(SLOTS + 1)).toBe(false);
    expect(() => wal.append(prepares[SLOTS]!.frame)).toThrow(/checkpoint before appending/);
    wal.drain(2);
    expect(wal.hasRoomFor(SLOTS + 1)).toBe(true);
    wal.append(prepares[SLOTS]!.frame);
    // The checkpoint entry's slot may be reused by op checkpoint + SLOTS.
    expect(wal.hasRoomFor(SLOTS + 2)).toBe(true);
    wal.append(prepares[SLOTS + 1]!.frame);
    expect(wal.get(2)).toBeNull();
    expect(ops(wal)[0]).toBe(3);
  });

  it('the chain invariant: a replacement that does not chain needs truncateFrom first', () => {
    const { wal } = fresh();
    const prepares = chain(1, 4);
    appendAll(wal, prepares);
    const divergent2 = prepare(2, prepares[0]!.identity, 9);
    expect(() => wal.append(divergent2.frame)).toThrow(/truncateFrom\(2\)/);
    const orphan5 = prepare(5, 0xdeadn);
    expect(() => wal.append(orphan5.frame)).toThrow(/truncateFrom\(4\)/);
  });

  it('compacts before an append that would not chain to a stale physical tail', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 3));
    // Reopen as if a state transfer installed checkpoint 4: ops 1..3 are stale, op 3 is the
    // physical tail, and the new op 4 does not chain to it.
    const reopened = reopen(disk, 4);
    const op4 = prepare(4, 0x1234n, 3);
    reopened.append(op4.frame);
    const again = reopen(disk, 4);
    expect(ops(again)).toEqual([4]);
    expect(again.openReport.fileEntryCount).toBe(1);
  });

  it('keeps the file bounded: repeated retransmits trigger a compaction', () => {
    const { disk, wal } = fresh();
    const prepares = chain(1, 2);
    appendAll(wal, prepares);
    for (let index = 0; index < 3 * walFileEntriesMax(SLOTS); index++) wal.append(prepares[1]!.frame);
    expect(reopen(disk).openReport.fileEntryCount).toBeLessThanOrEqual(walFileEntriesMax(SLOTS));
  });

  it('refuses a WAL from another cluster', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 2));
    const refusal = catchRefusal(() => Wal.open(disk, kernels, { slotCount: SLOTS, checkpointOp: 0, cluster: 7n }));
    expect(refusal.reason).toBe(RefusalReason.walClusterMismatch);
  });

  it('asserts on appends that are not a single valid prepare', () => {
    const { wal } = fresh();
    const frame = prepare(1, 0n).frame;
    expect(() => wal.append(frame.subarray(0, frame.byteLength - 1))).toThrow(AssertionError);
    const flipped = frame.slice();
    flipped[HEADER_SIZE] = flipped[HEADER_SIZE]! ^ 1;
    expect(() => wal.append(flipped)).toThrow(AssertionError);
  });

  it('removes a temp file left by a crashed rewrite', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 2));
    disk.write(WAL_TEMP_FILE, 0, new Uint8Array(10));
    reopen(disk);
    expect(disk.exists(WAL_TEMP_FILE)).toBe(false);
  });

  it('a failed append fsync poisons the WAL; reopening re-scans and recovers', () => {
    const { disk, wal } = fresh(3);
    const prepares = chain(1, 3);
    appendAll(wal, prepares.slice(0, 2));
    disk.failNextFsync(WAL_FILE);
    expect(() => wal.append(prepares[2]!.frame)).toThrow(FsyncError);
    expect(wal.poisoned).toBe(true);
    expect(() => wal.append(prepares[2]!.frame)).toThrow(StoragePoisoned);
    expect(() => wal.truncateFrom(2)).toThrow(StoragePoisoned);
    const reopened = reopen(disk);
    expect(ops(reopened).slice(0, 2)).toEqual([1, 2]);
  });

  it('a rewrite that fails before the rename is retryable; after the rename it poisons', () => {
    const { disk, wal } = fresh();
    appendAll(wal, chain(1, 5));
    disk.failNextFsync(WAL_TEMP_FILE);
    expect(() => wal.truncateFrom(4)).toThrow(DurableWriteError);
    expect(wal.poisoned).toBe(false);
    expect(ops(wal)).toEqual([1, 2, 3, 4, 5]);
    disk.failNextFsync('.');
    expect(() => wal.truncateFrom(4)).toThrow(DurableWriteError);
    expect(wal.poisoned).toBe(true);
    const reopened = reopen(disk);
    expect([[1, 2, 3], [1, 2, 3, 4, 5]]).toContainEqual(ops(reopened));
  });
});

function catchRefusal(run: () => unknown): StorageRefusal {
  try {
    run();
  } catch (error) {
    if (error instanceof StorageRefusal) return error;
    throw error;
  }
  throw new Error('expected a StorageRefusal');
}

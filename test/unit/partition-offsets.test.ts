/**
 * Consumer and group offset files: the 16-byte record against an independent XXH3 (@node-rs/xxhash),
 * durable stores, deletes and clears across crashes, temp leftovers swept, and a torn or corrupt
 * file refusing boot (the choice argued in partition-offsets.ts). SimDisk and FsDisk.
 */
import { xxh3 } from '@node-rs/xxhash';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsDisk } from '../../src/storage/fs-disk.js';
import {
  ConsumerKind,
  ConsumerOffsets,
  offsetFileName,
  offsetTemporaryName,
  parseOffsetFileName,
} from '../../src/storage/partition-offsets.js';
import { assertFileName } from '../../src/storage/disk.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { Prng } from '../../src/stdx/prng.js';
import { kernelVariants, recordingLogger, tempDirectory } from './storage-fixtures.js';

/** The record from the spec: offset u64 LE, then XXH3-64 of those 8 bytes, u64 LE. */
function specRecord(offset: number): Uint8Array {
  const record = new Uint8Array(16);
  const data = new DataView(record.buffer);
  data.setBigUint64(0, BigInt(offset), true);
  data.setBigUint64(8, xxh3.xxh64(record.subarray(0, 8), 0n), true);
  return record;
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

describe.each(kernelVariants())('consumer offsets ($label kernels)', ({ kernels }) => {
  it('names files by kind and u32 id, each a valid plain file name', () => {
    expect(offsetFileName(ConsumerKind.consumer, 7)).toBe('consumer-7.offset');
    expect(offsetFileName(ConsumerKind.group, 0xffff_ffff)).toBe('group-4294967295.offset');
    assertFileName(offsetTemporaryName(ConsumerKind.group, 0xffff_ffff));
    expect(() => offsetFileName(ConsumerKind.group, 2 ** 32)).toThrow(AssertionError);
    expect(parseOffsetFileName('group-12.offset')).toEqual({ kind: 'group', id: 12 });
    expect(parseOffsetFileName('group-012.offset')).toBeNull();
    expect(parseOffsetFileName('group-4294967296.offset')).toBeNull();
    expect(parseOffsetFileName('00000000000000000000.log')).toBeNull();
  });

  it('stores durably in the spec record, survives a crash, deletes and clears durably', () => {
    const disk = new SimDisk(new Prng(2), { lostDirectoryOperationProbability: 1, lostWriteProbability: 1 });
    const offsets = ConsumerOffsets.load(disk, kernels);
    offsets.store(ConsumerKind.consumer, 1, 41);
    offsets.store(ConsumerKind.group, 9, 2 ** 40);
    offsets.store(ConsumerKind.consumer, 1, 42);
    expect(disk.readAll('consumer-1.offset')).toEqual(specRecord(42));
    expect(disk.readAll('group-9.offset')).toEqual(specRecord(2 ** 40));
    disk.crash(); // every unsynced operation is lost
    const reopened = ConsumerOffsets.load(disk, kernels);
    expect(reopened.entries()).toEqual([
      { kind: 'consumer', id: 1, offset: 42 },
      { kind: 'group', id: 9, offset: 2 ** 40 },
    ]);
    expect(reopened.get(ConsumerKind.group, 9)).toBe(2 ** 40);
    expect(reopened.get(ConsumerKind.group, 1)).toBeNull();
    expect(reopened.delete(ConsumerKind.consumer, 1)).toBe(true);
    expect(reopened.delete(ConsumerKind.consumer, 1)).toBe(false);
    disk.crash();
    const afterDelete = ConsumerOffsets.load(disk, kernels);
    expect(afterDelete.entries()).toEqual([{ kind: 'group', id: 9, offset: 2 ** 40 }]);
    afterDelete.clear();
    disk.crash();
    expect(ConsumerOffsets.load(disk, kernels).entries()).toEqual([]);
  });

  it('removes a temp file left by a store that crashed before its rename, keeping the old value', () => {
    const disk = new SimDisk(new Prng(3));
    ConsumerOffsets.load(disk, kernels).store(ConsumerKind.consumer, 5, 10);
    disk.write('consumer-5.offset.tmp', 0, specRecord(11).subarray(0, 5));
    disk.fsync('consumer-5.offset.tmp');
    disk.fsyncDirectory();
    const logger = recordingLogger();
    const offsets = ConsumerOffsets.load(disk, kernels, logger);
    expect(offsets.get(ConsumerKind.consumer, 5)).toBe(10);
    expect(disk.exists('consumer-5.offset.tmp')).toBe(false);
    expect(logger.records.map((record) => record.event)).toContain('consumer_offset_temporary_removed');
  });

  it.each([
    ['torn (8 bytes)', (disk: SimDisk) => disk.truncateAtRest('group-3.offset', 8), /8 bytes, expected 16/],
    ['empty', (disk: SimDisk) => disk.truncateAtRest('group-3.offset', 0), /0 bytes, expected 16/],
    ['longer', (disk: SimDisk) => disk.write('group-3.offset', 16, new Uint8Array(1)), /17 bytes, expected 16/],
    ['a flipped offset bit', (disk: SimDisk) => disk.corrupt('group-3.offset', 2, 1), /checksum/],
    ['a flipped checksum bit', (disk: SimDisk) => disk.corrupt('group-3.offset', 12, 7), /checksum/],
  ])('refuses an offset file that is %s, naming it', (_label, damage, detail) => {
    const disk = new SimDisk(new Prng(4));
    const offsets = ConsumerOffsets.load(disk, kernels);
    offsets.store(ConsumerKind.group, 3, 1234);
    damage(disk);
    const refusal = refusalOf(() => ConsumerOffsets.load(disk, kernels));
    expect(refusal.reason).toBe(RefusalReason.consumerOffsetCorrupt);
    expect(refusal.file).toBe('group-3.offset');
    expect(refusal.detail).toMatch(detail);
  });

  it('refuses a record above 2^53 even with a valid checksum', () => {
    const disk = new SimDisk(new Prng(4));
    const record = new Uint8Array(16);
    const data = new DataView(record.buffer);
    data.setBigUint64(0, 2n ** 60n, true);
    data.setBigUint64(8, xxh3.xxh64(record.subarray(0, 8), 0n), true);
    disk.write('consumer-1.offset', 0, record);
    expect(refusalOf(() => ConsumerOffsets.load(disk, kernels)).detail).toMatch(/above 2\^53/);
  });
});

describe('consumer offsets on FsDisk', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  it('round-trips through real files and refuses one damaged on disk', () => {
    const kernels = kernelVariants()[0]!.kernels;
    const directory = tempDirectory('vrmeta-offsets-');
    cleanups.push(directory.cleanup);
    const disk = new FsDisk(directory.path);
    ConsumerOffsets.load(disk, kernels).store(ConsumerKind.group, 77, 5);
    disk.close();
    const again = new FsDisk(directory.path);
    cleanups.push(() => again.close());
    expect(ConsumerOffsets.load(again, kernels).get(ConsumerKind.group, 77)).toBe(5);
    const bad = specRecord(6);
    bad[15]! ^= 1;
    writeFileSync(join(directory.path, 'group-77.offset'), bad);
    expect(refusalOf(() => ConsumerOffsets.load(again, kernels)).reason).toBe(RefusalReason.consumerOffsetCorrupt);
  });
});

/**
 * SimDisk: the durability model the crash-consistency tests rely on. If the simulated disk were
 * kinder than a real one (keeping unsynced data, or a new file without a directory fsync), the
 * property tests would pass against storage code that loses data on a real power cut.
 */
import { describe, expect, it } from 'vitest';
import { DiskError, FsyncError } from '../../src/storage/disk.js';
import { SimDisk, SimulatedCrash } from '../../src/storage/sim-disk.js';
import { Prng } from '../../src/stdx/prng.js';

const bytes = (...values: number[]): Uint8Array => Uint8Array.from(values);
const text = (value: string): Uint8Array => new TextEncoder().encode(value);

function durableFile(disk: SimDisk, name: string): void {
  disk.write(name, 0, text('durable'));
  disk.fsync(name);
  disk.fsyncDirectory();
}

describe('SimDisk durability model', () => {
  it('reads see unsynced writes; a crash that loses them restores the durable bytes', () => {
    const disk = new SimDisk(new Prng(1), { lostWriteProbability: 1 });
    durableFile(disk, 'f');
    disk.write('f', 0, text('DURABLE!'));
    expect(new TextDecoder().decode(disk.readAll('f'))).toBe('DURABLE!');
    disk.crash();
    expect(new TextDecoder().decode(disk.readAll('f'))).toBe('durable');
  });

  it('a reader keeps reading the inode it opened after a rename over its name (as POSIX does)', () => {
    const disk = new SimDisk(new Prng(1));
    durableFile(disk, 'snap');
    const reader = disk.openRead('snap');
    disk.write('snap.tmp', 0, text('replaced'));
    disk.rename('snap.tmp', 'snap');
    const target = new Uint8Array(7);
    expect(reader.read(0, target)).toBe(7);
    expect(new TextDecoder().decode(target)).toBe('durable');
    expect(new TextDecoder().decode(disk.readAll('snap'))).toBe('replaced');
    reader.close();
    expect(() => reader.read(0, target)).toThrow();
    expect(() => disk.openRead('missing')).toThrow(DiskError);
  });

  it('fsynced writes survive any crash', () => {
    const disk = new SimDisk(new Prng(2), { lostWriteProbability: 1, tornWriteProbability: 1 });
    durableFile(disk, 'f');
    disk.write('f', 7, text('+more'));
    disk.fsync('f');
    disk.crash();
    expect(new TextDecoder().decode(disk.readAll('f'))).toBe('durable+more');
  });

  it('a new file fsynced but not directory-synced can vanish', () => {
    const disk = new SimDisk(new Prng(3), { lostDirectoryOperationProbability: 1 });
    disk.write('new', 0, text('x'));
    disk.fsync('new');
    disk.crash();
    expect(disk.exists('new')).toBe(false);
  });

  it('a rename without a directory fsync can be undone; after one it is durable', () => {
    const disk = new SimDisk(new Prng(4), { lostDirectoryOperationProbability: 1 });
    durableFile(disk, 'target');
    durableFile(disk, 'tmp');
    disk.write('tmp', 0, text('NEWBYTE'));
    disk.fsync('tmp');
    disk.rename('tmp', 'target');
    expect(new TextDecoder().decode(disk.readAll('target'))).toBe('NEWBYTE');
    disk.crash();
    expect(new TextDecoder().decode(disk.readAll('target'))).toBe('durable');
    // The renamed inode kept its fsynced bytes under its old name.
    expect(new TextDecoder().decode(disk.readAll('tmp'))).toBe('NEWBYTE');

    disk.rename('tmp', 'target');
    disk.fsyncDirectory();
    disk.crash();
    expect(new TextDecoder().decode(disk.readAll('target'))).toBe('NEWBYTE');
    expect(disk.exists('tmp')).toBe(false);
  });

  it('a remove without a directory fsync can be undone', () => {
    const disk = new SimDisk(new Prng(5), { lostDirectoryOperationProbability: 1 });
    durableFile(disk, 'f');
    disk.remove('f');
    expect(disk.exists('f')).toBe(false);
    disk.crash();
    expect(disk.exists('f')).toBe(true);
  });

  it('torn writes land a strict prefix of the write, the rest untouched, zeroed or garbage', () => {
    const seen = new Set<string>();
    for (let seed = 0; seed < 64; seed++) {
      const disk = new SimDisk(new Prng(seed), { tornWriteProbability: 1 });
      disk.write('f', 0, new Uint8Array(16).fill(1));
      disk.fsync('f');
      disk.fsyncDirectory();
      disk.write('f', 0, new Uint8Array(16).fill(2));
      disk.crash();
      const after = disk.readAll('f');
      expect(after.byteLength).toBe(16);
      const prefix = after.findIndex((value) => value !== 2);
      expect(prefix).toBeGreaterThanOrEqual(0); // never the whole write
      const rest = after.subarray(prefix);
      seen.add(rest.every((value) => value === 1) ? 'untouched' : rest.every((value) => value === 0) ? 'zero' : 'garbage');
    }
    expect(seen).toEqual(new Set(['untouched', 'zero', 'garbage']));
  });

  it('a torn append leaves a short file or a full-length tail of zeros or garbage', () => {
    const disk = new SimDisk(new Prng(9), { tornWriteProbability: 1, tornGarbageProbability: 0 });
    durableFile(disk, 'f');
    disk.write('f', 7, new Uint8Array(100).fill(7));
    disk.crash();
    const size = disk.size('f');
    expect(size === 107 || size < 107).toBe(true);
    expect(size).toBeGreaterThanOrEqual(7);
  });

  it('is deterministic: the same seed and calls give the same bytes', () => {
    const run = (): Uint8Array => {
      const disk = new SimDisk(new Prng(42), { tornWriteProbability: 0.5, lostWriteProbability: 0.3, lostDirectoryOperationProbability: 0.5 });
      for (let index = 0; index < 20; index++) {
        disk.write(`f${index % 3}`, index * 3, bytes(index, index + 1, index + 2, index + 3));
        if (index % 4 === 0) disk.fsync(`f${index % 3}`);
        if (index % 7 === 0) disk.fsyncDirectory();
      }
      disk.crash();
      const parts = disk.list().map((name) => disk.readAll(name));
      return Uint8Array.from(parts.flatMap((part) => [...part, 255]));
    };
    expect(run()).toEqual(run());
  });
});

describe('SimDisk crash points', () => {
  it('the k-th mutating call throws SimulatedCrash and the disk stays down until crash()', () => {
    const disk = new SimDisk(new Prng(7));
    durableFile(disk, 'f');
    disk.crashAtOperation(2);
    disk.write('f', 0, text('a')); // 1st
    expect(() => disk.fsync('f')).toThrow(SimulatedCrash); // 2nd
    expect(() => disk.readAll('f')).toThrow(SimulatedCrash);
    expect(() => disk.write('f', 0, text('b'))).toThrow(SimulatedCrash);
    disk.crash();
    expect(disk.readAll('f').byteLength).toBe(7);
  });

  it('counts mutating calls so a test can aim a crash point', () => {
    const disk = new SimDisk(new Prng(8));
    const before = disk.mutatingOperationCount;
    durableFile(disk, 'f');
    disk.readAll('f');
    expect(disk.mutatingOperationCount - before).toBe(3);
  });

  it('a crash point inside a write may apply nothing, a prefix, or all of it', () => {
    const outcomes = new Set<number>();
    for (let seed = 0; seed < 48; seed++) {
      const disk = new SimDisk(new Prng(seed));
      durableFile(disk, 'f');
      disk.crashAtOperation(1);
      expect(() => disk.write('f', 7, new Uint8Array(10).fill(9))).toThrow(SimulatedCrash);
      // No crash faults configured: whatever part of the write was applied survives.
      disk.crash();
      outcomes.add(disk.size('f'));
    }
    expect([...outcomes].some((size) => size === 7)).toBe(true);
    expect([...outcomes].some((size) => size === 17)).toBe(true);
    expect([...outcomes].some((size) => size > 7 && size < 17)).toBe(true);
  });

  it('clearCrashPoint disarms an unreached crash point', () => {
    const disk = new SimDisk(new Prng(10));
    disk.crashAtOperation(3);
    disk.clearCrashPoint();
    durableFile(disk, 'f');
    durableFile(disk, 'g');
    expect(disk.exists('g')).toBe(true);
  });
});

describe('SimDisk faults', () => {
  it('bit flips at rest, zeroed ranges and truncation at rest change durable bytes', () => {
    const disk = new SimDisk(new Prng(11));
    disk.write('f', 0, new Uint8Array(32).fill(0xff));
    disk.fsync('f');
    disk.fsyncDirectory();
    disk.corrupt('f', 3, 0);
    disk.zeroRange('f', 10, 4);
    disk.truncateAtRest('f', 20);
    disk.crash();
    const after = disk.readAll('f');
    expect(after.byteLength).toBe(20);
    expect(after[3]).toBe(0xfe);
    expect([...after.subarray(10, 14)]).toEqual([0, 0, 0, 0]);
    expect(after[14]).toBe(0xff);
  });

  it('bit flips on read are transient', () => {
    const disk = new SimDisk(new Prng(12), { readBitFlipProbability: 1 });
    disk.write('f', 0, new Uint8Array(64));
    const first = disk.readAll('f');
    expect(first.some((value) => value !== 0)).toBe(true);
    disk.setFaults({ readBitFlipProbability: 0 });
    expect(disk.readAll('f').every((value) => value === 0)).toBe(true);
  });

  it('a misdirected write lands at another offset of the same file', () => {
    const disk = new SimDisk(new Prng(13));
    disk.write('f', 0, new Uint8Array(16));
    disk.misdirectNextWrite('f', 4);
    disk.write('f', 16, bytes(1, 2, 3));
    const after = disk.readAll('f');
    expect(after.byteLength).toBe(16);
    expect([...after.subarray(4, 7)]).toEqual([1, 2, 3]);
  });

  it('random misdirected writes stay inside the file', () => {
    const disk = new SimDisk(new Prng(14), { misdirectedWriteProbability: 1 });
    disk.write('f', 0, new Uint8Array(8));
    disk.write('f', 8, bytes(5, 5));
    expect(disk.size('f')).toBeLessThanOrEqual(10);
  });

  it('a failed fsync throws FsyncError and leaves the unsynced writes in an unknown state', () => {
    const states = new Set<string>();
    for (let seed = 0; seed < 40; seed++) {
      const disk = new SimDisk(new Prng(seed), { tornWriteProbability: 0.4, lostWriteProbability: 0.4 });
      durableFile(disk, 'f');
      disk.write('f', 0, text('CHANGED'));
      disk.failNextFsync('f');
      expect(() => disk.fsync('f')).toThrow(FsyncError);
      // What reads show now is what survives: the kernel dropped the dirty pages.
      const seen = new TextDecoder().decode(disk.readAll('f'));
      disk.crash();
      expect(new TextDecoder().decode(disk.readAll('f'))).toBe(seen);
      states.add(seen === 'durable' ? 'lost' : seen === 'CHANGED' ? 'applied' : 'torn');
    }
    expect(states).toEqual(new Set(['lost', 'applied', 'torn']));
  });

  it('a failed directory fsync resolves pending renames either way', () => {
    const disk = new SimDisk(new Prng(15));
    durableFile(disk, 'a');
    disk.rename('a', 'b');
    disk.failNextFsync('.');
    expect(() => disk.fsyncDirectory()).toThrow(FsyncError);
    expect(disk.exists('a') !== disk.exists('b')).toBe(true);
  });

  it('missing files raise DiskError naming the operation', () => {
    const disk = new SimDisk(new Prng(16));
    expect(() => disk.readAll('nope')).toThrow(DiskError);
    expect(() => disk.fsync('nope')).toThrow(/fsync/);
  });
});

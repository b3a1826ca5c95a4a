/**
 * The superblock: record layout, alternating slots, chained records, and every read rule that
 * refuses boot (a corrupt or missing slot may have held the newest view; falling back to the
 * other slot could let this replica vote twice in one view).
 */
import { describe, expect, it } from 'vitest';
import { DurableWriteError } from '../../src/storage/durable-file.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import {
  decodeSuperblockRecord,
  encodeSuperblockRecord,
  Superblock,
  SUPERBLOCK_FILES,
  SUPERBLOCK_MAGIC,
  SUPERBLOCK_RECORD_SIZE,
} from '../../src/storage/superblock.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { Prng } from '../../src/stdx/prng.js';
import { CLUSTER, kernelVariants, vsrState } from './storage-fixtures.js';

const [SLOT_A, SLOT_B] = SUPERBLOCK_FILES;

describe.each(kernelVariants())('superblock ($label kernels)', ({ kernels }) => {
  function fresh(): { disk: SimDisk; superblock: Superblock } {
    const disk = new SimDisk(new Prng(1));
    return { disk, superblock: Superblock.open(disk, kernels) };
  }

  function refusalOf(disk: SimDisk): StorageRefusal {
    try {
      Superblock.open(disk, kernels);
    } catch (error) {
      if (error instanceof StorageRefusal) return error;
      throw error;
    }
    throw new Error('expected a refusal');
  }

  /** Writes `count` records with a growing view; returns the disk. */
  function written(count: number): SimDisk {
    const { disk, superblock } = fresh();
    for (let index = 1; index <= count; index++) superblock.write(vsrState({ view: index, logView: index, commitMax: index }));
    return disk;
  }

  it('lays the record out as documented (magic, version, sequence, parent, payload, checksum)', () => {
    const state = vsrState({ view: 7, logView: 6, commitMax: 0x1_0000_0001, checkpointOp: 5, checkpointChecksum: 0xfeedn });
    const { bytes, checksum } = encodeSuperblockRecord(kernels, 3, 0xabcn, state);
    const view = new DataView(bytes.buffer);
    expect(bytes.byteLength).toBe(SUPERBLOCK_RECORD_SIZE);
    expect([...bytes.subarray(0, 4)]).toEqual([0x4b, 0x4c, 0x42, 0x53]); // "KLBS": 0x5342_4C4B LE
    expect(view.getUint32(0, true)).toBe(SUPERBLOCK_MAGIC);
    expect(view.getUint16(4, true)).toBe(1);
    expect(view.getBigUint64(8, true)).toBe(3n);
    expect(view.getBigUint64(16, true)).toBe(0xabcn);
    expect(view.getUint32(24, true)).toBe(66);
    expect(view.getBigUint64(28, true)).toBe(CLUSTER); // cluster u128 @0 of the payload
    expect(view.getUint32(28 + 18, true)).toBe(7); // view
    expect(view.getUint32(28 + 22, true)).toBe(6); // log_view
    expect(view.getBigUint64(28 + 26, true)).toBe(0x1_0000_0001n); // commit_max
    expect(view.getBigUint64(28 + 34, true)).toBe(5n); // checkpoint_op
    expect(view.getBigUint64(28 + 42, true)).toBe(0xfeedn); // checkpoint_checksum
    expect(view.getBigUint64(94, true)).toBe(checksum);
    expect(checksum).toBe(kernels.xxh3_64(bytes.subarray(0, 94)));
    const decoded = decodeSuperblockRecord(kernels, bytes);
    expect(decoded).toMatchObject({ status: 'valid', record: { sequence: 3, parentChecksum: 0xabcn, state } });
  });

  it('carries view headers after the state: payload_len grows by 256 per header, and they round-trip', () => {
    const headers = new Uint8Array(3 * 256).map((_, index) => (index * 7 + 1) & 0xff);
    const state = vsrState({ view: 9, logView: 9, commitMax: 40, viewHeaders: headers });
    const { bytes, checksum } = encodeSuperblockRecord(kernels, 5, 0x77n, state);
    const view = new DataView(bytes.buffer);
    expect(bytes.byteLength).toBe(SUPERBLOCK_RECORD_SIZE + 3 * 256);
    expect(view.getUint32(24, true)).toBe(66 + 3 * 256);
    expect([...bytes.subarray(28 + 66, 28 + 66 + 3 * 256)]).toEqual([...headers]);
    expect(view.getBigUint64(bytes.byteLength - 8, true)).toBe(checksum);
    const decoded = decodeSuperblockRecord(kernels, bytes);
    expect(decoded).toMatchObject({ status: 'valid', record: { sequence: 5, state: { view: 9, commitMax: 40 } } });
    if (decoded.status !== 'valid') throw new Error('valid');
    expect([...decoded.record.state.viewHeaders!]).toEqual([...headers]);
    // Without view headers the record is the reference's 102 bytes, and decodes without any.
    const plain = decodeSuperblockRecord(kernels, encodeSuperblockRecord(kernels, 1, 0n, vsrState()).bytes);
    if (plain.status !== 'valid') throw new Error('valid');
    expect(plain.record.state.viewHeaders).toBeUndefined();
  });

  it('carries the checkpoint anchor (flagged) before the view headers, and both round-trip', () => {
    const headers = new Uint8Array(256).fill(9);
    const anchor = (0x1234n << 64n) | 0xabcdn;
    const state = vsrState({ checkpointOp: 4, commitMax: 6, checkpointAnchor: anchor, viewHeaders: headers });
    const { bytes } = encodeSuperblockRecord(kernels, 2, 0n, state);
    const view = new DataView(bytes.buffer);
    expect(view.getUint32(24, true)).toBe(66 + 16 + 256);
    expect(view.getBigUint64(28 + 58, true)).toBe(2n); // VSR_FLAG_CHECKPOINT_ANCHOR
    expect(view.getBigUint64(28 + 66, true)).toBe(0xabcdn);
    const decoded = decodeSuperblockRecord(kernels, bytes);
    if (decoded.status !== 'valid') throw new Error('valid');
    expect(decoded.record.state.checkpointAnchor).toBe(anchor);
    expect(decoded.record.state.flags).toBe(0); // the extension flag is the codec's, not the state's
    expect([...decoded.record.state.viewHeaders!]).toEqual([...headers]);
    // The flag must agree with the payload: clear it, re-seal, and the record is refused.
    const forged = bytes.slice();
    new DataView(forged.buffer).setBigUint64(28 + 58, 0n, true);
    new DataView(forged.buffer).setBigUint64(forged.byteLength - 8, kernels.xxh3_64(forged.subarray(0, forged.byteLength - 8)), true);
    expect(decodeSuperblockRecord(kernels, forged)).toMatchObject({ status: 'corrupt', reason: RefusalReason.superblockInvalidState });
  });

  it('a record whose payload_len disagrees with its length, or is not whole headers, is corrupt', () => {
    const { bytes } = encodeSuperblockRecord(kernels, 1, 0n, vsrState({ viewHeaders: new Uint8Array(2 * 256).fill(3) }));
    const shortened = bytes.slice(0, bytes.byteLength - 256);
    expect(decodeSuperblockRecord(kernels, shortened)).toMatchObject({ status: 'corrupt', reason: RefusalReason.superblockSlotCorrupt });
    for (const payloadLength of [66 + 256, 66 + 100, 65, 66 + 129 * 256]) {
      const forged = bytes.slice();
      new DataView(forged.buffer).setUint32(24, payloadLength, true);
      expect(decodeSuperblockRecord(kernels, forged)).toMatchObject({ status: 'corrupt', reason: RefusalReason.superblockSlotCorrupt });
    }
    const flipped = bytes.slice();
    flipped[28 + 66 + 300]! ^= 1;
    expect(decodeSuperblockRecord(kernels, flipped)).toMatchObject({ status: 'corrupt', reason: RefusalReason.superblockSlotCorrupt });
    expect(() => encodeSuperblockRecord(kernels, 1, 0n, vsrState({ viewHeaders: new Uint8Array(129 * 256) }))).toThrow(AssertionError);
  });

  it('a fresh directory has no state; the first write goes to slot a, then they alternate', () => {
    const { disk, superblock } = fresh();
    expect(superblock.state).toBeNull();
    superblock.write(vsrState({ view: 1 }));
    expect(disk.exists(SLOT_A)).toBe(true);
    expect(disk.exists(SLOT_B)).toBe(false);
    superblock.write(vsrState({ view: 2, logView: 2 }));
    superblock.write(vsrState({ view: 3, logView: 3 }));
    disk.crash();
    const reopened = Superblock.open(disk, kernels);
    expect(reopened.sequence).toBe(3);
    expect(reopened.state?.view).toBe(3);
    reopened.write(vsrState({ view: 4, logView: 4 }));
    const b = decodeSuperblockRecord(kernels, disk.readAll(SLOT_B));
    expect(b).toMatchObject({ status: 'valid', record: { sequence: 4 } });
  });

  it('records chain: each names the previous record checksum', () => {
    const disk = written(2);
    const a = decodeSuperblockRecord(kernels, disk.readAll(SLOT_A));
    const b = decodeSuperblockRecord(kernels, disk.readAll(SLOT_B));
    if (a.status !== 'valid' || b.status !== 'valid') throw new Error('slots valid');
    expect(a.record.parentChecksum).toBe(0n);
    expect(b.record.parentChecksum).toBe(a.record.checksum);
  });

  it('falls back to slot a when slot b was never made durable (first write only)', () => {
    const disk = written(1);
    expect(Superblock.open(disk, kernels).state?.view).toBe(1);
  });

  it('refuses when a slot file is missing while the other proves it existed', () => {
    const disk = written(3);
    disk.remove(SLOT_B);
    const refusal = refusalOf(disk);
    expect(refusal.reason).toBe(RefusalReason.superblockSlotMissing);
    expect(refusal.file).toBe(SLOT_B);
    const other = written(2);
    other.remove(SLOT_A);
    expect(refusalOf(other).reason).toBe(RefusalReason.superblockSlotMissing);
  });

  it.each([SLOT_A, SLOT_B])('refuses boot when %s does not verify, even if the other slot does', (name) => {
    const disk = written(3);
    disk.corrupt(name, 40);
    const refusal = refusalOf(disk);
    expect(refusal.reason).toBe(RefusalReason.superblockSlotCorrupt);
    expect(refusal.file).toBe(name);
    expect(refusal.message).toMatch(/wipe the data directory/);
  });

  it('refuses an empty or oversized slot file', () => {
    const disk = written(2);
    disk.truncateAtRest(SLOT_A, 0);
    expect(refusalOf(disk).reason).toBe(RefusalReason.superblockSlotCorrupt);
    const big = written(2);
    big.write(SLOT_B, SUPERBLOCK_RECORD_SIZE, new Uint8Array(8192));
    expect(refusalOf(big).reason).toBe(RefusalReason.superblockSlotCorrupt);
  });

  /** Replaces a slot with a record that verifies but carries `state` / `sequence` / `parent`. */
  function forge(disk: SimDisk, name: string, sequence: number, parent: bigint, state = vsrState()): void {
    if (disk.exists(name)) disk.truncateAtRest(name, 0);
    disk.write(name, 0, encodeSuperblockRecord(kernels, sequence, parent, state).bytes);
  }

  it('refuses an intact record with an unknown version', () => {
    const disk = written(1);
    const bytes = disk.readAll(SLOT_A);
    new DataView(bytes.buffer).setUint16(4, 2, true);
    new DataView(bytes.buffer).setBigUint64(94, kernels.xxh3_64(bytes.subarray(0, 94)), true);
    disk.write(SLOT_A, 0, bytes);
    expect(refusalOf(disk).reason).toBe(RefusalReason.superblockVersion);
  });

  it('refuses log_view > view and checkpoint_op > commit_max even with a valid checksum', () => {
    const disk = written(1);
    forge(disk, SLOT_A, 1, 0n, vsrState({ view: 2, logView: 3 }));
    expect(refusalOf(disk)).toMatchObject({ reason: RefusalReason.superblockInvalidState });
    expect(refusalOf(disk).message).toMatch(/log_view 3 > view 2/);
    forge(disk, SLOT_A, 1, 0n, vsrState({ commitMax: 4, checkpointOp: 5 }));
    expect(refusalOf(disk).message).toMatch(/checkpoint_op 5 > commit_max 4/);
  });

  it('refuses a fork: the newer record does not chain to the older', () => {
    const disk = written(2);
    forge(disk, SLOT_B, 2, 0x1234n, vsrState({ view: 2, logView: 2 }));
    expect(refusalOf(disk).reason).toBe(RefusalReason.superblockFork);
  });

  it('refuses non-adjacent sequences and a record in the wrong slot', () => {
    const disk = written(2);
    forge(disk, SLOT_A, 5, 0n);
    expect(refusalOf(disk).reason).toBe(RefusalReason.superblockSequence);
    const swapped = written(2);
    forge(swapped, SLOT_A, 2, 0n);
    expect(refusalOf(swapped).reason).toBe(RefusalReason.superblockSequence);
  });

  it('refuses a newer record that regresses the view', () => {
    const disk = written(1);
    const a = decodeSuperblockRecord(kernels, disk.readAll(SLOT_A));
    if (a.status !== 'valid') throw new Error('valid');
    forge(disk, SLOT_B, 2, a.record.checksum, vsrState({ view: 0, logView: 0 }));
    expect(refusalOf(disk).message).toMatch(/view regressed/);
  });

  it('does not refuse on a transient read fault', () => {
    const disk = written(3);
    disk.setFaults({ readBitFlipProbability: 0.25 });
    for (let attempt = 0; attempt < 10; attempt++) expect(Superblock.open(disk, kernels).sequence).toBe(3);
  });

  it('asserts the VSR invariants on write', () => {
    const { superblock } = fresh();
    superblock.write(vsrState({ view: 5, logView: 5, commitMax: 10, checkpointOp: 4, checkpointChecksum: 9n }));
    expect(() => superblock.write(vsrState({ view: 4, logView: 4, commitMax: 10, checkpointOp: 4, checkpointChecksum: 9n }))).toThrow(AssertionError);
    expect(() => superblock.write(vsrState({ view: 5, logView: 5, commitMax: 9, checkpointOp: 4, checkpointChecksum: 9n }))).toThrow(/commit_max regressed/);
    expect(() => superblock.write(vsrState({ view: 5, logView: 6, commitMax: 10, checkpointOp: 4, checkpointChecksum: 9n }))).toThrow(/log_view 6 > view 5/);
    expect(() => superblock.write(vsrState({ view: 5, logView: 5, commitMax: 10, checkpointOp: 3, checkpointChecksum: 9n }))).toThrow(/checkpoint_op regressed/);
    expect(() => superblock.write(vsrState({ view: 5, logView: 5, commitMax: 10, checkpointOp: 4, checkpointChecksum: 8n }))).toThrow(/checksum changed/);
    expect(() => superblock.write(vsrState({ view: 5, logView: 5, commitMax: 10, checkpointOp: 4, checkpointChecksum: 9n, replica: 1 }))).toThrow(AssertionError);
    // A state transfer may move the checkpoint anywhere its new commit_max allows.
    superblock.write(vsrState({ view: 5, logView: 5, commitMax: 10, checkpointOp: 2, checkpointChecksum: 7n }), { stateTransfer: true });
    expect(superblock.sequence).toBe(2);
  });

  it('a failed write changes nothing and is retried into the same slot with the same sequence', () => {
    const { disk, superblock } = fresh();
    superblock.write(vsrState({ view: 1 }));
    disk.failNextFsync(`${SLOT_B}.tmp`);
    expect(() => superblock.write(vsrState({ view: 2, logView: 2 }))).toThrow(DurableWriteError);
    expect(superblock.sequence).toBe(1);
    superblock.write(vsrState({ view: 2, logView: 2 }));
    expect(superblock.sequence).toBe(2);
  });

  it('after a failure past the rename, any crash leaves a pair of records that verifies', () => {
    for (let seed = 0; seed < 30; seed++) {
      const disk = new SimDisk(new Prng(seed), { lostDirectoryOperationProbability: 0.5 });
      const superblock = Superblock.open(disk, kernels);
      for (let view = 1; view <= 3; view++) superblock.write(vsrState({ view, logView: view }));
      disk.failNextFsync('.');
      expect(() => superblock.write(vsrState({ view: 4, logView: 4 }))).toThrow(DurableWriteError);
      expect(superblock.sequence).toBe(3);
      if (seed % 2 === 0) superblock.write(vsrState({ view: 5, logView: 5 })); // the retry
      disk.crash();
      const reopened = Superblock.open(disk, kernels);
      expect([3, 4]).toContain(reopened.sequence);
      expect([3, 4, 5]).toContain(reopened.state?.view);
      if (seed % 2 === 0) expect(reopened.state?.view).toBe(5);
    }
  });
});

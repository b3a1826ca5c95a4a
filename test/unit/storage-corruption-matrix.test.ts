/**
 * The corruption matrix: every data file region x every storage fault, with the outcome boot
 * must reach, on the simulated disk AND on real files through node:fs.
 *
 * The data directory is built by the real storage code as a replica would: superblock write
 * (slot a, sequence 1), prepares 1..4, checkpoint at op 4 (snapshot, superblock slot b sequence 2,
 * drain), prepares 5..9, superblock write (slot a, sequence 3). So the WAL holds ops 4..9 (4 is
 * the kept checkpoint entry), the snapshot is at op 4, and both superblock slots exist.
 *
 * Outcomes, and why:
 * - damage followed by valid WAL entries is interior corruption: refuse (acknowledged prepares
 *   were hit; truncating would delete them);
 * - damage in the last WAL entry, or a file cut short, is indistinguishable from a torn final
 *   append: truncate to the valid prefix (the superblock's commit_max above what the WAL proves
 *   is logged; the cluster re-replicates the lost suffix);
 * - any superblock slot that does not verify, or is missing while the other proves it existed:
 *   refuse (it may have held the newest view); the only fallback is slot b never made durable
 *   after the very first write;
 * - any snapshot damage: refuse (no trailer, or trailer mismatch).
 * Misdirected writes are produced by SimDisk's own fault on the simulated disk, and reproduced
 * byte for byte on real files.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER_SIZE } from '../../src/constants.js';
import type { Kernels } from '../../src/kernels/kernel.js';
import type { Disk } from '../../src/storage/disk.js';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { recover, type Recovered, type RecoveryConfig } from '../../src/storage/recovery.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../../src/storage/superblock.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import { Prng } from '../../src/stdx/prng.js';
import { referenceSnapshot, REFERENCE_SNAPSHOT_SMALL } from '../../src/testing/snapshot-fixtures.js';
import { chain, CLUSTER, kernelVariants, recordingLogger, tempDirectory, tsKernels, vsrState } from './storage-fixtures.js';

/** Snapshot bytes are identical under every kernel implementation; build them once. */
const fixtureKernels: Kernels = tsKernels();
const CONFIG: RecoveryConfig = { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 };
const [SLOT_A, SLOT_B] = SUPERBLOCK_FILES;
/** A realistic payload (kilobytes), so faults can land inside it without touching the trailer. */
const SNAPSHOT_PAYLOAD = fixtureKernels.snapshotEncode({ ...referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 4 }), sequenceNumber: 4 });

type DiskKind = 'sim' | 'fs';
type Fault = 'bit_flip' | 'truncation' | 'zeroed_block' | 'misdirected_write' | 'missing';

/** Hooks where SimDisk arms a misdirected write before the real storage writes. */
interface BuildHooks {
  beforeSnapshotWrite?(disk: SimDisk): void;
  beforeSuperblockWrite2?(disk: SimDisk): void;
  beforeFinalAppend?(disk: SimDisk, walEnd: number, entryOffsets: readonly number[]): void;
  beforeSuperblockWrite3?(disk: SimDisk): void;
}

interface Layout {
  /** Start offsets of WAL ops 4..9, then the end (where op 9 was aimed, if misdirected). */
  readonly walOffsets: readonly number[];
  readonly finalFrame: Uint8Array;
  readonly snapshotPayloadSize: number;
}

function build(disk: Disk, kernels: Kernels, hooks: BuildHooks = {}): Layout {
  const sim = disk instanceof SimDisk ? disk : null;
  const booted = recover(disk, kernels, CONFIG);
  booted.superblock.write(vsrState({ view: 1, logView: 1 }));
  const prepares = chain(1, 9);
  for (const entry of prepares.slice(0, 4)) booted.wal.append(entry.frame);
  const payload = SNAPSHOT_PAYLOAD;
  if (sim !== null) hooks.beforeSnapshotWrite?.(sim);
  const checksum = booted.snapshotFile.write(payload);
  if (sim !== null) hooks.beforeSuperblockWrite2?.(sim);
  booted.superblock.write(vsrState({ view: 1, logView: 1, commitMax: 4, checkpointOp: 4, checkpointChecksum: checksum }));
  booted.wal.drain(4);
  for (const entry of prepares.slice(4, 8)) booted.wal.append(entry.frame);
  const entryOffsets = booted.wal.entries().map((entry) => entry.offset);
  const walEnd = disk.size(WAL_FILE);
  if (sim !== null) hooks.beforeFinalAppend?.(sim, walEnd, entryOffsets);
  booted.wal.append(prepares[8]!.frame);
  if (sim !== null) hooks.beforeSuperblockWrite3?.(sim);
  booted.superblock.write(vsrState({ view: 1, logView: 1, commitMax: 9, checkpointOp: 4, checkpointChecksum: checksum }));
  const finalEnd = walEnd + prepares[8]!.frame.byteLength;
  return { walOffsets: [...entryOffsets, walEnd, finalEnd], finalFrame: prepares[8]!.frame, snapshotPayloadSize: payload.byteLength };
}

// -------------------------------------------------------------------------------------------------
// Faults at rest through the Disk interface (used on real files; SimDisk uses its own).

function flipAt(disk: Disk, name: string, offset: number): void {
  if (disk instanceof SimDisk) return disk.corrupt(name, offset, 4);
  const byte = new Uint8Array(1);
  disk.read(name, offset, byte);
  byte[0] = byte[0]! ^ 0x10;
  disk.write(name, offset, byte);
  disk.fsync(name);
}

function cut(disk: Disk, name: string, sizeBytes: number): void {
  if (disk instanceof SimDisk) return disk.truncateAtRest(name, sizeBytes);
  disk.truncate(name, sizeBytes);
  disk.fsync(name);
}

function zero(disk: Disk, name: string, offset: number, length: number): void {
  if (disk instanceof SimDisk) return disk.zeroRange(name, offset, length);
  disk.write(name, offset, new Uint8Array(length));
  disk.fsync(name);
}

function replace(disk: Disk, name: string, bytes: Uint8Array): void {
  disk.truncate(name, 0);
  disk.write(name, 0, bytes);
  disk.fsync(name);
}

function removeFile(disk: Disk, name: string): void {
  disk.remove(name);
  disk.fsyncDirectory();
}

// -------------------------------------------------------------------------------------------------

type Expected =
  | { readonly refuse: string; readonly file: string }
  | { readonly headOp: number; readonly tornTail: boolean; readonly commitWarning?: boolean };

interface Cell {
  readonly region: string;
  readonly fault: Fault;
  readonly expected: Expected;
  /** Sim: arm a misdirection during the build. */
  readonly hooks?: BuildHooks;
  /** Applied after the build (on fs for misdirected writes: the same bytes SimDisk produced). */
  readonly apply?: (disk: Disk, layout: Layout) => void;
}

const interior = { refuse: RefusalReason.walInteriorCorruption, file: WAL_FILE } as const;
const tornTo = (headOp: number): Expected => ({ headOp, tornTail: true, commitWarning: true });
const slotCorrupt = (file: string): Expected => ({ refuse: RefusalReason.superblockSlotCorrupt, file });
const snapshotMismatch = { refuse: RefusalReason.snapshotChecksum, file: SNAPSHOT_FILE } as const;
const snapshotNoTrailer = { refuse: RefusalReason.snapshotNoTrailer, file: SNAPSHOT_FILE } as const;

/** The final append (op 9) landed at `offset` instead of the end of the file. */
function misdirectFinalAppend(target: (layout: Layout) => number, simTarget: (walEnd: number, offsets: readonly number[]) => number): Pick<Cell, 'hooks' | 'apply'> {
  return {
    hooks: { beforeFinalAppend: (disk, walEnd, offsets) => disk.misdirectNextWrite(WAL_FILE, simTarget(walEnd, offsets)) },
    apply: (disk, layout) => {
      if (disk instanceof SimDisk) return;
      const intendedOffset = layout.walOffsets[5]!;
      disk.truncate(WAL_FILE, intendedOffset);
      disk.write(WAL_FILE, target(layout), layout.finalFrame);
      disk.fsync(WAL_FILE);
    },
  };
}

/** A superblock slot's record landed 8 bytes into its temp file. */
function misdirectSlot(name: string, hook: 'beforeSuperblockWrite2' | 'beforeSuperblockWrite3'): Pick<Cell, 'hooks' | 'apply'> {
  return {
    hooks: { [hook]: (disk: SimDisk) => disk.misdirectNextWrite(`${name}.tmp`, 8) },
    apply: (disk) => {
      if (disk instanceof SimDisk) return;
      const record = disk.readAll(name);
      const shifted = new Uint8Array(8 + record.byteLength);
      shifted.set(record, 8);
      replace(disk, name, shifted);
    },
  };
}

const walEntry = (layout: Layout, index: number): number => layout.walOffsets[index]!;

const CELLS: Cell[] = [
  // WAL head: op 4, the checkpoint entry.
  { region: 'WAL head', fault: 'bit_flip', expected: interior, apply: (d, l) => flipAt(d, WAL_FILE, walEntry(l, 0) + HEADER_SIZE + 3) },
  { region: 'WAL head', fault: 'truncation', expected: { headOp: 4, tornTail: true, commitWarning: true }, apply: (d, l) => cut(d, WAL_FILE, walEntry(l, 0) + 100) },
  { region: 'WAL head', fault: 'zeroed_block', expected: interior, apply: (d, l) => zero(d, WAL_FILE, walEntry(l, 0), 64) },
  {
    region: 'WAL head',
    fault: 'misdirected_write',
    expected: interior,
    ...misdirectFinalAppend((l) => walEntry(l, 0), (_end, offsets) => offsets[0]!),
  },
  // WAL middle: op 6.
  { region: 'WAL middle', fault: 'bit_flip', expected: interior, apply: (d, l) => flipAt(d, WAL_FILE, walEntry(l, 2) + 180) },
  { region: 'WAL middle', fault: 'truncation', expected: tornTo(5), apply: (d, l) => cut(d, WAL_FILE, walEntry(l, 2) + HEADER_SIZE + 5) },
  { region: 'WAL middle', fault: 'zeroed_block', expected: interior, apply: (d, l) => zero(d, WAL_FILE, walEntry(l, 2) + 128, 128) },
  {
    region: 'WAL middle',
    fault: 'misdirected_write',
    expected: interior,
    ...misdirectFinalAppend((l) => walEntry(l, 2), (_end, offsets) => offsets[2]!),
  },
  // WAL tail: op 9, the last acknowledged append.
  { region: 'WAL tail', fault: 'bit_flip', expected: tornTo(8), apply: (d, l) => flipAt(d, WAL_FILE, walEntry(l, 5) + HEADER_SIZE + 1) },
  { region: 'WAL tail', fault: 'truncation', expected: tornTo(8), apply: (d, l) => cut(d, WAL_FILE, walEntry(l, 6) - 1) },
  { region: 'WAL tail', fault: 'zeroed_block', expected: tornTo(8), apply: (d, l) => zero(d, WAL_FILE, walEntry(l, 5) + 16, 32) },
  {
    region: 'WAL tail',
    fault: 'misdirected_write',
    // The append landed 512 bytes past the end: a hole of zeros, then a valid entry.
    expected: interior,
    ...misdirectFinalAppend((l) => walEntry(l, 5) + 512, (end) => end + 512),
  },
  // Superblock slot a: sequence 3, the newest record.
  { region: 'superblock slot a', fault: 'bit_flip', expected: slotCorrupt(SLOT_A), apply: (d) => flipAt(d, SLOT_A, 60) },
  { region: 'superblock slot a', fault: 'truncation', expected: slotCorrupt(SLOT_A), apply: (d) => cut(d, SLOT_A, 50) },
  { region: 'superblock slot a', fault: 'zeroed_block', expected: slotCorrupt(SLOT_A), apply: (d) => zero(d, SLOT_A, 30, 30) },
  { region: 'superblock slot a', fault: 'misdirected_write', expected: slotCorrupt(SLOT_A), ...misdirectSlot(SLOT_A, 'beforeSuperblockWrite3') },
  { region: 'superblock slot a', fault: 'missing', expected: { refuse: RefusalReason.superblockSlotMissing, file: SLOT_A }, apply: (d) => removeFile(d, SLOT_A) },
  // Superblock slot b: sequence 2, the older record (it might have been the newer one).
  { region: 'superblock slot b', fault: 'bit_flip', expected: slotCorrupt(SLOT_B), apply: (d) => flipAt(d, SLOT_B, 90) },
  { region: 'superblock slot b', fault: 'truncation', expected: slotCorrupt(SLOT_B), apply: (d) => cut(d, SLOT_B, 101) },
  { region: 'superblock slot b', fault: 'zeroed_block', expected: slotCorrupt(SLOT_B), apply: (d) => zero(d, SLOT_B, 0, 8) },
  { region: 'superblock slot b', fault: 'misdirected_write', expected: slotCorrupt(SLOT_B), ...misdirectSlot(SLOT_B, 'beforeSuperblockWrite2') },
  { region: 'superblock slot b', fault: 'missing', expected: { refuse: RefusalReason.superblockSlotMissing, file: SLOT_B }, apply: (d) => removeFile(d, SLOT_B) },
  // Snapshot payload.
  { region: 'snapshot payload', fault: 'bit_flip', expected: snapshotMismatch, apply: (d) => flipAt(d, SNAPSHOT_FILE, 5) },
  { region: 'snapshot payload', fault: 'truncation', expected: snapshotNoTrailer, apply: (d, l) => cut(d, SNAPSHOT_FILE, Math.floor(l.snapshotPayloadSize / 2)) },
  { region: 'snapshot payload', fault: 'zeroed_block', expected: snapshotMismatch, apply: (d) => zero(d, SNAPSHOT_FILE, 2, 16) },
  {
    region: 'snapshot payload',
    fault: 'misdirected_write',
    // The payload landed 16 bytes late; the trailer, written where it belongs, now seals zeros
    // and a shifted payload.
    expected: snapshotMismatch,
    hooks: { beforeSnapshotWrite: (disk) => disk.misdirectNextWrite(`${SNAPSHOT_FILE}.tmp`, 16) },
    apply: (disk, layout) => {
      if (disk instanceof SimDisk) return;
      const file = disk.readAll(SNAPSHOT_FILE);
      const payloadSize = layout.snapshotPayloadSize;
      const misplaced = new Uint8Array(payloadSize + 20);
      misplaced.set(file.subarray(0, payloadSize), 16);
      misplaced.set(file.subarray(payloadSize), payloadSize);
      replace(disk, SNAPSHOT_FILE, misplaced);
    },
  },
  // Snapshot trailer.
  { region: 'snapshot trailer', fault: 'bit_flip', expected: snapshotMismatch, apply: (d, l) => flipAt(d, SNAPSHOT_FILE, l.snapshotPayloadSize + 6) },
  { region: 'snapshot trailer', fault: 'truncation', expected: snapshotNoTrailer, apply: (d, l) => cut(d, SNAPSHOT_FILE, l.snapshotPayloadSize + 10) },
  { region: 'snapshot trailer', fault: 'zeroed_block', expected: snapshotNoTrailer, apply: (d, l) => zero(d, SNAPSHOT_FILE, l.snapshotPayloadSize, 20) },
  {
    region: 'snapshot trailer',
    fault: 'misdirected_write',
    // The trailer landed over the start of the payload; the file ends with payload bytes.
    expected: snapshotNoTrailer,
    hooks: { beforeSnapshotWrite: (disk) => disk.misdirectNextWrite(`${SNAPSHOT_FILE}.tmp`, 0, 1) },
    apply: (disk, layout) => {
      if (disk instanceof SimDisk) return;
      const file = disk.readAll(SNAPSHOT_FILE);
      const payloadSize = layout.snapshotPayloadSize;
      const misplaced = file.slice(0, payloadSize);
      misplaced.set(file.subarray(payloadSize), 0);
      replace(disk, SNAPSHOT_FILE, misplaced);
    },
  },
];

// -------------------------------------------------------------------------------------------------

const cleanups: (() => void)[] = [];
afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function makeDisk(kind: DiskKind): Disk {
  if (kind === 'sim') return new SimDisk(new Prng(7));
  const directory = tempDirectory('vrmeta-matrix-');
  const disk = new FsDisk(directory.path);
  cleanups.push(() => {
    disk.close();
    directory.cleanup();
  });
  return disk;
}

function restart(disk: Disk): void {
  if (disk instanceof SimDisk) disk.crash();
}

function outcome(disk: Disk, kernels: Kernels): { recovered: Recovered<MetadataMachineSnapshot>; events: string[] } | { refusal: StorageRefusal } {
  const logger = recordingLogger();
  try {
    const recovered = recover(disk, kernels, { ...CONFIG, logger });
    return { recovered, events: logger.records.map((record) => record.event) };
  } catch (error) {
    if (error instanceof StorageRefusal) return { refusal: error };
    throw error;
  }
}

/**
 * The simulated disk under every kernel implementation; real files (slow: every step fsyncs)
 * under the one production prefers (WASM when it loads).
 */
const VARIANTS = kernelVariants();
const COMBINATIONS = [
  ...VARIANTS.map(({ label, kernels }) => ({ kind: 'sim' as const, label, kernels })),
  { kind: 'fs' as const, ...VARIANTS[VARIANTS.length - 1]! },
];

describe.each(COMBINATIONS)('corruption matrix ($kind disk, $label kernels)', ({ kind, kernels }) => {
  it('the healthy directory recovers ops 5..9 above the checkpoint at 4', () => {
    const disk = makeDisk(kind);
    build(disk, kernels);
    restart(disk);
    const result = outcome(disk, kernels);
    if ('refusal' in result) throw result.refusal;
    expect(result.recovered.prepares.map((entry) => entry.op)).toEqual([5, 6, 7, 8, 9]);
    expect(result.recovered.checkpointOp).toBe(4);
    expect(result.recovered.vsrState?.commitMax).toBe(9);
    expect(result.recovered.superblock.sequence).toBe(3);
  });

  it.each(CELLS.map((cell) => [cell.region, cell.fault, cell] as const))('%s x %s', (_region, _fault, cell) => {
    const disk = makeDisk(kind);
    const layout = build(disk, kernels, kind === 'sim' ? (cell.hooks ?? {}) : {});
    cell.apply?.(disk, layout);
    restart(disk);
    const result = outcome(disk, kernels);
    const expected = cell.expected;
    if ('refuse' in expected) {
      if (!('refusal' in result)) throw new Error(`expected refusal ${expected.refuse}, recovered head ${result.recovered.headOp}`);
      expect(result.refusal.reason).toBe(expected.refuse);
      expect(result.refusal.file).toBe(expected.file);
      expect(result.refusal.message).toContain('wipe the data directory and restart the replica with --rejoin; it rejoins by state transfer');
    } else {
      if ('refusal' in result) throw result.refusal;
      expect(result.recovered.headOp).toBe(expected.headOp);
      expect(result.recovered.wal.openReport.tornTail !== null).toBe(expected.tornTail);
      if (expected.commitWarning === true) expect(result.events).toContain('recovery_commit_behind_superblock');
      // The truncation is durable: the next boot sees a clean WAL.
      restart(disk);
      const again = outcome(disk, kernels);
      if ('refusal' in again) throw again.refusal;
      expect(again.recovered.headOp).toBe(expected.headOp);
      expect(again.recovered.wal.openReport.tornTail).toBeNull();
    }
  });

  it('falls back to slot a when slot b was never made durable after the first write', () => {
    const disk = makeDisk(kind);
    const booted = recover(disk, kernels, CONFIG);
    booted.superblock.write(vsrState({ view: 3, logView: 3 }));
    restart(disk);
    const result = outcome(disk, kernels);
    if ('refusal' in result) throw result.refusal;
    expect(disk.exists(SLOT_B)).toBe(false);
    expect(result.recovered.vsrState?.view).toBe(3);
    expect(result.recovered.superblock.sequence).toBe(1);
  });
});

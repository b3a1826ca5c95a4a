/**
 * Boot recovery: the order and checks of iggy-metadata-plane.md §4.6 / §4.9 as scenarios. Each
 * refusal names the file, the reason and the remedy; each accepted state hands the replica the
 * snapshot, the durable VSR state, the prepares to replay and the provable commit.
 */
import { describe, expect, it } from 'vitest';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { recover, type RecoveryConfig } from '../../src/storage/recovery.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import { Prng } from '../../src/stdx/prng.js';
import type { Kernels } from '../../src/kernels/kernel.js';
import { checkpointModelOf } from '../../src/storage/metadata-checkpoint-codec.js';
import { chain, CLUSTER, kernelVariants, prepare, recordingLogger, snapshotModel, snapshotPayload, vsrState, type Prepare } from './storage-fixtures.js';

const SLOTS = 16;
const CONFIG: RecoveryConfig = { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: SLOTS };

/**
 * A replica that prepared ops 1..`head`, committed through `commit`, and checkpointed at
 * `checkpoint` (snapshot, superblock pairing, drain) when `checkpoint` > 0.
 */
function populate(kernels: Kernels, options: { head: number; checkpoint: number; commit?: number }): { disk: SimDisk; prepares: Prepare[] } {
  const disk = new SimDisk(new Prng(1));
  const booted = recover(disk, kernels, CONFIG);
  const prepares = chain(1, options.head);
  const commit = options.commit ?? options.head;
  booted.superblock.write(vsrState({ view: 2, logView: 2 }));
  for (const entry of prepares) booted.wal.append(entry.frame);
  booted.superblock.write(vsrState({ view: 2, logView: 2, commitMax: commit }));
  if (options.checkpoint > 0) {
    const checksum = booted.snapshotFile.write(snapshotPayload(kernels, options.checkpoint));
    booted.superblock.write(vsrState({ view: 2, logView: 2, commitMax: commit, checkpointOp: options.checkpoint, checkpointChecksum: checksum }));
    booted.wal.drain(options.checkpoint);
  }
  disk.crash();
  return { disk, prepares };
}

function refusalOf(run: () => unknown): StorageRefusal {
  try {
    run();
  } catch (error) {
    if (error instanceof StorageRefusal) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe.each(kernelVariants())('recovery ($label kernels)', ({ kernels }) => {
  it('a fresh directory boots empty and creates the WAL', () => {
    const disk = new SimDisk(new Prng(1));
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered).toMatchObject({ snapshot: null, vsrState: null, checkpointOp: 0, prepares: [], commitProvable: 0, headOp: 0 });
    disk.crash();
    expect(disk.exists(WAL_FILE)).toBe(true);
  });

  it('returns the snapshot, the superblock state and the prepares above the snapshot op', () => {
    const { disk, prepares } = populate(kernels, { head: 8, checkpoint: 4 });
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.snapshot?.sequenceNumber).toBe(4);
    expect(recovered.snapshot?.decoded).toEqual(checkpointModelOf(snapshotModel(4)));
    expect(recovered.snapshot?.checksum).toBe(kernels.xxh3_64(recovered.snapshot!.payload));
    expect(recovered.vsrState).toMatchObject({ view: 2, commitMax: 8, checkpointOp: 4, checkpointChecksum: recovered.snapshot!.checksum });
    expect(recovered.checkpointOp).toBe(4);
    expect(recovered.prepares.map((entry) => entry.op)).toEqual([5, 6, 7, 8]);
    expect(recovered.prepares.map((entry) => entry.frame)).toEqual(prepares.slice(4).map((entry) => entry.frame));
    // wal-image stamps commit = op - 1: the last prepare proves op 7 committed, not op 8.
    expect(recovered.commitProvable).toBe(7);
    expect(recovered.headOp).toBe(8);
    expect(recovered.walTruncatedFromOp).toBeNull();
  });

  it('a single-replica cluster commits every durable prepare', () => {
    const disk = new SimDisk(new Prng(1));
    const solo = { ...CONFIG, replicaCount: 1 };
    const booted = recover(disk, kernels, solo);
    booted.superblock.write(vsrState({ replicaCount: 1 }));
    for (const entry of chain(1, 5)) booted.wal.append(entry.frame);
    expect(recover(disk, kernels, solo).commitProvable).toBe(5);
  });

  it('the provable commit is floored at the snapshot op', () => {
    const { disk } = populate(kernels, { head: 4, checkpoint: 4 });
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.prepares).toEqual([]);
    expect(recovered.commitProvable).toBe(4);
    expect(recovered.headOp).toBe(4);
  });

  it('warns when the superblock commit_max is above what the WAL proves', () => {
    const { disk } = populate(kernels, { head: 6, checkpoint: 0, commit: 6 });
    const logger = recordingLogger();
    const recovered = recover(disk, kernels, { ...CONFIG, logger });
    expect(recovered.commitProvable).toBe(5);
    expect(logger.records.find((record) => record.event === 'recovery_commit_behind_superblock')?.fields).toMatchObject({ commitMax: 6, commitProvable: 5 });
  });

  it.each([
    ['cluster', { cluster: 99n }],
    ['replica', { replica: 1 }],
    ['replica count', { replicaCount: 5 }],
  ])('refuses a data directory of another %s', (_name, override) => {
    const { disk } = populate(kernels, { head: 2, checkpoint: 0 });
    const refusal = refusalOf(() => recover(disk, kernels, { ...CONFIG, ...override }));
    expect(refusal.reason).toBe(RefusalReason.identityMismatch);
    // The message names the full path (disk location + file), the reason and the remedy.
    expect(refusal.directory).toBe(disk.location);
    expect(refusal.message).toMatch(/^refusing to boot: sim\/superblock\.a: identity_mismatch: .*; remedy: wipe the data directory and restart the replica with --rejoin; it rejoins by state transfer$/);
  });

  it('refuses when the superblock names a checkpoint newer than the snapshot (lost snapshot)', () => {
    const { disk } = populate(kernels, { head: 6, checkpoint: 4 });
    disk.remove(SNAPSHOT_FILE);
    disk.fsyncDirectory();
    const refusal = refusalOf(() => recover(disk, kernels, CONFIG));
    expect(refusal).toMatchObject({ reason: RefusalReason.checkpointAheadOfSnapshot, file: SNAPSHOT_FILE });
  });

  it('refuses when the snapshot at the checkpoint op is not the one the superblock names', () => {
    const { disk } = populate(kernels, { head: 6, checkpoint: 4 });
    const other = kernels.snapshotEncode({ ...snapshotModel(4), writerRelease: 2 });
    recover(disk, kernels, CONFIG).snapshotFile.write(other);
    expect(refusalOf(() => recover(disk, kernels, CONFIG)).reason).toBe(RefusalReason.checkpointChecksumMismatch);
  });

  it('accepts a snapshot newer than the superblock checkpoint (crash before the superblock write)', () => {
    const { disk } = populate(kernels, { head: 8, checkpoint: 4 });
    const booted = recover(disk, kernels, CONFIG);
    booted.snapshotFile.write(snapshotPayload(kernels, 6));
    disk.crash();
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.checkpointOp).toBe(6);
    expect(recovered.vsrState?.checkpointOp).toBe(4);
    expect(recovered.prepares.map((entry) => entry.op)).toEqual([7, 8]);
  });

  it('keeps prepares above a gap: they may have been acknowledged', () => {
    const { disk, prepares } = populate(kernels, { head: 6, checkpoint: 4 });
    const booted = recover(disk, kernels, CONFIG);
    // Op 8 arrives (out of order, or by repair) before op 7; then the replica crashes. Op 8 was
    // durable, so the replica may have acknowledged it: dropping it would let the replica nack
    // an op it acknowledged in a later view change.
    booted.wal.append(prepare(8, 0x77n).frame);
    const logger = recordingLogger();
    const recovered = recover(disk, kernels, { ...CONFIG, logger });
    expect(recovered.prepares.map((entry) => entry.op)).toEqual([5, 6, 8]);
    expect(recovered.walTruncatedFromOp).toBeNull();
    expect(recovered.headOp).toBe(8);
    expect(logger.records.map((record) => record.event)).not.toContain('recovery_wal_truncated');
    expect(recover(disk, kernels, CONFIG).wal.get(8)).not.toBeNull();
    expect(prepares).toHaveLength(6);
  });

  it('stops at a broken hash chain and truncates from the op that does not chain', () => {
    const { disk, prepares } = populate(kernels, { head: 5, checkpoint: 4 });
    // Write the file by hand: op 6 from another history, placed so the boot scan does not see it
    // next to op 5 (the scan only chain-checks file neighbours).
    const foreign6 = prepare(6, 0x9999n, 4);
    const size = disk.size(WAL_FILE);
    disk.truncate(WAL_FILE, 0);
    disk.write(WAL_FILE, 0, foreign6.frame);
    disk.write(WAL_FILE, foreign6.frame.byteLength, prepares[3]!.frame);
    disk.write(WAL_FILE, foreign6.frame.byteLength + prepares[3]!.frame.byteLength, prepares[4]!.frame);
    disk.fsync(WAL_FILE);
    expect(disk.size(WAL_FILE)).toBe(size + foreign6.frame.byteLength);
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.prepares.map((entry) => entry.op)).toEqual([5]);
    expect(recovered.walTruncatedFromOp).toBe(6);
  });

  it('checks the first replayed prepare against the entry at the snapshot op', () => {
    const { disk, prepares } = populate(kernels, { head: 4, checkpoint: 4 });
    // The file holds [op 5 from another history, op 4]: file neighbours are not consecutive, so
    // only recovery's chain walk can notice that op 5 does not follow the checkpoint entry.
    const foreign5 = prepare(5, 0x5n, 2);
    disk.truncate(WAL_FILE, 0);
    disk.write(WAL_FILE, 0, foreign5.frame);
    disk.write(WAL_FILE, foreign5.frame.byteLength, prepares[3]!.frame);
    disk.fsync(WAL_FILE);
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.prepares).toEqual([]);
    expect(recovered.walTruncatedFromOp).toBe(5);
    expect(recovered.headOp).toBe(4);
    expect(recovered.wal.get(4)?.identity).toBe(prepares[3]!.identity);
  });

  it('refuses when the superblock exists but the WAL is gone', () => {
    const { disk } = populate(kernels, { head: 3, checkpoint: 0 });
    disk.remove(WAL_FILE);
    expect(refusalOf(() => recover(disk, kernels, CONFIG)).reason).toBe(RefusalReason.walMissing);
  });

  it('boots from a snapshot without a superblock (nothing to pair with)', () => {
    const disk = new SimDisk(new Prng(1));
    recover(disk, kernels, CONFIG).snapshotFile.write(snapshotPayload(kernels, 3));
    const recovered = recover(disk, kernels, CONFIG);
    expect(recovered.vsrState).toBeNull();
    expect(recovered.checkpointOp).toBe(3);
  });
});

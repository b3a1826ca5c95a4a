/**
 * Boot recovery (iggy-metadata-plane.md §4.6 and §4.9): opens the data directory's durable
 * structures in a fixed order and hands the replica everything it needs as data. Nothing here
 * applies operations; the replica restores its state machine from `snapshot` and replays
 * `prepares` up to `commitProvable`.
 *
 * Order, and why:
 * 1. `snapshot.bin`: trailer, format version, decode. Its op is the floor of everything else.
 * 2. The superblock (both slots verified), then its identity against the configuration: a data
 *    directory from another cluster or another replica index must never be adopted.
 * 3. Pairing: the superblock names the checkpoint its commit_max was durable against. A
 *    checkpoint newer than the snapshot means a snapshot write was lost or reverted (refuse); the
 *    same op with another checksum means the snapshot is not the one named (refuse); an older
 *    checkpoint is a crash between the snapshot rename and the superblock write (accept: the
 *    snapshot subsumes it).
 * 4. The WAL, opened with the snapshot op as its checkpoint, then walked from snapshot op + 1 in
 *    op order. Gaps are kept (a replica journals out of order); consecutive ops must chain, and a
 *    broken chain truncates from the later op, so the replica's journal and the file agree.
 * 5. The provable commit: the highest `commit` stamped in a replayed prepare (the primary's commit
 *    point when it sent that prepare), floored at the snapshot op. Ops above it are prepared but
 *    not provably committed: they stay in the WAL, unapplied, until the cluster re-commits them.
 *    A single-replica cluster is its own quorum: every durable prepare is committed.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { assert } from '../stdx/assert.js';
import type { Logger } from '../vsr/io.js';
import type { ReplicaBootState } from '../vsr/replica.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import type { CheckpointCodec } from './checkpoint-codec.js';
import type { Disk } from './disk.js';
import { METADATA_CHECKPOINT_CODEC } from './metadata-checkpoint-codec.js';
import { hex } from './prepare-frame.js';
import { RefusalReason, silentLogger, StorageRefusal } from './refusal.js';
import { SNAPSHOT_FILE, SnapshotFile } from './snapshot-file.js';
import { SUPERBLOCK_FILES, Superblock, type StoredVsrState } from './superblock.js';
import { Wal, WAL_FILE, type WalEntry } from './wal.js';

export interface RecoveryConfig {
  readonly cluster: bigint;
  readonly replica: number;
  readonly replicaCount: number;
  /** `journal_slots`. */
  readonly journalSlots: number;
  readonly logger?: Logger;
}

export interface RecoveredSnapshot<S> {
  /** The payload as stored; its XXH3-64 is `checksum`. */
  readonly payload: Uint8Array;
  /** The checkpoint checksum (checkpoint id). */
  readonly checksum: bigint;
  /** The checkpoint op: the last op whose effects the snapshot contains. */
  readonly sequenceNumber: number;
  readonly decoded: CheckpointModel<S>;
}

/** `S` is the snapshot type of the state machine the data directory checkpoints. */
export interface Recovered<S> {
  readonly snapshot: RecoveredSnapshot<S> | null;
  /** The newest durable VSR state, or null on a fresh replica. */
  readonly vsrState: StoredVsrState | null;
  /** The snapshot's op, or 0 when there is no snapshot. */
  readonly checkpointOp: number;
  /**
   * The WAL entry AT the checkpoint op when the WAL still holds it: the chain anchor the first
   * replayed prepare names as parent, and the commit-point header a DoViewChange may need.
   */
  readonly anchor: WalEntry | null;
  /** Prepares above the checkpoint op in op order (gaps possible; consecutive ops chained). */
  readonly prepares: readonly WalEntry[];
  /** Apply `prepares` up to and including this op; never below `checkpointOp`. */
  readonly commitProvable: number;
  /** The last op held (the last of `prepares`, or `checkpointOp`). */
  readonly headOp: number;
  /** When the WAL was cut at a broken chain: the first op removed. */
  readonly walTruncatedFromOp: number | null;
  /** The open handles the replica keeps writing through. */
  readonly wal: Wal;
  readonly superblock: Superblock;
  readonly snapshotFile: SnapshotFile<S>;
}

/** Recovers a metadata-plane data directory (its checkpoints are metadata snapshots). */
export function recover(disk: Disk, kernels: Kernels, config: RecoveryConfig): Recovered<MetadataMachineSnapshot> {
  return recoverWith(disk, kernels, METADATA_CHECKPOINT_CODEC, config);
}

/** Recovers a data directory whose checkpoints `codec` decodes. */
export function recoverWith<S>(disk: Disk, kernels: Kernels, codec: CheckpointCodec<S>, config: RecoveryConfig): Recovered<S> {
  try {
    return recoverIn(disk, kernels, codec, config);
  } catch (error) {
    // Name the full path: the operator reads this line and acts on it.
    if (error instanceof StorageRefusal && error.directory === null) throw error.inDirectory(disk.location);
    throw error;
  }
}

function recoverIn<S>(disk: Disk, kernels: Kernels, codec: CheckpointCodec<S>, config: RecoveryConfig): Recovered<S> {
  const logger = config.logger ?? silentLogger;

  // 1. Snapshot.
  const snapshotFile = new SnapshotFile(disk, kernels, codec);
  // A transfer interrupted by the crash restarts from its first chunk; its partial file is garbage.
  snapshotFile.transferDiscard();
  const read = snapshotFile.read();
  let snapshot: RecoveredSnapshot<S> | null = null;
  if (read !== null) {
    const result = codec.decode(read.payload);
    if (!result.ok) {
      throw new StorageRefusal(SNAPSHOT_FILE, RefusalReason.snapshotUndecodable, result.message, result.offset);
    }
    const decoded = result.model;
    snapshot = { payload: read.payload, checksum: read.checksum, sequenceNumber: decoded.op, decoded };
  }
  const checkpointOp = snapshot?.sequenceNumber ?? 0;

  // 2. Superblock and identity.
  const superblock = Superblock.open(disk, kernels, logger);
  const vsrState = superblock.state;
  if (vsrState !== null) {
    if (
      vsrState.cluster !== config.cluster ||
      vsrState.replica !== config.replica ||
      vsrState.replicaCount !== config.replicaCount
    ) {
      throw new StorageRefusal(
        SUPERBLOCK_FILES[0],
        RefusalReason.identityMismatch,
        `superblock is cluster ${hex(vsrState.cluster)} replica ${vsrState.replica} of ${vsrState.replicaCount}; ` +
          `configured cluster ${hex(config.cluster)} replica ${config.replica} of ${config.replicaCount}`,
      );
    }
    // 3. Pairing.
    if (vsrState.checkpointOp > checkpointOp) {
      throw new StorageRefusal(
        SNAPSHOT_FILE,
        RefusalReason.checkpointAheadOfSnapshot,
        `superblock checkpoint op ${vsrState.checkpointOp} is newer than the snapshot's op ${checkpointOp}` +
          (snapshot === null ? ' (no snapshot)' : ''),
      );
    }
    // With no snapshot both ops are 0 (genesis): there is no checksum to compare.
    if (snapshot !== null && vsrState.checkpointOp === checkpointOp && vsrState.checkpointChecksum !== snapshot.checksum) {
      throw new StorageRefusal(
        SNAPSHOT_FILE,
        RefusalReason.checkpointChecksumMismatch,
        `checkpoint op ${checkpointOp}: superblock names ${hex(vsrState.checkpointChecksum)}, snapshot is ${hex(snapshot.checksum)}`,
      );
    }
    if (!disk.exists(WAL_FILE)) {
      // The WAL is created before the first superblock write, and only ever replaced by rename.
      throw new StorageRefusal(WAL_FILE, RefusalReason.walMissing, 'the superblock exists, so the WAL was created and later lost');
    }
  }

  // 4. WAL replay.
  const wal = Wal.open(disk, kernels, {
    slotCount: config.journalSlots,
    checkpointOp,
    cluster: config.cluster,
    logger,
  });
  // The replica's journal may hold gaps (out-of-order prepares, repairs in progress), and every
  // entry it held was canonical for its log view, possibly acknowledged: recovery keeps them all.
  // Stopping at the first gap would drop acknowledged prepares, and the replica would later nack
  // them in a view change. Consecutive ops must still chain; a break there is damage, and the
  // suffix from the later op goes.
  const prepares: WalEntry[] = [];
  const anchor = wal.get(checkpointOp);
  let previous = anchor;
  let walTruncatedFromOp: number | null = null;
  const ops = [...wal.entries()].map((entry) => entry.op).filter((op) => op > checkpointOp).sort((a, b) => a - b);
  for (const op of ops) {
    const entry = wal.get(op);
    assert(entry !== null, 'an indexed op has an entry');
    if (previous !== null && previous.op === op - 1 && entry.parent !== previous.identity) {
      logger.log('warn', 'recovery_broken_chain', { op, parent: hex(entry.parent), previous: hex(previous.identity) });
      walTruncatedFromOp = op;
      break;
    }
    prepares.push(entry);
    assert(prepares.length <= config.journalSlots, 'replay is bounded by the journal slots');
    previous = entry;
  }
  if (walTruncatedFromOp !== null) {
    logger.log('warn', 'recovery_wal_truncated', { fromOp: walTruncatedFromOp, headOp: wal.headOp, reason: 'broken chain' });
    wal.truncateFrom(walTruncatedFromOp);
  }
  const headOp = prepares.length === 0 ? checkpointOp : prepares[prepares.length - 1]!.op;

  // 5. Provable commit.
  let commitProvable = checkpointOp;
  for (const entry of prepares) {
    const stamped = config.replicaCount === 1 ? entry.op : entry.commit;
    if (stamped > commitProvable) commitProvable = stamped;
  }
  commitProvable = Math.min(commitProvable, headOp);
  if (vsrState !== null && vsrState.commitMax > commitProvable) {
    logger.log('warn', 'recovery_commit_behind_superblock', {
      commitMax: vsrState.commitMax,
      commitProvable,
      note: 'ops above the provable commit re-commit through the cluster',
    });
  }
  logger.log('info', 'recovery_done', {
    checkpointOp,
    headOp,
    commitProvable,
    prepares: prepares.length,
    view: vsrState?.view ?? null,
  });
  return {
    snapshot,
    vsrState,
    checkpointOp,
    anchor,
    prepares,
    commitProvable,
    headOp,
    walTruncatedFromOp,
    wal,
    superblock,
    snapshotFile,
  };
}

/**
 * What the replica core boots from (`ReplicaBootState` of src/vsr/replica.ts): the prepares
 * start at the checkpoint op when the WAL holds its entry (the chain anchor), else at the op
 * after it.
 */
export function toReplicaBootState<S>(recovered: Recovered<S>): ReplicaBootState<S> {
  const frames = recovered.prepares.map((entry) => entry.frame);
  return {
    vsrState: recovered.vsrState,
    snapshot:
      recovered.snapshot === null
        ? null
        : { payload: recovered.snapshot.payload, checksum: recovered.snapshot.checksum, decoded: recovered.snapshot.decoded },
    prepares: recovered.anchor === null ? frames : [recovered.anchor.frame, ...frames],
    provableCommit: recovered.commitProvable,
  };
}

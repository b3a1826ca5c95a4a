/**
 * Refusals: the storage found bytes it cannot trust and will not guess. Boot stops with a message
 * an operator can act on; nothing is silently dropped or "repaired" locally, because the data
 * that would be discarded may be acknowledged prepares or the newest durable view.
 */
import type { Logger } from '../vsr/io.js';

/** Stable reason strings: they appear in logs, in `inspect --json`, and tests match them. */
export const RefusalReason = {
  /** The WAL has a damaged entry followed by valid ones: acknowledged prepares were damaged. */
  walInteriorCorruption: 'wal_interior_corruption',
  /** Two valid WAL entries above the checkpoint claim the same slot (op mod journal_slots). */
  walSlotCollision: 'wal_slot_collision',
  /** A WAL prepare names another cluster. */
  walClusterMismatch: 'wal_cluster_mismatch',
  /** `journal.wal` is gone although the superblock proves the replica ran. */
  walMissing: 'wal_missing',
  /** A verified WAL entry holds a value the storage cannot represent (op above 2^53). */
  walInvalidEntry: 'wal_invalid_entry',
  /** The WAL is larger than the structure is willing to load. */
  walTooLarge: 'wal_too_large',
  /** A superblock slot file exists but its record does not verify. */
  superblockSlotCorrupt: 'superblock_slot_corrupt',
  /** A superblock record has a version this build does not know. */
  superblockVersion: 'superblock_version',
  /** One slot file is missing although the other slot proves it had been written. */
  superblockSlotMissing: 'superblock_slot_missing',
  /** Both slots verify but the newer does not chain to the older (parent checksum). */
  superblockFork: 'superblock_fork',
  /** The two slots hold the same sequence, or sequences that are not adjacent. */
  superblockSequence: 'superblock_sequence',
  /** The VsrState breaks an invariant (log_view > view, checkpoint_op > commit_max, ...). */
  superblockInvalidState: 'superblock_invalid_state',
  /** The snapshot file has no trailer (vrmeta always writes one). */
  snapshotNoTrailer: 'snapshot_no_trailer',
  /** The snapshot trailer does not match the payload. */
  snapshotChecksum: 'snapshot_checksum_mismatch',
  /** The snapshot payload has a format version this build does not read. */
  snapshotVersion: 'snapshot_version',
  /** The snapshot file is larger than the structure is willing to load. */
  snapshotTooLarge: 'snapshot_too_large',
  /** The snapshot payload does not decode. */
  snapshotUndecodable: 'snapshot_undecodable',
  /** The superblock names a different cluster, replica or replica count than the config. */
  identityMismatch: 'identity_mismatch',
  /** The superblock's checkpoint is newer than the snapshot on disk (lost snapshot write). */
  checkpointAheadOfSnapshot: 'checkpoint_ahead_of_snapshot',
  /** Same checkpoint op, different checksum: the snapshot is not the one the superblock names. */
  checkpointChecksumMismatch: 'checkpoint_checksum_mismatch',
  /**
   * A partition segment's `.log` has a damaged batch with a verifying batch after it: flushed,
   * possibly acknowledged messages were damaged at rest.
   */
  segmentInteriorCorruption: 'segment_interior_corruption',
  /**
   * A sealed segment (one with a successor) has a damaged batch anywhere, its tail included: a
   * segment is flushed before its successor is created, so no crash can leave it torn.
   */
  segmentSealedCorrupt: 'segment_sealed_corrupt',
  /**
   * A batch verifies but does not belong where it is: another partition's id, an offset that does
   * not continue the segment's, or a timestamp before its predecessor's.
   */
  segmentBatchMisplaced: 'segment_batch_misplaced',
  /** Consecutive segments leave a hole in the offsets or overlap (next start != end + 1). */
  segmentDiscontinuity: 'segment_discontinuity',
  /** The partition directory holds more segments than the store is willing to track. */
  segmentCountTooLarge: 'segment_count_too_large',
  /** A consumer or group offset file does not verify (wrong size or checksum). */
  consumerOffsetCorrupt: 'consumer_offset_corrupt',
} as const;
export type RefusalReason = (typeof RefusalReason)[keyof typeof RefusalReason];

export const REFUSAL_REMEDY =
  'wipe the data directory and restart the replica with --rejoin; it rejoins by state transfer';

/**
 * Reasons whose operator action differs from the general one. A hole or overlap between segments
 * is not bit rot: files were removed, copied in or renamed by hand, and may still exist.
 */
const REFUSAL_REMEDIES: Partial<Record<RefusalReason, string>> = {
  [RefusalReason.segmentDiscontinuity]:
    'put back the segment files that were moved (the `.log` names are the start offsets); ' +
    `if they are lost, ${REFUSAL_REMEDY}`,
};

export function refusalRemedy(reason: RefusalReason): string {
  return REFUSAL_REMEDIES[reason] ?? REFUSAL_REMEDY;
}

export class StorageRefusal extends Error {
  override name = 'StorageRefusal';
  /** The file's name inside the data directory. */
  readonly file: string;
  readonly reason: RefusalReason;
  /** Byte offset of the damage, when one is known. */
  readonly offset: number | null;
  readonly detail: string;
  /** The data directory, once known (recovery adds it so the message names the full path). */
  readonly directory: string | null;
  readonly remedy: string;

  constructor(file: string, reason: RefusalReason, detail: string, offset: number | null = null, directory: string | null = null) {
    const at = offset === null ? '' : ` at offset ${offset}`;
    const path = directory === null ? file : `${directory}/${file}`;
    const remedy = refusalRemedy(reason);
    super(`refusing to boot: ${path}: ${reason}${at}: ${detail}; remedy: ${remedy}`);
    this.remedy = remedy;
    this.file = file;
    this.reason = reason;
    this.offset = offset;
    this.detail = detail;
    this.directory = directory;
  }

  /** The same refusal, naming the data directory. */
  inDirectory(directory: string): StorageRefusal {
    return new StorageRefusal(this.file, this.reason, this.detail, this.offset, directory);
  }
}

/** A logger that drops everything, for tools and tests that do not care. */
export const silentLogger: Logger = { log() {} };

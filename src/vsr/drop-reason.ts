import { Command } from '../constants.js';

/**
 * Why a replica handler stopped before acting on a message. Stable snake_case strings: the replica
 * counts each in `counters.drops` and logs it at debug level (`Replica.drop`) with the message's
 * command, sender, view and op, so the trace of a stuck seed names the guard that held. Grouped by
 * what the guard checks.
 */
export const DropReason = {
  // Addressing: the message is not for this replica as it is now.
  wrongCluster: 'wrong_cluster',
  /** A frame of another consensus group (the node's router sent it to the wrong core). */
  wrongGroup: 'wrong_group',
  replicaOutOfRange: 'replica_out_of_range',
  /** A frame this replica sent (a probe addressed to the primary of a newer view: us). */
  ownMessage: 'own_message',

  // Views: the message belongs to another view, or this replica is not in the role it needs.
  /** A newer view: the message is dropped and the view's primary is probed for its StartView. */
  newerView: 'newer_view',
  olderView: 'older_view',
  statusRecovering: 'status_recovering',
  statusNotNormal: 'status_not_normal',
  statusNotViewChange: 'status_not_view_change',
  /** The message is for a backup (a Prepare, a Commit) and we lead this view. */
  primaryOfView: 'primary_of_view',
  /** The message is for the primary (a PrepareOk, a DoViewChange, a request) and we do not lead. */
  notPrimary: 'not_primary',
  /** From a replica that does not lead the view it names. */
  senderNotPrimary: 'sender_not_primary',
  /** Our log is not this view's yet (a lagging follower; a primary-elect before its StartView). */
  logViewBehindView: 'log_view_behind_view',
  /** Our superblock does not hold the view yet: nothing that depends on it may happen. */
  viewNotDurable: 'view_not_durable',
  /** Pulling a checkpoint: the journal is about to be replaced, so live prepares are not taken. */
  stateTransferring: 'state_transferring',

  // Client requests (a primary's admission).
  commitBehind: 'commit_behind',
  headUnknown: 'head_unknown',
  registerBodyInvalid: 'register_body_invalid',
  clientInFlight: 'client_in_flight',
  sessionEpochAhead: 'session_epoch_ahead',
  requestChecksumMismatch: 'request_checksum_mismatch',
  requestQueueFull: 'request_queue_full',

  // Replication.
  /** Committed here, but not held durably, so it cannot be acknowledged. */
  prepareCommittedNotHeld: 'prepare_committed_not_held',
  /** The op is beyond what the WAL can hold before the next checkpoint. */
  journalFull: 'journal_full',
  /** Already journaled; its WAL write is in flight (acknowledged when it lands). */
  prepareWriteInFlight: 'prepare_write_in_flight',
  /** The view changed while the prepare's WAL write was in flight. */
  viewChangedDuringWrite: 'view_changed_during_write',
  prepareNotInPipeline: 'prepare_not_in_pipeline',
  prepareChecksumMismatch: 'prepare_checksum_mismatch',
  /** A heartbeat no newer than the last one: a replay proves nothing about the primary. */
  heartbeatStale: 'heartbeat_stale',

  // View change.
  suffixInvalid: 'suffix_invalid',
  /** The merged log is waiting for its bodies: later DoViewChanges change nothing. */
  viewMergePending: 'view_merge_pending',
  /** Our own DoViewChange waits for our view to be durable; we merge only with it. */
  ownDoViewChangeMissing: 'own_do_view_change_missing',
  /** Not enough DoViewChanges (or nacks) to decide the log yet. */
  mergeUndecided: 'merge_undecided',
  /** A recovering replica takes only a StartView that answers its probe or names a newer view. */
  startViewBeforeRestart: 'start_view_before_restart',
  /** Within one log view the log only grows: a StartView announcing less is stale. */
  startViewStale: 'start_view_stale',
  startViewSuffixEmpty: 'start_view_suffix_empty',

  // Repair.
  noRepairSession: 'no_repair_session',
  repairNonceMismatch: 'repair_nonce_mismatch',
  repairOpOutOfRange: 'repair_op_out_of_range',
  repairPrepareInvalid: 'repair_prepare_invalid',
  /** A served prepare that does not chain onto our applied history. */
  repairNotChained: 'repair_not_chained',
  /** A buffered prepare outside the committed run its RepairDone names (a late, stale one). */
  repairNotInServedRun: 'repair_not_in_served_run',
  /** A range-evicted answer that our commit point has since passed. */
  rangeEvictedStale: 'range_evicted_stale',

  // State transfer (receiving).
  noTransferSession: 'no_transfer_session',
  targetUnavailable: 'target_unavailable',
  manifestInvalid: 'manifest_invalid',
  manifestDisagrees: 'manifest_disagrees',
  chunkArtifactMismatch: 'chunk_artifact_mismatch',
  chunkOutsideWindow: 'chunk_outside_window',
  chunkDuplicate: 'chunk_duplicate',
  /** Its body does not hash to the manifest's sum for that chunk: re-requested from the server. */
  chunkDamaged: 'chunk_damaged',
  chunkSizeMismatch: 'chunk_size_mismatch',

  // State transfer (serving): a refusal is answered (a StateTransferTarget), then dropped.
  /** Recovering, or pulling a checkpoint ourselves: nothing to offer yet. */
  offerNotReady: 'offer_not_ready',
  /** Never checkpointed: repair covers the gap. */
  offerNoCheckpoint: 'offer_no_checkpoint',
  /** Our snapshot file does not verify: we vouch for its id and fetch it back from a peer. */
  offerSnapshotDamaged: 'offer_snapshot_damaged',
  /** A chunk request for a session we hold no offer for (expired, or we restarted). */
  chunkNoOffer: 'chunk_no_offer',
  /** A chunk request naming an artifact the offer's manifest does not list. */
  chunkArtifactUnknown: 'chunk_artifact_unknown',
  /** A chunk request at or past the artifact's end: never answered with an empty chunk. */
  chunkPastEnd: 'chunk_past_end',
  /** A chunk request while CHUNK_READS_PER_OFFER_MAX reads of its offer are queued (duplicates). */
  chunkReadsBusy: 'chunk_reads_busy',

  // Store ranges (a machine's stores between replicas: src/partition/backfill.ts).
  /** The state machine has no stores to serve or fetch. */
  storeRangeUnsupported: 'store_range_unsupported',
  /** A range request for bytes we do not hold: answered unavailable. */
  storeRangeUnavailable: 'store_range_unavailable',
  /** An answer for no fetch of ours (another nonce, store or offset: late, or a duplicate). */
  storeRangeStale: 'store_range_stale',
  /** An answer whose records do not verify or are not the ones asked for: asked elsewhere. */
  storeRangeInvalid: 'store_range_invalid',
  /** The peer does not hold the range: asked elsewhere. */
  storeRangeRefused: 'store_range_refused',
} as const;
export type DropReason = (typeof DropReason)[keyof typeof DropReason];

export const DROP_REASONS: readonly DropReason[] = Object.values(DropReason);

const COMMAND_NAMES = new Map<number, string>(
  Object.entries(Command).map(([name, code]) => [code, name]),
);

/** A command's name for a debug record (`prepareOk`), or `command_<code>` for an unknown one. */
export function commandName(command: number): string {
  return COMMAND_NAMES.get(command) ?? `command_${command}`;
}

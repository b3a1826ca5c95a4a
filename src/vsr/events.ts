/**
 * Replica events that operators and tests rely on. The replica logs each with its message and an
 * `event` field naming it, and hands it to the environment's sink typed, so a test asserts on
 * `state_transfer_installed`, never on the wording of a log line.
 */
export const REPLICA_EVENTS = {
  log_view_headers_restored: 'restored the log view headers the WAL lacks',
  caught_up_after_lost_disk: 'caught up with the cluster after an empty data directory',
  checkpoint_completed: 'checkpoint completed',
  checkpoint_divergence: 'checkpoint divergence: replicas disagree on the state at the same op',
  view_change_started: 'view change',
  primary_disconnected: 'connection to the primary closed: waiting a short grace for a heartbeat',
  view_started: 'view started',
  view_adopted: 'adopting view from StartView',
  log_view_adopted: 'a lagging follower applied the head of its view: adopting its log view',
  election_from_recovery: 'starting an election from recovery',
  offer_refused_snapshot_unreadable: 'state transfer offer refused: snapshot unreadable',
  offer_source_ready: 'state transfer offer ready for the checkpoint',
  offer_released: 'state transfer offers withdrawn: their checkpoint is no longer held',
  snapshot_rewrite_started:
    'our snapshot file does not verify: rewriting it from the checkpoint held in memory',
  snapshot_rewritten: 'snapshot file rewritten from the checkpoint held in memory',
  state_transfer_started: 'state transfer started',
  state_transfer_target_accepted: 'state transfer target accepted',
  state_transfer_behind_frontier:
    'state transfer: offered snapshot is behind the local frontier; keeping local state',
  state_transfer_install_refused: 'state transfer: install refused',
  state_transfer_installed: 'state transfer installed',
  state_transfer_abandoned: 'state transfer abandoned; falling back to repair',
  state_transfer_discard_failed: 'state transfer: discarding the partial artifact failed',
  store_backfill_started: 'a store lacks the start of its log: fetching it from a peer',
  store_backfill_completed: 'store backfill completed: the log is whole again',
  store_backfill_obsolete:
    'store backfill stopped: a newer incarnation replaced the store, its messages are obsolete',
  store_range_unreadable: 'store range refused: the store does not read back as it was written',
  store_backfill_refused: 'store backfill: a peer sent records that are not the ones asked for',
} as const;

export type ReplicaEvent = keyof typeof REPLICA_EVENTS;

/** Where a replica's typed events go besides the log (the simulator counts them). */
export interface ReplicaEventSink {
  emit(event: ReplicaEvent, fields: Readonly<Record<string, unknown>>): void;
}

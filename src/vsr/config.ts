/**
 * Replica configuration, quorums and the checkpoint arithmetic, all checked up front so a bad
 * combination fails at construction instead of wedging a running cluster.
 */
import { STATE_CHUNK_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { BATCH_REQUESTS_MAX } from './batch.js';
import { CLIENTS_TABLE_MIN, CLIENTS_TABLE_SLOT_MAX } from './client-table.js';

export const REPLICAS_MAX = 32;
/** The DoViewChange bitsets are one u128 and a suffix holds at most 128 headers. */
export const PIPELINE_PREPARE_QUEUE_MAX = 127;
export const DVC_SUFFIX_HEADERS_MAX = 128;
/** Requests per prepare unless configured (`prepare_batch_max`). */
export const PREPARE_BATCH_MAX_DEFAULT = 32;
/** Prepares served per RequestPrepares round. */
export const REPAIR_CHUNK_MAX = 128;
/** The metadata group id (the reference's METADATA_GROUP). */
export const METADATA_GROUP = 1n << 63n;

/**
 * Timeouts in ticks (a tick is 10 ms in production). The failure detector is the pair
 * commitMessage (the primary's heartbeat interval) and normalHeartbeat (how long a backup waits
 * without one before it starts a view change): a dead or frozen primary is replaced within
 * normalHeartbeat + one round of view-change messages.
 */
export interface TimeoutTicks {
  readonly prepare: number;
  readonly commitMessage: number;
  readonly normalHeartbeat: number;
  readonly startViewChangeMessage: number;
  readonly doViewChangeMessage: number;
  readonly viewChangeStatus: number;
  readonly requestStartViewMessage: number;
  readonly repair: number;
}

/**
 * Heartbeats every 100 ms and a view change after 500 ms without one: five heartbeats in a row
 * lost or late before a healthy primary is deposed, and a write waits well under a second
 * for a new primary (etcd's defaults, 100 ms and 1 s, put its first write after a leader's death
 * at 1.1..1.9 s on the same machine). The simulator runs these, with the retransmission timers
 * (prepare, repair) shortened to stress repair.
 */
export const DEFAULT_TIMEOUT_TICKS: TimeoutTicks = {
  prepare: 25,
  commitMessage: 10,
  normalHeartbeat: 50,
  startViewChangeMessage: 10,
  doViewChangeMessage: 10,
  viewChangeStatus: 100,
  requestStartViewMessage: 20,
  repair: 100,
};

/** Heartbeat intervals a backup waits through at least before deposing its primary. */
export const HEARTBEATS_PER_TIMEOUT_MIN = 3;

/**
 * The timers an operator's two knobs set: the heartbeat interval and the failure timeout (a
 * backup's wait without a heartbeat), in ticks. The view-change timers follow the heartbeat, as
 * the defaults do (a StartViewChange or DoViewChange resent every heartbeat, a RequestStartView
 * every two), and a view change that stalls is abandoned after two failure timeouts; the
 * retransmission timers (prepare, repair) do not depend on failure detection and keep theirs.
 */
export function detectorTimeouts(heartbeatTicks: number, electionTicks: number): TimeoutTicks {
  return {
    ...DEFAULT_TIMEOUT_TICKS,
    commitMessage: heartbeatTicks,
    normalHeartbeat: electionTicks,
    startViewChangeMessage: heartbeatTicks,
    doViewChangeMessage: heartbeatTicks,
    viewChangeStatus: 2 * electionTicks,
    requestStartViewMessage: 2 * heartbeatTicks,
  };
}

/**
 * Ticks a backup still waits for a heartbeat once its connection to the primary closed: a
 * reconnect that brings one back in time cancels the view change; a dead primary (kill -9 closes
 * its sockets at once) is replaced after this instead of the whole timeout.
 */
export function disconnectGraceTicks(timeouts: TimeoutTicks): number {
  return Math.min(timeouts.normalHeartbeat, 3 * timeouts.commitMessage);
}

export interface ReplicaConfigInput {
  readonly cluster: bigint;
  /** The consensus group this replica is a member of (default METADATA_GROUP). */
  readonly group?: bigint;
  readonly replica: number;
  readonly replicaCount: number;
  /** WAL capacity in entries between the checkpoint op and the head (`journal_slots`). */
  readonly journalSlots?: number;
  readonly prepareQueueDepth?: number;
  /** Queued requests one prepare may carry (1 disables batching). */
  readonly prepareBatchMax?: number;
  /** Prepares in flight below which a request is prepared at once (default: see ReplicaConfig). */
  readonly prepareEagerMax?: number;
  /** See ReplicaConfig (default false; the simulator's regression seeds replay with it). */
  readonly offerPayloadOnEveryReplica?: boolean;
  readonly clientsTableMax?: number;
  /** Sessions of one user in the client table (default: clientsTableMax, no per-user bound). */
  readonly sessionsPerUserMax?: number;
  /** Unanswered RequestStartView probes before a restarted replica falls back to an election. */
  readonly viewProbeAttemptsMax?: number;
  /** State-transfer chunk size (default STATE_CHUNK_SIZE_MAX; the simulator uses tiny ones). */
  readonly stateChunkSize?: number;
  readonly timeouts?: Partial<TimeoutTicks>;
}

export interface ReplicaConfig {
  readonly cluster: bigint;
  /**
   * The consensus group: every frame the replica builds names it, and a frame naming another is
   * dropped. One node runs several groups over one replica bus (the metadata group and the
   * partition groups), each an instance of this core, and routes frames between them by it.
   */
  readonly group: bigint;
  readonly replica: number;
  readonly replicaCount: number;
  readonly journalSlots: number;
  readonly prepareQueueDepth: number;
  /** Requests parked while the prepare queue is full. */
  readonly requestQueueDepth: number;
  /**
   * Queued plain requests the primary puts into one prepare (src/vsr/batch.ts), 1..=
   * BATCH_REQUESTS_MAX; 1 disables batching. Only the primary reads it: backups accept any batch
   * up to BATCH_REQUESTS_MAX, so replicas configured differently interoperate.
   */
  readonly prepareBatchMax: number;
  /**
   * A request arriving while fewer prepares than this are in flight is prepared at once; otherwise
   * it waits in the request queue, and the queued requests leave batched when a prepare commits
   * (how etcd's leader collects proposals during a round). Default 1 with batching on (a lone
   * writer is never delayed; concurrent writers share prepares), prepare_queue_depth with it off.
   */
  readonly prepareEagerMax: number;
  /**
   * The state-transfer serving rule before the payload stayed on the primary only: every replica
   * keeps its latest checkpoint's payload for offers (written, booted or installed), serves every
   * chunk from it, never heals its file from it, and a receiver fetches from the first server of
   * its vote. Only the simulator sets it, to replay regression seeds found under that rule with
   * the schedules they failed with (as `prepareEagerMax` does for the batching rule).
   */
  readonly offerPayloadOnEveryReplica: boolean;
  readonly clientsTableMax: number;
  /**
   * Sessions one user may hold in the client table (client-table.ts): its next Register evicts
   * its own least recent one. Must be the same on every replica, as clientsTableMax.
   */
  readonly sessionsPerUserMax: number;
  readonly viewProbeAttemptsMax: number;
  /**
   * Ops between deterministic checkpoints: a checkpoint is taken when commit_min reaches a
   * multiple of this, on every replica. Two pipelines of slack remain in the WAL: one so a
   * primary keeps preparing while its checkpoint is written, one for backups that journal ahead
   * of their commit point.
   */
  readonly checkpointInterval: number;
  readonly quorumReplication: number;
  readonly quorumViewChange: number;
  readonly quorumNack: number;
  readonly stateChunkSize: number;
  readonly timeouts: TimeoutTicks;
}

/** TigerBeetle's flexible quorums: replication + view change > replica count. */
export function quorums(
  replicaCount: number,
): { replication: number; viewChange: number; nack: number } {
  assert(replicaCount >= 1 && replicaCount <= REPLICAS_MAX, 'replica count in range');
  if (replicaCount === 2) return { replication: 2, viewChange: 2, nack: 1 };
  const replication = Math.min(Math.ceil(replicaCount / 2), 3);
  const viewChange = replicaCount - replication + 1;
  return { replication, viewChange, nack: replicaCount - replication + 1 };
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly key: string;
  constructor(key: string, reason: string) {
    super(`${key}: ${reason}`);
    this.key = key;
  }
}

/** `value` is an integer in min..=max (false for NaN and fractions). */
function isIntegerWithin(value: number, min: number, max: number): boolean {
  return Number.isInteger(value) && value >= min && value <= max;
}

function sessionsPerUserOf(input: ReplicaConfigInput, clientsTableMax: number): number {
  const sessionsPerUserMax = input.sessionsPerUserMax ?? clientsTableMax;
  if (!isIntegerWithin(sessionsPerUserMax, 1, clientsTableMax)) {
    const range = `1..${clientsTableMax}`;
    throw new ConfigError('sessions_per_user_max', `must be ${range} (clients_table_max)`);
  }
  return sessionsPerUserMax;
}

function timeoutsOf(input: ReplicaConfigInput): TimeoutTicks {
  const timeouts = { ...DEFAULT_TIMEOUT_TICKS, ...input.timeouts };
  for (const [key, value] of Object.entries(timeouts)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new ConfigError(`timeouts.${key}`, 'must be >= 1 tick');
    }
  }
  // Shorter, and a primary whose heartbeats are merely late by a tick or two is deposed.
  if (timeouts.normalHeartbeat < HEARTBEATS_PER_TIMEOUT_MIN * timeouts.commitMessage) {
    const floor = HEARTBEATS_PER_TIMEOUT_MIN * timeouts.commitMessage;
    throw new ConfigError(
      'timeouts.normalHeartbeat',
      `must be >= ${HEARTBEATS_PER_TIMEOUT_MIN} heartbeat intervals (${floor} ticks)`,
    );
  }
  return timeouts;
}

export function replicaConfig(input: ReplicaConfigInput): ReplicaConfig {
  const replicaCount = input.replicaCount;
  if (!Number.isInteger(replicaCount) || replicaCount < 1 || replicaCount > REPLICAS_MAX) {
    throw new ConfigError('replicas', `must be 1..${REPLICAS_MAX} replicas`);
  }
  if (!Number.isInteger(input.replica) || input.replica < 0 || input.replica >= replicaCount) {
    throw new ConfigError('replica_id', `must be 0..${replicaCount - 1}`);
  }
  const prepareQueueDepth = input.prepareQueueDepth ?? 32;
  if (!isIntegerWithin(prepareQueueDepth, 1, PIPELINE_PREPARE_QUEUE_MAX)) {
    throw new ConfigError('prepare_queue_depth', `must be 1..${PIPELINE_PREPARE_QUEUE_MAX}`);
  }
  const prepareBatchMax = input.prepareBatchMax ?? PREPARE_BATCH_MAX_DEFAULT;
  if (!isIntegerWithin(prepareBatchMax, 1, BATCH_REQUESTS_MAX)) {
    throw new ConfigError('prepare_batch_max', `must be 1..${BATCH_REQUESTS_MAX}`);
  }
  const prepareEagerMax =
    input.prepareEagerMax ?? (prepareBatchMax > 1 ? 1 : prepareQueueDepth);
  if (!isIntegerWithin(prepareEagerMax, 1, prepareQueueDepth)) {
    const range = `1..${prepareQueueDepth}`;
    throw new ConfigError('prepare_eager_max', `must be ${range} (prepare_queue_depth)`);
  }
  const journalSlots = input.journalSlots ?? 1024;
  if (!isIntegerWithin(journalSlots, 4 * prepareQueueDepth, 1 << 20)) {
    const range = `${4 * prepareQueueDepth}..${1 << 20}`;
    throw new ConfigError('journal_slots', `must be ${range} (4 x prepare_queue_depth)`);
  }
  const clientsTableMax = input.clientsTableMax ?? 8192;
  if (!isIntegerWithin(clientsTableMax, CLIENTS_TABLE_MIN, CLIENTS_TABLE_SLOT_MAX)) {
    const range = `${CLIENTS_TABLE_MIN}..${CLIENTS_TABLE_SLOT_MAX}`;
    throw new ConfigError('clients_table_max', `must be ${range}`);
  }
  const viewProbeAttemptsMax = input.viewProbeAttemptsMax ?? 5;
  const timeouts = timeoutsOf(input);
  const stateChunkSize = input.stateChunkSize ?? STATE_CHUNK_SIZE_MAX;
  if (!isIntegerWithin(stateChunkSize, 1, STATE_CHUNK_SIZE_MAX)) {
    throw new ConfigError('state_chunk_size', `must be 1..${STATE_CHUNK_SIZE_MAX}`);
  }
  const q = quorums(replicaCount);
  const checkpointInterval = journalSlots - 2 * prepareQueueDepth;
  assert(
    checkpointInterval >= 2 * prepareQueueDepth,
    'checkpoint interval leaves room for a pipeline',
  );
  const group = input.group ?? METADATA_GROUP;
  if (group < 0n || group > 0xffff_ffff_ffff_ffffn) throw new ConfigError('group', 'must be a u64');
  return {
    cluster: input.cluster,
    group,
    replica: input.replica,
    replicaCount,
    journalSlots,
    prepareQueueDepth,
    requestQueueDepth: 2 * prepareQueueDepth,
    prepareBatchMax,
    prepareEagerMax,
    offerPayloadOnEveryReplica: input.offerPayloadOnEveryReplica ?? false,
    clientsTableMax,
    sessionsPerUserMax: sessionsPerUserOf(input, clientsTableMax),
    viewProbeAttemptsMax,
    checkpointInterval,
    quorumReplication: q.replication,
    quorumViewChange: q.viewChange,
    quorumNack: q.nack,
    stateChunkSize,
    timeouts,
  };
}

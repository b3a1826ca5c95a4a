/**
 * The simulator's options, and how a seed picks them (TigerBeetle's `vopr.zig` options): swarm
 * testing, each seed drawing its own cluster and its own mix of faults, so that many seeds cover
 * many different schedules instead of one average one. `scenarioOptions` is the fault-free base
 * of the scenario tests.
 *
 * Compatibility: a seed's options are part of its replay. The draws below are made in a fixed
 * order from fixed PRNG streams; a fault added later takes a stream of its own (see
 * `targetedFaults`) so that every seed pinned before it keeps its schedule.
 */
import { Prng } from '../stdx/prng.js';
import { NETWORK_NO_FAULTS, type NetworkOptions } from './network-sim.js';

export interface SimOptions {
  readonly seed: number;
  readonly replicaCount: number;
  readonly clientCount: number;
  readonly requestsPerClient: number;
  readonly journalSlots: number;
  readonly prepareQueueDepth: number;
  /** Requests per prepare (src/vsr/batch.ts); absent: the replica default. 1 disables batching. */
  readonly prepareBatchMax?: number;
  /** Prepares in flight below which a request prepares at once; absent: the replica default. */
  readonly prepareEagerMax?: number;
  /** The state-transfer serving rule regression seeds were found under (ReplicaConfig). */
  readonly offerPayloadOnEveryReplica?: boolean;
  readonly clientsTableMax: number;
  /** State-transfer chunk size: tiny, so a transfer takes many chunks. */
  readonly stateChunkSize: number;
  readonly network: NetworkOptions;
  /** Per-tick probability that an up replica crashes. */
  readonly crashProbability: number;
  /** Per-tick probability that a down replica restarts. */
  readonly restartProbability: number;
  readonly storageLatencyMaxTicks: number;
  readonly superblockFailureProbability: number;
  /** Probability that a crash also arms a crash point inside the next storage request. */
  readonly crashInsideRequestProbability: number;
  /** On crash, each unsynced write is torn / lost with these probabilities. */
  readonly tornWriteProbability: number;
  readonly lostWriteProbability: number;
  /**
   * Probability that a crash also damages the disk at rest (a flipped bit in the snapshot or a
   * superblock slot) or loses it entirely: the replica refuses to boot, its data directory is
   * wiped and it rejoins by state transfer. At most one replica at a time is catching up from
   * a wipe (the fault budget: a second lost disk could hold the last copy of a committed op).
   */
  readonly diskLossProbability: number;
  /** Per-tick probability that a backup starts being starved of prepares (and repair requests). */
  readonly starveProbability: number;
  readonly starveMeanTicks: number;
  /** Per-tick probability that a replica's superblock writes start failing for a stretch. */
  readonly superblockBurstProbability: number;
  /** When a replica starts fetching a checkpoint, the probability that the primary crashes then. */
  readonly crashPrimaryOnFetchProbability: number;
  /**
   * When a replica that lost its disk installs a checkpoint, the probability that the primary
   * crashes a little later, for good (the rest of the safety phase and a core liveness run).
   */
  readonly crashPrimaryOnRejoinProbability: number;
  /** Probability that a crash keeps the replica down for the rest of the safety phase. */
  readonly longCrashProbability: number;
  /** Per-tick probability that a live replica's snapshot file rots at rest (a flipped bit). */
  readonly snapshotRotProbability: number;
  /**
   * Probability that liveness first runs a core (replicas still down stay down), when one can
   * proceed.
   */
  readonly coreLivenessProbability: number;
  /**
   * Per-tick probability that every replica crashes at once (unsynced writes torn or lost, as in
   * any crash) and all restart within a few ticks of each other: a whole-cluster restart.
   */
  readonly fullRestartProbability: number;
  readonly safetyTicks: number;
  readonly livenessTicksMax: number;
}

/** Derives a swarm configuration from the seed: each seed tests its own mix of faults. */
export function swarmOptions(seed: number): SimOptions {
  const prng = new Prng(seed);
  const replicaCount = prng.pick([1, 2, 3, 3, 3, 4, 5, 5]);
  const faulty = prng.chance(0.85);
  const network = faulty ? swarmNetwork(prng) : NETWORK_NO_FAULTS;
  const prepareQueueDepth = prng.pick([1, 2, 4]);
  return {
    seed,
    replicaCount,
    clientCount: prng.range(1, 6),
    requestsPerClient: prng.range(5, 40),
    journalSlots: 4 * prepareQueueDepth + prng.pick([0, 4, 16]),
    prepareQueueDepth,
    clientsTableMax: prng.pick([2, 3, 8]),
    stateChunkSize: prng.pick([64, 256, 4096]),
    network,
    crashProbability: faulty ? prng.float() * 0.003 : 0,
    restartProbability: 0.02,
    storageLatencyMaxTicks: prng.range(0, 5),
    superblockFailureProbability: faulty ? prng.float() * 0.05 : 0,
    crashInsideRequestProbability: faulty ? prng.float() * 0.5 : 0,
    tornWriteProbability: prng.float() * 0.5,
    lostWriteProbability: prng.float() * 0.5,
    diskLossProbability: faulty && prng.chance(0.5) ? prng.float() * 0.3 : 0,
    ...targetedFaults(seed, faulty),
    safetyTicks: 3_000,
    livenessTicksMax: 20_000,
  };
}

/** The network faults of a faulty seed (drawn from the swarm's stream, in this order). */
function swarmNetwork(prng: Prng): NetworkOptions {
  return {
    delayMinTicks: prng.range(0, 2),
    delayMeanTicks: prng.range(1, 8),
    lossProbability: prng.float() * 0.2,
    duplicateProbability: prng.float() * 0.2,
    pathCapacity: prng.range(4, 64),
    partitionProbability: prng.float() * 0.01,
    unpartitionProbability: 0.01 + prng.float() * 0.05,
    partitionAsymmetric: prng.chance(0.3),
    clogProbability: prng.float() * 0.01,
    clogMeanTicks: prng.range(5, 50),
  };
}

export type TargetedFaults = Pick<
  SimOptions,
  | 'starveProbability'
  | 'starveMeanTicks'
  | 'superblockBurstProbability'
  | 'crashPrimaryOnFetchProbability'
  | 'crashPrimaryOnRejoinProbability'
  | 'longCrashProbability'
  | 'snapshotRotProbability'
  | 'coreLivenessProbability'
  | 'fullRestartProbability'
>;

/**
 * No targeted faults: what `swarmOptions` drew before they existed (regression seeds replay
 * with it).
 */
export const TARGETED_FAULTS_OFF: TargetedFaults = {
  starveProbability: 0,
  starveMeanTicks: 0,
  superblockBurstProbability: 0,
  crashPrimaryOnFetchProbability: 0,
  crashPrimaryOnRejoinProbability: 0,
  longCrashProbability: 0,
  snapshotRotProbability: 0,
  coreLivenessProbability: 0,
  fullRestartProbability: 0,
};

/**
 * Targeted faults added after seeds were pinned with the others on: a regression seed found with
 * targeted faults replays with these off (each comes from a stream of its own, so the others'
 * schedules stay put).
 */
export const LATER_FAULTS_OFF: Pick<SimOptions, 'fullRestartProbability'> = {
  fullRestartProbability: 0,
};

/**
 * The rules the regression seeds were found under, so they replay with the schedules they failed
 * with: every request prepared at once while the pipeline has room (prepare_eager_max = the
 * seed's prepare_queue_depth; before a request that finds a prepare in flight waited for its
 * commit), and every replica serving state transfer from a checkpoint payload it keeps (before
 * the payload stayed on the primary only; `offerPayloadOnEveryReplica`).
 */
export function rulesOfThen(
  seed: number,
): Pick<SimOptions, 'prepareEagerMax' | 'offerPayloadOnEveryReplica'> {
  const prepareEagerMax = swarmOptions(seed).prepareQueueDepth;
  return { prepareEagerMax, offerPayloadOnEveryReplica: true };
}

/**
 * The targeted faults of a seed, from a PRNG stream of their own: the draws of the original
 * swarm (and so every schedule a seed produced before these existed, with them off) stay put.
 */
function targetedFaults(seed: number, faulty: boolean): TargetedFaults {
  if (!faulty) return TARGETED_FAULTS_OFF;
  const prng = new Prng(seed * 7 + 5);
  return {
    starveProbability: prng.chance(0.5) ? prng.float() * 0.008 : 0,
    starveMeanTicks: prng.range(50, 400),
    superblockBurstProbability: prng.chance(0.4) ? prng.float() * 0.003 : 0,
    crashPrimaryOnFetchProbability: prng.chance(0.6) ? 0.2 + prng.float() * 0.8 : 0,
    crashPrimaryOnRejoinProbability: prng.chance(0.5) ? 0.5 + prng.float() * 0.5 : 0,
    longCrashProbability: prng.chance(0.5) ? prng.float() * 0.6 : 0,
    snapshotRotProbability: prng.chance(0.4) ? prng.float() * 0.004 : 0,
    coreLivenessProbability: prng.chance(0.8) ? 1 : 0,
    // A stream of its own: the draws above (and the schedules pinned with them) stay put.
    fullRestartProbability: new Prng(seed * 13 + 9).chance(0.3) ? 0.0005 : 0,
  };
}

/** A fault-free base for scenario tests: the scenario injects exactly the faults it names. */
export function scenarioOptions(overrides: Partial<SimOptions> = {}): SimOptions {
  return {
    seed: 1,
    replicaCount: 3,
    clientCount: 2,
    requestsPerClient: 20,
    journalSlots: 16,
    prepareQueueDepth: 2,
    clientsTableMax: 8,
    stateChunkSize: 128,
    network: NETWORK_NO_FAULTS,
    crashProbability: 0,
    restartProbability: 0,
    storageLatencyMaxTicks: 1,
    superblockFailureProbability: 0,
    crashInsideRequestProbability: 0,
    tornWriteProbability: 0,
    lostWriteProbability: 0,
    diskLossProbability: 0,
    ...TARGETED_FAULTS_OFF,
    safetyTicks: 0,
    livenessTicksMax: 20_000,
    ...overrides,
  };
}

/**
 * The deterministic cluster simulator (TigerBeetle's VOPR, in miniature): N real replicas, their
 * simulated storage and network, a workload of clients, and the checkers, all driven by one seed.
 *
 * Each run has two phases. Safety: faults (packet loss, duplication, reordering, partitions,
 * clogging, crashes and restarts, superblock write failures) while the checkers watch every
 * commit, reply and checkpoint. Liveness: faults heal, every replica restarts if down, and the
 * cluster must converge within a tick budget (every request answered, every replica caught up on
 * the same commit with the same checkpoint ids).
 *
 * Targeted faults (the outside audit of issue 12 found five defects that ~30,000 seeds of random
 * loss never built the schedule for): a backup starved of prepares while heartbeats still reach
 * it and its repair requests are lost; superblock writes failing for a stretch, overlapping
 * checkpoints and installs; the primary crashing when a replica starts fetching a checkpoint, and
 * staying down; a live replica's snapshot file rotting at rest. And liveness checks beyond "it
 * converged eventually": a core of replicas (a quorum able to proceed) must converge while the
 * others stay down, no replica may sit with commit_min < commit_max without progress, and no
 * replica may depose a healthy primary once the network healed.
 */
import type { ReplicaEvent } from '../vsr/events.js';
import { Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert, AssertionError } from '../stdx/assert.js';
import { Prng } from '../stdx/prng.js';
import { replicaConfig, type ReplicaConfig, type TimeoutTicks } from '../vsr/config.js';
import { decodeFrame, type DecodedFrame } from '../vsr/frame.js';
import type { LogLevel, StorageResult } from '../vsr/io.js';
import { Replica, StorageFailure } from '../vsr/replica.js';
import type { StateMachine } from '../vsr/state-machine.js';
import { CheckFailure, ClusterChecker } from './checkers.js';
import { CLIENT_NODE_BASE, NETWORK_NO_FAULTS, NetworkSim, type NetworkOptions } from './network-sim.js';
import { SimClient } from './sim-client.js';
import { StorageRefusal } from '../storage/refusal.js';
import { SimulatedCrash } from '../storage/sim-disk.js';
import { SNAPSHOT_FILE } from '../storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../storage/superblock.js';
import { DiskReplicaStore, StorageSim } from './storage-sim.js';
import { TestStateMachine } from './test-state-machine.js';

export const SIM_TIMEOUTS: TimeoutTicks = {
  prepare: 10,
  commitMessage: 10,
  normalHeartbeat: 60,
  startViewChangeMessage: 10,
  doViewChangeMessage: 10,
  viewChangeStatus: 120,
  requestStartViewMessage: 20,
  repair: 20,
};

export interface SimOptions {
  readonly seed: number;
  readonly replicaCount: number;
  readonly clientCount: number;
  readonly requestsPerClient: number;
  readonly journalSlots: number;
  readonly prepareQueueDepth: number;
  /** Requests per prepare (src/vsr/batch.ts); absent: the replica default. 1 disables batching. */
  readonly prepareBatchMax?: number;
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
  /** Per-tick probability that a backup starts being starved of prepares (and its repair requests). */
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
  /** Probability that liveness first runs a core (replicas still down stay down), when one can proceed. */
  readonly coreLivenessProbability: number;
  /**
   * Per-tick probability that every replica crashes at once (unsynced writes torn or lost, as in
   * any crash) and all restart within a few ticks of each other: a whole-cluster restart.
   */
  readonly fullRestartProbability: number;
  readonly safetyTicks: number;
  readonly livenessTicksMax: number;
}

export interface SimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly failure: string | null;
  readonly ticks: number;
  readonly commits: number;
  /** Committed ops that carried several requests (batch prepares), and the requests they carried. */
  readonly batches: number;
  readonly requestsBatched: number;
  readonly viewChanges: number;
  readonly checkpoints: number;
  readonly repairs: number;
  readonly crashes: number;
  readonly evictions: number;
  /** Data directories wiped (disk loss, or a refused boot). */
  readonly wipes: number;
  /** State transfers installed. */
  readonly transfers: number;
  /** How often each targeted fault fired (and core liveness runs). */
  readonly targeted: Readonly<ClusterSim['targetedCounters']>;
  readonly options: SimOptions;
  /** The last log lines before a failure (empty on success). */
  readonly log: readonly string[];
}

/** Derives a swarm configuration from the seed: each seed tests its own mix of faults. */
export function swarmOptions(seed: number): SimOptions {
  const prng = new Prng(seed);
  const replicaCount = prng.pick([1, 2, 3, 3, 3, 4, 5, 5]);
  const faulty = prng.chance(0.85);
  const network: NetworkOptions = faulty
    ? {
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
      }
    : NETWORK_NO_FAULTS;
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

/** No targeted faults: what `swarmOptions` drew before they existed (regression seeds replay with it). */
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
export const LATER_FAULTS_OFF: Pick<SimOptions, 'fullRestartProbability'> = { fullRestartProbability: 0 };

type TargetedFaults = Pick<
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

interface SimReplica {
  readonly index: number;
  readonly store: DiskReplicaStore;
  storage: StorageSim;
  replica: Replica | null;
  crashes: number;
  /** Set when the disk was lost: the cluster's commit point the replica must reach again. */
  wipedCatchUpOp: number | null;
  /** The disk was lost since the last start: restart it as the operator would, with --rejoin. */
  rejoinPending: boolean;
  /** A long crash: it stays down until the liveness phase (and maybe through a core's). */
  downUntilHeal: boolean;
  /** Its superblock writes fail until this tick (a burst); 0 when none. */
  superblockFailingUntil: number;
  /** Its snapshot file rotted at rest and was not rewritten since (a disk fault in the budget). */
  rotten: boolean;
  /** Its state-transfer stage at the end of the last tick (to see a fetch start). */
  stageLast: string;
  /** Its head and installs at the end of the last tick it was up. */
  opLast: number;
  installsLast: number;
  /** Its head when its disk was lost: what the lost disk could have acknowledged (null: not wiped). */
  headAtWipe: number | null;
}

const LOG_LINES_MAX = 400;

export class ClusterSim {
  readonly options: SimOptions;
  private readonly kernels: Kernels;
  private readonly prng: Prng;
  readonly network: NetworkSim;
  readonly replicas: SimReplica[] = [];
  readonly clients: SimClient[] = [];
  readonly checker = new ClusterChecker();
  private readonly configs: ReplicaConfig[] = [];
  private readonly logLines: string[] = [];
  tickNow = 0;
  private crashCount = 0;
  private wipeCount = 0;
  private viewChangesRetired = 0;
  private checkpointsRetired = 0;
  private repairsRetired = 0;
  private transfersRetired = 0;
  private faultsEnabled = true;
  verbose = false;
  /** The targeted faults' own PRNG stream (see `targetedFaults`). */
  private readonly targetedPrng: Prng;
  /** The whole-cluster restarts' own stream, and the ticks at which the replicas come back. */
  private readonly fullRestartPrng: Prng;
  private readonly fullRestartAt = new Map<number, number>();
  /** The backup starved of prepares, until a tick. */
  private starving: { replica: number; untilTick: number } | null = null;
  /** The highest op any replica ever knew (a wiped replica's lost acknowledgements are below it). */
  private opMaxEver = 0;
  /** The highest commit_max any replica ever knew. */
  private commitMaxEver = 0;
  /** The liveness phase began at this tick (null during the safety phase). */
  private healedAtTick: number | null = null;
  /** Per replica: since when it has been an active primary (null when it is not one). */
  private readonly activePrimarySince: (number | null)[] = [];
  /** Per replica: its commit_min and the tick it last changed (the stuck-replica checker). */
  private readonly progress: { commitMin: number; sinceTick: number }[] = [];
  /** A checker's verdict raised inside a replica call, thrown after the tick. */
  private failurePending: CheckFailure | null = null;
  /** Counters of the targeted faults, for the summary. */
  readonly targetedCounters = {
    starvations: 0,
    superblockBursts: 0,
    crashesOnFetch: 0,
    crashesOnRejoin: 0,
    longCrashes: 0,
    rots: 0,
    coreRuns: 0,
    /** Core runs with a replica that lost its disk and must count again (audit defect D). */
    coreRunsRejoining: 0,
    coreRefusedKnowledge: 0,
    coreRefusedHeld: 0,
    fullRestarts: 0,
  };

  constructor(options: SimOptions, kernels: Kernels) {
    this.options = options;
    this.kernels = kernels;
    this.prng = new Prng(options.seed);
    this.targetedPrng = new Prng(options.seed * 7 + 6);
    this.fullRestartPrng = new Prng(options.seed * 13 + 10);
    const cluster = 0x5eed_0000_0000_0000_0000n + BigInt(options.seed);
    this.network = new NetworkSim(new Prng(options.seed + 1), options.replicaCount, options.network);
    for (let index = 0; index < options.replicaCount; index++) {
      this.configs.push(
        replicaConfig({
          cluster,
          replica: index,
          replicaCount: options.replicaCount,
          journalSlots: options.journalSlots,
          prepareQueueDepth: options.prepareQueueDepth,
          ...(options.prepareBatchMax === undefined ? {} : { prepareBatchMax: options.prepareBatchMax }),
          clientsTableMax: options.clientsTableMax,
          viewProbeAttemptsMax: 5,
          stateChunkSize: options.stateChunkSize,
          timeouts: SIM_TIMEOUTS,
        }),
      );
      const entry: SimReplica = {
        index,
        store: new DiskReplicaStore(
          new Prng(options.seed * 17 + index + 3),
          { cluster, replica: index, replicaCount: options.replicaCount, journalSlots: options.journalSlots },
          { tornWriteProbability: options.tornWriteProbability, lostWriteProbability: options.lostWriteProbability },
        ),
        storage: new StorageSim(new Prng(options.seed * 31 + index + 2), options.storageLatencyMaxTicks),
        replica: null,
        crashes: 0,
        wipedCatchUpOp: null,
        rejoinPending: false,
        downUntilHeal: false,
        superblockFailingUntil: 0,
        rotten: false,
        stageLast: 'idle',
        opLast: 0,
        installsLast: 0,
        headAtWipe: null,
      };
      this.replicas.push(entry);
      this.activePrimarySince.push(null);
      this.progress.push({ commitMin: 0, sinceTick: 0 });
      this.start(entry);
    }
    for (let index = 0; index < options.clientCount; index++) {
      this.clients.push(
        new SimClient(index, new Prng(options.seed * 131 + index + 7), kernels, {
          cluster,
          replicaCount: options.replicaCount,
          requestTimeoutTicks: 40,
          requestsMax: options.requestsPerClient,
        }),
      );
    }
  }

  private log(line: string): void {
    const stamped = `[${this.tickNow}] ${line}`;
    if (this.verbose) process.stderr.write(`${stamped}\n`);
    this.logLines.push(stamped);
    if (this.logLines.length > LOG_LINES_MAX) this.logLines.shift();
  }

  private start(entry: SimReplica): void {
    const config = this.configs[entry.index]!;
    const storage = new StorageSim(new Prng(this.prng.nextU32()), this.options.storageLatencyMaxTicks);
    storage.superblockFailureProbability = entry.superblockFailingUntil > this.tickNow ? 1 : this.options.superblockFailureProbability;
    entry.storage = storage;
    const index = entry.index;
    let boot;
    try {
      boot = entry.store.boot(this.kernels);
    } catch (error) {
      if (!(error instanceof StorageRefusal)) throw error;
      // What an operator does with a refused boot: wipe the data directory; the replica rejoins
      // by state transfer.
      this.log(`r${index} BOOT REFUSED (${error.reason}); wiping the data directory`);
      this.wipe(entry);
      boot = entry.store.boot(this.kernels);
    }
    // As an operator's supervisor would: every restart of a replica whose disk was lost passes
    // --rejoin until it caught up (harmless once its data directory is no longer empty). Only the
    // first restart passing it let a replica that crashed before its first superblock write boot
    // empty again as an ordinary new member.
    const rejoin = entry.rejoinPending;
    const replica = new Replica({
      config,
      stateMachine: this.stateMachineFactory(index),
      boot,
      rejoin,
      observer: {
        onCommitted: (header, body, reply, position) => this.checker.onCommitted(index, header, body, reply, position),
        onCheckpoint: (op, id) => this.checker.onCheckpoint(index, op, id),
      },
      env: {
        kernels: this.kernels,
        storage,
        prng: new Prng(this.prng.nextU32()),
        clock: { realtimeUs: () => 1_700_000_000_000_000 + this.tickNow * 10_000 },
        bus: {
          sendToReplica: (target, frame) => this.network.send(index, target, frame),
          sendToClient: (client, frame) => {
            this.onClientFrame?.(index, client, frame);
            const target = this.clients.find((candidate) => candidate.client === client);
            if (target !== undefined) this.network.send(index, CLIENT_NODE_BASE + target.index, frame);
          },
        },
        logger: {
          log: (level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>) => {
            if (level === 'debug') return;
            this.log(`r${index} ${level} ${event} ${fields === undefined ? '' : stringify(fields)}`);
          },
        },
        events: {
          emit: (event: ReplicaEvent, fields: Readonly<Record<string, unknown>>) => {
            this.events.set(event, (this.events.get(event) ?? 0) + 1);
            if (event === 'view_change_started') this.checkViewChange(index, fields);
          },
        },
      },
    });
    entry.replica = replica;
  }

  /** Crashes a replica; `untilHeal` keeps it down for the rest of the safety phase. */
  crash(index: number, untilHeal = false): void {
    const entry = this.replicas[index]!;
    if (entry.replica === null) return;
    entry.downUntilHeal = untilHeal;
    if (untilHeal) this.targetedCounters.longCrashes += 1;
    const lost = entry.storage.crash();
    entry.store.crash();
    this.retire(entry.replica);
    entry.replica = null;
    entry.crashes += 1;
    this.crashCount += 1;
    this.network.dropTo(index);
    this.log(`r${index} CRASH (lost ${lost} storage requests)`);
    if (this.faultsEnabled && this.prng.chance(this.options.diskLossProbability) && this.wipeBudgetAvailable(index)) {
      this.damageDisk(entry);
    }
  }

  private wipe(entry: SimReplica): void {
    entry.headAtWipe = Math.max(entry.headAtWipe ?? 0, entry.opLast);
    entry.store.wipe();
    entry.rejoinPending = true;
    this.wipeCount += 1;
    // What the cluster ever committed, not what the replicas up right now know (they may all be
    // down: a target of 0 released the budget before the replica held anything).
    entry.wipedCatchUpOp = Math.max(this.commitMaxEver, ...this.replicas.map((other) => other.replica?.commitMax ?? 0));
  }

  /** At most one replica may be catching up from a lost disk (or hold a rotten snapshot) at a time. */
  private wipeBudgetAvailable(index: number): boolean {
    // A single replica is its own only copy: losing its disk loses the cluster's data.
    if (this.options.replicaCount === 1) return false;
    return this.replicas.every((other) => {
      if (other.index === index) return true;
      // A rotten snapshot refuses the next boot: that replica's disk is already the one at fault.
      if (other.rotten) return false;
      // Durably: a replica that caught up but has not yet persisted it is still catching up.
      if (other.replica === null || other.replica.nackUnknownDurably) return false;
      if (other.wipedCatchUpOp !== null) {
        // Still catching up from an earlier lost disk: a second one could lose the last copy.
        if (other.replica.status !== 'normal' || other.replica.commitMin < other.wipedCatchUpOp) return false;
        other.wipedCatchUpOp = null;
        other.rejoinPending = false;
      }
      return true;
    });
  }

  /** Disk damage at rest: lose the disk, or flip a bit in the snapshot or a superblock slot. */
  private damageDisk(entry: SimReplica): void {
    const disk = entry.store.disk;
    const candidates = [SNAPSHOT_FILE, ...SUPERBLOCK_FILES].filter((name) => disk.exists(name) && disk.size(name) > 0);
    if (candidates.length === 0 || this.prng.chance(0.5)) {
      this.log(`r${entry.index} DISK LOST`);
      this.wipe(entry);
      return;
    }
    const name = this.prng.pick(candidates);
    this.log(`r${entry.index} DISK CORRUPT ${name}`);
    disk.corrupt(name);
  }

  restart(index: number): void {
    const entry = this.replicas[index]!;
    if (entry.replica !== null) return;
    this.log(`r${index} RESTART`);
    this.start(entry);
  }

  private retire(replica: Replica): void {
    this.viewChangesRetired += replica.counters.viewChanges;
    this.checkpointsRetired += replica.counters.checkpoints;
    this.repairsRetired += replica.counters.repairsRequested;
    this.transfersRetired += replica.counters.stateTransfersInstalled;
  }

  /** Runs `fn` against a replica; a StorageFailure is fail-stop (crash), anything else a bug. */
  private guard(entry: SimReplica, fn: (replica: Replica) => void): void {
    const replica = entry.replica;
    if (replica === null) return;
    try {
      fn(replica);
    } catch (error) {
      if (error instanceof StorageFailure) {
        this.crash(entry.index);
        return;
      }
      throw error;
    }
  }

  tick(): void {
    this.tickNow += 1;
    if (this.faultsEnabled) this.injectFaults();
    for (const packet of this.network.tick()) this.deliver(packet.from, packet.to, packet.frame);
    for (const entry of this.replicas) {
      if (entry.replica === null) continue;
      try {
        entry.storage.tick(entry.store, (id: number, result: StorageResult) =>
          this.guard(entry, (replica) => replica.onStorageDone(id, result)),
        );
      } catch (error) {
        if (!(error instanceof SimulatedCrash)) throw error;
        this.log(`r${entry.index} crash point inside a storage request`);
        this.crash(entry.index);
        continue;
      }
      this.guard(entry, (replica) => replica.tick());
    }
    for (const client of this.clients) {
      const send = client.tick();
      if (send !== null) this.network.send(CLIENT_NODE_BASE + client.index, send.target, send.frame);
    }
    this.observe();
    if (this.healedAtTick !== null) this.checkProgress();
    const failure = this.failurePending;
    if (failure !== null) {
      this.failurePending = null;
      throw failure;
    }
  }

  /** Ticks a replica may sit with commit_min < commit_max, making no progress, after healing. */
  static readonly STUCK_TICKS_MAX = 5_000;

  /** Liveness: once healed, no live replica stays behind its commit_max without progress. */
  private checkProgress(): void {
    for (const entry of this.replicas) {
      const replica = entry.replica;
      if (replica === null) continue;
      const progress = this.progress[entry.index]!;
      const since = Math.max(progress.sinceTick, this.healedAtTick!);
      if (replica.commitMin < replica.commitMax && this.tickNow - since > ClusterSim.STUCK_TICKS_MAX) {
        throw new CheckFailure(
          `liveness: r${entry.index} stuck at commit_min ${replica.commitMin} < commit_max ${replica.commitMax} for ${this.tickNow - since} ticks after healing: ${this.describe()}`,
        );
      }
    }
  }

  /**
   * Liveness: once the network healed, a backup deposes a primary only if that primary stopped
   * being one. A heartbeat timeout while the primary of that view has been active for longer than
   * the timeout (its heartbeats flow, nothing is lost any more) means the backup ignored them.
   */
  private checkViewChange(index: number, fields: Readonly<Record<string, unknown>>): void {
    if (this.healedAtTick === null || fields['reason'] !== 'heartbeat_timeout') return;
    const view = Number(fields['from_view']);
    const primaryIndex = view % this.options.replicaCount;
    const primary = this.replicas[primaryIndex]!.replica;
    const since = this.activePrimarySince[primaryIndex] ?? null;
    const heartbeatTicks = this.configs[index]!.timeouts.normalHeartbeat;
    const healedFor = this.tickNow - this.healedAtTick;
    if (primary === null || since === null || primary.view !== view || healedFor <= heartbeatTicks) return;
    if (this.tickNow - since <= heartbeatTicks + SIM_TIMEOUTS.commitMessage) return;
    this.failurePending ??= new CheckFailure(
      `liveness: r${index} deposed the healthy primary r${primaryIndex} of view ${view} (active since tick ${since}, network healed at ${this.healedAtTick})`,
    );
  }

  /** The state machine each (re)started replica gets (scenarios swap in a faulty one). */
  stateMachineFactory: (index: number) => StateMachine = () => new TestStateMachine();

  /** Scenario hook: every reply or eviction a replica sends to any client, before delivery. */
  onClientFrame: ((replica: number, client: bigint, frame: Uint8Array) => void) | null = null;

  /** How often each typed replica event happened, across replicas and restarts (scenario markers). */
  readonly events = new Map<ReplicaEvent, number>();

  /** Frames a scenario corrupted in flight, rejected as the transport would. */
  framesRejected = 0;

  private deliver(from: number, to: number, frame: Uint8Array): void {
    const decoded = decodeFrame(this.kernels, frame);
    if (!decoded.ok) {
      // Only a scenario's packet filter corrupts frames: the transport drops them, counted.
      assert(this.network.filter !== null, `the network delivers frames intact (${decoded.reason})`);
      this.framesRejected += 1;
      return;
    }
    if (to >= CLIENT_NODE_BASE) {
      this.deliverToClient(to - CLIENT_NODE_BASE, decoded);
      return;
    }
    if (this.starves(from, to, decoded)) return;
    const entry = this.replicas[to]!;
    this.guard(entry, (replica) => replica.onMessage(decoded));
  }

  /** A starved backup gets no prepare, and its repair requests are lost; all else flows. */
  private starves(from: number, to: number, message: DecodedFrame): boolean {
    const starving = this.starving;
    if (starving === null || !this.faultsEnabled) return false;
    const command = message.header.command;
    return (to === starving.replica && command === Command.prepare) || (from === starving.replica && command === Command.requestPrepares);
  }

  private deliverToClient(index: number, message: DecodedFrame): void {
    const client = this.clients[index]!;
    const header = message.header;
    if (header.command === Command.reply) {
      const completed = client.onReply(header, message.body);
      if (completed !== null) this.checker.onClientReply(completed.client, completed.request, message.frame);
    } else if (header.command === Command.eviction) {
      client.onEviction(header);
    }
  }

  /**
   * A cluster forms when every replica has joined a log view once (what `tigerbeetle format`
   * makes explicit). An empty replica cannot tell a new cluster from a lost disk, so it counts
   * toward view-change quorums only after joining; faults wait until the cluster has formed, as
   * an operator would not start a cluster while replacing its members.
   */
  private formed = false;

  private injectFaults(): void {
    if (!this.formed) {
      this.formed = this.replicas.every((entry) => entry.replica !== null && entry.replica.status === 'normal' && (entry.replica.logView >= 1 || this.options.replicaCount === 1));
      if (!this.formed) return;
    }
    for (const entry of this.replicas) {
      if (entry.replica !== null) {
        if (this.prng.chance(this.options.crashProbability)) {
          // Some crashes land inside a storage request (a torn multi-step write) instead.
          if (entry.storage.inFlight > 0 && this.prng.chance(this.options.crashInsideRequestProbability)) {
            entry.store.disk.crashAtOperation(this.prng.range(1, 6));
          } else {
            this.crash(entry.index, this.targetedPrng.chance(this.options.longCrashProbability));
          }
        }
      } else if (this.prng.chance(this.options.restartProbability) && !entry.downUntilHeal) {
        this.restart(entry.index);
      }
    }
    this.injectTargetedFaults();
  }

  /** The audit's schedules, drawn from their own PRNG stream (see the file comment). */
  private injectTargetedFaults(): void {
    const prng = this.targetedPrng;
    const options = this.options;
    if (this.starving !== null && this.tickNow >= this.starving.untilTick) {
      // Often another backup starves right away: the prepares the first one gets again are then
      // held by it alone (the schedule of the audit's defect A).
      const previous = this.starving.replica;
      this.starving = null;
      const primary = this.livePrimary();
      const others = this.replicas.filter((entry) => entry.replica !== null && entry.index !== previous && entry.index !== primary?.index);
      if (others.length > 0 && prng.chance(0.8)) this.starve(others, ` (after r${previous})`);
    }
    if (this.starving === null && prng.chance(options.starveProbability)) {
      const primary = this.livePrimary();
      const backups = this.replicas.filter((entry) => entry.replica !== null && entry.index !== primary?.index);
      if (backups.length > 0) this.starve(backups, '');
    }
    for (const entry of this.replicas) {
      if (entry.superblockFailingUntil > 0 && this.tickNow >= entry.superblockFailingUntil) {
        entry.superblockFailingUntil = 0;
        entry.storage.superblockFailureProbability = options.superblockFailureProbability;
      }
      if (entry.replica === null) continue;
      if (entry.superblockFailingUntil === 0 && prng.chance(options.superblockBurstProbability)) {
        entry.superblockFailingUntil = this.tickNow + prng.range(30, 300);
        entry.storage.superblockFailureProbability = 1;
        this.targetedCounters.superblockBursts += 1;
        this.log(`r${entry.index} SUPERBLOCK WRITES FAIL until ${entry.superblockFailingUntil}`);
      }
    }
    if (prng.chance(options.snapshotRotProbability)) this.rotSnapshot();
    this.injectFullRestart();
    if (this.primaryCrashAtTick !== null && this.tickNow >= this.primaryCrashAtTick) {
      this.primaryCrashAtTick = null;
      const primary = this.livePrimary();
      if (primary !== null) {
        this.targetedCounters.crashesOnRejoin += 1;
        this.log(`r${primary.index} CRASH (primary, while a lost disk rejoins) until healed`);
        this.crash(primary.index, true);
      }
    }
  }

  /**
   * A whole-cluster restart: every replica crashes in the same tick and each comes back within a
   * few ticks. Recovering replicas that hear each other elect at once instead of waiting out
   * their probes; this puts that shortcut under the checkers with torn and lost writes.
   */
  private injectFullRestart(): void {
    const prng = this.fullRestartPrng;
    for (const [index, atTick] of this.fullRestartAt) {
      if (this.tickNow < atTick) continue;
      this.fullRestartAt.delete(index);
      this.replicas[index]!.downUntilHeal = false;
      this.restart(index);
    }
    if (this.fullRestartAt.size > 0 || this.options.replicaCount === 1) return;
    if (!prng.chance(this.options.fullRestartProbability)) return;
    if (this.replicas.some((entry) => entry.replica === null)) return;
    this.targetedCounters.fullRestarts += 1;
    this.log('FULL CLUSTER RESTART');
    for (const entry of this.replicas) {
      this.crash(entry.index);
      // Held down (no random restart) until its own restart tick.
      entry.downUntilHeal = true;
      this.fullRestartAt.set(entry.index, this.tickNow + prng.range(1, 12));
    }
  }

  /** Starves one of `candidates` of prepares for an exponentially drawn stretch. */
  private starve(candidates: readonly SimReplica[], note: string): void {
    const ticks = Math.ceil(-Math.log(1 - this.targetedPrng.float()) * this.options.starveMeanTicks);
    this.starving = { replica: this.targetedPrng.pick(candidates).index, untilTick: this.tickNow + ticks };
    this.targetedCounters.starvations += 1;
    this.log(`r${this.starving.replica} STARVED of prepares for ${ticks} ticks${note}`);
  }

  /** The replica that is an active primary, if any. */
  private livePrimary(): SimReplica | null {
    return this.replicas.find((entry) => entry.replica !== null && entry.replica.activePrimary) ?? null;
  }

  /** Bit rot in a live replica's snapshot file, the primary's more often than not. */
  private rotSnapshot(): void {
    const prng = this.targetedPrng;
    const live = this.replicas.filter((entry) => entry.replica !== null && entry.store.disk.exists(SNAPSHOT_FILE) && entry.store.disk.size(SNAPSHOT_FILE) > 0);
    if (live.length === 0) return;
    const primary = live.find((entry) => entry.replica!.activePrimary);
    const target = primary !== undefined && prng.chance(0.7) ? primary : prng.pick(live);
    if (target.rotten || !this.wipeBudgetAvailable(target.index)) return;
    target.store.disk.corrupt(SNAPSHOT_FILE);
    target.rotten = true;
    this.targetedCounters.rots += 1;
    this.log(`r${target.index} SNAPSHOT ROTS at rest`);
  }

  /** The primary crashes at this tick (scheduled while a lost disk rejoins). */
  private primaryCrashAtTick: number | null = null;

  /** A replica that lost its disk installed a checkpoint: maybe the primary crashes a little later. */
  private onRejoinInstalled(entry: SimReplica): void {
    if (!this.faultsEnabled || !this.formed || this.primaryCrashAtTick !== null) return;
    if (!this.targetedPrng.chance(this.options.crashPrimaryOnRejoinProbability)) return;
    this.primaryCrashAtTick = this.tickNow + this.targetedPrng.range(0, 200);
    this.log(`r${entry.index} rejoining installed a checkpoint: the primary crashes at ${this.primaryCrashAtTick}`);
  }

  /** A replica just accepted a checkpoint to fetch: maybe the primary crashes now. */
  private onFetchStarted(entry: SimReplica): void {
    if (!this.faultsEnabled || !this.formed || !this.targetedPrng.chance(this.options.crashPrimaryOnFetchProbability)) return;
    const primary = this.livePrimary();
    if (primary === null || primary.index === entry.index) return;
    this.targetedCounters.crashesOnFetch += 1;
    this.log(`r${primary.index} CRASH (primary, as r${entry.index} starts fetching)`);
    this.crash(primary.index, this.targetedPrng.chance(this.options.longCrashProbability));
  }

  /** Book-keeping after every tick: rot healed, fetch starts, active primaries, progress. */
  private observe(): void {
    for (const entry of this.replicas) {
      const replica = entry.replica;
      if (entry.rotten) {
        const file = entry.store.disk.exists(SNAPSHOT_FILE) ? entry.store.disk.readAll(SNAPSHOT_FILE) : new Uint8Array(0);
        // Rewritten (a checkpoint, a repair, an install) or wiped: the fault is over.
        if (file.byteLength === 0 || this.kernels.trailerSplit(file).status === 'valid') entry.rotten = false;
      }
      const stage = replica?.stateTransfer.stage ?? 'idle';
      if (stage === 'fetching' && entry.stageLast !== 'fetching') this.onFetchStarted(entry);
      entry.stageLast = stage;
      if (replica === null) {
        this.activePrimarySince[entry.index] = null;
        entry.installsLast = 0;
        continue;
      }
      entry.opLast = replica.op;
      const installs = replica.counters.stateTransfersInstalled;
      if (installs > entry.installsLast && replica.nackUnknown) this.onRejoinInstalled(entry);
      entry.installsLast = installs;
      if (!replica.nackUnknown) entry.headAtWipe = null;
      this.opMaxEver = Math.max(this.opMaxEver, replica.op);
      this.commitMaxEver = Math.max(this.commitMaxEver, replica.commitMax);
      if (!replica.activePrimary) this.activePrimarySince[entry.index] = null;
      else this.activePrimarySince[entry.index] ??= this.tickNow;
      const progress = this.progress[entry.index]!;
      if (progress.commitMin !== replica.commitMin || replica.commitMin === replica.commitMax) {
        progress.commitMin = replica.commitMin;
        progress.sinceTick = this.tickNow;
      }
    }
  }

  /**
   * Ends the safety phase: heal the network, stop injecting faults, restart every replica but
   * those in `keepDown` (a core liveness run).
   */
  heal(keepDown: ReadonlySet<number> = new Set()): void {
    this.faultsEnabled = false;
    this.starving = null;
    this.primaryCrashAtTick = null;
    this.fullRestartAt.clear();
    this.healedAtTick = this.tickNow;
    this.network.options = NETWORK_NO_FAULTS;
    this.network.heal();
    for (const entry of this.replicas) {
      entry.superblockFailingUntil = 0;
      entry.storage.superblockFailureProbability = 0;
      entry.store.disk.clearCrashPoint();
      entry.downUntilHeal = false;
      if (entry.replica === null && !keepDown.has(entry.index)) this.restart(entry.index);
    }
  }

  /**
   * The replicas down at the end of the safety phase that a core liveness run keeps down: all of
   * them, if the others can proceed on their own, else none. They can when they are a view-change
   * quorum, enough of them can nack truthfully (kept their disk, or a lost one caught up past
   * every op any replica ever knew), and between them they hold every acknowledged op.
   */
  private coreExcluded(): Set<number> {
    const down = new Set(this.replicas.filter((entry) => entry.replica === null).map((entry) => entry.index));
    if (down.size === 0 || !this.targetedPrng.chance(this.options.coreLivenessProbability)) return new Set();
    const config = this.configs[0]!;
    const core = this.replicas.filter((entry) => !down.has(entry.index));
    // A rotten snapshot is a disk fault already: with replicas down as well, the core may hold no
    // servable copy of the checkpoint a laggard needs (two faults; the budget allows one).
    if (core.length < config.quorumViewChange || core.some((entry) => entry.rotten)) return new Set();
    // Restart the core first: what it can prove is what its disks hold.
    for (const entry of core) if (entry.replica === null) this.restart(entry.index);
    const replicas = core.map((entry) => entry.replica!);
    // A lost disk can nack truthfully again once this replica applied what that disk could have
    // acknowledged (its head when lost) and the head of the view it adopted since.
    const knowledgeable = core.filter((entry) => {
      const replica = entry.replica!;
      if (!replica.nackUnknown) return true;
      const lost = entry.headAtWipe ?? this.opMaxEver;
      return replica.catchUpHead >= 0 && replica.commitMin >= replica.catchUpHead && replica.commitMin >= lost && replica.commitMin > 0;
    });
    if (knowledgeable.length < config.quorumNack) {
      this.targetedCounters.coreRefusedKnowledge += 1;
      return new Set();
    }
    const applied = Math.max(...replicas.map((replica) => replica.commitMin));
    for (let op = applied + 1; op <= this.checker.ackedOpMax; op++) {
      const canonical = this.checker.canonicalChecksum(op);
      const held = replicas.some((replica) => {
        const entry = replica.journal.get(op);
        return canonical !== undefined && entry !== undefined && entry.durable && entry.frame !== null && entry.checksum === canonical;
      });
      if (!held) {
        this.targetedCounters.coreRefusedHeld += 1;
        return new Set();
      }
    }
    if (replicas.some((replica) => replica.nackUnknown)) this.targetedCounters.coreRunsRejoining += 1;
    return down;
  }

  /** Converged: every client done, every replica (of `core`, if given) normal on the same view and commit. */
  converged(core: ReadonlySet<number> | null = null): boolean {
    if (!this.clients.every((client) => client.idle)) return false;
    const entries = this.replicas.filter((entry) => core === null || core.has(entry.index));
    const replicas = entries.map((entry) => entry.replica);
    if (replicas.some((replica) => replica === null)) return false;
    const first = replicas[0]!;
    for (const replica of replicas) {
      if (replica === null || replica.status !== 'normal' || replica.nackUnknown) return false;
      if (replica.view !== first.view || replica.commitMin !== replica.commitMax) return false;
      if (replica.commitMin !== first.commitMin) return false;
    }
    return first.commitMin >= this.checker.ackedOpMax;
  }

  /** Ticks until `predicate` holds; false if `ticksMax` ran out first. */
  runUntil(predicate: () => boolean, ticksMax: number): boolean {
    for (let tick = 0; tick < ticksMax; tick++) {
      if (predicate()) return true;
      this.tick();
    }
    return predicate();
  }

  replica(index: number): Replica {
    const replica = this.replicas[index]!.replica;
    assert(replica !== null, `replica ${index} is up`);
    return replica;
  }

  /** The data directory is lost (while the replica is down); it restarts with --rejoin. */
  loseDisk(index: number): void {
    const entry = this.replicas[index]!;
    assert(entry.replica === null, 'lose the disk of a stopped replica');
    this.wipe(entry);
  }

  /** Heal, stop injecting faults, run to convergence and run the final checks; throws if not. */
  converge(ticksMax = this.options.livenessTicksMax): void {
    this.heal();
    if (!this.runUntil(() => this.converged(), ticksMax)) {
      throw new CheckFailure(`no convergence within ${ticksMax} ticks: ${this.describe()}\n${this.logLines.slice(-60).join('\n')}`);
    }
    this.checkFinal();
  }

  /** The recent log lines (for assertion messages and log-marker checks). */
  get recentLog(): readonly string[] {
    return this.logLines;
  }

  run(): SimResult {
    let failure: string | null = null;
    try {
      for (let tick = 0; tick < this.options.safetyTicks; tick++) this.tick();
      const excluded = this.coreExcluded();
      this.heal(excluded);
      if (excluded.size > 0) {
        // A core must converge on its own, the others still down (as TigerBeetle's VOPR asks).
        this.targetedCounters.coreRuns += 1;
        const core = new Set(this.replicas.map((entry) => entry.index).filter((index) => !excluded.has(index)));
        this.log(`CORE liveness: r${[...core].join(',r')} without r${[...excluded].join(',r')}`);
        if (!this.runUntil(() => this.converged(core), this.options.livenessTicksMax)) {
          throw new CheckFailure(`liveness: the core r${[...core].join(',r')} did not converge within ${this.options.livenessTicksMax} ticks while r${[...excluded].join(',r')} stayed down: ${this.describe()}`);
        }
        for (const index of excluded) this.restart(index);
      }
      let converged = false;
      for (let tick = 0; tick < this.options.livenessTicksMax; tick++) {
        this.tick();
        if (this.converged()) {
          converged = true;
          break;
        }
      }
      if (!converged) failure = `liveness: no convergence within ${this.options.livenessTicksMax} ticks after healing: ${this.describe()}`;
      else this.checkFinal();
    } catch (error) {
      if (error instanceof CheckFailure || error instanceof AssertionError) failure = `${error.name}: ${error.message}`;
      else failure = `${(error as Error).name}: ${(error as Error).stack ?? String(error)}`;
    }
    const live = this.replicas.map((entry) => entry.replica).filter((replica): replica is Replica => replica !== null);
    return {
      seed: this.options.seed,
      ok: failure === null,
      failure,
      ticks: this.tickNow,
      commits: this.checker.historyLength,
      batches: this.checker.batchesCommitted,
      requestsBatched: this.checker.requestsBatched,
      viewChanges: this.viewChangesRetired + live.reduce((sum, replica) => sum + replica.counters.viewChanges, 0),
      checkpoints: this.checkpointsRetired + live.reduce((sum, replica) => sum + replica.counters.checkpoints, 0),
      repairs: this.repairsRetired + live.reduce((sum, replica) => sum + replica.counters.repairsRequested, 0),
      crashes: this.crashCount,
      wipes: this.wipeCount,
      transfers: this.transfersRetired + live.reduce((sum, replica) => sum + replica.counters.stateTransfersInstalled, 0),
      evictions: this.clients.reduce((sum, client) => sum + client.evictions, 0),
      targeted: { ...this.targetedCounters },
      options: this.options,
      log: failure === null ? [] : [...this.logLines],
    };
  }

  /** After convergence: every acknowledged op is applied everywhere, with the canonical identity. */
  checkFinal(): void {
    for (const entry of this.replicas) {
      const replica = entry.replica!;
      if (replica.commitMin < this.checker.ackedOpMax) {
        throw new CheckFailure(`replica ${entry.index} lost acknowledged op ${this.checker.ackedOpMax}`);
      }
      const canonical = this.checker.canonicalChecksum(replica.commitMin);
      if (canonical !== undefined && replica.commitChecksum !== null && canonical !== replica.commitChecksum) {
        throw new CheckFailure(`replica ${entry.index} head ${replica.commitMin} is not canonical`);
      }
      if (replica.counters.divergences > 0) throw new CheckFailure(`replica ${entry.index} reported divergence`);
      if (replica.nackUnknown) throw new CheckFailure(`replica ${entry.index} never caught up after losing its disk`);
    }
  }

  describe(): string {
    const replicas = this.replicas.map((entry) => (entry.replica === null ? `r${entry.index}:down` : stringify(entry.replica.describe())));
    const clients = this.clients.map((client) => `c${client.index}:${client.idle ? 'idle' : `inflight=${client.inflight?.request ?? '-'} sent=${client.requestsSent}`}`);
    return `${replicas.join(' ')} | ${clients.join(' ')}`;
  }
}

function stringify(fields: Readonly<Record<string, unknown>>): string {
  return JSON.stringify(fields, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value));
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

/** Runs one seed to completion. */
export function simulateSeed(seed: number, kernels: Kernels, overrides: Partial<SimOptions> = {}): SimResult {
  const options = { ...swarmOptions(seed), ...overrides, seed };
  return new ClusterSim(options, kernels).run();
}

/**
 * The deterministic cluster simulator (TigerBeetle's VOPR, in miniature): N real replicas, their
 * simulated storage and network, a workload of clients, and the checkers, all driven by one seed.
 *
 * Each run has two phases. Safety: faults (packet loss, duplication, reordering, partitions,
 * clogging, crashes and restarts, superblock write failures) while the checkers watch every
 * commit, reply and checkpoint. Liveness: faults heal, every replica restarts if down, and the
 * cluster must converge within a tick budget (every request answered, every replica caught up on
 * the same commit with the same checkpoint ids).
 */
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
  readonly safetyTicks: number;
  readonly livenessTicksMax: number;
}

export interface SimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly failure: string | null;
  readonly ticks: number;
  readonly commits: number;
  readonly viewChanges: number;
  readonly checkpoints: number;
  readonly repairs: number;
  readonly crashes: number;
  readonly evictions: number;
  /** Data directories wiped (disk loss, or a refused boot). */
  readonly wipes: number;
  /** State transfers installed. */
  readonly transfers: number;
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
    safetyTicks: 3_000,
    livenessTicksMax: 20_000,
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

  constructor(options: SimOptions, kernels: Kernels) {
    this.options = options;
    this.kernels = kernels;
    this.prng = new Prng(options.seed);
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
      };
      this.replicas.push(entry);
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
    storage.superblockFailureProbability = this.options.superblockFailureProbability;
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
    const rejoin = entry.rejoinPending;
    entry.rejoinPending = false;
    const replica = new Replica({
      config,
      stateMachine: this.stateMachineFactory(index),
      boot,
      rejoin,
      observer: {
        onCommitted: (header, body, reply) => this.checker.onCommitted(index, header, body, reply),
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
            const target = this.clients.find((candidate) => candidate.client === client);
            if (target !== undefined) this.network.send(index, CLIENT_NODE_BASE + target.index, frame);
          },
        },
        logger: {
          log: (level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>) => {
            this.events.set(event, (this.events.get(event) ?? 0) + 1);
            if (level === 'debug') return;
            this.log(`r${index} ${level} ${event} ${fields === undefined ? '' : stringify(fields)}`);
          },
        },
      },
    });
    entry.replica = replica;
  }

  crash(index: number): void {
    const entry = this.replicas[index]!;
    if (entry.replica === null) return;
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
    entry.store.wipe();
    entry.rejoinPending = true;
    this.wipeCount += 1;
    entry.wipedCatchUpOp = Math.max(0, ...this.replicas.map((other) => other.replica?.commitMax ?? 0));
  }

  /** At most one replica may be catching up from a lost disk at a time. */
  private wipeBudgetAvailable(index: number): boolean {
    // A single replica is its own only copy: losing its disk loses the cluster's data.
    if (this.options.replicaCount === 1) return false;
    return this.replicas.every((other) => {
      if (other.index === index) return true;
      if (other.replica === null || other.replica.nackUnknown) return false;
      if (other.wipedCatchUpOp !== null) {
        // Still catching up from an earlier lost disk: a second one could lose the last copy.
        if (other.replica.status !== 'normal' || other.replica.commitMin < other.wipedCatchUpOp) return false;
        other.wipedCatchUpOp = null;
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
  }

  /** The state machine each (re)started replica gets (scenarios swap in a faulty one). */
  stateMachineFactory: (index: number) => StateMachine = () => new TestStateMachine();

  /** How often each log event happened, across replicas and restarts (scenario markers). */
  readonly events = new Map<string, number>();

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
    const entry = this.replicas[to]!;
    void from;
    this.guard(entry, (replica) => replica.onMessage(decoded));
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
            this.crash(entry.index);
          }
        }
      } else if (this.prng.chance(this.options.restartProbability)) {
        this.restart(entry.index);
      }
    }
  }

  /** Ends the safety phase: heal the network, restart everyone, stop injecting faults. */
  heal(): void {
    this.faultsEnabled = false;
    this.network.options = NETWORK_NO_FAULTS;
    this.network.heal();
    for (const entry of this.replicas) {
      entry.storage.superblockFailureProbability = 0;
      entry.store.disk.clearCrashPoint();
      if (entry.replica === null) this.restart(entry.index);
    }
  }

  /** Converged: every client done, every replica normal on the same view and commit. */
  converged(): boolean {
    if (!this.clients.every((client) => client.idle)) return false;
    const replicas = this.replicas.map((entry) => entry.replica);
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
      this.heal();
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
      viewChanges: this.viewChangesRetired + live.reduce((sum, replica) => sum + replica.counters.viewChanges, 0),
      checkpoints: this.checkpointsRetired + live.reduce((sum, replica) => sum + replica.counters.checkpoints, 0),
      repairs: this.repairsRetired + live.reduce((sum, replica) => sum + replica.counters.repairsRequested, 0),
      crashes: this.crashCount,
      wipes: this.wipeCount,
      transfers: this.transfersRetired + live.reduce((sum, replica) => sum + replica.counters.stateTransfersInstalled, 0),
      evictions: this.clients.reduce((sum, client) => sum + client.evictions, 0),
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

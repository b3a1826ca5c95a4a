/**
 * The simulated cluster (TigerBeetle's `testing/cluster.zig`): N real replicas on simulated
 * storage and a simulated network, the workload's clients, the checkers that watch every commit
 * and reply, and the primitives a schedule is made of (tick, crash, restart, lose a disk). It
 * injects no fault on its own (a storage failure crashes its replica, fail-stop, and a refused
 * boot is wiped, as an operator would): which faults happen when is `faults.ts`, the phases and
 * the verdict are `vopr.ts`; they plug in through `ClusterHooks`.
 *
 * One PRNG stream (`prng`) seeds the storage and the replica of every (re)start and draws the
 * random crashes and restarts: a seed's run depends on the order of those draws, so the order of
 * the calls below is part of every pinned seed's replay.
 */
import type { ReplicaEvent } from '../vsr/events.js';
import { Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import { Prng } from '../stdx/prng.js';
import {
  DEFAULT_TIMEOUT_TICKS,
  replicaConfig,
  type ReplicaConfig,
  type TimeoutTicks,
} from '../vsr/config.js';
import { decodeFrame, type DecodedFrame } from '../vsr/frame.js';
import type { Logger, LogLevel, StorageResult } from '../vsr/io.js';
import { Replica, StorageFailure, type ReplicaBootState } from '../vsr/replica.js';
import type { StateMachine } from '../vsr/state-machine.js';
import type { CheckpointCodec } from '../storage/checkpoint-codec.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { METADATA_CHECKPOINT_CODEC } from '../storage/metadata-checkpoint-codec.js';
import { ClusterChecker, ReferenceModel, type SimWorkload } from './checkers.js';
import type { Disk } from '../storage/disk.js';
import { CLIENT_NODE_BASE, NetworkSim } from './network-sim.js';
import { SimClient } from './sim-client.js';
import { StorageRefusal } from '../storage/refusal.js';
import { SimulatedCrash } from '../storage/sim-disk.js';
import { DiskReplicaStore, StorageSim } from './storage-sim.js';
import type { SimOptions } from './swarm.js';
import { TestStateMachine } from './test-state-machine.js';

/**
 * The production failure detector and view-change timers, with the retransmission timers
 * (prepare, repair) shortened: the simulator's network loses and delays far more than a real
 * one, and repair under those faults is what it is there to exercise.
 */
export const SIM_TIMEOUTS: TimeoutTicks = {
  ...DEFAULT_TIMEOUT_TICKS,
  prepare: 10,
  repair: 20,
};

/** One replica slot of the cluster: what survives its crashes, and its fault bookkeeping. */
/**
 * What a simulated replica runs: its state machine and the codec its storage writes checkpoints
 * with. The default is the metadata plane's (the test state machine uses the metadata snapshot
 * model, so checkpoints run the real canonical encoder); a test may run the same core and
 * harness with another plane.
 */
export interface SimPlane<S> {
  readonly codec: CheckpointCodec<S>;
  /**
   * The machine a (re)started replica runs; `disk` is the replica's disk as it is now (a new one
   * after a loss), for a machine that keeps bytes of its own beside the core's files.
   */
  readonly stateMachine: (index: number, disk: Disk) => StateMachine<S>;
  /** What clients send and the model their replies are checked against (absent: TestOperation). */
  readonly workload?: SimWorkload;
  /** The consensus group the replicas run and the clients address (absent: the metadata one). */
  readonly group?: bigint;
}

export const METADATA_SIM_PLANE: SimPlane<MetadataMachineSnapshot> = {
  codec: METADATA_CHECKPOINT_CODEC,
  stateMachine: () => new TestStateMachine(),
};

export interface SimReplica<S = MetadataMachineSnapshot> {
  readonly index: number;
  readonly store: DiskReplicaStore<S>;
  storage: StorageSim<S>;
  replica: Replica<S> | null;
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
  /** Its head when its disk was lost: what that disk could have acknowledged (null: not wiped). */
  headAtWipe: number | null;
}

/** Where the fault schedule and the verdict plug into the harness. */
export interface ClusterHooks<S = MetadataMachineSnapshot> {
  /** At the start of a tick, before the network delivers (fault injection). */
  beforeTick(): void;
  /** True to drop a decoded replica-bound message on delivery (a targeted network fault). */
  drops(from: number, to: number, message: DecodedFrame): boolean;
  /** Right after a replica crashed; `untilHeal` keeps it down for the safety phase. */
  crashed(entry: SimReplica<S>, untilHeal: boolean): void;
  /** A typed replica event, after `events` counted it. */
  event(index: number, event: ReplicaEvent, fields: Readonly<Record<string, unknown>>): void;
  /** At the end of a tick, after every replica and client ticked (book-keeping, checks). */
  afterTick(): void;
}

function hooksNone<S>(): ClusterHooks<S> {
  return {
    beforeTick: () => {},
    drops: () => false,
    crashed: () => {},
    event: () => {},
    afterTick: () => {},
  };
}

/** What a caller may observe of a run without changing it. */
export interface SimHooks<S = MetadataMachineSnapshot> {
  /** Receives every log line as it happens, the replicas' debug records included. */
  readonly trace?: (line: string) => void;
  /** The state machine and checkpoint codec (absent: METADATA_SIM_PLANE, with S its snapshot). */
  readonly plane?: SimPlane<S>;
}

/** What a run did, summed over every replica incarnation (the counters of `SimResult`). */
export interface ClusterCounts {
  readonly commits: number;
  /** Committed batch prepares (several requests at one op), and the requests they carried. */
  readonly batches: number;
  readonly requestsBatched: number;
  readonly viewChanges: number;
  readonly checkpoints: number;
  readonly repairs: number;
  readonly crashes: number;
  /** Data directories wiped (disk loss, or a refused boot). */
  readonly wipes: number;
  /** State transfers installed. */
  readonly transfers: number;
  readonly evictions: number;
}

const LOG_LINES_MAX = 400;

export class Cluster<S = MetadataMachineSnapshot> {
  readonly options: SimOptions;
  readonly kernels: Kernels;
  /** The harness's stream: (re)start seeds, random crashes and restarts, disk damage. */
  readonly prng: Prng;
  readonly network: NetworkSim;
  readonly replicas: SimReplica<S>[] = [];
  readonly clients: SimClient[] = [];
  readonly checker: ClusterChecker;
  /**
   * Replicas (re)started from now on without the commit observer, as the node layer runs them:
   * nothing reads each reply as it commits (the checkers still see their checkpoints and the
   * replies clients receive). Scenarios only; the swarm observes every replica.
   */
  readonly unobserved = new Set<number>();
  protected readonly configs: ReplicaConfig[] = [];
  private readonly logLines: string[] = [];
  tickNow = 0;
  private crashCount = 0;
  private wipeCount = 0;
  private viewChangesRetired = 0;
  private checkpointsRetired = 0;
  private repairsRetired = 0;
  private transfersRetired = 0;
  private readonly installsRetiredBy = new Map<number, number>();
  verbose = false;
  /** The highest op any replica ever knew (what a wiped replica lost acknowledged is below it). */
  protected opMaxEver = 0;
  /** The highest commit_max any replica ever knew. */
  private commitMaxEver = 0;
  /** Set once by the simulator that drives the cluster (none while the constructor runs). */
  protected hooks: ClusterHooks<S> = hooksNone();

  /** The state machine each (re)started replica gets (scenarios swap in a faulty one). */
  stateMachineFactory: (index: number, disk: Disk) => StateMachine<S>;
  private readonly codec: CheckpointCodec<S>;

  /** Scenario hook: every reply or eviction a replica sends to any client, before delivery. */
  onClientFrame: ((replica: number, client: bigint, frame: Uint8Array) => void) | null = null;

  /** How often each typed replica event happened, across replicas and restarts (for scenarios). */
  readonly events = new Map<ReplicaEvent, number>();

  /** Frames a scenario corrupted in flight, rejected as the transport would. */
  framesRejected = 0;

  /**
   * `vrmeta simulate --seed N --trace`: every log line of the run as it happens, the replicas'
   * debug records (their handlers' drops, with the reason) included; null: debug records are not
   * even built. Fixed at construction, so the replicas booted there are traced too.
   */
  private readonly trace: ((line: string) => void) | null;

  constructor(options: SimOptions, kernels: Kernels, hooks: SimHooks<S> = {}) {
    this.trace = hooks.trace ?? null;
    // Without a plane, S is its default (the metadata snapshot): the one case the cast covers.
    const plane = hooks.plane ?? (METADATA_SIM_PLANE as unknown as SimPlane<S>);
    this.stateMachineFactory = plane.stateMachine;
    this.codec = plane.codec;
    this.checker = new ClusterChecker(plane.workload?.model() ?? new ReferenceModel());
    this.options = options;
    this.kernels = kernels;
    this.prng = new Prng(options.seed);
    const cluster = 0x5eed_0000_0000_0000_0000n + BigInt(options.seed);
    const networkPrng = new Prng(options.seed + 1);
    this.network = new NetworkSim(networkPrng, options.replicaCount, options.network);
    for (let index = 0; index < options.replicaCount; index++) {
      this.configs.push(this.configOf(cluster, index, plane.group));
      const entry = this.entryOf(cluster, index);
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
          ...(plane.workload === undefined ? {} : { operation: plane.workload.operation }),
          ...(plane.group === undefined ? {} : { group: plane.group }),
        }),
      );
    }
  }

  private configOf(cluster: bigint, index: number, group: bigint | undefined): ReplicaConfig {
    const options = this.options;
    return replicaConfig({
      cluster,
      ...(group === undefined ? {} : { group }),
      replica: index,
      replicaCount: options.replicaCount,
      journalSlots: options.journalSlots,
      prepareQueueDepth: options.prepareQueueDepth,
      ...(options.prepareBatchMax === undefined
        ? {}
        : { prepareBatchMax: options.prepareBatchMax }),
      ...(options.prepareEagerMax === undefined
        ? {}
        : { prepareEagerMax: options.prepareEagerMax }),
      ...(options.offerPayloadOnEveryReplica === true ? { offerPayloadOnEveryReplica: true } : {}),
      clientsTableMax: options.clientsTableMax,
      viewProbeAttemptsMax: 5,
      stateChunkSize: options.stateChunkSize,
      timeouts: SIM_TIMEOUTS,
    });
  }

  private entryOf(cluster: bigint, index: number): SimReplica<S> {
    const options = this.options;
    const seed = options.seed;
    return {
      index,
      store: new DiskReplicaStore(
        new Prng(seed * 17 + index + 3),
        {
          cluster,
          replica: index,
          replicaCount: options.replicaCount,
          journalSlots: options.journalSlots,
        },
        this.codec,
        {
          tornWriteProbability: options.tornWriteProbability,
          lostWriteProbability: options.lostWriteProbability,
        },
      ),
      storage: new StorageSim<S>(
        new Prng(seed * 31 + index + 2),
        options.storageLatencyMaxTicks,
      ),
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
  }

  log(line: string): void {
    const stamped = `[${this.tickNow}] ${line}`;
    if (this.verbose) process.stderr.write(`${stamped}\n`);
    this.trace?.(stamped);
    this.logLines.push(stamped);
    if (this.logLines.length > LOG_LINES_MAX) this.logLines.shift();
  }

  /** The recent log lines (for assertion messages and log-marker checks). */
  get recentLog(): readonly string[] {
    return this.logLines;
  }

  private start(entry: SimReplica<S>): void {
    const index = entry.index;
    const storagePrng = new Prng(this.prng.nextU32());
    const storage = new StorageSim<S>(storagePrng, this.options.storageLatencyMaxTicks);
    storage.superblockFailureProbability =
      entry.superblockFailingUntil > this.tickNow ? 1 : this.options.superblockFailureProbability;
    entry.storage = storage;
    const boot = this.boot(entry);
    // As an operator's supervisor would: every restart of a replica whose disk was lost passes
    // --rejoin until it caught up (harmless once its data directory is no longer empty). Only the
    // first restart passing it let a replica that crashed before its first superblock write boot
    // empty again as an ordinary new member.
    const rejoin = entry.rejoinPending;
    entry.replica = new Replica({
      config: this.configs[index]!,
      stateMachine: this.stateMachineFactory(index, entry.store.disk),
      boot,
      rejoin,
      observer: {
        onCommitted: this.unobserved.has(index)
          ? undefined
          : (header, body, reply, position) =>
              this.checker.onCommitted(index, header, body, reply, position),
        onCheckpoint: (op, id) => this.checker.onCheckpoint(index, op, id),
      },
      env: {
        kernels: this.kernels,
        storage,
        prng: new Prng(this.prng.nextU32()),
        clock: { realtimeUs: () => 1_700_000_000_000_000 + this.tickNow * 10_000 },
        bus: {
          sendToReplica: (target, frame) => this.network.send(index, target, frame),
          sendToClient: (client, frame) => this.sendToClient(index, client, frame),
        },
        logger: this.loggerOf(index),
        events: {
          emit: (event: ReplicaEvent, fields: Readonly<Record<string, unknown>>) => {
            this.events.set(event, (this.events.get(event) ?? 0) + 1);
            this.hooks.event(index, event, fields);
          },
        },
      },
    });
  }

  /** Boots a replica's store; a refused boot is wiped first, as an operator would. */
  private boot(entry: SimReplica<S>): ReplicaBootState<S> {
    try {
      return entry.store.boot(this.kernels);
    } catch (error) {
      if (!(error instanceof StorageRefusal)) throw error;
      // What an operator does with a refused boot: wipe the data directory; the replica rejoins
      // by state transfer.
      this.log(`r${entry.index} BOOT REFUSED (${error.reason}); wiping the data directory`);
      this.wipe(entry);
      return entry.store.boot(this.kernels);
    }
  }

  private sendToClient(index: number, client: bigint, frame: Uint8Array): void {
    this.onClientFrame?.(index, client, frame);
    const target = this.clients.find((candidate) => candidate.client === client);
    if (target !== undefined) this.network.send(index, CLIENT_NODE_BASE + target.index, frame);
  }

  private loggerOf(index: number): Logger {
    return {
      debugEnabled: this.trace !== null,
      log: (level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>) => {
        const line = `r${index} ${level} ${event} ${fields === undefined ? '' : stringify(fields)}`;
        // Debug records go to the trace only: the failure report keeps its last lines.
        if (level === 'debug') this.trace?.(`[${this.tickNow}] ${line}`);
        else this.log(line);
      },
    };
  }

  /** Crashes a replica; `untilHeal` keeps it down for the rest of the safety phase. */
  /** Closed connections not yet seen by the peer: it still receives what was sent before. */
  private disconnects: { readonly replica: number; readonly peer: number }[] = [];

  crash(index: number, untilHeal = false): void {
    const entry = this.replicas[index]!;
    if (entry.replica === null) return;
    entry.downUntilHeal = untilHeal;
    const lost = entry.storage.crash();
    entry.store.crash();
    this.retire(entry.replica);
    entry.replica = null;
    entry.crashes += 1;
    this.crashCount += 1;
    this.network.dropTo(index);
    this.log(`r${index} CRASH (lost ${lost} storage requests)`);
    // A crashed process's sockets close: each peer's bus sees it (the node's
    // `onPeerDisconnected`) once what the process had sent it arrived, as TCP delivers data
    // before its FIN.
    for (const other of this.replicas) {
      if (other.index !== index) this.disconnects.push({ replica: index, peer: other.index });
    }
    this.hooks.crashed(entry, untilHeal);
  }

  private wipe(entry: SimReplica<S>): void {
    entry.headAtWipe = Math.max(entry.headAtWipe ?? 0, entry.opLast);
    entry.store.wipe();
    entry.rejoinPending = true;
    this.wipeCount += 1;
    // What the cluster ever committed, not what the replicas up right now know (they may all be
    // down: a target of 0 released the budget before the replica held anything).
    const commitMaxNow = this.replicas.map((other) => other.replica?.commitMax ?? 0);
    entry.wipedCatchUpOp = Math.max(this.commitMaxEver, ...commitMaxNow);
  }

  /** The data directory is lost (while the replica is down); it restarts with --rejoin. */
  loseDisk(index: number): void {
    const entry = this.replicas[index]!;
    assert(entry.replica === null, 'lose the disk of a stopped replica');
    this.wipe(entry);
  }

  restart(index: number): void {
    const entry = this.replicas[index]!;
    if (entry.replica !== null) return;
    this.log(`r${index} RESTART`);
    this.start(entry);
  }

  /** State transfers replica `index` installed, over all its incarnations. */
  transfersInstalledBy(index: number): number {
    const live = this.replicas[index]?.replica?.counters.stateTransfersInstalled ?? 0;
    return (this.installsRetiredBy.get(index) ?? 0) + live;
  }

  private retire(replica: Replica<S>): void {
    const index = replica.config.replica;
    const installs = replica.counters.stateTransfersInstalled;
    this.installsRetiredBy.set(index, (this.installsRetiredBy.get(index) ?? 0) + installs);
    this.viewChangesRetired += replica.counters.viewChanges;
    this.checkpointsRetired += replica.counters.checkpoints;
    this.repairsRetired += replica.counters.repairsRequested;
    this.transfersRetired += replica.counters.stateTransfersInstalled;
  }

  /**
   * Runs `fn` against a replica; a StorageFailure is fail-stop (crash), and so is a simulated
   * crash point; anything else a bug.
   */
  private guard(entry: SimReplica<S>, fn: (replica: Replica<S>) => void): void {
    const replica = entry.replica;
    if (replica === null) return;
    try {
      fn(replica);
    } catch (error) {
      if (error instanceof StorageFailure) {
        this.crash(entry.index);
        return;
      }
      // A crash point armed for a storage request can fall in a state machine's own writes
      // (a partition group's segment stores share the replica's disk): the process died there.
      if (error instanceof SimulatedCrash) {
        this.log(`r${entry.index} crash point inside a state machine write`);
        this.crash(entry.index);
        return;
      }
      throw error;
    }
  }

  private deliverDisconnects(): void {
    this.disconnects = this.disconnects.filter(({ replica, peer }) => {
      if (this.network.inFlightBetween(replica, peer)) return true;
      this.replicas[peer]!.replica?.onPeerDisconnected(replica);
      return false;
    });
  }

  /** One tick: faults, the network's deliveries, every replica's storage and timers, clients. */
  tick(): void {
    this.tickNow += 1;
    this.hooks.beforeTick();
    for (const packet of this.network.tick()) this.deliver(packet.from, packet.to, packet.frame);
    this.deliverDisconnects();
    for (const entry of this.replicas) this.tickReplica(entry);
    for (const client of this.clients) {
      const send = client.tick();
      if (send === null) continue;
      this.network.send(CLIENT_NODE_BASE + client.index, send.target, send.frame);
    }
    this.hooks.afterTick();
  }

  private tickReplica(entry: SimReplica<S>): void {
    if (entry.replica === null) return;
    try {
      entry.storage.tick(entry.store, (id: number, result: StorageResult<S>) =>
        this.guard(entry, (replica) => replica.onStorageDone(id, result)),
      );
    } catch (error) {
      if (!(error instanceof SimulatedCrash)) throw error;
      this.log(`r${entry.index} crash point inside a storage request`);
      this.crash(entry.index);
      return;
    }
    this.guard(entry, (replica) => replica.tick());
  }

  /** Ticks until `predicate` holds; false if `ticksMax` ran out first. */
  runUntil(predicate: () => boolean, ticksMax: number): boolean {
    for (let tick = 0; tick < ticksMax; tick++) {
      if (predicate()) return true;
      this.tick();
    }
    return predicate();
  }

  private deliver(from: number, to: number, frame: Uint8Array): void {
    const decoded = decodeFrame(this.kernels, frame);
    if (!decoded.ok) {
      // Only a scenario's packet filter corrupts frames: the transport drops them, counted.
      const reason = decoded.reason;
      assert(this.network.filter !== null, `the network delivers frames intact (${reason})`);
      this.framesRejected += 1;
      return;
    }
    if (to >= CLIENT_NODE_BASE) {
      this.deliverToClient(to - CLIENT_NODE_BASE, decoded);
      return;
    }
    if (this.hooks.drops(from, to, decoded)) return;
    const entry = this.replicas[to]!;
    this.guard(entry, (replica) => replica.onMessage(decoded));
  }

  private deliverToClient(index: number, message: DecodedFrame): void {
    const client = this.clients[index]!;
    const header = message.header;
    if (header.command === Command.reply) {
      const completed = client.onReply(header, message.body);
      if (completed !== null) {
        this.checker.onClientReply(completed.client, completed.request, message.frame);
      }
    } else if (header.command === Command.eviction) {
      client.onEviction(header);
    }
  }

  /** Book-keeping after a tick: the head a lost disk could have acknowledged, the maxima ever. */
  observe(entry: SimReplica<S>): void {
    const replica = entry.replica;
    if (replica === null) return;
    entry.opLast = replica.op;
    if (!replica.nackUnknown) entry.headAtWipe = null;
    this.opMaxEver = Math.max(this.opMaxEver, replica.op);
    this.commitMaxEver = Math.max(this.commitMaxEver, replica.commitMax);
  }

  replica(index: number): Replica<S> {
    const replica = this.replicas[index]!.replica;
    assert(replica !== null, `replica ${index} is up`);
    return replica;
  }

  /** The replica that is an active primary, if any. */
  livePrimary(): SimReplica<S> | null {
    return this.replicas.find((entry) => entry.replica?.activePrimary === true) ?? null;
  }

  /** The run's counters, every replica incarnation included (retired ones and the live). */
  counts(): ClusterCounts {
    const live = this.replicas
      .map((entry) => entry.replica)
      .filter((replica): replica is Replica<S> => replica !== null);
    const sum = (count: (replica: Replica<S>) => number): number =>
      live.reduce((total, replica) => total + count(replica), 0);
    return {
      commits: this.checker.historyLength,
      batches: this.checker.batchesCommitted,
      requestsBatched: this.checker.requestsBatched,
      viewChanges: this.viewChangesRetired + sum((replica) => replica.counters.viewChanges),
      checkpoints: this.checkpointsRetired + sum((replica) => replica.counters.checkpoints),
      repairs: this.repairsRetired + sum((replica) => replica.counters.repairsRequested),
      crashes: this.crashCount,
      wipes: this.wipeCount,
      transfers: this.transfersRetired + sum((replica) => replica.counters.stateTransfersInstalled),
      evictions: this.clients.reduce((total, client) => total + client.evictions, 0),
    };
  }

  describe(): string {
    const replicas = this.replicas.map((entry) =>
      entry.replica === null ? `r${entry.index}:down` : stringify(entry.replica.describe()),
    );
    const clients = this.clients.map((client) => {
      const state = client.idle
        ? 'idle'
        : `inflight=${client.inflight?.request ?? '-'} sent=${client.requestsSent}`;
      return `c${client.index}:${state}`;
    });
    return `${replicas.join(' ')} | ${clients.join(' ')}`;
  }
}

function stringify(fields: Readonly<Record<string, unknown>>): string {
  return JSON.stringify(fields, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}

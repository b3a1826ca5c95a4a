/**
 * The deterministic cluster simulator (TigerBeetle's VOPR, in miniature): a cluster (`cluster.ts`)
 * with the options a seed drew (`swarm.ts`), its fault schedule (`faults.ts`), the run's phases
 * and the verdict, all driven by one seed.
 *
 * Each run has two phases. Safety: faults (packet loss, duplication, reordering, partitions,
 * clogging, crashes and restarts, superblock write failures, the targeted faults) while the
 * checkers watch every commit, reply and checkpoint. Liveness: faults heal, every replica
 * restarts if down, and the cluster must converge within a tick budget (every request answered,
 * every replica caught up on the same commit with the same checkpoint ids).
 *
 * Liveness checks beyond "it converged eventually": a core of replicas (a quorum able to proceed)
 * must converge while the others stay down, no replica may sit with commit_min < commit_max
 * without progress, and no replica may depose a healthy primary once the network healed.
 */
import type { Kernels } from '../kernels/kernel.js';
import { AssertionError } from '../stdx/assert.js';
import type { ReplicaEvent } from '../vsr/events.js';
import type { Replica } from '../vsr/replica.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { CheckFailure } from './checkers.js';
import {
  Cluster,
  SIM_TIMEOUTS,
  type ClusterCounts,
  type SimHooks,
  type SimReplica,
} from './cluster.js';
import { FaultInjector, type TargetedCounters } from './faults.js';
import { swarmOptions, type SimOptions } from './swarm.js';

export interface SimResult extends ClusterCounts {
  readonly seed: number;
  readonly ok: boolean;
  readonly failure: string | null;
  readonly ticks: number;
  /** How often each targeted fault fired (and core liveness runs). */
  readonly targeted: Readonly<TargetedCounters>;
  readonly options: SimOptions;
  /** The last log lines before a failure (empty on success). */
  readonly log: readonly string[];
}

export class ClusterSim<S = MetadataMachineSnapshot> extends Cluster<S> {
  /** Ticks a replica may sit with commit_min < commit_max, making no progress, after healing. */
  static readonly STUCK_TICKS_MAX = 5_000;

  readonly faults: FaultInjector<S>;
  /** The liveness phase began at this tick (null during the safety phase). */
  private healedAtTick: number | null = null;
  /** Per replica: since when it has been an active primary (null when it is not one). */
  private readonly activePrimarySince: (number | null)[];
  /** Per replica: its commit_min and the tick it last changed (the stuck-replica checker). */
  private readonly progress: { commitMin: number; sinceTick: number }[];
  /** A checker's verdict raised inside a replica call, thrown after the tick. */
  private failurePending: CheckFailure | null = null;

  constructor(options: SimOptions, kernels: Kernels, hooks: SimHooks<S> = {}) {
    super(options, kernels, hooks);
    this.faults = new FaultInjector(this);
    this.activePrimarySince = this.replicas.map(() => null);
    this.progress = this.replicas.map(() => ({ commitMin: 0, sinceTick: 0 }));
    this.hooks = {
      beforeTick: () => {
        if (this.faults.enabled) this.faults.inject();
      },
      drops: (from, to, message) => this.faults.drops(from, to, message),
      crashed: (entry, untilHeal) => this.faults.crashed(entry, untilHeal),
      event: (index, event, fields) => this.onEvent(index, event, fields),
      afterTick: () => this.afterTick(),
    };
  }

  /** Book-keeping after every tick, then the checks that watch a healed cluster. */
  private afterTick(): void {
    for (const entry of this.replicas) {
      this.faults.observe(entry);
      this.observe(entry);
      this.observeLiveness(entry);
    }
    if (this.healedAtTick !== null) this.checkProgress();
    const failure = this.failurePending;
    if (failure !== null) {
      this.failurePending = null;
      throw failure;
    }
  }

  /** Since when each replica is an active primary, and when its commit_min last moved. */
  private observeLiveness(entry: SimReplica<S>): void {
    const replica = entry.replica;
    if (replica === null) {
      this.activePrimarySince[entry.index] = null;
      return;
    }
    if (!replica.activePrimary) this.activePrimarySince[entry.index] = null;
    else this.activePrimarySince[entry.index] ??= this.tickNow;
    const progress = this.progress[entry.index]!;
    if (progress.commitMin !== replica.commitMin || replica.commitMin === replica.commitMax) {
      progress.commitMin = replica.commitMin;
      progress.sinceTick = this.tickNow;
    }
  }

  private onEvent(
    index: number,
    event: ReplicaEvent,
    fields: Readonly<Record<string, unknown>>,
  ): void {
    if (event === 'view_change_started') this.checkViewChange(index, fields);
  }

  /** Liveness: once healed, no live replica stays behind its commit_max without progress. */
  private checkProgress(): void {
    for (const entry of this.replicas) {
      const replica = entry.replica;
      if (replica === null) continue;
      const progress = this.progress[entry.index]!;
      const since = Math.max(progress.sinceTick, this.healedAtTick!);
      const stuckTicks = this.tickNow - since;
      if (replica.commitMin < replica.commitMax && stuckTicks > ClusterSim.STUCK_TICKS_MAX) {
        throw new CheckFailure(
          `liveness: r${entry.index} stuck at commit_min ${replica.commitMin} < commit_max ` +
            `${replica.commitMax} for ${stuckTicks} ticks after healing: ${this.describe()}`,
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
    if (primary === null || since === null || primary.view !== view) return;
    if (healedFor <= heartbeatTicks) return;
    if (this.tickNow - since <= heartbeatTicks + SIM_TIMEOUTS.commitMessage) return;
    this.failurePending ??= new CheckFailure(
      `liveness: r${index} deposed the healthy primary r${primaryIndex} of view ${view} ` +
        `(active since tick ${since}, network healed at ${this.healedAtTick})`,
    );
  }

  /**
   * Ends the safety phase: heal the network, stop injecting faults, restart every replica but
   * those in `keepDown` (a core liveness run).
   */
  heal(keepDown: ReadonlySet<number> = new Set()): void {
    this.faults.heal();
    this.healedAtTick = this.tickNow;
    for (const entry of this.replicas) {
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
    const down = new Set(
      this.replicas.filter((entry) => entry.replica === null).map((entry) => entry.index),
    );
    const counters = this.faults.counters;
    if (down.size === 0) return new Set();
    if (!this.faults.targetedPrng.chance(this.options.coreLivenessProbability)) return new Set();
    const config = this.configs[0]!;
    const core = this.replicas.filter((entry) => !down.has(entry.index));
    // A rotten snapshot is a disk fault already: with replicas down as well, the core may hold no
    // servable copy of the checkpoint a laggard needs (two faults; the budget allows one).
    if (core.length < config.quorumViewChange || core.some((entry) => entry.rotten)) {
      return new Set();
    }
    // Restart the core first: what it can prove is what its disks hold.
    for (const entry of core) if (entry.replica === null) this.restart(entry.index);
    const replicas = core.map((entry) => entry.replica!);
    if (core.filter((entry) => this.nacksTruthfully(entry)).length < config.quorumNack) {
      counters.coreRefusedKnowledge += 1;
      return new Set();
    }
    if (!this.holdsAcknowledged(replicas)) {
      counters.coreRefusedHeld += 1;
      return new Set();
    }
    if (replicas.some((replica) => replica.nackUnknown)) counters.coreRunsRejoining += 1;
    return down;
  }

  /**
   * A replica can nack truthfully if it kept its disk, or once it applied what its lost disk
   * could have acknowledged (its head when lost) and the head of the view it adopted since.
   */
  private nacksTruthfully(entry: SimReplica<S>): boolean {
    const replica = entry.replica!;
    if (!replica.nackUnknown) return true;
    const lost = entry.headAtWipe ?? this.opMaxEver;
    return (
      replica.catchUpHead >= 0 &&
      replica.commitMin >= replica.catchUpHead &&
      replica.commitMin >= lost &&
      replica.commitMin > 0
    );
  }

  /** Between them, `replicas` hold every acknowledged op above what any of them applied. */
  private holdsAcknowledged(replicas: readonly Replica<S>[]): boolean {
    const applied = Math.max(...replicas.map((replica) => replica.commitMin));
    for (let op = applied + 1; op <= this.checker.ackedOpMax; op++) {
      const canonical = this.checker.canonicalChecksum(op);
      const held = replicas.some((replica) => {
        const entry = replica.journal.get(op);
        return (
          canonical !== undefined &&
          entry !== undefined &&
          entry.durable &&
          entry.frame !== null &&
          entry.checksum === canonical
        );
      });
      if (!held) return false;
    }
    return true;
  }

  /**
   * Converged: every client done, every replica (of `core`, if given) normal on the same view
   * and commit.
   */
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
      // A store whose start is still being fetched from a peer: not converged yet.
      if ((replica.stateMachine.storeRanges?.pending ?? 0) > 0) return false;
    }
    return first.commitMin >= this.checker.ackedOpMax;
  }

  /** Heal, stop injecting faults, run to convergence and run the final checks; throws if not. */
  converge(ticksMax = this.options.livenessTicksMax): void {
    this.heal();
    if (!this.runUntil(() => this.converged(), ticksMax)) {
      const recent = this.recentLog.slice(-60).join('\n');
      const state = this.describe();
      throw new CheckFailure(`no convergence within ${ticksMax} ticks: ${state}\n${recent}`);
    }
    this.checkFinal();
  }

  /** The whole run, safety then liveness; its verdict and counters. */
  run(): SimResult {
    let failure: string | null = null;
    try {
      failure = this.runPhases();
    } catch (error) {
      failure = failureOf(error);
    }
    return {
      seed: this.options.seed,
      ok: failure === null,
      failure,
      ticks: this.tickNow,
      ...this.counts(),
      targeted: { ...this.faults.counters },
      options: this.options,
      log: failure === null ? [] : [...this.recentLog],
    };
  }

  /** The safety phase, a core liveness run when one can proceed, then everyone's liveness. */
  private runPhases(): string | null {
    for (let tick = 0; tick < this.options.safetyTicks; tick++) this.tick();
    const excluded = this.coreExcluded();
    this.heal(excluded);
    if (excluded.size > 0) this.runCore(excluded);
    const ticksMax = this.options.livenessTicksMax;
    for (let tick = 0; tick < ticksMax; tick++) {
      this.tick();
      if (this.converged()) {
        this.checkFinal();
        return null;
      }
    }
    return `liveness: no convergence within ${ticksMax} ticks after healing: ${this.describe()}`;
  }

  /** A core must converge on its own, the others still down (as TigerBeetle's VOPR asks). */
  private runCore(excluded: ReadonlySet<number>): void {
    this.faults.counters.coreRuns += 1;
    const indexes = this.replicas.map((entry) => entry.index);
    const core = new Set(indexes.filter((index) => !excluded.has(index)));
    const coreNames = `r${[...core].join(',r')}`;
    const excludedNames = `r${[...excluded].join(',r')}`;
    this.log(`CORE liveness: ${coreNames} without ${excludedNames}`);
    const ticksMax = this.options.livenessTicksMax;
    if (!this.runUntil(() => this.converged(core), ticksMax)) {
      throw new CheckFailure(
        `liveness: the core ${coreNames} did not converge within ${ticksMax} ticks while ` +
          `${excludedNames} stayed down: ${this.describe()}`,
      );
    }
    for (const index of excluded) this.restart(index);
  }

  /** Once converged: every replica applied every acknowledged op, with its canonical checksum. */
  checkFinal(): void {
    for (const entry of this.replicas) {
      const replica = entry.replica!;
      const index = entry.index;
      if (replica.commitMin < this.checker.ackedOpMax) {
        throw new CheckFailure(`replica ${index} lost acknowledged op ${this.checker.ackedOpMax}`);
      }
      const canonical = this.checker.canonicalChecksum(replica.commitMin);
      const checksum = replica.commitChecksum;
      if (canonical !== undefined && checksum !== null && canonical !== checksum) {
        throw new CheckFailure(`replica ${index} head ${replica.commitMin} is not canonical`);
      }
      if (replica.counters.divergences > 0) {
        throw new CheckFailure(`replica ${index} reported divergence`);
      }
      if (replica.nackUnknown) {
        throw new CheckFailure(`replica ${index} never caught up after losing its disk`);
      }
    }
  }
}

/** The failure line of an exception that ended a run: a verdict, or a bug's stack. */
function failureOf(error: unknown): string {
  if (error instanceof CheckFailure || error instanceof AssertionError) {
    return `${error.name}: ${error.message}`;
  }
  return `${(error as Error).name}: ${(error as Error).stack ?? String(error)}`;
}

/** Runs one seed to completion. */
export function simulateSeed(
  seed: number,
  kernels: Kernels,
  overrides: Partial<SimOptions> = {},
  hooks: SimHooks = {},
): SimResult {
  const options = { ...swarmOptions(seed), ...overrides, seed };
  return new ClusterSim(options, kernels, hooks).run();
}

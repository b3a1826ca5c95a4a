/**
 * The fault schedule of a simulated run (the fault injection of TigerBeetle's `vopr.zig`): each
 * tick of the safety phase, with the probabilities the seed drew (`swarm.ts`), crash and restart
 * replicas, arm crash points inside storage requests, damage or lose disks at a crash, and the
 * targeted faults.
 *
 * Targeted faults, because random loss almost never builds these schedules (five defects that
 * ~30,000 seeds of random loss had passed were found only with them): a backup starved of
 * prepares while heartbeats still reach it and its repair requests are lost; superblock writes
 * failing for a stretch, overlapping checkpoints and installs; the primary crashing when a
 * replica starts fetching a checkpoint, and staying down; a live replica's snapshot file rotting
 * at rest; every replica crashing at once.
 *
 * Random crashes and restarts draw from the cluster's stream; the targeted faults from a stream of
 * their own and whole-cluster restarts from a third, so a fault added later leaves the schedules
 * of seeds pinned before it in place.
 */
import { Command } from '../constants.js';
import { Prng } from '../stdx/prng.js';
import type { DecodedFrame } from '../vsr/frame.js';
import { SNAPSHOT_FILE } from '../storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../storage/superblock.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import type { Cluster, SimReplica } from './cluster.js';
import { NETWORK_NO_FAULTS } from './network-sim.js';
import type { SimOptions } from './swarm.js';

/** How often each targeted fault fired (and how core liveness runs went), for the summary. */
export interface TargetedCounters {
  starvations: number;
  superblockBursts: number;
  crashesOnFetch: number;
  crashesOnRejoin: number;
  longCrashes: number;
  rots: number;
  coreRuns: number;
  /** Core runs with a replica that lost its disk and must count again (audit defect D). */
  coreRunsRejoining: number;
  coreRefusedKnowledge: number;
  coreRefusedHeld: number;
  fullRestarts: number;
}

export class FaultInjector<S = MetadataMachineSnapshot> {
  private readonly cluster: Cluster<S>;
  private readonly options: SimOptions;
  /** Faults are injected until the cluster heals (the liveness phase). */
  enabled = true;
  /** The targeted faults' own PRNG stream (see `targetedFaults` in swarm.ts). */
  readonly targetedPrng: Prng;
  /** The whole-cluster restarts' own stream, and the ticks at which the replicas come back. */
  private readonly fullRestartPrng: Prng;
  private readonly fullRestartAt = new Map<number, number>();
  /** The backup starved of prepares, until a tick. */
  private starving: { replica: number; untilTick: number } | null = null;
  /** The primary crashes at this tick (scheduled while a lost disk rejoins). */
  private primaryCrashAtTick: number | null = null;
  /**
   * A cluster forms when every replica has joined a log view once (what `tigerbeetle format`
   * makes explicit). An empty replica cannot tell a new cluster from a lost disk, so it counts
   * toward view-change quorums only after joining; faults wait until the cluster has formed, as
   * an operator would not start a cluster while replacing its members.
   */
  private formed = false;
  readonly counters: TargetedCounters = {
    starvations: 0,
    superblockBursts: 0,
    crashesOnFetch: 0,
    crashesOnRejoin: 0,
    longCrashes: 0,
    rots: 0,
    coreRuns: 0,
    coreRunsRejoining: 0,
    coreRefusedKnowledge: 0,
    coreRefusedHeld: 0,
    fullRestarts: 0,
  };

  constructor(cluster: Cluster<S>) {
    this.cluster = cluster;
    this.options = cluster.options;
    this.targetedPrng = new Prng(cluster.options.seed * 7 + 6);
    this.fullRestartPrng = new Prng(cluster.options.seed * 13 + 10);
  }

  private get replicas(): readonly SimReplica<S>[] {
    return this.cluster.replicas;
  }

  private get tickNow(): number {
    return this.cluster.tickNow;
  }

  /** One tick's faults: random crashes and restarts (once formed), then the targeted ones. */
  inject(): void {
    if (!this.formed) {
      this.formed = this.replicas.every(
        (entry) =>
          entry.replica !== null &&
          entry.replica.status === 'normal' &&
          (entry.replica.logView >= 1 || this.options.replicaCount === 1),
      );
      if (!this.formed) return;
    }
    const prng = this.cluster.prng;
    for (const entry of this.replicas) {
      if (entry.replica !== null) {
        if (prng.chance(this.options.crashProbability)) this.crashRandom(entry);
      } else if (prng.chance(this.options.restartProbability) && !entry.downUntilHeal) {
        this.cluster.restart(entry.index);
      }
    }
    this.injectTargeted();
  }

  /** A random crash; some land inside a storage request (a torn multi-step write) instead. */
  private crashRandom(entry: SimReplica<S>): void {
    const prng = this.cluster.prng;
    if (entry.storage.inFlight > 0 && prng.chance(this.options.crashInsideRequestProbability)) {
      entry.store.disk.crashAtOperation(prng.range(1, 6));
    } else {
      this.cluster.crash(entry.index, this.targetedPrng.chance(this.options.longCrashProbability));
    }
  }

  /** The audit's schedules, drawn from their own PRNG stream (see the file comment). */
  private injectTargeted(): void {
    this.injectStarvation();
    this.injectSuperblockBursts();
    if (this.targetedPrng.chance(this.options.snapshotRotProbability)) this.rotSnapshot();
    this.injectFullRestart();
    if (this.primaryCrashAtTick !== null && this.tickNow >= this.primaryCrashAtTick) {
      this.primaryCrashAtTick = null;
      const primary = this.cluster.livePrimary();
      if (primary !== null) {
        this.counters.crashesOnRejoin += 1;
        const index = primary.index;
        this.cluster.log(`r${index} CRASH (primary, while a lost disk rejoins) until healed`);
        this.cluster.crash(primary.index, true);
      }
    }
  }

  private injectStarvation(): void {
    const prng = this.targetedPrng;
    if (this.starving !== null && this.tickNow >= this.starving.untilTick) {
      // Often another backup starves right away: the prepares the first one gets again are then
      // held by it alone (the schedule of the audit's defect A).
      const previous = this.starving.replica;
      this.starving = null;
      const primary = this.cluster.livePrimary();
      const others = this.replicas.filter(
        (entry) =>
          entry.replica !== null && entry.index !== previous && entry.index !== primary?.index,
      );
      if (others.length > 0 && prng.chance(0.8)) this.starve(others, ` (after r${previous})`);
    }
    if (this.starving === null && prng.chance(this.options.starveProbability)) {
      const primary = this.cluster.livePrimary();
      const backups = this.replicas.filter(
        (entry) => entry.replica !== null && entry.index !== primary?.index,
      );
      if (backups.length > 0) this.starve(backups, '');
    }
  }

  private injectSuperblockBursts(): void {
    const prng = this.targetedPrng;
    for (const entry of this.replicas) {
      if (entry.superblockFailingUntil > 0 && this.tickNow >= entry.superblockFailingUntil) {
        entry.superblockFailingUntil = 0;
        entry.storage.superblockFailureProbability = this.options.superblockFailureProbability;
      }
      if (entry.replica === null) continue;
      if (entry.superblockFailingUntil > 0) continue;
      if (!prng.chance(this.options.superblockBurstProbability)) continue;
      const untilTick = this.tickNow + prng.range(30, 300);
      entry.superblockFailingUntil = untilTick;
      entry.storage.superblockFailureProbability = 1;
      this.counters.superblockBursts += 1;
      this.cluster.log(`r${entry.index} SUPERBLOCK WRITES FAIL until ${untilTick}`);
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
      this.cluster.restart(index);
    }
    if (this.fullRestartAt.size > 0 || this.options.replicaCount === 1) return;
    if (!prng.chance(this.options.fullRestartProbability)) return;
    if (this.replicas.some((entry) => entry.replica === null)) return;
    this.counters.fullRestarts += 1;
    this.cluster.log('FULL CLUSTER RESTART');
    for (const entry of this.replicas) {
      this.cluster.crash(entry.index);
      // Held down (no random restart) until its own restart tick.
      entry.downUntilHeal = true;
      this.fullRestartAt.set(entry.index, this.tickNow + prng.range(1, 12));
    }
  }

  /** Starves one of `candidates` of prepares for an exponentially drawn stretch. */
  private starve(candidates: readonly SimReplica<S>[], note: string): void {
    const prng = this.targetedPrng;
    const ticks = Math.ceil(-Math.log(1 - prng.float()) * this.options.starveMeanTicks);
    this.starving = { replica: prng.pick(candidates).index, untilTick: this.tickNow + ticks };
    this.counters.starvations += 1;
    this.cluster.log(`r${this.starving.replica} STARVED of prepares for ${ticks} ticks${note}`);
  }

  /** A starved backup gets no prepare, and its repair requests are lost; all else flows. */
  drops(from: number, to: number, message: DecodedFrame): boolean {
    const starving = this.starving;
    if (starving === null || !this.enabled) return false;
    const command = message.header.command;
    return (
      (to === starving.replica && command === Command.prepare) ||
      (from === starving.replica && command === Command.requestPrepares)
    );
  }

  /** Bit rot in a live replica's snapshot file, the primary's more often than not. */
  private rotSnapshot(): void {
    const prng = this.targetedPrng;
    const live = this.replicas.filter(
      (entry) =>
        entry.replica !== null &&
        entry.store.disk.exists(SNAPSHOT_FILE) &&
        entry.store.disk.size(SNAPSHOT_FILE) > 0,
    );
    if (live.length === 0) return;
    const primary = live.find((entry) => entry.replica!.activePrimary);
    const target = primary !== undefined && prng.chance(0.7) ? primary : prng.pick(live);
    if (target.rotten || !this.wipeBudgetAvailable(target.index)) return;
    target.store.disk.corrupt(SNAPSHOT_FILE);
    target.rotten = true;
    this.counters.rots += 1;
    this.cluster.log(`r${target.index} SNAPSHOT ROTS at rest`);
  }

  /** After a crash: count a long one; maybe the disk was damaged or lost with it. */
  crashed(entry: SimReplica<S>, untilHeal: boolean): void {
    if (untilHeal) this.counters.longCrashes += 1;
    if (
      this.enabled &&
      this.cluster.prng.chance(this.options.diskLossProbability) &&
      this.wipeBudgetAvailable(entry.index)
    ) {
      this.damageDisk(entry);
    }
  }

  /** At most one replica at a time may catch up from a lost disk or hold a rotten snapshot. */
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
        const replica = other.replica;
        if (replica.status !== 'normal' || replica.commitMin < other.wipedCatchUpOp) return false;
        other.wipedCatchUpOp = null;
        other.rejoinPending = false;
      }
      return true;
    });
  }

  /** Disk damage at rest: lose the disk, or flip a bit in the snapshot or a superblock slot. */
  private damageDisk(entry: SimReplica<S>): void {
    const prng = this.cluster.prng;
    const disk = entry.store.disk;
    const candidates = [SNAPSHOT_FILE, ...SUPERBLOCK_FILES].filter(
      (name) => disk.exists(name) && disk.size(name) > 0,
    );
    if (candidates.length === 0 || prng.chance(0.5)) {
      this.cluster.log(`r${entry.index} DISK LOST`);
      this.cluster.loseDisk(entry.index);
      return;
    }
    const name = prng.pick(candidates);
    this.cluster.log(`r${entry.index} DISK CORRUPT ${name}`);
    disk.corrupt(name);
  }

  /**
   * Book-keeping after every tick, per replica: rot healed, a fetch started (maybe the primary
   * crashes), a lost disk installed a checkpoint (maybe the primary crashes later).
   */
  observe(entry: SimReplica<S>): void {
    const replica = entry.replica;
    if (entry.rotten) {
      const disk = entry.store.disk;
      const file = disk.exists(SNAPSHOT_FILE) ? disk.readAll(SNAPSHOT_FILE) : new Uint8Array(0);
      // Rewritten (a checkpoint, a repair, an install) or wiped: the fault is over.
      if (file.byteLength === 0 || this.cluster.kernels.trailerSplit(file).status === 'valid') {
        entry.rotten = false;
      }
    }
    const stage = replica?.stateTransfer.stage ?? 'idle';
    if (stage === 'fetching' && entry.stageLast !== 'fetching') this.onFetchStarted(entry);
    entry.stageLast = stage;
    if (replica === null) {
      entry.installsLast = 0;
      return;
    }
    const installs = replica.counters.stateTransfersInstalled;
    if (installs > entry.installsLast && replica.nackUnknown) this.onRejoinInstalled(entry);
    entry.installsLast = installs;
  }

  /** A replica just accepted a checkpoint to fetch: maybe the primary crashes now. */
  private onFetchStarted(entry: SimReplica<S>): void {
    if (!this.enabled || !this.formed) return;
    if (!this.targetedPrng.chance(this.options.crashPrimaryOnFetchProbability)) return;
    const primary = this.cluster.livePrimary();
    if (primary === null || primary.index === entry.index) return;
    this.counters.crashesOnFetch += 1;
    this.cluster.log(`r${primary.index} CRASH (primary, as r${entry.index} starts fetching)`);
    this.cluster.crash(primary.index, this.targetedPrng.chance(this.options.longCrashProbability));
  }

  /** A replica that lost its disk installed a checkpoint: maybe the primary crashes a bit later. */
  private onRejoinInstalled(entry: SimReplica<S>): void {
    if (!this.enabled || !this.formed || this.primaryCrashAtTick !== null) return;
    if (!this.targetedPrng.chance(this.options.crashPrimaryOnRejoinProbability)) return;
    this.primaryCrashAtTick = this.tickNow + this.targetedPrng.range(0, 200);
    this.cluster.log(
      `r${entry.index} rejoining installed a checkpoint: ` +
        `the primary crashes at ${this.primaryCrashAtTick}`,
    );
  }

  /**
   * Stops injecting: the network heals and every replica's fault state is cleared (superblock
   * bursts, armed crash points, long crashes). Restarting the replicas is the caller's.
   */
  heal(): void {
    this.enabled = false;
    this.starving = null;
    this.primaryCrashAtTick = null;
    this.fullRestartAt.clear();
    this.cluster.network.options = NETWORK_NO_FAULTS;
    this.cluster.network.heal();
    for (const entry of this.replicas) {
      entry.superblockFailingUntil = 0;
      entry.storage.superblockFailureProbability = 0;
      entry.store.disk.clearCrashPoint();
      entry.downUntilHeal = false;
    }
  }
}

/**
 * A deterministic packet simulator (TigerBeetle's PacketSimulator, simplified). Every choice
 * (delay, loss, duplication, partitions, clogging) is drawn from one seeded PRNG, so a seed
 * replays the same delivery order exactly.
 *
 * Nodes are numbered: replicas 0..replicaCount-1, clients from CLIENT_NODE_BASE. Delays are
 * exponentially distributed per packet, which reorders packets naturally; a path (ordered pair of
 * nodes) holds a bounded number of packets in flight and drops the overflow.
 */
import { assert } from '../stdx/assert.js';
import type { Prng } from '../stdx/prng.js';

export const CLIENT_NODE_BASE = 1000;

export interface NetworkOptions {
  /** Minimum one-way delay in ticks. */
  readonly delayMinTicks: number;
  /** Mean extra delay (exponential) in ticks. */
  readonly delayMeanTicks: number;
  /** Probability that a packet is lost. */
  readonly lossProbability: number;
  /** Probability that a packet is delivered twice. */
  readonly duplicateProbability: number;
  /** Packets in flight per path before the overflow is dropped. */
  readonly pathCapacity: number;
  /** Per-tick probability that a partition forms (when none is active). */
  readonly partitionProbability: number;
  /** Per-tick probability that an active partition heals. */
  readonly unpartitionProbability: number;
  /** Partitions may be one-way (asymmetric). */
  readonly partitionAsymmetric: boolean;
  /** Per-tick probability that a path is clogged (its packets held back). */
  readonly clogProbability: number;
  /** Mean clog duration in ticks. */
  readonly clogMeanTicks: number;
}

export const NETWORK_NO_FAULTS: NetworkOptions = {
  delayMinTicks: 1,
  delayMeanTicks: 2,
  lossProbability: 0,
  duplicateProbability: 0,
  pathCapacity: 1024,
  partitionProbability: 0,
  unpartitionProbability: 1,
  partitionAsymmetric: false,
  clogProbability: 0,
  clogMeanTicks: 0,
};

interface Packet {
  readonly from: number;
  readonly to: number;
  readonly frame: Uint8Array;
  readonly deliverAt: number;
  readonly sequence: number;
}

export interface NetworkCounters {
  sent: number;
  delivered: number;
  lost: number;
  duplicated: number;
  dropped: number;
  partitions: number;
}

/** A scenario's hand on the wire: deliver, drop, or replace a packet at delivery time. */
export type PacketFilter = (packet: {
  from: number;
  to: number;
  frame: Uint8Array;
}) => 'deliver' | 'drop' | Uint8Array;

export class NetworkSim {
  options: NetworkOptions;
  /** Scenario tests intercept packets here (null: deliver everything). */
  filter: PacketFilter | null = null;
  private readonly prng: Prng;
  private readonly replicaCount: number;
  private queue: Packet[] = [];
  private sequence = 0;
  private now = 0;
  /** Links that are cut: key `from->to`. */
  private readonly cut = new Set<string>();
  private readonly clogged = new Map<string, number>();
  private partitioned = false;
  readonly counters: NetworkCounters = {
    sent: 0,
    delivered: 0,
    lost: 0,
    duplicated: 0,
    dropped: 0,
    partitions: 0,
  };

  constructor(prng: Prng, replicaCount: number, options: NetworkOptions) {
    this.prng = prng;
    this.replicaCount = replicaCount;
    this.options = options;
  }

  private key(from: number, to: number): string {
    return `${from}->${to}`;
  }

  send(from: number, to: number, frame: Uint8Array): void {
    this.counters.sent += 1;
    if (from === to) return;
    if (this.cut.has(this.key(from, to))) {
      this.counters.lost += 1;
      return;
    }
    if (this.prng.chance(this.options.lossProbability)) {
      this.counters.lost += 1;
      return;
    }
    const inFlight = this.queue.reduce(
      (count, packet) => count + (packet.from === from && packet.to === to ? 1 : 0),
      0,
    );
    if (inFlight >= this.options.pathCapacity) {
      this.counters.dropped += 1;
      return;
    }
    this.enqueue(from, to, frame);
    if (this.prng.chance(this.options.duplicateProbability)) {
      this.counters.duplicated += 1;
      this.enqueue(from, to, frame);
    }
  }

  private enqueue(from: number, to: number, frame: Uint8Array): void {
    const meanTicks = this.options.delayMeanTicks;
    const extra = meanTicks <= 0 ? 0 : -Math.log(1 - this.prng.float()) * meanTicks;
    const deliverAt = this.now + this.options.delayMinTicks + Math.floor(extra);
    // A copy: the receiver may not mutate what the sender keeps (a sealed prepare in a journal).
    this.queue.push({ from, to, frame: frame.slice(), deliverAt, sequence: this.sequence++ });
  }

  /** Advances one tick and returns the packets due, in (deliverAt, sequence) order. */
  tick(): Packet[] {
    this.now += 1;
    this.tickFaults();
    const due: Packet[] = [];
    const kept: Packet[] = [];
    for (const packet of this.queue) {
      const clogUntil = this.clogged.get(this.key(packet.from, packet.to)) ?? 0;
      if (packet.deliverAt <= this.now && clogUntil <= this.now) due.push(packet);
      else kept.push(packet);
    }
    this.queue = kept;
    due.sort((a, b) => a.deliverAt - b.deliverAt || a.sequence - b.sequence);
    const delivered: Packet[] = [];
    for (const packet of due) {
      // A partition formed while the packet was in flight also eats it.
      if (this.cut.has(this.key(packet.from, packet.to))) {
        this.counters.lost += 1;
        continue;
      }
      const verdict = this.filter === null ? 'deliver' : this.filter(packet);
      if (verdict === 'drop') this.counters.lost += 1;
      else if (verdict === 'deliver') delivered.push(packet);
      else delivered.push({ ...packet, frame: verdict });
    }
    this.counters.delivered += delivered.length;
    return delivered;
  }

  private tickFaults(): void {
    if (this.partitioned) {
      if (this.prng.chance(this.options.unpartitionProbability)) this.heal();
    } else if (this.prng.chance(this.options.partitionProbability)) {
      this.partitionRandom();
    }
    if (this.prng.chance(this.options.clogProbability)) {
      const from = this.prng.int(this.replicaCount);
      const to = this.prng.int(this.replicaCount);
      const ticks = Math.ceil(-Math.log(1 - this.prng.float()) * this.options.clogMeanTicks);
      this.clogged.set(this.key(from, to), this.now + ticks);
    }
  }

  /** Cuts the replicas into two sides (isolating one replica, or random halves). */
  partitionRandom(): void {
    const side = new Set<number>();
    if (this.prng.chance(0.5)) side.add(this.prng.int(this.replicaCount));
    else {
      for (let replica = 0; replica < this.replicaCount; replica++) {
        if (this.prng.chance(0.5)) side.add(replica);
      }
    }
    if (side.size === 0 || side.size === this.replicaCount) return;
    const oneWay = this.options.partitionAsymmetric && this.prng.chance(0.5);
    for (let a = 0; a < this.replicaCount; a++) {
      for (let b = 0; b < this.replicaCount; b++) {
        if (side.has(a) === side.has(b)) continue;
        if (oneWay && side.has(b)) continue;
        this.cut.add(this.key(a, b));
      }
    }
    this.partitioned = true;
    this.counters.partitions += 1;
  }

  /** Isolates `replica` from every other replica (both directions), for scenario tests. */
  isolate(replica: number): void {
    for (let other = 0; other < this.replicaCount; other++) {
      if (other === replica) continue;
      this.cut.add(this.key(replica, other));
      this.cut.add(this.key(other, replica));
    }
    this.partitioned = true;
  }

  /** Cuts one direction of one link, for scenario tests. */
  cutLink(from: number, to: number): void {
    this.cut.add(this.key(from, to));
    this.partitioned = true;
  }

  heal(): void {
    this.cut.clear();
    this.clogged.clear();
    this.partitioned = false;
  }

  /** Drops every packet addressed to `node` (it crashed: its sockets are gone). */
  /** Packets from `from` to `to` still on the wire (delayed or clogged). */
  inFlightBetween(from: number, to: number): boolean {
    return this.queue.some((packet) => packet.from === from && packet.to === to);
  }

  dropTo(node: number): void {
    this.queue = this.queue.filter((packet) => packet.to !== node);
  }

  get inFlight(): number {
    return this.queue.length;
  }

  assertQuiet(): void {
    assert(this.queue.every((packet) => packet.deliverAt >= this.now), 'no packet is overdue');
  }
}

/**
 * Who may hold an inbound replica connection before it authenticates (the replica port is open
 * to the network, and the handshake costs the acceptor a socket, a timer and a MAC).
 *
 * An inbound connection is first *unclaimed*: accepted, nothing verified yet. Anyone can open
 * one, so these are bounded twice: at most `perSourceMax` per source address (an IPv4 address, or
 * an IPv6 /64, which one host gets whole) and at most `unclaimedMax` in all. A newcomer is never
 * refused for want of room: it displaces an unclaimed connection of its source (at the source's
 * bound) or of any source (at the pool's), chosen at random among those older than `graceMs`,
 * or among all when none is. So:
 *   - an outsider holding connections open only ever holds its own source's share, and what it
 *     holds is displaced by the next connection that arrives, an honest peer's included; a peer
 *     whose dial arrives then keeps its slot for `graceMs`, ample time for the Hello it sends
 *     first thing;
 *   - an outsider churning connections as fast as it can (so that every slot is always young)
 *     makes each newcomer a lottery it cannot rig: the peer's connection survives each arrival
 *     with probability 1 - 1/slots, sends its Hello within a round trip, and redials otherwise.
 * The bounds make the flood cost the replica a bounded set of sockets, never unbounded memory.
 *
 * A connection whose Hello verified (its sender holds the cluster key: replica-auth.ts) is
 * *claimed* by the replica it names and leaves the unclaimed pool for a reserve of its own,
 * `claimsPerPeerMax` per claimed replica, the newest claim replacing the oldest (a restarted
 * peer's fresh dial replaces the stale one). Nothing an outsider without the key can send
 * reaches the reserve, so a configured replica's reconnect is never starved by strangers. What
 * still competes with it: a flood from its own source, for its unverified slots and by lot only
 * (above), and an on-path attacker replaying its Hellos into its reserve, outside what this
 * defends (the PSK handshake without TLS does not claim to stop on-path attackers).
 *
 * Pure bookkeeping, no sockets and no clock of its own: the bus supplies the time and closes
 * what this says to close, so the rules are tested without a network.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { assert } from '../stdx/assert.js';

/**
 * Unclaimed connections from one source at most. Larger than a replica needs (it dials once per
 * peer) so that a flood sharing a peer's source leaves each of its dials a good lottery.
 */
export const INBOUND_PER_SOURCE_MAX_DEFAULT = 64;
/** Claims pending per claimed replica: the newest two dials of a restarting peer. */
export const CLAIMS_PER_PEER_MAX = 2;
/** How long an admitted connection keeps its slot against newcomers. */
export const ADMISSION_GRACE_MS_DEFAULT = 250;

export interface AdmissionOptions {
  readonly unclaimedMax: number;
  readonly perSourceMax: number;
  readonly claimsPerPeerMax: number;
  readonly graceMs: number;
}

/** Which bound made a newcomer displace another connection (stable snake_case: metric labels). */
export type AdmissionBound = 'source_max' | 'handshakes_max';

/** A newcomer is always admitted; `evict` is the connection it displaces, if any. */
export interface AdmitDecision<T> {
  readonly evict: T | null;
  readonly bound: AdmissionBound | null;
}

interface Entry {
  readonly source: string;
  readonly admittedAtMs: number;
  claimed: number | null;
}

/**
 * The source an address counts against: IPv4 (also IPv4-mapped IPv6) as is, IPv6 by its /64.
 * Unknown addresses (a socket already gone) share one source.
 */
export function sourceOf(address: string | undefined): string {
  if (address === undefined) return '?';
  const mapped = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  if (isIPv4(mapped)) return mapped;
  if (!isIPv6(address)) return address;
  const [head = '', tail = ''] = address.split('%')[0]!.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = address.includes('::') && tail !== '' ? tail.split(':') : [];
  const zeros = Array.from({ length: 8 - headGroups.length - tailGroups.length }, () => '0');
  const groups = address.includes('::') ? [...headGroups, ...zeros, ...tailGroups] : headGroups;
  return `${groups.slice(0, 4).map((group) => group.toLowerCase().replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

export class InboundAdmission<T> {
  readonly #options: AdmissionOptions;
  /** Uniform in [0, 1): the choice among displaceable connections (tests pass a seeded one). */
  readonly #random: () => number;
  readonly #entries = new Map<T, Entry>();
  /** Unclaimed entries, oldest first (a Set iterates in insertion order). */
  readonly #unclaimed = new Set<T>();
  readonly #bySource = new Map<string, number>();
  /** Claimed entries per replica, oldest first; each at most claimsPerPeerMax long. */
  readonly #claims = new Map<number, T[]>();

  constructor(options: AdmissionOptions, random: () => number) {
    assert(options.unclaimedMax >= 1 && options.perSourceMax >= 1 && options.claimsPerPeerMax >= 1, 'admission: bounds >= 1');
    assert(options.perSourceMax <= options.unclaimedMax, 'admission: a source gets at most the whole pool');
    assert(options.graceMs >= 0, 'admission: graceMs >= 0');
    this.#options = options;
    this.#random = random;
  }

  get unclaimed(): number {
    return this.#unclaimed.size;
  }

  get claimed(): number {
    return this.#entries.size - this.#unclaimed.size;
  }

  /**
   * Which unclaimed connection a newcomer from `source` displaces now, if any (the caller closes
   * it and calls `release`, then `add`s the newcomer).
   */
  admit(source: string, nowMs: number): AdmitDecision<T> {
    if ((this.#bySource.get(source) ?? 0) >= this.#options.perSourceMax) {
      return { evict: this.#victim(source, nowMs), bound: 'source_max' };
    }
    if (this.#unclaimed.size >= this.#options.unclaimedMax) {
      return { evict: this.#victim(null, nowMs), bound: 'handshakes_max' };
    }
    return { evict: null, bound: null };
  }

  add(connection: T, source: string, nowMs: number): void {
    assert(!this.#entries.has(connection), 'admission: a connection is added once');
    assert((this.#bySource.get(source) ?? 0) < this.#options.perSourceMax, 'admission: within the source bound');
    assert(this.#unclaimed.size < this.#options.unclaimedMax, 'admission: within the pool bound');
    this.#entries.set(connection, { source, admittedAtMs: nowMs, claimed: null });
    this.#unclaimed.add(connection);
    this.#bySource.set(source, (this.#bySource.get(source) ?? 0) + 1);
  }

  /**
   * `connection`'s Hello verified, naming `replica`: it moves to that replica's reserve. Returns
   * the claim it replaces (the oldest, when the reserve is full), for the caller to close.
   */
  claim(connection: T, replica: number): T | null {
    const entry = this.#entries.get(connection);
    assert(entry !== undefined && entry.claimed === null, 'admission: an unclaimed connection claims once');
    this.#leaveUnclaimed(connection, entry);
    entry.claimed = replica;
    const claims = this.#claims.get(replica) ?? [];
    this.#claims.set(replica, claims);
    let replaced: T | null = null;
    if (claims.length >= this.#options.claimsPerPeerMax) {
      replaced = claims[0]!;
      this.release(replaced);
    }
    claims.push(connection);
    assert(claims.length <= this.#options.claimsPerPeerMax, 'admission: claims within their bound');
    return replaced;
  }

  /** The connection is gone, authenticated or announced: it holds no slot. Idempotent. */
  release(connection: T): void {
    const entry = this.#entries.get(connection);
    if (entry === undefined) return;
    this.#entries.delete(connection);
    if (entry.claimed === null) {
      this.#leaveUnclaimed(connection, entry);
      return;
    }
    const claims = this.#claims.get(entry.claimed);
    assert(claims !== undefined, 'a claim is in its replica reserve');
    claims.splice(claims.indexOf(connection), 1);
    if (claims.length === 0) this.#claims.delete(entry.claimed);
  }

  /**
   * A random unclaimed connection (of `source`, or of any) past the grace, else a random one.
   * Random, not the oldest: under a flood the oldest is predictable, so a churning attacker could
   * time its arrivals to displace each honest connection just before its Hello is read.
   */
  #victim(source: string | null, nowMs: number): T {
    const candidates: T[] = [];
    const settled: T[] = [];
    for (const connection of this.#unclaimed) {
      const entry = this.#entries.get(connection)!;
      if (source !== null && entry.source !== source) continue;
      candidates.push(connection);
      if (nowMs - entry.admittedAtMs >= this.#options.graceMs) settled.push(connection);
    }
    const pool = settled.length > 0 ? settled : candidates;
    assert(pool.length > 0, 'a bound that is reached has a connection to displace');
    return pool[Math.min(pool.length - 1, Math.floor(this.#random() * pool.length))]!;
  }

  #leaveUnclaimed(connection: T, entry: Entry): void {
    this.#unclaimed.delete(connection);
    const count = this.#bySource.get(entry.source) ?? 0;
    assert(count >= 1, 'admission: a source count covers its connections');
    if (count === 1) this.#bySource.delete(entry.source);
    else this.#bySource.set(entry.source, count - 1);
  }
}

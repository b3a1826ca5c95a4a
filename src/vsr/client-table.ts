/**
 * The client (session) table: one entry per registered client, replicated by committing the same
 * Register/Logout/request ops in the same order on every replica (iggy-metadata-plane.md §3,
 * TigerBeetle's client_sessions).
 *
 * Why sessions go through consensus (TigerBeetle, after VRR): updating the table on request or
 * prepare (uncommitted) can lock a client out when a view change reorders the request away, and
 * numbering sessions locally lets request numbers collide across client restarts. So a session
 * is created by a committed Register whose commit op becomes the session's `epoch`, and only
 * committed requests touch the table. Replies are built from the prepare header alone, so every
 * replica caches byte-identical replies and a client can retry against any primary.
 *
 * Eviction, when a Register needs room, never lets one user's flood of logins push out another
 * user's sessions: a user already holding `sessionsPerUserMax` sessions gives up its own least
 * recently used one, and a full table takes the least recently used session among the users
 * holding the most. A lone user's sessions go as before, least recent first. Every choice reads
 * committed state only, in an order independent of how the table was built (a table restored
 * from a snapshot evicts exactly as the one that lived through the ops).
 *
 * Capacity is fixed per replica at construction (`clients_table_max`) and applied BEFORE any
 * recovered or transferred table is installed: the seed PR's first commit describes a boot crash
 * when capacity was set after WAL replay had already repopulated the table. A table restored from
 * a checkpoint or received by transfer grows to fit what it holds, never shrinks below it, and
 * never falls back to a compile-time default.
 */
import { assert } from '../stdx/assert.js';
import type { ClientEntrySnapshot } from '../format/snapshot-model.js';

/**
 * Most recent committed replies kept per client (newest last). Older retries get AlreadyApplied.
 */
export const REPLY_RING_CAPACITY = 5;
/** The largest `clients_table_max` accepted (slot indexes fit a u16). */
export const CLIENTS_TABLE_SLOT_MAX = 1 << 16;
export const CLIENTS_TABLE_MIN = 2;

/** Offsets of the Reply header fields the table reads back (iggy-metadata-plane.md §1.4). */
const REPLY_OFFSET_COMMAND = 60;
const REPLY_OFFSET_CLIENT = 160;
const REPLY_OFFSET_COMMIT = 184;
const REPLY_OFFSET_REQUEST = 200;
const COMMAND_REPLY = 8;
const REPLY_HEADER_SIZE = 256;

/**
 * A committed reply as cached: the full reply wire bytes plus the fields eviction and dedup use.
 */
export interface CachedReply {
  /** The request number this reply answers (0 for a Register). */
  readonly request: number;
  /** The op that produced the reply (the reply header's `commit`): orders eviction. */
  readonly commit: number;
  readonly bytes: Uint8Array;
}

export interface ClientEntry {
  readonly clientId: bigint;
  readonly slot: number;
  /**
   * Commit op of the latest committed Register: the session number clients echo. Never regresses.
   */
  epoch: number;
  /** The user authenticated at (re)bind; stamps `user_id` on this client's prepares. */
  userId: number;
  /** Highest committed request number (0 until the first application op). */
  watermark: number;
  /** request_checksum of the watermark request (0 = unstamped: the reuse check is skipped). */
  watermarkChecksum: bigint;
  /** Up to REPLY_RING_CAPACITY replies, oldest first; never empty; request numbers unique. */
  readonly ring: CachedReply[];
  /** Commit op of the newest cached reply (denormalized; drives eviction). */
  latestCommit: number;
}

/** The outcome of checking a request against the table (§3.2), in check order. */
export type RequestCheck =
  | { readonly kind: 'no_session' }
  | { readonly kind: 'fenced' }
  | { readonly kind: 'epoch_ahead' }
  | { readonly kind: 'new' }
  | { readonly kind: 'checksum_mismatch' }
  | { readonly kind: 'duplicate'; readonly reply: CachedReply }
  | { readonly kind: 'already_applied' };

export type CommitReplyOutcome = 'ok' | 'no_entry' | 'skipped_regression';

/** Parses the fields the table needs out of reply wire bytes; null when they are not a reply. */
export function parseCachedReply(bytes: Uint8Array): CachedReply | null {
  if (bytes.byteLength < REPLY_HEADER_SIZE) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes[REPLY_OFFSET_COMMAND] !== COMMAND_REPLY) return null;
  if (view.getUint32(48, true) !== bytes.byteLength) return null;
  const commit = readU64(view, REPLY_OFFSET_COMMIT);
  const request = readU64(view, REPLY_OFFSET_REQUEST);
  if (commit === null || request === null) return null;
  return { request, commit, bytes };
}

export function replyClientId(bytes: Uint8Array): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const low = view.getBigUint64(REPLY_OFFSET_CLIENT, true);
  const high = view.getBigUint64(REPLY_OFFSET_CLIENT + 8, true);
  return low | (high << 64n);
}

function readU64(view: DataView, offset: number): number | null {
  const high = view.getUint32(offset + 4, true);
  if (high > 0x1f_ffff) return null;
  return high * 0x1_0000_0000 + view.getUint32(offset, true);
}

export class ClientTable {
  /** Slot array (length = capacity); null = free. */
  private slots: (ClientEntry | null)[];
  private readonly index = new Map<bigint, ClientEntry>();
  /** Derived: each user's entries (never empty sets). Iteration order is never relied on. */
  private readonly byUser = new Map<number, Set<ClientEntry>>();
  /** Sessions one user may hold before its next Register evicts its own least recent one. */
  readonly sessionsPerUserMax: number;

  constructor(capacity: number, sessionsPerUserMax: number = capacity) {
    assert(Number.isInteger(capacity), 'client table capacity is an integer');
    assert(
      capacity >= CLIENTS_TABLE_MIN && capacity <= CLIENTS_TABLE_SLOT_MAX,
      'capacity in range',
    );
    assert(
      Number.isInteger(sessionsPerUserMax) && sessionsPerUserMax >= 1,
      'sessions per user >= 1',
    );
    this.slots = new Array<ClientEntry | null>(capacity).fill(null);
    this.sessionsPerUserMax = sessionsPerUserMax;
  }

  /** Sessions `userId` holds. */
  sessionsOf(userId: number): number {
    return this.byUser.get(userId)?.size ?? 0;
  }

  get capacity(): number {
    return this.slots.length;
  }

  get size(): number {
    return this.index.size;
  }

  get(clientId: bigint): ClientEntry | undefined {
    return this.index.get(clientId);
  }

  entries(): IterableIterator<ClientEntry> {
    return this.index.values();
  }

  /** The request check order of §3.2. Pure: does not modify the table. */
  checkRequest(
    clientId: bigint,
    epoch: number,
    request: number,
    requestChecksum: bigint,
  ): RequestCheck {
    const entry = this.index.get(clientId);
    if (entry === undefined) return { kind: 'no_session' };
    if (epoch < entry.epoch) return { kind: 'fenced' };
    if (epoch > entry.epoch) return { kind: 'epoch_ahead' };
    if (request > entry.watermark) return { kind: 'new' };
    if (request === entry.watermark && requestChecksum !== 0n && entry.watermarkChecksum !== 0n) {
      if (requestChecksum !== entry.watermarkChecksum) return { kind: 'checksum_mismatch' };
    }
    for (const reply of entry.ring) {
      if (reply.request === request) return { kind: 'duplicate', reply };
    }
    return { kind: 'already_applied' };
  }

  /**
   * A committed Register. The reply's `commit` (the register op) becomes the epoch, so it is the
   * same on every replica. Returns the client evicted to make room, if any.
   */
  commitRegister(clientId: bigint, userId: number, reply: CachedReply): bigint | null {
    assert(clientId !== 0n, 'client id 0 is reserved');
    assert(reply.request === 0, 'a register reply answers request 0');
    const existing = this.index.get(clientId);
    if (existing !== undefined) {
      assert(reply.commit > existing.epoch, 'a rebind strictly raises the epoch');
      existing.epoch = reply.commit;
      this.unindexUser(existing);
      existing.userId = userId;
      this.indexUser(existing);
      // Keep the dedup history (the watermark) across rebinds; drop the old register reply.
      const previous = existing.ring.findIndex((cached) => cached.request === 0);
      if (previous >= 0) existing.ring.splice(previous, 1);
      pushReply(existing.ring, reply);
      existing.latestCommit = Math.max(existing.latestCommit, reply.commit);
      return null;
    }
    const held = this.sessionsOf(userId);
    const evicted = this.evictFor(userId);
    const slot = this.slots.indexOf(null);
    assert(slot >= 0, 'a free slot exists after eviction');
    const entry: ClientEntry = {
      clientId,
      slot,
      epoch: reply.commit,
      userId,
      watermark: 0,
      watermarkChecksum: 0n,
      ring: [reply],
      latestCommit: reply.commit,
    };
    this.slots[slot] = entry;
    this.index.set(clientId, entry);
    this.indexUser(entry);
    assert(
      this.sessionsOf(userId) <= Math.max(this.sessionsPerUserMax, held),
      'a user at its share gave one up',
    );
    return evicted;
  }

  /**
   * A committed application op's reply. Best effort and never fatal: eviction is replica-local in
   * effect (a transport cleanup removes entries locally), so a missing entry or a regression is
   * skipped rather than asserted.
   */
  commitReply(clientId: bigint, requestChecksum: bigint, reply: CachedReply): CommitReplyOutcome {
    const entry = this.index.get(clientId);
    if (entry === undefined) return 'no_entry';
    if (reply.commit < entry.latestCommit || reply.request < entry.watermark) {
      return 'skipped_regression';
    }
    if (reply.request === entry.watermark) {
      const at = entry.ring.findIndex((cached) => cached.request === reply.request);
      if (at >= 0) entry.ring[at] = reply;
      else pushReply(entry.ring, reply);
    } else {
      pushReply(entry.ring, reply);
      entry.watermark = reply.request;
    }
    entry.watermarkChecksum = requestChecksum;
    entry.latestCommit = reply.commit;
    return 'ok';
  }

  remove(clientId: bigint): boolean {
    const entry = this.index.get(clientId);
    if (entry === undefined) return false;
    this.index.delete(clientId);
    this.slots[entry.slot] = null;
    this.unindexUser(entry);
    return true;
  }

  /**
   * Makes room for a new session of `userId`, if it needs any (module comment): the user's own
   * least recent session once it holds its share, else, in a full table, the least recent session
   * among the users holding the most. Returns the evicted client.
   */
  private evictFor(userId: number): bigint | null {
    const own = this.byUser.get(userId);
    let victim: ClientEntry | null = null;
    if (own !== undefined && own.size >= this.sessionsPerUserMax) victim = leastRecent([own]);
    else if (this.index.size === this.slots.length) victim = leastRecent(this.largestUsers());
    if (victim === null) return null;
    this.remove(victim.clientId);
    return victim.clientId;
  }

  /** The entries of every user holding the most sessions. */
  private largestUsers(): Set<ClientEntry>[] {
    let largest: Set<ClientEntry>[] = [];
    for (const entries of this.byUser.values()) {
      const size = largest[0]?.size ?? 0;
      if (entries.size > size) largest = [entries];
      else if (entries.size === size) largest.push(entries);
    }
    assert(largest.length > 0, 'a full table has a user');
    return largest;
  }

  private indexUser(entry: ClientEntry): void {
    const entries = this.byUser.get(entry.userId);
    if (entries === undefined) this.byUser.set(entry.userId, new Set([entry]));
    else entries.add(entry);
  }

  private unindexUser(entry: ClientEntry): void {
    const entries = this.byUser.get(entry.userId);
    assert(entries !== undefined && entries.has(entry), 'an entry is indexed under its user');
    entries.delete(entry);
    if (entries.size === 0) this.byUser.delete(entry.userId);
  }

  /** The checkpoint form: occupied slots in slot order, latest reply only. */
  toSnapshot(): ClientEntrySnapshot[] {
    const out: ClientEntrySnapshot[] = [];
    for (const entry of this.slots) {
      if (entry === null) continue;
      const latest = entry.ring[entry.ring.length - 1];
      assert(latest !== undefined, 'a ring is never empty');
      out.push({
        slot: entry.slot,
        clientId: entry.clientId,
        epoch: entry.epoch,
        userId: entry.userId,
        watermark: entry.watermark,
        watermarkChecksum: entry.watermarkChecksum,
        reply: latest.bytes,
      });
    }
    return out;
  }

  /**
   * Rebuilds a table from its checkpoint form at `capacity` (the configured clients_table_max),
   * growing to fit the highest slot. Validates everything: the snapshot came from disk or a peer.
   * Throws ClientTableError with a reason on bad input.
   */
  static fromSnapshot(
    entries: readonly ClientEntrySnapshot[],
    capacity: number,
    sessionsPerUserMax: number = capacity,
  ): ClientTable {
    let needed = capacity;
    for (const entry of entries) needed = Math.max(needed, entry.slot + 1);
    if (needed > CLIENTS_TABLE_SLOT_MAX) {
      throw new ClientTableError('slot_out_of_range', 'slot >= 65536');
    }
    // A table holding more of one user's sessions than the share keeps them (it was built under
    // another configuration); the user's next Register gives one up, so it never grows.
    const table = new ClientTable(needed, sessionsPerUserMax);
    for (const snapshot of entries) {
      if (snapshot.clientId === 0n) {
        throw new ClientTableError('client_id_zero', 'client id 0 is reserved');
      }
      if (table.index.has(snapshot.clientId)) {
        throw new ClientTableError('duplicate_client', `client ${snapshot.clientId} appears twice`);
      }
      if (table.slots[snapshot.slot] !== null) {
        throw new ClientTableError('duplicate_slot', `slot ${snapshot.slot} appears twice`);
      }
      const reply = parseCachedReply(snapshot.reply);
      if (reply === null) {
        throw new ClientTableError('invalid_reply', `slot ${snapshot.slot} reply is not a reply`);
      }
      const entry: ClientEntry = {
        clientId: snapshot.clientId,
        slot: snapshot.slot,
        epoch: snapshot.epoch,
        userId: snapshot.userId,
        watermark: snapshot.watermark,
        watermarkChecksum: snapshot.watermarkChecksum,
        ring: [reply],
        latestCommit: reply.commit,
      };
      table.slots[snapshot.slot] = entry;
      table.index.set(snapshot.clientId, entry);
      table.indexUser(entry);
    }
    return table;
  }
}

/** The smallest `latestCommit`, ties to the lowest slot: committed state only, any set order. */
function leastRecent(sets: readonly Set<ClientEntry>[]): ClientEntry {
  let victim: ClientEntry | null = null;
  for (const entries of sets) {
    for (const entry of entries) {
      const older = victim === null || entry.latestCommit < victim.latestCommit;
      if (older || (entry.latestCommit === victim!.latestCommit && entry.slot < victim!.slot)) {
        victim = entry;
      }
    }
  }
  assert(victim !== null, 'a user holds a session');
  return victim;
}

function pushReply(ring: CachedReply[], reply: CachedReply): void {
  if (ring.length === REPLY_RING_CAPACITY) ring.shift();
  ring.push(reply);
  assert(ring.length <= REPLY_RING_CAPACITY, 'the reply ring is bounded');
}

export class ClientTableError extends Error {
  override readonly name = 'ClientTableError';
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(`client table: ${message}`);
    this.reason = reason;
  }
}

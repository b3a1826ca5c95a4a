/**
 * The HTTP edge's VSR client sessions, on the replica that receives the write (the primary:
 * backups forward writes over HTTP). Each credential (JWT id or PAT hash) owns a pool of sessions,
 * each registered lazily through a replicated Register, so concurrent writes with one credential
 * run in parallel instead of queueing behind one session.
 *
 * Bounds and the rules that keep them:
 *   - A pool holds at most `sessionsPerCredentialMax` sessions; a user at most
 *     `sessionsPerUserMax` over all its credentials (half its share of the client table); the
 *     node at most `sessionsMax` (clients_table_max / 2, so HTTP cannot crowd out binary clients).
 *   - A pool grows only when all its sessions are busy. At its user's bound it may take the slot
 *     of its user's least recently used idle session; at the node bound, that of the least
 *     recently used idle session of the users holding the most sessions. It never takes a busy
 *     session, nor one of a user holding fewer than the most: the write queues instead. So one
 *     user's flood of credentials churns only its own sessions. A credential left with no
 *     session at all (every slot busy elsewhere) is owed the next slot a busier pool releases, so
 *     no credential starves another.
 *   - A session carries one request at a time (VSR: one request in flight per client), and a
 *     write is submitted once, on one session, with one request number: a write is never retried
 *     here (a timeout answers "outcome unknown"), so a request cannot run twice.
 *   - Sessions idle for `idleTimeoutMs` are logged out (a replicated Logout frees their client
 *     table slot), except the pool's last one, which stays ready for the credential's next write.
 *   - At most `WRITES_QUEUED_MAX` writes wait for a session; one more is refused as unavailable
 *     (it never entered the log, so the client may retry it).
 */
import { randomBytes } from 'node:crypto';
import { Command, HEADER_SIZE } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import type { SessionKey, WriteOutcome } from '../http/node-api.js';
import { assert } from '../stdx/assert.js';
import { buildFrame, decodeFrame } from '../vsr/frame.js';
import { decodeHeader, Operation, type ReplyHeader, type RequestHeader } from '../vsr/header.js';
import { decodeRegisterPayload, encodeRegisterBody, parseResultBody } from '../vsr/reply.js';

/** How long a write waits for its committed reply before answering "outcome unknown". */
export const WRITE_TIMEOUT_MS = 10_000;
/**
 * A write without a reply this long is sent again, same request number and body, as a VSR client
 * retransmits: a primary may drop a request (its queue full, the client's previous one still in
 * flight, a view starting), and one drop must not cost the whole WRITE_TIMEOUT_MS. The client
 * table answers a copy of a committed request with its cached reply, never a second apply.
 */
export const WRITE_RETRANSMIT_MS = 500;
/** Sessions per credential unless configured (`http_sessions_per_credential`). */
export const SESSIONS_PER_CREDENTIAL_DEFAULT = 64;
/** How long a pool's extra session may stay unused before it is logged out. */
export const SESSION_IDLE_TIMEOUT_MS = 30_000;
/** Writes waiting for a session, over all credentials (each holds a request body). */
export const WRITES_QUEUED_MAX = 4096;

export interface SessionHost {
  readonly cluster: bigint;
  readonly kernels: Kernels;
  /** Submits a request to the local replica (it must be the primary). */
  submit(header: RequestHeader, body: Uint8Array): void;
  /** The replica can admit a request right now. */
  canAccept(): boolean;
  /** Iggy's u32 client id for a new session (shared with the binary connections' ids). */
  allocateClientId?(): number;
  /** Metrics: a request is submitted now; the returned function is called once when it ended. */
  startRequest?(): (outcome: 'reply' | 'eviction' | 'timeout' | 'not_accepted') => void;
  /** The wall clock in ms (idle expiry); Date.now unless a test drives it. */
  nowMs?(): number;
}

export interface SessionLimits {
  /** Sessions of all credentials together. */
  readonly sessionsMax: number;
  /** Sessions of one credential. */
  readonly sessionsPerCredentialMax: number;
  /** Sessions of one user, over all its credentials (default sessionsMax). */
  readonly sessionsPerUserMax?: number;
  readonly idleTimeoutMs?: number;
  readonly writeTimeoutMs?: number;
  /** Default WRITE_RETRANSMIT_MS. */
  readonly writeRetransmitMs?: number;
  /** Writes waiting for a session, over all credentials (default WRITES_QUEUED_MAX). */
  readonly writesQueuedMax?: number;
}

interface Session {
  readonly pool: Pool;
  /** Iggy's u32 id for /clients (the VSR session's own id is `clientId`, a u128). */
  readonly id: number;
  readonly clientId: bigint;
  /** The epoch (commit op of the Register), 0 while registering. */
  epoch: number;
  requestNext: number;
  lastUsedMs: number;
  /** A write or a logout holds it: nothing else may submit on it. */
  busy: boolean;
  /** Dropped (evicted, logged out, replaced): never handed out again. */
  dropped: boolean;
  /** A logout waits for this session to be free (it runs after the pool's queued writes). */
  onFree: (() => void) | undefined;
}

interface Pool {
  readonly key: SessionKey;
  readonly userId: number;
  /** Invariant: every session here is not dropped; length <= sessionsPerCredentialMax. */
  readonly sessions: Session[];
  /** Writes waiting for one of this pool's sessions, oldest first. */
  readonly waiters: ((session: Session | null) => void)[];
  /** Logged out or dropped: no new writes join it (a new pool serves the credential). */
  closed: boolean;
  /** In `owed`: it waits for a slot some other pool holds. */
  owed: boolean;
}

/** How a call ended, for the request-duration metric: a deny is a reply too. */
function requestOutcome(value: { body: Uint8Array } | { outcome: WriteOutcome }): 'reply' | 'eviction' | 'timeout' | 'not_accepted' {
  if ('body' in value) return 'reply';
  switch (value.outcome.kind) {
    case 'evicted':
      return 'eviction';
    case 'unavailable':
      return 'not_accepted';
    case 'unknown':
      return value.outcome.reason.startsWith('request denied') ? 'reply' : 'timeout';
    default:
      return 'reply';
  }
}

interface Pending {
  /** The reply's frame and its header, decoded and verified once, by `onClientFrame`. */
  readonly resolve: (reply: { frame: Uint8Array; header: ReplyHeader } | { evicted: true }) => void;
  readonly timer: NodeJS.Timeout;
}

export class ClientSessions {
  private readonly host: SessionHost;
  private readonly sessionsMax: number;
  private readonly sessionsPerCredentialMax: number;
  private readonly sessionsPerUserMax: number;
  private readonly idleTimeoutMs: number;
  private readonly writeTimeoutMs: number;
  private readonly writeRetransmitMs: number;
  private readonly writesQueuedMax: number;
  private readonly pools = new Map<SessionKey, Pool>();
  private readonly byClient = new Map<bigint, Session>();
  /** Live sessions per user id (never zero entries). */
  private readonly byUser = new Map<number, number>();
  private readonly pending = new Map<string, Pending>();
  /** Pools with waiters and no slot to grow into, oldest first (each at most once: `owed`). */
  private readonly owed: Pool[] = [];
  private queuedCount = 0;
  private idNext = 0;
  /**
   * Sessions dropped: `capacity` (its slot went to another session), `evicted` (the primary
   * evicted it), `idle` (logged out after idleTimeoutMs unused).
   */
  readonly evictions = { capacity: 0, evicted: 0, idle: 0 };

  constructor(host: SessionHost, limits: SessionLimits) {
    assert(limits.sessionsMax >= 1, 'at least one HTTP session');
    assert(limits.sessionsPerCredentialMax >= 1, 'at least one session per credential');
    this.host = host;
    this.sessionsMax = limits.sessionsMax;
    this.sessionsPerCredentialMax = limits.sessionsPerCredentialMax;
    this.sessionsPerUserMax = limits.sessionsPerUserMax ?? limits.sessionsMax;
    assert(this.sessionsPerUserMax >= 1, 'at least one session per user');
    this.idleTimeoutMs = limits.idleTimeoutMs ?? SESSION_IDLE_TIMEOUT_MS;
    this.writeTimeoutMs = limits.writeTimeoutMs ?? WRITE_TIMEOUT_MS;
    this.writeRetransmitMs = limits.writeRetransmitMs ?? WRITE_RETRANSMIT_MS;
    this.writesQueuedMax = limits.writesQueuedMax ?? WRITES_QUEUED_MAX;
  }

  /** Live sessions, of every credential. */
  get size(): number {
    return this.byClient.size;
  }

  /** Live sessions by state (the vsr_http_sessions gauge). */
  counts(): { busy: number; idle: number } {
    let busy = 0;
    for (const session of this.byClient.values()) if (session.busy) busy += 1;
    return { busy, idle: this.byClient.size - busy };
  }

  /** Writes waiting for a session. */
  get queued(): number {
    return this.queuedCount;
  }

  entries(): { key: SessionKey; id: number; clientId: bigint; userId: number; epoch: number; busy: boolean }[] {
    return [...this.byClient.values()].map(({ pool, id, clientId, epoch, busy }) => ({ key: pool.key, id, clientId, userId: pool.userId, epoch, busy }));
  }

  /** Commits `operation` for the credential `key` acting as `userId`. */
  async write(key: SessionKey, userId: number, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    let pool = this.pools.get(key);
    if (pool !== undefined && pool.userId !== userId) {
      this.closePool(pool);
      pool = undefined;
    }
    if (pool === undefined) {
      pool = { key, userId, sessions: [], waiters: [], closed: false, owed: false };
      this.pools.set(key, pool);
    }
    const session = this.acquire(pool);
    const held = session ?? (await this.wait(pool));
    if (held === null) return { kind: 'unavailable', reason: `${this.writesQueuedMax} writes already wait for an HTTP session` };
    if (held === undefined) return { kind: 'evicted' };
    try {
      return await this.run(held, operation, body);
    } finally {
      this.release(held);
    }
  }

  /** Forgets every local session of `userId` (the user was deleted: its id may be reused). */
  dropUser(userId: number): void {
    for (const pool of [...this.pools.values()]) if (pool.userId === userId) this.closePool(pool);
  }

  /**
   * Ends the sessions of `key`: once each is free, a replicated Logout (which frees its
   * client-table slot and its consumer-group seats on every replica), then forgets it locally.
   * Writes already queued run first; later writes open a new pool.
   */
  async logout(key: SessionKey): Promise<void> {
    const pool = this.pools.get(key);
    if (pool === undefined) return;
    this.pools.delete(key);
    pool.closed = true;
    // Writes waiting for a first slot would never get one: a closed pool is owed nothing.
    if (pool.sessions.length === 0) for (const waiter of pool.waiters.splice(0)) waiter(null);
    const sessions = [...pool.sessions];
    await Promise.all(
      sessions.map(async (session) => {
        const held = session.busy ? await this.waitFor(session) : this.hold(session);
        if (held === null) return;
        await this.logoutSession(held);
      }),
    );
  }

  /**
   * Logs out the sessions unused for idleTimeoutMs, except each pool's last one. Cheap when there
   * is nothing to do; the node calls it on a timer.
   */
  expireIdle(): void {
    const nowMs = this.now();
    for (const pool of [...this.pools.values()]) {
      if (pool.sessions.length <= 1) continue;
      let kept: Session = pool.sessions[0]!;
      for (const session of pool.sessions) if (session.lastUsedMs > kept.lastUsedMs) kept = session;
      for (const session of [...pool.sessions]) {
        if (session === kept || session.busy || nowMs - session.lastUsedMs < this.idleTimeoutMs) continue;
        this.evictions.idle += 1;
        void this.logoutSession(this.hold(session));
      }
    }
  }

  /** A reply or eviction addressed to one of our clients (from the replica's message bus). */
  onClientFrame(client: bigint, frame: Uint8Array): void {
    const decoded = decodeFrame(this.host.kernels, frame);
    if (!decoded.ok) return;
    const header = decoded.header;
    if (header.command === Command.eviction) {
      for (const [id, pending] of this.pending) {
        if (id.startsWith(`${client}:`)) {
          clearTimeout(pending.timer);
          this.pending.delete(id);
          pending.resolve({ evicted: true });
        }
      }
      const session = this.byClient.get(client);
      if (session !== undefined) {
        this.evictions.evicted += 1;
        this.drop(session);
      }
      return;
    }
    if (header.command !== Command.reply) return;
    const id = `${client}:${header.request}`;
    const pending = this.pending.get(id);
    if (pending === undefined) return;
    clearTimeout(pending.timer);
    this.pending.delete(id);
    pending.resolve({ frame, header });
  }

  /** Fails every waiting write (shutdown). */
  close(): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      this.pending.delete(id);
      pending.resolve({ evicted: true });
    }
    for (const pool of [...this.pools.values()]) this.closePool(pool);
    for (const session of [...this.byClient.values()]) this.drop(session);
  }

  private now(): number {
    return this.host.nowMs?.() ?? Date.now();
  }

  /** A free session of `pool` for one write, or null (the caller waits). */
  private acquire(pool: Pool): Session | null {
    assert(!pool.closed, 'writes join open pools only');
    // The most recently used free session: the others then age out as idle when load drops.
    let free: Session | null = null;
    for (const session of pool.sessions) if (!session.busy && (free === null || session.lastUsedMs >= free.lastUsedMs)) free = session;
    if (free !== null) return this.hold(free);
    if (pool.sessions.length >= this.sessionsPerCredentialMax) return null;
    if (this.userSessions(pool.userId) >= this.sessionsPerUserMax || this.byClient.size >= this.sessionsMax) {
      const victim = this.idleVictimFor(pool.userId);
      if (victim === null) return null;
      this.evictions.capacity += 1;
      // Its slot is ours: granting it to an owed pool would leave none to open.
      this.drop(victim, false);
    }
    return this.hold(this.open(pool));
  }

  /** Queues a write of `pool` for its turn: a session, null (queue full) or undefined (pool gone). */
  private wait(pool: Pool): Promise<Session | null | undefined> {
    if (this.queuedCount >= this.writesQueuedMax) return Promise.resolve(null);
    this.queuedCount += 1;
    // A pool below its own bound waits for a slot held elsewhere; with no session at all it is
    // owed one (release() hands it over), else it would wait on others' traffic forever.
    if (pool.sessions.length < this.sessionsPerCredentialMax && !pool.owed) {
      pool.owed = true;
      this.owed.push(pool);
    }
    return new Promise((resolve) => {
      pool.waiters.push((session) => {
        this.queuedCount -= 1;
        resolve(session ?? undefined);
      });
    });
  }

  /** Waits until `session` (of a closed pool) is free, for its logout. */
  private waitFor(session: Session): Promise<Session | null> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (session.dropped) resolve(null);
        else if (!session.busy) resolve(this.hold(session));
        else session.onFree = check;
      };
      check();
    });
  }

  private hold(session: Session): Session {
    assert(!session.busy && !session.dropped, 'a held session is free and live');
    session.busy = true;
    session.lastUsedMs = this.now();
    return session;
  }

  /** The write on `session` ended: hand it to the next write, to an owed pool, or leave it idle. */
  private release(session: Session): void {
    assert(session.busy, 'only a held session is released');
    session.busy = false;
    session.lastUsedMs = this.now();
    const pool = session.pool;
    if (session.dropped) {
      this.grant();
      return;
    }
    const owed = pool.closed ? null : this.nextOwed(pool);
    // Hand the slot over when this pool keeps at least as many sessions as the owed one gets, or
    // when the owed pool has none (it could otherwise wait forever behind a busy pool).
    if (owed !== null && (pool.waiters.length === 0 || owed.sessions.length === 0 || owed.sessions.length < pool.sessions.length - 1)) {
      this.evictions.capacity += 1;
      this.drop(session, false);
      this.grantTo(owed);
      return;
    }
    const next = pool.waiters.shift();
    if (next !== undefined) {
      next(this.hold(session));
      return;
    }
    const onFree = session.onFree;
    session.onFree = undefined;
    onFree?.();
  }

  /**
   * The pool owed a slot first, other than `except`: one without any session (it is starving),
   * else the oldest. Stale entries (closed, no longer waiting, or at their bound) are discarded.
   */
  private nextOwed(except: Pool | null): Pool | null {
    let oldest: Pool | null = null;
    for (let index = 0; index < this.owed.length; ) {
      const pool = this.owed[index]!;
      if (pool.closed || pool.waiters.length === 0 || pool.sessions.length >= this.sessionsPerCredentialMax) {
        this.owed.splice(index, 1);
        pool.owed = false;
        continue;
      }
      index += 1;
      if (pool === except) continue;
      // A user at its bound gets a slot only from its own sessions (`except`'s user hands one over).
      if (this.userSessions(pool.userId) >= this.sessionsPerUserMax && pool.userId !== except?.userId) continue;
      if (pool.sessions.length === 0) return pool;
      oldest ??= pool;
    }
    return oldest;
  }

  /** Slots are free: open sessions for owed pools. */
  private grant(): void {
    while (this.byClient.size < this.sessionsMax) {
      const pool = this.nextOwed(null);
      if (pool === null) return;
      this.grantTo(pool);
    }
  }

  /** Opens a session for the owed `pool` (a slot is free) and hands it to its oldest waiting write. */
  private grantTo(pool: Pool): void {
    const index = this.owed.indexOf(pool);
    assert(index >= 0 && pool.owed, 'a slot goes to an owed pool');
    this.owed.splice(index, 1);
    pool.owed = false;
    const next = pool.waiters.shift();
    assert(next !== undefined, 'an owed pool has a waiter');
    next(this.hold(this.open(pool)));
    // Still waiting and still able to grow: back in line.
    if (pool.waiters.length > 0 && pool.sessions.length < this.sessionsPerCredentialMax) {
      pool.owed = true;
      this.owed.push(pool);
    }
  }

  /**
   * The idle session a new session of `userId` may take the slot of: at the user's bound, the
   * user's own least recently used one; else (the node bound) the least recently used of the
   * users holding the most sessions. Null: none may be taken (the write waits).
   */
  private idleVictimFor(userId: number): Session | null {
    let largest = 0;
    for (const count of this.byUser.values()) largest = Math.max(largest, count);
    const own = this.userSessions(userId) >= this.sessionsPerUserMax;
    let oldest: Session | null = null;
    for (const session of this.byClient.values()) {
      if (session.busy) continue;
      const userOf = session.pool.userId;
      if (own ? userOf !== userId : this.userSessions(userOf) < largest) continue;
      if (oldest === null || session.lastUsedMs < oldest.lastUsedMs) oldest = session;
    }
    return oldest;
  }

  private userSessions(userId: number): number {
    return this.byUser.get(userId) ?? 0;
  }

  private open(pool: Pool): Session {
    assert(this.byClient.size < this.sessionsMax, 'a session opens within the node bound');
    assert(pool.sessions.length < this.sessionsPerCredentialMax, 'a session opens within the credential bound');
    assert(this.userSessions(pool.userId) < this.sessionsPerUserMax, 'a session opens within the user bound');
    const clientId = BigInt(`0x${randomBytes(16).toString('hex')}`) || 1n;
    const id = this.host.allocateClientId?.() ?? (this.idNext = (this.idNext % 0xffff_ffff) + 1);
    const session: Session = { pool, id, clientId, epoch: 0, requestNext: 1, lastUsedMs: this.now(), busy: false, dropped: false, onFree: undefined };
    pool.sessions.push(session);
    this.byClient.set(clientId, session);
    this.byUser.set(pool.userId, this.userSessions(pool.userId) + 1);
    return session;
  }

  /** Forgets `session` locally; a free one's slot goes to an owed pool at once. */
  private drop(session: Session, grantSlot = true): void {
    if (session.dropped) return;
    session.dropped = true;
    this.byClient.delete(session.clientId);
    const pool = session.pool;
    const count = this.userSessions(pool.userId);
    assert(count >= 1, 'a live session is counted under its user');
    if (count === 1) this.byUser.delete(pool.userId);
    else this.byUser.set(pool.userId, count - 1);
    const index = pool.sessions.indexOf(session);
    if (index >= 0) pool.sessions.splice(index, 1);
    if (pool.sessions.length === 0 && this.pools.get(pool.key) === pool && pool.waiters.length === 0) this.pools.delete(pool.key);
    const onFree = session.onFree;
    session.onFree = undefined;
    onFree?.();
    if (pool.closed && pool.sessions.length === 0) {
      // A logged-out pool opens no sessions: what still waits on it cannot run.
      for (const waiter of pool.waiters.splice(0)) waiter(null);
    } else if (pool.waiters.length > 0 && !pool.owed) {
      // A pool that lost a session while writes wait must get a slot back.
      pool.owed = true;
      this.owed.push(pool);
    }
    if (!session.busy && grantSlot) this.grant();
  }

  /** Closes `pool`: its free sessions are forgotten, its waiting writes answer "evicted". */
  private closePool(pool: Pool): void {
    pool.closed = true;
    if (this.pools.get(pool.key) === pool) this.pools.delete(pool.key);
    for (const waiter of pool.waiters.splice(0)) waiter(null);
    for (const session of [...pool.sessions]) this.drop(session);
  }

  private async logoutSession(session: Session): Promise<void> {
    assert(session.busy, 'a logout holds its session');
    if (session.epoch !== 0 && this.host.canAccept()) {
      const request = session.requestNext++;
      await this.call(session, Operation.logout, request, new Uint8Array(0));
    }
    this.drop(session);
    session.busy = false;
    this.grant();
  }

  private async run(session: Session, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    if (!this.host.canAccept()) return { kind: 'unavailable', reason: 'no caught-up primary right now' };
    if (session.epoch === 0) {
      const registered = await this.call(session, Operation.register, 0, encodeRegisterBody(session.pool.userId));
      if ('outcome' in registered) {
        this.drop(session);
        return registered.outcome;
      }
      const parsed = parseResultBody(registered.body);
      const payload = parsed.ok ? decodeRegisterPayload(parsed.payload) : null;
      if (payload === null) {
        this.drop(session);
        return { kind: 'unavailable', reason: 'register failed' };
      }
      session.epoch = payload.session;
    }
    if (session.dropped) return { kind: 'evicted' };
    const request = session.requestNext++;
    const replied = await this.call(session, operation, request, body);
    if ('outcome' in replied) return replied.outcome;
    const parsed = parseResultBody(replied.body);
    if (parsed.ok) return { kind: 'committed', payload: parsed.payload };
    if ('malformed' in parsed) return { kind: 'unknown', reason: 'malformed reply' };
    return { kind: 'rejected', errorCode: parsed.errorCode };
  }
  private call(
    session: Session,
    operation: number,
    request: number,
    body: Uint8Array,
  ): Promise<{ body: Uint8Array } | { outcome: WriteOutcome }> {
    const register = operation === Operation.register;
    const frame = buildFrame(
      this.host.kernels,
      {
        command: Command.request,
        cluster: this.host.cluster,
        view: 0,
        release: 0,
        replica: 0,
        client: session.clientId,
        requestChecksum: register ? 0n : this.host.kernels.xxh3_64(body),
        timestamp: 0,
        request,
        operation,
        session: register ? 0 : session.epoch,
        userId: session.pool.userId,
        legacyCommand: 0,
        group: 0n,
      },
      body,
    );
    // Built just above from our own fields: read back without verifying the seals buildFrame wrote
    // (the replica's bus verifies every frame that comes from elsewhere).
    const decoded = decodeHeader(frame);
    assert(decoded.ok && decoded.header.command === Command.request, 'a built request decodes');
    const requestHeader: RequestHeader = decoded.header;
    const requestBody = frame.subarray(HEADER_SIZE);
    const id = `${session.clientId}:${request}`;
    const ended = this.host.startRequest?.();
    return new Promise<{ body: Uint8Array } | { outcome: WriteOutcome }>((resolveCall) => {
      let retransmit: ReturnType<typeof setTimeout> | null = null;
      const resolve = (value: { body: Uint8Array } | { outcome: WriteOutcome }): void => {
        if (retransmit !== null) clearTimeout(retransmit);
        ended?.(requestOutcome(value));
        resolveCall(value);
      };
      // Not a Register: a second one of a committed Register would open the session anew.
      const again = (): void => {
        retransmit = setTimeout(() => {
          if (!this.pending.has(id)) return;
          if (this.host.canAccept()) this.host.submit(requestHeader, requestBody);
          again();
        }, this.writeRetransmitMs);
      };
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ outcome: { kind: 'unknown', reason: `no committed reply within ${this.writeTimeoutMs} ms` } });
      }, this.writeTimeoutMs);
      this.pending.set(id, {
        timer,
        resolve: (reply) => {
          if ('evicted' in reply) {
            resolve({ outcome: { kind: 'evicted' } });
            return;
          }
          if (reply.header.status !== 0) {
            // A pre-commit deny (the request number was already applied and its reply is gone).
            resolve({ outcome: { kind: 'unknown', reason: `request denied (status ${reply.header.status})` } });
            return;
          }
          resolve({ body: reply.frame.subarray(HEADER_SIZE) });
        },
      });
      if (!this.host.canAccept()) {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve({ outcome: { kind: 'unavailable', reason: 'no caught-up primary right now' } });
        return;
      }
      this.host.submit(requestHeader, requestBody);
      if (!register) again();
    });
  }
}

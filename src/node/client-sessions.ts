/**
 * The HTTP edge's VSR client sessions, on the replica that receives the write (the primary:
 * backups forward writes over HTTP). One session per credential (JWT id or PAT hash), registered
 * lazily through a replicated Register, capped at clients_table_max / 2 so HTTP cannot crowd out
 * other clients (the oldest local session is dropped first; the client table itself evicts
 * deterministically). One request in flight per session, as VSR requires; concurrent writes
 * with the same credential queue behind each other.
 */
import { randomBytes } from 'node:crypto';
import { Command, HEADER_SIZE } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import type { SessionKey, WriteOutcome } from '../http/node-api.js';
import { assert } from '../stdx/assert.js';
import { buildFrame, decodeFrame } from '../vsr/frame.js';
import { Operation, type RequestHeader } from '../vsr/header.js';
import { decodeRegisterPayload, encodeRegisterBody, parseResultBody } from '../vsr/reply.js';

/** How long a write waits for its committed reply before answering "outcome unknown". */
export const WRITE_TIMEOUT_MS = 10_000;

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
}

interface Session {
  readonly key: SessionKey;
  /** Iggy's u32 id for /clients (the VSR session's own id is `clientId`, a u128). */
  readonly id: number;
  readonly clientId: bigint;
  readonly userId: number;
  /** The epoch (commit op of the Register), 0 while registering. */
  epoch: number;
  requestNext: number;
  lastUsedMs: number;
  /** The tail of this session's queue of writes (one in flight at a time). */
  tail: Promise<unknown>;
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
  readonly resolve: (reply: { frame: Uint8Array } | { evicted: true }) => void;
  readonly timer: NodeJS.Timeout;
}

export class ClientSessions {
  private readonly host: SessionHost;
  private readonly sessionsMax: number;
  private readonly sessions = new Map<SessionKey, Session>();
  private readonly byClient = new Map<bigint, Session>();
  private readonly pending = new Map<string, Pending>();
  private readonly writeTimeoutMs: number;
  private idNext = 0;
  /** Sessions dropped: `capacity` (the oldest, for a new one), `evicted` (the primary evicted it). */
  readonly evictions = { capacity: 0, evicted: 0 };

  constructor(host: SessionHost, sessionsMax: number, writeTimeoutMs = WRITE_TIMEOUT_MS) {
    assert(sessionsMax >= 1, 'at least one HTTP session');
    this.host = host;
    this.sessionsMax = sessionsMax;
    this.writeTimeoutMs = writeTimeoutMs;
  }

  get size(): number {
    return this.sessions.size;
  }

  entries(): { key: SessionKey; id: number; clientId: bigint; userId: number; epoch: number }[] {
    return [...this.sessions.values()].map(({ key, id, clientId, userId, epoch }) => ({ key, id, clientId, userId, epoch }));
  }

  /** Commits `operation` for the session `key` acting as `userId`. */
  write(key: SessionKey, userId: number, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    let session = this.sessions.get(key);
    if (session !== undefined && session.userId !== userId) {
      this.drop(session);
      session = undefined;
    }
    if (session === undefined) session = this.open(key, userId);
    session.lastUsedMs = Date.now();
    const owner = session;
    const run = owner.tail.then(() => this.run(owner, operation, body));
    owner.tail = run.catch(() => undefined);
    return run;
  }

  /** Forgets every local session of `userId` (the user was deleted: its id may be reused). */
  dropUser(userId: number): void {
    for (const session of [...this.sessions.values()]) if (session.userId === userId) this.drop(session);
  }

  /**
   * Ends the session of `key`: a replicated Logout (which frees its client-table slot and its
   * consumer-group seats on every replica), then forgets it locally.
   */
  async logout(key: SessionKey): Promise<void> {
    const session = this.sessions.get(key);
    if (session === undefined) return;
    const run = session.tail.then(async () => {
      if (session.epoch === 0 || !this.host.canAccept()) return;
      const request = session.requestNext++;
      await this.call(session, Operation.logout, request, new Uint8Array(0));
    });
    session.tail = run.catch(() => undefined);
    await run.catch(() => undefined);
    this.drop(session);
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
    pending.resolve({ frame });
  }

  /** Fails every waiting write (shutdown). */
  close(): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      this.pending.delete(id);
      pending.resolve({ evicted: true });
    }
    this.sessions.clear();
    this.byClient.clear();
  }

  private open(key: SessionKey, userId: number): Session {
    if (this.sessions.size >= this.sessionsMax) {
      let oldest: Session | null = null;
      for (const session of this.sessions.values()) if (oldest === null || session.lastUsedMs < oldest.lastUsedMs) oldest = session;
      if (oldest !== null) {
        this.evictions.capacity += 1;
        this.drop(oldest);
      }
    }
    const clientId = BigInt(`0x${randomBytes(16).toString('hex')}`) || 1n;
    const id = this.host.allocateClientId?.() ?? (this.idNext = (this.idNext % 0xffff_ffff) + 1);
    const session: Session = { key, id, clientId, userId, epoch: 0, requestNext: 1, lastUsedMs: Date.now(), tail: Promise.resolve() };
    this.sessions.set(key, session);
    this.byClient.set(clientId, session);
    return session;
  }

  private drop(session: Session): void {
    if (this.sessions.get(session.key) === session) this.sessions.delete(session.key);
    this.byClient.delete(session.clientId);
  }

  private async run(session: Session, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    if (!this.host.canAccept()) return { kind: 'unavailable', reason: 'no caught-up primary right now' };
    if (session.epoch === 0) {
      const registered = await this.call(session, Operation.register, 0, encodeRegisterBody(session.userId));
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
    if (!this.sessions.has(session.key)) return { kind: 'evicted' };
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
        userId: session.userId,
        legacyCommand: 0,
        group: 0n,
      },
      body,
    );
    const decoded = decodeFrame(this.host.kernels, frame);
    assert(decoded.ok && decoded.header.command === Command.request, 'a built request decodes');
    const requestHeader: RequestHeader = decoded.header;
    const requestBody = decoded.body;
    const id = `${session.clientId}:${request}`;
    const ended = this.host.startRequest?.();
    return new Promise<{ body: Uint8Array } | { outcome: WriteOutcome }>((resolveCall) => {
      const resolve = (value: { body: Uint8Array } | { outcome: WriteOutcome }): void => {
        ended?.(requestOutcome(value));
        resolveCall(value);
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
          const replyHeader = decodeFrame(this.host.kernels, reply.frame);
          if (replyHeader.ok && replyHeader.header.command === Command.reply && replyHeader.header.status !== 0) {
            // A pre-commit deny (the request number was already applied and its reply is gone).
            resolve({ outcome: { kind: 'unknown', reason: `request denied (status ${replyHeader.header.status})` } });
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
    });
  }
}

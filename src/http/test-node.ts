/**
 * An in-process NodeApi for tests of the HTTP edge (and for the node layer's own tests): a real
 * MetadataStateMachine that applies each write synchronously, as a one-replica cluster whose
 * every write commits at once.
 *
 * It keeps the promises the real node makes: ops and timestamps are monotonic, a write resolves
 * after the local apply (so the HTTP layer can read the result back), sessions are created lazily
 * per session key and capped (the oldest is evicted, and its next write answers `evicted`), a
 * committed DeleteUser evicts the deleted user's sessions, and logout removes the session from
 * every consumer group. Everything else a test may want to provoke is a field it can set: not
 * primary (with a primary address), scripted outcomes (unavailable, unknown, ...), readiness,
 * replica status.
 *
 * Every write the HTTP layer hands over is recorded with its exact body, so tests can assert what
 * would enter the replicated log (e.g. that no plaintext secret ever does).
 */
import { encodeStreamDetails } from '../metadata/binary-responses.js';
import { Operation } from '../metadata/operations.js';
import { MetadataStateMachine, type MetadataStateMachineOptions } from '../metadata/state-machine.js';
import { GENESIS_PASSWORD_MARKER } from '../metadata/validation.js';
import { createPasswordVerifier, hashPassword, type PasswordVerifier } from './secrets.js';
import { assert } from '../stdx/assert.js';
import type {
  ClientSessionInfo,
  ClusterNode,
  ClusterStatus,
  NodeApi,
  PeerStatus,
  ReplicaTransportCounters,
  SessionKey,
  StateTransferStatus,
  WriteOutcome,
} from './node-api.js';

/** Recorded writes kept (oldest dropped first, counted): tests never come close. */
export const RECORDED_WRITES_MAX = 4096;
export const TEST_SESSIONS_MAX_DEFAULT = 64;

export interface RecordedWrite {
  readonly sessionKey: SessionKey;
  readonly userId: number;
  readonly operation: number;
  readonly body: Uint8Array;
  readonly outcome: WriteOutcome;
}

interface Session {
  readonly clientId: bigint;
  readonly userId: number;
  /** The op that registered the session (the VSR session number). */
  readonly epoch: number;
}

export interface TestNodeOptions {
  readonly state: MetadataStateMachine;
  /** Maps root's genesis marker as a replica's does (secrets.ts `createPasswordVerifier`). */
  readonly verifyPassword: PasswordVerifier;
  readonly replica?: number;
  readonly clusterName?: string;
  readonly primary?: boolean;
  /** `host:port` of the primary's HTTP listener, reported when this node is not the primary. */
  readonly primaryHttp?: string | null;
  readonly view?: number;
  readonly sessionsMax?: number;
  /** Prepare timestamps in µs; made monotonic here. Defaults to the wall clock. */
  readonly nowUs?: () => number;
  readonly nodes?: readonly ClusterNode[];
}

export class TestNode implements NodeApi {
  readonly replica: number;
  readonly clusterName: string;
  readonly state: MetadataStateMachine;
  readonly verifyPassword: PasswordVerifier;
  primary: boolean;
  primaryHttp: string | null;
  currentView: number;
  isReady = true;
  replicaStatus: ClusterStatus['status'] = 'normal';
  stateTransfer: StateTransferStatus | null = null;
  peers: PeerStatus[] = [];
  clusterNodes: ClusterNode[];
  /** Returned (first in, first out) instead of applying the next writes. */
  readonly scripted: WriteOutcome[] = [];
  readonly writes: RecordedWrite[] = [];
  writesDropped = 0;
  readonly logouts: SessionKey[] = [];

  private readonly sessionsMax: number;
  private readonly nowUs: () => number;
  /** Insertion order is recency order: a write moves its session to the end. */
  private readonly sessions = new Map<SessionKey, Session>();
  private readonly evicted = new Set<SessionKey>();
  private op = 0;
  private lastTimestampUs = 0;
  private nextClientId = 1n;

  constructor(options: TestNodeOptions) {
    this.state = options.state;
    this.verifyPassword = options.verifyPassword;
    this.replica = options.replica ?? 0;
    this.clusterName = options.clusterName ?? 'vrmeta-test';
    this.primary = options.primary ?? true;
    this.primaryHttp = options.primaryHttp ?? null;
    this.currentView = options.view ?? 0;
    this.sessionsMax = options.sessionsMax ?? TEST_SESSIONS_MAX_DEFAULT;
    assert(this.sessionsMax >= 1, 'at least one session');
    this.nowUs = options.nowUs ?? (() => Date.now() * 1000);
    this.clusterNodes = [...(options.nodes ?? [])];
  }

  view(): number {
    return this.currentView;
  }

  isPrimary(): boolean {
    return this.primary;
  }

  /** Reported as set, even while primary: tests make a "primary" learn late that it is not. */
  primaryHttpAddress(): string | null {
    return this.primaryHttp;
  }

  /** Tests set it to check that a forward that gives up says why. */
  unavailableReason = 'the test node knows no primary';

  primaryUnavailableReason(): string {
    return this.unavailableReason;
  }

  /** The op of the last applied write. */
  get lastOp(): number {
    return this.op;
  }

  status(): ClusterStatus {
    return {
      replica: this.replica,
      replicaCount: Math.max(1, this.peers.length + 1),
      view: this.currentView,
      status: this.replicaStatus,
      primary: this.primary ? this.replica : (this.peers[0]?.replica ?? 0),
      op: this.op,
      commitMin: this.op,
      commitMax: this.op,
      checkpointOp: 0,
      checkpointId: '0000000000000000',
      heartbeatMs: 100,
      electionTimeoutMs: 500,
      stateTransfer: this.stateTransfer,
      replicas: this.peers,
    };
  }

  ready(): boolean {
    return this.isReady;
  }

  nodes(): readonly ClusterNode[] {
    if (this.clusterNodes.length > 0) return this.clusterNodes;
    return [{ replica: this.replica, name: `node-${this.replica}`, http: '127.0.0.1:3000', role: this.primary ? 'leader' : 'follower', status: 'healthy' }];
  }

  /** Settable by tests of /metrics; an in-process node has no replica port. */
  transport: ReplicaTransportCounters = { authFailures: {}, rejectedFrames: {} };

  replicaTransport(): ReplicaTransportCounters {
    return this.transport;
  }

  /**
   * The connected clients /clients lists. An in-process node has no binary listener, and HTTP
   * sessions are not listed (as in the real node), so tests set the connections they need.
   */
  connectedClients: ClientSessionInfo[] = [];

  clients(): readonly ClientSessionInfo[] {
    return this.connectedClients;
  }

  async write(sessionKey: SessionKey, userId: number, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    const outcome = this.apply(sessionKey, userId, operation, body);
    if (this.writes.length >= RECORDED_WRITES_MAX) {
      this.writes.shift();
      this.writesDropped++;
    }
    this.writes.push({ sessionKey, userId, operation, body: body.slice(), outcome });
    return outcome;
  }

  async logout(sessionKey: SessionKey): Promise<void> {
    if (this.logouts.length >= RECORDED_WRITES_MAX) this.logouts.shift();
    this.logouts.push(sessionKey);
    const session = this.sessions.get(sessionKey);
    if (session === undefined) return;
    this.sessions.delete(sessionKey);
    this.state.onClientRemoved(session.clientId, this.nextTimestampUs());
  }

  /** Evicts a session as a full client table would: its next write answers `evicted`. */
  evict(sessionKey: SessionKey): void {
    const session = this.sessions.get(sessionKey);
    if (session !== undefined) this.removeSession(sessionKey, session);
    this.evicted.add(sessionKey);
  }

  /** The session a key registered (tests: client ids, consumer-group membership). */
  sessionOf(sessionKey: SessionKey): { clientId: bigint; userId: number } | null {
    return this.sessions.get(sessionKey) ?? null;
  }

  private apply(sessionKey: SessionKey, userId: number, operation: number, body: Uint8Array): WriteOutcome {
    if (!this.primary) return { kind: 'not_primary', primaryHttp: this.primaryHttp };
    const scripted = this.scripted.shift();
    if (scripted !== undefined) return scripted;
    if (this.evicted.delete(sessionKey)) return { kind: 'evicted' };
    const session = this.sessionFor(sessionKey, userId);
    const deletedUser = operation === Operation.deleteUser ? this.state.deleteUserTarget(body) : null;
    this.op += 1;
    const result = this.state.apply({
      op: this.op,
      operation,
      timestampUs: this.nextTimestampUs(),
      userId,
      clientId: session.clientId,
      body,
    });
    if (result.errorCode !== 0) return { kind: 'rejected', errorCode: result.errorCode };
    if (operation === Operation.deleteUser) this.evictUser(deletedUser);
    return { kind: 'committed', payload: result.payload.slice() };
  }

  private sessionFor(sessionKey: SessionKey, userId: number): Session {
    const existing = this.sessions.get(sessionKey);
    if (existing !== undefined) {
      this.sessions.delete(sessionKey);
      this.sessions.set(sessionKey, existing);
      return existing;
    }
    if (this.sessions.size >= this.sessionsMax) {
      const [oldestKey, oldest] = this.sessions.entries().next().value as [SessionKey, Session];
      this.removeSession(oldestKey, oldest);
      this.evicted.add(oldestKey);
    }
    // A real node commits a Register op first; its op number becomes the session number.
    this.op += 1;
    const session: Session = { clientId: this.nextClientId++, userId, epoch: this.op };
    this.sessions.set(sessionKey, session);
    return session;
  }

  private removeSession(sessionKey: SessionKey, session: Session): void {
    this.sessions.delete(sessionKey);
    this.state.onClientRemoved(session.clientId, this.nextTimestampUs());
  }

  /** User ids are reused: a deleted user's sessions must not act as the next owner of the id. */
  private evictUser(userId: number | null): void {
    assert(userId !== null, 'DeleteUser replies with the deleted id');
    for (const [key, session] of [...this.sessions]) {
      if (session.userId === userId) {
        this.removeSession(key, session);
        this.evicted.add(key);
      }
    }
  }

  private nextTimestampUs(): number {
    this.lastTimestampUs = Math.max(this.lastTimestampUs + 1, Math.floor(this.nowUs()));
    return this.lastTimestampUs;
  }
}

export interface CreateTestNodeOptions extends Omit<TestNodeOptions, 'state' | 'verifyPassword'> {
  /** Root's password (DESIGN.md §2.3 default `iggy`); a replica's genesis: the marker + a verifier. */
  readonly rootPassword?: string;
  readonly stateOptions?: MetadataStateMachineOptions;
}

/**
 * Root's in-memory genesis hashes, per password (random salts, as a replica's): Argon2id is
 * deliberately slow and tests make many nodes. Bounded by the distinct passwords tests use.
 */
const genesisHashes = new Map<string, Promise<string>>();

export async function createTestNode(options: CreateTestNodeOptions = {}): Promise<TestNode> {
  const password = options.rootPassword ?? 'iggy';
  let hash = genesisHashes.get(password);
  if (hash === undefined) {
    hash = hashPassword(password);
    genesisHashes.set(password, hash);
  }
  const verifyPassword = createPasswordVerifier(await hash);
  const genesis = { rootUsername: 'iggy', rootPasswordHash: GENESIS_PASSWORD_MARKER };
  const state = new MetadataStateMachine(genesis, options.stateOptions ?? {});
  return new TestNode({ ...options, state, verifyPassword });
}

/** A committed outcome carrying an id (a create's reply starts with it), for scripted writes. */
export function committedWithId(id: number): WriteOutcome {
  const payload = encodeStreamDetails({ id, name: 'scripted', createdAtUs: 0, topicsCount: 0, sizeBytes: 0, messagesCount: 0, topics: [] });
  return { kind: 'committed', payload };
}

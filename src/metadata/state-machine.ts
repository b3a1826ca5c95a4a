/**
 * The replicated metadata state machine: streams, topics, partitions, consumer groups, users,
 * permissions and personal access tokens, driven by the VSR core through `StateMachine`.
 *
 * Determinism is the whole contract: `apply` is a pure function of (state, ApplyInput). No clock,
 * randomness or node configuration is consulted (timestamps come from the prepare, limits are
 * constants, topic defaults were resolved by the primary), and every collection iterates in
 * ascending-id order. A rejected operation is a committed no-op whose result carries the Iggy
 * error code, identical on every replica.
 *
 * Authorization happens twice with the same rules: `precheck` on the primary before proposing
 * (fast rejection), and again inside `apply` with the user id the primary stamped from the client
 * table, because state may have changed in between (permissions revoked, user deleted).
 */
import { assert } from '../stdx/assert.js';
import type {
  ApplyInput,
  ApplyResult,
  StateMachine,
} from '../vsr/state-machine.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { ErrorCode } from './errors.js';
import { rejected, type OpContext } from './op-context.js';
import { decodeRequest } from './operation-codec.js';
import {
  Operation,
  isStateMachineOperation,
  type Identifier,
  type MetadataRequest,
} from './operations.js';
import {
  createConsumerGroup,
  deleteConsumerGroup,
  groupsOfClient,
  joinConsumerGroup,
  leaveConsumerGroup,
  removeClientFromGroups,
} from './ops-groups.js';
import {
  createPartitions,
  createStream,
  createTopic,
  deletePartitions,
  deleteSegments,
  deleteStream,
  deleteTopic,
  purgeStream,
  purgeTopic,
  updateStream,
  updateTopic,
} from './ops-streams.js';
import {
  changePassword,
  createPersonalAccessToken,
  createUser,
  deletePersonalAccessToken,
  deleteUser,
  updatePermissions,
  updateUser,
} from './ops-users.js';
import { revokeAccessToken } from './ops-tokens.js';
import { ALL_GLOBAL_PERMISSIONS, type Principal } from './permissions.js';
import { MetadataQueries } from './queries.js';
import { UserStatus } from '../format/snapshot-model.js';
import {
  MetadataState,
  ROOT_USER_ID,
  hexOf,
  resolveStream,
  resolveTopic,
  resolveUser,
} from './state.js';
import { snapshotOf, stateFromSnapshot } from './state-snapshot.js';
import { StatsRegistry, type PartitionStats, type StatsDelta } from './stats-registry.js';
import {
  METADATA_LIMITS,
  validateCurrentPasswordHash,
  validateUsername,
  type MetadataLimits,
} from './validation.js';

/** The first-boot state every replica derives identically (DESIGN.md §2.3: root `iggy`). */
export interface Genesis {
  readonly rootUsername: string;
  /**
   * `GENESIS_PASSWORD_MARKER` on a replica (identical everywhere, no hash at all), or an Argon2id
   * PHC string (tests that want a known hash).
   */
  readonly rootPasswordHash: string;
}

export interface MetadataStateMachineOptions {
  /** Tests only: smaller bounds to reach every "full" error. Every replica must use the same. */
  readonly limits?: Partial<MetadataLimits>;
}

/**
 * Root's creation time until the cluster commits its first metadata op. Root is created by no op
 * (genesis), so no prepare carries its creation time, yet every replica must derive the same
 * state; `stampRoot` then sets it to that op's timestamp (see there).
 */
export const ROOT_CREATED_AT_US = 0;

export interface PrecheckContext {
  /** The session proposing (join/leave check membership). Defaults to 0 (no session). */
  readonly clientId?: bigint;
  /** The primary's estimate of the prepare timestamp (PAT expiry). Defaults to the last applied. */
  readonly timestampUs?: number;
}

export interface TokenLookup {
  readonly userId: number;
  readonly name: string;
  readonly expiryAtUs: number | null;
}

export interface UserCredentials {
  readonly id: number;
  readonly status: UserStatus;
  readonly passwordHash: string;
}

export class MetadataStateMachine implements StateMachine<MetadataMachineSnapshot> {
  /** Lives as long as the replica: restore keeps it (see stats-registry.ts). */
  readonly stats = new StatsRegistry();
  readonly queries: MetadataQueries;
  readonly limits: MetadataLimits;
  private state: MetadataState;
  /** Volatile: PAT-expiry estimates in precheck only; apply always uses the prepare's timestamp. */
  private lastTimestampUs = 0;
  /** Volatile: calls that may have changed the state (see `version`). */
  private changes = 0;

  constructor(genesis: Genesis, options: MetadataStateMachineOptions = {}) {
    this.limits = Object.freeze({ ...METADATA_LIMITS, ...options.limits });
    assert(
      validateUsername(genesis.rootUsername) === ErrorCode.ok,
      'root username is 3..=50 bytes',
    );
    assert(
      validateCurrentPasswordHash(genesis.rootPasswordHash) === ErrorCode.ok,
      'root password hash is the genesis marker or an Argon2id PHC string',
    );
    this.state = new MetadataState(this.limits);
    const root = this.state.users.insert((id) => ({
      id,
      username: genesis.rootUsername,
      passwordHash: genesis.rootPasswordHash,
      status: UserStatus.active,
      createdAtUs: ROOT_CREATED_AT_US,
      permissions: Object.freeze({ global: ALL_GLOBAL_PERMISSIONS, streams: Object.freeze([]) }),
      tokens: new Map(),
    }));
    assert(root.id === ROOT_USER_ID, 'root takes user id 0');
    this.state.userIndex.set(root.username, root.id);
    this.queries = new MetadataQueries(() => this.state, this.stats);
  }

  apply(input: ApplyInput): ApplyResult {
    assert(Number.isSafeInteger(input.op) && input.op >= 0, 'op is a non-negative safe integer');
    assert(
      Number.isSafeInteger(input.timestampUs) && input.timestampUs >= 0,
      'timestamp is a non-negative safe integer',
    );
    assert(
      Number.isInteger(input.userId) && input.userId >= 0 && input.userId <= 0xffff_ffff,
      'user id is a u32',
    );
    assert(typeof input.clientId === 'bigint' && input.clientId >= 0n, 'client id is a u128');
    if (input.timestampUs > this.lastTimestampUs) this.lastTimestampUs = input.timestampUs;
    this.changes += 1;
    return this.execute(
      input.userId,
      input.operation,
      input.body,
      input.clientId,
      input.timestampUs,
      input.op,
      true,
    );
  }

  /**
   * Iggy `PersonalAccessTokenAlreadyExists` answers a retry of a committed
   * CreatePersonalAccessToken. Its raw token was minted at the edge and never committed (only the
   * hash was), so the cached reply cannot hand it back: replaying it would return a different token
   * than the one whose hash is stored (iggy-metadata-plane.md §3.2, special case). Every other
   * retry gets its cached reply (0).
   */
  duplicateDenyCode(operation: number): number {
    return operation === Operation.createPersonalAccessToken
      ? ErrorCode.personalAccessTokenAlreadyExists
      : 0;
  }

  /**
   * The same checks as `apply`, against the current state, without mutating it. A non-zero code
   * means the operation would commit as a rejection now; zero is not a promise (state may change
   * before the op commits), which is why apply checks again.
   */
  precheck(
    userId: number,
    operation: number,
    body: Uint8Array,
    context: PrecheckContext = {},
  ): ErrorCode {
    const timestampUs = context.timestampUs ?? this.lastTimestampUs;
    const clientId = context.clientId ?? 0n;
    const result = this.execute(userId, operation, body, clientId, timestampUs, 0, false);
    return result.errorCode as ErrorCode;
  }

  private execute(
    userId: number,
    operation: number,
    body: Uint8Array,
    clientId: bigint,
    timestampUs: number,
    op: number,
    commit: boolean,
  ): ApplyResult {
    // Register, Logout and the internal operations belong to the VSR core; reaching here is a
    // routing bug upstream, committed as a rejection rather than a crash of every replica.
    if (!isStateMachineOperation(operation)) return rejected(ErrorCode.invalidCommand);
    const decoded = decodeRequest(operation, body);
    if (!decoded.ok) return rejected(ErrorCode.invalidCommand);
    if (commit) this.stampRoot(timestampUs);
    // A session outliving its user (deleted since login) acts as nobody.
    const actor = this.state.users.get(userId);
    if (actor === undefined) return rejected(ErrorCode.unauthenticated);
    const { state, stats } = this;
    const ctx: OpContext = { state, stats, actor, clientId, timestampUs, op, commit };
    return dispatch(ctx, decoded.request);
  }

  /**
   * Gives root a real `created_at`: the timestamp of the first metadata op the cluster commits
   * (the legacy Iggy server stamped root at its first boot; the VSR server stamps a constant).
   * The primary stamped that timestamp into the prepare, so every replica, and every replica that
   * later replays or restores, derives the same value, and snapshots keep it. Root cannot be
   * deleted, so its id never names another user: the edges do not treat this change as a new
   * incarnation of user 0 (auth.ts `activePrincipal`, binary-connection.ts `principal`).
   */
  private stampRoot(timestampUs: number): void {
    const root = this.state.users.get(ROOT_USER_ID);
    assert(root !== undefined, 'root exists (it cannot be deleted)');
    if (root.createdAtUs !== ROOT_CREATED_AT_US) return;
    assert(timestampUs > ROOT_CREATED_AT_US, 'a committed prepare has a real timestamp');
    root.createdAtUs = timestampUs;
  }

  onClientRemoved(clientId: bigint, timestampUs: number): void {
    assert(
      Number.isSafeInteger(timestampUs) && timestampUs >= 0,
      'timestamp is a non-negative safe integer',
    );
    if (timestampUs > this.lastTimestampUs) this.lastTimestampUs = timestampUs;
    this.changes += 1;
    removeClientFromGroups(this.state, clientId);
  }

  /**
   * Moves whenever anything a read could see may have changed: an apply, a client's removal, a
   * restore, or any counter of the stats registry (the data plane's bumps included). Equal
   * versions mean equal answers, so a list body built at one version serves every read at it.
   * Volatile and local: never replicated, never in a snapshot.
   */
  get version(): number {
    return this.changes + this.stats.version;
  }

  snapshot(): MetadataMachineSnapshot {
    return snapshotOf(this.state);
  }

  /**
   * Replaces the state; the stats registry stays (pruned to the snapshot). The caller checked the
   * snapshot (`checkSnapshot`) or it came from our own checksummed checkpoint, so a violated
   * invariant here is corruption past every check: it fails an assertion, and because the new
   * state is built before the swap, the old one stays in place.
   */
  /**
   * The timestamp of the latest op this machine applied (0 before any): every resource created
   * at or before it is in the state unless an applied op deleted it. Not moved by a restore, so
   * after one it may lag the state, never lead it.
   */
  get appliedTimestampUs(): number {
    return this.lastTimestampUs;
  }

  restore(snapshot: MetadataMachineSnapshot): void {
    const next = stateFromSnapshot(snapshot, this.limits);
    assert(typeof next !== 'string', typeof next === 'string' ? next : '');
    this.state = next;
    this.changes += 1;
    this.stats.retain(snapshot.streams);
  }

  /** Null when `restore(snapshot)` would succeed, else the first invariant it violates. */
  checkSnapshot(snapshot: MetadataMachineSnapshot): string | null {
    const built = stateFromSnapshot(snapshot, this.limits);
    return typeof built === 'string' ? built : null;
  }

  /** The committed identity of a user for permission checks, or null for an unknown id. */
  principal(userId: number): Principal | null {
    const user = this.state.users.get(userId);
    return user === undefined ? null : { id: user.id, permissions: user.permissions };
  }

  /** Login by username: the node verifies the password against `passwordHash` itself. */
  credentials(username: string): UserCredentials | null {
    const id = this.state.userIndex.get(username);
    const user = id === undefined ? undefined : this.state.users.get(id);
    if (user === undefined) return null;
    return { id: user.id, status: user.status, passwordHash: user.passwordHash };
  }

  /**
   * The id of the user a DeleteUser body names, resolved now (null: no such user or not a
   * DeleteUser body). The node drops that user's sessions once the delete commits: user ids are
   * reused, and the committed reply is empty (Iggy's), so the id is read before proposing.
   */
  deleteUserTarget(body: Uint8Array): number | null {
    const decoded = decodeRequest(Operation.deleteUser, body);
    if (!decoded.ok || decoded.request.operation !== Operation.deleteUser) return null;
    return resolveUser(this.state, decoded.request.userId)?.id ?? null;
  }

  /** The stored hash a ChangePassword body must name as current. */
  passwordHashOf(userId: Identifier): string | null {
    return resolveUser(this.state, userId)?.passwordHash ?? null;
  }

  /** Login by personal access token: look up the SHA-256 of the presented token. */
  personalAccessTokenByHash(tokenHash: Uint8Array): TokenLookup | null {
    const owner = this.state.tokenIndex.get(hexOf(tokenHash));
    if (owner === undefined) return null;
    const token = this.state.users.get(owner.userId)?.tokens.get(owner.name);
    assert(token !== undefined, 'the token index points at a live token');
    return { userId: owner.userId, name: owner.name, expiryAtUs: token.expiryAtUs };
  }

  /**
   * Whether a logout revoked the access token `jti` (16 bytes) and the revocation has not expired
   * at `nowUs`. An entry past its expiry may linger until the next revocation prunes it; it is
   * ignored here, as the token itself is expired by then.
   */
  isAccessTokenRevoked(jti: Uint8Array, nowUs: number): boolean {
    const token = this.state.revokedTokens.get(hexOf(jti));
    return token !== undefined && token.expiryAtUs > nowUs;
  }

  /** Entries in the revoked-token list (for /metrics). */
  revokedTokenCount(): number {
    return this.state.revokedTokens.size;
  }

  /** Where a client is a consumer-group member (for `/clients/{id}`). */
  consumerGroupsOfClient(
    clientId: bigint,
  ): { streamId: number; topicId: number; groupId: number }[] {
    return groupsOfClient(this.state, clientId);
  }

  /**
   * The shared counters of a live partition (get-or-create), for the data plane to hold and bump.
   * Null when the partition does not exist, so the registry only ever holds live resources.
   */
  partitionStats(streamId: number, topicId: number, partitionId: number): PartitionStats | null {
    const stream = resolveStream(this.state, { kind: 'id', id: streamId });
    const topic =
      stream === undefined ? undefined : resolveTopic(stream, { kind: 'id', id: topicId });
    const partition = topic?.partitions.ref(partitionId);
    if (stream === undefined || topic === undefined || partition === undefined) return null;
    return this.stats.partition(stream, topic, partition);
  }

  /** The node layer's bump: false when the partition does not exist (a racing delete). */
  bumpPartitionStats(
    streamId: number,
    topicId: number,
    partitionId: number,
    delta: StatsDelta,
    currentOffset?: number,
  ): boolean {
    const stats = this.partitionStats(streamId, topicId, partitionId);
    if (stats === null) return false;
    stats.add(delta);
    if (currentOffset !== undefined) stats.setCurrentOffset(currentOffset);
    return true;
  }
}

function dispatch(ctx: OpContext, request: MetadataRequest): ApplyResult {
  switch (request.operation) {
    case Operation.createStream:
      return createStream(ctx, request);
    case Operation.updateStream:
      return updateStream(ctx, request);
    case Operation.deleteStream:
      return deleteStream(ctx, request);
    case Operation.purgeStream:
      return purgeStream(ctx, request);
    case Operation.createTopic:
      return createTopic(ctx, request);
    case Operation.updateTopic:
      return updateTopic(ctx, request);
    case Operation.deleteTopic:
      return deleteTopic(ctx, request);
    case Operation.purgeTopic:
      return purgeTopic(ctx, request);
    case Operation.createPartitions:
      return createPartitions(ctx, request);
    case Operation.deletePartitions:
      return deletePartitions(ctx, request);
    case Operation.deleteSegments:
      return deleteSegments(ctx, request);
    case Operation.createConsumerGroup:
      return createConsumerGroup(ctx, request);
    case Operation.deleteConsumerGroup:
      return deleteConsumerGroup(ctx, request);
    case Operation.joinConsumerGroup:
      return joinConsumerGroup(ctx, request);
    case Operation.leaveConsumerGroup:
      return leaveConsumerGroup(ctx, request);
    case Operation.createUser:
      return createUser(ctx, request);
    case Operation.updateUser:
      return updateUser(ctx, request);
    case Operation.deleteUser:
      return deleteUser(ctx, request);
    case Operation.changePassword:
      return changePassword(ctx, request);
    case Operation.updatePermissions:
      return updatePermissions(ctx, request);
    case Operation.createPersonalAccessToken:
      return createPersonalAccessToken(ctx, request);
    case Operation.deletePersonalAccessToken:
      return deletePersonalAccessToken(ctx, request);
    case Operation.revokeAccessToken:
      return revokeAccessToken(ctx, request);
  }
}

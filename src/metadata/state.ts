/**
 * The in-memory metadata state and its lookups (conversion to and from the snapshot model is in
 * state-snapshot.ts).
 *
 * Everything replicated is here and nothing else: the state is a pure function of the committed
 * op sequence (or of a snapshot plus the ops after it). Derived structures (name indexes, the
 * token-hash index, free-id heaps) are rebuilt from the snapshot on restore, never snapshotted.
 */
import { assert } from '../stdx/assert.js';
import { IdSlab } from './id-slab.js';
import { ClientGroupIndex } from './client-groups.js';
import type { Identifier } from './operations.js';
import type { TopicOptionEntry } from './options.js';
import type {
  CompressionAlgorithm,
  PermissionsSnapshot,
  UserStatus,
} from '../format/snapshot-model.js';
import { PartitionStore } from './partition-store.js';
import type { MetadataLimits } from './validation.js';

export const ROOT_USER_ID = 0;

export interface MemberState {
  readonly id: number;
  readonly clientId: bigint;
  /** Assigned partition ids, ascending (consumer-groups.ts). */
  partitions: readonly number[];
}

export interface GroupState {
  readonly id: number;
  readonly name: string;
  generation: number;
  readonly members: IdSlab<MemberState>;
}

export interface TopicState {
  readonly id: number;
  name: string;
  readonly createdAtUs: number;
  messageExpiryUs: bigint;
  compressionAlgorithm: CompressionAlgorithm;
  maxTopicSizeBytes: bigint;
  replicationFactor: number;
  /** Explicit catalog options, ascending by key, frozen (options.ts): replaced, never edited. */
  options: readonly TopicOptionEntry[];
  /**
   * The timestamp of the last committed purge, 0 if never purged: the partitions' logs are
   * incarnated anew by it (queries.ts `incarnationOf`), so the purge drops their messages and
   * consumer offsets on the data plane in the same commit that zeroes their counters.
   */
  purgedAtUs: number;
  /**
   * Dense ids 0..n-1: partitions are added at the top and deleted from the top, so they are a
   * createdAtUs column (partition-store.ts), not one object each.
   */
  readonly partitions: PartitionStore;
  readonly groups: IdSlab<GroupState>;
  readonly groupIndex: Map<string, number>;
}

export interface StreamState {
  readonly id: number;
  name: string;
  readonly createdAtUs: number;
  readonly topics: IdSlab<TopicState>;
  readonly topicIndex: Map<string, number>;
}

export interface TokenState {
  readonly name: string;
  readonly tokenHash: Uint8Array;
  readonly expiryAtUs: number | null;
}

export interface UserState {
  readonly id: number;
  username: string;
  passwordHash: string;
  status: UserStatus;
  /** Fixed at creation; root's alone is set once more, by the first op (`stampRoot`). */
  createdAtUs: number;
  /** Canonical (ids ascending) and frozen: replaced wholesale, never edited in place. */
  permissions: PermissionsSnapshot | null;
  readonly tokens: Map<string, TokenState>;
}

/** A revoked access token (snapshot-model.ts `RevokedTokenSnapshot`). */
export interface RevokedTokenState {
  readonly jti: Uint8Array;
  readonly userId: number;
  readonly expiryAtUs: number;
}

/** Where a token hash points (login by personal access token). */
export interface TokenOwner {
  readonly userId: number;
  readonly name: string;
}

export class MetadataState {
  streams: IdSlab<StreamState>;
  readonly streamIndex = new Map<string, number>();
  users: IdSlab<UserState>;
  readonly userIndex = new Map<string, number>();
  /** Hex SHA-256 of a raw token -> its owner. */
  readonly tokenIndex = new Map<string, TokenOwner>();
  /**
   * Hex jti -> revoked access token, until its expiry (entries at or past it are pruned by the
   * next revocation, at that op's timestamp). At most `limits.revokedTokensMax` entries.
   */
  readonly revokedTokens = new Map<string, RevokedTokenState>();
  /** Entries of `revokedTokens` per user id (derived; each <= `limits.revokedTokensPerUserMax`). */
  readonly revokedTokensByUser = new Map<number, number>();
  /** Client id -> its consumer-group memberships (derived from the groups' members). */
  readonly clientGroups = new ClientGroupIndex();
  readonly limits: MetadataLimits;

  constructor(limits: MetadataLimits) {
    this.limits = limits;
    this.streams = new IdSlab(limits.streamsMax);
    this.users = new IdSlab(limits.usersMax);
  }

  /** Restore only: replaces the (empty) slabs with ones rebuilt from snapshot records. */
  install(
    users: Iterable<readonly [number, UserState]>,
    streams: Iterable<readonly [number, StreamState]>,
  ): void {
    assert(this.users.count === 0 && this.streams.count === 0, 'install into an empty state');
    this.users = IdSlab.from(this.limits.usersMax, users);
    this.streams = IdSlab.from(this.limits.streamsMax, streams);
    for (const stream of this.streams.values()) this.clientGroups.indexStream(stream);
  }

  /** A fresh topic container with this state's limits. */
  newTopicSlab(): IdSlab<TopicState> {
    return new IdSlab(this.limits.topicsPerStreamMax);
  }

  newGroupSlab(): IdSlab<GroupState> {
    return new IdSlab(this.limits.consumerGroupsPerTopicMax);
  }

  newMemberSlab(): IdSlab<MemberState> {
    return new IdSlab(this.limits.consumerGroupMembersMax);
  }

  /** An empty partition store bounded by this state's limits. */
  newPartitionStore(): PartitionStore {
    return new PartitionStore(this.limits.partitionsPerTopicMax);
  }
}

export function resolveStream(
  state: MetadataState,
  identifier: Identifier,
): StreamState | undefined {
  if (identifier.kind === 'id') return state.streams.get(identifier.id);
  const id = state.streamIndex.get(identifier.name);
  return id === undefined ? undefined : state.streams.get(id);
}

export function resolveTopic(stream: StreamState, identifier: Identifier): TopicState | undefined {
  if (identifier.kind === 'id') return stream.topics.get(identifier.id);
  const id = stream.topicIndex.get(identifier.name);
  return id === undefined ? undefined : stream.topics.get(id);
}

export function resolveGroup(topic: TopicState, identifier: Identifier): GroupState | undefined {
  if (identifier.kind === 'id') return topic.groups.get(identifier.id);
  const id = topic.groupIndex.get(identifier.name);
  return id === undefined ? undefined : topic.groups.get(id);
}

export function resolveUser(state: MetadataState, identifier: Identifier): UserState | undefined {
  if (identifier.kind === 'id') return state.users.get(identifier.id);
  const id = state.userIndex.get(identifier.name);
  return id === undefined ? undefined : state.users.get(id);
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

export function hexOf(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) out += HEX[byte]!;
  return out;
}

export function freezePermissions(permissions: PermissionsSnapshot): PermissionsSnapshot {
  return Object.freeze({
    global: permissions.global,
    streams: Object.freeze(
      permissions.streams.map((stream) =>
        Object.freeze({
          streamId: stream.streamId,
          bits: stream.bits,
          topics: Object.freeze(
            stream.topics.map((topic) =>
              Object.freeze({ topicId: topic.topicId, bits: topic.bits }),
            ),
          ),
        }),
      ),
    ),
  });
}

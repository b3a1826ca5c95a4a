/**
 * Conversion between the in-memory state and the snapshot model (snapshot-model.ts).
 *
 * `snapshotOf` emits the canonical form: every collection ascending by id, tokens by name. Restore
 * goes through `stateFromSnapshot`, which checks the invariants the state relies on (ids ordered
 * and within the limits, names unique per scope, partitions dense, the root user present) and
 * reports the first violation as a reason instead of building a state that would misbehave later.
 * The decoder (snapshot-codec.ts) already refused anything non-canonical; these are the semantic
 * rules it cannot know.
 */
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { IdSlab } from './id-slab.js';
import { compareBytes } from '../format/snapshot-codec.js';
import type {
  ConsumerGroupSnapshot,
  PersonalAccessTokenSnapshot,
  RevokedTokenSnapshot,
  StreamSnapshot,
  TopicSnapshot,
  UserSnapshot,
} from '../format/snapshot-model.js';
import {
  MetadataState,
  ROOT_USER_ID,
  freezePermissions,
  hexOf,
  type GroupState,
  type MemberState,
  type StreamState,
  type TokenState,
  type TopicState,
  type UserState,
} from './state.js';
import { PAT_TOKEN_HASH_SIZE, type MetadataLimits } from './validation.js';
import { PARTITION_CREATED_AT_SIZE } from '../format/snapshot-model.js';
import {
  PartitionStore,
  columnCount,
  columnDecoded,
  columnFirstUnsafe,
} from './partition-store.js';

/** UTF-16 code unit order, as Array#sort: the snapshot's canonical token order. */
function byName(left: TokenState, right: TokenState): number {
  return left.name < right.name ? -1 : left.name > right.name ? 1 : 0;
}

export function snapshotOf(state: MetadataState): MetadataMachineSnapshot {
  const users: UserSnapshot[] = [];
  for (const user of state.users.values()) {
    const sorted = [...user.tokens.values()].sort(byName);
    const tokens: PersonalAccessTokenSnapshot[] = sorted.map((token) => ({
      name: token.name,
      tokenHash: token.tokenHash.slice(),
      expiryAtUs: token.expiryAtUs,
    }));
    users.push({
      id: user.id,
      username: user.username,
      passwordHash: user.passwordHash,
      status: user.status,
      createdAtUs: user.createdAtUs,
      // Frozen and replaced wholesale on change, so sharing it is safe.
      permissions: user.permissions,
      tokens,
    });
  }
  const streams: StreamSnapshot[] = [];
  for (const stream of state.streams.values()) {
    const topics: TopicSnapshot[] = [];
    for (const topic of stream.topics.values()) {
      const consumerGroups: ConsumerGroupSnapshot[] = [];
      for (const group of topic.groups.values()) {
        consumerGroups.push({
          id: group.id,
          name: group.name,
          generation: group.generation,
          // Member partition lists are frozen and replaced on every rebalance.
          members: group.members.toArray().map((member) => ({
            id: member.id,
            clientId: member.clientId,
            partitions: member.partitions,
          })),
        });
      }
      topics.push({
        id: topic.id,
        name: topic.name,
        createdAtUs: topic.createdAtUs,
        messageExpiryUs: topic.messageExpiryUs,
        compressionAlgorithm: topic.compressionAlgorithm,
        maxTopicSizeBytes: topic.maxTopicSizeBytes,
        replicationFactor: topic.replicationFactor,
        // Shared copy-on-write: later adds and deletes copy the store's column, not this one.
        partitionsCreatedAtUs: topic.partitions.column(),
        consumerGroups,
        // Frozen and replaced wholesale on change, so sharing it is safe.
        options: topic.options,
        purgedAtUs: topic.purgedAtUs,
      });
    }
    streams.push({ id: stream.id, name: stream.name, createdAtUs: stream.createdAtUs, topics });
  }
  // Canonical order: jti bytes ascending (hex keys compare like the bytes they spell).
  const revokedTokens: RevokedTokenSnapshot[] = [...state.revokedTokens.entries()]
    .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0))
    .map(([, token]) => ({
      jti: token.jti.slice(),
      userId: token.userId,
      expiryAtUs: token.expiryAtUs,
    }));
  return { users, streams, revokedTokens };
}

/** Thrown inside the builder only; `stateFromSnapshot` turns it into a reason. */
class SnapshotInvariant extends Error {}

/**
 * A violated invariant. Checks that name the item (`topic 7 ...`) build their reason only when they
 * fail (`if (!ok) fail(...)`): a restore runs them per topic and per user, at boot when the code
 * is cold, and a template literal is an allocation per call whether or not it is thrown.
 */
function fail(reason: string): never {
  throw new SnapshotInvariant(reason);
}

function check(condition: boolean, reason: string): asserts condition {
  if (!condition) fail(reason);
}

/** Null when the ids are strictly ascending and below the collection's limit, else what is not. */
function idsFault(items: readonly { readonly id: number }[], idLimit: number): string | null {
  let previous = -1;
  for (const item of items) {
    if (!(Number.isInteger(item.id) && item.id > previous)) return 'ids are not strictly ascending';
    if (!(item.id < idLimit)) return `id ${item.id} is not below the limit ${idLimit}`;
    previous = item.id;
  }
  return null;
}

/** Ids strictly ascending and below the collection's limit (`what` names them). */
function checkIds(items: readonly { readonly id: number }[], idLimit: number, what: string): void {
  const fault = idsFault(items, idLimit);
  if (fault !== null) fail(`${what} ${fault}`);
}

/** A fresh state from `snapshot`, or the first invariant it violates. Never throws. */
export function stateFromSnapshot(
  snapshot: MetadataMachineSnapshot,
  limits: MetadataLimits,
): MetadataState | string {
  try {
    return build(snapshot, limits);
  } catch (error) {
    if (error instanceof SnapshotInvariant) return `snapshot ${error.message}`;
    throw error;
  }
}

function build(snapshot: MetadataMachineSnapshot, limits: MetadataLimits): MetadataState {
  const state = new MetadataState(limits);
  const users = usersFromSnapshot(state, snapshot.users, limits);
  const streams = streamsFromSnapshot(state, snapshot.streams, limits);
  state.install(users, streams);
  revokedTokensFromSnapshot(state, snapshot.revokedTokens, limits);
  return state;
}

/** The users, their tokens indexed into `state` (user and token indexes) as they are checked. */
function usersFromSnapshot(
  state: MetadataState,
  snapshotUsers: MetadataMachineSnapshot['users'],
  limits: MetadataLimits,
): [number, UserState][] {
  checkIds(snapshotUsers, limits.usersMax, 'user');
  check(snapshotUsers[0]?.id === ROOT_USER_ID, 'holds no root user (id 0)');
  const users: [number, UserState][] = [];
  for (const user of snapshotUsers) {
    if (state.userIndex.has(user.username)) fail(`username ${user.username} is not unique`);
    if (!(user.tokens.length <= limits.patsPerUserMax)) {
      fail(`user ${user.id} has more tokens than the limit`);
    }
    const tokens = new Map<string, TokenState>();
    for (const token of user.tokens) {
      if (tokens.has(token.name)) fail(`user ${user.id} token names are not unique`);
      if (token.tokenHash.byteLength !== PAT_TOKEN_HASH_SIZE) {
        fail(`user ${user.id} token hash is not SHA-256 sized`);
      }
      const hex = hexOf(token.tokenHash);
      check(!state.tokenIndex.has(hex), 'token hashes are not unique');
      const tokenHash = token.tokenHash.slice();
      tokens.set(token.name, { name: token.name, tokenHash, expiryAtUs: token.expiryAtUs });
      state.tokenIndex.set(hex, { userId: user.id, name: token.name });
    }
    state.userIndex.set(user.username, user.id);
    users.push([
      user.id,
      {
        id: user.id,
        username: user.username,
        passwordHash: user.passwordHash,
        status: user.status,
        createdAtUs: user.createdAtUs,
        permissions: user.permissions === null ? null : freezePermissions(user.permissions),
        tokens,
      },
    ]);
  }
  return users;
}

/** The streams and their topics, stream names indexed into `state` as they are checked. */
function streamsFromSnapshot(
  state: MetadataState,
  snapshotStreams: MetadataMachineSnapshot['streams'],
  limits: MetadataLimits,
): [number, StreamState][] {
  checkIds(snapshotStreams, limits.streamsMax, 'stream');
  const streams: [number, StreamState][] = [];
  for (const stream of snapshotStreams) {
    if (state.streamIndex.has(stream.name)) fail(`stream name ${stream.name} is not unique`);
    const topicsFault = idsFault(stream.topics, limits.topicsPerStreamMax);
    if (topicsFault !== null) fail(`stream ${stream.id} topic ${topicsFault}`);
    const topicIndex = new Map<string, number>();
    const topics: [number, TopicState][] = [];
    for (const topic of stream.topics) {
      if (topicIndex.has(topic.name)) fail(`stream ${stream.id} topic names are not unique`);
      topicIndex.set(topic.name, topic.id);
      topics.push([topic.id, topicFromSnapshot(topic, limits)]);
    }
    state.streamIndex.set(stream.name, stream.id);
    streams.push([
      stream.id,
      {
        id: stream.id,
        name: stream.name,
        createdAtUs: stream.createdAtUs,
        topics: IdSlab.from(limits.topicsPerStreamMax, topics),
        topicIndex,
      },
    ]);
  }
  return streams;
}

/** The revoked tokens (jti ascending, per-user counts within the limit), into `state`. */
function revokedTokensFromSnapshot(
  state: MetadataState,
  revokedTokens: MetadataMachineSnapshot['revokedTokens'],
  limits: MetadataLimits,
): void {
  check(revokedTokens.length <= limits.revokedTokensMax, 'has more revoked tokens than the limit');
  let previous: Uint8Array | null = null;
  for (const token of revokedTokens) {
    check(token.jti.byteLength === 16, 'revoked token id is not 16 bytes');
    check(
      previous === null || compareBytes(token.jti, previous) > 0,
      'revoked token ids are not strictly ascending',
    );
    previous = token.jti;
    const count = (state.revokedTokensByUser.get(token.userId) ?? 0) + 1;
    check(
      count <= limits.revokedTokensPerUserMax,
      `user ${token.userId} has more revoked tokens than the limit`,
    );
    state.revokedTokensByUser.set(token.userId, count);
    const revoked = { jti: token.jti.slice(), userId: token.userId, expiryAtUs: token.expiryAtUs };
    state.revokedTokens.set(hexOf(token.jti), revoked);
  }
}

function topicFromSnapshot(topic: TopicSnapshot, limits: MetadataLimits): TopicState {
  // A decoded column was proved canonical by the decoder (whole u64 values, each <= 2^53 - 1) and
  // is not walked again; a model built in memory (tests, a peer's bug) is checked here so the
  // store's assertions never see a bad one.
  const column = topic.partitionsCreatedAtUs;
  if (!(column instanceof Uint8Array && column.byteLength % PARTITION_CREATED_AT_SIZE === 0)) {
    fail(`topic ${topic.id} partition column is not whole u64 values`);
  }
  const partitionsCount = columnCount(column);
  if (!(partitionsCount <= limits.partitionsPerTopicMax)) {
    fail(`topic ${topic.id} has more partitions than the limit`);
  }
  if (!columnDecoded(column) && columnFirstUnsafe(column) >= 0) {
    fail(`topic ${topic.id} partition createdAtUs exceeds 2^53 - 1`);
  }
  const groupsFault = idsFault(topic.consumerGroups, limits.consumerGroupsPerTopicMax);
  if (groupsFault !== null) fail(`topic ${topic.id} group ${groupsFault}`);
  const groups: [number, GroupState][] = [];
  const groupIndex = new Map<string, number>();
  for (const group of topic.consumerGroups) {
    if (groupIndex.has(group.name)) fail(`topic ${topic.id} group names are not unique`);
    groupIndex.set(group.name, group.id);
    const membersFault = idsFault(group.members, limits.consumerGroupMembersMax);
    if (membersFault !== null) fail(`group ${group.id} member ${membersFault}`);
    const members: [number, MemberState][] = group.members.map((member) => {
      if (!member.partitions.every((id) => id < partitionsCount)) {
        fail(`group ${group.id} assigns a partition the topic lacks`);
      }
      const partitions = Object.freeze(member.partitions.slice());
      return [member.id, { id: member.id, clientId: member.clientId, partitions }];
    });
    groups.push([
      group.id,
      {
        id: group.id,
        name: group.name,
        generation: group.generation,
        members: IdSlab.from(limits.consumerGroupMembersMax, members),
      },
    ]);
  }
  return {
    id: topic.id,
    name: topic.name,
    createdAtUs: topic.createdAtUs,
    messageExpiryUs: topic.messageExpiryUs,
    compressionAlgorithm: topic.compressionAlgorithm,
    maxTopicSizeBytes: topic.maxTopicSizeBytes,
    replicationFactor: topic.replicationFactor,
    // Adopted without a copy (copy-on-write): the snapshot's column stays as it was.
    partitions: PartitionStore.adopt(column, limits.partitionsPerTopicMax),
    groups: IdSlab.from(limits.consumerGroupsPerTopicMax, groups),
    groupIndex,
    options: Object.isFrozen(topic.options)
      ? topic.options
      : Object.freeze(
          topic.options.map((entry) => Object.freeze({ key: entry.key, value: entry.value })),
        ),
    purgedAtUs: topic.purgedAtUs,
  };
}

/**
 * Permission checks with Iggy's semantics (apache/iggy `core/metadata/src/permissioner/**`,
 * cc269ef70). The root user (id 0) bypasses every check (`authz.rs`: `user_id == ROOT_USER_ID`).
 *
 * Inheritance, as Iggy has it:
 *   - streams: global manage_streams | read_streams reads any stream; stream manage_stream |
 *     read_stream reads that one. Managing (update/delete/purge) needs global manage_streams or
 *     stream manage_stream. Creating a stream needs global manage_streams.
 *   - topics: reading needs global read_streams | manage_streams | manage_topics | read_topics, or
 *     stream manage_stream | read_stream | manage_topics | read_topics, or topic manage_topic |
 *     read_topic. Managing (update/delete/purge, partitions, segments) needs global manage_streams
 *     | manage_topics, or stream manage_stream | manage_topics, or topic manage_topic. Creating a
 *     topic needs the global or stream grants of managing (there is no topic yet).
 *   - consumer groups (create/delete/join/leave/read) need topic read access.
 *   - users: create/update/delete/permissions/password of another user need manage_users; reading
 *     users needs manage_users | read_users. A user may always change their own password and
 *     manage their own personal access tokens.
 *   - servers (stats, clients, snapshot): manage_servers | read_servers.
 *   - messages: poll = read topic or poll_messages at any level; send = manage topic or
 *     send_messages at any level.
 */
import {
  GlobalPermission as G,
  StreamPermission as S,
  TopicPermission as T,
  type PermissionsSnapshot,
  type StreamPermissionsSnapshot,
} from '../format/snapshot-model.js';
import { ROOT_USER_ID } from './state.js';

/** The actor of a check: a user id and their committed permissions. */
export interface Principal {
  readonly id: number;
  readonly permissions: PermissionsSnapshot | null;
}

function globalHas(principal: Principal, bits: number): boolean {
  return principal.id === ROOT_USER_ID || ((principal.permissions?.global ?? 0) & bits) !== 0;
}

/** Binary search: permission streams are canonical (ascending ids). */
function streamEntry(
  principal: Principal,
  streamId: number,
): StreamPermissionsSnapshot | undefined {
  const streams = principal.permissions?.streams;
  if (streams === undefined) return undefined;
  let low = 0;
  let high = streams.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const entry = streams[middle]!;
    if (entry.streamId === streamId) return entry;
    if (entry.streamId < streamId) low = middle + 1;
    else high = middle - 1;
  }
  return undefined;
}

function streamHas(principal: Principal, streamId: number, bits: number): boolean {
  return ((streamEntry(principal, streamId)?.bits ?? 0) & bits) !== 0;
}

function topicHas(principal: Principal, streamId: number, topicId: number, bits: number): boolean {
  const topics = streamEntry(principal, streamId)?.topics;
  if (topics === undefined) return false;
  for (const topic of topics) if (topic.topicId === topicId) return (topic.bits & bits) !== 0;
  return false;
}

export function canReadStreams(principal: Principal): boolean {
  return globalHas(principal, G.manageStreams | G.readStreams);
}

export function canReadStream(principal: Principal, streamId: number): boolean {
  return (
    globalHas(principal, G.manageStreams | G.readStreams) ||
    streamHas(principal, streamId, S.manageStream | S.readStream)
  );
}

export function canCreateStream(principal: Principal): boolean {
  return globalHas(principal, G.manageStreams);
}

/** Update, delete, purge. */
export function canManageStream(principal: Principal, streamId: number): boolean {
  return globalHas(principal, G.manageStreams) || streamHas(principal, streamId, S.manageStream);
}

export function canReadTopics(principal: Principal, streamId: number): boolean {
  return (
    globalHas(principal, G.readStreams | G.manageStreams | G.manageTopics | G.readTopics) ||
    streamHas(principal, streamId, S.manageStream | S.readStream | S.manageTopics | S.readTopics)
  );
}

/** Read a topic; also every consumer-group operation on it. */
export function canReadTopic(principal: Principal, streamId: number, topicId: number): boolean {
  return (
    canReadTopics(principal, streamId) ||
    topicHas(principal, streamId, topicId, T.manageTopic | T.readTopic)
  );
}

export function canCreateTopic(principal: Principal, streamId: number): boolean {
  return (
    globalHas(principal, G.manageStreams | G.manageTopics) ||
    streamHas(principal, streamId, S.manageStream | S.manageTopics)
  );
}

/** Update, delete, purge; create/delete partitions; delete segments. */
export function canManageTopic(principal: Principal, streamId: number, topicId: number): boolean {
  return (
    canCreateTopic(principal, streamId) ||
    topicHas(principal, streamId, topicId, T.manageTopic)
  );
}

export function canManageUsers(principal: Principal): boolean {
  return globalHas(principal, G.manageUsers);
}

export function canReadUsers(principal: Principal): boolean {
  return globalHas(principal, G.manageUsers | G.readUsers);
}

/** Stats, clients, snapshot. */
export function canReadServers(principal: Principal): boolean {
  return globalHas(principal, G.manageServers | G.readServers);
}

export function canPollMessages(principal: Principal, streamId: number, topicId: number): boolean {
  const globalBits =
    G.pollMessages | G.readTopics | G.manageTopics | G.readStreams | G.manageStreams;
  const streamBits =
    S.pollMessages | S.manageStream | S.readStream | S.manageTopics | S.readTopics;
  return (
    globalHas(principal, globalBits) ||
    streamHas(principal, streamId, streamBits) ||
    topicHas(principal, streamId, topicId, T.manageTopic | T.readTopic | T.pollMessages)
  );
}

export function canSendMessages(principal: Principal, streamId: number, topicId: number): boolean {
  return (
    globalHas(principal, G.sendMessages | G.manageStreams | G.manageTopics) ||
    streamHas(principal, streamId, S.sendMessages | S.manageStream | S.manageTopics) ||
    topicHas(principal, streamId, topicId, T.manageTopic | T.sendMessages)
  );
}

/** Every global bit: the root user's permissions. */
export const ALL_GLOBAL_PERMISSIONS = Object.values(G).reduce((all, bit) => all | bit, 0);

/** Input for `canonicalPermissions`: any order, possibly duplicate-free but unsorted. */
export interface PermissionsInput {
  readonly global: number;
  readonly streams: readonly {
    readonly streamId: number;
    readonly bits: number;
    readonly topics: readonly { readonly topicId: number; readonly bits: number }[];
  }[];
}

/**
 * Sorts permissions into canonical form (ids ascending) for an op body. Returns null when a stream
 * or topic id repeats, which the HTTP layer reports as a validation error.
 */
export function canonicalPermissions(input: PermissionsInput): PermissionsSnapshot | null {
  const streams = [...input.streams].sort((left, right) => left.streamId - right.streamId);
  for (let index = 1; index < streams.length; index++) {
    if (streams[index]!.streamId === streams[index - 1]!.streamId) return null;
  }
  const canonical = [];
  for (const stream of streams) {
    const topics = [...stream.topics].sort((left, right) => left.topicId - right.topicId);
    for (let index = 1; index < topics.length; index++) {
      if (topics[index]!.topicId === topics[index - 1]!.topicId) return null;
    }
    canonical.push(
      Object.freeze({
        streamId: stream.streamId,
        bits: stream.bits,
        topics: Object.freeze(
          topics.map((topic) => Object.freeze({ topicId: topic.topicId, bits: topic.bits })),
        ),
      }),
    );
  }
  return Object.freeze({ global: input.global, streams: Object.freeze(canonical) });
}

/**
 * Drops grants on a deleted stream (or one topic of it). Ids are reused, so a grant left behind
 * would silently apply to whatever stream or topic takes the id next. Returns the same object when
 * nothing changes, so callers can skip untouched users cheaply.
 */
export function withoutStream(
  permissions: PermissionsSnapshot,
  streamId: number,
): PermissionsSnapshot {
  if (!permissions.streams.some((stream) => stream.streamId === streamId)) return permissions;
  return Object.freeze({
    global: permissions.global,
    streams: Object.freeze(permissions.streams.filter((stream) => stream.streamId !== streamId)),
  });
}

export function withoutTopic(
  permissions: PermissionsSnapshot,
  streamId: number,
  topicId: number,
): PermissionsSnapshot {
  const entry = permissions.streams.find((stream) => stream.streamId === streamId);
  if (entry === undefined || !entry.topics.some((topic) => topic.topicId === topicId)) {
    return permissions;
  }
  const pruned = Object.freeze({
    streamId: entry.streamId,
    bits: entry.bits,
    topics: Object.freeze(entry.topics.filter((topic) => topic.topicId !== topicId)),
  });
  return Object.freeze({
    global: permissions.global,
    streams: Object.freeze(
      permissions.streams.map((stream) => (stream === entry ? pruned : stream)),
    ),
  });
}

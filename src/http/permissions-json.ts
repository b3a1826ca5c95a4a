/**
 * Iggy's JSON permissions (named booleans, maps keyed by stream / topic id) <-> the bit sets the
 * state machine stores (snapshot-model.ts). The bit order is the state machine's; the key order of
 * the JSON is Iggy's (`core/common/src/types/permissions/permissions_global.rs`).
 */
import { canonicalPermissions } from '../metadata/permissions.js';
import { GlobalPermission, StreamPermission, TopicPermission, type PermissionsSnapshot } from '../format/snapshot-model.js';
import { PERMISSION_STREAMS_MAX, PERMISSION_TOPICS_MAX } from '../metadata/validation.js';
import { invalidRequest, unprocessableBody, type HttpError } from './errors.js';
import type { PermissionsJson, PermissionsOutJson } from './schemas.js';

/** JSON key -> bit, in Iggy's field order. */
const GLOBAL_BITS = {
  manage_servers: GlobalPermission.manageServers,
  read_servers: GlobalPermission.readServers,
  manage_users: GlobalPermission.manageUsers,
  read_users: GlobalPermission.readUsers,
  manage_streams: GlobalPermission.manageStreams,
  read_streams: GlobalPermission.readStreams,
  manage_topics: GlobalPermission.manageTopics,
  read_topics: GlobalPermission.readTopics,
  poll_messages: GlobalPermission.pollMessages,
  send_messages: GlobalPermission.sendMessages,
} as const;
const STREAM_BITS = {
  manage_stream: StreamPermission.manageStream,
  read_stream: StreamPermission.readStream,
  manage_topics: StreamPermission.manageTopics,
  read_topics: StreamPermission.readTopics,
  poll_messages: StreamPermission.pollMessages,
  send_messages: StreamPermission.sendMessages,
} as const;
const TOPIC_BITS = {
  manage_topic: TopicPermission.manageTopic,
  read_topic: TopicPermission.readTopic,
  poll_messages: TopicPermission.pollMessages,
  send_messages: TopicPermission.sendMessages,
} as const;

type Flags<M> = { [K in keyof M]: boolean };

function bitsOf<M extends Record<string, number>>(map: M, flags: Flags<M>): number {
  let bits = 0;
  for (const [key, bit] of Object.entries(map)) if (flags[key as keyof M]) bits |= bit;
  return bits;
}

function flagsOf<M extends Record<string, number>>(map: M, bits: number): Flags<M> {
  const out = {} as Flags<M>;
  for (const [key, bit] of Object.entries(map)) out[key as keyof M] = (bits & bit) !== 0;
  return out;
}

/** A map key as a u32 id: plain decimal digits only, so "1" and "01" cannot name one id twice. */
function idOfKey(key: string): number | null {
  if (!/^(?:0|[1-9][0-9]{0,9})$/.test(key)) return null;
  const id = Number(key);
  return id <= 0xffff_ffff ? id : null;
}

/** The JSON of a request body as canonical permissions, or the 400 that explains why not. */
export function permissionsFromJson(json: PermissionsJson | null | undefined): PermissionsSnapshot | null | HttpError {
  if (json === null || json === undefined) return null;
  const streamEntries = Object.entries(json.streams ?? {});
  if (streamEntries.length > PERMISSION_STREAMS_MAX) {
    return invalidRequest('permissions', `at most ${PERMISSION_STREAMS_MAX} streams may carry permissions`);
  }
  const streams = [];
  for (const [streamKey, stream] of streamEntries) {
    const streamId = idOfKey(streamKey);
    // serde reads the map's keys as u32: a key that is not one is a 422, as for any mistyped field.
    if (streamId === null) return unprocessableBody('permissions', `stream key "${streamKey}" is not a u32 id`);
    const topicEntries = Object.entries(stream.topics ?? {});
    if (topicEntries.length > PERMISSION_TOPICS_MAX) {
      return invalidRequest('permissions', `at most ${PERMISSION_TOPICS_MAX} topics per stream may carry permissions`);
    }
    const topics = [];
    for (const [topicKey, topic] of topicEntries) {
      const topicId = idOfKey(topicKey);
      if (topicId === null) return unprocessableBody('permissions', `topic key "${topicKey}" is not a u32 id`);
      topics.push({ topicId, bits: bitsOf(TOPIC_BITS, topic) });
    }
    streams.push({ streamId, bits: bitsOf(STREAM_BITS, stream), topics });
  }
  const canonical = canonicalPermissions({ global: bitsOf(GLOBAL_BITS, json.global), streams });
  // Unreachable with canonical decimal keys (object keys are unique), kept as the codec's rule.
  if (canonical === null) return invalidRequest('permissions', 'a stream or topic id repeats');
  return canonical;
}

/** Stored permissions as Iggy's JSON (`streams: null` when no stream carries any). */
export function permissionsToJson(permissions: PermissionsSnapshot | null): PermissionsOutJson | null {
  if (permissions === null) return null;
  let streams: PermissionsOutJson['streams'] = null;
  if (permissions.streams.length > 0) {
    streams = {};
    for (const stream of permissions.streams) {
      let topics: Record<string, Flags<typeof TOPIC_BITS>> | null = null;
      if (stream.topics.length > 0) {
        topics = {};
        for (const topic of stream.topics) topics[String(topic.topicId)] = flagsOf(TOPIC_BITS, topic.bits);
      }
      streams[String(stream.streamId)] = { ...flagsOf(STREAM_BITS, stream.bits), topics };
    }
  }
  return { global: flagsOf(GLOBAL_BITS, permissions.global), streams };
}

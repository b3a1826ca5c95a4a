/**
 * Binary bodies of the metadata operations (little-endian), the form a prepare carries in the log.
 *
 * Decoding is strict and total: any byte string either decodes to exactly one request whose
 * re-encoding is the same bytes, or is refused with a reason. It never throws, because bodies come
 * off the network and the disk. Strictness (canonical flags, zeroed absent fields, no trailing
 * bytes, ascending permission ids) is what makes "same bytes" and "same request" one notion, so a
 * replica cannot accept a body another one would read differently.
 *
 * Primitives:
 *   name        u8 size + UTF-8 (0..=255 bytes; emptiness is a validation error, not a decode one)
 *   identifier  u8 kind (1 = numeric: u8 size 4 + u32; 2 = name: u8 size 1..=255 + UTF-8)
 *   hash        u16 size (<= PASSWORD_HASH_SIZE_MAX) + ASCII, for Argon2id PHC strings
 *   permissions u8 present (0|1) [global u32, u16 count, count x (stream u32, bits u32, u16 count,
 *               count x (topic u32, bits u32))], ids strictly ascending, only known bits
 *
 * Layouts:
 *   128 CreateStream         name
 *   129 UpdateStream         stream_id, name
 *   130 DeleteStream         stream_id          131 PurgeStream  stream_id
 *   132 CreateTopic          stream_id, partitions_count u32, compression u8,
 *                            message_expiry_us u64, max_topic_size_bytes u64,
 *                            replication_factor u8, name, options (u8 count <= TOPIC_OPTIONS_MAX,
 *                            count x (key name, u8 has_value, [value name]), keys strictly
 *                            ascending)
 *   133 UpdateTopic          stream_id, topic_id, present u8 (bit0 compression, bit1 expiry,
 *                            bit2 max size, bit3 replication; absent fields are zero),
 *                            compression u8, message_expiry_us u64, max_topic_size_bytes u64,
 *                            replication_factor u8, name
 *   134 DeleteTopic / 135 PurgeTopic                       stream_id, topic_id
 *   136 CreatePartitions / 137 DeletePartitions            stream_id, topic_id,
 *                                                          partitions_count u32
 *   138 DeleteSegments       stream_id, topic_id, partition_id u32, segments_count u32
 *   139 CreateConsumerGroup  stream_id, topic_id, name
 *   140 DeleteConsumerGroup / 148 Join / 149 Leave         stream_id, topic_id, group_id
 *   141 CreateUser           username name, status u8, password_hash hash, permissions
 *   142 UpdateUser           user_id, present u8 (bit0 username, bit1 status), status u8,
 *                            username name
 *   143 DeleteUser           user_id
 *   144 ChangePassword       user_id, current_password_hash hash, new_password_hash hash
 *   145 UpdatePermissions    user_id, permissions
 *   146 CreatePersonalAccessToken   name, expiry_us u64, token_hash [32]
 *   147 DeletePersonalAccessToken   flags u8 (bit0 only_if_expired, bit1 owner present),
 *                                   [owner_user_id u32], name
 *   150 RevokeAccessToken    jti [16], expiry_at_us u64 (below 2^53)
 */
import { MESSAGE_BODY_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { BodyReader, BodyWriter } from './body-io.js';
import { Operation, type Identifier, type MetadataRequest } from './operations.js';
import { TOPIC_OPTIONS_MAX, type TopicOptionEntry } from './options.js';
import {
  ACCESS_TOKEN_ID_SIZE,
  GlobalPermission,
  StreamPermission,
  TopicPermission,
  type PermissionsSnapshot,
} from '../format/snapshot-model.js';
import {
  PAT_TOKEN_HASH_SIZE,
  PERMISSION_STREAMS_MAX,
  PERMISSION_TOPICS_MAX,
} from './validation.js';

export type DecodeResult =
  | { readonly ok: true; readonly request: MetadataRequest }
  | { readonly ok: false; readonly reason: string };

/** A metadata body never exceeds one frame's body. */
export const OPERATION_BODY_SIZE_MAX = MESSAGE_BODY_SIZE_MAX;

export const GLOBAL_PERMISSION_BITS = allBits(GlobalPermission);
export const STREAM_PERMISSION_BITS = allBits(StreamPermission);
export const TOPIC_PERMISSION_BITS = allBits(TopicPermission);

function allBits(bits: Readonly<Record<string, number>>): number {
  return Object.values(bits).reduce((all, bit) => all | bit, 0);
}

const UPDATE_TOPIC_PRESENT_BITS = 0b1111;
const UPDATE_USER_PRESENT_BITS = 0b11;
const DELETE_PAT_FLAG_BITS = 0b11;

/** Structure only (count bound, key order, flag values); apply checks them against the catalog. */
function readTopicOptions(r: BodyReader): readonly TopicOptionEntry[] {
  const count = r.u8('options');
  r.check(count <= TOPIC_OPTIONS_MAX, `options: ${count} entries exceeds ${TOPIC_OPTIONS_MAX}`);
  const entries: TopicOptionEntry[] = [];
  for (let index = 0; index < count && r.ok; index++) {
    const key = r.name('options.key');
    const hasValue = r.u8('options.has_value');
    r.check(hasValue <= 1, `options.has_value: ${hasValue}`);
    const value = hasValue === 1 ? r.name('options.value') : null;
    const previous = entries[entries.length - 1];
    const ascending = previous === undefined || key > previous.key;
    r.check(ascending, 'options: keys are not strictly ascending');
    entries.push({ key, value });
  }
  return entries;
}

function writeTopicOptions(w: BodyWriter, entries: readonly TopicOptionEntry[]): void {
  assert(entries.length <= TOPIC_OPTIONS_MAX, 'topic options within TOPIC_OPTIONS_MAX');
  w.u8(entries.length);
  for (let index = 0; index < entries.length; index++) {
    const entry = entries[index]!;
    const ascending = index === 0 || entry.key > entries[index - 1]!.key;
    assert(ascending, 'topic option keys strictly ascending');
    w.name(entry.key);
    w.u8(entry.value === null ? 0 : 1);
    if (entry.value !== null) w.name(entry.value);
  }
}

export function decodeRequest(operation: number, body: Uint8Array): DecodeResult {
  if (body.byteLength > OPERATION_BODY_SIZE_MAX) {
    return { ok: false, reason: 'body exceeds the frame body size' };
  }
  const reader = new BodyReader(body);
  const request = readRequest(operation, reader);
  if (request === null) {
    return { ok: false, reason: `operation ${operation} is not a metadata operation` };
  }
  const reason = reader.finish();
  if (reason !== null) return { ok: false, reason };
  return { ok: true, request };
}

function readRequest(operation: number, r: BodyReader): MetadataRequest | null {
  // Each reader answers null, reading nothing, for an operation outside its group.
  return (
    readStreamTopicRequest(operation, r) ??
    readPartitionGroupRequest(operation, r) ??
    readUserRequest(operation, r)
  );
}

/** Streams and topics. */
function readStreamTopicRequest(operation: number, r: BodyReader): MetadataRequest | null {
  switch (operation) {
    case Operation.createStream:
      return { operation, name: r.name('name') };
    case Operation.updateStream:
      return { operation, streamId: r.identifier('stream_id'), name: r.name('name') };
    case Operation.deleteStream:
    case Operation.purgeStream:
      return { operation, streamId: r.identifier('stream_id') };
    case Operation.createTopic:
      return {
        operation,
        streamId: r.identifier('stream_id'),
        partitionsCount: r.u32('partitions_count'),
        compressionAlgorithm: r.u8('compression'),
        messageExpiryUs: r.u64('message_expiry_us'),
        maxTopicSizeBytes: r.u64('max_topic_size_bytes'),
        replicationFactor: r.u8('replication_factor'),
        name: r.name('name'),
        options: readTopicOptions(r),
      };
    case Operation.updateTopic: {
      const streamId = r.identifier('stream_id');
      const topicId = r.identifier('topic_id');
      const present = r.flags('present', UPDATE_TOPIC_PRESENT_BITS);
      const compression = r.u8('compression');
      const expiry = r.u64('message_expiry_us');
      const maxSize = r.u64('max_topic_size_bytes');
      const replication = r.u8('replication_factor');
      r.zeroUnless((present & 1) !== 0, compression, 'compression');
      r.zeroUnless((present & 2) !== 0, expiry, 'message_expiry_us');
      r.zeroUnless((present & 4) !== 0, maxSize, 'max_topic_size_bytes');
      r.zeroUnless((present & 8) !== 0, replication, 'replication_factor');
      return {
        operation,
        streamId,
        topicId,
        compressionAlgorithm: (present & 1) !== 0 ? compression : null,
        messageExpiryUs: (present & 2) !== 0 ? expiry : null,
        maxTopicSizeBytes: (present & 4) !== 0 ? maxSize : null,
        replicationFactor: (present & 8) !== 0 ? replication : null,
        name: r.name('name'),
      };
    }
    case Operation.deleteTopic:
    case Operation.purgeTopic:
      return { operation, streamId: r.identifier('stream_id'), topicId: r.identifier('topic_id') };
    default:
      return null;
  }
}

/** Partitions, segments and consumer groups. */
function readPartitionGroupRequest(operation: number, r: BodyReader): MetadataRequest | null {
  switch (operation) {
    case Operation.createPartitions:
    case Operation.deletePartitions:
      return {
        operation,
        streamId: r.identifier('stream_id'),
        topicId: r.identifier('topic_id'),
        partitionsCount: r.u32('partitions_count'),
      };
    case Operation.deleteSegments:
      return {
        operation,
        streamId: r.identifier('stream_id'),
        topicId: r.identifier('topic_id'),
        partitionId: r.u32('partition_id'),
        segmentsCount: r.u32('segments_count'),
      };
    case Operation.createConsumerGroup:
      return {
        operation,
        streamId: r.identifier('stream_id'),
        topicId: r.identifier('topic_id'),
        name: r.name('name'),
      };
    case Operation.deleteConsumerGroup:
    case Operation.joinConsumerGroup:
    case Operation.leaveConsumerGroup:
      return {
        operation,
        streamId: r.identifier('stream_id'),
        topicId: r.identifier('topic_id'),
        groupId: r.identifier('group_id'),
      };
    default:
      return null;
  }
}

/** Users, personal access tokens and token revocation. */
function readUserRequest(operation: number, r: BodyReader): MetadataRequest | null {
  switch (operation) {
    case Operation.createUser:
      return {
        operation,
        username: r.name('username'),
        status: r.u8('status'),
        passwordHash: r.hash('password_hash'),
        permissions: readPermissions(r),
      };
    case Operation.updateUser: {
      const userId = r.identifier('user_id');
      const present = r.flags('present', UPDATE_USER_PRESENT_BITS);
      const status = r.u8('status');
      const username = r.name('username');
      r.zeroUnless((present & 2) !== 0, status, 'status');
      r.zeroUnless((present & 1) !== 0, username.length, 'username');
      return {
        operation,
        userId,
        username: (present & 1) !== 0 ? username : null,
        status: (present & 2) !== 0 ? status : null,
      };
    }
    case Operation.deleteUser:
      return { operation, userId: r.identifier('user_id') };
    case Operation.changePassword:
      return {
        operation,
        userId: r.identifier('user_id'),
        currentPasswordHash: r.hash('current_password_hash'),
        newPasswordHash: r.hash('new_password_hash'),
      };
    case Operation.updatePermissions:
      return { operation, userId: r.identifier('user_id'), permissions: readPermissions(r) };
    case Operation.createPersonalAccessToken:
      return {
        operation,
        name: r.name('name'),
        expiryUs: r.u64('expiry_us'),
        tokenHash: r.bytes(PAT_TOKEN_HASH_SIZE, 'token_hash'),
      };
    case Operation.deletePersonalAccessToken: {
      const flags = r.flags('flags', DELETE_PAT_FLAG_BITS);
      const ownerUserId = (flags & 2) !== 0 ? r.u32('owner_user_id') : null;
      return { operation, ownerUserId, onlyIfExpired: (flags & 1) !== 0, name: r.name('name') };
    }
    case Operation.revokeAccessToken: {
      const jti = r.bytes(ACCESS_TOKEN_ID_SIZE, 'jti');
      const expiry = r.u64('expiry_at_us');
      r.check(expiry <= BigInt(Number.MAX_SAFE_INTEGER), 'expiry_at_us exceeds 2^53 - 1');
      return { operation, jti, expiryAtUs: Number(expiry) };
    }
    default:
      return null;
  }
}

function readPermissions(r: BodyReader): PermissionsSnapshot | null {
  const present = r.flags('permissions', 1);
  if (present === 0) return null;
  const global = r.u32('permissions.global');
  r.check((global & ~GLOBAL_PERMISSION_BITS) === 0, 'permissions.global has unknown bits');
  const streamCount = r.u16('permissions.streams');
  r.check(
    streamCount <= PERMISSION_STREAMS_MAX,
    'permissions.streams exceeds PERMISSION_STREAMS_MAX',
  );
  const streams = [];
  let previousStreamId = -1;
  for (let index = 0; index < streamCount && r.ok; index++) {
    const streamId = r.u32('permissions.stream_id');
    const bits = r.u32('permissions.stream.bits');
    r.check(streamId > previousStreamId, 'permissions stream ids are not strictly ascending');
    r.check((bits & ~STREAM_PERMISSION_BITS) === 0, 'permissions.stream.bits has unknown bits');
    previousStreamId = streamId;
    const topicCount = r.u16('permissions.topics');
    r.check(
      topicCount <= PERMISSION_TOPICS_MAX,
      'permissions.topics exceeds PERMISSION_TOPICS_MAX',
    );
    const topics = [];
    let previousTopicId = -1;
    for (let topicIndex = 0; topicIndex < topicCount && r.ok; topicIndex++) {
      const topicId = r.u32('permissions.topic_id');
      const topicBits = r.u32('permissions.topic.bits');
      r.check(topicId > previousTopicId, 'permissions topic ids are not strictly ascending');
      r.check(
        (topicBits & ~TOPIC_PERMISSION_BITS) === 0,
        'permissions.topic.bits has unknown bits',
      );
      previousTopicId = topicId;
      topics.push(Object.freeze({ topicId, bits: topicBits }));
    }
    streams.push(Object.freeze({ streamId, bits, topics: Object.freeze(topics) }));
  }
  return Object.freeze({ global, streams: Object.freeze(streams) });
}

/**
 * Encodes a request. Callers validate untrusted text first (validation.ts rejects ill-formed
 * UTF-16 and oversized names); a value that does not fit its field is a programming error here.
 */
export function encodeRequest(request: MetadataRequest): Uint8Array {
  const w = new BodyWriter();
  const written =
    writeStreamTopicRequest(w, request) ||
    writePartitionGroupRequest(w, request) ||
    writeUserRequest(w, request);
  assert(written, 'every metadata operation has a writer');
  const body = w.finish();
  assert(body.byteLength <= OPERATION_BODY_SIZE_MAX, 'metadata body fits one frame');
  return body;
}

/** Streams and topics. False, writing nothing, for an operation outside the group. */
function writeStreamTopicRequest(w: BodyWriter, request: MetadataRequest): boolean {
  switch (request.operation) {
    case Operation.createStream:
      w.name(request.name);
      return true;
    case Operation.updateStream:
      w.identifier(request.streamId);
      w.name(request.name);
      return true;
    case Operation.deleteStream:
    case Operation.purgeStream:
      w.identifier(request.streamId);
      return true;
    case Operation.createTopic:
      w.identifier(request.streamId);
      w.u32(request.partitionsCount);
      w.u8(request.compressionAlgorithm);
      w.u64(request.messageExpiryUs);
      w.u64(request.maxTopicSizeBytes);
      w.u8(request.replicationFactor);
      w.name(request.name);
      writeTopicOptions(w, request.options);
      return true;
    case Operation.updateTopic: {
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      const present =
        (request.compressionAlgorithm !== null ? 1 : 0) |
        (request.messageExpiryUs !== null ? 2 : 0) |
        (request.maxTopicSizeBytes !== null ? 4 : 0) |
        (request.replicationFactor !== null ? 8 : 0);
      w.u8(present);
      w.u8(request.compressionAlgorithm ?? 0);
      w.u64(request.messageExpiryUs ?? 0n);
      w.u64(request.maxTopicSizeBytes ?? 0n);
      w.u8(request.replicationFactor ?? 0);
      w.name(request.name);
      return true;
    }
    case Operation.deleteTopic:
    case Operation.purgeTopic:
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      return true;
    default:
      return false;
  }
}

/** Partitions, segments and consumer groups. False, writing nothing, for another operation. */
function writePartitionGroupRequest(w: BodyWriter, request: MetadataRequest): boolean {
  switch (request.operation) {
    case Operation.createPartitions:
    case Operation.deletePartitions:
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      w.u32(request.partitionsCount);
      return true;
    case Operation.deleteSegments:
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      w.u32(request.partitionId);
      w.u32(request.segmentsCount);
      return true;
    case Operation.createConsumerGroup:
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      w.name(request.name);
      return true;
    case Operation.deleteConsumerGroup:
    case Operation.joinConsumerGroup:
    case Operation.leaveConsumerGroup:
      w.identifier(request.streamId);
      w.identifier(request.topicId);
      w.identifier(request.groupId);
      return true;
    default:
      return false;
  }
}

/** Users, personal access tokens and token revocation. False, writing nothing, otherwise. */
function writeUserRequest(w: BodyWriter, request: MetadataRequest): boolean {
  switch (request.operation) {
    case Operation.createUser:
      w.name(request.username);
      w.u8(request.status);
      w.hash(request.passwordHash);
      writePermissions(w, request.permissions);
      return true;
    case Operation.updateUser:
      w.identifier(request.userId);
      w.u8((request.username !== null ? 1 : 0) | (request.status !== null ? 2 : 0));
      w.u8(request.status ?? 0);
      w.name(request.username ?? '');
      return true;
    case Operation.deleteUser:
      w.identifier(request.userId);
      return true;
    case Operation.changePassword:
      w.identifier(request.userId);
      w.hash(request.currentPasswordHash);
      w.hash(request.newPasswordHash);
      return true;
    case Operation.updatePermissions:
      w.identifier(request.userId);
      writePermissions(w, request.permissions);
      return true;
    case Operation.createPersonalAccessToken:
      assert(request.tokenHash.byteLength === PAT_TOKEN_HASH_SIZE, 'token hash is SHA-256');
      w.name(request.name);
      w.u64(request.expiryUs);
      w.bytes(request.tokenHash);
      return true;
    case Operation.deletePersonalAccessToken:
      w.u8((request.onlyIfExpired ? 1 : 0) | (request.ownerUserId !== null ? 2 : 0));
      if (request.ownerUserId !== null) w.u32(request.ownerUserId);
      w.name(request.name);
      return true;
    case Operation.revokeAccessToken:
      assert(request.jti.byteLength === ACCESS_TOKEN_ID_SIZE, 'a token id is 16 bytes');
      assert(
        Number.isSafeInteger(request.expiryAtUs) && request.expiryAtUs >= 0,
        'expiry is a u64 below 2^53',
      );
      w.bytes(request.jti);
      w.u64(BigInt(request.expiryAtUs));
      return true;
    default:
      return false;
  }
}

function writePermissions(w: BodyWriter, permissions: PermissionsSnapshot | null): void {
  if (permissions === null) {
    w.u8(0);
    return;
  }
  w.u8(1);
  w.u32(permissions.global);
  assert(permissions.streams.length <= PERMISSION_STREAMS_MAX, 'permission streams within bound');
  w.u16(permissions.streams.length);
  for (const stream of permissions.streams) {
    w.u32(stream.streamId);
    w.u32(stream.bits);
    assert(stream.topics.length <= PERMISSION_TOPICS_MAX, 'permission topics within bound');
    w.u16(stream.topics.length);
    for (const topic of stream.topics) {
      w.u32(topic.topicId);
      w.u32(topic.bits);
    }
  }
}

export function identifiersEqual(left: Identifier, right: Identifier): boolean {
  return left.kind === 'id'
    ? right.kind === 'id' && right.id === left.id
    : right.kind === 'name' && right.name === left.name;
}

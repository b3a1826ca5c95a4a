/**
 * Canonical msgpack of the metadata snapshot: the TypeScript kernel, and the readable reference
 * the WASM kernel (assembly/msgpack.ts) must match byte for byte.
 *
 * The format (snapshot-model.ts): every record is a positional msgpack array in the documented
 * field order; unsigned integers take the smallest encoding (positive fixint, uint8/16/32/64);
 * u64 values are always integers, never floats (a JS number above 2^32 becomes uint64 0xcf,
 * which is exact because the model keeps number fields below 2^53); u128 is a 16-byte
 * big-endian bin8; strings are UTF-8 with the smallest str header; byte strings take the smallest
 * bin header; absent optional values are nil. One state has exactly one encoding, so every
 * replica's checkpoint at op N hashes to the same checkpoint id (DESIGN.md §5.2).
 *
 * The encoder is hand-written for the schema rather than generic: no key strings, no type
 * dispatch per value, one growing buffer reused across calls. A non-canonical model (ids out of
 * order, a fractional or out-of-range integer, a lone surrogate in a string) is a programming
 * error upstream, so it fails an assertion here instead of producing bytes two replicas might
 * disagree on.
 */
import {
  ACCESS_TOKEN_ID_SIZE,
  PARTITION_CREATED_AT_SIZE,
  SNAPSHOT_FORMAT_VERSION,
  U64_MAX,
  type ClientEntrySnapshot,
  type ConsumerGroupSnapshot,
  type MetadataSnapshot,
  type PermissionsSnapshot,
  type RevokedTokenSnapshot,
  type StreamSnapshot,
  type TopicSnapshot,
  type UserSnapshot,
} from '../format/snapshot-model.js';
import { columnFirstUnsafe } from '../format/partition-column.js';
import { assert } from '../stdx/assert.js';

const U32_MAX = 0xffff_ffff;
const U8_MAX = 0xff;
export const U128_MAX = (1n << 128n) - 1n;
const TWO_POW_32 = 0x1_0000_0000;

/** The reusable output buffer starts here and doubles as needed. */
const BUFFER_SIZE_INITIAL = 64 * 1024;
/**
 * A buffer that grew past this is dropped after the call, so one unusually large snapshot does
 * not pin its size in memory for the life of the process. The reference snapshot (~3.9 MB)
 * stays below it and keeps its buffer between checkpoints.
 */
const BUFFER_RETAIN_SIZE_MAX = 32 * 1024 * 1024;
/** Strings up to this many UTF-16 units are encoded by hand; longer ones by TextEncoder. */
const STRING_INLINE_LENGTH_MAX = 48;

let buffer = new Uint8Array(BUFFER_SIZE_INITIAL);
let view = new DataView(buffer.buffer);
/**
 * `buffer.byteLength`, cached: on Node 20 the typed-array length getter is not free (it checks
 * for detached and length-tracking buffers), and `ensure` runs a few hundred thousand times.
 */
let capacity = buffer.byteLength;
let position = 0;
const textEncoder = new TextEncoder();

export function snapshotEncodeTs(snapshot: MetadataSnapshot): Uint8Array {
  position = 0;
  encodeSnapshot(snapshot);
  // A copy: the result must not alias the buffer the next call overwrites.
  const out = buffer.slice(0, position);
  if (buffer.byteLength > BUFFER_RETAIN_SIZE_MAX) {
    buffer = new Uint8Array(BUFFER_SIZE_INITIAL);
    view = new DataView(buffer.buffer);
    capacity = buffer.byteLength;
  }
  return out;
}

function encodeSnapshot(snapshot: MetadataSnapshot): void {
  if (snapshot.version !== SNAPSHOT_FORMAT_VERSION) {
    fail(`snapshot.version is ${snapshot.version}, expected ${SNAPSHOT_FORMAT_VERSION}`);
  }
  ensure(64);
  buffer[position++] = 0x98;
  writeUint(snapshot.version);
  writeU64Number(snapshot.createdAtUs, 'snapshot.createdAtUs');
  writeU64Number(snapshot.sequenceNumber, 'snapshot.sequenceNumber');
  encodeUsers(snapshot.users);
  encodeStreams(snapshot.streams);
  encodeClientTable(snapshot.clientTable);
  writeU32(snapshot.writerRelease, 'snapshot.writerRelease');
  encodeRevokedTokens(snapshot.revokedTokens);
}

function encodeRevokedTokens(tokens: readonly RevokedTokenSnapshot[]): void {
  writeArrayHeader(tokens.length);
  let previous: Uint8Array | null = null;
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index]!;
    const jti = token.jti;
    if (!(jti instanceof Uint8Array) || jti.byteLength !== ACCESS_TOKEN_ID_SIZE) fail(`revokedTokens[${index}].jti is not ${ACCESS_TOKEN_ID_SIZE} bytes`);
    if (previous !== null && !bytesAbove(jti, previous)) fail(`revokedTokens[${index}].jti is not ascending`);
    previous = jti;
    ensure(1);
    buffer[position++] = 0x93;
    writeBin(jti);
    writeU32(token.userId, 'revokedToken.userId');
    writeU64Number(token.expiryAtUs, 'revokedToken.expiryAtUs');
  }
}

/** `left` > `right` in byte order (equal lengths): the canonical order of revoked token ids. */
export function bytesAbove(left: Uint8Array, right: Uint8Array): boolean {
  for (let index = 0; index < left.byteLength; index++) {
    if (left[index] !== right[index]) return left[index]! > right[index]!;
  }
  return false;
}

function encodeUsers(users: readonly UserSnapshot[]): void {
  const count = users.length;
  writeArrayHeader(count);
  let previousId = -1;
  for (let index = 0; index < count; index++) {
    const user = users[index]!;
    if (!(user.id > previousId)) fail(`users[${index}].id ${user.id} is not above ${previousId}`);
    previousId = user.id;
    ensure(64);
    buffer[position++] = 0x97;
    writeU32(user.id, 'user.id');
    writeString(user.username);
    writeString(user.passwordHash);
    // Room for status, createdAtUs and the permissions nil (the strings may have used the rest).
    ensure(16);
    if (user.status !== 1 && user.status !== 2) fail(`users[${index}].status ${String(user.status)}`);
    buffer[position++] = user.status;
    writeU64Number(user.createdAtUs, 'user.createdAtUs');
    if (user.permissions === null) {
      buffer[position++] = 0xc0;
    } else {
      encodePermissions(user.permissions, index);
    }
    encodeTokens(user, index);
  }
}

function encodePermissions(permissions: PermissionsSnapshot, userIndex: number): void {
  ensure(16);
  buffer[position++] = 0x92;
  writeU32(permissions.global, 'permissions.global');
  const streams = permissions.streams;
  writeArrayHeader(streams.length);
  let previousStreamId = -1;
  for (let index = 0; index < streams.length; index++) {
    const stream = streams[index]!;
    if (!(stream.streamId > previousStreamId)) {
      fail(`users[${userIndex}].permissions.streams[${index}].streamId is not ascending`);
    }
    previousStreamId = stream.streamId;
    ensure(32);
    buffer[position++] = 0x93;
    writeU32(stream.streamId, 'permissions.streamId');
    writeU32(stream.bits, 'permissions.stream.bits');
    const topics = stream.topics;
    writeArrayHeader(topics.length);
    let previousTopicId = -1;
    for (let topicIndex = 0; topicIndex < topics.length; topicIndex++) {
      const topic = topics[topicIndex]!;
      if (!(topic.topicId > previousTopicId)) {
        fail(`users[${userIndex}].permissions.streams[${index}].topics[${topicIndex}].topicId is not ascending`);
      }
      previousTopicId = topic.topicId;
      ensure(16);
      buffer[position++] = 0x92;
      writeU32(topic.topicId, 'permissions.topicId');
      writeU32(topic.bits, 'permissions.topic.bits');
    }
  }
}

function encodeTokens(user: UserSnapshot, userIndex: number): void {
  const tokens = user.tokens;
  writeArrayHeader(tokens.length);
  let previousName: string | null = null;
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index]!;
    // Array#sort order (UTF-16 code units), strictly: a user's token names are unique.
    if (previousName !== null && !(token.name > previousName)) {
      fail(`users[${userIndex}].tokens[${index}].name is not ascending`);
    }
    previousName = token.name;
    ensure(1);
    buffer[position++] = 0x93;
    writeString(token.name);
    writeBin(token.tokenHash);
    if (token.expiryAtUs === null) {
      ensure(1);
      buffer[position++] = 0xc0;
    } else {
      writeU64Number(token.expiryAtUs, 'token.expiryAtUs');
    }
  }
}

function encodeStreams(streams: readonly StreamSnapshot[]): void {
  const count = streams.length;
  writeArrayHeader(count);
  let previousId = -1;
  for (let index = 0; index < count; index++) {
    const stream = streams[index]!;
    if (!(stream.id > previousId)) fail(`streams[${index}].id ${stream.id} is not above ${previousId}`);
    previousId = stream.id;
    ensure(16);
    buffer[position++] = 0x94;
    writeU32(stream.id, 'stream.id');
    writeString(stream.name);
    writeU64Number(stream.createdAtUs, 'stream.createdAtUs');
    const topics = stream.topics;
    writeArrayHeader(topics.length);
    let previousTopicId = -1;
    for (let topicIndex = 0; topicIndex < topics.length; topicIndex++) {
      const topic = topics[topicIndex]!;
      if (!(topic.id > previousTopicId)) {
        fail(`streams[${index}].topics[${topicIndex}].id ${topic.id} is not above ${previousTopicId}`);
      }
      previousTopicId = topic.id;
      encodeTopic(topic, index, topicIndex);
    }
  }
}

function encodeTopic(topic: TopicSnapshot, streamIndex: number, topicIndex: number): void {
  ensure(16);
  buffer[position++] = 0x9b;
  writeU32(topic.id, 'topic.id');
  writeString(topic.name);
  ensure(64);
  writeU64Number(topic.createdAtUs, 'topic.createdAtUs');
  writeU64Bigint(topic.messageExpiryUs, 'topic.messageExpiryUs');
  const compression = topic.compressionAlgorithm;
  if (compression !== 1 && compression !== 2) {
    fail(`streams[${streamIndex}].topics[${topicIndex}].compressionAlgorithm ${String(compression)}`);
  }
  buffer[position++] = compression;
  writeU64Bigint(topic.maxTopicSizeBytes, 'topic.maxTopicSizeBytes');
  const replicationFactor = topic.replicationFactor;
  if (!(Number.isInteger(replicationFactor) && replicationFactor >= 0 && replicationFactor <= U8_MAX)) {
    fail(`streams[${streamIndex}].topics[${topicIndex}].replicationFactor ${replicationFactor} is not a u8`);
  }
  writeUint(replicationFactor);
  encodePartitionColumn(topic.partitionsCreatedAtUs, streamIndex, topicIndex);
  const groups = topic.consumerGroups;
  writeArrayHeader(groups.length);
  let previousGroupId = -1;
  for (let index = 0; index < groups.length; index++) {
    const group = groups[index]!;
    if (!(group.id > previousGroupId)) {
      fail(`streams[${streamIndex}].topics[${topicIndex}].consumerGroups[${index}].id is not ascending`);
    }
    previousGroupId = group.id;
    encodeConsumerGroup(group);
  }
  const options = topic.options;
  writeArrayHeader(options.length);
  let previousKey: string | null = null;
  for (let index = 0; index < options.length; index++) {
    const option = options[index]!;
    // Array#sort order (UTF-16 code units), strictly: a topic's option keys are unique.
    if (previousKey !== null && !(option.key > previousKey)) {
      fail(`streams[${streamIndex}].topics[${topicIndex}].options[${index}].key is not ascending`);
    }
    previousKey = option.key;
    ensure(1);
    buffer[position++] = 0x92;
    writeString(option.key);
    if (option.value === null) {
      ensure(1);
      buffer[position++] = 0xc0;
    } else {
      writeString(option.value);
    }
  }
  ensure(9);
  writeU64Number(topic.purgedAtUs, 'topic.purgedAtUs');
}

/**
 * Topic field 7 (version 4): the createdAtUs column as one bin, copied as it is. Its canonical
 * rules are checked here (whole u64 values, each <= 2^53 - 1: bytes 6 and 7 of a little-endian
 * value hold its bits 48..63) so the bytes never carry a value a reader must refuse.
 */
function encodePartitionColumn(column: Uint8Array, streamIndex: number, topicIndex: number): void {
  // Built only on failure: a snapshot has up to millions of topics.
  const path = (): string => `streams[${streamIndex}].topics[${topicIndex}].partitionsCreatedAtUs`;
  if (!(column instanceof Uint8Array)) fail(`${path()} is not a Uint8Array`);
  const length = column.byteLength;
  if (length % PARTITION_CREATED_AT_SIZE !== 0) fail(`${path()} is ${length} bytes, not a multiple of ${PARTITION_CREATED_AT_SIZE}`);
  const unsafe = columnFirstUnsafe(column);
  if (unsafe >= 0) fail(`${path()}[${unsafe}] exceeds 2^53 - 1`);
  writeBin(column);
}

function encodeConsumerGroup(group: ConsumerGroupSnapshot): void {
  ensure(16);
  buffer[position++] = 0x94;
  writeU32(group.id, 'consumerGroup.id');
  writeString(group.name);
  writeU64Number(group.generation, 'consumerGroup.generation');
  const members = group.members;
  writeArrayHeader(members.length);
  let previousMemberId = -1;
  for (let index = 0; index < members.length; index++) {
    const member = members[index]!;
    if (!(member.id > previousMemberId)) fail(`consumerGroup ${group.id} members[${index}].id is not ascending`);
    previousMemberId = member.id;
    ensure(32);
    buffer[position++] = 0x93;
    writeU32(member.id, 'member.id');
    writeU128(member.clientId, 'member.clientId');
    const partitions = member.partitions;
    writeArrayHeader(partitions.length);
    let previousPartitionId = -1;
    for (let partitionIndex = 0; partitionIndex < partitions.length; partitionIndex++) {
      const partitionId = partitions[partitionIndex]!;
      if (!(partitionId > previousPartitionId)) {
        fail(`consumerGroup ${group.id} members[${index}].partitions is not ascending`);
      }
      previousPartitionId = partitionId;
      writeU32(partitionId, 'member.partitions[]');
    }
  }
}

function encodeClientTable(clients: readonly ClientEntrySnapshot[]): void {
  const count = clients.length;
  writeArrayHeader(count);
  let previousSlot = -1;
  for (let index = 0; index < count; index++) {
    const client = clients[index]!;
    if (!(client.slot > previousSlot)) fail(`clientTable[${index}].slot ${client.slot} is not above ${previousSlot}`);
    previousSlot = client.slot;
    const clientId = client.clientId;
    if (!(typeof clientId === 'bigint' && clientId > 0n)) fail(`clientTable[${index}].clientId is 0`);
    ensure(80);
    buffer[position++] = 0x97;
    writeU32(client.slot, 'client.slot');
    writeU128(clientId, 'client.clientId');
    writeU64Number(client.epoch, 'client.epoch');
    writeU32(client.userId, 'client.userId');
    writeU64Number(client.watermark, 'client.watermark');
    writeU128(client.watermarkChecksum, 'client.watermarkChecksum');
    writeBin(client.reply);
  }
}

// ---------------------------------------------------------------------------------------------
// Writers. Callers `ensure` room for fixed-size parts; variable-size writers ensure their own.

function fail(message: string): never {
  assert(false, `snapshot model is not canonical: ${message}`);
}

function ensure(byteCount: number): void {
  if (position + byteCount <= capacity) return;
  const grown = new Uint8Array(Math.max(capacity * 2, position + byteCount));
  grown.set(buffer.subarray(0, position));
  buffer = grown;
  view = new DataView(buffer.buffer);
  capacity = grown.byteLength;
}

/** `value` is a non-negative safe integer (callers validate); room for 9 bytes is ensured. */
function writeUint(value: number): void {
  if (value < 0x80) {
    buffer[position++] = value;
  } else if (value < 0x100) {
    buffer[position] = 0xcc;
    buffer[position + 1] = value;
    position += 2;
  } else if (value < 0x1_0000) {
    buffer[position] = 0xcd;
    buffer[position + 1] = value >>> 8;
    buffer[position + 2] = value & 0xff;
    position += 3;
  } else if (value < TWO_POW_32) {
    buffer[position] = 0xce;
    view.setUint32(position + 1, value);
    position += 5;
  } else {
    buffer[position] = 0xcf;
    view.setUint32(position + 1, Math.floor(value / TWO_POW_32));
    view.setUint32(position + 5, value >>> 0);
    position += 9;
  }
}

function writeU32(value: number, field: string): void {
  if (!(Number.isInteger(value) && value >= 0 && value <= U32_MAX)) fail(`${field} ${value} is not a u32`);
  ensure(5);
  writeUint(value);
}

/** A u64 the model keeps as a number: exact only below 2^53, hence the safe-integer check. */
function writeU64Number(value: number, field: string): void {
  if (!(Number.isSafeInteger(value) && value >= 0)) fail(`${field} ${value} is not a u64 below 2^53`);
  ensure(9);
  writeUint(value);
}

function writeU64Bigint(value: bigint, field: string): void {
  if (!(typeof value === 'bigint' && value >= 0n && value <= U64_MAX)) fail(`${field} ${String(value)} is not a u64`);
  ensure(9);
  if (value < 0x1_0000_0000n) {
    writeUint(Number(value));
  } else {
    buffer[position] = 0xcf;
    view.setBigUint64(position + 1, value);
    position += 9;
  }
}

/** bin8 of 16 bytes, big-endian, whatever the value (rmp-serde's u128 form). */
function writeU128(value: bigint, field: string): void {
  if (!(typeof value === 'bigint' && value >= 0n && value <= U128_MAX)) fail(`${field} ${String(value)} is not a u128`);
  ensure(18);
  buffer[position] = 0xc4;
  buffer[position + 1] = 16;
  view.setBigUint64(position + 2, value >> 64n);
  // setBigUint64 takes the value modulo 2^64: the low half without another BigInt operation.
  view.setBigUint64(position + 10, value);
  position += 18;
}

function writeArrayHeader(count: number): void {
  ensure(5);
  if (count < 16) {
    buffer[position++] = 0x90 | count;
  } else if (count < 0x1_0000) {
    buffer[position] = 0xdc;
    buffer[position + 1] = count >>> 8;
    buffer[position + 2] = count & 0xff;
    position += 3;
  } else {
    buffer[position] = 0xdd;
    view.setUint32(position + 1, count);
    position += 5;
  }
}

function writeBin(bytes: Uint8Array): void {
  assert(bytes instanceof Uint8Array, 'snapshot bytes fields are Uint8Array');
  const length = bytes.byteLength;
  ensure(length + 5);
  if (length < 0x100) {
    buffer[position] = 0xc4;
    buffer[position + 1] = length;
    position += 2;
  } else if (length < 0x1_0000) {
    buffer[position] = 0xc5;
    buffer[position + 1] = length >>> 8;
    buffer[position + 2] = length & 0xff;
    position += 3;
  } else {
    buffer[position] = 0xc6;
    view.setUint32(position + 1, length);
    position += 5;
  }
  buffer.set(bytes, position);
  position += length;
}

/** Bytes of the smallest str header for a UTF-8 payload of `byteLength` bytes. */
function strHeaderSize(byteLength: number): number {
  return byteLength < 32 ? 1 : byteLength < 0x100 ? 2 : byteLength < 0x1_0000 ? 3 : 5;
}

/**
 * The UTF-8 length is unknown until the string is encoded, so the payload goes after a header
 * sized for the worst case (3 bytes per UTF-16 unit) and moves back when the real header is
 * smaller. Names are short ASCII in practice; the move is rare and short.
 */
function writeString(value: string): void {
  const length = value.length;
  const headerSizeReserved = strHeaderSize(length * 3);
  ensure(headerSizeReserved + length * 3);
  const start = position + headerSizeReserved;
  let byteLength: number;
  if (length <= STRING_INLINE_LENGTH_MAX) {
    const end = writeUtf8(buffer, start, value);
    if (end < 0) fail('a string holds a lone surrogate');
    byteLength = end - start;
  } else {
    const result = textEncoder.encodeInto(value, buffer.subarray(start));
    byteLength = result.written;
    // Pure ASCII cannot hold a surrogate; anything else must be well formed, because
    // TextEncoder would silently replace a lone surrogate with U+FFFD and the decoded model
    // would differ from the encoded one.
    if (byteLength !== length && !isWellFormed(value)) fail('a string holds a lone surrogate');
  }
  const headerSize = strHeaderSize(byteLength);
  if (headerSize !== headerSizeReserved) {
    buffer.copyWithin(position + headerSize, start, start + byteLength);
  }
  if (headerSize === 1) {
    buffer[position] = 0xa0 | byteLength;
  } else if (headerSize === 2) {
    buffer[position] = 0xd9;
    buffer[position + 1] = byteLength;
  } else if (headerSize === 3) {
    buffer[position] = 0xda;
    buffer[position + 1] = byteLength >>> 8;
    buffer[position + 2] = byteLength & 0xff;
  } else {
    buffer[position] = 0xdb;
    view.setUint32(position + 1, byteLength);
  }
  position += headerSize + byteLength;
}

/**
 * UTF-8 of `value` into `target` at `at` (the caller ensured room for 3 bytes per unit). Returns
 * the end offset, or -1 for a lone surrogate (TextEncoder would write U+FFFD, and the decoded
 * model would differ from the encoded one). Shared with the WASM marshal.
 */
export function writeUtf8(target: Uint8Array, at: number, value: string): number {
  const length = value.length;
  let out = at;
  for (let index = 0; index < length; index++) {
    const unit = value.charCodeAt(index);
    if (unit < 0x80) {
      target[out++] = unit;
    } else if (unit < 0x800) {
      target[out] = 0xc0 | (unit >> 6);
      target[out + 1] = 0x80 | (unit & 0x3f);
      out += 2;
    } else if (unit < 0xd800 || unit > 0xdfff) {
      target[out] = 0xe0 | (unit >> 12);
      target[out + 1] = 0x80 | ((unit >> 6) & 0x3f);
      target[out + 2] = 0x80 | (unit & 0x3f);
      out += 3;
    } else {
      const low = index + 1 < length ? value.charCodeAt(index + 1) : 0;
      if (unit > 0xdbff || low < 0xdc00 || low > 0xdfff) return -1;
      const codePoint = 0x1_0000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
      target[out] = 0xf0 | (codePoint >> 18);
      target[out + 1] = 0x80 | ((codePoint >> 12) & 0x3f);
      target[out + 2] = 0x80 | ((codePoint >> 6) & 0x3f);
      target[out + 3] = 0x80 | (codePoint & 0x3f);
      out += 4;
      index++;
    }
  }
  return out;
}

/** `String.prototype.isWellFormed` (Node 20; not in the ES2022 lib typings). */
export function isWellFormed(value: string): boolean {
  return (value as string & { isWellFormed(): boolean }).isWellFormed();
}

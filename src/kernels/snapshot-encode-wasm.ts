/**
 * Canonical msgpack of the metadata snapshot through the WASM kernel (assembly/msgpack.ts):
 * marshal the JS model into flat tables in WASM memory, encode there, copy the bytes out.
 *
 * ABI (numbers only):
 * - `snapshot_encoded_size_max(tables): usize` — walks the tables, checks that every parent's
 *   child counts add up to the table lengths and that every heap range is inside the heap;
 *   returns the largest possible output, or 0 when the tables are inconsistent.
 * - `snapshot_encode(tables, out, outCapacity): usize` — repeats that check (the function that
 *   writes unchecked proves its own bound), encodes, returns the bytes written; 0 on failure,
 *   with (code, table kind, record index) written into the descriptor.
 *
 * Memory: a descriptor followed by one table per record kind (scratch slot `input`), a heap of
 * UTF-8 strings and byte strings (slot `extra`), the output (slot `output`). Layouts are
 * documented once, in assembly/msgpack.ts; the offsets below mirror them. Every integer field of
 * the model is written as an f64 (exact below 2^53) so the kernel itself validates integrality,
 * range and order; this side checks only what the kernel cannot see: strings (lone surrogates),
 * bigint ranges, byte-string types and token-name order (UTF-16 order, not byte order).
 *
 * On any failure the TypeScript encoder runs on the same model and throws its precise assertion,
 * so both kernels fail with the same message.
 */
import type {
  ConsumerGroupSnapshot,
  MetadataSnapshot,
  TopicSnapshot,
  UserSnapshot,
} from '../format/snapshot-model.js';
import { ACCESS_TOKEN_ID_SIZE, U64_MAX } from '../format/snapshot-model.js';
import { assert } from '../stdx/assert.js';
import { isWellFormed, snapshotEncodeTs, U128_MAX, writeUtf8 } from './snapshot-encode-ts.js';
import { ScratchSlot, type WasmInstance } from './wasm-instance.js';

interface SnapshotAbi {
  snapshot_encoded_size_max(tables: number): number;
  snapshot_encode(tables: number, out: number, outCapacity: number): number;
}

/** Descriptor offsets (bytes). */
const Descriptor = {
  version: 0,
  createdAtUs: 8,
  sequenceNumber: 16,
  writerRelease: 24,
  /** (count u32, pointer u32) per table kind, at tables + 8 * kind. */
  tables: 32,
  heapSize: 136,
  heapPtr: 140,
  failureCode: 144,
  failureTable: 148,
  failureIndex: 152,
  size: 192,
} as const;

/** Table kinds, in descriptor order. */
const Table = {
  users: 0,
  tokens: 1,
  permStreams: 2,
  permTopics: 3,
  streams: 4,
  topics: 5,
  /** Unused since version 4 (partitions are a column in the heap): always empty. */
  partitionsReserved: 6,
  groups: 7,
  members: 8,
  memberPartitions: 9,
  clients: 10,
  revokedTokens: 11,
  topicOptions: 12,
} as const;
const TABLE_KIND_COUNT = 13;

/** Record sizes in bytes, indexed by table kind (multiples of 8: f64 fields stay aligned). */
const RECORD_SIZE = [64, 32, 24, 16, 32, 80, 16, 32, 32, 8, 72, 24, 24] as const;

/** A JS string takes at most 3 UTF-8 bytes per UTF-16 unit. */
const UTF8_BYTES_PER_UNIT_MAX = 3;
/** Strings longer than this go through TextEncoder.encodeInto; shorter ones are copied by hand. */
const STRING_INLINE_LENGTH_MAX = 48;
/** Capacity headroom after a recount, so a slowly growing snapshot does not recount every time. */
const CAPACITY_GROWTH = 1.25;

const textEncoder = new TextEncoder();

/**
 * Table and heap capacities per WASM instance, from the last count. Counting the model costs a
 * full extra walk of the object graph (~10% of the call), so it only happens on the first call
 * and when a table overflows; checkpoints of a stable cluster reuse the previous sizes.
 */
interface Capacity {
  readonly records: number[];
  heapBytes: number;
}
const capacities = new WeakMap<WasmInstance, Capacity>();

/** Thrown (preallocated) when a table or the heap is full: recount and marshal again. */
const CAPACITY_EXCEEDED = new Error('snapshot marshal: capacity exceeded');

// Views of WASM memory for the duration of one call: taken after every allocation (memory growth
// detaches them) and dropped afterwards, so they never keep a discarded instance's memory alive.
const NO_MEMORY = new ArrayBuffer(0);
let u8: Uint8Array = new Uint8Array(NO_MEMORY);
let u32: Uint32Array = new Uint32Array(NO_MEMORY);
let f64: Float64Array = new Float64Array(NO_MEMORY);
let b64: BigUint64Array = new BigUint64Array(NO_MEMORY);
/** Absolute pointer of the heap, its capacity, and the next free heap offset (relative to it). */
let heapPtr = 0;
let heapCapacity = 0;
let heapOffset = 0;
/** Byte pointers of the next free record of each table, and of each table's end. */
const cursor = new Array<number>(TABLE_KIND_COUNT).fill(0);
const limit = new Array<number>(TABLE_KIND_COUNT).fill(0);

export function snapshotEncodeWasm(instance: WasmInstance, snapshot: MetadataSnapshot): Uint8Array {
  const abi = instance.exports as unknown as SnapshotAbi;
  assert(typeof abi.snapshot_encode === 'function', 'the WASM kernels export snapshot_encode (rebuild: npm run asbuild)');
  try {
    let tables: number;
    const previous = capacities.get(instance);
    try {
      if (previous === undefined) throw CAPACITY_EXCEEDED;
      tables = layoutTables(instance, previous);
      marshalSnapshot(snapshot, tables);
    } catch (error) {
      if (error !== CAPACITY_EXCEEDED) throw error;
      // Sized from an exact count (and a worst-case heap), the second attempt cannot overflow.
      const counted = countSnapshot(snapshot);
      capacities.set(instance, counted);
      tables = layoutTables(instance, counted);
      marshalSnapshot(snapshot, tables);
    }
    const sizeMax = abi.snapshot_encoded_size_max(tables) >>> 0;
    assert(sizeMax > 0, 'snapshot tables are consistent');
    const out = instance.scratch(ScratchSlot.output, sizeMax);
    const written = abi.snapshot_encode(tables, out, sizeMax) >>> 0;
    if (written === 0) {
      const view = new DataView(instance.bytes().buffer, tables, Descriptor.size);
      const code = view.getUint32(Descriptor.failureCode, true);
      const table = view.getUint32(Descriptor.failureTable, true);
      const index = view.getUint32(Descriptor.failureIndex, true);
      throw new WasmEncodeFailure(`snapshot_encode failed: code ${code}, table ${table}, record ${index}`);
    }
    // A copy: the output slot is overwritten by the next call.
    return instance.bytes().slice(out, out + written);
  } catch (error) {
    // The TS encoder names the offending field; it throws here for every model the kernel
    // rejects. If it does not, the two kernels disagree, which is a bug in one of them.
    snapshotEncodeTs(snapshot);
    if (error instanceof WasmEncodeFailure) {
      assert(false, `WASM and TS snapshot encoders disagree: ${error.message}`);
    }
    throw error;
  } finally {
    // The tables, heap and output go back to the allocator: the payload staged next (chunk
    // manifest) fits in the pages they touched instead of growing memory by its size again.
    instance.releaseScratch(ScratchSlot.input);
    instance.releaseScratch(ScratchSlot.extra);
    instance.releaseScratch(ScratchSlot.output);
    u8 = new Uint8Array(NO_MEMORY);
    u32 = new Uint32Array(NO_MEMORY);
    f64 = new Float64Array(NO_MEMORY);
    b64 = new BigUint64Array(NO_MEMORY);
  }
}

class WasmEncodeFailure extends Error {
  override readonly name = 'WasmEncodeFailure';
}

/** Allocates the descriptor, the tables at `capacity` and the heap; takes fresh views. */
function layoutTables(instance: WasmInstance, capacity: Capacity): number {
  let tablesSize: number = Descriptor.size;
  for (let kind = 0; kind < TABLE_KIND_COUNT; kind++) tablesSize += capacity.records[kind]! * RECORD_SIZE[kind]!;
  // Both allocations may grow memory: take them before any view.
  const tables = instance.scratch(ScratchSlot.input, tablesSize);
  heapPtr = instance.scratch(ScratchSlot.extra, capacity.heapBytes);
  heapCapacity = capacity.heapBytes;
  const buffer = instance.bytes().buffer;
  if (u8.buffer !== buffer) {
    u8 = new Uint8Array(buffer);
    u32 = new Uint32Array(buffer);
    f64 = new Float64Array(buffer);
    b64 = new BigUint64Array(buffer);
  }
  let next = tables + Descriptor.size;
  for (let kind = 0; kind < TABLE_KIND_COUNT; kind++) {
    cursor[kind] = next;
    next += capacity.records[kind]! * RECORD_SIZE[kind]!;
    limit[kind] = next;
  }
  return tables;
}

function marshalSnapshot(snapshot: MetadataSnapshot, tables: number): void {
  const start = cursor.slice();
  heapOffset = 0;
  f64[(tables + Descriptor.version) >> 3] = snapshot.version;
  f64[(tables + Descriptor.createdAtUs) >> 3] = snapshot.createdAtUs;
  f64[(tables + Descriptor.sequenceNumber) >> 3] = snapshot.sequenceNumber;
  f64[(tables + Descriptor.writerRelease) >> 3] = snapshot.writerRelease;
  marshalUsers(snapshot.users);
  marshalStreams(snapshot);
  marshalClients(snapshot);
  marshalRevokedTokens(snapshot);
  for (let kind = 0; kind < TABLE_KIND_COUNT; kind++) {
    u32[(tables + Descriptor.tables + 8 * kind) >> 2] = (cursor[kind]! - start[kind]!) / RECORD_SIZE[kind]!;
    u32[(tables + Descriptor.tables + 8 * kind + 4) >> 2] = start[kind]!;
  }
  u32[(tables + Descriptor.heapSize) >> 2] = heapOffset;
  u32[(tables + Descriptor.heapPtr) >> 2] = heapPtr;
}

/** Room for `count` more records in table `kind`. */
function reserve(kind: number, count: number): void {
  if (cursor[kind]! + count * RECORD_SIZE[kind]! > limit[kind]!) throw CAPACITY_EXCEEDED;
}

/** Record counts per table and an upper bound of the heap, with headroom for growth. */
function countSnapshot(snapshot: MetadataSnapshot): Capacity {
  const table = new Array<number>(TABLE_KIND_COUNT).fill(0);
  let heapBytesMax = 0;
  const users = snapshot.users;
  table[Table.users] = users.length;
  for (let index = 0; index < users.length; index++) {
    const user = users[index]!;
    heapBytesMax += (user.username.length + user.passwordHash.length) * UTF8_BYTES_PER_UNIT_MAX;
    const tokens = user.tokens;
    table[Table.tokens]! += tokens.length;
    for (let tokenIndex = 0; tokenIndex < tokens.length; tokenIndex++) {
      const token = tokens[tokenIndex]!;
      heapBytesMax += token.name.length * UTF8_BYTES_PER_UNIT_MAX + token.tokenHash.byteLength;
    }
    if (user.permissions !== null) {
      const streams = user.permissions.streams;
      table[Table.permStreams]! += streams.length;
      for (let streamIndex = 0; streamIndex < streams.length; streamIndex++) {
        table[Table.permTopics]! += streams[streamIndex]!.topics.length;
      }
    }
  }
  const streams = snapshot.streams;
  table[Table.streams] = streams.length;
  let topicCount = 0;
  for (let index = 0; index < streams.length; index++) {
    const stream = streams[index]!;
    heapBytesMax += stream.name.length * UTF8_BYTES_PER_UNIT_MAX;
    const topics = stream.topics;
    topicCount += topics.length;
    for (let topicIndex = 0; topicIndex < topics.length; topicIndex++) {
      const topic = topics[topicIndex]!;
      heapBytesMax += topic.name.length * UTF8_BYTES_PER_UNIT_MAX + topic.partitionsCreatedAtUs.byteLength;
      const options = topic.options;
      table[Table.topicOptions]! += options.length;
      for (let optionIndex = 0; optionIndex < options.length; optionIndex++) {
        const option = options[optionIndex]!;
        heapBytesMax += (option.key.length + (option.value?.length ?? 0)) * UTF8_BYTES_PER_UNIT_MAX;
      }
      const groups = topic.consumerGroups;
      if (groups.length === 0) continue;
      table[Table.groups]! += groups.length;
      for (let groupIndex = 0; groupIndex < groups.length; groupIndex++) {
        const group = groups[groupIndex]!;
        heapBytesMax += group.name.length * UTF8_BYTES_PER_UNIT_MAX;
        const members = group.members;
        table[Table.members]! += members.length;
        for (let memberIndex = 0; memberIndex < members.length; memberIndex++) {
          table[Table.memberPartitions]! += members[memberIndex]!.partitions.length;
        }
      }
    }
  }
  table[Table.topics] = topicCount;
  const clients = snapshot.clientTable;
  table[Table.clients] = clients.length;
  for (let index = 0; index < clients.length; index++) heapBytesMax += clients[index]!.reply.byteLength;
  table[Table.revokedTokens] = snapshot.revokedTokens.length;
  heapBytesMax += snapshot.revokedTokens.length * ACCESS_TOKEN_ID_SIZE;
  return {
    records: table.map((count) => Math.ceil(count * CAPACITY_GROWTH)),
    heapBytes: Math.ceil(heapBytesMax * CAPACITY_GROWTH),
  };
}

/** Writes `value` as UTF-8 into the heap; stores (offset, length) at u32 index `field`. */
function putString(value: string, field: number): void {
  if (heapOffset + value.length * UTF8_BYTES_PER_UNIT_MAX > heapCapacity) throw CAPACITY_EXCEEDED;
  const at = heapPtr + heapOffset;
  let byteLength: number;
  if (value.length <= STRING_INLINE_LENGTH_MAX) {
    const end = writeUtf8(u8, at, value);
    if (end < 0) assert(false, 'snapshot model is not canonical: a string holds a lone surrogate');
    byteLength = end - at;
  } else {
    byteLength = textEncoder.encodeInto(value, u8.subarray(at, at + value.length * UTF8_BYTES_PER_UNIT_MAX)).written;
    // Pure ASCII cannot hold a surrogate; TextEncoder would silently replace a lone one.
    if (byteLength !== value.length && !isWellFormed(value)) {
      assert(false, 'snapshot model is not canonical: a string holds a lone surrogate');
    }
  }
  u32[field] = heapOffset;
  u32[field + 1] = byteLength;
  heapOffset += byteLength;
}

function putBytes(bytes: Uint8Array, field: number): void {
  assert(bytes instanceof Uint8Array, 'snapshot bytes fields are Uint8Array');
  const length = bytes.byteLength;
  if (heapOffset + length > heapCapacity) throw CAPACITY_EXCEEDED;
  u8.set(bytes, heapPtr + heapOffset);
  u32[field] = heapOffset;
  u32[field + 1] = length;
  heapOffset += length;
}

/** A u128 as (high, low) u64 words at u64 index `word`. */
function putU128(value: bigint, word: number, field: string): void {
  if (!(typeof value === 'bigint' && value >= 0n && value <= U128_MAX)) {
    assert(false, `snapshot model is not canonical: ${field} ${String(value)} is not a u128`);
  }
  b64[word] = value >> 64n;
  // A BigUint64Array store takes the value modulo 2^64: the low half.
  b64[word + 1] = value;
}

function putU64Bigint(value: bigint, word: number, field: string): void {
  if (!(typeof value === 'bigint' && value >= 0n && value <= U64_MAX)) {
    assert(false, `snapshot model is not canonical: ${field} ${String(value)} is not a u64`);
  }
  b64[word] = value;
}

function marshalUsers(users: readonly UserSnapshot[]): void {
  reserve(Table.users, users.length);
  let record = cursor[Table.users]!;
  for (let index = 0; index < users.length; index++, record += RECORD_SIZE[Table.users]) {
    const user = users[index]!;
    const word = record >> 3;
    const field = record >> 2;
    f64[word] = user.id;
    f64[word + 1] = user.status;
    f64[word + 2] = user.createdAtUs;
    putString(user.username, field + 8);
    putString(user.passwordHash, field + 10);
    const permissions = user.permissions;
    if (permissions === null) {
      f64[word + 3] = 0;
      u32[field + 12] = 0;
      u32[field + 13] = 0;
    } else {
      f64[word + 3] = permissions.global;
      u32[field + 12] = 1;
      u32[field + 13] = permissions.streams.length;
      marshalPermissionStreams(permissions.streams);
    }
    u32[field + 14] = user.tokens.length;
    marshalTokens(user, index);
  }
  cursor[Table.users] = record;
}

function marshalPermissionStreams(streams: NonNullable<UserSnapshot['permissions']>['streams']): void {
  reserve(Table.permStreams, streams.length);
  let record = cursor[Table.permStreams]!;
  let topicRecord = cursor[Table.permTopics]!;
  for (let index = 0; index < streams.length; index++, record += RECORD_SIZE[Table.permStreams]) {
    const stream = streams[index]!;
    f64[record >> 3] = stream.streamId;
    f64[(record >> 3) + 1] = stream.bits;
    const topics = stream.topics;
    if (topicRecord + topics.length * RECORD_SIZE[Table.permTopics] > limit[Table.permTopics]!) throw CAPACITY_EXCEEDED;
    u32[(record >> 2) + 4] = topics.length;
    for (let topicIndex = 0; topicIndex < topics.length; topicIndex++, topicRecord += RECORD_SIZE[Table.permTopics]) {
      const topic = topics[topicIndex]!;
      f64[topicRecord >> 3] = topic.topicId;
      f64[(topicRecord >> 3) + 1] = topic.bits;
    }
  }
  cursor[Table.permStreams] = record;
  cursor[Table.permTopics] = topicRecord;
}

function marshalTokens(user: UserSnapshot, userIndex: number): void {
  const tokens = user.tokens;
  reserve(Table.tokens, tokens.length);
  let record = cursor[Table.tokens]!;
  let previousName: string | null = null;
  for (let index = 0; index < tokens.length; index++, record += RECORD_SIZE[Table.tokens]) {
    const token = tokens[index]!;
    // Array#sort order (UTF-16 code units), strictly; the kernel cannot see it in UTF-8 bytes.
    if (previousName !== null && !(token.name > previousName)) {
      assert(false, `snapshot model is not canonical: users[${userIndex}].tokens[${index}].name is not ascending`);
    }
    previousName = token.name;
    const field = record >> 2;
    if (token.expiryAtUs === null) {
      f64[record >> 3] = 0;
      u32[field + 6] = 0;
    } else {
      f64[record >> 3] = token.expiryAtUs;
      u32[field + 6] = 1;
    }
    putString(token.name, field + 2);
    putBytes(token.tokenHash, field + 4);
  }
  cursor[Table.tokens] = record;
}

function marshalStreams(snapshot: MetadataSnapshot): void {
  const streams = snapshot.streams;
  reserve(Table.streams, streams.length);
  let record = cursor[Table.streams]!;
  for (let index = 0; index < streams.length; index++, record += RECORD_SIZE[Table.streams]) {
    const stream = streams[index]!;
    f64[record >> 3] = stream.id;
    f64[(record >> 3) + 1] = stream.createdAtUs;
    putString(stream.name, (record >> 2) + 4);
    const topics = stream.topics;
    reserve(Table.topics, topics.length);
    u32[(record >> 2) + 6] = topics.length;
    for (let topicIndex = 0; topicIndex < topics.length; topicIndex++) marshalTopic(topics[topicIndex]!, index, topicIndex);
  }
  cursor[Table.streams] = record;
}

function marshalTopic(topic: TopicSnapshot, streamIndex: number, topicIndex: number): void {
  const record = cursor[Table.topics]!;
  cursor[Table.topics] = record + RECORD_SIZE[Table.topics];
  const word = record >> 3;
  const field = record >> 2;
  f64[word] = topic.id;
  f64[word + 1] = topic.createdAtUs;
  putU64Bigint(topic.messageExpiryUs, word + 2, 'topic.messageExpiryUs');
  putU64Bigint(topic.maxTopicSizeBytes, word + 3, 'topic.maxTopicSizeBytes');
  f64[word + 4] = topic.compressionAlgorithm;
  f64[word + 5] = topic.replicationFactor;
  putString(topic.name, field + 12);
  // Version 4: the partition column is a byte string; the kernel checks its length and values.
  putBytes(topic.partitionsCreatedAtUs, field + 14);
  const groups = topic.consumerGroups;
  u32[field + 16] = groups.length;
  if (groups.length !== 0) reserve(Table.groups, groups.length);
  for (let index = 0; index < groups.length; index++) marshalGroup(groups[index]!);
  marshalTopicOptions(topic, streamIndex, topicIndex);
  u32[field + 17] = topic.options.length;
  f64[word + 9] = topic.purgedAtUs;
}

/** Key order is UTF-16 order, which the kernel cannot see in UTF-8 bytes: checked here. */
function marshalTopicOptions(topic: TopicSnapshot, streamIndex: number, topicIndex: number): void {
  const options = topic.options;
  if (options.length === 0) return;
  reserve(Table.topicOptions, options.length);
  let record = cursor[Table.topicOptions]!;
  let previousKey: string | null = null;
  for (let index = 0; index < options.length; index++, record += RECORD_SIZE[Table.topicOptions]) {
    const option = options[index]!;
    if (previousKey !== null && !(option.key > previousKey)) {
      assert(false, `snapshot model is not canonical: streams[${streamIndex}].topics[${topicIndex}].options[${index}].key is not ascending`);
    }
    previousKey = option.key;
    const field = record >> 2;
    putString(option.key, field);
    if (option.value === null) {
      u32[field + 2] = 0;
      u32[field + 3] = 0;
      u32[field + 4] = 0;
    } else {
      putString(option.value, field + 2);
      u32[field + 4] = 1;
    }
    u32[field + 5] = 0;
  }
  cursor[Table.topicOptions] = record;
}

function marshalGroup(group: ConsumerGroupSnapshot): void {
  const record = cursor[Table.groups]!;
  cursor[Table.groups] = record + RECORD_SIZE[Table.groups];
  f64[record >> 3] = group.id;
  f64[(record >> 3) + 1] = group.generation;
  putString(group.name, (record >> 2) + 4);
  const members = group.members;
  u32[(record >> 2) + 6] = members.length;
  reserve(Table.members, members.length);
  let memberRecord = cursor[Table.members]!;
  let partitionWord = cursor[Table.memberPartitions]! >> 3;
  for (let index = 0; index < members.length; index++, memberRecord += RECORD_SIZE[Table.members]) {
    const member = members[index]!;
    f64[memberRecord >> 3] = member.id;
    putU128(member.clientId, (memberRecord >> 3) + 1, 'member.clientId');
    const partitions = member.partitions;
    u32[(memberRecord >> 2) + 6] = partitions.length;
    if ((partitionWord << 3) + partitions.length * RECORD_SIZE[Table.memberPartitions] > limit[Table.memberPartitions]!) {
      throw CAPACITY_EXCEEDED;
    }
    for (let partitionIndex = 0; partitionIndex < partitions.length; partitionIndex++) {
      f64[partitionWord++] = partitions[partitionIndex]!;
    }
  }
  cursor[Table.members] = memberRecord;
  cursor[Table.memberPartitions] = partitionWord << 3;
}

function marshalClients(snapshot: MetadataSnapshot): void {
  const clients = snapshot.clientTable;
  reserve(Table.clients, clients.length);
  let record = cursor[Table.clients]!;
  for (let index = 0; index < clients.length; index++, record += RECORD_SIZE[Table.clients]) {
    const client = clients[index]!;
    const word = record >> 3;
    f64[word] = client.slot;
    f64[word + 1] = client.epoch;
    f64[word + 2] = client.userId;
    f64[word + 3] = client.watermark;
    putU128(client.clientId, word + 4, 'client.clientId');
    putU128(client.watermarkChecksum, word + 6, 'client.watermarkChecksum');
    putBytes(client.reply, (record >> 2) + 16);
  }
  cursor[Table.clients] = record;
}

/** The kernel checks the order of the ids (big-endian compare); the length is checked here. */
function marshalRevokedTokens(snapshot: MetadataSnapshot): void {
  const tokens = snapshot.revokedTokens;
  reserve(Table.revokedTokens, tokens.length);
  let record = cursor[Table.revokedTokens]!;
  for (let index = 0; index < tokens.length; index++, record += RECORD_SIZE[Table.revokedTokens]) {
    const token = tokens[index]!;
    if (!(token.jti instanceof Uint8Array) || token.jti.byteLength !== ACCESS_TOKEN_ID_SIZE) {
      assert(false, `snapshot model is not canonical: revokedTokens[${index}].jti is not ${ACCESS_TOKEN_ID_SIZE} bytes`);
    }
    f64[record >> 3] = token.userId;
    f64[(record >> 3) + 1] = token.expiryAtUs;
    putBytes(token.jti, (record >> 2) + 4);
  }
  cursor[Table.revokedTokens] = record;
}

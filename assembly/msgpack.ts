// Canonical msgpack of the metadata snapshot from flat tables (WASM kernel). Produces the same
// bytes as src/kernels/snapshot-encode-ts.ts, which documents the format; the conformance suite
// and the property tests hold the two together.
//
// Input: JS marshals the snapshot into fixed-size little-endian records (one table per record
// kind, in document order) plus one heap of UTF-8 strings and byte strings, and describes them in
// a descriptor block; src/kernels/snapshot-encode-wasm.ts owns the writer side of every layout
// below. Every integer field of the model travels as an f64 (exact below 2^53), so this module
// can check integrality and range itself; the JS side only validates what it alone can see
// (strings, bigint ranges, token-name order).
//
// Safety: `snapshot_encode` first walks the tables (`layoutSizeMax`) and proves that the child
// counts of every parent add up to the table lengths and that every (offset, length) lies inside
// the heap; the sum of the largest encoding of every record plus every payload is the output
// bound, checked against the caller's capacity once. The encoding loop then writes unchecked.
// Invalid values (ids out of order, fractions, out of range) are recorded as a failure and
// encoded as 0, which never takes more room than the bound allows; JS turns the failure into an
// assertion with a precise message.

// ---- Descriptor (at `tables`) ----------------------------------------------------------------
// @ts-ignore: decorator
@inline const D_VERSION: usize = 0; // f64
// @ts-ignore: decorator
@inline const D_CREATED_AT_US: usize = 8; // f64
// @ts-ignore: decorator
@inline const D_SEQUENCE_NUMBER: usize = 16; // f64
// @ts-ignore: decorator
@inline const D_WRITER_RELEASE: usize = 24; // f64
// Then (count u32, table pointer u32) pairs, one per table kind, at D_TABLES + 8 * kind.
// @ts-ignore: decorator
@inline const D_TABLES: usize = 32;
// @ts-ignore: decorator
@inline const D_HEAP_SIZE: usize = 136; // u32 bytes (after 13 table pairs)
// @ts-ignore: decorator
@inline const D_HEAP_PTR: usize = 140; // u32; record (offset, length) pairs are relative to it
// @ts-ignore: decorator
@inline const D_FAILURE_CODE: usize = 144; // u32, written here
// @ts-ignore: decorator
@inline const D_FAILURE_TABLE: usize = 148; // u32, written here
// @ts-ignore: decorator
@inline const D_FAILURE_INDEX: usize = 152; // u32, written here

// Table kinds (index into the descriptor's pairs; also reported with a failure).
// @ts-ignore: decorator
@inline const T_USERS: u32 = 0;
// @ts-ignore: decorator
@inline const T_TOKENS: u32 = 1;
// @ts-ignore: decorator
@inline const T_PERM_STREAMS: u32 = 2;
// @ts-ignore: decorator
@inline const T_PERM_TOPICS: u32 = 3;
// @ts-ignore: decorator
@inline const T_STREAMS: u32 = 4;
// @ts-ignore: decorator
@inline const T_TOPICS: u32 = 5;
// Version 3's partition records; since version 4 partitions are a column in the heap and this
// table is always empty. The kind keeps its slot so the descriptor layout stays put.
// @ts-ignore: decorator
@inline const T_PARTITIONS: u32 = 6;
// @ts-ignore: decorator
@inline const T_GROUPS: u32 = 7;
// @ts-ignore: decorator
@inline const T_MEMBERS: u32 = 8;
// @ts-ignore: decorator
@inline const T_MEMBER_PARTITIONS: u32 = 9;
// @ts-ignore: decorator
@inline const T_CLIENTS: u32 = 10;
// @ts-ignore: decorator
@inline const T_REVOKED: u32 = 11;
// @ts-ignore: decorator
@inline const T_TOPIC_OPTIONS: u32 = 12;
// @ts-ignore: decorator
@inline const T_SNAPSHOT: u32 = 13; // the top-level fields

// Failure codes.
// @ts-ignore: decorator
@inline const F_LAYOUT: u32 = 1; // child counts or heap ranges inconsistent (a marshal bug)
// @ts-ignore: decorator
@inline const F_CAPACITY: u32 = 2; // output capacity below the bound
// @ts-ignore: decorator
@inline const F_ORDER: u32 = 3; // ids not strictly ascending
// @ts-ignore: decorator
@inline const F_RANGE: u32 = 4; // not an integer in the field's range, or not an allowed value

// ---- Records (sizes multiples of 8 so f64 fields stay aligned) -------------------------------
// user: f64 id, f64 status, f64 createdAtUs, f64 permissions.global, u32 username (offset, len),
// u32 passwordHash (offset, len), u32 hasPermissions, u32 permission-stream count, u32 token count
// @ts-ignore: decorator
@inline const USER_SIZE: usize = 64;
// token: f64 expiryAtUs, u32 name (offset, len), u32 tokenHash (offset, len), u32 hasExpiry
// @ts-ignore: decorator
@inline const TOKEN_SIZE: usize = 32;
// permission stream: f64 streamId, f64 bits, u32 topic count
// @ts-ignore: decorator
@inline const PERM_STREAM_SIZE: usize = 24;
// permission topic: f64 topicId, f64 bits
// @ts-ignore: decorator
@inline const PERM_TOPIC_SIZE: usize = 16;
// stream: f64 id, f64 createdAtUs, u32 name (offset, len), u32 topic count
// @ts-ignore: decorator
@inline const STREAM_SIZE: usize = 32;
// topic: f64 id, f64 createdAtUs, u64 messageExpiryUs, u64 maxTopicSizeBytes, f64 compression,
// f64 replicationFactor, u32 name (offset, len), u32 partition column (offset, len; snapshot
// version 4: createdAtUs as u64 little-endian, 8 bytes per partition), u32 consumer-group count,
// u32 option count (snapshot version 3), f64 purgedAtUs (snapshot version 5)
// @ts-ignore: decorator
@inline const TOPIC_SIZE: usize = 80;
// topic option (snapshot version 3): u32 key (offset, len), u32 value (offset, len), u32 hasValue,
// u32 padding. Key order is checked by the JS side (UTF-16 order, as token names).
// @ts-ignore: decorator
@inline const TOPIC_OPTION_SIZE: usize = 24;
// consumer group: f64 id, f64 generation, u32 name (offset, len), u32 member count
// @ts-ignore: decorator
@inline const GROUP_SIZE: usize = 32;
// member: f64 id, u64 clientId high, u64 clientId low, u32 partition count
// @ts-ignore: decorator
@inline const MEMBER_SIZE: usize = 32;
// member partition: f64 id
// @ts-ignore: decorator
@inline const MEMBER_PARTITION_SIZE: usize = 8;
// client: f64 slot, f64 epoch, f64 userId, f64 watermark, u64 clientId high, u64 clientId low,
// u64 watermarkChecksum high, u64 watermarkChecksum low, u32 reply (offset, len)
// @ts-ignore: decorator
@inline const CLIENT_SIZE: usize = 72;
// revoked token (snapshot version 2): f64 userId, f64 expiryAtUs, u32 jti (offset, len = 16)
// @ts-ignore: decorator
@inline const REVOKED_SIZE: usize = 24;
// @ts-ignore: decorator
@inline const JTI_SIZE: u32 = 16;

// Largest encoding of each record's fixed part, headers of its strings and arrays included
// (payload bytes are added separately). See the field lists in snapshot-model.ts.
// @ts-ignore: decorator
@inline const TOP_MAX: u64 = 1 + 5 + 9 + 9 + 5 + 5 + 5 + 5 + 5;
// @ts-ignore: decorator
@inline const USER_MAX: u64 = 1 + 5 + 5 + 5 + 1 + 9 + (1 + 5 + 5) + 5;
// @ts-ignore: decorator
@inline const TOKEN_MAX: u64 = 1 + 5 + 5 + 9;
// @ts-ignore: decorator
@inline const PERM_STREAM_MAX: u64 = 1 + 5 + 5 + 5;
// @ts-ignore: decorator
@inline const PERM_TOPIC_MAX: u64 = 1 + 5 + 5;
// @ts-ignore: decorator
@inline const STREAM_MAX: u64 = 1 + 5 + 5 + 9 + 5;
// @ts-ignore: decorator
@inline const TOPIC_MAX: u64 = 1 + 5 + 5 + 9 + 9 + 1 + 9 + 2 + 5 + 5 + 5 + 9; // partition column: bin header up to 5
// @ts-ignore: decorator
@inline const TOPIC_OPTION_MAX: u64 = 1 + 5 + 5; // [key, value | nil]
// @ts-ignore: decorator
@inline const GROUP_MAX: u64 = 1 + 5 + 5 + 9 + 5;
// @ts-ignore: decorator
@inline const MEMBER_MAX: u64 = 1 + 5 + 18 + 5;
// @ts-ignore: decorator
@inline const MEMBER_PARTITION_MAX: u64 = 5;
// @ts-ignore: decorator
@inline const CLIENT_MAX: u64 = 1 + 5 + 18 + 9 + 5 + 9 + 18 + 5;
// @ts-ignore: decorator
@inline const REVOKED_MAX: u64 = 1 + 5 + 5 + 9; // bin header up to 5: the bound holds for any length

// @ts-ignore: decorator
@inline const SNAPSHOT_FORMAT_VERSION: f64 = 5;
// Bytes per partition in the column, and the largest high word (bits 32..63) of a value <= 2^53 - 1.
// @ts-ignore: decorator
@inline const PARTITION_CREATED_AT_SIZE: u32 = 8;
// @ts-ignore: decorator
@inline const SAFE_HIGH_WORD_MAX: u32 = 0x1f_ffff;
// @ts-ignore: decorator
@inline const U8_MAX: f64 = 255;
// @ts-ignore: decorator
@inline const U32_MAX: f64 = 4294967295;
// Number fields that hold u64 values are exact only up to 2^53 - 1 (Number.MAX_SAFE_INTEGER).
// @ts-ignore: decorator
@inline const SAFE_MAX: f64 = 9007199254740991;

// ---- Failure reporting ------------------------------------------------------------------------
let failureCode: u32 = 0;
let failureTable: u32 = 0;
let failureIndex: u32 = 0;

function noteFailure(code: u32, table: u32, index: u32): void {
  // The first failure is the one worth reporting; later ones are often consequences.
  if (failureCode != 0) return;
  failureCode = code;
  failureTable = table;
  failureIndex = index;
}

// An integral f64 in [0, max] as u64; anything else is recorded and becomes 0. NaN fails the
// first comparison, so the conversion below only ever sees an in-range integer.
// @ts-ignore: decorator
@inline function uintOf(value: f64, max: f64, table: u32, index: u32): u64 {
  if (value >= 0 && value <= max && floor<f64>(value) == value) return <u64>value;
  noteFailure(F_RANGE, table, index);
  return 0;
}

// ---- Writers: take the output offset, return the next one ------------------------------------
// @ts-ignore: decorator
@inline function writeUint(o: usize, value: u64): usize {
  if (value < 0x80) {
    store<u8>(o, <u8>value);
    return o + 1;
  }
  if (value < 0x100) {
    store<u16>(o, <u16>(0xcc | (<u32>value << 8)));
    return o + 2;
  }
  if (value < 0x1_0000) {
    store<u8>(o, 0xcd);
    store<u16>(o, bswap<u16>(<u16>value), 1);
    return o + 3;
  }
  if (value < 0x1_0000_0000) {
    store<u8>(o, 0xce);
    store<u32>(o, bswap<u32>(<u32>value), 1);
    return o + 5;
  }
  store<u8>(o, 0xcf);
  store<u64>(o, bswap<u64>(value), 1);
  return o + 9;
}

// @ts-ignore: decorator
@inline function writeArrayHeader(o: usize, count: u32): usize {
  if (count < 16) {
    store<u8>(o, <u8>(0x90 | count));
    return o + 1;
  }
  if (count < 0x1_0000) {
    store<u8>(o, 0xdc);
    store<u16>(o, bswap<u16>(<u16>count), 1);
    return o + 3;
  }
  store<u8>(o, 0xdd);
  store<u32>(o, bswap<u32>(count), 1);
  return o + 5;
}

// u128 as bin8 of 16 bytes, big-endian.
// @ts-ignore: decorator
@inline function writeU128(o: usize, high: u64, low: u64): usize {
  store<u16>(o, 0x10c4);
  store<u64>(o, bswap<u64>(high), 2);
  store<u64>(o, bswap<u64>(low), 10);
  return o + 18;
}

// @ts-ignore: decorator
@inline function writeStr(o: usize, src: usize, len: u32): usize {
  if (len < 32) {
    store<u8>(o, <u8>(0xa0 | len));
    o += 1;
  } else if (len < 0x100) {
    store<u16>(o, <u16>(0xd9 | (len << 8)));
    o += 2;
  } else if (len < 0x1_0000) {
    store<u8>(o, 0xda);
    store<u16>(o, bswap<u16>(<u16>len), 1);
    o += 3;
  } else {
    store<u8>(o, 0xdb);
    store<u32>(o, bswap<u32>(len), 1);
    o += 5;
  }
  copyBytes(o, src, <usize>len);
  return o + len;
}

// @ts-ignore: decorator
@inline function writeBin(o: usize, src: usize, len: u32): usize {
  if (len < 0x100) {
    store<u16>(o, <u16>(0xc4 | (len << 8)));
    o += 2;
  } else if (len < 0x1_0000) {
    store<u8>(o, 0xc5);
    store<u16>(o, bswap<u16>(<u16>len), 1);
    o += 3;
  } else {
    store<u8>(o, 0xc6);
    store<u32>(o, bswap<u32>(len), 1);
    o += 5;
  }
  copyBytes(o, src, <usize>len);
  return o + len;
}

// Names are a few dozen bytes and replies a couple of hundred: overlapping word (or v128) moves
// beat `memory.copy`, which V8 runs as a call out of the generated code. Every load and store
// stays inside [src, src + len) and [dst, dst + len).
// @ts-ignore: decorator
@inline function copy16(dst: usize, src: usize): void {
  if (ASC_FEATURE_SIMD) {
    v128.store(dst, v128.load(src));
  } else {
    const a = load<u64>(src);
    const b = load<u64>(src, 8);
    store<u64>(dst, a);
    store<u64>(dst, b, 8);
  }
}

function copyBytes(dst: usize, src: usize, len: usize): void {
  if (len <= 16) {
    if (len >= 8) {
      const a = load<u64>(src);
      const b = load<u64>(src + len - 8);
      store<u64>(dst, a);
      store<u64>(dst + len - 8, b);
    } else if (len >= 4) {
      const a = load<u32>(src);
      const b = load<u32>(src + len - 4);
      store<u32>(dst, a);
      store<u32>(dst + len - 4, b);
    } else if (len > 0) {
      const a = load<u8>(src);
      const b = load<u8>(src + (len >> 1));
      const c = load<u8>(src + len - 1);
      store<u8>(dst, a);
      store<u8>(dst + (len >> 1), b);
      store<u8>(dst + len - 1, c);
    }
    return;
  }
  if (len > 512) {
    memory.copy(dst, src, len);
    return;
  }
  let at: usize = 0;
  while (at + 16 < len) {
    copy16(dst + at, src + at);
    at += 16;
  }
  copy16(dst + len - 16, src + len - 16);
}

// ---- Layout check and bound -------------------------------------------------------------------
// @ts-ignore: decorator
@inline function tableCount(tables: usize, kind: u32): u32 {
  return load<u32>(tables + D_TABLES + 8 * <usize>kind);
}

// @ts-ignore: decorator
@inline function tablePtr(tables: usize, kind: u32): usize {
  return <usize>load<u32>(tables + D_TABLES + 8 * <usize>kind, 4);
}

// Payload bytes of the (offset, len) pair at `field`, or -1 when it leaves the heap.
// @ts-ignore: decorator
@inline function heapRange(record: usize, field: usize, heapSize: u64): i64 {
  const offset = <u64>load<u32>(record + field);
  const len = <u64>load<u32>(record + field, 4);
  return offset + len <= heapSize ? <i64>len : -1;
}

// The largest possible output for these tables, or 0 when the tables are inconsistent. Sums in
// u64 so no count can wrap the total.
function layoutSizeMax(tables: usize): u64 {
  const heapSize = <u64>load<u32>(tables + D_HEAP_SIZE);
  let payload: u64 = 0;
  let broken = false;

  const userCount = tableCount(tables, T_USERS);
  let record = tablePtr(tables, T_USERS);
  let tokenTotal: u64 = 0;
  let permStreamTotal: u64 = 0;
  for (let index: u32 = 0; index < userCount; index++, record += USER_SIZE) {
    const username = heapRange(record, 32, heapSize);
    const passwordHash = heapRange(record, 40, heapSize);
    broken = broken || username < 0 || passwordHash < 0;
    payload += <u64>username + <u64>passwordHash;
    const hasPermissions = load<u32>(record, 48);
    const permStreams = load<u32>(record, 52);
    broken = broken || hasPermissions > 1 || (hasPermissions == 0 && permStreams != 0);
    permStreamTotal += permStreams;
    tokenTotal += load<u32>(record, 56);
  }
  broken = broken || tokenTotal != tableCount(tables, T_TOKENS);
  broken = broken || permStreamTotal != tableCount(tables, T_PERM_STREAMS);

  const tokenCount = tableCount(tables, T_TOKENS);
  record = tablePtr(tables, T_TOKENS);
  for (let index: u32 = 0; index < tokenCount; index++, record += TOKEN_SIZE) {
    const name = heapRange(record, 8, heapSize);
    const hash = heapRange(record, 16, heapSize);
    broken = broken || name < 0 || hash < 0 || load<u32>(record, 24) > 1;
    payload += <u64>name + <u64>hash;
  }

  const permStreamCount = tableCount(tables, T_PERM_STREAMS);
  record = tablePtr(tables, T_PERM_STREAMS);
  let permTopicTotal: u64 = 0;
  for (let index: u32 = 0; index < permStreamCount; index++, record += PERM_STREAM_SIZE) {
    permTopicTotal += load<u32>(record, 16);
  }
  broken = broken || permTopicTotal != tableCount(tables, T_PERM_TOPICS);

  const streamCount = tableCount(tables, T_STREAMS);
  record = tablePtr(tables, T_STREAMS);
  let topicTotal: u64 = 0;
  for (let index: u32 = 0; index < streamCount; index++, record += STREAM_SIZE) {
    const name = heapRange(record, 16, heapSize);
    broken = broken || name < 0;
    payload += <u64>name;
    topicTotal += load<u32>(record, 24);
  }
  broken = broken || topicTotal != tableCount(tables, T_TOPICS);

  const topicCount = tableCount(tables, T_TOPICS);
  record = tablePtr(tables, T_TOPICS);
  let groupTotal: u64 = 0;
  let optionTotal: u64 = 0;
  for (let index: u32 = 0; index < topicCount; index++, record += TOPIC_SIZE) {
    const name = heapRange(record, 48, heapSize);
    const column = heapRange(record, 56, heapSize);
    broken = broken || name < 0 || column < 0;
    payload += <u64>name + <u64>column;
    groupTotal += load<u32>(record, 64);
    optionTotal += load<u32>(record, 68);
  }
  broken = broken || tableCount(tables, T_PARTITIONS) != 0;
  broken = broken || groupTotal != tableCount(tables, T_GROUPS);
  broken = broken || optionTotal != tableCount(tables, T_TOPIC_OPTIONS);

  const optionCount = tableCount(tables, T_TOPIC_OPTIONS);
  record = tablePtr(tables, T_TOPIC_OPTIONS);
  for (let index: u32 = 0; index < optionCount; index++, record += TOPIC_OPTION_SIZE) {
    const key = heapRange(record, 0, heapSize);
    const value = heapRange(record, 8, heapSize);
    broken = broken || key < 0 || value < 0 || load<u32>(record, 16) > 1;
    payload += <u64>key + <u64>value;
  }

  const groupCount = tableCount(tables, T_GROUPS);
  record = tablePtr(tables, T_GROUPS);
  let memberTotal: u64 = 0;
  for (let index: u32 = 0; index < groupCount; index++, record += GROUP_SIZE) {
    const name = heapRange(record, 16, heapSize);
    broken = broken || name < 0;
    payload += <u64>name;
    memberTotal += load<u32>(record, 24);
  }
  broken = broken || memberTotal != tableCount(tables, T_MEMBERS);

  const memberCount = tableCount(tables, T_MEMBERS);
  record = tablePtr(tables, T_MEMBERS);
  let memberPartitionTotal: u64 = 0;
  for (let index: u32 = 0; index < memberCount; index++, record += MEMBER_SIZE) {
    memberPartitionTotal += load<u32>(record, 24);
  }
  broken = broken || memberPartitionTotal != tableCount(tables, T_MEMBER_PARTITIONS);

  const clientCount = tableCount(tables, T_CLIENTS);
  record = tablePtr(tables, T_CLIENTS);
  for (let index: u32 = 0; index < clientCount; index++, record += CLIENT_SIZE) {
    const reply = heapRange(record, 64, heapSize);
    broken = broken || reply < 0;
    payload += <u64>reply;
  }

  const revokedCount = tableCount(tables, T_REVOKED);
  record = tablePtr(tables, T_REVOKED);
  for (let index: u32 = 0; index < revokedCount; index++, record += REVOKED_SIZE) {
    const jti = heapRange(record, 16, heapSize);
    broken = broken || jti < 0;
    payload += <u64>jti;
  }

  if (broken) return 0;
  return (
    TOP_MAX +
    payload +
    <u64>userCount * USER_MAX +
    <u64>tokenCount * TOKEN_MAX +
    <u64>permStreamCount * PERM_STREAM_MAX +
    <u64>tableCount(tables, T_PERM_TOPICS) * PERM_TOPIC_MAX +
    <u64>streamCount * STREAM_MAX +
    <u64>topicCount * TOPIC_MAX +
    <u64>optionCount * TOPIC_OPTION_MAX +
    <u64>groupCount * GROUP_MAX +
    <u64>memberCount * MEMBER_MAX +
    <u64>tableCount(tables, T_MEMBER_PARTITIONS) * MEMBER_PARTITION_MAX +
    <u64>clientCount * CLIENT_MAX +
    <u64>revokedCount * REVOKED_MAX
  );
}

// The bound for JS to size the output (0 when the tables are inconsistent), clamped to the
// address space: a bound that does not fit cannot be allocated anyway.
export function snapshot_encoded_size_max(tables: usize): usize {
  const sizeMax = layoutSizeMax(tables);
  return sizeMax > <u64>0xffff_0000 ? <usize>0xffff_0000 : <usize>sizeMax;
}

// ---- Encoding ---------------------------------------------------------------------------------
// Cursors into the child tables: every table is consumed front to back in document order.
let heap: usize = 0;
let tokenRecord: usize = 0;
let tokenIndex: u32 = 0;
let permStreamRecord: usize = 0;
let permStreamIndex: u32 = 0;
let permTopicRecord: usize = 0;
let permTopicIndex: u32 = 0;
let topicRecord: usize = 0;
let topicIndex: u32 = 0;
let groupRecord: usize = 0;
let groupIndex: u32 = 0;
let memberRecord: usize = 0;
let memberIndex: u32 = 0;
let memberPartitionRecord: usize = 0;
let memberPartitionIndex: u32 = 0;
let topicOptionRecord: usize = 0;

// Encodes the tables at `tables` into [out, out + outCapacity). Returns the bytes written, or 0
// on failure with (code, table, index) in the descriptor. A valid encoding is never empty.
export function snapshot_encode(tables: usize, out: usize, outCapacity: usize): usize {
  failureCode = 0;
  failureTable = 0;
  failureIndex = 0;
  const sizeMax = layoutSizeMax(tables);
  if (sizeMax == 0) {
    noteFailure(F_LAYOUT, T_SNAPSHOT, 0);
  } else if (sizeMax > <u64>outCapacity) {
    noteFailure(F_CAPACITY, T_SNAPSHOT, 0);
  }
  if (failureCode != 0) return reportFailure(tables);
  // From here every write is unchecked: the bound above covers the largest encoding of every
  // record the tables hold (checked consistent) and every heap payload (checked in range).

  heap = <usize>load<u32>(tables + D_HEAP_PTR);
  tokenRecord = tablePtr(tables, T_TOKENS);
  tokenIndex = 0;
  permStreamRecord = tablePtr(tables, T_PERM_STREAMS);
  permStreamIndex = 0;
  permTopicRecord = tablePtr(tables, T_PERM_TOPICS);
  permTopicIndex = 0;
  topicRecord = tablePtr(tables, T_TOPICS);
  topicIndex = 0;
  groupRecord = tablePtr(tables, T_GROUPS);
  groupIndex = 0;
  memberRecord = tablePtr(tables, T_MEMBERS);
  memberIndex = 0;
  memberPartitionRecord = tablePtr(tables, T_MEMBER_PARTITIONS);
  memberPartitionIndex = 0;
  topicOptionRecord = tablePtr(tables, T_TOPIC_OPTIONS);

  let o = out;
  store<u8>(o, 0x98);
  o += 1;
  const version = load<f64>(tables + D_VERSION);
  if (version != SNAPSHOT_FORMAT_VERSION) noteFailure(F_RANGE, T_SNAPSHOT, 0);
  o = writeUint(o, uintOf(version, U32_MAX, T_SNAPSHOT, 0));
  o = writeUint(o, uintOf(load<f64>(tables + D_CREATED_AT_US), SAFE_MAX, T_SNAPSHOT, 1));
  o = writeUint(o, uintOf(load<f64>(tables + D_SEQUENCE_NUMBER), SAFE_MAX, T_SNAPSHOT, 2));
  o = encodeUsers(o, tablePtr(tables, T_USERS), tableCount(tables, T_USERS));
  o = encodeStreams(o, tablePtr(tables, T_STREAMS), tableCount(tables, T_STREAMS));
  o = encodeClients(o, tablePtr(tables, T_CLIENTS), tableCount(tables, T_CLIENTS));
  o = writeUint(o, uintOf(load<f64>(tables + D_WRITER_RELEASE), U32_MAX, T_SNAPSHOT, 6));
  o = encodeRevoked(o, tablePtr(tables, T_REVOKED), tableCount(tables, T_REVOKED));
  if (failureCode != 0) return reportFailure(tables);
  return o - out;
}

function reportFailure(tables: usize): usize {
  store<u32>(tables + D_FAILURE_CODE, failureCode);
  store<u32>(tables + D_FAILURE_TABLE, failureTable);
  store<u32>(tables + D_FAILURE_INDEX, failureIndex);
  return 0;
}

function encodeUsers(o: usize, record: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousId: i64 = -1;
  for (let index: u32 = 0; index < count; index++, record += USER_SIZE) {
    const id = uintOf(load<f64>(record), U32_MAX, T_USERS, index);
    if (<i64>id <= previousId) noteFailure(F_ORDER, T_USERS, index);
    previousId = <i64>id;
    store<u8>(o, 0x97);
    o = writeUint(o + 1, id);
    o = writeStr(o, heap + load<u32>(record, 32), load<u32>(record, 36));
    o = writeStr(o, heap + load<u32>(record, 40), load<u32>(record, 44));
    const status = load<f64>(record, 8);
    if (status != 1 && status != 2) noteFailure(F_RANGE, T_USERS, index);
    o = writeUint(o, uintOf(status, 2, T_USERS, index));
    o = writeUint(o, uintOf(load<f64>(record, 16), SAFE_MAX, T_USERS, index));
    if (load<u32>(record, 48) == 0) {
      store<u8>(o, 0xc0);
      o += 1;
    } else {
      store<u8>(o, 0x92);
      o = writeUint(o + 1, uintOf(load<f64>(record, 24), U32_MAX, T_USERS, index));
      o = encodePermissionStreams(o, load<u32>(record, 52));
    }
    o = encodeTokens(o, load<u32>(record, 56));
  }
  return o;
}

function encodePermissionStreams(o: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousId: i64 = -1;
  for (let index: u32 = 0; index < count; index++) {
    const record = permStreamRecord;
    const id = uintOf(load<f64>(record), U32_MAX, T_PERM_STREAMS, permStreamIndex);
    if (<i64>id <= previousId) noteFailure(F_ORDER, T_PERM_STREAMS, permStreamIndex);
    previousId = <i64>id;
    store<u8>(o, 0x93);
    o = writeUint(o + 1, id);
    o = writeUint(o, uintOf(load<f64>(record, 8), U32_MAX, T_PERM_STREAMS, permStreamIndex));
    const topicCount = load<u32>(record, 16);
    permStreamRecord += PERM_STREAM_SIZE;
    permStreamIndex++;
    o = writeArrayHeader(o, topicCount);
    let previousTopicId: i64 = -1;
    for (let topic: u32 = 0; topic < topicCount; topic++) {
      const topicId = uintOf(load<f64>(permTopicRecord), U32_MAX, T_PERM_TOPICS, permTopicIndex);
      if (<i64>topicId <= previousTopicId) noteFailure(F_ORDER, T_PERM_TOPICS, permTopicIndex);
      previousTopicId = <i64>topicId;
      store<u8>(o, 0x92);
      o = writeUint(o + 1, topicId);
      o = writeUint(o, uintOf(load<f64>(permTopicRecord, 8), U32_MAX, T_PERM_TOPICS, permTopicIndex));
      permTopicRecord += PERM_TOPIC_SIZE;
      permTopicIndex++;
    }
  }
  return o;
}

// Token-name order is checked by the JS side: it is UTF-16 code-unit order, which UTF-8 bytes
// do not preserve.
function encodeTokens(o: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  for (let index: u32 = 0; index < count; index++) {
    const record = tokenRecord;
    store<u8>(o, 0x93);
    o = writeStr(o + 1, heap + load<u32>(record, 8), load<u32>(record, 12));
    o = writeBin(o, heap + load<u32>(record, 16), load<u32>(record, 20));
    if (load<u32>(record, 24) == 0) {
      store<u8>(o, 0xc0);
      o += 1;
    } else {
      o = writeUint(o, uintOf(load<f64>(record), SAFE_MAX, T_TOKENS, tokenIndex));
    }
    tokenRecord += TOKEN_SIZE;
    tokenIndex++;
  }
  return o;
}

function encodeStreams(o: usize, record: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousId: i64 = -1;
  for (let index: u32 = 0; index < count; index++, record += STREAM_SIZE) {
    const id = uintOf(load<f64>(record), U32_MAX, T_STREAMS, index);
    if (<i64>id <= previousId) noteFailure(F_ORDER, T_STREAMS, index);
    previousId = <i64>id;
    store<u8>(o, 0x94);
    o = writeUint(o + 1, id);
    o = writeStr(o, heap + load<u32>(record, 16), load<u32>(record, 20));
    o = writeUint(o, uintOf(load<f64>(record, 8), SAFE_MAX, T_STREAMS, index));
    const topicCount = load<u32>(record, 24);
    o = writeArrayHeader(o, topicCount);
    let previousTopicId: i64 = -1;
    for (let topic: u32 = 0; topic < topicCount; topic++) {
      const topicId = uintOf(load<f64>(topicRecord), U32_MAX, T_TOPICS, topicIndex);
      if (<i64>topicId <= previousTopicId) noteFailure(F_ORDER, T_TOPICS, topicIndex);
      previousTopicId = <i64>topicId;
      o = encodeTopic(o, topicRecord, topicId);
      topicRecord += TOPIC_SIZE;
      topicIndex++;
    }
  }
  return o;
}

function encodeTopic(o: usize, record: usize, id: u64): usize {
  store<u8>(o, 0x9b);
  o = writeUint(o + 1, id);
  o = writeStr(o, heap + load<u32>(record, 48), load<u32>(record, 52));
  o = writeUint(o, uintOf(load<f64>(record, 8), SAFE_MAX, T_TOPICS, topicIndex));
  o = writeUint(o, load<u64>(record, 16));
  const compression = load<f64>(record, 32);
  if (compression != 1 && compression != 2) noteFailure(F_RANGE, T_TOPICS, topicIndex);
  o = writeUint(o, uintOf(compression, 2, T_TOPICS, topicIndex));
  o = writeUint(o, load<u64>(record, 24));
  o = writeUint(o, uintOf(load<f64>(record, 40), U8_MAX, T_TOPICS, topicIndex));

  o = writePartitionColumn(o, heap + load<u32>(record, 56), load<u32>(record, 60));

  const groupCount = load<u32>(record, 64);
  o = writeArrayHeader(o, groupCount);
  let previousId: i64 = -1;
  for (let index: u32 = 0; index < groupCount; index++) {
    const group = groupRecord;
    const groupId = uintOf(load<f64>(group), U32_MAX, T_GROUPS, groupIndex);
    if (<i64>groupId <= previousId) noteFailure(F_ORDER, T_GROUPS, groupIndex);
    previousId = <i64>groupId;
    store<u8>(o, 0x94);
    o = writeUint(o + 1, groupId);
    o = writeStr(o, heap + load<u32>(group, 16), load<u32>(group, 20));
    o = writeUint(o, uintOf(load<f64>(group, 8), SAFE_MAX, T_GROUPS, groupIndex));
    const memberCount = load<u32>(group, 24);
    groupRecord += GROUP_SIZE;
    groupIndex++;
    o = encodeMembers(o, memberCount);
  }

  const optionCount = load<u32>(record, 68);
  o = writeArrayHeader(o, optionCount);
  for (let index: u32 = 0; index < optionCount; index++) {
    const option = topicOptionRecord;
    store<u8>(o, 0x92);
    o = writeStr(o + 1, heap + load<u32>(option), load<u32>(option, 4));
    if (load<u32>(option, 16) == 0) {
      store<u8>(o, 0xc0);
      o += 1;
    } else {
      o = writeStr(o, heap + load<u32>(option, 8), load<u32>(option, 12));
    }
    topicOptionRecord += TOPIC_OPTION_SIZE;
  }
  return writeUint(o, uintOf(load<f64>(record, 72), SAFE_MAX, T_TOPICS, topicIndex));
}

// Topic field 7 (version 4): the createdAtUs column, copied as one bin. A length that is not whole
// u64 values, or a value above 2^53 - 1 (high word above SAFE_HIGH_WORD_MAX), is a bad model: it is
// recorded (the failure index is the topic) and the bytes are still copied, which the bound covers.
function writePartitionColumn(o: usize, column: usize, len: u32): usize {
  if (len % PARTITION_CREATED_AT_SIZE != 0) noteFailure(F_RANGE, T_PARTITIONS, topicIndex);
  const end = column + <usize>(len & ~(PARTITION_CREATED_AT_SIZE - 1));
  // Every high-word load is inside [column, column + len): whole values only.
  for (let at = column; at < end; at += PARTITION_CREATED_AT_SIZE) {
    if (load<u32>(at, 4) > SAFE_HIGH_WORD_MAX) {
      noteFailure(F_RANGE, T_PARTITIONS, topicIndex);
      break;
    }
  }
  return writeBin(o, column, len);
}

function encodeMembers(o: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousId: i64 = -1;
  for (let index: u32 = 0; index < count; index++) {
    const member = memberRecord;
    const memberId = uintOf(load<f64>(member), U32_MAX, T_MEMBERS, memberIndex);
    if (<i64>memberId <= previousId) noteFailure(F_ORDER, T_MEMBERS, memberIndex);
    previousId = <i64>memberId;
    store<u8>(o, 0x93);
    o = writeUint(o + 1, memberId);
    o = writeU128(o, load<u64>(member, 8), load<u64>(member, 16));
    const partitionCount = load<u32>(member, 24);
    memberRecord += MEMBER_SIZE;
    memberIndex++;
    o = writeArrayHeader(o, partitionCount);
    let previousPartitionId: i64 = -1;
    for (let partition: u32 = 0; partition < partitionCount; partition++) {
      const partitionId = uintOf(load<f64>(memberPartitionRecord), U32_MAX, T_MEMBER_PARTITIONS, memberPartitionIndex);
      if (<i64>partitionId <= previousPartitionId) noteFailure(F_ORDER, T_MEMBER_PARTITIONS, memberPartitionIndex);
      previousPartitionId = <i64>partitionId;
      o = writeUint(o, partitionId);
      memberPartitionRecord += MEMBER_PARTITION_SIZE;
      memberPartitionIndex++;
    }
  }
  return o;
}

function encodeClients(o: usize, record: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousSlot: i64 = -1;
  for (let index: u32 = 0; index < count; index++, record += CLIENT_SIZE) {
    const slot = uintOf(load<f64>(record), U32_MAX, T_CLIENTS, index);
    if (<i64>slot <= previousSlot) noteFailure(F_ORDER, T_CLIENTS, index);
    previousSlot = <i64>slot;
    const clientIdHigh = load<u64>(record, 32);
    const clientIdLow = load<u64>(record, 40);
    // The model reserves client id 0 ("no client").
    if ((clientIdHigh | clientIdLow) == 0) noteFailure(F_RANGE, T_CLIENTS, index);
    store<u8>(o, 0x97);
    o = writeUint(o + 1, slot);
    o = writeU128(o, clientIdHigh, clientIdLow);
    o = writeUint(o, uintOf(load<f64>(record, 8), SAFE_MAX, T_CLIENTS, index));
    o = writeUint(o, uintOf(load<f64>(record, 16), U32_MAX, T_CLIENTS, index));
    o = writeUint(o, uintOf(load<f64>(record, 24), SAFE_MAX, T_CLIENTS, index));
    o = writeU128(o, load<u64>(record, 48), load<u64>(record, 56));
    o = writeBin(o, heap + load<u32>(record, 64), load<u32>(record, 68));
  }
  return o;
}

// Revoked tokens, in jti byte order: two big-endian u64 halves compared as (high, low).
function encodeRevoked(o: usize, record: usize, count: u32): usize {
  o = writeArrayHeader(o, count);
  let previousHigh: u64 = 0;
  let previousLow: u64 = 0;
  for (let index: u32 = 0; index < count; index++, record += REVOKED_SIZE) {
    const jti = heap + load<u32>(record, 16);
    const length = load<u32>(record, 20);
    // The heap range was proven in layoutSizeMax; a length other than 16 is a bad model.
    if (length != JTI_SIZE) {
      noteFailure(F_RANGE, T_REVOKED, index);
    } else {
      const high = bswap<u64>(load<u64>(jti));
      const low = bswap<u64>(load<u64>(jti, 8));
      if (index > 0 && (high < previousHigh || (high == previousHigh && low <= previousLow))) noteFailure(F_ORDER, T_REVOKED, index);
      previousHigh = high;
      previousLow = low;
    }
    store<u8>(o, 0x93);
    o = writeBin(o + 1, jti, length);
    o = writeUint(o, uintOf(load<f64>(record), U32_MAX, T_REVOKED, index));
    o = writeUint(o, uintOf(load<f64>(record, 8), SAFE_MAX, T_REVOKED, index));
  }
  return o;
}

/**
 * Decoding of the canonical msgpack snapshot (the encoders are the `snapshotEncode` kernels; the
 * format is documented in snapshot-model.ts).
 *
 * A strict, schema-directed decoder rather than msgpackr's `Unpackr`:
 * - Each field decodes to the model's type: u64 fields the model holds as `number` come back as
 *   numbers (refused above 2^53 rather than rounded), bigint fields as bigints, u128 from a
 *   16-byte bin, byte strings as owned `Uint8Array`s. A generic decoder returns whatever the wire
 *   type suggests (msgpackr: BigInt for every uint64) and would need a second pass to fix it.
 * - It accepts exactly the canonical encoding: smallest headers and integer widths, ordered ids,
 *   valid UTF-8, no trailing bytes. So anything it accepts re-encodes to the same bytes, and a
 *   corrupt or foreign file is refused with a reason and the path of the first bad field
 *   (`streams[3].topics[1].name`) instead of half-installing.
 * - Declared lengths are checked against the bytes that remain before anything is allocated, so a
 *   hostile header cannot make us allocate gigabytes.
 *
 * Snapshot bytes come from disk or from a peer (state transfer): they are validated and refused
 * with a `SnapshotDecodeError`, never asserted on. Decoding never throws anything else.
 */
import {
  ACCESS_TOKEN_ID_SIZE,
  PARTITION_CREATED_AT_SIZE,
  SNAPSHOT_FORMAT_VERSIONS_READABLE,
  type ClientEntrySnapshot,
  type CompressionAlgorithm,
  type ConsumerGroupMemberSnapshot,
  type ConsumerGroupSnapshot,
  type MetadataSnapshot,
  type PermissionsSnapshot,
  type PersonalAccessTokenSnapshot,
  type RevokedTokenSnapshot,
  type StreamPermissionsSnapshot,
  type StreamSnapshot,
  type TopicPermissionsSnapshot,
  type TopicOptionSnapshot,
  type TopicSnapshot,
  type UserSnapshot,
  type UserStatus,
} from './snapshot-model.js';
import { columnFirstUnsafe, markColumnDecoded } from './partition-column.js';
import { TOPIC_OPTIONS_MAX, topicOptionEntriesFault } from './topic-options.js';

/** Why a snapshot was refused. Stable strings: they appear in logs and `vrmeta inspect`. */
export const SnapshotDecodeReason = {
  /** The version field is not SNAPSHOT_FORMAT_VERSION (no migration: refuse). */
  unsupportedVersion: 'unsupported_version',
  /** The bytes end inside a value. */
  truncated: 'truncated',
  /** A value has the wrong msgpack type, or a record has the wrong number of fields. */
  malformed: 'malformed',
  /** A valid msgpack value in a form the encoder never writes (a wider header than needed). */
  notCanonicalEncoding: 'not_canonical_encoding',
  /** A collection is not strictly ascending by its key. */
  notCanonicalOrder: 'not_canonical_order',
  /** An integer outside its field's range, or not one of the field's allowed values. */
  outOfRange: 'out_of_range',
  /** A string is not valid UTF-8. */
  invalidUtf8: 'invalid_utf8',
  /** Bytes follow the snapshot. */
  trailingBytes: 'trailing_bytes',
} as const;
export type SnapshotDecodeReason = (typeof SnapshotDecodeReason)[keyof typeof SnapshotDecodeReason];

export class SnapshotDecodeError extends Error {
  override readonly name = 'SnapshotDecodeError';
  readonly reason: SnapshotDecodeReason;
  /** The field that failed, as `streams[3].topics[1].name`. */
  readonly path: string;
  /** Byte offset where the failing value starts. */
  readonly offset: number;

  constructor(reason: SnapshotDecodeReason, path: string, offset: number, detail: string) {
    super(`snapshot ${reason} at ${path} (byte ${offset}): ${detail}`);
    this.reason = reason;
    this.path = path;
    this.offset = offset;
  }
}

const U8_MAX = 0xff;
const U32_MAX = 0xffff_ffff;
const TWO_POW_32 = 0x1_0000_0000;
/** High word of Number.MAX_SAFE_INTEGER (2^53 - 1): u64 number fields stay below 2^53. */
const SAFE_HIGH_WORD_MAX = 0x1f_ffff;
/** Short ASCII strings (nearly every name) skip TextDecoder, whose per-call cost dominates them. */
const ASCII_FAST_PATH_LENGTH_MAX = 64;

/** `fatal` refuses invalid UTF-8; `ignoreBOM` keeps a leading U+FEFF as part of the string. */
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Reads the array header and the first integer only; null when they are not there. */
export function peekSnapshotVersion(bytes: Uint8Array): number | null {
  const first = bytes[0];
  if (first === undefined) return null;
  let at: number;
  if (first > 0x90 && first <= 0x9f) at = 1;
  else if (first === 0xdc) at = 3;
  else if (first === 0xdd) at = 5;
  else return null;
  const tag = bytes[at];
  if (tag === undefined) return null;
  if (tag < 0x80) return tag;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const remaining = bytes.byteLength - at - 1;
  if (tag === 0xcc && remaining >= 1) return view.getUint8(at + 1);
  if (tag === 0xcd && remaining >= 2) return view.getUint16(at + 1);
  if (tag === 0xce && remaining >= 4) return view.getUint32(at + 1);
  if (tag === 0xcf && remaining >= 8) {
    const high = view.getUint32(at + 1);
    return high <= SAFE_HIGH_WORD_MAX ? high * TWO_POW_32 + view.getUint32(at + 5) : null;
  }
  return null;
}

export function decodeSnapshot(bytes: Uint8Array): MetadataSnapshot {
  const reader = new Reader(bytes);
  // Not bounded by the bytes left: a snapshot of another version must still reach the version
  // check and be refused as unsupported, whatever its length.
  const fieldCount = reader.arrayHeader('snapshot', false);
  if (fieldCount === 0) reader.fail('malformed', 'version', 'the snapshot array is empty');
  const versionOffset = reader.position;
  const version = reader.uint('version', U32_MAX);
  reader.version = version;
  if (!SNAPSHOT_FORMAT_VERSIONS_READABLE.includes(version)) {
    const readable = SNAPSHOT_FORMAT_VERSIONS_READABLE.join(' and ');
    throw new SnapshotDecodeError(
      'unsupported_version',
      'version',
      versionOffset,
      `version ${version}, this build reads versions ${readable}`,
    );
  }
  const fieldsExpected = 8;
  if (fieldCount !== fieldsExpected) {
    reader.fail('malformed', 'snapshot', `expected ${fieldsExpected} fields, found ${fieldCount}`);
  }
  const createdAtUs = reader.uint('createdAtUs', Number.MAX_SAFE_INTEGER);
  const sequenceNumber = reader.uint('sequenceNumber', Number.MAX_SAFE_INTEGER);
  const users = decodeUsers(reader);
  const streams = decodeStreams(reader);
  const clientTable = decodeClientTable(reader);
  const writerRelease = reader.uint('writerRelease', U32_MAX);
  const revokedTokens = decodeRevokedTokens(reader);
  if (reader.position !== bytes.byteLength) {
    reader.fail(
      'trailing_bytes',
      'snapshot',
      `${bytes.byteLength - reader.position} bytes after the snapshot`,
    );
  }
  return {
    version,
    createdAtUs,
    sequenceNumber,
    users,
    streams,
    clientTable,
    writerRelease,
    revokedTokens,
  };
}

function decodeRevokedTokens(reader: Reader): RevokedTokenSnapshot[] {
  const count = reader.arrayHeader('revokedTokens');
  const tokens: RevokedTokenSnapshot[] = [];
  const depth = reader.enter('revokedTokens');
  let previous: Uint8Array | null = null;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(3);
    const jtiOffset = reader.position;
    const jti = reader.bin('jti');
    if (jti.byteLength !== ACCESS_TOKEN_ID_SIZE) {
      throw new SnapshotDecodeError(
        'malformed',
        reader.pathTo('jti'),
        jtiOffset,
        `expected ${ACCESS_TOKEN_ID_SIZE} bytes, found ${jti.byteLength}`,
      );
    }
    if (previous !== null && compareBytes(jti, previous) <= 0) {
      throw new SnapshotDecodeError(
        'not_canonical_order',
        reader.pathTo('jti'),
        jtiOffset,
        'revoked token ids are not strictly ascending',
      );
    }
    previous = jti;
    const userId = reader.uint('userId', U32_MAX);
    const expiryAtUs = reader.uint('expiryAtUs', Number.MAX_SAFE_INTEGER);
    tokens.push({ jti, userId, expiryAtUs });
  }
  reader.leave(depth);
  return tokens;
}

/** Lexicographic byte order (the canonical order of revoked token ids). */
export function compareBytes(left: Uint8Array, right: Uint8Array): number {
  const length = Math.min(left.byteLength, right.byteLength);
  for (let index = 0; index < length; index++) {
    const difference = left[index]! - right[index]!;
    if (difference !== 0) return difference;
  }
  return left.byteLength - right.byteLength;
}

function decodeUsers(reader: Reader): UserSnapshot[] {
  const count = reader.arrayHeader('users');
  const users: UserSnapshot[] = [];
  const depth = reader.enter('users');
  let previousId = -1;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(7);
    const id = reader.uint('id', U32_MAX);
    if (id <= previousId) {
      reader.fail('not_canonical_order', 'id', `${id} does not follow ${previousId}`);
    }
    previousId = id;
    const username = reader.string('username');
    const passwordHash = reader.string('passwordHash');
    const status = reader.uint('status', U32_MAX);
    if (status !== 1 && status !== 2) {
      reader.fail('out_of_range', 'status', `unknown user status ${status}`);
    }
    const createdAtUs = reader.uint('createdAtUs', Number.MAX_SAFE_INTEGER);
    const permissions = reader.nil() ? null : decodePermissions(reader);
    const tokens = decodeTokens(reader);
    const user = { id, username, passwordHash, status: status as UserStatus, createdAtUs };
    users.push({ ...user, permissions, tokens });
  }
  reader.leave(depth);
  return users;
}

function decodePermissions(reader: Reader): PermissionsSnapshot {
  const depth = reader.enter('permissions');
  reader.record(2);
  const global = reader.uint('global', U32_MAX);
  const count = reader.arrayHeader('streams');
  const streams: StreamPermissionsSnapshot[] = [];
  const streamsDepth = reader.enter('streams');
  let previousStreamId = -1;
  for (let index = 0; index < count; index++) {
    reader.at(streamsDepth, index);
    reader.record(3);
    const streamId = reader.uint('streamId', U32_MAX);
    if (streamId <= previousStreamId) {
      reader.fail(
        'not_canonical_order',
        'streamId',
        `${streamId} does not follow ${previousStreamId}`,
      );
    }
    previousStreamId = streamId;
    const bits = reader.uint('bits', U32_MAX);
    const topicCount = reader.arrayHeader('topics');
    const topics: TopicPermissionsSnapshot[] = [];
    const topicsDepth = reader.enter('topics');
    let previousTopicId = -1;
    for (let topicIndex = 0; topicIndex < topicCount; topicIndex++) {
      reader.at(topicsDepth, topicIndex);
      reader.record(2);
      const topicId = reader.uint('topicId', U32_MAX);
      if (topicId <= previousTopicId) {
        reader.fail(
          'not_canonical_order',
          'topicId',
          `${topicId} does not follow ${previousTopicId}`,
        );
      }
      previousTopicId = topicId;
      topics.push({ topicId, bits: reader.uint('bits', U32_MAX) });
    }
    reader.leave(topicsDepth);
    streams.push({ streamId, bits, topics });
  }
  reader.leave(depth);
  return { global, streams };
}

function decodeTokens(reader: Reader): PersonalAccessTokenSnapshot[] {
  const count = reader.arrayHeader('tokens');
  const tokens: PersonalAccessTokenSnapshot[] = [];
  const depth = reader.enter('tokens');
  let previousName: string | null = null;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(3);
    const name = reader.string('name');
    // Array#sort order (UTF-16 code units), strictly: names are unique per user.
    if (previousName !== null && !(name > previousName)) {
      reader.fail('not_canonical_order', 'name', 'token names are not ascending');
    }
    previousName = name;
    const tokenHash = reader.bin('tokenHash');
    const expiryAtUs = reader.nil() ? null : reader.uint('expiryAtUs', Number.MAX_SAFE_INTEGER);
    tokens.push({ name, tokenHash, expiryAtUs });
  }
  reader.leave(depth);
  return tokens;
}

function decodeStreams(reader: Reader): StreamSnapshot[] {
  const count = reader.arrayHeader('streams');
  const streams: StreamSnapshot[] = [];
  const depth = reader.enter('streams');
  let previousId = -1;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(4);
    const id = reader.uint('id', U32_MAX);
    if (id <= previousId) {
      reader.fail('not_canonical_order', 'id', `${id} does not follow ${previousId}`);
    }
    previousId = id;
    const name = reader.string('name');
    const createdAtUs = reader.uint('createdAtUs', Number.MAX_SAFE_INTEGER);
    const topicCount = reader.arrayHeader('topics');
    const topics: TopicSnapshot[] = [];
    const topicsDepth = reader.enter('topics');
    let previousTopicId = -1;
    for (let topicIndex = 0; topicIndex < topicCount; topicIndex++) {
      reader.at(topicsDepth, topicIndex);
      const topic = decodeTopic(reader, previousTopicId);
      previousTopicId = topic.id;
      topics.push(topic);
    }
    reader.leave(topicsDepth);
    streams.push({ id, name, createdAtUs, topics });
  }
  reader.leave(depth);
  return streams;
}

function decodeTopic(reader: Reader, previousTopicId: number): TopicSnapshot {
  // Version 4 has no field 11 (the last purge): such a topic was never purged.
  const withPurge = reader.version >= 5;
  reader.record(withPurge ? 11 : 10);
  const id = reader.uint('id', U32_MAX);
  if (id <= previousTopicId) {
    reader.fail('not_canonical_order', 'id', `${id} does not follow ${previousTopicId}`);
  }
  const name = reader.string('name');
  const createdAtUs = reader.uint('createdAtUs', Number.MAX_SAFE_INTEGER);
  const messageExpiryUs = reader.u64('messageExpiryUs');
  const compression = reader.uint('compressionAlgorithm', U32_MAX);
  if (compression !== 1 && compression !== 2) {
    reader.fail(
      'out_of_range',
      'compressionAlgorithm',
      `unknown compression algorithm ${compression}`,
    );
  }
  const maxTopicSizeBytes = reader.u64('maxTopicSizeBytes');
  const replicationFactor = reader.uint('replicationFactor', U8_MAX);

  const partitionsCreatedAtUs = decodePartitionColumn(reader);

  const groupCount = reader.arrayHeader('consumerGroups');
  const consumerGroups: ConsumerGroupSnapshot[] = [];
  const depth = reader.enter('consumerGroups');
  let previousId = -1;
  for (let index = 0; index < groupCount; index++) {
    reader.at(depth, index);
    reader.record(4);
    const groupId = reader.uint('id', U32_MAX);
    if (groupId <= previousId) {
      reader.fail('not_canonical_order', 'id', `${groupId} does not follow ${previousId}`);
    }
    previousId = groupId;
    const groupName = reader.string('name');
    const generation = reader.uint('generation', Number.MAX_SAFE_INTEGER);
    consumerGroups.push(
      { id: groupId, name: groupName, generation, members: decodeMembers(reader) },
    );
  }
  reader.leave(depth);
  const options = decodeTopicOptions(
    reader,
    partitionsCreatedAtUs.byteLength / PARTITION_CREATED_AT_SIZE,
  );
  const purgedAtUs = withPurge ? reader.uint('purgedAtUs', Number.MAX_SAFE_INTEGER) : 0;
  return {
    id,
    name,
    createdAtUs,
    messageExpiryUs,
    compressionAlgorithm: compression as CompressionAlgorithm,
    maxTopicSizeBytes,
    replicationFactor,
    partitionsCreatedAtUs,
    consumerGroups,
    options,
    purgedAtUs,
  };
}

/**
 * Topic field 7 (version 4): the createdAtUs column, one bin of u64 little-endian values. One copy
 * (aligned, owned: a slice of its own, or a piece of a shared block for a small column) and one
 * pass over the high words: nothing is allocated per partition, and the state adopts the copy as
 * its store (partition-store.ts).
 */
function decodePartitionColumn(reader: Reader): Uint8Array {
  const offset = reader.position;
  const column = reader.columns.copy(reader.binView('partitionsCreatedAtUs'));
  const length = column.byteLength;
  if (length % PARTITION_CREATED_AT_SIZE !== 0) {
    throw new SnapshotDecodeError(
      'malformed',
      reader.pathTo('partitionsCreatedAtUs'),
      offset,
      `${length} bytes is not a whole number of ${PARTITION_CREATED_AT_SIZE}-byte values`,
    );
  }
  const index = columnFirstUnsafe(column);
  if (index >= 0) {
    const valueOffset = column.byteOffset + index * PARTITION_CREATED_AT_SIZE;
    const view = new DataView(column.buffer, valueOffset, PARTITION_CREATED_AT_SIZE);
    const value = view.getBigUint64(0, true);
    throw new SnapshotDecodeError(
      'out_of_range',
      reader.pathTo(`partitionsCreatedAtUs[${index}]`),
      offset,
      `${value} exceeds 2^53 - 1`,
    );
  }
  markColumnDecoded(column);
  return column;
}

/** Topic field 9: explicit options, keys ascending; the entries must satisfy the catalog rules. */
function decodeTopicOptions(
  reader: Reader,
  partitionsCount: number,
): readonly TopicOptionSnapshot[] {
  const count = reader.arrayHeader('options');
  if (count > TOPIC_OPTIONS_MAX) {
    reader.fail('out_of_range', 'options', `${count} entries exceeds ${TOPIC_OPTIONS_MAX}`);
  }
  // Most topics set none: one shared frozen array for them all.
  if (count === 0) return NO_TOPIC_OPTIONS;
  const options: TopicOptionSnapshot[] = [];
  const depth = reader.enter('options');
  let previousKey: string | null = null;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(2);
    const key = reader.string('key');
    if (previousKey !== null && !(key > previousKey)) {
      reader.fail('not_canonical_order', 'key', `"${key}" does not follow "${previousKey}"`);
    }
    previousKey = key;
    const value = reader.nil() ? null : reader.string('value');
    // Frozen as the state machine keeps them, so a restore adopts them without a copy.
    options.push(Object.freeze({ key, value }));
  }
  reader.leave(depth);
  if (topicOptionEntriesFault(options, partitionsCount) !== null) {
    reader.fail(
      'out_of_range',
      'options',
      'an entry is not a catalog option in its canonical form',
    );
  }
  // Frozen as the state keeps them (entries and array), so a restore adopts them without a copy.
  return Object.freeze(options);
}

const NO_TOPIC_OPTIONS: readonly TopicOptionSnapshot[] = Object.freeze([]);

function decodeMembers(reader: Reader): ConsumerGroupMemberSnapshot[] {
  const count = reader.arrayHeader('members');
  const members: ConsumerGroupMemberSnapshot[] = [];
  const depth = reader.enter('members');
  let previousId = -1;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(3);
    const id = reader.uint('id', U32_MAX);
    if (id <= previousId) {
      reader.fail('not_canonical_order', 'id', `${id} does not follow ${previousId}`);
    }
    previousId = id;
    const clientId = reader.u128('clientId');
    const partitionCount = reader.arrayHeader('partitions');
    const partitions: number[] = [];
    let previousPartition = -1;
    for (let partitionIndex = 0; partitionIndex < partitionCount; partitionIndex++) {
      const partition = reader.uint('partitions', U32_MAX);
      if (partition <= previousPartition) {
        reader.fail(
          'not_canonical_order',
          'partitions',
          `${partition} does not follow ${previousPartition}`,
        );
      }
      previousPartition = partition;
      partitions.push(partition);
    }
    members.push({ id, clientId, partitions });
  }
  reader.leave(depth);
  return members;
}

function decodeClientTable(reader: Reader): ClientEntrySnapshot[] {
  const count = reader.arrayHeader('clientTable');
  const clients: ClientEntrySnapshot[] = [];
  const depth = reader.enter('clientTable');
  let previousSlot = -1;
  for (let index = 0; index < count; index++) {
    reader.at(depth, index);
    reader.record(7);
    const slot = reader.uint('slot', U32_MAX);
    if (slot <= previousSlot) {
      reader.fail('not_canonical_order', 'slot', `${slot} does not follow ${previousSlot}`);
    }
    previousSlot = slot;
    const clientIdOffset = reader.position;
    const clientId = reader.u128('clientId');
    if (clientId === 0n) {
      throw new SnapshotDecodeError(
        'out_of_range',
        reader.pathTo('clientId'),
        clientIdOffset,
        'client id 0 is reserved',
      );
    }
    const epoch = reader.uint('epoch', Number.MAX_SAFE_INTEGER);
    const userId = reader.uint('userId', U32_MAX);
    const watermark = reader.uint('watermark', Number.MAX_SAFE_INTEGER);
    const watermarkChecksum = reader.u128('watermarkChecksum');
    const reply = reader.bin('reply');
    clients.push({ slot, clientId, epoch, userId, watermark, watermarkChecksum, reply });
  }
  reader.leave(depth);
  return clients;
}

/**
 * A cursor over the bytes plus the path to the current record, kept as a reusable segment stack
 * (names and indexes) so the happy path allocates no strings.
 */
/**
 * Where a decode copies small partition columns: pieces of shared 64 KiB blocks rather than a
 * buffer each. A realistic model has 100,000 topics of 10 partitions; 100,000 tiny ArrayBuffers
 * cost more to allocate and to collect than the bytes they hold. A piece is 8-byte aligned and
 * owned by its topic's store, which copies before it writes (copy-on-write) and never writes
 * past its piece. A block lives while any piece of it does: at most the decoded columns' bytes.
 */
export class ColumnBlocks {
  static readonly BLOCK_BYTES = 64 * 1024;
  /** Columns up to this size share blocks; larger ones get a buffer of their own. */
  static readonly SHARED_MAX = 1024;
  private block: ArrayBuffer | null = null;
  private used = 0;

  /** An aligned, owned copy of `source`. */
  copy(source: Uint8Array): Uint8Array {
    const length = source.byteLength;
    if (length > ColumnBlocks.SHARED_MAX) return source.slice();
    if (this.block === null || this.used + length > ColumnBlocks.BLOCK_BYTES) {
      this.block = new ArrayBuffer(ColumnBlocks.BLOCK_BYTES);
      this.used = 0;
    }
    const piece = new Uint8Array(this.block, this.used, length);
    piece.set(source);
    // The next piece starts 8-byte aligned (the store reads u32 words; the encoder u64 values).
    this.used += (length + 7) & ~7;
    return piece;
  }
}

class Reader {
  readonly bytes: Uint8Array;
  /** Where this decode's small partition columns are copied (ColumnBlocks). */
  readonly columns = new ColumnBlocks();
  private readonly view: DataView;
  position = 0;
  /** The snapshot's format version, once read: fields added by a version are read by it only. */
  version = 0;
  /** Where the value being read started (for error offsets). */
  private valueStart = 0;
  private readonly path: Array<string | number> = [];

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  // ---- path ----
  /** Pushes a collection name and an index slot; returns the depth to pass to `at`/`leave`. */
  enter(name: string): number {
    const depth = this.path.length;
    this.path.push(name, -1);
    return depth;
  }

  at(depth: number, index: number): void {
    this.path[depth + 1] = index;
  }

  leave(depth: number): void {
    this.path.length = depth;
  }

  pathTo(field: string): string {
    let out = '';
    for (const segment of this.path) {
      if (typeof segment === 'number') {
        if (segment >= 0) out += `[${segment}]`;
      } else {
        out += out === '' ? segment : `.${segment}`;
      }
    }
    if (field === '') return out === '' ? 'snapshot' : out;
    return out === '' ? field : `${out}.${field}`;
  }

  fail(reason: SnapshotDecodeReason, field: string, detail: string): never {
    throw new SnapshotDecodeError(reason, this.pathTo(field), this.valueStart, detail);
  }

  private need(byteCount: number, field: string): void {
    if (this.position + byteCount > this.bytes.byteLength) {
      this.fail(
        'truncated',
        field,
        `needs ${byteCount} bytes, ${this.bytes.byteLength - this.position} remain`,
      );
    }
  }

  private tag(field: string): number {
    this.valueStart = this.position;
    const tag = this.bytes[this.position];
    if (tag === undefined) this.fail('truncated', field, 'the snapshot ends here');
    return tag;
  }

  // ---- values ----
  /**
   * Array header of a collection. Its count is bounded by the bytes left (every item takes at
   * least one byte), so a hostile count fails here instead of driving a huge loop.
   */
  arrayHeader(field: string, boundByRemaining = true): number {
    const tag = this.tag(field);
    let count: number;
    if (tag >= 0x90 && tag <= 0x9f) {
      count = tag & 0x0f;
      this.position += 1;
    } else if (tag === 0xdc) {
      this.need(3, field);
      count = this.view.getUint16(this.position + 1);
      if (count < 16) {
        this.fail('not_canonical_encoding', field, `array16 header for ${count} items`);
      }
      this.position += 3;
    } else if (tag === 0xdd) {
      this.need(5, field);
      count = this.view.getUint32(this.position + 1);
      if (count < 0x1_0000) {
        this.fail('not_canonical_encoding', field, `array32 header for ${count} items`);
      }
      this.position += 5;
    } else {
      this.fail('malformed', field, `expected an array, found type byte 0x${tag.toString(16)}`);
    }
    if (boundByRemaining && count > this.bytes.byteLength - this.position) {
      this.fail(
        'truncated',
        field,
        `${count} items cannot fit in the ${this.bytes.byteLength - this.position} bytes left`,
      );
    }
    return count;
  }

  /** A record: a fixarray of exactly `fieldCount` fields. */
  record(fieldCount: number): void {
    const tag = this.tag('');
    if (tag !== (0x90 | fieldCount)) {
      const isRecord = tag >= 0x90 && tag <= 0x9f;
      const found = isRecord ? `${tag & 0x0f} fields` : `type byte 0x${tag.toString(16)}`;
      this.fail('malformed', '', `expected a record of ${fieldCount} fields, found ${found}`);
    }
    this.position += 1;
  }

  nil(): boolean {
    if (this.bytes[this.position] !== 0xc0) return false;
    this.position += 1;
    return true;
  }

  /** An unsigned integer in the smallest encoding, at most `max` (max <= 2^53 - 1). */
  uint(field: string, max: number): number {
    const tag = this.tag(field);
    const at = this.position;
    let value: number;
    if (tag < 0x80) {
      value = tag;
      this.position += 1;
    } else if (tag === 0xcc) {
      this.need(2, field);
      value = this.bytes[at + 1]!;
      if (value < 0x80) this.fail('not_canonical_encoding', field, `uint8 encoding of ${value}`);
      this.position += 2;
    } else if (tag === 0xcd) {
      this.need(3, field);
      value = this.view.getUint16(at + 1);
      if (value < 0x100) this.fail('not_canonical_encoding', field, `uint16 encoding of ${value}`);
      this.position += 3;
    } else if (tag === 0xce) {
      this.need(5, field);
      value = this.view.getUint32(at + 1);
      if (value < 0x1_0000) {
        this.fail('not_canonical_encoding', field, `uint32 encoding of ${value}`);
      }
      this.position += 5;
    } else if (tag === 0xcf) {
      this.need(9, field);
      const high = this.view.getUint32(at + 1);
      if (high === 0) {
        this.fail('not_canonical_encoding', field, 'uint64 encoding of a value below 2^32');
      }
      if (high > SAFE_HIGH_WORD_MAX) {
        this.fail('out_of_range', field, `${this.view.getBigUint64(at + 1)} exceeds 2^53 - 1`);
      }
      value = high * TWO_POW_32 + this.view.getUint32(at + 5);
      this.position += 9;
    } else {
      this.failNotUint(tag, field);
    }
    if (value > max) this.fail('out_of_range', field, `${value} exceeds ${max}`);
    return value;
  }

  /** A u64 the model holds as a bigint (full range). */
  u64(field: string): bigint {
    const tag = this.tag(field);
    if (tag !== 0xcf) return BigInt(this.uint(field, Number.MAX_SAFE_INTEGER));
    this.need(9, field);
    const value = this.view.getBigUint64(this.position + 1);
    if (value < 0x1_0000_0000n) {
      this.fail('not_canonical_encoding', field, 'uint64 encoding of a value below 2^32');
    }
    this.position += 9;
    return value;
  }

  /** A u128: bin8 of exactly 16 bytes, big-endian. */
  u128(field: string): bigint {
    const tag = this.tag(field);
    if (tag !== 0xc4) {
      this.fail(
        'malformed',
        field,
        `expected a 16-byte bin, found type byte 0x${tag.toString(16)}`,
      );
    }
    this.need(18, field);
    const length = this.bytes[this.position + 1]!;
    if (length !== 16) {
      this.fail('malformed', field, `expected a 16-byte bin, found ${length} bytes`);
    }
    const high = this.view.getBigUint64(this.position + 2);
    const value = (high << 64n) | this.view.getBigUint64(this.position + 10);
    this.position += 18;
    return value;
  }

  string(field: string): string {
    const tag = this.tag(field);
    let length: number;
    let headerSize: number;
    if (tag >= 0xa0 && tag <= 0xbf) {
      length = tag & 0x1f;
      headerSize = 1;
    } else if (tag === 0xd9) {
      this.need(2, field);
      length = this.bytes[this.position + 1]!;
      if (length < 32) {
        this.fail('not_canonical_encoding', field, `str8 header for ${length} bytes`);
      }
      headerSize = 2;
    } else if (tag === 0xda) {
      this.need(3, field);
      length = this.view.getUint16(this.position + 1);
      if (length < 0x100) {
        this.fail('not_canonical_encoding', field, `str16 header for ${length} bytes`);
      }
      headerSize = 3;
    } else if (tag === 0xdb) {
      this.need(5, field);
      length = this.view.getUint32(this.position + 1);
      if (length < 0x1_0000) {
        this.fail('not_canonical_encoding', field, `str32 header for ${length} bytes`);
      }
      headerSize = 5;
    } else {
      this.fail('malformed', field, `expected a string, found type byte 0x${tag.toString(16)}`);
    }
    this.need(headerSize + length, field);
    const start = this.position + headerSize;
    const end = start + length;
    this.position = end;
    const bytes = this.bytes;
    if (length <= ASCII_FAST_PATH_LENGTH_MAX) {
      let ascii = true;
      for (let index = start; index < end; index++) {
        if (bytes[index]! >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) {
        return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
      }
    }
    try {
      return utf8Decoder.decode(bytes.subarray(start, end));
    } catch {
      this.fail('invalid_utf8', field, `${length} bytes are not valid UTF-8`);
    }
  }

  /** A byte string, copied: the snapshot's buffer may be reused (a transfer chunk, WASM memory). */
  /** A bin's bytes in place: a view of the snapshot being decoded (copy before keeping it). */
  binView(field: string): Uint8Array {
    const tag = this.tag(field);
    let length: number;
    let headerSize: number;
    if (tag === 0xc4) {
      this.need(2, field);
      length = this.bytes[this.position + 1]!;
      headerSize = 2;
    } else if (tag === 0xc5) {
      this.need(3, field);
      length = this.view.getUint16(this.position + 1);
      if (length < 0x100) {
        this.fail('not_canonical_encoding', field, `bin16 header for ${length} bytes`);
      }
      headerSize = 3;
    } else if (tag === 0xc6) {
      this.need(5, field);
      length = this.view.getUint32(this.position + 1);
      if (length < 0x1_0000) {
        this.fail('not_canonical_encoding', field, `bin32 header for ${length} bytes`);
      }
      headerSize = 5;
    } else {
      this.fail('malformed', field, `expected bytes, found type byte 0x${tag.toString(16)}`);
    }
    this.need(headerSize + length, field);
    const start = this.position + headerSize;
    this.position = start + length;
    return this.bytes.subarray(start, start + length);
  }

  /** A bin's bytes as an owned copy (`binView` reads them in place). */
  bin(field: string): Uint8Array {
    return this.binView(field).slice();
  }

  private failNotUint(tag: number, field: string): never {
    if (tag >= 0xe0 || (tag >= 0xd0 && tag <= 0xd3)) {
      // Signed forms: the canonical encoding writes every integer of the model unsigned.
      this.fail(
        tag >= 0xe0 ? 'out_of_range' : 'not_canonical_encoding',
        field,
        `signed integer (type byte 0x${tag.toString(16)})`,
      );
    }
    this.fail(
      'malformed',
      field,
      `expected an unsigned integer, found type byte 0x${tag.toString(16)}`,
    );
  }
}

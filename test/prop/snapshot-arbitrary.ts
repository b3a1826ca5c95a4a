/**
 * fast-check arbitraries of valid, canonical metadata snapshots (snapshot-model.ts): ids strictly
 * ascending, integers in range, token names in Array#sort order, client ids non-zero. Integers
 * and strings lean towards the msgpack encoding boundaries, where an off-by-one would show.
 * Lives under test/ so production code never imports fast-check.
 */
import fc from 'fast-check';
import {
  SNAPSHOT_FORMAT_VERSION,
  U64_MAX,
  type ClientEntrySnapshot,
  type ConsumerGroupSnapshot,
  type MetadataSnapshot,
  type PermissionsSnapshot,
  type PersonalAccessTokenSnapshot,
  type RevokedTokenSnapshot,
  type StreamSnapshot,
  type TopicSnapshot,
  type UserSnapshot,
} from '../../src/format/snapshot-model.js';

const U32_MAX = 0xffff_ffff;
const U128_MAX = (1n << 128n) - 1n;

/** Values on either side of every msgpack integer width change. */
export const UINT_BOUNDARIES = [0, 1, 127, 128, 255, 256, 65_535, 65_536, U32_MAX, 2 ** 32, Number.MAX_SAFE_INTEGER] as const;

export interface SnapshotArbitraryOptions {
  /** Upper bound for every collection (users, streams, clients; nested ones use less). */
  readonly collectionMax?: number;
}

const u32 = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom(...UINT_BOUNDARIES.filter((value) => value <= U32_MAX)) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 300 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: U32_MAX }) },
);
const u8 = fc.oneof(fc.constantFrom(0, 1, 3, 127, 128, 255), fc.integer({ min: 0, max: 255 }));
/** A u64 the model keeps as a number: below 2^53. */
const u64Number = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom(...UINT_BOUNDARIES) },
  { weight: 2, arbitrary: fc.maxSafeNat() },
);
const u64Bigint = fc.oneof(
  fc.constantFrom(0n, 127n, 128n, 0xffff_ffffn, 0x1_0000_0000n, 2n ** 53n, U64_MAX - 1n, U64_MAX),
  fc.bigInt({ min: 0n, max: U64_MAX }),
);
const u128 = fc.oneof(
  fc.constantFrom(0n, 1n, U64_MAX, U64_MAX + 1n, U128_MAX),
  fc.bigInt({ min: 0n, max: U128_MAX }),
);
const clientId = u128.filter((value) => value !== 0n);
/** ASCII, any code point (surrogate pairs included), and the odd long string for str8/str16. */
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 60, maxLength: 300 }) },
);
const bytes = fc.oneof(
  { weight: 3, arbitrary: fc.uint8Array({ maxLength: 64 }) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 250, maxLength: 300 }) },
);

/** `count` distinct ids ascending, drawn from `id`. */
function ascendingIds(maxLength: number, id: fc.Arbitrary<number> = u32): fc.Arbitrary<number[]> {
  return fc.uniqueArray(id, { maxLength }).map((ids) => ids.sort((a, b) => a - b));
}

/** Records keyed by the ids of `ascendingIds`, built by `make(id)`. */
function ascendingRecords<T>(maxLength: number, make: (id: number) => fc.Arbitrary<T>): fc.Arbitrary<T[]> {
  return ascendingIds(maxLength).chain((ids) => (ids.length === 0 ? fc.constant([]) : fc.tuple(...ids.map(make))));
}

function permissions(max: number): fc.Arbitrary<PermissionsSnapshot> {
  return fc.record({
    global: u32,
    streams: ascendingRecords(max, (streamId) =>
      fc.record({
        streamId: fc.constant(streamId),
        bits: u32,
        topics: ascendingRecords(max, (topicId) => fc.record({ topicId: fc.constant(topicId), bits: u32 })),
      }),
    ),
  });
}

function tokens(max: number): fc.Arbitrary<PersonalAccessTokenSnapshot[]> {
  return fc.uniqueArray(text, { maxLength: max }).chain((names) => {
    const sorted = names.sort();
    if (sorted.length === 0) return fc.constant([]);
    return fc.tuple(
      ...sorted.map((name) =>
        fc.record({ name: fc.constant(name), tokenHash: bytes, expiryAtUs: fc.option(u64Number, { nil: null }) }),
      ),
    );
  });
}

function users(max: number): fc.Arbitrary<UserSnapshot[]> {
  return ascendingRecords(max, (id) =>
    fc.record({
      id: fc.constant(id),
      username: text,
      passwordHash: text,
      status: fc.constantFrom(1 as const, 2 as const),
      createdAtUs: u64Number,
      permissions: fc.option(permissions(Math.min(max, 3)), { nil: null }),
      tokens: tokens(Math.min(max, 3)),
    }),
  );
}

function consumerGroups(max: number): fc.Arbitrary<ConsumerGroupSnapshot[]> {
  return ascendingRecords(max, (id) =>
    fc.record({
      id: fc.constant(id),
      name: text,
      generation: u64Number,
      members: ascendingRecords(max, (memberId) =>
        fc.record({ id: fc.constant(memberId), clientId: u128, partitions: ascendingIds(max + 2) }),
      ),
    }),
  );
}

const TOPIC_OPTION_SAMPLES = [
  { key: 'compression_algorithm', value: null },
  { key: 'enforce_fsync', value: 'false' },
  { key: 'max_topic_size', value: null },
  { key: 'messages_required_to_save', value: '1' },
  { key: 'segment_size', value: '1073741824' },
];

function topics(max: number): fc.Arbitrary<TopicSnapshot[]> {
  return ascendingRecords(max, (id) =>
    fc.record({
      id: fc.constant(id),
      name: text,
      createdAtUs: u64Number,
      messageExpiryUs: u64Bigint,
      compressionAlgorithm: fc.constantFrom(1 as const, 2 as const),
      maxTopicSizeBytes: u64Bigint,
      replicationFactor: u8,
      // Ordered subsets of canonical entries (the decoder checks them against the catalog).
      options: fc.subarray(TOPIC_OPTION_SAMPLES),
      purgedAtUs: u64Number,
      // Version 4: the createdAtUs column (ids implicit), built as u64 little-endian by hand.
      partitionsCreatedAtUs: fc.array(u64Number, { maxLength: max + 2 }).map((values) => {
        const column = new Uint8Array(values.length * 8);
        const view = new DataView(column.buffer);
        values.forEach((value, index) => view.setBigUint64(index * 8, BigInt(value), true));
        return column;
      }),
      consumerGroups: consumerGroups(Math.min(max, 2)),
    }),
  );
}

function streams(max: number): fc.Arbitrary<StreamSnapshot[]> {
  return ascendingRecords(max, (id) =>
    fc.record({ id: fc.constant(id), name: text, createdAtUs: u64Number, topics: topics(Math.min(max, 3)) }),
  );
}

function clientTable(max: number): fc.Arbitrary<ClientEntrySnapshot[]> {
  return ascendingRecords(max, (slot) =>
    fc.record({
      slot: fc.constant(slot),
      clientId,
      epoch: u64Number,
      userId: u32,
      watermark: u64Number,
      watermarkChecksum: u128,
      reply: bytes,
    }),
  );
}

/** Unique 16-byte ids in byte order (the canonical order). */
function revokedTokens(max: number): fc.Arbitrary<RevokedTokenSnapshot[]> {
  return fc
    .uniqueArray(fc.uint8Array({ minLength: 16, maxLength: 16 }), { maxLength: max, selector: (jti) => Buffer.from(jti).toString('hex') })
    .chain((jtis) => {
      const sorted = jtis.sort((left, right) => Buffer.compare(Buffer.from(left), Buffer.from(right)));
      return fc.tuple(...sorted.map((jti) => fc.record({ jti: fc.constant(jti), userId: u32, expiryAtUs: u64Number })));
    })
    .map((tokens) => [...tokens]);
}

export function arbitrarySnapshot(options: SnapshotArbitraryOptions = {}): fc.Arbitrary<MetadataSnapshot> {
  const max = options.collectionMax ?? 4;
  return fc.record({
    version: fc.constant(SNAPSHOT_FORMAT_VERSION),
    createdAtUs: u64Number,
    sequenceNumber: u64Number,
    users: users(max),
    streams: streams(max),
    clientTable: clientTable(max),
    writerRelease: u32,
    revokedTokens: revokedTokens(max),
  });
}

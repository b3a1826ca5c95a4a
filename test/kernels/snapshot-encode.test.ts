/**
 * Snapshot encode conformance: the TS kernel and both WASM builds write the canonical msgpack of
 * snapshot-model.ts byte for byte: pinned golden bytes, every integer / string / bin / array
 * header boundary, nil against present optionals, and the same refusal of non-canonical models.
 * An independent encoder (@msgpack/msgpack over the positional form) and decoder (msgpackr) cross
 * check the format itself.
 */
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { SNAPSHOT_FORMAT_VERSION, U64_MAX, type MetadataSnapshot, type TopicSnapshot } from '../../src/format/snapshot-model.js';
import { columnOf } from '../../src/metadata/partition-store.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { REFERENCE_SNAPSHOT_SMALL, referenceSnapshot } from '../../src/testing/snapshot-fixtures.js';
import { goldenSnapshot } from './snapshot-golden.js';
import { freshSnapshotEncoder, hex, positional, snapshotEncoders } from './snapshot-encoders.js';

/** Persisted in every checkpoint: changing these bytes needs a SNAPSHOT_FORMAT_VERSION bump. */
const GOLDEN_HEX =
  '9805cf00060dd710212000cd1092929700a469676779d93b246172676f6e3269' +
  '6424763d3139246d3d31393435362c743d322c703d31246332467364484e6862' +
  '48527a59577830246147467a6147686863326701cf00060dd71021200192cd03' +
  'ff9193013f9192020f9293a26369c420000102030405060708090a0b0c0d0e0f' +
  '101112131415161718191a1b1c1d1e1fcf00062a99ba0c600093a76772616661' +
  '6e61c420abacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6' +
  'c7c8c9cac09707a76ac3bc7267656ed92e246172676f6e32696424763d313924' +
  '6d3d31393435362c743d322c703d312463475677634756792463324673644102' +
  'ccc8c090929401a96f72646572732d6575cf00060dd710212064919b01ad6f72' +
  '6465722e63726561746564cf00060dd7102120c8cfffffffffffffffff01cf00' +
  '0000028000000003c410c9202110d70d0600ca202110d70d0600919401a76269' +
  '6c6c696e6703919301c4100123456789abcdeffedcba98765432109200019392' +
  'b5636f6d7072657373696f6e5f616c676f726974686dc092ad656e666f726365' +
  '5f6673796e63a47472756592ac7365676d656e745f73697a65a9313334323137' +
  '373238cf00060deb2df8800094cd012ca9e38387e383bce382bfcf00060dd710' +
  '21212c90929700c410fedcba98765432100123456789abcdef1107ce00010000' +
  'c41000000000000000000000000000000000c40800010203040506079705c410' +
  '00000000000000000000000000000001cf00000001000000000000c410ffffff' +
  'ffffffffffffffffffffffffffc400ce000102009393c4100001020304050607' +
  '08090a0b0c0d0e0f00cf00060dd7e6b4c40093c410101112131415161718191a' +
  '1b1c1d1e1f070193c410ffffffffffffffffffffffffffffffffceffffffffcf' +
  '001fffffffffffff';

const EMPTY: MetadataSnapshot = {
  version: SNAPSHOT_FORMAT_VERSION,
  createdAtUs: 0,
  sequenceNumber: 0,
  users: [],
  streams: [],
  clientTable: [],
  writerRelease: 0,
  revokedTokens: [],
};

/** A partition column of arbitrary u64 values (the model's builder only takes safe integers). */
function u64Column(values: readonly bigint[]): Uint8Array {
  const column = new Uint8Array(values.length * 8);
  const view = new DataView(column.buffer);
  values.forEach((value, index) => view.setBigUint64(index * 8, value, true));
  return column;
}

/** A revoked token whose id is 16 bytes of `fill` (order: by fill). */
function revoked(fill: number) {
  return { jti: new Uint8Array(16).fill(fill), userId: 1, expiryAtUs: 5 };
}

/** Independent reference: a generic encoder over the positional form (see `positional`). */
function referenceEncode(snapshot: MetadataSnapshot): string {
  return hex(msgpackEncode(positional(snapshot), { useBigInt64: true }));
}

function topic(overrides: Partial<TopicSnapshot> = {}): TopicSnapshot {
  return {
    id: 1,
    name: 't',
    createdAtUs: 0,
    messageExpiryUs: 0n,
    compressionAlgorithm: 1,
    maxTopicSizeBytes: 0n,
    replicationFactor: 1,
    partitionsCreatedAtUs: new Uint8Array(0),
    consumerGroups: [],
    options: [],
    purgedAtUs: 0,
    ...overrides,
  };
}

function withTopic(overrides: Partial<TopicSnapshot>): MetadataSnapshot {
  return { ...EMPTY, streams: [{ id: 1, name: 's', createdAtUs: 0, topics: [topic(overrides)] }] };
}

function withStreamName(name: string): MetadataSnapshot {
  return { ...EMPTY, streams: [{ id: 1, name, createdAtUs: 0, topics: [] }] };
}

function withReply(reply: Uint8Array): MetadataSnapshot {
  return {
    ...EMPTY,
    clientTable: [{ slot: 0, clientId: 1n, epoch: 0, userId: 0, watermark: 0, watermarkChecksum: 0n, reply }],
  };
}

/** Bytes of the stream name field inside `withStreamName`: after 98 04 00 00 90 91 94 01. */
const STREAM_NAME_OFFSET = 8;

describe('snapshot encode: format reference', () => {
  it('the pinned golden bytes are what a generic msgpack encoder writes for the positional form', () => {
    expect(referenceEncode(goldenSnapshot())).toBe(GOLDEN_HEX);
  });

  it('msgpackr decodes the golden bytes to the positional arrays', () => {
    // A plain Uint8Array in, so msgpackr hands bins back as Uint8Array (from a Buffer, Buffers).
    expect(unpack(new Uint8Array(Buffer.from(GOLDEN_HEX, 'hex')))).toEqual(positional(goldenSnapshot()));
  });

  it('version 5 writes a topic as 11 fields: its partitions a bin, its explicit options as [key, value | nil], its last purge last', () => {
    const options = [
      { key: 'compression_algorithm', value: null },
      { key: 'segment_size', value: '134217728' },
    ];
    const bytes = hex(msgpackEncode(positional(withTopic({ options, purgedAtUs: 300 })), { useBigInt64: true }));
    // [1, "t", 0, 0, 1, 0, 1, bin(0), [], [["compression_algorithm", nil], ["segment_size", "134217728"]], 300]
    const tail = '9292b5' + hex(Buffer.from('compression_algorithm')) + 'c092ac' + hex(Buffer.from('segment_size')) + 'a9' + hex(Buffer.from('134217728'));
    expect(bytes).toBe('98050000909194' + '01a173' + '00' + '919b' + '01a174' + '00000100' + '01' + 'c400' + '90' + tail + 'cd012c' + '9000' + '90');
  });
});

describe('snapshot encode: the kernels agree on partition columns', () => {
  it('TS and both WASM builds write identical bytes for empty, small and multi-MiB columns across topics', () => {
    // Topics with 0, 1, 31, 32, 8,192 and 300,000 partitions (a 2.4 MB column), values spread over
    // the whole 2^53 range, and one fresh WASM instance per build so table sizes start cold.
    const counts = [0, 1, 31, 32, 8_192, 300_000];
    const topics = counts.map((count, index) =>
      topic({
        id: index,
        name: `t${index}`,
        partitionsCreatedAtUs: columnOf(Array.from({ length: count }, (_, partition) => (partition * 2_654_435_761 * (index + 1)) % Number.MAX_SAFE_INTEGER)),
      }),
    );
    const snapshot: MetadataSnapshot = { ...EMPTY, streams: [{ id: 1, name: 's', createdAtUs: 0, topics }] };
    const [ts, ...wasm] = snapshotEncoders.map(({ label }) => freshSnapshotEncoder(label).encode(snapshot));
    expect(ts!.byteLength).toBeGreaterThan(8 * 300_000);
    for (const bytes of wasm) expect(Buffer.compare(Buffer.from(bytes), Buffer.from(ts!))).toBe(0);
    expect(hex(ts!)).toBe(referenceEncode(snapshot));
  });
});

describe.each(snapshotEncoders)('snapshot encode ($label)', ({ label, encode, instance }) => {
  it('writes the pinned golden bytes', () => {
    expect(hex(encode(goldenSnapshot()))).toBe(GOLDEN_HEX);
  });

  it('encodes an empty snapshot as 98 04 00 00 90 90 90 00 90', () => {
    expect(hex(encode(EMPTY))).toBe('980500009090900090');
  });

  it('matches the generic encoder and msgpackr on the small reference snapshot', () => {
    const snapshot = referenceSnapshot(REFERENCE_SNAPSHOT_SMALL);
    const bytes = encode(snapshot);
    expect(hex(bytes)).toBe(referenceEncode(snapshot));
    expect(unpack(bytes)).toEqual(positional(snapshot));
  });

  it.each([
    [0, '00'],
    [127, '7f'],
    [128, 'cc80'],
    [255, 'ccff'],
    [256, 'cd0100'],
    [65_535, 'cdffff'],
    [65_536, 'ce00010000'],
    [2 ** 32 - 1, 'ceffffffff'],
    [2 ** 32, 'cf0000000100000000'],
    [Number.MAX_SAFE_INTEGER, 'cf001fffffffffffff'],
  ])('writes the u64 number %d in its smallest form %s', (value, expected) => {
    const bytes = encode({ ...EMPTY, createdAtUs: value });
    expect(hex(bytes)).toBe(`9805${expected}009090900090`);
    expect(unpack(bytes)[1]).toEqual(value < 2 ** 32 ? value : BigInt(value));
  });

  it.each([
    [0n, '00'],
    [127n, '7f'],
    [128n, 'cc80'],
    [65_535n, 'cdffff'],
    [65_536n, 'ce00010000'],
    [0xffff_ffffn, 'ceffffffff'],
    [0x1_0000_0000n, 'cf0000000100000000'],
    [2n ** 53n + 1n, 'cf0020000000000001'],
    [U64_MAX, 'cfffffffffffffffff'],
  ])('writes the u64 bigint %s in its smallest form %s, never a float', (value, expected) => {
    const bytes = encode(withTopic({ messageExpiryUs: value, maxTopicSizeBytes: value }));
    // topic: 9b 01 a1 74 00 <messageExpiryUs> 01 <maxTopicSizeBytes> 01 c4 00 90 90
    expect(hex(bytes)).toContain(`9b01a17400${expected}01${expected}01c4009090`);
    const decoded = unpack(bytes) as unknown[][][][][];
    expect(decoded[4]![0]![3]![0]![3]).toEqual(value < 2n ** 32n ? Number(value) : value);
  });

  it.each([
    [31, 'bf'],
    [32, 'd920'],
    [255, 'd9ff'],
    [256, 'da0100'],
    [65_535, 'daffff'],
    [65_536, 'db00010000'],
  ])('writes a %d-byte ASCII string with the header %s', (length, header) => {
    const name = 'n'.repeat(length);
    const bytes = encode(withStreamName(name));
    expect(hex(bytes.subarray(STREAM_NAME_OFFSET, STREAM_NAME_OFFSET + header.length / 2))).toBe(header);
    expect(unpack(bytes)[4][0][1]).toBe(name);
  });

  it.each([
    ['2-byte units, 31 bytes', `${'é'.repeat(15)}a`, 'bf'],
    ['2-byte units, 32 bytes', 'é'.repeat(16), 'd920'],
    ['3-byte units, 33 bytes', '€'.repeat(11), 'd921'],
    ['3-byte units, 255 bytes', '€'.repeat(85), 'd9ff'],
    ['3-byte units, 258 bytes', '€'.repeat(86), 'da0102'],
    ['surrogate pairs, 32 bytes', '🚀'.repeat(8), 'd920'],
    ['mixed, long', `Zürich-データ-🚀-${'x'.repeat(200)}`, 'd9df'],
    ['a leading byte-order mark', '\ufeffbom', 'a6'],
  ])('writes UTF-8 for %s with the smallest header', (_label, name, header) => {
    const bytes = encode(withStreamName(name));
    const utf8 = Buffer.from(name, 'utf8');
    expect(hex(bytes.subarray(STREAM_NAME_OFFSET, STREAM_NAME_OFFSET + header.length / 2))).toBe(header);
    expect(hex(bytes.subarray(STREAM_NAME_OFFSET + header.length / 2, STREAM_NAME_OFFSET + header.length / 2 + utf8.length))).toBe(
      utf8.toString('hex'),
    );
    expect(unpack(bytes)[4][0][1]).toBe(name);
  });

  it.each([
    [0, 'c400'],
    [255, 'c4ff'],
    [256, 'c50100'],
    [65_535, 'c5ffff'],
    [65_536, 'c600010000'],
  ])('writes a %d-byte reply with the bin header %s', (length, header) => {
    const reply = Uint8Array.from({ length }, (_, index) => (index * 7) & 0xff);
    const bytes = encode(withReply(reply));
    expect(hex(bytes)).toBe(referenceEncode(withReply(reply)));
    expect(hex(bytes)).toContain(`00${header}`);
    expect(new Uint8Array(unpack(bytes)[5][0][6])).toEqual(reply);
  });

  it.each([
    [15, '9f'],
    [16, 'dc0010'],
    [65_535, 'dcffff'],
    [65_536, 'dd00010000'],
  ])('writes a %d-item array with the header %s', (count, header) => {
    const partitions = Array.from({ length: count }, (_, index) => index);
    const snapshot = withTopic({
      consumerGroups: [{ id: 1, name: 'g', generation: 0, members: [{ id: 1, clientId: 1n, partitions }] }],
    });
    const bytes = encode(snapshot);
    expect(hex(bytes.subarray(0, 64))).toContain(`c410${'00'.repeat(15)}01${header}`);
    expect(hex(bytes)).toBe(referenceEncode(snapshot));
  });

  it.each([
    [0, 'c400'],
    [31, 'c4f8'],
    [32, 'c50100'],
    [8_191, 'c5fff8'],
    [8_192, 'c600010000'],
    [100_000, 'c6000c3500'],
  ])('writes a column of %d partitions as one bin with the header %s, values u64 little-endian', (count, header) => {
    // Values near 2^53 and ones that use every byte, so a byte-order or width slip shows.
    const values = Array.from({ length: count }, (_, index) => (index % 3 === 0 ? Number.MAX_SAFE_INTEGER - index : index * 0x0102_0304_05));
    const column = columnOf(values);
    const snapshot = withTopic({ partitionsCreatedAtUs: column });
    const bytes = encode(snapshot);
    // topic: 9b 01 a1 74 00 00 01 00 01 <bin header> <column>
    const at = hex(bytes).indexOf(`9b01a1740000010001${header}`);
    expect(at).toBeGreaterThan(0);
    const start = at / 2 + 9 + header.length / 2;
    expect(bytes.subarray(start, start + column.byteLength)).toEqual(column);
    const view = new DataView(bytes.buffer, bytes.byteOffset + start, column.byteLength);
    for (const index of [0, 1, 2, count - 1].filter((index) => index >= 0 && index < count)) {
      expect(Number(view.getBigUint64(index * 8, true))).toBe(values[index]);
    }
    expect(hex(bytes)).toBe(referenceEncode(snapshot));
  });

  it('encodes a column that is a view into a larger buffer at an odd offset', () => {
    const backing = new Uint8Array(8 * 40 + 3);
    const column = backing.subarray(3, 3 + 8 * 40);
    column.set(columnOf(Array.from({ length: 40 }, (_, index) => 1_704_067_200_000_000 + index)));
    const snapshot = withTopic({ partitionsCreatedAtUs: column });
    expect(hex(encode(snapshot))).toBe(referenceEncode(withTopic({ partitionsCreatedAtUs: column.slice() })));
  });

  it('writes nil for absent permissions and expiry, arrays when present', () => {
    const user = {
      id: 1,
      username: 'u',
      passwordHash: 'h',
      status: 1 as const,
      createdAtUs: 0,
      permissions: null,
      tokens: [{ name: 'a', tokenHash: new Uint8Array([1]), expiryAtUs: null }],
    };
    const absent = encode({ ...EMPTY, users: [user] });
    // 98 04 00 00 91 97 01 a1 75 a1 68 01 00 c0 91 93 a1 61 c4 01 01 c0 90 90 00 90
    expect(hex(absent)).toBe('98050000919701a175a16801' + '00c0' + '9193a161c40101c0' + '90900090');
    const present = encode({
      ...EMPTY,
      users: [
        {
          ...user,
          permissions: { global: 0, streams: [] },
          tokens: [{ name: 'a', tokenHash: new Uint8Array([1]), expiryAtUs: 5 }],
        },
      ],
    });
    expect(hex(present)).toBe('98050000919701a175a16801' + '00920090' + '9193a161c4010105' + '90900090');
  });

  it('writes topic options as [key, value | nil] in key order, like the generic encoder', () => {
    const options = [
      { key: 'compression_algorithm', value: null },
      { key: 'enforce_fsync', value: 'false' },
      { key: 'max_topic_size', value: null },
      { key: 'segment_size', value: '1048576' },
    ];
    const snapshot = withTopic({ options });
    expect(hex(encode(snapshot))).toBe(referenceEncode(snapshot));
    expect(unpack(encode(snapshot))).toEqual(positional(snapshot));
    expect(() => encode(withTopic({ options: [options[1]!, options[0]!] }))).toThrow(/topics\[0\]\.options\[1\]\.key is not ascending/);
    expect(() => encode(withTopic({ options: [options[0]!, options[0]!] }))).toThrow(/options\[1\]\.key is not ascending/);
  });

  it('orders revoked token ids by their bytes (high byte first) and writes each as [bin16, u32, u64]', () => {
    // Ids that differ only in the last byte, and ones whose high halves differ the other way round.
    const ids = [
      Uint8Array.from({ length: 16 }, (_, index) => (index === 15 ? 1 : 0)),
      Uint8Array.from({ length: 16 }, (_, index) => (index === 15 ? 2 : 0)),
      Uint8Array.from({ length: 16 }, (_, index) => (index === 7 ? 1 : 0)),
      Uint8Array.from({ length: 16 }, (_, index) => (index === 0 ? 0x80 : 0xff)),
    ];
    const snapshot = { ...EMPTY, revokedTokens: ids.map((jti, index) => ({ jti, userId: index * 1000, expiryAtUs: 2 ** 40 + index })) };
    expect(hex(encode(snapshot))).toBe(referenceEncode(snapshot));
    expect(() => encode({ ...snapshot, revokedTokens: [snapshot.revokedTokens[1]!, snapshot.revokedTokens[0]!] })).toThrow(/revokedTokens\[1\]\.jti is not ascending/);
    expect(() => encode({ ...snapshot, revokedTokens: [snapshot.revokedTokens[3]!, snapshot.revokedTokens[2]!] })).toThrow(/revokedTokens\[1\]\.jti is not ascending/);
  });

  it('matches the generic encoder on the full-shape fixture with a different seed', () => {
    const snapshot = referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 99 });
    expect(hex(encode(snapshot))).toBe(referenceEncode(snapshot));
  });

  it('returns fresh bytes that never alias WASM memory or a later call', () => {
    const first = encode(goldenSnapshot());
    if (instance !== null) expect(first.buffer).not.toBe(instance.bytes().buffer);
    encode(referenceSnapshot(REFERENCE_SNAPSHOT_SMALL));
    expect(hex(first)).toBe(GOLDEN_HEX);
  });

  it('keeps working when a larger snapshot grows WASM memory', () => {
    const small = encode(goldenSnapshot());
    const large = referenceSnapshot({ streams: 200, topicsPerStream: 5, partitionsPerTopic: 4, users: 100, clients: 3_000 });
    expect(hex(encode(large))).toBe(referenceEncode(large));
    expect(hex(encode(goldenSnapshot()))).toBe(hex(small));
  });

  it('re-sizes its tables when one table or the string heap outgrows the previous call', () => {
    // The WASM marshal reuses the previous call's table sizes: start small in a fresh instance,
    // then grow the heap, then one table.
    const { encode } = freshSnapshotEncoder(label);
    const base = goldenSnapshot();
    expect(hex(encode(base))).toBe(GOLDEN_HEX);
    const longName: MetadataSnapshot = { ...base, streams: [{ ...base.streams[0]!, name: 'ü'.repeat(5_000) }, base.streams[1]!] };
    expect(hex(encode(longName))).toBe(referenceEncode(longName));
    const stream = base.streams[0]!;
    const manyPartitions: MetadataSnapshot = {
      ...base,
      streams: [
        {
          ...stream,
          topics: [
            {
              ...stream.topics[0]!,
              partitionsCreatedAtUs: columnOf(Array.from({ length: 500 }, (_, index) => index * 1_000_003)),
            },
          ],
        },
      ],
    };
    expect(hex(encode(manyPartitions))).toBe(referenceEncode(manyPartitions));
    expect(hex(encode(base))).toBe(GOLDEN_HEX);
  });

  const invalid: Array<[string, () => MetadataSnapshot, RegExp]> = [
    // Only the current version is written (and read).
    ['version 2', () => ({ ...EMPTY, version: 2 }), /version is 2/],
    ['version 3', () => ({ ...EMPTY, version: 3 }), /version is 3/],
    ['version 6', () => ({ ...EMPTY, version: 6 }), /version is 6/],
    [
      'revoked token ids out of order',
      () => ({ ...EMPTY, revokedTokens: [revoked(2), revoked(1)] }),
      /revokedTokens\[1\]\.jti is not ascending/,
    ],
    ['duplicate revoked token ids', () => ({ ...EMPTY, revokedTokens: [revoked(1), revoked(1)] }), /revokedTokens\[1\]\.jti is not ascending/],
    ['a revoked token id of 15 bytes', () => ({ ...EMPTY, revokedTokens: [{ ...revoked(1), jti: new Uint8Array(15) }] }), /revokedTokens\[0\]\.jti is not 16 bytes/],
    ['a revoked token user id of 2^32', () => ({ ...EMPTY, revokedTokens: [{ ...revoked(1), userId: 2 ** 32 }] }), /revokedToken\.userId/],
    ['a revoked token expiry at 2^53', () => ({ ...EMPTY, revokedTokens: [{ ...revoked(1), expiryAtUs: 2 ** 53 }] }), /revokedToken\.expiryAtUs/],
    ['a fractional timestamp', () => ({ ...EMPTY, createdAtUs: 1.5 }), /createdAtUs 1.5/],
    ['a topic purged at 2^53', () => withTopic({ purgedAtUs: 2 ** 53 }), /topic\.purgedAtUs/],
    ['a u64 number at 2^53', () => ({ ...EMPTY, sequenceNumber: 2 ** 53 }), /sequenceNumber/],
    ['a negative u64 number', () => ({ ...EMPTY, createdAtUs: -1 }), /createdAtUs -1/],
    ['writerRelease of 2^32', () => ({ ...EMPTY, writerRelease: 2 ** 32 }), /writerRelease/],
    ['NaN', () => ({ ...EMPTY, createdAtUs: Number.NaN }), /createdAtUs NaN/],
    [
      'stream ids out of order',
      () => ({ ...EMPTY, streams: [withStreamName('a').streams[0]!, { ...withStreamName('b').streams[0]!, id: 0 }] }),
      /streams\[1\]\.id 0/,
    ],
    [
      'duplicate stream ids',
      () => ({ ...EMPTY, streams: [withStreamName('a').streams[0]!, withStreamName('b').streams[0]!] }),
      /streams\[1\]\.id 1/,
    ],
    ['a u32 id of 2^32', () => ({ ...EMPTY, streams: [{ ...withStreamName('a').streams[0]!, id: 2 ** 32 }] }), /stream\.id/],
    ['replication factor 256', () => withTopic({ replicationFactor: 256 }), /replicationFactor 256/],
    ['compression 3', () => withTopic({ compressionAlgorithm: 3 as 1 }), /compressionAlgorithm 3/],
    ['a negative u64 bigint', () => withTopic({ messageExpiryUs: -1n }), /messageExpiryUs -1/],
    ['a u64 bigint of 2^64', () => withTopic({ maxTopicSizeBytes: 2n ** 64n }), /maxTopicSizeBytes/],
    ['a partition column of 12 bytes', () => withTopic({ partitionsCreatedAtUs: new Uint8Array(12) }), /partitionsCreatedAtUs is 12 bytes/],
    ['a partition createdAtUs of 2^53', () => withTopic({ partitionsCreatedAtUs: u64Column([5n, 2n ** 53n]) }), /partitionsCreatedAtUs\[1\] exceeds 2\^53 - 1/],
    ['a partition createdAtUs of 2^64 - 1', () => withTopic({ partitionsCreatedAtUs: u64Column([U64_MAX]) }), /partitionsCreatedAtUs\[0\] exceeds 2\^53 - 1/],
    ['a partition column that is not bytes', () => withTopic({ partitionsCreatedAtUs: [1, 2] as unknown as Uint8Array }), /partitionsCreatedAtUs is not a Uint8Array/],
    ['a lone surrogate (short)', () => withStreamName('a\ud800b'), /lone surrogate/],
    ['a lone surrogate (long)', () => withStreamName(`${'x'.repeat(60)}\udc00`), /lone surrogate/],
    ['client id 0', () => ({ ...withReply(new Uint8Array(0)), clientTable: [{ ...withReply(new Uint8Array(0)).clientTable[0]!, clientId: 0n }] }), /clientId is 0/],
    [
      'a u128 of 2^128',
      () => ({ ...withReply(new Uint8Array(0)), clientTable: [{ ...withReply(new Uint8Array(0)).clientTable[0]!, watermarkChecksum: 2n ** 128n }] }),
      /watermarkChecksum/,
    ],
    [
      'token names out of order',
      () => ({
        ...EMPTY,
        users: [
          {
            id: 1,
            username: 'u',
            passwordHash: 'h',
            status: 1,
            createdAtUs: 0,
            permissions: null,
            tokens: [
              { name: 'b', tokenHash: new Uint8Array(0), expiryAtUs: null },
              { name: 'a', tokenHash: new Uint8Array(0), expiryAtUs: null },
            ],
          },
        ],
      }),
      /tokens\[1\]\.name/,
    ],
    [
      'user status 3',
      () => ({
        ...EMPTY,
        users: [{ id: 1, username: 'u', passwordHash: 'h', status: 3 as 1, createdAtUs: 0, permissions: null, tokens: [] }],
      }),
      /status 3/,
    ],
  ];

  it.each(invalid)('refuses a non-canonical model: %s', (_label, make, message) => {
    expect(() => encode(make())).toThrow(AssertionError);
    expect(() => encode(make())).toThrow(message);
  });
});

/**
 * decodeSnapshot refuses what it must, with a stable reason and the path of the bad field, and
 * peekSnapshotVersion reads the version without decoding the rest.
 */
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { ColumnBlocks, decodeSnapshot, peekSnapshotVersion, SnapshotDecodeError } from '../../src/format/snapshot-codec.js';
import type { MetadataSnapshot } from '../../src/format/snapshot-model.js';
import { REFERENCE_SNAPSHOT_SMALL, referenceSnapshot } from '../../src/testing/snapshot-fixtures.js';
import { positional } from '../kernels/snapshot-encoders.js';
import { columnCreatedAtUs, columnOf } from '../../src/metadata/partition-store.js';
import { goldenSnapshot } from '../kernels/snapshot-golden.js';

function refusal(bytes: Uint8Array): { reason: string; path: string } {
  try {
    decodeSnapshot(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(SnapshotDecodeError);
    const { reason, path } = error as SnapshotDecodeError;
    return { reason, path };
  }
  throw new Error('decodeSnapshot accepted the bytes');
}

/** The canonical bytes of `snapshot` with the positional form edited first. */
function encodeEdited(snapshot: MetadataSnapshot, edit: (fields: any[]) => void): Uint8Array {
  const fields = positional(snapshot);
  edit(fields);
  return msgpackEncode(fields, { useBigInt64: true });
}

function fromHex(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text.replace(/\s/g, ''), 'hex'));
}

const twoTopics = (): MetadataSnapshot => referenceSnapshot({ streams: 2, topicsPerStream: 2, partitionsPerTopic: 1, users: 2, clients: 2 });

describe('decodeSnapshot', () => {
  it('decodes the reference fixture to the model, bigints and bytes included', () => {
    const snapshot = referenceSnapshot(REFERENCE_SNAPSHOT_SMALL);
    expect(decodeSnapshot(snapshotEncodeTs(snapshot))).toEqual(snapshot);
    expect(decodeSnapshot(snapshotEncodeTs(goldenSnapshot()))).toEqual(goldenSnapshot());
  });

  it('copies byte strings out of the input buffer', () => {
    const bytes = snapshotEncodeTs(goldenSnapshot());
    const decoded = decodeSnapshot(bytes);
    bytes.fill(0);
    expect(decoded.clientTable[0]!.reply).toEqual(goldenSnapshot().clientTable[0]!.reply);
  });

  it('refuses snapshots of earlier versions (no migration): version 1, 2 and 3 files', () => {
    // An empty version-1 snapshot (7 fields) and an empty version-2 one (8 fields, no topic options).
    expect(refusal(fromHex('9701000090909000'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('980200009090900090'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    // A version-3 snapshot with a topic whose partitions are [id, createdAtUs] records: refused on
    // its version with a message naming the versions this build reads, not misread as a column.
    // streams: [[1, "s", 0, [[1, "t", 0, 0, 1, 0, 1, [[0, 5]], [], []]]]]
    const version3 = fromHex('9803 00 00 90 91 9401a17300 91 9a01a174 00 00 01 00 01 91920005 90 90 90 00 90');
    expect(refusal(version3)).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(() => decodeSnapshot(version3)).toThrow(/version 3, this build reads versions 4/);
  });

  it('reads a version-4 snapshot, whose topics have no field 11, as never purged', () => {
    // streams: [[1, "s", 0, [[1, "t", 7, 0, 1, 0, 1, bin(8: partition 0 created at 7), [], []]]]]
    const version4 = fromHex('9804 00 00 90 91 9401a17300 91 9a01a174 07 00 01 00 01 c408 0700000000000000 90 90 90 00 90');
    const decoded = decodeSnapshot(version4);
    expect(decoded.version).toBe(4);
    expect(decoded.streams[0]!.topics[0]!.purgedAtUs).toBe(0);
    expect(columnCreatedAtUs(decoded.streams[0]!.topics[0]!.partitionsCreatedAtUs, 0)).toBe(7);
    // The same topic with an 11th field is a version-4 topic of the wrong shape.
    const withField = fromHex('9804 00 00 90 91 9401a17300 91 9b01a174 07 00 01 00 01 c408 0700000000000000 90 90 09 90 00 90');
    expect(refusal(withField)).toEqual({ reason: 'malformed', path: 'streams[0].topics[0]' });
  });

  it('version 5 needs a topic\'s field 11, a u64 timestamp', () => {
    const version5 = fromHex('9805 00 00 90 91 9401a17300 91 9b01a174 07 00 01 00 01 c408 0700000000000000 90 90 09 90 00 90');
    expect(decodeSnapshot(version5).streams[0]!.topics[0]!.purgedAtUs).toBe(9);
    const without = fromHex('9805 00 00 90 91 9401a17300 91 9a01a174 07 00 01 00 01 c408 0700000000000000 90 90 90 00 90');
    expect(refusal(without)).toEqual({ reason: 'malformed', path: 'streams[0].topics[0]' });
    const float = fromHex('9805 00 00 90 91 9401a17300 91 9b01a174 07 00 01 00 01 c408 0700000000000000 90 90 cb3ff0000000000000 90 00 90');
    expect(refusal(float)).toEqual({ reason: 'malformed', path: 'streams[0].topics[0].purgedAtUs' });
  });

  it('refuses another version as unsupported_version before reading further', () => {
    expect(refusal(fromHex('9706'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('9800'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('9202 c0'))).toEqual({ reason: 'unsupported_version', path: 'version' });
  });

  it('refuses an array with the wrong field count for its version as malformed', () => {
    expect(refusal(fromHex('9604000090909000'.slice(0, 14)))).toEqual({ reason: 'malformed', path: 'snapshot' });
    // Version 4 has 8 fields.
    expect(refusal(fromHex('9704000090909000'))).toEqual({ reason: 'malformed', path: 'snapshot' });
  });

  it('refuses revoked tokens out of order, duplicated or of the wrong size', () => {
    const snapshot = goldenSnapshot();
    const swapped = encodeEdited(snapshot, (fields) => {
      fields[7].reverse();
    });
    expect(refusal(swapped)).toEqual({ reason: 'not_canonical_order', path: 'revokedTokens[1].jti' });
    const duplicate = encodeEdited(snapshot, (fields) => {
      fields[7][1][0] = fields[7][0][0];
    });
    expect(refusal(duplicate)).toEqual({ reason: 'not_canonical_order', path: 'revokedTokens[1].jti' });
    const short = encodeEdited(snapshot, (fields) => {
      fields[7][0][0] = new Uint8Array(15);
    });
    expect(refusal(short)).toEqual({ reason: 'malformed', path: 'revokedTokens[0].jti' });
  });

  it('refuses trailing bytes', () => {
    expect(refusal(fromHex('980400009090900090 00'))).toEqual({ reason: 'trailing_bytes', path: 'snapshot' });
  });

  it('refuses an integer wider than needed as not_canonical_encoding', () => {
    expect(refusal(fromHex('9804 cd0001 00 909090 00 90'))).toEqual({ reason: 'not_canonical_encoding', path: 'createdAtUs' });
    expect(refusal(fromHex('9804 cf00000000ffffffff 00 909090 00 90'))).toEqual({
      reason: 'not_canonical_encoding',
      path: 'createdAtUs',
    });
    expect(refusal(fromHex('9804 00 00 dc0000 9090 00 90'))).toEqual({ reason: 'not_canonical_encoding', path: 'users' });
  });

  it('refuses a float or a signed integer where an unsigned integer belongs', () => {
    expect(refusal(fromHex('9804 cb3ff0000000000000 00 909090 00 90'))).toEqual({ reason: 'malformed', path: 'createdAtUs' });
    expect(refusal(fromHex('9804 d30000000000000001 00 909090 00 90'))).toEqual({
      reason: 'not_canonical_encoding',
      path: 'createdAtUs',
    });
    expect(refusal(fromHex('9804 ff 00 909090 00 90'))).toEqual({ reason: 'out_of_range', path: 'createdAtUs' });
  });

  it('refuses a u64 number field above 2^53 - 1 rather than rounding it', () => {
    expect(refusal(fromHex('9804 cf0020000000000000 00 909090 00 90'))).toEqual({ reason: 'out_of_range', path: 'createdAtUs' });
  });

  it('names the path of a bad field deep in the tree', () => {
    const bytes = encodeEdited(twoTopics(), (fields) => {
      fields[4][1][3][1][1] = 7; // streams[1].topics[1].name
    });
    expect(refusal(bytes)).toEqual({ reason: 'malformed', path: 'streams[1].topics[1].name' });
    const error = (() => {
      try {
        decodeSnapshot(bytes);
      } catch (caught) {
        return caught as Error;
      }
      return null;
    })();
    expect(error?.message).toMatch(/streams\[1\]\.topics\[1\]\.name/);
  });

  it('refuses ids out of order as not_canonical_order', () => {
    const bytes = encodeEdited(twoTopics(), (fields) => {
      fields[4][1][3].reverse(); // streams[1].topics: ids 2, 1
    });
    expect(refusal(bytes)).toEqual({ reason: 'not_canonical_order', path: 'streams[1].topics[1].id' });
    const duplicate = encodeEdited(twoTopics(), (fields) => {
      fields[5][1][0] = fields[5][0][0]; // clientTable[1].slot repeats clientTable[0].slot
    });
    expect(refusal(duplicate)).toEqual({ reason: 'not_canonical_order', path: 'clientTable[1].slot' });
  });

  it('decodes the partition column (values below and above 2^32, up to 2^53 - 1) as one aligned copy', () => {
    const clocks = [0, 1, 4_294_967_295, 4_294_967_296, 1_796_071_487_896_000, Number.MAX_SAFE_INTEGER];
    const base = twoTopics();
    const topic = { ...base.streams[0]!.topics[0]!, partitionsCreatedAtUs: columnOf(clocks), consumerGroups: [] };
    const snapshot: MetadataSnapshot = { ...base, streams: [{ ...base.streams[0]!, topics: [topic] }, ...base.streams.slice(1)] };
    const bytes = snapshotEncodeTs(snapshot);
    const decoded = decodeSnapshot(bytes);
    expect(decoded).toEqual(snapshot);
    const column = decoded.streams[0]!.topics[0]!.partitionsCreatedAtUs;
    // A small column is a piece of a shared block, 8-byte aligned, not a view of the input: a
    // store can view it as u32 words and adopt it.
    expect(column.byteLength).toBe(clocks.length * 8);
    expect(column.byteOffset % 8).toBe(0);
    expect(column.buffer).not.toBe(bytes.buffer);
    expect(column.buffer.byteLength).toBe(ColumnBlocks.BLOCK_BYTES);
    expect(clocks.map((_, index) => columnCreatedAtUs(column, index))).toEqual(clocks);
    bytes.fill(0);
    expect(clocks.map((_, index) => columnCreatedAtUs(column, index))).toEqual(clocks);
  });

  it('small columns share blocks in aligned pieces that never overlap; a large one gets a buffer of its own', () => {
    const base = twoTopics();
    const counts = [3, 0, 1, 128, ColumnBlocks.SHARED_MAX / 8 + 1, 5];
    const topics = counts.map((count, index) => ({
      ...base.streams[0]!.topics[0]!,
      id: index + 1,
      name: `topic-${index}`,
      partitionsCreatedAtUs: columnOf(Array.from({ length: count }, (_, at) => 1_796_071_487_896_000 + index * 1000 + at)),
      consumerGroups: [],
    }));
    const snapshot: MetadataSnapshot = { ...base, streams: [{ ...base.streams[0]!, topics }, ...base.streams.slice(1)] };
    const decoded = decodeSnapshot(snapshotEncodeTs(snapshot));
    expect(decoded).toEqual(snapshot);
    const columns = decoded.streams[0]!.topics.map((topic) => topic.partitionsCreatedAtUs);
    const large = columns[4]!;
    expect([large.byteOffset, large.buffer.byteLength]).toEqual([0, large.byteLength]);
    const shared = columns.filter((column) => column !== large);
    expect(new Set(shared.map((column) => column.buffer)).size).toBe(1);
    const ranges = shared.map((column) => [column.byteOffset, column.byteOffset + column.byteLength] as const).sort((a, b) => a[0] - b[0]);
    for (const [start] of ranges) expect(start % 8).toBe(0);
    for (let index = 1; index < ranges.length; index++) expect(ranges[index]![0]).toBeGreaterThanOrEqual(ranges[index - 1]![1]);
  });

  it('decodes empty and large partition columns (bin8, bin16, bin32 headers)', () => {
    const base = twoTopics();
    for (const count of [0, 31, 32, 8_191, 8_192, 200_000]) {
      const clocks = Array.from({ length: count }, (_, index) => 1_796_071_487_896_000 + index * 7);
      const topic = { ...base.streams[0]!.topics[0]!, partitionsCreatedAtUs: columnOf(clocks), consumerGroups: [] };
      const snapshot: MetadataSnapshot = { ...base, streams: [{ ...base.streams[0]!, topics: [topic] }, ...base.streams.slice(1)] };
      expect(decodeSnapshot(snapshotEncodeTs(snapshot))).toEqual(snapshot);
    }
  });

  it('refuses a bad partition column with its reason and path', () => {
    const clock = 1_796_071_487_896_000;
    const base = twoTopics();
    const withColumn = (column: Uint8Array | unknown[]): any[] => {
      const fields = positional({
        ...base,
        streams: [{ ...base.streams[0]!, topics: [{ ...base.streams[0]!.topics[0]!, consumerGroups: [] }] }, ...base.streams.slice(1)],
      }) as any[];
      fields[4][0][3][0][7] = column;
      return fields;
    };
    const encodeFields = (fields: any[]): Uint8Array => msgpackEncode(fields, { useBigInt64: true });
    const path = 'streams[0].topics[0].partitionsCreatedAtUs';
    // Not whole u64 values.
    expect(refusal(encodeFields(withColumn(new Uint8Array(12))))).toEqual({ reason: 'malformed', path });
    expect(() => decodeSnapshot(encodeFields(withColumn(new Uint8Array(12))))).toThrow(/12 bytes is not a whole number of 8-byte values/);
    // A value above 2^53 - 1 behind good ones: refused with its index, not rounded.
    const tooLarge = new Uint8Array(24);
    const view = new DataView(tooLarge.buffer);
    view.setBigUint64(0, BigInt(clock), true);
    view.setBigUint64(8, BigInt(clock + 1), true);
    view.setBigUint64(16, 2n ** 53n, true);
    expect(refusal(encodeFields(withColumn(tooLarge)))).toEqual({ reason: 'out_of_range', path: `${path}[2]` });
    expect(() => decodeSnapshot(encodeFields(withColumn(tooLarge)))).toThrow(/9007199254740992 exceeds 2\^53 - 1/);
    view.setBigUint64(16, 2n ** 64n - 1n, true);
    expect(refusal(encodeFields(withColumn(tooLarge)))).toEqual({ reason: 'out_of_range', path: `${path}[2]` });
    // 2^53 - 1 itself is fine.
    view.setBigUint64(16, 2n ** 53n - 1n, true);
    expect(decodeSnapshot(encodeFields(withColumn(tooLarge))).streams[0]!.topics[0]!.partitionsCreatedAtUs).toEqual(tooLarge);
    // Version 3's array of records where the column belongs.
    expect(refusal(encodeFields(withColumn([[0, clock]])))).toEqual({ reason: 'malformed', path });
    // A wider bin header than needed (bin16 for 16 bytes).
    const canonical = encodeFields(withColumn(new Uint8Array(16)));
    const at = Buffer.from(canonical).indexOf(Buffer.from(`c410${'00'.repeat(16)}90`, 'hex'));
    expect(at).toBeGreaterThan(0);
    const wide = new Uint8Array(canonical.byteLength + 1);
    wide.set(canonical.subarray(0, at));
    wide.set(fromHex('c50010'), at);
    wide.set(canonical.subarray(at + 2), at + 3);
    expect(refusal(wide)).toEqual({ reason: 'not_canonical_encoding', path });
    // Bytes that end inside the column.
    expect(refusal(canonical.slice(0, at + 2 + 8))).toEqual({ reason: 'truncated', path });
  });

  it('refuses token names out of Array#sort order', () => {
    const snapshot = goldenSnapshot();
    const bytes = encodeEdited(snapshot, (fields) => {
      fields[3][0][6].reverse();
    });
    expect(refusal(bytes)).toEqual({ reason: 'not_canonical_order', path: 'users[0].tokens[1].name' });
  });

  it('refuses values outside their field', () => {
    expect(
      refusal(
        encodeEdited(goldenSnapshot(), (fields) => {
          fields[3][0][3] = 3; // users[0].status
        }),
      ),
    ).toEqual({ reason: 'out_of_range', path: 'users[0].status' });
    expect(
      refusal(
        encodeEdited(goldenSnapshot(), (fields) => {
          fields[4][0][3][0][6] = 256; // replicationFactor is a u8
        }),
      ),
    ).toEqual({ reason: 'out_of_range', path: 'streams[0].topics[0].replicationFactor' });
    expect(
      refusal(
        encodeEdited(goldenSnapshot(), (fields) => {
          fields[5][0][1] = new Uint8Array(16); // client id 0 is reserved
        }),
      ),
    ).toEqual({ reason: 'out_of_range', path: 'clientTable[0].clientId' });
    expect(
      refusal(
        encodeEdited(goldenSnapshot(), (fields) => {
          fields[4][0][0] = 2n ** 32n; // a u32 id
        }),
      ),
    ).toEqual({ reason: 'out_of_range', path: 'streams[0].id' });
  });

  it('refuses a u128 that is not a 16-byte bin', () => {
    const bytes = encodeEdited(goldenSnapshot(), (fields) => {
      fields[5][0][5] = new Uint8Array(15);
    });
    expect(refusal(bytes)).toEqual({ reason: 'malformed', path: 'clientTable[0].watermarkChecksum' });
  });

  it('refuses a record with the wrong number of fields', () => {
    const bytes = encodeEdited(goldenSnapshot(), (fields) => {
      fields[4][0][3][0][8][0].push(0); // a consumer group with 5 fields
    });
    expect(refusal(bytes)).toEqual({ reason: 'malformed', path: 'streams[0].topics[0].consumerGroups[0]' });
  });

  it('decodes topic options and refuses them out of order, outside the catalog or not canonical', () => {
    expect(decodeSnapshot(snapshotEncodeTs(goldenSnapshot())).streams[0]!.topics[0]!.options).toEqual([
      { key: 'compression_algorithm', value: null },
      { key: 'enforce_fsync', value: 'true' },
      { key: 'segment_size', value: '134217728' },
    ]);
    const swapped = encodeEdited(goldenSnapshot(), (fields) => {
      fields[4][0][3][0][9].reverse();
    });
    expect(refusal(swapped)).toEqual({ reason: 'not_canonical_order', path: 'streams[0].topics[0].options[1].key' });
    const unknown = encodeEdited(goldenSnapshot(), (fields) => {
      fields[4][0][3][0][9][2] = ['zz_not_an_option', '1'];
    });
    expect(refusal(unknown)).toEqual({ reason: 'out_of_range', path: 'streams[0].topics[0].options' });
    const notCanonical = encodeEdited(goldenSnapshot(), (fields) => {
      fields[4][0][3][0][9][2] = ['segment_size', '128MiB'];
    });
    expect(refusal(notCanonical)).toEqual({ reason: 'out_of_range', path: 'streams[0].topics[0].options' });
  });

  it('refuses invalid UTF-8, an encoded surrogate included', () => {
    // streams: [[1, <str>, 0, []]]
    expect(refusal(fromHex('9804000090 91 9401 a2c328 00 90 90 00 90'))).toEqual({ reason: 'invalid_utf8', path: 'streams[0].name' });
    expect(refusal(fromHex('9804000090 91 9401 a3eda080 00 90 90 00 90'))).toEqual({ reason: 'invalid_utf8', path: 'streams[0].name' });
  });

  it('keeps a leading byte-order mark', () => {
    const snapshot: MetadataSnapshot = { ...goldenSnapshot(), streams: [{ id: 1, name: '\ufeffx', createdAtUs: 0, topics: [] }] };
    expect(decodeSnapshot(snapshotEncodeTs(snapshot)).streams[0]!.name).toBe('\ufeffx');
  });

  it('refuses a count larger than the bytes left before allocating', () => {
    expect(refusal(fromHex('9804000090 ddffffffff'))).toEqual({ reason: 'truncated', path: 'streams' });
    expect(refusal(fromHex('9804000090 91 9401 dbffffffff'))).toEqual({ reason: 'truncated', path: 'streams[0].name' });
  });

  it('refuses empty input as truncated', () => {
    expect(refusal(new Uint8Array(0))).toEqual({ reason: 'truncated', path: 'snapshot' });
  });
});

describe('peekSnapshotVersion', () => {
  it('reads the version from the array header and first integer', () => {
    expect(peekSnapshotVersion(snapshotEncodeTs(goldenSnapshot()))).toBe(5);
    expect(peekSnapshotVersion(fromHex('9702'))).toBe(2);
    expect(peekSnapshotVersion(fromHex('dc0010 cc80'))).toBe(128);
    expect(peekSnapshotVersion(fromHex('97 ce00010000'))).toBe(65_536);
  });

  it('returns null when there is no array or no integer', () => {
    expect(peekSnapshotVersion(new Uint8Array(0))).toBeNull();
    expect(peekSnapshotVersion(fromHex('90'))).toBeNull();
    expect(peekSnapshotVersion(fromHex('97'))).toBeNull();
    expect(peekSnapshotVersion(fromHex('97 c0'))).toBeNull();
    expect(peekSnapshotVersion(fromHex('82 01 02'))).toBeNull();
    expect(peekSnapshotVersion(fromHex('97 cd00'))).toBeNull();
  });
});

/**
 * decodeSnapshot refuses what it must, with a stable reason and the path of the bad field, and
 * peekSnapshotVersion reads the version without decoding the rest.
 */
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { decodeSnapshot, peekSnapshotVersion, SnapshotDecodeError } from '../../src/metadata/snapshot-codec.js';
import type { MetadataSnapshot } from '../../src/format/snapshot-model.js';
import { REFERENCE_SNAPSHOT_SMALL, referenceSnapshot } from '../../src/testing/snapshot-fixtures.js';
import { positional } from '../kernels/snapshot-encoders.js';
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

  it('refuses snapshots of earlier versions (no migration): version 1 and version 2 files', () => {
    // An empty version-1 snapshot (7 fields) and an empty version-2 one (8 fields, no topic options).
    expect(refusal(fromHex('9701000090909000'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('980200009090900090'))).toEqual({ reason: 'unsupported_version', path: 'version' });
  });

  it('refuses another version as unsupported_version before reading further', () => {
    expect(refusal(fromHex('9704'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('9800'))).toEqual({ reason: 'unsupported_version', path: 'version' });
    expect(refusal(fromHex('9202 c0'))).toEqual({ reason: 'unsupported_version', path: 'version' });
  });

  it('refuses an array with the wrong field count for its version as malformed', () => {
    expect(refusal(fromHex('9603000090909000'.slice(0, 14)))).toEqual({ reason: 'malformed', path: 'snapshot' });
    // Version 3 has 8 fields.
    expect(refusal(fromHex('9703000090909000'))).toEqual({ reason: 'malformed', path: 'snapshot' });
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
    expect(refusal(fromHex('980300009090900090 00'))).toEqual({ reason: 'trailing_bytes', path: 'snapshot' });
  });

  it('refuses an integer wider than needed as not_canonical_encoding', () => {
    expect(refusal(fromHex('9803 cd0001 00 909090 00 90'))).toEqual({ reason: 'not_canonical_encoding', path: 'createdAtUs' });
    expect(refusal(fromHex('9803 cf00000000ffffffff 00 909090 00 90'))).toEqual({
      reason: 'not_canonical_encoding',
      path: 'createdAtUs',
    });
    expect(refusal(fromHex('9803 00 00 dc0000 9090 00 90'))).toEqual({ reason: 'not_canonical_encoding', path: 'users' });
  });

  it('refuses a float or a signed integer where an unsigned integer belongs', () => {
    expect(refusal(fromHex('9803 cb3ff0000000000000 00 909090 00 90'))).toEqual({ reason: 'malformed', path: 'createdAtUs' });
    expect(refusal(fromHex('9803 d30000000000000001 00 909090 00 90'))).toEqual({
      reason: 'not_canonical_encoding',
      path: 'createdAtUs',
    });
    expect(refusal(fromHex('9803 ff 00 909090 00 90'))).toEqual({ reason: 'out_of_range', path: 'createdAtUs' });
  });

  it('refuses a u64 number field above 2^53 - 1 rather than rounding it', () => {
    expect(refusal(fromHex('9803 cf0020000000000000 00 909090 00 90'))).toEqual({ reason: 'out_of_range', path: 'createdAtUs' });
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

  it('decodes partitions of every id width and clock value, frozen as the state machine keeps them', () => {
    // Ids at each msgpack width boundary, clocks below and above 2^32.
    const ids = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 4_294_967_295];
    const clocks = [0, 1, 4_294_967_295, 4_294_967_296, 1_796_071_487_896_000, Number.MAX_SAFE_INTEGER];
    const base = twoTopics();
    const partitions = ids.map((id, index) => ({ id, createdAtUs: clocks[index % clocks.length]! }));
    const topic = { ...base.streams[0]!.topics[0]!, partitions };
    const snapshot: MetadataSnapshot = { ...base, streams: [{ ...base.streams[0]!, topics: [topic] }, ...base.streams.slice(1)] };
    const decoded = decodeSnapshot(snapshotEncodeTs(snapshot));
    expect(decoded).toEqual(snapshot);
    expect(decoded.streams[0]!.topics[0]!.partitions.every((partition) => Object.isFrozen(partition))).toBe(true);
  });

  it('refuses a bad partition behind good ones with its reason and path', () => {
    const clock = 1_796_071_487_896_000;
    const base = twoTopics();
    const partitions = [0, 1, 2].map((id) => ({ id, createdAtUs: clock + id }));
    const withPartitions = (): MetadataSnapshot => ({
      ...base,
      streams: [{ ...base.streams[0]!, topics: [{ ...base.streams[0]!.topics[0]!, partitions }] }, ...base.streams.slice(1)],
    });
    const path = 'streams[0].topics[0].partitions[2]';
    // Ids out of order.
    const outOfOrder = encodeEdited(withPartitions(), (fields) => {
      fields[4][0][3][0][7][2][0] = 1;
    });
    expect(refusal(outOfOrder)).toEqual({ reason: 'not_canonical_order', path: `${path}.id` });
    // A clock wider than needed (uint64 for a value below 2^32) and one above 2^53 - 1.
    const clockAt = (hex: string): Uint8Array => {
      const bytes = snapshotEncodeTs(withPartitions());
      const needle = Buffer.from(`92 02 cf ${(clock + 2).toString(16).padStart(16, '0')}`.replace(/\s/g, ''), 'hex');
      const at = Buffer.from(bytes).indexOf(needle);
      expect(at).toBeGreaterThan(0);
      const replacement = fromHex(`92 02 ${hex}`);
      expect(replacement.byteLength).toBe(needle.byteLength);
      const edited = bytes.slice();
      edited.set(replacement, at);
      return edited;
    };
    expect(refusal(clockAt('cf 00000000 00000005'))).toEqual({ reason: 'not_canonical_encoding', path: `${path}.createdAtUs` });
    expect(refusal(clockAt('cf 00200000 00000000'))).toEqual({ reason: 'out_of_range', path: `${path}.createdAtUs` });
    // A record of the wrong shape.
    const shape = encodeEdited(withPartitions(), (fields) => {
      fields[4][0][3][0][7][2] = [2];
    });
    expect(refusal(shape)).toEqual({ reason: 'malformed', path });
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
      fields[4][0][3][0][7][0].push(0); // a partition with 3 fields
    });
    expect(refusal(bytes)).toEqual({ reason: 'malformed', path: 'streams[0].topics[0].partitions[0]' });
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
    expect(refusal(fromHex('9803000090 91 9401 a2c328 00 90 90 00 90'))).toEqual({ reason: 'invalid_utf8', path: 'streams[0].name' });
    expect(refusal(fromHex('9803000090 91 9401 a3eda080 00 90 90 00 90'))).toEqual({ reason: 'invalid_utf8', path: 'streams[0].name' });
  });

  it('keeps a leading byte-order mark', () => {
    const snapshot: MetadataSnapshot = { ...goldenSnapshot(), streams: [{ id: 1, name: '\ufeffx', createdAtUs: 0, topics: [] }] };
    expect(decodeSnapshot(snapshotEncodeTs(snapshot)).streams[0]!.name).toBe('\ufeffx');
  });

  it('refuses a count larger than the bytes left before allocating', () => {
    expect(refusal(fromHex('9803000090 ddffffffff'))).toEqual({ reason: 'truncated', path: 'streams' });
    expect(refusal(fromHex('9803000090 91 9401 dbffffffff'))).toEqual({ reason: 'truncated', path: 'streams[0].name' });
  });

  it('refuses empty input as truncated', () => {
    expect(refusal(new Uint8Array(0))).toEqual({ reason: 'truncated', path: 'snapshot' });
  });
});

describe('peekSnapshotVersion', () => {
  it('reads the version from the array header and first integer', () => {
    expect(peekSnapshotVersion(snapshotEncodeTs(goldenSnapshot()))).toBe(3);
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

/**
 * The golden snapshot: small, fixed, touching every record kind, nil and present optionals,
 * non-ASCII strings, u64 above 2^32, U64_MAX and u128 extremes. Its bytes are pinned in
 * snapshot-encode.test.ts; they never change without a SNAPSHOT_FORMAT_VERSION bump (and older
 * versions are refused, not migrated).
 */
import { U64_MAX, type MetadataSnapshot } from '../../src/format/snapshot-model.js';
import { columnOf } from '../../src/metadata/partition-store.js';

const U128_MAX = (1n << 128n) - 1n;

function sequence(length: number, start: number): Uint8Array {
  return Uint8Array.from({ length }, (_, index) => (start + index) & 0xff);
}

export function goldenSnapshot(): MetadataSnapshot {
  return {
    version: 5,
    createdAtUs: 1_704_067_200_000_000,
    sequenceNumber: 4242,
    users: [
      {
        id: 0,
        username: 'iggy',
        passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2g',
        status: 1,
        createdAtUs: 1_704_067_200_000_001,
        permissions: {
          global: 0x3ff,
          streams: [{ streamId: 1, bits: 0x3f, topics: [{ topicId: 2, bits: 0x0f }] }],
        },
        tokens: [
          { name: 'ci', tokenHash: sequence(32, 0), expiryAtUs: 1_735_689_600_000_000 },
          { name: 'grafana', tokenHash: sequence(32, 0xab), expiryAtUs: null },
        ],
      },
      {
        id: 7,
        username: 'jürgen',
        passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$cGVwcGVy$c2FsdA',
        status: 2,
        createdAtUs: 200,
        permissions: null,
        tokens: [],
      },
    ],
    streams: [
      {
        id: 1,
        name: 'orders-eu',
        createdAtUs: 1_704_067_200_000_100,
        topics: [
          {
            id: 1,
            name: 'order.created',
            createdAtUs: 1_704_067_200_000_200,
            messageExpiryUs: U64_MAX,
            compressionAlgorithm: 1,
            maxTopicSizeBytes: 10n * 1024n * 1024n * 1024n,
            replicationFactor: 3,
            partitionsCreatedAtUs: columnOf([1_704_067_200_000_201, 1_704_067_200_000_202]),
            consumerGroups: [
              {
                id: 1,
                name: 'billing',
                generation: 3,
                members: [{ id: 1, clientId: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210n, partitions: [0, 1] }],
              },
            ],
            // A typed-field key (nil) and two runtime knobs, ascending.
            options: [
              { key: 'compression_algorithm', value: null },
              { key: 'enforce_fsync', value: 'true' },
              { key: 'segment_size', value: '134217728' },
            ],
            purgedAtUs: 1_704_153_600_000_000,
          },
        ],
      },
      { id: 300, name: 'データ', createdAtUs: 1_704_067_200_000_300, topics: [] },
    ],
    clientTable: [
      {
        slot: 0,
        clientId: 0xfedc_ba98_7654_3210_0123_4567_89ab_cdefn,
        epoch: 17,
        userId: 7,
        watermark: 65_536,
        watermarkChecksum: 0n,
        reply: sequence(8, 0),
      },
      {
        slot: 5,
        clientId: 1n,
        epoch: 2 ** 32,
        userId: 0,
        watermark: 0,
        watermarkChecksum: U128_MAX,
        reply: new Uint8Array(0),
      },
    ],
    writerRelease: 0x0001_0200,
    revokedTokens: [
      { jti: sequence(16, 0x00), userId: 0, expiryAtUs: 1_704_070_800_000_000 },
      { jti: sequence(16, 0x10), userId: 7, expiryAtUs: 1 },
      { jti: new Uint8Array(16).fill(0xff), userId: 0xffff_ffff, expiryAtUs: Number.MAX_SAFE_INTEGER },
    ],
  };
}

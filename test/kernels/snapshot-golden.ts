/**
 * The golden snapshot: small, fixed, touching every record kind, nil and present optionals,
 * non-ASCII strings, u64 above 2^32, U64_MAX and u128 extremes. Its bytes are pinned in
 * snapshot-encode.test.ts, per format version; checkpoints written by any release must stay
 * readable, so they never change without a SNAPSHOT_FORMAT_VERSION bump.
 */
import { U64_MAX, type MetadataSnapshot } from '../../src/metadata/snapshot-model.js';

const U128_MAX = (1n << 128n) - 1n;

/**
 * Version 1 (no revoked tokens), as every checkpoint before version 2 holds it: it must decode
 * forever (snapshot-codec.test.ts), though no encoder writes it any more.
 */
export const GOLDEN_HEX_V1 =
  '9701cf00060dd710212000cd1092929700a469676779d93b246172676f6e3269' +
  '6424763d3139246d3d31393435362c743d322c703d31246332467364484e6862' +
  '48527a59577830246147467a6147686863326701cf00060dd71021200192cd03' +
  'ff9193013f9192020f9293a26369c420000102030405060708090a0b0c0d0e0f' +
  '101112131415161718191a1b1c1d1e1fcf00062a99ba0c600093a76772616661' +
  '6e61c420abacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6' +
  'c7c8c9cac09707a76ac3bc7267656ed92e246172676f6e32696424763d313924' +
  '6d3d31393435362c743d322c703d312463475677634756792463324673644102' +
  'ccc8c090929401a96f72646572732d6575cf00060dd710212064919901ad6f72' +
  '6465722e63726561746564cf00060dd7102120c8cfffffffffffffffff01cf00' +
  '0000028000000003929201cf00060dd7102120c99202cf00060dd7102120ca91' +
  '9401a762696c6c696e6703919301c4100123456789abcdeffedcba9876543210' +
  '92010294cd012ca9e38387e383bce382bfcf00060dd71021212c90929700c410' +
  'fedcba98765432100123456789abcdef1107ce00010000c41000000000000000' +
  '000000000000000000c40800010203040506079705c410000000000000000000' +
  '00000000000001cf00000001000000000000c410ffffffffffffffffffffffff' +
  'ffffffffc400ce00010200';

function sequence(length: number, start: number): Uint8Array {
  return Uint8Array.from({ length }, (_, index) => (start + index) & 0xff);
}

/**
 * The golden snapshot as version 1 wrote it (no revoked tokens): its pinned bytes must decode to
 * this model forever, whatever version the encoders write now.
 */
export function goldenSnapshotV1(): MetadataSnapshot {
  return { ...goldenSnapshot(), version: 1, revokedTokens: [] };
}

export function goldenSnapshot(): MetadataSnapshot {
  return {
    version: 2,
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
            partitions: [
              { id: 1, createdAtUs: 1_704_067_200_000_201 },
              { id: 2, createdAtUs: 1_704_067_200_000_202 },
            ],
            consumerGroups: [
              {
                id: 1,
                name: 'billing',
                generation: 3,
                members: [{ id: 1, clientId: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210n, partitions: [1, 2] }],
              },
            ],
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

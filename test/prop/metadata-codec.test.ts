/**
 * Operation-body codec properties: every request round-trips; decoding arbitrary or mutated bytes
 * never throws, and whatever it accepts re-encodes to exactly the same bytes (one meaning, one
 * encoding, so replicas cannot read one body two ways).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeRequest, encodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation, idOf, nameOf, type Identifier, type MetadataRequest } from '../../src/metadata/operations.js';
import { U64_MAX, type PermissionsSnapshot } from '../../src/format/snapshot-model.js';
import { utf8Size } from '../../src/metadata/validation.js';

const u8 = fc.integer({ min: 0, max: 0xff });
const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const u64 = fc.bigInt({ min: 0n, max: U64_MAX });
const text = (maxBytes: number, minBytes = 0): fc.Arbitrary<string> =>
  fc.string({ unit: 'binary', maxLength: maxBytes }).filter((value) => {
    const size = utf8Size(value);
    return size >= minBytes && size <= maxBytes;
  });
const name = text(255);
const hash = text(256);
const identifier: fc.Arbitrary<Identifier> = fc.oneof(u32.map(idOf), text(255, 1).map(nameOf));

const permissions: fc.Arbitrary<PermissionsSnapshot | null> = fc.option(
  fc.record({
    global: fc.integer({ min: 0, max: 0x3ff }),
    streams: fc
      .uniqueArray(
        fc.record({
          streamId: u32,
          bits: fc.integer({ min: 0, max: 0x3f }),
          topics: fc
            .uniqueArray(fc.record({ topicId: u32, bits: fc.integer({ min: 0, max: 0xf }) }), { selector: (t) => t.topicId, maxLength: 4 })
            .map((topics) => topics.sort((a, b) => a.topicId - b.topicId)),
        }),
        { selector: (s) => s.streamId, maxLength: 4 },
      )
      .map((streams) => streams.sort((a, b) => a.streamId - b.streamId)),
  }),
);

const topicAddress = { streamId: identifier, topicId: identifier };
const request: fc.Arbitrary<MetadataRequest> = fc.oneof(
  fc.record({ operation: fc.constant(Operation.createStream), name }),
  fc.record({ operation: fc.constant(Operation.updateStream), streamId: identifier, name }),
  fc.record({ operation: fc.constantFrom(Operation.deleteStream, Operation.purgeStream), streamId: identifier }),
  fc.record({
    operation: fc.constant(Operation.createTopic),
    streamId: identifier,
    partitionsCount: u32,
    compressionAlgorithm: u8,
    messageExpiryUs: u64,
    maxTopicSizeBytes: u64,
    replicationFactor: u8,
    name,
    // Structure only (the codec does not know the catalog): ascending distinct keys, nil or text.
    options: fc
      .uniqueArray(fc.record({ key: name, value: fc.option(name, { nil: null }) }), { selector: (entry) => entry.key, maxLength: 8 })
      .map((entries) => entries.sort((left, right) => (left.key < right.key ? -1 : 1))),
  }),
  fc.record({
    operation: fc.constant(Operation.updateTopic),
    ...topicAddress,
    name,
    compressionAlgorithm: fc.option(u8),
    messageExpiryUs: fc.option(u64),
    maxTopicSizeBytes: fc.option(u64),
    replicationFactor: fc.option(u8),
  }),
  fc.record({ operation: fc.constantFrom(Operation.deleteTopic, Operation.purgeTopic), ...topicAddress }),
  fc.record({ operation: fc.constantFrom(Operation.createPartitions, Operation.deletePartitions), ...topicAddress, partitionsCount: u32 }),
  fc.record({ operation: fc.constant(Operation.deleteSegments), ...topicAddress, partitionId: u32, segmentsCount: u32 }),
  fc.record({ operation: fc.constant(Operation.createConsumerGroup), ...topicAddress, name }),
  fc.record({
    operation: fc.constantFrom(Operation.deleteConsumerGroup, Operation.joinConsumerGroup, Operation.leaveConsumerGroup),
    ...topicAddress,
    groupId: identifier,
  }),
  fc.record({ operation: fc.constant(Operation.createUser), username: name, passwordHash: hash, status: u8, permissions }),
  fc.record({ operation: fc.constant(Operation.updateUser), userId: identifier, username: fc.option(name), status: fc.option(u8) }),
  fc.record({ operation: fc.constant(Operation.deleteUser), userId: identifier }),
  fc.record({ operation: fc.constant(Operation.changePassword), userId: identifier, currentPasswordHash: hash, newPasswordHash: hash }),
  fc.record({ operation: fc.constant(Operation.updatePermissions), userId: identifier, permissions }),
  fc.record({ operation: fc.constant(Operation.createPersonalAccessToken), name, expiryUs: u64, tokenHash: fc.uint8Array({ minLength: 32, maxLength: 32 }) }),
  fc.record({ operation: fc.constant(Operation.deletePersonalAccessToken), name, ownerUserId: fc.option(u32), onlyIfExpired: fc.boolean() }),
  fc.record({ operation: fc.constant(Operation.revokeAccessToken), jti: fc.uint8Array({ minLength: 16, maxLength: 16 }), expiryAtUs: fc.maxSafeNat() }),
) as fc.Arbitrary<MetadataRequest>;

describe('metadata codec properties', () => {
  it('encode -> decode is the identity, and re-encoding gives the same bytes', () => {
    fc.assert(
      fc.property(request, (value) => {
        const body = encodeRequest(value);
        const decoded = decodeRequest(value.operation, body);
        expect(decoded).toEqual({ ok: true, request: value });
        if (decoded.ok) expect(encodeRequest(decoded.request)).toEqual(body);
      }),
      { numRuns: 2000 },
    );
  });

  it('arbitrary bytes never throw; anything accepted is canonical', () => {
    fc.assert(
      fc.property(fc.integer({ min: 120, max: 155 }), fc.uint8Array({ maxLength: 96 }), (operation, bytes) => {
        const decoded = decodeRequest(operation, bytes);
        if (decoded.ok) expect(encodeRequest(decoded.request)).toEqual(bytes);
        else expect(typeof decoded.reason).toBe('string');
      }),
      { numRuns: 5000 },
    );
  });

  it('mutated valid bodies never throw; anything accepted is canonical', () => {
    fc.assert(
      fc.property(request, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.integer({ min: -2, max: 2 }), (value, at, xor, resize) => {
        const body = encodeRequest(value);
        const mutated = new Uint8Array(Math.max(0, body.byteLength + resize));
        mutated.set(body.subarray(0, mutated.byteLength));
        if (mutated.byteLength > 0) mutated[at % mutated.byteLength]! ^= xor;
        const decoded = decodeRequest(value.operation, mutated);
        if (decoded.ok) expect(encodeRequest(decoded.request)).toEqual(mutated);
      }),
      { numRuns: 3000 },
    );
  });
});

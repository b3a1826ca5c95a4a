/**
 * Operation bodies: documented layouts, strict refusals with a reason, identifiers from paths.
 */
import { describe, expect, it } from 'vitest';
import { decodeRequest, encodeRequest, OPERATION_BODY_SIZE_MAX } from '../../src/metadata/operation-codec.js';
import {
  decodeIdPayload,
  encodeIdPayload,
  idOf,
  isStateMachineOperation,
  nameOf,
  Operation,
  parseIdentifier,
  type MetadataRequest,
} from '../../src/metadata/operations.js';
import { Operation as ProtocolOperation } from '../../src/vsr/header-types.js';
import { U64_MAX } from '../../src/format/snapshot-model.js';
import { fakeHash, req } from './metadata-fixtures.js';

function reason(operation: number, bytes: readonly number[] | Uint8Array): string | null {
  const decoded = decodeRequest(operation, Uint8Array.from(bytes));
  return decoded.ok ? null : decoded.reason;
}

const SAMPLES: readonly MetadataRequest[] = [
  req.createStream('orders'),
  req.updateStream('orders', 'orders-2'),
  req.deleteStream(3),
  req.purgeStream('x'),
  req.createTopic(1, 'events', 12, { compressionAlgorithm: 2, messageExpiryUs: 60_000_000n, maxTopicSizeBytes: U64_MAX, replicationFactor: 3 }),
  req.updateTopic(1, 'events', 'events', { messageExpiryUs: 5n }),
  req.updateTopic(1, 2, 'e2'),
  req.deleteTopic(1, 2),
  req.purgeTopic('s', 't'),
  req.createPartitions(1, 2, 10),
  req.deletePartitions(1, 2, 1),
  req.deleteSegments(1, 2, 3, 4),
  req.createGroup(1, 2, 'group'),
  req.deleteGroup(1, 2, 'group'),
  req.joinGroup(1, 2, 0),
  req.leaveGroup('a', 'b', 'c'),
  req.createUser('alice', { global: 0x3ff, streams: [{ streamId: 1, bits: 0x3f, topics: [{ topicId: 0, bits: 0xf }, { topicId: 9, bits: 1 }] }, { streamId: 4, bits: 0, topics: [] }] }),
  req.createUser('bob', null, fakeHash(1), 2),
  req.updateUser('alice', 'alicia', 2),
  req.updateUser(1, null, null),
  req.deleteUser('bob'),
  req.changePassword(1, fakeHash(1), fakeHash(2)),
  req.updatePermissions('alice', null),
  req.updatePermissions('alice', { global: 1, streams: [] }),
  req.createPat('token', 5, 3_600_000_000n),
  req.deletePat('token'),
  req.deletePat('token', 7, true),
];

describe('operation codec', () => {
  it.each(SAMPLES.map((sample) => [sample.operation, sample] as const))('op %i round-trips', (_operation, sample) => {
    const body = encodeRequest(sample);
    const decoded = decodeRequest(sample.operation, body);
    expect(decoded).toEqual({ ok: true, request: sample });
    if (decoded.ok) expect(encodeRequest(decoded.request)).toEqual(body);
  });

  it('uses the documented layouts', () => {
    expect([...encodeRequest(req.createStream('abc'))]).toEqual([3, 0x61, 0x62, 0x63]);
    expect([...encodeRequest(req.deleteStream(0x01020304))]).toEqual([1, 4, 4, 3, 2, 1]);
    expect([...encodeRequest(req.deleteStream('ab'))]).toEqual([2, 2, 0x61, 0x62]);
    expect([...encodeRequest(req.deletePat('abc', 2, true))]).toEqual([3, 2, 0, 0, 0, 3, 0x61, 0x62, 0x63]);
    expect(encodeRequest(req.createPat('abc')).byteLength).toBe(4 + 8 + 32);
  });

  it('refuses malformed bodies with a reason, never a throw', () => {
    expect(reason(Operation.createStream, [])).toBe('name: truncated');
    expect(reason(Operation.createStream, [1, 0x61, 0])).toBe('1 trailing bytes');
    expect(reason(Operation.createStream, [2, 0xc3, 0x28])).toBe('name: invalid UTF-8');
    expect(reason(Operation.deleteStream, [3, 4, 0, 0, 0, 0])).toBe('stream_id: identifier kind 3');
    expect(reason(Operation.deleteStream, [1, 3, 0, 0, 0])).toBe('stream_id: numeric identifier size 3');
    expect(reason(Operation.deleteStream, [2, 0])).toBe('stream_id: empty identifier');
    const updateTopic = [...encodeRequest(req.updateTopic(0, 0, 't'))];
    expect(reason(Operation.updateTopic, updateTopic.map((byte, index) => (index === 12 ? 0x10 : byte)))).toBe('present: unknown flag bits');
    expect(reason(Operation.updateTopic, updateTopic.map((byte, index) => (index === 13 ? 1 : byte)))).toBe('compression: set while marked absent');
    const withPermissions = [...encodeRequest(req.updatePermissions(0, { global: 0, streams: [] }))];
    expect(reason(Operation.updatePermissions, withPermissions.map((byte, index) => (index === 8 ? 0x04 : byte)))).toBe('permissions.global has unknown bits');
    const unsorted = encodeRequest(req.updatePermissions(0, { global: 0, streams: [{ streamId: 2, bits: 0, topics: [] }, { streamId: 1, bits: 0, topics: [] }] }));
    expect(reason(Operation.updatePermissions, unsorted)).toBe('permissions stream ids are not strictly ascending');
    const longHash = [...encodeRequest(req.changePassword(0, fakeHash(1), fakeHash(2)))];
    longHash[6] = 0x01; // current_password_hash size high byte -> 257+ bytes
    expect(reason(Operation.changePassword, longHash)).toMatch(/PASSWORD_HASH_SIZE_MAX/);
    expect(reason(Operation.createStream, new Uint8Array(OPERATION_BODY_SIZE_MAX + 1))).toBe('body exceeds the frame body size');
    expect(reason(ProtocolOperation.logout, [])).toBe('operation 3 is not a metadata operation');
    const revoke = [...encodeRequest({ operation: Operation.revokeAccessToken, jti: new Uint8Array(16), expiryAtUs: 1 })];
    expect(revoke).toHaveLength(24);
    expect(reason(Operation.revokeAccessToken, revoke.slice(0, 20))).not.toBeNull();
    expect(reason(Operation.revokeAccessToken, [...revoke.slice(0, 16), 0, 0, 0, 0, 0, 0, 0x20, 0])).toBe('expiry_at_us exceeds 2^53 - 1');
  });

  it('only 128..=150 are state-machine operations (150: the revocation vrmeta adds)', () => {
    expect(isStateMachineOperation(Operation.createStream)).toBe(true);
    expect(isStateMachineOperation(Operation.leaveConsumerGroup)).toBe(true);
    expect(isStateMachineOperation(Operation.revokeAccessToken)).toBe(true);
    expect(isStateMachineOperation(151)).toBe(false);
    expect(isStateMachineOperation(ProtocolOperation.register)).toBe(false);
    expect(isStateMachineOperation(Operation.truncatePartition)).toBe(false);
    expect(isStateMachineOperation(Operation.sendMessages)).toBe(false);
  });

  it('encoding refuses text with a lone surrogate instead of committing a replaced name', () => {
    expect(() => encodeRequest(req.createStream('a\ud800'))).toThrow(/well-formed/);
  });
});

describe('identifiers and payloads', () => {
  it('a purely numeric path segment that fits a u32 is an id; anything else a name', () => {
    expect(parseIdentifier('0')).toEqual(idOf(0));
    expect(parseIdentifier('4294967295')).toEqual(idOf(4_294_967_295));
    expect(parseIdentifier('4294967296')).toEqual(nameOf('4294967296'));
    expect(parseIdentifier('12a')).toEqual(nameOf('12a'));
    expect(parseIdentifier('-1')).toEqual(nameOf('-1'));
    expect(parseIdentifier('')).toBeNull();
  });

  it('created ids travel as a u32 LE payload', () => {
    expect([...encodeIdPayload(0x01020304)]).toEqual([4, 3, 2, 1]);
    expect(decodeIdPayload(encodeIdPayload(77))).toBe(77);
    expect(decodeIdPayload(new Uint8Array(0))).toBeNull();
  });
});

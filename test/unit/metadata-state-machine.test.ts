/**
 * The metadata state machine: operations, id reuse, lookups, consumer-group assignment, client
 * removal, snapshot/restore and determinism.
 */
import { describe, expect, it } from 'vitest';
import { loadKernels, type Kernels } from '../../src/kernels/index.js';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import { columnDecoded } from '../../src/format/partition-column.js';
import { ErrorCode } from '../../src/metadata/errors.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { createdIdOf } from '../../src/metadata/create-replies.js';
import { idOf, nameOf, Operation } from '../../src/metadata/operations.js';
import { Operation as ProtocolOperation } from '../../src/vsr/header-types.js';
import { MetadataStateMachine, ROOT_CREATED_AT_US } from '../../src/metadata/state-machine.js';
import { GENESIS_PASSWORD_MARKER, isArgon2idPhc } from '../../src/metadata/validation.js';
import { CompressionAlgorithm, GlobalPermission, U64_MAX, type StreamSnapshot, type TopicSnapshot, type UserSnapshot } from '../../src/format/snapshot-model.js';
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { Driver, ROOT, ROOT_HASH, fakeHash, fullSnapshot, newMachine, req, tokenHash } from './metadata-fixtures.js';

/** The TS kernels always; the WASM ones when the build is present (npm install builds them). */
function availableKernels(): Kernels[] {
  const out = [loadKernels('ts')];
  try {
    out.push(loadKernels('wasm'));
  } catch {
    // No WASM build in this checkout: the TS kernels are the reference either way.
  }
  return out;
}

describe('metadata state machine: genesis', () => {
  it('starts with the root user at id 0, active, all global permissions, created at a fixed time', () => {
    const sm = newMachine();
    const snapshot = sm.snapshot();
    expect(snapshot.streams).toEqual([]);
    expect(snapshot.users).toEqual([
      {
        id: 0,
        username: 'iggy',
        passwordHash: GENESIS_PASSWORD_MARKER,
        status: 1,
        createdAtUs: ROOT_CREATED_AT_US,
        permissions: { global: 0x3ff, streams: [] },
        tokens: [],
      },
    ]);
  });

  it("root's created_at is the first committed metadata op's timestamp, set once, kept by snapshot and restore", () => {
    const driver = new Driver();
    const rootCreatedAt = () => driver.sm.queries.user(idOf(0))!.createdAtUs;
    // A precheck proposes nothing: it must not stamp.
    expect(driver.sm.precheck(ROOT, Operation.createStream, encodeRequest(req.createStream('s')), { timestampUs: 5 })).toBe(ErrorCode.ok);
    expect(rootCreatedAt()).toBe(ROOT_CREATED_AT_US);
    // An undecodable body is rejected before any state is read: no stamp either.
    expect(driver.raw(ROOT, Operation.createStream, new Uint8Array(0)).errorCode).toBe(ErrorCode.invalidCommand);
    expect(rootCreatedAt()).toBe(ROOT_CREATED_AT_US);
    // The first decodable op stamps, even when it commits as a rejection.
    expect(driver.code(ROOT, req.deleteStream('missing'))).toBe(ErrorCode.streamIdNotFound);
    const first = driver.timestampUs;
    expect(rootCreatedAt()).toBe(first);
    driver.created(ROOT, req.createStream('s'));
    expect(rootCreatedAt()).toBe(first);
    // Every replica that applies the same ops (or restores the snapshot) derives the same bytes.
    const replay = new Driver();
    replay.timestampUs = first - 1_000_000;
    replay.code(ROOT, req.deleteStream('missing'));
    replay.created(ROOT, req.createStream('s'));
    expect(replay.sm.snapshot()).toEqual(driver.sm.snapshot());
    const restored = newMachine();
    restored.restore(driver.sm.snapshot());
    expect(restored.queries.user(idOf(0))!.createdAtUs).toBe(first);
  });

  it('two replicas built from the same genesis have byte-identical snapshots', () => {
    const left = snapshotEncodeTs(fullSnapshot(newMachine().snapshot()));
    const right = snapshotEncodeTs(fullSnapshot(newMachine().snapshot()));
    expect(left).toEqual(right);
  });

  it('refuses a genesis whose root hash is neither the marker nor an Argon2id PHC string', () => {
    expect(() => newMachineWith('iggy', 'iggy')).toThrow(/Argon2id/);
    expect(() => newMachineWith('ig', ROOT_HASH)).toThrow(/root username/);
    expect(newMachineWith('iggy', ROOT_HASH).passwordHashOf(idOf(ROOT))).toBe(ROOT_HASH);
  });
});

describe('metadata state machine: retries of committed requests', () => {
  it('a retried CreatePersonalAccessToken is denied PersonalAccessTokenAlreadyExists; every other retry replays', () => {
    // The raw token never entered the log, so its cached reply cannot be replayed (the replica
    // asks the state machine, it names no metadata operation itself).
    const machine = newMachine();
    expect(machine.duplicateDenyCode(Operation.createPersonalAccessToken)).toBe(ErrorCode.personalAccessTokenAlreadyExists);
    for (const operation of [Operation.createStream, Operation.createUser, Operation.deletePersonalAccessToken, Operation.revokeAccessToken]) {
      expect(machine.duplicateDenyCode(operation)).toBe(0);
    }
    expect(machine.duplicateDenyCode(ProtocolOperation.register)).toBe(0);
  });
});

/** A revoked-token record of root whose id is 16 bytes of `fill`, expiring far ahead. */
function revoked(fill: number) {
  return { jti: new Uint8Array(16).fill(fill), userId: 0, expiryAtUs: 4_000_000_000_000_000 };
}

function newMachineWith(rootUsername: string, rootPasswordHash: string): MetadataStateMachine {
  return new MetadataStateMachine({ rootUsername, rootPasswordHash });
}

describe('metadata state machine: streams and topics', () => {
  it('creates a stream at id 0 and replies with the id', () => {
    const driver = new Driver();
    const result = driver.apply(ROOT, req.createStream('orders'));
    expect(result.errorCode).toBe(0);
    expect(createdIdOf(result.payload)).toBe(0);
    expect(driver.sm.queries.streams()).toEqual([
      { id: 0, name: 'orders', createdAtUs: driver.timestampUs, topicsCount: 0, sizeBytes: 0, messagesCount: 0 },
    ]);
  });

  it('reuses the lowest free id after deletes, in any delete order', () => {
    const driver = new Driver();
    for (const name of ['a', 'b', 'c', 'd']) driver.created(ROOT, req.createStream(name));
    expect(driver.code(ROOT, req.deleteStream(2))).toBe(0);
    expect(driver.code(ROOT, req.deleteStream(0))).toBe(0);
    expect(driver.created(ROOT, req.createStream('e'))).toBe(0);
    expect(driver.created(ROOT, req.createStream('f'))).toBe(2);
    expect(driver.created(ROOT, req.createStream('g'))).toBe(4);
  });

  it('resolves streams and topics by id or by name; a numeric path segment is an id', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('123'));
    driver.created(ROOT, req.createStream('s1'));
    driver.created(ROOT, req.createTopic('s1', 't1', 3));
    expect(driver.sm.queries.topic(nameOf('s1'), nameOf('t1'))?.partitionsCount).toBe(3);
    expect(driver.sm.queries.topic(idOf(1), idOf(0))?.name).toBe('t1');
    expect(driver.sm.queries.stream(nameOf('123'))?.id).toBe(0);
    expect(driver.code(ROOT, req.createTopic('s1', 't1'))).toBe(ErrorCode.topicNameAlreadyExists);
    expect(driver.code(ROOT, req.createTopic('missing', 't1'))).toBe(ErrorCode.streamIdNotFound);
  });

  it('topics have per-stream ids and names; partitions are dense and listed with zero counters and one empty segment', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('a'));
    driver.created(ROOT, req.createStream('b'));
    expect(driver.created(ROOT, req.createTopic(0, 't', 2))).toBe(0);
    expect(driver.created(ROOT, req.createTopic(1, 't', 0))).toBe(0);
    const topic = driver.sm.queries.topic(idOf(0), idOf(0));
    expect(topic?.partitions).toEqual([
      { id: 0, createdAtUs: driver.timestampUs - 1_000_000, segmentsCount: 1, currentOffset: 0, sizeBytes: 0, messagesCount: 0 },
      { id: 1, createdAtUs: driver.timestampUs - 1_000_000, segmentsCount: 1, currentOffset: 0, sizeBytes: 0, messagesCount: 0 },
    ]);
  });

  it('updates a topic: rename, and only the settings that are present', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    driver.created(ROOT, req.createTopic('s', 't', 1, { messageExpiryUs: 5_000_000n, compressionAlgorithm: CompressionAlgorithm.gzip }));
    expect(driver.code(ROOT, req.updateTopic('s', 't', 'u', { maxTopicSizeBytes: 2n * 1024n ** 3n }))).toBe(0);
    const topic = driver.sm.queries.topic(nameOf('s'), nameOf('u'));
    expect(topic).toMatchObject({ name: 'u', messageExpiryUs: 5_000_000n, compressionAlgorithm: 2, maxTopicSizeBytes: 2n * 1024n ** 3n });
    expect(driver.sm.queries.topic(nameOf('s'), nameOf('t'))).toBeNull();
  });

  it('creates and deletes partitions at the top; deleting more than exist is refused', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    driver.created(ROOT, req.createTopic('s', 't', 2));
    expect(driver.code(ROOT, req.createPartitions('s', 't', 3))).toBe(0);
    expect(driver.sm.queries.topic(nameOf('s'), nameOf('t'))?.partitions.map((p) => p.id)).toEqual([0, 1, 2, 3, 4]);
    expect(driver.code(ROOT, req.deletePartitions('s', 't', 2))).toBe(0);
    expect(driver.sm.queries.topic(nameOf('s'), nameOf('t'))?.partitions.map((p) => p.id)).toEqual([0, 1, 2]);
    expect(driver.code(ROOT, req.deletePartitions('s', 't', 4))).toBe(ErrorCode.invalidPartitionsCount);
    expect(driver.code(ROOT, req.deleteSegments('s', 't', 2))).toBe(0);
    expect(driver.code(ROOT, req.deleteSegments('s', 't', 3))).toBe(ErrorCode.partitionNotFound);
  });

  it('a rejected operation is a committed no-op: the snapshot does not change', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    const before = driver.sm.snapshot();
    expect(driver.code(ROOT, req.createStream('s'))).toBe(ErrorCode.streamNameAlreadyExists);
    expect(driver.code(ROOT, req.deleteStream(9))).toBe(ErrorCode.streamIdNotFound);
    expect(driver.raw(ROOT, Operation.createStream, new Uint8Array([1, 0x61, 0])).errorCode).toBe(ErrorCode.invalidCommand);
    expect(driver.raw(ROOT, ProtocolOperation.logout, new Uint8Array()).errorCode).toBe(ErrorCode.invalidCommand);
    expect(driver.sm.snapshot()).toEqual(before);
  });

  it('an unknown acting user (deleted since login) is unauthenticated', () => {
    const driver = new Driver();
    expect(driver.code(7, req.createStream('s'))).toBe(ErrorCode.unauthenticated);
  });

  it('deleting a stream drops grants on it, so a reused id does not inherit them', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s0'));
    driver.created(ROOT, req.createTopic('s0', 't', 1));
    const alice = driver.created(ROOT, req.createUser('alice', { global: 0, streams: [{ streamId: 0, bits: 1, topics: [{ topicId: 0, bits: 1 }] }] }));
    expect(driver.code(alice, req.deleteTopic('s0', 't'))).toBe(0);
    expect(driver.sm.queries.user(idOf(alice))?.permissions).toEqual({ global: 0, streams: [{ streamId: 0, bits: 1, topics: [] }] });
    expect(driver.code(alice, req.deleteStream('s0'))).toBe(0);
    expect(driver.sm.queries.user(idOf(alice))?.permissions).toEqual({ global: 0, streams: [] });
    driver.created(ROOT, req.createStream('someone-elses'));
    expect(driver.code(alice, req.deleteStream(0))).toBe(ErrorCode.unauthorized);
  });
});

describe('metadata state machine: consumer groups', () => {
  function withGroup(partitions: number): Driver {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    driver.created(ROOT, req.createTopic('s', 't', partitions));
    driver.created(ROOT, req.createGroup('s', 't', 'g'));
    return driver;
  }

  function members(driver: Driver): { id: number; clientId: bigint; partitions: readonly number[] }[] {
    return (driver.sm.queries.consumerGroup(nameOf('s'), nameOf('t'), nameOf('g'))?.members ?? []).map((m) => ({
      id: m.id,
      clientId: m.clientId,
      partitions: m.partitions,
    }));
  }

  it('assigns partitions round robin by member order and bumps the generation per change', () => {
    const driver = withGroup(5);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 10n)).toBe(0);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 20n)).toBe(0);
    expect(members(driver)).toEqual([
      { id: 0, clientId: 10n, partitions: [0, 2, 4] },
      { id: 1, clientId: 20n, partitions: [1, 3] },
    ]);
    expect(driver.sm.queries.consumerGroup(nameOf('s'), nameOf('t'), nameOf('g'))?.generation).toBe(2);
    // Re-join is idempotent: same membership, same generation.
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 20n)).toBe(0);
    expect(driver.sm.queries.consumerGroup(nameOf('s'), nameOf('t'), nameOf('g'))?.generation).toBe(2);
    expect(driver.code(ROOT, req.leaveGroup('s', 't', 'g'), 10n)).toBe(0);
    expect(members(driver)).toEqual([{ id: 1, clientId: 20n, partitions: [0, 1, 2, 3, 4] }]);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 30n)).toBe(0);
    expect(members(driver)).toEqual([
      { id: 0, clientId: 30n, partitions: [0, 2, 4] },
      { id: 1, clientId: 20n, partitions: [1, 3] },
    ]);
    expect(driver.code(ROOT, req.leaveGroup('s', 't', 'g'), 99n)).toBe(ErrorCode.consumerGroupMemberNotFound);
  });

  it('repartitioning reassigns every group', () => {
    const driver = withGroup(2);
    driver.code(ROOT, req.joinGroup('s', 't', 'g'), 1n);
    driver.code(ROOT, req.joinGroup('s', 't', 'g'), 2n);
    expect(driver.code(ROOT, req.createPartitions('s', 't', 2))).toBe(0);
    expect(members(driver).map((m) => m.partitions)).toEqual([
      [0, 2],
      [1, 3],
    ]);
    expect(driver.code(ROOT, req.deletePartitions('s', 't', 3))).toBe(0);
    expect(members(driver).map((m) => m.partitions)).toEqual([[0], []]);
  });

  it('onClientRemoved removes the client from every group and rebalances deterministically', () => {
    const driver = withGroup(3);
    driver.created(ROOT, req.createGroup('s', 't', 'h'));
    driver.code(ROOT, req.joinGroup('s', 't', 'g'), 1n);
    driver.code(ROOT, req.joinGroup('s', 't', 'g'), 2n);
    driver.code(ROOT, req.joinGroup('s', 't', 'h'), 1n);
    expect(driver.sm.consumerGroupsOfClient(1n)).toEqual([
      { streamId: 0, topicId: 0, groupId: 0 },
      { streamId: 0, topicId: 0, groupId: 1 },
    ]);
    driver.sm.onClientRemoved(1n, driver.timestampUs + 1);
    expect(driver.sm.consumerGroupsOfClient(1n)).toEqual([]);
    expect(members(driver)).toEqual([{ id: 1, clientId: 2n, partitions: [0, 1, 2] }]);
    expect(driver.sm.queries.consumerGroup(nameOf('s'), nameOf('t'), nameOf('h'))?.membersCount).toBe(0);
  });

  it('join from the reserved client id 0 is refused', () => {
    const driver = withGroup(1);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 0n)).toBe(ErrorCode.invalidClientId);
  });
});

describe('metadata state machine: users and tokens', () => {
  it('creates users from id 1, looks them up by id or name, deletes and reuses ids', () => {
    const driver = new Driver();
    expect(driver.created(ROOT, req.createUser('alice'))).toBe(1);
    expect(driver.created(ROOT, req.createUser('bob'))).toBe(2);
    expect(driver.sm.queries.user(nameOf('bob'))?.id).toBe(2);
    const deleted = driver.apply(ROOT, req.deleteUser('alice'));
    expect(deleted.errorCode).toBe(0);
    expect(deleted.payload.byteLength).toBe(0);
    expect(driver.created(ROOT, req.createUser('carol'))).toBe(1);
    expect(driver.sm.credentials('carol')).toMatchObject({ id: 1, status: 1 });
  });

  it('personal access tokens: listed by name, found by hash, deleted by name', () => {
    const driver = new Driver();
    const alice = driver.created(ROOT, req.createUser('alice'));
    expect(driver.code(alice, req.createPat('zeta', 1))).toBe(0);
    expect(driver.code(alice, req.createPat('alpha', 2, 60_000_000n))).toBe(0);
    expect(driver.sm.queries.personalAccessTokens(alice)).toEqual([
      { name: 'alpha', expiryAtUs: driver.timestampUs + 60_000_000 },
      { name: 'zeta', expiryAtUs: null },
    ]);
    expect(driver.sm.personalAccessTokenByHash(tokenHash(2))).toEqual({ userId: alice, name: 'alpha', expiryAtUs: driver.timestampUs + 60_000_000 });
    expect(driver.code(alice, req.deletePat('alpha'))).toBe(0);
    expect(driver.sm.personalAccessTokenByHash(tokenHash(2))).toBeNull();
    expect(driver.code(alice, req.deletePat('alpha'))).toBe(ErrorCode.resourceNotFound);
    // Deleting the user drops the token index entries with the tokens.
    driver.code(ROOT, req.deleteUser(alice));
    expect(driver.sm.personalAccessTokenByHash(tokenHash(1))).toBeNull();
  });

  it('only-if-expired deletes (the cleaner) skip live tokens and only root may target others', () => {
    const driver = new Driver();
    const alice = driver.created(ROOT, req.createUser('alice'));
    driver.code(alice, req.createPat('short', 1, 3_500_000n));
    driver.code(alice, req.createPat('forever', 2));
    expect(driver.code(alice, req.deletePat('short', ROOT))).toBe(ErrorCode.unauthorized);
    // Ops are 1 s apart: the token (3.5 s) is live at the third op after it and expired at the fourth.
    expect(driver.code(ROOT, req.deletePat('short', alice, true))).toBe(0);
    expect(driver.sm.queries.personalAccessTokens(alice)?.map((t) => t.name)).toEqual(['forever', 'short']);
    expect(driver.code(ROOT, req.deletePat('short', alice, true))).toBe(0);
    expect(driver.code(ROOT, req.deletePat('forever', alice, true))).toBe(0);
    expect(driver.code(ROOT, req.deletePat('gone', alice, true))).toBe(0);
    expect(driver.sm.queries.personalAccessTokens(alice)?.map((t) => t.name)).toEqual(['forever']);
  });

  it('change password: self-service needs the current stored hash; another user needs manage_users', () => {
    const driver = new Driver();
    const alice = driver.created(ROOT, req.createUser('alice', null, fakeHash(100)));
    const bob = driver.created(ROOT, req.createUser('bob', null, fakeHash(200)));
    expect(driver.code(alice, req.changePassword(alice, fakeHash(100), fakeHash(101)))).toBe(0);
    expect(driver.sm.passwordHashOf(idOf(alice))).toBe(fakeHash(101));
    expect(driver.code(alice, req.changePassword(alice, fakeHash(100), fakeHash(102)))).toBe(ErrorCode.invalidCredentials);
    expect(driver.code(alice, req.changePassword(bob, fakeHash(200), fakeHash(201)))).toBe(ErrorCode.unauthorized);
    expect(driver.code(ROOT, req.changePassword(bob, fakeHash(200), fakeHash(201)))).toBe(0);
  });

  it('the genesis marker is accepted only as the current hash of a ChangePassword, never stored by an op', () => {
    const driver = new Driver();
    const marker = GENESIS_PASSWORD_MARKER;
    expect(driver.code(ROOT, req.createUser('alice', null, marker))).toBe(ErrorCode.invalidPassword);
    expect(driver.sm.credentials('alice')).toBeNull();
    expect(driver.code(ROOT, req.changePassword(ROOT, marker, marker))).toBe(ErrorCode.invalidPassword);
    expect(driver.code(ROOT, req.changePassword(ROOT, fakeHash(1), fakeHash(2)))).toBe(ErrorCode.invalidCredentials);
    const bob = driver.created(ROOT, req.createUser('bob', null, fakeHash(200)));
    // Only root's stored hash can be the marker: naming it as bob's current one proves nothing.
    expect(driver.code(ROOT, req.changePassword(bob, marker, fakeHash(201)))).toBe(ErrorCode.invalidCredentials);
    expect(driver.sm.passwordHashOf(idOf(ROOT))).toBe(marker);
    expect(driver.code(ROOT, req.changePassword(ROOT, marker, fakeHash(3)))).toBe(0);
    expect(driver.sm.passwordHashOf(idOf(ROOT))).toBe(fakeHash(3));
    expect(isArgon2idPhc(driver.sm.passwordHashOf(idOf(ROOT))!)).toBe(true);
    // Changed once: the marker is no longer root's stored hash either.
    expect(driver.code(ROOT, req.changePassword(ROOT, marker, fakeHash(4)))).toBe(ErrorCode.invalidCredentials);
  });
});

describe('metadata state machine: snapshot and restore', () => {
  function populated(): Driver {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s0'));
    driver.created(ROOT, req.createStream('s1'));
    driver.created(ROOT, req.createStream('s2'));
    driver.code(ROOT, req.deleteStream(1));
    driver.created(ROOT, req.createTopic('s0', 't0', 3, { messageExpiryUs: 7n, maxTopicSizeBytes: 5n * 1024n ** 3n }));
    driver.created(ROOT, req.createTopic('s0', 't1', 0));
    driver.created(ROOT, req.createGroup('s0', 't0', 'g'));
    driver.code(ROOT, req.joinGroup('s0', 't0', 'g'), 5n);
    driver.code(ROOT, req.joinGroup('s0', 't0', 'g'), (1n << 127n) + 3n);
    const alice = driver.created(ROOT, req.createUser('alice', { global: GlobalPermission.readStreams, streams: [{ streamId: 2, bits: 3, topics: [] }] }));
    driver.code(alice, req.createPat('b-token', 1, 10n));
    driver.code(alice, req.createPat('a-token', 2));
    return driver;
  }

  it('snapshot -> restore -> snapshot is the identity, and restored ids keep allocating the same way', () => {
    const original = populated();
    const snapshot = original.sm.snapshot();
    const copy = new Driver(newMachine());
    copy.sm.restore(snapshot);
    expect(copy.sm.snapshot()).toEqual(snapshot);
    copy.op = original.op;
    copy.timestampUs = original.timestampUs;
    for (const request of [req.createStream('new'), req.createTopic('s0', 'new'), req.createUser('dave'), req.createGroup('s0', 't0', 'h')]) {
      expect(copy.apply(ROOT, request)).toEqual(original.apply(ROOT, request));
    }
    expect(copy.sm.snapshot()).toEqual(original.sm.snapshot());
  });

  it('snapshot -> encode -> decode -> restore -> snapshot is the identity', () => {
    const original = populated();
    const snapshot = original.sm.snapshot();
    const bytes = snapshotEncodeTs(fullSnapshot(snapshot, original.op));
    const decoded = decodeSnapshot(bytes);
    const copy = newMachine();
    copy.restore({ users: decoded.users, streams: decoded.streams, revokedTokens: decoded.revokedTokens });
    expect(copy.snapshot()).toEqual(snapshot);
    expect(snapshotEncodeTs(fullSnapshot(copy.snapshot(), original.op))).toEqual(bytes);
  });

  it('a restore checks each partition column once: a decoded column is trusted, one built in memory is checked', () => {
    const original = populated();
    const decoded = decodeSnapshot(snapshotEncodeTs(fullSnapshot(original.sm.snapshot(), original.op)));
    const column = decoded.streams[0]!.topics[0]!.partitionsCreatedAtUs;
    expect(columnDecoded(column)).toBe(true);
    // Nothing writes a decoded column; this one is written only to observe that the restore does
    // not walk it a second time (the decoder's check is the one pass).
    column[7] = 0xff;
    const copy = newMachine();
    const model = { users: decoded.users, streams: decoded.streams, revokedTokens: decoded.revokedTokens };
    expect(copy.checkSnapshot(model)).toBeNull();
    // The same bytes in a column the decoder never saw are refused by the restore's own check.
    const built = structuredClone(model);
    expect(columnDecoded(built.streams[0]!.topics[0]!.partitionsCreatedAtUs)).toBe(false);
    expect(copy.checkSnapshot(built)).toMatch(/partition createdAtUs exceeds 2\^53 - 1/);
  });

  it('both kernel modes encode the state machine snapshot to the same bytes', () => {
    const snapshot = fullSnapshot(populated().sm.snapshot());
    const expected = snapshotEncodeTs(snapshot);
    for (const kernels of availableKernels()) expect(kernels.snapshotEncode(snapshot)).toEqual(expected);
  });

  it('snapshot -> encode is byte-identical across two replicas applying the same ops', () => {
    const left = snapshotEncodeTs(fullSnapshot(populated().sm.snapshot()));
    const right = snapshotEncodeTs(fullSnapshot(populated().sm.snapshot()));
    expect(left).toEqual(right);
  });

  it('the snapshot is a copy: later applies do not change an earlier snapshot', () => {
    const driver = populated();
    const snapshot = driver.sm.snapshot();
    const frozen = structuredClone(snapshot);
    driver.code(ROOT, req.createPartitions('s0', 't0', 2));
    driver.code(ROOT, req.joinGroup('s0', 't0', 'g'), 77n);
    driver.code(ROOT, req.deleteUser('alice'));
    expect(snapshot).toEqual(frozen);
  });

  it('checkSnapshot names the first violated invariant instead of half-installing', () => {
    const driver = populated();
    const good = driver.sm.snapshot();
    expect(driver.sm.checkSnapshot(good)).toBeNull();
    const [root, alice] = good.users as [UserSnapshot, UserSnapshot];
    const [s0] = good.streams as [StreamSnapshot];
    const [t0] = s0.topics as [TopicSnapshot];
    const cases: [MetadataMachineSnapshot, RegExp][] = [
      [{ users: [alice], streams: [], revokedTokens: [] }, /root/],
      [{ users: [root, { ...alice, username: 'iggy' }], streams: [], revokedTokens: [] }, /username iggy is not unique/],
      [{ users: [alice, root], streams: [], revokedTokens: [] }, /user ids are not strictly ascending/],
      [{ users: good.users, streams: [s0, { ...s0, id: 5 }], revokedTokens: [] }, /stream name s0 is not unique/],
      [{ users: good.users, streams: [{ ...s0, topics: [{ ...t0, partitionsCreatedAtUs: t0.partitionsCreatedAtUs.subarray(1) }] }], revokedTokens: [] }, /partition column is not whole u64 values/],
      [{ users: good.users, streams: [{ ...s0, topics: [{ ...t0, partitionsCreatedAtUs: new Uint8Array(8).fill(0xff) }] }], revokedTokens: [] }, /partition createdAtUs exceeds 2\^53 - 1/],
      [{ users: good.users, streams: [{ ...s0, topics: [{ ...t0, partitionsCreatedAtUs: new Uint8Array(0) }] }], revokedTokens: [] }, /assigns a partition the topic lacks/],
      [{ users: [root, { ...alice, tokens: [{ name: 'x', tokenHash: new Uint8Array(3), expiryAtUs: null }] }], streams: [], revokedTokens: [] }, /SHA-256/],
      [{ ...good, revokedTokens: [revoked(2), revoked(1)] }, /revoked token ids are not strictly ascending/],
      [{ ...good, revokedTokens: [{ ...revoked(1), jti: new Uint8Array(15) }] }, /revoked token id is not 16 bytes/],
    ];
    for (const [snapshot, reason] of cases) expect(driver.sm.checkSnapshot(snapshot)).toMatch(reason);
    expect(newMachine({ streamsMax: 2 }).checkSnapshot(good)).toMatch(/not below the limit 2/);
    const twoRevoked = { ...good, revokedTokens: [revoked(1), revoked(2)] };
    expect(driver.sm.checkSnapshot(twoRevoked)).toBeNull();
    expect(newMachine({ revokedTokensMax: 1 }).checkSnapshot(twoRevoked)).toMatch(/more revoked tokens than the limit/);
    expect(newMachine({ revokedTokensPerUserMax: 1 }).checkSnapshot(twoRevoked)).toMatch(/user 0 has more revoked tokens/);
  });

  it('restore refuses a snapshot without the root user and keeps the old state', () => {
    const driver = populated();
    const before = driver.sm.snapshot();
    expect(() => driver.sm.restore({ users: before.users.slice(1), streams: [], revokedTokens: [] })).toThrow(/root/);
    expect(driver.sm.snapshot()).toEqual(before);
  });
});

describe('metadata state machine: precheck', () => {
  it('agrees with apply and never mutates', () => {
    const driver = new Driver();
    const alice = driver.created(ROOT, req.createUser('alice'));
    const before = driver.sm.snapshot();
    const body = encodeRequest(req.createStream('s'));
    expect(driver.sm.precheck(alice, Operation.createStream, body)).toBe(ErrorCode.unauthorized);
    expect(driver.sm.precheck(ROOT, Operation.createStream, body)).toBe(0);
    expect(driver.sm.precheck(ROOT, Operation.createStream, new Uint8Array([9]))).toBe(ErrorCode.invalidCommand);
    expect(driver.sm.snapshot()).toEqual(before);
    expect(driver.code(ROOT, req.createStream('s'))).toBe(0);
    expect(driver.sm.precheck(ROOT, Operation.createStream, body)).toBe(ErrorCode.streamNameAlreadyExists);
  });

  it('uses the given client id for membership checks', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    driver.created(ROOT, req.createTopic('s', 't'));
    driver.created(ROOT, req.createGroup('s', 't', 'g'));
    driver.code(ROOT, req.joinGroup('s', 't', 'g'), 4n);
    const leave = encodeRequest(req.leaveGroup('s', 't', 'g'));
    expect(driver.sm.precheck(ROOT, Operation.leaveConsumerGroup, leave, { clientId: 4n })).toBe(0);
    expect(driver.sm.precheck(ROOT, Operation.leaveConsumerGroup, leave, { clientId: 5n })).toBe(ErrorCode.consumerGroupMemberNotFound);
  });
});

describe('metadata state machine: performance', () => {
  it('snapshots 1,000 streams x 10 topics x 4 partitions + 1,000 users well under a second', () => {
    const sm = newMachine();
    let op = 0;
    const apply = (operation: number, body: Uint8Array): void => {
      op += 1;
      const result = sm.apply({ op, operation, timestampUs: 1_000_000 + op, userId: 0, clientId: 1n, body });
      expect(result.errorCode).toBe(0);
    };
    for (let stream = 0; stream < 1000; stream++) {
      apply(Operation.createStream, encodeRequest(req.createStream(`stream-${stream}`)));
      for (let topic = 0; topic < 10; topic++) {
        apply(Operation.createTopic, encodeRequest(req.createTopic(stream, `topic-${topic}`, 4, { maxTopicSizeBytes: U64_MAX })));
      }
    }
    for (let user = 0; user < 1000; user++) apply(Operation.createUser, encodeRequest(req.createUser(`user-${user}`, null, fakeHash(user))));
    const started = performance.now();
    const snapshot = sm.snapshot();
    const elapsedMs = performance.now() - started;
    expect(snapshot.streams).toHaveLength(1000);
    expect(snapshot.users).toHaveLength(1001);
    // Timings are not asserted tightly (STYLE.md); this bound only catches an accidental O(n^2).
    expect(elapsedMs).toBeLessThan(1000);
    // With a 10,000-entry client table, snapshot + encode in each kernel mode stays under a second.
    const clientTable = Array.from({ length: 10_000 }, (_, slot) => ({
      slot,
      clientId: BigInt(slot + 1) << 64n,
      epoch: slot + 1,
      userId: 0,
      watermark: slot,
      watermarkChecksum: 0n,
      reply: new Uint8Array(256 + 8),
    }));
    for (const kernels of availableKernels()) {
      const encodeStarted = performance.now();
      const bytes = kernels.snapshotEncode({ ...fullSnapshot(sm.snapshot()), clientTable });
      expect(bytes.byteLength).toBeGreaterThan(1_000_000);
      expect(performance.now() - encodeStarted).toBeLessThan(1000);
    }
  });
});

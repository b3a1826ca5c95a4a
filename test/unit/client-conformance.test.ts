/**
 * Protocol conformance of the client port, every command in both directions: request frames and
 * bodies built by hand as the Node SDK writes them (test/support/iggy-frames.ts), sent over a real
 * socket to a real single-replica node, and every answer checked byte for byte against Iggy's
 * layouts (header fields where the SDK reads them, result sections, response bodies), or against
 * the eviction reason / status code Iggy's dispatch gives.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';
import {
  CODE,
  OP,
  PROTOCOL_0_11,
  REASON,
  RawClient,
  loginBody,
  name,
  numericId,
  option,
  randomClientId,
  requestFrame,
  result,
  stringId,
  tokenLoginBody,
  u32,
  u64,
  versionInfo,
  type ReplyView,
} from '../support/iggy-frames.js';
import { startBinaryNode, type BinaryNode } from '../support/binary-node.js';
import { encodeBatch, textMessages } from '../support/message-batches.js';
import { offsetPrefix, pollBody, sendMessagesBody } from './partition/wire.js';

let server: BinaryNode;
let root: RawClient;

beforeAll(async () => {
  server = await startBinaryNode();
  root = await RawClient.connect(server.port);
  const login = await root.login();
  expect(login.status).toBe(0);
});

afterAll(async () => {
  root?.close();
  await server?.close();
});

const b = (...parts: (Buffer | number[])[]): Buffer => Buffer.concat(parts.map((part) => (Array.isArray(part) ? Buffer.from(part) : part)));

function expectEviction(reply: ReplyView, reason: number): void {
  expect({ command: reply.command, size: reply.size, reason: reply.reason }).toEqual({ command: 13, size: 256, reason });
}

function expectDeny(reply: ReplyView, code: number): void {
  expect({ command: reply.command, status: reply.status, size: reply.size }).toEqual({ command: 8, status: code, size: 256 });
}

function expectOk(reply: ReplyView, operation: number): Buffer {
  expect({ command: reply.command, status: reply.status, operation: reply.operation }).toEqual({ command: 8, status: 0, operation });
  return reply.body;
}

/** A committed metadata reply: result section count 0, then the payload. */
function committed(reply: ReplyView, operation: number): Buffer {
  const { code, payload } = result(expectOk(reply, operation));
  expect(code).toBe(0);
  return payload;
}

describe('client port: login (Register)', () => {
  it('LoginRegister: result-framed user id, session (the commit op), protocol and server version', async () => {
    const client = await RawClient.connect(server.port);
    const reply = await client.login();
    const body = expectOk(reply, OP.register);
    const session = server.node.core.clientTable.get(client.clientId)!.epoch;
    expect(body).toEqual(b(u32(0), u32(0), u64(BigInt(session)), u32(PROTOCOL_0_11), name('0.1.0')));
    expect({ client: reply.client, op: reply.op, request: reply.request }).toEqual({ client: client.clientId, op: BigInt(session), request: 0n });
    expect(reply.commit >= reply.op).toBe(true);
    client.close();
  });

  it('wrong password, unknown user: InvalidCredentials; garbage after the prefix: MalformedLogin', async () => {
    const client = await RawClient.connect(server.port);
    expectEviction(await client.login('iggy', 'nope'), REASON.invalidCredentials);
    expectEviction(await client.login('nobody', 'iggy'), REASON.invalidCredentials);
    expectEviction(await client.call(requestFrame({ client: client.clientId, operation: OP.register }, b(versionInfo(), [0]))), REASON.malformedLogin);
    expectEviction(await client.call(requestFrame({ client: client.clientId, operation: OP.register }, b([1, 2]))), REASON.malformedLogin);
    // The connection stays usable after a login eviction.
    expect((await client.login()).status).toBe(0);
    client.close();
  });

  it('an incompatible protocol version is evicted with the accepted window', async () => {
    const client = await RawClient.connect(server.port);
    const reply = await client.call(requestFrame({ client: client.clientId, operation: OP.register }, loginBody('iggy', 'iggy', 10 << 10)));
    expectEviction(reply, REASON.incompatibleProtocol);
    expect([reply.frame.readUInt32LE(144), reply.frame.readUInt32LE(148)]).toEqual([PROTOCOL_0_11, PROTOCOL_0_11]);
    client.close();
  });

  it("a client id holding another user's session is refused with SessionError", async () => {
    committed(await root.write(OP.createUser, b(name('conf-other'), name('other-pass'), [1], [0])), OP.createUser);
    const owner = await RawClient.connect(server.port);
    await owner.login();
    const intruder = await RawClient.connect(server.port);
    intruder.clientId = owner.clientId;
    expectEviction(await intruder.login('conf-other', 'other-pass'), REASON.sessionError);
    // The owner's session is untouched.
    expect(result(expectOk(await owner.write(OP.createStream, name('conf-owner-ok')), OP.createStream)).code).toBe(0);
    owner.close();
    intruder.close();
  });

  it('an undeclared or internal operation is evicted InvalidRequestOperation, and the stream is closed', async () => {
    for (const operation of [99, OP.createTopicWithAssignments]) {
      const client = await RawClient.connect(server.port);
      await client.login();
      expectEviction(await client.call(requestFrame({ client: client.clientId, operation, session: client.session, request: 1n })), REASON.invalidRequestOperation);
      expect(await client.next(2000)).toBeNull();
      client.close();
    }
  });

  it('the legacy login codes are refused with MalformedLogin', async () => {
    const client = await RawClient.connect(server.port);
    for (const code of [CODE.loginUser, CODE.loginWithAccessToken]) {
      expectEviction(await client.call(requestFrame({ client: client.clientId, operation: OP.nonReplicated, code }, b(name('iggy'), name('iggy')))), REASON.malformedLogin);
    }
    client.close();
  });

  it('before login: ping answers, any other read is denied Unauthenticated, a write is NoSession', async () => {
    const client = await RawClient.connect(server.port);
    expectOk(await client.read(CODE.ping), OP.nonReplicated);
    expectDeny(await client.read(CODE.getStreams), 40);
    expectEviction(await client.call(requestFrame({ client: client.clientId, operation: OP.createStream, session: 9n, request: 1n }, name('x'))), REASON.noSession);
    client.close();
  });
});

describe('client port: streams, topics, partitions, segments, groups', () => {
  it('CreateStream answers the stream; GetStream, GetStreams read it back; Update, Purge, Delete', async () => {
    const created = committed(await root.write(OP.createStream, b(name('conf-s'))), OP.createStream);
    const stream = server.node.state.queries.stream({ kind: 'name', name: 'conf-s' })!;
    const streamBytes = b(u32(stream.id), u64(BigInt(stream.createdAtUs)), u32(0), u64(0n), u64(0n), name('conf-s'), u32(0));
    expect(created).toEqual(streamBytes);
    expect(expectOk(await root.read(CODE.getStream, stringId('conf-s')), OP.nonReplicated)).toEqual(streamBytes);
    expect(expectOk(await root.read(CODE.getStream, numericId(stream.id)), OP.nonReplicated)).toEqual(streamBytes);
    expect(expectOk(await root.read(CODE.getStream, stringId('missing')), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    expect(expectOk(await root.read(CODE.getStreams), OP.nonReplicated).includes(streamBytes)).toBe(true);
    expect(committed(await root.write(OP.updateStream, b(numericId(stream.id), name('conf-s2'))), OP.updateStream)).toEqual(Buffer.alloc(0));
    expect(committed(await root.write(OP.purgeStream, stringId('conf-s2')), OP.purgeStream)).toEqual(Buffer.alloc(0));
    expect(committed(await root.write(OP.deleteStream, stringId('conf-s2')), OP.deleteStream)).toEqual(Buffer.alloc(0));
    expect(server.node.state.queries.stream({ kind: 'name', name: 'conf-s2' })).toBeNull();
  });

  it('CreateTopic takes its settings as options and answers the topic with its partitions', async () => {
    committed(await root.write(OP.createStream, name('conf-t')), OP.createStream);
    const options = b(option('compression_algorithm', 2, Buffer.from('gzip')), option('message_expiry', 12, u64(5_000_000n)));
    const created = committed(await root.write(OP.createTopic, b(stringId('conf-t'), u32(2), name('t1'), options)), OP.createTopic);
    const topic = server.node.state.queries.topic({ kind: 'name', name: 'conf-t' }, { kind: 'name', name: 't1' })!;
    expect({ compression: topic.compressionAlgorithm, expiry: topic.messageExpiryUs }).toEqual({ compression: 2, expiry: 5_000_000n });
    // The keys the client sent come back explicit, the rest derived, each in its catalog kind.
    const explicit = b(option('compression_algorithm', 2, Buffer.from('gzip')), option('message_expiry', 12, u64(5_000_000n)));
    const derived = b(
      option('enforce_fsync', 3, Buffer.from([0])),
      option('max_topic_size', 12, u64(0xffff_ffff_ffff_ffffn)),
      option('messages_required_to_save', 11, Buffer.from([0, 4, 0, 0])),
      option('preallocate_segments', 3, Buffer.from([0])),
      option('segment_size', 12, u64(1024n ** 3n)),
      option('size_of_messages_required_to_save', 12, u64(1024n * 1024n)),
    );
    const header = b(
      u32(topic.id),
      u64(BigInt(topic.createdAtUs)),
      u32(2),
      u64(5_000_000n),
      [2],
      u64(0xffff_ffff_ffff_ffffn),
      u64(0n),
      u64(0n),
      name('t1'),
      u32(explicit.length),
      explicit,
      u32(derived.length),
      derived,
    );
    // segments_count 1: every new partition has one empty segment, as Iggy reports it.
    const partition = (id: number) => b(u32(id), u64(BigInt(topic.createdAtUs)), u32(1), u64(0n), u64(0n), u64(0n));
    expect(created).toEqual(b(header, partition(0), partition(1)));
    expect(expectOk(await root.read(CODE.getTopic, b(stringId('conf-t'), stringId('t1'))), OP.nonReplicated)).toEqual(created);
    expect(expectOk(await root.read(CODE.getTopics, stringId('conf-t')), OP.nonReplicated)).toEqual(b(u32(1), header));
    expect(expectOk(await root.read(CODE.getTopic, b(stringId('conf-t'), stringId('nope'))), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    expectDeny(await root.read(CODE.getTopics, stringId('no-such-stream')), 1009);
    // An unknown option key is refused, as Iggy does (UnsupportedOptionKey), before the log.
    expectDeny(await root.write(OP.createTopic, b(stringId('conf-t'), u32(1), name('t2'), option('segment_size', 12, u64(1n << 20n)))), 4041);
    expectDeny(await root.write(OP.createTopic, b(stringId('conf-t'), u32(1), name('t2'), option('message_expiry', 2, Buffer.from('7 days')))), 4042);

    const address = b(stringId('conf-t'), stringId('t1'));
    committed(await root.write(OP.updateTopic, b(address, name('t1'), option('message_expiry', 12, u64(0n)))), OP.updateTopic);
    expect(server.node.state.queries.topic({ kind: 'name', name: 'conf-t' }, { kind: 'name', name: 't1' })!.messageExpiryUs).toBe(0xffff_ffff_ffff_ffffn);
    committed(await root.write(OP.createPartitions, b(address, u32(3))), OP.createPartitions);
    committed(await root.write(OP.deletePartitions, b(address, u32(1))), OP.deletePartitions);
    expect(server.node.state.queries.topic({ kind: 'name', name: 'conf-t' }, { kind: 'name', name: 't1' })!.partitionsCount).toBe(4);
    // DeleteSegments is not result-framed for the SDK: an empty body.
    expect(expectOk(await root.write(OP.deleteSegments, b(address, u32(0), u32(1))), OP.deleteSegments)).toEqual(Buffer.alloc(0));
    expectDeny(await root.write(OP.deleteSegments, b(address, u32(99), u32(1))), 3007);

    const group = committed(await root.write(OP.createGroup, b(address, name('g1'))), OP.createGroup);
    expect(group).toEqual(b(u32(0), u32(4), u32(0), name('g1')));
    committed(await root.write(OP.joinGroup, b(address, stringId('g1'))), OP.joinGroup);
    const details = expectOk(await root.read(CODE.getGroup, b(address, stringId('g1'))), OP.nonReplicated);
    expect(details.subarray(0, 12)).toEqual(b(u32(0), u32(4), u32(1)));
    expect(expectOk(await root.read(CODE.getGroups, address), OP.nonReplicated)).toEqual(b(u32(0), u32(4), u32(1), name('g1')));
    expect(expectOk(await root.read(CODE.getGroup, b(address, stringId('none'))), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    const me = expectOk(await root.read(CODE.getMe), OP.nonReplicated);
    const stream = server.node.state.queries.stream({ kind: 'name', name: 'conf-t' })!;
    expect(me.subarray(me.length - 16)).toEqual(b(u32(1), u32(stream.id), u32(topic.id), u32(0)));
    committed(await root.write(OP.leaveGroup, b(address, stringId('g1'))), OP.leaveGroup);
    committed(await root.write(OP.deleteGroup, b(address, stringId('g1'))), OP.deleteGroup);
    committed(await root.write(OP.purgeTopic, address), OP.purgeTopic);
    // The Node SDK appends a partitions count to DeleteTopic; Iggy ignores trailing bytes.
    committed(await root.write(OP.deleteTopic, b(address, u32(0))), OP.deleteTopic);
    committed(await root.write(OP.deleteStream, stringId('conf-t')), OP.deleteStream);
  });

  it('a business rejection is a status deny with the Iggy code; a malformed body is InvalidRequestBody', async () => {
    committed(await root.write(OP.createStream, name('conf-dup')), OP.createStream);
    expectDeny(await root.write(OP.createStream, name('conf-dup')), 1012);
    expectDeny(await root.write(OP.createStream, b(name('conf-x'), option('anything', 2, Buffer.from('v')))), 4041);
    const client = await RawClient.connect(server.port);
    await client.login();
    expectEviction(await client.write(OP.createStream, b([200, 1])), REASON.invalidRequestBody);
    client.close();
  });
});

describe('client port: users and tokens', () => {
  it('CreateUser answers the user with its permissions; Update, ChangePassword, Permissions, Delete', async () => {
    const permissions = b([0, 0, 1, 1, 1, 1, 1, 1, 1, 1], [1], u32(1), [1, 1, 1, 1, 1, 1], [1], u32(1), [1, 1, 1, 1], [0], [0]);
    const body = b(name('conf-user'), name('pass-1234'), [1], [1], u32(permissions.length), permissions);
    const created = committed(await root.write(OP.createUser, body), OP.createUser);
    const user = server.node.state.queries.user({ kind: 'name', name: 'conf-user' })!;
    const userBytes = b(u32(user.id), u64(BigInt(user.createdAtUs)), [1], name('conf-user'), u32(0));
    expect(created).toEqual(b(userBytes, [1], u32(permissions.length), permissions));
    expect(expectOk(await root.read(CODE.getUser, stringId('conf-user')), OP.nonReplicated)).toEqual(created);
    expect(expectOk(await root.read(CODE.getUser, stringId('nobody')), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    expect(expectOk(await root.read(CODE.getUsers), OP.nonReplicated).includes(userBytes)).toBe(true);

    const other = await RawClient.connect(server.port);
    expect((await other.login('conf-user', 'pass-1234')).status).toBe(0);
    committed(await root.write(OP.changePassword, b(numericId(user.id), name('pass-1234'), name('pass-5678'))), OP.changePassword);
    expectDeny(await root.write(OP.changePassword, b(numericId(user.id), name('wrong-pass'), name('pass-0000'))), 42);
    committed(await root.write(OP.updatePermissions, b(numericId(user.id), [0])), OP.updatePermissions);
    expect(server.node.state.queries.user({ kind: 'id', id: user.id })!.permissions).toBeNull();
    // Deactivated: a new password login fails as a wrong password would (InvalidCredentials, so a
    // login cannot probe for disabled accounts), and the live session is ended on its next request.
    committed(await root.write(OP.updateUser, b(numericId(user.id), [0], [1], [2])), OP.updateUser);
    const fresh = await RawClient.connect(server.port);
    expectEviction(await fresh.login('conf-user', 'pass-5678'), REASON.invalidCredentials);
    expectEviction(await other.read(CODE.getMe), REASON.userInactive);
    committed(await root.write(OP.deleteUser, numericId(user.id)), OP.deleteUser);
    expect(server.node.state.queries.user({ kind: 'id', id: user.id })).toBeNull();
    other.close();
    fresh.close();
  });

  it('CreatePersonalAccessToken answers the raw token once; it logs in; a retry is PersonalAccessTokenAlreadyExists', async () => {
    const request = root.requestNext++;
    const reply = await root.write(OP.createToken, b(name('conf-token'), u64(0n)), request);
    const token = committed(reply, OP.createToken);
    const size = token.readUInt8(0);
    expect(token.length).toBe(1 + size);
    const raw = token.subarray(1).toString();
    expectDeny(await root.write(OP.createToken, b(name('conf-token'), u64(0n)), request), 51);
    expect(expectOk(await root.read(CODE.getAccessTokens), OP.nonReplicated)).toEqual(b(name('conf-token'), u64(0n)));
    const client = await RawClient.connect(server.port);
    const login = await client.call(requestFrame({ client: client.clientId, operation: OP.register }, tokenLoginBody(raw)));
    expect(result(expectOk(login, OP.register)).code).toBe(0);
    expectEviction(await client.call(requestFrame({ client: randomClientId(), operation: OP.register }, tokenLoginBody('not-a-token'))), REASON.invalidToken);
    committed(await root.write(OP.deleteToken, name('conf-token')), OP.deleteToken);
    client.close();
  });
});

describe('client port: system reads, data plane, unknown commands', () => {
  it('GetStats, GetClusterMetadata, DescribeOptions, GetClients, GetClient, GetMe', async () => {
    const stats = expectOk(await root.read(CODE.getStats), OP.nonReplicated);
    expect(stats.readUInt32LE(0)).toBe(process.pid);
    const metadata = expectOk(await root.read(CODE.getClusterMetadata), OP.nonReplicated);
    const clusterName = server.node.config.clusterName;
    expect(metadata.subarray(0, 4 + clusterName.length + 4)).toEqual(b(u32(clusterName.length), Buffer.from(clusterName), u32(1)));
    const node = metadata.subarray(metadata.length - 10);
    expect([node.readUInt16LE(0), node.readUInt8(8), node.readUInt8(9)]).toEqual([server.port, 0, 0]);
    const catalog = expectOk(await root.read(CODE.describeOptions, b([1])), OP.nonReplicated);
    expect(catalog.readUInt32LE(0)).toBe(3);
    expect(expectOk(await root.read(CODE.describeOptions, b([2])), OP.nonReplicated)).toEqual(u32(0));
    expectDeny(await root.read(CODE.describeOptions, b([9])), 3);
    const me = expectOk(await root.read(CODE.getMe), OP.nonReplicated);
    const id = me.readUInt32LE(0);
    expect([me.readUInt32LE(4), me.readUInt8(8)]).toEqual([0, 1]);
    expect(expectOk(await root.read(CODE.getClient, u32(id)), OP.nonReplicated)).toEqual(me);
    expect(expectOk(await root.read(CODE.getClient, u32(0xdead_beef)), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    expect(expectOk(await root.read(CODE.getClients), OP.nonReplicated).includes(me.subarray(0, me.length - 12))).toBe(true);
  });

  it('/clients lists binary connections as Iggy does: u32 id, address, transport TCP, user (null before login)', async () => {
    const me = expectOk(await root.read(CODE.getMe), OP.nonReplicated);
    const id = me.readUInt32LE(0);
    const listed = server.node.clients().find((client) => client.clientId === id);
    expect(listed).toMatchObject({ clientId: id, userId: 0, transport: 'TCP', session: Number(root.session) });
    const anonymous = await RawClient.connect(server.port);
    // A connection is listed before it logs in, with no user (the wire's u32::MAX), as Iggy.
    await expect.poll(() => server.node.clients().length).toBeGreaterThan(1);
    const unnamed = server.node.clients().filter((client) => client.userId === null);
    expect(unnamed.length).toBeGreaterThanOrEqual(1);
    anonymous.close();
    expect(listed!.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(server.node.clients().every((client) => Number.isInteger(client.clientId) && client.clientId > 0 && client.clientId <= 0xffff_ffff)).toBe(true);
  });

  it('consumer groups on the data plane: sync returns the assignment, a group poll is fenced, offsets per group', async () => {
    committed(await root.write(OP.createStream, name('conf-cg')), OP.createStream);
    const address = b(stringId('conf-cg'), stringId('t'));
    committed(await root.write(OP.createTopic, b(stringId('conf-cg'), u32(2), name('t'))), OP.createTopic);
    committed(await root.write(OP.createGroup, b(address, name('readers'))), OP.createGroup);
    const group = b(address, stringId('readers'));
    // Not a member: sync answers the empty body, a group poll ConsumerGroupMemberNotFound.
    expect(expectOk(await root.read(CODE.syncGroup, group), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    const groupPoll = (partitionId: number): Buffer =>
      Buffer.from(pollBody(offsetPrefix({ consumerKind: 2, consumerId: 'readers', stream: 'conf-cg', topic: 't', partitionId }), 3, 0n, 10, 0));
    expectDeny(await root.read(CODE.pollMessages, groupPoll(0)), 5006);
    committed(await root.write(OP.joinGroup, group), OP.joinGroup);
    const sync = expectOk(await root.read(CODE.syncGroup, group), OP.nonReplicated);
    // generation u64, count u32, partition u32 x count: the only member owns both partitions.
    expect([sync.readUInt32LE(8), sync.readUInt32LE(12), sync.readUInt32LE(16)]).toEqual([2, 0, 1]);
    const send = sendMessagesBody({ stream: 'conf-cg', topic: 't', partitioning: { partitionId: 1 }, messagesCount: 2, batch: encodeBatch(textMessages(2)) });
    const sent = await root.write(OP.sendMessages, Buffer.from(send), root.requestNext);
    expect([sent.status, sent.body.readUInt32LE(0), Number(sent.body.readBigUInt64LE(16))]).toEqual([0, 1, 0]);
    const polled = expectOk(await root.read(CODE.pollMessages, groupPoll(1)), OP.nonReplicated);
    expect([polled.readUInt32LE(0), Number(polled.readBigUInt64LE(4)), polled.readUInt32LE(12)]).toEqual([1, 1, 2]);
    // A group's offset needs its partition named; stored under the group, not under a consumer.
    const groupOffset = (partitionId: number | null): Buffer => Buffer.from(offsetPrefix({ consumerKind: 2, consumerId: 'readers', stream: 'conf-cg', topic: 't', partitionId }));
    expectDeny(await root.write(OP.storeOffset, b(groupOffset(null), u64(1n), [1]), root.requestNext), 6);
    expect(result((await root.write(OP.storeOffset, b(groupOffset(1), u64(1n), [1]), root.requestNext)).body).code).toBe(0);
    const stored = expectOk(await root.read(CODE.getOffset, groupOffset(1)), OP.nonReplicated);
    expect([stored.readUInt32LE(0), Number(stored.readBigUInt64LE(4)), Number(stored.readBigUInt64LE(12))]).toEqual([1, 1, 1]);
    const consumerOffset = Buffer.from(offsetPrefix({ consumerKind: 1, consumerId: 'readers', stream: 'conf-cg', topic: 't', partitionId: 1 }));
    expect(expectOk(await root.read(CODE.getOffset, consumerOffset), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    committed(await root.write(OP.leaveGroup, group), OP.leaveGroup);
    expectDeny(await root.read(CODE.pollMessages, groupPoll(1)), 5006);
    committed(await root.write(OP.deleteStream, stringId('conf-cg')), OP.deleteStream);
  });

  it('data-plane bodies that do not decode answer as Iggy; flush and snapshot FeatureUnavailable; an unknown code InvalidCommand', async () => {
    for (const code of [CODE.flush, CODE.getSnapshot]) expectDeny(await root.read(code), 5);
    // A poll that does not decode is the empty poll (partition 0, offset 0, count 0), a Get the
    // empty body ("no offset"), as Iggy answers them.
    expect(expectOk(await root.read(CODE.pollMessages), OP.nonReplicated)).toEqual(Buffer.alloc(16));
    expect(expectOk(await root.read(CODE.getOffset), OP.nonReplicated)).toEqual(Buffer.alloc(0));
    expectDeny(await root.read(CODE.syncGroup), 3);
    expectDeny(await root.write(OP.sendMessages, b([1, 2, 3]), root.requestNext), 3);
    expectDeny(await root.write(OP.storeOffset, b([1, 2, 3]), root.requestNext), 3);
    expectDeny(await root.read(202, name('via-nr')), 5);
    expectDeny(await root.read(999), 3);
  });
});

describe('client port: request numbers, retries, checksums, sessions', () => {
  it('a retried request number gets the cached reply byte for byte, and nothing is applied twice', async () => {
    const request = root.requestNext++;
    const first = await root.write(OP.createStream, name('conf-retry'), request);
    const again = await root.write(OP.createStream, name('conf-retry'), request);
    expect(again.frame).toEqual(first.frame);
    expect(server.node.state.queries.streams().filter((stream) => stream.name === 'conf-retry')).toHaveLength(1);
  });

  it('a stamped request checksum must match its body (Iggy InvalidFormat)', async () => {
    const body = name('conf-stamped');
    const stamp = xxh3_64(body, 0n);
    const request = root.requestNext++;
    expectDeny(await root.call(requestFrame({ client: root.clientId, operation: OP.createStream, session: root.session, request, requestChecksum: stamp + 1n }, body)), 4);
    const ok = await root.call(requestFrame({ client: root.clientId, operation: OP.createStream, session: root.session, request, requestChecksum: stamp }, body));
    expect(result(ok.body).code).toBe(0);
  });

  it('logout ends the session (a write is then NoSession); a second logout is still ok', async () => {
    const client = await RawClient.connect(server.port);
    await client.login();
    const session = client.session;
    const logout = await client.call(requestFrame({ client: client.clientId, operation: OP.logout, session, request: client.requestNext++ }));
    expect({ command: logout.command, status: logout.status, operation: logout.operation, body: logout.body.length }).toEqual({ command: 8, status: 0, operation: 3, body: 0 });
    expect(server.node.core.clientTable.get(client.clientId)).toBeUndefined();
    expectEviction(await client.write(OP.createStream, name('after-logout')), REASON.noSession);
    const again = await client.call(requestFrame({ client: client.clientId, operation: OP.logout, session, request: client.requestNext }));
    expect(again.status).toBe(0);
    client.close();
  });

  it('a session resumed on another connection keeps its watermark; the old connection is fenced', async () => {
    const first = await RawClient.connect(server.port);
    await first.login();
    const request = first.requestNext++;
    const original = await first.write(OP.createStream, name('conf-resume'), request);
    const second = await RawClient.connect(server.port);
    second.clientId = first.clientId;
    const login = await second.login();
    expect(second.session > first.session).toBe(true);
    expect(login.status).toBe(0);
    // The superseded connection hears SessionTooLow at once.
    const fenced = await first.next();
    expect(fenced === null ? null : fenced.readUInt8(255)).toBe(REASON.sessionTooLow);
    const retried = await second.write(OP.createStream, name('conf-resume'), request);
    expect(retried.frame).toEqual(original.frame);
    first.close();
    second.close();
  });
});

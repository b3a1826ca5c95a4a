/**
 * Iggy's binary response bodies, byte for byte: each encoder against a body built by hand from
 * apache/iggy cc269ef70 `core/binary_protocol/src/responses/**` (field order and widths written
 * out here, independently of src/metadata/binary-responses.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  encodeClientDetails,
  encodeClients,
  encodeClusterMetadata,
  encodeConsumerGroupDetails,
  encodeConsumerGroups,
  encodeDescribeOptions,
  encodeLoginRegister,
  encodePermissions,
  encodePersonalAccessTokens,
  encodeRawPersonalAccessToken,
  encodeStats,
  encodeStreamDetails,
  encodeStreams,
  encodeTopicDetails,
  encodeTopics,
  encodeUserDetails,
  encodeUsers,
} from '../../src/metadata/binary-responses.js';
import { GlobalPermission, StreamPermission, TopicPermission, U64_MAX } from '../../src/format/snapshot-model.js';
import { name, option, u32, u64 } from '../support/iggy-frames.js';

const b = (...parts: (Buffer | number[])[]): Buffer => Buffer.concat(parts.map((part) => (Array.isArray(part) ? Buffer.from(part) : part)));
const u16 = (value: number): Buffer => {
  const out = Buffer.alloc(2);
  out.writeUInt16LE(value);
  return out;
};
const text32 = (value: string): Buffer => b(u32(Buffer.byteLength(value)), Buffer.from(value));
const noOptions = u32(0);

const topic = {
  id: 3,
  name: 'created',
  createdAtUs: 1_700_000_000_000_001,
  messageExpiryUs: U64_MAX,
  compressionAlgorithm: 2 as const,
  maxTopicSizeBytes: U64_MAX,
  replicationFactor: 1,
  partitionsCount: 2,
  sizeBytes: 10,
  messagesCount: 11,
  options: [],
};
/** The derived options block vrmeta reports for `topic` (no explicit options: every key, in order). */
const derived = b(
  option('compression_algorithm', 2, Buffer.from('gzip')),
  option('enforce_fsync', 3, Buffer.from([0])),
  option('max_topic_size', 12, u64(U64_MAX)),
  option('message_expiry', 12, u64(U64_MAX)),
  option('messages_required_to_save', 11, Buffer.from([0, 4, 0, 0])),
  option('preallocate_segments', 3, Buffer.from([0])),
  option('segment_size', 12, u64(1024n ** 3n)),
  option('size_of_messages_required_to_save', 12, u64(1024n * 1024n)),
);
const topicHeader = b(
  u32(3),
  u64(1_700_000_000_000_001n),
  u32(2),
  u64(U64_MAX),
  [2],
  u64(U64_MAX),
  u64(10n),
  u64(11n),
  name('created'),
  noOptions,
  u32(derived.length),
  derived,
);

describe('Iggy binary responses', () => {
  it('stream: StreamResponse then one TopicHeader per topic; streams: no count prefix', () => {
    const stream = { id: 7, name: 'orders', createdAtUs: 42, topicsCount: 1, sizeBytes: 5, messagesCount: 6 };
    const streamBytes = b(u32(7), u64(42n), u32(1), u64(5n), u64(6n), name('orders'), noOptions);
    expect(Buffer.from(encodeStreamDetails({ ...stream, topics: [topic] }))).toEqual(b(streamBytes, topicHeader));
    expect(Buffer.from(encodeStreams([stream, stream]))).toEqual(b(streamBytes, streamBytes));
  });

  it('topic: header, then each partition (48 fixed bytes); topics: u32 count then headers', () => {
    const partition = { id: 1, createdAtUs: 9, segmentsCount: 2, currentOffset: 3, sizeBytes: 4, messagesCount: 5 };
    const partitionBytes = b(u32(1), u64(9n), u32(2), u64(3n), u64(4n), u64(5n));
    expect(partitionBytes.length).toBe(4 + 8 + 4 + 8 + 8 + 8);
    expect(Buffer.from(encodeTopicDetails({ ...topic, partitions: [partition, partition] }))).toEqual(b(topicHeader, partitionBytes, partitionBytes));
    expect(Buffer.from(encodeTopics([topic]))).toEqual(b(u32(1), topicHeader));
    expect(Buffer.from(encodeTopics([]))).toEqual(u32(0));
  });

  it('consumer group: id, partitions, members, name; details add members and their partitions', () => {
    const group = { id: 1, name: 'g', partitionsCount: 3, membersCount: 1 };
    const groupBytes = b(u32(1), u32(3), u32(1), name('g'));
    const member = { id: 0, clientId: 99n, partitionsCount: 2, partitions: [0, 2] };
    expect(Buffer.from(encodeConsumerGroupDetails({ ...group, generation: 4, members: [member] }))).toEqual(
      b(groupBytes, u32(0), u32(2), u32(0), u32(2)),
    );
    expect(Buffer.from(encodeConsumerGroups([group, group]))).toEqual(b(groupBytes, groupBytes));
  });

  it('permissions: 10 global flags, then has-next chained streams and topics', () => {
    const permissions = {
      global: GlobalPermission.readServers | GlobalPermission.sendMessages,
      streams: [
        { streamId: 1, bits: StreamPermission.manageStream, topics: [{ topicId: 4, bits: TopicPermission.readTopic }, { topicId: 5, bits: 0 }] },
        { streamId: 2, bits: StreamPermission.sendMessages, topics: [] },
      ],
    };
    expect(Buffer.from(encodePermissions(permissions))).toEqual(
      b(
        [0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
        [1],
        u32(1),
        [1, 0, 0, 0, 0, 0],
        [1],
        u32(4),
        [0, 1, 0, 0],
        [1],
        u32(5),
        [0, 0, 0, 0],
        [0],
        [1],
        u32(2),
        [0, 0, 0, 0, 0, 1],
        [0],
        [0],
      ),
    );
    expect(Buffer.from(encodePermissions({ global: 0, streams: [] }))).toEqual(b([0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0]));
  });

  it('user: id, created_at, status, username, options; details: permissions or a u32 zero', () => {
    const user = { id: 4, username: 'ana', status: 1 as const, createdAtUs: 77 };
    const userBytes = b(u32(4), u64(77n), [1], name('ana'), noOptions);
    expect(Buffer.from(encodeUserDetails({ ...user, permissions: null }))).toEqual(b(userBytes, u32(0)));
    const permissions = { global: GlobalPermission.manageUsers, streams: [] };
    const permissionBytes = Buffer.from(encodePermissions(permissions));
    expect(Buffer.from(encodeUserDetails({ ...user, permissions }))).toEqual(b(userBytes, [1], u32(permissionBytes.length), permissionBytes));
    expect(Buffer.from(encodeUsers([user, user]))).toEqual(b(userBytes, userBytes));
  });

  it('tokens: name and expiry (0 = never); raw token: a name; login: id, session, protocol, version', () => {
    expect(Buffer.from(encodePersonalAccessTokens([{ name: 'a', expiryAtUs: null }, { name: 'bb', expiryAtUs: 12 }]))).toEqual(
      b(name('a'), u64(0n), name('bb'), u64(12n)),
    );
    expect(Buffer.from(encodeRawPersonalAccessToken('secret'))).toEqual(name('secret'));
    expect(Buffer.from(encodeLoginRegister(5, 1234, 11 << 10, '0.1.0'))).toEqual(b(u32(5), u64(1234n), u32(11 << 10), name('0.1.0')));
  });

  it('clients: id, user, transport, address (u32 size), groups count; details list the groups', () => {
    const client = { clientId: 9, userId: 0xffff_ffff, transport: 1, address: '127.0.0.1:5000', consumerGroups: [{ streamId: 1, topicId: 2, groupId: 3 }] };
    const clientBytes = b(u32(9), u32(0xffff_ffff), [1], text32('127.0.0.1:5000'), u32(1));
    expect(Buffer.from(encodeClientDetails(client))).toEqual(b(clientBytes, u32(1), u32(2), u32(3)));
    expect(Buffer.from(encodeClients([client]))).toEqual(clientBytes);
  });

  it('cluster metadata: name, count, nodes with four u16 ports, role and status', () => {
    const node = { name: 'n-0', ip: '127.0.0.1', tcpPort: 8090, quicPort: 0, httpPort: 3000, websocketPort: 0, role: 0, status: 0 };
    expect(Buffer.from(encodeClusterMetadata('c', [node]))).toEqual(
      b(text32('c'), u32(1), text32('n-0'), text32('127.0.0.1'), u16(8090), u16(0), u16(3000), u16(0), [0], [0]),
    );
  });

  it('describe options: count, then key, kind, default (u32 size), description (u32 size)', () => {
    expect(Buffer.from(encodeDescribeOptions([{ key: 'k', kind: 12, defaultValue: u64(5n), description: 'd' }]))).toEqual(
      b(u32(1), name('k'), [12], u32(8), u64(5n), text32('d')),
    );
  });

  it('stats: the fixed fields, five u32-sized strings, semver, no cache metrics, threads, disk', () => {
    const stats = {
      processId: 1,
      cpuUsage: 0.5,
      totalCpuUsage: 0.25,
      memoryUsage: 2,
      totalMemory: 3,
      availableMemory: 4,
      runTimeUs: 5,
      startTimeUs: 6,
      readBytes: 7,
      writtenBytes: 8,
      messagesSizeBytes: 9,
      streamsCount: 10,
      topicsCount: 11,
      partitionsCount: 12,
      segmentsCount: 13,
      messagesCount: 14,
      clientsCount: 15,
      consumerGroupsCount: 16,
      hostname: 'h',
      osName: 'o',
      osVersion: 'v',
      kernelVersion: 'k',
      serverVersion: '0.1.0',
      serverSemver: null,
      threadsCount: 1,
      freeDiskSpace: 17,
      totalDiskSpace: 18,
    };
    const f32 = (value: number): Buffer => {
      const out = Buffer.alloc(4);
      out.writeFloatLE(value);
      return out;
    };
    expect(Buffer.from(encodeStats(stats))).toEqual(
      b(
        u32(1),
        f32(0.5),
        f32(0.25),
        u64(2n),
        u64(3n),
        u64(4n),
        u64(5n),
        u64(6n),
        u64(7n),
        u64(8n),
        u64(9n),
        u32(10),
        u32(11),
        u32(12),
        u32(13),
        u64(14n),
        u32(15),
        u32(16),
        text32('h'),
        text32('o'),
        text32('v'),
        text32('k'),
        text32('0.1.0'),
        u32(0),
        u32(0),
        u32(1),
        u64(17n),
        u64(18n),
      ),
    );
  });
});

/**
 * A deliberately simple, independent model of the metadata state machine for the reference-model
 * property test: plain sorted arrays, linear scans, "lowest free id" by counting up. It restates
 * the rules (Iggy's check order, codes, limits, assignment) without sharing any code with
 * src/metadata beyond the request types and constants.
 */
import { Operation, type Identifier, type MetadataRequest } from '../../src/metadata/operations.js';
import type { PermissionsSnapshot, StreamSnapshot, UserSnapshot } from '../../src/format/snapshot-model.js';
import type { MetadataLimits } from '../../src/metadata/validation.js';
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';

const U64_MAX = 0xffff_ffff_ffff_ffffn;
const GIB = 1024n * 1024n * 1024n;
const MIB = 1024n * 1024n;

interface Counters {
  size: number;
  messages: number;
  segments: number;
  offset: number;
}

interface MMember {
  id: number;
  clientId: bigint;
  partitions: number[];
}
interface MGroup {
  id: number;
  name: string;
  generation: number;
  members: MMember[];
}
interface MTopic {
  id: number;
  name: string;
  createdAtUs: number;
  messageExpiryUs: bigint;
  compressionAlgorithm: number;
  maxTopicSizeBytes: bigint;
  replicationFactor: number;
  partitions: { id: number; createdAtUs: number; counters: Counters }[];
  groups: MGroup[];
  options: readonly { key: string; value: string | null }[];
  purgedAtUs: number;
}

/** A topic's segment size: its explicit `segment_size` option, else 1 GiB (the max size floor). */
function segmentSizeOf(options: readonly { key: string; value: string | null }[]): bigint {
  const entry = options.find((option) => option.key === 'segment_size');
  return entry?.value ? BigInt(entry.value) : GIB;
}
interface MStream {
  id: number;
  name: string;
  createdAtUs: number;
  topics: MTopic[];
}
interface MToken {
  name: string;
  tokenHash: Uint8Array;
  expiryAtUs: number | null;
}
interface MUser {
  id: number;
  username: string;
  passwordHash: string;
  status: number;
  createdAtUs: number;
  permissions: PermissionsSnapshot | null;
  tokens: MToken[];
}

function lowestFree(items: readonly { id: number }[]): number {
  let id = 0;
  while (items.some((item) => item.id === id)) id++;
  return id;
}

function insertSorted<T extends { id: number }>(items: T[], item: T): void {
  items.push(item);
  items.sort((a, b) => a.id - b.id);
}

function find<T extends { id: number; name?: string; username?: string }>(items: readonly T[], identifier: Identifier): T | undefined {
  return identifier.kind === 'id'
    ? items.find((item) => item.id === identifier.id)
    : items.find((item) => (item.name ?? item.username) === identifier.name);
}

function bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}

/** Root's stored hash at genesis (validation.ts GENESIS_PASSWORD_MARKER), restated. */
const GENESIS_MARKER = '$vrmeta$genesis$v1';
const PHC = /^\$argon2id\$v=19\$m=\d{1,10},t=\d{1,10},p=\d{1,3}\$[A-Za-z0-9+/]{11,}\$[A-Za-z0-9+/]{16,}$/;

export class ReferenceModel {
  streams: MStream[] = [];
  users: MUser[];
  readonly limits: MetadataLimits;

  constructor(rootUsername: string, rootPasswordHash: string, limits: MetadataLimits) {
    this.limits = limits;
    this.users = [{ id: 0, username: rootUsername, passwordHash: rootPasswordHash, status: 1, createdAtUs: 0, permissions: { global: 0x3ff, streams: [] }, tokens: [] }];
  }

  // Permissions, restated from Iggy's permissioner.
  private g(user: MUser): number {
    return user.permissions?.global ?? 0;
  }
  private s(user: MUser, streamId: number): number {
    return user.permissions?.streams.find((entry) => entry.streamId === streamId)?.bits ?? 0;
  }
  private t(user: MUser, streamId: number, topicId: number): number {
    return user.permissions?.streams.find((entry) => entry.streamId === streamId)?.topics.find((entry) => entry.topicId === topicId)?.bits ?? 0;
  }
  private canManageStream(user: MUser, streamId: number): boolean {
    return user.id === 0 || (this.g(user) & 0x10) !== 0 || (this.s(user, streamId) & 0x01) !== 0;
  }
  private canCreateTopic(user: MUser, streamId: number): boolean {
    return user.id === 0 || (this.g(user) & (0x10 | 0x40)) !== 0 || (this.s(user, streamId) & (0x01 | 0x04)) !== 0;
  }
  private canManageTopic(user: MUser, streamId: number, topicId: number): boolean {
    return this.canCreateTopic(user, streamId) || (this.t(user, streamId, topicId) & 0x01) !== 0;
  }
  private canReadTopic(user: MUser, streamId: number, topicId: number): boolean {
    return (
      user.id === 0 ||
      (this.g(user) & (0x10 | 0x20 | 0x40 | 0x80)) !== 0 ||
      (this.s(user, streamId) & (0x01 | 0x02 | 0x04 | 0x08)) !== 0 ||
      (this.t(user, streamId, topicId) & (0x01 | 0x02)) !== 0
    );
  }
  private canManageUsers(user: MUser): boolean {
    return user.id === 0 || (this.g(user) & 0x04) !== 0;
  }

  private assign(topic: MTopic, group: MGroup): void {
    for (const member of group.members) member.partitions = [];
    topic.partitions.forEach((partition, index) => {
      if (group.members.length > 0) group.members[index % group.members.length]!.partitions.push(partition.id);
    });
    group.generation += 1;
  }

  private topicOf(actor: MUser, streamId: Identifier, topicId: Identifier, need: 'manage' | 'read'): { stream: MStream; topic: MTopic } | number {
    const stream = find(this.streams, streamId);
    if (!stream) return 1009;
    const topic = find(stream.topics, topicId);
    if (!topic) return 2010;
    const allowed = need === 'manage' ? this.canManageTopic(actor, stream.id, topic.id) : this.canReadTopic(actor, stream.id, topic.id);
    return allowed ? { stream, topic } : 41;
  }

  private settingsCode(compression: number | null, expiry: bigint | null, maxSize: bigint | null, replication: number | null, floor = GIB): number {
    if (compression !== null && compression !== 1 && compression !== 2) return 3;
    if (expiry !== null && expiry === 0n) return 3;
    if (maxSize !== null && maxSize === 0n) return 3;
    if (maxSize !== null && maxSize !== U64_MAX && maxSize < floor) return 1019;
    if (replication !== null && (replication < 1 || replication > 255)) return 2018;
    return 0;
  }

  private zero(counters: Counters): void {
    const had = counters.segments > 0;
    counters.size = 0;
    counters.messages = 0;
    counters.segments = had ? 1 : 0;
    counters.offset = 0;
  }

  /** Returns [error code, created/deleted id or null]. */
  apply(actorId: number, request: MetadataRequest, clientId: bigint, timestampUs: number): [number, number | null] {
    // Root's created_at is the first committed metadata op's timestamp (state-machine.ts stampRoot).
    const root = this.users.find((user) => user.id === 0)!;
    if (root.createdAtUs === 0) root.createdAtUs = timestampUs;
    const actor = this.users.find((user) => user.id === actorId);
    if (!actor) return [40, null];
    const nameOk = (name: string): boolean => bytes(name) >= 1 && bytes(name) <= 255;
    switch (request.operation) {
      case Operation.revokeAccessToken:
        // Token revocation has its own unit tests; the model's generator never draws it.
        throw new Error('the reference model does not model token revocation');
      case Operation.createStream: {
        if (!nameOk(request.name)) return [1013, null];
        if (!(actor.id === 0 || (this.g(actor) & 0x10) !== 0)) return [41, null];
        if (this.streams.some((s) => s.name === request.name)) return [1012, null];
        if (this.streams.length >= this.limits.streamsMax) return [1020, null];
        const id = lowestFree(this.streams);
        insertSorted(this.streams, { id, name: request.name, createdAtUs: timestampUs, topics: [] });
        return [0, id];
      }
      case Operation.updateStream: {
        if (!nameOk(request.name)) return [1013, null];
        const stream = find(this.streams, request.streamId);
        if (!stream) return [1009, null];
        if (!this.canManageStream(actor, stream.id)) return [41, null];
        if (this.streams.some((s) => s.name === request.name && s.id !== stream.id)) return [1012, null];
        stream.name = request.name;
        return [0, null];
      }
      case Operation.deleteStream:
      case Operation.purgeStream: {
        const stream = find(this.streams, request.streamId);
        if (!stream) return [1009, null];
        if (!this.canManageStream(actor, stream.id)) return [41, null];
        if (request.operation === Operation.purgeStream) {
          for (const topic of stream.topics) {
            topic.purgedAtUs = timestampUs;
            for (const partition of topic.partitions) this.zero(partition.counters);
          }
          return [0, null];
        }
        this.streams = this.streams.filter((s) => s !== stream);
        for (const user of this.users) {
          if (user.permissions) user.permissions = { global: user.permissions.global, streams: user.permissions.streams.filter((e) => e.streamId !== stream.id) };
        }
        return [0, null];
      }
      case Operation.createTopic: {
        if (!nameOk(request.name)) return [2014, null];
        if (request.partitionsCount > 1000) return [2015, null];
        const settings = this.settingsCode(
          request.compressionAlgorithm,
          request.messageExpiryUs,
          request.maxTopicSizeBytes,
          request.replicationFactor,
          segmentSizeOf(request.options),
        );
        if (settings !== 0) return [settings, null];
        const stream = find(this.streams, request.streamId);
        if (!stream) return [1009, null];
        if (!this.canCreateTopic(actor, stream.id)) return [41, null];
        if (stream.topics.some((t) => t.name === request.name)) return [2013, null];
        if (stream.topics.length >= this.limits.topicsPerStreamMax) return [2021, null];
        if (request.partitionsCount > this.limits.partitionsPerTopicMax) return [3013, null];
        const id = lowestFree(stream.topics);
        insertSorted(stream.topics, {
          id,
          name: request.name,
          createdAtUs: timestampUs,
          messageExpiryUs: request.messageExpiryUs,
          compressionAlgorithm: request.compressionAlgorithm,
          maxTopicSizeBytes: request.maxTopicSizeBytes,
          replicationFactor: request.replicationFactor,
          partitions: Array.from({ length: request.partitionsCount }, (_, p) => ({ id: p, createdAtUs: timestampUs, counters: { size: 0, messages: 0, segments: 0, offset: 0 } })),
          groups: [],
          options: request.options,
          purgedAtUs: 0,
        });
        return [0, id];
      }
      case Operation.updateTopic: {
        if (!nameOk(request.name)) return [2014, null];
        // The floor is the topic's own segment size, known only once it is resolved (MIN first).
        const settings = this.settingsCode(request.compressionAlgorithm, request.messageExpiryUs, request.maxTopicSizeBytes, request.replicationFactor, MIB);
        if (settings !== 0) return [settings, null];
        const found = this.topicOf(actor, request.streamId, request.topicId, 'manage');
        if (typeof found === 'number') return [found, null];
        const maxSize = request.maxTopicSizeBytes;
        if (maxSize !== null && maxSize !== U64_MAX && maxSize < segmentSizeOf(found.topic.options)) return [1019, null];
        if (found.stream.topics.some((t) => t.name === request.name && t.id !== found.topic.id)) return [2013, null];
        found.topic.name = request.name;
        if (request.compressionAlgorithm !== null) found.topic.compressionAlgorithm = request.compressionAlgorithm;
        if (request.messageExpiryUs !== null) found.topic.messageExpiryUs = request.messageExpiryUs;
        if (request.maxTopicSizeBytes !== null) found.topic.maxTopicSizeBytes = request.maxTopicSizeBytes;
        if (request.replicationFactor !== null) found.topic.replicationFactor = request.replicationFactor;
        // Every setting an update carries becomes an explicit option (value in the typed field).
        const set = [
          request.compressionAlgorithm !== null ? 'compression_algorithm' : null,
          request.messageExpiryUs !== null ? 'message_expiry' : null,
          request.maxTopicSizeBytes !== null ? 'max_topic_size' : null,
        ].filter((key): key is string => key !== null && !found.topic.options.some((option) => option.key === key));
        if (set.length > 0) {
          found.topic.options = [...found.topic.options, ...set.map((key) => ({ key, value: null }))].sort((a, b) => (a.key < b.key ? -1 : 1));
        }
        return [0, null];
      }
      case Operation.deleteTopic:
      case Operation.purgeTopic: {
        const found = this.topicOf(actor, request.streamId, request.topicId, 'manage');
        if (typeof found === 'number') return [found, null];
        if (request.operation === Operation.purgeTopic) {
          found.topic.purgedAtUs = timestampUs;
          for (const partition of found.topic.partitions) this.zero(partition.counters);
          return [0, null];
        }
        found.stream.topics = found.stream.topics.filter((t) => t !== found.topic);
        for (const user of this.users) {
          if (!user.permissions) continue;
          user.permissions = {
            global: user.permissions.global,
            streams: user.permissions.streams.map((e) =>
              e.streamId === found.stream.id ? { streamId: e.streamId, bits: e.bits, topics: e.topics.filter((t) => t.topicId !== found.topic.id) } : e,
            ),
          };
        }
        return [0, null];
      }
      case Operation.createPartitions:
      case Operation.deletePartitions: {
        if (request.partitionsCount < 1 || request.partitionsCount > 1000) return [2015, null];
        const found = this.topicOf(actor, request.streamId, request.topicId, 'manage');
        if (typeof found === 'number') return [found, null];
        const topic = found.topic;
        if (request.operation === Operation.createPartitions) {
          if (topic.partitions.length + request.partitionsCount > this.limits.partitionsPerTopicMax) return [3013, null];
          for (let index = 0; index < request.partitionsCount; index++) {
            topic.partitions.push({ id: topic.partitions.length, createdAtUs: timestampUs, counters: { size: 0, messages: 0, segments: 0, offset: 0 } });
          }
        } else {
          if (request.partitionsCount > topic.partitions.length) return [2019, null];
          topic.partitions = topic.partitions.slice(0, topic.partitions.length - request.partitionsCount);
        }
        for (const group of topic.groups) this.assign(topic, group);
        return [0, null];
      }
      case Operation.deleteSegments: {
        const found = this.topicOf(actor, request.streamId, request.topicId, 'manage');
        if (typeof found === 'number') return [found, null];
        return [found.topic.partitions.some((p) => p.id === request.partitionId) ? 0 : 3007, null];
      }
      case Operation.createConsumerGroup: {
        if (!nameOk(request.name)) return [5005, null];
        const found = this.topicOf(actor, request.streamId, request.topicId, 'read');
        if (typeof found === 'number') return [found, null];
        if (found.topic.groups.some((g) => g.name === request.name)) return [5004, null];
        if (found.topic.groups.length >= this.limits.consumerGroupsPerTopicMax) return [90_001, null];
        const id = lowestFree(found.topic.groups);
        insertSorted(found.topic.groups, { id, name: request.name, generation: 0, members: [] });
        return [0, id];
      }
      case Operation.deleteConsumerGroup:
      case Operation.joinConsumerGroup:
      case Operation.leaveConsumerGroup: {
        if (request.operation === Operation.joinConsumerGroup && clientId === 0n) return [101, null];
        const found = this.topicOf(actor, request.streamId, request.topicId, 'read');
        if (typeof found === 'number') return [found, null];
        const group = find(found.topic.groups, request.groupId);
        if (!group) return [5000, null];
        if (request.operation === Operation.deleteConsumerGroup) {
          found.topic.groups = found.topic.groups.filter((g) => g !== group);
          return [0, null];
        }
        const member = group.members.find((m) => m.clientId === clientId);
        if (request.operation === Operation.joinConsumerGroup) {
          if (member) return [0, null];
          if (group.members.length >= this.limits.consumerGroupMembersMax) return [90_002, null];
          insertSorted(group.members, { id: lowestFree(group.members), clientId, partitions: [] });
        } else {
          if (!member) return [5006, null];
          group.members = group.members.filter((m) => m !== member);
        }
        this.assign(found.topic, group);
        return [0, null];
      }
      case Operation.createUser: {
        const size = bytes(request.username);
        if (size < 3 || size > 50) return [43, null];
        if (request.status !== 1 && request.status !== 2) return [45, null];
        if (!PHC.test(request.passwordHash) || request.passwordHash.length > 256) return [44, null];
        if (!this.canManageUsers(actor)) return [41, null];
        if (this.users.some((u) => u.username === request.username)) return [46, null];
        if (this.users.length >= this.limits.usersMax) return [55, null];
        const id = lowestFree(this.users);
        insertSorted(this.users, { id, username: request.username, passwordHash: request.passwordHash, status: request.status, createdAtUs: timestampUs, permissions: request.permissions, tokens: [] });
        return [0, id];
      }
      case Operation.updateUser: {
        if (request.username !== null && (bytes(request.username) < 3 || bytes(request.username) > 50)) return [43, null];
        if (request.status !== null && request.status !== 1 && request.status !== 2) return [45, null];
        if (!this.canManageUsers(actor)) return [41, null];
        const user = find(this.users, request.userId);
        if (!user) return [20, null];
        if (request.username !== null && this.users.some((u) => u.username === request.username && u !== user)) return [46, null];
        if (request.username !== null) user.username = request.username;
        if (request.status !== null) user.status = request.status;
        return [0, null];
      }
      case Operation.deleteUser: {
        if (!this.canManageUsers(actor)) return [41, null];
        const user = find(this.users, request.userId);
        if (!user) return [20, null];
        if (user.id === 0) return [48, null];
        this.users = this.users.filter((u) => u !== user);
        // Iggy's DeleteUser reply carries no payload (only creates answer with an id).
        return [0, null];
      }
      case Operation.changePassword: {
        const phc = (hash: string): boolean => PHC.test(hash) && hash.length <= 256;
        const current = request.currentPasswordHash;
        if (!(phc(current) || current === GENESIS_MARKER) || !phc(request.newPasswordHash)) return [44, null];
        const user = find(this.users, request.userId);
        if (!user) return [20, null];
        if (user.id !== actor.id && !this.canManageUsers(actor)) return [41, null];
        if (user.passwordHash !== request.currentPasswordHash) return [42, null];
        user.passwordHash = request.newPasswordHash;
        return [0, null];
      }
      case Operation.updatePermissions: {
        if (!this.canManageUsers(actor)) return [41, null];
        const user = find(this.users, request.userId);
        if (!user) return [20, null];
        if (user.id === 0) return [49, null];
        user.permissions = request.permissions;
        return [0, null];
      }
      case Operation.createPersonalAccessToken: {
        const size = bytes(request.name);
        if (size < 3 || size > 30) return [50, null];
        if (actor.tokens.length >= this.limits.patsPerUserMax) return [52, null];
        if (actor.tokens.some((t) => t.name === request.name)) return [51, null];
        let expiryAtUs: number | null = null;
        if (request.expiryUs !== 0n && request.expiryUs !== U64_MAX) {
          const at = BigInt(timestampUs) + request.expiryUs;
          if (at > BigInt(Number.MAX_SAFE_INTEGER)) return [56, null];
          expiryAtUs = Number(at);
        }
        const hex = Buffer.from(request.tokenHash).toString('hex');
        if (this.users.some((u) => u.tokens.some((t) => Buffer.from(t.tokenHash).toString('hex') === hex))) return [51, null];
        actor.tokens.push({ name: request.name, tokenHash: request.tokenHash, expiryAtUs });
        actor.tokens.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        return [0, null];
      }
      case Operation.deletePersonalAccessToken: {
        const ownerId = request.ownerUserId ?? actor.id;
        if (ownerId !== actor.id && actor.id !== 0) return [41, null];
        const owner = this.users.find((u) => u.id === ownerId);
        if (!owner) return [20, null];
        const token = owner.tokens.find((t) => t.name === request.name);
        if (request.onlyIfExpired) {
          if (!token || token.expiryAtUs === null || token.expiryAtUs > timestampUs) return [0, null];
        } else if (!token) {
          return [20, null];
        }
        owner.tokens = owner.tokens.filter((t) => t !== token);
        return [0, null];
      }
    }
  }

  removeClient(clientId: bigint): void {
    for (const stream of this.streams) {
      for (const topic of stream.topics) {
        for (const group of topic.groups) {
          if (!group.members.some((m) => m.clientId === clientId)) continue;
          group.members = group.members.filter((m) => m.clientId !== clientId);
          this.assign(topic, group);
        }
      }
    }
  }

  /** Where `clientId` is a member, by a walk of every stream and topic: (stream, topic, group). */
  groupsOfClient(clientId: bigint): { streamId: number; topicId: number; groupId: number }[] {
    const out: { streamId: number; topicId: number; groupId: number }[] = [];
    for (const stream of this.streams) {
      for (const topic of stream.topics) {
        for (const group of topic.groups) {
          if (!group.members.some((m) => m.clientId === clientId)) continue;
          out.push({ streamId: stream.id, topicId: topic.id, groupId: group.id });
        }
      }
    }
    return out;
  }

  /** Mirrors `bumpPartitionStats`: false when the partition does not exist. */
  bump(streamId: number, topicId: number, partitionId: number, size: number, messages: number, segments: number): boolean {
    const partition = this.streams.find((s) => s.id === streamId)?.topics.find((t) => t.id === topicId)?.partitions.find((p) => p.id === partitionId);
    if (!partition) return false;
    partition.counters.size += size;
    partition.counters.messages += messages;
    partition.counters.segments += segments;
    return true;
  }

  snapshot(): MetadataMachineSnapshot {
    // The snapshot's partition column: u64 little-endian per partition, ids implicit (dense).
    const createdAtColumn = (values: number[]): Uint8Array => {
      const column = new Uint8Array(values.length * 8);
      const view = new DataView(column.buffer);
      values.forEach((value, index) => view.setBigUint64(index * 8, BigInt(value), true));
      return column;
    };
    const users: UserSnapshot[] = this.users.map((u) => ({
      id: u.id,
      username: u.username,
      passwordHash: u.passwordHash,
      status: u.status as 1 | 2,
      createdAtUs: u.createdAtUs,
      permissions: u.permissions,
      tokens: u.tokens.map((t) => ({ name: t.name, tokenHash: t.tokenHash, expiryAtUs: t.expiryAtUs })),
    }));
    const streams: StreamSnapshot[] = this.streams.map((s) => ({
      id: s.id,
      name: s.name,
      createdAtUs: s.createdAtUs,
      topics: s.topics.map((t) => ({
        id: t.id,
        name: t.name,
        createdAtUs: t.createdAtUs,
        messageExpiryUs: t.messageExpiryUs,
        compressionAlgorithm: t.compressionAlgorithm as 1 | 2,
        maxTopicSizeBytes: t.maxTopicSizeBytes,
        replicationFactor: t.replicationFactor,
        partitionsCreatedAtUs: createdAtColumn(t.partitions.map((p) => p.createdAtUs)),
        consumerGroups: t.groups.map((g) => ({
          id: g.id,
          name: g.name,
          generation: g.generation,
          members: g.members.map((m) => ({ id: m.id, clientId: m.clientId, partitions: m.partitions })),
        })),
        options: t.options.map((option) => ({ key: option.key, value: option.value })),
        purgedAtUs: t.purgedAtUs,
      })),
    }));
    // The model issues no revocations (its generator draws none).
    return { users, streams, revokedTokens: [] };
  }

  /** Per stream: [size, messages] totals of its live partitions; per partition: its counters. */
  counters(): { streams: [number, number, number][]; partitions: [number, number, number, number, number, number][] } {
    const streams: [number, number, number][] = [];
    const partitions: [number, number, number, number, number, number][] = [];
    for (const stream of this.streams) {
      let size = 0;
      let messages = 0;
      for (const topic of stream.topics) {
        for (const partition of topic.partitions) {
          size += partition.counters.size;
          messages += partition.counters.messages;
          // Reads show at least the partition's one active segment (Iggy creates each partition
          // with an empty one and never deletes it), whatever the data plane counted.
          const segments = Math.max(1, partition.counters.segments);
          partitions.push([stream.id, topic.id, partition.id, partition.counters.size, partition.counters.messages, segments]);
        }
      }
      streams.push([stream.id, size, messages]);
    }
    return { streams, partitions };
  }
}

/**
 * Iggy's binary response bodies (the payload after a reply's result section, or the whole body of
 * a non-replicated reply), encoded from the read-side views. Pure: the state machine builds the
 * create replies with these at apply, so every replica caches the same bytes, and the client
 * listener answers reads with them.
 *
 * Layouts are facts from apache/iggy `core/binary_protocol/src/responses/**` (cc269ef70), all
 * little-endian; `name` is u8 size + UTF-8, `text32` is u32 size + UTF-8, an options block in a
 * response is u32 size + TLV entries (`[kind u8][len u32][bytes]`, key then value):
 *   stream      id u32, created_at u64, topics_count u32, size_bytes u64, messages_count u64,
 *               name, options
 *   stream+     stream, then one topic header per topic (GetStream, CreateStream)
 *   streams     stream*  (no count)
 *   topic hdr   id u32, created_at u64, partitions_count u32, message_expiry u64, compression u8,
 *               max_topic_size u64, size_bytes u64, messages_count u64, name, options,
 *               derived_options
 *   topic+      topic hdr, partition* (id u32, created_at u64, segments_count u32,
 *               current_offset u64, size_bytes u64, messages_count u64)
 *   topics      count u32, topic hdr*
 *   group       id u32, partitions_count u32, members_count u32, name
 *   group+      group, member* (id u32, partitions_count u32, partition u32 *)
 *   groups      group* (no count)
 *   user        id u32, created_at u64, status u8, username name, options
 *   user+       user, then permissions: 1 u8 + size u32 + permissions, or 0 u32 when none
 *   users       user* (no count)
 *   permissions global (10 x u8 bool), has_streams u8, then per stream: id u32, 6 x u8 bool,
 *               has_topics u8, per topic: id u32, 4 x u8 bool, has_next u8; then has_next u8
 *   tokens      (name, expiry_at u64 (0 = never))*      raw token: name
 *   login       user_id u32, session u64, server_protocol_version u32, server_version name
 *   client      client_id u32, user_id u32, transport u8, address text32, consumer_groups u32
 *   client+     client, (stream_id u32, topic_id u32, group_id u32)*
 *   clients     client* (no count)
 *   cluster     name text32, count u32, node* (name text32, ip text32, tcp u16, quic u16,
 *               http u16, websocket u16, role u8, status u8)
 *   options     count u32, (key name, kind u8, default text32-as-bytes, description text32)*
 *   stats       see `encodeStats`.
 */
import { BodyWriter } from './body-io.js';
import type {
  ConsumerGroupDetailsView,
  ConsumerGroupView,
  PersonalAccessTokenView,
  StreamDetailsView,
  StreamView,
  TopicDetailsView,
  TopicView,
  UserDetailsView,
  UserView,
} from './queries.js';
import { OptionsScope, optionCatalog, resolveTopicOptions, type OptionSpec } from './options.js';
import {
  CompressionAlgorithm,
  GlobalPermission,
  StreamPermission,
  TopicPermission,
  type PermissionsSnapshot,
} from '../format/snapshot-model.js';

/** Option value kinds (Iggy `HeaderKind`): the ones vrmeta writes. */
export const OptionKind = { string: 2, bool: 3, uint8: 9, uint32: 11, uint64: 12 } as const;

/** One option entry: a string key and a typed value. */
export interface OptionEntry {
  readonly key: string;
  readonly kind: number;
  readonly value: Uint8Array;
}

const encoder = new TextEncoder();

export function optionString(key: string, value: string): OptionEntry {
  return { key, kind: OptionKind.string, value: encoder.encode(value) };
}

export function optionU64(key: string, value: bigint): OptionEntry {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return { key, kind: OptionKind.uint64, value: bytes };
}

/**
 * The topic catalog's keys by name: their specs and their UTF-8 bytes, so that a topic's reply
 * (every catalog option, on each create) neither searches the catalog nor encodes a key again.
 * Bounded by the catalog: other keys are encoded where they are written.
 */
interface CatalogKey {
  readonly spec: OptionSpec;
  readonly bytes: Uint8Array;
}

let catalogKeys: ReadonlyMap<string, CatalogKey> | null = null;

function catalogKey(key: string): CatalogKey | undefined {
  catalogKeys ??= new Map(
    optionCatalog(OptionsScope.topic).map((spec) => [
      spec.key,
      { spec, bytes: encoder.encode(spec.key) },
    ]),
  );
  return catalogKeys.get(key);
}

/** The TLV block of `entries`, keys sorted (Iggy writes options in key order). */
export function encodeOptionsBlock(entries: readonly OptionEntry[]): Uint8Array {
  const writer = new BodyWriter();
  const sorted = [...entries].sort((left, right) =>
    left.key < right.key ? -1 : left.key > right.key ? 1 : 0,
  );
  for (const entry of sorted) {
    const key = catalogKey(entry.key)?.bytes ?? encoder.encode(entry.key);
    writer.u8(OptionKind.string);
    writer.u32(key.byteLength);
    writer.bytes(key);
    writer.u8(entry.kind);
    writer.u32(entry.value.byteLength);
    writer.bytes(entry.value);
  }
  return writer.finish();
}

function optionsPrefixed(writer: BodyWriter, entries: readonly OptionEntry[]): void {
  if (entries.length === 0) {
    // Every stream of a list carries one: no block writer (and its buffer) per stream.
    writer.u32(0);
    return;
  }
  const block = encodeOptionsBlock(entries);
  writer.u32(block.byteLength);
  writer.bytes(block);
}

function u64(value: number | bigint): bigint {
  return typeof value === 'bigint' ? value : BigInt(value);
}

export const COMPRESSION_NAMES: Readonly<Record<CompressionAlgorithm, string>> = {
  [CompressionAlgorithm.none]: 'none',
  [CompressionAlgorithm.gzip]: 'gzip',
};

function optionBool(key: string, value: boolean): OptionEntry {
  return { key, kind: OptionKind.bool, value: Uint8Array.of(value ? 1 : 0) };
}

function optionU32(key: string, value: number): OptionEntry {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, true);
  return { key, kind: OptionKind.uint32, value: bytes };
}

/** One resolved option in its catalog kind (options.ts `OptionSpec.kind`), as Iggy stores it. */
function typedOption(key: string, value: string): OptionEntry {
  switch (catalogKey(key)?.spec.kind) {
    case OptionKind.uint64:
      return optionU64(key, BigInt(value));
    case OptionKind.uint32:
      return optionU32(key, Number(value));
    case OptionKind.bool:
      return optionBool(key, value === 'true');
    default:
      return optionString(key, value);
  }
}

/**
 * A topic's options as Iggy's TopicResponse carries them: the keys the client set (explicit
 * block) and the rest at their effective values (derived block), each in its catalog kind.
 */
export function topicOptionBlocks(
  topic: TopicView,
): { explicit: OptionEntry[]; derived: OptionEntry[] } {
  const explicit: OptionEntry[] = [];
  const derived: OptionEntry[] = [];
  for (const option of resolveTopicOptions(topic, topic.options)) {
    (option.explicit ? explicit : derived).push(typedOption(option.key, option.value));
  }
  return { explicit, derived };
}

function writeStream(writer: BodyWriter, stream: StreamView): void {
  writer.u32(stream.id);
  writer.u64(u64(stream.createdAtUs));
  writer.u32(stream.topicsCount);
  writer.u64(u64(stream.sizeBytes));
  writer.u64(u64(stream.messagesCount));
  writer.name(stream.name);
  optionsPrefixed(writer, []);
}

function writeTopicHeader(writer: BodyWriter, topic: TopicView): void {
  writer.u32(topic.id);
  writer.u64(u64(topic.createdAtUs));
  writer.u32(topic.partitionsCount);
  writer.u64(topic.messageExpiryUs);
  writer.u8(topic.compressionAlgorithm);
  writer.u64(topic.maxTopicSizeBytes);
  writer.u64(u64(topic.sizeBytes));
  writer.u64(u64(topic.messagesCount));
  writer.name(topic.name);
  const blocks = topicOptionBlocks(topic);
  optionsPrefixed(writer, blocks.explicit);
  optionsPrefixed(writer, blocks.derived);
}

/** GetStream and CreateStream: the stream and its topic headers. */
export function encodeStreamDetails(stream: StreamDetailsView): Uint8Array {
  const writer = new BodyWriter();
  writeStream(writer, stream);
  for (const topic of stream.topics) writeTopicHeader(writer, topic);
  return writer.finish();
}

export function encodeStreams(streams: readonly StreamView[]): Uint8Array {
  const writer = new BodyWriter();
  writeStreams(writer, streams);
  return writer.finish();
}

/** GetStreams' entries, appended: a list built in slices writes each slice with this. */
export function writeStreams(writer: BodyWriter, streams: readonly StreamView[]): void {
  for (const stream of streams) writeStream(writer, stream);
}

/** GetTopic and CreateTopic: the header and every partition. */
export function encodeTopicDetails(topic: TopicDetailsView): Uint8Array {
  const writer = new BodyWriter();
  writeTopicHeader(writer, topic);
  for (const partition of topic.partitions) {
    writer.u32(partition.id);
    writer.u64(u64(partition.createdAtUs));
    writer.u32(partition.segmentsCount);
    writer.u64(u64(partition.currentOffset));
    writer.u64(u64(partition.sizeBytes));
    writer.u64(u64(partition.messagesCount));
  }
  return writer.finish();
}

export function encodeTopics(topics: readonly TopicView[]): Uint8Array {
  const writer = new BodyWriter();
  writer.u32(topics.length);
  for (const topic of topics) writeTopicHeader(writer, topic);
  return writer.finish();
}

function writeGroup(writer: BodyWriter, group: ConsumerGroupView): void {
  writer.u32(group.id);
  writer.u32(group.partitionsCount);
  writer.u32(group.membersCount);
  writer.name(group.name);
}

/** GetConsumerGroup and CreateConsumerGroup. Members are numbered by their slot id. */
export function encodeConsumerGroupDetails(group: ConsumerGroupDetailsView): Uint8Array {
  const writer = new BodyWriter();
  writeGroup(writer, group);
  for (const member of group.members) {
    writer.u32(member.id);
    writer.u32(member.partitionsCount);
    for (const partition of member.partitions) writer.u32(partition);
  }
  return writer.finish();
}

export function encodeConsumerGroups(groups: readonly ConsumerGroupView[]): Uint8Array {
  const writer = new BodyWriter();
  for (const group of groups) writeGroup(writer, group);
  return writer.finish();
}

function writeUser(writer: BodyWriter, user: UserView): void {
  writer.u32(user.id);
  writer.u64(u64(user.createdAtUs));
  writer.u8(user.status);
  writer.name(user.username);
  optionsPrefixed(writer, []);
}

/** GetUser and CreateUser. */
export function encodeUserDetails(user: UserDetailsView): Uint8Array {
  const writer = new BodyWriter();
  writeUser(writer, user);
  if (user.permissions === null) {
    // Iggy writes a u32 zero here (not the u8 flag the Some arm starts with); SDKs read the first
    // byte as the flag, so both read "none".
    writer.u32(0);
  } else {
    const permissions = encodePermissions(user.permissions);
    writer.u8(1);
    writer.u32(permissions.byteLength);
    writer.bytes(permissions);
  }
  return writer.finish();
}

export function encodeUsers(users: readonly UserView[]): Uint8Array {
  const writer = new BodyWriter();
  writeUsers(writer, users);
  return writer.finish();
}

/** GetUsers' entries, appended (see `writeStreams`). */
export function writeUsers(writer: BodyWriter, users: readonly UserView[]): void {
  for (const user of users) writeUser(writer, user);
}

const GLOBAL_ORDER = [
  GlobalPermission.manageServers,
  GlobalPermission.readServers,
  GlobalPermission.manageUsers,
  GlobalPermission.readUsers,
  GlobalPermission.manageStreams,
  GlobalPermission.readStreams,
  GlobalPermission.manageTopics,
  GlobalPermission.readTopics,
  GlobalPermission.pollMessages,
  GlobalPermission.sendMessages,
] as const;
const STREAM_ORDER = [
  StreamPermission.manageStream,
  StreamPermission.readStream,
  StreamPermission.manageTopics,
  StreamPermission.readTopics,
  StreamPermission.pollMessages,
  StreamPermission.sendMessages,
] as const;
const TOPIC_ORDER = [
  TopicPermission.manageTopic,
  TopicPermission.readTopic,
  TopicPermission.pollMessages,
  TopicPermission.sendMessages,
] as const;

/** The wire order of the boolean flags: Iggy's field order, which is also our bit order. */
export const PERMISSION_FLAG_ORDER = {
  global: GLOBAL_ORDER,
  stream: STREAM_ORDER,
  topic: TOPIC_ORDER,
} as const;

function writeFlags(writer: BodyWriter, bits: number, order: readonly number[]): void {
  for (const bit of order) writer.u8((bits & bit) !== 0 ? 1 : 0);
}

export function encodePermissions(permissions: PermissionsSnapshot): Uint8Array {
  const writer = new BodyWriter();
  writeFlags(writer, permissions.global, GLOBAL_ORDER);
  writer.u8(permissions.streams.length === 0 ? 0 : 1);
  permissions.streams.forEach((stream, streamIndex) => {
    writer.u32(stream.streamId);
    writeFlags(writer, stream.bits, STREAM_ORDER);
    writer.u8(stream.topics.length === 0 ? 0 : 1);
    stream.topics.forEach((topic, topicIndex) => {
      writer.u32(topic.topicId);
      writeFlags(writer, topic.bits, TOPIC_ORDER);
      writer.u8(topicIndex === stream.topics.length - 1 ? 0 : 1);
    });
    writer.u8(streamIndex === permissions.streams.length - 1 ? 0 : 1);
  });
  return writer.finish();
}

export function encodePersonalAccessTokens(tokens: readonly PersonalAccessTokenView[]): Uint8Array {
  const writer = new BodyWriter();
  for (const token of tokens) {
    writer.name(token.name);
    writer.u64(token.expiryAtUs === null ? 0n : u64(token.expiryAtUs));
  }
  return writer.finish();
}

export function encodeRawPersonalAccessToken(token: string): Uint8Array {
  const writer = new BodyWriter();
  writer.name(token);
  return writer.finish();
}

export function encodeLoginRegister(
  userId: number,
  session: number,
  protocolVersion: number,
  serverVersion: string,
): Uint8Array {
  const writer = new BodyWriter();
  writer.u32(userId);
  writer.u64(u64(session));
  writer.u32(protocolVersion);
  writer.name(serverVersion);
  return writer.finish();
}

/** Iggy's transport discriminant in client listings. */
export const ClientTransport = { tcp: 1, quic: 2, http: 3, websocket: 4 } as const;

/**
 * The transport as Iggy's JSON names it (`ClientInfo.transport`, core/common wire_conversions.rs).
 */
export function clientTransportName(transport: number): string {
  switch (transport) {
    case ClientTransport.tcp:
      return 'TCP';
    case ClientTransport.quic:
      return 'QUIC';
    case ClientTransport.http:
      return 'HTTP';
    case ClientTransport.websocket:
      return 'WebSocket';
    default:
      return 'Unknown';
  }
}

/** `ClientInfoView.userId` of a connection that has not logged in (Iggy `WIRE_NO_USER_ID`). */
export const CLIENT_NO_USER_ID = 0xffff_ffff;

export interface ClientInfoView {
  /** Iggy's u32 client id (per replica, assigned at connect). */
  readonly clientId: number;
  /** u32::MAX before login (Iggy's "no user"). */
  readonly userId: number;
  readonly transport: number;
  readonly address: string;
  readonly consumerGroups: readonly {
    readonly streamId: number;
    readonly topicId: number;
    readonly groupId: number;
  }[];
}

function writeClient(writer: BodyWriter, client: ClientInfoView): void {
  writer.u32(client.clientId);
  writer.u32(client.userId);
  writer.u8(client.transport);
  writer.text32(client.address);
  writer.u32(client.consumerGroups.length);
}

/** GetClient and GetMe. */
export function encodeClientDetails(client: ClientInfoView): Uint8Array {
  const writer = new BodyWriter();
  writeClient(writer, client);
  for (const group of client.consumerGroups) {
    writer.u32(group.streamId);
    writer.u32(group.topicId);
    writer.u32(group.groupId);
  }
  return writer.finish();
}

export function encodeClients(clients: readonly ClientInfoView[]): Uint8Array {
  const writer = new BodyWriter();
  for (const client of clients) writeClient(writer, client);
  return writer.finish();
}

/** Iggy `ClusterNodeRole` and `ClusterNodeStatus`. */
export const ClusterNodeRole = { leader: 0, follower: 1 } as const;
export const ClusterNodeStatus = { healthy: 0, starting: 1, stopping: 2, unreachable: 3 } as const;

export interface ClusterNodeView {
  readonly name: string;
  readonly ip: string;
  readonly tcpPort: number;
  readonly quicPort: number;
  readonly httpPort: number;
  readonly websocketPort: number;
  readonly role: number;
  readonly status: number;
}

export function encodeClusterMetadata(name: string, nodes: readonly ClusterNodeView[]): Uint8Array {
  const writer = new BodyWriter();
  writer.text32(name);
  writer.u32(nodes.length);
  for (const node of nodes) {
    writer.text32(node.name);
    writer.text32(node.ip);
    writer.u16(node.tcpPort);
    writer.u16(node.quicPort);
    writer.u16(node.httpPort);
    writer.u16(node.websocketPort);
    writer.u8(node.role);
    writer.u8(node.status);
  }
  return writer.finish();
}

export interface OptionDescriptorView {
  readonly key: string;
  readonly kind: number;
  readonly defaultValue: Uint8Array;
  readonly description: string;
}

export function encodeDescribeOptions(entries: readonly OptionDescriptorView[]): Uint8Array {
  const writer = new BodyWriter();
  writer.u32(entries.length);
  for (const entry of entries) {
    writer.name(entry.key);
    writer.u8(entry.kind);
    writer.u32(entry.defaultValue.byteLength);
    writer.bytes(entry.defaultValue);
    writer.text32(entry.description);
  }
  return writer.finish();
}

/** Iggy `StatsResponse`, field for field. */
export interface StatsView {
  readonly processId: number;
  readonly cpuUsage: number;
  readonly totalCpuUsage: number;
  readonly memoryUsage: number;
  readonly totalMemory: number;
  readonly availableMemory: number;
  readonly runTimeUs: number;
  readonly startTimeUs: number;
  readonly readBytes: number;
  readonly writtenBytes: number;
  readonly messagesSizeBytes: number;
  readonly streamsCount: number;
  readonly topicsCount: number;
  readonly partitionsCount: number;
  readonly segmentsCount: number;
  readonly messagesCount: number;
  readonly clientsCount: number;
  readonly consumerGroupsCount: number;
  readonly hostname: string;
  readonly osName: string;
  readonly osVersion: string;
  readonly kernelVersion: string;
  readonly serverVersion: string;
  /** Packed major.minor.patch, or null (written as 0). */
  readonly serverSemver: number | null;
  readonly threadsCount: number;
  readonly freeDiskSpace: number;
  readonly totalDiskSpace: number;
}

/**
 * process_id u32, cpu_usage f32, total_cpu_usage f32, memory_usage u64, total_memory u64,
 * available_memory u64, run_time u64, start_time u64, read_bytes u64, written_bytes u64,
 * messages_size_bytes u64, streams_count u32, topics_count u32, partitions_count u32,
 * segments_count u32, messages_count u64, clients_count u32, consumer_groups_count u32,
 * hostname / os_name / os_version / kernel_version / server_version text32, semver u32,
 * cache_metrics count u32 (vrmeta has no message cache: 0), threads_count u32,
 * free_disk_space u64, total_disk_space u64.
 */
export function encodeStats(stats: StatsView): Uint8Array {
  const writer = new BodyWriter();
  writer.u32(stats.processId);
  writer.f32(stats.cpuUsage);
  writer.f32(stats.totalCpuUsage);
  for (const value of [
    stats.memoryUsage,
    stats.totalMemory,
    stats.availableMemory,
    stats.runTimeUs,
    stats.startTimeUs,
    stats.readBytes,
    stats.writtenBytes,
    stats.messagesSizeBytes,
  ]) {
    writer.u64(u64(Math.max(0, Math.floor(value))));
  }
  writer.u32(stats.streamsCount);
  writer.u32(stats.topicsCount);
  writer.u32(stats.partitionsCount);
  writer.u32(stats.segmentsCount);
  writer.u64(u64(stats.messagesCount));
  writer.u32(stats.clientsCount);
  writer.u32(stats.consumerGroupsCount);
  writer.text32(stats.hostname);
  writer.text32(stats.osName);
  writer.text32(stats.osVersion);
  writer.text32(stats.kernelVersion);
  writer.text32(stats.serverVersion);
  writer.u32(stats.serverSemver ?? 0);
  writer.u32(0);
  writer.u32(stats.threadsCount);
  writer.u64(u64(Math.max(0, Math.floor(stats.freeDiskSpace))));
  writer.u64(u64(Math.max(0, Math.floor(stats.totalDiskSpace))));
  return writer.finish();
}

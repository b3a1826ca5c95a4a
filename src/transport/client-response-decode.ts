/**
 * The client side of Iggy's binary responses (the inverse of src/metadata/binary-responses.ts):
 * bytes from the server into the read-side views the HTTP renderer already knows, so a client
 * over the binary protocol returns the same JSON shapes as one over HTTP. Untrusted bytes: a
 * body that does not decode is an error with a reason, never a thrown RangeError.
 */
import { OptionKind, TOPIC_FIELD_OPTION_KEYS, type TopicOptionEntry } from '../metadata/options.js';
import { BodyReader } from '../metadata/body-io.js';
import type * as Views from '../metadata/queries.js';
import type { CompressionAlgorithm, PermissionsSnapshot, UserStatus } from '../format/snapshot-model.js';
import type { ClientInfoView, ClusterNodeView } from '../metadata/binary-responses.js';
import { canonicalPermissions } from '../metadata/permissions.js';
import { readPermissions } from './client-bodies.js';

export class ResponseDecodeError extends Error {
  constructor(what: string, reason: string) {
    super(`undecodable ${what} response: ${reason}`);
    this.name = 'ResponseDecodeError';
  }
}

/** Counters as numbers (exact below 2^53, which no counter reaches). */
function num(value: bigint): number {
  return Number(value);
}

function optionsBlock(reader: BodyReader): void {
  const size = reader.u32('options size');
  reader.bytes(size, 'options');
}

function finish<T>(reader: BodyReader, what: string, value: T): T {
  if (!reader.ok) throw new ResponseDecodeError(what, reader.finish() ?? 'malformed');
  return value;
}

function stream(reader: BodyReader): Views.StreamView {
  const id = reader.u32('id');
  const createdAtUs = num(reader.u64('created_at'));
  const topicsCount = reader.u32('topics_count');
  const sizeBytes = num(reader.u64('size_bytes'));
  const messagesCount = num(reader.u64('messages_count'));
  const name = reader.name('name');
  optionsBlock(reader);
  return { id, name, createdAtUs, topicsCount, sizeBytes, messagesCount };
}

function topicHeader(reader: BodyReader): Views.TopicView {
  const id = reader.u32('id');
  const createdAtUs = num(reader.u64('created_at'));
  const partitionsCount = reader.u32('partitions_count');
  const messageExpiryUs = reader.u64('message_expiry');
  const compressionAlgorithm = reader.u8('compression_algorithm') as CompressionAlgorithm;
  const maxTopicSizeBytes = reader.u64('max_topic_size');
  const sizeBytes = num(reader.u64('size_bytes'));
  const messagesCount = num(reader.u64('messages_count'));
  const name = reader.name('name');
  const size = reader.u32('options size');
  const options = explicitOptions(reader.bytes(size, 'options'));
  optionsBlock(reader);
  return { id, name, createdAtUs, messageExpiryUs, compressionAlgorithm, maxTopicSizeBytes, replicationFactor: 1, partitionsCount, sizeBytes, messagesCount, options };
}

/**
 * The explicit block's entries (TLV: kind u8, len u32, key; kind u8, len u32, value) as the stored
 * form: typed-field keys without text, the runtime knobs as canonical text.
 */
function explicitOptions(block: Uint8Array): TopicOptionEntry[] {
  const reader = new BodyReader(block);
  const entries: TopicOptionEntry[] = [];
  while (reader.ok && reader.remaining > 0) {
    reader.u8('option key kind');
    const key = new TextDecoder().decode(reader.bytes(reader.u32('option key size'), 'option key'));
    const kind = reader.u8('option value kind');
    const value = reader.bytes(reader.u32('option value size'), 'option value');
    if (!reader.ok) break;
    if (TOPIC_FIELD_OPTION_KEYS.includes(key)) {
      entries.push({ key, value: null });
      continue;
    }
    const view = new DataView(value.buffer, value.byteOffset, value.byteLength);
    let text: string;
    if (kind === OptionKind.uint64 && value.byteLength === 8) text = view.getBigUint64(0, true).toString();
    else if (kind === OptionKind.uint32 && value.byteLength === 4) text = String(view.getUint32(0, true));
    else if (kind === OptionKind.bool && value.byteLength === 1) text = String(value[0] !== 0);
    else text = new TextDecoder().decode(value);
    entries.push({ key, value: text });
  }
  return entries;
}

export function decodeStreamDetails(body: Uint8Array): Views.StreamDetailsView {
  const reader = new BodyReader(body);
  const head = stream(reader);
  const topics: Views.TopicView[] = [];
  while (reader.ok && reader.remaining > 0) topics.push(topicHeader(reader));
  return finish(reader, 'stream', { ...head, topics });
}

export function decodeStreams(body: Uint8Array): Views.StreamView[] {
  const reader = new BodyReader(body);
  const streams: Views.StreamView[] = [];
  while (reader.ok && reader.remaining > 0) streams.push(stream(reader));
  return finish(reader, 'streams', streams);
}

export function decodeTopicDetails(body: Uint8Array): Views.TopicDetailsView {
  const reader = new BodyReader(body);
  const head = topicHeader(reader);
  const partitions: Views.PartitionView[] = [];
  for (let index = 0; index < head.partitionsCount && reader.ok; index++) {
    partitions.push({
      id: reader.u32('partition id'),
      createdAtUs: num(reader.u64('partition created_at')),
      segmentsCount: reader.u32('segments_count'),
      currentOffset: num(reader.u64('current_offset')),
      sizeBytes: num(reader.u64('partition size_bytes')),
      messagesCount: num(reader.u64('partition messages_count')),
    });
  }
  return finish(reader, 'topic', { ...head, partitions });
}

export function decodeTopics(body: Uint8Array): Views.TopicView[] {
  const reader = new BodyReader(body);
  const count = reader.u32('topics count');
  const topics: Views.TopicView[] = [];
  for (let index = 0; index < count && reader.ok; index++) topics.push(topicHeader(reader));
  return finish(reader, 'topics', topics);
}

function group(reader: BodyReader): Views.ConsumerGroupView {
  const id = reader.u32('id');
  const partitionsCount = reader.u32('partitions_count');
  const membersCount = reader.u32('members_count');
  return { id, partitionsCount, membersCount, name: reader.name('name') };
}

export function decodeConsumerGroupDetails(body: Uint8Array): Views.ConsumerGroupDetailsView {
  const reader = new BodyReader(body);
  const head = group(reader);
  const members = [];
  for (let index = 0; index < head.membersCount && reader.ok; index++) {
    const id = reader.u32('member id');
    const partitionsCount = reader.u32('member partitions_count');
    const partitions: number[] = [];
    for (let partition = 0; partition < partitionsCount && reader.ok; partition++) partitions.push(reader.u32('member partition'));
    // The wire names a member by its id only; the VSR client id behind it stays on the server.
    members.push({ id, clientId: 0n, partitionsCount, partitions });
  }
  return finish(reader, 'consumer group', { ...head, generation: 0, members });
}

export function decodeConsumerGroups(body: Uint8Array): Views.ConsumerGroupView[] {
  const reader = new BodyReader(body);
  const groups: Views.ConsumerGroupView[] = [];
  while (reader.ok && reader.remaining > 0) groups.push(group(reader));
  return finish(reader, 'consumer groups', groups);
}

function user(reader: BodyReader): Views.UserView {
  const id = reader.u32('id');
  const createdAtUs = num(reader.u64('created_at'));
  const status = reader.u8('status') as UserStatus;
  const username = reader.name('username');
  optionsBlock(reader);
  return { id, username, status, createdAtUs };
}

export function decodeUserDetails(body: Uint8Array): Views.UserDetailsView {
  const reader = new BodyReader(body);
  const head = user(reader);
  let granted: PermissionsSnapshot | null = null;
  // Iggy writes `1, size u32, permissions` or a u32 zero: the first byte says which.
  if (reader.remaining > 0 && reader.u8('has_permissions') === 1) {
    const size = reader.u32('permissions size');
    const inner = new BodyReader(reader.bytes(size, 'permissions'));
    granted = canonicalPermissions(readPermissions(inner));
    if (!inner.ok) throw new ResponseDecodeError('user', inner.finish() ?? 'permissions');
  }
  return finish(reader, 'user', { ...head, permissions: granted });
}

export function decodeUsers(body: Uint8Array): Views.UserView[] {
  const reader = new BodyReader(body);
  const users: Views.UserView[] = [];
  while (reader.ok && reader.remaining > 0) users.push(user(reader));
  return finish(reader, 'users', users);
}

export function decodePersonalAccessTokens(body: Uint8Array): Views.PersonalAccessTokenView[] {
  const reader = new BodyReader(body);
  const tokens: Views.PersonalAccessTokenView[] = [];
  while (reader.ok && reader.remaining > 0) {
    const name = reader.name('name');
    const expiry = reader.u64('expiry_at');
    tokens.push({ name, expiryAtUs: expiry === 0n ? null : num(expiry) });
  }
  return finish(reader, 'personal access tokens', tokens);
}

export function decodeRawToken(body: Uint8Array): string {
  const reader = new BodyReader(body);
  return finish(reader, 'personal access token', reader.name('token'));
}

function client(reader: BodyReader): ClientInfoView & { consumerGroupsCount: number } {
  const clientId = reader.u32('client_id');
  const userId = reader.u32('user_id');
  const transport = reader.u8('transport');
  const address = reader.text32('address', 4096);
  const consumerGroupsCount = reader.u32('consumer_groups_count');
  return { clientId, userId, transport, address, consumerGroups: [], consumerGroupsCount };
}

export function decodeClientDetails(body: Uint8Array): ClientInfoView {
  const reader = new BodyReader(body);
  const head = client(reader);
  const consumerGroups = [];
  for (let index = 0; index < head.consumerGroupsCount && reader.ok; index++) {
    consumerGroups.push({ streamId: reader.u32('stream_id'), topicId: reader.u32('topic_id'), groupId: reader.u32('group_id') });
  }
  return finish(reader, 'client', { ...head, consumerGroups });
}

export function decodeClients(body: Uint8Array): (ClientInfoView & { consumerGroupsCount: number })[] {
  const reader = new BodyReader(body);
  const clients = [];
  while (reader.ok && reader.remaining > 0) clients.push(client(reader));
  return finish(reader, 'clients', clients);
}

export function decodeClusterMetadata(body: Uint8Array): { name: string; nodes: ClusterNodeView[] } {
  const reader = new BodyReader(body);
  const name = reader.text32('name', 4096);
  const count = reader.u32('nodes count');
  const nodes: ClusterNodeView[] = [];
  for (let index = 0; index < count && reader.ok; index++) {
    nodes.push({
      name: reader.text32('node name', 4096),
      ip: reader.text32('ip', 4096),
      tcpPort: reader.u16('tcp'),
      quicPort: reader.u16('quic'),
      httpPort: reader.u16('http'),
      websocketPort: reader.u16('websocket'),
      role: reader.u8('role'),
      status: reader.u8('status'),
    });
  }
  return finish(reader, 'cluster metadata', { name, nodes });
}

/**
 * `VrmetaClient` over Iggy's binary protocol (`tcp` in its options): the metadata methods encode
 * Iggy's request bodies, go through a BinaryClient (one VSR session with request numbers,
 * retries that resume the session, leader following; src/transport/binary-client.ts) and decode
 * Iggy's binary responses into the same JSON shapes the HTTP API returns, so code written
 * against one transport runs on the other.
 *
 * Errors: an Iggy error throws IggyBinaryError (`code` is Iggy's error id, like IggyHttpError's
 * `id`); a read of something that does not exist throws the not-found code the HTTP API would.
 */
import { clientTransportName, encodePermissions } from '../metadata/binary-responses.js';
import { ErrorCode } from '../metadata/errors.js';
import { BinaryClient, IggyBinaryError, type BinaryClientOptions } from '../transport/binary-client.js';
import * as decode from '../transport/client-response-decode.js';
import { concatBytes, encodeIdentifier, encodeName, encodeOption, encodeSecret, encodeU32, encodeU64, encodeU8 } from '../transport/client-requests.js';
import { CommandCode } from '../transport/client-wire.js';
import { Operation } from '../metadata/operations.js';
import { HttpError } from '../http/errors.js';
import { permissionsFromJson } from '../http/permissions-json.js';
import {
  compressionCode,
  formatBytes,
  renderConsumerGroup,
  renderConsumerGroupDetails,
  renderPersonalAccessToken,
  renderStream,
  renderStreamDetails,
  renderTopic,
  renderTopicDetails,
  renderUser,
  renderUserDetails,
  userStatusCode,
} from '../http/render.js';
import type * as Json from '../http/schemas.js';

export { IggyBinaryError };

type Id = number | string;
type U64 = number | bigint;

const encoder = new TextEncoder();

/** The primitives, with a RangeError turned into the Iggy error the server would answer. */
function guard<T>(code: number, encode: () => T): T {
  try {
    return encode();
  } catch (error) {
    if (error instanceof RangeError) throw new IggyBinaryError(code, error.message);
    throw error;
  }
}

const concat = concatBytes;
const u8 = encodeU8;
const u32 = encodeU32;
const u64 = encodeU64;
const option = encodeOption;

function name(value: string): Uint8Array {
  return guard(ErrorCode.invalidFormat, () => encodeName(value));
}

function secret(value: string): Uint8Array {
  return guard(ErrorCode.invalidPassword, () => encodeSecret(value));
}

function id(value: Id): Uint8Array {
  return guard(ErrorCode.invalidIdentifier, () => encodeIdentifier(value));
}

const STRING_KIND = 2;
const U64_KIND = 12;

/** The topic settings as Iggy options: only those set (0 and absent mean the server default). */
function topicOptions(input: { compressionAlgorithm?: 'none' | 'gzip'; messageExpiryUs?: U64; maxTopicSizeBytes?: U64 }): Uint8Array {
  const parts: Uint8Array[] = [];
  if (input.compressionAlgorithm !== undefined) parts.push(option('compression_algorithm', STRING_KIND, encoder.encode(input.compressionAlgorithm)));
  if (input.maxTopicSizeBytes !== undefined) parts.push(option('max_topic_size', U64_KIND, u64(input.maxTopicSizeBytes)));
  if (input.messageExpiryUs !== undefined) parts.push(option('message_expiry', U64_KIND, u64(input.messageExpiryUs)));
  return concat(...parts);
}

function permissionsBlock(json: Json.PermissionsJson | null | undefined): Uint8Array {
  const permissions = permissionsFromJson(json);
  if (permissions instanceof HttpError) throw new IggyBinaryError(ErrorCode.invalidFormat, permissions.message);
  if (permissions === null) return u8(0);
  const bytes = encodePermissions(permissions);
  return concat(u8(1), u32(bytes.byteLength), bytes);
}

function nonEmpty(body: Uint8Array, notFound: number): Uint8Array {
  if (body.byteLength === 0) throw new IggyBinaryError(notFound, 'not found');
  return body;
}

export interface BinaryTransportOptions {
  readonly tcp: readonly string[];
  readonly tls?: BinaryClientOptions['tls'];
  readonly timeoutMs?: number;
}

export class BinaryTransport {
  private readonly options: BinaryTransportOptions;
  private client: BinaryClient | null = null;

  constructor(options: BinaryTransportOptions) {
    this.options = options;
  }

  private session(): BinaryClient {
    if (this.client === null) throw new IggyBinaryError(ErrorCode.unauthenticated, 'log in first (login or loginWithPersonalAccessToken)');
    return this.client;
  }

  async login(credentials: { username: string; password: string } | { token: string }): Promise<Json.IdentityInfoJson> {
    this.client?.close();
    this.client = await BinaryClient.connect({
      addresses: this.options.tcp,
      ...credentials,
      ...(this.options.tls === undefined ? {} : { tls: this.options.tls }),
      ...(this.options.timeoutMs === undefined ? {} : { timeoutMs: this.options.timeoutMs }),
    });
    return { user_id: this.client.userId ?? 0, access_token: null };
  }

  async logout(): Promise<void> {
    await this.client?.logout();
    this.client = null;
  }

  close(): void {
    this.client?.close();
    this.client = null;
  }

  private read(code: number, body: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
    return this.session().read(code, body);
  }

  private write(operation: number, body: Uint8Array): Promise<Uint8Array> {
    return this.session().write(operation, body);
  }

  async ping(): Promise<string> {
    await this.read(CommandCode.ping);
    return 'pong';
  }

  // users

  async getUsers(): Promise<Json.UserInfoJson[]> {
    return decode.decodeUsers(await this.read(CommandCode.getUsers)).map(renderUser);
  }

  async getUser(user: Id): Promise<Json.UserInfoDetailsJson> {
    const me = this.session().userId;
    const target = user === 'me' && me !== null ? me : user;
    return renderUserDetails(decode.decodeUserDetails(nonEmpty(await this.read(CommandCode.getUser, id(target)), ErrorCode.resourceNotFound)));
  }

  async createUser(input: { username: string; password: string; status?: 'active' | 'inactive'; permissions?: Json.PermissionsJson | null }): Promise<Json.UserInfoDetailsJson> {
    const body = concat(name(input.username), secret(input.password), u8(userStatusCode(input.status ?? 'active')), permissionsBlock(input.permissions));
    return renderUserDetails(decode.decodeUserDetails(await this.write(Operation.createUser, body)));
  }

  async updateUser(user: Id, update: { username?: string; status?: 'active' | 'inactive' }): Promise<void> {
    const username = update.username === undefined ? u8(0) : concat(u8(1), name(update.username));
    const status = update.status === undefined ? u8(0) : concat(u8(1), u8(userStatusCode(update.status)));
    await this.write(Operation.updateUser, concat(id(user), username, status));
  }

  async deleteUser(user: Id): Promise<void> {
    await this.write(Operation.deleteUser, id(user));
  }

  async changePassword(user: Id, currentPassword: string, newPassword: string): Promise<void> {
    await this.write(Operation.changePassword, concat(id(user), secret(currentPassword), secret(newPassword)));
  }

  async updatePermissions(user: Id, permissions: Json.PermissionsJson | null): Promise<void> {
    await this.write(Operation.updatePermissions, concat(id(user), permissionsBlock(permissions)));
  }

  // personal access tokens

  async getPersonalAccessTokens(): Promise<Json.PersonalAccessTokenInfoJson[]> {
    return decode.decodePersonalAccessTokens(await this.read(CommandCode.getAccessTokens)).map(renderPersonalAccessToken);
  }

  async createPersonalAccessToken(tokenName: string, expiryUs: U64 = 0): Promise<string> {
    return decode.decodeRawToken(await this.write(Operation.createPersonalAccessToken, concat(name(tokenName), u64(expiryUs))));
  }

  async deletePersonalAccessToken(tokenName: string): Promise<void> {
    await this.write(Operation.deletePersonalAccessToken, name(tokenName));
  }

  // streams

  async getStreams(): Promise<Json.StreamJson[]> {
    return decode.decodeStreams(await this.read(CommandCode.getStreams)).map(renderStream);
  }

  async getStream(stream: Id): Promise<Json.StreamDetailsJson> {
    return renderStreamDetails(decode.decodeStreamDetails(nonEmpty(await this.read(CommandCode.getStream, id(stream)), ErrorCode.streamIdNotFound)));
  }

  async createStream(streamName: string): Promise<Json.StreamDetailsJson> {
    return renderStreamDetails(decode.decodeStreamDetails(await this.write(Operation.createStream, name(streamName))));
  }

  async updateStream(stream: Id, streamName: string): Promise<void> {
    await this.write(Operation.updateStream, concat(id(stream), name(streamName)));
  }

  async deleteStream(stream: Id): Promise<void> {
    await this.write(Operation.deleteStream, id(stream));
  }

  async purgeStream(stream: Id): Promise<void> {
    await this.write(Operation.purgeStream, id(stream));
  }

  // topics, partitions, segments

  async getTopics(stream: Id): Promise<Json.TopicJson[]> {
    return decode.decodeTopics(await this.read(CommandCode.getTopics, id(stream))).map(renderTopic);
  }

  async getTopic(stream: Id, topic: Id): Promise<Json.TopicDetailsJson> {
    return renderTopicDetails(decode.decodeTopicDetails(nonEmpty(await this.read(CommandCode.getTopic, concat(id(stream), id(topic))), ErrorCode.topicIdNotFound)));
  }

  async createTopic(
    stream: Id,
    input: { name: string; partitionsCount: number; compressionAlgorithm?: 'none' | 'gzip'; messageExpiryUs?: U64; maxTopicSizeBytes?: U64; replicationFactor?: number },
  ): Promise<Json.TopicDetailsJson> {
    if (input.replicationFactor !== undefined && input.replicationFactor !== 1) {
      throw new IggyBinaryError(ErrorCode.unsupportedOptionKey, 'the binary protocol carries no replication factor (the server uses 1)');
    }
    const body = concat(id(stream), u32(input.partitionsCount), name(input.name), topicOptions(input));
    return renderTopicDetails(decode.decodeTopicDetails(await this.write(Operation.createTopic, body)));
  }

  async updateTopic(
    stream: Id,
    topic: Id,
    input: { name: string; compressionAlgorithm?: 'none' | 'gzip'; messageExpiryUs?: U64; maxTopicSizeBytes?: U64 },
  ): Promise<void> {
    if (input.compressionAlgorithm !== undefined && compressionCode(input.compressionAlgorithm) === null) {
      throw new IggyBinaryError(ErrorCode.invalidOptionValue, `unknown compression ${input.compressionAlgorithm}`);
    }
    await this.write(Operation.updateTopic, concat(id(stream), id(topic), name(input.name), topicOptions(input)));
  }

  async deleteTopic(stream: Id, topic: Id): Promise<void> {
    await this.write(Operation.deleteTopic, concat(id(stream), id(topic)));
  }

  async purgeTopic(stream: Id, topic: Id): Promise<void> {
    await this.write(Operation.purgeTopic, concat(id(stream), id(topic)));
  }

  async createPartitions(stream: Id, topic: Id, partitionsCount: number): Promise<void> {
    await this.write(Operation.createPartitions, concat(id(stream), id(topic), u32(partitionsCount)));
  }

  async deletePartitions(stream: Id, topic: Id, partitionsCount: number): Promise<void> {
    await this.write(Operation.deletePartitions, concat(id(stream), id(topic), u32(partitionsCount)));
  }

  async deleteSegments(stream: Id, topic: Id, partitionId: number, segmentsCount: number): Promise<void> {
    await this.write(Operation.deleteSegments, concat(id(stream), id(topic), u32(partitionId), u32(segmentsCount)));
  }

  // consumer groups

  async getConsumerGroups(stream: Id, topic: Id): Promise<Json.ConsumerGroupJson[]> {
    return decode.decodeConsumerGroups(await this.read(CommandCode.getConsumerGroups, concat(id(stream), id(topic)))).map(renderConsumerGroup);
  }

  async getConsumerGroup(stream: Id, topic: Id, group: Id): Promise<Json.ConsumerGroupDetailsJson> {
    const body = nonEmpty(await this.read(CommandCode.getConsumerGroup, concat(id(stream), id(topic), id(group))), ErrorCode.consumerGroupIdNotFound);
    return renderConsumerGroupDetails(decode.decodeConsumerGroupDetails(body));
  }

  async createConsumerGroup(stream: Id, topic: Id, groupName: string): Promise<Json.ConsumerGroupDetailsJson> {
    return renderConsumerGroupDetails(decode.decodeConsumerGroupDetails(await this.write(Operation.createConsumerGroup, concat(id(stream), id(topic), name(groupName)))));
  }

  async deleteConsumerGroup(stream: Id, topic: Id, group: Id): Promise<void> {
    await this.write(Operation.deleteConsumerGroup, concat(id(stream), id(topic), id(group)));
  }

  async joinConsumerGroup(stream: Id, topic: Id, group: Id): Promise<void> {
    await this.write(Operation.joinConsumerGroup, concat(id(stream), id(topic), id(group)));
  }

  async leaveConsumerGroup(stream: Id, topic: Id, group: Id): Promise<void> {
    await this.write(Operation.leaveConsumerGroup, concat(id(stream), id(topic), id(group)));
  }

  // system

  async getClusterMetadata(): Promise<Json.ClusterMetadataJson> {
    const metadata = decode.decodeClusterMetadata(await this.read(CommandCode.getClusterMetadata));
    return {
      name: metadata.name,
      nodes: metadata.nodes.map((node) => ({
        name: node.name,
        ip: node.ip,
        endpoints: { tcp: node.tcpPort, quic: node.quicPort, http: node.httpPort, websocket: node.websocketPort },
        role: node.role === 0 ? 'leader' : 'follower',
        status: (['healthy', 'starting', 'stopping', 'unreachable'] as const)[node.status] ?? 'unreachable',
      })) as Json.ClusterMetadataJson['nodes'],
    };
  }

  async getClients(): Promise<Json.ClientInfoJson[]> {
    return decode.decodeClients(await this.read(CommandCode.getClients)).map((client) => ({
      client_id: client.clientId,
      user_id: client.userId === 0xffff_ffff ? null : client.userId,
      address: client.address,
      transport: clientTransportName(client.transport),
      consumer_groups_count: client.consumerGroupsCount,
    }));
  }

  async getClient(clientId: number | bigint | string): Promise<Json.ClientInfoDetailsJson> {
    const body = nonEmpty(await this.read(CommandCode.getClient, u32(Number(clientId))), ErrorCode.invalidClientId);
    const client = decode.decodeClientDetails(body);
    return {
      client_id: client.clientId,
      user_id: client.userId === 0xffff_ffff ? null : client.userId,
      address: client.address,
      transport: clientTransportName(client.transport),
      consumer_groups_count: client.consumerGroups.length,
      consumer_groups: client.consumerGroups.map((group) => ({ stream_id: group.streamId, topic_id: group.topicId, group_id: group.groupId })),
    };
  }

  async getStats(): Promise<Json.StatsJson> {
    const body = await this.read(CommandCode.getStats);
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    let offset = 0;
    const take = (size: number): number => {
      if (offset + size > body.byteLength) throw new decode.ResponseDecodeError('stats', 'truncated');
      const at = offset;
      offset += size;
      return at;
    };
    const u32At = (): number => view.getUint32(take(4), true);
    const u64At = (): number => Number(view.getBigUint64(take(8), true));
    const f32At = (): number => view.getFloat32(take(4), true);
    const text = (): string => {
      const size = u32At();
      return new TextDecoder().decode(body.subarray(take(size), offset));
    };
    const processId = u32At();
    const cpuUsage = f32At();
    const totalCpuUsage = f32At();
    const [memory, total, available, runTime, startTime, read, written, messagesSize] = Array.from({ length: 8 }, u64At);
    const [streams, topics, partitions, segments] = Array.from({ length: 4 }, u32At);
    const messages = u64At();
    const clients = u32At();
    const groups = u32At();
    const [hostname, osName, osVersion, kernelVersion, serverVersion] = Array.from({ length: 5 }, text);
    const semver = u32At();
    const cacheMetrics = u32At();
    take(cacheMetrics * (4 + 4 + 4 + 8 + 8 + 4));
    const threads = u32At();
    const free = u64At();
    const totalDisk = u64At();
    return {
      process_id: processId,
      cpu_usage: cpuUsage,
      total_cpu_usage: totalCpuUsage,
      memory_usage: formatBytes(memory!),
      total_memory: formatBytes(total!),
      available_memory: formatBytes(available!),
      run_time: runTime!,
      start_time: startTime!,
      read_bytes: formatBytes(read!),
      written_bytes: formatBytes(written!),
      messages_size_bytes: formatBytes(messagesSize!),
      streams_count: streams!,
      topics_count: topics!,
      partitions_count: partitions!,
      segments_count: segments!,
      messages_count: messages,
      clients_count: clients,
      consumer_groups_count: groups,
      hostname: hostname!,
      os_name: osName!,
      os_version: osVersion!,
      kernel_version: kernelVersion!,
      iggy_server_version: serverVersion!,
      iggy_server_semver: semver === 0 ? null : semver,
      cache_metrics: {},
      threads_count: threads,
      free_disk_space: formatBytes(free),
      total_disk_space: formatBytes(totalDisk),
    };
  }
}

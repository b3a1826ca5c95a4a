/**
 * A typed TypeScript client for vrmeta's HTTP API (Iggy's metadata REST API plus the operational
 * endpoints), on the global fetch of Node 20 (undici). Part of the package exports; the cluster
 * tests drive servers only through it.
 *
 * Numbers: responses are parsed losslessly (json.ts), so a u64 beyond 2^53 (`message_expiry`,
 * `max_topic_size` u64::MAX sentinels) arrives as an exact `bigint` and smaller values as
 * `number`; requests may pass a `bigint` for any u64 field and it is sent as exact digits.
 *
 * Errors: any non-2xx answer throws IggyHttpError with the status, Iggy's `{id, code, reason,
 * field}` body (when the server sent one), the `iggy-view` header and `Retry-After`. The client
 * never retries by itself: only the caller knows whether a write is safe to repeat (a 503 with
 * `transient_not_committed` may still commit).
 */
import { BinaryTransport, IggyBinaryError, type BinaryTransportOptions } from './client-binary.js';
import { parseJsonLossless, stringifyJsonLossless } from '../http/json.js';
import type {
  ClientInfoDetailsJson,
  ClientInfoJson,
  ClusterMetadataJson,
  ClusterStatusJson,
  ConsumerGroupDetailsJson,
  ConsumerGroupJson,
  ErrorBodyJson,
  IdentityInfoJson,
  PermissionsJson,
  PersonalAccessTokenInfoJson,
  StatsJson,
  StreamDetailsJson,
  StreamJson,
  TopicDetailsJson,
  TopicJson,
  UserInfoDetailsJson,
  UserInfoJson,
} from '../http/schemas.js';

/** Every JSON shape of the API (the response and request types the methods below use). */
export type * from '../http/schemas.js';

/** A resource named by its numeric id or its name (the server parses digits as an id). */
export type Id = number | string;
/** A u64 request field: a number below 2^53, or a bigint for the full range. */
export type U64 = number | bigint;

export const U64_MAX = 0xffff_ffff_ffff_ffffn;

export interface CreateTopicInput {
  readonly name: string;
  readonly partitionsCount: number;
  readonly compressionAlgorithm?: 'none' | 'gzip';
  /** µs; 0 = server default, U64_MAX = never expire. */
  readonly messageExpiryUs?: U64;
  /** bytes; 0 = server default, U64_MAX = unlimited. */
  readonly maxTopicSizeBytes?: U64;
  readonly replicationFactor?: number;
}

export interface UpdateTopicInput {
  readonly name: string;
  readonly compressionAlgorithm?: 'none' | 'gzip';
  readonly messageExpiryUs?: U64;
  readonly maxTopicSizeBytes?: U64;
  readonly replicationFactor?: number;
}

export interface CreateUserInput {
  readonly username: string;
  readonly password: string;
  readonly status?: 'active' | 'inactive';
  readonly permissions?: PermissionsJson | null;
}

export { IggyBinaryError };

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:3000`; optional with `tcp` (then only the HTTP-only methods need it). */
  readonly baseUrl?: string;
  /**
   * host:port of replicas' Iggy binary client ports (`--tcp`): the metadata methods then speak
   * Iggy's binary protocol, with a VSR session, request numbers, retries that resume the session
   * on another replica, and leader following. `login` opens the session. The operational
   * endpoints (`livez`, `ready`, `getClusterStatus`, `getMetrics`, `refreshToken`) stay HTTP.
   */
  readonly tcp?: readonly string[];
  /** TLS on the binary port (`--tcp-tls-cert`): the CA to trust. */
  readonly tls?: BinaryTransportOptions['tls'];
  /** A JWT or a raw personal access token; `login` sets it. */
  readonly token?: string;
  readonly fetch?: typeof fetch;
  /** Per request; default 30 s (a commit during a view change can take seconds). */
  readonly timeoutMs?: number;
}

export interface ResponseMeta {
  readonly status: number;
  /** The `iggy-view` header, or null (absent on /ping). */
  readonly view: number | null;
}

export class IggyHttpError extends Error {
  readonly status: number;
  /** Iggy's error body, or null when the server sent something else. */
  readonly body: ErrorBodyJson | null;
  readonly view: number | null;
  readonly retryAfterSeconds: number | null;

  constructor(status: number, body: ErrorBodyJson | null, text: string, view: number | null, retryAfterSeconds: number | null) {
    super(body === null ? `HTTP ${status}: ${text.slice(0, 200)}` : `HTTP ${status} ${body.code} (${body.id}): ${body.reason}`);
    this.name = 'IggyHttpError';
    this.status = status;
    this.body = body;
    this.view = view;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** Iggy's error id (`id`), or the HTTP status when there is no Iggy body. */
  get id(): number {
    return this.body?.id ?? this.status;
  }

  get code(): string | null {
    return this.body?.code ?? null;
  }
}

const DEFAULT_TIMEOUT_MS = 30_000;

function segment(id: Id): string {
  return encodeURIComponent(String(id));
}

function isErrorBody(value: unknown): value is ErrorBodyJson {
  if (typeof value !== 'object' || value === null) return false;
  const body = value as Record<string, unknown>;
  return typeof body.id === 'number' && typeof body.code === 'string' && typeof body.reason === 'string';
}

export class VrmetaClient {
  readonly baseUrl: string;
  token: string | null;
  /** Meta of the last response (status, view), for tests that assert on the `iggy-view` header. */
  lastResponse: ResponseMeta | null = null;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  /** The binary protocol, when constructed with `tcp`. */
  private readonly binary: BinaryTransport | null;

  constructor(options: ClientOptions) {
    if (options.baseUrl === undefined && options.tcp === undefined) throw new TypeError('pass baseUrl, tcp, or both');
    this.baseUrl = (options.baseUrl ?? '').replace(/\/+$/, '');
    this.binary =
      options.tcp === undefined
        ? null
        : new BinaryTransport({ tcp: options.tcp, ...(options.tls === undefined ? {} : { tls: options.tls }), ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }) });
    this.token = options.token ?? null;
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The binary session's connection is closed (the server logs it out after a grace period). */
  close(): void {
    this.binary?.close();
  }

  /** A client for the same server acting with another credential. */
  withToken(token: string | null): VrmetaClient {
    return new VrmetaClient({ baseUrl: this.baseUrl, ...(token === null ? {} : { token }), fetch: this.fetchImpl, timeoutMs: this.timeoutMs });
  }

  /**
   * One request. Returns the parsed JSON body (lossless), the text for non-JSON answers, or
   * undefined for an empty body; throws IggyHttpError for a non-2xx status.
   */
  async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<unknown> {
    if (this.baseUrl === '') throw new TypeError(`${method} ${path} is HTTP only: this client has no baseUrl`);
    const requestHeaders: Record<string, string> = { ...headers };
    if (this.token !== null) requestHeaders.authorization = `Bearer ${this.token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = stringifyJsonLossless(body);
      requestHeaders['content-type'] = 'application/json';
    }
    const response = await this.fetchImpl(`${this.baseUrl}${path}`, {
      method,
      headers: requestHeaders,
      ...(payload === undefined ? {} : { body: payload }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await response.text();
    const viewHeader = response.headers.get('iggy-view');
    const view = viewHeader === null ? null : Number(viewHeader);
    this.lastResponse = { status: response.status, view };
    const isJson = (response.headers.get('content-type') ?? '').includes('json');
    let parsed: unknown;
    if (text.length > 0) {
      if (isJson) {
        try {
          parsed = parseJsonLossless(text);
        } catch {
          parsed = text;
        }
      } else {
        parsed = text;
      }
    }
    if (!response.ok) {
      const retryAfter = response.headers.get('retry-after');
      throw new IggyHttpError(response.status, isErrorBody(parsed) ? parsed : null, text, view, retryAfter === null ? null : Number(retryAfter));
    }
    return parsed;
  }

  // ------------------------------------------------------------------- health and identity

  async ping(): Promise<string> {
    if (this.binary !== null) return this.binary.ping();
    return (await this.request('GET', '/ping')) as string;
  }

  async livez(): Promise<{ status: string }> {
    return (await this.request('GET', '/livez')) as { status: string };
  }

  /** True when /readyz answers 200; false on its 503. */
  async ready(): Promise<boolean> {
    try {
      await this.request('GET', '/readyz');
      return true;
    } catch (error) {
      if (error instanceof IggyHttpError && error.status === 503) return false;
      throw error;
    }
  }

  /** Logs in and keeps the access token for later requests. */
  async login(username: string, password: string): Promise<IdentityInfoJson> {
    if (this.binary !== null) return this.binary.login({ username, password });
    return this.keep((await this.request('POST', '/users/login', { username, password })) as IdentityInfoJson);
  }

  async loginWithPersonalAccessToken(token: string): Promise<IdentityInfoJson> {
    if (this.binary !== null) return this.binary.login({ token });
    return this.keep((await this.request('POST', '/personal-access-tokens/login', { token })) as IdentityInfoJson);
  }

  /** Refreshes `token` (default: the current one) and keeps the new access token. */
  async refreshToken(token: string | null = this.token): Promise<IdentityInfoJson> {
    return this.keep((await this.request('POST', '/users/refresh-token', { token: token ?? '' })) as IdentityInfoJson);
  }

  async logout(): Promise<void> {
    if (this.binary !== null) return this.binary.logout();
    await this.request('DELETE', '/users/logout');
  }

  private keep(identity: IdentityInfoJson): IdentityInfoJson {
    if (identity.access_token !== null) this.token = identity.access_token.token;
    return identity;
  }

  // ------------------------------------------------------------------------------- users

  async getUsers(): Promise<UserInfoJson[]> {
    if (this.binary !== null) return this.binary.getUsers();
    return (await this.request('GET', '/users')) as UserInfoJson[];
  }

  /** `'me'` reads the caller. */
  async getUser(id: Id): Promise<UserInfoDetailsJson> {
    if (this.binary !== null) return this.binary.getUser(id);
    return (await this.request('GET', `/users/${segment(id)}`)) as UserInfoDetailsJson;
  }

  async createUser(input: CreateUserInput): Promise<UserInfoDetailsJson> {
    if (this.binary !== null) return this.binary.createUser(input);
    return (await this.request('POST', '/users', {
      username: input.username,
      password: input.password,
      status: input.status ?? 'active',
      permissions: input.permissions ?? null,
    })) as UserInfoDetailsJson;
  }

  async updateUser(id: Id, update: { username?: string; status?: 'active' | 'inactive' }): Promise<void> {
    if (this.binary !== null) return this.binary.updateUser(id, update);
    await this.request('PUT', `/users/${segment(id)}`, update);
  }

  async deleteUser(id: Id): Promise<void> {
    if (this.binary !== null) return this.binary.deleteUser(id);
    await this.request('DELETE', `/users/${segment(id)}`);
  }

  async changePassword(id: Id, currentPassword: string, newPassword: string): Promise<void> {
    if (this.binary !== null) return this.binary.changePassword(id, currentPassword, newPassword);
    await this.request('PUT', `/users/${segment(id)}/password`, { current_password: currentPassword, new_password: newPassword });
  }

  async updatePermissions(id: Id, permissions: PermissionsJson | null): Promise<void> {
    if (this.binary !== null) return this.binary.updatePermissions(id, permissions);
    await this.request('PUT', `/users/${segment(id)}/permissions`, { permissions });
  }

  // -------------------------------------------------------------- personal access tokens

  async getPersonalAccessTokens(): Promise<PersonalAccessTokenInfoJson[]> {
    if (this.binary !== null) return this.binary.getPersonalAccessTokens();
    return (await this.request('GET', '/personal-access-tokens')) as PersonalAccessTokenInfoJson[];
  }

  /** Returns the raw token: the server shows it this once. `expiryUs` 0 = never expires. */
  async createPersonalAccessToken(name: string, expiryUs: U64 = 0): Promise<string> {
    if (this.binary !== null) return this.binary.createPersonalAccessToken(name, expiryUs);
    return ((await this.request('POST', '/personal-access-tokens', { name, expiry: expiryUs })) as { token: string }).token;
  }

  async deletePersonalAccessToken(name: string): Promise<void> {
    if (this.binary !== null) return this.binary.deletePersonalAccessToken(name);
    await this.request('DELETE', `/personal-access-tokens/${segment(name)}`);
  }

  // ----------------------------------------------------------------------------- streams

  async getStreams(): Promise<StreamJson[]> {
    if (this.binary !== null) return this.binary.getStreams();
    return (await this.request('GET', '/streams')) as StreamJson[];
  }

  async getStream(id: Id): Promise<StreamDetailsJson> {
    if (this.binary !== null) return this.binary.getStream(id);
    return (await this.request('GET', `/streams/${segment(id)}`)) as StreamDetailsJson;
  }

  async createStream(name: string): Promise<StreamDetailsJson> {
    if (this.binary !== null) return this.binary.createStream(name);
    return (await this.request('POST', '/streams', { name })) as StreamDetailsJson;
  }

  async updateStream(id: Id, name: string): Promise<void> {
    if (this.binary !== null) return this.binary.updateStream(id, name);
    await this.request('PUT', `/streams/${segment(id)}`, { name });
  }

  async deleteStream(id: Id): Promise<void> {
    if (this.binary !== null) return this.binary.deleteStream(id);
    await this.request('DELETE', `/streams/${segment(id)}`);
  }

  async purgeStream(id: Id): Promise<void> {
    if (this.binary !== null) return this.binary.purgeStream(id);
    await this.request('DELETE', `/streams/${segment(id)}/purge`);
  }

  // ------------------------------------------------------------------------------ topics

  async getTopics(stream: Id): Promise<TopicJson[]> {
    if (this.binary !== null) return this.binary.getTopics(stream);
    return (await this.request('GET', `/streams/${segment(stream)}/topics`)) as TopicJson[];
  }

  async getTopic(stream: Id, topic: Id): Promise<TopicDetailsJson> {
    if (this.binary !== null) return this.binary.getTopic(stream, topic);
    return (await this.request('GET', `/streams/${segment(stream)}/topics/${segment(topic)}`)) as TopicDetailsJson;
  }

  async createTopic(stream: Id, input: CreateTopicInput): Promise<TopicDetailsJson> {
    if (this.binary !== null) return this.binary.createTopic(stream, input);
    return (await this.request('POST', `/streams/${segment(stream)}/topics`, {
      name: input.name,
      partitions_count: input.partitionsCount,
      compression_algorithm: input.compressionAlgorithm ?? 'none',
      message_expiry: input.messageExpiryUs ?? 0,
      max_topic_size: input.maxTopicSizeBytes ?? 0,
      replication_factor: input.replicationFactor,
    })) as TopicDetailsJson;
  }

  async updateTopic(stream: Id, topic: Id, input: UpdateTopicInput): Promise<void> {
    if (this.binary !== null) return this.binary.updateTopic(stream, topic, input);
    await this.request('PUT', `/streams/${segment(stream)}/topics/${segment(topic)}`, {
      name: input.name,
      compression_algorithm: input.compressionAlgorithm,
      message_expiry: input.messageExpiryUs,
      max_topic_size: input.maxTopicSizeBytes,
      replication_factor: input.replicationFactor,
    });
  }

  async deleteTopic(stream: Id, topic: Id): Promise<void> {
    if (this.binary !== null) return this.binary.deleteTopic(stream, topic);
    await this.request('DELETE', `/streams/${segment(stream)}/topics/${segment(topic)}`);
  }

  async purgeTopic(stream: Id, topic: Id): Promise<void> {
    if (this.binary !== null) return this.binary.purgeTopic(stream, topic);
    await this.request('DELETE', `/streams/${segment(stream)}/topics/${segment(topic)}/purge`);
  }

  // ------------------------------------------------------------------ partitions, segments

  async createPartitions(stream: Id, topic: Id, partitionsCount: number): Promise<void> {
    if (this.binary !== null) return this.binary.createPartitions(stream, topic, partitionsCount);
    await this.request('POST', `/streams/${segment(stream)}/topics/${segment(topic)}/partitions`, { partitions_count: partitionsCount });
  }

  async deletePartitions(stream: Id, topic: Id, partitionsCount: number): Promise<void> {
    if (this.binary !== null) return this.binary.deletePartitions(stream, topic, partitionsCount);
    await this.request('DELETE', `/streams/${segment(stream)}/topics/${segment(topic)}/partitions?partitions_count=${partitionsCount}`);
  }

  async deleteSegments(stream: Id, topic: Id, partitionId: number, segmentsCount: number): Promise<void> {
    if (this.binary !== null) return this.binary.deleteSegments(stream, topic, partitionId, segmentsCount);
    await this.request(
      'DELETE',
      `/streams/${segment(stream)}/topics/${segment(topic)}/partitions/${partitionId}?segments_count=${segmentsCount}`,
    );
  }

  // ---------------------------------------------------------------------- consumer groups

  async getConsumerGroups(stream: Id, topic: Id): Promise<ConsumerGroupJson[]> {
    if (this.binary !== null) return this.binary.getConsumerGroups(stream, topic);
    return (await this.request('GET', `/streams/${segment(stream)}/topics/${segment(topic)}/consumer-groups`)) as ConsumerGroupJson[];
  }

  async getConsumerGroup(stream: Id, topic: Id, group: Id): Promise<ConsumerGroupDetailsJson> {
    if (this.binary !== null) return this.binary.getConsumerGroup(stream, topic, group);
    return (await this.request(
      'GET',
      `/streams/${segment(stream)}/topics/${segment(topic)}/consumer-groups/${segment(group)}`,
    )) as ConsumerGroupDetailsJson;
  }

  async createConsumerGroup(stream: Id, topic: Id, name: string): Promise<ConsumerGroupDetailsJson> {
    if (this.binary !== null) return this.binary.createConsumerGroup(stream, topic, name);
    return (await this.request('POST', `/streams/${segment(stream)}/topics/${segment(topic)}/consumer-groups`, {
      name,
    })) as ConsumerGroupDetailsJson;
  }

  async deleteConsumerGroup(stream: Id, topic: Id, group: Id): Promise<void> {
    if (this.binary !== null) return this.binary.deleteConsumerGroup(stream, topic, group);
    await this.request('DELETE', `/streams/${segment(stream)}/topics/${segment(topic)}/consumer-groups/${segment(group)}`);
  }

  // ------------------------------------------------------------------------------ system

  async getStats(): Promise<StatsJson> {
    if (this.binary !== null) return this.binary.getStats();
    return (await this.request('GET', '/stats')) as StatsJson;
  }

  async getClusterMetadata(): Promise<ClusterMetadataJson> {
    if (this.binary !== null) return this.binary.getClusterMetadata();
    return (await this.request('GET', '/cluster/metadata')) as ClusterMetadataJson;
  }

  async getClusterStatus(): Promise<ClusterStatusJson> {
    return (await this.request('GET', '/cluster/status')) as ClusterStatusJson;
  }

  async getClients(): Promise<ClientInfoJson[]> {
    if (this.binary !== null) return this.binary.getClients();
    return (await this.request('GET', '/clients')) as ClientInfoJson[];
  }

  async getClient(clientId: number | bigint | string): Promise<ClientInfoDetailsJson> {
    if (this.binary !== null) return this.binary.getClient(clientId);
    return (await this.request('GET', `/clients/${String(clientId)}`)) as ClientInfoDetailsJson;
  }

  /** Prometheus text exposition. */
  async getMetrics(): Promise<string> {
    return (await this.request('GET', '/metrics')) as string;
  }
}

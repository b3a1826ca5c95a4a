/**
 * TypeBox schemas of every request and response of the HTTP API, snake_case as Iggy's JSON
 * (iggy-http-api-and-ops.md §1.3, apache/iggy `core/common/src/types/**` and `core/common/src/http/**`).
 *
 * Requests are validated by TypeBox's compiler (app.ts installs it instead of ajv so that a body
 * field may hold a `bigint`, see json.ts); responses are serialized by fast-json-stringify from
 * these schemas, which writes a `bigint` in an `integer` field as its exact digits.
 *
 * Request schemas check types only; length and range rules live in metadata/validation.ts and run
 * in the handlers, so an over-long name answers Iggy's own code (e.g. 1013 invalid_stream_name)
 * rather than a generic schema error. The 2 MB body limit bounds every string before that.
 */
import { Type, type Static, type TBoolean, type TSchema, type TUnsafe } from 'typebox';

// ---------------------------------------------------------------------------------------------
// Building blocks

const U32_MAX = 0xffff_ffff;

/** A u32 in a response. */
const U32 = Type.Integer({ minimum: 0, maximum: U32_MAX });
/** A u64 that stays below 2^53 (µs timestamps, counters). */
const U64Safe = Type.Integer({ minimum: 0 });
/**
 * A u64 that uses the full range (sentinels): emitted losslessly. The value is a bigint or a
 * number; fast-json-stringify writes both as bare digits for `type: integer`.
 */
const U64Out = Type.Unsafe<bigint | number>(Type.Integer({ minimum: 0 }));
/**
 * A u64 accepted losslessly: the lossless parser yields a number below 2^53 and a bigint above.
 * The upper bound (u64::MAX) is checked in the handler (`toU64`), where a bigint compares exactly.
 */
const U64In = Type.Union([Type.Integer({ minimum: 0 }), Type.BigInt({ minimum: 0 })]);

/**
 * `T | null` in a response, as a JSON type list. fast-json-stringify serializes `anyOf` (what
 * Type.Union emits) through a runtime ajv check that is slow to build; a type list is a plain
 * branch, which halves app startup. Request schemas keep Type.Union (validation only).
 */
function nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const type = (schema as { type?: unknown }).type;
  if (typeof type !== 'string') throw new TypeError('nullable() needs a schema with a single type');
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] } as unknown as TSchema);
}

/** A string from a fixed set (`enum`, not a union of literals, for the same reason as nullable). */
function stringEnum<const V extends readonly string[]>(values: V): TUnsafe<V[number]> {
  return Type.Unsafe<V[number]>({ type: 'string', enum: [...values] } as unknown as TSchema);
}

/** Byte sizes are display strings in Iggy ("0 B"). */
const ByteSize = Type.String();

/**
 * Iggy resource options: key -> {value, explicit}, keys ascending (metadata/options.ts). Values
 * are Iggy's readable strings ("1073741824", "true", "gzip"); streams and users have none.
 */
const ResourceOptions = Type.Record(Type.String(), Type.Object({ value: Type.String(), explicit: Type.Boolean() }));
/** Options a client sends: string key -> string value, checked against the scope's catalog. */
const OptionsIn = Type.Optional(Type.Record(Type.String(), Type.String()));

/** One catalog entry of `GET /options/{scope}` (Iggy `OptionSpec`; `default_value` is bytes). */
export const OptionSpec = Type.Object({
  key: Type.String(),
  kind: Type.String(),
  default_value: Type.Array(Type.Integer({ minimum: 0, maximum: 255 })),
  description: Type.String(),
});
export const OptionsScopeParams = Type.Object({ scope: Type.String() });

export const ErrorBody = Type.Object({
  id: U32,
  code: Type.String(),
  reason: Type.String(),
  // A type list, not anyOf: fast-json-stringify serializes anyOf through a runtime ajv check,
  // and this schema is compiled for every route's 4xx and 5xx responses.
  field: Type.Unsafe<string | null>({ type: ['string', 'null'] }),
});

/** Default error responses, merged into every route's response map. */
export const ERROR_RESPONSES = { '4xx': ErrorBody, '5xx': ErrorBody } as const;

/** No body at all (204s, and Iggy's 200 for create partitions): the handler sends nothing. */
export const Empty = Type.Unsafe<undefined>(Type.Null({ description: 'empty body' }));

export function responses<const T extends Record<number, TSchema>>(success: T): T & typeof ERROR_RESPONSES {
  return { ...success, ...ERROR_RESPONSES };
}

// ---------------------------------------------------------------------------------------------
// Path parameters: ids accept a numeric id or a name (operations.ts `parseIdentifier`).

const PathId = Type.String({ minLength: 1 });
export const StreamParams = Type.Object({ stream_id: PathId });
export const TopicParams = Type.Object({ stream_id: PathId, topic_id: PathId });
export const GroupParams = Type.Object({ stream_id: PathId, topic_id: PathId, group_id: PathId });
export const PartitionParams = Type.Object({
  stream_id: PathId,
  topic_id: PathId,
  partition_id: Type.Integer({ minimum: 0, maximum: U32_MAX }),
});
export const UserParams = Type.Object({ user_id: PathId });
export const PatParams = Type.Object({ name: PathId });
export const ClientParams = Type.Object({ client_id: Type.String({ pattern: '^[0-9]{1,39}$' }) });

// ---------------------------------------------------------------------------------------------
// Identity

export const LoginBody = Type.Object({
  username: Type.String(),
  password: Type.String(),
  version: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  context: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
export const RefreshTokenBody = Type.Object({ token: Type.String() });
export const PatLoginBody = Type.Object({ token: Type.String() });

export const IdentityInfo = Type.Object({
  user_id: U32,
  access_token: nullable(Type.Object({ token: Type.String(), expiry: U64Safe })),
});

// ---------------------------------------------------------------------------------------------
// Users and permissions

function booleans<const K extends string>(keys: readonly K[]): { [P in K]: TBoolean } {
  return Object.fromEntries(keys.map((key) => [key, Type.Boolean()])) as { [P in K]: TBoolean };
}

export const GLOBAL_PERMISSION_KEYS = [
  'manage_servers',
  'read_servers',
  'manage_users',
  'read_users',
  'manage_streams',
  'read_streams',
  'manage_topics',
  'read_topics',
  'poll_messages',
  'send_messages',
] as const;
export const STREAM_PERMISSION_KEYS = ['manage_stream', 'read_stream', 'manage_topics', 'read_topics', 'poll_messages', 'send_messages'] as const;
export const TOPIC_PERMISSION_KEYS = ['manage_topic', 'read_topic', 'poll_messages', 'send_messages'] as const;

/** Map keys are stream / topic ids as decimal strings (JSON object keys), checked in permissions-json.ts. */
export const TopicPermissions = Type.Object(booleans(TOPIC_PERMISSION_KEYS));
export const StreamPermissions = Type.Object({
  ...booleans(STREAM_PERMISSION_KEYS),
  topics: Type.Optional(Type.Union([Type.Record(Type.String(), TopicPermissions), Type.Null()])),
});
export const Permissions = Type.Object({
  global: Type.Object(booleans(GLOBAL_PERMISSION_KEYS)),
  streams: Type.Optional(Type.Union([Type.Record(Type.String(), StreamPermissions), Type.Null()])),
});
/** The same shape for responses (type lists instead of unions, see `nullable`). */
const PermissionsOut = Type.Object({
  global: Type.Object(booleans(GLOBAL_PERMISSION_KEYS)),
  streams: nullable(
    Type.Record(
      Type.String(),
      Type.Object({ ...booleans(STREAM_PERMISSION_KEYS), topics: nullable(Type.Record(Type.String(), TopicPermissions)) }),
    ),
  ),
});

const UserStatusText = stringEnum(['active', 'inactive']);

export const UserInfo = Type.Object({
  id: U32,
  created_at: U64Safe,
  status: UserStatusText,
  username: Type.String(),
  options: ResourceOptions,
});
export const UserInfoDetails = Type.Object({
  id: U32,
  created_at: U64Safe,
  status: UserStatusText,
  username: Type.String(),
  permissions: nullable(PermissionsOut),
  options: ResourceOptions,
});

export const CreateUserBody = Type.Object({
  username: Type.String(),
  password: Type.String(),
  status: UserStatusText,
  permissions: Type.Optional(Type.Union([Permissions, Type.Null()])),
  options: OptionsIn,
});
export const UpdateUserBody = Type.Object({
  username: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  status: Type.Optional(Type.Union([UserStatusText, Type.Null()])),
  options: OptionsIn,
});
export const ChangePasswordBody = Type.Object({ current_password: Type.String(), new_password: Type.String() });
export const UpdatePermissionsBody = Type.Object({ permissions: Type.Optional(Type.Union([Permissions, Type.Null()])) });

// ---------------------------------------------------------------------------------------------
// Personal access tokens

export const PersonalAccessTokenInfo = Type.Object({ name: Type.String(), expiry_at: nullable(U64Safe) });
/** `expiry`: a duration in µs; 0 = server default (never), u64::MAX = never (Iggy `IggyExpiry`). */
export const CreatePatBody = Type.Object({ name: Type.String(), expiry: U64In });
export const RawPersonalAccessToken = Type.Object({ token: Type.String() });

// ---------------------------------------------------------------------------------------------
// Streams, topics, partitions

export const Partition = Type.Object({
  id: U32,
  created_at: U64Safe,
  segments_count: U32,
  current_offset: U64Out,
  size: ByteSize,
  messages_count: U64Out,
});

const CompressionText = stringEnum(['none', 'gzip']);

const topicFields = {
  id: U32,
  created_at: U64Safe,
  name: Type.String(),
  size: ByteSize,
  message_expiry: U64Out,
  compression_algorithm: CompressionText,
  max_topic_size: U64Out,
  messages_count: U64Out,
  partitions_count: U32,
};
export const Topic = Type.Object({ ...topicFields, options: ResourceOptions });
export const TopicDetails = Type.Object({ ...topicFields, partitions: Type.Array(Partition), options: ResourceOptions });

const streamFields = {
  id: U32,
  created_at: U64Safe,
  name: Type.String(),
  size: ByteSize,
  messages_count: U64Out,
  topics_count: U32,
};
export const Stream = Type.Object({ ...streamFields, options: ResourceOptions });
export const StreamDetails = Type.Object({ ...streamFields, topics: Type.Array(Topic), options: ResourceOptions });

export const CreateStreamBody = Type.Object({ name: Type.String(), options: OptionsIn });
export const UpdateStreamBody = Type.Object({ name: Type.String(), options: OptionsIn });

/** Compression is matched case-insensitively in the handler, as Iggy's `from_str`. */
export const CreateTopicBody = Type.Object({
  name: Type.String(),
  partitions_count: Type.Integer({ minimum: 0 }),
  compression_algorithm: Type.String(),
  message_expiry: U64In,
  max_topic_size: U64In,
  /** Not in Iggy's current HTTP body (older clients sent it); absent = 1. */
  replication_factor: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
  options: OptionsIn,
});
export const UpdateTopicBody = Type.Object({
  name: Type.String(),
  compression_algorithm: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  message_expiry: Type.Optional(Type.Union([U64In, Type.Null()])),
  max_topic_size: Type.Optional(Type.Union([U64In, Type.Null()])),
  replication_factor: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
  options: OptionsIn,
});

export const PartitionsCountBody = Type.Object({ partitions_count: Type.Integer({ minimum: 0 }) });
export const PartitionsCountQuery = Type.Object({ partitions_count: Type.Integer({ minimum: 0 }) });
export const SegmentsCountQuery = Type.Object({ segments_count: Type.Integer({ minimum: 0, maximum: U32_MAX }) });

// ---------------------------------------------------------------------------------------------
// Consumer groups

export const ConsumerGroup = Type.Object({ id: U32, name: Type.String(), partitions_count: U32, members_count: U32 });
export const ConsumerGroupMember = Type.Object({ id: U32, partitions_count: U32, partitions: Type.Array(U32) });
export const ConsumerGroupDetails = Type.Object({
  id: U32,
  name: Type.String(),
  partitions_count: U32,
  members_count: U32,
  members: Type.Array(ConsumerGroupMember),
});
export const CreateConsumerGroupBody = Type.Object({ name: Type.String() });

// ---------------------------------------------------------------------------------------------
// System

export const Stats = Type.Object({
  process_id: U32,
  cpu_usage: Type.Number(),
  total_cpu_usage: Type.Number(),
  memory_usage: ByteSize,
  total_memory: ByteSize,
  available_memory: ByteSize,
  run_time: U64Safe,
  start_time: U64Safe,
  read_bytes: ByteSize,
  written_bytes: ByteSize,
  messages_size_bytes: ByteSize,
  streams_count: U32,
  topics_count: U32,
  partitions_count: U32,
  segments_count: U32,
  messages_count: U64Out,
  clients_count: U32,
  consumer_groups_count: U32,
  hostname: Type.String(),
  os_name: Type.String(),
  os_version: Type.String(),
  kernel_version: Type.String(),
  iggy_server_version: Type.String(),
  iggy_server_semver: nullable(U32),
  cache_metrics: Type.Record(Type.String(), Type.Unknown()),
  threads_count: U32,
  free_disk_space: ByteSize,
  total_disk_space: ByteSize,
});

const Port = Type.Integer({ minimum: 0, maximum: 0xffff });
export const ClusterNode = Type.Object({
  name: Type.String(),
  ip: Type.String(),
  endpoints: Type.Object({ tcp: Port, quic: Port, http: Port, websocket: Port }),
  role: stringEnum(['leader', 'follower']),
  status: Type.String(),
});
export const ClusterMetadata = Type.Object({ name: Type.String(), nodes: Type.Array(ClusterNode) });

/** `client_id` is the VSR client id (a u128), emitted as an exact integer. */
const clientFields = {
  client_id: U32,
  user_id: nullable(U32),
  address: Type.String(),
  transport: Type.String(),
  consumer_groups_count: U32,
};
export const ClientInfo = Type.Object(clientFields);
export const ClientInfoDetails = Type.Object({
  ...clientFields,
  consumer_groups: Type.Array(Type.Object({ stream_id: U32, topic_id: U32, group_id: U32 })),
});

/** DESIGN.md §2.3 `/cluster/status`. */
export const ClusterStatus = Type.Object({
  replica: Type.Integer({ minimum: 0 }),
  replica_count: Type.Integer({ minimum: 1 }),
  view: U64Safe,
  status: stringEnum(['normal', 'view_change', 'recovering']),
  primary: Type.Integer({ minimum: 0 }),
  op: U64Safe,
  commit_min: U64Safe,
  commit_max: U64Safe,
  checkpoint_op: U64Safe,
  checkpoint_id: Type.String(),
  heartbeat_ms: Type.Integer({ minimum: 1 }),
  election_timeout_ms: Type.Integer({ minimum: 1 }),
  state_transfer: nullable(
    Type.Object({
      stage: stringEnum(['awaiting_target', 'fetching', 'preparing', 'installing']),
      peer: nullable(Type.Integer({ minimum: 0 })),
      artifact: nullable(Type.String()),
      bytes_done: U64Safe,
      bytes_total: U64Safe,
      started_at_ms: U64Safe,
      eta_ms: nullable(U64Safe),
    }),
  ),
  replicas: Type.Array(
    Type.Object({
      replica: Type.Integer({ minimum: 0 }),
      address: Type.String(),
      connected: Type.Boolean(),
      commit_max: nullable(U64Safe),
      lag_ops: nullable(Type.Integer()),
    }),
  ),
});

export const Health = Type.Object({ status: Type.String() });

export type ErrorBodyJson = Static<typeof ErrorBody>;
export type IdentityInfoJson = Static<typeof IdentityInfo>;
export type PermissionsJson = Static<typeof Permissions>;
export type PermissionsOutJson = Static<typeof PermissionsOut>;
export type UserInfoJson = Static<typeof UserInfo>;
export type UserInfoDetailsJson = Static<typeof UserInfoDetails>;
export type PersonalAccessTokenInfoJson = Static<typeof PersonalAccessTokenInfo>;
export type StreamJson = Static<typeof Stream>;
export type StreamDetailsJson = Static<typeof StreamDetails>;
export type TopicJson = Static<typeof Topic>;
export type TopicDetailsJson = Static<typeof TopicDetails>;
export type PartitionJson = Static<typeof Partition>;
export type ConsumerGroupJson = Static<typeof ConsumerGroup>;
export type ConsumerGroupDetailsJson = Static<typeof ConsumerGroupDetails>;
export type StatsJson = Static<typeof Stats>;
export type ClusterMetadataJson = Static<typeof ClusterMetadata>;
export type ClientInfoJson = Static<typeof ClientInfo>;
export type ClientInfoDetailsJson = Static<typeof ClientInfoDetails>;
export type ClusterStatusJson = Static<typeof ClusterStatus>;
export type CreateUserBodyJson = Static<typeof CreateUserBody>;
export type UpdateUserBodyJson = Static<typeof UpdateUserBody>;
export type CreateTopicBodyJson = Static<typeof CreateTopicBody>;
export type UpdateTopicBodyJson = Static<typeof UpdateTopicBody>;

/**
 * The state machine's operations: which protocol operation codes it applies (128..=150) and the
 * decoded form of every metadata operation body. The binary layouts live in operation-codec.ts.
 *
 * What a body may carry is the security boundary of the log: passwords arrive as Argon2id PHC
 * strings and personal access tokens as the SHA-256 of the raw token, both computed on the node
 * that received the request (src/http/secrets.ts). The acting user never appears in a body: apply
 * reads it from `ApplyInput.userId`, which the primary stamps from the client table.
 */
import { STATE_MACHINE_OPERATION_MIN } from '../vsr/header-types.js';
import { assert } from '../stdx/assert.js';
import type { TopicOptionEntry } from './options.js';
import type { PermissionsSnapshot } from '../format/snapshot-model.js';

/**
 * The state machine's operation codes: the u8 `operation` of Request, Prepare and Reply headers
 * at or above the protocol's STATE_MACHINE_OPERATION_MIN (src/vsr/header-types.ts `Operation`
 * holds the protocol's own codes, 0..=4). 64..=68 are Iggy's internal operations (never
 * client-allowed), 128..=150 the ones this state machine applies, 160..=162 Iggy's partition
 * operations.
 */
export const Operation = {
  // Internal operations (64..127) of Iggy's server; vrmeta carries resolved values in the client
  // operations' bodies instead, so these never reach apply.
  createTopicWithAssignments: 64,
  createPartitionsWithAssignments: 65,
  removeConsumerGroupMember: 66,
  completeConsumerGroupRevocation: 67,
  truncatePartition: 68,
  createStream: 128,
  updateStream: 129,
  deleteStream: 130,
  purgeStream: 131,
  createTopic: 132,
  updateTopic: 133,
  deleteTopic: 134,
  purgeTopic: 135,
  createPartitions: 136,
  deletePartitions: 137,
  deleteSegments: 138,
  createConsumerGroup: 139,
  deleteConsumerGroup: 140,
  createUser: 141,
  updateUser: 142,
  deleteUser: 143,
  changePassword: 144,
  updatePermissions: 145,
  createPersonalAccessToken: 146,
  deletePersonalAccessToken: 147,
  joinConsumerGroup: 148,
  leaveConsumerGroup: 149,
  /**
   * vrmeta extension (Iggy's metadata list ends at 149 and its partition operations start at
   * 160): a logout revokes the access token it was called with, on every replica.
   */
  revokeAccessToken: 150,
  sendMessages: 160,
  storeConsumerOffset: 161,
  deleteConsumerOffset: 162,
} as const;
export type Operation = (typeof Operation)[keyof typeof Operation];
assert(
  Object.values(Operation).every((code) => code >= STATE_MACHINE_OPERATION_MIN && code <= 0xff),
  'state machine operation codes lie in STATE_MACHINE_OPERATION_MIN..=255',
);

export const METADATA_OPERATION_MIN = Operation.createStream;
export const METADATA_OPERATION_MAX = Operation.revokeAccessToken;

/** The operations this state machine applies (128..=150). */
export function isStateMachineOperation(operation: number): operation is MetadataOperation {
  if (!Number.isInteger(operation)) return false;
  return operation >= METADATA_OPERATION_MIN && operation <= METADATA_OPERATION_MAX;
}

export type MetadataOperation = Extract<
  Operation,
  | 128 | 129 | 130 | 131 | 132 | 133 | 134 | 135 | 136 | 137 | 138 | 139
  | 140 | 141 | 142 | 143 | 144 | 145 | 146 | 147 | 148 | 149 | 150
>;

/** A resource named by its numeric id or by its name (Iggy `Identifier`). */
export type Identifier =
  | { readonly kind: 'id'; readonly id: number }
  | { readonly kind: 'name'; readonly name: string };

export function idOf(id: number): Identifier {
  return { kind: 'id', id };
}

export function nameOf(name: string): Identifier {
  return { kind: 'name', name };
}

const U32_MAX = 0xffff_ffff;

/**
 * Path segments (`/streams/{stream_id}`) accept an id or a name: a purely numeric string that fits
 * a u32 is an id, anything else a name (Iggy `Identifier::from_str_value`). Returns null for the
 * empty string.
 */
export function parseIdentifier(text: string): Identifier | null {
  if (text.length === 0) return null;
  if (/^[0-9]{1,10}$/.test(text)) {
    const id = Number(text);
    if (id <= U32_MAX) return idOf(id);
  }
  return nameOf(text);
}

export interface CreateStreamRequest {
  readonly operation: typeof Operation.createStream;
  readonly name: string;
}
export interface UpdateStreamRequest {
  readonly operation: typeof Operation.updateStream;
  readonly streamId: Identifier;
  readonly name: string;
}
export interface DeleteStreamRequest {
  readonly operation: typeof Operation.deleteStream;
  readonly streamId: Identifier;
}
export interface PurgeStreamRequest {
  readonly operation: typeof Operation.purgeStream;
  readonly streamId: Identifier;
}
/** Settings are resolved by the primary (defaults.ts): no 0 sentinels reach the log. */
export interface CreateTopicRequest {
  readonly operation: typeof Operation.createTopic;
  readonly streamId: Identifier;
  readonly partitionsCount: number;
  readonly compressionAlgorithm: number;
  readonly messageExpiryUs: bigint;
  readonly maxTopicSizeBytes: bigint;
  readonly replicationFactor: number;
  readonly name: string;
  /**
   * The catalog options the client set explicitly, ascending by key (options.ts
   * `TopicOptionEntry`): runtime knobs with their canonical text, typed settings with null.
   */
  readonly options: readonly TopicOptionEntry[];
}
/**
 * Absent (null) settings keep their current value; present ones are resolved values, and apply
 * marks their option keys explicit (Iggy: "an updated key is explicit").
 */
export interface UpdateTopicRequest {
  readonly operation: typeof Operation.updateTopic;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly name: string;
  readonly compressionAlgorithm: number | null;
  readonly messageExpiryUs: bigint | null;
  readonly maxTopicSizeBytes: bigint | null;
  readonly replicationFactor: number | null;
}
export interface DeleteTopicRequest {
  readonly operation: typeof Operation.deleteTopic;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
}
export interface PurgeTopicRequest {
  readonly operation: typeof Operation.purgeTopic;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
}
export interface CreatePartitionsRequest {
  readonly operation: typeof Operation.createPartitions;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly partitionsCount: number;
}
export interface DeletePartitionsRequest {
  readonly operation: typeof Operation.deletePartitions;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly partitionsCount: number;
}
export interface DeleteSegmentsRequest {
  readonly operation: typeof Operation.deleteSegments;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly partitionId: number;
  readonly segmentsCount: number;
}
export interface CreateConsumerGroupRequest {
  readonly operation: typeof Operation.createConsumerGroup;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly name: string;
}
export interface DeleteConsumerGroupRequest {
  readonly operation: typeof Operation.deleteConsumerGroup;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly groupId: Identifier;
}
export interface JoinConsumerGroupRequest {
  readonly operation: typeof Operation.joinConsumerGroup;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly groupId: Identifier;
}
export interface LeaveConsumerGroupRequest {
  readonly operation: typeof Operation.leaveConsumerGroup;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly groupId: Identifier;
}
export interface CreateUserRequest {
  readonly operation: typeof Operation.createUser;
  readonly username: string;
  /** Argon2id PHC string, never the password. */
  readonly passwordHash: string;
  readonly status: number;
  readonly permissions: PermissionsSnapshot | null;
}
export interface UpdateUserRequest {
  readonly operation: typeof Operation.updateUser;
  readonly userId: Identifier;
  readonly username: string | null;
  readonly status: number | null;
}
export interface DeleteUserRequest {
  readonly operation: typeof Operation.deleteUser;
  readonly userId: Identifier;
}
/**
 * The receiving node verified the current password against `currentPasswordHash` (the stored
 * hash it read); apply refuses with InvalidCredentials if the stored hash changed since, so two
 * racing password changes cannot both win on a stale verification.
 */
export interface ChangePasswordRequest {
  readonly operation: typeof Operation.changePassword;
  readonly userId: Identifier;
  readonly currentPasswordHash: string;
  readonly newPasswordHash: string;
}
export interface UpdatePermissionsRequest {
  readonly operation: typeof Operation.updatePermissions;
  readonly userId: Identifier;
  readonly permissions: PermissionsSnapshot | null;
}
/** Always for the acting user. `expiryUs` is a duration: 0 or u64::MAX = never expires. */
export interface CreatePersonalAccessTokenRequest {
  readonly operation: typeof Operation.createPersonalAccessToken;
  readonly name: string;
  readonly expiryUs: bigint;
  /** SHA-256 of the raw token (PAT_TOKEN_HASH_SIZE bytes). */
  readonly tokenHash: Uint8Array;
}
/**
 * `ownerUserId` null = the acting user's token; another user's id is allowed to root only (an
 * expired-token cleaner runs as root). `onlyIfExpired` makes the delete a no-op unless the token
 * is expired at the op's timestamp, so a token re-created with a fresh expiry survives a cleaner
 * pass that read the old one (Iggy's `only_if_expired`).
 */
export interface DeletePersonalAccessTokenRequest {
  readonly operation: typeof Operation.deletePersonalAccessToken;
  readonly name: string;
  readonly ownerUserId: number | null;
  readonly onlyIfExpired: boolean;
}

/**
 * Revokes the access token whose id is `jti` until `expiryAtUs` (its own expiry plus a clock
 * margin): every replica refuses it from the commit on. Acts for the acting user, who can only
 * know a jti by holding the token (it is inside the signed JWT).
 */
export interface RevokeAccessTokenRequest {
  readonly operation: typeof Operation.revokeAccessToken;
  /** ACCESS_TOKEN_ID_SIZE bytes: the JWT `jti` (a UUID) as bytes. */
  readonly jti: Uint8Array;
  /** u64 µs, below 2^53. */
  readonly expiryAtUs: number;
}

export type MetadataRequest =
  | CreateStreamRequest
  | UpdateStreamRequest
  | DeleteStreamRequest
  | PurgeStreamRequest
  | CreateTopicRequest
  | UpdateTopicRequest
  | DeleteTopicRequest
  | PurgeTopicRequest
  | CreatePartitionsRequest
  | DeletePartitionsRequest
  | DeleteSegmentsRequest
  | CreateConsumerGroupRequest
  | DeleteConsumerGroupRequest
  | JoinConsumerGroupRequest
  | LeaveConsumerGroupRequest
  | CreateUserRequest
  | UpdateUserRequest
  | DeleteUserRequest
  | ChangePasswordRequest
  | UpdatePermissionsRequest
  | CreatePersonalAccessTokenRequest
  | DeletePersonalAccessTokenRequest
  | RevokeAccessTokenRequest;

/**
 * Success payloads. Create{Stream,Topic,ConsumerGroup,User} and DeleteUser reply with the
 * affected id as a u32 LE (DeleteUser's lets the node evict the deleted user's sessions: user ids
 * are reused, so a surviving session would act as whoever gets the id next). Every other success
 * and every rejection has an empty payload.
 */
export const ID_PAYLOAD_SIZE = 4;

export function encodeIdPayload(id: number): Uint8Array {
  const payload = new Uint8Array(ID_PAYLOAD_SIZE);
  new DataView(payload.buffer).setUint32(0, id, true);
  return payload;
}

export function decodeIdPayload(payload: Uint8Array): number | null {
  if (payload.byteLength !== ID_PAYLOAD_SIZE) return null;
  return new DataView(payload.buffer, payload.byteOffset, ID_PAYLOAD_SIZE).getUint32(0, true);
}

/**
 * Shared fixtures for the metadata state machine tests: a driver that encodes requests and applies
 * them with increasing ops and timestamps, and Argon2id-shaped hashes that cost nothing to make
 * (apply checks the PHC shape; real hashing is covered by the secrets tests).
 */
import { MESSAGE_BODY_SIZE_MAX } from '../../src/constants.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { createdIdOf } from '../../src/metadata/create-replies.js';
import { idOf, nameOf, Operation, type Identifier, type MetadataRequest } from '../../src/metadata/operations.js';
import { MetadataStateMachine, type MetadataStateMachineOptions } from '../../src/metadata/state-machine.js';
import { CompressionAlgorithm, SNAPSHOT_FORMAT_VERSION, U64_MAX, type MetadataSnapshot, type PermissionsSnapshot } from '../../src/format/snapshot-model.js';
import { GENESIS_PASSWORD_MARKER, type MetadataLimits } from '../../src/metadata/validation.js';
import type { ApplyResult } from '../../src/vsr/state-machine.js';
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** A syntactically valid Argon2id PHC string, distinct per `seed`. */
export function fakeHash(seed: number): string {
  let salt = '';
  let digest = '';
  let state = (seed * 2_654_435_761) >>> 0;
  for (let index = 0; index < 22; index++) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    salt += B64[state >>> 26];
  }
  for (let index = 0; index < 43; index++) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    digest += B64[state >>> 26];
  }
  return `$argon2id$v=19$m=19456,t=2,p=1$${salt}$${digest}`;
}

/** A known PHC for a genesis with an explicit root hash (still accepted there). */
export const ROOT_HASH = fakeHash(0);
/** A replica's genesis: root's stored hash is the marker, identical on every replica. */
export const GENESIS = { rootUsername: 'iggy', rootPasswordHash: GENESIS_PASSWORD_MARKER } as const;
export const ROOT = 0;

export function newMachine(limits?: Partial<MetadataLimits>): MetadataStateMachine {
  const options: MetadataStateMachineOptions = limits === undefined ? {} : { limits };
  return new MetadataStateMachine(GENESIS, options);
}

export function tokenHash(seed: number): Uint8Array {
  const out = new Uint8Array(32);
  let state = (seed + 1) >>> 0;
  for (let index = 0; index < 32; index++) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    out[index] = state >>> 24;
  }
  return out;
}

/** Applies requests with op = 1, 2, ... and timestamps 1_000_000 apart. */
export class Driver {
  op = 0;
  timestampUs = 1_000_000_000;
  readonly sm: MetadataStateMachine;

  constructor(sm: MetadataStateMachine = newMachine()) {
    this.sm = sm;
  }

  raw(userId: number, operation: number, body: Uint8Array, clientId = 1n): ApplyResult {
    this.op += 1;
    this.timestampUs += 1_000_000;
    return this.sm.apply({ op: this.op, operation, timestampUs: this.timestampUs, userId, clientId, body });
  }

  apply(userId: number, request: MetadataRequest, clientId = 1n): ApplyResult {
    return this.raw(userId, request.operation, encodeRequest(request), clientId);
  }

  /** Applies and returns the error code. */
  code(userId: number, request: MetadataRequest, clientId = 1n): number {
    return this.apply(userId, request, clientId).errorCode;
  }

  /** Applies a create that must succeed and returns the created id. */
  created(userId: number, request: MetadataRequest, clientId = 1n): number {
    const result = this.apply(userId, request, clientId);
    if (result.errorCode !== 0) throw new Error(`expected success, got ${result.errorCode}`);
    const id = createdIdOf(result.payload);
    if (id === null) throw new Error('expected an id payload');
    return id;
  }
}

// Request builders: identifiers accept a number (id) or a string (name).
export function ident(value: number | string): Identifier {
  return typeof value === 'number' ? idOf(value) : nameOf(value);
}

export const req = {
  createStream: (name: string): MetadataRequest => ({ operation: Operation.createStream, name }),
  updateStream: (stream: number | string, name: string): MetadataRequest => ({ operation: Operation.updateStream, streamId: ident(stream), name }),
  deleteStream: (stream: number | string): MetadataRequest => ({ operation: Operation.deleteStream, streamId: ident(stream) }),
  purgeStream: (stream: number | string): MetadataRequest => ({ operation: Operation.purgeStream, streamId: ident(stream) }),
  createTopic: (
    stream: number | string,
    name: string,
    partitionsCount = 1,
    settings: Partial<{ compressionAlgorithm: number; messageExpiryUs: bigint; maxTopicSizeBytes: bigint; replicationFactor: number }> = {},
  ): MetadataRequest => ({
    operation: Operation.createTopic,
    streamId: ident(stream),
    partitionsCount,
    compressionAlgorithm: settings.compressionAlgorithm ?? CompressionAlgorithm.none,
    messageExpiryUs: settings.messageExpiryUs ?? U64_MAX,
    maxTopicSizeBytes: settings.maxTopicSizeBytes ?? U64_MAX,
    options: [],
    replicationFactor: settings.replicationFactor ?? 1,
    name,
  }),
  updateTopic: (
    stream: number | string,
    topic: number | string,
    name: string,
    settings: Partial<{ compressionAlgorithm: number; messageExpiryUs: bigint; maxTopicSizeBytes: bigint; replicationFactor: number }> = {},
  ): MetadataRequest => ({
    operation: Operation.updateTopic,
    streamId: ident(stream),
    topicId: ident(topic),
    name,
    compressionAlgorithm: settings.compressionAlgorithm ?? null,
    messageExpiryUs: settings.messageExpiryUs ?? null,
    maxTopicSizeBytes: settings.maxTopicSizeBytes ?? null,
    replicationFactor: settings.replicationFactor ?? null,
  }),
  deleteTopic: (stream: number | string, topic: number | string): MetadataRequest => ({ operation: Operation.deleteTopic, streamId: ident(stream), topicId: ident(topic) }),
  purgeTopic: (stream: number | string, topic: number | string): MetadataRequest => ({ operation: Operation.purgeTopic, streamId: ident(stream), topicId: ident(topic) }),
  createPartitions: (stream: number | string, topic: number | string, partitionsCount: number): MetadataRequest => ({
    operation: Operation.createPartitions,
    streamId: ident(stream),
    topicId: ident(topic),
    partitionsCount,
  }),
  deletePartitions: (stream: number | string, topic: number | string, partitionsCount: number): MetadataRequest => ({
    operation: Operation.deletePartitions,
    streamId: ident(stream),
    topicId: ident(topic),
    partitionsCount,
  }),
  deleteSegments: (stream: number | string, topic: number | string, partitionId: number, segmentsCount = 1): MetadataRequest => ({
    operation: Operation.deleteSegments,
    streamId: ident(stream),
    topicId: ident(topic),
    partitionId,
    segmentsCount,
  }),
  createGroup: (stream: number | string, topic: number | string, name: string): MetadataRequest => ({
    operation: Operation.createConsumerGroup,
    streamId: ident(stream),
    topicId: ident(topic),
    name,
  }),
  deleteGroup: (stream: number | string, topic: number | string, group: number | string): MetadataRequest => ({
    operation: Operation.deleteConsumerGroup,
    streamId: ident(stream),
    topicId: ident(topic),
    groupId: ident(group),
  }),
  joinGroup: (stream: number | string, topic: number | string, group: number | string): MetadataRequest => ({
    operation: Operation.joinConsumerGroup,
    streamId: ident(stream),
    topicId: ident(topic),
    groupId: ident(group),
  }),
  leaveGroup: (stream: number | string, topic: number | string, group: number | string): MetadataRequest => ({
    operation: Operation.leaveConsumerGroup,
    streamId: ident(stream),
    topicId: ident(topic),
    groupId: ident(group),
  }),
  createUser: (username: string, permissions: PermissionsSnapshot | null = null, passwordHash = fakeHash(username.length + 7), status = 1): MetadataRequest => ({
    operation: Operation.createUser,
    username,
    passwordHash,
    status,
    permissions,
  }),
  updateUser: (user: number | string, username: string | null, status: number | null = null): MetadataRequest => ({
    operation: Operation.updateUser,
    userId: ident(user),
    username,
    status,
  }),
  deleteUser: (user: number | string): MetadataRequest => ({ operation: Operation.deleteUser, userId: ident(user) }),
  changePassword: (user: number | string, currentPasswordHash: string, newPasswordHash: string): MetadataRequest => ({
    operation: Operation.changePassword,
    userId: ident(user),
    currentPasswordHash,
    newPasswordHash,
  }),
  updatePermissions: (user: number | string, permissions: PermissionsSnapshot | null): MetadataRequest => ({
    operation: Operation.updatePermissions,
    userId: ident(user),
    permissions,
  }),
  createPat: (name: string, seed = 1, expiryUs = 0n): MetadataRequest => ({
    operation: Operation.createPersonalAccessToken,
    name,
    expiryUs,
    tokenHash: tokenHash(seed),
  }),
  deletePat: (name: string, ownerUserId: number | null = null, onlyIfExpired = false): MetadataRequest => ({
    operation: Operation.deletePersonalAccessToken,
    name,
    ownerUserId,
    onlyIfExpired,
  }),
};

/** Global-only permissions. */
export function globalPermissions(bits: number): PermissionsSnapshot {
  return { global: bits, streams: [] };
}

/** The state-machine part wrapped into a full snapshot model, for the encoder. */
export function fullSnapshot(part: MetadataMachineSnapshot, sequenceNumber = 1): MetadataSnapshot {
  return {
    version: SNAPSHOT_FORMAT_VERSION,
    createdAtUs: 1,
    sequenceNumber,
    users: part.users,
    streams: part.streams,
    clientTable: [],
    writerRelease: 0,
    revokedTokens: part.revokedTokens,
  };
}

export { MESSAGE_BODY_SIZE_MAX };

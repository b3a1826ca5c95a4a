/**
 * What each Iggy binary command means here: a replicated command's wire body becomes the
 * operation body the log carries (passwords hashed, a personal access token minted, topic
 * settings resolved: the same rules as the HTTP edge, src/http/routes/*), and a non-replicated
 * command is answered from the local state with Iggy's binary response.
 *
 * Verdicts follow Iggy's dispatch (`core/server/src/dispatch.rs`, cc269ef70): a body that does
 * not decode is a protocol error (the session answers InvalidRequestBody); a body that decodes
 * but fails a rule answers that rule's Iggy code; a read of a missing stream, topic, user or
 * group answers an empty body (the SDK reads it as "none"), while a read under a missing parent
 * answers the parent's not-found code.
 */
import {
  COMPRESSION_NAMES,
  OptionKind,
  encodeClientDetails,
  encodeClients,
  encodeClusterMetadata,
  encodeConsumerGroupDetails,
  encodeConsumerGroups,
  encodeDescribeOptions,
  encodePersonalAccessTokens,
  encodeStreamDetails,
  encodeTopicDetails,
  encodeTopics,
  encodeUserDetails,
  optionU64,
  type ClientInfoView,
  type ClusterNodeView,
  type OptionEntry,
} from '../metadata/binary-responses.js';
import { TOPIC_DEFAULTS, resolveTopicSettings, validateCompression, validateMaxTopicSize, validateMessageExpiry, validateTopicSettings } from '../metadata/defaults.js';
import { ErrorCode } from '../metadata/errors.js';
import { TopicOptionKey, type TopicOptionEntry } from '../metadata/options.js';
import { encodeRequest } from '../metadata/operation-codec.js';
import { Operation, idOf, type Identifier, type MetadataRequest } from '../metadata/operations.js';
import {
  canReadServers,
  canReadStream,
  canReadStreams,
  canReadTopic,
  canReadTopics,
  canReadUsers,
  canManageUsers,
  canonicalPermissions,
  type Principal,
  type PermissionsInput,
} from '../metadata/permissions.js';
import { CompressionAlgorithm, U64_MAX, type PermissionsSnapshot } from '../format/snapshot-model.js';
import type { ListReads } from '../http/list-reads.js';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import {
  validateConsumerGroupName,
  validatePartitionsChangeCount,
  validatePatName,
  validateStreamName,
  validateTopicName,
  validateTopicPartitionsCount,
  validateUsername,
} from '../metadata/validation.js';
import { MESSAGE_BODY_SIZE_MAX } from '../constants.js';
import * as bodies from '../transport/client-bodies.js';
import { CommandCode, KNOWN_COMMAND_CODES, REPLICATED_COMMAND_CODES } from '../transport/client-wire.js';
import { changePasswordBody, createPersonalAccessTokenBody, createUserBody } from '../http/secrets.js';

/** A write's verdict before anything is proposed. */
export type WriteTranslation =
  | { readonly kind: 'ok'; readonly body: Uint8Array; readonly token: string | null }
  /** Decoded, but a rule refuses it: answered with this Iggy code (a status deny). */
  | { readonly kind: 'refused'; readonly code: number }
  /** Not a body of this command at all: a protocol error. */
  | { readonly kind: 'malformed'; readonly reason: string };

export interface WriteContext {
  readonly state: MetadataStateMachine;
  readonly userId: number;
  readonly principal: Principal;
  /** Argon2id verification under the node's credential gate ('busy': the gate refused it). */
  verifyPassword(passwordHash: string, password: string): Promise<boolean | 'busy'>;
}

function refused(code: number): WriteTranslation {
  return { kind: 'refused', code };
}

function malformed(reason: string): WriteTranslation {
  return { kind: 'malformed', reason };
}

function encoded(request: MetadataRequest, token: string | null = null): WriteTranslation {
  const body = encodeRequest(request);
  // The operation body rides one replica frame; a client cannot make the edge build a bigger one.
  if (body.byteLength > MESSAGE_BODY_SIZE_MAX) return refused(ErrorCode.invalidFormat);
  return { kind: 'ok', body, token };
}

function noOptions(options: readonly OptionEntry[]): number {
  return options.length === 0 ? ErrorCode.ok : ErrorCode.unsupportedOptionKey;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

/** The topic settings an options block may carry (Iggy's updatable topic keys), or a refusal. */
interface TopicOptions {
  readonly compressionAlgorithm: number | null;
  readonly messageExpiryUs: bigint | null;
  readonly maxTopicSizeBytes: bigint | null;
}

function topicOptions(options: readonly OptionEntry[]): TopicOptions | number {
  let compressionAlgorithm: number | null = null;
  let messageExpiryUs: bigint | null = null;
  let maxTopicSizeBytes: bigint | null = null;
  for (const entry of options) {
    switch (entry.key) {
      case 'compression_algorithm': {
        if (entry.kind !== OptionKind.string) return ErrorCode.invalidOptionValue;
        let name: string;
        try {
          name = textDecoder.decode(entry.value).toLowerCase();
        } catch {
          return ErrorCode.invalidOptionValue;
        }
        if (name === COMPRESSION_NAMES[CompressionAlgorithm.none]) compressionAlgorithm = CompressionAlgorithm.none;
        else if (name === COMPRESSION_NAMES[CompressionAlgorithm.gzip]) compressionAlgorithm = CompressionAlgorithm.gzip;
        else return ErrorCode.invalidOptionValue;
        break;
      }
      case 'message_expiry':
      case 'max_topic_size': {
        if (entry.kind !== OptionKind.uint64 || entry.value.byteLength !== 8) return ErrorCode.invalidOptionValue;
        const value = new DataView(entry.value.buffer, entry.value.byteOffset, 8).getBigUint64(0, true);
        if (entry.key === 'message_expiry') messageExpiryUs = value;
        else maxTopicSizeBytes = value;
        break;
      }
      default:
        return ErrorCode.unsupportedOptionKey;
    }
  }
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes };
}

/** The typed settings a binary create set become explicit options (their values are the fields). */
function createdFieldOptions(options: TopicOptions): TopicOptionEntry[] {
  const entries: TopicOptionEntry[] = [];
  if (options.compressionAlgorithm !== null) entries.push({ key: TopicOptionKey.compressionAlgorithm, value: null });
  if (options.maxTopicSizeBytes !== null && options.maxTopicSizeBytes !== 0n) entries.push({ key: TopicOptionKey.maxTopicSize, value: null });
  if (options.messageExpiryUs !== null && options.messageExpiryUs !== 0n) entries.push({ key: TopicOptionKey.messageExpiry, value: null });
  return entries;
}

function permissionsOf(input: PermissionsInput | null): PermissionsSnapshot | null | number {
  if (input === null) return null;
  const canonical = canonicalPermissions(input);
  // A stream or topic named twice has no single meaning.
  return canonical === null ? ErrorCode.invalidFormat : canonical;
}

/** Decodes `body` as `operation`'s Iggy request and builds the operation body to propose. */
export async function translateWrite(operation: number, body: Uint8Array, ctx: WriteContext): Promise<WriteTranslation> {
  switch (operation) {
    case Operation.createStream: {
      const request = bodies.decodeCreateStream(body);
      if (!request.ok) return malformed(request.reason);
      const code = noOptions(request.value.options) || validateStreamName(request.value.name);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, name: request.value.name });
    }
    case Operation.updateStream: {
      const request = bodies.decodeUpdateStream(body);
      if (!request.ok) return malformed(request.reason);
      const code = noOptions(request.value.options) || validateStreamName(request.value.name);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, streamId: request.value.streamId, name: request.value.name });
    }
    case Operation.deleteStream:
    case Operation.purgeStream: {
      const request = bodies.decodeStreamId(body);
      if (!request.ok) return malformed(request.reason);
      return encoded({ operation, streamId: request.value.streamId });
    }
    case Operation.createTopic: {
      const request = bodies.decodeCreateTopic(body);
      if (!request.ok) return malformed(request.reason);
      const { streamId, partitionsCount, name } = request.value;
      const options = topicOptions(request.value.options);
      if (typeof options === 'number') return refused(options);
      const settings = resolveTopicSettings(options, TOPIC_DEFAULTS);
      const code = validateTopicName(name) || validateTopicPartitionsCount(partitionsCount) || validateTopicSettings(settings);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, streamId, partitionsCount, ...settings, name, options: createdFieldOptions(options) });
    }
    case Operation.updateTopic: {
      const request = bodies.decodeUpdateTopic(body);
      if (!request.ok) return malformed(request.reason);
      const options = topicOptions(request.value.options);
      if (typeof options === 'number') return refused(options);
      // Iggy's sentinel: 0 means the server default, resolved here as at create.
      const messageExpiryUs = options.messageExpiryUs === 0n ? TOPIC_DEFAULTS.messageExpiryUs : options.messageExpiryUs;
      const maxTopicSizeBytes = options.maxTopicSizeBytes === 0n ? TOPIC_DEFAULTS.maxTopicSizeBytes : options.maxTopicSizeBytes;
      const code =
        validateTopicName(request.value.name) ||
        (options.compressionAlgorithm === null ? 0 : validateCompression(options.compressionAlgorithm)) ||
        (messageExpiryUs === null ? 0 : validateMessageExpiry(messageExpiryUs)) ||
        (maxTopicSizeBytes === null ? 0 : validateMaxTopicSize(maxTopicSizeBytes));
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({
        operation,
        streamId: request.value.streamId,
        topicId: request.value.topicId,
        name: request.value.name,
        compressionAlgorithm: options.compressionAlgorithm,
        messageExpiryUs,
        maxTopicSizeBytes,
        replicationFactor: null,
      });
    }
    case Operation.deleteTopic:
    case Operation.purgeTopic: {
      const request = bodies.decodeTopicAddress(body);
      if (!request.ok) return malformed(request.reason);
      return encoded({ operation, ...request.value });
    }
    case Operation.createPartitions:
    case Operation.deletePartitions: {
      const request = bodies.decodePartitionsChange(body);
      if (!request.ok) return malformed(request.reason);
      const code = validatePartitionsChangeCount(request.value.partitionsCount);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, ...request.value });
    }
    case Operation.deleteSegments: {
      const request = bodies.decodeDeleteSegments(body);
      if (!request.ok) return malformed(request.reason);
      return encoded({ operation, ...request.value });
    }
    case Operation.createConsumerGroup: {
      const request = bodies.decodeCreateGroup(body);
      if (!request.ok) return malformed(request.reason);
      const code = validateConsumerGroupName(request.value.name);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, ...request.value });
    }
    case Operation.deleteConsumerGroup:
    case Operation.joinConsumerGroup:
    case Operation.leaveConsumerGroup: {
      const request = bodies.decodeGroupAddress(body);
      if (!request.ok) return malformed(request.reason);
      return encoded({ operation, ...request.value });
    }
    case Operation.createUser:
      return createUser(body, ctx);
    case Operation.updateUser: {
      const request = bodies.decodeUpdateUser(body);
      if (!request.ok) return malformed(request.reason);
      const { userId, username, status, options } = request.value;
      const code = noOptions(options) || (username === null ? 0 : validateUsername(username));
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, userId, username, status });
    }
    case Operation.deleteUser: {
      const request = bodies.decodeUserId(body);
      if (!request.ok) return malformed(request.reason);
      return encoded({ operation, userId: request.value.userId });
    }
    case Operation.changePassword:
      return changePassword(body, ctx);
    case Operation.updatePermissions: {
      const request = bodies.decodeUpdatePermissions(body);
      if (!request.ok) return malformed(request.reason);
      const permissions = permissionsOf(request.value.permissions);
      if (typeof permissions === 'number') return refused(permissions);
      return encoded({ operation, userId: request.value.userId, permissions });
    }
    case Operation.createPersonalAccessToken: {
      const request = bodies.decodeCreateToken(body);
      if (!request.ok) return malformed(request.reason);
      const code = validatePatName(request.value.name);
      if (code !== ErrorCode.ok) return refused(code);
      const built = createPersonalAccessTokenBody(request.value.name, request.value.expiryUs);
      if (!built.ok) return refused(built.errorCode);
      return { kind: 'ok', body: built.body, token: built.token };
    }
    case Operation.deletePersonalAccessToken: {
      const request = bodies.decodeTokenName(body);
      if (!request.ok) return malformed(request.reason);
      const code = validatePatName(request.value.name);
      if (code !== ErrorCode.ok) return refused(code);
      return encoded({ operation, name: request.value.name, ownerUserId: null, onlyIfExpired: false });
    }
    default:
      return malformed(`operation ${operation} is not a metadata command`);
  }
}

async function createUser(body: Uint8Array, ctx: WriteContext): Promise<WriteTranslation> {
  const request = bodies.decodeCreateUser(body);
  if (!request.ok) return malformed(request.reason);
  const { username, password, status, options } = request.value;
  const permissions = permissionsOf(request.value.permissions);
  if (typeof permissions === 'number') return refused(permissions);
  const code = noOptions(options);
  if (code !== ErrorCode.ok) return refused(code);
  // Before the Argon2id hash (tens of milliseconds): only a caller allowed to create users pays.
  if (!canManageUsers(ctx.principal)) return refused(ErrorCode.unauthorized);
  if (ctx.state.credentials(username) !== null) return refused(ErrorCode.userAlreadyExists);
  const built = await createUserBody({ username, password, status: status as 1 | 2, permissions });
  if (!built.ok) return refused(built.errorCode);
  return { kind: 'ok', body: built.body, token: null };
}

async function changePassword(body: Uint8Array, ctx: WriteContext): Promise<WriteTranslation> {
  const request = bodies.decodeChangePassword(body);
  if (!request.ok) return malformed(request.reason);
  const { userId, currentPassword, newPassword } = request.value;
  const target = ctx.state.queries.user(userId);
  if (target === null) return refused(ErrorCode.resourceNotFound);
  // Before verifying: a caller who may not change this password learns nothing about it.
  if (target.id !== ctx.userId && !canManageUsers(ctx.principal)) return refused(ErrorCode.unauthorized);
  // Under the gate, as HTTP's: the current password is a guess until verified, and an unbounded
  // verification here would be a guessing oracle as fast as Argon2id runs.
  let busy = false;
  const built = await changePasswordBody(ctx.state, userId, currentPassword, newPassword, async (passwordHash, password) => {
    const verified = await ctx.verifyPassword(passwordHash, password);
    busy = verified === 'busy';
    return verified === true;
  });
  // Refused before Argon2 ran: the SDK retries TransientNotAccepted on its own.
  if (busy) return refused(ErrorCode.transientNotAccepted);
  if (!built.ok) return refused(built.errorCode);
  return { kind: 'ok', body: built.body, token: null };
}

// ---------------------------------------------------------------------------- reads

/** A read's answer: an Iggy body, or a code for a status deny. */
export type ReadAnswer = { readonly ok: true; readonly body: Uint8Array } | { readonly ok: false; readonly code: number };

const EMPTY = new Uint8Array(0);

function answer(body: Uint8Array): ReadAnswer {
  return { ok: true, body };
}

function deny(code: number): ReadAnswer {
  return { ok: false, code };
}

export interface ReadContext {
  readonly state: MetadataStateMachine;
  readonly userId: number;
  readonly principal: Principal;
  /** This connection, as GetMe shows it. */
  me(): ClientInfoView;
  /** Every client connected to this replica. */
  clients(): readonly ClientInfoView[];
  clusterName: string;
  clusterNodes(): readonly ClusterNodeView[];
  stats(): Uint8Array;
  /** The whole-state lists, built in slices and shared per state version (list-reads.ts). */
  readonly lists: ListReads;
}

const OPTIONS_SCOPE = { topic: 1, stream: 2, user: 3 } as const;

function u64Bytes(value: bigint): Uint8Array {
  return optionU64('', value).value;
}

/** vrmeta's topic option catalog: the three settings a topic stores (DescribeOptions, scope 1). */
export function topicOptionCatalog(): Uint8Array {
  const encoder = new TextEncoder();
  return encodeDescribeOptions([
    {
      key: 'compression_algorithm',
      kind: OptionKind.string,
      defaultValue: encoder.encode(COMPRESSION_NAMES[TOPIC_DEFAULTS.compressionAlgorithm]),
      description: 'Compression algorithm (none, gzip)',
    },
    {
      key: 'message_expiry',
      kind: OptionKind.uint64,
      defaultValue: u64Bytes(TOPIC_DEFAULTS.messageExpiryUs),
      description: 'Message expiry in microseconds; 18446744073709551615 = never (the default)',
    },
    {
      key: 'max_topic_size',
      kind: OptionKind.uint64,
      defaultValue: u64Bytes(TOPIC_DEFAULTS.maxTopicSizeBytes),
      description: `Topic size cap in bytes, at least one 1 GiB segment; ${U64_MAX} = unlimited (the default)`,
    },
  ]);
}

function topicIds(state: MetadataStateMachine, streamId: Identifier, topicId: Identifier): { streamId: number; topicId: number } | number {
  const stream = state.queries.stream(streamId);
  if (stream === null) return ErrorCode.streamIdNotFound;
  const topic = stream.topics.find((candidate) => (topicId.kind === 'id' ? candidate.id === topicId.id : candidate.name === topicId.name));
  if (topic === undefined) return ErrorCode.topicIdNotFound;
  return { streamId: stream.id, topicId: topic.id };
}

/**
 * Answers a non-replicated command of an authenticated connection: at once, or (the lists of
 * every stream or user) once its shared, sliced build is done.
 */
export function answerRead(
  code: number,
  body: Uint8Array,
  ctx: ReadContext,
): ReadAnswer | Promise<ReadAnswer> {
  const { state, principal } = ctx;
  const { queries } = state;
  switch (code) {
    case CommandCode.ping:
      return answer(EMPTY);
    case CommandCode.getStats:
      return canReadServers(principal) ? answer(ctx.stats()) : deny(ErrorCode.unauthorized);
    case CommandCode.getClusterMetadata:
      return answer(encodeClusterMetadata(ctx.clusterName, ctx.clusterNodes()));
    case CommandCode.describeOptions: {
      if (body.byteLength < 1) return deny(ErrorCode.invalidCommand);
      const scope = body[0]!;
      if (scope === OPTIONS_SCOPE.topic) return answer(topicOptionCatalog());
      if (scope === OPTIONS_SCOPE.stream || scope === OPTIONS_SCOPE.user) return answer(encodeDescribeOptions([]));
      return deny(ErrorCode.invalidCommand);
    }
    case CommandCode.getMe:
      return answer(encodeClientDetails(ctx.me()));
    case CommandCode.getClient: {
      if (!canReadServers(principal)) return deny(ErrorCode.unauthorized);
      const request = bodies.decodeClientId(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const client = ctx.clients().find((candidate) => candidate.clientId === request.value.clientId);
      return answer(client === undefined ? EMPTY : encodeClientDetails(client));
    }
    case CommandCode.getClients:
      return canReadServers(principal) ? answer(encodeClients(ctx.clients())) : deny(ErrorCode.unauthorized);
    case CommandCode.getUser: {
      const request = bodies.decodeUserId(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const user = queries.user(request.value.userId);
      // Anyone may read themselves; others need read_users, checked before existence.
      if (user?.id !== ctx.userId && !canReadUsers(principal)) return deny(ErrorCode.unauthorized);
      return answer(user === null ? EMPTY : encodeUserDetails(user));
    }
    case CommandCode.getUsers:
      return canReadUsers(principal) ? ctx.lists.usersBody.get().then(answer) : deny(ErrorCode.unauthorized);
    case CommandCode.getAccessTokens:
      return answer(encodePersonalAccessTokens(queries.personalAccessTokens(ctx.userId) ?? []));
    case CommandCode.getStream: {
      const request = bodies.decodeStreamId(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const stream = queries.stream(request.value.streamId);
      if (stream === null) return answer(EMPTY);
      return canReadStream(principal, stream.id) ? answer(encodeStreamDetails(stream)) : deny(ErrorCode.unauthorized);
    }
    case CommandCode.getStreams:
      return canReadStreams(principal) ? ctx.lists.streamsBody.get().then(answer) : deny(ErrorCode.unauthorized);
    case CommandCode.getTopic: {
      const request = bodies.decodeTopicAddress(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const ids = topicIds(state, request.value.streamId, request.value.topicId);
      if (ids === ErrorCode.topicIdNotFound) return answer(EMPTY);
      if (typeof ids === 'number') return deny(ids);
      if (!canReadTopic(principal, ids.streamId, ids.topicId)) return deny(ErrorCode.unauthorized);
      const topic = queries.topic(idOf(ids.streamId), idOf(ids.topicId));
      return answer(topic === null ? EMPTY : encodeTopicDetails(topic));
    }
    case CommandCode.getTopics: {
      const request = bodies.decodeStreamId(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const stream = queries.stream(request.value.streamId);
      if (stream === null) return deny(ErrorCode.streamIdNotFound);
      return canReadTopics(principal, stream.id) ? answer(encodeTopics(stream.topics)) : deny(ErrorCode.unauthorized);
    }
    case CommandCode.getConsumerGroup: {
      const request = bodies.decodeGroupAddress(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const ids = topicIds(state, request.value.streamId, request.value.topicId);
      if (typeof ids === 'number') return deny(ids);
      if (!canReadTopic(principal, ids.streamId, ids.topicId)) return deny(ErrorCode.unauthorized);
      const group = queries.consumerGroup(idOf(ids.streamId), idOf(ids.topicId), request.value.groupId);
      return answer(group === null ? EMPTY : encodeConsumerGroupDetails(group));
    }
    case CommandCode.getConsumerGroups: {
      const request = bodies.decodeTopicAddress(body);
      if (!request.ok) return deny(ErrorCode.invalidCommand);
      const ids = topicIds(state, request.value.streamId, request.value.topicId);
      if (typeof ids === 'number') return deny(ids);
      if (!canReadTopic(principal, ids.streamId, ids.topicId)) return deny(ErrorCode.unauthorized);
      return answer(encodeConsumerGroups(queries.consumerGroups(idOf(ids.streamId), idOf(ids.topicId)) ?? []));
    }
    // The message data plane, a diagnostic archive, a buffer flush: vrmeta is the metadata plane
    // only, so these answer at once instead of pretending (an empty poll would read as "no
    // messages yet", an empty flush as durable).
    case CommandCode.pollMessages:
    case CommandCode.flushUnsavedBuffer:
    case CommandCode.getConsumerOffset:
    case CommandCode.syncConsumerGroup:
    case CommandCode.getSnapshot:
      return deny(ErrorCode.featureUnavailable);
    default:
      if (!KNOWN_COMMAND_CODES.has(code)) return deny(ErrorCode.invalidCommand);
      // A replicated command sent as non-replicated is never run outside the log.
      if (REPLICATED_COMMAND_CODES.has(code)) return deny(ErrorCode.featureUnavailable);
      return answer(EMPTY);
  }
}

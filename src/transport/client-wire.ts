/**
 * Iggy's binary client wire, as the official SDKs at apache/iggy cc269ef70 speak it
 * (`foreign/node/src/wire/vsr/*`, `core/binary_protocol/src/consensus/header.rs`, `dispatch.rs`):
 * the request header a client sends, the reply and eviction frames it reads, the command codes,
 * and a streaming frame decoder with hard bounds. Pure (no sockets): the listener feeds it bytes.
 *
 * The client wire is the replica wire's Request/Reply/Eviction layout with three differences, so
 * it is translated here at the edge and never reaches the replica as is:
 *   - clients send `checksum`, `checksum_body` and `cluster` as 0 (client frames are unsealed in
 *     Iggy); the replica wire seals every frame with our cluster id. The edge rebuilds a sealed
 *     internal request, so nothing unsealed crosses into the core;
 *   - bytes 248..256 (the replica wire's `group`) are reserved on the client wire;
 *   - u64 request numbers and sessions are bigints here; the core takes numbers up to 2^53 - 1,
 *     and a larger value is refused with a reason (no SDK reaches it: 2^53 requests).
 *
 * Request header (256 bytes, little-endian): size u32 @48, command u8 @60 (= 5), client u128
 * @128, request_checksum u128 @144 (0 = unstamped), timestamp u64 @160, request u64 @168,
 * operation u8 @176, session u64 @184, user_id u32 @192 (never trusted), and for
 * `Operation::NonReplicated` the command code u32 @196.
 * Reply header: size @48, view @52, command @60 (= 8), replica @61, request_checksum u128 @128,
 * context u128 @144 (0), client u128 @160, op u64 @176, commit u64 @184, timestamp u64 @192,
 * request u64 @200, operation u8 @208, status u32 @216 (a pre-commit deny; 0 = the body answers).
 * Eviction header (header only): size = 256, command @60 (= 13), client u128 @128,
 * server_protocol_version u32 @144 and _min u32 @148 (only for IncompatibleProtocol), reason u8
 * @255.
 */
import { HEADER_SIZE, HeaderOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { Operation as StateMachineOperation } from '../metadata/operations.js';
import { EvictionReason, Operation } from '../vsr/header-types.js';

export const ClientCommand = { request: 5, reply: 8, eviction: 13 } as const;

/** Iggy command codes (`core/binary_protocol/src/codes.rs`). */
export const CommandCode = {
  ping: 1,
  getStats: 10,
  getSnapshot: 11,
  getClusterMetadata: 12,
  describeOptions: 13,
  getMe: 20,
  getClient: 21,
  getClients: 22,
  getUser: 31,
  getUsers: 32,
  createUser: 33,
  deleteUser: 34,
  updateUser: 35,
  updatePermissions: 36,
  changePassword: 37,
  loginUser: 38,
  logoutUser: 39,
  loginRegister: 40,
  getAccessTokens: 41,
  createAccessToken: 42,
  deleteAccessToken: 43,
  loginWithAccessToken: 44,
  loginRegisterWithAccessToken: 45,
  pollMessages: 100,
  sendMessages: 101,
  flushUnsavedBuffer: 102,
  getConsumerOffset: 120,
  storeConsumerOffset: 121,
  deleteConsumerOffset: 122,
  getStream: 200,
  getStreams: 201,
  createStream: 202,
  deleteStream: 203,
  updateStream: 204,
  purgeStream: 205,
  getTopic: 300,
  getTopics: 301,
  createTopic: 302,
  deleteTopic: 303,
  updateTopic: 304,
  purgeTopic: 305,
  createPartitions: 402,
  deletePartitions: 403,
  deleteSegments: 503,
  getConsumerGroup: 600,
  getConsumerGroups: 601,
  createConsumerGroup: 602,
  deleteConsumerGroup: 603,
  joinConsumerGroup: 604,
  leaveConsumerGroup: 605,
  syncConsumerGroup: 606,
} as const;

/** Codes Iggy's dispatch table knows (any other non-replicated code is InvalidCommand). */
export const KNOWN_COMMAND_CODES: ReadonlySet<number> = new Set(Object.values(CommandCode));

/**
 * Replicated commands an SDK may send as `NonReplicated` with the code in the header (an SDK
 * build that does not know the operation): Iggy answers FeatureUnavailable, never runs them.
 */
export const REPLICATED_COMMAND_CODES: ReadonlySet<number> = new Set([
  CommandCode.createUser,
  CommandCode.deleteUser,
  CommandCode.updateUser,
  CommandCode.updatePermissions,
  CommandCode.changePassword,
  CommandCode.loginRegister,
  CommandCode.createAccessToken,
  CommandCode.deleteAccessToken,
  CommandCode.loginRegisterWithAccessToken,
  CommandCode.sendMessages,
  CommandCode.storeConsumerOffset,
  CommandCode.deleteConsumerOffset,
  CommandCode.createStream,
  CommandCode.deleteStream,
  CommandCode.updateStream,
  CommandCode.purgeStream,
  CommandCode.createTopic,
  CommandCode.deleteTopic,
  CommandCode.updateTopic,
  CommandCode.purgeTopic,
  CommandCode.createPartitions,
  CommandCode.deletePartitions,
  CommandCode.deleteSegments,
  CommandCode.createConsumerGroup,
  CommandCode.deleteConsumerGroup,
  CommandCode.joinConsumerGroup,
  CommandCode.leaveConsumerGroup,
]);

/** Every operation code, the protocol's and the state machine's (Iggy rejects any other byte at the cast). */
export const KNOWN_OPERATIONS: ReadonlySet<number> = new Set([...Object.values(Operation), ...Object.values(StateMachineOperation)]);

const INTERNAL_OPERATION_MIN = 64;
const METADATA_OPERATION_MIN = 128;
const PARTITION_OPERATION_MIN = 160;

/** Internal operations (64..127) are server-generated: a client never sends one. */
export function isInternalOperation(operation: number): boolean {
  return operation >= INTERNAL_OPERATION_MIN && operation < METADATA_OPERATION_MIN;
}

/** The metadata operations a client may send (128..149; DeleteSegments included here). */
export function isClientMetadataOperation(operation: number): boolean {
  return operation >= METADATA_OPERATION_MIN && operation <= StateMachineOperation.leaveConsumerGroup;
}

export function isPartitionOperation(operation: number): boolean {
  return operation >= PARTITION_OPERATION_MIN;
}

/**
 * Whether the SDK strips a result section off a reply with this operation: the metadata
 * operations except DeleteSegments (Iggy resolves it on the partition plane), plus the consumer
 * offset writes. Mirrors `Operation::is_result_framed`.
 */
export function isResultFramed(operation: number): boolean {
  if (operation === StateMachineOperation.deleteSegments) return false;
  if (isInternalOperation(operation) || isClientMetadataOperation(operation)) return true;
  return operation === StateMachineOperation.storeConsumerOffset || operation === StateMachineOperation.deleteConsumerOffset;
}

/** Packed semver (10 bits each) of the client protocol vrmeta speaks: 0.11.0 (Iggy 0.11). */
export const IGGY_PROTOCOL_VERSION = (0 << 20) | (11 << 10) | 0;
/** Oldest accepted: the same major.minor, any patch (Iggy `IGGY_PROTOCOL_VERSION_MIN`). */
export const IGGY_PROTOCOL_VERSION_MIN = IGGY_PROTOCOL_VERSION & ~0x3ff;

/** Iggy `is_protocol_compatible`: at least the minimum, and no newer major.minor than ours. */
export function isProtocolCompatible(client: number): boolean {
  return client >= IGGY_PROTOCOL_VERSION_MIN && client >>> 10 <= IGGY_PROTOCOL_VERSION >>> 10;
}

/**
 * The largest request frame buffered. Metadata requests are small (the largest, a CreateUser
 * with a full permission set, stays far below); Iggy's 64 MiB is for message batches, which
 * vrmeta does not store. A larger declared size is either a data-plane batch (its body is
 * skipped unbuffered and answered FeatureUnavailable) or refused with an eviction.
 */
export const CLIENT_FRAME_SIZE_MAX = 1024 * 1024;
/** A data-plane frame up to Iggy's own frame limit is read past (not buffered) and answered. */
export const CLIENT_SKIP_SIZE_MAX = 64 * 1024 * 1024;

export const RequestOffset = {
  client: 128,
  requestChecksum: 144,
  timestamp: 160,
  request: 168,
  operation: 176,
  session: 184,
  userId: 192,
  code: 196,
} as const;

export const ReplyOffset = {
  requestChecksum: 128,
  context: 144,
  client: 160,
  op: 176,
  commit: 184,
  timestamp: 192,
  request: 200,
  operation: 208,
  status: 216,
} as const;

export const EvictionOffset = { client: 128, serverProtocolVersion: 144, serverProtocolVersionMin: 148, reason: 255 } as const;

export interface ClientRequestHeader {
  readonly size: number;
  readonly client: bigint;
  readonly requestChecksum: bigint;
  readonly timestamp: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly session: bigint;
  /** The command code in bytes 196..200 (meaningful for NonReplicated only). */
  readonly code: number;
}

/** Why a request header is refused, and the eviction that says so (null: drop and close). */
export type HeaderRefusal = {
  readonly reason: string;
  readonly eviction: EvictionReason | null;
};

function readU128(view: DataView, offset: number): bigint {
  return view.getBigUint64(offset, true) | (view.getBigUint64(offset + 8, true) << 64n);
}

function writeU128(view: DataView, offset: number, value: bigint): void {
  view.setBigUint64(offset, value & 0xffff_ffff_ffff_ffffn, true);
  view.setBigUint64(offset + 8, value >> 64n, true);
}

/** The declared frame size (bytes 48..52) once at least 52 bytes arrived. */
export function readDeclaredSize(bytes: Uint8Array): number {
  assert(bytes.byteLength >= HeaderOffset.size + 4, 'readDeclaredSize: 52 bytes');
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(HeaderOffset.size, true);
}

/** Reads the request header fields without judging them (see `validateClientRequest`). */
export function readClientRequest(header: Uint8Array): ClientRequestHeader {
  assert(header.byteLength >= HEADER_SIZE, 'readClientRequest: a whole header');
  const view = new DataView(header.buffer, header.byteOffset, HEADER_SIZE);
  return {
    size: view.getUint32(HeaderOffset.size, true),
    client: readU128(view, RequestOffset.client),
    requestChecksum: readU128(view, RequestOffset.requestChecksum),
    timestamp: view.getBigUint64(RequestOffset.timestamp, true),
    request: view.getBigUint64(RequestOffset.request, true),
    operation: view.getUint8(RequestOffset.operation),
    session: view.getBigUint64(RequestOffset.session, true),
    code: view.getUint32(RequestOffset.code, true),
  };
}

/**
 * Iggy's `RequestHeader::validate` plus the bounds vrmeta adds. A refusal with an eviction is
 * answered with it (the client learns why); one without (not even a request) is only closed.
 */
export function validateClientRequest(header: Uint8Array): HeaderRefusal | null {
  if (header[HeaderOffset.command] !== ClientCommand.request) {
    return { reason: `command ${header[HeaderOffset.command]} is not a request`, eviction: null };
  }
  const request = readClientRequest(header);
  if (request.client === 0n) return { reason: 'client id 0', eviction: null };
  if (!KNOWN_OPERATIONS.has(request.operation)) {
    return { reason: `operation ${request.operation} is not an Operation`, eviction: EvictionReason.invalidRequestOperation };
  }
  // Batch (a vrmeta protocol code) names a prepare's envelope; a client request never carries it.
  if (request.operation === Operation.reserved || request.operation === Operation.batch || isInternalOperation(request.operation)) {
    return { reason: `operation ${request.operation} is not client-allowed`, eviction: EvictionReason.invalidRequestOperation };
  }
  if (request.operation === Operation.register) {
    if (request.session !== 0n || request.request !== 0n) {
      return { reason: 'register with a session or request number', eviction: EvictionReason.invalidRequestBody };
    }
  } else if (request.operation !== Operation.nonReplicated) {
    if (request.session === 0n || request.request === 0n) {
      return { reason: 'replicated request without a session or request number', eviction: EvictionReason.noSession };
    }
  }
  if (request.request > BigInt(Number.MAX_SAFE_INTEGER) || request.session > BigInt(Number.MAX_SAFE_INTEGER)) {
    return { reason: 'request or session number above 2^53 - 1', eviction: EvictionReason.invalidRequestBody };
  }
  return null;
}

export interface ClientRequestInput {
  readonly client: bigint;
  readonly operation: number;
  readonly request: bigint;
  readonly session: bigint;
  /** The command code of a NonReplicated request (bytes 196..200). */
  readonly code?: number;
  readonly requestChecksum?: bigint;
}

/** A request frame as an SDK sends it (unsealed; checksums and cluster zero). */
export function encodeClientRequest(input: ClientRequestInput, body: Uint8Array = new Uint8Array(0)): Uint8Array {
  const frame = new Uint8Array(HEADER_SIZE + body.byteLength);
  const view = new DataView(frame.buffer);
  view.setUint32(HeaderOffset.size, frame.byteLength, true);
  frame[HeaderOffset.command] = ClientCommand.request;
  writeU128(view, RequestOffset.client, input.client);
  writeU128(view, RequestOffset.requestChecksum, input.requestChecksum ?? 0n);
  view.setBigUint64(RequestOffset.request, input.request, true);
  frame[RequestOffset.operation] = input.operation;
  view.setBigUint64(RequestOffset.session, input.session, true);
  if (input.code !== undefined) view.setUint32(RequestOffset.code, input.code, true);
  frame.set(body, HEADER_SIZE);
  return frame;
}

export interface ClientReplyInput {
  readonly cluster: bigint;
  readonly view: number;
  readonly replica: number;
  readonly requestChecksum: bigint;
  readonly client: bigint;
  readonly op: bigint;
  readonly commit: bigint;
  readonly timestamp: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly status: number;
}

/** A reply frame built at the edge (unsealed, as Iggy's server sends client replies). */
export function encodeClientReply(input: ClientReplyInput, body: Uint8Array = new Uint8Array(0)): Uint8Array {
  assert(input.status === 0 || body.byteLength === 0, 'a deny carries no body');
  const frame = new Uint8Array(HEADER_SIZE + body.byteLength);
  const view = new DataView(frame.buffer);
  writeU128(view, HeaderOffset.cluster, input.cluster);
  view.setUint32(HeaderOffset.size, frame.byteLength, true);
  view.setUint32(HeaderOffset.view, input.view, true);
  frame[HeaderOffset.command] = ClientCommand.reply;
  frame[HeaderOffset.replica] = input.replica;
  writeU128(view, ReplyOffset.requestChecksum, input.requestChecksum);
  writeU128(view, ReplyOffset.client, input.client);
  view.setBigUint64(ReplyOffset.op, input.op, true);
  view.setBigUint64(ReplyOffset.commit, input.commit, true);
  view.setBigUint64(ReplyOffset.timestamp, input.timestamp, true);
  view.setBigUint64(ReplyOffset.request, input.request, true);
  frame[ReplyOffset.operation] = input.operation;
  view.setUint32(ReplyOffset.status, input.status, true);
  frame.set(body, HEADER_SIZE);
  return frame;
}

export interface ClientEvictionInput {
  readonly cluster: bigint;
  readonly view: number;
  readonly replica: number;
  readonly client: bigint;
  readonly reason: EvictionReason;
}

/**
 * An eviction frame (session-terminal; the SDK maps the reason to an error and resets). The
 * protocol window travels only with IncompatibleProtocol, as Iggy's `validate` requires.
 */
export function encodeClientEviction(input: ClientEvictionInput): Uint8Array {
  assert(input.reason !== EvictionReason.reserved, 'an eviction names its reason');
  assert(input.client !== 0n, 'an eviction names its client');
  const frame = new Uint8Array(HEADER_SIZE);
  const view = new DataView(frame.buffer);
  writeU128(view, HeaderOffset.cluster, input.cluster);
  view.setUint32(HeaderOffset.size, HEADER_SIZE, true);
  view.setUint32(HeaderOffset.view, input.view, true);
  frame[HeaderOffset.command] = ClientCommand.eviction;
  frame[HeaderOffset.replica] = input.replica;
  writeU128(view, EvictionOffset.client, input.client);
  if (input.reason === EvictionReason.incompatibleProtocol) {
    view.setUint32(EvictionOffset.serverProtocolVersion, IGGY_PROTOCOL_VERSION, true);
    view.setUint32(EvictionOffset.serverProtocolVersionMin, IGGY_PROTOCOL_VERSION_MIN, true);
  }
  frame[EvictionOffset.reason] = input.reason;
  return frame;
}

/** Reply fields a client (and the edge) reads back. */
export interface ClientReplyView {
  readonly command: number;
  readonly size: number;
  readonly client: bigint;
  readonly op: bigint;
  readonly commit: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly status: number;
  /** Eviction frames only. */
  readonly reason: number;
}

export function readClientReply(frame: Uint8Array): ClientReplyView {
  assert(frame.byteLength >= HEADER_SIZE, 'readClientReply: a whole header');
  const view = new DataView(frame.buffer, frame.byteOffset, HEADER_SIZE);
  const command = frame[HeaderOffset.command]!;
  const eviction = command === ClientCommand.eviction;
  return {
    command,
    size: view.getUint32(HeaderOffset.size, true),
    client: readU128(view, eviction ? EvictionOffset.client : ReplyOffset.client),
    op: eviction ? 0n : view.getBigUint64(ReplyOffset.op, true),
    commit: eviction ? 0n : view.getBigUint64(ReplyOffset.commit, true),
    request: eviction ? 0n : view.getBigUint64(ReplyOffset.request, true),
    operation: eviction ? Operation.reserved : frame[ReplyOffset.operation]!,
    status: eviction ? 0 : view.getUint32(ReplyOffset.status, true),
    reason: eviction ? frame[EvictionOffset.reason]! : 0,
  };
}

/** The result code of a result-framed body: 0 success, else the first entry's code; null malformed. */
export function resultCodeOf(body: Uint8Array): number | null {
  if (body.byteLength < 4) return null;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const count = view.getUint32(0, true);
  if (count === 0) return 0;
  if (body.byteLength < 4 + 8 * count) return null;
  return view.getUint32(8, true);
}

/** `count u32 = 1, index u32 = 0, result u32 = code`: a result-framed rejection. */
export function resultRejection(code: number): Uint8Array {
  const body = new Uint8Array(12);
  const view = new DataView(body.buffer);
  view.setUint32(0, 1, true);
  view.setUint32(8, code, true);
  return body;
}

/** `count u32 = 0` then the payload: a result-framed success. */
export function resultSuccess(payload: Uint8Array): Uint8Array {
  const body = new Uint8Array(4 + payload.byteLength);
  body.set(payload, 4);
  return body;
}

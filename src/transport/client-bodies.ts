/**
 * Decoders for the request bodies of Iggy's binary client commands
 * (`core/binary_protocol/src/requests/**`, cc269ef70). Untrusted bytes: every decoder is total
 * and returns a typed request or the reason it is not one, never throws.
 *
 * As in Iggy (`WireDecode::decode_from`), fixed-layout bodies ignore trailing bytes (the Node SDK
 * appends a partitions count to DeleteTopic that the server never reads); a body whose last field
 * is an options block runs to the end, and that block must be a valid TLV list.
 *
 * Primitives: name = u8 size 1..=255 + UTF-8; identifier = kind u8 (1 numeric: size 4 + u32 LE;
 * 2 string: size 1..=255 + UTF-8); secret = u8 size + UTF-8 (0 allowed, checked later); options =
 * TLV entries `[kind u8][len u32 1..=255][bytes]`, key (kind 2, UTF-8) then value, keys unique,
 * at most 1024 pairs and 100,000 bytes.
 */
import { BodyReader } from '../metadata/body-io.js';
import type { Identifier } from '../metadata/operations.js';
import { PERMISSION_STREAMS_MAX, PERMISSION_TOPICS_MAX } from '../metadata/validation.js';
import { PERMISSION_FLAG_ORDER, OptionKind, type OptionEntry } from '../metadata/binary-responses.js';
import type { PermissionsInput } from '../metadata/permissions.js';

export const OPTIONS_PAIRS_MAX = 1024;
export const OPTIONS_SIZE_MAX = 100_000;
const OPTION_FIELD_SIZE_MAX = 255;
/** A login's client context is informational; bounded so it cannot cost memory. */
export const CLIENT_CONTEXT_SIZE_MAX = 4096;

export type Decoded<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

function done<T>(reader: BodyReader, value: T): Decoded<T> {
  return reader.ok ? { ok: true, value } : { ok: false, reason: reader.finish() ?? 'malformed' };
}

function wireName(reader: BodyReader, field: string): string {
  const name = reader.name(field);
  reader.check(!reader.ok || name.length > 0, `${field}: empty name`);
  return name;
}

/** A u8-size secret (password, token): may be empty on the wire; validation says why later. */
function secret(reader: BodyReader, field: string): string {
  return reader.name(field);
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Iggy `validate_options` over a TLV block, returning its entries. */
export function decodeOptions(block: Uint8Array): Decoded<OptionEntry[]> {
  if (block.byteLength > OPTIONS_SIZE_MAX) return { ok: false, reason: `options block exceeds ${OPTIONS_SIZE_MAX} bytes` };
  const fields: { kind: number; bytes: Uint8Array }[] = [];
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength);
  let offset = 0;
  while (offset < block.byteLength) {
    if (offset + 5 > block.byteLength) return { ok: false, reason: 'options: truncated field header' };
    const kind = view.getUint8(offset);
    const size = view.getUint32(offset + 1, true);
    if (kind === 0) return { ok: false, reason: 'options: field kind 0' };
    if (size === 0 || size > OPTION_FIELD_SIZE_MAX) return { ok: false, reason: `options: field size ${size}` };
    if (offset + 5 + size > block.byteLength) return { ok: false, reason: 'options: truncated field' };
    fields.push({ kind, bytes: block.subarray(offset + 5, offset + 5 + size) });
    offset += 5 + size;
    if (fields.length > 2 * OPTIONS_PAIRS_MAX) return { ok: false, reason: `options: more than ${OPTIONS_PAIRS_MAX} entries` };
  }
  if (fields.length % 2 !== 0) return { ok: false, reason: 'options: a key without a value' };
  const entries: OptionEntry[] = [];
  const keys = new Set<string>();
  for (let index = 0; index < fields.length; index += 2) {
    const key = fields[index]!;
    const value = fields[index + 1]!;
    if (key.kind !== OptionKind.string) return { ok: false, reason: `options: key kind ${key.kind} is not a string` };
    let text: string;
    try {
      text = decoder.decode(key.bytes);
    } catch {
      return { ok: false, reason: 'options: key is not UTF-8' };
    }
    if (keys.has(text)) return { ok: false, reason: `options: duplicate key ${JSON.stringify(text)}` };
    keys.add(text);
    entries.push({ key: text, kind: value.kind, value: value.bytes.slice() });
  }
  return { ok: true, value: entries };
}

function withOptions<T extends object>(reader: BodyReader, value: T): Decoded<T & { options: OptionEntry[] }> {
  const block = reader.rest('options');
  if (!reader.ok) return { ok: false, reason: reader.finish() ?? 'malformed' };
  const options = decodeOptions(block);
  if (!options.ok) return options;
  return { ok: true, value: { ...value, options: options.value } };
}

export interface ClientVersion {
  readonly protocolVersion: number;
  readonly sdkName: string;
  readonly sdkVersion: string;
}

/** The ClientVersionInfo prefix both login bodies start with; `rest` is what follows it. */
export function decodeClientVersion(body: Uint8Array): Decoded<{ version: ClientVersion; rest: Uint8Array }> {
  const reader = new BodyReader(body);
  const protocolVersion = reader.u32('protocol_version');
  const sdkName = wireName(reader, 'sdk_name');
  const sdkVersion = wireName(reader, 'sdk_version');
  const rest = reader.rest('login');
  return done(reader, { version: { protocolVersion, sdkName, sdkVersion }, rest });
}

export interface PasswordLogin {
  readonly username: string;
  readonly password: string;
  readonly context: string;
}

/** LoginRegister after the version prefix: username name, password secret, context u32 + bytes. */
export function decodePasswordLogin(rest: Uint8Array): Decoded<PasswordLogin> {
  const reader = new BodyReader(rest);
  const username = wireName(reader, 'username');
  const password = secret(reader, 'password');
  const context = reader.text32('client_context', CLIENT_CONTEXT_SIZE_MAX);
  return done(reader, { username, password, context });
}

/** LoginRegisterWithPat after the version prefix: token secret, context u32 + bytes. */
export function decodeTokenLogin(rest: Uint8Array): Decoded<{ token: string; context: string }> {
  const reader = new BodyReader(rest);
  const token = secret(reader, 'token');
  const context = reader.text32('client_context', CLIENT_CONTEXT_SIZE_MAX);
  return done(reader, { token, context });
}

export function decodeStreamId(body: Uint8Array): Decoded<{ streamId: Identifier }> {
  const reader = new BodyReader(body);
  return done(reader, { streamId: reader.identifier('stream_id') });
}

export function decodeTopicAddress(body: Uint8Array): Decoded<{ streamId: Identifier; topicId: Identifier }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  return done(reader, { streamId, topicId: reader.identifier('topic_id') });
}

export function decodeGroupAddress(body: Uint8Array): Decoded<{ streamId: Identifier; topicId: Identifier; groupId: Identifier }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return done(reader, { streamId, topicId, groupId: reader.identifier('group_id') });
}

export function decodeCreateStream(body: Uint8Array): Decoded<{ name: string; options: OptionEntry[] }> {
  const reader = new BodyReader(body);
  return withOptions(reader, { name: wireName(reader, 'name') });
}

export function decodeUpdateStream(body: Uint8Array): Decoded<{ streamId: Identifier; name: string; options: OptionEntry[] }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  return withOptions(reader, { streamId, name: wireName(reader, 'name') });
}

export function decodeCreateTopic(
  body: Uint8Array,
): Decoded<{ streamId: Identifier; partitionsCount: number; name: string; options: OptionEntry[] }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const partitionsCount = reader.u32('partitions_count');
  return withOptions(reader, { streamId, partitionsCount, name: wireName(reader, 'name') });
}

export function decodeUpdateTopic(
  body: Uint8Array,
): Decoded<{ streamId: Identifier; topicId: Identifier; name: string; options: OptionEntry[] }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return withOptions(reader, { streamId, topicId, name: wireName(reader, 'name') });
}

/** CreatePartitions and DeletePartitions. */
export function decodePartitionsChange(body: Uint8Array): Decoded<{ streamId: Identifier; topicId: Identifier; partitionsCount: number }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return done(reader, { streamId, topicId, partitionsCount: reader.u32('partitions_count') });
}

export function decodeDeleteSegments(
  body: Uint8Array,
): Decoded<{ streamId: Identifier; topicId: Identifier; partitionId: number; segmentsCount: number }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  const partitionId = reader.u32('partition_id');
  return done(reader, { streamId, topicId, partitionId, segmentsCount: reader.u32('segments_count') });
}

export function decodeCreateGroup(body: Uint8Array): Decoded<{ streamId: Identifier; topicId: Identifier; name: string }> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return done(reader, { streamId, topicId, name: wireName(reader, 'name') });
}

function flags(reader: BodyReader, order: readonly number[], field: string): number {
  let bits = 0;
  for (const bit of order) if (reader.u8(field) !== 0) bits |= bit;
  return bits;
}

/**
 * WirePermissions (the same bytes in requests and responses), bounded by our permission limits;
 * the caller canonicalizes the order.
 */
export function readPermissions(reader: BodyReader): PermissionsInput {
  const global = flags(reader, PERMISSION_FLAG_ORDER.global, 'permissions.global');
  const streams: { streamId: number; bits: number; topics: { topicId: number; bits: number }[] }[] = [];
  let more = reader.u8('permissions.has_streams') !== 0;
  while (more && reader.ok) {
    reader.check(streams.length < PERMISSION_STREAMS_MAX, `permissions: more than ${PERMISSION_STREAMS_MAX} streams`);
    const streamId = reader.u32('permissions.stream_id');
    const bits = flags(reader, PERMISSION_FLAG_ORDER.stream, 'permissions.stream');
    const topics: { topicId: number; bits: number }[] = [];
    let moreTopics = reader.u8('permissions.has_topics') !== 0;
    while (moreTopics && reader.ok) {
      reader.check(topics.length < PERMISSION_TOPICS_MAX, `permissions: more than ${PERMISSION_TOPICS_MAX} topics`);
      const topicId = reader.u32('permissions.topic_id');
      topics.push({ topicId, bits: flags(reader, PERMISSION_FLAG_ORDER.topic, 'permissions.topic') });
      moreTopics = reader.u8('permissions.has_next_topic') !== 0;
    }
    streams.push({ streamId, bits, topics });
    more = reader.u8('permissions.has_next_stream') !== 0;
  }
  return { global, streams };
}

/** `has u8 (1 = present) [size u32, permissions of exactly that size]`. */
function optionalPermissions(reader: BodyReader): PermissionsInput | null {
  if (reader.u8('has_permissions') !== 1) return null;
  const size = reader.u32('permissions_size');
  const bytes = reader.bytes(size, 'permissions');
  if (!reader.ok) return null;
  const inner = new BodyReader(bytes);
  const decoded = readPermissions(inner);
  reader.check(inner.finish() === null, `permissions: ${inner.finish() ?? ''}`);
  return decoded;
}

export interface CreateUserBody {
  readonly username: string;
  readonly password: string;
  readonly status: number;
  readonly permissions: PermissionsInput | null;
  readonly options: OptionEntry[];
}

export function decodeCreateUser(body: Uint8Array): Decoded<CreateUserBody> {
  const reader = new BodyReader(body);
  const username = wireName(reader, 'username');
  const password = secret(reader, 'password');
  const status = reader.u8('status');
  return withOptions(reader, { username, password, status, permissions: optionalPermissions(reader) });
}

export interface UpdateUserBody {
  readonly userId: Identifier;
  readonly username: string | null;
  readonly status: number | null;
  readonly options: OptionEntry[];
}

export function decodeUpdateUser(body: Uint8Array): Decoded<UpdateUserBody> {
  const reader = new BodyReader(body);
  const userId = reader.identifier('user_id');
  const username = reader.u8('has_username') === 1 ? wireName(reader, 'username') : null;
  const status = reader.u8('has_status') === 1 ? reader.u8('status') : null;
  return withOptions(reader, { userId, username, status });
}

export function decodeUserId(body: Uint8Array): Decoded<{ userId: Identifier }> {
  const reader = new BodyReader(body);
  return done(reader, { userId: reader.identifier('user_id') });
}

export function decodeChangePassword(body: Uint8Array): Decoded<{ userId: Identifier; currentPassword: string; newPassword: string }> {
  const reader = new BodyReader(body);
  const userId = reader.identifier('user_id');
  const currentPassword = secret(reader, 'current_password');
  return done(reader, { userId, currentPassword, newPassword: secret(reader, 'new_password') });
}

export function decodeUpdatePermissions(body: Uint8Array): Decoded<{ userId: Identifier; permissions: PermissionsInput | null }> {
  const reader = new BodyReader(body);
  const userId = reader.identifier('user_id');
  return done(reader, { userId, permissions: optionalPermissions(reader) });
}

export function decodeCreateToken(body: Uint8Array): Decoded<{ name: string; expiryUs: bigint }> {
  const reader = new BodyReader(body);
  const name = wireName(reader, 'name');
  return done(reader, { name, expiryUs: reader.u64('expiry') });
}

export function decodeTokenName(body: Uint8Array): Decoded<{ name: string }> {
  const reader = new BodyReader(body);
  return done(reader, { name: wireName(reader, 'name') });
}

export function decodeClientId(body: Uint8Array): Decoded<{ clientId: number }> {
  const reader = new BodyReader(body);
  return done(reader, { clientId: reader.u32('client_id') });
}

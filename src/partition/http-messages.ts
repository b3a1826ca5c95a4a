/**
 * The JSON shapes of Iggy's HTTP API for messages (cc269ef70), for `POST` and `GET
 * /streams/{s}/topics/{t}/messages`:
 *
 * - Send body: `core/common/src/http/messages/send_messages.rs` (`SendMessages`' hand-written
 *   `Deserialize`, `parse_message_id`, `Validatable`), `core/common/src/types/message/
 *   partitioning.rs` and `partitioning_kind.rs` (`{kind, value}`, value base64), `iggy_message.rs`
 *   (builder limits MAX_PAYLOAD_SIZE, MAX_USER_HEADERS_SIZE), `user_headers.rs` (`HeaderEntry`,
 *   `HeaderField`, `HeaderKind`), `core/common/src/wire_conversions.rs` (`user_headers_to_wire`,
 *   `partitioning_to_wire`), and the handler's encoder `core/server/src/http/wire.rs`
 *   (`encode_send_messages`: ids of 0 are minted there, under the frame checksum) over
 *   `core/binary_protocol/src/requests/messages/send_messages.rs` (`SendMessagesEncoder`).
 * - Poll reply: `core/common/src/types/message/polled_messages.rs` (`PolledMessages`,
 *   `messages_from_batches`), `message_header.rs` (`IggyMessageHeader`), `iggy_message.rs`
 *   (`Serialize`), `core/binary_protocol/src/primitives/user_headers.rs`
 *   (`validate_user_headers`) and `wire_conversions.rs` (`user_headers_from_wire`), rendered by
 *   `core/server/src/http/handlers.rs` `poll_messages`.
 * - Poll query: `core/common/src/http/messages/poll_messages.rs` (`PollMessages`),
 *   `types/consumer/consumer_kind.rs` (`consumer_id`), `polling_strategy.rs` and
 *   `polling_kind.rs` (`kind`, `value`), `types/identifier/mod.rs` (`Identifier::from_str`).
 *
 * Send: `{"partitioning": {"kind": "balanced" | "partition_id" | "messages_key", "value": b64},
 * "messages": [{"id"?: u128 as a number or a decimal or UUID-hex string, "payload": b64,
 * "user_headers"?: [{"key": {kind, value: b64}, "value": {kind, value: b64}}] | b64 | null}]}`.
 * The messages become one producer batch (src/format/message-batch.ts) with the same TLV user
 * headers Iggy writes (`kind u8 · length u32 · bytes`, key then value, entries in `BTreeMap`
 * order), so a JSON send and a binary send of the same messages store the same frames.
 *
 * A refusal names its `stage`: `deserialize` where Iggy's serde extractor refuses (axum answers
 * 422 for a body, 400 for a query, in plain text; `code` is then the Iggy error the reference
 * wraps in its message, or InvalidFormat for a bare type mismatch), `validate` where Iggy answers
 * its own error body with `code`.
 */
import {
  BATCH_SIZE_MAX,
  BatchDeltas,
  encodeProducerBatch,
  MESSAGE_HEADER_SIZE,
  producerBatchLength,
  readMessageHeader,
  walkBatch,
} from '../format/message-batch.js';
import type { Identifier } from '../metadata/operations.js';
import { assert } from '../stdx/assert.js';
import { decodeBase64, encodeBase64 } from './base64.js';
import { DataError } from './codes.js';
import type { PollMessages, PollingKindName } from './poll-messages.js';
import { MESSAGES_KEY_SIZE_MAX, type Partitioning } from './send-messages.js';
import {
  encodeUserHeaders,
  HEADER_KIND_NAMES,
  HeaderKind,
  type HeaderEntry,
  type HeaderField,
  type HeaderKindName,
  typedHeaderEntries,
} from './user-headers.js';

/** Iggy's MAX_PAYLOAD_SIZE: decimal megabytes, not MiB. */
export const MESSAGE_PAYLOAD_SIZE_MAX = 64 * 1000 * 1000;
/** Iggy's MAX_USER_HEADERS_SIZE, of the encoded TLV bytes. */
export const USER_HEADERS_SIZE_MAX = 100 * 1000;
const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;

export interface HttpRefusal {
  readonly ok: false;
  readonly reason: string;
  readonly code: DataError;
  /** The JSON path or query parameter at fault. */
  readonly field: string;
  readonly stage: 'deserialize' | 'validate';
}

type Parsed<T> = { readonly ok: true; readonly value: T } | HttpRefusal;

function shapeError(field: string, reason: string, code: DataError = DataError.invalidFormat) {
  return { ok: false, reason: `${field}: ${reason}`, code, field, stage: 'deserialize' } as const;
}

function validateError(field: string, reason: string, code: DataError): HttpRefusal {
  return { ok: false, reason: `${field}: ${reason}`, code, field, stage: 'validate' };
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rust's `str::parse` for an unsigned integer of `max`: an optional `+`, then ASCII digits. */
function parseUnsigned(text: string, max: bigint): bigint | null {
  if (!/^\+?[0-9]+$/.test(text)) return null;
  const value = BigInt(text.startsWith('+') ? text.slice(1) : text);
  return value <= max ? value : null;
}

// ---- Send ------------------------------------------------------------------------------------

/**
 * What the decoder needs of the kernels (`Kernels` passes as is): XXH3-64 for each frame and the
 * batch checksum. A structural subset keeps this layer free of the kernel loader.
 */
export interface HttpBatchKernels {
  xxh3_64(bytes: Uint8Array): bigint;
  messageBatchChecksum(batch: Uint8Array): bigint;
}

export interface HttpSendOptions {
  /** The batch's origin timestamp, µs (every message gets delta 0: one receive time). */
  readonly originTimestampUs: number;
  /**
   * A fresh id for a message sent with id 0 (Iggy mints a UUIDv4 in the handler). The frame
   * checksum covers the id, so it is minted before the batch is hashed, never at admission.
   */
  readonly mintId: () => bigint;
}

export interface HttpSendMessages {
  readonly partitioning: Partitioning;
  readonly messagesCount: number;
  /** A producer batch: partition, base offset and base timestamp 0, checksums computed. */
  readonly batch: Uint8Array;
}

export type HttpSendDecoded = Parsed<HttpSendMessages>;

interface JsonMessage {
  /** 0n: the server mints one. */
  readonly id: bigint;
  readonly payload: Uint8Array;
  /** Encoded TLV bytes, or raw bytes from a base64 string; empty for none. */
  readonly userHeaders: Uint8Array;
}

interface JsonPartitioning {
  readonly kind: Partitioning['kind'];
  readonly value: Uint8Array;
}

const PARTITIONING_KINDS: readonly string[] = ['balanced', 'partition_id', 'messages_key'];

function readPartitioning(json: unknown): Parsed<JsonPartitioning> {
  if (!isObject(json)) return shapeError('partitioning', 'expected an object');
  const kind = json['kind'];
  if (kind === undefined) return shapeError('partitioning.kind', 'missing field');
  if (typeof kind !== 'string' || !PARTITIONING_KINDS.includes(kind)) {
    return shapeError('partitioning.kind', `unknown variant ${JSON.stringify(kind)}`);
  }
  const encoded = json['value'];
  if (encoded === undefined) return shapeError('partitioning.value', 'missing field');
  if (typeof encoded !== 'string') return shapeError('partitioning.value', 'expected base64');
  const value = decodeBase64(encoded, 'indifferent');
  if (value === null) return shapeError('partitioning.value', 'invalid base64');
  return { ok: true, value: { kind: kind as Partitioning['kind'], value } };
}

/** `parse_message_id`: absent is 0; a u64 number; a decimal u128 or 32 hex digits (dashes out). */
function readMessageId(json: unknown, field: string): Parsed<bigint> {
  if (json === undefined) return { ok: true, value: 0n };
  if (typeof json === 'number' || typeof json === 'bigint') {
    const exact = typeof json === 'bigint' || Number.isSafeInteger(json);
    const value = exact ? BigInt(json) : -1n;
    if (value < 0n || value > U64_MAX) return shapeError(field, 'ID must be a positive integer');
    return { ok: true, value };
  }
  if (typeof json !== 'string') return shapeError(field, 'ID must be a number or string');
  const decimal = parseUnsigned(json, U128_MAX);
  if (decimal !== null) return { ok: true, value: decimal };
  const hex = json.replaceAll('-', '');
  if (/^[0-9a-fA-F]{32}$/.test(hex)) return { ok: true, value: BigInt(`0x${hex}`) };
  return shapeError(field, 'must be a decimal number or UUID hex format');
}

function readHeaderField(json: unknown, field: string): Parsed<HeaderField> {
  if (!isObject(json)) return shapeError(field, 'expected an object');
  const kind = json['kind'];
  if (kind === undefined) return shapeError(`${field}.kind`, 'missing field');
  if (typeof kind !== 'string' || !(HEADER_KIND_NAMES as readonly string[]).includes(kind)) {
    return shapeError(`${field}.kind`, `unknown variant ${JSON.stringify(kind)}`);
  }
  const encoded = json['value'];
  if (encoded === undefined) return shapeError(`${field}.value`, 'missing field');
  if (typeof encoded !== 'string') return shapeError(`${field}.value`, 'expected base64');
  const value = decodeBase64(encoded, 'indifferent');
  if (value === null) return shapeError(`${field}.value`, 'invalid base64');
  return { ok: true, value: { kind: HeaderKind[kind as HeaderKindName], value } };
}

interface UserHeadersRead {
  readonly bytes: Uint8Array;
  /** From entries (held to the size limit), not a raw base64 string. */
  readonly typed: boolean;
}

function readHeaderEntries(json: unknown, field: string): Parsed<UserHeadersRead> {
  if (!Array.isArray(json)) return shapeError(field, 'Invalid headers format');
  const entries: HeaderEntry[] = [];
  for (const [index, item] of json.entries()) {
    const at = `${field}[${index}]`;
    if (!isObject(item)) return shapeError(at, 'Invalid headers format');
    const key = readHeaderField(item['key'], `${at}.key`);
    if (!key.ok) return key;
    const value = readHeaderField(item['value'], `${at}.value`);
    if (!value.ok) return value;
    entries.push([key.value, value.value]);
  }
  return { ok: true, value: { bytes: encodeUserHeaders(entries), typed: true } };
}

/**
 * `user_headers`: absent or null is none; a string is raw bytes in base64 (client-encrypted
 * headers, stored as given and, as in Iggy, not held to the size limit); otherwise entries.
 */
function readUserHeaders(json: unknown, field: string): Parsed<UserHeadersRead> {
  if (json === undefined || json === null) {
    return { ok: true, value: { bytes: new Uint8Array(0), typed: false } };
  }
  if (typeof json !== 'string') return readHeaderEntries(json, field);
  const raw = decodeBase64(json, 'required');
  if (raw === null) return shapeError(field, 'Invalid base64 headers');
  return { ok: true, value: { bytes: raw, typed: false } };
}

function readMessage(json: unknown, field: string): Parsed<JsonMessage> {
  // Iggy reads each message as a `serde_json::Value`: `get` on a non-object finds nothing.
  const message = isObject(json) ? json : {};
  const id = readMessageId(message['id'], `${field}.id`);
  if (!id.ok) return id;
  const encoded = message['payload'];
  if (typeof encoded !== 'string') return shapeError(`${field}.payload`, 'missing field');
  const payload = decodeBase64(encoded, 'required');
  if (payload === null) return shapeError(`${field}.payload`, 'Invalid base64 payload');
  const userHeaders = readUserHeaders(message['user_headers'], `${field}.user_headers`);
  if (!userHeaders.ok) return userHeaders;
  if (payload.byteLength === 0) {
    return shapeError(`${field}.payload`, 'empty', DataError.invalidMessagePayloadLength);
  }
  if (payload.byteLength > MESSAGE_PAYLOAD_SIZE_MAX) {
    const reason = `${payload.byteLength} bytes (max ${MESSAGE_PAYLOAD_SIZE_MAX})`;
    return shapeError(`${field}.payload`, reason, DataError.tooBigMessagePayload);
  }
  // The builder checks the payload first, then the headers it encodes; raw bytes skip it.
  const { bytes, typed } = userHeaders.value;
  if (typed && bytes.byteLength > USER_HEADERS_SIZE_MAX) {
    const reason = `${bytes.byteLength} bytes (max ${USER_HEADERS_SIZE_MAX})`;
    return shapeError(`${field}.user_headers`, reason, DataError.tooBigUserHeaders);
  }
  return { ok: true, value: { id: id.value, payload, userHeaders: bytes } };
}

interface JsonSendBody {
  readonly partitioning: JsonPartitioning;
  readonly messages: readonly JsonMessage[];
}

function readSendBody(json: unknown): Parsed<JsonSendBody> {
  if (!isObject(json)) return shapeError('body', 'expected struct SendMessages');
  for (const key of Object.keys(json)) {
    if (key !== 'partitioning' && key !== 'messages') {
      return shapeError(key, 'unknown field, expected `partitioning` or `messages`');
    }
  }
  if (json['partitioning'] === undefined) return shapeError('partitioning', 'missing field');
  if (json['messages'] === undefined) return shapeError('messages', 'missing field');
  const partitioning = readPartitioning(json['partitioning']);
  if (!partitioning.ok) return partitioning;
  const list = json['messages'];
  if (!Array.isArray(list)) return shapeError('messages', 'expected a sequence');
  const messages: JsonMessage[] = [];
  for (const [index, item] of list.entries()) {
    const message = readMessage(item, `messages[${index}]`);
    if (!message.ok) return message;
    messages.push(message.value);
  }
  return { ok: true, value: { partitioning: partitioning.value, messages } };
}

/**
 * `SendMessages::validate` then `partitioning_to_wire`: a key of 1..=255 bytes for partition id
 * and key partitioning (a balanced value is ignored, within the same bound); a partition id is the
 * value's first 4 bytes, little-endian, and bytes after them are ignored, as in Iggy.
 */
function toPartitioning(json: JsonPartitioning): Parsed<Partitioning> {
  const size = json.value.byteLength;
  if (size > MESSAGES_KEY_SIZE_MAX || (json.kind !== 'balanced' && size === 0)) {
    const reason = `${size} bytes for ${json.kind} (1..=${MESSAGES_KEY_SIZE_MAX})`;
    return validateError('partitioning.value', reason, DataError.invalidKeyValueLength);
  }
  if (json.kind === 'balanced') return { ok: true, value: { kind: 'balanced' } };
  if (json.kind === 'messages_key') {
    return { ok: true, value: { kind: 'messages_key', key: json.value } };
  }
  if (size < 4) {
    const reason = `partition id needs 4 bytes, got ${size}`;
    return validateError('partitioning.value', reason, DataError.invalidCommand);
  }
  const view = new DataView(json.value.buffer, json.value.byteOffset, 4);
  return { ok: true, value: { kind: 'partition_id', partitionId: view.getUint32(0, true) } };
}

/**
 * Decodes a JSON send body (as parsed by the lossless parser: integers past 2^53 are `bigint`)
 * into Iggy's partitioning and a producer batch. Total: never throws on any JSON value.
 */
export function decodeHttpSendMessages(
  json: unknown,
  kernels: HttpBatchKernels,
  options: HttpSendOptions,
): HttpSendDecoded {
  const { originTimestampUs, mintId } = options;
  assert(Number.isSafeInteger(originTimestampUs) && originTimestampUs >= 0, 'a µs timestamp');
  const body = readSendBody(json);
  if (!body.ok) return body;
  const partitioning = toPartitioning(body.value.partitioning);
  if (!partitioning.ok) return partitioning;
  const { messages } = body.value;
  if (messages.length === 0) {
    return validateError('messages', 'no messages', DataError.invalidMessagesCount);
  }
  const batchLength = producerBatchLength(messages);
  if (batchLength > BATCH_SIZE_MAX) {
    const reason = `a ${batchLength}-byte batch (max ${BATCH_SIZE_MAX})`;
    return validateError('messages', reason, DataError.invalidCommand);
  }
  const minted = messages.map((message) =>
    message.id === 0n ? { ...message, id: mintId() } : message,
  );
  const batch = encodeProducerBatch(kernels, minted, { originTimestampUs });
  return {
    ok: true,
    value: { partitioning: partitioning.value, messagesCount: messages.length, batch },
  };
}

// ---- Poll reply ------------------------------------------------------------------------------

/** A JSON integer: a number when exact, a bigint past 2^53 (render with the lossless writer). */
export type JsonInteger = number | bigint;

function jsonInteger(value: bigint): JsonInteger {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

export interface HttpHeaderFieldJson {
  readonly kind: HeaderKindName;
  readonly value: string;
}

export interface HttpHeaderEntryJson {
  readonly key: HttpHeaderFieldJson;
  readonly value: HttpHeaderFieldJson;
}

/** `IggyMessageHeader`, in its field order. */
export interface HttpMessageHeaderJson {
  readonly checksum: JsonInteger;
  readonly id: JsonInteger;
  readonly offset: number;
  readonly timestamp: number;
  readonly origin_timestamp: JsonInteger;
  readonly user_headers_length: number;
  readonly payload_length: number;
  readonly reserved: 0;
}

export interface HttpPolledMessageJson {
  readonly header: HttpMessageHeaderJson;
  readonly payload: string;
  /** Entries when the bytes are valid typed headers, else the raw bytes in base64. */
  readonly user_headers: readonly HttpHeaderEntryJson[] | string;
}

export interface HttpPolledMessagesJson {
  readonly partition_id: number;
  readonly current_offset: number;
  readonly count: number;
  readonly messages: readonly HttpPolledMessageJson[];
}

export interface HttpPolledMessagesInput {
  readonly partitionId: number;
  /** The partition's committed offset. */
  readonly currentOffset: number;
  /** Verified stored batches or slices of them, in offset order. */
  readonly batches: readonly Uint8Array[];
}

function headerFieldJson(field: HeaderField): HttpHeaderFieldJson {
  const kind = HEADER_KIND_NAMES[field.kind - 1];
  assert(kind !== undefined, 'a typed header field has a known kind');
  return { kind, value: encodeBase64(field.value) };
}

function userHeadersJson(bytes: Uint8Array): readonly HttpHeaderEntryJson[] | string {
  if (bytes.byteLength === 0) return [];
  const entries = typedHeaderEntries(bytes);
  if (entries === null) return encodeBase64(bytes);
  return entries.map(([key, value]) => ({
    key: headerFieldJson(key),
    value: headerFieldJson(value),
  }));
}

function batchMessagesJson(batch: Uint8Array, out: HttpPolledMessageJson[]): void {
  const walk = walkBatch(batch, BatchDeltas.contiguous);
  assert(walk.ok, 'a poll renders verified batches');
  const { baseOffset, baseTimestampUs, originTimestampUs } = walk.header;
  for (const start of walk.frameStarts) {
    const frame = readMessageHeader(batch, start);
    const payloadAt = start + MESSAGE_HEADER_SIZE;
    const headersAt = payloadAt + frame.payloadLength;
    const header: HttpMessageHeaderJson = {
      checksum: jsonInteger(frame.checksum),
      id: jsonInteger(frame.id),
      offset: baseOffset + frame.offsetDelta,
      // Iggy stamps the append time once per batch; the delta belongs to the origin time.
      timestamp: baseTimestampUs,
      origin_timestamp: jsonInteger(BigInt(originTimestampUs) + BigInt(frame.timestampDelta)),
      user_headers_length: frame.userHeadersLength,
      payload_length: frame.payloadLength,
      reserved: 0,
    };
    const payload = encodeBase64(batch.subarray(payloadAt, headersAt));
    const headers = batch.subarray(headersAt, headersAt + frame.userHeadersLength);
    out.push({ header, payload, user_headers: userHeadersJson(headers) });
  }
}

/**
 * The JSON body of a poll, as Iggy renders `PolledMessages`: write it with the lossless JSON
 * writer, which prints a bigint as its digits (serde prints u64 and u128 as plain numbers).
 */
export function encodeHttpPolledMessages(input: HttpPolledMessagesInput): HttpPolledMessagesJson {
  const { partitionId, currentOffset, batches } = input;
  assert(Number.isInteger(partitionId) && partitionId >= 0 && partitionId <= 0xffff_ffff, 'u32');
  assert(Number.isSafeInteger(currentOffset) && currentOffset >= 0, 'current offset');
  const messages: HttpPolledMessageJson[] = [];
  for (const batch of batches) batchMessagesJson(batch, messages);
  assert(messages.length <= 0xffff_ffff, 'the count fits its u32');
  return {
    partition_id: partitionId,
    current_offset: currentOffset,
    count: messages.length,
    messages,
  };
}

// ---- Poll query ------------------------------------------------------------------------------

/** A parsed query string: a repeated parameter arrives as an array. */
export type HttpQuery = Readonly<Record<string, string | readonly string[] | undefined>>;

/** A poll over HTTP: stream and topic come from the path. */
export type HttpPollQuery = Omit<PollMessages, 'streamId' | 'topicId'>;

const POLL_DEFAULT_COUNT = 10;

const POLLING_KIND_ALIASES: Readonly<Record<string, PollingKindName>> = {
  o: 'offset',
  offset: 'offset',
  t: 'timestamp',
  timestamp: 'timestamp',
  f: 'first',
  first: 'first',
  l: 'last',
  last: 'last',
  n: 'next',
  next: 'next',
};

const utf8 = new TextEncoder();

/** `Identifier::from_str`: a u32 (Rust's parse) is an id, else a name of 1..=255 UTF-8 bytes. */
function readConsumerId(text: string): Identifier | null {
  const id = parseUnsigned(text, 0xffff_ffffn);
  if (id !== null) return { kind: 'id', id: Number(id) };
  const size = utf8.encode(text).byteLength;
  return size >= 1 && size <= 255 ? { kind: 'name', name: text } : null;
}

type QueryValue = { readonly ok: true; readonly value: string | undefined } | HttpRefusal;

function queryValue(query: HttpQuery, field: string): QueryValue {
  const value = query[field];
  if (typeof value === 'string' || value === undefined) return { ok: true, value };
  return shapeError(field, 'duplicate field');
}

function queryUnsigned(
  query: HttpQuery,
  field: string,
  max: bigint,
  fallback: bigint,
): Parsed<bigint> {
  const text = queryValue(query, field);
  if (!text.ok) return text;
  if (text.value === undefined) return { ok: true, value: fallback };
  const value = parseUnsigned(text.value, max);
  if (value === null) return shapeError(field, `not a number in range: ${text.value}`);
  return { ok: true, value };
}

function queryStrategy(query: HttpQuery): Parsed<PollMessages['strategy']> {
  const kindText = queryValue(query, 'kind');
  if (!kindText.ok) return kindText;
  const kind = kindText.value === undefined ? 'offset' : POLLING_KIND_ALIASES[kindText.value];
  if (kind === undefined) return shapeError('kind', 'Invalid command', DataError.invalidCommand);
  const value = queryUnsigned(query, 'value', U64_MAX, 0n);
  if (!value.ok) return value;
  return { ok: true, value: { kind, value: value.value } };
}

/**
 * The poll query (`consumer_id`, `partition_id`, `kind`, `value`, `count`, `auto_commit`; each
 * optional, with Iggy's defaults: consumer 1, partition 0, offset 0, 10 messages, no commit).
 * Other parameters are ignored, as serde ignores unknown fields. The consumer is always a plain
 * consumer: Iggy's `Consumer` skips its kind when deserializing, so HTTP cannot poll as a group.
 */
export function decodeHttpPollQuery(query: HttpQuery): Parsed<HttpPollQuery> {
  const consumerText = queryValue(query, 'consumer_id');
  if (!consumerText.ok) return consumerText;
  const id = consumerText.value === undefined ? null : readConsumerId(consumerText.value);
  if (consumerText.value !== undefined && id === null) {
    return shapeError('consumer_id', 'Invalid identifier', DataError.invalidIdentifier);
  }
  const partitionId = queryUnsigned(query, 'partition_id', 0xffff_ffffn, 0n);
  if (!partitionId.ok) return partitionId;
  const strategy = queryStrategy(query);
  if (!strategy.ok) return strategy;
  const count = queryUnsigned(query, 'count', 0xffff_ffffn, BigInt(POLL_DEFAULT_COUNT));
  if (!count.ok) return count;
  const autoCommit = queryValue(query, 'auto_commit');
  if (!autoCommit.ok) return autoCommit;
  if (autoCommit.value !== undefined && autoCommit.value !== 'true') {
    if (autoCommit.value !== 'false') return shapeError('auto_commit', 'expected true or false');
  }
  const value: HttpPollQuery = {
    consumer: { kind: 'consumer', id: id ?? { kind: 'id', id: 1 } },
    partitionId: Number(partitionId.value),
    strategy: strategy.value,
    count: Number(count.value),
    autoCommit: autoCommit.value === 'true',
  };
  return { ok: true, value };
}

/**
 * The HTTP JSON shapes of messages: a JSON send becomes a producer batch that every kernel
 * verifies and whose bytes match a hand-computed layout; a poll renders stored batches (slices
 * too) as Iggy's `PolledMessages`; the poll query decodes with Iggy's defaults. Every refusal is
 * asserted by code, stage, field and reason.
 */
import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { stampBatch, setBatchChecksum } from '../../../src/format/message-batch.js';
import { stringifyJsonLossless } from '../../../src/http/json.js';
import { decodeBase64, encodeBase64 } from '../../../src/partition/base64.js';
import { DataError } from '../../../src/partition/codes.js';
import {
  decodeHttpPollQuery,
  decodeHttpSendMessages,
  encodeHttpPolledMessages,
  type HttpRefusal,
  type HttpSendDecoded,
  type HttpSendOptions,
} from '../../../src/partition/http-messages.js';
import { implementations } from '../../kernels/implementations.js';
import { encodeBatch } from '../../support/message-batches.js';
import { bytes, concat, u32le, u64le } from './wire.js';

const kernels = implementations[0]!.kernels;
const ORIGIN_US = 1_700_000_000_000_000;
const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const b64 = (value: Uint8Array | string): string =>
  Buffer.from(typeof value === 'string' ? text(value) : value).toString('base64');

function options(): HttpSendOptions {
  let next = 1000n;
  return {
    originTimestampUs: ORIGIN_US,
    mintId: () => {
      next += 1n;
      return next;
    },
  };
}

function sent(result: HttpSendDecoded) {
  if (!result.ok) throw new Error(`refused: ${result.reason}`);
  return result.value;
}

function refusal(result: { ok: boolean }): Omit<HttpRefusal, 'ok'> {
  if (result.ok) throw new Error('accepted');
  const { reason, code, field, stage } = result as HttpRefusal;
  return { reason, code, field, stage };
}

/** A TLV field: kind u8, length u32 LE, bytes (iggy-partition-plane.md §2.5). */
function tlv(kind: number, value: Uint8Array): Uint8Array {
  return concat(bytes(kind), u32le(value.byteLength), value);
}

const balanced = { kind: 'balanced', value: '' };

describe('decodeHttpSendMessages', () => {
  it('writes a hand-computed batch for one message with one typed header', () => {
    const json = {
      partitioning: balanced,
      messages: [
        {
          id: 5,
          payload: b64('hi'),
          user_headers: [{ key: { kind: 'string', value: b64('k') }, value: { kind: 'uint8', value: 'Bw==' } }],
        },
      ],
    };
    const { batch, messagesCount } = sent(decodeHttpSendMessages(json, kernels, options()));
    const headers = concat(tlv(2, text('k')), tlv(9, bytes(7)));
    expect(headers).toEqual(bytes(2, 1, 0, 0, 0, 0x6b, 9, 1, 0, 0, 0, 7));
    const frameBody = concat(
      u64le(5n), u64le(0n), // id u128
      u32le(0), u32le(0), // offset_delta, timestamp_delta
      u32le(12), u32le(2), // user_headers_length, payload_length
      u64le(0n), // reserved
      text('hi'),
      headers,
    );
    const frameChecksum = xxh3.xxh64(frameBody);
    const batchLength = 256 + 48 + 2 + 12;
    const head = concat(u64le(0n), u64le(0n), u64le(0n), u64le(BigInt(ORIGIN_US)), u64le(BigInt(batchLength)));
    const batchChecksum = xxh3.xxh64(concat(head, u32le(1), u64le(frameChecksum)));
    const expected = concat(
      head,
      u64le(batchChecksum),
      u32le(1),
      new Uint8Array(204),
      u64le(frameChecksum),
      frameBody,
    );
    expect(messagesCount).toBe(1);
    expect(batch).toEqual(expected);
    // The spec encoder of the test support, from the same frame, agrees.
    const support = encodeBatch([{ id: 5n, payload: text('hi'), userHeaders: headers }], {
      originTimestampUs: ORIGIN_US,
    });
    expect(batch).toEqual(support);
  });

  it.each(implementations)('round-trips ids, payloads and headers through a poll ($label)', ({ kernels }) => {
    const uuid = 'af362865-042c-4000-0000-000000000000';
    const entries = [{ key: { kind: 'int32', value: b64(u32le(42)) }, value: { kind: 'bool', value: 'AQ==' } }];
    const raw = bytes(0xff, 0x00, 0x10);
    const json = {
      messages: [
        { id: 7, payload: b64('first'), user_headers: entries },
        { id: '340282366920938463463374607431768211455', payload: b64('second') },
        { id: uuid, payload: b64('third'), user_headers: b64(raw) },
        { payload: b64('fourth'), user_headers: null },
        { id: 0, payload: b64('fifth'), user_headers: [] },
      ],
      partitioning: { kind: 'partition_id', value: b64(u32le(3)) },
    };
    const value = sent(decodeHttpSendMessages(json, kernels, options()));
    expect(value.partitioning).toEqual({ kind: 'partition_id', partitionId: 3 });
    expect(value.messagesCount).toBe(5);
    expect(kernels.messageBatchVerify(value.batch)).toMatchObject({ status: 'valid', messageCount: 5 });

    stampBatch(value.batch, { partitionId: 3, baseOffset: 40, baseTimestampUs: ORIGIN_US + 9 });
    setBatchChecksum(value.batch, kernels.messageBatchChecksum(value.batch));
    expect(kernels.messageBatchVerify(value.batch)).toMatchObject({ status: 'valid' });
    const polled = encodeHttpPolledMessages({ partitionId: 3, currentOffset: 44, batches: [value.batch] });
    expect(polled).toMatchObject({ partition_id: 3, current_offset: 44, count: 5 });
    const ids = polled.messages.map((message) => message.header.id);
    expect(ids).toEqual([7, (1n << 128n) - 1n, 0xaf362865042c40000000000000000000n, 1001, 1002]);
    expect(polled.messages.map((message) => message.payload)).toEqual(json.messages.map((m) => m.payload));
    expect(polled.messages.map((message) => message.header.offset)).toEqual([40, 41, 42, 43, 44]);
    expect(polled.messages[0]!.user_headers).toEqual(entries);
    expect(polled.messages[1]!.user_headers).toEqual([]);
    expect(polled.messages[2]!.user_headers).toBe(b64(raw));
    expect(polled.messages[3]!.user_headers).toEqual([]);
    expect(polled.messages[4]!.user_headers).toEqual([]);
    for (const message of polled.messages) {
      expect(message.header.timestamp).toBe(ORIGIN_US + 9);
      expect(message.header.origin_timestamp).toBe(ORIGIN_US);
    }
  });

  it('writes headers in Iggy map order (kind, then bytes) with the last value of a repeated key', () => {
    const field = (kind: string, value: Uint8Array) => ({ kind, value: b64(value) });
    const json = {
      partitioning: balanced,
      messages: [
        {
          payload: b64('x'),
          user_headers: [
            { key: field('string', text('b')), value: field('string', text('1')) },
            { key: field('raw', text('z')), value: field('string', text('2')) },
            { key: field('string', text('a')), value: field('string', text('3')) },
            { key: field('string', text('ab')), value: field('string', text('4')) },
            { key: field('string', text('b')), value: field('string', text('5')) },
          ],
        },
      ],
    };
    const { batch } = sent(decodeHttpSendMessages(json, kernels, options()));
    const expected = concat(
      tlv(1, text('z')), tlv(2, text('2')),
      tlv(2, text('a')), tlv(2, text('3')),
      tlv(2, text('ab')), tlv(2, text('4')),
      tlv(2, text('b')), tlv(2, text('5')),
    );
    expect(batch.subarray(256 + 48 + 1)).toEqual(expected);
  });

  it('maps each partitioning kind, ignoring a balanced value and bytes after a partition id', () => {
    const decode = (partitioning: unknown) =>
      sent(decodeHttpSendMessages({ partitioning, messages: [{ payload: 'eA==' }] }, kernels, options()))
        .partitioning;
    expect(decode({ kind: 'balanced', value: 'AAAA' })).toEqual({ kind: 'balanced' });
    expect(decode({ kind: 'partition_id', value: b64(bytes(1, 1, 0, 0, 9)) })).toEqual({
      kind: 'partition_id',
      partitionId: 257,
    });
    // serde_with's base64 does not require padding.
    expect(decode({ kind: 'messages_key', value: 'a2V5' })).toEqual({ kind: 'messages_key', key: text('key') });
    expect(decode({ kind: 'messages_key', value: 'aw' })).toEqual({ kind: 'messages_key', key: text('k') });
  });

  it('accepts ids as Iggy parses them: +digits, any dashes in 32 hex digits, bigint u64', () => {
    const idOf = (id: unknown) => {
      const { batch } = sent(decodeHttpSendMessages({ partitioning: balanced, messages: [{ id, payload: 'eA==' }] }, kernels, options()));
      return encodeHttpPolledMessages({ partitionId: 0, currentOffset: 0, batches: [batch] }).messages[0]!.header.id;
    };
    expect(idOf('+12')).toBe(12);
    expect(idOf('00000000000000000000000000000012')).toBe(12);
    expect(idOf('0000-0000-0000-0000-0000-0000-0000-00ff')).toBe(255);
    expect(idOf((1n << 64n) - 1n)).toBe((1n << 64n) - 1n);
    expect(idOf('0')).toBe(1001);
  });

  const messages = (...list: unknown[]) => ({ partitioning: balanced, messages: list });
  const deserialize = (field: string, reason: string, code: number = DataError.invalidFormat) => ({
    field,
    reason: `${field}: ${reason}`,
    code,
    stage: 'deserialize',
  });
  const validate = (field: string, reason: string, code: number) => ({
    field,
    reason: `${field}: ${reason}`,
    code,
    stage: 'validate',
  });
  const big = 'A'.repeat(Math.ceil(64_000_001 / 3) * 4 - 4) + 'AAA=';

  it.each([
    ['a non-object body', [], deserialize('body', 'expected struct SendMessages')],
    ['an unknown field', { ...messages(), extra: 1 }, deserialize('extra', 'unknown field, expected `partitioning` or `messages`')],
    ['no partitioning', { messages: [] }, deserialize('partitioning', 'missing field')],
    ['no messages', { partitioning: balanced }, deserialize('messages', 'missing field')],
    ['messages not a list', { partitioning: balanced, messages: {} }, deserialize('messages', 'expected a sequence')],
    ['a partitioning that is not an object', { partitioning: 'balanced', messages: [] }, deserialize('partitioning', 'expected an object')],
    ['an unknown partitioning kind', { partitioning: { kind: 'round_robin', value: '' }, messages: [] }, deserialize('partitioning.kind', 'unknown variant "round_robin"')],
    ['a partitioning without value', { partitioning: { kind: 'balanced' }, messages: [] }, deserialize('partitioning.value', 'missing field')],
    ['a partitioning value that is not base64', { partitioning: { kind: 'messages_key', value: 'a b' }, messages: [] }, deserialize('partitioning.value', 'invalid base64')],
    ['a message without payload', messages({ id: 1 }), deserialize('messages[0].payload', 'missing field')],
    ['a message that is not an object', messages('eA=='), deserialize('messages[0].payload', 'missing field')],
    ['an unpadded payload', messages({ payload: 'eA' }), deserialize('messages[0].payload', 'Invalid base64 payload')],
    ['a URL-safe payload', messages({ payload: '-_8=' }), deserialize('messages[0].payload', 'Invalid base64 payload')],
    ['a negative id', messages({ id: -1, payload: 'eA==' }), deserialize('messages[0].id', 'ID must be a positive integer')],
    ['a fractional id', messages({ id: 1.5, payload: 'eA==' }), deserialize('messages[0].id', 'ID must be a positive integer')],
    ['an id past u64 as a number', messages({ id: 1n << 64n, payload: 'eA==' }), deserialize('messages[0].id', 'ID must be a positive integer')],
    ['a null id', messages({ id: null, payload: 'eA==' }), deserialize('messages[0].id', 'ID must be a number or string')],
    ['an id string that is neither', messages({ id: 'not-a-valid-id', payload: 'eA==' }), deserialize('messages[0].id', 'must be a decimal number or UUID hex format')],
    ['an id past u128', messages({ id: (1n << 128n).toString(), payload: 'eA==' }), deserialize('messages[0].id', 'must be a decimal number or UUID hex format')],
    ['raw headers that are not base64', messages({ payload: 'eA==', user_headers: '@@' }), deserialize('messages[0].user_headers', 'Invalid base64 headers')],
    ['headers that are not a list', messages({ payload: 'eA==', user_headers: { a: 1 } }), deserialize('messages[0].user_headers', 'Invalid headers format')],
    ['a header entry without value', messages({ payload: 'eA==', user_headers: [{ key: { kind: 'raw', value: 'eA==' } }] }), deserialize('messages[0].user_headers[0].value', 'expected an object')],
    ['an unknown header kind', messages({ payload: 'eA==', user_headers: [{ key: { kind: 'uuid', value: 'eA==' }, value: { kind: 'raw', value: 'eA==' } }] }), deserialize('messages[0].user_headers[0].key.kind', 'unknown variant "uuid"')],
    ['a header value that is not base64', messages({ payload: 'eA==', user_headers: [{ key: { kind: 'raw', value: 'eA==' }, value: { kind: 'raw', value: 'e===' } }] }), deserialize('messages[0].user_headers[0].value.value', 'invalid base64')],
    ['an empty payload', messages({ payload: '' }), deserialize('messages[0].payload', 'empty', DataError.invalidMessagePayloadLength)],
    ['a payload over 64 000 000 bytes', messages({ payload: big }), deserialize('messages[0].payload', '64000001 bytes (max 64000000)', DataError.tooBigMessagePayload)],
    ['an empty list of messages', messages(), validate('messages', 'no messages', DataError.invalidMessagesCount)],
    ['an empty key', { partitioning: { kind: 'messages_key', value: '' }, messages: [{ payload: 'eA==' }] }, validate('partitioning.value', '0 bytes for messages_key (1..=255)', DataError.invalidKeyValueLength)],
    ['an empty partition id', { partitioning: { kind: 'partition_id', value: '' }, messages: [{ payload: 'eA==' }] }, validate('partitioning.value', '0 bytes for partition_id (1..=255)', DataError.invalidKeyValueLength)],
    ['a key of 256 bytes', { partitioning: { kind: 'messages_key', value: b64(new Uint8Array(256)) }, messages: [{ payload: 'eA==' }] }, validate('partitioning.value', '256 bytes for messages_key (1..=255)', DataError.invalidKeyValueLength)],
    ['a balanced value of 256 bytes', { partitioning: { kind: 'balanced', value: b64(new Uint8Array(256)) }, messages: [{ payload: 'eA==' }] }, validate('partitioning.value', '256 bytes for balanced (1..=255)', DataError.invalidKeyValueLength)],
    ['a short partition id', { partitioning: { kind: 'partition_id', value: 'AQI=' }, messages: [{ payload: 'eA==' }] }, validate('partitioning.value', 'partition id needs 4 bytes, got 2', DataError.invalidCommand)],
  ])('refuses %s', (_name, json, expected) => {
    expect(refusal(decodeHttpSendMessages(json, kernels, options()))).toEqual(expected);
  });

  it('refuses typed headers over 100 000 bytes after the payload checks, and not raw ones', () => {
    const value = b64(new Uint8Array(255));
    const user_headers = Array.from({ length: 197 }, (_, index) => ({
      key: { kind: 'uint32', value: b64(u32le(index)) },
      value: { kind: 'raw', value },
    }));
    // 197 entries of 5 + 4 + 5 + 255 bytes, then 197 of 5 + 8 + 5 + 255: 106 774 bytes.
    const many = [...user_headers, ...user_headers.map((entry, index) => ({ ...entry, key: { kind: 'uint64', value: b64(u64le(BigInt(index))) } }))];
    expect(refusal(decodeHttpSendMessages(messages({ payload: 'eA==', user_headers: many }), kernels, options()))).toEqual(
      deserialize('messages[0].user_headers', '106774 bytes (max 100000)', DataError.tooBigUserHeaders),
    );
    expect(refusal(decodeHttpSendMessages(messages({ payload: '', user_headers: many }), kernels, options()))).toMatchObject({
      code: DataError.invalidMessagePayloadLength,
    });
    const raw = b64(new Uint8Array(100_001));
    expect(decodeHttpSendMessages(messages({ payload: 'eA==', user_headers: raw }), kernels, options()).ok).toBe(true);
  });

  it('refuses a batch beyond the 64 MiB message bound', () => {
    const payload = b64(new Uint8Array(40_000_000));
    expect(refusal(decodeHttpSendMessages(messages({ payload }, { payload }), kernels, options()))).toEqual(
      validate('messages', `a ${256 + 2 * (48 + 40_000_000)}-byte batch (max ${64 * 1024 * 1024})`, DataError.invalidCommand),
    );
  });
});

describe('encodeHttpPolledMessages', () => {
  const stamped = { partitionId: 1, baseOffset: 100, baseTimestampUs: 2_000_000, originTimestampUs: 1_000_000 };

  it('renders a message exactly as serde writes PolledMessages', () => {
    const userHeaders = concat(tlv(2, text('k')), tlv(9, bytes(7)));
    const batch = encodeBatch([{ id: 5n, payload: text('hi'), userHeaders, timestampDelta: 3 }], stamped);
    const checksum = new DataView(batch.buffer).getBigUint64(256, true);
    const body = stringifyJsonLossless(encodeHttpPolledMessages({ partitionId: 1, currentOffset: 100, batches: [batch] }));
    expect(body).toBe(
      '{"partition_id":1,"current_offset":100,"count":1,"messages":[{"header":{' +
        `"checksum":${checksum},"id":5,"offset":100,"timestamp":2000000,"origin_timestamp":1000003,` +
        '"user_headers_length":12,"payload_length":2,"reserved":0},"payload":"aGk=","user_headers":' +
        '[{"key":{"kind":"string","value":"aw=="},"value":{"kind":"uint8","value":"Bw=="}}]}]}',
    );
  });

  it('takes offsets from the deltas of a slice and renders an empty poll', () => {
    const messages = [0, 1, 2, 3].map((index) => ({ payload: text(`m${index}`), timestampDelta: index }));
    const slice = encodeBatch(messages.slice(2), { ...stamped, firstDelta: 2 });
    const polled = encodeHttpPolledMessages({ partitionId: 1, currentOffset: 103, batches: [slice] });
    expect(polled.count).toBe(2);
    expect(polled.messages.map((message) => message.header.offset)).toEqual([102, 103]);
    expect(polled.messages.map((message) => message.header.id)).toEqual([3, 4]);
    expect(polled.messages.map((message) => message.header.origin_timestamp)).toEqual([1_000_002, 1_000_003]);
    expect(encodeHttpPolledMessages({ partitionId: 0, currentOffset: 0, batches: [] })).toEqual({
      partition_id: 0,
      current_offset: 0,
      count: 0,
      messages: [],
    });
  });

  it('renders user headers that Iggy cannot read as typed entries as base64 of the raw bytes', () => {
    const cases = [
      tlv(2, text('k')), // a key with no value
      concat(tlv(0, text('k')), tlv(2, text('v'))), // kind 0 is reserved
      concat(tlv(16, text('k')), tlv(2, text('v'))), // no kind 16
      concat(tlv(2, text('k')), tlv(11, bytes(1, 2))), // a uint32 of 2 bytes
      concat(tlv(2, new Uint8Array(0)), tlv(2, text('v'))), // an empty field
      concat(tlv(2, new Uint8Array(256)), tlv(2, text('v'))), // a field past 255 bytes
      bytes(2, 9, 0, 0, 0, 0x6b), // a length past the end
    ];
    for (const userHeaders of cases) {
      const batch = encodeBatch([{ payload: text('x'), userHeaders }], stamped);
      const [message] = encodeHttpPolledMessages({ partitionId: 1, currentOffset: 100, batches: [batch] }).messages;
      expect(message!.user_headers).toBe(b64(userHeaders));
    }
  });

  it('sorts typed entries into map order and renders a large checksum and id as bigints', () => {
    const userHeaders = concat(tlv(2, text('b')), tlv(1, text('1')), tlv(2, text('a')), tlv(15, new Uint8Array(8)));
    const id = (1n << 100n) + 1n;
    const batch = encodeBatch([{ id, payload: text('x'), userHeaders }], stamped);
    const [message] = encodeHttpPolledMessages({ partitionId: 1, currentOffset: 100, batches: [batch] }).messages;
    expect(message!.header.id).toBe(id);
    expect(message!.header.checksum).toBe(new DataView(batch.buffer).getBigUint64(256, true));
    expect(message!.user_headers).toEqual([
      { key: { kind: 'string', value: 'YQ==' }, value: { kind: 'float64', value: 'AAAAAAAAAAA=' } },
      { key: { kind: 'string', value: 'Yg==' }, value: { kind: 'raw', value: 'MQ==' } },
    ]);
  });
});

describe('decodeHttpPollQuery', () => {
  it('applies Iggy defaults to an empty query', () => {
    expect(decodeHttpPollQuery({})).toEqual({
      ok: true,
      value: {
        consumer: { kind: 'consumer', id: { kind: 'id', id: 1 } },
        partitionId: 0,
        strategy: { kind: 'offset', value: 0n },
        count: 10,
        autoCommit: false,
      },
    });
  });

  it('reads every field, kind aliases and named consumers, and ignores other parameters', () => {
    const query = { consumer_id: 'app', partition_id: '3', kind: 't', value: '42', count: '5', auto_commit: 'true', consistency: 'linearizable', strategy_kind: 'last' };
    expect(decodeHttpPollQuery(query)).toEqual({
      ok: true,
      value: {
        consumer: { kind: 'consumer', id: { kind: 'name', name: 'app' } },
        partitionId: 3,
        strategy: { kind: 'timestamp', value: 42n },
        count: 5,
        autoCommit: true,
      },
    });
    const kinds = ['o', 'offset', 't', 'timestamp', 'f', 'first', 'l', 'last', 'n', 'next'];
    const names = kinds.map((kind) => {
      const result = decodeHttpPollQuery({ kind });
      return result.ok ? result.value.strategy.kind : null;
    });
    expect(names).toEqual(['offset', 'offset', 'timestamp', 'timestamp', 'first', 'first', 'last', 'last', 'next', 'next']);
    const parsed = decodeHttpPollQuery({ consumer_id: '+42', value: '18446744073709551615', count: '0', auto_commit: 'false' });
    expect(parsed).toMatchObject({
      ok: true,
      value: { consumer: { id: { kind: 'id', id: 42 } }, strategy: { value: (1n << 64n) - 1n }, count: 0, autoCommit: false },
    });
    expect(decodeHttpPollQuery({ consumer_id: '4294967296' })).toMatchObject({ value: { consumer: { id: { kind: 'name', name: '4294967296' } } } });
  });

  const shape = (field: string, reason: string, code: number = DataError.invalidFormat) => ({ field, reason: `${field}: ${reason}`, code, stage: 'deserialize' });

  it.each([
    ['an empty consumer id', { consumer_id: '' }, shape('consumer_id', 'Invalid identifier', DataError.invalidIdentifier)],
    ['a consumer name over 255 bytes', { consumer_id: 'é'.repeat(128) }, shape('consumer_id', 'Invalid identifier', DataError.invalidIdentifier)],
    ['a partition id past u32', { partition_id: '4294967296' }, shape('partition_id', 'not a number in range: 4294967296')],
    ['a negative partition id', { partition_id: '-1' }, shape('partition_id', 'not a number in range: -1')],
    ['an unknown kind', { kind: 'Offset' }, shape('kind', 'Invalid command', DataError.invalidCommand)],
    ['a value past u64', { value: '18446744073709551616' }, shape('value', 'not a number in range: 18446744073709551616')],
    ['an empty count', { count: '' }, shape('count', 'not a number in range: ')],
    ['a count with spaces', { count: ' 5' }, shape('count', 'not a number in range:  5')],
    ['auto_commit as 1', { auto_commit: '1' }, shape('auto_commit', 'expected true or false')],
    ['a repeated count', { count: ['1', '2'] }, shape('count', 'duplicate field')],
    ['a repeated consumer id', { consumer_id: ['a', 'b'] }, shape('consumer_id', 'duplicate field')],
  ])('refuses %s', (_name, query, expected) => {
    expect(refusal(decodeHttpPollQuery(query))).toEqual(expected);
  });
});

describe('base64 as Iggy reads it', () => {
  it('round-trips every tail length and pads on encode', () => {
    for (let size = 0; size < 8; size += 1) {
      const value = Uint8Array.from({ length: size }, (_, index) => 0xf0 + index);
      const encoded = encodeBase64(value);
      expect(encoded).toBe(b64(value));
      expect(decodeBase64(encoded, 'required')).toEqual(value);
      expect(decodeBase64(encoded.replace(/=+$/, ''), 'indifferent')).toEqual(value);
    }
  });

  it.each([
    ['missing padding where required', 'eA', 'required'],
    ['too much padding', 'eA===', 'indifferent'],
    ['too little padding', 'eA=', 'indifferent'],
    ['padding on a whole group', 'eHl6=', 'indifferent'],
    ['a lone sextet', 'eHl6e', 'indifferent'],
    ['non-zero trailing bits', 'eB==', 'required'],
    ['padding inside', 'eA==eA==', 'required'],
    ['whitespace', 'eA==\n', 'required'],
    ['non-ASCII', 'éA==', 'required'],
  ] as const)('refuses %s', (_name, input, padding) => {
    expect(decodeBase64(input, padding)).toBeNull();
  });
});

/**
 * SendMessages: the request decoder (iggy-partition-plane.md §2.1, §4.2), the choice of partition
 * (§4.1) and the reply (§4.3). Bodies come from test/unit/partition/wire.ts and batches from the
 * independent spec encoder; every refusal is asserted by its reason.
 */
import { xxh32 as referenceXxh32 } from '@node-rs/xxhash';
import { describe, expect, it, vi } from 'vitest';
import { createTsKernels } from '../../../src/kernels/kernels-ts.js';
import { DataError } from '../../../src/partition/codes.js';
import {
  choosePartition,
  decodeSendMessages,
  encodeSendReply,
  type Partitioning,
  type SendBatchVerify,
  type SendDecoded,
} from '../../../src/partition/send-messages.js';
import { encodeBatch, textMessages } from '../../support/message-batches.js';
import { bytes, concat, identifier, sendMessagesBody, u32le } from './wire.js';

const kernels = createTsKernels();
const verify = (batch: Uint8Array): SendBatchVerify => kernels.messageBatchVerify(batch);

function refusal(result: SendDecoded): { reason: string; code: number } {
  if (result.ok) throw new Error('decoded');
  return { reason: result.reason, code: result.code };
}

function body(overrides: Partial<Parameters<typeof sendMessagesBody>[0]> = {}): Uint8Array {
  const batch = encodeBatch(textMessages(2));
  return sendMessagesBody({
    stream: 1,
    topic: 2,
    partitioning: { balanced: true },
    messagesCount: 2,
    batch,
    ...overrides,
  });
}

/** The byte offset of the batch in `body()`'s default layout: 4 + 6 + 6 + 2 + 4. */
const DEFAULT_BATCH_AT = 22;

describe('decodeSendMessages', () => {
  it('decodes balanced, partition id and key partitioning with numeric and named ids', () => {
    const batch = encodeBatch(textMessages(3, 'send'));
    const cases: [Parameters<typeof sendMessagesBody>[0]['partitioning'], Partitioning][] = [
      [{ balanced: true }, { kind: 'balanced' }],
      [{ partitionId: 7 }, { kind: 'partition_id', partitionId: 7 }],
      [{ key: bytes(0xde, 0xad) }, { kind: 'messages_key', key: bytes(0xde, 0xad) }],
    ];
    for (const [wire, expected] of cases) {
      const encoded = sendMessagesBody({
        stream: 'orders',
        topic: 4_000_000_000,
        partitioning: wire,
        messagesCount: 3,
        batch,
      });
      const result = decodeSendMessages(encoded, verify);
      expect(result).toEqual({
        ok: true,
        value: {
          streamId: { kind: 'name', name: 'orders' },
          topicId: { kind: 'id', id: 4_000_000_000 },
          partitioning: expected,
          messagesCount: 3,
          batch,
        },
      });
    }
  });

  it('accepts the longest messages key (255 bytes)', () => {
    const key = new Uint8Array(255).fill(7);
    const result = decodeSendMessages(body({ partitioning: { key } }), verify);
    expect(result.ok && result.value.partitioning).toEqual({ kind: 'messages_key', key });
  });

  it('the batch is a view of the body at the end of the metadata', () => {
    const encoded = body();
    const result = decodeSendMessages(encoded, verify);
    if (!result.ok) throw new Error(result.reason);
    expect(result.value.batch.buffer).toBe(encoded.buffer);
    expect(result.value.batch.byteOffset).toBe(DEFAULT_BATCH_AT);
  });

  it('refuses a body shorter than metadata_length', () => {
    expect(refusal(decodeSendMessages(bytes(1, 0, 0), verify))).toEqual({
      reason: 'metadata_length: truncated',
      code: DataError.invalidCommand,
    });
  });

  it('refuses a metadata_length that runs past the body', () => {
    const encoded = concat(u32le(30), identifier(1), identifier(2));
    expect(refusal(decodeSendMessages(encoded, verify)).reason).toBe(
      'metadata_length 30 runs past the body',
    );
  });

  it('refuses a metadata_length that disagrees with the metadata it declares', () => {
    expect(refusal(decodeSendMessages(body({ metadataLengthSkew: -1 }), verify)).reason).toBe(
      'metadata: messages_count: truncated',
    );
    expect(refusal(decodeSendMessages(body({ metadataLengthSkew: 1 }), verify)).reason).toBe(
      'metadata: 1 trailing bytes',
    );
  });

  it('refuses malformed identifiers by the identifier decoder reason', () => {
    const badKind = concat(bytes(3, 4), u32le(1));
    const encoded = concat(u32le(18), badKind, identifier(2), bytes(1, 0), u32le(2));
    expect(refusal(decodeSendMessages(encoded, verify)).reason).toBe(
      'metadata: stream_id: identifier kind 3',
    );
    const badSize = concat(identifier(1), bytes(1, 2, 0, 0), bytes(1, 0), u32le(2));
    expect(refusal(decodeSendMessages(concat(u32le(16), badSize), verify)).reason).toBe(
      'metadata: topic_id: numeric identifier size 2',
    );
  });

  it('refuses each partitioning whose length does not fit its kind, and unknown kinds', () => {
    const withPartitioning = (partitioning: Uint8Array) => {
      const metadata = concat(identifier(1), identifier(2), partitioning, u32le(2));
      return concat(u32le(metadata.byteLength), metadata, encodeBatch(textMessages(2)));
    };
    const reasonOf = (partitioning: Uint8Array) =>
      refusal(decodeSendMessages(withPartitioning(partitioning), verify)).reason;
    expect(reasonOf(bytes(1, 1, 0))).toBe('metadata: partitioning: balanced with length 1');
    expect(reasonOf(bytes(2, 3, 1, 0, 0))).toBe(
      'metadata: partitioning: partition id with length 3',
    );
    expect(reasonOf(bytes(3, 0))).toBe('metadata: partitioning: empty messages key');
    expect(reasonOf(bytes(4, 0))).toBe('metadata: partitioning: kind 4');
    expect(reasonOf(bytes(0, 0))).toBe('metadata: partitioning: kind 0');
  });

  it('refuses a batch that is not a batch header, or runs on after batch_length', () => {
    const short = body({ batch: new Uint8Array(100) });
    expect(refusal(decodeSendMessages(short, verify)).reason).toBe('batch: header_truncated');
    const batch = encodeBatch(textMessages(2));
    const trailing = body({ batch: concat(batch, bytes(0, 0, 0)) });
    expect(refusal(decodeSendMessages(trailing, verify)).reason).toBe(
      `batch: batch_length ${batch.byteLength} but ${batch.byteLength + 3} bytes follow`,
    );
    const reserved = batch.slice();
    reserved[200] = 1;
    expect(refusal(decodeSendMessages(body({ batch: reserved }), verify)).reason).toBe(
      'batch: header_reserved',
    );
  });

  it('refuses an empty batch and a count that differs from messages_count', () => {
    const empty = new Uint8Array(256);
    empty.set(u32le(256), 32);
    expect(refusal(decodeSendMessages(body({ batch: empty, messagesCount: 0 }), verify))).toEqual(
      { reason: 'batch: no messages', code: DataError.invalidCommand },
    );
    expect(refusal(decodeSendMessages(body({ messagesCount: 3 }), verify)).reason).toBe(
      'messages_count 3 but the batch holds 2',
    );
  });

  it('does not hash a body whose lengths or counts already refuse it', () => {
    const spy = vi.fn(verify);
    decodeSendMessages(body({ messagesCount: 3 }), spy);
    decodeSendMessages(body({ metadataLengthSkew: 1 }), spy);
    expect(spy).not.toHaveBeenCalled();
    decodeSendMessages(body(), spy);
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("reports the verifier's faults with their Iggy codes", () => {
    const frameReserved = body();
    frameReserved[DEFAULT_BATCH_AT + 256 + 40] = 1;
    expect(refusal(decodeSendMessages(frameReserved, verify))).toEqual({
      reason: 'batch: frame_reserved at message 0',
      code: DataError.invalidCommand,
    });
    const payload = body();
    payload[payload.byteLength - 1]! ^= 0xff;
    expect(refusal(decodeSendMessages(payload, verify))).toEqual({
      reason: 'batch: message 1 checksum mismatch',
      code: DataError.invalidMessageChecksum,
    });
    const origin = body();
    origin[DEFAULT_BATCH_AT + 24]! ^= 1;
    expect(refusal(decodeSendMessages(origin, verify))).toEqual({
      reason: 'batch: batch checksum mismatch',
      code: DataError.invalidBatchChecksum,
    });
  });

  it('refuses every proper prefix of a valid body without throwing', () => {
    const encoded = body();
    for (let length = 0; length < encoded.byteLength; length += 1) {
      expect(decodeSendMessages(encoded.subarray(0, length), verify).ok).toBe(false);
    }
  });
});

describe('choosePartition', () => {
  it('balanced: counter mod n, and the counter moves on mod n', () => {
    const seen: number[] = [];
    let counter = 0;
    for (let send = 0; send < 7; send += 1) {
      const choice = choosePartition({ kind: 'balanced' }, 3, counter);
      if (!choice.ok) throw new Error(choice.reason);
      seen.push(choice.partitionId);
      counter = choice.balancedCounter;
    }
    expect(seen).toEqual([0, 1, 2, 0, 1, 2, 0]);
    // A counter left from before the topic lost partitions still lands inside it.
    expect(choosePartition({ kind: 'balanced' }, 3, 5)).toEqual({
      ok: true,
      partitionId: 2,
      balancedCounter: 0,
    });
  });

  it('partition id: as given when it exists, else PartitionNotFound', () => {
    const given: Partitioning = { kind: 'partition_id', partitionId: 2 };
    expect(choosePartition(given, 3, 9)).toEqual({ ok: true, partitionId: 2, balancedCounter: 9 });
    expect(choosePartition({ kind: 'partition_id', partitionId: 3 }, 3, 0)).toEqual({
      ok: false,
      reason: 'partition 3 not found (3 partitions)',
      code: DataError.partitionNotFound,
    });
    expect(choosePartition({ kind: 'partition_id', partitionId: 0 }, 0, 0)).toEqual({
      ok: false,
      reason: 'partition 0 not found (0 partitions)',
      code: 3007,
    });
  });

  it('messages key: xxh32(key) mod n, the counter untouched', () => {
    const key = new TextEncoder().encode('customer-42');
    const expected = referenceXxh32(key, 0) % 5;
    const choice = choosePartition({ kind: 'messages_key', key }, 5, 4);
    expect(choice).toEqual({ ok: true, partitionId: expected, balancedCounter: 4 });
    // "abc" hashes to 852,579,327, which is 0 mod 3 and 3 mod 4.
    const abc = new TextEncoder().encode('abc');
    expect(choosePartition({ kind: 'messages_key', key: abc }, 3, 0)).toMatchObject({
      partitionId: 0,
    });
    expect(choosePartition({ kind: 'messages_key', key: abc }, 4, 0)).toMatchObject({
      partitionId: 3,
    });
  });

  it('a topic with no partitions is InvalidIdentifier for balanced and key partitioning', () => {
    const expected = { ok: false, reason: 'topic has no partitions', code: 6 };
    expect(choosePartition({ kind: 'balanced' }, 0, 0)).toEqual(expected);
    expect(choosePartition({ kind: 'messages_key', key: bytes(1) }, 0, 0)).toEqual(expected);
  });
});

describe('encodeSendReply', () => {
  it('no confirmation is a zero count', () => {
    expect([...encodeSendReply([])]).toEqual([0, 0, 0, 0]);
  });

  it('one confirmation: count 1, then stream, topic, partition u32 and base_offset u64, LE', () => {
    const reply = encodeSendReply([
      { streamId: 1, topicId: 0x0203, partitionId: 0x04050607, baseOffset: 0x0001_0203_0405_0607 },
    ]);
    expect([...reply]).toEqual([
      ...[1, 0, 0, 0],
      ...[1, 0, 0, 0],
      ...[0x03, 0x02, 0, 0],
      ...[0x07, 0x06, 0x05, 0x04],
      ...[0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00],
    ]);
  });

  it('one batch cannot be confirmed twice', () => {
    const confirmation = { streamId: 1, topicId: 1, partitionId: 0, baseOffset: 0 };
    expect(() => encodeSendReply([confirmation, confirmation])).toThrow();
  });
});

/**
 * Consumer offsets: the Store, Delete and Get decoders (iggy-partition-plane.md §6.1), Get's
 * 20-byte reply, and the offset key (§6.2).
 */
import { xxh32 as referenceXxh32 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import {
  consumerKey,
  decodeDeleteConsumerOffset,
  decodeGetConsumerOffset,
  decodeStoreConsumerOffset,
  encodeConsumerOffsetReply,
} from '../../../src/partition/consumer-offsets.js';
import { bytes, concat, offsetPrefix, u64le } from './wire.js';

const prefix = offsetPrefix({
  consumerKind: 1,
  consumerId: 'analytics',
  stream: 1,
  topic: 2,
  partitionId: 0,
});
const address = {
  consumer: { kind: 'consumer', id: { kind: 'name', name: 'analytics' } },
  streamId: { kind: 'id', id: 1 },
  topicId: { kind: 'id', id: 2 },
  partitionId: 0,
};

function reasonOf(result: { ok: boolean; reason?: string }): string {
  return result.ok ? 'decoded' : result.reason!;
}

describe('consumer offset requests', () => {
  it('Get is the prefix alone', () => {
    expect(decodeGetConsumerOffset(prefix)).toEqual({ ok: true, value: address });
    const none = offsetPrefix({
      consumerKind: 2,
      consumerId: 5,
      stream: 'orders',
      topic: 'paid',
      partitionId: null,
    });
    expect(decodeGetConsumerOffset(none)).toEqual({
      ok: true,
      value: {
        consumer: { kind: 'group', id: { kind: 'id', id: 5 } },
        streamId: { kind: 'name', name: 'orders' },
        topicId: { kind: 'name', name: 'paid' },
        partitionId: null,
      },
    });
  });

  it('Store is the prefix, offset u64 and ack u8', () => {
    const offset = 0xfedc_ba98_7654_3210n;
    const body = concat(prefix, u64le(offset), bytes(1));
    expect(decodeStoreConsumerOffset(body)).toEqual({
      ok: true,
      value: { ...address, offset, ack: 'quorum' },
    });
    const noAck = concat(prefix, u64le(2n), bytes(0));
    expect(decodeStoreConsumerOffset(noAck)).toEqual({
      ok: true,
      value: { ...address, offset: 2n, ack: 'no_ack' },
    });
  });

  it('Delete is the prefix and ack u8', () => {
    expect(decodeDeleteConsumerOffset(concat(prefix, bytes(1)))).toEqual({
      ok: true,
      value: { ...address, ack: 'quorum' },
    });
    expect(decodeDeleteConsumerOffset(concat(prefix, bytes(0)))).toEqual({
      ok: true,
      value: { ...address, ack: 'no_ack' },
    });
  });

  it('refuses an ack level other than NoAck and Quorum', () => {
    expect(reasonOf(decodeStoreConsumerOffset(concat(prefix, u64le(1n), bytes(2))))).toBe(
      'ack: 2',
    );
    expect(reasonOf(decodeDeleteConsumerOffset(concat(prefix, bytes(255))))).toBe('ack: 255');
  });

  it('refuses truncated bodies by the first missing field', () => {
    expect(reasonOf(decodeStoreConsumerOffset(concat(prefix, u64le(1n))))).toBe('ack: truncated');
    expect(reasonOf(decodeStoreConsumerOffset(concat(prefix, bytes(1, 2, 3))))).toBe(
      'offset: truncated',
    );
    expect(reasonOf(decodeDeleteConsumerOffset(prefix))).toBe('ack: truncated');
    expect(reasonOf(decodeGetConsumerOffset(prefix.subarray(0, prefix.byteLength - 1)))).toBe(
      'partition_id: truncated',
    );
  });

  it('refuses a bad prefix in every command alike', () => {
    const badKind = concat(bytes(9), prefix.subarray(1));
    expect(reasonOf(decodeGetConsumerOffset(badKind))).toBe('consumer_kind: 9');
    expect(reasonOf(decodeStoreConsumerOffset(concat(badKind, u64le(0n), bytes(1))))).toBe(
      'consumer_kind: 9',
    );
    expect(reasonOf(decodeDeleteConsumerOffset(concat(badKind, bytes(1))))).toBe(
      'consumer_kind: 9',
    );
    const emptyName = concat(bytes(1, 2, 0), prefix.subarray(3 + 'analytics'.length));
    expect(reasonOf(decodeGetConsumerOffset(emptyName))).toBe('consumer_id: empty identifier');
  });
});

describe('encodeConsumerOffsetReply', () => {
  it('is partition_id u32, current_offset u64, stored_offset u64: 20 bytes', () => {
    const reply = encodeConsumerOffsetReply({
      partitionId: 0x0102,
      currentOffset: 5,
      storedOffset: 0x0a0b_0c0d_0e0f,
    });
    expect([...reply]).toEqual([
      ...[0x02, 0x01, 0, 0],
      ...[5, 0, 0, 0, 0, 0, 0, 0],
      ...[0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0, 0],
    ]);
  });

  it('no stored offset is the empty body', () => {
    expect(encodeConsumerOffsetReply(null).byteLength).toBe(0);
  });
});

describe('consumerKey', () => {
  it('a numeric consumer or group is keyed by its id', () => {
    expect(consumerKey({ kind: 'consumer', id: { kind: 'id', id: 42 } })).toEqual({
      ok: true,
      value: { kind: 'consumer', id: 42 },
    });
    expect(consumerKey({ kind: 'group', id: { kind: 'id', id: 7 } })).toEqual({
      ok: true,
      value: { kind: 'group', id: 7 },
    });
  });

  it("a named consumer is keyed by xxh32 of its name's UTF-8 bytes", () => {
    expect(consumerKey({ kind: 'consumer', id: { kind: 'name', name: 'analytics' } })).toEqual({
      ok: true,
      value: { kind: 'consumer', id: referenceXxh32(Buffer.from('analytics', 'utf8'), 0) },
    });
    // 2926394750 from @node-rs/xxhash; a non-ASCII name hashes its UTF-8, not UTF-16, bytes.
    expect(consumerKey({ kind: 'consumer', id: { kind: 'name', name: 'analytics' } })).toEqual({
      ok: true,
      value: { kind: 'consumer', id: 2_926_394_750 },
    });
    expect(consumerKey({ kind: 'consumer', id: { kind: 'name', name: 'zażółć' } })).toEqual({
      ok: true,
      value: { kind: 'consumer', id: 4_170_087_981 },
    });
  });

  it('a group still named by a string is refused: groups are keyed by their numeric id', () => {
    expect(consumerKey({ kind: 'group', id: { kind: 'name', name: 'workers' } })).toEqual({
      ok: false,
      reason: 'consumer group "workers" must be resolved to its numeric id',
    });
  });
});

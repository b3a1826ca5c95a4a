/**
 * PollMessages: the request decoder (iggy-partition-plane.md §5.1) and the reply body (§5.2), the
 * reply's bytes worked out by hand from the layout.
 */
import { describe, expect, it } from 'vitest';
import {
  NO_ASSIGNMENT_PARTITION,
  RESYNC_REQUIRED_PARTITION,
  decodePollMessages,
  encodeEmptyPollReply,
  encodePollReply,
} from '../../../src/partition/poll-messages.js';
import { encodeBatch, textMessages } from '../../support/message-batches.js';
import { bytes, concat, offsetPrefix, pollBody, u32le } from './wire.js';

const prefix = offsetPrefix({
  consumerKind: 1,
  consumerId: 7,
  stream: 1,
  topic: 'events',
  partitionId: 3,
});

function reasonOf(body: Uint8Array): string {
  const result = decodePollMessages(body);
  return result.ok ? 'decoded' : result.reason;
}

describe('decodePollMessages', () => {
  it('decodes a hand-written body: consumer 7, stream 1, topic "events", partition 3, next', () => {
    // 1 | 1 4 07000000 | 1 4 01000000 | 2 6 "events" | 1 03000000 | 5 0*8 | 0a000000 | 1
    const body = concat(
      bytes(1, 1, 4, 7, 0, 0, 0, 1, 4, 1, 0, 0, 0, 2, 6),
      new TextEncoder().encode('events'),
      bytes(1, 3, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 1),
    );
    expect(body).toEqual(pollBody(prefix, 5, 0n, 10, 1));
    expect(decodePollMessages(body)).toEqual({
      ok: true,
      value: {
        consumer: { kind: 'consumer', id: { kind: 'id', id: 7 } },
        streamId: { kind: 'id', id: 1 },
        topicId: { kind: 'name', name: 'events' },
        partitionId: 3,
        strategy: { kind: 'next', value: 0n },
        count: 10,
        autoCommit: true,
      },
    });
  });

  it('round-trips every strategy, a group consumer and no partition', () => {
    const groupPrefix = offsetPrefix({
      consumerKind: 2,
      consumerId: 'workers',
      stream: 'orders',
      topic: 9,
      partitionId: null,
    });
    const kinds = ['offset', 'timestamp', 'first', 'last', 'next'] as const;
    kinds.forEach((kind, index) => {
      const value = 0xffff_ffff_ffff_fff0n + BigInt(index);
      const result = decodePollMessages(pollBody(groupPrefix, index + 1, value, 4_000_000_000, 0));
      expect(result).toEqual({
        ok: true,
        value: {
          consumer: { kind: 'group', id: { kind: 'name', name: 'workers' } },
          streamId: { kind: 'name', name: 'orders' },
          topicId: { kind: 'id', id: 9 },
          partitionId: null,
          strategy: { kind, value },
          count: 4_000_000_000,
          autoCommit: false,
        },
      });
    });
  });

  it('ignores bytes after auto_commit, as Iggy does', () => {
    const result = decodePollMessages(concat(pollBody(prefix, 1, 5n, 1, 0), bytes(9, 9)));
    expect(result.ok && result.value.strategy).toEqual({ kind: 'offset', value: 5n });
  });

  it('refuses an unknown consumer kind', () => {
    const body = pollBody(
      offsetPrefix({ consumerKind: 3, consumerId: 1, stream: 1, topic: 1, partitionId: 0 }),
      1,
      0n,
      1,
      0,
    );
    expect(reasonOf(body)).toBe('consumer_kind: 3');
    expect(reasonOf(concat(bytes(0), body.subarray(1)))).toBe('consumer_kind: 0');
  });

  it('refuses a partition flag other than 0 or 1, and an id under flag 0', () => {
    const at = prefix.byteLength - 5;
    const flag2 = pollBody(prefix, 1, 0n, 1, 0);
    flag2[at] = 2;
    expect(reasonOf(flag2)).toBe('partition_flag: unknown flag bits');
    const absentWithId = pollBody(prefix, 1, 0n, 1, 0);
    absentWithId[at] = 0;
    expect(reasonOf(absentWithId)).toBe('partition_id: set while marked absent');
  });

  it('refuses unknown strategy kinds and an auto_commit other than 0 or 1', () => {
    expect(reasonOf(pollBody(prefix, 0, 0n, 1, 0))).toBe('strategy_kind: 0');
    expect(reasonOf(pollBody(prefix, 6, 0n, 1, 0))).toBe('strategy_kind: 6');
    expect(reasonOf(pollBody(prefix, 1, 0n, 1, 2))).toBe('auto_commit: unknown flag bits');
  });

  it('refuses a body cut short, naming the first missing field', () => {
    const body = pollBody(prefix, 1, 0n, 1, 0);
    expect(reasonOf(body.subarray(0, body.byteLength - 1))).toBe('auto_commit: truncated');
    expect(reasonOf(body.subarray(0, prefix.byteLength + 3))).toBe('strategy_value: truncated');
    expect(reasonOf(new Uint8Array(0))).toBe('consumer_kind: truncated');
    for (let length = 0; length < body.byteLength; length += 1) {
      expect(decodePollMessages(body.subarray(0, length)).ok).toBe(false);
    }
  });
});

describe('encodePollReply', () => {
  it('writes partition_id u32, current_offset u64, the message count u32, then the batches', () => {
    const first = encodeBatch(textMessages(2), { partitionId: 3, baseOffset: 10 });
    const second = encodeBatch(textMessages(3), { partitionId: 3, baseOffset: 12 });
    const reply = encodePollReply({
      partitionId: 3,
      currentOffset: 0x0102_0304_0506,
      batches: [first, second],
    });
    expect(reply).toEqual(
      concat(
        bytes(3, 0, 0, 0),
        bytes(0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0, 0),
        u32le(5),
        first,
        second,
      ),
    );
  });

  it('an empty poll is the 16-byte head, never a zero-byte body', () => {
    expect([...encodePollReply({ partitionId: 2, currentOffset: 7, batches: [] })]).toEqual([
      ...[2, 0, 0, 0],
      ...[7, 0, 0, 0, 0, 0, 0, 0],
      ...[0, 0, 0, 0],
    ]);
    expect([...encodeEmptyPollReply(0)]).toEqual(new Array(16).fill(0));
    expect([...encodeEmptyPollReply(RESYNC_REQUIRED_PARTITION)]).toEqual([
      ...[0xff, 0xff, 0xff, 0xff],
      ...new Array(12).fill(0),
    ]);
  });

  it('refuses, as a programming error, a cut batch and the SDK-only sentinel', () => {
    const batch = encodeBatch(textMessages(1));
    expect(() =>
      encodePollReply({ partitionId: 0, currentOffset: 0, batches: [batch.subarray(0, 300)] }),
    ).toThrow();
    expect(() =>
      encodePollReply({ partitionId: NO_ASSIGNMENT_PARTITION, currentOffset: 0, batches: [] }),
    ).toThrow();
    expect(() => encodeEmptyPollReply(5)).toThrow();
  });
});

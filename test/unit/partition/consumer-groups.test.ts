/**
 * SyncConsumerGroup's request and reply (iggy-partition-plane.md §7, §11) and the
 * FlushUnsavedBuffer request (§11); the reply's bytes worked out by hand from the layout.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeFlushUnsavedBuffer,
  decodeSyncConsumerGroup,
  encodeSyncConsumerGroupReply,
} from '../../../src/partition/consumer-groups.js';
import { bytes, concat, identifier, u32le } from './wire.js';

function reasonOf(result: { ok: boolean; reason?: string }): string {
  return result.ok ? 'decoded' : result.reason!;
}

describe('decodeSyncConsumerGroup', () => {
  it('is three identifiers: stream, topic, group', () => {
    const body = concat(identifier(1), identifier('paid'), identifier('workers'));
    expect(decodeSyncConsumerGroup(body)).toEqual({
      ok: true,
      value: {
        streamId: { kind: 'id', id: 1 },
        topicId: { kind: 'name', name: 'paid' },
        groupId: { kind: 'name', name: 'workers' },
      },
    });
  });

  it('refuses a missing or malformed group identifier', () => {
    expect(reasonOf(decodeSyncConsumerGroup(concat(identifier(1), identifier(2))))).toBe(
      'group_id: truncated',
    );
    const bad = concat(identifier(1), identifier(2), bytes(7, 4), u32le(1));
    expect(reasonOf(decodeSyncConsumerGroup(bad))).toBe('group_id: identifier kind 7');
  });
});

describe('encodeSyncConsumerGroupReply', () => {
  it('is generation u64, count u32, then each partition id u32', () => {
    const reply = encodeSyncConsumerGroupReply({
      generation: 0x0102_0304_05,
      partitionIds: [0, 2, 0x0a0b0c],
    });
    expect([...reply]).toEqual([
      ...[0x05, 0x04, 0x03, 0x02, 0x01, 0, 0, 0],
      ...[3, 0, 0, 0],
      ...[0, 0, 0, 0],
      ...[2, 0, 0, 0],
      ...[0x0c, 0x0b, 0x0a, 0],
    ]);
  });

  it('a member with no partitions is 12 bytes; a non-member is the empty body', () => {
    expect([...encodeSyncConsumerGroupReply({ generation: 1, partitionIds: [] })]).toEqual([
      ...[1, 0, 0, 0, 0, 0, 0, 0],
      ...[0, 0, 0, 0],
    ]);
    expect(encodeSyncConsumerGroupReply(null).byteLength).toBe(0);
  });

  it('a partition id outside the namespace is a programming error', () => {
    expect(() =>
      encodeSyncConsumerGroupReply({ generation: 1, partitionIds: [1_000_000] }),
    ).toThrow();
  });
});

describe('decodeFlushUnsavedBuffer', () => {
  it('is stream, topic, partition_id u32 and fsync u8', () => {
    const body = concat(identifier('orders'), identifier(3), u32le(9), bytes(1));
    expect(decodeFlushUnsavedBuffer(body)).toEqual({
      ok: true,
      value: {
        streamId: { kind: 'name', name: 'orders' },
        topicId: { kind: 'id', id: 3 },
        partitionId: 9,
        fsync: true,
      },
    });
    const noSync = concat(identifier(1), identifier(3), u32le(0), bytes(0));
    expect(decodeFlushUnsavedBuffer(noSync)).toMatchObject({
      ok: true,
      value: { partitionId: 0, fsync: false },
    });
  });

  it('refuses an fsync byte other than 0 or 1, and a truncated body', () => {
    const body = concat(identifier(1), identifier(3), u32le(9), bytes(2));
    expect(reasonOf(decodeFlushUnsavedBuffer(body))).toBe('fsync: unknown flag bits');
    expect(reasonOf(decodeFlushUnsavedBuffer(body.subarray(0, body.byteLength - 1)))).toBe(
      'fsync: truncated',
    );
    expect(reasonOf(decodeFlushUnsavedBuffer(body.subarray(0, 14)))).toBe(
      'partition_id: truncated',
    );
  });
});

/**
 * Retention's decision on one replica's segments (src/partition/retention.ts), the topic settings
 * it reads, and the rule that decides when a partition group may drop a partition
 * (src/node/partition-maintenance.ts): pure functions, pinned case by case.
 */
import { describe, expect, it } from 'vitest';
import { incarnationIsDead } from '../../../src/node/partition-maintenance.js';
import { partitionPolicy, retentionFloor, type RetentionPolicy } from '../../../src/partition/retention.js';
import type { StoreSegment } from '../../../src/partition/store.js';

const NOW = 10_000_000;

/** Sealed segments of 10 offsets and 100 bytes each, newest timestamps 1..n s, then an active one. */
function segments(count: number, activeBytes = 50): StoreSegment[] {
  const out: StoreSegment[] = [];
  for (let index = 0; index < count; index++) {
    out.push({ startOffset: index * 10, lastOffset: index * 10 + 9, sizeBytes: 100, maxTimestampUs: (index + 1) * 1_000_000, sealed: true });
  }
  out.push({ startOffset: count * 10, lastOffset: count * 10 + 4, sizeBytes: activeBytes, maxTimestampUs: NOW, sealed: false });
  return out;
}

function floorOf(input: { segments: StoreSegment[]; policy: RetentionPolicy; barrier?: number | null; floor?: number; now?: number }): number | null {
  return retentionFloor({
    segments: input.segments,
    policy: input.policy,
    nowUs: input.now ?? NOW,
    barrierOffset: input.barrier ?? null,
    floor: input.floor ?? 0,
  });
}

describe('retention floor', () => {
  it('keeps everything without expiry or size limit', () => {
    expect(floorOf({ segments: segments(5), policy: { expiryUs: null, budgetBytes: null } })).toBeNull();
  });

  it('expiry: leading sealed segments whose newest message is at least expiry old go', () => {
    // Newest timestamps 1..5 s, now 10 s, expiry 7 s: segments ending at 1, 2 and 3 s expired.
    expect(floorOf({ segments: segments(5), policy: { expiryUs: 7_000_000, budgetBytes: null } })).toBe(30);
    // Exactly expiry old is expired (max_timestamp + expiry <= now).
    expect(floorOf({ segments: segments(5), policy: { expiryUs: 9_000_000, budgetBytes: null } })).toBe(10);
    expect(floorOf({ segments: segments(5), policy: { expiryUs: 9_000_001, budgetBytes: null } })).toBeNull();
  });

  it('never the active segment, however old', () => {
    const all = segments(3).map((segment) => ({ ...segment, maxTimestampUs: 1 }));
    expect(floorOf({ segments: all, policy: { expiryUs: 1, budgetBytes: null } })).toBe(30);
    expect(floorOf({ segments: all, policy: { expiryUs: null, budgetBytes: 0 } })).toBe(30);
  });

  it('size: the sealed segments fit the budget (the active one not counted)', () => {
    expect(floorOf({ segments: segments(5, 10_000), policy: { expiryUs: null, budgetBytes: 500 } })).toBeNull();
    expect(floorOf({ segments: segments(5), policy: { expiryUs: null, budgetBytes: 499 } })).toBe(10);
    expect(floorOf({ segments: segments(5), policy: { expiryUs: null, budgetBytes: 250 } })).toBe(30);
  });

  it('stops at the consumer barrier: a segment above the lowest stored offset stays', () => {
    const policy = { expiryUs: 1, budgetBytes: null };
    expect(floorOf({ segments: segments(5), policy, barrier: 25 })).toBe(20);
    expect(floorOf({ segments: segments(5), policy, barrier: 29 })).toBe(30);
    expect(floorOf({ segments: segments(5), policy, barrier: 5 })).toBeNull();
  });

  it('segments already below the floor count for nothing; a floor it would not raise is null', () => {
    const policy = { expiryUs: null, budgetBytes: 250 };
    // Segments 0 and 1 are below floor 20 (files not removed yet): 300 sealed bytes remain.
    expect(floorOf({ segments: segments(5), policy, floor: 20 })).toBe(30);
    expect(floorOf({ segments: segments(5), policy: { expiryUs: 7_000_000, budgetBytes: null }, floor: 30 })).toBeNull();
  });
});

describe('partition policy from topic settings', () => {
  const topic = { messageExpiryUs: 0n, maxTopicSizeBytes: 0n, partitionsCount: 4, segmentSizeBytes: 1000, messageSizeMax: 100 };

  it('0 and u64::MAX mean unlimited', () => {
    expect(partitionPolicy(topic)).toEqual({ expiryUs: null, budgetBytes: null });
    const max = 0xffff_ffff_ffff_ffffn;
    expect(partitionPolicy({ ...topic, messageExpiryUs: max, maxTopicSizeBytes: max })).toEqual({ expiryUs: null, budgetBytes: null });
  });

  it('the size limit is shared by the partitions, never below a segment and a message', () => {
    expect(partitionPolicy({ ...topic, messageExpiryUs: 5n, maxTopicSizeBytes: 40_000n })).toEqual({ expiryUs: 5, budgetBytes: 10_000 });
    expect(partitionPolicy({ ...topic, maxTopicSizeBytes: 400n })).toEqual({ expiryUs: null, budgetBytes: 1100 });
  });
});

describe('when a partition group may drop a partition', () => {
  it('a newer live incarnation: the held one is dead; the live one or a newer held one is not', () => {
    expect(incarnationIsDead(200, 100, 0)).toBe(true);
    expect(incarnationIsDead(200, 200, 0)).toBe(false);
    expect(incarnationIsDead(200, 300, 0)).toBe(false);
  });

  it('none live: dead only once this replica applied metadata past the incarnation', () => {
    expect(incarnationIsDead(null, 100, 150)).toBe(true);
    expect(incarnationIsDead(null, 100, 100)).toBe(true);
    // Created by metadata this replica has not applied yet: it knows no such partition.
    expect(incarnationIsDead(null, 100, 99)).toBe(false);
  });
});

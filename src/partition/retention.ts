/**
 * Retention: where a partition's log may start, by Iggy's cleaner rules
 * (iggy-partition-plane.md §3.8), decided on one replica's segments and then replicated as a
 * floor (TrimPartition), so every replica stops serving the same offsets at the same commit
 * whatever its own segment boundaries are (a store backfilled from a peer has other ones).
 *
 * - A leading sealed segment goes when its newest message expired (`max_timestamp != 0` and
 *   `max_timestamp + expiry <= now`) or while the sealed segments' bytes exceed the budget (the
 *   active segment is never counted and never removed).
 * - The consumer barrier: a segment holding an offset above the lowest stored consumer offset
 *   stays, so retention never takes a message a consumer that stored its offset has not read.
 * - Segments wholly below the current floor are gone already (their files go at a checkpoint)
 *   and count for nothing.
 */
import type { StoreSegment } from './store.js';

export interface RetentionPolicy {
  /** Messages this much older than now expire (µs); null: never. */
  readonly expiryUs: number | null;
  /** The partition's byte budget for its sealed segments; null: unlimited. */
  readonly budgetBytes: number | null;
}

export interface RetentionInput {
  readonly segments: readonly StoreSegment[];
  readonly policy: RetentionPolicy;
  readonly nowUs: number;
  /** The lowest stored consumer offset of the partition; null when none is stored. */
  readonly barrierOffset: number | null;
  /** The partition's current floor. */
  readonly floor: number;
}

/** The start of the first segment retention keeps, when it is above `floor`; else null. */
export function retentionFloor(input: RetentionInput): number | null {
  const { segments, policy, nowUs, barrierOffset, floor } = input;
  if (policy.expiryUs === null && policy.budgetBytes === null) return null;
  const removable = segments.length - 1;
  let first = 0;
  while (first < removable && segments[first]!.lastOffset < floor) first += 1;
  let sealedBytes = 0;
  for (let index = first; index < removable; index += 1) {
    if (segments[index]!.sealed) sealedBytes += segments[index]!.sizeBytes;
  }
  let kept = first;
  while (kept < removable) {
    const segment = segments[kept]!;
    if (!segment.sealed) break;
    if (barrierOffset !== null && segment.lastOffset > barrierOffset) break;
    const expired =
      policy.expiryUs !== null &&
      segment.maxTimestampUs !== 0 &&
      segment.maxTimestampUs + policy.expiryUs <= nowUs;
    const overBudget = policy.budgetBytes !== null && sealedBytes > policy.budgetBytes;
    if (!expired && !overBudget) break;
    sealedBytes -= segment.sizeBytes;
    kept += 1;
  }
  const start = segments[kept]?.startOffset ?? floor;
  return kept > first && start > floor ? start : null;
}

/** Iggy's topic settings: 0 (server default) and u64::MAX mean unlimited. */
const U64_MAX = 0xffff_ffff_ffff_ffffn;

function limit(value: bigint): number | null {
  if (value === 0n || value === U64_MAX) return null;
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}

/**
 * A topic's retention for one of its partitions: its expiry, and its size limit shared equally
 * by its partitions, never below one segment and one message (so the active segment can fill and
 * seal before the budget would take everything), as the reference does.
 */
export function partitionPolicy(topic: {
  readonly messageExpiryUs: bigint;
  readonly maxTopicSizeBytes: bigint;
  readonly partitionsCount: number;
  readonly segmentSizeBytes: number;
  readonly messageSizeMax: number;
}): RetentionPolicy {
  const size = limit(topic.maxTopicSizeBytes);
  const share = size === null ? null : Math.floor(size / Math.max(1, topic.partitionsCount));
  const budgetBytes =
    share === null ? null : Math.max(share, topic.segmentSizeBytes + topic.messageSizeMax);
  return { expiryUs: limit(topic.messageExpiryUs), budgetBytes };
}

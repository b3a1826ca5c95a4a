/**
 * Polls, answered from a partition group's committed state (iggy-partition-plane.md §5.3): the
 * start offset the strategy names, at most `count` messages, never past the committed offset.
 * Whole stored batches are returned as they are; a batch cut by the range is sliced (its header
 * rewritten, its checksum recomputed) with the kernel, as the reference does.
 */
import type { Kernels } from '../kernels/kernel.js';
import { batchLastOffset, readBatchHeader } from '../format/message-batch.js';
import type { PartitionAddress } from './operations.js';
import type { PollingStrategy, PollReply } from './poll-messages.js';
import type { PartitionStateMachine } from './state-machine.js';
import type { StoreReadFault } from './store.js';

export interface PollQuery {
  readonly address: PartitionAddress;
  /** The partition id the reply names. */
  readonly partitionId: number;
  readonly strategy: PollingStrategy;
  readonly count: number;
  /** The consumer's stored offset, for `next` (null: none stored). */
  readonly storedOffset: number | null;
}

export type PollOutcome =
  | {
      readonly ok: true;
      readonly reply: PollReply;
      /** The last offset returned, or null when no message was (for auto-commit). */
      readonly lastOffset: number | null;
    }
  | { readonly ok: false; readonly fault: StoreReadFault };

/**
 * The first offset the strategy reads from, or null when it names nothing readable. Offsets
 * below the partition's first offset are gone (retention): a read of them starts at the first.
 */
function startOffset(
  machine: PartitionStateMachine,
  query: PollQuery,
  ceiling: number,
  first: number,
): number | null | StoreReadFault {
  const start = strategyOffset(machine, query, ceiling, first);
  return typeof start === 'number' ? Math.max(start, first) : start;
}

function strategyOffset(
  machine: PartitionStateMachine,
  query: PollQuery,
  ceiling: number,
  first: number,
): number | null | StoreReadFault {
  const { strategy, count } = query;
  switch (strategy.kind) {
    case 'offset':
      return strategy.value > BigInt(ceiling) ? null : Number(strategy.value);
    case 'first':
      return first;
    case 'last':
      return Math.max(first, ceiling - (count - 1));
    case 'next':
      return query.storedOffset === null ? first : query.storedOffset + 1;
    case 'timestamp': {
      const store = machine.storeOf(query.address);
      if (store === null) return null;
      const ts = strategy.value > BigInt(Number.MAX_SAFE_INTEGER) ? null : Number(strategy.value);
      if (ts === null) return null;
      const found = store.findByTimestamp(ts);
      if (!found.ok) return found.fault;
      if (found.batch === null) return null;
      const header = readBatchHeader(found.batch);
      return header.ok ? header.header.baseOffset : null;
    }
  }
}

export function pollPartition(
  machine: PartitionStateMachine,
  kernels: Pick<Kernels, 'messageBatchSlice'>,
  query: PollQuery,
): PollOutcome {
  const empty = (currentOffset: number): PollOutcome => ({
    ok: true,
    reply: { partitionId: query.partitionId, currentOffset, batches: [] },
    lastOffset: null,
  });
  const view = machine.partition(query.address);
  const store = machine.storeOf(query.address);
  if (view === null || store === null || view.nextOffset === 0) return empty(0);
  const ceiling = view.nextOffset - 1;
  if (query.count === 0) return empty(ceiling);
  const start = startOffset(machine, query, ceiling, view.firstOffset);
  if (start !== null && typeof start !== 'number') return { ok: false, fault: start };
  if (start === null || start > ceiling) return empty(ceiling);
  const end = Math.min(ceiling, start + query.count - 1);
  const read = store.readFrom(start, query.count, end);
  if (!read.ok) return { ok: false, fault: read.fault };
  const batches: Uint8Array[] = [];
  let lastOffset: number | null = null;
  for (const batch of read.batches) {
    const header = readBatchHeader(batch);
    if (!header.ok) continue;
    const first = Math.max(header.header.baseOffset, start);
    const last = Math.min(batchLastOffset(header.header), end);
    if (first > last) continue;
    const whole = first === header.header.baseOffset && last === batchLastOffset(header.header);
    const fromIndex = first - header.header.baseOffset;
    batches.push(whole ? batch : kernels.messageBatchSlice(batch, fromIndex, last - first + 1));
    lastOffset = last;
  }
  const reply = { partitionId: query.partitionId, currentOffset: ceiling, batches };
  return { ok: true, reply, lastOffset };
}

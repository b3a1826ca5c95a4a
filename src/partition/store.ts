/**
 * The ports a partition group's state machine writes messages through. The machine is pure (it
 * runs under the simulator); where the bytes live is the caller's: the node gives it segment
 * files on disk (storage/partition-log.ts over a directory per partition), the simulator the
 * same store over a simulated disk. The shapes are the segment store's own, so it plugs in as it
 * is.
 */

/** Bytes a read found that cannot be trusted: where, and why. */
export interface StoreReadFault {
  readonly file: string;
  readonly position: number;
  readonly reason: string;
}

export type StoreRead =
  | { readonly ok: true; readonly batches: readonly Uint8Array[] }
  | { readonly ok: false; readonly fault: StoreReadFault };

export type StoreTimestampRead =
  | { readonly ok: true; readonly batch: Uint8Array | null }
  | { readonly ok: false; readonly fault: StoreReadFault };

export type StoreTruncate =
  | { readonly kind: 'cut'; readonly nextOffset: number; readonly droppedMessages: number }
  | { readonly kind: 'behind'; readonly nextOffset: number }
  | { readonly kind: 'not_a_boundary'; readonly nextOffset: number };

export interface StoreStats {
  /** The first offset the store holds (its oldest segment's start). */
  readonly startOffset: number;
  readonly messagesCount: number;
  readonly sizeBytes: number;
  readonly segmentsCount: number;
}

/** One segment of a store, oldest first: what retention decides on. */
export interface StoreSegment {
  readonly startOffset: number;
  /** startOffset - 1 while the segment holds no batch. */
  readonly lastOffset: number;
  readonly sizeBytes: number;
  /** base_timestamp of the segment's newest batch (0 while empty). */
  readonly maxTimestampUs: number;
  readonly sealed: boolean;
}

/** What a removal of segments took. */
export interface StoreRemoved {
  readonly messagesCount: number;
  readonly sizeBytes: number;
}

/** One partition's log of stamped batches, offsets dense from 0. */
export interface PartitionStore {
  readonly nextOffset: number;
  /** Appends a verified, stamped batch at `nextOffset`; durable after `flush`. */
  append(batch: Uint8Array): void;
  /** Makes every appended batch durable. */
  flush(): void;
  /** Cuts the log back to end before `offset`, durably. */
  truncateTo(offset: number): StoreTruncate;
  /** Drops every batch; the log restarts empty at `startOffset`, durably. */
  purge(startOffset: number): void;
  /**
   * Whole batches holding offsets from `offset`, none starting above `ceilingOffset`, at most
   * `bytesMax` bytes unless the first batch alone is larger.
   */
  readFrom(offset: number, maxMessages: number, ceiling: number, bytesMax?: number): StoreRead;
  /** base_timestamp of the newest batch (0 when the store holds none). */
  readonly lastTimestampUs: number;
  /** The first batch whose base_timestamp is at or after `timestampUs`. */
  findByTimestamp(timestampUs: number): StoreTimestampRead;
  stats(): StoreStats;
  /** The segments, oldest first; the last one is the active segment. */
  segmentInfos(): readonly StoreSegment[];
  /**
   * Removes the `count` oldest segments, durably and oldest first (never the last one; each must
   * be sealed and flushed).
   */
  removeOldestSegments(count: number): StoreRemoved;
}

/** Which store: a partition (its namespace) in one of its lives (its incarnation). */
export interface StoreKey {
  readonly namespace: number;
  readonly incarnation: number;
  /** The partition id every batch of the store carries. */
  readonly partitionId: number;
}

/** The stores of one partition group on one replica. */
export interface PartitionStores {
  /** Opens the store, creating an empty one when it does not exist. */
  open(key: StoreKey): PartitionStore;
  /** The stores that exist (opened or not), in any order. */
  list(): StoreKey[];
  /** Removes a store and its bytes, durably; a missing store is a no-op. */
  remove(key: StoreKey): void;
  /**
   * The staging log of a store whose log lacks its start: the missing range, fetched from a peer
   * from offset 0 (created empty when there is none). Never a store until `adoptStaging`.
   */
  openStaging(key: StoreKey): PartitionStore;
  /** The stores that have a staging log, in any order (partition ids unknown: -1). */
  listStaging(): StoreKey[];
  removeStaging(key: StoreKey): void;
  /**
   * A store that holds less than its checkpoint counts keeps it: its batches move to the end of
   * its staging log (when they continue it), and it is left empty. Whether anything moved. The
   * store must be opened again afterwards.
   */
  keepAsStaging(key: StoreKey): boolean;
  /**
   * Moves the staging log in front of the store (it must end where the store starts), durably
   * and so that a crash at any point leaves a store without a hole; returns the whole store.
   */
  adoptStaging(key: StoreKey): PartitionStore;
  /**
   * Moves the staging log after the store (it must start where the store ends), durably and so
   * that a crash at any point leaves a store without a hole; returns the longer store.
   */
  appendStaging(key: StoreKey): PartitionStore;
  /** Where the store's staging log starts and ends, or null when it has none. */
  stagingRange(key: StoreKey): { readonly startOffset: number; readonly nextOffset: number } | null;
}

export function storeKeyName(key: StoreKey): string {
  return `${key.namespace}.${key.incarnation}`;
}

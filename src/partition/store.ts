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
  /** Whole batches holding offsets from `offset`, none starting above `ceilingOffset`. */
  readFrom(offset: number, maxMessages: number, ceilingOffset: number): StoreRead;
  /** The first batch whose base_timestamp is at or after `timestampUs`. */
  findByTimestamp(timestampUs: number): StoreTimestampRead;
  stats(): StoreStats;
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
}

export function storeKeyName(key: StoreKey): string {
  return `${key.namespace}.${key.incarnation}`;
}

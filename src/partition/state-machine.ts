/**
 * A partition group's replicated state machine: the logs and consumer offsets of every partition
 * the group carries (docs/partition-plane.md). The VSR core drives it as it drives the metadata
 * machine: `apply` in commit order, `snapshot` at a checkpoint op, `restore` from a checkpoint or
 * an install. Polls and offset reads are queries on committed state, so a backup answers them
 * too and can never show an uncommitted message: nothing reaches a store before its op commits.
 *
 * Stamping happens here, at apply: a batch's `base_offset` is the partition's next offset when its
 * op commits and its `base_timestamp` the op's timestamp. Commit order is the log order, the same
 * on every replica, so every replica stamps every batch identically without the primary having
 * to rewrite the prepare (its body stays the producer's bytes, covered by the prepare checksum).
 *
 * Durability. A committed batch is appended to its store (the page cache); the store is flushed
 * at every checkpoint, before the superblock names that checkpoint. Until then the WAL holds the
 * op. `restore` cuts each store back to the checkpoint's next offset (a store may hold batches
 * applied after it) and removes the stores the checkpoint does not know, so the journal's replay
 * appends exactly what the first application did.
 *
 * Incarnations. A send for a newer incarnation of a partition replaces its log with an empty one
 * in a store of its own; the old store is removed only once two later checkpoints exist, so the
 * durable checkpoint a restart restores from always finds the stores it names.
 *
 * Retention. A partition's first offset (0 until a TrimPartition raises it) is replicated: reads
 * never go below it, on any replica, whatever segments a store still has. The segments wholly
 * below it are removed at the checkpoint after the one that first recorded it, so the durable
 * checkpoint a restart restores from never names an offset its store no longer holds.
 */
import type { Kernels } from '../kernels/kernel.js';
import { readBatchHeader, setBatchChecksum, stampBatch } from '../format/message-batch.js';
import type { ApplyInput, ApplyResult, StateMachine, StoreRanges } from '../vsr/state-machine.js';
import { StoreBackfill, type PrefetchTarget, type ServedStore } from './backfill.js';
import { DataError } from './codes.js';
import type { ConsumerKey } from './consumer-offsets.js';
import { unpackNamespace } from './namespace.js';
import {
  decodeDeleteOffsetPrepare,
  decodeDropPrepare,
  decodeSendPrepare,
  decodeStoreOffsetPrepare,
  decodeTrimPrepare,
  PartitionOperation,
  type PartitionAddress,
} from './operations.js';
import { encodeSendReply } from './send-messages.js';
import type { PartitionStore, PartitionStores, StoreKey } from './store.js';

/** A consumer's stored offset in one partition. */
export interface StoredConsumerOffset {
  readonly kind: ConsumerKey['kind'];
  readonly id: number;
  readonly offset: number;
}

/** One partition as a checkpoint records it. */
export interface PartitionRecord {
  readonly namespace: number;
  readonly incarnation: number;
  /** The offset the next committed batch takes (0 for a partition without messages). */
  readonly nextOffset: number;
  /** The first offset reads may return (retention raised it from 0); at most nextOffset. */
  readonly firstOffset: number;
  /** Ordered by kind (consumer first), then id. */
  readonly offsets: readonly StoredConsumerOffset[];
}

/** The machine's checkpoint model: its partitions, namespace ascending. */
export interface PartitionSnapshot {
  readonly partitions: readonly PartitionRecord[];
}

/** What a partition's reads may see: its committed next offset and store. */
export interface PartitionView {
  readonly namespace: number;
  readonly incarnation: number;
  readonly partitionId: number;
  readonly nextOffset: number;
  /** The first offset a read may return. */
  readonly firstOffset: number;
  readonly messagesCount: number;
  readonly sizeBytes: number;
  readonly segmentsCount: number;
}

/** The kernels the machine stamps and slices with. */
export type MachineKernels = Pick<
  Kernels,
  'messageBatchVerify' | 'messageBatchChecksum' | 'messageBatchSlice'
>;

export interface PartitionMachineOptions {
  readonly kernels: MachineKernels;
  readonly stores: PartitionStores;
  /**
   * A partition's log changed (a committed send, a restore): for the node's statistics, which
   * are read outside the log. Must not call back into the machine's writes.
   */
  readonly onChanged?: (namespace: number) => void;
  /** What one backfill answer may carry (backfill.ts BACKFILL_BYTES_MAX by default). */
  readonly backfillBytesMax?: number;
}

interface Partition {
  readonly key: StoreKey;
  /** Replaced by the whole store once a backfill adopted its start. */
  store: PartitionStore;
  nextOffset: number;
  firstOffset: number;
  /** firstOffset when the last snapshot was taken: segments wholly below it may go. */
  snapshotFirstOffset: number;
  readonly offsets: Map<string, StoredConsumerOffset>;
  /** Appended since the last flush. */
  dirty: boolean;
}

const EMPTY = new Uint8Array(0);
/** A Store/DeleteConsumerOffset success: Iggy's result-framed empty body is the node's part. */
const OK: ApplyResult = { errorCode: 0, payload: EMPTY };

function fail(errorCode: number): ApplyResult {
  return { errorCode, payload: EMPTY };
}

function offsetKey(consumer: ConsumerKey): string {
  return `${consumer.kind === 'consumer' ? 1 : 2}:${consumer.id}`;
}

function compareOffsets(a: StoredConsumerOffset, b: StoredConsumerOffset): number {
  if (a.kind !== b.kind) return a.kind === 'consumer' ? -1 : 1;
  return a.id - b.id;
}

export class PartitionStateMachine implements StateMachine<PartitionSnapshot> {
  private readonly kernels: MachineKernels;
  private readonly stores: PartitionStores;
  private readonly onChanged: (namespace: number) => void;
  private partitions = new Map<number, Partition>();
  /** Stores replaced by a newer incarnation, with the snapshot count when they were. */
  private retired: { readonly key: StoreKey; readonly snapshots: number }[] = [];
  private snapshots = 0;
  private readonly backfill: StoreBackfill;
  private readonly ranges: StoreRanges<PartitionSnapshot>;

  constructor(options: PartitionMachineOptions) {
    this.kernels = options.kernels;
    this.stores = options.stores;
    this.onChanged = options.onChanged ?? (() => {});
    this.backfill = new StoreBackfill({
      kernels: this.kernels,
      stores: this.stores,
      ...(options.backfillBytesMax === undefined ? {} : { bytesMax: options.backfillBytesMax }),
      served: (namespace, incarnation) => this.served(namespace, incarnation),
      completed: (namespace, store) => {
        const partition = this.partitions.get(namespace);
        if (partition === undefined) return;
        partition.store = store;
        this.onChanged(namespace);
      },
    });
    const backfill = this.backfill;
    this.ranges = {
      attach: (host) => backfill.attach(host),
      get pending() {
        return backfill.pending;
      },
      tick: () => backfill.tick(),
      onRequest: (header) => backfill.onRequest(header),
      onRange: (header, body) => backfill.onRange(header, body),
      prepareInstall: (snapshot) => backfill.prepareInstall(this.prefetchTargets(snapshot)),
      get installReady() {
        return backfill.installReady;
      },
    };
  }

  /**
   * Fetches what the stores lack from the group's peers (backfill.ts): before an install, the
   * messages a transferred checkpoint names beyond them; after a restore, a store's start.
   */
  get storeRanges(): StoreRanges<PartitionSnapshot> {
    return this.ranges;
  }

  /**
   * The committed store a peer's backfill reads: the partition's, or a replaced one's while it
   * is kept (all of it committed); 'replaced' once a newer incarnation holds the namespace.
   */
  private served(namespace: number, incarnation: number): ServedStore | 'replaced' | null {
    const partition = this.partitions.get(namespace);
    if (partition !== undefined && partition.key.incarnation === incarnation) {
      return { store: partition.store, nextOffset: partition.nextOffset };
    }
    const retired = this.retired.find(
      (entry) => entry.key.namespace === namespace && entry.key.incarnation === incarnation,
    );
    if (retired !== undefined) {
      const store = this.stores.open(retired.key);
      return { store, nextOffset: store.nextOffset };
    }
    if (partition !== undefined && partition.key.incarnation > incarnation) return 'replaced';
    return null;
  }

  /**
   * What `snapshot` names beyond each store, up to the checkpoint's next offset: from where the
   * store's log ends when it continues it (the same incarnation, holding everything from the
   * checkpoint's first offset on), else from the checkpoint's first offset.
   */
  private prefetchTargets(snapshot: PartitionSnapshot): PrefetchTarget[] {
    const targets: PrefetchTarget[] = [];
    for (const record of snapshot.partitions) {
      if (record.nextOffset === record.firstOffset) continue;
      const parts = unpackNamespace(BigInt(record.namespace));
      if (!parts.ok) continue;
      const { namespace, incarnation, nextOffset: end } = record;
      const key = { namespace, incarnation, partitionId: parts.value.partitionId };
      const local = this.partitions.get(namespace);
      const continues =
        local !== undefined &&
        local.key.incarnation === incarnation &&
        local.store.stats().startOffset <= record.firstOffset &&
        local.store.nextOffset >= record.firstOffset;
      const from = continues ? local.store.nextOffset : record.firstOffset;
      if (from >= end) continue;
      const floorTimestampUs = continues && from > 0 ? local.store.lastTimestampUs : 0;
      targets.push({ key, from, end, floorTimestampUs });
    }
    return targets;
  }

  /** The stores being backfilled: how far each staging log got, and where it must end. */
  backfillProgress(): ReadonlyMap<number, { readonly fetched: number; readonly end: number }> {
    return this.backfill.progress();
  }

  apply(input: ApplyInput): ApplyResult {
    switch (input.operation) {
      case PartitionOperation.sendMessages:
        return this.applySend(input);
      case PartitionOperation.storeConsumerOffset:
        return this.applyStoreOffset(input);
      case PartitionOperation.deleteConsumerOffset:
        return this.applyDeleteOffset(input);
      case PartitionOperation.dropPartition:
        return this.applyDrop(input);
      case PartitionOperation.trimPartition:
        return this.applyTrim(input);
      default:
        return fail(DataError.invalidCommand);
    }
  }

  private applySend(input: ApplyInput): ApplyResult {
    const decoded = decodeSendPrepare(input.body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const { batch } = decoded.value;
    const parts = unpackNamespace(BigInt(decoded.value.namespace));
    if (!parts.ok) return fail(DataError.invalidCommand);
    const header = readBatchHeader(batch);
    if (!header.ok || header.header.partitionId !== parts.value.partitionId) {
      return fail(DataError.invalidCommand);
    }
    const verified = this.kernels.messageBatchVerify(batch);
    if (verified.status !== 'valid') return fail(verifyError(verified.status));
    if (verified.messageCount === 0) return fail(DataError.invalidCommand);
    const partition = this.partitionFor(decoded.value, parts.value.partitionId);
    if (partition === null) return fail(DataError.partitionNotFound);
    const baseOffset = partition.nextOffset;
    const stamped = batch.slice();
    stampBatch(stamped, {
      partitionId: parts.value.partitionId,
      baseOffset,
      baseTimestampUs: input.timestampUs,
    });
    setBatchChecksum(stamped, this.kernels.messageBatchChecksum(stamped));
    partition.store.append(stamped);
    partition.nextOffset += verified.messageCount;
    partition.dirty = true;
    this.onChanged(decoded.value.namespace);
    const { streamId, topicId, partitionId } = parts.value;
    const payload = encodeSendReply([{ streamId, topicId, partitionId, baseOffset }]);
    return { errorCode: 0, payload };
  }

  /**
   * The partition a send of `address` appends to: the current one, a new one (the first send, or
   * a newer incarnation, which retires the old store), or null for an older incarnation.
   */
  private partitionFor(address: PartitionAddress, partitionId: number): Partition | null {
    const current = this.partitions.get(address.namespace);
    if (current !== undefined && current.key.incarnation === address.incarnation) return current;
    if (current !== undefined && current.key.incarnation > address.incarnation) return null;
    if (current !== undefined) {
      this.retired.push({ key: current.key, snapshots: this.snapshots });
      this.backfill.cancel(address.namespace);
    }
    const key = { namespace: address.namespace, incarnation: address.incarnation, partitionId };
    const store = this.stores.open(key);
    // A store left by an earlier life of this replica (one the last restore did not know) is
    // cut back to empty: the journal's replay appends it again.
    if (store.nextOffset > 0) store.truncateTo(0);
    const partition: Partition = {
      key,
      store,
      nextOffset: 0,
      firstOffset: 0,
      snapshotFirstOffset: 0,
      offsets: new Map(),
      dirty: false,
    };
    this.partitions.set(address.namespace, partition);
    return partition;
  }

  private committedPartition(address: PartitionAddress): Partition | null {
    const partition = this.partitions.get(address.namespace);
    if (partition === undefined || partition.key.incarnation !== address.incarnation) return null;
    return partition;
  }

  private applyStoreOffset(input: ApplyInput): ApplyResult {
    const decoded = decodeStoreOffsetPrepare(input.body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const { consumer, offset } = decoded.value;
    const partition = this.committedPartition(decoded.value);
    // Iggy refuses an offset on a partition without messages and one above its current offset.
    if (partition === null || partition.nextOffset === 0) return fail(DataError.invalidOffset);
    if (offset > partition.nextOffset - 1) return fail(DataError.invalidOffset);
    partition.offsets.set(offsetKey(consumer), { kind: consumer.kind, id: consumer.id, offset });
    return OK;
  }

  private applyDeleteOffset(input: ApplyInput): ApplyResult {
    const decoded = decodeDeleteOffsetPrepare(input.body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const partition = this.committedPartition(decoded.value);
    if (partition === null || !partition.offsets.delete(offsetKey(decoded.value.consumer))) {
      return fail(DataError.consumerOffsetNotFound);
    }
    return OK;
  }

  /**
   * A partition whose incarnation committed metadata no longer has: its store is retired (kept
   * for two checkpoints, as a replaced one) and its offsets go. A drop of any other incarnation
   * changes nothing: the partition moved on, or was dropped already, and the result is the same.
   */
  private applyDrop(input: ApplyInput): ApplyResult {
    const decoded = decodeDropPrepare(input.body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const partition = this.committedPartition(decoded.value);
    if (partition === null) return OK;
    this.retired.push({ key: partition.key, snapshots: this.snapshots });
    this.backfill.cancel(partition.key.namespace);
    this.partitions.delete(partition.key.namespace);
    this.onChanged(partition.key.namespace);
    return OK;
  }

  /**
   * Raises a partition's first offset (never lowers it, never past its next offset). The proposer
   * takes it from a segment start, a batch boundary on every replica (batches are stamped alike
   * everywhere). A trim of another incarnation, or below the current first offset, changes
   * nothing. A backfill of a store's start that the trim makes obsolete stops.
   */
  private applyTrim(input: ApplyInput): ApplyResult {
    const decoded = decodeTrimPrepare(input.body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const partition = this.committedPartition(decoded.value);
    if (partition === null) return OK;
    const firstOffset = Math.min(decoded.value.floor, partition.nextOffset);
    if (firstOffset <= partition.firstOffset) return OK;
    partition.firstOffset = firstOffset;
    if (partition.store.stats().startOffset <= firstOffset) {
      this.backfill.cancel(partition.key.namespace);
    }
    this.onChanged(partition.key.namespace);
    return OK;
  }

  onClientRemoved(): void {}

  /**
   * The checkpoint model. Flushes every store appended to since the last one first: the
   * checkpoint's next offsets must be durable in the stores before the superblock can name it.
   */
  snapshot(): PartitionSnapshot {
    for (const partition of this.partitions.values()) {
      if (partition.dirty) {
        partition.store.flush();
        partition.dirty = false;
      }
      this.removeTrimmedSegments(partition);
    }
    this.snapshots += 1;
    // A store retired before the previous snapshot is named by neither the checkpoint being
    // taken nor the durable one before it.
    const keep: typeof this.retired = [];
    for (const entry of this.retired) {
      if (entry.snapshots < this.snapshots - 1) this.stores.remove(entry.key);
      else keep.push(entry);
    }
    this.retired = keep;
    return this.records();
  }

  /**
   * Removes the sealed segments wholly below the first offset the previous snapshot recorded: the
   * checkpoint a restart may restore from is that one or a later one, so it never names them.
   */
  private removeTrimmedSegments(partition: Partition): void {
    const below = partition.snapshotFirstOffset;
    partition.snapshotFirstOffset = partition.firstOffset;
    if (below === 0) return;
    const segments = partition.store.segmentInfos();
    let count = 0;
    while (count < segments.length - 1) {
      const segment = segments[count]!;
      if (!segment.sealed || segment.lastOffset >= below) break;
      count += 1;
    }
    if (count === 0) return;
    partition.store.removeOldestSegments(count);
    this.onChanged(partition.key.namespace);
  }

  /** The state a snapshot would capture now, without a snapshot's flush and retirement. */
  records(): PartitionSnapshot {
    const partitions = [...this.partitions.values()]
      .sort((a, b) => a.key.namespace - b.key.namespace)
      .map((partition) => ({
        namespace: partition.key.namespace,
        incarnation: partition.key.incarnation,
        nextOffset: partition.nextOffset,
        firstOffset: partition.firstOffset,
        offsets: [...partition.offsets.values()].sort(compareOffsets),
      }));
    return { partitions };
  }

  restore(snapshot: PartitionSnapshot): void {
    this.partitions = new Map();
    this.retired = [];
    const named = new Set<string>();
    for (const record of snapshot.partitions) {
      const parts = unpackNamespace(BigInt(record.namespace));
      if (!parts.ok) throw new Error(`checkpoint namespace ${record.namespace}: ${parts.reason}`);
      const { namespace, incarnation } = record;
      const key = { namespace, incarnation, partitionId: parts.value.partitionId };
      named.add(`${key.namespace}.${key.incarnation}`);
      let store = this.stores.open(key);
      let cut = store.truncateTo(record.nextOffset);
      if (cut.kind === 'behind') {
        // Messages fetched for this checkpoint before it was installed (or a store's start).
        store = this.joinStaging(key, store, record.firstOffset);
        cut = store.truncateTo(record.nextOffset);
      }
      if (cut.kind === 'not_a_boundary') {
        const where = `checkpoint offset ${record.nextOffset} is inside a stored batch`;
        throw new Error(`partition ${namespace}: ${where}`);
      }
      if (cut.kind === 'behind') {
        // The store holds less than the checkpoint counts (a lost disk, an installed checkpoint
        // whose ops this replica never applied): what it holds becomes the start of its backfill,
        // and it continues from the checkpoint's offset; the range below is fetched from a peer.
        if (this.stores.keepAsStaging(key)) store = this.stores.open(key);
        store.purge(record.nextOffset);
      }
      const offsets = new Map(record.offsets.map((entry) => [offsetKey(entry), entry]));
      const { nextOffset, firstOffset } = record;
      this.partitions.set(namespace, {
        key,
        store,
        nextOffset,
        firstOffset,
        snapshotFirstOffset: firstOffset,
        offsets,
        dirty: false,
      });
    }
    for (const key of this.stores.list()) {
      if (!named.has(`${key.namespace}.${key.incarnation}`)) this.stores.remove(key);
    }
    const targets = [...this.partitions.values()]
      .map((partition) => ({
        key: partition.key,
        from: partition.firstOffset,
        end: partition.store.stats().startOffset,
      }))
      .filter((target) => target.end > target.from);
    this.backfill.reset(targets);
    for (const namespace of this.partitions.keys()) this.onChanged(namespace);
  }

  /**
   * A store short of its checkpoint joined with its staging log, where they continue each other:
   * the staging log follows the store (fetched before the install), or precedes it (a store's
   * start fetched after one), or, starting at or below the checkpoint's first offset and reaching
   * further, replaces it.
   */
  private joinStaging(key: StoreKey, store: PartitionStore, firstOffset: number): PartitionStore {
    const staged = this.stores.stagingRange(key);
    if (staged === null || staged.nextOffset === staged.startOffset) return store;
    const start = store.stats().startOffset;
    const fromFirst = staged.startOffset <= firstOffset;
    if (staged.startOffset === store.nextOffset) return this.stores.appendStaging(key);
    if (fromFirst && start > staged.startOffset && staged.nextOffset === start) {
      return this.stores.adoptStaging(key);
    }
    if (fromFirst && staged.nextOffset > store.nextOffset) {
      this.stores.remove(key);
      return this.stores.appendStaging(key);
    }
    return store;
  }

  /** The partition's committed view, or null when no batch was ever committed to it. */
  partition(address: PartitionAddress): PartitionView | null {
    const partition = this.committedPartition(address);
    if (partition === null) return null;
    const stats = partition.store.stats();
    // Messages a read can return, or those the store holds while its start is being fetched.
    const held = Math.max(partition.firstOffset, stats.startOffset);
    return {
      namespace: partition.key.namespace,
      incarnation: partition.key.incarnation,
      partitionId: partition.key.partitionId,
      nextOffset: partition.nextOffset,
      firstOffset: partition.firstOffset,
      messagesCount: partition.nextOffset - held,
      sizeBytes: stats.sizeBytes,
      segmentsCount: stats.segmentsCount,
    };
  }

  /** The lowest offset any consumer or group stored in the partition, or null when none did. */
  lowestStoredOffset(address: PartitionAddress): number | null {
    const partition = this.committedPartition(address);
    if (partition === null || partition.offsets.size === 0) return null;
    let lowest = Number.MAX_SAFE_INTEGER;
    for (const entry of partition.offsets.values()) lowest = Math.min(lowest, entry.offset);
    return lowest;
  }

  /** A consumer's stored offset, or null when none is stored. */
  storedOffset(address: PartitionAddress, consumer: ConsumerKey): number | null {
    return this.committedPartition(address)?.offsets.get(offsetKey(consumer))?.offset ?? null;
  }

  /**
   * Partitions whose store lacks the start of their log, with the first offset it holds: a
   * restore found the store short of its checkpoint (the replica lost flushed segment bytes, or
   * installed a checkpoint whose segments it never had) and restarted it at the checkpoint's
   * offset. Retention removes only segments below the first offset, so the range between it and
   * the store's start is missing until a partition transfer fills it.
   */
  storesBehind(): ReadonlyMap<number, number> {
    const behind = new Map<number, number>();
    for (const [namespace, partition] of this.partitions) {
      const start = partition.store.stats().startOffset;
      if (start > partition.firstOffset) behind.set(namespace, start);
    }
    return behind;
  }

  /** The store of a committed partition, for the read path (partition-reads.ts). */
  storeOf(address: PartitionAddress): PartitionStore | null {
    return this.committedPartition(address)?.store ?? null;
  }

  /** The incarnation the group holds of `namespace`, or null. */
  incarnationOf(namespace: number): number | null {
    return this.partitions.get(namespace)?.key.incarnation ?? null;
  }

  /** Every partition the group holds, namespace ascending. */
  namespaces(): number[] {
    return [...this.partitions.keys()].sort((a, b) => a - b);
  }
}

function verifyError(status: 'layout' | 'message_checksum' | 'batch_checksum'): number {
  if (status === 'message_checksum') return DataError.invalidMessageChecksum;
  if (status === 'batch_checksum') return DataError.invalidBatchChecksum;
  return DataError.invalidCommand;
}

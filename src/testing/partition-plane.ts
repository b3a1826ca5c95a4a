/**
 * The partition plane under the simulator: a partition group's state machine over segment
 * stores on each replica's simulated disk (crashed, torn and lost with it), clients that send
 * batches and store and delete consumer offsets over a few partitions (recreated now and then,
 * so stale and newer incarnations meet), and an independent model of what every committed
 * request must answer. After a run, `checkPartitionReplicas` holds every caught-up replica to the
 * model's log: every committed batch at its offset with its producer's frames, offsets dense
 * from 0, the same bytes on every replica.
 */
import { BATCH_HEADER_SIZE, encodeProducerBatch } from '../format/message-batch.js';
import type { Kernels } from '../kernels/kernel.js';
import { DataError } from '../partition/codes.js';
import { PARTITION_CHECKPOINT_CODEC } from '../partition/checkpoint-codec.js';
import { packNamespace, partitionGroupId, unpackNamespace } from '../partition/namespace.js';
import {
  encodeDeleteOffsetPrepare,
  encodeDropPrepare,
  encodeSendPrepare,
  encodeStoreOffsetPrepare,
  PartitionOperation,
} from '../partition/operations.js';
import { PartitionStateMachine, type PartitionSnapshot } from '../partition/state-machine.js';
import { DiskPartitionStores } from '../storage/partition-stores.js';
import type { Prng } from '../stdx/prng.js';
import type { SimModel, SimWorkload } from './checkers.js';
import type { SimPlane } from './cluster.js';

/** The body bound of a simulated backfill answer (a few batches). */
export const SIM_BACKFILL_BYTES = 2048;
/** Small segments, so runs rotate, cut back across segments and replay rotations. */
export const SIM_SEGMENT_BYTES = 4096;
const NAMESPACES: readonly number[] = [
  [1, 0, 0],
  [1, 0, 1],
  [2, 3, 0],
  [7, 1, 2],
].map(([streamId, topicId, partitionId]) => {
  const parts = { streamId: streamId!, topicId: topicId!, partitionId: partitionId! };
  const packed = packNamespace(parts);
  if (!packed.ok) throw new Error(packed.reason);
  return packed.value;
});
const INCARNATION_BASE = 1_700_000_000_000_000;

function partitionIdOf(namespace: number): number {
  const parts = unpackNamespace(BigInt(namespace));
  if (!parts.ok) throw new Error(parts.reason);
  return parts.value.partitionId;
}

/** The clients' shared view of which life of each partition is current (ticks run in order). */
class Incarnations {
  private readonly current = new Map<number, number>();
  of(namespace: number): number {
    return this.current.get(namespace) ?? INCARNATION_BASE;
  }
  bump(namespace: number): number {
    const next = this.of(namespace) + 1;
    this.current.set(namespace, next);
    return next;
  }
}

function randomOperation(
  kernels: Kernels,
  incarnations: Incarnations,
  prng: Prng,
): [number, Uint8Array] {
  const namespace = prng.pick(NAMESPACES);
  let incarnation = incarnations.of(namespace);
  if (prng.chance(0.02)) incarnation = incarnations.bump(namespace);
  else if (prng.chance(0.03)) incarnation -= 1;
  const address = { namespace, incarnation };
  const roll = prng.int(100);
  if (roll >= 99) {
    // As a node drops a partition whose topic was deleted or purged: the live incarnation (or a
    // stale one), after which committed metadata names a newer one.
    incarnations.bump(namespace);
    return [PartitionOperation.dropPartition, encodeDropPrepare(address)];
  }
  if (roll < 65) {
    const count = 1 + prng.int(4);
    const messages = Array.from({ length: count }, () => ({
      id: prng.u128(),
      payload: Uint8Array.from({ length: 1 + prng.int(160) }, () => prng.int(256)),
    }));
    const origin = 1_000 + prng.int(1000);
    const fields = { partitionId: partitionIdOf(namespace), originTimestampUs: origin };
    const batch = encodeProducerBatch(kernels, messages, fields);
    return [PartitionOperation.sendMessages, encodeSendPrepare({ ...address, batch })];
  }
  const kind = prng.chance(0.5) ? ('consumer' as const) : ('group' as const);
  const consumer = { kind, id: prng.int(3) };
  if (roll < 88) {
    const offset = prng.int(40);
    const body = encodeStoreOffsetPrepare({ ...address, consumer, offset });
    return [PartitionOperation.storeConsumerOffset, body];
  }
  const body = encodeDeleteOffsetPrepare({ ...address, consumer });
  return [PartitionOperation.deleteConsumerOffset, body];
}

/** One committed batch as the producer sent it, at the offset the model gave it. */
export interface ModelBatch {
  readonly baseOffset: number;
  /** The producer's frames (everything after the batch header). */
  readonly frames: Uint8Array;
  readonly messageCount: number;
}

interface ModelPartition {
  incarnation: number;
  nextOffset: number;
  readonly offsets: Map<string, number>;
  readonly batches: ModelBatch[];
}

const EMPTY = new Uint8Array(0);

/**
 * An independent model of the partition machine: reads the bodies by their documented layout
 * (src/partition/operations.ts), not with the machine's decoders.
 */
export class PartitionModel implements SimModel {
  readonly partitions = new Map<number, ModelPartition>();

  apply(operation: number, body: Uint8Array): { errorCode: number; payload: Uint8Array } {
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    const namespace = Number(view.getBigUint64(0, true));
    const incarnation = Number(view.getBigUint64(8, true));
    const current = this.partitions.get(namespace);
    const live = current !== undefined && current.incarnation === incarnation ? current : null;
    if (operation === PartitionOperation.sendMessages) {
      return this.send(namespace, incarnation, body);
    }
    if (operation === PartitionOperation.dropPartition) {
      if (live !== null) this.partitions.delete(namespace);
      return { errorCode: 0, payload: EMPTY };
    }
    const key = `${view.getUint8(16)}:${view.getUint32(17, true)}`;
    if (operation === PartitionOperation.storeConsumerOffset) {
      const offset = Number(view.getBigUint64(21, true));
      if (live === null || live.nextOffset === 0 || offset > live.nextOffset - 1) {
        return { errorCode: DataError.invalidOffset, payload: EMPTY };
      }
      live.offsets.set(key, offset);
      return { errorCode: 0, payload: EMPTY };
    }
    if (live === null || !live.offsets.delete(key)) {
      return { errorCode: DataError.consumerOffsetNotFound, payload: EMPTY };
    }
    return { errorCode: 0, payload: EMPTY };
  }

  private send(
    namespace: number,
    incarnation: number,
    body: Uint8Array,
  ): { errorCode: number; payload: Uint8Array } {
    let partition = this.partitions.get(namespace);
    if (partition !== undefined && partition.incarnation > incarnation) {
      return { errorCode: DataError.partitionNotFound, payload: EMPTY };
    }
    if (partition === undefined || partition.incarnation < incarnation) {
      partition = { incarnation, nextOffset: 0, offsets: new Map(), batches: [] };
      this.partitions.set(namespace, partition);
    }
    const batch = body.subarray(16);
    const messageCount = new DataView(batch.buffer, batch.byteOffset + 48, 4).getUint32(0, true);
    const baseOffset = partition.nextOffset;
    partition.batches.push({ baseOffset, frames: batch.slice(BATCH_HEADER_SIZE), messageCount });
    partition.nextOffset += messageCount;
    const parts = unpackNamespace(BigInt(namespace));
    if (!parts.ok) throw new Error(parts.reason);
    const payload = new Uint8Array(24);
    const out = new DataView(payload.buffer);
    out.setUint32(0, 1, true);
    out.setUint32(4, parts.value.streamId, true);
    out.setUint32(8, parts.value.topicId, true);
    out.setUint32(12, parts.value.partitionId, true);
    out.setBigUint64(16, BigInt(baseOffset), true);
    return { errorCode: 0, payload };
  }
}

/** The partition plane for `ClusterSim`; `models` collects each run's model for the checks. */
export function partitionSimPlane(
  kernels: Kernels,
  models: PartitionModel[] = [],
): SimPlane<PartitionSnapshot> {
  const incarnations = new Incarnations();
  const workload: SimWorkload = {
    operation: (prng) => randomOperation(kernels, incarnations, prng),
    model: () => {
      const model = new PartitionModel();
      models.push(model);
      return model;
    },
  };
  return {
    group: partitionGroupId(0),
    codec: PARTITION_CHECKPOINT_CODEC,
    stateMachine: (_index, disk) =>
      new PartitionStateMachine({
        kernels,
        stores: new DiskPartitionStores(disk, kernels, { segmentSizeBytes: SIM_SEGMENT_BYTES }),
        // Small answers: a backfill takes many round trips, each one a place for a fault.
        backfillBytesMax: SIM_BACKFILL_BYTES,
      }),
    workload,
  };
}

/** How the end-of-run check went: replicas held to the whole log, and those held to a tail. */
export interface PartitionCheck {
  readonly verified: number[];
  /**
   * Replicas with a store that lacks its log's start (no partition transfer fills it yet): held
   * to the model from the offset their store starts at.
   */
  readonly behind: number[];
}

/**
 * Holds every replica to the model: each partition's incarnation and next offset, and every
 * committed batch at its offset (from the store's start on, for a replica `behind`) carrying its
 * producer's frames, stamped with its partition and offset, offsets dense; and the stored bytes
 * of a batch equal on every replica that holds it. Throws with the first difference.
 */
export function checkPartitionReplicas(
  machines: readonly (PartitionStateMachine | null)[],
  model: PartitionModel,
): PartitionCheck {
  const verified: number[] = [];
  const behind: number[] = [];
  const reference = new Map<string, Uint8Array>();
  machines.forEach((machine, index) => {
    if (machine === null) return;
    const starts = machine.storesBehind();
    for (const [namespace, expected] of model.partitions) {
      const start = starts.get(namespace) ?? 0;
      for (const batch of checkPartition(machine, index, namespace, expected, start)) {
        const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
        const baseOffset = data.getBigUint64(8, true);
        const key = `${namespace}@${baseOffset}`;
        const first = reference.get(key);
        if (first === undefined) reference.set(key, batch);
        else if (!equalBytes(first, batch)) {
          throw new Error(`replica ${index}: batch ${key} differs from another replica's`);
        }
      }
    }
    const extra = machine.namespaces().filter((namespace) => !model.partitions.has(namespace));
    if (extra.length > 0) {
      throw new Error(`replica ${index}: partitions the model never created: ${extra}`);
    }
    (starts.size > 0 ? behind : verified).push(index);
  });
  return { verified, behind };
}

function checkPartition(
  machine: PartitionStateMachine,
  index: number,
  namespace: number,
  expected: ModelPartition,
  start: number,
): readonly Uint8Array[] {
  const where = `replica ${index} partition ${namespace}`;
  const address = { namespace, incarnation: expected.incarnation };
  const view = machine.partition(address);
  const store = machine.storeOf(address);
  if (view === null || store === null) {
    throw new Error(`${where}: incarnation ${expected.incarnation} missing`);
  }
  if (view.nextOffset !== expected.nextOffset) {
    throw new Error(`${where}: next offset ${view.nextOffset}, model ${expected.nextOffset}`);
  }
  const wanted = expected.batches.filter((batch) => batch.baseOffset >= start);
  if (wanted.length > 0 && wanted[0]!.baseOffset !== start) {
    throw new Error(`${where}: the store starts at ${start}, inside a batch`);
  }
  const end = expected.nextOffset - 1;
  const read =
    start > end ? { ok: true as const, batches: [] } : store.readFrom(start, end + 1, end);
  if (!read.ok) throw new Error(`${where}: read fault ${JSON.stringify(read.fault)}`);
  if (read.batches.length !== wanted.length) {
    const counts = `${read.batches.length} batches from ${start}, model ${wanted.length}`;
    throw new Error(`${where}: ${counts}`);
  }
  read.batches.forEach((batch, ordinal) => {
    const want = wanted[ordinal]!;
    const data = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
    const baseOffset = Number(data.getBigUint64(8, true));
    const partitionId = Number(data.getBigUint64(0, true));
    if (baseOffset !== want.baseOffset || partitionId !== partitionIdOf(namespace)) {
      const found = `batch ${ordinal} at ${baseOffset} of ${partitionId}`;
      throw new Error(`${where}: ${found}, model ${want.baseOffset}`);
    }
    if (!equalBytes(batch.subarray(BATCH_HEADER_SIZE), want.frames)) {
      throw new Error(`${where}: batch at ${baseOffset} differs from what its producer sent`);
    }
  });
  return read.batches;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((byte, at) => byte === b[at]);
}

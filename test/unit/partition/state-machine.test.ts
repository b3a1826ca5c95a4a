/**
 * The partition group's state machine and its prepare bodies, on their own: stamping at apply,
 * incarnations, consumer offsets with Iggy's refusals, polls by every strategy with slicing, the
 * checkpoint codec, and the retirement of replaced stores. The simulator runs the same machine
 * on the VSR core (test/sim/partition-plane.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { readBatchHeader } from '../../../src/format/message-batch.js';
import {
  PARTITION_CHECKPOINT_CODEC,
  encodePartitionCheckpoint,
} from '../../../src/partition/checkpoint-codec.js';
import { DataError } from '../../../src/partition/codes.js';
import type { ConsumerKey } from '../../../src/partition/consumer-offsets.js';
import { packNamespace } from '../../../src/partition/namespace.js';
import {
  decodeDeleteOffsetPrepare,
  decodeSendPrepare,
  decodeStoreOffsetPrepare,
  encodeDeleteOffsetPrepare,
  encodeDropPrepare,
  decodeDropPrepare,
  encodeSendPrepare,
  encodeStoreOffsetPrepare,
  encodeTrimPrepare,
  decodeTrimPrepare,
  PartitionOperation,
} from '../../../src/partition/operations.js';
import { pollPartition } from '../../../src/partition/partition-reads.js';
import type { PollingStrategy } from '../../../src/partition/poll-messages.js';
import { PartitionStateMachine, type PartitionSnapshot } from '../../../src/partition/state-machine.js';
import { DiskPartitionStores } from '../../../src/storage/partition-stores.js';
import { SimDisk } from '../../../src/storage/sim-disk.js';
import { Prng } from '../../../src/stdx/prng.js';
import { encodeProducerBatch } from '../../../src/format/message-batch.js';
import type { CheckpointModel } from '../../../src/vsr/state-machine.js';
import { kernelVariants } from '../storage-fixtures.js';

const NAMESPACE = (() => {
  const packed = packNamespace({ streamId: 3, topicId: 2, partitionId: 1 });
  if (!packed.ok) throw new Error(packed.reason);
  return packed.value;
})();
const LIFE = 1_700_000_000_000_000;
const T0 = 1_800_000_000_000_000;

describe('partition prepare bodies', () => {
  it('round-trip, and refuse trailing bytes, a bad kind and an out-of-range namespace', () => {
    const address = { namespace: NAMESPACE, incarnation: LIFE };
    const consumer = { kind: 'group' as const, id: 0xffff_fffe };
    const store = encodeStoreOffsetPrepare({ ...address, consumer, offset: 41 });
    expect(store.byteLength).toBe(29);
    expect(decodeStoreOffsetPrepare(store)).toEqual({ ok: true, value: { ...address, consumer, offset: 41 } });
    const remove = encodeDeleteOffsetPrepare({ ...address, consumer });
    expect(decodeDeleteOffsetPrepare(remove)).toEqual({ ok: true, value: { ...address, consumer } });
    const batch = new Uint8Array([1, 2, 3]);
    const send = decodeSendPrepare(encodeSendPrepare({ ...address, batch }));
    expect(send.ok && [...send.value.batch]).toEqual([1, 2, 3]);
    expect(decodeSendPrepare(encodeSendPrepare({ ...address, batch: new Uint8Array(0) }))).toEqual({ ok: false, reason: 'send prepare without a batch' });
    expect(decodeStoreOffsetPrepare(new Uint8Array([...store, 0]))).toEqual({ ok: false, reason: '1 trailing bytes' });
    const badKind = store.slice();
    badKind[16] = 3;
    expect(decodeStoreOffsetPrepare(badKind)).toEqual({ ok: false, reason: 'consumer kind 3' });
    const far = remove.slice();
    new DataView(far.buffer).setBigUint64(0, 1n << 60n, true);
    expect(decodeDeleteOffsetPrepare(far)).toMatchObject({ ok: false, reason: expect.stringMatching(/namespace .* out of range/) });
    expect(() => encodeStoreOffsetPrepare({ ...address, consumer: { kind: 'consumer', id: -1 }, offset: 0 })).toThrow(RangeError);
  });
});

describe.each(kernelVariants())('the partition state machine ($label kernels)', ({ kernels }) => {
  const prng = new Prng(11);
  let op = 0;

  function fresh(disk = new SimDisk(new Prng(5))): { machine: PartitionStateMachine; disk: SimDisk; stores: DiskPartitionStores } {
    const stores = new DiskPartitionStores(disk, kernels, { segmentSizeBytes: 1024 });
    return { machine: new PartitionStateMachine({ kernels, stores }), disk, stores };
  }

  function producerBatch(count: number, partitionId = 1): Uint8Array {
    const messages = Array.from({ length: count }, (_, index) => ({
      id: BigInt(index + 1),
      payload: Uint8Array.from({ length: 20 + index }, () => prng.int(256)),
    }));
    return encodeProducerBatch(kernels, messages, { partitionId, originTimestampUs: 5 });
  }

  function apply(machine: PartitionStateMachine, operation: number, body: Uint8Array): { errorCode: number; payload: Uint8Array } {
    op += 1;
    return machine.apply({ op, operation, timestampUs: T0 + op, userId: 1, clientId: 9n, body });
  }

  function send(machine: PartitionStateMachine, count: number, incarnation = LIFE): { errorCode: number; payload: Uint8Array } {
    const body = encodeSendPrepare({ namespace: NAMESPACE, incarnation, batch: producerBatch(count) });
    return apply(machine, PartitionOperation.sendMessages, body);
  }

  function baseOffsetOf(reply: { payload: Uint8Array }): number {
    const view = new DataView(reply.payload.buffer, reply.payload.byteOffset);
    expect(view.getUint32(0, true)).toBe(1);
    expect([view.getUint32(4, true), view.getUint32(8, true), view.getUint32(12, true)]).toEqual([3, 2, 1]);
    return Number(view.getBigUint64(16, true));
  }

  it('stamps each batch at commit: dense offsets, the op time, a checksum that verifies', () => {
    const { machine } = fresh();
    expect([3, 1, 4].map((count) => baseOffsetOf(send(machine, count)))).toEqual([0, 3, 4]);
    const store = machine.storeOf({ namespace: NAMESPACE, incarnation: LIFE })!;
    const read = store.readFrom(0, 100, 7);
    expect(read.ok).toBe(true);
    const batches = read.ok ? read.batches : [];
    expect(batches.map((batch) => kernels.messageBatchVerify(batch).status)).toEqual(['valid', 'valid', 'valid']);
    const headers = batches.map((batch) => {
      const header = readBatchHeader(batch);
      return header.ok ? [header.header.partitionId, header.header.baseOffset, header.header.baseTimestampUs - T0] : null;
    });
    expect(headers).toEqual([[1, 0, op - 2], [1, 3, op - 1], [1, 4, op]]);
    expect(machine.partition({ namespace: NAMESPACE, incarnation: LIFE })).toMatchObject({ nextOffset: 8, messagesCount: 8 });
  });

  it('refuses what admission should have: a wrong partition, damaged checksums, an unknown op', () => {
    const { machine } = fresh();
    const wrongPartition = encodeSendPrepare({ namespace: NAMESPACE, incarnation: LIFE, batch: producerBatch(1, 2) });
    expect(apply(machine, PartitionOperation.sendMessages, wrongPartition).errorCode).toBe(DataError.invalidCommand);
    const frame = producerBatch(2);
    frame[256 + 48] = (frame[256 + 48]! + 1) & 0xff; // a payload byte: the frame checksum fails
    const damaged = encodeSendPrepare({ namespace: NAMESPACE, incarnation: LIFE, batch: frame });
    expect(apply(machine, PartitionOperation.sendMessages, damaged).errorCode).toBe(DataError.invalidMessageChecksum);
    const batch = producerBatch(2);
    batch[40] = (batch[40]! + 1) & 0xff; // the batch checksum itself
    const badSum = encodeSendPrepare({ namespace: NAMESPACE, incarnation: LIFE, batch });
    expect(apply(machine, PartitionOperation.sendMessages, badSum).errorCode).toBe(DataError.invalidBatchChecksum);
    expect(apply(machine, 99, new Uint8Array(16)).errorCode).toBe(DataError.invalidCommand);
    expect(machine.partition({ namespace: NAMESPACE, incarnation: LIFE })).toBeNull();
  });

  it('a newer incarnation starts an empty log; an older one is refused', () => {
    const { machine } = fresh();
    send(machine, 2);
    expect(baseOffsetOf(send(machine, 3, LIFE + 1))).toBe(0);
    expect(send(machine, 1, LIFE).errorCode).toBe(DataError.partitionNotFound);
    expect(machine.partition({ namespace: NAMESPACE, incarnation: LIFE })).toBeNull();
    expect(machine.partition({ namespace: NAMESPACE, incarnation: LIFE + 1 })).toMatchObject({ nextOffset: 3 });
  });

  it('consumer offsets: stored within the log only, deleted once, keyed by kind and id', () => {
    const { machine } = fresh();
    const address = { namespace: NAMESPACE, incarnation: LIFE };
    const consumer: ConsumerKey = { kind: 'consumer', id: 7 };
    const store = (offset: number, who = consumer): number =>
      apply(machine, PartitionOperation.storeConsumerOffset, encodeStoreOffsetPrepare({ ...address, consumer: who, offset })).errorCode;
    const remove = (who = consumer): number =>
      apply(machine, PartitionOperation.deleteConsumerOffset, encodeDeleteOffsetPrepare({ ...address, consumer: who })).errorCode;
    expect(store(0)).toBe(DataError.invalidOffset); // an empty partition
    send(machine, 4);
    expect(store(4)).toBe(DataError.invalidOffset); // above the current offset 3
    expect(store(3)).toBe(0);
    expect(store(1, { kind: 'group', id: 7 })).toBe(0);
    expect(machine.storedOffset(address, consumer)).toBe(3);
    expect(machine.storedOffset(address, { kind: 'group', id: 7 })).toBe(1);
    expect(store(2)).toBe(0); // an explicit store may rewind
    expect(machine.storedOffset(address, consumer)).toBe(2);
    expect(remove()).toBe(0);
    expect(remove()).toBe(DataError.consumerOffsetNotFound);
    expect(machine.storedOffset(address, consumer)).toBeNull();
    expect(machine.records().partitions[0]!.offsets).toEqual([{ kind: 'group', id: 7, offset: 1 }]);
  });

  it('polls by every strategy, slicing the batches the range cuts, never past the commit', () => {
    const { machine } = fresh();
    for (const count of [3, 2, 4]) send(machine, count); // offsets 0-2, 3-4, 5-8
    const address = { namespace: NAMESPACE, incarnation: LIFE };
    const poll = (strategy: PollingStrategy, count: number, storedOffset: number | null = null): number[] => {
      const outcome = pollPartition(machine, kernels, { address, partitionId: 1, strategy, count, storedOffset });
      if (!outcome.ok) throw new Error(outcome.fault.reason);
      expect(outcome.reply.currentOffset).toBe(8);
      const offsets: number[] = [];
      for (const batch of outcome.reply.batches) {
        expect(kernels.messageBatchVerify(batch, 'contiguous').status).toBe('valid');
        const header = readBatchHeader(batch);
        if (!header.ok) throw new Error('header');
        const base = header.header.baseOffset;
        const first = new DataView(batch.buffer, batch.byteOffset + 256 + 24, 4).getUint32(0, true);
        for (let index = 0; index < header.header.messageCount; index++) offsets.push(base + first + index);
      }
      expect(outcome.lastOffset).toBe(offsets.at(-1) ?? null);
      return offsets;
    };
    expect(poll({ kind: 'offset', value: 1n }, 3)).toEqual([1, 2, 3]);
    expect(poll({ kind: 'offset', value: 6n }, 100)).toEqual([6, 7, 8]);
    expect(poll({ kind: 'offset', value: 9n }, 5)).toEqual([]);
    expect(poll({ kind: 'first', value: 0n }, 2)).toEqual([0, 1]);
    expect(poll({ kind: 'last', value: 0n }, 3)).toEqual([6, 7, 8]);
    expect(poll({ kind: 'last', value: 0n }, 50)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(poll({ kind: 'next', value: 0n }, 2)).toEqual([0, 1]);
    expect(poll({ kind: 'next', value: 0n }, 2, 4)).toEqual([5, 6]);
    expect(poll({ kind: 'next', value: 0n }, 2, 8)).toEqual([]);
    // Timestamps are the ops' times: the second batch was stamped T0 + op - 1.
    expect(poll({ kind: 'timestamp', value: BigInt(T0 + op - 1) }, 3)).toEqual([3, 4, 5]);
    expect(poll({ kind: 'timestamp', value: BigInt(T0 + op + 1) }, 3)).toEqual([]);
    expect(poll({ kind: 'offset', value: 0n }, 0)).toEqual([]);
    const unknown = pollPartition(machine, kernels, {
      address: { namespace: NAMESPACE, incarnation: LIFE + 5 },
      partitionId: 1,
      strategy: { kind: 'first', value: 0n },
      count: 10,
      storedOffset: null,
    });
    expect(unknown).toEqual({ ok: true, reply: { partitionId: 1, currentOffset: 0, batches: [] }, lastOffset: null });
  });

  it('a replaced store is removed after two more snapshots, never while a checkpoint names it', () => {
    const { machine, stores } = fresh();
    send(machine, 2);
    machine.snapshot();
    send(machine, 1, LIFE + 1);
    const lives = (): number[] => stores.list().map((key) => key.incarnation - LIFE).sort();
    machine.snapshot(); // names only LIFE + 1, but the durable checkpoint may still name LIFE
    expect(lives()).toEqual([0, 1]);
    machine.snapshot();
    expect(lives()).toEqual([1]);
  });

  it('a drop of the live incarnation frees its log and offsets, its store after two snapshots; others change nothing', () => {
    const { machine, stores } = fresh();
    const address = { namespace: NAMESPACE, incarnation: LIFE };
    expect(decodeDropPrepare(encodeDropPrepare(address))).toEqual({ ok: true, value: address });
    expect(decodeDropPrepare(new Uint8Array(17))).toEqual({ ok: false, reason: '1 trailing bytes' });
    send(machine, 3);
    const consumer = { kind: 'consumer' as const, id: 4 };
    expect(apply(machine, PartitionOperation.storeConsumerOffset, encodeStoreOffsetPrepare({ ...address, consumer, offset: 1 })).errorCode).toBe(0);
    machine.snapshot();
    // Another incarnation (an older one, or one not yet sent to) is not this partition's.
    for (const incarnation of [LIFE - 1, LIFE + 1]) {
      expect(apply(machine, PartitionOperation.dropPartition, encodeDropPrepare({ namespace: NAMESPACE, incarnation })).errorCode).toBe(0);
      expect(machine.partition(address)).toMatchObject({ nextOffset: 3 });
    }
    expect(apply(machine, PartitionOperation.dropPartition, encodeDropPrepare(address)).errorCode).toBe(0);
    expect(machine.partition(address)).toBeNull();
    expect(machine.storedOffset(address, consumer)).toBeNull();
    expect(machine.namespaces()).toEqual([]);
    expect(machine.records().partitions).toEqual([]);
    // A second drop of it is the same result.
    expect(apply(machine, PartitionOperation.dropPartition, encodeDropPrepare(address)).errorCode).toBe(0);
    const lives = (): number[] => stores.list().map((key) => key.incarnation - LIFE);
    machine.snapshot(); // the durable checkpoint before it may still name the dropped store
    expect(lives()).toEqual([0]);
    machine.snapshot();
    expect(lives()).toEqual([]);
    // The partition's next life starts empty, at offset 0.
    expect(baseOffsetOf(send(machine, 2, LIFE + 5))).toBe(0);
  });

  it('restore cuts stores back to the checkpoint, restarts short ones and drops unknown ones', () => {
    const { machine, disk } = fresh();
    send(machine, 3);
    const checkpoint = machine.snapshot();
    send(machine, 2);
    send(machine, 2, LIFE + 1); // a store the checkpoint does not know
    machine.snapshot();
    const again = fresh(disk).machine;
    again.restore(checkpoint);
    expect(again.records()).toEqual(checkpoint);
    expect(again.partition({ namespace: NAMESPACE, incarnation: LIFE })).toMatchObject({ nextOffset: 3, messagesCount: 3 });
    expect(again.storesBehind().size).toBe(0);
    // A checkpoint ahead of the store (an installed one): the store restarts at its offset.
    const ahead: PartitionSnapshot = { partitions: [{ ...checkpoint.partitions[0]!, nextOffset: 10 }] };
    const third = fresh(disk).machine;
    third.restore(ahead);
    expect([...third.storesBehind()]).toEqual([[NAMESPACE, 10]]);
    expect(baseOffsetOf(send(third, 1))).toBe(10);
  });

  it('the checkpoint codec round-trips and refuses damage with the offset', () => {
    const model: CheckpointModel<PartitionSnapshot> = {
      op: 77,
      createdAtUs: T0,
      writerRelease: 0x0001_0002,
      clientTable: [{ slot: 2, clientId: (1n << 100n) + 3n, epoch: 4, userId: 5, watermark: 6, watermarkChecksum: 7n, reply: new Uint8Array([9, 9]) }],
      machine: {
        partitions: [
          { namespace: 5, incarnation: LIFE, nextOffset: 10, firstOffset: 4, offsets: [{ kind: 'consumer', id: 1, offset: 9 }, { kind: 'group', id: 0, offset: 2 }] },
          { namespace: NAMESPACE, incarnation: LIFE + 1, nextOffset: 0, firstOffset: 0, offsets: [] },
        ],
      },
    };
    const payload = PARTITION_CHECKPOINT_CODEC.encode(kernels, model);
    expect(PARTITION_CHECKPOINT_CODEC.formatVersion(payload)).toBe(2);
    expect(PARTITION_CHECKPOINT_CODEC.decode(payload)).toEqual({ ok: true, model });
    expect(PARTITION_CHECKPOINT_CODEC.formatVersion(new Uint8Array([0x94, 1]))).toBeNull();
    const refusal = (changed: CheckpointModel<PartitionSnapshot>): unknown => PARTITION_CHECKPOINT_CODEC.decode(encodePartitionCheckpoint(changed));
    const first = model.machine.partitions[0]!;
    expect(refusal({ ...model, machine: { partitions: [model.machine.partitions[1]!, first] } })).toMatchObject({ ok: false, message: expect.stringMatching(/namespace 5 after/) });
    expect(refusal({ ...model, machine: { partitions: [{ ...first, nextOffset: 9 }] } })).toMatchObject({ ok: false, message: expect.stringMatching(/stored offset 9 at or past next offset 9/) });
    expect(refusal({ ...model, machine: { partitions: [{ ...first, offsets: [...first.offsets].reverse() }] } })).toMatchObject({ ok: false, message: expect.stringMatching(/out of order/) });
    expect(refusal({ ...model, machine: { partitions: [{ ...first, firstOffset: 11 }] } })).toMatchObject({ ok: false, message: expect.stringMatching(/first offset 11 past next offset 10/) });
    expect(PARTITION_CHECKPOINT_CODEC.decode(payload.subarray(0, payload.byteLength - 1))).toMatchObject({ ok: false, message: expect.stringMatching(/truncated/) });
    expect(PARTITION_CHECKPOINT_CODEC.decode(new Uint8Array([...payload, 0]))).toEqual({ ok: false, message: 'partition checkpoint: 1 trailing bytes', offset: payload.byteLength });
    const huge = payload.slice();
    new DataView(huge.buffer).setUint32(25, 0xffff_ffff, true); // the client count
    expect(PARTITION_CHECKPOINT_CODEC.decode(huge)).toMatchObject({ ok: false, offset: 25, message: expect.stringMatching(/client count .* exceeds/) });
  });
  it('reads a version 1 checkpoint (no first offsets) as never trimmed', () => {
    const partitions = [
      { namespace: 5, incarnation: LIFE, nextOffset: 10, firstOffset: 0, offsets: [{ kind: 'consumer' as const, id: 1, offset: 9 }] },
      { namespace: NAMESPACE, incarnation: LIFE + 1, nextOffset: 3, firstOffset: 0, offsets: [] },
    ];
    const model: CheckpointModel<PartitionSnapshot> = { op: 9, createdAtUs: T0, writerRelease: 1, clientTable: [], machine: { partitions } };
    const v2 = encodePartitionCheckpoint(model);
    // Version 1 is version 2 without each partition's firstOffset (8 bytes after nextOffset).
    const head = 4 + 1 + 8 + 8 + 4 + 4 + 4;
    const firstAt = [head + 24, head + 24 + 8 + 4 + 13 + 24];
    const v1 = new Uint8Array([...v2.subarray(0, firstAt[0]), ...v2.subarray(firstAt[0]! + 8, firstAt[1]), ...v2.subarray(firstAt[1]! + 8)]);
    v1[4] = 1;
    expect(PARTITION_CHECKPOINT_CODEC.decode(v1)).toEqual({ ok: true, model });
    v1[4] = 3;
    expect(PARTITION_CHECKPOINT_CODEC.decode(v1)).toEqual({ ok: false, message: 'partition checkpoint: version 3', offset: 4 });
  });

  it('a trim raises the first offset: every strategy reads from it, segments below go a checkpoint later', () => {
    const { machine, disk } = fresh();
    const address = { namespace: NAMESPACE, incarnation: LIFE };
    const trim = (floor: number, incarnation = LIFE): number =>
      apply(machine, PartitionOperation.trimPartition, encodeTrimPrepare({ namespace: NAMESPACE, incarnation, floor })).errorCode;
    expect(decodeTrimPrepare(encodeTrimPrepare({ ...address, floor: 7 }))).toEqual({ ok: true, value: { ...address, floor: 7 } });
    expect(decodeTrimPrepare(new Uint8Array(23))).toMatchObject({ ok: false });
    for (let round = 0; round < 12; round++) send(machine, 3);
    const store = machine.storeOf(address)!;
    const segments = store.segmentInfos();
    expect(segments.length).toBeGreaterThan(3);
    const floor = segments[2]!.startOffset;
    expect(trim(floor, LIFE + 1)).toBe(0); // another incarnation's: nothing
    expect(machine.partition(address)).toMatchObject({ firstOffset: 0, messagesCount: 36 });
    expect(trim(floor)).toBe(0);
    expect(machine.partition(address)).toMatchObject({ firstOffset: floor, nextOffset: 36, messagesCount: 36 - floor });
    expect(trim(floor - 1)).toBe(0); // never lowered
    expect(machine.partition(address)!.firstOffset).toBe(floor);
    const firstOf = (strategy: PollingStrategy, count = 1000): number | null => {
      const outcome = pollPartition(machine, kernels, { address, partitionId: 1, strategy, count, storedOffset: null });
      if (!outcome.ok) throw new Error(outcome.fault.reason);
      const batch = outcome.reply.batches[0];
      if (batch === undefined) return null;
      const header = readBatchHeader(batch);
      return header.ok ? header.header.baseOffset : null;
    };
    expect(firstOf({ kind: 'offset', value: 0n })).toBe(floor);
    expect(firstOf({ kind: 'first', value: 0n })).toBe(floor);
    expect(firstOf({ kind: 'next', value: 0n })).toBe(floor);
    expect(firstOf({ kind: 'last', value: 0n })).toBe(floor);
    expect(firstOf({ kind: 'timestamp', value: 0n })).toBe(floor);
    expect(firstOf({ kind: 'offset', value: BigInt(floor + 1) })).toBe(floor); // the batch, sliced below
    // Its segments stay until the checkpoint after the one that first records the trim is taken.
    const recorded = machine.snapshot();
    expect(recorded.partitions[0]).toMatchObject({ firstOffset: floor });
    expect(store.stats().startOffset).toBe(0);
    machine.snapshot();
    expect(store.stats().startOffset).toBe(floor);
    // A restore of the checkpoint that recorded it finds its store whole from the first offset.
    const again = fresh(disk).machine;
    again.restore(recorded);
    expect(again.partition(address)).toMatchObject({ firstOffset: floor, nextOffset: 36, messagesCount: 36 - floor });
    expect(again.storesBehind().size).toBe(0);
    // Never past the next offset.
    expect(apply(again, PartitionOperation.trimPartition, encodeTrimPrepare({ ...address, floor: 99 })).errorCode).toBe(0);
    expect(again.partition(address)).toMatchObject({ firstOffset: 36, messagesCount: 0 });
    expect(baseOffsetOf(send(again, 1))).toBe(36);
  });
});

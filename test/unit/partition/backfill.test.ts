/**
 * Store backfill between partition machines, without the VSR core: a replica restored from a
 * checkpoint whose messages it never had fetches its stores' starts from a peer over the two
 * store-range frames (built, sealed, decoded and validated as on the wire), and ends with the
 * peer's log byte for byte. The guards each have a pin: a late answer of a replaced fetch, records
 * that do not verify or reach past the store's start, a peer that does not hold the range, and a
 * crash between the steps of an adoption. test/sim/partition-plane.test.ts runs it on the core.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../../src/constants.js';
import { encodeProducerBatch } from '../../../src/format/message-batch.js';
import { packNamespace } from '../../../src/partition/namespace.js';
import { encodeSendPrepare, PartitionOperation } from '../../../src/partition/operations.js';
import { PartitionStateMachine, type PartitionSnapshot } from '../../../src/partition/state-machine.js';
import { DiskPartitionStores } from '../../../src/storage/partition-stores.js';
import { SimDisk } from '../../../src/storage/sim-disk.js';
import { Prng } from '../../../src/stdx/prng.js';
import { buildFrame, decodeFrame } from '../../../src/vsr/frame.js';
import type { RequestStoreRangeHeader, StoreRangeHeader } from '../../../src/vsr/header.js';
import type { StoreRangeHost } from '../../../src/vsr/state-machine.js';
import { kernelVariants } from '../storage-fixtures.js';

const NAMESPACE = (() => {
  const packed = packNamespace({ streamId: 3, topicId: 2, partitionId: 1 });
  if (!packed.ok) throw new Error(packed.reason);
  return packed.value;
})();
const LIFE = 1_700_000_000_000_000;
const T0 = 1_800_000_000_000_000;
const ADDRESS = { namespace: NAMESPACE, incarnation: LIFE };
const RETRY_TICKS = 4;

describe.each(kernelVariants())('store backfill ($label kernels)', ({ kernels }) => {
  interface Node {
    readonly machine: PartitionStateMachine;
    readonly disk: SimDisk;
    readonly stores: DiskPartitionStores;
    readonly drops: string[];
    readonly events: { event: string; fields: Readonly<Record<string, unknown>> }[];
    readonly changed: number[];
  }

  interface InFlight {
    readonly from: number;
    readonly to: number;
    readonly frame: Uint8Array;
  }

  /** Replicas whose frames go into one queue; `deliver` hands them over, in order. */
  class Group {
    readonly nodes: Node[] = [];
    readonly queue: InFlight[] = [];
    private nonces = 0n;

    add(disk = new SimDisk(new Prng(this.nodes.length + 5)), bytesMax = 700): Node {
      const node = this.node(this.nodes.length, disk, bytesMax);
      this.nodes.push(node);
      return node;
    }

    /** Replaces node `index` with a fresh machine over the same disk (a restart). */
    restart(index: number, bytesMax = 700): Node {
      const node = this.node(index, this.nodes[index]!.disk, bytesMax);
      this.nodes[index] = node;
      return node;
    }

    private node(index: number, disk: SimDisk, bytesMax: number): Node {
      const stores = new DiskPartitionStores(disk, kernels, { segmentSizeBytes: 1024 });
      const changed: number[] = [];
      const onChanged = (namespace: number): void => void changed.push(namespace);
      const machine = new PartitionStateMachine({ kernels, stores, onChanged, backfillBytesMax: bytesMax });
      const node: Node = { machine, disk, stores, drops: [], events: [], changed };
      machine.storeRanges.attach(this.host(index, node));
      return node;
    }

    private host(index: number, node: Node): StoreRangeHost {
      const common = { cluster: 1n, view: 0, release: 0, replica: index, group: 7n };
      const nodes = this.nodes;
      return {
        replica: index,
        get replicaCount() {
          return nodes.length;
        },
        retryTicks: RETRY_TICKS,
        nonce: () => (this.nonces += 1n),
        sendRequest: (to, fields) => {
          const input = { ...common, command: Command.requestStoreRange, ...fields } as const;
          this.queue.push({ from: index, to, frame: buildFrame(kernels, input) });
        },
        sendRange: (to, fields, body) => {
          const input = { ...common, command: Command.storeRange, ...fields } as const;
          this.queue.push({ from: index, to, frame: buildFrame(kernels, input, body) });
        },
        drop: (reason) => void node.drops.push(reason),
        emit: (_level, event, fields = {}) => void node.events.push({ event, fields }),
      };
    }

    /** Hands one frame to its replica, as the replica's `onMessage` would (decoded, validated). */
    deliverOne(flight = this.queue.shift()!): void {
      const decoded = decodeFrame(kernels, flight.frame);
      if (!decoded.ok) throw new Error(`a built frame decodes: ${decoded.reason}`);
      const ranges = this.nodes[flight.to]!.machine.storeRanges;
      const header = decoded.header as RequestStoreRangeHeader | StoreRangeHeader;
      if (header.command === Command.requestStoreRange) ranges.onRequest(header);
      else ranges.onRange(header, decoded.body);
    }

    /** Ticks and delivers until no fetch is pending (or `ticksMax` ran out). */
    settle(ticksMax = 200): boolean {
      for (let tick = 0; tick < ticksMax; tick++) {
        while (this.queue.length > 0) this.deliverOne();
        if (this.nodes.every((node) => node.machine.storeRanges.pending === 0)) return true;
        for (const node of this.nodes) node.machine.storeRanges.tick();
      }
      return false;
    }
  }
  let group: Group;

  const prng = new Prng(21);
  let op = 0;

  function producerBatch(count: number): Uint8Array {
    const messages = Array.from({ length: count }, (_, index) => ({
      id: BigInt(index + 1),
      payload: Uint8Array.from({ length: 30 + index }, () => prng.int(256)),
    }));
    return encodeProducerBatch(kernels, messages, { partitionId: 1, originTimestampUs: 5 });
  }

  /** One committed send, applied by every machine given (the same op, the same stamp). */
  function send(machines: readonly PartitionStateMachine[], count: number): void {
    op += 1;
    const body = encodeSendPrepare({ ...ADDRESS, batch: producerBatch(count) });
    const input = { op, operation: PartitionOperation.sendMessages, timestampUs: T0 + op, userId: 1, clientId: 9n, body };
    for (const machine of machines) expect(machine.apply(input).errorCode).toBe(0);
  }

  function batchesOf(machine: PartitionStateMachine): Uint8Array[] {
    const store = machine.storeOf(ADDRESS)!;
    const read = store.readFrom(0, 1_000_000, 1_000_000);
    if (!read.ok) throw new Error(JSON.stringify(read.fault));
    return read.batches.map((batch) => batch.slice());
  }

  /**
   * A server with `before` sends at its checkpoint, and a receiver restored from that checkpoint
   * with an empty disk; both then apply `after` more sends (the journal above the checkpoint).
   */
  function behindReplica(before = 12, after = 3, receiverDisk?: SimDisk): { server: Node; receiver: Node; checkpoint: PartitionSnapshot } {
    group = new Group();
    const server = group.add();
    for (let index = 0; index < before; index++) send([server.machine], 1 + (index % 4));
    const checkpoint = server.machine.snapshot();
    const receiver = group.add(receiverDisk);
    receiver.machine.restore(checkpoint);
    for (let index = 0; index < after; index++) send([server.machine, receiver.machine], 2);
    return { server, receiver, checkpoint };
  }

  it('a restored replica fetches the start of its store and ends with the peer log, byte for byte', () => {
    const { server, receiver, checkpoint } = behindReplica();
    const end = checkpoint.partitions[0]!.nextOffset;
    expect([...receiver.machine.storesBehind()]).toEqual([[NAMESPACE, end]]);
    expect(receiver.machine.storeRanges.pending).toBe(1);
    receiver.changed.length = 0;
    expect(group.settle()).toBe(true);
    expect(receiver.machine.storesBehind().size).toBe(0);
    expect(batchesOf(receiver.machine)).toEqual(batchesOf(server.machine));
    expect(receiver.machine.partition(ADDRESS)).toEqual(server.machine.partition(ADDRESS));
    // Several answers (700-byte bodies) and several adopted segments; statistics recounted.
    const answers = receiver.events.filter((entry) => entry.event === 'store_backfill_completed');
    expect(answers).toEqual([{ event: 'store_backfill_completed', fields: { namespace: NAMESPACE, incarnation: LIFE, offsets: end } }]);
    expect(server.machine.partition(ADDRESS)!.segmentsCount).toBeGreaterThan(2);
    expect(receiver.changed).toEqual([NAMESPACE]);
    expect(receiver.stores.listStaging()).toEqual([]);
    // The whole log survives a restart: the adopted segments are the store's own files.
    const durable = receiver.machine.snapshot();
    const again = group.restart(1);
    again.machine.restore(durable);
    expect(again.machine.storeRanges.pending).toBe(0);
    expect(batchesOf(again.machine)).toEqual(batchesOf(server.machine));
  });

  it('an answer to a replaced fetch is stale: a restore draws a new nonce, and the old one stages nothing', () => {
    const { receiver, checkpoint } = behindReplica();
    receiver.machine.storeRanges.tick(); // starts the fetch and asks replica 0
    group.deliverOne(); // the server answers the first request...
    const late = group.queue.shift()!; // ...and the answer is held back
    receiver.machine.restore(checkpoint); // the fetch is replaced: a new session, a new nonce
    receiver.machine.storeRanges.tick();
    expect(group.queue.map((flight) => flight.to)).toEqual([0]); // its first request is out
    group.deliverOne(late);
    expect(receiver.drops).toEqual(['store_range_stale']);
    expect(receiver.machine.backfillProgress().get(NAMESPACE)).toEqual({ fetched: 0, end: checkpoint.partitions[0]!.nextOffset });
    expect(group.settle()).toBe(true);
  });

  it('records that do not verify stage nothing, and the next peer is asked', () => {
    const { receiver } = behindReplica();
    receiver.machine.storeRanges.tick();
    expect(group.queue.map((flight) => flight.to)).toEqual([0]);
    const third = group.add();
    group.deliverOne();
    const answer = group.queue.shift()!;
    const damaged = answer.frame.slice();
    damaged[256 + 256 + 60]! ^= 0x01; // a payload byte of the first batch's first message
    // Resealed, so the frame itself is sound: only the records inside are not.
    const decoded = decodeFrame(kernels, answer.frame);
    if (!decoded.ok) throw new Error('decodes');
    const body = damaged.subarray(256);
    const { checksum: _c, checksumBody: _b, size: _s, ...input } = decoded.header as StoreRangeHeader;
    group.deliverOne({ ...answer, frame: buildFrame(kernels, input, body) });
    expect(receiver.drops).toEqual(['store_range_invalid']);
    const refused = receiver.events.find((entry) => entry.event === 'store_backfill_refused');
    expect(refused?.fields).toMatchObject({ peer: 0, reason: expect.stringMatching(/^batch at 0: does not verify \(message_checksum\)/) });
    expect(receiver.machine.backfillProgress().get(NAMESPACE)!.fetched).toBe(0);
    // The next request goes to the other peer, which holds nothing: it refuses; then replica 0.
    receiver.machine.storeRanges.tick();
    expect(group.queue.map((flight) => flight.to)).toEqual([2]);
    group.deliverOne();
    expect(third.drops).toEqual(['store_range_unavailable']);
    group.deliverOne();
    expect(receiver.drops).toEqual(['store_range_invalid', 'store_range_refused']);
    expect(group.settle()).toBe(true);
    expect(batchesOf(receiver.machine)).toEqual(batchesOf(group.nodes[0]!.machine));
  });

  it('records past the store start are refused: a fetch never stages what its journal applies', () => {
    const { server, receiver, checkpoint } = behindReplica(6, 3);
    const end = checkpoint.partitions[0]!.nextOffset;
    receiver.machine.storeRanges.tick();
    const request = group.queue.shift()!;
    const decoded = decodeFrame(kernels, request.frame);
    if (!decoded.ok) throw new Error('decodes');
    const asked = decoded.header as RequestStoreRangeHeader;
    expect([asked.fromOffset, asked.toOffset]).toEqual([0, end]);
    // The whole server log, tail included: what a server that ignored `toOffset` would send.
    const all = batchesOf(server.machine);
    const body = new Uint8Array(all.reduce((sum, batch) => sum + batch.byteLength, 0));
    let at = 0;
    for (const batch of all) {
      body.set(batch, at);
      at += batch.byteLength;
    }
    const nextOffset = server.machine.partition(ADDRESS)!.nextOffset;
    const fields = { nonce: asked.nonce, store: asked.store, incarnation: asked.incarnation, fromOffset: 0, nextOffset, status: 0 };
    const input = { cluster: 1n, view: 0, release: 0, replica: 0, group: 7n, command: Command.storeRange, ...fields } as const;
    group.deliverOne({ from: 0, to: 1, frame: buildFrame(kernels, input, body) });
    expect(receiver.drops).toEqual(['store_range_invalid']);
    const refused = receiver.events.find((entry) => entry.event === 'store_backfill_refused');
    expect(refused?.fields['reason']).toMatch(new RegExp(`reaches past the store's start ${end}`));
    expect(receiver.machine.backfillProgress().get(NAMESPACE)!.fetched).toBe(0);
  });

  it('a server holds back a range its own store lacks, and one above its commit', () => {
    const { server, receiver, checkpoint } = behindReplica();
    const end = checkpoint.partitions[0]!.nextOffset;
    // The receiver, still behind, is asked by a third replica: it does not hold [0, end).
    const third = group.add();
    third.machine.restore(checkpoint);
    third.machine.storeRanges.tick();
    const request = group.queue.shift()!;
    group.deliverOne({ ...request, to: 1 });
    expect(receiver.drops).toEqual(['store_range_unavailable']);
    const answer = decodeFrame(kernels, group.queue[0]!.frame);
    expect(answer.ok && answer.header).toMatchObject({ status: 1, fromOffset: 0, nextOffset: 0 });
    // Above the committed log: refused too.
    const beyond = { cluster: 1n, view: 0, release: 0, replica: 2, group: 7n, command: Command.requestStoreRange } as const;
    const far = { nonce: 5n, store: NAMESPACE, incarnation: LIFE, fromOffset: 0, toOffset: end + 1000, bytesMax: 4096 };
    group.deliverOne({ from: 2, to: 0, frame: buildFrame(kernels, { ...beyond, ...far }) });
    expect(server.drops).toEqual(['store_range_unavailable']);
  });

  it('a crash inside an adoption leaves a store without a hole: the restart finishes it', () => {
    // The receiver's process stops at its third rename: the newest segment moved (log and index,
    // the directory fsynced), nothing older yet.
    const disk = new SimDisk(new Prng(99));
    let renames = 0;
    const stopping = new Proxy(disk, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property !== 'rename') return typeof value === 'function' ? value.bind(target) : value;
        return (from: string, to: string) => {
          if (++renames === 3) throw new Error('process stopped');
          target.rename(from, to);
        };
      },
    });
    const { server, checkpoint } = behindReplica(12, 0, stopping);
    expect(() => group.settle()).toThrow('process stopped');
    expect(group.nodes[0]!.machine.partition(ADDRESS)!.segmentsCount).toBeGreaterThan(2);
    group.queue.length = 0;
    const again = group.restart(1);
    again.machine.restore(checkpoint);
    // The store starts at the moved segment and the staging log ends exactly there.
    const start = again.machine.storesBehind().get(NAMESPACE)!;
    expect(start).toBeGreaterThan(0);
    expect(start).toBeLessThan(checkpoint.partitions[0]!.nextOffset);
    again.machine.storeRanges.tick();
    expect(group.queue).toEqual([]); // finished from the disk alone, without a request
    expect(again.machine.storeRanges.pending).toBe(0);
    for (let index = 0; index < 3; index++) send([server.machine, again.machine], 1);
    expect(batchesOf(again.machine)).toEqual(batchesOf(server.machine));
  });

  it('before an install: what the checkpoint names beyond the store is staged, then appended to it', () => {
    group = new Group();
    const server = group.add();
    const receiver = group.add();
    // Both apply the first sends; then the receiver falls behind and the server checkpoints.
    for (let index = 0; index < 4; index++) send([server.machine, receiver.machine], 2);
    const held = receiver.machine.partition(ADDRESS)!.nextOffset;
    for (let index = 0; index < 9; index++) send([server.machine], 1 + (index % 3));
    const checkpoint = server.machine.snapshot();
    const ranges = receiver.machine.storeRanges;
    ranges.prepareInstall!(checkpoint);
    expect(ranges.installReady).toBe(false);
    expect(group.settle()).toBe(true);
    expect(ranges.installReady).toBe(true);
    const staged = receiver.events.find((entry) => entry.event === 'store_backfill_started');
    expect(staged?.fields).toMatchObject({ from: held, end: checkpoint.partitions[0]!.nextOffset, before_install: true });
    // The install: the staged messages follow the store, no fetch is left, the log is the server's.
    receiver.machine.restore(checkpoint);
    expect(ranges.pending).toBe(0);
    expect(receiver.machine.storesBehind().size).toBe(0);
    expect(batchesOf(receiver.machine)).toEqual(batchesOf(server.machine));
    expect(receiver.stores.listStaging()).toEqual([]);
    const again = group.restart(1);
    again.machine.restore(checkpoint);
    expect(batchesOf(again.machine)).toEqual(batchesOf(server.machine));
  });

  it('a fetch of a store its peers replaced with a newer incarnation stops: its messages are obsolete', () => {
    group = new Group();
    const server = group.add();
    for (let index = 0; index < 5; index++) send([server.machine], 2);
    const checkpoint = server.machine.snapshot();
    const receiver = group.add();
    // The partition is recreated and its old store dropped on the server (two more snapshots).
    op += 1;
    const newer = encodeSendPrepare({ namespace: NAMESPACE, incarnation: LIFE + 1, batch: producerBatch(1) });
    const input = { op, operation: PartitionOperation.sendMessages, timestampUs: T0 + op, userId: 1, clientId: 9n, body: newer };
    expect(server.machine.apply(input).errorCode).toBe(0);
    server.machine.snapshot();
    server.machine.snapshot();
    receiver.machine.storeRanges.prepareInstall!(checkpoint);
    expect(group.settle()).toBe(true);
    expect(receiver.machine.storeRanges.installReady).toBe(true);
    expect(receiver.events.find((entry) => entry.event === 'store_backfill_obsolete')?.fields).toEqual({ namespace: NAMESPACE, incarnation: LIFE, peer: 0 });
  });

  it('a replaced store is served while it is kept', () => {
    group = new Group();
    const server = group.add();
    for (let index = 0; index < 5; index++) send([server.machine], 2);
    const checkpoint = server.machine.snapshot();
    const before = batchesOf(server.machine);
    op += 1;
    const newer = encodeSendPrepare({ namespace: NAMESPACE, incarnation: LIFE + 1, batch: producerBatch(1) });
    const input = { op, operation: PartitionOperation.sendMessages, timestampUs: T0 + op, userId: 1, clientId: 9n, body: newer };
    expect(server.machine.apply(input).errorCode).toBe(0);
    const receiver = group.add();
    receiver.machine.storeRanges.prepareInstall!(checkpoint);
    expect(group.settle()).toBe(true);
    expect(receiver.events.some((entry) => entry.event === 'store_backfill_obsolete')).toBe(false);
    receiver.machine.restore(checkpoint);
    expect(batchesOf(receiver.machine)).toEqual(before);
  });

  it('a restart continues a partly staged fetch from where its staging log ends', () => {
    const { receiver, checkpoint } = behindReplica(16, 0);
    receiver.machine.storeRanges.tick();
    group.deliverOne();
    group.deliverOne(); // one answer staged
    const fetched = receiver.machine.backfillProgress().get(NAMESPACE)!.fetched;
    expect(fetched).toBeGreaterThan(0);
    group.queue.length = 0; // the next request is lost with the crash
    const again = group.restart(1);
    again.machine.restore(checkpoint);
    again.machine.storeRanges.tick();
    const request = decodeFrame(kernels, group.queue[0]!.frame);
    expect(request.ok && request.header).toMatchObject({ command: Command.requestStoreRange, fromOffset: fetched });
    expect(group.settle()).toBe(true);
    expect(batchesOf(again.machine)).toEqual(batchesOf(group.nodes[0]!.machine));
  });
});

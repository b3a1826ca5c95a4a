/**
 * A partition group's checkpoint payload: the replica's part (op, clock, writer release, client
 * table) and the group's partitions, each with its next offset and its consumer offsets. The
 * messages are not in it: they are in the partitions' segment stores, flushed before the
 * checkpoint is named (state-machine.ts), so a payload stays small whatever the log holds.
 *
 * Format "VPCK", version 2, little-endian, canonical (one model, one byte string, so replicas at
 * the same op agree on the checkpoint id):
 *
 *   magic(4) version(u8) op(u64) createdAtUs(u64) writerRelease(u32)
 *   clientCount(u32) { slot(u32) clientId(u128) epoch(u64) userId(u32) watermark(u64)
 *                      watermarkChecksum(u128) replyLength(u32) reply }       slots ascending
 *   partitionCount(u32) { namespace(u64) incarnation(u64) nextOffset(u64) firstOffset(u64)
 *                         offsetCount(u32) { kind(u8: 1 consumer, 2 group) id(u32) offset(u64) } }
 *                                           namespaces ascending; offsets by kind, then id
 *
 * Version 1 (still read) has no firstOffset: its partitions were never trimmed (first offset 0).
 *
 * Decoding validates everything a restore relies on (orderings, ranges, a stored offset below its
 * partition's next offset) and refuses with the byte offset of the failing value.
 */
import type { ClientEntrySnapshot } from '../format/snapshot-model.js';
import type { CheckpointCodec, CheckpointDecoded } from '../storage/checkpoint-codec.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import { PACKED_NAMESPACE_MAX } from './namespace.js';
import type { PartitionRecord, PartitionSnapshot, StoredConsumerOffset } from './state-machine.js';

export const PARTITION_CHECKPOINT_MAGIC = new Uint8Array([0x56, 0x50, 0x43, 0x4b]); // "VPCK"
export const PARTITION_CHECKPOINT_VERSION = 2;
/** Every version a decode accepts: 1 lacks the first offset. */
export const PARTITION_CHECKPOINT_VERSIONS_READABLE: readonly number[] = [1, 2];
const CLIENT_FIXED_SIZE = 4 + 16 + 8 + 4 + 8 + 16 + 4;
const PARTITION_FIXED_SIZE_V1 = 8 + 8 + 8 + 4;
const OFFSET_SIZE = 1 + 4 + 8;
const HEAD_SIZE = PARTITION_CHECKPOINT_MAGIC.byteLength + 1 + 8 + 8 + 4;

class Writer {
  private bytes = new Uint8Array(1024);
  private view = new DataView(this.bytes.buffer);
  size = 0;

  private room(count: number): number {
    if (this.size + count > this.bytes.byteLength) {
      const grown = new Uint8Array(Math.max(this.bytes.byteLength * 2, this.size + count));
      grown.set(this.bytes.subarray(0, this.size));
      this.bytes = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.size;
    this.size += count;
    return at;
  }
  u8(value: number): void {
    const at = this.room(1);
    this.view.setUint8(at, value);
  }
  u32(value: number): void {
    const at = this.room(4);
    this.view.setUint32(at, value, true);
  }
  u64(value: number): void {
    const at = this.room(8);
    this.view.setBigUint64(at, BigInt(value), true);
  }
  u128(value: bigint): void {
    const at = this.room(16);
    this.view.setBigUint64(at, value & 0xffff_ffff_ffff_ffffn, true);
    this.view.setBigUint64(at + 8, value >> 64n, true);
  }
  raw(bytes: Uint8Array): void {
    const at = this.room(bytes.byteLength); // may grow `this.bytes`: take it after
    this.bytes.set(bytes, at);
  }
  done(): Uint8Array {
    return this.bytes.slice(0, this.size);
  }
}

class DecodeFailure extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(`partition checkpoint: ${message}`);
    this.offset = offset;
  }
}

class Reader {
  private readonly bytes: Uint8Array;
  private readonly view: DataView;
  offset = 0;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  get remaining(): number {
    return this.bytes.byteLength - this.offset;
  }
  private take(count: number, what: string): number {
    if (count > this.remaining) throw new DecodeFailure(`truncated in ${what}`, this.offset);
    const at = this.offset;
    this.offset += count;
    return at;
  }
  u8(what: string): number {
    return this.view.getUint8(this.take(1, what));
  }
  u32(what: string): number {
    return this.view.getUint32(this.take(4, what), true);
  }
  u64(what: string): number {
    const at = this.take(8, what);
    const value = this.view.getBigUint64(at, true);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new DecodeFailure(`${what} out of range`, at);
    }
    return Number(value);
  }
  u128(what: string): bigint {
    const at = this.take(16, what);
    return this.view.getBigUint64(at, true) | (this.view.getBigUint64(at + 8, true) << 64n);
  }
  raw(count: number, what: string): Uint8Array {
    const at = this.take(count, what);
    return this.bytes.slice(at, at + count);
  }
  /** A count of records of at least `size` bytes each, refused when the bytes cannot hold it. */
  count(size: number, what: string): number {
    const at = this.offset;
    const value = this.u32(what);
    if (value * size > this.remaining) {
      throw new DecodeFailure(`${what} ${value} exceeds the payload`, at);
    }
    return value;
  }
}

function encodeClients(out: Writer, clients: readonly ClientEntrySnapshot[]): void {
  out.u32(clients.length);
  for (const entry of clients) {
    out.u32(entry.slot);
    out.u128(entry.clientId);
    out.u64(entry.epoch);
    out.u32(entry.userId);
    out.u64(entry.watermark);
    out.u128(entry.watermarkChecksum);
    out.u32(entry.reply.byteLength);
    out.raw(entry.reply);
  }
}

function encodePartitions(out: Writer, partitions: readonly PartitionRecord[]): void {
  out.u32(partitions.length);
  for (const record of partitions) {
    out.u64(record.namespace);
    out.u64(record.incarnation);
    out.u64(record.nextOffset);
    out.u64(record.firstOffset);
    out.u32(record.offsets.length);
    for (const entry of record.offsets) {
      out.u8(entry.kind === 'consumer' ? 1 : 2);
      out.u32(entry.id);
      out.u64(entry.offset);
    }
  }
}

export function encodePartitionCheckpoint(model: CheckpointModel<PartitionSnapshot>): Uint8Array {
  const out = new Writer();
  out.raw(PARTITION_CHECKPOINT_MAGIC);
  out.u8(PARTITION_CHECKPOINT_VERSION);
  out.u64(model.op);
  out.u64(model.createdAtUs);
  out.u32(model.writerRelease);
  encodeClients(out, model.clientTable);
  encodePartitions(out, model.machine.partitions);
  return out.done();
}

function decodeClients(input: Reader): ClientEntrySnapshot[] {
  const clients: ClientEntrySnapshot[] = [];
  const count = input.count(CLIENT_FIXED_SIZE, 'client count');
  for (let index = 0; index < count; index += 1) {
    const at = input.offset;
    const slot = input.u32('slot');
    const clientId = input.u128('client id');
    const epoch = input.u64('epoch');
    const userId = input.u32('user id');
    const watermark = input.u64('watermark');
    const watermarkChecksum = input.u128('watermark checksum');
    const reply = input.raw(input.u32('reply length'), 'reply');
    const previous = clients[clients.length - 1];
    if (previous !== undefined && slot <= previous.slot) {
      throw new DecodeFailure(`client slot ${slot} after ${previous.slot}`, at);
    }
    if (clientId === 0n) throw new DecodeFailure('client id 0', at + 4);
    clients.push({ slot, clientId, epoch, userId, watermark, watermarkChecksum, reply });
  }
  return clients;
}

function decodeOffsets(input: Reader, nextOffset: number): StoredConsumerOffset[] {
  const offsets: StoredConsumerOffset[] = [];
  const count = input.count(OFFSET_SIZE, 'offset count');
  for (let index = 0; index < count; index += 1) {
    const at = input.offset;
    const kindCode = input.u8('consumer kind');
    if (kindCode !== 1 && kindCode !== 2) throw new DecodeFailure(`consumer kind ${kindCode}`, at);
    const kind = kindCode === 1 ? 'consumer' : 'group';
    const id = input.u32('consumer id');
    const offset = input.u64('stored offset');
    if (offset >= nextOffset) {
      const message = `stored offset ${offset} at or past next offset ${nextOffset}`;
      throw new DecodeFailure(message, at + 5);
    }
    const previous = offsets[offsets.length - 1];
    const previousCode = previous?.kind === 'consumer' ? 1 : 2;
    const ordered =
      previous === undefined ||
      kindCode > previousCode ||
      (kindCode === previousCode && id > previous.id);
    if (!ordered) {
      throw new DecodeFailure(`consumer offsets out of order at ${kind} ${id}`, at);
    }
    offsets.push({ kind, id, offset });
  }
  return offsets;
}

function decodePartitions(input: Reader, version: number): PartitionRecord[] {
  const partitions: PartitionRecord[] = [];
  const fixed = PARTITION_FIXED_SIZE_V1 + (version >= 2 ? 8 : 0);
  const count = input.count(fixed, 'partition count');
  for (let index = 0; index < count; index += 1) {
    const at = input.offset;
    const namespace = input.u64('namespace');
    if (namespace > PACKED_NAMESPACE_MAX) {
      throw new DecodeFailure(`namespace ${namespace} out of range`, at);
    }
    const previous = partitions[partitions.length - 1];
    if (previous !== undefined && namespace <= previous.namespace) {
      throw new DecodeFailure(`namespace ${namespace} after ${previous.namespace}`, at);
    }
    const incarnation = input.u64('incarnation');
    const nextOffset = input.u64('next offset');
    const firstAt = input.offset;
    const firstOffset = version >= 2 ? input.u64('first offset') : 0;
    if (firstOffset > nextOffset) {
      const message = `first offset ${firstOffset} past next offset ${nextOffset}`;
      throw new DecodeFailure(message, firstAt);
    }
    const offsets = decodeOffsets(input, nextOffset);
    partitions.push({ namespace, incarnation, nextOffset, firstOffset, offsets });
  }
  return partitions;
}

function decodeModel(payload: Uint8Array): CheckpointModel<PartitionSnapshot> {
  const input = new Reader(payload);
  const magic = input.raw(PARTITION_CHECKPOINT_MAGIC.byteLength, 'magic');
  if (!magic.every((byte, index) => byte === PARTITION_CHECKPOINT_MAGIC[index])) {
    throw new DecodeFailure('not a partition checkpoint (magic)', 0);
  }
  const version = input.u8('version');
  if (!PARTITION_CHECKPOINT_VERSIONS_READABLE.includes(version)) {
    throw new DecodeFailure(`version ${version}`, 4);
  }
  const op = input.u64('op');
  const createdAtUs = input.u64('createdAtUs');
  const writerRelease = input.u32('writer release');
  const clientTable = decodeClients(input);
  const partitions = decodePartitions(input, version);
  if (input.remaining !== 0) {
    throw new DecodeFailure(`${input.remaining} trailing bytes`, input.offset);
  }
  return { op, createdAtUs, writerRelease, clientTable, machine: { partitions } };
}

export const PARTITION_CHECKPOINT_CODEC: CheckpointCodec<PartitionSnapshot> = {
  encode: (_kernels, model) => encodePartitionCheckpoint(model),
  formatVersion(payload) {
    if (payload.byteLength < HEAD_SIZE) return null;
    for (let index = 0; index < PARTITION_CHECKPOINT_MAGIC.byteLength; index += 1) {
      if (payload[index] !== PARTITION_CHECKPOINT_MAGIC[index]) return null;
    }
    return payload[PARTITION_CHECKPOINT_MAGIC.byteLength]!;
  },
  versionsReadable: PARTITION_CHECKPOINT_VERSIONS_READABLE,
  decode(payload): CheckpointDecoded<PartitionSnapshot> {
    try {
      return { ok: true, model: decodeModel(payload) };
    } catch (error) {
      if (!(error instanceof DecodeFailure)) throw error;
      return { ok: false, message: error.message, offset: error.offset };
    }
  },
};

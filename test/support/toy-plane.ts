/**
 * A second plane for the VSR core: a toy state machine whose snapshot type is its own (not the
 * metadata snapshot model) and whose checkpoint codec is a little binary format of its own. It
 * answers the same operations as TestStateMachine with the same results, so the simulator's
 * reply checker applies unchanged; everything a checkpoint, a restart or a state transfer carries
 * goes through `ToySnapshot` and `TOY_CHECKPOINT_CODEC`, never through the metadata snapshot.
 *
 * Format ("TOYS", version 1), big-endian: magic(4) version(u8) op(u64) createdAtUs(u64)
 * writerRelease(u32) clientCount(u32) { slot(u32) clientId(u128) epoch(u64) userId(u32)
 * watermark(u64) watermarkChecksum(u128) replyLen(u32) reply } nameCount(u32) { id(u32)
 * createdAtUs(u64) nameLen(u16) name(utf8) }.
 */
import type { ClientEntrySnapshot } from '../../src/format/snapshot-model.js';
import type { CheckpointCodec, CheckpointDecoded } from '../../src/storage/checkpoint-codec.js';
import type { SimPlane } from '../../src/testing/cluster.js';
import {
  TEST_ERROR_INVALID,
  TEST_ERROR_NAME_EXISTS,
  TEST_ERROR_NOT_FOUND,
  TestOperation,
} from '../../src/testing/test-state-machine.js';
import type { ApplyInput, ApplyResult, CheckpointModel, StateMachine } from '../../src/vsr/state-machine.js';

export interface ToyEntry {
  readonly id: number;
  readonly name: string;
  readonly createdAtUs: number;
}

/** The toy machine's snapshot: its names, ids ascending. */
export interface ToySnapshot {
  readonly names: readonly ToyEntry[];
}

export const TOY_MAGIC = new TextEncoder().encode('TOYS');
export const TOY_FORMAT_VERSION = 1;
const NAME_SIZE_MAX = 64;
const NAMES_MAX = 10_000;
const EMPTY = new Uint8Array(0);
const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

export class ToyStateMachine implements StateMachine<ToySnapshot> {
  private names = new Map<number, ToyEntry>();
  /** How many times `restore` ran (boot from a checkpoint, or an install). */
  restores = 0;

  apply(input: ApplyInput): ApplyResult {
    if (input.operation === TestOperation.createStream) return this.create(input);
    if (input.operation === TestOperation.deleteStream) {
      if (input.body.byteLength !== 4) return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
      const id = new DataView(input.body.buffer, input.body.byteOffset, 4).getUint32(0, true);
      if (!this.names.delete(id)) return { errorCode: TEST_ERROR_NOT_FOUND, payload: EMPTY };
      return { errorCode: 0, payload: EMPTY };
    }
    return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
  }

  private create(input: ApplyInput): ApplyResult {
    let name: string;
    try {
      name = decoder.decode(input.body);
    } catch {
      return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
    }
    if (name.length === 0 || input.body.byteLength > NAME_SIZE_MAX || this.names.size >= NAMES_MAX) {
      return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
    }
    for (const entry of this.names.values()) {
      if (entry.name === name) return { errorCode: TEST_ERROR_NAME_EXISTS, payload: EMPTY };
    }
    let id = 0;
    while (this.names.has(id)) id += 1;
    this.names.set(id, { id, name, createdAtUs: input.timestampUs });
    const payload = new Uint8Array(4);
    new DataView(payload.buffer).setUint32(0, id, true);
    return { errorCode: 0, payload };
  }

  onClientRemoved(): void {}

  snapshot(): ToySnapshot {
    return { names: [...this.names.values()].sort((a, b) => a.id - b.id) };
  }

  restore(snapshot: ToySnapshot): void {
    this.names = new Map(snapshot.names.map((entry) => [entry.id, entry]));
    this.restores += 1;
  }

  get nameCount(): number {
    return this.names.size;
  }
}

class Writer {
  private bytes = new Uint8Array(256);
  private view = new DataView(this.bytes.buffer);
  size = 0;

  private room(count: number): void {
    if (this.size + count <= this.bytes.byteLength) return;
    const grown = new Uint8Array(Math.max(this.bytes.byteLength * 2, this.size + count));
    grown.set(this.bytes.subarray(0, this.size));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }
  u8(value: number): void {
    this.room(1);
    this.view.setUint8(this.size, value);
    this.size += 1;
  }
  u16(value: number): void {
    this.room(2);
    this.view.setUint16(this.size, value);
    this.size += 2;
  }
  u32(value: number): void {
    this.room(4);
    this.view.setUint32(this.size, value);
    this.size += 4;
  }
  u64(value: number | bigint): void {
    this.room(8);
    this.view.setBigUint64(this.size, BigInt(value));
    this.size += 8;
  }
  u128(value: bigint): void {
    this.u64(value >> 64n);
    this.u64(value & 0xffff_ffff_ffff_ffffn);
  }
  raw(bytes: Uint8Array): void {
    this.room(bytes.byteLength);
    this.bytes.set(bytes, this.size);
    this.size += bytes.byteLength;
  }
  done(): Uint8Array {
    return this.bytes.slice(0, this.size);
  }
}

class ToyDecodeError extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(message);
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
  private need(count: number, what: string): number {
    if (this.offset + count > this.bytes.byteLength) {
      throw new ToyDecodeError(`toy snapshot truncated in ${what}`, this.offset);
    }
    const at = this.offset;
    this.offset += count;
    return at;
  }
  u8(what: string): number {
    return this.view.getUint8(this.need(1, what));
  }
  u16(what: string): number {
    return this.view.getUint16(this.need(2, what));
  }
  u32(what: string): number {
    return this.view.getUint32(this.need(4, what));
  }
  u64(what: string): number {
    const value = this.view.getBigUint64(this.need(8, what));
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new ToyDecodeError(`toy snapshot ${what} out of range`, this.offset - 8);
    }
    return Number(value);
  }
  u128(what: string): bigint {
    const at = this.need(16, what);
    return (this.view.getBigUint64(at) << 64n) | this.view.getBigUint64(at + 8);
  }
  raw(count: number, what: string): Uint8Array {
    const at = this.need(count, what);
    return this.bytes.slice(at, at + count);
  }
}

function encodeToy(model: CheckpointModel<ToySnapshot>): Uint8Array {
  const out = new Writer();
  out.raw(TOY_MAGIC);
  out.u8(TOY_FORMAT_VERSION);
  out.u64(model.op);
  out.u64(model.createdAtUs);
  out.u32(model.writerRelease);
  out.u32(model.clientTable.length);
  for (const entry of model.clientTable) {
    out.u32(entry.slot);
    out.u128(entry.clientId);
    out.u64(entry.epoch);
    out.u32(entry.userId);
    out.u64(entry.watermark);
    out.u128(entry.watermarkChecksum);
    out.u32(entry.reply.byteLength);
    out.raw(entry.reply);
  }
  out.u32(model.machine.names.length);
  for (const entry of model.machine.names) {
    const name = encoder.encode(entry.name);
    out.u32(entry.id);
    out.u64(entry.createdAtUs);
    out.u16(name.byteLength);
    out.raw(name);
  }
  return out.done();
}

function decodeToy(payload: Uint8Array): CheckpointModel<ToySnapshot> {
  const input = new Reader(payload);
  input.raw(TOY_MAGIC.byteLength + 1, 'header');
  const op = input.u64('op');
  const createdAtUs = input.u64('createdAtUs');
  const writerRelease = input.u32('writerRelease');
  const clientTable: ClientEntrySnapshot[] = [];
  const clientCount = input.u32('client count');
  for (let index = 0; index < clientCount; index++) {
    const slot = input.u32('slot');
    const clientId = input.u128('client id');
    const epoch = input.u64('epoch');
    const userId = input.u32('user id');
    const watermark = input.u64('watermark');
    const watermarkChecksum = input.u128('watermark checksum');
    const reply = input.raw(input.u32('reply length'), 'reply');
    clientTable.push({ slot, clientId, epoch, userId, watermark, watermarkChecksum, reply });
  }
  const names: ToyEntry[] = [];
  const nameCount = input.u32('name count');
  for (let index = 0; index < nameCount; index++) {
    const id = input.u32('id');
    const entryCreatedAtUs = input.u64('name createdAtUs');
    const at = input.offset;
    let name: string;
    try {
      name = decoder.decode(input.raw(input.u16('name length'), 'name'));
    } catch (error) {
      if (error instanceof ToyDecodeError) throw error;
      throw new ToyDecodeError('toy snapshot name is not UTF-8', at);
    }
    names.push({ id, name, createdAtUs: entryCreatedAtUs });
  }
  if (input.offset !== payload.byteLength) {
    throw new ToyDecodeError('toy snapshot has trailing bytes', input.offset);
  }
  return { op, createdAtUs, writerRelease, clientTable, machine: { names } };
}

export const TOY_CHECKPOINT_CODEC: CheckpointCodec<ToySnapshot> = {
  encode: (_kernels, model) => encodeToy(model),
  formatVersion(payload) {
    if (payload.byteLength < TOY_MAGIC.byteLength + 1) return null;
    for (let index = 0; index < TOY_MAGIC.byteLength; index++) {
      if (payload[index] !== TOY_MAGIC[index]) return null;
    }
    return payload[TOY_MAGIC.byteLength]!;
  },
  versionsReadable: [TOY_FORMAT_VERSION],
  decode(payload): CheckpointDecoded<ToySnapshot> {
    try {
      return { ok: true, model: decodeToy(payload) };
    } catch (error) {
      if (!(error instanceof ToyDecodeError)) throw error;
      return { ok: false, message: error.message, offset: error.offset };
    }
  },
};

export const TOY_PLANE: SimPlane<ToySnapshot> = {
  codec: TOY_CHECKPOINT_CODEC,
  stateMachine: () => new ToyStateMachine(),
};

/**
 * The operations a partition group replicates and the bodies their prepares carry. The codes are
 * Iggy's partition-plane operations (iggy-partition-plane.md §11: SendMessages 160,
 * StoreConsumerOffset 161, DeleteConsumerOffset 162); DropPartition (163) and TrimPartition (164)
 * are ours. The bodies are ours too: a partition group multiplexes many partitions
 * (docs/partition-plane.md), so every body starts with the address of the partition it acts on,
 * where Iggy's group id alone names it.
 *
 * Layout, little-endian, fixed (a body is built by this node's admission, never by a client, so
 * any deviation is refused whole rather than guessed at):
 *
 *   address  = namespace u64 | incarnation u64                                   (16 bytes)
 *   send     = address | batch (one Iggy batch, its partition_id stamped, offsets not yet)
 *   store    = address | kind u8 (1 consumer, 2 group) | consumer id u32 | offset u64
 *   delete   = address | kind u8 | consumer id u32
 *   drop     = address
 *   trim     = address | floor u64 (the first offset the partition keeps)
 *
 * The incarnation is the later of the partition's `created_at` and its topic's last purge in
 * committed metadata (the replicated clock of the op that created or purged it). Stream, topic
 * and partition ids are slab ids that a delete frees for reuse, so a namespace alone cannot tell
 * a recreated partition from the one it replaced; the pair can. A send for a newer incarnation
 * replaces the partition's log, one for an older incarnation is refused: nothing sent to a
 * deleted topic can surface in its successor. A drop names an incarnation that committed
 * metadata no longer has (its topic was deleted or purged) and frees its log and offsets. A trim
 * raises the partition's first readable offset (retention: expiry, a size budget, DeleteSegments).
 */
import { BodyReader } from '../metadata/body-io.js';
import { refuse, type Decoded } from './decoded.js';
import { PACKED_NAMESPACE_MAX } from './namespace.js';
import type { ConsumerKey } from './consumer-offsets.js';

export const PartitionOperation = {
  sendMessages: 160,
  storeConsumerOffset: 161,
  deleteConsumerOffset: 162,
  dropPartition: 163,
  trimPartition: 164,
} as const;
export type PartitionOperation = (typeof PartitionOperation)[keyof typeof PartitionOperation];

export const PARTITION_ADDRESS_SIZE = 16;
const STORE_BODY_SIZE = PARTITION_ADDRESS_SIZE + 1 + 4 + 8;
const DELETE_BODY_SIZE = PARTITION_ADDRESS_SIZE + 1 + 4;
const TRIM_BODY_SIZE = PARTITION_ADDRESS_SIZE + 8;

/** Which partition, and which life of it, an operation acts on. */
export interface PartitionAddress {
  readonly namespace: number;
  /** µs: the partition's `created_at` in committed metadata. */
  readonly incarnation: number;
}

export interface SendPrepare extends PartitionAddress {
  readonly batch: Uint8Array;
}

export interface StoreOffsetPrepare extends PartitionAddress {
  readonly consumer: ConsumerKey;
  readonly offset: number;
}

export interface DeleteOffsetPrepare extends PartitionAddress {
  readonly consumer: ConsumerKey;
}

const KIND_CODE = { consumer: 1, group: 2 } as const;

function writeAddress(view: DataView, address: PartitionAddress): void {
  view.setBigUint64(0, BigInt(address.namespace), true);
  view.setBigUint64(8, BigInt(address.incarnation), true);
}

function checkAddress(address: PartitionAddress): void {
  const { namespace, incarnation } = address;
  if (!Number.isSafeInteger(namespace) || namespace < 0 || namespace > PACKED_NAMESPACE_MAX) {
    throw new RangeError(`namespace ${namespace} out of range`);
  }
  if (!Number.isSafeInteger(incarnation) || incarnation < 0) {
    throw new RangeError(`incarnation ${incarnation} out of range`);
  }
}

export function encodeSendPrepare(prepare: SendPrepare): Uint8Array {
  checkAddress(prepare);
  const body = new Uint8Array(PARTITION_ADDRESS_SIZE + prepare.batch.byteLength);
  writeAddress(new DataView(body.buffer), prepare);
  body.set(prepare.batch, PARTITION_ADDRESS_SIZE);
  return body;
}

export function encodeStoreOffsetPrepare(prepare: StoreOffsetPrepare): Uint8Array {
  checkAddress(prepare);
  checkConsumer(prepare.consumer);
  if (!Number.isSafeInteger(prepare.offset) || prepare.offset < 0) {
    throw new RangeError(`offset ${prepare.offset} out of range`);
  }
  const body = new Uint8Array(STORE_BODY_SIZE);
  const view = new DataView(body.buffer);
  writeAddress(view, prepare);
  view.setUint8(16, KIND_CODE[prepare.consumer.kind]);
  view.setUint32(17, prepare.consumer.id, true);
  view.setBigUint64(21, BigInt(prepare.offset), true);
  return body;
}

export function encodeDeleteOffsetPrepare(prepare: DeleteOffsetPrepare): Uint8Array {
  checkAddress(prepare);
  checkConsumer(prepare.consumer);
  const body = new Uint8Array(DELETE_BODY_SIZE);
  const view = new DataView(body.buffer);
  writeAddress(view, prepare);
  view.setUint8(16, KIND_CODE[prepare.consumer.kind]);
  view.setUint32(17, prepare.consumer.id, true);
  return body;
}

export function encodeDropPrepare(address: PartitionAddress): Uint8Array {
  checkAddress(address);
  const body = new Uint8Array(PARTITION_ADDRESS_SIZE);
  writeAddress(new DataView(body.buffer), address);
  return body;
}

/** Retention's floor for one partition: offsets below `floor` are no longer served. */
export interface TrimPrepare extends PartitionAddress {
  readonly floor: number;
}

export function encodeTrimPrepare(prepare: TrimPrepare): Uint8Array {
  checkAddress(prepare);
  if (!Number.isSafeInteger(prepare.floor) || prepare.floor < 0) {
    throw new RangeError(`floor ${prepare.floor} out of range`);
  }
  const body = new Uint8Array(TRIM_BODY_SIZE);
  const view = new DataView(body.buffer);
  writeAddress(view, prepare);
  view.setBigUint64(16, BigInt(prepare.floor), true);
  return body;
}

function checkConsumer(consumer: ConsumerKey): void {
  if (!Number.isInteger(consumer.id) || consumer.id < 0 || consumer.id > 0xffff_ffff) {
    throw new RangeError(`consumer id ${consumer.id} out of range`);
  }
}

function readAddress(reader: BodyReader): PartitionAddress {
  const namespace = reader.u64('namespace');
  const incarnation = reader.u64('incarnation');
  reader.check(namespace <= BigInt(PACKED_NAMESPACE_MAX), `namespace ${namespace} out of range`);
  reader.check(incarnation <= BigInt(Number.MAX_SAFE_INTEGER), 'incarnation out of range');
  return { namespace: Number(namespace), incarnation: Number(incarnation) };
}

function readConsumerKey(reader: BodyReader): ConsumerKey {
  const kind = reader.u8('consumer kind');
  reader.check(kind === 1 || kind === 2, `consumer kind ${kind}`);
  return { kind: kind === 2 ? 'group' : 'consumer', id: reader.u32('consumer id') };
}

function whole<T>(reader: BodyReader, value: T): Decoded<T> {
  const reason = reader.finish();
  return reason === null ? { ok: true, value } : refuse(reason);
}

/** The address and the batch's bytes (a view into `body`); the batch is verified by the caller. */
export function decodeSendPrepare(body: Uint8Array): Decoded<SendPrepare> {
  const reader = new BodyReader(body);
  const address = readAddress(reader);
  if (!reader.ok) return whole(reader, null as never);
  const batch = body.subarray(PARTITION_ADDRESS_SIZE);
  if (batch.byteLength === 0) return refuse('send prepare without a batch');
  return { ok: true, value: { ...address, batch } };
}

export function decodeStoreOffsetPrepare(body: Uint8Array): Decoded<StoreOffsetPrepare> {
  const reader = new BodyReader(body);
  const address = readAddress(reader);
  const consumer = readConsumerKey(reader);
  const offset = reader.u64('offset');
  reader.check(offset <= BigInt(Number.MAX_SAFE_INTEGER), 'offset out of range');
  return whole(reader, { ...address, consumer, offset: Number(offset) });
}

export function decodeDeleteOffsetPrepare(body: Uint8Array): Decoded<DeleteOffsetPrepare> {
  const reader = new BodyReader(body);
  const address = readAddress(reader);
  const consumer = readConsumerKey(reader);
  return whole(reader, { ...address, consumer });
}

export function decodeDropPrepare(body: Uint8Array): Decoded<PartitionAddress> {
  const reader = new BodyReader(body);
  return whole(reader, readAddress(reader));
}

export function decodeTrimPrepare(body: Uint8Array): Decoded<TrimPrepare> {
  const reader = new BodyReader(body);
  const address = readAddress(reader);
  const floor = reader.u64('floor');
  reader.check(floor <= BigInt(Number.MAX_SAFE_INTEGER), 'floor out of range');
  return whole(reader, { ...address, floor: Number(floor) });
}

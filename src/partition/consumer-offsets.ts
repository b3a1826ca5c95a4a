/**
 * Consumer offsets on the wire: StoreConsumerOffset (121, partition operation 161),
 * DeleteConsumerOffset (122, operation 162), GetConsumerOffset (120, NonReplicated) and its reply,
 * and the key an offset is stored under (`core/binary_protocol/src/requests/consumer_offsets/*`,
 * `primitives/ack_level.rs`, `responses/consumer_offsets/get_consumer_offset.rs`,
 * `core/partitions/src/iggy_partition.rs`, cc269ef70; iggy-partition-plane.md §6).
 *
 *   Get:    prefix (src/partition/consumer.ts)
 *   Store:  prefix · offset u64 · ack u8
 *   Delete: prefix · ack u8
 *   ack: 0 NoAck (applied on the primary alone, never replicated), 1 Quorum; nothing else.
 *
 * Get's reply is partition_id u32 · current_offset u64 · stored_offset u64 (20 bytes), or an
 * empty body when no offset is stored (the SDKs read a zero-length success as "none").
 */
import { BodyReader, BodyWriter } from '../metadata/body-io.js';
import { assert } from '../stdx/assert.js';
import { readOffsetAddress, type Consumer, type OffsetAddress } from './consumer.js';
import { fixedLayout, refuse, type Decoded } from './decoded.js';
import { xxh32 } from './xxh32.js';

export const AckLevel = { noAck: 0, quorum: 1 } as const;
export type AckLevelName = 'no_ack' | 'quorum';

export type GetConsumerOffset = OffsetAddress;

export interface StoreConsumerOffset extends OffsetAddress {
  /** As sent; the partition refuses one above its current offset (InvalidOffset). */
  readonly offset: bigint;
  readonly ack: AckLevelName;
}

export interface DeleteConsumerOffset extends OffsetAddress {
  readonly ack: AckLevelName;
}

function readAck(reader: BodyReader): AckLevelName {
  const code = reader.u8('ack');
  reader.check(code === AckLevel.noAck || code === AckLevel.quorum, `ack: ${code}`);
  return code === AckLevel.noAck ? 'no_ack' : 'quorum';
}

export function decodeGetConsumerOffset(body: Uint8Array): Decoded<GetConsumerOffset> {
  const reader = new BodyReader(body);
  return fixedLayout(reader, readOffsetAddress(reader));
}

export function decodeStoreConsumerOffset(body: Uint8Array): Decoded<StoreConsumerOffset> {
  const reader = new BodyReader(body);
  const address = readOffsetAddress(reader);
  const offset = reader.u64('offset');
  return fixedLayout(reader, { ...address, offset, ack: readAck(reader) });
}

export function decodeDeleteConsumerOffset(body: Uint8Array): Decoded<DeleteConsumerOffset> {
  const reader = new BodyReader(body);
  const address = readOffsetAddress(reader);
  return fixedLayout(reader, { ...address, ack: readAck(reader) });
}

export const CONSUMER_OFFSET_REPLY_SIZE = 20;

export interface ConsumerOffsetReply {
  readonly partitionId: number;
  /** The partition's committed offset. */
  readonly currentOffset: number;
  readonly storedOffset: number;
}

/** Get's reply: the 20-byte record, or the empty body that means "no offset stored". */
export function encodeConsumerOffsetReply(reply: ConsumerOffsetReply | null): Uint8Array {
  if (reply === null) return new Uint8Array(0);
  assert(Number.isSafeInteger(reply.currentOffset), 'current offset is an exact integer');
  assert(Number.isSafeInteger(reply.storedOffset), 'stored offset is an exact integer');
  const writer = new BodyWriter();
  writer.u32(reply.partitionId);
  writer.u64(BigInt(reply.currentOffset));
  writer.u64(BigInt(reply.storedOffset));
  const body = writer.finish();
  assert(body.byteLength === CONSUMER_OFFSET_REPLY_SIZE, 'the reply is 20 bytes');
  return body;
}

/** What an offset is stored under, per partition: the consumer's kind and a u32 id. */
export interface ConsumerKey {
  readonly kind: 'consumer' | 'group';
  readonly id: number;
}

const utf8 = new TextEncoder();

/**
 * The key of `consumer`'s offsets. A consumer named by a string is keyed by XXH32 (seed 0) of the
 * name's UTF-8 bytes, so a name and its offsets meet on every replica without a registry. A group
 * is keyed by its numeric id, never by a hash of its name: group ids are never reused, so a
 * recreated group inherits nothing, which a name hash would break. The node resolves a group's
 * name to its id before the request is replicated; a group still named here is refused.
 */
export function consumerKey(consumer: Consumer): Decoded<ConsumerKey> {
  const { kind, id } = consumer;
  if (id.kind === 'id') return { ok: true, value: { kind, id: id.id } };
  if (kind === 'group') {
    return refuse(`consumer group "${id.name}" must be resolved to its numeric id`);
  }
  return { ok: true, value: { kind, id: xxh32(utf8.encode(id.name)) } };
}

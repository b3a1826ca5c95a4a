/**
 * The fields that poll and consumer-offset requests share
 * (`core/binary_protocol/src/primitives/consumer.rs`, `requests/consumer_offsets/*`, cc269ef70;
 * iggy-partition-plane.md §5.1, §6.1):
 *
 *   consumer kind u8 (1 consumer, 2 group) · consumer id identifier · stream_id identifier ·
 *   topic_id identifier · partition_flag u8 (1 = a partition id follows) · partition_id u32
 *
 * The partition id is always on the wire, 0 when the flag says none. Iggy reads any flag other
 * than 1 as none; we accept only 0 and 1, and a zero id with 0, because every SDK encoder writes
 * exactly that and one meaning then has one encoding. As in Iggy (`WireDecode::decode_from`),
 * bytes after the last field are ignored: that is what lets a newer SDK append a field an older
 * server does not read.
 */
import type { BodyReader } from '../metadata/body-io.js';
import type { Identifier } from '../metadata/operations.js';

export const ConsumerKind = { consumer: 1, group: 2 } as const;

export interface Consumer {
  readonly kind: 'consumer' | 'group';
  readonly id: Identifier;
}

/** The prefix of every poll and consumer-offset request. */
export interface OffsetAddress {
  readonly consumer: Consumer;
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  /** null when the request names no partition (reads then default to partition 0). */
  readonly partitionId: number | null;
}

export function readConsumer(reader: BodyReader): Consumer {
  const kind = reader.u8('consumer_kind');
  const group = kind === ConsumerKind.group;
  reader.check(group || kind === ConsumerKind.consumer, `consumer_kind: ${kind}`);
  return { kind: group ? 'group' : 'consumer', id: reader.identifier('consumer_id') };
}

/** partition_flag u8 then partition_id u32. */
export function readPartitionOption(reader: BodyReader): number | null {
  const present = reader.flags('partition_flag', 1) === 1;
  const partitionId = reader.u32('partition_id');
  reader.zeroUnless(present, partitionId, 'partition_id');
  return present ? partitionId : null;
}

export function readOffsetAddress(reader: BodyReader): OffsetAddress {
  const consumer = readConsumer(reader);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return { consumer, streamId, topicId, partitionId: readPartitionOption(reader) };
}

/**
 * A partition's namespace: the packed `(stream, topic, partition)` address Iggy uses as the
 * partition's VSR group id on every frame (`core/binary_protocol/src/namespace.rs`,
 * `core/server_common/src/sharding/namespace.rs`, cc269ef70; iggy-partition-plane.md §1.1):
 *
 *   namespace = stream << 32 | topic << 20 | partition
 *
 * with 20 bits of stream, 12 of topic and 20 of partition (52 bits in all). The components are
 * metadata slab ids, so 0 is a valid id of each. A component at or above its maximum is refused,
 * never masked: masking would alias two partitions onto one group, one directory and one
 * authorization scope. The partition maximum (1,000,000) is not a power of two, so the check is
 * against the maximum, not the field's mask.
 *
 * 52 bits fit a JS number exactly (below 2^53), so a namespace is held as a number and built with
 * multiplication, never with the 32-bit `<<`.
 */
import { assert } from '../stdx/assert.js';
import { refuse, type Decoded } from './decoded.js';
import { xxh32 } from './xxh32.js';

export const STREAM_BITS = 20;
export const TOPIC_BITS = 12;
export const PARTITION_BITS = 20;
export const PARTITION_SHIFT = 0;
export const TOPIC_SHIFT = PARTITION_SHIFT + PARTITION_BITS;
export const STREAM_SHIFT = TOPIC_SHIFT + TOPIC_BITS;

/** Exclusive bounds of each component (Iggy's MAX_STREAMS, MAX_TOPICS, MAX_PARTITIONS). */
export const STREAMS_MAX = 1 << STREAM_BITS;
export const TOPICS_MAX = 1 << TOPIC_BITS;
export const PARTITIONS_MAX = 1_000_000;

export const PACKED_NAMESPACE_BITS = STREAM_BITS + TOPIC_BITS + PARTITION_BITS;
export const PACKED_NAMESPACE_MAX = 2 ** PACKED_NAMESPACE_BITS - 1;
/** The metadata group's id, above every packed namespace so the two can never collide. */
export const METADATA_GROUP = 1n << 63n;

const TOPIC_FACTOR = 2 ** TOPIC_SHIFT;
const STREAM_FACTOR = 2 ** STREAM_SHIFT;

assert(PARTITIONS_MAX <= 2 ** PARTITION_BITS, 'partition ids fit their field');
assert(PACKED_NAMESPACE_MAX <= Number.MAX_SAFE_INTEGER, 'a namespace is an exact number');
assert(METADATA_GROUP > BigInt(PACKED_NAMESPACE_MAX), 'the metadata group is no namespace');
assert(1n << 62n > BigInt(PACKED_NAMESPACE_MAX), 'a partition group id is no namespace');

export interface NamespaceParts {
  readonly streamId: number;
  readonly topicId: number;
  readonly partitionId: number;
}

function inRange(value: number, max: number): boolean {
  return Number.isInteger(value) && value >= 0 && value < max;
}

/** Packs a committed address, or says which component is out of range. */
export function packNamespace(parts: NamespaceParts): Decoded<number> {
  const { streamId, topicId, partitionId } = parts;
  if (!inRange(streamId, STREAMS_MAX)) return refuse(`stream id ${streamId} out of range`);
  if (!inRange(topicId, TOPICS_MAX)) return refuse(`topic id ${topicId} out of range`);
  if (!inRange(partitionId, PARTITIONS_MAX)) {
    return refuse(`partition id ${partitionId} out of range`);
  }
  const value = streamId * STREAM_FACTOR + topicId * TOPIC_FACTOR + partitionId;
  assert(value <= PACKED_NAMESPACE_MAX, 'packed namespace within its bits');
  return { ok: true, value };
}

/**
 * The address of a frame's `group` field (a u64 off the wire). Refuses the metadata group, any
 * bit above the packed range and a partition field at or above PARTITIONS_MAX, which `pack`
 * could never have produced.
 */
export function unpackNamespace(group: bigint): Decoded<NamespaceParts> {
  if (group < 0n || group > BigInt(PACKED_NAMESPACE_MAX)) {
    return refuse(`group ${group} is not a partition namespace`);
  }
  const value = Number(group);
  const partitionId = value % TOPIC_FACTOR;
  const topicId = Math.floor(value / TOPIC_FACTOR) % TOPICS_MAX;
  const streamId = Math.floor(value / STREAM_FACTOR);
  if (partitionId >= PARTITIONS_MAX) return refuse(`partition id ${partitionId} out of range`);
  return { ok: true, value: { streamId, topicId, partitionId } };
}

/** The namespace as the 8 little-endian bytes of its u64, as Iggy's hashers are fed it. */
export function namespaceBytes(namespace: number): Uint8Array {
  assert(inRange(namespace, PACKED_NAMESPACE_MAX + 1), 'namespace within the packed range');
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(namespace), true);
  return bytes;
}

/**
 * The consensus group id of partition group `index` (0..G-1) on every frame it sends: above
 * every packed namespace and below the metadata group, so no two kinds of group id collide.
 */
export const PARTITION_GROUP_BASE = 1n << 62n;

export function partitionGroupId(index: number): bigint {
  assert(Number.isInteger(index) && index >= 0 && index <= 0xffff_ffff, 'group index is a u32');
  return PARTITION_GROUP_BASE + BigInt(index);
}

/** The index of a partition group id, or null for any other group id. */
export function partitionGroupIndex(group: bigint): number | null {
  const index = group - PARTITION_GROUP_BASE;
  return index >= 0n && index <= 0xffff_ffffn ? Number(index) : null;
}

/**
 * The partition group that carries `namespace` when the cluster runs `groups` partition groups
 * (docs/partition-plane.md): XXH32 (seed 0) of the namespace's 8 little-endian bytes, mod G. A
 * pure function of committed metadata, so every replica agrees without coordination. A hash,
 * not `namespace mod G`: for G a power of two up to 2^20 the stream and topic bits vanish mod G,
 * and partition 0 of every topic would share group 0.
 */
export function partitionGroupOf(namespace: number, groups: number): number {
  assert(Number.isInteger(groups) && groups >= 1 && groups <= 0xffff_ffff, 'groups is 1..u32');
  return xxh32(namespaceBytes(namespace)) % groups;
}

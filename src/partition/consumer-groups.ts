/**
 * Consumer groups on the data plane, and FlushUnsavedBuffer
 * (`core/binary_protocol/src/requests/consumer_groups/sync_consumer_group.rs`,
 * `responses/consumer_groups/sync_consumer_group.rs`,
 * `requests/messages/flush_unsaved_buffer.rs`, cc269ef70; iggy-partition-plane.md §7, §11).
 *
 *   SyncConsumerGroup (606) request: stream_id · topic_id · group_id (identifiers).
 *   Reply: generation u64 · count u32 · partition_id u32 × count, or an empty body when the
 *   caller is not a member of the group.
 *   FlushUnsavedBuffer (102) request: stream_id · topic_id · partition_id u32 · fsync u8.
 *
 * Membership itself (join, leave, rebalancing) is metadata and lives in src/metadata; SDKs sync
 * to learn which partitions to poll, since the server never picks a partition for a group poll.
 */
import { BodyReader, BodyWriter } from '../metadata/body-io.js';
import type { Identifier } from '../metadata/operations.js';
import { assert } from '../stdx/assert.js';
import { fixedLayout, type Decoded } from './decoded.js';
import { PARTITIONS_MAX } from './namespace.js';

export interface SyncConsumerGroup {
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly groupId: Identifier;
}

export function decodeSyncConsumerGroup(body: Uint8Array): Decoded<SyncConsumerGroup> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  return fixedLayout(reader, { streamId, topicId, groupId: reader.identifier('group_id') });
}

export interface GroupAssignment {
  /** Bumped by every rebalance: an SDK holding an older one must re-sync. */
  readonly generation: number;
  /** The member's partitions in the topic. */
  readonly partitionIds: readonly number[];
}

/** The sync reply: the member's assignment, or the empty body for a caller that is no member. */
export function encodeSyncConsumerGroupReply(assignment: GroupAssignment | null): Uint8Array {
  if (assignment === null) return new Uint8Array(0);
  const { generation, partitionIds } = assignment;
  assert(Number.isSafeInteger(generation) && generation >= 0, 'generation is a count');
  // A member holds partitions of one topic, so never more than a topic can have.
  assert(partitionIds.length <= PARTITIONS_MAX, 'assignment within the partition bound');
  const writer = new BodyWriter();
  writer.u64(BigInt(generation));
  writer.u32(partitionIds.length);
  for (const partitionId of partitionIds) {
    assert(partitionId < PARTITIONS_MAX, 'a partition id of the namespace');
    writer.u32(partitionId);
  }
  return writer.finish();
}

export interface FlushUnsavedBuffer {
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly partitionId: number;
  readonly fsync: boolean;
}

/**
 * Decoded so a flush is validated and logged like any other request, though Iggy answers every
 * one FeatureUnavailable. Here an acknowledged batch is already fsynced on a quorum
 * (docs/partition-plane.md), so a flush would have nothing left to make durable.
 */
export function decodeFlushUnsavedBuffer(body: Uint8Array): Decoded<FlushUnsavedBuffer> {
  const reader = new BodyReader(body);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  const partitionId = reader.u32('partition_id');
  const fsync = reader.flags('fsync', 1) === 1;
  return fixedLayout(reader, { streamId, topicId, partitionId, fsync });
}

/**
 * The success payloads of the create operations: Iggy's binary response for the created object
 * (what apache/iggy's state machine returns at apply, so an official SDK decodes a create's reply
 * as it does a get). Built from the committed state and the prepare's timestamp only, never from
 * the stats registry (data-plane counters are not replicated): a new object reports zero counters
 * on every replica, so every replica caches the same reply bytes.
 *
 * Every one of these starts with the new object's id as a u32 (`createdIdOf` reads it back).
 */
import type { ApplyResult } from '../vsr/state-machine.js';
import {
  encodeConsumerGroupDetails,
  encodeStreamDetails,
  encodeTopicDetails,
  encodeUserDetails,
} from './binary-responses.js';
import { ErrorCode } from './errors.js';
import { PARTITION_SEGMENTS_MIN, type PartitionView } from './queries.js';
import type { GroupState, StreamState, TopicState, UserState } from './state.js';

function ok(payload: Uint8Array): ApplyResult {
  return { errorCode: ErrorCode.ok, payload };
}

export function createdStreamReply(stream: StreamState): ApplyResult {
  return ok(
    encodeStreamDetails({
      id: stream.id,
      name: stream.name,
      createdAtUs: stream.createdAtUs,
      topicsCount: 0,
      sizeBytes: 0,
      messagesCount: 0,
      topics: [],
    }),
  );
}

/** A new topic's partitions as the reply lists them. */
function partitionViews(topic: TopicState): PartitionView[] {
  const views: PartitionView[] = [];
  topic.partitions.forEach((id, createdAtUs) => {
    // A new partition has its one empty segment, as the topic reads show it (queries.ts).
    views.push({
      id,
      createdAtUs,
      segmentsCount: PARTITION_SEGMENTS_MIN,
      currentOffset: 0,
      sizeBytes: 0,
      messagesCount: 0,
    });
  });
  return views;
}

export function createdTopicReply(topic: TopicState): ApplyResult {
  return ok(
    encodeTopicDetails({
      id: topic.id,
      name: topic.name,
      createdAtUs: topic.createdAtUs,
      messageExpiryUs: topic.messageExpiryUs,
      compressionAlgorithm: topic.compressionAlgorithm,
      maxTopicSizeBytes: topic.maxTopicSizeBytes,
      replicationFactor: topic.replicationFactor,
      partitionsCount: topic.partitions.count,
      sizeBytes: 0,
      messagesCount: 0,
      options: topic.options,
      partitions: partitionViews(topic),
    }),
  );
}

export function createdGroupReply(topic: TopicState, group: GroupState): ApplyResult {
  return ok(
    encodeConsumerGroupDetails({
      id: group.id,
      name: group.name,
      partitionsCount: topic.partitions.count,
      membersCount: 0,
      generation: group.generation,
      members: [],
    }),
  );
}

export function createdUserReply(user: UserState): ApplyResult {
  return ok(
    encodeUserDetails({
      id: user.id,
      username: user.username,
      status: user.status,
      createdAtUs: user.createdAtUs,
      permissions: user.permissions,
    }),
  );
}

/** The id a create's success payload starts with (u32 LE); null when it is too short. */
export function createdIdOf(payload: Uint8Array): number | null {
  if (payload.byteLength < 4) return null;
  return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true);
}

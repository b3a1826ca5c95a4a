/**
 * Streams, topics, partitions and segments.
 *
 * Check order follows Iggy (so clients see the same error for the same request): request-shape
 * rules first (Iggy validates at ingress), then the target is resolved (a miss is its not-found
 * code), then permissions (Iggy's in-apply gate runs after resolution), then state-dependent rules
 * (duplicate names, limits). Ids are the lowest free (id-slab.ts); partitions are dense and grow
 * and shrink at the top, as in Iggy.
 */
import type { ApplyResult } from '../vsr/state-machine.js';
import { rebalance } from './consumer-groups.js';
import {
  validateCompression,
  validateMaxTopicSize,
  validateMessageExpiry,
  validateReplicationFactor,
  validateTopicSettings,
} from './defaults.js';
import { ErrorCode } from './errors.js';
import {
  MIN_TOPIC_SEGMENT_SIZE,
  TopicOptionKey,
  topicSegmentSizeBytes,
  validateTopicOptionEntries,
  withExplicitFields,
} from './options.js';
import { createdStreamReply, createdTopicReply } from './create-replies.js';
import { OK, firstError, rejected, type OpContext } from './op-context.js';
import type {
  Identifier,
  CreatePartitionsRequest,
  CreateStreamRequest,
  CreateTopicRequest,
  DeletePartitionsRequest,
  DeleteSegmentsRequest,
  DeleteStreamRequest,
  DeleteTopicRequest,
  PurgeStreamRequest,
  PurgeTopicRequest,
  UpdateStreamRequest,
  UpdateTopicRequest,
} from './operations.js';
import {
  canCreateStream,
  canCreateTopic,
  canManageStream,
  canManageTopic,
  withoutStream,
  withoutTopic,
} from './permissions.js';
import type { CompressionAlgorithm } from '../format/snapshot-model.js';
import {
  resolveStream,
  resolveTopic,
  type MetadataState,
  type StreamState,
  type TopicState,
} from './state.js';
import {
  validatePartitionsChangeCount,
  validateStreamName,
  validateTopicName,
  validateTopicPartitionsCount,
} from './validation.js';

export function createStream(ctx: OpContext, request: CreateStreamRequest): ApplyResult {
  const invalid = validateStreamName(request.name);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  if (!canCreateStream(ctx.actor)) return rejected(ErrorCode.unauthorized);
  const { state } = ctx;
  if (state.streamIndex.has(request.name)) return rejected(ErrorCode.streamNameAlreadyExists);
  if (state.streams.isFull()) return rejected(ErrorCode.tooManyStreams);
  if (!ctx.commit) return OK;
  const stream = state.streams.insert((id) => ({
    id,
    name: request.name,
    createdAtUs: ctx.timestampUs,
    topics: state.newTopicSlab(),
    topicIndex: new Map(),
  }));
  state.streamIndex.set(stream.name, stream.id);
  return createdStreamReply(stream);
}

export function updateStream(ctx: OpContext, request: UpdateStreamRequest): ApplyResult {
  const invalid = validateStreamName(request.name);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const { state } = ctx;
  const stream = resolveStream(state, request.streamId);
  if (stream === undefined) return rejected(ErrorCode.streamIdNotFound);
  if (!canManageStream(ctx.actor, stream.id)) return rejected(ErrorCode.unauthorized);
  const holder = state.streamIndex.get(request.name);
  if (holder !== undefined && holder !== stream.id) {
    return rejected(ErrorCode.streamNameAlreadyExists);
  }
  if (!ctx.commit) return OK;
  state.streamIndex.delete(stream.name);
  stream.name = request.name;
  state.streamIndex.set(stream.name, stream.id);
  return OK;
}

export function deleteStream(ctx: OpContext, request: DeleteStreamRequest): ApplyResult {
  const { state } = ctx;
  const stream = resolveStream(state, request.streamId);
  if (stream === undefined) return rejected(ErrorCode.streamIdNotFound);
  if (!canManageStream(ctx.actor, stream.id)) return rejected(ErrorCode.unauthorized);
  if (!ctx.commit) return OK;
  state.clientGroups.forgetStream(stream);
  state.streams.remove(stream.id);
  state.streamIndex.delete(stream.name);
  ctx.stats.removeStream(stream);
  for (const user of state.users.values()) {
    if (user.permissions !== null) user.permissions = withoutStream(user.permissions, stream.id);
  }
  return OK;
}

export function purgeStream(ctx: OpContext, request: PurgeStreamRequest): ApplyResult {
  const stream = resolveStream(ctx.state, request.streamId);
  if (stream === undefined) return rejected(ErrorCode.streamIdNotFound);
  if (!canManageStream(ctx.actor, stream.id)) return rejected(ErrorCode.unauthorized);
  if (!ctx.commit) return OK;
  // Purge keeps the shape (topics, partitions, groups) and drops the data: in the metadata plane
  // that is the counters, zeroed once per purge op.
  for (const topic of stream.topics.values()) purgeCounters(ctx, stream, topic);
  return OK;
}

function purgeCounters(ctx: OpContext, stream: StreamState, topic: TopicState): void {
  // Commit timestamps increase strictly, so this is later than every partition's creation: each
  // partition's log incarnation moves to it, and the data plane starts each one over, empty.
  topic.purgedAtUs = ctx.timestampUs;
  topic.partitions.forEach((id, createdAtUs) =>
    ctx.stats.purgePartition(stream, topic, { id, createdAtUs }, ctx.op),
  );
}

export interface ResolvedTopic {
  readonly stream: StreamState;
  readonly topic: TopicState;
}

export interface TopicAddress {
  readonly streamId: Identifier;
  readonly topicId: Identifier;
}

/** Resolves stream then topic, or the not-found code of the level that missed. */
export function resolveStreamTopic(
  state: MetadataState,
  address: TopicAddress,
): ResolvedTopic | ErrorCode {
  const stream = resolveStream(state, address.streamId);
  if (stream === undefined) return ErrorCode.streamIdNotFound;
  const topic = resolveTopic(stream, address.topicId);
  if (topic === undefined) return ErrorCode.topicIdNotFound;
  return { stream, topic };
}

/** Resolves the topic and checks `canManageTopic`. */
function managedTopic(ctx: OpContext, address: TopicAddress): ResolvedTopic | ErrorCode {
  const resolved = resolveStreamTopic(ctx.state, address);
  if (typeof resolved === 'number') return resolved;
  if (!canManageTopic(ctx.actor, resolved.stream.id, resolved.topic.id)) {
    return ErrorCode.unauthorized;
  }
  return resolved;
}

export function createTopic(ctx: OpContext, request: CreateTopicRequest): ApplyResult {
  const invalid = firstError(
    validateTopicName(request.name),
    validateTopicPartitionsCount(request.partitionsCount),
    validateTopicOptionEntries(request.options, request.partitionsCount),
    validateTopicSettings(request, topicSegmentSizeBytes(request.options)),
  );
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const stream = resolveStream(ctx.state, request.streamId);
  if (stream === undefined) return rejected(ErrorCode.streamIdNotFound);
  if (!canCreateTopic(ctx.actor, stream.id)) return rejected(ErrorCode.unauthorized);
  if (stream.topicIndex.has(request.name)) return rejected(ErrorCode.topicNameAlreadyExists);
  if (stream.topics.isFull()) return rejected(ErrorCode.tooManyTopics);
  if (request.partitionsCount > ctx.state.limits.partitionsPerTopicMax) {
    return rejected(ErrorCode.partitionIdSpaceExhausted);
  }
  if (!ctx.commit) return OK;
  const topic = stream.topics.insert((id) => ({
    id,
    name: request.name,
    createdAtUs: ctx.timestampUs,
    messageExpiryUs: request.messageExpiryUs,
    compressionAlgorithm: request.compressionAlgorithm as CompressionAlgorithm,
    maxTopicSizeBytes: request.maxTopicSizeBytes,
    replicationFactor: request.replicationFactor,
    options: Object.freeze(
      request.options.map((entry) => Object.freeze({ key: entry.key, value: entry.value })),
    ),
    partitions: ctx.state.newPartitionStore(),
    groups: ctx.state.newGroupSlab(),
    groupIndex: new Map(),
    purgedAtUs: 0,
  }));
  topic.partitions.append(request.partitionsCount, ctx.timestampUs);
  stream.topicIndex.set(topic.name, topic.id);
  return createdTopicReply(topic);
}

/** The option keys an update sets (each becomes explicit). */
function updatedOptionKeys(request: UpdateTopicRequest): string[] {
  const keys: string[] = [];
  if (request.compressionAlgorithm !== null) keys.push(TopicOptionKey.compressionAlgorithm);
  if (request.messageExpiryUs !== null) keys.push(TopicOptionKey.messageExpiry);
  if (request.maxTopicSizeBytes !== null) keys.push(TopicOptionKey.maxTopicSize);
  return keys;
}

export function updateTopic(ctx: OpContext, request: UpdateTopicRequest): ApplyResult {
  const invalid = firstError(
    validateTopicName(request.name),
    request.compressionAlgorithm === null
      ? ErrorCode.ok
      : validateCompression(request.compressionAlgorithm),
    request.messageExpiryUs === null
      ? ErrorCode.ok
      : validateMessageExpiry(request.messageExpiryUs),
    // Shape only here; the floor is the resolved topic's segment size, below.
    request.maxTopicSizeBytes === null
      ? ErrorCode.ok
      : validateMaxTopicSize(request.maxTopicSizeBytes, MIN_TOPIC_SEGMENT_SIZE),
    request.replicationFactor === null
      ? ErrorCode.ok
      : validateReplicationFactor(request.replicationFactor),
  );
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { stream, topic } = resolved;
  // The cap's floor is this topic's own segment size (create-only, so it cannot move under it).
  if (request.maxTopicSizeBytes !== null) {
    const segmentSizeBytes = topicSegmentSizeBytes(topic.options);
    const floor = validateMaxTopicSize(request.maxTopicSizeBytes, segmentSizeBytes);
    if (floor !== ErrorCode.ok) return rejected(floor);
  }
  const holder = stream.topicIndex.get(request.name);
  if (holder !== undefined && holder !== topic.id) {
    return rejected(ErrorCode.topicNameAlreadyExists);
  }
  if (!ctx.commit) return OK;
  stream.topicIndex.delete(topic.name);
  topic.name = request.name;
  stream.topicIndex.set(topic.name, topic.id);
  // Absent settings keep their value: a rename alone must not reset the topic's retention.
  if (request.compressionAlgorithm !== null) {
    topic.compressionAlgorithm = request.compressionAlgorithm as CompressionAlgorithm;
  }
  if (request.messageExpiryUs !== null) topic.messageExpiryUs = request.messageExpiryUs;
  if (request.maxTopicSizeBytes !== null) topic.maxTopicSizeBytes = request.maxTopicSizeBytes;
  topic.options = withExplicitFields(topic.options, updatedOptionKeys(request));
  if (request.replicationFactor !== null) topic.replicationFactor = request.replicationFactor;
  return OK;
}

export function deleteTopic(ctx: OpContext, request: DeleteTopicRequest): ApplyResult {
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  if (!ctx.commit) return OK;
  const { stream, topic } = resolved;
  ctx.state.clientGroups.forgetTopic(stream, topic.id);
  stream.topics.remove(topic.id);
  stream.topicIndex.delete(topic.name);
  ctx.stats.removeTopic(stream, topic);
  for (const user of ctx.state.users.values()) {
    if (user.permissions === null) continue;
    user.permissions = withoutTopic(user.permissions, stream.id, topic.id);
  }
  return OK;
}

export function purgeTopic(ctx: OpContext, request: PurgeTopicRequest): ApplyResult {
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  if (!ctx.commit) return OK;
  purgeCounters(ctx, resolved.stream, resolved.topic);
  return OK;
}

/** Every group sees the new partition set at once, each with a new generation (Iggy's
 * `rebalance_consumer_groups` on repartition). */
function rebalanceGroups(topic: TopicState): void {
  for (const group of topic.groups.values()) rebalance(group, topic.partitions.count);
}

export function createPartitions(ctx: OpContext, request: CreatePartitionsRequest): ApplyResult {
  const invalid = validatePartitionsChangeCount(request.partitionsCount);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { topic } = resolved;
  if (topic.partitions.count + request.partitionsCount > ctx.state.limits.partitionsPerTopicMax) {
    return rejected(ErrorCode.partitionIdSpaceExhausted);
  }
  if (!ctx.commit) return OK;
  topic.partitions.append(request.partitionsCount, ctx.timestampUs);
  rebalanceGroups(topic);
  return OK;
}

export function deletePartitions(ctx: OpContext, request: DeletePartitionsRequest): ApplyResult {
  const invalid = validatePartitionsChangeCount(request.partitionsCount);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { stream, topic } = resolved;
  if (request.partitionsCount > topic.partitions.count) {
    return rejected(ErrorCode.invalidPartitionsCount);
  }
  if (!ctx.commit) return OK;
  // The highest ids go, so the remaining ids stay dense (Iggy truncates the partition list).
  const kept = topic.partitions.count - request.partitionsCount;
  for (let id = kept; id < topic.partitions.count; id++) {
    ctx.stats.removePartition(stream, topic, topic.partitions.ref(id)!);
  }
  topic.partitions.truncate(kept);
  rebalanceGroups(topic);
  return OK;
}

/**
 * The metadata plane only validates and authorizes: which segments go is decided by the data
 * plane that owns the partition (Iggy resolves the count to an offset on the owning shard), and
 * its counters move through the stats registry like any other data-plane change.
 */
export function deleteSegments(ctx: OpContext, request: DeleteSegmentsRequest): ApplyResult {
  const resolved = managedTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  if (request.partitionId >= resolved.topic.partitions.count) {
    return rejected(ErrorCode.partitionNotFound);
  }
  return OK;
}

/**
 * Path identifiers (id or name) resolved to numeric ids, for permission checks that take ids.
 *
 * One `queries.stream()` call resolves both levels: it yields the stream id and every topic's id
 * and name, in O(topics of that stream), without building any topic's partition list.
 */
import type { Identifier } from '../../metadata/operations.js';
import type { MetadataQueries } from '../../metadata/queries.js';

export interface TopicIds {
  readonly streamId: number;
  readonly topicId: number;
}

export function resolveTopicIds(queries: MetadataQueries, streamId: Identifier, topicId: Identifier): TopicIds | null {
  const stream = queries.stream(streamId);
  if (stream === null) return null;
  const topic = stream.topics.find((candidate) => (topicId.kind === 'id' ? candidate.id === topicId.id : candidate.name === topicId.name));
  return topic === undefined ? null : { streamId: stream.id, topicId: topic.id };
}

/**
 * Read-side views for the HTTP layer (iggy-http-api-and-ops.md §1.3 shapes, camelCase here; the
 * HTTP layer renders snake_case JSON). Views are fresh plain objects: a caller can keep one across
 * later applies without seeing it change, and cannot reach into the state through it.
 *
 * Counters come from the stats registry and are read without creating entries (a resource the
 * data plane never touched reads as zeros).
 */
import type { TopicOptionEntry } from './options.js';
import { memberOf } from './consumer-groups.js';
import type { Identifier } from './operations.js';
import type { PermissionsSnapshot, TopicSnapshot, UserStatus } from '../format/snapshot-model.js';
import {
  resolveGroup,
  resolveStream,
  resolveTopic,
  resolveUser,
  type GroupState,
  type MetadataState,
  type StreamState,
  type TopicState,
  type UserState,
} from './state.js';
import type { StatsRegistry } from './stats-registry.js';

export interface StreamView {
  readonly id: number;
  readonly name: string;
  readonly createdAtUs: number;
  readonly topicsCount: number;
  readonly sizeBytes: number;
  readonly messagesCount: number;
}
export interface StreamDetailsView extends StreamView {
  readonly topics: readonly TopicView[];
}
/** A topic's stored fields as the snapshot model names them, plus what reads derive. */
export interface TopicView
  extends Pick<
    TopicSnapshot,
    | 'id'
    | 'name'
    | 'createdAtUs'
    | 'messageExpiryUs'
    | 'compressionAlgorithm'
    | 'maxTopicSizeBytes'
    | 'replicationFactor'
  > {
  readonly partitionsCount: number;
  readonly sizeBytes: number;
  readonly messagesCount: number;
  /** Explicit catalog options, ascending by key (options.ts `resolveTopicOptions` renders all). */
  readonly options: readonly TopicOptionEntry[];
}
export interface TopicDetailsView extends TopicView {
  readonly partitions: readonly PartitionView[];
}
export type TopicAddressView =
  | { readonly found: false; readonly missing: 'stream' | 'topic' }
  | {
      readonly found: true;
      readonly streamId: number;
      readonly topicId: number;
      readonly partitionsCount: number;
      /** Iggy's topic settings, as stored: 0 and u64::MAX mean none. */
      readonly messageExpiryUs: bigint;
      readonly maxTopicSizeBytes: bigint;
      /**
       * The partition's incarnation: the later of its `created_at` and the topic's last purge
       * (µs), or null when the topic has no such partition.
       */
      readonly incarnationOf: (partitionId: number) => number | null;
    };

export interface PartitionView {
  readonly id: number;
  readonly createdAtUs: number;
  readonly segmentsCount: number;
  readonly currentOffset: number;
  readonly sizeBytes: number;
  readonly messagesCount: number;
}
export interface ConsumerGroupView {
  readonly id: number;
  readonly name: string;
  readonly partitionsCount: number;
  readonly membersCount: number;
}
export interface ConsumerGroupMemberView {
  readonly id: number;
  readonly clientId: bigint;
  readonly partitionsCount: number;
  readonly partitions: readonly number[];
}
export interface ConsumerGroupDetailsView extends ConsumerGroupView {
  readonly generation: number;
  readonly members: readonly ConsumerGroupMemberView[];
}
export interface UserView {
  readonly id: number;
  readonly username: string;
  readonly status: UserStatus;
  readonly createdAtUs: number;
}
export interface UserDetailsView extends UserView {
  readonly permissions: PermissionsSnapshot | null;
}
export interface PersonalAccessTokenView {
  readonly name: string;
  readonly expiryAtUs: number | null;
}
/** The metadata part of Iggy's `Stats`. */
export interface MetadataStatsView {
  readonly streamsCount: number;
  readonly topicsCount: number;
  readonly partitionsCount: number;
  readonly segmentsCount: number;
  readonly messagesCount: number;
  readonly messagesSizeBytes: number;
  readonly consumerGroupsCount: number;
}

const ZERO = { sizeBytes: 0, messagesCount: 0, segmentsCount: 0, currentOffset: 0 } as const;

/**
 * Segments a partition reports at least: Iggy creates every partition with one empty (active)
 * segment, never deletes the active one (DeleteSegments removes sealed segments only) and resets
 * a purged partition to one empty segment. The stats registry counts what a data plane reported,
 * active segment included; a partition no data plane has reported on is a fresh one, so it shows
 * that one segment. Reads only: nothing here enters the replicated state or the snapshot.
 */
export const PARTITION_SEGMENTS_MIN = 1;

function segmentsOf(counted: number): number {
  return Math.max(PARTITION_SEGMENTS_MIN, counted);
}

export class MetadataQueries {
  private readonly state: () => MetadataState;
  private readonly stats: StatsRegistry;

  /** `state` is a getter: restore swaps the state object, the queries must follow. */
  constructor(state: () => MetadataState, stats: StatsRegistry) {
    this.state = state;
    this.stats = stats;
  }

  private streamView(stream: StreamState): StreamView {
    const counters = this.stats.streamGet(stream) ?? ZERO;
    return {
      id: stream.id,
      name: stream.name,
      createdAtUs: stream.createdAtUs,
      topicsCount: stream.topics.count,
      sizeBytes: counters.sizeBytes,
      messagesCount: counters.messagesCount,
    };
  }

  private topicView(stream: StreamState, topic: TopicState): TopicView {
    const counters = this.stats.topicGet(stream, topic) ?? ZERO;
    return {
      id: topic.id,
      name: topic.name,
      createdAtUs: topic.createdAtUs,
      messageExpiryUs: topic.messageExpiryUs,
      compressionAlgorithm: topic.compressionAlgorithm,
      maxTopicSizeBytes: topic.maxTopicSizeBytes,
      replicationFactor: topic.replicationFactor,
      partitionsCount: topic.partitions.count,
      sizeBytes: counters.sizeBytes,
      messagesCount: counters.messagesCount,
      options: topic.options,
    };
  }

  streams(): StreamView[] {
    return this.state().streams.toArray().map((stream) => this.streamView(stream));
  }

  /** At most `limit` streams with ids `>= fromId`, ascending: a list read in slices or pages. */
  streamsPage(fromId: number, limit: number): StreamView[] {
    return this.state().streams.page(fromId, limit).map((stream) => this.streamView(stream));
  }

  stream(streamId: Identifier): StreamDetailsView | null {
    const stream = resolveStream(this.state(), streamId);
    if (stream === undefined) return null;
    const topics = stream.topics.toArray().map((topic) => this.topicView(stream, topic));
    return { ...this.streamView(stream), topics };
  }

  /**
   * A topic as the data plane addresses it: its numeric ids and its partitions (count and each
   * one's creation time, the partition's incarnation), without building any view; null when the
   * stream or the topic does not resolve (`missing` says which).
   */
  topicAddress(streamId: Identifier, topicId: Identifier): TopicAddressView {
    const stream = resolveStream(this.state(), streamId);
    if (stream === undefined) return { found: false, missing: 'stream' };
    const topic = resolveTopic(stream, topicId);
    if (topic === undefined) return { found: false, missing: 'topic' };
    const partitions = topic.partitions;
    return {
      found: true,
      streamId: stream.id,
      topicId: topic.id,
      partitionsCount: partitions.count,
      messageExpiryUs: topic.messageExpiryUs,
      maxTopicSizeBytes: topic.maxTopicSizeBytes,
      // A purge incarnates every partition of the topic anew; one created later is its own.
      incarnationOf: (partitionId) =>
        partitions.has(partitionId)
          ? Math.max(partitions.createdAtUs(partitionId), topic.purgedAtUs)
          : null,
    };
  }

  topics(streamId: Identifier): TopicView[] | null {
    const stream = resolveStream(this.state(), streamId);
    if (stream === undefined) return null;
    return stream.topics.toArray().map((topic) => this.topicView(stream, topic));
  }

  topic(streamId: Identifier, topicId: Identifier): TopicDetailsView | null {
    const stream = resolveStream(this.state(), streamId);
    const topic = stream === undefined ? undefined : resolveTopic(stream, topicId);
    if (stream === undefined || topic === undefined) return null;
    const partitions: PartitionView[] = [];
    topic.partitions.forEach((id, createdAtUs) => {
      const counters = this.stats.partitionGet(stream, topic, { id, createdAtUs }) ?? ZERO;
      partitions.push({
        id,
        createdAtUs,
        segmentsCount: segmentsOf(counters.segmentsCount),
        currentOffset: counters.currentOffset,
        sizeBytes: counters.sizeBytes,
        messagesCount: counters.messagesCount,
      });
    });
    return { ...this.topicView(stream, topic), partitions };
  }

  private groupTopic(streamId: Identifier, topicId: Identifier): TopicState | undefined {
    const stream = resolveStream(this.state(), streamId);
    return stream === undefined ? undefined : resolveTopic(stream, topicId);
  }

  consumerGroups(streamId: Identifier, topicId: Identifier): ConsumerGroupView[] | null {
    const topic = this.groupTopic(streamId, topicId);
    if (topic === undefined) return null;
    return topic.groups.toArray().map((group) => groupView(topic, group));
  }

  consumerGroup(
    streamId: Identifier,
    topicId: Identifier,
    groupId: Identifier,
  ): ConsumerGroupDetailsView | null {
    const topic = this.groupTopic(streamId, topicId);
    const group = topic === undefined ? undefined : resolveGroup(topic, groupId);
    if (topic === undefined || group === undefined) return null;
    const members = group.members.toArray().map((member) => ({
      id: member.id,
      clientId: member.clientId,
      partitionsCount: member.partitions.length,
      partitions: member.partitions.slice(),
    }));
    return { ...groupView(topic, group), generation: group.generation, members };
  }

  /** The partitions assigned to `clientId` in a group, or null when it is not a member. */
  assignedPartitions(
    streamId: Identifier,
    topicId: Identifier,
    groupId: Identifier,
    clientId: bigint,
  ): number[] | null {
    const topic = this.groupTopic(streamId, topicId);
    const group = topic === undefined ? undefined : resolveGroup(topic, groupId);
    const member = group === undefined ? undefined : memberOf(group, clientId);
    return member === undefined ? null : member.partitions.slice();
  }

  users(): UserView[] {
    return this.state().users.toArray().map(userView);
  }

  /** At most `limit` users with ids `>= fromId`, ascending. */
  usersPage(fromId: number, limit: number): UserView[] {
    return this.state().users.page(fromId, limit).map(userView);
  }

  user(userId: Identifier): UserDetailsView | null {
    const user = resolveUser(this.state(), userId);
    return user === undefined ? null : { ...userView(user), permissions: user.permissions };
  }

  personalAccessTokens(userId: number): PersonalAccessTokenView[] | null {
    const user = this.state().users.get(userId);
    if (user === undefined) return null;
    return [...user.tokens.values()]
      .map((token) => ({ name: token.name, expiryAtUs: token.expiryAtUs }))
      .sort((left, right) => (left.name < right.name ? -1 : left.name > right.name ? 1 : 0));
  }

  /**
   * The sum of the topic's partitions' segments as listed (O(1) for a topic no data plane touched).
   */
  private topicSegmentsCount(stream: StreamState, topic: TopicState): number {
    if (this.stats.topicGet(stream, topic) === undefined) {
      return topic.partitions.count * PARTITION_SEGMENTS_MIN;
    }
    let count = 0;
    topic.partitions.forEach((id, createdAtUs) => {
      const stats = this.stats.partitionGet(stream, topic, { id, createdAtUs });
      count += segmentsOf(stats?.segmentsCount ?? 0);
    });
    return count;
  }

  statsView(): MetadataStatsView {
    let topicsCount = 0;
    let partitionsCount = 0;
    let consumerGroupsCount = 0;
    let segmentsCount = 0;
    let messagesCount = 0;
    let messagesSizeBytes = 0;
    const state = this.state();
    for (const stream of state.streams.values()) {
      const counters = this.stats.streamGet(stream) ?? ZERO;
      messagesCount += counters.messagesCount;
      messagesSizeBytes += counters.sizeBytes;
      topicsCount += stream.topics.count;
      for (const topic of stream.topics.values()) {
        partitionsCount += topic.partitions.count;
        consumerGroupsCount += topic.groups.count;
        segmentsCount += this.topicSegmentsCount(stream, topic);
      }
    }
    return {
      streamsCount: state.streams.count,
      topicsCount,
      partitionsCount,
      segmentsCount,
      messagesCount,
      messagesSizeBytes,
      consumerGroupsCount,
    };
  }
}

function groupView(topic: TopicState, group: GroupState): ConsumerGroupView {
  return {
    id: group.id,
    name: group.name,
    partitionsCount: topic.partitions.count,
    membersCount: group.members.count,
  };
}

function userView(user: UserState): UserView {
  return {
    id: user.id,
    username: user.username,
    status: user.status,
    createdAtUs: user.createdAtUs,
  };
}

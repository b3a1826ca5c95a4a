/**
 * Data-plane counters for streams, topics and partitions (iggy-metadata-plane.md §7).
 *
 * The data plane bumps these directly, outside the log, so they are not replicated state and are
 * not in the snapshot (DESIGN.md §5.2: they would make two replicas' checkpoint bytes differ).
 * What the seed review found (seed-pr-3765-review.txt, the `RestoreSnapshot` arm) shapes this:
 *
 *   - ONE registry per replica, for its whole life. `restore()` keeps it: minting a new one would
 *     orphan every counter object the data plane already holds, and those partitions would read
 *     zeros forever.
 *   - Get-or-create hands out the SAME object for a key, to every caller, so a bump is visible to
 *     every reader. A partition's counters cascade into its topic's and stream's.
 *   - Keys are (id, incarnation) paths, the incarnation being the resource's `createdAtUs`. Ids
 *     are reused (lowest free), so "stream 3" can name two different streams over time; a replica
 *     that was behind and restores a snapshot where stream 3 was deleted and re-created must give
 *     the new stream 3 fresh counters, not the dead one's. The prepare timestamp is strictly
 *     monotonic across ops (the primary stamps max(now, last + 1)), so two creations of one id
 *     never share an incarnation.
 *   - Restore prunes every entry the snapshot does not describe and keeps the survivors' objects.
 *   - Parents always equal the sum of their children: deleting a partition or topic rolls its
 *     parents back by exactly its amounts, and a purge zeroes a partition once (gated by the
 *     purge's op number) and rolls the parents back by exactly what it removed.
 *   - Every change a reader can see (a bump, an offset, an entry made or dropped) advances
 *     `version`, the data plane's bumps included: they reach the counter objects directly, so the
 *     objects share one clock with the registry. Cached list bodies carry stream and topic
 *     counters, and are rebuilt only when this (or the state's version) moved.
 */
import { assert } from '../stdx/assert.js';
import type { StreamSnapshot, TopicSnapshot } from '../format/snapshot-model.js';
import { columnCount, columnCreatedAtUs } from './partition-store.js';

/** A resource's key: its id and its incarnation. Stream/topic/partition states satisfy this. */
export interface StatsRef {
  readonly id: number;
  readonly createdAtUs: number;
}

/** Additive changes; negative values are allowed while no counter goes below zero. */
export interface StatsDelta {
  readonly sizeBytes?: number;
  readonly messagesCount?: number;
  readonly segmentsCount?: number;
}

/** Module-private: only the registry and child counters move a parent's totals. */
const cascade = Symbol('cascade');

/** One registry's change counter, shared by every counter object it made. */
class StatsClock {
  /** Only grows: a reader that saw value v has seen every change counted up to v. */
  value = 0;

  tick(): void {
    this.value += 1;
  }
}

function checkedSum(current: number, delta: number, field: string): number {
  const next = current + delta;
  assert(
    Number.isSafeInteger(next) && next >= 0,
    `stats ${field} stays a non-negative safe integer`,
  );
  return next;
}

export class StreamStats {
  protected readonly clock: StatsClock;
  private size = 0;
  private messages = 0;
  private segments = 0;

  constructor(clock: StatsClock) {
    this.clock = clock;
  }

  get sizeBytes(): number {
    return this.size;
  }
  get messagesCount(): number {
    return this.messages;
  }
  get segmentsCount(): number {
    return this.segments;
  }

  [cascade](sizeBytes: number, messagesCount: number, segmentsCount: number): void {
    this.clock.tick();
    this.size = checkedSum(this.size, sizeBytes, 'sizeBytes');
    this.messages = checkedSum(this.messages, messagesCount, 'messagesCount');
    this.segments = checkedSum(this.segments, segmentsCount, 'segmentsCount');
  }
}

export class TopicStats extends StreamStats {
  readonly stream: StreamStats;

  constructor(stream: StreamStats, clock: StatsClock) {
    super(clock);
    this.stream = stream;
  }

  override [cascade](sizeBytes: number, messagesCount: number, segmentsCount: number): void {
    super[cascade](sizeBytes, messagesCount, segmentsCount);
    this.stream[cascade](sizeBytes, messagesCount, segmentsCount);
  }
}

export class PartitionStats extends StreamStats {
  readonly topic: TopicStats;
  private offset = 0;

  constructor(topic: TopicStats, clock: StatsClock) {
    super(clock);
    this.topic = topic;
  }

  get currentOffset(): number {
    return this.offset;
  }

  /** The data plane's bump: cascades into the topic and the stream. */
  add(delta: StatsDelta): void {
    this[cascade](delta.sizeBytes ?? 0, delta.messagesCount ?? 0, delta.segmentsCount ?? 0);
  }

  setCurrentOffset(offset: number): void {
    assert(
      Number.isSafeInteger(offset) && offset >= 0,
      'current offset is a non-negative safe integer',
    );
    this.clock.tick();
    this.offset = offset;
  }

  override [cascade](sizeBytes: number, messagesCount: number, segmentsCount: number): void {
    super[cascade](sizeBytes, messagesCount, segmentsCount);
    this.topic[cascade](sizeBytes, messagesCount, segmentsCount);
  }

  /** Removes this partition's amounts from itself and its parents; returns nothing left behind. */
  drain(): void {
    this[cascade](-this.sizeBytes, -this.messagesCount, -this.segmentsCount);
    this.offset = 0;
    this.clock.tick();
  }
}

interface PartitionEntry {
  readonly ref: StatsRef;
  readonly stats: PartitionStats;
  /** The op of the last purge applied to these counters: a purge zeroes them at most once. */
  purgedAtOp: number;
}

interface TopicEntry {
  readonly ref: StatsRef;
  readonly stats: TopicStats;
  readonly partitions: Map<string, PartitionEntry>;
}

interface StreamEntry {
  readonly ref: StatsRef;
  readonly stats: StreamStats;
  readonly topics: Map<string, TopicEntry>;
}

/**
 * Partition `id`'s incarnation in a snapshot topic (ids are the column's indexes), if it exists.
 */
function partitionCreatedAtUs(topic: TopicSnapshot, id: number): number | undefined {
  const column = topic.partitionsCreatedAtUs;
  return id < columnCount(column) ? columnCreatedAtUs(column, id) : undefined;
}

function keyOf(ref: StatsRef): string {
  return `${ref.id}@${ref.createdAtUs}`;
}

export class StatsRegistry {
  private readonly streams = new Map<string, StreamEntry>();
  private readonly clock = new StatsClock();

  /** Advances on every change a read could see; never goes back (see the header). */
  get version(): number {
    return this.clock.value;
  }

  private streamEntry(stream: StatsRef): StreamEntry {
    const key = keyOf(stream);
    let entry = this.streams.get(key);
    if (entry === undefined) {
      const ref = { id: stream.id, createdAtUs: stream.createdAtUs };
      entry = { ref, stats: new StreamStats(this.clock), topics: new Map() };
      this.streams.set(key, entry);
      this.clock.tick();
    }
    return entry;
  }

  private topicEntry(stream: StatsRef, topic: StatsRef): TopicEntry {
    const parent = this.streamEntry(stream);
    const key = keyOf(topic);
    let entry = parent.topics.get(key);
    if (entry === undefined) {
      const ref = { id: topic.id, createdAtUs: topic.createdAtUs };
      entry = { ref, stats: new TopicStats(parent.stats, this.clock), partitions: new Map() };
      parent.topics.set(key, entry);
      this.clock.tick();
    }
    return entry;
  }

  private partitionEntry(stream: StatsRef, topic: StatsRef, partition: StatsRef): PartitionEntry {
    const parent = this.topicEntry(stream, topic);
    const key = keyOf(partition);
    let entry = parent.partitions.get(key);
    if (entry === undefined) {
      const ref = { id: partition.id, createdAtUs: partition.createdAtUs };
      entry = { ref, stats: new PartitionStats(parent.stats, this.clock), purgedAtOp: -1 };
      parent.partitions.set(key, entry);
      this.clock.tick();
    }
    return entry;
  }

  /**
   * Get-or-create. Callers pass refs of live resources (the state machine resolves them), so the
   * registry holds at most one entry per live stream, topic and partition.
   */
  stream(stream: StatsRef): StreamStats {
    return this.streamEntry(stream).stats;
  }

  topic(stream: StatsRef, topic: StatsRef): TopicStats {
    return this.topicEntry(stream, topic).stats;
  }

  partition(stream: StatsRef, topic: StatsRef, partition: StatsRef): PartitionStats {
    return this.partitionEntry(stream, topic, partition).stats;
  }

  /** Lookups that never create (readers render a missing entry as zeros). */
  streamGet(stream: StatsRef): StreamStats | undefined {
    return this.streams.get(keyOf(stream))?.stats;
  }

  topicGet(stream: StatsRef, topic: StatsRef): TopicStats | undefined {
    return this.streams.get(keyOf(stream))?.topics.get(keyOf(topic))?.stats;
  }

  partitionGet(stream: StatsRef, topic: StatsRef, partition: StatsRef): PartitionStats | undefined {
    return this.existingPartitionEntry(stream, topic, partition)?.stats;
  }

  /** The partition's entry if the registry holds one (never creates it). */
  private existingPartitionEntry(
    stream: StatsRef,
    topic: StatsRef,
    partition: StatsRef,
  ): PartitionEntry | undefined {
    const topicEntry = this.streams.get(keyOf(stream))?.topics.get(keyOf(topic));
    return topicEntry?.partitions.get(keyOf(partition));
  }

  /** The node layer's bump for a live partition. */
  bump(
    stream: StatsRef,
    topic: StatsRef,
    partition: StatsRef,
    delta: StatsDelta,
    currentOffset?: number,
  ): PartitionStats {
    const stats = this.partition(stream, topic, partition);
    stats.add(delta);
    if (currentOffset !== undefined) stats.setCurrentOffset(currentOffset);
    return stats;
  }

  removeStream(stream: StatsRef): void {
    if (this.streams.delete(keyOf(stream))) this.clock.tick();
  }

  /** The topic's data is gone: its stream loses exactly the topic's amounts. */
  removeTopic(stream: StatsRef, topic: StatsRef): void {
    const parent = this.streams.get(keyOf(stream));
    const entry = parent?.topics.get(keyOf(topic));
    if (parent === undefined || entry === undefined) return;
    const stats = entry.stats;
    parent.stats[cascade](-stats.sizeBytes, -stats.messagesCount, -stats.segmentsCount);
    parent.topics.delete(keyOf(topic));
    this.clock.tick();
  }

  /** The partition's data is gone: its topic and stream lose exactly its amounts. */
  removePartition(stream: StatsRef, topic: StatsRef, partition: StatsRef): void {
    const parent = this.streams.get(keyOf(stream))?.topics.get(keyOf(topic));
    const entry = parent?.partitions.get(keyOf(partition));
    if (parent === undefined || entry === undefined) return;
    entry.stats.drain();
    parent.partitions.delete(keyOf(partition));
    this.clock.tick();
  }

  /**
   * A committed purge at `op`: zero the partition once (a second call for the same or an older op
   * is a no-op, so counters bumped after the purge survive a repeated delivery), keep one segment
   * if it had storage (the purged partition restarts with one empty segment, as Iggy's
   * `reset_purged_partitions` does), and restart offsets at zero.
   */
  purgePartition(stream: StatsRef, topic: StatsRef, partition: StatsRef, op: number): void {
    const entry = this.existingPartitionEntry(stream, topic, partition);
    if (entry === undefined || entry.purgedAtOp >= op) return;
    entry.purgedAtOp = op;
    const hadStorage = entry.stats.segmentsCount > 0;
    entry.stats.drain();
    if (hadStorage) entry.stats.add({ segmentsCount: 1 });
  }

  /**
   * Restore: keep the entries the snapshot describes (same id AND incarnation), drop the rest.
   * A dropped child rolls its surviving parent back by its amounts, exactly as deleting it would
   * have, so parents keep equalling the sum of their children.
   */
  retain(streams: readonly StreamSnapshot[]): void {
    // Walk the registry and look each entry up in the snapshot, never the other way round: the
    // registry holds the counters the data plane touched, while a snapshot may describe millions
    // of partitions (keying every one of them cost seconds per install at 64 MiB).
    if (this.streams.size === 0) return;
    // Pruning can drop entries without moving any counter (a stream's whole entry goes at once).
    this.clock.tick();
    const snapshotStreams = new Map<number, StreamSnapshot>();
    for (const stream of streams) snapshotStreams.set(stream.id, stream);
    for (const [streamKey, streamEntry] of [...this.streams]) {
      const stream = snapshotStreams.get(streamEntry.ref.id);
      if (stream === undefined || stream.createdAtUs !== streamEntry.ref.createdAtUs) {
        this.streams.delete(streamKey);
        continue;
      }
      let snapshotTopics: Map<number, TopicSnapshot> | null = null;
      for (const [topicKey, topicEntry] of [...streamEntry.topics]) {
        snapshotTopics ??= new Map(stream.topics.map((topic) => [topic.id, topic]));
        const topic = snapshotTopics.get(topicEntry.ref.id);
        if (topic === undefined || topic.createdAtUs !== topicEntry.ref.createdAtUs) {
          const stats = topicEntry.stats;
          streamEntry.stats[cascade](-stats.sizeBytes, -stats.messagesCount, -stats.segmentsCount);
          streamEntry.topics.delete(topicKey);
          continue;
        }
        for (const [partitionKey, partitionEntry] of [...topicEntry.partitions]) {
          const { id, createdAtUs } = partitionEntry.ref;
          if (partitionCreatedAtUs(topic, id) === createdAtUs) continue;
          partitionEntry.stats.drain();
          topicEntry.partitions.delete(partitionKey);
        }
      }
    }
  }

  /** Entry counts, for tests and metrics. */
  entryCounts(): { streams: number; topics: number; partitions: number } {
    let topics = 0;
    let partitions = 0;
    for (const stream of this.streams.values()) {
      topics += stream.topics.size;
      for (const topic of stream.topics.values()) partitions += topic.partitions.size;
    }
    return { streams: this.streams.size, topics, partitions };
  }
}

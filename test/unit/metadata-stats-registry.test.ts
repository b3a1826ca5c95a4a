/**
 * The stats registry: one live registry whose counter objects are shared, cascading increments,
 * exact roll-backs on delete and purge, and restore that keeps survivors and prunes the dead
 * (seed-pr-3765-review.txt: a state-transfer install must not orphan the data plane's counters nor
 * hand a re-created id the dead resource's counters).
 */
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { idOf } from '../../src/metadata/operations.js';
import { columnCreatedAtUs, columnOf } from '../../src/metadata/partition-store.js';
import { StatsRegistry } from '../../src/metadata/stats-registry.js';
import { Driver, ROOT, fullSnapshot, req } from './metadata-fixtures.js';

/** Stream 0 with topics 0 (2 partitions) and 1 (1 partition); stream 1 with topic 0 (1 partition). */
function populated(): Driver {
  const driver = new Driver();
  driver.created(ROOT, req.createStream('s0'));
  driver.created(ROOT, req.createTopic(0, 't0', 2));
  driver.created(ROOT, req.createTopic(0, 't1', 1));
  driver.created(ROOT, req.createStream('s1'));
  driver.created(ROOT, req.createTopic(1, 't0', 1));
  return driver;
}

function totals(driver: Driver, stream: number): { sizeBytes: number; messagesCount: number } {
  const view = driver.sm.queries.stream(idOf(stream));
  return { sizeBytes: view?.sizeBytes ?? -1, messagesCount: view?.messagesCount ?? -1 };
}

describe('stats registry: identity and cascade', () => {
  it('get-or-create hands every caller the same counter object', () => {
    const driver = populated();
    const first = driver.sm.partitionStats(0, 0, 1);
    const second = driver.sm.partitionStats(0, 0, 1);
    expect(first).not.toBeNull();
    expect(second).toBe(first);
    expect(first?.topic).toBe(driver.sm.partitionStats(0, 0, 0)?.topic);
    expect(first?.topic.stream).toBe(driver.sm.partitionStats(0, 1, 0)?.topic.stream);
    expect(driver.sm.partitionStats(0, 0, 2)).toBeNull();
    expect(driver.sm.partitionStats(7, 0, 0)).toBeNull();
  });

  it('a partition bump cascades into its topic and stream, and nowhere else', () => {
    const driver = populated();
    expect(driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2, segmentsCount: 1 }, 1)).toBe(true);
    expect(driver.sm.bumpPartitionStats(0, 0, 1, { sizeBytes: 50, messagesCount: 1, segmentsCount: 1 })).toBe(true);
    expect(driver.sm.bumpPartitionStats(0, 1, 0, { sizeBytes: 7, messagesCount: 1 })).toBe(true);
    expect(driver.sm.bumpPartitionStats(0, 0, 9, { sizeBytes: 1 })).toBe(false);
    const topic = driver.sm.queries.topic(idOf(0), idOf(0));
    expect(topic).toMatchObject({ sizeBytes: 150, messagesCount: 3 });
    expect(topic?.partitions.map((p) => [p.sizeBytes, p.messagesCount, p.segmentsCount, p.currentOffset])).toEqual([
      [100, 2, 1, 1],
      [50, 1, 1, 0],
    ]);
    expect(totals(driver, 0)).toEqual({ sizeBytes: 157, messagesCount: 4 });
    expect(totals(driver, 1)).toEqual({ sizeBytes: 0, messagesCount: 0 });
    expect(driver.sm.queries.statsView()).toMatchObject({ streamsCount: 2, topicsCount: 3, partitionsCount: 4, messagesCount: 4, messagesSizeBytes: 157, segmentsCount: 4 });
  });

  it('counters never enter the snapshot: bumps leave the encoded bytes unchanged', () => {
    const driver = populated();
    const before = snapshotEncodeTs(fullSnapshot(driver.sm.snapshot()));
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 1000, messagesCount: 10, segmentsCount: 1 });
    expect(snapshotEncodeTs(fullSnapshot(driver.sm.snapshot()))).toEqual(before);
  });

  it('a counter may not go negative (a data-plane bug fails loudly)', () => {
    const driver = populated();
    expect(() => driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: -1 })).toThrow(/non-negative/);
  });
});

describe('stats registry: deletes', () => {
  it('deleting partitions removes their entries and rolls parents back by exactly their amounts', () => {
    const driver = populated();
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2 });
    driver.sm.bumpPartitionStats(0, 0, 1, { sizeBytes: 50, messagesCount: 1 });
    expect(driver.code(ROOT, req.deletePartitions(0, 0, 1))).toBe(0);
    expect(driver.sm.queries.topic(idOf(0), idOf(0))).toMatchObject({ sizeBytes: 100, messagesCount: 2 });
    expect(totals(driver, 0)).toEqual({ sizeBytes: 100, messagesCount: 2 });
    // The id comes back with fresh counters.
    expect(driver.code(ROOT, req.createPartitions(0, 0, 1))).toBe(0);
    expect(driver.sm.queries.topic(idOf(0), idOf(0))?.partitions[1]).toMatchObject({ sizeBytes: 0, messagesCount: 0 });
  });

  it('deleting a topic rolls its stream back; deleting a stream drops everything under it', () => {
    const driver = populated();
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2 });
    driver.sm.bumpPartitionStats(0, 1, 0, { sizeBytes: 5, messagesCount: 1 });
    driver.sm.bumpPartitionStats(1, 0, 0, { sizeBytes: 9, messagesCount: 9 });
    expect(driver.code(ROOT, req.deleteTopic(0, 0))).toBe(0);
    expect(totals(driver, 0)).toEqual({ sizeBytes: 5, messagesCount: 1 });
    expect(driver.sm.stats.entryCounts()).toEqual({ streams: 2, topics: 2, partitions: 2 });
    expect(driver.code(ROOT, req.deleteStream(0))).toBe(0);
    expect(driver.sm.stats.entryCounts()).toEqual({ streams: 1, topics: 1, partitions: 1 });
    driver.created(ROOT, req.createStream('again'));
    driver.created(ROOT, req.createTopic(0, 't1', 1));
    expect(totals(driver, 0)).toEqual({ sizeBytes: 0, messagesCount: 0 });
    expect(totals(driver, 1)).toEqual({ sizeBytes: 9, messagesCount: 9 });
  });
});

describe('stats registry: purge', () => {
  it('a purge zeroes exactly the purged partitions once, keeping one segment where there was storage', () => {
    const driver = populated();
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2, segmentsCount: 3 }, 2);
    driver.sm.bumpPartitionStats(0, 0, 1, { sizeBytes: 50, messagesCount: 1 });
    driver.sm.bumpPartitionStats(0, 1, 0, { sizeBytes: 7, messagesCount: 1, segmentsCount: 1 });
    expect(driver.code(ROOT, req.purgeTopic(0, 0))).toBe(0);
    const purgeOp = driver.op;
    const topic = driver.sm.queries.topic(idOf(0), idOf(0));
    expect(topic?.partitions.map((p) => [p.sizeBytes, p.messagesCount, p.segmentsCount, p.currentOffset])).toEqual([
      [0, 0, 1, 0],
      [0, 0, 1, 0],
    ]);
    // The registry keeps one segment only where there was storage; reads show every partition's
    // active segment either way (queries.ts PARTITION_SEGMENTS_MIN).
    expect([driver.sm.partitionStats(0, 0, 0)?.segmentsCount, driver.sm.partitionStats(0, 0, 1)?.segmentsCount]).toEqual([1, 0]);
    expect(topic).toMatchObject({ sizeBytes: 0, messagesCount: 0 });
    // The sibling topic's counters survive, and the stream lost exactly the purged amounts.
    expect(totals(driver, 0)).toEqual({ sizeBytes: 7, messagesCount: 1 });
    expect(driver.sm.queries.stream(idOf(0))).toBeTruthy();
    // Messages sent after the purge survive a repeated delivery of the same purge op.
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 10, messagesCount: 1 });
    const s0 = driver.sm.snapshot().streams[0]!;
    const t0 = s0.topics[0]!;
    driver.sm.stats.purgePartition(s0, t0, { id: 0, createdAtUs: columnCreatedAtUs(t0.partitionsCreatedAtUs, 0) }, purgeOp);
    expect(driver.sm.queries.topic(idOf(0), idOf(0))?.partitions[0]).toMatchObject({ sizeBytes: 10, messagesCount: 1 });
    expect(totals(driver, 0)).toEqual({ sizeBytes: 17, messagesCount: 2 });
  });

  it('purging a stream purges every topic in it', () => {
    const driver = populated();
    driver.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2 });
    driver.sm.bumpPartitionStats(0, 1, 0, { sizeBytes: 7, messagesCount: 1 });
    driver.sm.bumpPartitionStats(1, 0, 0, { sizeBytes: 3, messagesCount: 3 });
    expect(driver.code(ROOT, req.purgeStream(0))).toBe(0);
    expect(totals(driver, 0)).toEqual({ sizeBytes: 0, messagesCount: 0 });
    expect(totals(driver, 1)).toEqual({ sizeBytes: 3, messagesCount: 3 });
  });
});

describe('purge: a new incarnation of every partition of the topic', () => {
  const incarnations = (driver: Driver, stream: number, topic: number): (number | null)[] => {
    const address = driver.sm.queries.topicAddress(idOf(stream), idOf(topic));
    if (!address.found) throw new Error('topic not found');
    return Array.from({ length: address.partitionsCount + 1 }, (_, id) => address.incarnationOf(id));
  };

  it('moves the data plane incarnation of the purged partitions to the purge, not their creation time', () => {
    const driver = populated();
    const created = incarnations(driver, 0, 0);
    const sibling = incarnations(driver, 0, 1);
    expect(created).toEqual([created[0], created[0], null]);
    expect(driver.code(ROOT, req.purgeTopic(0, 0))).toBe(0);
    const purgedAt = driver.timestampUs;
    expect(purgedAt).toBeGreaterThan(created[0]!);
    expect(incarnations(driver, 0, 0)).toEqual([purgedAt, purgedAt, null]);
    expect(incarnations(driver, 0, 1)).toEqual(sibling);
    // A partition added after the purge is its own incarnation; creation times are unchanged.
    expect(driver.code(ROOT, req.createPartitions(0, 0, 1))).toBe(0);
    const addedAt = driver.timestampUs;
    expect(incarnations(driver, 0, 0)).toEqual([purgedAt, purgedAt, addedAt, null]);
    expect(driver.sm.queries.topic(idOf(0), idOf(0))?.partitions.map((p) => p.createdAtUs)).toEqual([created[0], created[0], addedAt]);
    // A rejected purge (no such topic) moves nothing; a stream purge moves every topic in it.
    expect(driver.code(ROOT, req.purgeTopic(0, 9))).not.toBe(0);
    expect(incarnations(driver, 0, 1)).toEqual(sibling);
    expect(driver.code(ROOT, req.purgeStream(0))).toBe(0);
    const streamPurgedAt = driver.timestampUs;
    expect(incarnations(driver, 0, 0)).toEqual([streamPurgedAt, streamPurgedAt, streamPurgedAt, null]);
    expect(incarnations(driver, 0, 1)).toEqual([streamPurgedAt, null]);
    expect(incarnations(driver, 1, 0)).toEqual([created[0]! + 3_000_000, null]);
  });

  it('survives a checkpoint: the snapshot carries the purge, and a restored machine agrees', () => {
    const driver = populated();
    expect(driver.code(ROOT, req.purgeTopic(0, 1))).toBe(0);
    const snapshot = driver.sm.snapshot();
    expect(snapshot.streams[0]!.topics.map((topic) => topic.purgedAtUs)).toEqual([0, driver.timestampUs]);
    const restored = new Driver();
    restored.sm.restore(snapshot);
    expect(incarnations(restored, 0, 1)).toEqual(incarnations(driver, 0, 1));
    expect(incarnations(restored, 0, 0)).toEqual(incarnations(driver, 0, 0));
    expect(snapshotEncodeTs(fullSnapshot(restored.sm.snapshot()))).toEqual(snapshotEncodeTs(fullSnapshot(snapshot)));
  });
});

describe('stats registry: restore (boot or state-transfer install)', () => {
  it('keeps the live registry and the survivors counter objects, with their values', () => {
    const behind = populated();
    const registry = behind.sm.stats;
    const survivor = behind.sm.partitionStats(1, 0, 0)!;
    behind.sm.bumpPartitionStats(1, 0, 0, { sizeBytes: 42, messagesCount: 4, segmentsCount: 1 }, 3);
    // The cluster moved on: a peer applied more ops that did not touch stream 1.
    const ahead = populated();
    ahead.created(ROOT, req.createStream('s2'));
    behind.sm.restore(ahead.sm.snapshot());
    expect(behind.sm.stats).toBe(registry);
    expect(behind.sm.partitionStats(1, 0, 0)).toBe(survivor);
    expect(behind.sm.queries.topic(idOf(1), idOf(0))?.partitions[0]).toMatchObject({ sizeBytes: 42, messagesCount: 4, segmentsCount: 1, currentOffset: 3 });
    expect(totals(behind, 1)).toEqual({ sizeBytes: 42, messagesCount: 4 });
  });

  it('a stream deleted and re-created under the same id while this replica was behind starts at zero', () => {
    const behind = populated();
    behind.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 10 });
    const stale = behind.sm.partitionStats(0, 0, 0);
    const ahead = populated();
    ahead.timestampUs = behind.timestampUs + 50_000_000;
    expect(ahead.code(ROOT, req.deleteStream(0))).toBe(0);
    expect(ahead.created(ROOT, req.createStream('reborn'))).toBe(0);
    expect(ahead.created(ROOT, req.createTopic(0, 't0', 2))).toBe(0);
    behind.sm.restore(ahead.sm.snapshot());
    expect(totals(behind, 0)).toEqual({ sizeBytes: 0, messagesCount: 0 });
    expect(behind.sm.queries.topic(idOf(0), idOf(0))?.partitions[0]).toMatchObject({ sizeBytes: 0, messagesCount: 0 });
    expect(behind.sm.partitionStats(0, 0, 0)).not.toBe(stale);
  });

  it('prunes entries the snapshot does not describe, rolling surviving parents back', () => {
    const behind = populated();
    behind.sm.bumpPartitionStats(0, 0, 0, { sizeBytes: 100, messagesCount: 2 });
    behind.sm.bumpPartitionStats(0, 0, 1, { sizeBytes: 50, messagesCount: 1 });
    behind.sm.bumpPartitionStats(0, 1, 0, { sizeBytes: 7, messagesCount: 1 });
    const ahead = populated();
    expect(ahead.code(ROOT, req.deletePartitions(0, 0, 1))).toBe(0);
    expect(ahead.code(ROOT, req.deleteTopic(0, 1))).toBe(0);
    behind.sm.restore(ahead.sm.snapshot());
    expect(behind.sm.stats.entryCounts()).toEqual({ streams: 1, topics: 1, partitions: 1 });
    expect(behind.sm.queries.topic(idOf(0), idOf(0))).toMatchObject({ sizeBytes: 100, messagesCount: 2 });
    expect(totals(behind, 0)).toEqual({ sizeBytes: 100, messagesCount: 2 });
  });

  it('registry-level: retain keeps objects keyed by id and incarnation', () => {
    const registry = new StatsRegistry();
    const stream = { id: 0, createdAtUs: 10 };
    const topic = { id: 0, createdAtUs: 11 };
    const partition = { id: 0, createdAtUs: 11 };
    const stats = registry.bump(stream, topic, partition, { messagesCount: 5 });
    const topicWith = (createdAtUs: number[]) => ({ id: 0, name: 't', createdAtUs: 11, messageExpiryUs: 1n, compressionAlgorithm: 1 as const, maxTopicSizeBytes: 1n, replicationFactor: 1, partitionsCreatedAtUs: columnOf(createdAtUs), consumerGroups: [], options: [], purgedAtUs: 0 });
    registry.retain([{ id: 0, name: 's', createdAtUs: 10, topics: [topicWith([11])] }]);
    expect(registry.partition(stream, topic, partition)).toBe(stats);
    // Partition 1 of the column is another incarnation (12): its counters go, partition 0's stay.
    const other = registry.bump(stream, topic, { id: 1, createdAtUs: 11 }, { messagesCount: 2 });
    // Beyond the column's end (createdAtUs 0, so a read past the end would wrongly match).
    const beyond = registry.bump(stream, topic, { id: 2, createdAtUs: 0 }, { messagesCount: 3 });
    registry.retain([{ id: 0, name: 's', createdAtUs: 10, topics: [topicWith([11, 12])] }]);
    expect(registry.partition(stream, topic, partition)).toBe(stats);
    expect(registry.partition(stream, topic, { id: 1, createdAtUs: 11 })).not.toBe(other);
    expect(registry.partition(stream, topic, { id: 2, createdAtUs: 0 })).not.toBe(beyond);
    expect(registry.topicGet(stream, topic)?.messagesCount).toBe(5);
    registry.retain([{ id: 0, name: 's', createdAtUs: 10, topics: [topicWith([11])] }]);
    registry.retain([{ id: 0, name: 's', createdAtUs: 12, topics: [] }]);
    expect(registry.entryCounts()).toEqual({ streams: 0, topics: 0, partitions: 0 });
    expect(registry.partition(stream, topic, partition)).not.toBe(stats);
  });
});

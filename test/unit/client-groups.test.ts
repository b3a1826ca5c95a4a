/**
 * The consumer-group membership index: ending a session and listing a session's groups cost its
 * own memberships, never a walk over the streams (one user's thousands of sessions among tens of
 * thousands of streams used to hold a primary's commit path for a minute). Its agreement with a
 * walk of every group, through random joins, leaves, deletions and restores, is pinned by the
 * reference-model property test (test/prop/metadata-model.test.ts).
 */
import { describe, expect, it, vi } from 'vitest';
import { ClientGroupIndex } from '../../src/metadata/client-groups.js';
import { groupsOfClient, removeClientFromGroups } from '../../src/metadata/ops-groups.js';
import type { MetadataState } from '../../src/metadata/state.js';
import { Driver, ROOT, req } from './metadata-fixtures.js';

const STREAMS = 2_000;

/** The machine's state (private to it: read here only to count what a removal walks). */
function stateOf(driver: Driver): MetadataState {
  return (driver.sm as unknown as { state: MetadataState }).state;
}

describe('consumer-group membership index', () => {
  it('removing a session and listing its groups walk no stream, however many there are', () => {
    const driver = new Driver();
    for (let index = 0; index < STREAMS; index++) driver.created(ROOT, req.createStream(`s-${index}`));
    for (const stream of [7, 1_500]) {
      driver.created(ROOT, req.createTopic(stream, 't', 3));
      driver.created(ROOT, req.createGroup(stream, 't', 'g'));
      expect(driver.code(ROOT, req.joinGroup(stream, 't', 'g'), 42n)).toBe(0);
      expect(driver.code(ROOT, req.joinGroup(stream, 't', 'g'), 43n)).toBe(0);
    }
    const state = stateOf(driver);
    const streamsWalked = vi.spyOn(state.streams, 'values');
    const streamsListed = vi.spyOn(state.streams, 'toArray');
    expect(groupsOfClient(state, 42n)).toEqual([
      { streamId: 7, topicId: 0, groupId: 0 },
      { streamId: 1_500, topicId: 0, groupId: 0 },
    ]);
    expect(removeClientFromGroups(state, 42n)).toBe(2);
    expect(removeClientFromGroups(state, 42n)).toBe(0);
    expect(groupsOfClient(state, 42n)).toEqual([]);
    expect(streamsWalked).not.toHaveBeenCalled();
    expect(streamsListed).not.toHaveBeenCalled();
    // The other member kept its place, and now holds every partition of each group.
    expect(groupsOfClient(state, 43n)).toHaveLength(2);
    const group = state.streams.get(7)!.topics.get(0)!.groups.get(0)!;
    expect(group.members.toArray().map((member) => [member.clientId, member.partitions])).toEqual([[43n, [0, 1, 2]]]);
  });

  it('deleting a group, a topic or a stream drops its members from the index', () => {
    const driver = new Driver();
    for (const stream of ['a', 'b']) {
      driver.created(ROOT, req.createStream(stream));
      for (const topic of ['x', 'y']) {
        driver.created(ROOT, req.createTopic(stream, topic, 1));
        driver.created(ROOT, req.createGroup(stream, topic, 'g'));
        expect(driver.code(ROOT, req.joinGroup(stream, topic, 'g'), 9n)).toBe(0);
      }
    }
    const state = stateOf(driver);
    const addresses = (): string[] => groupsOfClient(state, 9n).map((a) => `${a.streamId}/${a.topicId}/${a.groupId}`);
    expect(addresses()).toEqual(['0/0/0', '0/1/0', '1/0/0', '1/1/0']);
    expect(driver.code(ROOT, req.deleteGroup('a', 'x', 'g'))).toBe(0);
    expect(addresses()).toEqual(['0/1/0', '1/0/0', '1/1/0']);
    expect(driver.code(ROOT, req.deleteTopic('b', 'y'))).toBe(0);
    expect(addresses()).toEqual(['0/1/0', '1/0/0']);
    expect(driver.code(ROOT, req.deleteStream('a'))).toBe(0);
    expect(addresses()).toEqual(['1/0/0']);
    expect(driver.code(ROOT, req.leaveGroup('b', 'x', 'g'), 9n)).toBe(0);
    expect(addresses()).toEqual([]);
    expect(state.clientGroups.clients).toBe(0);
  });

  it('a restore rebuilds the index from the groups the snapshot holds', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('a'));
    driver.created(ROOT, req.createTopic('a', 't', 2));
    driver.created(ROOT, req.createGroup('a', 't', 'g'));
    driver.created(ROOT, req.createGroup('a', 't', 'h'));
    expect(driver.code(ROOT, req.joinGroup('a', 't', 'h'), 5n)).toBe(0);
    expect(driver.code(ROOT, req.joinGroup('a', 't', 'g'), 5n)).toBe(0);
    const restored = new Driver();
    restored.sm.restore(driver.sm.snapshot());
    expect(restored.sm.consumerGroupsOfClient(5n)).toEqual([
      { streamId: 0, topicId: 0, groupId: 0 },
      { streamId: 0, topicId: 0, groupId: 1 },
    ]);
    restored.sm.onClientRemoved(5n, 2_000_000_000_000);
    expect(restored.sm.consumerGroupsOfClient(5n)).toEqual([]);
  });

  it('refuses a membership twice, and the removal of one it does not hold', () => {
    const index = new ClientGroupIndex();
    const address = { streamId: 1, topicId: 2, groupId: 3 };
    index.add(1n, address);
    expect(() => index.add(1n, address)).toThrow(/once/);
    index.remove(1n, address);
    expect(() => index.remove(1n, address)).toThrow(/once/);
  });
});

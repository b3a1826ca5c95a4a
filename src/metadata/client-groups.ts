/**
 * Which consumer groups each client session is a member of: an index derived from the members of
 * every group, kept beside them. Ending a session (a committed Logout, or a session evicted by a
 * committed Register) and listing a connection's groups (GetClients, `/clients`, `/stats`) then
 * cost that session's own memberships; without it each walked every stream and topic, and one
 * user's thousands of sessions among tens of thousands of streams held a primary's commit path
 * for a minute.
 *
 * It holds nothing the groups do not: the snapshot stores only the groups' members, and a restore
 * rebuilds the index from them (`MetadataState.install`), so it can never disagree with a replica
 * that built it op by op.
 */
import { assert } from '../stdx/assert.js';

/**
 * What the index reads of a group, a topic and a stream: state.ts's GroupState, TopicState and
 * StreamState, by shape. The state holds the index, so naming those types here would make the
 * two modules import each other.
 */
interface GroupState {
  readonly id: number;
  readonly members: { values(): Iterable<{ readonly clientId: bigint }> };
}
interface TopicState {
  readonly id: number;
  readonly groups: { values(): Iterable<GroupState> };
}
interface StreamState {
  readonly id: number;
  readonly topics: { get(id: number): TopicState | undefined; values(): Iterable<TopicState> };
}

/** A group by its ids: (stream, topic, group). */
export interface GroupAddress {
  readonly streamId: number;
  readonly topicId: number;
  readonly groupId: number;
}

function keyOf(address: GroupAddress): string {
  return `${address.streamId}/${address.topicId}/${address.groupId}`;
}

function ascending(left: GroupAddress, right: GroupAddress): number {
  return (
    left.streamId - right.streamId || left.topicId - right.topicId || left.groupId - right.groupId
  );
}

export class ClientGroupIndex {
  /** Client id -> (address key -> address), one entry per membership. */
  private readonly byClient = new Map<bigint, Map<string, GroupAddress>>();

  /** Clients with at least one membership. */
  get clients(): number {
    return this.byClient.size;
  }

  add(clientId: bigint, address: GroupAddress): void {
    let groups = this.byClient.get(clientId);
    if (groups === undefined) {
      groups = new Map();
      this.byClient.set(clientId, groups);
    }
    const key = keyOf(address);
    assert(!groups.has(key), 'a client is a member of a group once');
    groups.set(key, address);
  }

  remove(clientId: bigint, address: GroupAddress): void {
    const groups = this.byClient.get(clientId);
    const removed = groups?.delete(keyOf(address)) ?? false;
    assert(removed, 'a membership leaves the index once');
    if (groups!.size === 0) this.byClient.delete(clientId);
  }

  /** The groups `clientId` is a member of, ascending by (stream, topic, group). */
  of(clientId: bigint): GroupAddress[] {
    const groups = this.byClient.get(clientId);
    if (groups === undefined) return [];
    return [...groups.values()].sort(ascending);
  }

  /** Forgets every membership of `group`, at `address` (a group going away). */
  forgetGroup(address: GroupAddress, group: GroupState): void {
    assert(address.groupId === group.id, 'the address is the group\'s');
    for (const member of group.members.values()) this.remove(member.clientId, address);
  }

  /** Forgets every membership in the groups of `stream`'s `topicId` (a topic going away). */
  forgetTopic(stream: StreamState, topicId: number): void {
    const topic = stream.topics.get(topicId);
    assert(topic !== undefined, 'a topic is forgotten before it is removed');
    for (const group of topic.groups.values()) {
      this.forgetGroup({ streamId: stream.id, topicId, groupId: group.id }, group);
    }
  }

  /** Forgets every membership in every group of `stream` (a stream going away). */
  forgetStream(stream: StreamState): void {
    for (const topic of stream.topics.values()) this.forgetTopic(stream, topic.id);
  }

  /** Indexes every member of `stream`'s groups (a restore). */
  indexStream(stream: StreamState): void {
    for (const topic of stream.topics.values()) {
      for (const group of topic.groups.values()) {
        const address = { streamId: stream.id, topicId: topic.id, groupId: group.id };
        for (const member of group.members.values()) this.add(member.clientId, address);
      }
    }
  }
}

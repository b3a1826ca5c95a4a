/**
 * Consumer-group membership and deterministic partition assignment.
 *
 * Assignment is Iggy's `rebalance_members` (round robin by member order): with members ordered by
 * member id and the topic's partitions by id, partition i goes to member i mod memberCount. It is
 * recomputed from scratch on every membership change (join, leave, client removal) and on every
 * repartition (create/delete partitions), and each recomputation bumps the group's generation so
 * clients can tell their assignment is stale. Being a pure function of (member ids, partition ids)
 * it needs nothing beyond the snapshot to reproduce, and each member's list comes out ascending,
 * the snapshot's canonical order.
 *
 * Iggy's join path instead hands partitions over cooperatively (pending revocations drained by the
 * data plane); vrmeta has no data plane in the loop, so every change is an eager recomputation.
 */
import { assert } from '../stdx/assert.js';
import type { GroupState, MemberState } from './state.js';

/**
 * Partition i -> member i mod n, members by ascending id. Returns one ascending list per member.
 * Partition ids are dense (0..partitionsCount-1, partition-store.ts), so the count is all it needs.
 */
export function assignPartitions(memberCount: number, partitionsCount: number): number[][] {
  const assignment: number[][] = Array.from({ length: memberCount }, () => []);
  if (memberCount === 0) return assignment;
  for (let id = 0; id < partitionsCount; id++) assignment[id % memberCount]!.push(id);
  return assignment;
}

/**
 * Recomputes every member's partitions for a topic of `partitionsCount` and bumps the generation.
 */
export function rebalance(group: GroupState, partitionsCount: number): void {
  const members = group.members.toArray();
  const assignment = assignPartitions(members.length, partitionsCount);
  members.forEach((member, index) => {
    member.partitions = Object.freeze(assignment[index]!);
  });
  group.generation += 1;
  assert(Number.isSafeInteger(group.generation), 'group generation stays a safe integer');
}

export function memberOf(group: GroupState, clientId: bigint): MemberState | undefined {
  for (const member of group.members.values()) if (member.clientId === clientId) return member;
  return undefined;
}

/** Adds `clientId` at the lowest free member id and rebalances. The caller checks capacity. */
export function join(group: GroupState, clientId: bigint, partitionsCount: number): void {
  assert(memberOf(group, clientId) === undefined, 'a client joins a group once');
  group.members.insert((id) => ({ id, clientId, partitions: [] }));
  rebalance(group, partitionsCount);
}

/** Removes `clientId` and rebalances; false when the client is not a member. */
export function leave(group: GroupState, clientId: bigint, partitionsCount: number): boolean {
  const member = memberOf(group, clientId);
  if (member === undefined) return false;
  group.members.remove(member.id);
  rebalance(group, partitionsCount);
  return true;
}

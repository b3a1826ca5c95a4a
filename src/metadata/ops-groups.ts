/**
 * Consumer groups: create, delete, join, leave, and the removal of a client from every group when
 * its session ends (a committed Logout, or a session evicted by a committed Register).
 *
 * Check order follows Iggy's gate: stream and topic are resolved (their not-found codes), then
 * topic read access is checked, and only then is the group resolved, so an unauthorized caller
 * learns nothing about which groups exist. Membership is per client session
 * (`ApplyInput.clientId`).
 */
import { assert } from '../stdx/assert.js';
import type { ApplyResult } from '../vsr/state-machine.js';
import type { GroupAddress } from './client-groups.js';
import { join, leave, memberOf } from './consumer-groups.js';
import { ErrorCode } from './errors.js';
import { createdGroupReply } from './create-replies.js';
import { OK, rejected, type OpContext } from './op-context.js';
import { resolveStreamTopic, type ResolvedTopic, type TopicAddress } from './ops-streams.js';
import type {
  CreateConsumerGroupRequest,
  DeleteConsumerGroupRequest,
  Identifier,
  JoinConsumerGroupRequest,
  LeaveConsumerGroupRequest,
} from './operations.js';
import { canReadTopic } from './permissions.js';
import { resolveGroup, type GroupState, type MetadataState } from './state.js';
import { validateConsumerGroupName } from './validation.js';

function readableTopic(ctx: OpContext, address: TopicAddress): ResolvedTopic | ErrorCode {
  const resolved = resolveStreamTopic(ctx.state, address);
  if (typeof resolved === 'number') return resolved;
  if (!canReadTopic(ctx.actor, resolved.stream.id, resolved.topic.id)) {
    return ErrorCode.unauthorized;
  }
  return resolved;
}

interface ResolvedGroup extends ResolvedTopic {
  readonly group: GroupState;
}

function addressOf({ stream, topic, group }: ResolvedGroup): GroupAddress {
  return { streamId: stream.id, topicId: topic.id, groupId: group.id };
}

function readableGroup(
  ctx: OpContext,
  address: TopicAddress & { readonly groupId: Identifier },
): ResolvedGroup | ErrorCode {
  const resolved = readableTopic(ctx, address);
  if (typeof resolved === 'number') return resolved;
  const group = resolveGroup(resolved.topic, address.groupId);
  if (group === undefined) return ErrorCode.consumerGroupIdNotFound;
  return { ...resolved, group };
}

export function createConsumerGroup(
  ctx: OpContext,
  request: CreateConsumerGroupRequest,
): ApplyResult {
  const invalid = validateConsumerGroupName(request.name);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const resolved = readableTopic(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { topic } = resolved;
  if (topic.groupIndex.has(request.name)) return rejected(ErrorCode.consumerGroupNameAlreadyExists);
  if (topic.groups.isFull()) return rejected(ErrorCode.consumerGroupsLimitReached);
  if (!ctx.commit) return OK;
  const group = topic.groups.insert((id) => ({
    id,
    name: request.name,
    generation: 0,
    members: ctx.state.newMemberSlab(),
  }));
  topic.groupIndex.set(group.name, group.id);
  return createdGroupReply(topic, group);
}

export function deleteConsumerGroup(
  ctx: OpContext,
  request: DeleteConsumerGroupRequest,
): ApplyResult {
  const resolved = readableGroup(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  if (!ctx.commit) return OK;
  const { topic, group } = resolved;
  ctx.state.clientGroups.forgetGroup(addressOf(resolved), group);
  topic.groups.remove(group.id);
  topic.groupIndex.delete(group.name);
  return OK;
}

export function joinConsumerGroup(ctx: OpContext, request: JoinConsumerGroupRequest): ApplyResult {
  // Client id 0 is reserved (never a session): membership keyed by it could not be cleaned up.
  if (ctx.clientId === 0n) return rejected(ErrorCode.invalidClientId);
  const resolved = readableGroup(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { topic, group } = resolved;
  // Idempotent, as Iggy: a re-join keeps the membership and the assignment (no new generation).
  if (memberOf(group, ctx.clientId) !== undefined) return OK;
  if (group.members.isFull()) return rejected(ErrorCode.consumerGroupMembersLimitReached);
  if (!ctx.commit) return OK;
  join(group, ctx.clientId, topic.partitions.count);
  ctx.state.clientGroups.add(ctx.clientId, addressOf(resolved));
  return OK;
}

export function leaveConsumerGroup(
  ctx: OpContext,
  request: LeaveConsumerGroupRequest,
): ApplyResult {
  const resolved = readableGroup(ctx, request);
  if (typeof resolved === 'number') return rejected(resolved);
  const { topic, group } = resolved;
  if (memberOf(group, ctx.clientId) === undefined) {
    return rejected(ErrorCode.consumerGroupMemberNotFound);
  }
  if (!ctx.commit) return OK;
  const left = leave(group, ctx.clientId, topic.partitions.count);
  assert(left, 'the member checked above leaves');
  ctx.state.clientGroups.remove(ctx.clientId, addressOf(resolved));
  return OK;
}

/**
 * Removes `clientId` from every group it is a member of, each left group rebalancing once.
 * Returns how many. Costs the client's own memberships (client-groups.ts), not the streams.
 */
export function removeClientFromGroups(state: MetadataState, clientId: bigint): number {
  const addresses = state.clientGroups.of(clientId);
  for (const address of addresses) {
    const stream = state.streams.get(address.streamId);
    const topic = stream?.topics.get(address.topicId);
    const group = topic?.groups.get(address.groupId);
    assert(group !== undefined, 'an indexed membership names a live group');
    const left = leave(group, clientId, topic!.partitions.count);
    assert(left, 'an indexed membership is a member');
    state.clientGroups.remove(clientId, address);
  }
  return addresses.length;
}

/** Where a client is a member: (stream, topic, group) ids, ascending. */
export function groupsOfClient(state: MetadataState, clientId: bigint): GroupAddress[] {
  return state.clientGroups.of(clientId);
}

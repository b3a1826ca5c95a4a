/**
 * The data plane as a client edge sees it: SendMessages, Store/DeleteConsumerOffset proposed in
 * the partition group that carries the partition, PollMessages and GetConsumerOffset answered from
 * this replica's committed partition state. Names, permissions and partitions resolve against the
 * committed metadata here, at admission; the partition's `created_at` goes into every prepare as
 * its incarnation, so an operation admitted against a partition that is deleted and recreated
 * meanwhile can never reach the new one.
 *
 * Sessions. A partition group has a client table of its own. The first time a client touches a
 * group through this node, the node registers it there (same client id, so replies and
 * evictions route as for metadata writes) and numbers its requests itself: Iggy's SDKs give every
 * data-plane request the same request number, so the SDK's number cannot identify a send. A
 * retry of a proposal by this node (a forward that timed out, a lost reply) carries the same
 * session and number, which the group's client table answers from its cache: such a retry never
 * appends twice. A send the SDK repeats on its own is a new request.
 */
import type { Kernels } from '../kernels/kernel.js';
import { ErrorCode } from '../metadata/errors.js';
import type { Identifier } from '../metadata/operations.js';
import { canPollMessages, canSendMessages, type Principal } from '../metadata/permissions.js';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import type { TopicAddressView } from '../metadata/queries.js';
import { setBatchChecksum, stampBatch } from '../format/message-batch.js';
import { DataError } from '../partition/codes.js';
import {
  consumerKey,
  decodeDeleteConsumerOffset,
  decodeGetConsumerOffset,
  decodeStoreConsumerOffset,
  encodeConsumerOffsetReply,
  type ConsumerKey,
  type ConsumerOffsetReply,
} from '../partition/consumer-offsets.js';
import type { Consumer, OffsetAddress } from '../partition/consumer.js';
import { packNamespace } from '../partition/namespace.js';
import {
  encodeDeleteOffsetPrepare,
  encodeDropPrepare,
  encodeTrimPrepare,
  encodeSendPrepare,
  encodeStoreOffsetPrepare,
  PartitionOperation,
  type PartitionAddress,
} from '../partition/operations.js';
import { pollPartition } from '../partition/partition-reads.js';
import { decodeSyncConsumerGroup, encodeSyncConsumerGroupReply } from '../partition/consumer-groups.js';
import {
  decodePollMessages,
  encodeEmptyPollReply,
  encodePollReply,
  RESYNC_REQUIRED_PARTITION,
  type PollMessages,
  type PollReply,
} from '../partition/poll-messages.js';
import { choosePartition, decodeSendMessages, type Partitioning } from '../partition/send-messages.js';
import { HEADER_SIZE } from '../constants.js';
import { readClientReply } from '../transport/client-wire.js';
import { Operation } from '../vsr/header.js';
import { encodeRegisterBody, parseResultBody } from '../vsr/reply.js';
import type { DataPlaneApi, DataPlaneCaller } from '../http/node-api.js';
import type { SubmitInput, SubmitOutcome, SubmittingConnection } from './binary-host.js';
import type { PartitionGroup, PartitionGroups } from './partition-groups.js';

/** Group sessions this node remembers (one per client and group it proposed in); oldest dropped. */
export const GROUP_SESSIONS_MAX = 65_536;

/** What a data-plane command answers: a status (0: success) and the body of a success. */
export type EdgeAnswer = { readonly status: number; readonly body: Uint8Array };

export interface PartitionEdgeHost {
  readonly kernels: Kernels;
  readonly state: MetadataStateMachine;
  readonly partitions: PartitionGroups;
  /** Proposes in a group's core (locally or through its primary); see BinarySessions.submit. */
  submit(
    connection: SubmittingConnection | null,
    input: SubmitInput,
    body: Uint8Array,
    target: { readonly core: PartitionGroup['core']; readonly group: bigint },
  ): Promise<SubmitOutcome>;
}

/** Who asks: the connection (null for HTTP), its client id, its user and what it may do. */
export interface EdgeCaller {
  readonly connection: SubmittingConnection | null;
  readonly client: bigint;
  readonly userId: number;
  readonly principal: Principal;
}

interface GroupSession {
  readonly session: number;
  nextRequest: number;
}

type FoundTopic = Extract<TopicAddressView, { readonly found: true }>;

/** A partition resolved against committed metadata. */
interface ResolvedPartition extends PartitionAddress {
  readonly streamId: number;
  readonly topicId: number;
  readonly partitionId: number;
  readonly group: PartitionGroup;
}

const EMPTY = new Uint8Array(0);

function fail(status: number): EdgeAnswer {
  return { status, body: EMPTY };
}

function ok(body: Uint8Array): EdgeAnswer {
  return { status: 0, body };
}

export class PartitionEdge {
  private readonly host: PartitionEdgeHost;
  /** Per topic (`stream:topic`): where balanced partitioning goes next on this node. */
  private readonly balanced = new Map<string, number>();
  private readonly sessions = new Map<string, GroupSession>();

  constructor(host: PartitionEdgeHost) {
    this.host = host;
  }

  get kernels(): Kernels {
    return this.host.kernels;
  }

  // ------------------------------------------------------------ resolution

  private topicOf(streamId: Identifier, topicId: Identifier): FoundTopic | number {
    const found = this.host.state.queries.topicAddress(streamId, topicId);
    if (!found.found) return found.missing === 'stream' ? ErrorCode.streamIdNotFound : ErrorCode.topicIdNotFound;
    return found;
  }

  private partitionOf(topic: FoundTopic, partitionId: number): ResolvedPartition | number {
    const incarnation = topic.incarnationOf(partitionId);
    if (incarnation === null) return DataError.partitionNotFound;
    const packed = packNamespace({ streamId: topic.streamId, topicId: topic.topicId, partitionId });
    if (!packed.ok) return DataError.partitionNotFound;
    const namespace = packed.value;
    const group = this.host.partitions.groupOf(namespace);
    return { namespace, incarnation, streamId: topic.streamId, topicId: topic.topicId, partitionId, group };
  }

  /** The key a consumer's offsets are stored under: a group by its numeric id, resolved here. */
  private keyOf(consumer: Consumer, streamId: number, topicId: number): ConsumerKey | number {
    if (consumer.kind === 'group' && consumer.id.kind === 'name') {
      const group = this.host.state.queries.consumerGroup({ kind: 'id', id: streamId }, { kind: 'id', id: topicId }, consumer.id);
      if (group === null) return ErrorCode.consumerGroupIdNotFound;
      return { kind: 'group', id: group.id };
    }
    const key = consumerKey(consumer);
    return key.ok ? key.value : DataError.invalidCommand;
  }

  // ------------------------------------------------------------ proposals

  /**
   * Proposes `body` as `operation` in the partition's group under the caller's session there
   * (registered on first use, and again once if the group evicted it). The committed reply's
   * result, or the transient code of a proposal that did not complete.
   */
  private async propose(caller: EdgeCaller, group: PartitionGroup, operation: number, body: Uint8Array): Promise<{ code: number; payload: Uint8Array }> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const session = await this.sessionIn(caller, group);
      if (typeof session === 'number') return { code: session, payload: EMPTY };
      const request = session.nextRequest;
      session.nextRequest += 1;
      const input = {
        client: caller.client,
        operation,
        session: session.session,
        request,
        requestChecksum: this.host.kernels.xxh3_64(body),
        userId: caller.userId,
      };
      const outcome = await this.host.submit(caller.connection, input, body, { core: group.core, group: group.group });
      if (outcome.kind === 'eviction') {
        // The group's table let this session go (or never had it): register again, once.
        this.sessions.delete(sessionKey(group, caller.client));
        continue;
      }
      return resultOf(outcome);
    }
    return { code: ErrorCode.transientNotAccepted, payload: EMPTY };
  }

  private async sessionIn(caller: EdgeCaller, group: PartitionGroup): Promise<GroupSession | number> {
    const key = sessionKey(group, caller.client);
    const known = this.sessions.get(key);
    if (known !== undefined) return known;
    const input = { client: caller.client, operation: Operation.register, session: 0, request: 0, requestChecksum: 0n, userId: caller.userId };
    const target = { core: group.core, group: group.group };
    const outcome = await this.host.submit(caller.connection, input, encodeRegisterBody(caller.userId), target);
    if (outcome.kind !== 'reply') return transientCode(outcome);
    const reply = readClientReply(outcome.frame);
    if (reply.status !== 0) return reply.status;
    const session: GroupSession = { session: Number(reply.op), nextRequest: 1 };
    if (this.sessions.size >= GROUP_SESSIONS_MAX) this.sessions.delete(this.sessions.keys().next().value!);
    this.sessions.set(key, session);
    return session;
  }

  /**
   * Proposes DropPartition of `address` in `group` as `caller` (the node's own session there):
   * for an incarnation committed metadata no longer has. The committed result code, or the
   * transient code of a proposal that did not complete (the next scan proposes it again).
   */
  async drop(caller: EdgeCaller, group: PartitionGroup, address: PartitionAddress): Promise<number> {
    const result = await this.propose(caller, group, PartitionOperation.dropPartition, encodeDropPrepare(address));
    return result.code;
  }

  /**
   * Proposes TrimPartition of `address` in `group` as `caller`: retention raised the partition's
   * first offset to `floor`. The committed result code, or a transient one (the next scan tries
   * again).
   */
  async trim(caller: EdgeCaller, group: PartitionGroup, address: PartitionAddress, floor: number): Promise<number> {
    const body = encodeTrimPrepare({ ...address, floor });
    const result = await this.propose(caller, group, PartitionOperation.trimPartition, body);
    return result.code;
  }

  // ------------------------------------------------------------ commands

  /** SendMessages (101): the reply body is Iggy's, not result-framed. */
  async send(caller: EdgeCaller, body: Uint8Array): Promise<EdgeAnswer> {
    const { kernels } = this.host;
    const decoded = decodeSendMessages(body, (batch) => kernels.messageBatchVerify(batch));
    if (!decoded.ok) return fail(decoded.code);
    return this.sendBatch(caller, decoded.value);
  }

  /**
   * Appends one verified producer batch to the partition `partitioning` picks: the reply body is
   * the confirmation (count u32, then stream, topic, partition u32 and base offset u64).
   */
  async sendBatch(caller: EdgeCaller, request: { streamId: Identifier; topicId: Identifier; partitioning: Partitioning; batch: Uint8Array }): Promise<EdgeAnswer> {
    const { kernels } = this.host;
    const topic = this.topicOf(request.streamId, request.topicId);
    if (typeof topic === 'number') return fail(topic);
    if (!canSendMessages(caller.principal, topic.streamId, topic.topicId)) return fail(ErrorCode.unauthorized);
    const topicKey = `${topic.streamId}:${topic.topicId}`;
    const choice = choosePartition(request.partitioning, topic.partitionsCount, this.balanced.get(topicKey) ?? 0);
    if (!choice.ok) return fail(choice.code);
    this.balanced.set(topicKey, choice.balancedCounter);
    const partition = this.partitionOf(topic, choice.partitionId);
    if (typeof partition === 'number') return fail(partition);
    // Admission stamps the partition (the batch checksum covers it); offsets and time are the
    // partition machine's, at apply.
    const batch = request.batch.slice();
    stampBatch(batch, { partitionId: partition.partitionId, baseOffset: 0, baseTimestampUs: 0 });
    setBatchChecksum(batch, kernels.messageBatchChecksum(batch));
    const prepare = encodeSendPrepare({ namespace: partition.namespace, incarnation: partition.incarnation, batch });
    const result = await this.propose(caller, partition.group, PartitionOperation.sendMessages, prepare);
    return result.code === 0 ? ok(result.payload) : fail(result.code);
  }

  /** StoreConsumerOffset (121): a result-framed empty success. */
  async storeOffset(caller: EdgeCaller, body: Uint8Array): Promise<EdgeAnswer> {
    const decoded = decodeStoreConsumerOffset(body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    return this.storeOffsetAt(caller, decoded.value, decoded.value.offset);
  }

  async storeOffsetAt(caller: EdgeCaller, address: OffsetAddress, value: bigint): Promise<EdgeAnswer> {
    const target = this.offsetTarget(caller, address);
    if (typeof target === 'number') return fail(target);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) return fail(DataError.invalidOffset);
    const offset = Number(value);
    const prepare = encodeStoreOffsetPrepare({ ...target.partition, consumer: target.key, offset });
    const result = await this.propose(caller, target.partition.group, PartitionOperation.storeConsumerOffset, prepare);
    return result.code === 0 ? ok(RESULT_OK) : fail(result.code);
  }

  /** DeleteConsumerOffset (122): a result-framed empty success. */
  async deleteOffset(caller: EdgeCaller, body: Uint8Array): Promise<EdgeAnswer> {
    const decoded = decodeDeleteConsumerOffset(body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    return this.deleteOffsetAt(caller, decoded.value);
  }

  async deleteOffsetAt(caller: EdgeCaller, address: OffsetAddress): Promise<EdgeAnswer> {
    const target = this.offsetTarget(caller, address);
    if (typeof target === 'number') return fail(target);
    const prepare = encodeDeleteOffsetPrepare({ ...target.partition, consumer: target.key });
    const result = await this.propose(caller, target.partition.group, PartitionOperation.deleteConsumerOffset, prepare);
    return result.code === 0 ? ok(RESULT_OK) : fail(result.code);
  }

  /**
   * The partition and key of an offset command. A group's offsets need the partition named
   * (Iggy: InvalidIdentifier); a plain consumer's default to partition 0.
   */
  private offsetTarget(caller: EdgeCaller, address: { consumer: Consumer; streamId: Identifier; topicId: Identifier; partitionId: number | null }): { partition: ResolvedPartition; key: ConsumerKey } | number {
    const topic = this.topicOf(address.streamId, address.topicId);
    if (typeof topic === 'number') return topic;
    if (!canPollMessages(caller.principal, topic.streamId, topic.topicId)) return ErrorCode.unauthorized;
    if (address.consumer.kind === 'group' && address.partitionId === null) return DataError.invalidIdentifier;
    const partition = this.partitionOf(topic, address.partitionId ?? 0);
    if (typeof partition === 'number') return partition;
    const key = this.keyOf(address.consumer, topic.streamId, topic.topicId);
    if (typeof key === 'number') return key;
    return { partition, key };
  }

  /** GetConsumerOffset (120): the 20-byte record, or the empty body of "none stored". */
  getOffset(caller: EdgeCaller, body: Uint8Array): EdgeAnswer {
    const decoded = decodeGetConsumerOffset(body);
    // As Iggy: an undecodable Get answers the empty body ("no offset"), not an error.
    if (!decoded.ok) return ok(EMPTY);
    const found = this.offsetOf(caller, decoded.value);
    return typeof found === 'number' ? fail(found) : ok(encodeConsumerOffsetReply(found));
  }

  /** A consumer's stored offset in a partition (null: none stored), or the code refusing it. */
  offsetOf(caller: EdgeCaller, address: OffsetAddress): ConsumerOffsetReply | null | number {
    const target = this.offsetTarget(caller, { ...address, partitionId: address.partitionId ?? 0 });
    if (typeof target === 'number') return target;
    const { machine } = target.partition.group;
    const stored = machine.storedOffset(target.partition, target.key);
    if (stored === null) return null;
    const view = machine.partition(target.partition);
    const currentOffset = view === null || view.nextOffset === 0 ? 0 : view.nextOffset - 1;
    return { partitionId: target.partition.partitionId, currentOffset, storedOffset: stored };
  }

  /**
   * PollMessages (100), from this replica's committed state. With auto_commit the consumer's
   * offset is stored (replicated) at the last offset returned before the poll answers.
   */
  async poll(caller: EdgeCaller, body: Uint8Array): Promise<EdgeAnswer> {
    const decoded = decodePollMessages(body);
    // Iggy answers a poll body that does not decode with the empty poll, not an error.
    if (!decoded.ok) return ok(encodeEmptyPollReply(0));
    const polled = await this.pollReply(caller, decoded.value);
    if (typeof polled === 'number') return fail(polled);
    return ok(encodePollReply(polled));
  }

  /**
   * A poll's reply (for a group poll the fence turned away: the empty re-sync one), or the code
   * refusing it.
   */
  async pollReply(caller: EdgeCaller, request: PollMessages): Promise<PollReply | number> {
    const target = this.offsetTarget(caller, { ...request, partitionId: request.partitionId ?? (request.consumer.kind === 'group' ? null : 0) });
    if (typeof target === 'number') return target;
    const { partition, key } = target;
    const fenced = this.groupFence(caller, request.consumer, partition.streamId, partition.topicId, partition.partitionId);
    if (fenced !== null) return fenced;
    const { machine } = partition.group;
    const outcome = pollPartition(machine, this.host.kernels, {
      address: partition,
      partitionId: partition.partitionId,
      strategy: request.strategy,
      count: request.count,
      storedOffset: machine.storedOffset(partition, key),
    });
    if (!outcome.ok) return ErrorCode.invalidFormat;
    if (request.autoCommit && outcome.lastOffset !== null) {
      const prepare = encodeStoreOffsetPrepare({ ...partition, consumer: key, offset: outcome.lastOffset });
      await this.propose(caller, partition.group, PartitionOperation.storeConsumerOffset, prepare);
    }
    return outcome.reply;
  }

  /**
   * SyncConsumerGroup (606): the caller's assignment in the group (generation and partitions),
   * or the empty body for a caller that is no member.
   */
  syncGroup(caller: EdgeCaller, body: Uint8Array): EdgeAnswer {
    const decoded = decodeSyncConsumerGroup(body);
    if (!decoded.ok) return fail(DataError.invalidCommand);
    const { streamId, topicId, groupId } = decoded.value;
    const topic = this.topicOf(streamId, topicId);
    if (typeof topic === 'number') return fail(topic);
    if (!canPollMessages(caller.principal, topic.streamId, topic.topicId)) return fail(ErrorCode.unauthorized);
    const group = this.host.state.queries.consumerGroup(streamId, topicId, groupId);
    if (group === null) return fail(ErrorCode.consumerGroupIdNotFound);
    const member = group.members.find((candidate) => candidate.clientId === caller.client);
    if (member === undefined) return ok(EMPTY);
    return ok(encodeSyncConsumerGroupReply({ generation: group.generation, partitionIds: member.partitions }));
  }

  /**
   * A group poll's fence (Iggy's consumer_group_fence): the caller must be a member and own the
   * partition it names. Not a member: ConsumerGroupMemberNotFound (the SDK joins and syncs
   * again); not its partition: the empty poll with the re-sync sentinel.
   */
  private groupFence(caller: EdgeCaller, consumer: Consumer, streamId: number, topicId: number, partitionId: number): PollReply | number | null {
    if (consumer.kind !== 'group') return null;
    const stream = { kind: 'id' as const, id: streamId };
    const topic = { kind: 'id' as const, id: topicId };
    const group = this.host.state.queries.consumerGroup(stream, topic, consumer.id);
    if (group === null) return ErrorCode.consumerGroupIdNotFound;
    const member = group.members.find((candidate) => candidate.clientId === caller.client);
    if (member === undefined) return DataError.consumerGroupMemberNotFound;
    if (member.partitions.includes(partitionId)) return null;
    return { partitionId: RESYNC_REQUIRED_PARTITION, currentOffset: 0, batches: [] };
  }

  /** Forgets a client's group sessions (its connection closed; a later proposal registers again). */
  forget(client: bigint): void {
    for (const group of this.host.partitions.groups) this.sessions.delete(sessionKey(group, client));
  }
}

/** A result-framed success with no payload (Iggy's Store/DeleteConsumerOffset reply). */
const RESULT_OK = new Uint8Array(4);

function sessionKey(group: PartitionGroup, client: bigint): string {
  return `${group.index}:${client}`;
}

function transientCode(outcome: SubmitOutcome): number {
  return outcome.kind === 'timeout' ? ErrorCode.transientNotCommitted : ErrorCode.transientNotAccepted;
}

function resultOf(outcome: SubmitOutcome): { code: number; payload: Uint8Array } {
  if (outcome.kind !== 'reply') return { code: transientCode(outcome), payload: EMPTY };
  const reply = readClientReply(outcome.frame);
  if (reply.status !== 0) return { code: reply.status, payload: EMPTY };
  const parsed = parseResultBody(outcome.frame.subarray(HEADER_SIZE, reply.size));
  if (!parsed.ok) return { code: parsed.errorCode < 0 ? ErrorCode.invalidFormat : parsed.errorCode, payload: EMPTY };
  return { code: 0, payload: parsed.payload };
}

/** HTTP data-plane calls in flight on one node at once; more answer TransientNotAccepted. */
export const HTTP_DATA_CLIENTS_MAX = 256;

/**
 * The data plane for the HTTP edge. An HTTP request has no connection or session of its own on
 * the data plane, and a client id carries one request at a time, so each call borrows a client
 * id of the node's (kept for reuse, so its group sessions are reused too).
 */
export function httpDataPlane(edge: PartitionEdge, randomClientId: () => bigint): DataPlaneApi {
  const free: bigint[] = [];
  let inUse = 0;
  async function withClient<T>(caller: DataPlaneCaller, run: (edgeCaller: EdgeCaller) => Promise<T>): Promise<T | number> {
    if (free.length === 0 && inUse >= HTTP_DATA_CLIENTS_MAX) return ErrorCode.transientNotAccepted;
    const client = free.pop() ?? randomClientId();
    inUse += 1;
    try {
      return await run({ connection: null, client, userId: caller.userId, principal: caller.principal });
    } finally {
      inUse -= 1;
      free.push(client);
    }
  }
  const reads = (caller: DataPlaneCaller): EdgeCaller => ({ connection: null, client: 0n, userId: caller.userId, principal: caller.principal });
  return {
    kernels: edge.kernels,
    async send(caller, input) {
      const answer = await withClient(caller, (edgeCaller) => edge.sendBatch(edgeCaller, input));
      if (typeof answer === 'number') return answer;
      if (answer.status !== 0) return answer.status;
      const view = new DataView(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength);
      return {
        streamId: view.getUint32(4, true),
        topicId: view.getUint32(8, true),
        partitionId: view.getUint32(12, true),
        baseOffset: Number(view.getBigUint64(16, true)),
      };
    },
    async poll(caller, request) {
      // Only an auto-commit proposes; a plain poll borrows no client.
      if (!request.autoCommit) return edge.pollReply(reads(caller), request);
      const polled = await withClient(caller, (edgeCaller) => edge.pollReply(edgeCaller, request));
      return polled;
    },
    async storeOffset(caller, address, offset) {
      const answer = await withClient(caller, (edgeCaller) => edge.storeOffsetAt(edgeCaller, address, offset));
      return typeof answer === 'number' ? answer : answer.status;
    },
    async deleteOffset(caller, address) {
      const answer = await withClient(caller, (edgeCaller) => edge.deleteOffsetAt(edgeCaller, address));
      return typeof answer === 'number' ? answer : answer.status;
    },
    offset(caller, address) {
      return edge.offsetOf(reads(caller), address);
    },
  };
}

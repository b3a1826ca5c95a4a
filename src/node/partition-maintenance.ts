/**
 * The node's own proposals in the partition groups it leads: DropPartition of partitions whose
 * incarnation committed metadata left behind, and TrimPartition where retention (message expiry,
 * max topic size) lets a partition's oldest segments go. Both are decided on this replica's view
 * and replicated, so every replica frees the same partitions and stops serving the same offsets
 * at the same commit.
 */
import { MESSAGE_SIZE_MAX } from '../constants.js';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import { unpackNamespace } from '../partition/namespace.js';
import type { PartitionAddress } from '../partition/operations.js';
import type { TopicAddressView } from '../metadata/queries.js';
import { partitionPolicy, retentionFloor } from '../partition/retention.js';
import type { EdgeCaller, PartitionEdge } from './partition-edge.js';
import type { PartitionGroup, PartitionGroups } from './partition-groups.js';

type FoundTopic = Extract<TopicAddressView, { readonly found: true }>;

/** A data-plane namespace resolved against committed metadata. */
export interface MetadataIncarnation {
  readonly streamId: number;
  readonly topicId: number;
  readonly partitionId: number;
  /** The live incarnation, or null: the topic or the partition is gone. */
  readonly live: number | null;
  /** The topic's settings retention reads (null while the topic is gone). */
  readonly topic: Pick<FoundTopic, 'messageExpiryUs' | 'maxTopicSizeBytes' | 'partitionsCount'> | null;
}

/**
 * The partition a data-plane namespace names, with the incarnation committed metadata holds live
 * for it, or null when the namespace is malformed.
 */
export function metadataIncarnation(
  state: MetadataStateMachine,
  namespace: number,
): MetadataIncarnation | null {
  const parts = unpackNamespace(BigInt(namespace));
  if (!parts.ok) return null;
  const { streamId, topicId, partitionId } = parts.value;
  const topic = state.queries.topicAddress({ kind: 'id', id: streamId }, { kind: 'id', id: topicId });
  if (!topic.found) return { streamId, topicId, partitionId, live: null, topic: null };
  return { streamId, topicId, partitionId, live: topic.incarnationOf(partitionId), topic };
}

/**
 * Whether committed metadata has left incarnation `held` behind for good: a newer one is live
 * (purged, or deleted and recreated), or none is while this replica's metadata has applied ops
 * past `held` (deleted). A held incarnation newer than everything this replica's metadata applied
 * was created by metadata it has not applied yet, and is never dead.
 */
export function incarnationIsDead(
  live: number | null,
  held: number,
  appliedTimestampUs: number,
): boolean {
  if (live !== null) return live > held;
  return held <= appliedTimestampUs;
}

export interface PartitionMaintenanceOptions {
  readonly state: MetadataStateMachine;
  readonly partitions: PartitionGroups;
  readonly edge: () => PartitionEdge;
  /** The node's own client in the partition groups. */
  readonly caller: EdgeCaller;
  /** The metadata group's commit number. */
  readonly metadataCommit: () => number;
  readonly log: (event: string, fields: Record<string, unknown>) => void;
  readonly nowUs: () => number;
}

export class PartitionMaintenance {
  private readonly options: PartitionMaintenanceOptions;
  /** Proposals sent and not yet answered (`kind:namespace.incarnation`). */
  private readonly inFlight = new Set<string>();
  /** What the last scan for dead partitions saw (metadata commit and group views), if clean. */
  private dropsScannedAt = '';

  constructor(options: PartitionMaintenanceOptions) {
    this.options = options;
  }

  /**
   * Proposes, in each partition group this replica leads, DropPartition of every partition whose
   * incarnation committed metadata has provably left behind (`incarnationIsDead`). That frees its
   * files and offsets on every replica. Scans again only once the metadata or a group moved (a
   * view, a commit), or the last scan found something: nothing when idle.
   */
  dropDeadPartitions(): void {
    const groups = this.options.partitions.groups;
    const views = groups.map((group) => `${group.core.view}.${group.core.commitMin}`).join(',');
    const moment = `${this.options.metadataCommit()}:${views}`;
    if (moment === this.dropsScannedAt) return;
    let found = false;
    for (const group of groups) {
      if (!group.core.canAcceptRequests()) continue;
      for (const namespace of group.machine.namespaces()) {
        const held = group.machine.incarnationOf(namespace);
        if (held === null || !this.isDead(namespace, held)) continue;
        found = true;
        const address = { namespace, incarnation: held };
        this.propose('drop', address, () => this.options.edge().drop(this.options.caller, group, address), () =>
          this.options.log('partition_dropped', { namespace, incarnation: held }),
        );
      }
    }
    this.dropsScannedAt = found ? '' : moment;
  }

  private isDead(namespace: number, held: number): boolean {
    const resolved = metadataIncarnation(this.options.state, namespace);
    if (resolved === null) return false;
    return incarnationIsDead(resolved.live, held, this.options.state.appliedTimestampUs);
  }

  /**
   * Proposes, in each partition group this replica leads, TrimPartition of every live partition
   * whose topic's retention lets leading segments go (retention.ts), up to the first segment it
   * keeps. A partition of a topic without expiry or size limit costs one metadata lookup.
   */
  applyRetention(): void {
    const nowUs = this.options.nowUs();
    for (const group of this.options.partitions.groups) {
      if (!group.core.canAcceptRequests()) continue;
      for (const namespace of group.machine.namespaces()) this.retain(group, namespace, nowUs);
    }
  }

  private retain(group: PartitionGroup, namespace: number, nowUs: number): void {
    const held = group.machine.incarnationOf(namespace);
    if (held === null) return;
    const resolved = metadataIncarnation(this.options.state, namespace);
    if (resolved === null || resolved.live !== held || resolved.topic === null) return;
    const policy = partitionPolicy({
      ...resolved.topic,
      segmentSizeBytes: this.options.partitions.segmentSizeBytes,
      messageSizeMax: MESSAGE_SIZE_MAX,
    });
    if (policy.expiryUs === null && policy.budgetBytes === null) return;
    const address = { namespace, incarnation: held };
    const store = group.machine.storeOf(address);
    const view = group.machine.partition(address);
    if (store === null || view === null) return;
    const floor = retentionFloor({
      segments: store.segmentInfos(),
      policy,
      nowUs,
      barrierOffset: group.machine.lowestStoredOffset(address),
      floor: view.firstOffset,
    });
    if (floor === null) return;
    const trim = (): Promise<number> => this.options.edge().trim(this.options.caller, group, address, floor);
    this.propose('trim', address, trim, () =>
      this.options.log('partition_trimmed', { namespace, incarnation: held, first_offset: floor }),
    );
  }

  /** One proposal per kind and partition at a time; `done` runs when it committed with 0. */
  private propose(kind: string, address: PartitionAddress, send: () => Promise<number>, done: () => void): void {
    const key = `${kind}:${address.namespace}.${address.incarnation}`;
    if (this.inFlight.has(key)) return;
    this.inFlight.add(key);
    void send()
      .then((code) => {
        if (code === 0) done();
      })
      .finally(() => this.inFlight.delete(key));
  }
}

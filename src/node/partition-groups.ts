/**
 * The partition groups of one replica (docs/partition-plane.md): PARTITION_GROUPS instances of
 * the same VSR core as the metadata group, each driving a partition state machine, each with a
 * data directory of its own (`partitions/g<index>/`: WAL, superblock, checkpoint, and the segment
 * files of its partitions under a prefix per partition). They share the node's replica bus: a
 * frame goes to the core its group id names. A partition belongs to group
 * `xxh32(namespace) mod PARTITION_GROUPS`, a pure function of its address, so every replica
 * routes it to the same group.
 *
 * Idle cost: a group ticks with the node's clock and exchanges heartbeats with its peers; an idle
 * partition is an entry in its group's state, with no timer and no open file of its own beyond
 * its active segment.
 */
import { join } from 'node:path';
import type { Kernels } from '../kernels/kernel.js';
import { PARTITION_CHECKPOINT_CODEC } from '../partition/checkpoint-codec.js';
import { partitionGroupId, partitionGroupIndex, partitionGroupOf } from '../partition/namespace.js';
import { PartitionStateMachine, type PartitionSnapshot } from '../partition/state-machine.js';
import { FsDisk } from '../storage/fs-disk.js';
import { DiskPartitionStores } from '../storage/partition-stores.js';
import { recoverWith, toReplicaBootState } from '../storage/recovery.js';
import { PRNG_SEED_BYTES, Prng } from '../stdx/prng.js';
import { replicaConfig, type ReplicaConfigInput } from '../vsr/config.js';
import type { DecodedFrame } from '../vsr/frame.js';
import type { Logger } from '../vsr/io.js';
import { Replica } from '../vsr/replica.js';
import { StorageDriver } from './storage-driver.js';

/**
 * Partition groups per cluster. Fixed: a partition's group is its namespace's hash mod this
 * number, so changing it would move partitions between groups (and their logs between
 * directories) under a running cluster.
 */
export const PARTITION_GROUPS = 4;
/** A segment is sealed at this size (Iggy's default segment size is 1 GiB). */
export const SEGMENT_SIZE_BYTES_DEFAULT = 256 * 1024 * 1024;

export interface PartitionGroupsOptions {
  readonly dataDir: string;
  readonly kernels: Kernels;
  /** The replica's core settings; the group id is set per group. */
  readonly config: Omit<ReplicaConfigInput, 'group'> & { readonly journalSlots: number };
  readonly rejoin: boolean;
  readonly logger: (group: number) => Logger;
  readonly randomBytes: (count: number) => Uint8Array;
  readonly sendToReplica: (target: number, frame: Uint8Array) => void;
  readonly sendToReplicaParts: (target: number, header: Uint8Array, body: Uint8Array) => void;
  /** A reply or eviction of a group's core for `client`. */
  readonly sendToClient: (client: bigint, frame: Uint8Array) => void;
  /** Runs a callback into a core; a throw there is fatal for the node. */
  readonly guard: (fn: () => void) => void;
  readonly segmentSizeBytes?: number;
  /** A partition of `group` changed: its statistics are read again. */
  readonly onPartitionChanged?: (group: PartitionGroup, namespace: number) => void;
}

/** One partition group on this replica. */
export class PartitionGroup {
  readonly index: number;
  readonly group: bigint;
  readonly machine: PartitionStateMachine;
  readonly core: Replica<PartitionSnapshot>;
  private readonly storage: StorageDriver<PartitionSnapshot>;
  private readonly disk: FsDisk;

  constructor(index: number, options: PartitionGroupsOptions) {
    this.index = index;
    this.group = partitionGroupId(index);
    const { kernels } = options;
    this.disk = new FsDisk(join(options.dataDir, 'partitions', `g${index}`), { create: true });
    const logger = options.logger(index);
    const recovered = recoverWith(this.disk, kernels, PARTITION_CHECKPOINT_CODEC, {
      cluster: options.config.cluster,
      replica: options.config.replica,
      replicaCount: options.config.replicaCount,
      journalSlots: options.config.journalSlots,
      logger,
    });
    // Checkpoints of a partition group are small (offsets, no messages): encoded in-thread.
    this.storage = new StorageDriver({
      wal: recovered.wal,
      superblock: recovered.superblock,
      snapshotFile: recovered.snapshotFile,
      chunkBuffer: (length) => new Uint8Array(length),
    });
    const segmentSizeBytes = options.segmentSizeBytes ?? SEGMENT_SIZE_BYTES_DEFAULT;
    const stores = new DiskPartitionStores(this.disk, kernels, { segmentSizeBytes, logger });
    this.machine = new PartitionStateMachine({
      kernels,
      stores,
      onChanged: (namespace) => options.onPartitionChanged?.(this, namespace),
    });
    this.core = new Replica({
      config: replicaConfig({ ...options.config, group: this.group }),
      stateMachine: this.machine,
      boot: toReplicaBootState(recovered),
      rejoin: options.rejoin,
      env: {
        kernels,
        storage: { submit: (id, request) => this.storage.submit(id, request) },
        prng: Prng.fromSeedBytes(options.randomBytes(PRNG_SEED_BYTES)),
        clock: { realtimeUs: () => Date.now() * 1000 },
        logger,
        bus: {
          sendToReplica: options.sendToReplica,
          sendToReplicaParts: options.sendToReplicaParts,
          sendToClient: options.sendToClient,
        },
      },
    });
    this.storage.onDone = (id, result) => options.guard(() => this.core.onStorageDone(id, result));
  }

  /** Completes queued writes and releases the directory (shutdown). */
  close(): void {
    this.storage.close();
    this.disk.close();
  }
}

/** Every partition group of this replica. */
export class PartitionGroups {
  readonly groups: readonly PartitionGroup[];
  /** Bytes a segment grows to before the next one starts. */
  readonly segmentSizeBytes: number;

  constructor(options: PartitionGroupsOptions) {
    this.segmentSizeBytes = options.segmentSizeBytes ?? SEGMENT_SIZE_BYTES_DEFAULT;
    this.groups = Array.from({ length: PARTITION_GROUPS }, (_, index) => new PartitionGroup(index, options));
  }

  /** The group that carries `namespace`. */
  groupOf(namespace: number): PartitionGroup {
    return this.groups[partitionGroupOf(namespace, this.groups.length)]!;
  }

  /** The group a frame's group id names, or null when it names no partition group of ours. */
  byGroupId(group: bigint): PartitionGroup | null {
    const index = partitionGroupIndex(group);
    return index === null ? null : (this.groups[index] ?? null);
  }

  /** A frame for one of the groups (the caller checked `byGroupId`). */
  onMessage(group: PartitionGroup, frame: DecodedFrame): void {
    group.core.onMessage(frame);
  }

  tick(): void {
    for (const group of this.groups) group.core.tick();
  }

  onPeerDisconnected(replica: number): void {
    for (const group of this.groups) group.core.onPeerDisconnected(replica);
  }

  close(): void {
    for (const group of this.groups) group.close();
  }
}

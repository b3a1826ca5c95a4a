/**
 * The partition plane on the unchanged VSR core: a partition group's state machine, with its
 * segment stores on each replica's simulated disk, under scenarios and faulty seeds. Every reply
 * is checked against an independent model in commit order (offsets dense per partition, stale
 * incarnations refused, offsets stored only within the log), and after a run every caught-up
 * replica holds exactly the model's log: each committed batch at its offset with its producer's
 * frames, the same bytes on every replica.
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { Command } from '../../src/constants.js';
import { partitionGroupId } from '../../src/partition/namespace.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import { buildFrame, decodeFrame } from '../../src/vsr/frame.js';
import { PARTITION_CHECKPOINT_MAGIC } from '../../src/partition/checkpoint-codec.js';
import { PartitionStateMachine, type PartitionSnapshot } from '../../src/partition/state-machine.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import type { PartitionStores, StoreTruncate } from '../../src/partition/store.js';
import { DiskPartitionStores } from '../../src/storage/partition-stores.js';
import {
  checkPartitionReplicas,
  partitionSimPlane,
  PartitionModel,
  SIM_SEGMENT_BYTES,
} from '../../src/testing/partition-plane.js';
import { scenarioOptions, swarmOptions, type SimOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

function partitionSim(
  overrides: Partial<SimOptions> = {},
  trace?: (line: string) => void,
): { cluster: ClusterSim<PartitionSnapshot>; models: PartitionModel[] } {
  const models: PartitionModel[] = [];
  const options = scenarioOptions({ journalSlots: 16, prepareQueueDepth: 2, clientCount: 3, requestsPerClient: 60, ...overrides });
  const plane = partitionSimPlane(kernels, models);
  const cluster = new ClusterSim(options, kernels, trace === undefined ? { plane } : { plane, trace });
  return { cluster, models };
}

function machines(cluster: ClusterSim<PartitionSnapshot>): (PartitionStateMachine | null)[] {
  return cluster.replicas.map((entry) => {
    const machine = entry.replica?.stateMachine ?? null;
    if (machine === null) return null;
    expect(machine).toBeInstanceOf(PartitionStateMachine);
    return machine as PartitionStateMachine;
  });
}

/** `stores` with every truncateTo outcome of every store it opens pushed onto `cuts`. */
function recordingStores(stores: PartitionStores, cuts: StoreTruncate[]): PartitionStores {
  return {
    list: () => stores.list(),
    remove: (key) => stores.remove(key),
    openStaging: (key) => stores.openStaging(key),
    listStaging: () => stores.listStaging(),
    removeStaging: (key) => stores.removeStaging(key),
    adoptStaging: (key) => stores.adoptStaging(key),
    keepAsStaging: (key) => stores.keepAsStaging(key),
    appendStaging: (key) => stores.appendStaging(key),
    stagingRange: (key) => stores.stagingRange(key),
    open: (key) => {
      const store = stores.open(key);
      return new Proxy(store, {
        get(target, property, receiver) {
          if (property !== 'truncateTo') {
            const value: unknown = Reflect.get(target, property, receiver);
            return typeof value === 'function' ? value.bind(target) : value;
          }
          return (offset: number) => {
            const outcome = target.truncateTo(offset);
            cuts.push(outcome);
            return outcome;
          };
        },
      });
    },
  };
}

function sends(model: PartitionModel): number {
  return [...model.partitions.values()].reduce((sum, partition) => sum + partition.batches.length, 0);
}

describe('the partition plane on the VSR core', () => {
  it('replicates sends and offsets: every replica holds the model log, byte for byte', () => {
    const { cluster, models } = partitionSim();
    cluster.converge();
    const model = models[0]!;
    expect(sends(model)).toBeGreaterThan(40);
    expect(checkPartitionReplicas(machines(cluster), model)).toEqual({ verified: [0, 1, 2], behind: [] });
    // Rotation ran: some partition spans several segments on every replica.
    const segments = machines(cluster).map((machine) =>
      Math.max(...machine!.namespaces().map((namespace) => {
        const incarnation = model.partitions.get(namespace)!.incarnation;
        return machine!.partition({ namespace, incarnation })!.segmentsCount;
      })),
    );
    expect(Math.min(...segments)).toBeGreaterThan(1);
    for (let index = 0; index < 3; index++) {
      const head = new Uint8Array(4);
      cluster.replicas[index]!.store.disk.read(SNAPSHOT_FILE, 0, head);
      expect(head).toEqual(PARTITION_CHECKPOINT_MAGIC);
    }
  });

  it('a restart restores its checkpoint, cuts the stores back to it and replays the journal', () => {
    const { cluster, models } = partitionSim({ requestsPerClient: 80 });
    const interval = cluster.replica(0).config.checkpointInterval;
    const commitMax = (): number => Math.max(...cluster.replicas.map((entry) => entry.replica?.commitMax ?? 0));
    expect(cluster.runUntil(() => commitMax() >= 2 * interval + 5, 20_000), cluster.describe()).toBe(true);
    const victim = (cluster.replica(0).primaryIndex() + 1) % 3;
    expect(cluster.replica(victim).checkpointOp).toBeGreaterThan(0);
    expect(cluster.replica(victim).commitMin).toBeGreaterThan(cluster.replica(victim).checkpointOp);
    // Every cut the restarted replica's stores make, as the store reports it.
    const cuts: StoreTruncate[] = [];
    cluster.stateMachineFactory = (_index, disk) =>
      new PartitionStateMachine({ kernels, stores: recordingStores(new DiskPartitionStores(disk, kernels, { segmentSizeBytes: SIM_SEGMENT_BYTES }), cuts) });
    cluster.crash(victim);
    cluster.restart(victim);
    // Rotation flushed batches applied after the checkpoint: the restore cut them off (the
    // journal's replay appends them again; an append where they still were would assert).
    expect(cuts.filter((cut) => cut.kind === 'cut' && cut.droppedMessages > 0).length).toBeGreaterThan(0);
    expect(cuts.every((cut) => cut.kind === 'cut')).toBe(true);
    cluster.converge();
    expect(checkPartitionReplicas(machines(cluster), models[0]!)).toEqual({ verified: [0, 1, 2], behind: [] });
  });

  it('a partition group names its group on every frame and drops a frame of another group', () => {
    const { cluster } = partitionSim({ requestsPerClient: 5 });
    const sent: bigint[] = [];
    const send = cluster.network.send.bind(cluster.network);
    cluster.network.send = (from, to, frame) => {
      const decoded = decodeFrame(kernels, frame);
      if (decoded.ok && from < 3 && 'group' in decoded.header) sent.push(decoded.header.group);
      send(from, to, frame);
    };
    cluster.converge();
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent)).toEqual(new Set([partitionGroupId(0)]));
    // A newer view's StartView from its primary: adopted from this group, dropped from another.
    const backup = (cluster.replica(0).primaryIndex() + 1) % 3;
    const receiver = cluster.replica(backup);
    let view = receiver.view + 1;
    while (receiver.primaryIndex(view) === backup) view += 1;
    const startView = (group: bigint): Uint8Array =>
      buildFrame(kernels, {
        command: Command.startView,
        cluster: receiver.config.cluster,
        release: 0,
        group,
        view,
        replica: receiver.primaryIndex(view),
        op: receiver.op,
        commit: receiver.commitMax,
        incarnation: 0n,
      });
    const deliver = (frame: Uint8Array): void => {
      const decoded = decodeFrame(kernels, frame);
      if (!decoded.ok) throw new Error('a built frame decodes');
      receiver.onMessage(decoded);
    };
    const viewBefore = receiver.view;
    deliver(startView(METADATA_GROUP));
    expect(receiver.counters.drops['wrong_group']).toBe(1);
    expect(receiver.view).toBe(viewBefore);
    deliver(startView(partitionGroupId(0)));
    expect(receiver.counters.drops['wrong_group']).toBe(1);
    expect(receiver.view).toBe(view);
  });

  it('a replica that lost its disk fetches the messages a checkpoint names before installing it', () => {
    const lines: string[] = [];
    const { cluster, models } = partitionSim({ requestsPerClient: 80 }, (line) => lines.push(line));
    const interval = cluster.replica(0).config.checkpointInterval;
    const commitMax = (): number => Math.max(...cluster.replicas.map((entry) => entry.replica?.commitMax ?? 0));
    // Far enough past two checkpoints that the peers' WALs no longer reach back to op 1.
    expect(cluster.runUntil(() => commitMax() >= 3 * interval + 5, 30_000), cluster.describe()).toBe(true);
    const victim = (cluster.replica(0).primaryIndex() + 1) % 3;
    cluster.crash(victim);
    cluster.loseDisk(victim);
    cluster.restart(victim);
    cluster.converge();
    expect(cluster.transfersInstalledBy(victim)).toBeGreaterThan(0);
    // In that order: the messages staged, then the install; no store ever started short of them.
    const mine = lines.filter((line) => line.includes(` r${victim} `));
    const staged = mine.findIndex((line) => line.includes('"event":"store_backfill_completed"') && line.includes('"before_install":true'));
    const installed = mine.findIndex((line) => line.includes('"event":"state_transfer_installed"'));
    expect(staged).toBeGreaterThanOrEqual(0);
    expect(installed).toBeGreaterThan(staged);
    expect(mine.filter((line) => line.includes('"event":"store_backfill_started"') && line.includes('"before_install":false'))).toEqual([]);
    const model = models[0]!;
    expect(checkPartitionReplicas(machines(cluster), model)).toEqual({ verified: [0, 1, 2], behind: [] });
    // Whole from offset 0, as many offsets as the model, on the replica that lost everything.
    const machine = machines(cluster)[victim]!;
    for (const [namespace, expected] of model.partitions) {
      const view = machine.partition({ namespace, incarnation: expected.incarnation })!;
      const store = machine.storeOf({ namespace, incarnation: expected.incarnation })!;
      expect(store.stats().startOffset).toBe(0);
      expect(view.messagesCount).toBe(expected.nextOffset);
    }
  });

  it.each([3_575_201_128_067, 2_988_446_570_496, 1_079_348_238_590, 4_411_000_123, 77_777_777])(
    'faulty seed %i: replies match the model and every replica holds its whole log',
    (seed) => {
      const models: PartitionModel[] = [];
      const options = swarmOptions(seed);
      const sim = new ClusterSim(options, kernels, { plane: partitionSimPlane(kernels, models) });
      const result = sim.run();
      expect(result.failure, result.log.join('\n')).toBeNull();
      expect(result.checkpoints).toBeGreaterThan(0);
      // Converged means every store's start was fetched back: each replica holds the whole log.
      const check = checkPartitionReplicas(machines(sim), models[0]!);
      const all = Array.from({ length: options.replicaCount }, (_, index) => index);
      expect(check).toEqual({ verified: all, behind: [] });
      expect(sends(models[0]!)).toBeGreaterThan(0);
    },
  );
});

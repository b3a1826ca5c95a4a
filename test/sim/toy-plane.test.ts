/**
 * One VSR core for two planes: the simulator runs the unchanged core with a second, toy state
 * machine whose snapshot type and checkpoint codec are its own (test/support/toy-plane.ts).
 * Checkpoints are written in the toy format, a restarted replica restores the toy machine from
 * its own checkpoint, a replica that lost its disk installs a toy checkpoint by state transfer,
 * and whole faulty seeds pass every checker (replies, commit history, checkpoint ids).
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { scenarioOptions, swarmOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';
import {
  TOY_CHECKPOINT_CODEC,
  TOY_MAGIC,
  TOY_PLANE,
  ToyStateMachine,
  type ToySnapshot,
} from '../support/toy-plane.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

function toySim(): ClusterSim<ToySnapshot> {
  const options = scenarioOptions({
    journalSlots: 16,
    prepareQueueDepth: 2,
    stateChunkSize: 64,
    clientCount: 3,
    requestsPerClient: 40,
  });
  return new ClusterSim(options, kernels, { plane: TOY_PLANE });
}

function machineOf(cluster: ClusterSim<ToySnapshot>, index: number): ToyStateMachine {
  const machine = cluster.replica(index).stateMachine;
  expect(machine).toBeInstanceOf(ToyStateMachine);
  return machine as ToyStateMachine;
}

function commitMax(cluster: ClusterSim<ToySnapshot>): number {
  return Math.max(...cluster.replicas.map((entry) => entry.replica?.commitMax ?? 0));
}

/** The first bytes of a replica's `snapshot.bin` at rest. */
function snapshotHead(cluster: ClusterSim<ToySnapshot>, index: number): Uint8Array {
  const head = new Uint8Array(TOY_MAGIC.byteLength);
  expect(cluster.replicas[index]!.store.disk.read(SNAPSHOT_FILE, 0, head)).toBe(head.byteLength);
  return head;
}

describe('a second plane on the same core', () => {
  it('the toy codec round-trips a model and refuses damaged bytes with an offset', () => {
    const model = {
      op: 24,
      createdAtUs: 1_700_000_000_000_024,
      writerRelease: 0x0001_0000,
      clientTable: [
        {
          slot: 1,
          clientId: (1n << 100n) + 7n,
          epoch: 3,
          userId: 0,
          watermark: 9,
          watermarkChecksum: (1n << 127n) + 5n,
          reply: new Uint8Array([1, 2, 3]),
        },
      ],
      machine: { names: [{ id: 0, name: 'ünï', createdAtUs: 11 }, { id: 2, name: 'b', createdAtUs: 12 }] },
    };
    const payload = TOY_CHECKPOINT_CODEC.encode(kernels, model);
    expect(TOY_CHECKPOINT_CODEC.formatVersion(payload)).toBe(1);
    expect(TOY_CHECKPOINT_CODEC.decode(payload)).toEqual({ ok: true, model });
    const truncated = TOY_CHECKPOINT_CODEC.decode(payload.subarray(0, payload.byteLength - 1));
    expect(truncated).toMatchObject({ ok: false, message: expect.stringMatching(/truncated in name/) });
    const longer = new Uint8Array(payload.byteLength + 1);
    longer.set(payload);
    expect(TOY_CHECKPOINT_CODEC.decode(longer)).toEqual({
      ok: false,
      message: 'toy snapshot has trailing bytes',
      offset: payload.byteLength,
    });
    expect(TOY_CHECKPOINT_CODEC.formatVersion(new Uint8Array([0x94, 4]))).toBeNull();
  });

  it('checkpoints in the toy format, a restart restores from one, a lost disk installs one', () => {
    const cluster = toySim();
    const interval = cluster.replica(0).config.checkpointInterval;
    expect(cluster.runUntil(() => commitMax(cluster) >= 2 * interval + 2, 20_000), cluster.describe()).toBe(true);
    expect(cluster.runUntil(() => cluster.replicas.every((entry) => entry.replica!.checkpointOp > 0), 5_000)).toBe(true);
    for (let index = 0; index < 3; index++) expect(snapshotHead(cluster, index)).toEqual(TOY_MAGIC);

    // A restart boots the toy machine from its own checkpoint (the core restores it, opaque).
    const primary = cluster.replica(0).primaryIndex();
    const restarted = (primary + 1) % 3;
    cluster.crash(restarted);
    cluster.restart(restarted);
    expect(cluster.replica(restarted).checkpointOp).toBeGreaterThan(0);
    expect(machineOf(cluster, restarted).restores).toBe(1);

    // A lost disk: the replica rejoins by state transfer of a toy checkpoint.
    const wiped = (primary + 2) % 3;
    cluster.crash(wiped);
    const before = commitMax(cluster);
    expect(cluster.runUntil(() => commitMax(cluster) >= before + 2 * interval, 20_000), cluster.describe()).toBe(true);
    cluster.loseDisk(wiped);
    cluster.restart(wiped);
    cluster.converge();
    expect(cluster.replica(wiped).counters.stateTransfersInstalled).toBeGreaterThan(0);
    expect(machineOf(cluster, wiped).restores).toBeGreaterThan(0);
    expect(snapshotHead(cluster, wiped)).toEqual(TOY_MAGIC);
    const states = [0, 1, 2].map((index) => machineOf(cluster, index).snapshot());
    expect(states[0]!.names.length).toBeGreaterThan(0);
    expect(states[1]).toEqual(states[0]);
    expect(states[2]).toEqual(states[0]);
  });

  it.each([3_575_201_128_067, 2_988_446_570_496, 1_079_348_238_590])(
    'faulty seed %i passes every checker with the toy plane',
    (seed) => {
      const result = new ClusterSim(swarmOptions(seed), kernels, { plane: TOY_PLANE }).run();
      expect(result.failure, result.log.join('\n')).toBeNull();
      expect(result.ok).toBe(true);
      expect(result.checkpoints).toBeGreaterThan(0);
      expect(result.transfers).toBeGreaterThan(0);
    },
  );
});

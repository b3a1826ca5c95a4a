/**
 * Checkpoints are encoded by the storage, after the core captured the model at the checkpoint op
 * (the node encodes on a worker thread): commits go on meanwhile, and the checkpoint id exists
 * only once the write completed.
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

function sim(overrides: Parameters<typeof scenarioOptions>[0] = {}): ClusterSim {
  return new ClusterSim(scenarioOptions(overrides), kernels);
}

describe('asynchronous checkpoint', () => {
  // Every request prepared at once (prepare_eager_max = the depth): ops are in the WAL queue
  // before the checkpoint op commits, so they can commit while its write is held.
  const options = { replicaCount: 1, clientCount: 6, requestsPerClient: 30, journalSlots: 32, prepareQueueDepth: 8, prepareEagerMax: 8, storageLatencyMaxTicks: 8 };

  it('commits continue past the checkpoint op while its snapshot is pending; the id is recorded only at completion', () => {
    const reference = sim(options);
    const interval = reference.replica(0).config.checkpointInterval;
    expect(reference.runUntil(() => reference.replica(0).checkpointIds.has(interval), 20_000)).toBe(true);
    const expected = reference.replica(0).checkpointIds.get(interval)!;

    const cluster = sim(options);
    const replica = () => cluster.replica(0);
    const storage = cluster.replicas[0]!.storage;
    storage.holdKinds.add('checkpoint_write');
    // Ops prepared before the checkpoint op committed commit while the snapshot is held.
    expect(cluster.runUntil(() => replica().commitMin > interval, 20_000), cluster.describe()).toBe(true);
    expect(storage.pendingKinds[0]).toBe('checkpoint_write');
    expect(replica().checkpointIds.has(interval)).toBe(false);
    expect(replica().checkpointOp).toBe(0);
    expect(replica().checkpointChecksum).toBe(0n);

    storage.holdKinds.clear();
    expect(cluster.runUntil(() => replica().checkpointIds.has(interval), 1_000)).toBe(true);
    // The model captured at the op encodes to the id the undisturbed run computed at the op,
    // though later ops were applied before it was encoded.
    expect(replica().checkpointIds.get(interval)).toBe(expected);
    expect(replica().checkpointOp).toBe(interval);
    expect(replica().checkpointChecksum).toBe(expected);
    // And the run completes with every checker (checkpoint ids included) satisfied.
    cluster.converge();
  });
});

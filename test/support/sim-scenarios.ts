/**
 * What the hand-built simulator scenarios share: a small cluster whose WAL, pipeline and chunks
 * are tiny (checkpoints every 12 ops, transfers of many chunks), and the wait for a cluster that
 * formed its first view.
 */
import { expect } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

/** A scenario cluster with a 16-slot WAL, a pipeline of 2 and 64-byte state chunks. */
export function smallSim(overrides: Parameters<typeof scenarioOptions>[0] = {}): ClusterSim {
  const options = { journalSlots: 16, prepareQueueDepth: 2, stateChunkSize: 64, ...overrides };
  return new ClusterSim(scenarioOptions(options), kernels);
}

/** Waits until every replica is normal in a view it formed (a single replica needs no view). */
export function formed(cluster: ClusterSim): void {
  const ok = cluster.runUntil(
    () =>
      cluster.replicas.every(
        (entry) =>
          entry.replica !== null &&
          entry.replica.status === 'normal' &&
          (entry.replica.logView >= 1 || cluster.options.replicaCount === 1),
      ),
    5_000,
  );
  expect(ok, cluster.describe()).toBe(true);
}

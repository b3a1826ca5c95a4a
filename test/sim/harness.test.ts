/**
 * The simulator's split (TigerBeetle's `vopr.zig` vs `testing/cluster.zig`): the cluster harness
 * injects no fault of its own, whatever the options ask for; the fault schedule and the verdict
 * plug into it (`ClusterSim`). A fault that creeps back into the harness would fire in every
 * scenario that drives it by hand.
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { Cluster } from '../../src/testing/cluster.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

/** Options that ask for frequent crashes, restarts, lost disks and starved backups. */
const FAULTY = scenarioOptions({
  seed: 42,
  crashProbability: 0.01,
  restartProbability: 0.05,
  diskLossProbability: 0.5,
  starveProbability: 0.01,
  starveMeanTicks: 50,
  superblockBurstProbability: 0.01,
});
const TICKS = 1_500;

describe('simulator layout', () => {
  it('the bare harness runs faulty options fault-free: every request answered, nothing crashed', () => {
    const cluster = new Cluster(FAULTY, kernels);
    expect(cluster.runUntil(() => cluster.clients.every((client) => client.idle), TICKS)).toBe(true);
    const counts = cluster.counts();
    expect(counts.crashes).toBe(0);
    expect(counts.wipes).toBe(0);
    expect(counts.commits).toBeGreaterThan(0);
    expect(cluster.replicas.map((entry) => entry.replica?.status)).toEqual(['normal', 'normal', 'normal']);
  });

  it('the simulator injects the faults the same options ask for, and its counters say so', () => {
    const sim = new ClusterSim(FAULTY, kernels);
    for (let tick = 0; tick < TICKS; tick++) sim.tick();
    expect(sim.counts().crashes).toBeGreaterThan(0);
    expect(sim.faults.counters.starvations).toBeGreaterThan(0);
    expect(sim.faults.counters.superblockBursts).toBeGreaterThan(0);
    sim.converge();
  });
});

/**
 * Batching at the primary (src/vsr/batch.ts): several queued client requests in one prepare.
 * Each scenario runs every checker (canonical history request by request, replies against the
 * model, exactly-once, checkpoint ids, no acknowledged op lost).
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { ClusterSim } from '../../src/testing/vopr.js';
import { NETWORK_NO_FAULTS } from '../../src/testing/network-sim.js';
import { TestStateMachine } from '../../src/testing/test-state-machine.js';
import type { ApplyInput, ApplyResult } from '../../src/vsr/state-machine.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

function sim(overrides: Parameters<typeof scenarioOptions>[0] = {}): ClusterSim {
  return new ClusterSim(scenarioOptions(overrides), kernels);
}

/** Counts the state machine's applies per op: an op applied more than once carried a batch. */
class RecordingStateMachine extends TestStateMachine {
  readonly appliesByOp = new Map<number, number>();
  override apply(input: ApplyInput): ApplyResult {
    this.appliesByOp.set(input.op, (this.appliesByOp.get(input.op) ?? 0) + 1);
    return super.apply(input);
  }
}

function batchedOps(machine: RecordingStateMachine): number[] {
  return [...machine.appliesByOp].filter(([, count]) => count > 1).map(([op]) => op);
}

function primaryOf(cluster: ClusterSim): number {
  return cluster.replicas.find((entry) => entry.replica !== null && entry.replica.status === 'normal' && entry.replica.isPrimary())!.index;
}

/** Sum of a counter over every live replica (each primary counts the batches it prepared). */
function counted(cluster: ClusterSim, counter: 'batchesPrepared' | 'requestsBatched'): number {
  return cluster.replicas.reduce((sum, entry) => sum + (entry.replica?.counters[counter] ?? 0), 0);
}

const LOAD = { clientCount: 6, requestsPerClient: 15, prepareQueueDepth: 1, journalSlots: 64 } as const;
const REQUESTS = LOAD.clientCount * LOAD.requestsPerClient;
/** Links cut by a scenario stay cut until it heals them (converge does). */
const CUTS_HOLD = { ...NETWORK_NO_FAULTS, unpartitionProbability: 0 };

describe('batching at the primary', () => {
  it('with a one-deep pipeline and six clients, queued requests commit several to a prepare and every client gets its replies', () => {
    const cluster = sim(LOAD);
    cluster.converge();
    expect(counted(cluster, 'batchesPrepared')).toBeGreaterThan(0);
    expect(counted(cluster, 'requestsBatched')).toBeGreaterThanOrEqual(2 * counted(cluster, 'batchesPrepared'));
    expect(cluster.checker.batchesCommitted).toBe(counted(cluster, 'batchesPrepared'));
    // Fewer prepares than requests: 6 registers plus 90 writes in fewer than 96 ops.
    expect(cluster.checker.historyLength).toBeLessThan(LOAD.clientCount + REQUESTS);
    expect(cluster.checker.requestsCommitted).toBe(LOAD.clientCount + REQUESTS);
    // Every client received a reply to every request (the checker matched each to its canonical reply).
    for (const client of cluster.clients) expect(client.repliesReceived).toBeGreaterThanOrEqual(1 + LOAD.requestsPerClient);
    expect(cluster.checker.repliesChecked).toBeGreaterThanOrEqual(LOAD.clientCount + REQUESTS);
    // Every replica applied the same requests to the same state.
    const states = cluster.replicas.map((entry) => JSON.stringify(entry.replica!.stateMachine.snapshot()));
    expect(new Set(states).size).toBe(1);
  });

  it('prepare_batch_max 1 turns batching off: the same load commits one request per prepare', () => {
    const cluster = sim({ ...LOAD, prepareBatchMax: 1 });
    cluster.converge();
    expect(counted(cluster, 'batchesPrepared')).toBe(0);
    expect(cluster.checker.batchesCommitted).toBe(0);
    expect(cluster.checker.historyLength).toBe(LOAD.clientCount + REQUESTS);
  });

  it('prepare_batch_max bounds the requests of one prepare', () => {
    const cluster = sim({ ...LOAD, prepareBatchMax: 2 });
    cluster.converge();
    expect(cluster.checker.batchesCommitted).toBeGreaterThan(0);
    expect(cluster.checker.requestsBatched).toBe(2 * cluster.checker.batchesCommitted);
  });

  it('a request arriving while a prepare is in flight waits for its commit and leaves batched, even with a deep pipeline', () => {
    // 32 prepares of room: the pipeline is never full, so batches form only because a request
    // that finds a prepare in flight parks (prepare_eager_max 1, the default with batching on).
    const deep = { ...LOAD, prepareQueueDepth: 32, journalSlots: 256 };
    const cluster = sim(deep);
    cluster.converge();
    expect(cluster.replica(0).config.prepareEagerMax).toBe(1);
    expect(counted(cluster, 'batchesPrepared')).toBeGreaterThan(0);
    expect(cluster.checker.historyLength).toBeLessThan(LOAD.clientCount + REQUESTS);
    for (const client of cluster.clients) expect(client.repliesReceived).toBeGreaterThanOrEqual(1 + LOAD.requestsPerClient);
    // The rule it replaces, every request prepared at once while the pipeline has room: the same
    // load never queues, so it never batches.
    const eager = sim({ ...deep, prepareEagerMax: 32 });
    eager.converge();
    expect(counted(eager, 'batchesPrepared')).toBe(0);
    expect(eager.checker.historyLength).toBe(LOAD.clientCount + REQUESTS);
  });

  it('with batching off (prepare_batch_max 1) requests still prepare at once while the pipeline has room', () => {
    const cluster = sim({ ...LOAD, prepareQueueDepth: 32, journalSlots: 256, prepareBatchMax: 1 });
    expect(cluster.replica(0).config.prepareEagerMax).toBe(32);
    cluster.converge();
    expect(counted(cluster, 'batchesPrepared')).toBe(0);
  });

  it('a single client never batches: its prepares are plain, as before batching', () => {
    const cluster = sim({ clientCount: 1, requestsPerClient: 20, prepareQueueDepth: 1, journalSlots: 64 });
    cluster.converge();
    expect(cluster.checker.batchesCommitted).toBe(0);
    expect(cluster.checker.historyLength).toBe(21);
  });

  it('a restarted backup replays the batches in its WAL to the same state as the cluster', () => {
    // journal_slots 128: no checkpoint below op 126, so the restart replays every op from the WAL.
    const cluster = sim({ ...LOAD, requestsPerClient: 10, journalSlots: 128 });
    const machines = new Map<number, RecordingStateMachine>();
    cluster.stateMachineFactory = (index) => {
      const machine = new RecordingStateMachine();
      machines.set(index, machine);
      return machine;
    };
    cluster.converge();
    expect(cluster.checker.batchesCommitted).toBeGreaterThan(0);
    const backup = (primaryOf(cluster) + 1) % 3;
    const before = cluster.replica(backup).stateMachine.snapshot();
    const commitMin = cluster.replica(backup).commitMin;
    cluster.crash(backup);
    cluster.restart(backup);
    // The constructor replayed the provably committed prefix of the WAL, batches included, each
    // request reported to the checker and compared with the canonical reply.
    const replayed = machines.get(backup)!;
    expect(batchedOps(replayed).length).toBeGreaterThan(0);
    cluster.converge();
    expect(cluster.replica(backup).commitMin).toBeGreaterThanOrEqual(commitMin);
    expect(cluster.replica(backup).stateMachine.snapshot()).toEqual(before);
    expect(cluster.replica(backup).stateMachine.snapshot()).toEqual(cluster.replica(primaryOf(cluster)).stateMachine.snapshot());
  });

  /** Runs until a primary prepares its first batch (just sent); returns that primary and the batch's op. */
  function untilBatchPrepared(cluster: ClusterSim): { primary: number; op: number } {
    expect(cluster.runUntil(() => counted(cluster, 'batchesPrepared') >= 1, 20_000), cluster.describe()).toBe(true);
    const primary = primaryOf(cluster);
    expect(cluster.replica(primary).counters.batchesPrepared).toBe(1);
    return { primary, op: cluster.replica(primary).op };
  }

  it('a client retrying while its batch waits for a quorum is not prepared again (its entry names every client of the batch)', () => {
    for (const seed of [1, 2, 3]) {
      // A four-deep pipeline queues up to eight requests: room for every retry the primary admits.
      const cluster = sim({ ...LOAD, prepareQueueDepth: 4, requestsPerClient: 30, seed, network: CUTS_HOLD });
      const { primary, op } = untilBatchPrepared(cluster);
      // PrepareOks never reach the primary: the batch stays in its pipeline while every client
      // times out and retries (rotating through the replicas, so each retry reaches the primary).
      for (const backup of [0, 1, 2]) if (backup !== primary) cluster.network.cutLink(backup, primary);
      cluster.runUntil(() => false, 400);
      expect(cluster.replica(primary).commitMin).toBeLessThan(op);
      cluster.converge(); // heals; the checker would see a retried request committed twice
      expect(cluster.clients.every((client) => client.idle)).toBe(true);
    }
  });

  it('a primary elected with an uncommitted batch in its log holds the batch\'s clients in flight while they retry', () => {
    for (const seed of [1, 2, 3]) {
      const cluster = sim({ ...LOAD, seed, network: CUTS_HOLD });
      const { primary, op } = untilBatchPrepared(cluster);
      const backups = [0, 1, 2].filter((index) => index !== primary);
      for (const backup of backups) cluster.network.cutLink(backup, primary);
      expect(cluster.runUntil(() => backups.every((backup) => cluster.replica(backup).op >= op), 1_000)).toBe(true);
      cluster.crash(primary);
      // The next primary re-replicates the batch; its PrepareOks are cut off so it cannot commit
      // it while the batch's clients retry against it.
      const elected = () => backups.find((index) => cluster.replica(index).status === 'normal' && cluster.replica(index).isPrimary());
      expect(cluster.runUntil(() => elected() !== undefined, 5_000), cluster.describe()).toBe(true);
      const leader = elected()!;
      const other = backups.find((index) => index !== leader)!;
      cluster.network.cutLink(other, leader);
      expect(cluster.replica(leader).commitMin).toBeLessThan(op);
      cluster.runUntil(() => false, 400);
      expect(cluster.replica(leader).commitMin).toBeLessThan(op);
      cluster.restart(primary);
      cluster.converge();
      expect(cluster.clients.every((client) => client.idle)).toBe(true);
    }
  });
});

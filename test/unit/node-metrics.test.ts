/**
 * The node layer's metrics (src/node/node-metrics.ts), driven by a fake core and storage
 * requests: which events are measured, with which labels, and what is not measured.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { NodeMetrics, type CoreView } from '../../src/node/node-metrics.js';
import { EvictionReason } from '../../src/vsr/header-types.js';
import type { CheckpointWritten, VsrState } from '../../src/vsr/io.js';
import { checkpointWrite } from './storage-fixtures.js';

interface FakeCore {
  view: number;
  op: number;
  commitMax: number;
  status: 'normal' | 'view_change' | 'recovering';
  primary: boolean;
  transferring: boolean;
  counters: { stateTransfersInstalled: number; requestsDropped: number; clientTableEvictions: number; batchesPrepared: number; requestsBatched: number; payloadsReleased: number };
}

function fakeCore(): FakeCore & CoreView {
  const core = {
    view: 0,
    op: 0,
    commitMax: 0,
    status: 'normal' as FakeCore['status'],
    primary: true,
    transferring: false,
    counters: { stateTransfersInstalled: 0, requestsDropped: 0, clientTableEvictions: 0, batchesPrepared: 0, requestsBatched: 0, payloadsReleased: 0 },
    isPrimary: () => core.primary,
    stateTransfer: {
      get transferring() {
        return core.transferring;
      },
    },
  };
  return core;
}

function setup(sources: Partial<ConstructorParameters<typeof NodeMetrics>[1]> = {}) {
  const core = fakeCore();
  const metrics = new NodeMetrics(() => core, {
    framesDropped: () => ({}),
    httpSessionEvictions: () => ({}),
    tcpEvictions: () => ({}),
    ...sources,
  });
  const registry = new Registry();
  metrics.register(registry);
  return { core, metrics, registry };
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`${name} is not registered`);
  const data = await metric.get();
  const matching = data.values.filter(
    (entry) => (entry as { metricName?: string }).metricName === undefined || (entry as { metricName?: string }).metricName === name,
  );
  return matching
    .filter((entry) => Object.entries(labels).every(([key, wanted]) => String((entry.labels as Record<string, unknown>)[key]) === wanted))
    .reduce((sum, entry) => sum + entry.value, 0);
}

async function histogramCount(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const data = await registry.getSingleMetric(name)!.get();
  return data.values
    .filter((entry) => (entry as { metricName?: string }).metricName === `${name}_count`)
    .filter((entry) => Object.entries(labels).every(([key, wanted]) => String((entry.labels as Record<string, unknown>)[key]) === wanted))
    .reduce((sum, entry) => sum + entry.value, 0);
}

const superblock = (checkpointOp: number): VsrState => ({ checkpointOp }) as unknown as VsrState;
/** What a checkpoint write of `bytes` returns (only the payload's length matters here). */
const written = (bytes: number): CheckpointWritten => ({ payload: new Uint8Array(bytes), checksum: 7n, chunkChecksums: [] });

describe('NodeMetrics', () => {
  it('counts each forward move of the view once, but not the view it booted in', async () => {
    const { core, metrics, registry } = setup();
    core.view = 5;
    metrics.observeCore(core);
    expect(await value(registry, 'vsr_view_changes_total')).toBe(0);
    core.view = 6;
    metrics.observeCore(core);
    metrics.observeCore(core);
    core.view = 9;
    metrics.observeCore(core);
    expect(await value(registry, 'vsr_view_changes_total')).toBe(2);
  });

  it("times prepare -> commit on the primary only, for the ops it prepared", async () => {
    const { core, metrics, registry } = setup();
    core.op = 10;
    core.commitMax = 10;
    metrics.observeCore(core); // a primary starts timing above its current op
    core.op = 13;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_prepare_to_commit_seconds')).toBe(0);
    core.commitMax = 12;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_prepare_to_commit_seconds')).toBe(2);
    core.commitMax = 13;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_prepare_to_commit_seconds')).toBe(3);
    // A backup commits too, but its ops were prepared elsewhere: nothing is timed.
    core.primary = false;
    core.op = 20;
    metrics.observeCore(core);
    core.commitMax = 20;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_prepare_to_commit_seconds')).toBe(3);
    // Primary again: ops prepared by the previous primary are not ours to time.
    core.primary = true;
    core.op = 25;
    metrics.observeCore(core);
    core.commitMax = 25;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_prepare_to_commit_seconds')).toBe(3);
  });

  it('times state transfers by outcome', async () => {
    const { core, metrics, registry } = setup();
    core.transferring = true;
    metrics.observeCore(core);
    core.transferring = false;
    metrics.observeCore(core);
    core.transferring = true;
    metrics.observeCore(core);
    core.counters.stateTransfersInstalled += 1;
    core.transferring = false;
    metrics.observeCore(core);
    expect(await histogramCount(registry, 'vsr_state_transfer_duration_seconds', { outcome: 'abandoned' })).toBe(1);
    expect(await histogramCount(registry, 'vsr_state_transfer_duration_seconds', { outcome: 'installed' })).toBe(1);
  });

  it('a checkpoint is its snapshot write followed by the superblock that names it', async () => {
    const { metrics, registry } = setup();
    metrics.storageSubmitted(1, checkpointWrite(16));
    metrics.storageDone(1, { ok: true, checkpoint: written(3000) });
    // Another superblock (a view change) does not end it.
    metrics.storageSubmitted(2, { kind: 'superblock_write', state: superblock(0), stateTransfer: false });
    metrics.storageDone(2, { ok: true });
    expect(await histogramCount(registry, 'vsr_checkpoint_duration_seconds')).toBe(0);
    metrics.storageSubmitted(3, { kind: 'superblock_write', state: superblock(16), stateTransfer: false });
    metrics.storageDone(3, { ok: true });
    expect(await histogramCount(registry, 'vsr_checkpoint_duration_seconds')).toBe(1);
    expect(await histogramCount(registry, 'vsr_checkpoint_size_bytes')).toBe(1);
    const sizes = await registry.getSingleMetric('vsr_checkpoint_size_bytes')!.get();
    expect(sizes.values.find((entry) => (entry as { metricName?: string }).metricName === 'vsr_checkpoint_size_bytes_sum')?.value).toBe(3000);
    // Counted once: a later superblock naming the same checkpoint is not another one.
    metrics.storageSubmitted(4, { kind: 'superblock_write', state: superblock(16), stateTransfer: false });
    metrics.storageDone(4, { ok: true });
    expect(await histogramCount(registry, 'vsr_checkpoint_duration_seconds')).toBe(1);
    // A failed snapshot write is no checkpoint.
    metrics.storageSubmitted(5, checkpointWrite(32));
    metrics.storageDone(5, { ok: false, error: 'EIO' });
    metrics.storageSubmitted(6, { kind: 'superblock_write', state: superblock(32), stateTransfer: false });
    metrics.storageDone(6, { ok: true });
    expect(await histogramCount(registry, 'vsr_checkpoint_duration_seconds')).toBe(1);
  });

  it('a checkpoint_write is a checkpoint whose size is the payload the storage encoded', async () => {
    const { metrics, registry } = setup();
    const model = { op: 16, createdAtUs: 1, writerRelease: 0, clientTable: [], machine: { users: [], streams: [], revokedTokens: [] } };
    metrics.storageSubmitted(1, { kind: 'checkpoint_write', op: 16, model, chunkSize: 1024 });
    metrics.storageDone(1, { ok: true, checkpoint: { payload: new Uint8Array(2500), checksum: 7n, chunkChecksums: [1n, 2n, 3n] } });
    metrics.storageSubmitted(2, { kind: 'superblock_write', state: superblock(16), stateTransfer: false });
    metrics.storageDone(2, { ok: true });
    expect(await histogramCount(registry, 'vsr_checkpoint_duration_seconds')).toBe(1);
    const sizes = await registry.getSingleMetric('vsr_checkpoint_size_bytes')!.get();
    expect(sizes.values.find((entry) => (entry as { metricName?: string }).metricName === 'vsr_checkpoint_size_bytes_sum')?.value).toBe(2500);
  });

  it('times client requests by transport and outcome, and WAL fsyncs', async () => {
    const { metrics, registry } = setup();
    metrics.startRequest('http')('reply');
    metrics.startRequest('tcp')('timeout');
    metrics.startRequest('tcp')('reply');
    metrics.observeFsync(0.002);
    expect(await histogramCount(registry, 'vsr_client_request_duration_seconds', { transport: 'http', outcome: 'reply' })).toBe(1);
    expect(await histogramCount(registry, 'vsr_client_request_duration_seconds', { transport: 'tcp' })).toBe(2);
    expect(await histogramCount(registry, 'vsr_wal_fsync_duration_seconds')).toBe(1);
  });

  it('mirrors drops and evictions owned elsewhere, with named eviction reasons', async () => {
    const { core, registry } = setup({
      framesDropped: () => ({ queue_full: 4, self: 1 }),
      httpSessionEvictions: () => ({ capacity: 2, evicted: 1 }),
      tcpEvictions: () => ({ [EvictionReason.noSession]: 3, [EvictionReason.sessionTooLow]: 1 }),
      idleCollections: () => 2,
      fetchCollections: () => 5,
    });
    core.counters.requestsDropped = 7;
    core.counters.payloadsReleased = 4;
    core.counters.clientTableEvictions = 5;
    core.counters.batchesPrepared = 3;
    core.counters.requestsBatched = 11;
    expect(await value(registry, 'vsr_replica_frames_dropped_total', { reason: 'queue_full' })).toBe(4);
    expect(await value(registry, 'vsr_replica_frames_dropped_total', { reason: 'self' })).toBe(1);
    expect(await value(registry, 'vsr_requests_dropped_total')).toBe(7);
    expect(await value(registry, 'vsr_client_table_evictions_total')).toBe(5);
    expect(await value(registry, 'vsr_prepare_batches_total')).toBe(3);
    expect(await value(registry, 'vsr_prepare_batched_requests_total')).toBe(11);
    expect(await value(registry, 'vsr_checkpoint_payloads_released_total')).toBe(4);
    expect(await value(registry, 'vsr_idle_collections_total')).toBe(2);
    expect(await value(registry, 'vsr_fetch_collections_total')).toBe(5);
    expect(await value(registry, 'vsr_session_evictions_total', { transport: 'http', reason: 'capacity' })).toBe(2);
    expect(await value(registry, 'vsr_session_evictions_total', { transport: 'tcp', reason: 'no_session' })).toBe(3);
    expect(await value(registry, 'vsr_session_evictions_total', { transport: 'tcp', reason: 'session_too_low' })).toBe(1);
    // Read at every scrape: the values follow their sources.
    core.counters.requestsDropped = 9;
    expect(await value(registry, 'vsr_requests_dropped_total')).toBe(9);
  });
});

/**
 * `vrmeta bench targets`: each scale target is judged from the figures of the run, and a
 * target whose comparison is missing (no etcd) says so instead of passing or failing.
 */
import { describe, expect, it } from 'vitest';
import type { ClusterBenchReport, ClusterBenchRow } from '../../bench/cluster.js';
import { formatTargetsReport, targetRows, type TargetsReport } from '../../bench/targets.js';
import type { TransferBenchReport } from '../../bench/transfer.js';

const MIB = 1024 * 1024;

function transfer(overrides: { catchUpMs?: number; etcdCatchUpMs?: number | null; restartMs?: number; fetchMBps?: number; floorMBps?: number; primaryRss?: number; fetchGrowth?: number } = {}): TransferBenchReport {
  const snapshotBytes = 64 * MIB;
  return {
    transfers: [
      {
        kernels: 'wasm',
        sizeMiB: 64,
        snapshotBytes,
        catchUpMs: overrides.catchUpMs ?? 450,
        fetchMBps: overrides.fetchMBps ?? 600,
        rssFetchGrowthBytes: overrides.fetchGrowth ?? 10 * MIB,
        peerRssBytes: 250 * MIB,
        backupRssBytes: 240 * MIB,
        settledRssBytes: { primary: overrides.primaryRss ?? 250 * MIB, backup: 220 * MIB, rejoined: 170 * MIB },
      },
    ],
    etcdTransfers: overrides.etcdCatchUpMs === null ? [] : [{ sizeMiB: 64, catchUpMs: overrides.etcdCatchUpMs ?? 700 }],
    recoveries: [
      { system: 'vrmeta', kernels: 'wasm', sizeMiB: 64, restartMs: overrides.restartMs ?? 380, walOps: 956 },
      { system: 'etcd', kernels: null, sizeMiB: 64, restartMs: 600, walOps: 64_000 },
    ],
    socketBaseline: [{ sizeMiB: 64, mbps: overrides.floorMBps ?? 700 }],
  } as unknown as TransferBenchReport;
}

function row(system: 'vrmeta' | 'etcd', concurrency: number, opsPerS: number, p99: number, cpu: number, vsEtcd: number | null): ClusterBenchRow {
  return { system, protocol: 'http', concurrency, opsPerS, latencyMsP99: p99, serverCpuMsPerOp: cpu, vsEtcd } as unknown as ClusterBenchRow;
}

function cluster(ratio: number, levels: readonly number[] = [1, 8, 64]): ClusterBenchReport {
  const rows = levels.flatMap((level) => [row('vrmeta', level, 1000 * ratio, 10, 0.5, ratio), row('etcd', level, 1000, 20, 1, null)]);
  return { rows } as unknown as ClusterBenchReport;
}

const verdicts = (rows: ReturnType<typeof targetRows>) => Object.fromEntries(rows.map((r) => [r.figure.split(',')[0]!, r.met]));

describe('bench targets', () => {
  it('judges every target met when every figure is within it', () => {
    const rows = targetRows(transfer(), cluster(1.6), cluster(1.6, [64]));
    expect(rows).toHaveLength(9);
    expect(rows.every((r) => r.met === true)).toBe(true);
  });

  it('names each target a figure misses', () => {
    const rows = targetRows(
      transfer({ catchUpMs: 800, restartMs: 500, fetchMBps: 400, primaryRss: 320 * MIB, fetchGrowth: 18 * MIB }),
      cluster(0.8),
      cluster(0.7, [64]),
    );
    const judged = verdicts(rows);
    expect(judged['wiped replica']).toBe(false);
    expect(judged['restart with a full WAL (956 ops)']).toBe(false);
    expect(judged['chunk fetch rate']).toBe(false);
    expect(judged['RSS of a replica holding the state']).toBe(false);
    expect(judged['RSS growth while fetching']).toBe(false);
    expect(judged['HTTP writes/s vs etcd']).toBe(false);
    // p99 and CPU per write of the synthetic rows are below etcd's: those two hold.
    expect(judged['p99']).toBe(true);
    expect(judged['server CPU per write']).toBe(true);
    expect(rows.find((r) => r.figure.startsWith('chunk fetch rate'))!.measured).toBe('400.0 MB/s, floor 700.0 MB/s (57%)');
  });

  it('a catch-up under 500 ms but slower than etcd does not meet its target', () => {
    const rows = targetRows(transfer({ catchUpMs: 450, etcdCatchUpMs: 400 }), cluster(1.6), cluster(1.6, [64]));
    expect(verdicts(rows)['wiped replica']).toBe(false);
  });

  it('without etcd, the comparisons are not measured rather than judged', () => {
    const rows = targetRows(transfer({ etcdCatchUpMs: null }), { rows: [] } as unknown as ClusterBenchReport, { rows: [] } as unknown as ClusterBenchReport);
    const judged = verdicts(rows);
    expect(judged['wiped replica']).toBeNull();
    expect(judged['HTTP writes/s vs etcd']).toBeNull();
    expect(judged['restart with a full WAL (956 ops)']).toBe(true);
    const report = { bench: 'targets', machine: 'm', smoke: false, rows } as unknown as TargetsReport;
    expect(formatTargetsReport(report)).toContain('| not measured |');
  });
});

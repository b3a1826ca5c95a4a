/**
 * `vrmeta bench targets`: the scale targets (docs/benchmarks.md, "Scale targets") in one
 * table from one command. It runs, in this order and on this machine:
 *
 *   1. `bench transfer --sizes 64 --kernels wasm` with etcd: the wiped replica's catch-up, the
 *      restart with a full WAL, the chunk fetch against the bare node:net floor of the same run,
 *      the RSS while fetching and of each replica after 12 s idle;
 *   2. `bench cluster --protocol http --clients 1,8,64 --kernels wasm` with etcd, a login each:
 *      writes/s, p99 and server CPU per write against etcd in the same interleaved rounds;
 *   3. the same at 64 clients sharing one login (`--shared-login`, the server's default pool).
 *
 * and states each target with its measured figure and whether it holds (ratios from one run: the
 * machine is shared and noisy; read a single run as one sample). The realistic shape and the
 * growth curve have their own command (`bench transfer --sizes 1,64,256 --shape realistic`).
 */
import { runClusterBench, type ClusterBenchReport, type ClusterBenchRow } from './cluster.js';
import { formatMiB, formatMs, formatRatio } from './load.js';
import { runTransferBench, type TransferBenchReport } from './transfer.js';

const MIB = 1024 * 1024;
/** The snapshot size the issue's transfer targets are stated at. */
const TARGET_SIZE_MIB = 64;
const HTTP_LEVELS = [1, 8, 64] as const;
const SHARED_LOGIN_LEVEL = 64;

export interface TargetsBenchOptions {
  readonly smoke: boolean;
  /** Measured seconds per level and system in the cluster benches (default 6). */
  readonly durationS?: number;
  readonly log?: (line: string) => void;
}

export interface TargetRow {
  readonly figure: string;
  readonly target: string;
  readonly measured: string;
  /** null: not measured in this run (a smoke run, or etcd missing where the target compares to it). */
  readonly met: boolean | null;
}

export interface TargetsReport {
  readonly bench: 'targets';
  readonly machine: string;
  readonly smoke: boolean;
  readonly rows: TargetRow[];
  readonly transfer: TransferBenchReport;
  readonly cluster: ClusterBenchReport;
  readonly sharedLogin: ClusterBenchReport;
}

export async function runTargetsBench(options: TargetsBenchOptions): Promise<TargetsReport> {
  const log = options.log ?? (() => {});
  const durationS = options.durationS ?? 6;
  const sizesMiB = options.smoke ? [1] : [TARGET_SIZE_MIB];
  log(`[targets] 1/3 bench transfer --sizes ${sizesMiB.join(',')} --kernels wasm`);
  const transfer = await runTransferBench({ smoke: options.smoke, kernels: ['wasm'], sizesMiB, log });
  log('[targets] 2/3 bench cluster --protocol http --clients 1,8,64 --kernels wasm');
  const common = { smoke: options.smoke, kernels: ['wasm'] as const, protocols: ['http'] as const, durationS, log };
  const cluster = await runClusterBench({ ...common, levels: HTTP_LEVELS });
  log(`[targets] 3/3 bench cluster --protocol http --clients ${SHARED_LOGIN_LEVEL} --shared-login`);
  const sharedLogin = await runClusterBench({ ...common, levels: [SHARED_LOGIN_LEVEL], sharedLogin: true });
  return {
    bench: 'targets',
    machine: transfer.machine,
    smoke: options.smoke,
    rows: targetRows(transfer, cluster, sharedLogin),
    transfer,
    cluster,
    sharedLogin,
  };
}

/** The HTTP row of `system` at `level` (vrmeta: wasm kernels). */
function httpRow(report: ClusterBenchReport, system: 'vrmeta' | 'etcd', level: number): ClusterBenchRow | undefined {
  return report.rows.find((row) => row.system === system && row.protocol === 'http' && row.concurrency === level);
}

/** Each scale target with what this run measured. Pure: the reports in, the rows out. */
export function targetRows(transfer: TransferBenchReport, cluster: ClusterBenchReport, sharedLogin: ClusterBenchReport): TargetRow[] {
  const rows: TargetRow[] = [];
  const caught = transfer.transfers.find((row) => row.kernels === 'wasm');
  const etcdCaught = transfer.etcdTransfers.find((row) => row.sizeMiB === caught?.sizeMiB);
  const size = caught === undefined ? '' : `, ${formatMiB(caught.snapshotBytes)} snapshot`;
  if (caught !== undefined) {
    const faster = etcdCaught === undefined ? null : caught.catchUpMs < etcdCaught.catchUpMs;
    rows.push({
      figure: `wiped replica, start -> ready${size}`,
      target: '<= 500 ms and faster than etcd in the same run',
      measured: `${formatMs(caught.catchUpMs)}${etcdCaught === undefined ? ' (no etcd)' : `, etcd ${formatMs(etcdCaught.catchUpMs)} (${formatRatio(caught.catchUpMs / etcdCaught.catchUpMs)})`}`,
      met: faster === null ? null : caught.catchUpMs <= 500 && faster,
    });
  }
  const restart = transfer.recoveries.find((row) => row.system === 'vrmeta' && row.kernels === 'wasm');
  const etcdRestart = transfer.recoveries.find((row) => row.system === 'etcd' && row.sizeMiB === restart?.sizeMiB);
  if (restart !== undefined) {
    rows.push({
      figure: `restart with a full WAL (${restart.walOps} ops)${size}`,
      target: '<= 400 ms',
      measured: `${formatMs(restart.restartMs)}${etcdRestart === undefined ? '' : ` (etcd ${formatMs(etcdRestart.restartMs)})`}`,
      met: restart.restartMs <= 400,
    });
  }
  const floor = transfer.socketBaseline.find((row) => row.sizeMiB === caught?.sizeMiB);
  if (caught !== undefined && caught.fetchMBps !== null) {
    const share = floor === undefined ? null : caught.fetchMBps / floor.mbps;
    rows.push({
      figure: 'chunk fetch rate',
      target: '>= 80% of the bare node:net floor of the same run, >= 500 MB/s',
      measured: `${caught.fetchMBps.toFixed(1)} MB/s${floor === undefined ? '' : `, floor ${floor.mbps.toFixed(1)} MB/s (${Math.round((share ?? 0) * 100)}%)`}`,
      met: share === null ? null : share >= 0.8 && caught.fetchMBps >= 500,
    });
  }
  if (caught !== undefined) {
    const bound = 1.5 * caught.snapshotBytes + 200 * MIB;
    const settled = caught.settledRssBytes;
    const held = settled === null ? [caught.peerRssBytes, caught.backupRssBytes] : [settled.primary, settled.backup, settled.rejoined];
    rows.push({
      figure: `RSS of a replica holding the state${settled === null ? '' : ', after 12 s idle'}`,
      target: `<= 1.5x the snapshot + 200 MiB (${formatMiB(bound)})`,
      measured: settled === null ? `primary ${formatMiB(caught.peerRssBytes)}, backup ${formatMiB(caught.backupRssBytes)}` : `primary ${formatMiB(settled.primary)}, backup ${formatMiB(settled.backup)}, rejoined ${formatMiB(settled.rejoined)}`,
      met: Math.max(...held) <= bound,
    });
    if (caught.rssFetchGrowthBytes !== null) {
      rows.push({
        figure: 'RSS growth while fetching',
        target: '<= 16 MiB',
        measured: `+${formatMiB(caught.rssFetchGrowthBytes)}`,
        met: caught.rssFetchGrowthBytes <= 16 * MIB,
      });
    }
  }
  const levels: string[] = [];
  const p99s: string[] = [];
  const cpus: string[] = [];
  let writesMet: boolean | null = true;
  let p99Met: boolean | null = true;
  let cpuMet: boolean | null = true;
  for (const level of HTTP_LEVELS) {
    const ours = httpRow(cluster, 'vrmeta', level);
    const theirs = httpRow(cluster, 'etcd', level);
    if (ours === undefined || theirs === undefined || ours.vsEtcd === null) {
      writesMet = p99Met = cpuMet = null;
      continue;
    }
    levels.push(formatRatio(ours.vsEtcd));
    p99s.push(`${ours.latencyMsP99.toFixed(1)} / ${theirs.latencyMsP99.toFixed(1)} ms`);
    cpus.push(`${ours.serverCpuMsPerOp.toFixed(2)} / ${theirs.serverCpuMsPerOp.toFixed(2)} ms`);
    if (writesMet !== null) writesMet &&= ours.vsEtcd >= 1.5;
    if (p99Met !== null) p99Met &&= ours.latencyMsP99 <= theirs.latencyMsP99;
    if (cpuMet !== null) cpuMet &&= ours.serverCpuMsPerOp <= theirs.serverCpuMsPerOp;
  }
  const measuredOr = (values: string[]): string => (values.length === 0 ? 'not measured (no etcd)' : values.join(' · '));
  rows.push({ figure: 'HTTP writes/s vs etcd, 1 · 8 · 64 clients, a login each', target: '>= 1.5x at every level', measured: measuredOr(levels), met: writesMet });
  rows.push({ figure: 'p99, vrmeta / etcd, 1 · 8 · 64 clients', target: "<= etcd's", measured: measuredOr(p99s), met: p99Met });
  rows.push({ figure: 'server CPU per write, vrmeta / etcd, 1 · 8 · 64 clients', target: "<= etcd's", measured: measuredOr(cpus), met: cpuMet });
  const shared = httpRow(sharedLogin, 'vrmeta', SHARED_LOGIN_LEVEL);
  rows.push({
    figure: `HTTP writes/s vs etcd, ${SHARED_LOGIN_LEVEL} clients sharing one login`,
    target: '>= 1.5x',
    measured: shared?.vsEtcd == null ? 'not measured (no etcd)' : formatRatio(shared.vsEtcd),
    met: shared?.vsEtcd == null ? null : shared.vsEtcd >= 1.5,
  });
  return rows;
}

export function formatTargetsReport(report: TargetsReport): string {
  const verdict = (met: boolean | null): string => (met === null ? 'not measured' : met ? 'met' : '**not met**');
  const lines = [
    `vrmeta bench targets: the scale targets, one run${report.smoke ? ' (smoke: sizes and durations too small to mean anything)' : ''}`,
    report.machine,
    '',
    '| figure | target | measured | |',
    '|---|---|---|---|',
    ...report.rows.map((row) => `| ${row.figure} | ${row.target} | ${row.measured} | ${verdict(row.met)} |`),
  ];
  return lines.join('\n');
}

/**
 * The cluster and transfer benchmarks in smoke mode, against real `vrmeta start` children of the
 * built server (dist/): tiny parameters, no etcd, both at once (most of their time is replicas
 * booting and electing a primary, not CPU). They keep compiling, keep checking every answer before
 * it counts, and keep cleaning up; the output structure is asserted, never a timing.
 *
 * Every child is killed and every temp directory removed whatever happens: each bench stops its
 * cluster in `finally`, `cleanupAll` runs in afterAll, and bench/procs.ts SIGKILLs any child left
 * at process exit.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { formatClusterReport, runClusterBench } from '../../bench/cluster.js';
import { formatLoginFloodReport, runLoginFloodBench } from '../../bench/login-flood.js';
import { CLI_PATH, cleanupAll, leftovers } from '../../bench/procs.js';
import { formatTransferReport, runTransferBench } from '../../bench/transfer.js';

describe('vrmeta bench cluster|transfer|login-flood --smoke', () => {
  afterAll(async () => {
    await cleanupAll();
  });

  it('runs both benches on real replicas, checks every answer, and reports the documented structure', async () => {
    const [cluster, transfer, flood] = await Promise.all([
      runClusterBench({ smoke: true, kernels: ['wasm'] }),
      runTransferBench({ smoke: true, kernels: ['ts'] }),
      runLoginFloodBench({ smoke: true }),
    ]);

    expect(flood).toMatchObject({ bench: 'login-flood', smoke: true, rate: 20, writers: 2 });
    expect(flood.rows.map((row) => [row.server, row.phase])).toEqual([
      ['bounded', 'quiet'],
      ['bounded', 'flood'],
      ['unbounded', 'quiet'],
      ['unbounded', 'flood'],
    ]);
    for (const row of flood.rows) {
      expect(row.writes.errorSamples).toEqual([]);
      expect(row.writes.ops).toBeGreaterThan(0);
      expect(row.writes.latencyMsP50).toBeLessThanOrEqual(row.writes.latencyMsP99);
      if (row.phase === 'flood') {
        // Every bogus login was answered as a wrong password or refused by the gate, nothing else.
        expect(row.flood!.sent).toBeGreaterThan(0);
        expect(row.flood!.answeredOther + row.flood!.failed).toBe(0);
        expect(row.flood!.answered400 + row.flood!.answered429 + row.flood!.outstanding).toBe(row.flood!.sent);
      }
    }
    expect(formatLoginFloodReport(flood)).toContain('| server | phase | writes/s | write p50 | write p99 | p99 vs quiet |');

    expect(cluster).toMatchObject({ bench: 'cluster', smoke: true, levels: [1, 4], protocols: ['http', 'binary'], rounds: 1, etcd: { ran: false } });
    expect(cluster.rows.map((row) => [row.system, row.protocol, row.kernels, row.concurrency])).toEqual([
      ['vrmeta', 'http', 'wasm', 1],
      ['vrmeta', 'http', 'wasm', 4],
      ['vrmeta', 'binary', 'wasm', 1],
      ['vrmeta', 'binary', 'wasm', 4],
    ]);
    for (const row of cluster.rows) {
      expect(row.errorSamples).toEqual([]);
      expect(row.ops).toBeGreaterThan(0);
      expect(Number.isFinite(row.opsPerS) && Number.isFinite(row.latencyMsP50) && Number.isFinite(row.latencyMsP99)).toBe(true);
      expect(row.latencyMsP50).toBeLessThanOrEqual(row.latencyMsP99);
      expect(row.vsEtcd).toBeNull();
      expect(Number.isFinite(row.serverCpuMsPerOp) && Number.isFinite(row.busiestCpuPercent)).toBe(true);
    }
    const clusterTable = formatClusterReport(cluster);
    expect(clusterTable).toContain('| system | protocol | kernels | clients | ops/s | p50 | p99 | errors | vrmeta / etcd | server CPU per write | busiest process |');
    expect(clusterTable).toMatch(/\| vrmeta \| http \| wasm \| 4 \| [\d,]+ \|/);
    expect(clusterTable).toMatch(/\| vrmeta \| iggy tcp \| wasm \| 4 \| [\d,]+ \|/);

    expect(transfer).toMatchObject({ bench: 'transfer', smoke: true, sizesMiB: [0.25], journalSlots: 64, prepareQueueDepth: 8, etcd: { ran: false } });
    expect(transfer.etcdTransfers).toEqual([]);
    expect(transfer.transfers).toHaveLength(1);
    const row = transfer.transfers[0]!;
    expect(row.kernels).toBe('ts');
    // The snapshot reached the size asked for, at a checkpoint (every 64 - 2 * 8 = 48 ops).
    expect(row.snapshotBytes).toBeGreaterThanOrEqual(0.25 * 1024 * 1024);
    expect(row.checkpointOp % 48).toBe(0);
    // The rejoin really went through a logged state transfer: every phase was seen. (RSS during
    // the fetch may have no sample at all: a smoke snapshot arrives within one poll.)
    for (const phase of [row.beforeFetchMs, row.fetchMs, row.installMs, row.afterInstallMs]) expect(phase).not.toBeNull();
    expect(row.rssBaselineBytes).toBeGreaterThan(0);
    expect(transfer.recoveries).toHaveLength(1);
    const recovery = transfer.recoveries[0]!;
    expect(recovery).toMatchObject({ system: 'vrmeta', kernels: 'ts', sizeMiB: 0.25 });
    // A full WAL: the backup restarted with most of a checkpoint interval above its snapshot.
    expect(recovery.walOps).toBeGreaterThan(24);
    expect(recovery.walOps).toBeLessThan(48);
    expect(recovery.bootMs).not.toBeNull();
    const transferTables = formatTransferReport(transfer);
    expect(transferTables).toContain('Catch-up of a wiped replica');
    expect(transferTables).toMatch(/\| vrmeta \| ts \| 0\.\d MiB snapshot \|/);
    expect(transferTables).toContain('Restart with a full WAL and a large snapshot');
    expect(transfer.socketBaseline).toHaveLength(1);
    expect(transfer.socketBaseline[0]).toMatchObject({ sizeMiB: 0.25, bytes: 0.25 * 1024 * 1024 });
    expect(transfer.socketBaseline[0]!.mbps).toBeGreaterThan(0);
    expect(Number.isFinite(transfer.socketBaseline[0]!.rssGrowthBytes)).toBe(true);
    expect(transferTables).toMatch(/bare node:net on loopback .*: 0\.25 MiB [\d.]+ MB\/s/);

    expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
  }, 120_000);

  it('both are wired into the CLI next to `bench kernels`', () => {
    const help = spawnSync(process.execPath, [CLI_PATH, 'bench', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/cluster/);
    expect(help.stdout).toMatch(/transfer/);
    const transferHelp = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--help'], { encoding: 'utf8' });
    for (const flag of ['--json', '--smoke', '--sizes', '--kernels']) expect(transferHelp.stdout).toContain(flag);
    const clusterHelp = spawnSync(process.execPath, [CLI_PATH, 'bench', 'cluster', '--help'], { encoding: 'utf8' });
    for (const flag of ['--json', '--smoke', '--kernels', '--clients', '--duration', '--journal-slots']) expect(clusterHelp.stdout).toContain(flag);
    expect(help.stdout).toMatch(/login-flood/);
    const floodHelp = spawnSync(process.execPath, [CLI_PATH, 'bench', 'login-flood', '--help'], { encoding: 'utf8' });
    for (const flag of ['--json', '--smoke', '--duration', '--rate', '--writers', '--kernels']) expect(floodHelp.stdout).toContain(flag);
    // Bad values are refused before anything starts.
    const badClients = spawnSync(process.execPath, [CLI_PATH, 'bench', 'cluster', '--clients', '8,x'], { encoding: 'utf8' });
    expect(badClients.status).not.toBe(0);
    expect(badClients.stderr).toMatch(/expected client counts/);
  });
});

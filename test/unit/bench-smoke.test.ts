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
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatClusterReport, runClusterBench } from '../../bench/cluster.js';
import { formatLoginFloodReport, runLoginFloodBench } from '../../bench/login-flood.js';
import { CLI_PATH, cleanupAll, leftovers } from '../../bench/procs.js';
import { formatTransferReport, runTransferBench, transferCurve, transferReportSvg } from '../../bench/transfer.js';

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

  it('transfer --shape realistic builds the realistic population, and several sizes make a growth curve (table and SVG)', async () => {
    const [realistic, curve] = await Promise.all([
      runTransferBench({ smoke: true, kernels: ['wasm'], shape: 'realistic' }),
      runTransferBench({ smoke: true, kernels: ['ts'], sizesMiB: [0.25, 0.1] }),
    ]);

    // Smoke scale 0.002: 2 streams x 100 topics x 10 partitions, 20 users with a token each; every
    // write and login was answered 200 (the build throws otherwise), and they all counted.
    expect(realistic).toMatchObject({ bench: 'transfer', shape: 'realistic', smoke: true, etcd: { ran: false } });
    expect(realistic.realistic).toHaveLength(1);
    const population = realistic.realistic[0]!;
    expect(population).toMatchObject({
      kernels: 'wasm',
      scale: 0.002,
      streams: 2,
      topicsPerStream: 100,
      topics: 200,
      partitionsPerTopic: 10,
      partitions: 2000,
      users: 20,
      permissionStreamsPerUser: 2,
      permissionTopicsPerUser: 4,
      tokens: 20,
      writes: 2 + 200 + 2 * 20,
      logins: 20,
    });
    // At least 8 B per partition and, per user, a token hash (32 B) and an Argon2id PHC string.
    expect(population.snapshotBytes).toBeGreaterThan(2000 * 8 + 20 * (32 + 90));
    // The report's size is the measured snapshot, and every table row is keyed by it.
    expect(realistic.sizesMiB).toEqual([Math.max(0.1, Math.round((population.snapshotBytes / (1024 * 1024)) * 10) / 10)]);
    expect(realistic.transfers.map((row) => [row.kernels, row.sizeMiB, row.snapshotBytes])).toEqual([['wasm', realistic.sizesMiB[0], population.snapshotBytes]]);
    expect(realistic.recoveries.map((row) => [row.system, row.sizeMiB])).toEqual([['vrmeta', realistic.sizesMiB[0]]]);
    expect(realistic.builds).toMatchObject([{ system: 'vrmeta', kernels: 'wasm', sizeMiB: realistic.sizesMiB[0] }]);
    const realisticTables = formatTransferReport(realistic);
    expect(realisticTables).toMatch(/^vrmeta bench transfer --shape realistic/);
    expect(realisticTables).toMatch(/Shape realistic \(scale 0\.002, wasm\): 2 streams x 100 topics x 10 partitions \(200 topics, 2,000 partitions\), 20 users .* snapshot [\d.]+ MiB \([\d,]+ B\)/);

    // Sizes run in ascending order whatever the order asked, one curve point per size.
    expect(curve).toMatchObject({ shape: 'partitions', sizesMiB: [0.1, 0.25], realistic: [] });
    expect(curve.transfers.map((row) => row.sizeMiB)).toEqual([0.1, 0.25]);
    const points = transferCurve(curve);
    expect(points.map((point) => point.kernels)).toEqual(['ts', 'ts']);
    expect(points[0]!.snapshotMiB).toBeLessThan(points[1]!.snapshotMiB);
    for (const point of points) {
      expect(point.restartS).not.toBeNull();
      for (const value of [point.restartS!, point.catchUpS, point.peakRssMiB, point.peerRssMiB, point.backupRssMiB]) expect(value).toBeGreaterThan(0);
    }
    const curveTable = formatTransferReport(curve);
    expect(curveTable).toContain('| kernels | snapshot | restart | catch-up | peak RSS, rejoined replica | RSS of the primary | RSS of a backup |');
    expect(curveTable.match(/^\| ts \| 0\.\d MiB \| [\d.]+ m?s \| [\d.]+ m?s \| \d+ MiB \| \d+ MiB \| \d+ MiB \|$/gm)).toHaveLength(2);
    // The SVG: two panels, restart + catch-up and peak RSS + the primary's and a backup's RSS, a two-point line each (5).
    const svg = transferReportSvg(curve);
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(svg.trimEnd()).toMatch(/<\/svg>$/);
    const lines = [...svg.matchAll(/<polyline [^>]*points="([^"]*)"/g)].map((match) => match[1]!.split(' '));
    expect(lines).toHaveLength(5);
    for (const line of lines) expect(line).toHaveLength(2);
    for (const label of ['restart (full WAL)', 'catch-up (wiped)', 'peak RSS, rejoined', 'RSS of the primary', 'RSS of a backup']) expect(svg).toContain(`>${label}</text>`);

    expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
  }, 240_000);

  it('both are wired into the CLI next to `bench kernels`', () => {
    const help = spawnSync(process.execPath, [CLI_PATH, 'bench', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/cluster/);
    expect(help.stdout).toMatch(/transfer/);
    const transferHelp = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--help'], { encoding: 'utf8' });
    for (const flag of ['--json', '--smoke', '--sizes', '--kernels', '--shape', '--scale', '--no-etcd', '--svg']) expect(transferHelp.stdout).toContain(flag);
    // Flags of the other shape are refused before anything starts.
    const badScale = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--scale', '0.5'], { encoding: 'utf8' });
    expect(badScale.status).toBe(2);
    expect(badScale.stderr).toMatch(/--scale applies to --shape realistic only/);
    const badSizes = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--shape', 'realistic', '--sizes', '1'], { encoding: 'utf8' });
    expect(badSizes.status).toBe(2);
    expect(badSizes.stderr).toMatch(/--sizes applies to --shape partitions only/);
    const badShape = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--shape', 'tiny'], { encoding: 'utf8' });
    expect(badShape.status).not.toBe(0);
    expect(badShape.stderr).toMatch(/partitions, realistic/);
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

  it('bench transfer --svg FILE writes the growth curve next to the report (creating the directory)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vrmeta-svg-'));
    try {
      const svgPath = join(dir, 'nested', 'curve.svg');
      const run = spawnSync(process.execPath, [CLI_PATH, 'bench', 'transfer', '--smoke', '--kernels', 'ts', '--json', '--svg', svgPath], { encoding: 'utf8', timeout: 170_000 });
      expect(run.status).toBe(0);
      const report = JSON.parse(run.stdout) as { shape: string; sizesMiB: number[] };
      expect(report).toMatchObject({ shape: 'partitions', sizesMiB: [0.25] });
      expect(existsSync(svgPath)).toBe(true);
      const svg = readFileSync(svgPath, 'utf8');
      expect(svg).toMatch(/^<svg /);
      expect([...svg.matchAll(/<polyline /g)]).toHaveLength(5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

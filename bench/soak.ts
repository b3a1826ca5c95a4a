/**
 * `vrmeta bench soak`: does a healthy primary ever get deposed under load? A 3-replica cluster
 * grown to a `--state-mib` MiB snapshot takes writes from `--clients` binary clients in closed
 * loops for `--minutes`, checkpointing that snapshot over and over as the writes fill the WAL,
 * while a backup is wiped and rejoins by state transfer (a `--state-mib` transfer, then its
 * install) every `--transfer-every` seconds, alternating between the backups. Nothing else
 * happens to the primary, so every view change counted is a false failover: the view numbers the
 * replicas report at the start and the end, and the `view_change_started` events their logs hold.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BinaryClient } from '../src/transport/binary-client.js';
import { formatMs, formatNumber, machineLine, percentile } from './load.js';
import { sleep, VrmetaCluster, waitFor } from './procs.js';
import { VrmetaVolume } from './transfer.js';

const MIB = 1024 * 1024;
const LOGINS_PARALLEL_MAX = 8;

export interface SoakBenchOptions {
  readonly minutes: number;
  readonly clients: number;
  readonly stateMiB: number;
  readonly transferEveryS: number;
  readonly log: (line: string) => void;
}

export interface SoakBenchReport {
  readonly date: string;
  readonly machine: string;
  readonly minutes: number;
  readonly clients: number;
  readonly snapshotBytes: number;
  readonly writes: number;
  readonly writeErrors: number;
  readonly writesPerS: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  readonly checkpoints: number;
  readonly transfers: number;
  readonly viewAtStart: number;
  readonly viewAtEnd: number;
  /** `view_change_started` records in the replicas' logs during the soak. */
  readonly viewChangesLogged: number;
  readonly viewChangeReasons: Readonly<Record<string, number>>;
}

/** The `view_change_started` records at or after `from` (ms) in every replica's log file. */
function viewChangeRecords(cluster: VrmetaCluster, from: number): { count: number; reasons: Record<string, number> } {
  const reasons: Record<string, number> = {};
  let count = 0;
  for (const index of [0, 1, 2]) {
    const file = join(cluster.root, `replica-${index}.log`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"event":"view_change_started"')) continue;
      const record = JSON.parse(line.slice(line.indexOf('{'))) as { time: number; reason?: string };
      if (record.time < from) continue;
      count += 1;
      const reason = record.reason ?? '?';
      reasons[reason] = (reasons[reason] ?? 0) + 1;
    }
  }
  return { count, reasons };
}

export async function runSoakBench(options: SoakBenchOptions): Promise<SoakBenchReport> {
  const cluster = await VrmetaCluster.start({ kernels: 'wasm', logLevel: 'info' });
  const clients: BinaryClient[] = [];
  try {
    const primary = await cluster.primary();
    options.log(`[bench] growing the state to ${options.stateMiB} MiB`);
    const volume = await VrmetaVolume.create(cluster, primary, 8);
    await volume.growTo(options.stateMiB * MIB);
    const snapshot = await volume.advanceToCheckpoint();
    volume.close();
    while (clients.length < options.clients) {
      const count = Math.min(LOGINS_PARALLEL_MAX, options.clients - clients.length);
      const connect = (): Promise<BinaryClient> => BinaryClient.connect({ addresses: [cluster.tcpAddress(primary)], username: 'iggy', password: 'iggy' });
      clients.push(...(await Promise.all(Array.from({ length: count }, connect))));
    }
    const statusesAtStart = await Promise.all([0, 1, 2].map((index) => cluster.status(index)));
    const viewAtStart = Math.max(...statusesAtStart.map((status) => status.view));
    const checkpointAtStart = statusesAtStart[primary]!.checkpoint_op;
    const startedAt = Date.now();
    const stopAt = performance.now() + options.minutes * 60_000;
    options.log(`[bench] soaking: ${options.clients} clients for ${options.minutes} min, a backup rejoining every ${options.transferEveryS} s`);
    const latencies: number[] = [];
    let writes = 0;
    let writeErrors = 0;
    const loops = clients.map(async (client, worker) => {
      for (let n = 0; performance.now() < stopAt; n++) {
        const name = Buffer.from(`soak-${worker}-${n}`);
        const began = performance.now();
        try {
          await client.write(128, Buffer.concat([Buffer.from([name.length]), name]));
          latencies.push(performance.now() - began);
          writes += 1;
        } catch {
          writeErrors += 1;
        }
      }
    });
    let transfers = 0;
    const disruptions = (async () => {
      const backups = [0, 1, 2].filter((index) => index !== primary);
      while (performance.now() + options.transferEveryS * 1000 < stopAt) {
        await sleep(options.transferEveryS * 1000);
        const backup = backups[transfers % backups.length]!;
        options.log(`[bench] wiping replica ${backup}; it rejoins by state transfer`);
        await cluster.stop(backup, 'SIGTERM');
        cluster.wipe(backup);
        cluster.spawn(backup, { rejoin: true });
        await cluster.waitReady(backup, 300_000);
        transfers += 1;
      }
    })();
    await Promise.all([...loops, disruptions]);
    const statusesAtEnd = await waitFor(
      'every replica to answer its status',
      async () => Promise.all([0, 1, 2].map((index) => cluster.status(index))).catch(() => null),
      30_000,
      cluster.children(),
    );
    const logged = viewChangeRecords(cluster, startedAt);
    const sorted = Float64Array.from(latencies).sort();
    const seconds = options.minutes * 60;
    const viewAtEnd = Math.max(...statusesAtEnd.map((status) => status.view));
    const checkpointInterval = cluster.checkpointIntervalOps;
    return {
      date: new Date().toISOString().slice(0, 10),
      machine: machineLine(),
      minutes: options.minutes,
      clients: options.clients,
      snapshotBytes: snapshot.snapshotBytes,
      writes,
      writeErrors,
      writesPerS: writes / seconds,
      latencyMsP50: percentile(sorted, 0.5),
      latencyMsP99: percentile(sorted, 0.99),
      checkpoints: Math.floor((statusesAtEnd[primary]!.checkpoint_op - checkpointAtStart) / checkpointInterval),
      transfers,
      viewAtStart,
      viewAtEnd,
      viewChangesLogged: logged.count,
      viewChangeReasons: logged.reasons,
    };
  } finally {
    for (const client of clients) client.close();
    await cluster.stopAll();
  }
}

export function formatSoakReport(report: SoakBenchReport): string {
  const reasons = Object.entries(report.viewChangeReasons).map(([reason, count]) => `${reason} ${count}`).join(', ') || 'none';
  return [
    `vrmeta bench soak — ${report.date}, ${report.machine}`,
    '',
    '| minutes | clients | snapshot | writes/s | p50 | p99 | write errors | checkpoints | state transfers | view at start -> end | view changes logged |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    `| ${report.minutes} | ${report.clients} | ${(report.snapshotBytes / MIB).toFixed(1)} MiB | ${formatNumber(report.writesPerS)} | ${formatMs(report.latencyMsP50)} | ${formatMs(report.latencyMsP99)} | ${report.writeErrors} | ${report.checkpoints} | ${report.transfers} | ${report.viewAtStart} -> ${report.viewAtEnd} | ${report.viewChangesLogged} (${reasons}) |`,
  ].join('\n');
}

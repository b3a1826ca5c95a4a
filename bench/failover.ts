/**
 * `vrmeta bench failover`: how long writes stop when the primary dies, on a 3-replica vrmeta
 * cluster and a 3-member etcd (Debian's `etcd-server`) with their default timeouts, measured the
 * same way in one run.
 *
 * A round: writers (WRITERS of them, each in a closed loop with a short per-attempt timeout and a
 * 10 ms pause) write through one surviving replica; the primary (etcd: the leader) is killed with
 * SIGKILL, or frozen with SIGSTOP (which no socket close reveals); the round's figure is the time
 * from the signal to the end of the first write that was sent after it and succeeded. Then the
 * primary is restarted (or continued), the cluster is waited on until it agrees on a primary
 * again, and the next round starts with whoever leads then. vrmeta writes are CreateStream over
 * HTTP (a backup forwards them) or over Iggy's binary protocol (a backup forwards them too); etcd
 * writes are puts through its JSON gateway.
 */
import type { Agent } from 'node:http';
import { BinaryClient } from '../src/transport/binary-client.js';
import { formatMs, machineLine, percentile } from './load.js';
import {
  EtcdCluster,
  ensureEtcd,
  httpCall,
  keepAliveAgent,
  sleep,
  stopChild,
  VrmetaCluster,
  type ChildHandle,
} from './procs.js';

/** Writers per round: several, so one attempt stuck on the dead primary hides nothing. */
const WRITERS = 8;
/** One attempt's bound: a write to a dead primary fails this fast and is retried. */
const ATTEMPT_TIMEOUT_MS = 250;
const PAUSE_MS = 10;
/** A round that sees no write succeed for this long fails the bench. */
const ROUND_TIMEOUT_MS = 30_000;

export type FailoverSignal = 'SIGKILL' | 'SIGSTOP';
export type FailoverProtocol = 'http' | 'binary';

export interface FailoverBenchOptions {
  readonly rounds: number;
  readonly signals: readonly FailoverSignal[];
  readonly protocols: readonly FailoverProtocol[];
  /** Compare against etcd (installed with apt-get when absent). */
  readonly etcd: boolean;
  readonly log: (line: string) => void;
}

export interface FailoverSeries {
  readonly system: 'vrmeta' | 'etcd';
  readonly protocol: FailoverProtocol | 'http-gateway';
  readonly signal: FailoverSignal;
  /** Milliseconds from the signal to the first successful write sent after it, per round. */
  readonly gapsMs: number[];
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface FailoverBenchReport {
  readonly date: string;
  readonly machine: string;
  readonly rounds: number;
  readonly etcd: { readonly version: string | null; readonly skipped: string | null };
  readonly series: FailoverSeries[];
}

/** One write through the survivor: resolves true when it succeeded within its bound. */
type Write = (worker: number, sequence: number) => Promise<boolean>;

/**
 * Runs WRITERS closed loops of `write` until `signal()` has run and one write sent after it
 * succeeded; the gap from the signal to that write's end, in ms.
 */
async function measureGap(write: Write, signal: () => Promise<void>): Promise<number> {
  let signalledAt: number | null = null;
  let recoveredAt: number | null = null;
  let sequence = 0;
  const deadline = performance.now() + ROUND_TIMEOUT_MS + 5_000;
  const worker = async (index: number): Promise<void> => {
    while (recoveredAt === null && performance.now() < deadline) {
      const began = performance.now();
      const ok = await write(index, sequence++).catch(() => false);
      const ended = performance.now();
      if (ok && signalledAt !== null && began >= signalledAt) recoveredAt ??= ended;
      await sleep(PAUSE_MS);
    }
  };
  const workers = Array.from({ length: WRITERS }, (_, index) => worker(index));
  // Writes flow for a moment before the signal, so the survivor's paths are warm.
  await sleep(300);
  await signal();
  signalledAt = performance.now();
  await Promise.all(workers);
  if (recoveredAt === null) throw new Error(`no write succeeded within ${ROUND_TIMEOUT_MS} ms of the signal`);
  return recoveredAt - signalledAt;
}

function seriesOf(system: FailoverSeries['system'], protocol: FailoverSeries['protocol'], signal: FailoverSignal, gapsMs: number[]): FailoverSeries {
  const sorted = Float64Array.from(gapsMs).sort();
  return { system, protocol, signal, gapsMs, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), maxMs: sorted[sorted.length - 1] ?? Number.NaN };
}

/** Kills the primary's process, or freezes it. */
async function strike(child: ChildHandle, signal: FailoverSignal): Promise<void> {
  if (signal === 'SIGKILL') await stopChild(child, 'SIGKILL');
  else process.kill(child.pid, 'SIGSTOP');
}

/** Brings a struck primary back: a new process on its data (`respawn`), or SIGCONT. */
function revive(child: ChildHandle, signal: FailoverSignal, respawn: () => unknown): void {
  if (signal === 'SIGKILL') respawn();
  else process.kill(child.pid, 'SIGCONT');
}

// ---------------------------------------------------------------------------------- vrmeta

class VrmetaFailover {
  private readonly cluster: VrmetaCluster;
  private readonly agent: Agent = keepAliveAgent(WRITERS);
  private streams = 0;

  private constructor(cluster: VrmetaCluster) {
    this.cluster = cluster;
  }

  static async start(): Promise<VrmetaFailover> {
    return new VrmetaFailover(await VrmetaCluster.start({ kernels: 'wasm' }));
  }

  /** One round through a survivor of the current primary; the survivor and the gap. */
  async round(protocol: FailoverProtocol, signal: FailoverSignal): Promise<number> {
    const primary = await this.cluster.primary();
    const survivor = (primary + 1) % this.cluster.replicaCount;
    const write = protocol === 'http' ? await this.httpWriter(survivor) : await this.binaryWriter(survivor);
    try {
      const child = this.cluster.child(primary)!;
      const gap = await measureGap(write.write, () => strike(child, signal));
      revive(child, signal, () => this.cluster.spawn(primary));
      await Promise.all([0, 1, 2].map((index) => this.cluster.waitReady(index, 60_000)));
      return gap;
    } finally {
      await write.close();
    }
  }

  private async httpWriter(survivor: number): Promise<{ write: Write; close: () => Promise<void> }> {
    const token = await this.cluster.login(survivor);
    const base = this.cluster.url(survivor);
    const headers = { authorization: `Bearer ${token}` };
    return {
      write: async () => {
        const name = `f${this.streams++}`;
        const answer = await httpCall(this.agent, 'POST', `${base}/streams`, JSON.stringify({ name }), headers, ATTEMPT_TIMEOUT_MS);
        return answer.status === 200 && answer.text.includes(`"name":"${name}"`);
      },
      close: async () => {},
    };
  }

  private async binaryWriter(survivor: number): Promise<{ write: Write; close: () => Promise<void> }> {
    const address = this.cluster.tcpAddress(survivor);
    // Short timeouts (a write to a dead primary must fail fast), so a login right after the
    // previous round's recovery may need a few tries.
    const connectOne = async (): Promise<BinaryClient> => {
      const options = { addresses: [address], username: 'iggy', password: 'iggy', followLeader: false, timeoutMs: ATTEMPT_TIMEOUT_MS, replyTimeoutMs: ATTEMPT_TIMEOUT_MS };
      for (let attempt = 0; ; attempt++) {
        try {
          return await BinaryClient.connect(options);
        } catch (error) {
          if (attempt === 40) throw error;
          await sleep(100);
        }
      }
    };
    const clients: BinaryClient[] = [];
    for (let index = 0; index < WRITERS; index++) clients.push(await connectOne());
    return {
      write: async (worker) => {
        const name = Buffer.from(`b${this.streams++}`);
        const payload = await clients[worker]!.write(128, Buffer.concat([Buffer.from([name.length]), name]));
        return Buffer.from(payload.subarray(33, 33 + name.length)).equals(name);
      },
      close: async () => {
        for (const client of clients) client.close();
      },
    };
  }

  async close(): Promise<void> {
    this.agent.destroy();
    await this.cluster.stopAll();
  }
}

// ------------------------------------------------------------------------------------ etcd

class EtcdFailover {
  private readonly cluster: EtcdCluster;
  private readonly agent: Agent = keepAliveAgent(WRITERS);
  private keys = 0;

  private constructor(cluster: EtcdCluster) {
    this.cluster = cluster;
  }

  static async start(binary: string): Promise<EtcdFailover> {
    return new EtcdFailover(await EtcdCluster.start(binary));
  }

  async round(signal: FailoverSignal): Promise<number> {
    const leader = await this.cluster.leader();
    const survivor = (leader + 1) % this.cluster.memberCount;
    const base = this.cluster.url(survivor);
    const child = this.cluster.child(leader)!;
    const write: Write = async () => {
      const key = Buffer.from(`f${this.keys++}`).toString('base64');
      const body = JSON.stringify({ key, value: key });
      const answer = await httpCall(this.agent, 'POST', `${base}/v3/kv/put`, body, {}, ATTEMPT_TIMEOUT_MS);
      return answer.status === 200 && answer.text.includes('"revision"');
    };
    const gap = await measureGap(write, () => strike(child, signal));
    revive(child, signal, () => this.cluster.spawn(leader, 'existing', this.cluster.initialCluster()));
    await Promise.all([0, 1, 2].map((index) => this.cluster.waitHealthy(index, 60_000)));
    return gap;
  }

  async close(): Promise<void> {
    this.agent.destroy();
    await this.cluster.stopAll();
  }
}

// ---------------------------------------------------------------------------------- driver

export async function runFailoverBench(options: FailoverBenchOptions): Promise<FailoverBenchReport> {
  const availability = options.etcd ? ensureEtcd(true, options.log) : null;
  const etcdSkipped = availability === null ? 'not requested' : availability.reason;
  options.log('[bench] starting a 3-replica vrmeta cluster');
  const vrmeta = await VrmetaFailover.start();
  let etcd: EtcdFailover | null = null;
  try {
    if (availability?.binary != null) {
      options.log(`[bench] starting a 3-member etcd ${availability.version ?? ''}`);
      etcd = await EtcdFailover.start(availability.binary);
    }
    const gaps = new Map<string, { system: FailoverSeries['system']; protocol: FailoverSeries['protocol']; signal: FailoverSignal; gaps: number[] }>();
    const record = (system: FailoverSeries['system'], protocol: FailoverSeries['protocol'], signal: FailoverSignal, gap: number): void => {
      const key = `${system}/${protocol}/${signal}`;
      const entry = gaps.get(key) ?? { system, protocol, signal, gaps: [] };
      entry.gaps.push(gap);
      gaps.set(key, entry);
      options.log(`[bench] ${key}: ${gap.toFixed(0)} ms`);
    };
    // Rounds interleave the systems, so a slow phase of the machine hits both.
    for (let round = 0; round < options.rounds; round++) {
      for (const signal of options.signals) {
        for (const protocol of options.protocols) record('vrmeta', protocol, signal, await vrmeta.round(protocol, signal));
        if (etcd !== null) record('etcd', 'http-gateway', signal, await etcd.round(signal));
      }
    }
    return {
      date: new Date().toISOString().slice(0, 10),
      machine: machineLine(),
      rounds: options.rounds,
      etcd: { version: availability?.version ?? null, skipped: etcd === null ? etcdSkipped : null },
      series: [...gaps.values()].map((entry) => seriesOf(entry.system, entry.protocol, entry.signal, entry.gaps)),
    };
  } finally {
    await vrmeta.close();
    await etcd?.close();
  }
}

export function formatFailoverReport(report: FailoverBenchReport): string {
  const lines = [
    `vrmeta bench failover — ${report.date}, ${report.machine}, ${report.rounds} rounds per row`,
    `etcd: ${report.etcd.skipped === null ? (report.etcd.version ?? 'yes') : `skipped: ${report.etcd.skipped}`}`,
    '',
    '| system | writes | primary | p50 | p99 | max |',
    '|---|---|---|---:|---:|---:|',
  ];
  for (const series of report.series) {
    lines.push(`| ${series.system} | ${series.protocol} | ${series.signal} | ${formatMs(series.p50Ms)} | ${formatMs(series.p99Ms)} | ${formatMs(series.maxMs)} |`);
  }
  return lines.join('\n');
}

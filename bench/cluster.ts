/**
 * `vrmeta bench cluster`: write throughput and latency of a 3-replica vrmeta cluster against a
 * 3-member etcd cluster, both on 127.0.0.1, under the same closed-loop HTTP load (load.ts) from
 * the same client (node:http keep-alive agent, procs.ts `httpCall`).
 *
 * The workload. Each worker alternates create-stream and create-topic (1 partition) in the stream
 * it just created, with its own login (vrmeta runs one VSR session per credential and one request
 * in flight per session, so a shared token would serialise the workers). etcd gets one PUT per
 * vrmeta write through its v3 JSON gateway, key = the stream/topic name, value = the exact JSON
 * body vrmeta receives for that write, so both carry the same payload bytes. Both fsync before
 * acknowledging: vrmeta always (group commit), etcd by default (WAL fsync per raft batch). Both
 * log at warn (per-request info logs would cost vrmeta CPU the bench is measuring).
 *
 * Requests go to the vrmeta primary and to the etcd leader (each system's best case: a vrmeta
 * backup forwards over HTTP, an etcd follower forwards a proposal over its peer stream).
 *
 * The machine is shared and noisy, so every cluster runs for the whole bench and the levels are
 * measured in rounds: each round gives every system one slice of every level, in turn, and a
 * system's figures are its slices merged. A slow minute then costs every system alike, and the
 * vrmeta/etcd ratio is measured, not the machine's mood. Idle clusters cost little (a 10 ms tick
 * per vrmeta replica, etcd heartbeats).
 *
 * Every answer is checked (2xx and the expected body shape) before it counts; a level ends with a
 * read that proves the last write is visible.
 */
import type { Agent } from 'node:http';
import { EtcdCluster, VrmetaCluster, benchEtcd, etcdReport, httpCall, keepAliveAgent, readCpuMs, type ChildHandle, type EtcdBenchOptions, type EtcdReport } from './procs.js';
import { formatMs, formatNumber, formatRatio, machineLine, runSlice, summarize, type LoadResult, type LoadSlice, type Operation } from './load.js';

export const CLUSTER_LEVELS = [1, 8, 64] as const;
const SMOKE_LEVELS = [1, 4] as const;
/** Logins are argon2id verifications on the server: a few at a time. */
const LOGIN_PARALLEL_MAX = 8;
/** Slices per level and system (full mode). */
const ROUNDS = 3;
/** The first slice of a level registers every worker's VSR session (a replicated op each): warm up longer. */
const FIRST_WARMUP_MS = 1_000;
const WARMUP_MS = 300;

export interface ClusterBenchOptions extends EtcdBenchOptions {
  /** Measured seconds per concurrency level and system, over all rounds. */
  readonly durationS?: number;
  readonly levels?: readonly number[];
  readonly rounds?: number;
  /** vrmeta's journal_slots (default 1024): checkpoints come every journal_slots - 64 ops. */
  readonly journalSlots?: number;
}

export interface ClusterBenchRow {
  readonly system: 'vrmeta' | 'etcd';
  readonly kernels: 'wasm' | 'ts' | null;
  readonly concurrency: number;
  readonly opsPerS: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  readonly ops: number;
  readonly errors: number;
  readonly errorSamples: string[];
  /** vrmeta ops/s / etcd ops/s at the same level (null for etcd rows or without etcd). */
  readonly vsEtcd: number | null;
  /** CPU time of the 3 server processes together per write, in the measured windows. */
  readonly serverCpuMsPerOp: number;
  /** CPU use of the busiest server process (the primary / leader), % of one core. */
  readonly busiestCpuPercent: number;
}

export interface ClusterBenchReport {
  readonly bench: 'cluster';
  readonly machine: string;
  readonly smoke: boolean;
  readonly durationS: number;
  readonly rounds: number;
  readonly levels: number[];
  readonly payload: { readonly streamBodyBytes: number; readonly topicBodyBytes: number };
  readonly etcd: EtcdReport;
  readonly rows: ClusterBenchRow[];
}

/** The bodies of a worker's writes; etcd stores the same bytes as values. */
function streamBody(name: string): string {
  return JSON.stringify({ name });
}

function topicBody(name: string): string {
  return JSON.stringify({
    name,
    partitions_count: 1,
    compression_algorithm: 'none',
    message_expiry: 0,
    max_topic_size: 0,
    replication_factor: 1,
  });
}

/** Names unique across levels and workers: `c<level>w<worker>n<k>` (k counts the worker's streams). */
function nameOf(level: number, worker: number, count: number): string {
  return `c${level}w${worker}n${count}`;
}

/**
 * Per level: each worker's position in its create-stream / create-topic alternation, kept across
 * slices so names never repeat, and the last acknowledged write (read back after the level).
 */
class Writers {
  private readonly streamsCreated: number[];
  private readonly topicNext: boolean[];
  last: { stream: string; topic: string | null } | null = null;

  constructor(concurrency: number) {
    this.streamsCreated = new Array<number>(concurrency).fill(0);
    this.topicNext = new Array<boolean>(concurrency).fill(false);
  }

  /** The worker's next write. */
  next(level: number, worker: number): { stream: string; topic: string | null } {
    const stream = nameOf(level, worker, this.streamsCreated[worker]!);
    return { stream, topic: this.topicNext[worker]! ? `t${stream}` : null };
  }

  /** The write `next` returned was acknowledged. */
  done(worker: number, write: { stream: string; topic: string | null }): void {
    if (write.topic !== null) this.streamsCreated[worker]! += 1;
    this.topicNext[worker] = !this.topicNext[worker]!;
    this.last = write;
  }
}

interface Target {
  readonly system: 'vrmeta' | 'etcd';
  readonly kernels: 'wasm' | 'ts' | null;
  /** The server processes (CPU accounting). */
  pids(): number[];
  operation(level: number): Operation;
  /** The last acknowledged write of the level is visible. */
  verify(level: number): Promise<void>;
  close(): Promise<void>;
}

/** What both targets share: their server processes, and one client agent and writer set per level. */
abstract class ClusterTarget {
  private readonly levels = new Map<number, { agent: Agent; writers: Writers }>();
  private readonly processes: { children(): (ChildHandle | null)[]; stopAll(): Promise<void> };

  protected constructor(processes: { children(): (ChildHandle | null)[]; stopAll(): Promise<void> }) {
    this.processes = processes;
  }

  /** The server processes (CPU accounting). */
  pids(): number[] {
    return this.processes.children().flatMap((child) => (child === null ? [] : [child.pid]));
  }

  protected level(level: number): { agent: Agent; writers: Writers } {
    let state = this.levels.get(level);
    if (state === undefined) {
      state = { agent: keepAliveAgent(level), writers: new Writers(level) };
      this.levels.set(level, state);
    }
    return state;
  }

  async close(): Promise<void> {
    for (const { agent } of this.levels.values()) agent.destroy();
    await this.processes.stopAll();
  }
}

class VrmetaTarget extends ClusterTarget implements Target {
  readonly system = 'vrmeta';
  readonly kernels: 'wasm' | 'ts';
  private readonly base: string;
  private readonly tokens: readonly string[];

  private constructor(kernels: 'wasm' | 'ts', cluster: VrmetaCluster, primary: number, tokens: readonly string[]) {
    super(cluster);
    this.kernels = kernels;
    this.base = cluster.url(primary);
    this.tokens = tokens;
  }

  static async start(kernels: 'wasm' | 'ts', tokensNeeded: number, journalSlots?: number): Promise<VrmetaTarget> {
    const cluster = await VrmetaCluster.start({ kernels, ...(journalSlots === undefined ? {} : { journalSlots }) });
    try {
      const primary = await cluster.primary();
      const tokens: string[] = [];
      while (tokens.length < tokensNeeded) {
        const batch = Math.min(LOGIN_PARALLEL_MAX, tokensNeeded - tokens.length);
        tokens.push(...(await Promise.all(Array.from({ length: batch }, () => cluster.login(primary)))));
      }
      return new VrmetaTarget(kernels, cluster, primary, tokens);
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
  }


  operation(level: number): Operation {
    const { agent, writers } = this.level(level);
    return async (worker) => {
      const headers = { authorization: `Bearer ${this.tokens[worker]!}` };
      const write = writers.next(level, worker);
      if (write.topic !== null) {
        const answer = await httpCall(agent, 'POST', `${this.base}/streams/${write.stream}/topics`, topicBody(write.topic), headers);
        if (answer.status !== 200 || !answer.text.includes(`"name":"${write.topic}"`)) {
          throw new Error(`create topic ${write.topic}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
        }
      } else {
        const answer = await httpCall(agent, 'POST', `${this.base}/streams`, streamBody(write.stream), headers);
        if (answer.status !== 200 || !answer.text.includes(`"name":"${write.stream}"`)) {
          throw new Error(`create stream ${write.stream}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
        }
      }
      writers.done(worker, write);
    };
  }

  async verify(level: number): Promise<void> {
    const { agent, writers } = this.level(level);
    const last = writers.last;
    if (last === null) return;
    // Writes are linearizable: the primary serves the last acknowledged one.
    const path = last.topic === null ? `/streams/${last.stream}` : `/streams/${last.stream}/topics/${last.topic}`;
    const check = await httpCall(agent, 'GET', `${this.base}${path}`, null, { authorization: `Bearer ${this.tokens[0]!}` });
    if (check.status !== 200) throw new Error(`read-back of ${path}: HTTP ${check.status} ${check.text.slice(0, 200)}`);
  }

}

class EtcdTarget extends ClusterTarget implements Target {
  readonly system = 'etcd';
  readonly kernels = null;
  private readonly base: string;

  private constructor(cluster: EtcdCluster, leader: number) {
    super(cluster);
    this.base = cluster.url(leader);
  }

  static async start(binary: string): Promise<EtcdTarget> {
    const cluster = await EtcdCluster.start(binary);
    try {
      return new EtcdTarget(cluster, await cluster.leader());
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
  }


  private static keyOf(write: { stream: string; topic: string | null }): string {
    return write.topic === null ? write.stream : `${write.stream}/${write.topic}`;
  }

  operation(level: number): Operation {
    const { agent, writers } = this.level(level);
    return async (worker) => {
      const write = writers.next(level, worker);
      const key = EtcdTarget.keyOf(write);
      const value = write.topic === null ? streamBody(write.stream) : topicBody(write.topic);
      const body = JSON.stringify({ key: Buffer.from(key).toString('base64'), value: Buffer.from(value).toString('base64') });
      const answer = await httpCall(agent, 'POST', `${this.base}/v3/kv/put`, body);
      if (answer.status !== 200 || !answer.text.includes('"revision"')) throw new Error(`put ${key}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
      writers.done(worker, write);
    };
  }

  async verify(level: number): Promise<void> {
    const { agent, writers } = this.level(level);
    if (writers.last === null) return;
    const key = EtcdTarget.keyOf(writers.last);
    const check = await httpCall(agent, 'POST', `${this.base}/v3/kv/range`, JSON.stringify({ key: Buffer.from(key).toString('base64') }));
    if (check.status !== 200 || !check.text.includes('"kvs"')) throw new Error(`read-back of ${key}: HTTP ${check.status} ${check.text.slice(0, 200)}`);
  }

}

/** CPU ms of each server process over the measured windows of one (target, level). */
interface CpuTally {
  readonly byPid: Map<number, number>;
  windowMs: number;
}

function rowOf(target: Target, result: LoadResult, cpu: CpuTally): ClusterBenchRow {
  const totalMs = [...cpu.byPid.values()].reduce((sum, ms) => sum + ms, 0);
  const busiestMs = Math.max(0, ...cpu.byPid.values());
  return {
    system: target.system,
    kernels: target.kernels,
    concurrency: result.concurrency,
    opsPerS: result.opsPerS,
    latencyMsP50: result.latencyMsP50,
    latencyMsP99: result.latencyMsP99,
    ops: result.ops,
    errors: result.errors,
    errorSamples: result.errorSamples,
    vsEtcd: null,
    serverCpuMsPerOp: result.ops > 0 ? totalMs / result.ops : Number.NaN,
    busiestCpuPercent: cpu.windowMs > 0 ? (busiestMs / cpu.windowMs) * 100 : Number.NaN,
  };
}

function labelOf(target: Target): string {
  return target.kernels === null ? target.system : `${target.system} ${target.kernels}`;
}

export async function runClusterBench(options: ClusterBenchOptions): Promise<ClusterBenchReport> {
  const log = options.log ?? (() => {});
  const levels = [...(options.levels ?? (options.smoke ? SMOKE_LEVELS : CLUSTER_LEVELS))];
  const rounds = options.rounds ?? (options.smoke ? 1 : ROUNDS);
  const durationS = options.durationS ?? (options.smoke ? 0.5 : 10);
  const sliceMs = Math.round((durationS * 1000) / rounds);
  log(`# vrmeta bench cluster: ${machineLine()}`);

  const availability = benchEtcd(options, log);

  const targets: Target[] = [];
  const slices = new Map<Target, Map<number, LoadSlice[]>>();
  const cpu = new Map<Target, Map<number, CpuTally>>();
  try {
    for (const kernels of options.kernels) {
      log(`[bench] vrmeta (--kernels ${kernels}): starting 3 replicas`);
      targets.push(await VrmetaTarget.start(kernels, Math.max(...levels), options.journalSlots));
    }
    if (availability.binary !== null) {
      log(`[bench] etcd ${availability.version ?? '?'} (${availability.binary}): starting 3 members`);
      targets.push(await EtcdTarget.start(availability.binary));
    }
    for (const target of targets) {
      slices.set(target, new Map(levels.map((level) => [level, []])));
      cpu.set(target, new Map(levels.map((level) => [level, { byPid: new Map<number, number>(), windowMs: 0 }])));
    }
    for (let round = 0; round < rounds; round++) {
      for (const level of levels) {
        for (const target of targets) {
          const tally = cpu.get(target)!.get(level)!;
          const pids = target.pids();
          let opened: (number | null)[] = [];
          const slice = await runSlice({
            concurrency: level,
            warmupMs: round === 0 ? FIRST_WARMUP_MS : WARMUP_MS,
            durationMs: sliceMs,
            operation: target.operation(level),
            onWindow: {
              open: () => {
                opened = pids.map(readCpuMs);
              },
              close: () => {
                pids.forEach((pid, index) => {
                  const before = opened[index];
                  const after = readCpuMs(pid);
                  if (before !== null && before !== undefined && after !== null) tally.byPid.set(pid, (tally.byPid.get(pid) ?? 0) + after - before);
                });
                tally.windowMs += sliceMs;
              },
            },
          });
          slices.get(target)!.get(level)!.push(slice);
          log(`[bench] round ${round + 1}/${rounds} ${labelOf(target)} c=${level}: ${formatNumber(slice.ops / slice.seconds)} ops/s, errors ${slice.errors}`);
        }
      }
    }
    for (const target of targets) for (const level of levels) await target.verify(level);
  } finally {
    for (const target of targets) await target.close();
  }

  const rows = targets.flatMap((target) =>
    levels.map((level) => rowOf(target, summarize(level, slices.get(target)!.get(level)!), cpu.get(target)!.get(level)!)),
  );
  const withRatios = rows.map((row) => {
    if (row.system !== 'vrmeta') return row;
    const peer = rows.find((other) => other.system === 'etcd' && other.concurrency === row.concurrency);
    return peer === undefined || peer.opsPerS === 0 ? row : { ...row, vsEtcd: row.opsPerS / peer.opsPerS };
  });
  const sample = nameOf(64, 63, 9999);
  return {
    bench: 'cluster',
    machine: machineLine(),
    smoke: options.smoke,
    durationS,
    rounds,
    levels,
    payload: { streamBodyBytes: Buffer.byteLength(streamBody(sample)), topicBodyBytes: Buffer.byteLength(topicBody(`t${sample}`)) },
    etcd: etcdReport(availability),
    rows: withRatios,
  };
}

export function formatClusterReport(report: ClusterBenchReport): string {
  const lines = [
    `vrmeta bench cluster${report.smoke ? ' (smoke: numbers meaningless)' : ''}: ${report.machine}`,
    `closed loop, ${report.durationS} s per level and system in ${report.rounds} interleaved round(s); writes alternate create-stream (${report.payload.streamBodyBytes} B body) and create-topic (${report.payload.topicBodyBytes} B body); etcd: one PUT per write, same bytes`,
    report.etcd.ran ? `etcd ${report.etcd.version ?? '?'} (${report.etcd.binary ?? '?'}), default settings` : `etcd: not run (${report.etcd.skipped ?? 'unknown'})`,
    '',
    '| system | kernels | clients | ops/s | p50 | p99 | errors | vrmeta / etcd | server CPU per write | busiest process |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of report.rows) {
    lines.push(
      `| ${row.system} | ${row.kernels ?? '—'} | ${row.concurrency} | ${formatNumber(row.opsPerS)} | ${formatMs(row.latencyMsP50)} | ${formatMs(row.latencyMsP99)} | ${row.errors} | ${row.system === 'vrmeta' ? formatRatio(row.vsEtcd) : ''} | ${Number.isFinite(row.serverCpuMsPerOp) ? `${row.serverCpuMsPerOp.toFixed(2)} ms` : '—'} | ${Number.isFinite(row.busiestCpuPercent) ? `${row.busiestCpuPercent.toFixed(0)}% of a core` : '—'} |`,
    );
  }
  for (const row of report.rows.filter((candidate) => candidate.errorSamples.length > 0)) {
    lines.push('', `errors of ${row.system} ${row.kernels ?? ''} c=${row.concurrency}: ${row.errorSamples.join(' | ')}`);
  }
  return lines.join('\n');
}

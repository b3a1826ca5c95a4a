/**
 * `vrmeta bench cluster`: write throughput and latency of a 3-replica vrmeta cluster against a
 * 3-member etcd cluster, both on 127.0.0.1, under the same closed-loop HTTP load (load.ts) from
 * the same client (node:http keep-alive agent, procs.ts `httpCall`).
 *
 * The workload. Each worker alternates create-stream and create-topic (1 partition) in the stream
 * it just created, with its own login (`sharedLogin`: all with one login, whose writes run on the
 * credential's pool of VSR sessions, `http_sessions_per_credential`; `sessionsPerCredential` runs
 * one vrmeta cluster per bound in the same rounds, so before/after compare side by side; one
 * request is in flight per session, so a bound of 1 serialises a shared login). etcd gets one PUT per
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
import { Etcd3 } from 'etcd3';
import { BinaryClient } from '../src/transport/binary-client.js';
import { EtcdCluster, VrmetaCluster, benchEtcd, etcdReport, httpCall, keepAliveAgent, readCpuMs, type ChildHandle, type EtcdBenchOptions, type EtcdReport } from './procs.js';
import { formatMs, formatNumber, formatRatio, machineLine, runSlice, summarize, type LoadResult, type LoadSlice, type Operation } from './load.js';

export const CLUSTER_LEVELS = [1, 8, 64] as const;
/** The binary protocol (vrmeta over its Iggy TCP port vs etcd over gRPC) also runs 256 clients. */
export const BINARY_LEVELS = [1, 8, 64, 256] as const;
/** Which client protocol a comparison uses: HTTP (vrmeta REST vs etcd's JSON gateway) or binary. */
export type BenchProtocol = 'http' | 'binary';
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
  /** Default both: HTTP at 1/8/64 clients, binary (Iggy TCP vs etcd gRPC) at 1/8/64/256. */
  readonly protocols?: readonly BenchProtocol[];
  /** HTTP: every vrmeta worker writes with one login instead of one login each. */
  readonly sharedLogin?: boolean;
  /** vrmeta's http_sessions_per_credential, one cluster per value (default: one, the server default). */
  readonly sessionsPerCredential?: readonly number[];
}

export interface ClusterBenchRow {
  readonly system: 'vrmeta' | 'etcd';
  /** http: vrmeta's REST API vs etcd's JSON gateway; binary: Iggy's TCP protocol vs etcd's gRPC. */
  readonly protocol: BenchProtocol;
  readonly kernels: 'wasm' | 'ts' | null;
  /** vrmeta HTTP: the http_sessions_per_credential it ran with; null: the server default (or not vrmeta HTTP). */
  readonly sessionsPerCredential: number | null;
  readonly concurrency: number;
  readonly opsPerS: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  readonly ops: number;
  readonly errors: number;
  readonly errorSamples: string[];
  /** vrmeta ops/s / etcd ops/s at the same level and protocol (null for etcd rows or without etcd). */
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
  readonly protocols: BenchProtocol[];
  /** HTTP: all vrmeta workers shared one login. */
  readonly sharedLogin: boolean;
  readonly payload: { readonly streamBodyBytes: number; readonly topicBodyBytes: number; readonly binaryStreamBodyBytes: number; readonly binaryTopicBodyBytes: number };
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

/** The Iggy binary bodies of the same writes: CreateStream = name; CreateTopic = stream id, 1 partition, name. */
function nameBytes(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

function binaryStreamBody(name: string): Buffer {
  return nameBytes(name);
}

function binaryTopicBody(stream: string, name: string): Buffer {
  const streamId = Buffer.from(stream, 'utf8');
  const partitions = Buffer.alloc(4);
  partitions.writeUInt32LE(1);
  return Buffer.concat([Buffer.from([2, streamId.length]), streamId, partitions, nameBytes(name)]);
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

  /** Prefixes the names: the binary target writes into the same cluster as the HTTP one. */
  private readonly prefix: string;

  constructor(concurrency: number, prefix = '') {
    this.prefix = prefix;
    this.streamsCreated = new Array<number>(concurrency).fill(0);
    this.topicNext = new Array<boolean>(concurrency).fill(false);
  }

  /** The worker's next write. */
  next(level: number, worker: number): { stream: string; topic: string | null } {
    const stream = `${this.prefix}${nameOf(level, worker, this.streamsCreated[worker]!)}`;
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
  readonly protocol: BenchProtocol;
  readonly kernels: 'wasm' | 'ts' | null;
  /** vrmeta HTTP targets: the http_sessions_per_credential they run with (null: the default). */
  readonly sessionsPerCredential?: number | null;
  /** The concurrency levels this target is measured at. */
  readonly levels: readonly number[];
  /** The server processes (CPU accounting). */
  pids(): number[];
  operation(level: number): Operation;
  /** The last acknowledged write of the level is visible. */
  verify(level: number): Promise<void>;
  close(): Promise<void>;
}

/** What both targets share: their server processes, and one client agent and writer set per level. */
abstract class ClusterTarget {
  private readonly states = new Map<number, { agent: Agent; writers: Writers }>();
  private readonly processes: { children(): (ChildHandle | null)[]; stopAll(): Promise<void> };
  /** False when another target (the same cluster over the other protocol) stops the processes. */
  private readonly owner: boolean;

  protected constructor(processes: { children(): (ChildHandle | null)[]; stopAll(): Promise<void> }, owner = true) {
    this.processes = processes;
    this.owner = owner;
  }

  /** The server processes (CPU accounting). */
  pids(): number[] {
    return this.processes.children().flatMap((child) => (child === null ? [] : [child.pid]));
  }

  protected level(level: number): { agent: Agent; writers: Writers } {
    let state = this.states.get(level);
    if (state === undefined) {
      state = { agent: keepAliveAgent(level), writers: new Writers(level) };
      this.states.set(level, state);
    }
    return state;
  }

  async close(): Promise<void> {
    for (const { agent } of this.states.values()) agent.destroy();
    if (this.owner) await this.processes.stopAll();
  }
}

class VrmetaTarget extends ClusterTarget implements Target {
  readonly system = 'vrmeta';
  readonly protocol = 'http';
  readonly kernels: 'wasm' | 'ts';
  readonly sessionsPerCredential: number | null;
  readonly levels: readonly number[];
  readonly cluster: VrmetaCluster;
  readonly primary: number;
  private readonly base: string;
  /** One per worker, or one for all (a shared login). */
  private readonly tokens: readonly string[];

  private constructor(
    kernels: 'wasm' | 'ts',
    sessionsPerCredential: number | null,
    cluster: VrmetaCluster,
    primary: number,
    tokens: readonly string[],
    levels: readonly number[],
    owner: boolean,
  ) {
    super(cluster, owner);
    this.kernels = kernels;
    this.sessionsPerCredential = sessionsPerCredential;
    this.cluster = cluster;
    this.primary = primary;
    this.levels = levels;
    this.base = cluster.url(primary);
    this.tokens = tokens;
  }

  static async start(
    kernels: 'wasm' | 'ts',
    levels: readonly number[],
    options: { journalSlots?: number; sharedLogin?: boolean; sessionsPerCredential?: number },
    owner = true,
  ): Promise<VrmetaTarget> {
    const { journalSlots, sessionsPerCredential } = options;
    const cluster = await VrmetaCluster.start({
      kernels,
      ...(journalSlots === undefined ? {} : { journalSlots }),
      ...(sessionsPerCredential === undefined ? {} : { env: { VRMETA_HTTP_SESSIONS_PER_CREDENTIAL: String(sessionsPerCredential) } }),
    });
    try {
      const primary = await cluster.primary();
      const tokensNeeded = options.sharedLogin === true ? Math.min(1, Math.max(0, ...levels)) : Math.max(0, ...levels);
      const tokens: string[] = [];
      while (tokens.length < tokensNeeded) {
        const batch = Math.min(LOGIN_PARALLEL_MAX, tokensNeeded - tokens.length);
        tokens.push(...(await Promise.all(Array.from({ length: batch }, () => cluster.login(primary)))));
      }
      return new VrmetaTarget(kernels, sessionsPerCredential ?? null, cluster, primary, tokens, levels, owner);
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
  }


  operation(level: number): Operation {
    const { agent, writers } = this.level(level);
    return async (worker) => {
      const headers = { authorization: `Bearer ${this.tokens[worker % this.tokens.length]!}` };
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

/**
 * vrmeta over Iggy's binary protocol: one BinaryClient (one connection, one VSR session) per
 * worker, to the primary's client port; each write is a CreateStream or CreateTopic frame with
 * the worker's next request number, and counts only when the committed reply says success and
 * names the created object.
 */
class VrmetaBinaryTarget extends ClusterTarget implements Target {
  readonly system = 'vrmeta';
  readonly protocol = 'binary';
  readonly kernels: 'wasm' | 'ts';
  readonly levels: readonly number[];
  private readonly clients: readonly BinaryClient[];
  private readonly writers = new Map<number, Writers>();

  private constructor(kernels: 'wasm' | 'ts', cluster: VrmetaCluster, clients: readonly BinaryClient[], levels: readonly number[], owner: boolean) {
    super(cluster, owner);
    this.kernels = kernels;
    this.clients = clients;
    this.levels = levels;
  }

  /** Over the cluster of `http` when given (it owns the processes), else over a new cluster. */
  static async start(kernels: 'wasm' | 'ts', levels: readonly number[], http: VrmetaTarget | null, journalSlots?: number): Promise<VrmetaBinaryTarget> {
    const cluster = http?.cluster ?? (await VrmetaCluster.start({ kernels, ...(journalSlots === undefined ? {} : { journalSlots }) }));
    try {
      const primary = http?.primary ?? (await cluster.primary());
      const needed = Math.max(0, ...levels);
      const clients: BinaryClient[] = [];
      while (clients.length < needed) {
        const batch = Math.min(LOGIN_PARALLEL_MAX, needed - clients.length);
        clients.push(
          ...(await Promise.all(
            Array.from({ length: batch }, () => BinaryClient.connect({ addresses: [cluster.tcpAddress(primary)], username: 'iggy', password: 'iggy' })),
          )),
        );
      }
      return new VrmetaBinaryTarget(kernels, cluster, clients, levels, http === null);
    } catch (error) {
      if (http === null) await cluster.stopAll();
      throw error;
    }
  }

  private writersOf(level: number): Writers {
    let writers = this.writers.get(level);
    if (writers === undefined) {
      writers = new Writers(level, 'b');
      this.writers.set(level, writers);
    }
    return writers;
  }

  operation(level: number): Operation {
    const writers = this.writersOf(level);
    return async (worker) => {
      const client = this.clients[worker]!;
      const write = writers.next(level, worker);
      const name = write.topic ?? write.stream;
      const payload =
        write.topic === null
          ? await client.write(128, binaryStreamBody(write.stream))
          : await client.write(132, binaryTopicBody(write.stream, write.topic));
      // A stream's name sits after 32 fixed bytes, a topic's after 49: the reply names the object.
      const at = write.topic === null ? 32 : 49;
      if (payload.byteLength <= at || Buffer.from(payload.subarray(at + 1, at + 1 + payload[at]!)).toString() !== name) {
        throw new Error(`create ${name}: the reply does not describe it`);
      }
      writers.done(worker, write);
    };
  }

  async verify(level: number): Promise<void> {
    const last = this.writersOf(level).last;
    if (last === null) return;
    const body = binaryStreamBody(last.stream);
    const read = await this.clients[0]!.read(200, Buffer.concat([Buffer.from([2]), body]));
    if (read.byteLength === 0) throw new Error(`read-back of stream ${last.stream}: not found`);
  }

  override async close(): Promise<void> {
    for (const client of this.clients) client.close();
    await super.close();
  }
}

class EtcdTarget extends ClusterTarget implements Target {
  readonly system = 'etcd';
  readonly protocol = 'http';
  readonly kernels = null;
  readonly levels: readonly number[];
  readonly cluster: EtcdCluster;
  readonly leader: number;
  private readonly base: string;

  private constructor(cluster: EtcdCluster, leader: number, levels: readonly number[], owner: boolean) {
    super(cluster, owner);
    this.cluster = cluster;
    this.leader = leader;
    this.levels = levels;
    this.base = cluster.url(leader);
  }

  static async start(binary: string, levels: readonly number[], owner = true): Promise<EtcdTarget> {
    const cluster = await EtcdCluster.start(binary);
    try {
      return new EtcdTarget(cluster, await cluster.leader(), levels, owner);
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

/**
 * etcd over its native gRPC API with the official-style npm client (`etcd3`): one client (one
 * HTTP/2 channel to the leader) per level, carrying every worker's PUTs concurrently, the way an
 * etcd application uses it. Same keys and value bytes as the binary vrmeta writes.
 */
class EtcdGrpcTarget extends ClusterTarget implements Target {
  readonly system = 'etcd';
  readonly protocol = 'binary';
  readonly kernels = null;
  readonly levels: readonly number[];
  private readonly endpoint: string;
  private readonly clients = new Map<number, { client: Etcd3; writers: Writers }>();

  private constructor(cluster: EtcdCluster, leader: number, levels: readonly number[], owner: boolean) {
    super(cluster, owner);
    this.levels = levels;
    this.endpoint = cluster.url(leader);
  }

  static async start(binary: string, levels: readonly number[], http: EtcdTarget | null): Promise<EtcdGrpcTarget> {
    const cluster = http?.cluster ?? (await EtcdCluster.start(binary));
    try {
      return new EtcdGrpcTarget(cluster, http?.leader ?? (await cluster.leader()), levels, http === null);
    } catch (error) {
      if (http === null) await cluster.stopAll();
      throw error;
    }
  }

  private stateOf(level: number): { client: Etcd3; writers: Writers } {
    let state = this.clients.get(level);
    if (state === undefined) {
      state = { client: new Etcd3({ hosts: this.endpoint }), writers: new Writers(level, 'b') };
      this.clients.set(level, state);
    }
    return state;
  }

  operation(level: number): Operation {
    const { client, writers } = this.stateOf(level);
    return async (worker) => {
      const write = writers.next(level, worker);
      const key = write.topic === null ? write.stream : `${write.stream}/${write.topic}`;
      const value = write.topic === null ? binaryStreamBody(write.stream) : binaryTopicBody(write.stream, write.topic);
      const answer = await client.put(key).value(value).exec();
      if (answer.header.revision === undefined || answer.header.revision === '') throw new Error(`put ${key}: no revision`);
      writers.done(worker, write);
    };
  }

  async verify(level: number): Promise<void> {
    const { client, writers } = this.stateOf(level);
    if (writers.last === null) return;
    const key = writers.last.topic === null ? writers.last.stream : `${writers.last.stream}/${writers.last.topic}`;
    if ((await client.get(key).buffer()) === null) throw new Error(`read-back of ${key}: not found`);
  }

  override async close(): Promise<void> {
    for (const { client } of this.clients.values()) client.close();
    await super.close();
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
    protocol: target.protocol,
    kernels: target.kernels,
    sessionsPerCredential: target.sessionsPerCredential ?? null,
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
  const bound = target.sessionsPerCredential === undefined || target.sessionsPerCredential === null ? '' : ` ${target.sessionsPerCredential} sessions/credential`;
  return `${target.system} ${target.protocol}${target.kernels === null ? '' : ` ${target.kernels}`}${bound}`;
}

export async function runClusterBench(options: ClusterBenchOptions): Promise<ClusterBenchReport> {
  const log = options.log ?? (() => {});
  const protocols = [...(options.protocols ?? (['http', 'binary'] as const))];
  const httpLevels = [...(options.levels ?? (options.smoke ? SMOKE_LEVELS : CLUSTER_LEVELS))];
  const binaryLevels = [...(options.levels ?? (options.smoke ? SMOKE_LEVELS : BINARY_LEVELS))];
  const levels = [...new Set([...(protocols.includes('http') ? httpLevels : []), ...(protocols.includes('binary') ? binaryLevels : [])])].sort((a, b) => a - b);
  const rounds = options.rounds ?? (options.smoke ? 1 : ROUNDS);
  const durationS = options.durationS ?? (options.smoke ? 0.5 : 10);
  const sliceMs = Math.round((durationS * 1000) / rounds);
  log(`# vrmeta bench cluster: ${machineLine()}`);

  const availability = benchEtcd(options, log);

  const targets: Target[] = [];
  const slices = new Map<Target, Map<number, LoadSlice[]>>();
  const cpu = new Map<Target, Map<number, CpuTally>>();
  try {
    // One cluster per system (and kernels), measured over both protocols: the binary target
    // rides on the HTTP target's processes when both run.
    for (const kernels of options.kernels) {
      // One cluster per sessions-per-credential bound; the binary target rides on the first.
      const bounds = options.sessionsPerCredential ?? [undefined];
      for (const [index, sessionsPerCredential] of bounds.entries()) {
        log(`[bench] vrmeta (--kernels ${kernels}${sessionsPerCredential === undefined ? '' : `, ${sessionsPerCredential} sessions per credential`}): starting 3 replicas`);
        const http = await VrmetaTarget.start(
          kernels,
          protocols.includes('http') ? httpLevels : [],
          {
            ...(options.journalSlots === undefined ? {} : { journalSlots: options.journalSlots }),
            ...(sessionsPerCredential === undefined ? {} : { sessionsPerCredential }),
            sharedLogin: options.sharedLogin === true,
          },
          true,
        );
        targets.push(http);
        if (index === 0 && protocols.includes('binary')) targets.push(await VrmetaBinaryTarget.start(kernels, binaryLevels, http));
      }
    }
    if (availability.binary !== null) {
      log(`[bench] etcd ${availability.version ?? '?'} (${availability.binary}): starting 3 members`);
      const http = await EtcdTarget.start(availability.binary, protocols.includes('http') ? httpLevels : [], true);
      targets.push(http);
      if (protocols.includes('binary')) targets.push(await EtcdGrpcTarget.start(availability.binary, binaryLevels, http));
    }
    for (const target of targets) {
      slices.set(target, new Map(target.levels.map((level) => [level, []])));
      cpu.set(target, new Map(target.levels.map((level) => [level, { byPid: new Map<number, number>(), windowMs: 0 }])));
    }
    for (let round = 0; round < rounds; round++) {
      for (const level of levels) {
        for (const target of targets) {
          if (!target.levels.includes(level)) continue;
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
    for (const target of targets) for (const level of target.levels) await target.verify(level);
  } finally {
    // Targets sharing a cluster's processes close before the one that stops them.
    for (const target of [...targets].reverse()) await target.close();
  }

  const rows = targets.flatMap((target) =>
    target.levels.map((level) => rowOf(target, summarize(level, slices.get(target)!.get(level)!), cpu.get(target)!.get(level)!)),
  );
  const withRatios = rows.map((row) => {
    if (row.system !== 'vrmeta') return row;
    const peer = rows.find((other) => other.system === 'etcd' && other.protocol === row.protocol && other.concurrency === row.concurrency);
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
    protocols,
    sharedLogin: options.sharedLogin === true,
    payload: {
      streamBodyBytes: Buffer.byteLength(streamBody(sample)),
      topicBodyBytes: Buffer.byteLength(topicBody(`t${sample}`)),
      binaryStreamBodyBytes: binaryStreamBody(sample).length,
      binaryTopicBodyBytes: binaryTopicBody(sample, `t${sample}`).length,
    },
    etcd: etcdReport(availability),
    rows: withRatios,
  };
}

export function formatClusterReport(report: ClusterBenchReport): string {
  const lines = [
    `vrmeta bench cluster${report.smoke ? ' (smoke: numbers meaningless)' : ''}: ${report.machine}`,
    `closed loop, ${report.durationS} s per level and system in ${report.rounds} interleaved round(s); writes alternate create-stream and create-topic (HTTP: ${report.payload.streamBodyBytes} B / ${report.payload.topicBodyBytes} B JSON bodies; binary: ${report.payload.binaryStreamBodyBytes} B / ${report.payload.binaryTopicBodyBytes} B Iggy bodies); etcd: one PUT per write, same bytes`,
    `protocols: http = vrmeta REST (${report.sharedLogin ? 'one login shared by every client' : 'one login per client'}) vs etcd v3 JSON gateway; binary = vrmeta Iggy TCP (one connection and VSR session per client) vs etcd gRPC (etcd3 client, one channel)`,
    report.etcd.ran ? `etcd ${report.etcd.version ?? '?'} (${report.etcd.binary ?? '?'}), default settings` : `etcd: not run (${report.etcd.skipped ?? 'unknown'})`,
    '',
    '| system | protocol | kernels | clients | ops/s | p50 | p99 | errors | vrmeta / etcd | server CPU per write | busiest process |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of report.rows) {
    lines.push(
      `| ${row.system}${row.sessionsPerCredential === null ? '' : ` (${row.sessionsPerCredential} sessions/credential)`} | ${row.protocol === 'binary' ? (row.system === 'vrmeta' ? 'iggy tcp' : 'grpc') : 'http'} | ${row.kernels ?? '—'} | ${row.concurrency} | ${formatNumber(row.opsPerS)} | ${formatMs(row.latencyMsP50)} | ${formatMs(row.latencyMsP99)} | ${row.errors} | ${row.system === 'vrmeta' ? formatRatio(row.vsEtcd) : ''} | ${Number.isFinite(row.serverCpuMsPerOp) ? `${row.serverCpuMsPerOp.toFixed(2)} ms` : '—'} | ${Number.isFinite(row.busiestCpuPercent) ? `${row.busiestCpuPercent.toFixed(0)}% of a core` : '—'} |`,
    );
  }
  for (const row of report.rows.filter((candidate) => candidate.errorSamples.length > 0)) {
    lines.push('', `errors of ${row.system} ${row.protocol} ${row.kernels ?? ''} c=${row.concurrency}: ${row.errorSamples.join(' | ')}`);
  }
  return lines.join('\n');
}

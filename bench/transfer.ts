/**
 * `vrmeta bench transfer`: how fast a replica that lost its disk catches up by state transfer, and
 * how fast a replica restarts on a full WAL and a large snapshot, against etcd doing the same.
 *
 * Per kernel mode, one 3-replica cluster grows its metadata through the HTTP API to each snapshot
 * size in turn (ascending; `--sizes`, MiB of snapshot.bin). The cheapest real volume is partitions:
 * one `POST /streams/{s}/topics/{t}/partitions` adds 1000 (Iggy's per-request maximum) at 8
 * snapshot bytes each (a u64 created_at in the topic's partition column), for a ~30-byte prepare. The bench predicts the
 * snapshot size from the partition ids it created, then advances to the next checkpoint with tiny
 * filler writes (create-stream), so snapshot.bin lands just above the size asked for. At each size:
 *
 *   recovery: fill the WAL (filler writes up to just below the next checkpoint), stop a backup
 *     (SIGTERM), start it on its data directory, time start -> /readyz 200; ops replayed are its
 *     commit_min at the stop minus the checkpoint op (the snapshot restores the rest);
 *   catch-up: stop the same backup, wipe its data directory, start it with --rejoin, time start ->
 *     /readyz 200 with commit_min at the cluster's commit and the peers' checkpoint id. The
 *     receiver logs at info, so its own timestamps split the time into fetch (target accepted ->
 *     last chunk) and install (-> installed). RSS (/proc VmRSS every POLL_MS, and VmHWM at the end)
 *     is taken relative to its RSS when it accepted the target, before the first chunk.
 *
 * etcd (Debian's etcd-server, default settings: WAL fsync, snapshot-count 100000) gets the same
 * number of bytes as 1 KiB PUTs (keys + values = the vrmeta snapshot size), then a follower is
 * wiped and rejoins the way etcd documents it (member remove, member add, start with
 * --initial-cluster-state existing): time start -> /health true and applied index >= the
 * leader's index. Its recovery is a restart of another follower on its data directory.
 *
 * `shape: 'realistic'` replaces the growth to each size with one population of streams, topics,
 * users, permissions and tokens (bench/transfer-shape.ts), measured the same way at the snapshot
 * it makes. The report opens with the growth curve: restart, catch-up and RSS per size.
 *
 * MB/s here is 10^6 bytes per second (the DESIGN.md §6 bar: >= 200 MB/s, RSS growth <= 32 MiB).
 */
import {
  BUNDLED_CLI_PATH,
  EtcdCluster,
  VrmetaCluster,
  benchEtcd,
  etcdReport,
  httpCall,
  keepAliveAgent,
  readMemory,
  waitFor,
  withTails,
  type ChildHandle,
  type EtcdBenchOptions,
  type EtcdReport,
} from './procs.js';
import { formatMiB, formatNumber, machineLine } from './load.js';
import { PARTITION_CREATED_AT_SIZE } from '../src/format/snapshot-model.js';
import { runSocketBaseline, type SocketBaselineRow } from './socket-baseline.js';
import {
  UNBOUNDED_PASSWORD_VERIFY_ENV,
  buildRealistic,
  realisticShape,
  transferCurveSvg,
  type CurvePoint,
  type RealisticBuild,
  type RealisticShape,
} from './transfer-shape.js';

const MB = 1e6;
const MIB = 1024 * 1024;
/** Iggy MAX_PARTITIONS_PER_REQUEST: the most volume one write can add. */
const PARTITIONS_PER_OP = 1000;
/** Partitions per topic kept well below the state machine's per-topic limit (1,000,000). */
const PARTITIONS_PER_TOPIC_MAX = 900_000;
/** Concurrent writers building volume (each with its own session). */
const VOLUME_WORKERS = 8;
/** Filler writes stop this many ops before the next checkpoint (a "full" WAL that has not rolled over). */
const WAL_FILL_MARGIN_OPS = 4;
const CATCH_UP_TIMEOUT_MS = 600_000;
const CHECKPOINT_TIMEOUT_MS = 300_000;
/** etcd value size: keys + values add up to the vrmeta snapshot size. */
const ETCD_VALUE_BYTES = 1024;
const ETCD_PUT_CONCURRENCY = 64;

export interface TransferBenchOptions extends EtcdBenchOptions {
  /** Snapshot sizes in MiB (ascending order is used). */
  readonly sizesMiB?: readonly number[];
  /**
   * `partitions` (default): grow to each of `sizesMiB` with the cheapest bytes. `realistic`: one
   * population of streams, topics, users, permissions and tokens (transfer-shape.ts) at
   * `realisticScale`; `sizesMiB` is then ignored and the report's sizes are the measured snapshots.
   */
  readonly shape?: 'partitions' | 'realistic';
  /** Scale of the realistic shape: 1 = 100,000 topics and 10,000 users (default 0.1, smoke 0.002). */
  readonly realisticScale?: number;
}

/** The realistic population as built (per kernel mode), with the snapshot it made. */
export interface RealisticRow extends RealisticShape, RealisticBuild {
  readonly kernels: 'wasm' | 'ts';
  readonly snapshotBytes: number;
}

export interface VrmetaTransferRow {
  readonly kernels: 'wasm' | 'ts';
  readonly sizeMiB: number;
  /** snapshot.bin of the serving peers (msgpack + 20-byte trailer). */
  readonly snapshotBytes: number;
  readonly checkpointOp: number;
  /** `vrmeta start --rejoin` -> /readyz 200 with the cluster's commit. */
  readonly catchUpMs: number;
  readonly catchUpMBps: number;
  /** Start -> target accepted (process boot, joining the view, asking peers for an offer). */
  readonly beforeFetchMs: number | null;
  /** Receiver's log: target accepted -> last chunk written. */
  readonly fetchMs: number | null;
  readonly fetchMBps: number | null;
  /** Receiver's log: last chunk -> installed (verify, rename, restore the state machine). */
  readonly installMs: number | null;
  /** Installed -> ready (repairing the ops above the checkpoint from the peers' WALs). */
  readonly afterInstallMs: number | null;
  /** Receiver's VmRSS when it accepted the target (before any chunk). */
  readonly rssBaselineBytes: number;
  /** Highest VmRSS sample between target accepted and the last chunk, minus the baseline. */
  readonly rssFetchGrowthBytes: number | null;
  /** VmHWM once ready, minus the baseline (includes the restored state machine). */
  readonly rssPeakGrowthBytes: number;
  /** VmHWM once ready. */
  readonly rssPeakBytes: number;
  /** VmRSS of the primary, which holds the same state (what the state itself costs in memory). */
  readonly peerRssBytes: number;
  /**
   * VmRSS of the other backup (neither the primary nor the rejoined replica): the same state,
   * without the checkpoint payload a primary keeps in memory.
   */
  readonly backupRssBytes: number;
  /**
   * VmRSS of each replica after SETTLE_MS with no load (null in smoke runs): what a replica holds
   * once the collector has run, rather than the garbage of the fetch it just served or received.
   */
  readonly settledRssBytes: { readonly primary: number; readonly backup: number; readonly rejoined: number } | null;
  /** The replicas the accepted offer named (chunks come from the first; the primary is `primary`). */
  readonly servers: readonly number[];
  readonly primary: number;
}

export interface EtcdTransferRow {
  readonly sizeMiB: number;
  readonly dataBytes: number;
  readonly keys: number;
  readonly dbSizeBytes: number;
  /** `etcd --initial-cluster-state existing` -> /health true and applied index >= the leader's. */
  readonly catchUpMs: number;
  readonly catchUpMBps: number;
  /** -> first /health true (etcd reports healthy before it has applied everything). */
  readonly healthyMs: number | null;
  /**
   * VmHWM of the rejoined member once caught up. (No growth figure: etcd catches up within
   * milliseconds of boot, before any meaningful baseline can be sampled.)
   */
  readonly rssPeakBytes: number;
  /** VmRSS of the leader, which holds the same data. */
  readonly peerRssBytes: number;
  /** The leader sent a snapshot (true) or log entries only (false), from the member's log. */
  readonly viaSnapshot: boolean | null;
}

export interface RecoveryRow {
  readonly system: 'vrmeta' | 'etcd';
  readonly kernels: 'wasm' | 'ts' | null;
  readonly sizeMiB: number;
  /** vrmeta: snapshot.bin; etcd: the bbolt db. */
  readonly stateBytes: number;
  /** vrmeta: ops above the checkpoint (replayed from the WAL); etcd: raft entries (its WAL, no snapshot below 100k). */
  readonly walOps: number;
  /** Start -> /readyz 200 (vrmeta) or /health true and applied index caught up (etcd). */
  readonly restartMs: number;
  /** vrmeta: start -> 'replica started' (process boot, recovery from disk, state restored); null for etcd. */
  readonly bootMs: number | null;
  /** The restarted replica's `boot phases` record (ms per phase); null for etcd. */
  readonly bootPhasesMs: Record<string, number> | null;
  readonly walOpsPerS: number;
}

export interface BuildRow {
  readonly system: 'vrmeta' | 'etcd';
  readonly kernels: 'wasm' | 'ts' | null;
  readonly sizeMiB: number;
  readonly writes: number;
  readonly seconds: number;
}

export interface TransferBenchReport {
  readonly bench: 'transfer';
  readonly machine: string;
  readonly smoke: boolean;
  readonly shape: 'partitions' | 'realistic';
  /** Asked for (partitions) or measured, one decimal (realistic). */
  readonly sizesMiB: number[];
  /** The realistic population per kernel mode (empty for `partitions`). */
  readonly realistic: RealisticRow[];
  readonly journalSlots: number;
  readonly prepareQueueDepth: number;
  readonly etcd: EtcdReport;
  readonly transfers: VrmetaTransferRow[];
  readonly etcdTransfers: EtcdTransferRow[];
  readonly recoveries: RecoveryRow[];
  readonly builds: BuildRow[];
  /** Bare node:net over loopback in the fetch's shape (socket-baseline.ts): the floor to read the fetch rate against. */
  readonly socketBaseline: SocketBaselineRow[];
}

// ------------------------------------------------------------------------------ vrmeta volume

/**
 * Snapshot bytes of partitions with ids [from, to): since snapshot format 4 a topic's partitions
 * are one bin of u64 created_at values (ids implicit), 8 bytes each; the per-topic bin header
 * (at most 5 bytes) is left out like the rest of the topic record.
 */
function partitionBytes(from: number, to: number): number {
  return (to - from) * PARTITION_CREATED_AT_SIZE;
}

interface Writer {
  readonly token: string;
}

/** Builds metadata volume on a vrmeta cluster through its HTTP API, from the primary. */
export class VrmetaVolume {
  private readonly cluster: VrmetaCluster;
  private readonly primary: number;
  private readonly writers: Writer[];
  private readonly agent = keepAliveAgent(VOLUME_WORKERS);
  /** Partitions per topic `p<index>` of stream `vol`. */
  private readonly topicPartitions: number[] = [];
  private predicted = 0;
  private fillers = 0;
  writes = 0;

  private constructor(cluster: VrmetaCluster, primary: number, writers: Writer[]) {
    this.cluster = cluster;
    this.primary = primary;
    this.writers = writers;
  }

  static async create(cluster: VrmetaCluster, primary: number, workers: number): Promise<VrmetaVolume> {
    const writers: Writer[] = [];
    for (let index = 0; index < workers; index++) writers.push({ token: await cluster.login(primary) });
    const volume = new VrmetaVolume(cluster, primary, writers);
    await volume.post(0, '/streams', { name: 'vol' });
    return volume;
  }

  get predictedBytes(): number {
    return this.predicted;
  }

  close(): void {
    this.agent.destroy();
  }

  private async post(worker: number, path: string, body: unknown): Promise<string> {
    const answer = await httpCall(this.agent, 'POST', `${this.cluster.url(this.primary)}${path}`, JSON.stringify(body), {
      authorization: `Bearer ${this.writers[worker]!.token}`,
    });
    if (answer.status !== 200) throw withTails(`POST ${path}: HTTP ${answer.status} ${answer.text.slice(0, 300)}`, this.cluster.children());
    this.writes += 1;
    return answer.text;
  }

  private async newTopic(worker: number): Promise<number> {
    const index = this.topicPartitions.length;
    this.topicPartitions.push(0);
    const text = await this.post(worker, '/streams/vol/topics', {
      name: `p${index}`,
      partitions_count: 1,
      compression_algorithm: 'none',
      message_expiry: 0,
      max_topic_size: 0,
      replication_factor: 1,
    });
    // The first partition's id tells whether ids start at 0 or 1 (it matters for the size estimate).
    const firstId = /"partitions":\[\{"id":(\d+)/.exec(text);
    const from = firstId === null ? 1 : Number(firstId[1]);
    this.predicted += partitionBytes(from, from + 1);
    this.topicPartitions[index] = from + 1;
    return index;
  }

  /** Adds partitions (1000 per write, `workers` writers) until the predicted snapshot reaches `bytes`. */
  async growTo(bytes: number): Promise<void> {
    await Promise.all(
      this.writers.map(async (_, worker) => {
        let topic = -1;
        while (this.predicted < bytes) {
          if (topic < 0 || this.topicPartitions[topic]! + PARTITIONS_PER_OP > PARTITIONS_PER_TOPIC_MAX) topic = await this.newTopic(worker);
          const from = this.topicPartitions[topic]!;
          this.topicPartitions[topic] = from + PARTITIONS_PER_OP;
          this.predicted += partitionBytes(from, from + PARTITIONS_PER_OP);
          await this.post(worker, `/streams/vol/topics/p${topic}/partitions`, { partitions_count: PARTITIONS_PER_OP });
        }
      }),
    );
  }

  /** Exactly `count` small writes (create-stream): at most `count` ops (concurrent ones batch). */
  async filler(count: number): Promise<void> {
    let issued = 0;
    await Promise.all(
      this.writers.map(async (_, worker) => {
        while (issued < count) {
          issued += 1;
          const name = `f${this.fillers++}`;
          await this.post(worker, '/streams', { name });
        }
      }),
    );
  }

  /** Filler writes until every replica has taken the next checkpoint (snapshot.bin rewritten). */
  async advanceToCheckpoint(): Promise<{ checkpointOp: number; snapshotBytes: number }> {
    const interval = this.cluster.checkpointIntervalOps;
    let status = await this.cluster.status(this.primary);
    const next = (Math.floor(status.commit_max / interval) + 1) * interval;
    // `next - commit_max` writes make at most that many ops (the primary batches concurrent ones):
    // repeat until commit_max reaches `next`; every replica then encodes and writes the snapshot.
    while (status.commit_max < next) {
      await this.filler(next - status.commit_max);
      status = await this.cluster.status(this.primary);
    }
    const indices = Array.from({ length: this.cluster.replicaCount }, (_, index) => index);
    return waitFor(
      `checkpoint ${next} on every replica`,
      async () => {
        const statuses = await Promise.all(indices.map((index) => this.cluster.status(index)));
        if (!statuses.every((s) => s.checkpoint_op >= next)) return null;
        const sizes = indices.map((index) => this.cluster.snapshotBytes(index));
        if (sizes.some((size) => size !== sizes[0] || size === 0)) return null;
        return { checkpointOp: statuses[0]!.checkpoint_op, snapshotBytes: sizes[0]! };
      },
      CHECKPOINT_TIMEOUT_MS,
      this.cluster.children(),
      100,
    );
  }

  /** Filler writes up to a few ops below the next checkpoint: the WAL holds a whole interval. */
  async fillWal(): Promise<{ commit: number; checkpointOp: number }> {
    const interval = this.cluster.checkpointIntervalOps;
    for (;;) {
      const status = await this.cluster.status(this.primary);
      const target = status.checkpoint_op + interval - WAL_FILL_MARGIN_OPS;
      if (status.commit_max >= target) return { commit: status.commit_max, checkpointOp: status.checkpoint_op };
      await this.filler(Math.min(target - status.commit_max, interval));
    }
  }
}

/** Waits until every running replica has applied `commit`. */
async function waitConverged(cluster: VrmetaCluster, commit: number, timeoutMs = 120_000): Promise<void> {
  await waitFor(
    `every replica at commit ${commit}`,
    async () => {
      for (let index = 0; index < cluster.replicaCount; index++) {
        const status = await cluster.status(index);
        if (status.commit_min < commit) return null;
      }
      return true;
    },
    timeoutMs,
    cluster.children(),
    100,
  );
}

interface Marker {
  readonly atMs: number;
  readonly msg: string;
  readonly record: Record<string, unknown>;
}

function markers(child: ChildHandle): Marker[] {
  const out: Marker[] = [];
  for (const { line } of child.kept) {
    try {
      const record = JSON.parse(line) as Record<string, unknown>;
      if (typeof record['msg'] === 'string' && typeof record['time'] === 'number') out.push({ atMs: record['time'], msg: record['msg'], record });
    } catch {
      // Not a JSON line.
    }
  }
  return out;
}

const TRANSFER_MARKERS = ['"msg":"state transfer', '"msg":"replica started"', '"msg":"recovery_done"', '"phases_ms"'];

function keepTransferMarkers(line: string): boolean {
  return TRANSFER_MARKERS.some((marker) => line.includes(marker));
}

async function vrmetaRecovery(cluster: VrmetaCluster, primary: number, backup: number, kernels: 'wasm' | 'ts', sizeMiB: number, snapshotBytes: number): Promise<RecoveryRow> {
  const before = await cluster.status(backup);
  await cluster.stop(backup, 'SIGTERM');
  const spawnedAtMs = Date.now();
  const startedMs = performance.now();
  const child = cluster.spawn(backup, { logLevel: 'info', keep: keepTransferMarkers });
  await cluster.waitReady(backup, CATCH_UP_TIMEOUT_MS);
  const restartMs = performance.now() - startedMs;
  const after = await cluster.status(backup);
  if (after.commit_min < before.commit_min) throw new Error(`replica ${backup} restarted at commit ${after.commit_min} < ${before.commit_min}`);
  await waitConverged(cluster, (await cluster.status(primary)).commit_max);
  const walOps = before.commit_min - before.checkpoint_op;
  const started = markers(child).find((mark) => mark.msg === 'replica started');
  const phases = markers(child).find((mark) => mark.record['phases_ms'] !== undefined);
  return {
    system: 'vrmeta',
    kernels,
    sizeMiB,
    stateBytes: snapshotBytes,
    walOps,
    restartMs,
    bootMs: started === undefined ? null : started.atMs - spawnedAtMs,
    bootPhasesMs: (phases?.record['phases_ms'] as Record<string, number> | undefined) ?? null,
    walOpsPerS: walOps / (restartMs / 1000),
  };
}

/** How long a cluster idles before the settled RSS samples (V8's memory reducer runs after ~8 s idle). */
const SETTLE_MS = 12_000;

async function vrmetaCatchUp(
  cluster: VrmetaCluster,
  primary: number,
  backup: number,
  kernels: 'wasm' | 'ts',
  sizeMiB: number,
  snapshot: { checkpointOp: number; snapshotBytes: number },
  settle: boolean,
): Promise<VrmetaTransferRow> {
  const primaryStatus = await cluster.status(primary);
  await waitConverged(cluster, primaryStatus.commit_max);
  await cluster.stop(backup, 'SIGTERM');
  cluster.wipe(backup);
  const spawnedAtMs = Date.now();
  const startedMs = performance.now();
  const child = cluster.spawn(backup, { rejoin: true, logLevel: 'info', keep: keepTransferMarkers });
  const samples: { atMs: number; rssBytes: number }[] = [];
  let catchUpMs = 0;
  await waitFor(
    `replica ${backup} to rejoin by state transfer`,
    async () => {
      const memory = readMemory(child.pid);
      if (memory !== null) samples.push({ atMs: Date.now(), rssBytes: memory.rssBytes });
      const ready = await cluster.readyz(backup);
      if (ready.status !== 200) return null;
      const elapsedMs = performance.now() - startedMs;
      const status = await cluster.status(backup);
      if (status.commit_min < primaryStatus.commit_max) return null;
      catchUpMs = elapsedMs;
      return true;
    },
    CATCH_UP_TIMEOUT_MS,
    cluster.children(),
  );
  const memory = readMemory(child.pid);
  const received = await cluster.status(backup);
  if (received.checkpoint_id !== primaryStatus.checkpoint_id) {
    throw withTails(`replica ${backup} rejoined at checkpoint ${received.checkpoint_id}, the cluster is at ${primaryStatus.checkpoint_id}`, cluster.children());
  }
  const marks = markers(child);
  const accepted = marks.find((mark) => mark.msg === 'state transfer target accepted');
  const lastChunk = marks.find((mark) => mark.msg === 'state transfer progress' && mark.record['percent'] === 100);
  const installed = marks.find((mark) => mark.msg === 'state transfer installed');
  if (accepted === undefined || installed === undefined) {
    throw withTails(`replica ${backup} became ready without a logged state transfer (started ${spawnedAtMs})`, cluster.children());
  }
  const before = samples.filter((sample) => sample.atMs <= accepted.atMs);
  const rssBaselineBytes = (before.at(-1) ?? samples[0])?.rssBytes ?? 0;
  const fetching = lastChunk === undefined ? [] : samples.filter((sample) => sample.atMs >= accepted.atMs && sample.atMs <= lastChunk.atMs);
  const fetchMs = lastChunk === undefined ? null : lastChunk.atMs - accepted.atMs;
  const artifactBytes = Number(accepted.record['bytes'] ?? snapshot.snapshotBytes);
  const peerMemory = readMemory(cluster.child(primary)!.pid);
  const other = [0, 1, 2].find((index) => index !== primary && index !== backup)!;
  const otherMemory = readMemory(cluster.child(other)!.pid);
  let settledRssBytes: VrmetaTransferRow['settledRssBytes'] = null;
  if (settle) {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const rss = (index: number): number => readMemory(cluster.child(index)!.pid)?.rssBytes ?? 0;
    settledRssBytes = { primary: rss(primary), backup: rss(other), rejoined: rss(backup) };
  }
  return {
    kernels,
    sizeMiB,
    snapshotBytes: snapshot.snapshotBytes,
    checkpointOp: snapshot.checkpointOp,
    catchUpMs,
    catchUpMBps: snapshot.snapshotBytes / MB / (catchUpMs / 1000),
    beforeFetchMs: accepted.atMs - spawnedAtMs,
    fetchMs,
    fetchMBps: fetchMs === null || fetchMs <= 0 ? null : artifactBytes / MB / (fetchMs / 1000),
    installMs: lastChunk === undefined ? null : installed.atMs - lastChunk.atMs,
    afterInstallMs: spawnedAtMs + catchUpMs - installed.atMs,
    rssBaselineBytes,
    rssFetchGrowthBytes: fetching.length === 0 ? null : Math.max(...fetching.map((sample) => sample.rssBytes)) - rssBaselineBytes,
    rssPeakGrowthBytes: (memory?.hwmBytes ?? 0) - rssBaselineBytes,
    rssPeakBytes: memory?.hwmBytes ?? 0,
    peerRssBytes: peerMemory?.rssBytes ?? 0,
    backupRssBytes: otherMemory?.rssBytes ?? 0,
    settledRssBytes,
    servers: (accepted.record['servers'] as number[] | undefined) ?? [],
    primary,
  };
}

/** The WAL the transfer clusters run with: a smoke snapshot checkpoints every 48 ops. */
function vrmetaShape(smoke: boolean): { journalSlots: number; prepareQueueDepth: number } {
  return smoke ? { journalSlots: 64, prepareQueueDepth: 8 } : { journalSlots: 1024, prepareQueueDepth: 32 };
}

/** A measured snapshot size as the report's size key: MiB with one decimal (at least 0.1). */
function measuredMiB(bytes: number): number {
  return Math.max(0.1, Math.round((bytes / MIB) * 10) / 10);
}

async function runVrmeta(
  kernels: 'wasm' | 'ts',
  sizesMiB: readonly number[],
  smoke: boolean,
  realistic: RealisticShape | null,
  log: (line: string) => void,
  out: { transfers: VrmetaTransferRow[]; recoveries: RecoveryRow[]; builds: BuildRow[]; snapshotBytes: Map<number, number>; realistic: RealisticRow[] },
): Promise<void> {
  const { journalSlots, prepareQueueDepth } = vrmetaShape(smoke);
  log(`[bench] vrmeta (--kernels ${kernels}): starting 3 replicas (journal ${journalSlots} slots)`);
  // The realistic shape logs in as each of its users once: the password gate (20 per second)
  // would set its build time, so its clusters lift it (transfer-shape.ts says what that costs).
  const env = realistic === null ? {} : { [UNBOUNDED_PASSWORD_VERIFY_ENV]: '1' };
  // Replicas run the bundled CLI, as `npm start` and the package's bin do: restart and catch-up
  // are timed from process start, so module loading is part of what they measure.
  const cliPath = BUNDLED_CLI_PATH;
  const cluster = await VrmetaCluster.start({ kernels, journalSlots, prepareQueueDepth, env, cliPath });
  let volume: VrmetaVolume | null = null;
  try {
    const primary = await cluster.primary();
    const backup = (primary + 1) % cluster.replicaCount;
    volume = await VrmetaVolume.create(cluster, primary, smoke ? 4 : VOLUME_WORKERS);
    // One step per size asked for, or a single step (null) that builds the realistic population.
    const steps: (number | null)[] = realistic === null ? [...sizesMiB] : [null];
    for (const step of steps) {
      const buildStartMs = performance.now();
      const writesBefore = volume.writes;
      let built: RealisticBuild | null = null;
      if (step !== null) await volume.growTo(step * MIB);
      else {
        log(
          `[bench] vrmeta ${kernels}: building the realistic shape: ${formatNumber(realistic!.streams)} streams x ${realistic!.topicsPerStream} topics x ${realistic!.partitionsPerTopic} partitions, ${formatNumber(realistic!.users)} users with permissions and a token`,
        );
        built = await buildRealistic(cluster, primary, realistic!, smoke ? 4 : undefined);
      }
      const snapshot = await volume.advanceToCheckpoint();
      // Realistic: every kernel mode's rows share the first one's size key (etcd gets those bytes).
      const sizeMiB = step ?? measuredMiB(out.realistic[0]?.snapshotBytes ?? snapshot.snapshotBytes);
      const writes = volume.writes - writesBefore + (built?.writes ?? 0);
      if (built !== null) out.realistic.push({ ...realistic!, ...built, kernels, snapshotBytes: snapshot.snapshotBytes });
      out.builds.push({ system: 'vrmeta', kernels, sizeMiB, writes, seconds: (performance.now() - buildStartMs) / 1000 });
      if (!out.snapshotBytes.has(sizeMiB)) out.snapshotBytes.set(sizeMiB, snapshot.snapshotBytes);
      log(`[bench] vrmeta ${kernels}: snapshot ${formatMiB(snapshot.snapshotBytes)} at checkpoint ${snapshot.checkpointOp} (${writes} writes)`);

      const wal = await volume.fillWal();
      await waitConverged(cluster, wal.commit);
      const recovery = await vrmetaRecovery(cluster, primary, backup, kernels, sizeMiB, snapshot.snapshotBytes);
      out.recoveries.push(recovery);
      log(`[bench] vrmeta ${kernels}: restart with ${recovery.walOps} WAL ops: ready in ${formatNumber(recovery.restartMs)} ms`);
      if (recovery.bootPhasesMs !== null) {
        const phases = Object.entries(recovery.bootPhasesMs).map(([phase, ms]) => `${phase} ${ms}`);
        log(`[bench] vrmeta ${kernels}: restart boot phases (ms): ${phases.join(', ')}`);
      }

      const transfer = await vrmetaCatchUp(cluster, primary, backup, kernels, sizeMiB, snapshot, !smoke);
      out.transfers.push(transfer);
      log(
        `[bench] vrmeta ${kernels}: rejoin caught up in ${formatNumber(transfer.catchUpMs)} ms (${transfer.catchUpMBps.toFixed(1)} MB/s; fetch ${transfer.fetchMBps?.toFixed(1) ?? '?'} MB/s), RSS +${formatMiB(transfer.rssFetchGrowthBytes ?? 0)} fetching, +${formatMiB(transfer.rssPeakGrowthBytes)} peak`,
      );
      const settled = transfer.settledRssBytes;
      if (settled !== null) {
        log(`[bench] vrmeta ${kernels}: RSS after ${SETTLE_MS / 1000} s idle: primary ${formatMiB(settled.primary)}, backup ${formatMiB(settled.backup)}, rejoined ${formatMiB(settled.rejoined)}`);
      }
    }
  } finally {
    volume?.close();
    await cluster.stopAll();
  }
}

// ------------------------------------------------------------------------------ etcd

/** A deterministic printable value of `length` bytes (etcd stores bytes as given). */
function etcdValue(seed: number, length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  let state = (seed * 2654435761) >>> 0 || 1;
  let out = '';
  for (let index = 0; index < length; index++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out += alphabet[(state >>> 0) & 63];
  }
  return out;
}

class EtcdVolume {
  private readonly cluster: EtcdCluster;
  private readonly agent = keepAliveAgent(ETCD_PUT_CONCURRENCY);
  bytes = 0;
  keys = 0;
  /** A few distinct values, reused: etcd does not deduplicate or compress. */
  private readonly values = Array.from({ length: 16 }, (_, index) => Buffer.from(etcdValue(index + 1, ETCD_VALUE_BYTES)).toString('base64'));

  constructor(cluster: EtcdCluster) {
    this.cluster = cluster;
  }

  close(): void {
    this.agent.destroy();
  }

  /** PUTs through `leader` until keys + values reach `bytes`. */
  async growTo(leader: number, bytes: number): Promise<void> {
    const url = `${this.cluster.url(leader)}/v3/kv/put`;
    await Promise.all(
      Array.from({ length: ETCD_PUT_CONCURRENCY }, async () => {
        while (this.bytes < bytes) {
          const key = `vol/${String(this.keys++).padStart(10, '0')}`;
          this.bytes += key.length + ETCD_VALUE_BYTES;
          const body = JSON.stringify({ key: Buffer.from(key).toString('base64'), value: this.values[this.keys % this.values.length] });
          const answer = await httpCall(this.agent, 'POST', url, body);
          if (answer.status !== 200) throw withTails(`etcd put ${key}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`, this.cluster.children());
        }
      }),
    );
  }
}

/** Waits for /health true and applied index >= `index`; returns [healthy ms, caught-up ms] since `startedMs`. */
async function etcdCaughtUp(
  cluster: EtcdCluster,
  member: number,
  index: number,
  startedMs: number,
): Promise<{ healthyMs: number | null; caughtUpMs: number }> {
  let healthyMs: number | null = null;
  let caughtUpMs = 0;
  await waitFor(
    `etcd member ${member} to catch up to index ${index}`,
    async () => {
      const healthy = await cluster.healthy(member);
      if (!healthy) return null;
      healthyMs ??= performance.now() - startedMs;
      const status = await cluster.status(member);
      if (status.raftAppliedIndex < index) return null;
      caughtUpMs = performance.now() - startedMs;
      return true;
    },
    CATCH_UP_TIMEOUT_MS,
    cluster.children(),
  );
  return { healthyMs, caughtUpMs };
}

async function etcdRejoin(cluster: EtcdCluster, leader: number, sizeMiB: number, volume: EtcdVolume): Promise<EtcdTransferRow> {
  const follower = (leader + 1) % cluster.memberCount;
  await cluster.stop(follower, 'SIGTERM');
  cluster.wipe(follower);
  await cluster.replaceMember(follower);
  const leaderStatus = await cluster.status(leader);
  const startedMs = performance.now();
  const child = cluster.spawn(follower, 'existing', cluster.initialCluster(), 'info', (line) => /snapshot/i.test(line));
  const { healthyMs, caughtUpMs } = await etcdCaughtUp(cluster, follower, leaderStatus.raftIndex, startedMs);
  const memory = readMemory(child.pid);
  const peerMemory = readMemory(cluster.child(leader)!.pid);
  const snapshotLines = child.kept.map(({ line }) => line);
  const viaSnapshot = snapshotLines.some((line) => /receiv|applied (incoming )?snapshot|restor/i.test(line));
  return {
    sizeMiB,
    dataBytes: volume.bytes,
    keys: volume.keys,
    dbSizeBytes: leaderStatus.dbSize,
    catchUpMs: caughtUpMs,
    catchUpMBps: volume.bytes / MB / (caughtUpMs / 1000),
    healthyMs,
    rssPeakBytes: memory?.hwmBytes ?? 0,
    peerRssBytes: peerMemory?.rssBytes ?? 0,
    viaSnapshot,
  };
}

async function etcdRestart(cluster: EtcdCluster, leader: number, sizeMiB: number): Promise<RecoveryRow> {
  const member = (leader + 2) % cluster.memberCount;
  await cluster.stop(member, 'SIGTERM');
  const leaderStatus = await cluster.status(leader);
  const startedMs = performance.now();
  cluster.spawn(member, 'existing', cluster.initialCluster());
  const { caughtUpMs } = await etcdCaughtUp(cluster, member, leaderStatus.raftIndex, startedMs);
  return {
    system: 'etcd',
    kernels: null,
    sizeMiB,
    stateBytes: leaderStatus.dbSize,
    walOps: leaderStatus.raftIndex,
    restartMs: caughtUpMs,
    bootMs: null,
    bootPhasesMs: null,
    walOpsPerS: leaderStatus.raftIndex / (caughtUpMs / 1000),
  };
}

async function runEtcd(
  binary: string,
  sizesMiB: readonly number[],
  snapshotBytes: ReadonlyMap<number, number>,
  log: (line: string) => void,
  out: { etcdTransfers: EtcdTransferRow[]; recoveries: RecoveryRow[]; builds: BuildRow[] },
): Promise<void> {
  log('[bench] etcd: starting 3 members');
  const cluster = await EtcdCluster.start(binary);
  const volume = new EtcdVolume(cluster);
  try {
    for (const sizeMiB of sizesMiB) {
      let leader = await cluster.leader();
      const buildStartMs = performance.now();
      const keysBefore = volume.keys;
      await volume.growTo(leader, snapshotBytes.get(sizeMiB) ?? sizeMiB * MIB);
      out.builds.push({ system: 'etcd', kernels: null, sizeMiB, writes: volume.keys - keysBefore, seconds: (performance.now() - buildStartMs) / 1000 });
      log(`[bench] etcd: ${formatMiB(volume.bytes)} in ${volume.keys} keys`);
      const restart = await etcdRestart(cluster, leader, sizeMiB);
      out.recoveries.push(restart);
      log(`[bench] etcd: restart with ${restart.walOps} raft entries: caught up in ${formatNumber(restart.restartMs)} ms`);
      leader = await cluster.leader();
      const rejoin = await etcdRejoin(cluster, leader, sizeMiB, volume);
      out.etcdTransfers.push(rejoin);
      log(`[bench] etcd: wiped member caught up in ${formatNumber(rejoin.catchUpMs)} ms (${rejoin.catchUpMBps.toFixed(1)} MB/s), peak RSS ${formatMiB(rejoin.rssPeakBytes)}`);
    }
  } finally {
    volume.close();
    await cluster.stopAll();
  }
}

// ------------------------------------------------------------------------------ the bench

export async function runTransferBench(options: TransferBenchOptions): Promise<TransferBenchReport> {
  const log = options.log ?? (() => {});
  const shape = options.shape ?? 'partitions';
  const realistic = shape === 'realistic' ? realisticShape(options.realisticScale ?? (options.smoke ? 0.002 : 0.1)) : null;
  log(`# vrmeta bench transfer: ${machineLine()}`);
  const out = {
    transfers: [] as VrmetaTransferRow[],
    etcdTransfers: [] as EtcdTransferRow[],
    recoveries: [] as RecoveryRow[],
    builds: [] as BuildRow[],
    snapshotBytes: new Map<number, number>(),
    realistic: [] as RealisticRow[],
  };
  const askedMiB = [...(options.sizesMiB ?? (options.smoke ? [0.25] : [16, 64]))].sort((a, b) => a - b);
  for (const kernels of options.kernels) await runVrmeta(kernels, askedMiB, options.smoke, realistic, log, out);
  // Realistic: the sizes are what the population measured (the baseline and etcd get those bytes).
  const sizesMiB = realistic === null ? askedMiB : [...out.snapshotBytes.keys()];
  log('[bench] bare node:net baseline: 256 KiB chunks, 4 in flight, fresh receiver process');
  const socketBaseline = await runSocketBaseline(sizesMiB);
  for (const row of socketBaseline) log(`[bench] node:net baseline ${row.sizeMiB} MiB: ${row.mbps.toFixed(1)} MB/s, receiver RSS +${formatMiB(row.rssGrowthBytes)}`);

  const availability = benchEtcd(options, log);
  if (availability.binary !== null) await runEtcd(availability.binary, sizesMiB, out.snapshotBytes, log, out);
  return {
    bench: 'transfer',
    machine: machineLine(),
    smoke: options.smoke,
    shape,
    sizesMiB,
    realistic: out.realistic,
    ...vrmetaShape(options.smoke),
    etcd: etcdReport(availability),
    transfers: out.transfers,
    etcdTransfers: out.etcdTransfers,
    recoveries: out.recoveries,
    builds: out.builds,
    socketBaseline,
  };
}

function seconds(ms: number | null): string {
  return ms === null ? '—' : ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function rate(value: number | null): string {
  return value === null || !Number.isFinite(value) ? '—' : `${value.toFixed(1)} MB/s`;
}

function mibOrDash(bytes: number | null): string {
  return bytes === null ? '—' : `${bytes >= 0 ? '+' : ''}${formatMiB(bytes)}`;
}

/** One point per vrmeta size and kernel mode: restart, catch-up and RSS (the growth curve). */
export function transferCurve(report: TransferBenchReport): CurvePoint[] {
  return report.transfers.map((row) => {
    const recovery = report.recoveries.find((candidate) => candidate.system === 'vrmeta' && candidate.kernels === row.kernels && candidate.sizeMiB === row.sizeMiB);
    return {
      kernels: row.kernels,
      snapshotMiB: row.snapshotBytes / MIB,
      restartS: recovery === undefined ? null : recovery.restartMs / 1000,
      catchUpS: row.catchUpMs / 1000,
      peakRssMiB: row.rssPeakBytes / MIB,
      peerRssMiB: row.peerRssBytes / MIB,
      backupRssMiB: row.backupRssBytes / MIB,
    };
  });
}

/** `--svg FILE`: the growth curve drawn (transfer-shape.ts). */
export function transferReportSvg(report: TransferBenchReport): string {
  return transferCurveSvg(transferCurve(report), `vrmeta bench transfer --shape ${report.shape}: ${report.machine}`);
}

function realisticLine(row: RealisticRow): string {
  return (
    `Shape realistic (scale ${row.scale}, ${row.kernels}): ${formatNumber(row.streams)} streams x ${row.topicsPerStream} topics x ${row.partitionsPerTopic} partitions ` +
    `(${formatNumber(row.topics)} topics, ${formatNumber(row.partitions)} partitions), ${formatNumber(row.users)} users with ${row.permissionStreamsPerUser} stream + ` +
    `${row.permissionTopicsPerUser} topic permission entries and a personal access token each: snapshot ${formatMiB(row.snapshotBytes)} ` +
    `(${formatNumber(row.snapshotBytes)} B), built with ${formatNumber(row.writes)} writes and ${formatNumber(row.logins)} user logins in ${row.seconds.toFixed(1)} s`
  );
}

export function formatTransferReport(report: TransferBenchReport): string {
  const lines = [
    `vrmeta bench transfer --shape ${report.shape}${report.smoke ? ' (smoke: numbers meaningless)' : ''}: ${report.machine}`,
    `vrmeta: 3 replicas, journal ${report.journalSlots} slots, prepare queue ${report.prepareQueueDepth}; MB = 10^6 bytes`,
    report.etcd.ran ? `etcd ${report.etcd.version ?? '?'} (${report.etcd.binary ?? '?'}), default settings, ${ETCD_VALUE_BYTES} B values` : `etcd: not run (${report.etcd.skipped ?? 'unknown'})`,
    ...report.realistic.map(realisticLine),
    '',
    'Growth with the snapshot (vrmeta; restart with a full WAL, catch-up of a wiped replica, both start -> ready):',
    '',
    '| kernels | snapshot | restart | catch-up | peak RSS, rejoined replica | RSS of the primary | RSS of a backup |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...transferCurve(report).map(
      (point) =>
        `| ${point.kernels} | ${point.snapshotMiB.toFixed(1)} MiB | ${seconds(point.restartS === null ? null : point.restartS * 1000)} | ${seconds(point.catchUpS * 1000)} | ${point.peakRssMiB.toFixed(0)} MiB | ${point.peerRssMiB.toFixed(0)} MiB | ${point.backupRssMiB.toFixed(0)} MiB |`,
    ),
    '',
    'Catch-up of a wiped replica (start -> ready and caught up):',
    '',
    '| system | kernels | state | catch-up | rate | boot + offer | fetch | fetch rate | install | repair + ready | RSS growth while fetching | peak RSS growth | peak RSS | RSS of the primary | RSS of a backup |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of report.transfers) {
    lines.push(
      `| vrmeta | ${row.kernels} | ${formatMiB(row.snapshotBytes)} snapshot | ${seconds(row.catchUpMs)} | ${rate(row.catchUpMBps)} | ${seconds(row.beforeFetchMs)} | ${seconds(row.fetchMs)} | ${rate(row.fetchMBps)} | ${seconds(row.installMs)} | ${seconds(row.afterInstallMs)} | ${mibOrDash(row.rssFetchGrowthBytes)} | ${mibOrDash(row.rssPeakGrowthBytes)} | ${formatMiB(row.rssPeakBytes)} | ${formatMiB(row.peerRssBytes)} | ${formatMiB(row.backupRssBytes)} |`,
    );
  }
  for (const row of report.etcdTransfers) {
    lines.push(
      `| etcd | — | ${formatMiB(row.dataBytes)} in ${formatNumber(row.keys)} keys (db ${formatMiB(row.dbSizeBytes)}) | ${seconds(row.catchUpMs)} | ${rate(row.catchUpMBps)} | healthy after ${seconds(row.healthyMs)} | ${row.viaSnapshot === true ? 'snapshot' : row.viaSnapshot === false ? 'log entries' : '—'} | — | — | — | — | — | ${formatMiB(row.rssPeakBytes)} | ${formatMiB(row.peerRssBytes)} | — |`,
    );
  }
  const settledRows = report.transfers.filter((row) => row.settledRssBytes !== null);
  if (settledRows.length > 0) {
    lines.push(
      '',
      `RSS of each replica after ${SETTLE_MS / 1000} s with no load (the fetch's garbage collected; the target: <= 1.5x the snapshot + 200 MiB):`,
      '',
      '| kernels | state | primary | backup | rejoined replica |',
      '|---|---:|---:|---:|---:|',
      ...settledRows.map((row) => {
        const settled = row.settledRssBytes!;
        return `| ${row.kernels} | ${formatMiB(row.snapshotBytes)} snapshot | ${formatMiB(settled.primary)} | ${formatMiB(settled.backup)} | ${formatMiB(settled.rejoined)} |`;
      }),
    );
  }
  if (report.socketBaseline.length > 0) {
    lines.push(
      '',
      `Floor for the fetch rate, bare node:net on loopback (256 KiB chunks, 4 in flight, fresh receiver process, no checksums or disk): ${report.socketBaseline.map((row) => `${row.sizeMiB} MiB ${rate(row.mbps)}, receiver RSS ${mibOrDash(row.rssGrowthBytes)}`).join('; ')}`,
    );
  }
  const ratios: string[] = [];
  for (const row of report.transfers) {
    const peer = report.etcdTransfers.find((candidate) => candidate.sizeMiB === row.sizeMiB);
    if (peer !== undefined) ratios.push(`${row.sizeMiB} MiB ${row.kernels} ${(row.catchUpMs / peer.catchUpMs).toFixed(1)}×`);
  }
  if (ratios.length > 0) lines.push('', `vrmeta catch-up time / etcd catch-up time (below 1 is faster than etcd): ${ratios.join('; ')}`);
  lines.push(
    '',
    "Restart with a full WAL and a large snapshot (start -> ready; vrmeta boot = start -> 'replica started': snapshot read, verified, decoded, state restored):",
  );
  lines.push('', '| system | kernels | state | WAL ops | restart | boot | boot -> ready | ops/s over the restart |', '|---|---|---:|---:|---:|---:|---:|---:|');
  for (const row of report.recoveries) {
    lines.push(
      `| ${row.system} | ${row.kernels ?? '—'} | ${formatMiB(row.stateBytes)} ${row.system === 'vrmeta' ? 'snapshot' : 'db'} | ${formatNumber(row.walOps)} | ${seconds(row.restartMs)} | ${seconds(row.bootMs)} | ${seconds(row.bootMs === null ? null : row.restartMs - row.bootMs)} | ${formatNumber(row.walOpsPerS)} |`,
    );
  }
  lines.push('', 'Building the volume through the HTTP API:', '', '| system | kernels | size | writes | time | writes/s |', '|---|---|---:|---:|---:|---:|');
  for (const row of report.builds) {
    lines.push(`| ${row.system} | ${row.kernels ?? '—'} | ${row.sizeMiB} MiB | ${formatNumber(row.writes)} | ${row.seconds.toFixed(1)} s | ${formatNumber(row.writes / row.seconds)} |`);
  }
  return lines.join('\n');
}

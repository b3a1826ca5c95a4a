/**
 * Multi-process cluster harness (STYLE.md "Tests", iggy-metadata-plane.md §8.1): every replica is
 * a real `node dist/src/node/cli.js start` child on 127.0.0.1 with its own ports and data
 * directory, driven only over HTTP (the package's VrmetaClient) and signals.
 *
 * Processes, ports, temp directories and log tails come from bench/procs.ts, the one module the
 * benches use too. What it guarantees, because a leaked replica poisons every later run on the
 * machine:
 *   - every replica is the leader of its own process group, tracked in procs' module-level set;
 *     `stopAll` SIGKILLs the group (tests call it in afterEach/afterAll, so it runs on failure
 *     too) and, as a last resort, so does procs' process 'exit' hook of the test worker;
 *   - only 127.0.0.1 is ever bound; ports come from listen(0), held for the whole batch, then
 *     checked free once more;
 *   - data lives in one temp directory per cluster under os.tmpdir(), removed by `stopAll` and at
 *     exit (kept when VRMETA_CLUSTER_KEEP=1, for post-mortems; every replica's full log is there
 *     too); `leftovers()` of procs counts the children and directories still there.
 *
 * It runs what was built: dist/ must be at least as new as src/ (`assertDistFresh`), otherwise the
 * tests would silently exercise old code.
 *
 * Failures explain themselves: `waitFor` and `explain` attach the last lines of every replica's
 * log (HTTP access lines left out) to the error, and an unexpected child exit (an assertion in
 * the core is fail-stop) fails the next wait at once instead of at its budget.
 */
import type { ReplicaEvent } from '../../src/vsr/events.js';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { CLI_PATH, REPO_ROOT, cleanEnv, makeTempRoot, removeTempRoot, reservePorts, sleep, spawnChild, stopChild, type ChildHandle } from '../../bench/procs.js';
import { afterAll, beforeAll } from 'vitest';
import { IggyHttpError, VrmetaClient, type ClusterStatusJson } from '../../src/client/client.js';
import { ensureDevClusterSecret } from '../../src/node/cluster-secret.js';

export { CLI_PATH, REPO_ROOT, sleep };

/** Poll interval of every wait (iggy §8.1 uses 200 ms). */
export const POLL_MS = 150;
/** Lines of each replica's log attached to a failure. */
export const LOG_TAIL_LINES = 50;
/** Lines of one replica run kept in memory for markers (the full log is in the data dir). */
const LOG_LINES_MAX = 50_000;
/** Per-request budget of the harness's own HTTP calls. */
const REQUEST_TIMEOUT_MS = 10_000;

export const ROOT_USERNAME = 'iggy';
export const ROOT_PASSWORD = 'iggy';

export type KernelsFlag = 'auto' | 'wasm' | 'ts';

// ------------------------------------------------------------------------------ build freshness

function newestMtimeMs(directory: string, suffix: string, skip: (path: string) => boolean = () => false): { path: string; mtimeMs: number } | null {
  let newest: { path: string; mtimeMs: number } | null = null;
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(suffix) && !skip(path)) {
        const mtimeMs = statSync(path).mtimeMs;
        if (newest === null || mtimeMs > newest.mtimeMs) newest = { path, mtimeMs };
      }
    }
  };
  walk(directory);
  return newest;
}

/**
 * Throws unless dist/ holds a build of the current src/: every src/**\/*.ts has its
 * dist/src/**\/*.js, none older than its source, and the WASM kernels exist. CI builds dist
 * through `npm ci` (the `prepare` script); locally, run `npm run build:ts` after editing src.
 */
let distChecked = false;

export function assertDistFresh(): void {
  // Once per worker: a file's clusters all run the build it started with.
  if (distChecked) return;
  const srcRoot = join(REPO_ROOT, 'src');
  const problems: string[] = [];
  if (!existsSync(CLI_PATH)) problems.push(`${relative(REPO_ROOT, CLI_PATH)} is missing`);
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(path);
        continue;
      }
      if (!entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue;
      const built = join(REPO_ROOT, 'dist', relative(REPO_ROOT, path)).replace(/\.ts$/, '.js');
      if (!existsSync(built)) problems.push(`${relative(REPO_ROOT, built)} is missing`);
      else if (statSync(built).mtimeMs + 1 < statSync(path).mtimeMs) {
        problems.push(`${relative(REPO_ROOT, path)} is newer than ${relative(REPO_ROOT, built)}`);
      }
    }
  };
  if (existsSync(srcRoot)) walk(srcRoot);
  // The bundle (`npm start`, the package's bin) is built from dist/src after tsc: it is stale
  // when any compiled file is newer than its entry.
  const bundle = join(REPO_ROOT, 'dist', 'bundle', 'cli.js');
  const compiled = newestMtimeMs(join(REPO_ROOT, 'dist', 'src'), '.js');
  if (!existsSync(bundle)) problems.push('dist/bundle/cli.js is missing');
  else if (compiled !== null && statSync(bundle).mtimeMs + 1 < compiled.mtimeMs) {
    problems.push(`dist/bundle/cli.js is older than ${relative(REPO_ROOT, compiled.path)}`);
  }
  const wasm = existsSync(join(REPO_ROOT, 'build')) ? newestMtimeMs(join(REPO_ROOT, 'build'), '.wasm') : null;
  if (wasm === null) problems.push('build/*.wasm is missing (run `npm run asbuild`)');
  if (problems.length > 0) {
    throw new Error(
      `test/cluster runs the built server (dist/), which is stale or missing; run \`npm run build\` ` +
        `(or \`npm run build:ts\` after editing src/):\n  ${problems.slice(0, 10).join('\n  ')}` +
        (problems.length > 10 ? `\n  ... and ${problems.length - 10} more` : ''),
    );
  }
  distChecked = true;
}

// ------------------------------------------------------------------------------ children

/** A pino line as parsed from stdout (fields vary by event). */
export interface LogRecord {
  readonly level?: number;
  readonly msg?: string;
  readonly [field: string]: unknown;
}

/** An HTTP access line: kept in the log file, left out of memory and failure tails. */
function isAccessLine(line: string): boolean {
  return line.includes('"msg":"incoming request"') || line.includes('"msg":"request completed"');
}

export interface ReplicaOverrides {
  readonly kernels?: KernelsFlag;
  /** A secret (>= 32 chars) passed as --cluster-secret instead of the cluster's. */
  readonly clusterSecret?: string;
}

export interface ClusterOptions {
  readonly replicaCount?: number;
  /** Small, so checkpoints and WAL eviction happen after ~100 writes (interval = slots - 2 * depth). */
  readonly journalSlots?: number;
  readonly prepareQueueDepth?: number;
  readonly clientsTableMax?: number;
  readonly clusterName?: string;
  /** One mode for all, or one per replica. */
  readonly kernels?: KernelsFlag | readonly KernelsFlag[];
  /**
   * A secret passed as --cluster-secret. By default the cluster is secured as `vrmeta dev` does
   * it: a random `cluster.secret` (0600) in the cluster's temp root, passed as
   * --cluster-secret-file.
   */
  readonly clusterSecret?: string;
  readonly logLevel?: string;
  /** Budget for the first primary (5 unanswered 1 s probes, then an election). */
  readonly formTimeoutMs?: number;
  /** Another build's cli.js (e.g. an instrumented copy when chasing a bug); skips the freshness check. */
  readonly cliPath?: string;
  /**
   * Pass --http-peers and --tcp-peers (default true). False: every replica learns its peers'
   * client addresses from their advertisements alone, as an operator's cluster does.
   */
  readonly peerOverrides?: boolean;
  /** More `vrmeta start` flags for every replica (e.g. --tcp-connections-max). */
  readonly extraArgs?: readonly string[];
}

class Replica {
  readonly index: number;
  readonly httpPort: number;
  readonly replicaPort: number;
  readonly tcpPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  overrides: ReplicaOverrides = {};
  /** One procs child per run; its `tail` holds the run's log lines, access lines left out. */
  runs: ChildHandle[] = [];

  constructor(index: number, httpPort: number, replicaPort: number, tcpPort: number, dataDir: string, logFile: string) {
    this.index = index;
    this.httpPort = httpPort;
    this.replicaPort = replicaPort;
    this.tcpPort = tcpPort;
    this.dataDir = dataDir;
    this.logFile = logFile;
  }

  get run(): ChildHandle | null {
    return this.runs.at(-1) ?? null;
  }

  get running(): boolean {
    const run = this.run;
    return run !== null && run.exit === null;
  }
}

export class ClusterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClusterError';
  }
}

/** Marks an error whose message already carries the log tails. */
const EXPLAINED = Symbol('cluster-logs-attached');

export class Cluster {
  readonly root: string;
  readonly options: Required<Omit<ClusterOptions, 'kernels' | 'clusterSecret' | 'cliPath'>> & {
    readonly cliPath: string;
    readonly kernels: readonly KernelsFlag[];
    readonly clusterSecret: string | null;
  };
  /** The dev-style secret file (null when the cluster runs with an explicit --cluster-secret). */
  readonly secretFile: string | null;
  private readonly replicas: Replica[];
  private token: string | null = null;
  private stopped = false;

  private constructor(root: string, options: Cluster['options'], replicas: Replica[]) {
    this.root = root;
    this.options = options;
    this.replicas = replicas;
    this.secretFile = options.clusterSecret === null ? ensureDevClusterSecret(root).path : null;
  }

  /** Spawns every replica and waits until they elected a primary and all are ready. */
  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    if (options.cliPath === undefined) assertDistFresh();
    const replicaCount = options.replicaCount ?? 3;
    const kernels = typeof options.kernels === 'string' || options.kernels === undefined
      ? Array.from({ length: replicaCount }, () => (options.kernels as KernelsFlag | undefined) ?? 'auto')
      : [...options.kernels];
    if (kernels.length !== replicaCount) throw new Error('one kernels mode per replica');
    const resolved: Cluster['options'] = {
      replicaCount,
      journalSlots: options.journalSlots ?? 128,
      prepareQueueDepth: options.prepareQueueDepth ?? 8,
      clientsTableMax: options.clientsTableMax ?? 128,
      clusterName: options.clusterName ?? 'vrmeta-cluster-test',
      kernels,
      clusterSecret: options.clusterSecret ?? null,
      logLevel: options.logLevel ?? 'info',
      formTimeoutMs: options.formTimeoutMs ?? 30_000,
      cliPath: options.cliPath ?? CLI_PATH,
      extraArgs: options.extraArgs ?? [],
      peerOverrides: options.peerOverrides ?? true,
    };
    // Ports are free when picked but not held: another process may take one before the child
    // binds it. Such a start fails fast (the child exits); try again with new ports.
    for (let attemptIndex = 1; ; attemptIndex++) {
      const cluster = await Cluster.spawnAll(resolved);
      try {
        await cluster.waitForConverged(cluster.indices(), resolved.formTimeoutMs, 'the cluster to form');
        return cluster;
      } catch (error) {
        const portTaken = cluster.indices().some((index) => cluster.lines(index).some((line) => line.includes('EADDRINUSE')));
        await cluster.stopAll();
        if (!portTaken || attemptIndex >= 3) throw error;
      }
    }
  }

  private static async spawnAll(options: Cluster['options']): Promise<Cluster> {
    const replicaCount = options.replicaCount;
    const root = makeTempRoot('vrmeta-cluster-', 'VRMETA_CLUSTER_KEEP');
    const ports = await reservePorts(replicaCount * 3);
    const replicas = Array.from(
      { length: replicaCount },
      (_, index) =>
        new Replica(
          index,
          ports[index]!,
          ports[replicaCount + index]!,
          ports[2 * replicaCount + index]!,
          join(root, `replica-${index}`),
          join(root, `replica-${index}.log`),
        ),
    );
    const cluster = new Cluster(root, options, replicas);
    for (const replica of replicas) cluster.spawnReplica(replica);
    return cluster;
  }

  // --------------------------------------------------------------------------- processes

  indices(): number[] {
    return this.replicas.map((replica) => replica.index);
  }

  /** Replicas whose current process is alive. */
  runningIndices(): number[] {
    return this.replicas.filter((replica) => replica.running).map((replica) => replica.index);
  }

  isRunning(index: number): boolean {
    return this.replica(index).running;
  }

  httpAddress(index: number): string {
    return `127.0.0.1:${this.replica(index).httpPort}`;
  }

  /** The pid of the replica's running process (null when stopped). */
  pid(index: number): number | null {
    const run = this.replica(index).run;
    return run === null || run.exit !== null ? null : run.pid;
  }

  /** The replica's Iggy binary client port. */
  tcpPort(index: number): number {
    return this.replica(index).tcpPort;
  }

  /** The replica's replication (bus) port. */
  replicaPort(index: number): number {
    return this.replica(index).replicaPort;
  }

  dataDir(index: number): string {
    return this.replica(index).dataDir;
  }

  private replica(index: number): Replica {
    const replica = this.replicas[index];
    if (replica === undefined) throw new Error(`no replica ${index}`);
    return replica;
  }

  private argsOf(replica: Replica): string[] {
    const o = this.options;
    const secret = replica.overrides.clusterSecret ?? o.clusterSecret;
    const args = [
      o.cliPath,
      'start',
      '--replica-id', String(replica.index),
      '--replicas', this.replicas.map((r) => `127.0.0.1:${r.replicaPort}`).join(','),
      '--http', `127.0.0.1:${replica.httpPort}`,
      ...(o.peerOverrides === false ? [] : ['--http-peers', this.replicas.map((r) => `127.0.0.1:${r.httpPort}`).join(',')]),
      '--tcp', `127.0.0.1:${replica.tcpPort}`,
      ...(o.peerOverrides === false ? [] : ['--tcp-peers', this.replicas.map((r) => `127.0.0.1:${r.tcpPort}`).join(',')]),
      '--data-dir', replica.dataDir,
      '--cluster-name', o.clusterName,
      '--journal-slots', String(o.journalSlots),
      '--prepare-queue-depth', String(o.prepareQueueDepth),
      '--clients-table-max', String(o.clientsTableMax),
      '--kernels', replica.overrides.kernels ?? o.kernels[replica.index]!,
      '--log-level', o.logLevel,
    ];
    if (secret !== null) args.push('--cluster-secret', secret);
    else args.push('--cluster-secret-file', this.secretFile!);
    args.push(...o.extraArgs);
    return args;
  }

  private spawnReplica(replica: Replica): void {
    if (this.stopped) throw new Error('cluster already stopped');
    if (replica.running) throw new Error(`replica ${replica.index} is already running`);
    // A clean environment: a VRMETA_* variable of the caller (VRMETA_KERNELS in CI) must not
    // override what the test chose; flags win anyway, but e.g. VRMETA_ROOT_PASSWORD would not.
    const run = spawnChild(`replica ${replica.index} run ${replica.runs.length}`, process.execPath, this.argsOf(replica), {
      env: cleanEnv(),
      logFile: replica.logFile,
      tailLinesMax: LOG_LINES_MAX,
      tailSkip: isAccessLine,
    });
    replica.runs.push(run);
  }

  /** Starts a stopped replica with its data directory as it is (optionally other flags). */
  start(index: number, overrides?: ReplicaOverrides): void {
    const replica = this.replica(index);
    if (overrides !== undefined) replica.overrides = overrides;
    this.spawnReplica(replica);
  }

  /** SIGKILL: no chance to flush or close anything (acknowledged writes must survive). */
  async kill9(index: number): Promise<void> {
    await this.signal(index, 'SIGKILL');
  }

  /** SIGTERM: graceful shutdown (stop accepting, finish in-flight writes, close files). */
  async stop(index: number): Promise<void> {
    await this.signal(index, 'SIGTERM');
  }

  /** Graceful stop, then start again on the same data directory. */
  async restart(index: number, overrides?: ReplicaOverrides): Promise<void> {
    if (this.isRunning(index)) await this.stop(index);
    this.start(index, overrides);
  }

  /** Deletes the data directory of a stopped replica (it must rejoin by state transfer). */
  wipe(index: number): void {
    if (this.isRunning(index)) throw new Error(`wipe(${index}) needs the replica stopped first`);
    rmSync(this.replica(index).dataDir, { recursive: true, force: true });
  }

  private async signal(index: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    const run = this.replica(index).run;
    if (run !== null) await stopChild(run, signal);
  }

  /**
   * Kills every child (SIGKILL: teardown needs no grace) and removes the temp directory. Safe to
   * call twice and from afterEach/afterAll whatever happened before.
   */
  async stopAll(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const waits: Promise<unknown>[] = [];
    for (const replica of this.replicas) if (replica.run !== null) waits.push(stopChild(replica.run, 'SIGKILL'));
    await Promise.race([Promise.all(waits), sleep(5_000)]);
    removeTempRoot(this.root);
  }

  // --------------------------------------------------------------------------- logs

  /** The log lines of the replica's current (or last) run, access lines excluded. */
  lines(index: number): readonly string[] {
    return this.replica(index).run?.tail ?? [];
  }

  /** Parsed pino records of the current run whose `msg` contains `marker`. */
  records(index: number, marker: string): LogRecord[] {
    const out: LogRecord[] = [];
    for (const line of this.lines(index)) {
      if (!line.startsWith('{') || !line.includes(marker)) continue;
      try {
        const record = JSON.parse(line) as LogRecord;
        if (typeof record.msg === 'string' && record.msg.includes(marker)) out.push(record);
      } catch {
        // A partial line: not a record.
      }
    }
    return out;
  }

  /** The replica's typed events (src/vsr/events.ts) in its log: records whose `event` is `event`. */
  events(index: number, event: ReplicaEvent): LogRecord[] {
    const out: LogRecord[] = [];
    for (const line of this.lines(index)) {
      if (!line.startsWith('{') || !line.includes(`"event":"${event}"`)) continue;
      try {
        const record = JSON.parse(line) as LogRecord & { event?: unknown };
        if (record.event === event) out.push(record);
      } catch {
        // A partial line: not a record.
      }
    }
    return out;
  }

  stdoutContains(index: number, marker: string): boolean {
    return this.records(index, marker).length > 0;
  }

  /** The last lines of every replica's current run, for failure messages. */
  logTails(lineCount = LOG_TAIL_LINES): string {
    const parts: string[] = [];
    for (const replica of this.replicas) {
      const run = replica.run;
      const state = run === null ? 'never started' : run.exit === null ? `running (pid ${run.pid})` : `exited ${JSON.stringify(run.exit)}`;
      parts.push(`===== replica ${replica.index} (http ${this.httpAddress(replica.index)}, ${state}, run ${replica.runs.length - 1}); last ${lineCount} lines:`);
      // Long lines (error stacks) are cut: the full log is in the data directory's log file.
      parts.push(...(run?.tail.slice(-lineCount) ?? []).map((line) => (line.length > 600 ? `${line.slice(0, 600)}...` : line)));
    }
    parts.push(`===== full logs: ${this.root}/replica-*.log (set VRMETA_CLUSTER_KEEP=1 to keep them)`);
    return parts.join('\n');
  }

  /** Runs `fn`; a failure gets every replica's log tail appended to its message. */
  async explain<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw this.withLogs(error);
    }
  }

  withLogs(error: unknown): unknown {
    if (!(error instanceof Error)) return new ClusterError(`${String(error)}\n${this.logTails()}`);
    if ((error as { [EXPLAINED]?: boolean })[EXPLAINED] === true) return error;
    error.message = `${error.message}\n${this.logTails()}`;
    (error as { [EXPLAINED]?: boolean })[EXPLAINED] = true;
    return error;
  }

  /** A replica that died without the test asking (an assertion is fail-stop). */
  private unexpectedExits(): string[] {
    const out: string[] = [];
    for (const replica of this.replicas) {
      const run = replica.run;
      if (run !== null && run.exit !== null && !run.expectedExit) out.push(`replica ${replica.index} exited unexpectedly: ${JSON.stringify(run.exit)}`);
    }
    return out;
  }

  // --------------------------------------------------------------------------- HTTP

  /** A client for replica `index` acting as root (the harness's token) or with `token`. */
  client(index: number, token: string | null = this.token, timeoutMs = REQUEST_TIMEOUT_MS): VrmetaClient {
    return new VrmetaClient({ baseUrl: `http://${this.httpAddress(index)}`, ...(token === null ? {} : { token }), timeoutMs });
  }

  /** Logs in as root on `index` (any replica: logins are local, the JWT key is shared). */
  async login(index: number, username = ROOT_USERNAME, password = ROOT_PASSWORD): Promise<VrmetaClient> {
    const client = this.client(index, null);
    await client.login(username, password);
    return client;
  }

  /** The root token the harness uses for its own reads. */
  async rootToken(): Promise<string> {
    if (this.token !== null) return this.token;
    let lastError: unknown = null;
    for (const index of this.runningIndices()) {
      try {
        const client = await this.login(index);
        this.token = client.token;
        if (this.token !== null) return this.token;
      } catch (error) {
        lastError = error;
      }
    }
    throw new ClusterError(`cannot log in as root on any replica: ${String(lastError)}`);
  }

  async status(index: number): Promise<ClusterStatusJson> {
    await this.rootToken();
    return this.client(index).getClusterStatus();
  }

  async ready(index: number): Promise<boolean> {
    return this.client(index, null).ready();
  }

  /** GET `path` on replica `index` as root; the exact body text (for byte-identical reads). */
  async rawGet(index: number, path: string): Promise<string> {
    const token = await this.rootToken();
    const response = await fetch(`http://${this.httpAddress(index)}${path}`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    if (response.status !== 200) throw new ClusterError(`GET ${path} on replica ${index}: HTTP ${response.status} ${text.slice(0, 200)}`);
    return text;
  }

  // --------------------------------------------------------------------------- waiting

  /**
   * Polls `probe` every POLL_MS until it returns a value other than false/null/undefined; a
   * throwing probe counts as "not yet" (its error is reported on timeout). Fails at once if a
   * replica died unexpectedly.
   */
  async waitFor<T>(what: string, probe: () => Promise<T | false | null | undefined> | T | false | null | undefined, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last = 'never probed';
    for (;;) {
      const dead = this.unexpectedExits();
      if (dead.length > 0) throw this.withLogs(new ClusterError(`while waiting for ${what}: ${dead.join('; ')}`));
      try {
        const value = await probe();
        if (value !== false && value !== null && value !== undefined) return value;
        last = `probe returned ${String(value)}`;
      } catch (error) {
        last = error instanceof Error ? error.message.split('\n')[0]! : String(error);
      }
      if (Date.now() >= deadline) {
        throw this.withLogs(new ClusterError(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last})`));
      }
      await sleep(POLL_MS);
    }
  }

  /** Fails with the log tails if a replica died without the test asking. */
  assertNoUnexpectedExit(): void {
    const dead = this.unexpectedExits();
    if (dead.length > 0) throw this.withLogs(new ClusterError(dead.join('; ')));
  }

  /**
   * Waits until `indices` agree: every one normal, ready, not transferring, in the same view with
   * the same primary, and with commit_min == commit_max == the same op. Returns their statuses.
   */
  async waitForConverged(indices: readonly number[] = this.runningIndices(), timeoutMs = 30_000, what = 'convergence'): Promise<ClusterStatusJson[]> {
    return this.waitFor(
      `${what} of replicas ${indices.join(',')}`,
      async () => {
        const ready = await Promise.all(indices.map((index) => this.ready(index)));
        const notReady = indices.filter((_, position) => !ready[position]);
        if (notReady.length > 0) throw new ClusterError(`replicas ${notReady.join(',')} not ready`);
        const statuses = await Promise.all(indices.map((index) => this.status(index)));
        const first = statuses[0]!;
        for (const status of statuses) {
          if (status.status !== 'normal' || status.state_transfer !== null) throw new ClusterError(`replica ${status.replica} is ${status.status}`);
          if (status.view !== first.view || status.primary !== first.primary) {
            throw new ClusterError(`views differ: ${statuses.map((s) => `${s.replica}:v${s.view}/p${s.primary}`).join(' ')}`);
          }
          if (status.commit_min !== status.commit_max || status.commit_max !== first.commit_max || status.op !== first.op) {
            throw new ClusterError(`commits differ: ${statuses.map((s) => `${s.replica}:op${s.op}/min${s.commit_min}/max${s.commit_max}`).join(' ')}`);
          }
        }
        return statuses;
      },
      timeoutMs,
    );
  }

  /** The primary the running replicas agree on (after waiting for agreement). */
  async primary(timeoutMs = 30_000): Promise<number> {
    const statuses = await this.waitForConverged(this.runningIndices(), timeoutMs, 'agreement on a primary');
    return statuses[0]!.primary;
  }

  /**
   * The metadata reads every replica must serve identically, as exact response bodies: the
   * stream list, each stream with its topics, each topic with its partitions, the user list and
   * each user with its permissions. Paths come from replica `pathsFrom`; every replica answers
   * the same paths.
   */
  async readPaths(pathsFrom: number): Promise<string[]> {
    const paths = ['/streams', '/users'];
    const streams = JSON.parse(await this.rawGet(pathsFrom, '/streams')) as { id: number; topics_count: number }[];
    for (const stream of streams) {
      paths.push(`/streams/${stream.id}`);
      if (stream.topics_count > 0) {
        const topics = JSON.parse(await this.rawGet(pathsFrom, `/streams/${stream.id}/topics`)) as { id: number }[];
        paths.push(`/streams/${stream.id}/topics`);
        for (const topic of topics) paths.push(`/streams/${stream.id}/topics/${topic.id}`);
      }
    }
    const users = JSON.parse(await this.rawGet(pathsFrom, '/users')) as { id: number }[];
    for (const user of users) paths.push(`/users/${user.id}`);
    return paths;
  }

  /**
   * Throws unless every replica in `indices` answers every read path with the same bytes.
   * Returns the number of paths compared.
   */
  async assertIdenticalReads(indices: readonly number[] = this.runningIndices()): Promise<number> {
    const paths = await this.readPaths(indices[0]!);
    const differences: string[] = [];
    for (const path of paths) {
      const bodies = await Promise.all(indices.map((index) => this.rawGet(index, path)));
      for (let position = 1; position < bodies.length; position++) {
        if (bodies[position] !== bodies[0]) {
          differences.push(`${path}: replica ${indices[0]} says ${bodies[0]!.slice(0, 300)}\n  replica ${indices[position]} says ${bodies[position]!.slice(0, 300)}`);
        }
      }
    }
    if (differences.length > 0) {
      throw this.withLogs(new ClusterError(`reads differ on ${differences.length} of ${paths.length} paths:\n${differences.slice(0, 5).join('\n')}`));
    }
    return paths.length;
  }
}

/**
 * One cluster for the tests of the enclosing file or describe block: started in beforeAll (within
 * `startTimeoutMs`) and handed to `use`, stopped in afterAll, on failure too.
 */
export function clusterForAll(options: ClusterOptions, use: (cluster: Cluster) => void, startTimeoutMs = 60_000): void {
  let cluster: Cluster | undefined;
  beforeAll(async () => {
    cluster = await Cluster.start(options);
    use(cluster);
  }, startTimeoutMs);
  afterAll(async () => {
    await cluster?.stopAll();
  });
}

// ------------------------------------------------------------------------------ outcomes

/**
 * What a client can conclude from one write attempt (the client never retries by itself):
 *   ok: committed (2xx);
 *   rejected: a definitive answer that nothing changed (4xx with an Iggy body, e.g. "already
 *     exists", "not found");
 *   unknown: the write may or may not have committed (503 transient, 502/504 from a forward, a
 *     connection reset or a timeout): only a retry that answers definitively settles it.
 */
export type Attempt<T> =
  | { readonly kind: 'ok'; readonly value: T }
  | { readonly kind: 'rejected'; readonly error: IggyHttpError }
  | { readonly kind: 'unknown'; readonly reason: string };

export async function attempt<T>(fn: () => Promise<T>): Promise<Attempt<T>> {
  try {
    return { kind: 'ok', value: await fn() };
  } catch (error) {
    if (error instanceof IggyHttpError) {
      if (error.status === 503 || error.status === 502 || error.status === 504) return { kind: 'unknown', reason: error.message };
      if (error.status >= 400 && error.status < 500 && error.body !== null) return { kind: 'rejected', error };
      return { kind: 'unknown', reason: error.message };
    }
    // fetch failed (refused, reset, closed) or AbortSignal.timeout: the outcome is unknown.
    const cause = (error as { cause?: { code?: unknown } }).cause?.code;
    return { kind: 'unknown', reason: `${(error as Error).name}: ${(error as Error).message}${cause === undefined ? '' : ` (${String(cause)})`}` };
  }
}

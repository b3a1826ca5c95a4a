/**
 * Process management for the benchmarks and the cluster tests (the one module both use:
 * test/cluster/harness.ts and security-support.ts spawn and reserve ports through it), plus the
 * benchmarks' vrmeta and etcd clusters of child processes on 127.0.0.1.
 *
 * What it guarantees, because a leaked server poisons every later run on a shared machine:
 *   - every child is spawned as the leader of its own process group and tracked in one
 *     module-level set; teardown kills the whole group (`kill(-pid)`), so nothing a child forked
 *     survives it either. Teardown runs from `cleanupAll` (the benches call it in `finally`), from a
 *     process 'exit' hook (synchronous SIGKILL, last resort) and, when the CLI asked for it with
 *     `installSignalCleanup`, on SIGINT/SIGTERM/SIGHUP and on an uncaught error;
 *   - only 127.0.0.1 is ever bound, by us or by a child: ports come from listen(0) on 127.0.0.1,
 *     held until the whole batch is reserved (so one batch never repeats a port), then checked
 *     free once more right before use;
 *   - every data directory lives under one `mkdtemp` root in os.tmpdir() per cluster, removed at
 *     teardown and at exit (kept when its keep variable is 1, VRMETA_BENCH_KEEP for the benches,
 *     VRMETA_CLUSTER_KEEP for the cluster tests, for post-mortems; the children's logs are there);
 *   - what a child prints is kept in memory only as a bounded tail (the full log is on disk);
 *   - `leftovers()` counts the live children and temp roots, so a test can assert none is left.
 *
 * vrmeta children run the built server (dist/src/node/cli.js), whoever imports this module (the
 * CLI from dist/, or vitest from the TypeScript sources).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync, type WriteStream } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ensureDevClusterSecret } from '../src/node/cluster-secret.js';

// ------------------------------------------------------------------------------ paths

/** The repository root: the nearest ancestor holding the vrmeta package.json (bench/ or dist/bench/). */
function findRepoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 5; depth++) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'vrmeta') return dir;
    dir = dirname(dir);
  }
  throw new Error('bench/procs: cannot find the vrmeta package root above this module');
}

export const REPO_ROOT = findRepoRoot();
export const CLI_PATH = join(REPO_ROOT, 'dist', 'src', 'node', 'cli.js');
/** What `npm start` and the package's `bin` run: the bundled CLI (scripts/bundle.mjs). */
export const BUNDLED_CLI_PATH = join(REPO_ROOT, 'dist', 'bundle', 'cli.js');

export const HOST = '127.0.0.1';
export const ROOT_USERNAME = 'iggy';
export const ROOT_PASSWORD = 'iggy';

/** Poll interval of every wait; catch-up times are measured at this resolution. */
export const POLL_MS = 20;
/** A child that ignores SIGTERM this long is SIGKILLed. */
const STOP_GRACE_MS = 10_000;
/** Log lines of one child kept in memory for error messages (the full log is on disk). */
const LOG_TAIL_LINES_MAX = 200;
/** The most a caller may ask to keep in memory per child (`tailLinesMax`). */
const LOG_TAIL_LINES_LIMIT = 1_000_000;
/** Lines a `keep` filter selected, per child (bounded: the benches keep a few markers). */
const KEPT_LINES_MAX = 10_000;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ------------------------------------------------------------------------------ teardown registry

const LIVE_CHILDREN = new Set<ChildHandle>();
/** Temp root -> the environment variable that keeps it when set to 1. */
const TEMP_ROOTS = new Map<string, string>();
const LOG_STREAMS = new Set<WriteStream>();
let exitHookInstalled = false;

const BENCH_KEEP_VARIABLE = 'VRMETA_BENCH_KEEP';

/** Removes `root` unless its keep variable is 1 (then says where it is). */
function removeRootNow(root: string, keepVariable: string): void {
  if (process.env[keepVariable] === '1') process.stderr.write(`[procs] kept ${root} (${keepVariable}=1)\n`);
  else rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}

function killGroupNow(child: ChildHandle, signal: NodeJS.Signals): void {
  if (child.exit !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already (or never formed): fall back to the child itself.
    try {
      child.process.kill(signal);
    } catch {
      // Already reaped.
    }
  }
}

/** Retries cover a child killed a moment ago that is still writing into its directory. */
function removeTempRootsNow(): void {
  for (const [root, keepVariable] of TEMP_ROOTS) removeRootNow(root, keepVariable);
  TEMP_ROOTS.clear();
}

/** Synchronous last resort: SIGKILL every live group, remove every temp root. */
export function killAllNow(): void {
  for (const child of LIVE_CHILDREN) killGroupNow(child, 'SIGKILL');
  removeTempRootsNow();
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', killAllNow);
}

/**
 * For the CLI: a signal or an uncaught error tears everything down before the process dies.
 * (Not for test workers: vitest owns their signals.)
 */
export function installSignalCleanup(): void {
  installExitHook();
  const onSignal = (signal: NodeJS.Signals): void => {
    process.stderr.write(`[bench] ${signal}: stopping every child and removing data directories\n`);
    killAllNow();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, onSignal);
  const onFatal = (error: unknown): void => {
    process.stderr.write(`[bench] fatal: ${(error as Error | undefined)?.stack ?? String(error)}\n`);
    killAllNow();
    process.exit(1);
  };
  process.once('uncaughtException', onFatal);
  process.once('unhandledRejection', onFatal);
}

/** Kills every child (SIGKILL, whole group), waits for the exits, removes every temp root. */
export async function cleanupAll(): Promise<void> {
  const waits: Promise<unknown>[] = [];
  for (const child of LIVE_CHILDREN) {
    child.expectedExit = true;
    killGroupNow(child, 'SIGKILL');
    waits.push(child.exited);
  }
  await Promise.race([Promise.all(waits), sleep(5_000)]);
  await Promise.all([...LOG_STREAMS].map((stream) => new Promise<void>((resolve) => stream.end(() => resolve()))));
  LOG_STREAMS.clear();
  removeTempRootsNow();
}

/**
 * A fresh directory under os.tmpdir(), removed by `cleanupAll` / `removeTempRoot` / at exit, or
 * kept when the environment variable `keepVariable` is 1.
 */
export function makeTempRoot(prefix: string, keepVariable = BENCH_KEEP_VARIABLE): string {
  installExitHook();
  const root = mkdtempSync(join(tmpdir(), prefix));
  TEMP_ROOTS.set(root, keepVariable);
  return root;
}

export function removeTempRoot(root: string): void {
  const keepVariable = TEMP_ROOTS.get(root);
  if (keepVariable === undefined) return;
  TEMP_ROOTS.delete(root);
  removeRootNow(root, keepVariable);
}

/** Live children and temp roots (tests assert nothing is left behind). */
export function leftovers(): { children: number; tempRoots: string[] } {
  return { children: LIVE_CHILDREN.size, tempRoots: [...TEMP_ROOTS.keys()] };
}

// ------------------------------------------------------------------------------ ports

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: HOST, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * `count` distinct free ports on 127.0.0.1 (listen(0), all held until the batch is complete),
 * each checked free once more after the batch is released; a batch with a port taken in between
 * is redrawn. `isFree` is that check (a test replaces it to take a port in between).
 */
export async function reservePorts(count: number, isFree: (port: number) => Promise<boolean> = portFree): Promise<number[]> {
  for (let round = 0; round < 5; round++) {
    const servers: Server[] = [];
    let ports: number[];
    try {
      for (let index = 0; index < count; index++) {
        const server = createServer();
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen({ host: HOST, port: 0, exclusive: true }, () => resolve());
        });
        servers.push(server);
      }
      ports = servers.map((server) => (server.address() as AddressInfo).port);
    } finally {
      await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    }
    // Closed again: a port someone grabbed in between fails this check and the batch is redrawn.
    const free = await Promise.all(ports.map((port) => isFree(port)));
    if (free.every(Boolean)) return ports;
  }
  throw new Error(`bench/procs: could not reserve ${count} free ports on ${HOST}`);
}

/**
 * The first of `count` consecutive free ports (`vrmeta dev` takes consecutive ports), each checked
 * by binding it, none of them in `avoid`. Bases are drawn below Linux's ephemeral range
 * (32768-60999): inside it, the outgoing connections of a busy test run leave few runs of nine
 * free ports, so the later attempts take bases from listen(0) as a fallback.
 */
const CONSECUTIVE_ATTEMPTS = 100;
const LOW_PORT_MIN = 20_000;
const LOW_PORT_MAX = 32_000;

export async function consecutiveFreePorts(count: number, avoid: readonly number[] = []): Promise<number> {
  let last = 'never tried';
  // Spread over a few seconds: on a machine busy with loopback connections (a full test run),
  // runs of free ports come and go.
  for (let attemptIndex = 0; attemptIndex < CONSECUTIVE_ATTEMPTS; attemptIndex++) {
    if (attemptIndex >= 20) await sleep(50);
    const base = attemptIndex % 2 === 0 ? LOW_PORT_MIN + Math.floor(Math.random() * (LOW_PORT_MAX - LOW_PORT_MIN)) : (await reservePorts(1))[0];
    if (base === undefined || base + count > 65535) continue;
    const range = Array.from({ length: count }, (_, index) => base + index);
    if (range.some((port) => avoid.includes(port))) {
      last = `${base}..${base + count - 1} overlaps the ports to avoid`;
      continue;
    }
    const free = await Promise.all(range.map((port) => portFree(port)));
    if (free.every(Boolean)) return base;
    last = `ports ${range.filter((_, index) => !free[index]).join(',')} were taken`;
  }
  throw new Error(`bench/procs: found no ${count} consecutive free ports on ${HOST} in ${CONSECUTIVE_ATTEMPTS} attempts (last: ${last})`);
}

// ------------------------------------------------------------------------------ children

export interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface ChildHandle {
  readonly name: string;
  readonly process: ChildProcess;
  readonly pid: number;
  readonly startedAtMs: number;
  readonly exited: Promise<ExitInfo>;
  exit: ExitInfo | null;
  /** Set by stop/kill: an exit we caused is not a failure. */
  expectedExit: boolean;
  readonly tail: string[];
  /** Lines selected by the spawn's `keep` filter, with the time they were read. */
  readonly kept: { readonly atMs: number; readonly line: string }[];
}

export interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Append stdout/stderr here (the tail is kept in memory either way). */
  readonly logFile?: string;
  /** Lines for which this returns true are also kept in `kept` (markers the benches time). */
  readonly keep?: (line: string) => boolean;
  /** Lines of the tail kept in memory (default LOG_TAIL_LINES_MAX; the oldest go first). */
  readonly tailLinesMax?: number;
  /** Lines for which this returns true go to the log file only, not into the tail (access logs). */
  readonly tailSkip?: (line: string) => boolean;
  /** Put before every stderr line in the tail and the log (default `[stderr] `). */
  readonly stderrPrefix?: string;
}

/**
 * This process's environment without any VRMETA_* variable, plus `extra`: a caller's variable
 * (VRMETA_KERNELS in CI, VRMETA_ROOT_PASSWORD) must not change what a vrmeta child runs.
 */
export function cleanEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('VRMETA_')) env[key] = value;
  return Object.assign(env, extra);
}

/** A flag whose value must not reach a log file (a test scans the logs for the cluster secret). */
const SECRET_FLAG = /^--[a-z-]*(secret|password|token)$/;

/** `args` as the log header shows them: the value of a secret-bearing flag replaced. */
function redactedArgs(args: readonly string[]): string[] {
  return args.map((arg, index) => {
    const equals = arg.indexOf('=');
    if (arg.startsWith('--') && equals > 0 && SECRET_FLAG.test(arg.slice(0, equals))) return `${arg.slice(0, equals)}=<redacted>`;
    return index > 0 && SECRET_FLAG.test(args[index - 1]!) ? '<redacted>' : arg;
  });
}

/** Spawns `command` as the leader of a new process group, tracked until it exits. */
export function spawnChild(name: string, command: string, args: readonly string[], options: SpawnOptions = {}): ChildHandle {
  const tailLinesMax = options.tailLinesMax ?? LOG_TAIL_LINES_MAX;
  if (!Number.isInteger(tailLinesMax) || tailLinesMax < 1 || tailLinesMax > LOG_TAIL_LINES_LIMIT) {
    throw new Error(`bench/procs: tailLinesMax must be an integer in 1..${LOG_TAIL_LINES_LIMIT}, got ${tailLinesMax}`);
  }
  installExitHook();
  const child = spawn(command, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  if (child.pid === undefined) throw new Error(`bench/procs: could not spawn ${command} for ${name}`);
  const log = options.logFile === undefined ? null : createWriteStream(options.logFile, { flags: 'a' });
  if (log !== null) {
    LOG_STREAMS.add(log);
    // The log is best effort (its directory may be removed under a killed child): never a crash.
    log.on('error', () => LOG_STREAMS.delete(log));
    log.write(`----- ${name} pid ${child.pid} at ${new Date().toISOString()}: ${command} ${redactedArgs(args).join(' ')}\n`);
  }
  const tail: string[] = [];
  const kept: { atMs: number; line: string }[] = [];
  let resolveExit: (info: ExitInfo) => void = () => {};
  const handle: ChildHandle = {
    name,
    process: child,
    pid: child.pid,
    startedAtMs: performance.now(),
    exited: new Promise<ExitInfo>((resolve) => (resolveExit = resolve)),
    exit: null,
    expectedExit: false,
    tail,
    kept,
  };
  LIVE_CHILDREN.add(handle);
  const pushTail = (line: string): void => {
    tail.push(line);
    if (tail.length > tailLinesMax) tail.splice(0, tail.length - tailLinesMax);
  };
  const finish = (info: ExitInfo, why: string): void => {
    if (handle.exit !== null) return;
    handle.exit = info;
    LIVE_CHILDREN.delete(handle);
    pushTail(`[procs] ${name} ${why}`);
    resolveExit(info);
  };
  child.once('exit', (code, signal) => finish({ code, signal }, `exited (code ${code}, signal ${signal})`));
  child.once('error', (error) => finish({ code: null, signal: null }, `failed: ${error.message}`));
  // The log file is closed once both pipes have ended (a child's last lines arrive after its exit).
  let openPipes = 0;
  const capture = (stream: NodeJS.ReadableStream | null, prefix: string): void => {
    if (stream === null) return;
    openPipes++;
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    lines.on('line', (line) => {
      if (log !== null && !log.writableEnded) log.write(`${prefix}${line}\n`);
      if (options.keep?.(line) === true && kept.length < KEPT_LINES_MAX) kept.push({ atMs: Date.now(), line });
      if (options.tailSkip?.(line) !== true) pushTail(`${prefix}${line}`);
    });
    lines.once('close', () => {
      openPipes--;
      if (openPipes === 0 && log !== null && LOG_STREAMS.delete(log)) log.end();
    });
  };
  capture(child.stdout, '');
  capture(child.stderr, options.stderrPrefix ?? '[stderr] ');
  return handle;
}

/** SIGTERM (graceful) or SIGKILL to the child's group; resolves once it exited. */
export async function stopChild(child: ChildHandle, signal: 'SIGTERM' | 'SIGINT' | 'SIGKILL' = 'SIGTERM', graceMs = STOP_GRACE_MS): Promise<ExitInfo> {
  if (child.exit !== null) return child.exit;
  child.expectedExit = true;
  killGroupNow(child, signal);
  if (signal === 'SIGKILL') return child.exited;
  const timer = setTimeout(() => {
    child.tail.push(`[procs] ${child.name} ignored ${signal} for ${graceMs} ms; SIGKILL to its group`);
    killGroupNow(child, 'SIGKILL');
  }, graceMs);
  const info = await child.exited;
  clearTimeout(timer);
  return info;
}

/** An error whose message carries the last lines of each child's log. */
export function withTails(message: string, children: readonly (ChildHandle | null)[], lines = 25): Error {
  const parts = [message];
  for (const child of children) {
    if (child === null) continue;
    const state = child.exit === null ? `running (pid ${child.pid})` : `exited ${JSON.stringify(child.exit)}`;
    parts.push(`===== ${child.name}, ${state}, last ${lines} lines:`, ...child.tail.slice(-lines));
  }
  return new Error(parts.join('\n'));
}

// ------------------------------------------------------------------------------ memory and files

export interface MemorySample {
  /** Resident set now (bytes). */
  readonly rssBytes: number;
  /** Peak resident set since the process started (bytes, the kernel's high-water mark). */
  readonly hwmBytes: number;
}

/** VmRSS / VmHWM of `pid` from /proc (null when it is gone or /proc is absent). */
export function readMemory(pid: number): MemorySample | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const field = (name: string): number | null => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text);
    return match === null ? null : Number(match[1]) * 1024;
  };
  const rssBytes = field('VmRSS');
  const hwmBytes = field('VmHWM');
  return rssBytes === null || hwmBytes === null ? null : { rssBytes, hwmBytes };
}

/** CPU time (user + system, all threads) `pid` has used, in ms (null when it is gone). */
export function readCpuMs(pid: number): number | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? ticks * CLOCK_TICK_MS : null;
}

/** USER_HZ: /proc reports CPU time in 1/100 s on every Linux architecture Node runs on. */
const CLOCK_TICK_MS = 10;

export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

// ------------------------------------------------------------------------------ HTTP

export interface HttpAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * One HTTP request on a keep-alive agent (node:http). The load generator uses this same function
 * for vrmeta and for etcd, so both pay the same client cost.
 */
export function httpCall(
  agent: Agent | undefined,
  method: string,
  url: string,
  body: string | null,
  headers: Readonly<Record<string, string>> = {},
  timeoutMs = 30_000,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const allHeaders: Record<string, string | number> = { ...headers };
    if (body !== null) {
      allHeaders['content-type'] = 'application/json';
      allHeaders['content-length'] = Buffer.byteLength(body);
    }
    const req = httpRequest(url, { method, agent: agent ?? false, headers: allHeaders, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    if (body !== null) req.write(body);
    req.end();
  });
}

export function keepAliveAgent(socketsMax: number): Agent {
  return new Agent({ keepAlive: true, maxSockets: socketsMax, maxFreeSockets: socketsMax });
}

/**
 * Polls `probe` every POLL_MS until it returns something other than false/null; a throwing probe
 * counts as "not yet". Fails at once when one of `children` died unasked, and after `timeoutMs`.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | false | null> | T | false | null,
  timeoutMs: number,
  children: readonly (ChildHandle | null)[] = [],
  pollMs = POLL_MS,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last = 'never probed';
  for (;;) {
    const dead = children.filter((child) => child !== null && child.exit !== null && !child.expectedExit);
    if (dead.length > 0) throw withTails(`while waiting for ${what}: ${dead.map((child) => `${child!.name} exited`).join(', ')}`, children);
    try {
      const value = await probe();
      if (value !== false && value !== null) return value;
      last = 'not yet';
    } catch (error) {
      last = (error as Error).message.split('\n')[0]!;
    }
    if (performance.now() >= deadline) throw withTails(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last})`, children);
    await sleep(pollMs);
  }
}

// ------------------------------------------------------------------------------ vrmeta cluster

export type KernelsMode = 'auto' | 'wasm' | 'ts';

export interface VrmetaClusterOptions {
  readonly replicaCount?: number;
  readonly kernels: KernelsMode;
  readonly journalSlots?: number;
  readonly prepareQueueDepth?: number;
  readonly clientsTableMax?: number;
  /** `warn` by default: per-request info logs would cost the server CPU the bench is measuring. */
  readonly logLevel?: string;
  readonly formTimeoutMs?: number;
  /** Extra node flags for every replica (e.g. `--cpu-prof` when looking for where time goes). */
  readonly nodeArgs?: readonly string[];
  /** Another build's cli.js (A/B comparisons of a server change); default: this checkout's dist/. */
  readonly cliPath?: string;
  /** VRMETA_* variables for every replica (the clean environment drops the caller's). */
  readonly env?: Readonly<Record<string, string>>;
}

interface VrmetaReplica {
  readonly index: number;
  readonly httpPort: number;
  readonly replicaPort: number;
  /** The Iggy binary client port. */
  readonly tcpPort: number;
  readonly dataDir: string;
  child: ChildHandle | null;
}

export interface VrmetaStatus {
  readonly replica: number;
  readonly view: number;
  readonly status: string;
  readonly primary: number;
  readonly op: number;
  readonly commit_min: number;
  readonly commit_max: number;
  readonly checkpoint_op: number;
  readonly checkpoint_id: string;
  readonly state_transfer: { stage: string; bytes_done: number; bytes_total: number } | null;
}

/**
 * Node flags for every replica from VRMETA_BENCH_NODE_ARGS (whitespace-separated), e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to see where a bench's server time goes
 * (bench/profile-summary.ts reads the profiles). Replicas run with flags are stopped with SIGTERM,
 * so they exit normally and write what the flags asked for.
 */
function benchNodeArgs(): string[] {
  const raw = process.env['VRMETA_BENCH_NODE_ARGS'];
  return raw === undefined ? [] : raw.split(/\s+/).filter((arg) => arg.length > 0);
}

/** What the vrmeta and the etcd cluster of local child processes share. */
abstract class LocalCluster<Node extends { readonly index: number; readonly dataDir: string; child: ChildHandle | null }> {
  readonly root: string;
  protected readonly nodes: Node[];
  protected readonly agent = keepAliveAgent(8);
  /** "replica", "etcd member": what error messages call a node. */
  private readonly kind: string;

  protected constructor(root: string, nodes: Node[], kind: string) {
    this.root = root;
    this.nodes = nodes;
    this.kind = kind;
  }

  protected node(index: number): Node {
    const node = this.nodes[index];
    if (node === undefined) throw new Error(`no ${this.kind} ${index}`);
    return node;
  }

  dataDir(index: number): string {
    return this.node(index).dataDir;
  }

  child(index: number): ChildHandle | null {
    return this.node(index).child;
  }

  children(): (ChildHandle | null)[] {
    return this.nodes.map((node) => node.child);
  }

  async stop(index: number, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const child = this.node(index).child;
    if (child !== null) await stopChild(child, signal);
  }

  /** Removes the data directory of a stopped node (a vrmeta replica must come back with --rejoin). */
  wipe(index: number): void {
    const child = this.node(index).child;
    if (child !== null && child.exit === null) throw new Error(`wipe(${index}) needs the ${this.kind} stopped first`);
    rmSync(this.node(index).dataDir, { recursive: true, force: true });
  }

  /** Spawns every node, then waits until each is up; a boot that fails stops what it started. */
  protected async boot(spawnNode: (index: number) => unknown, waitUp: (index: number) => Promise<void>): Promise<void> {
    try {
      for (const node of this.nodes) spawnNode(node.index);
      await Promise.all(this.nodes.map((node) => waitUp(node.index)));
    } catch (error) {
      await this.stopAll();
      throw error;
    }
  }

  /** Stops every node and removes the data root. */
  async stopAll(signal: 'SIGTERM' | 'SIGKILL' = 'SIGKILL'): Promise<void> {
    await Promise.all(this.nodes.map((node) => (node.child === null ? Promise.resolve() : stopChild(node.child, signal))));
    this.agent.destroy();
    removeTempRoot(this.root);
  }
}

/** A vrmeta cluster of `vrmeta start` children on 127.0.0.1 (the built server from dist/). */
export class VrmetaCluster extends LocalCluster<VrmetaReplica> {
  readonly options: Required<VrmetaClusterOptions>;
  /** The cluster secret, created as `vrmeta dev` does (0600, random) in the data root. */
  readonly secretFile: string;
  private token: string | null = null;

  private constructor(root: string, options: Required<VrmetaClusterOptions>, replicas: VrmetaReplica[]) {
    super(root, replicas, 'replica');
    this.options = options;
    this.secretFile = ensureDevClusterSecret(root).path;
  }

  /** Spawns every replica and waits until all are ready (a primary elected, commits caught up). */
  static async start(options: VrmetaClusterOptions): Promise<VrmetaCluster> {
    const cliPath = options.cliPath ?? CLI_PATH;
    if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build:ts\` first`);
    const resolved: Required<VrmetaClusterOptions> = {
      replicaCount: options.replicaCount ?? 3,
      kernels: options.kernels,
      journalSlots: options.journalSlots ?? 1024,
      prepareQueueDepth: options.prepareQueueDepth ?? 32,
      clientsTableMax: options.clientsTableMax ?? 8192,
      logLevel: options.logLevel ?? 'warn',
      formTimeoutMs: options.formTimeoutMs ?? 60_000,
      nodeArgs: options.nodeArgs ?? benchNodeArgs(),
      cliPath,
      env: options.env ?? {},
    };
    const root = makeTempRoot('vrmeta-bench-');
    const ports = await reservePorts(resolved.replicaCount * 3);
    const replicas = Array.from({ length: resolved.replicaCount }, (_, index) => ({
      index,
      httpPort: ports[index]!,
      replicaPort: ports[resolved.replicaCount + index]!,
      tcpPort: ports[2 * resolved.replicaCount + index]!,
      dataDir: join(root, `replica-${index}`),
      child: null,
    }));
    const cluster = new VrmetaCluster(root, resolved, replicas);
    await cluster.boot((index) => cluster.spawn(index), (index) => cluster.waitReady(index, resolved.formTimeoutMs));
    return cluster;
  }

  get replicaCount(): number {
    return this.nodes.length;
  }

  /** The interval between checkpoints, in ops (journal_slots - 2 * prepare_queue_depth). */
  get checkpointIntervalOps(): number {
    return this.options.journalSlots - 2 * this.options.prepareQueueDepth;
  }

  url(index: number): string {
    return `http://${HOST}:${this.node(index).httpPort}`;
  }

  /** host:port of replica `index`'s Iggy binary client listener. */
  tcpAddress(index: number): string {
    return `${HOST}:${this.node(index).tcpPort}`;
  }

  snapshotBytes(index: number): number {
    return fileSize(join(this.dataDir(index), 'snapshot.bin'));
  }

  /** Starts replica `index` on its data directory as it is (with --rejoin after a wipe). */
  spawn(index: number, flags: { rejoin?: boolean; logLevel?: string; keep?: (line: string) => boolean } = {}): ChildHandle {
    const replica = this.node(index);
    if (replica.child !== null && replica.child.exit === null) throw new Error(`replica ${index} is already running`);
    const o = this.options;
    const args = [
      ...o.nodeArgs,
      o.cliPath,
      'start',
      '--replica-id', String(index),
      '--replicas', this.nodes.map((r) => `${HOST}:${r.replicaPort}`).join(','),
      '--http', `${HOST}:${replica.httpPort}`,
      '--http-peers', this.nodes.map((r) => `${HOST}:${r.httpPort}`).join(','),
      '--tcp', `${HOST}:${replica.tcpPort}`,
      '--tcp-peers', this.nodes.map((r) => `${HOST}:${r.tcpPort}`).join(','),
      '--data-dir', replica.dataDir,
      '--cluster-name', 'vrmeta-bench',
      '--journal-slots', String(o.journalSlots),
      '--prepare-queue-depth', String(o.prepareQueueDepth),
      '--clients-table-max', String(o.clientsTableMax),
      '--kernels', o.kernels,
      '--log-level', flags.logLevel ?? o.logLevel,
      '--cluster-secret-file', this.secretFile,
    ];
    if (flags.rejoin === true) args.push('--rejoin');
    replica.child = spawnChild(`vrmeta replica ${index}`, process.execPath, args, {
      env: cleanEnv(o.env),
      logFile: join(this.root, `replica-${index}.log`),
      ...(flags.keep === undefined ? {} : { keep: flags.keep }),
    });
    return replica.child;
  }

  /** GET /readyz: 200, or 503 with the reason (no credentials needed). */
  async readyz(index: number): Promise<HttpAnswer> {
    return httpCall(this.agent, 'GET', `${this.url(index)}/readyz`, null, {}, 5_000);
  }

  async waitReady(index: number, timeoutMs: number): Promise<void> {
    await waitFor(`vrmeta replica ${index} /readyz`, async () => (await this.readyz(index)).status === 200 || null, timeoutMs, this.children());
  }

  /** A fresh login on replica `index` (its own JWT id, hence its own VSR session). */
  async login(index: number): Promise<string> {
    const answer = await httpCall(
      this.agent,
      'POST',
      `${this.url(index)}/users/login`,
      JSON.stringify({ username: ROOT_USERNAME, password: ROOT_PASSWORD }),
    );
    if (answer.status !== 200) throw new Error(`login on replica ${index}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
    return (JSON.parse(answer.text) as { access_token: { token: string } }).access_token.token;
  }

  private async adminToken(): Promise<string> {
    if (this.token === null) {
      for (const replica of this.nodes) {
        if (replica.child === null || replica.child.exit !== null) continue;
        this.token = await this.login(replica.index);
        break;
      }
    }
    if (this.token === null) throw new Error('no running replica to log in on');
    return this.token;
  }

  async status(index: number): Promise<VrmetaStatus> {
    const token = await this.adminToken();
    const answer = await httpCall(this.agent, 'GET', `${this.url(index)}/cluster/status`, null, { authorization: `Bearer ${token}` }, 5_000);
    if (answer.status !== 200) throw new Error(`status of replica ${index}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
    return JSON.parse(answer.text) as VrmetaStatus;
  }

  /** The primary the running replicas agree on. */
  async primary(timeoutMs = 30_000): Promise<number> {
    return waitFor(
      'agreement on a vrmeta primary',
      async () => {
        const running = this.nodes.filter((replica) => replica.child !== null && replica.child.exit === null);
        const statuses = await Promise.all(running.map((replica) => this.status(replica.index)));
        const first = statuses[0];
        if (first === undefined || first.status !== 'normal') return null;
        return statuses.every((status) => status.status === 'normal' && status.view === first.view) ? first.primary : null;
      },
      timeoutMs,
      this.children(),
    );
  }

  /** Stops every replica (SIGTERM when they run with extra node flags, so those can write their output) and removes the data root. */
  override async stopAll(): Promise<void> {
    await super.stopAll(this.options.nodeArgs.length > 0 ? 'SIGTERM' : 'SIGKILL');
  }
}

// ------------------------------------------------------------------------------ etcd

/** Debian's etcd-server package installs the server under one of these names. */
const ETCD_CANDIDATES = ['/usr/bin/etcd', '/usr/bin/etcd-server', '/usr/sbin/etcd'];

export function findEtcd(): string | null {
  for (const path of ETCD_CANDIDATES) if (existsSync(path)) return path;
  return null;
}

export interface EtcdAvailability {
  readonly binary: string | null;
  readonly version: string | null;
  /** Why there is no etcd (null when there is one). */
  readonly reason: string | null;
  /** This run installed it. */
  readonly installed: boolean;
}

/** What both etcd comparisons take besides their own knobs. */
export interface EtcdBenchOptions {
  readonly smoke: boolean;
  readonly kernels: readonly ('wasm' | 'ts')[];
  /** Run etcd (default: in full mode only). */
  readonly etcd?: boolean;
  readonly log?: (line: string) => void;
}

/** How a bench report says which etcd it compared against, or why none. */
export interface EtcdReport {
  readonly ran: boolean;
  readonly binary: string | null;
  readonly version: string | null;
  readonly skipped: string | null;
}

/**
 * The etcd a bench compares against: none unless requested (the default in full mode, never in
 * smoke mode), else `ensureEtcd`, which installs it in full mode.
 */
export function benchEtcd(options: EtcdBenchOptions, log: (line: string) => void): EtcdAvailability {
  if (!(options.etcd ?? !options.smoke)) {
    return { binary: null, version: null, reason: options.smoke ? 'etcd not requested (smoke mode)' : 'etcd not requested', installed: false };
  }
  const availability = ensureEtcd(!options.smoke, log);
  if (availability.binary === null) log(`[bench] etcd skipped: ${availability.reason ?? 'unknown'}; running vrmeta alone`);
  return availability;
}

export function etcdReport(availability: EtcdAvailability): EtcdReport {
  const ran = availability.binary !== null;
  return { ran, binary: availability.binary, version: availability.version, skipped: ran ? null : availability.reason };
}

/**
 * The etcd binary, installing Debian's `etcd-server` with apt-get when it is absent and `install`
 * is set (full mode only). Nothing is fetched from anywhere but the system's apt sources.
 */
export function ensureEtcd(install: boolean, log: (line: string) => void): EtcdAvailability {
  let binary = findEtcd();
  let installed = false;
  if (binary === null) {
    if (!install) return { binary: null, version: null, reason: 'etcd is not installed (smoke mode never installs it)', installed };
    log('[bench] etcd not found: apt-get install -y etcd-server');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
    const aptGet = (args: string[]): ReturnType<typeof spawnSync> =>
      asRoot
        ? spawnSync('apt-get', args, { encoding: 'utf8', env, timeout: 600_000 })
        : spawnSync('sudo', ['-n', 'apt-get', ...args], { encoding: 'utf8', env, timeout: 600_000 });
    let result = aptGet(['install', '-y', 'etcd-server']);
    if (result.status !== 0) {
      // A fresh machine may have no package lists yet.
      log('[bench] apt-get install failed; apt-get update, then once more');
      if (aptGet(['update']).status === 0) result = aptGet(['install', '-y', 'etcd-server']);
    }
    if (result.status !== 0) {
      const detail = `${String(result.stderr ?? '')}${result.error === undefined ? '' : ` ${result.error.message}`}`.trim().split('\n').slice(-3).join(' | ');
      return { binary: null, version: null, reason: `apt-get install -y etcd-server failed (exit ${String(result.status)}): ${detail}`, installed };
    }
    installed = true;
    binary = findEtcd();
    if (binary === null) return { binary: null, version: null, reason: 'etcd-server was installed but no etcd binary was found', installed };
  }
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const match = /etcd Version:\s*(\S+)/.exec(version.stdout ?? '');
  return { binary, version: match?.[1] ?? null, reason: null, installed };
}

interface EtcdMember {
  readonly index: number;
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  child: ChildHandle | null;
}

export interface EtcdStatus {
  readonly memberId: string;
  readonly leader: string;
  readonly raftIndex: number;
  readonly raftAppliedIndex: number;
  readonly dbSize: number;
}

/**
 * An etcd cluster of `etcd` children on 127.0.0.1: a client URL and a peer URL per member on
 * reserved ports, and no other listener. etcd fsyncs its WAL before acknowledging (its default).
 */
export class EtcdCluster extends LocalCluster<EtcdMember> {
  readonly binary: string;
  private readonly clusterToken = `vrmeta-bench-${process.pid}`;

  private constructor(root: string, binary: string, members: EtcdMember[]) {
    super(root, members, 'etcd member');
    this.binary = binary;
  }

  static async start(binary: string, memberCount = 3, timeoutMs = 60_000): Promise<EtcdCluster> {
    const root = makeTempRoot('etcd-bench-');
    const ports = await reservePorts(memberCount * 2);
    const members = Array.from({ length: memberCount }, (_, index) => ({
      index,
      name: `m${index}`,
      clientPort: ports[index]!,
      peerPort: ports[memberCount + index]!,
      dataDir: join(root, `m${index}`),
      child: null,
    }));
    const cluster = new EtcdCluster(root, binary, members);
    await cluster.boot((index) => cluster.spawn(index, 'new', cluster.initialCluster()), (index) => cluster.waitHealthy(index, timeoutMs));
    return cluster;
  }

  get memberCount(): number {
    return this.nodes.length;
  }

  url(index: number): string {
    return `http://${HOST}:${this.node(index).clientPort}`;
  }

  peerUrl(index: number): string {
    return `http://${HOST}:${this.node(index).peerPort}`;
  }

  /** The `--initial-cluster` value naming every member. */
  initialCluster(): string {
    return this.nodes.map((member) => `${member.name}=${this.peerUrl(member.index)}`).join(',');
  }

  spawn(index: number, state: 'new' | 'existing', initialCluster: string, logLevel = 'warn', keep?: (line: string) => boolean): ChildHandle {
    const member = this.node(index);
    if (member.child !== null && member.child.exit === null) throw new Error(`etcd member ${index} is already running`);
    const args = [
      '--name', member.name,
      '--data-dir', member.dataDir,
      '--listen-client-urls', this.url(index),
      '--advertise-client-urls', this.url(index),
      '--listen-peer-urls', this.peerUrl(index),
      '--initial-advertise-peer-urls', this.peerUrl(index),
      '--initial-cluster', initialCluster,
      '--initial-cluster-state', state,
      '--initial-cluster-token', this.clusterToken,
      '--logger', 'zap',
      '--log-level', logLevel,
    ];
    member.child = spawnChild(`etcd ${member.name}`, this.binary, args, {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: this.root },
      logFile: join(this.root, `${member.name}.log`),
      ...(keep === undefined ? {} : { keep }),
    });
    return member.child;
  }

  async healthy(index: number): Promise<boolean> {
    const answer = await httpCall(this.agent, 'GET', `${this.url(index)}/health`, null, {}, 5_000);
    return answer.status === 200 && (JSON.parse(answer.text) as { health?: string }).health === 'true';
  }

  async waitHealthy(index: number, timeoutMs: number): Promise<void> {
    await waitFor(`etcd member ${index} /health`, async () => (await this.healthy(index)) || null, timeoutMs, this.children());
  }

  /** POST to the v3 JSON gateway (grpc-gateway) of member `index`. */
  async gateway<T>(index: number, path: string, body: unknown): Promise<T> {
    const answer = await httpCall(this.agent, 'POST', `${this.url(index)}${path}`, JSON.stringify(body));
    if (answer.status !== 200) throw new Error(`etcd ${path} on member ${index}: HTTP ${answer.status} ${answer.text.slice(0, 300)}`);
    return JSON.parse(answer.text) as T;
  }

  async status(index: number): Promise<EtcdStatus> {
    const raw = await this.gateway<{ header: { member_id: string }; leader: string; raftIndex?: string; raftAppliedIndex?: string; dbSize?: string }>(
      index,
      '/v3/maintenance/status',
      {},
    );
    return {
      memberId: raw.header.member_id,
      leader: raw.leader,
      raftIndex: Number(raw.raftIndex ?? 0),
      raftAppliedIndex: Number(raw.raftAppliedIndex ?? 0),
      dbSize: Number(raw.dbSize ?? 0),
    };
  }

  /** The index of the member that is the raft leader. */
  async leader(timeoutMs = 30_000): Promise<number> {
    return waitFor(
      'an etcd leader',
      async () => {
        for (const member of this.nodes) {
          if (member.child === null || member.child.exit !== null) continue;
          const status = await this.status(member.index);
          if (status.leader !== '0' && status.leader === status.memberId) return member.index;
        }
        return null;
      },
      timeoutMs,
      this.children(),
    );
  }

  /** `etcdctl member remove` then `member add` for member `index`, through a live member. */
  async replaceMember(index: number): Promise<void> {
    const via = this.aliveOther(index);
    const list = await this.gateway<{ members: { ID: string; peerURLs?: string[] }[] }>(via, '/v3/cluster/member/list', {});
    const found = list.members.find((member) => member.peerURLs?.includes(this.peerUrl(index)) === true);
    if (found === undefined) throw new Error(`etcd member ${index} is not in the member list`);
    // etcd refuses reconfiguration while a member has been up less than its health interval (5 s)
    // ("unhealthy cluster", strict reconfig check): retry until it accepts.
    const retrying = async (what: string, path: string, body: unknown): Promise<void> => {
      await waitFor(
        what,
        async () => {
          await this.gateway(via, path, body);
          return true;
        },
        60_000,
        this.children(),
        250,
      );
    };
    await retrying(`etcd member remove ${found.ID}`, '/v3/cluster/member/remove', { ID: found.ID });
    await retrying(`etcd member add ${this.peerUrl(index)}`, '/v3/cluster/member/add', { peerURLs: [this.peerUrl(index)] });
  }

  private aliveOther(index: number): number {
    const other = this.nodes.find((member) => member.index !== index && member.child !== null && member.child.exit === null);
    if (other === undefined) throw new Error('no other live etcd member');
    return other.index;
  }
}

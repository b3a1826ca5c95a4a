/**
 * `vrmeta dev` (what `npm start` runs): a local cluster of child processes on 127.0.0.1, one
 * replica each, data under ./data/replica-N, HTTP on consecutive ports from 3000. Prints the URLs
 * and the credentials, forwards every child's log lines with a replica prefix, and supervises the
 * children (supervisor.ts): a replica that dies is restarted with backoff on the same ports and
 * data directory while the others keep serving. Ctrl-C or SIGTERM stops every child. Refuses
 * clearly when a port is taken.
 *
 * Secure by default: the cluster's secret is `<data-dir>/cluster.secret`, created once (mode
 * 0600, random) and reused on every later run, and every replica is given its path (never the
 * secret on a command line). A secret the caller configured in the environment
 * (VRMETA_CLUSTER_SECRET / VRMETA_CLUSTER_SECRET_FILE) is used instead.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DATA_DIRECTORY_MODE } from '../storage/fs-disk.js';
import { ensureDevClusterSecret } from './cluster-secret.js';
import { chooseLogFormat, lineFormatter } from './log-format.js';
import type { ChildExit } from './restart-policy.js';
import { Supervisor, type ChildCallbacks, type SupervisedProcess } from './supervisor.js';

export interface DevOptions {
  readonly replicas: number;
  readonly dataDir: string;
  readonly httpPort: number;
  readonly replicaPort: number;
  /** First Iggy binary client port (8090, 8091, 8092 by default). */
  readonly tcpPort?: number;
  readonly kernels: string;
  readonly logLevel: string;
  /** auto (pretty on a terminal, JSON otherwise) | pretty | json. */
  readonly logFormat?: string;
}

interface DevPorts {
  readonly http: readonly number[];
  readonly replica: readonly number[];
  readonly tcp: readonly number[];
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

function devPorts(options: DevOptions): DevPorts {
  const from = (first: number) => Array.from({ length: options.replicas }, (_, i) => first + i);
  return {
    http: from(options.httpPort),
    replica: from(options.replicaPort),
    tcp: from(options.tcpPort ?? 8090),
  };
}

/** The first port that is taken, or null. Every port is probed at once: spawning waits on it. */
async function takenPort(ports: DevPorts): Promise<number | null> {
  const all = [...ports.http, ...ports.replica, ...ports.tcp];
  const free = await Promise.all(all.map((port) => portFree(port)));
  return all.find((_, index) => !free[index]) ?? null;
}

interface SecretChoice {
  readonly args: readonly string[];
  readonly bannerLine: string;
}

/** The replicas' secret flags and the banner line that names the secret's source. */
function chooseSecret(dataDir: string): SecretChoice {
  const names = ['VRMETA_CLUSTER_SECRET', 'VRMETA_CLUSTER_SECRET_FILE'];
  if (names.some((name) => (process.env[name] ?? '') !== '')) {
    const bannerLine = `  cluster secret: from the environment (${names.join(' / ')})`;
    return { args: [], bannerLine };
  }
  // The replicas' own directories are tightened by each replica at boot; this one holds the
  // cluster secret beside them.
  mkdirSync(dataDir, { recursive: true, mode: DATA_DIRECTORY_MODE });
  const file = ensureDevClusterSecret(dataDir);
  const how = file.created ? 'created now' : 'reused';
  return {
    args: ['--cluster-secret-file', file.path],
    bannerLine: `  cluster secret: ${file.path} (mode 0600, ${how})`,
  };
}

/** Replica `index`'s `vrmeta start` arguments: the same on every restart. */
function replicaArgs(
  options: DevOptions,
  ports: DevPorts,
  index: number,
  secret: SecretChoice,
): string[] {
  return [
    'start',
    '--replica-id', String(index),
    '--replicas', ports.replica.map((port) => `127.0.0.1:${port}`).join(','),
    '--http', `127.0.0.1:${ports.http[index]!}`,
    '--tcp', `127.0.0.1:${ports.tcp[index]!}`,
    '--data-dir', replicaDataDir(options, index),
    '--kernels', options.kernels,
    '--log-level', options.logLevel,
    ...secret.args,
  ];
}

function replicaDataDir(options: DevOptions, index: number): string {
  return join(options.dataDir, `replica-${index}`);
}

const COLORS = ['\x1b[36m', '\x1b[35m', '\x1b[33m', '\x1b[32m', '\x1b[34m'];

function prefixOf(index: number, tty: boolean): string {
  const label = `[replica ${index}]`;
  return tty ? `${COLORS[index % COLORS.length]}${label}\x1b[0m ` : `${label} `;
}

/**
 * Spawns one replica; every line it prints is shown with `prefix` and handed to the supervisor.
 * The exit is reported on 'close' (after both pipes ended), so the lines a crashing replica
 * printed last are in the supervisor's tail before it decides what to say; a failed spawn
 * ('error' without a process) is reported as an exit too, once.
 */
function spawnReplica(
  cli: string,
  args: readonly string[],
  prefix: string,
  format: (line: string) => string,
  callbacks: ChildCallbacks,
): SupervisedProcess {
  const child = spawn(process.execPath, [cli, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: process.env,
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      const shown = format(line);
      process.stdout.write(`${prefix}${shown}\n`);
      callbacks.line(shown);
    });
  }
  let reported = false;
  const report = (exit: ChildExit): void => {
    if (reported) return;
    reported = true;
    callbacks.exit(exit);
  };
  child.once('close', (code, signal) => report({ code, signal }));
  child.once('error', (error) => {
    if (child.pid !== undefined) return;
    process.stdout.write(`${prefix}could not start: ${error.message}\n`);
    report({ code: null, signal: null });
  });
  return {
    pid: child.pid,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

function banner(options: DevOptions, ports: DevPorts, secret: SecretChoice): string {
  const password =
    process.env['VRMETA_ROOT_PASSWORD'] === undefined ? 'iggy' : '(VRMETA_ROOT_PASSWORD)';
  const login = `curl -s -X POST http://127.0.0.1:${ports.http[0]}/users/login ` +
    `-H 'content-type: application/json' -d '{"username":"iggy","password":"iggy"}'`;
  return [
    '',
    `vrmeta: a ${options.replicas}-replica cluster on 127.0.0.1, data under ${options.dataDir}`,
    ...ports.http.map((port, index) =>
      `  replica ${index}: http://127.0.0.1:${port}  iggy tcp 127.0.0.1:${ports.tcp[index]!}`),
    `  credentials: iggy / ${password}`,
    secret.bannerLine,
    `  try: ${login}`,
    '  A replica that exits is restarted; Ctrl-C stops every replica.',
    '',
  ].join('\n') + '\n';
}

export async function dev(options: DevOptions): Promise<number> {
  const ports = devPorts(options);
  const taken = await takenPort(ports);
  if (taken !== null) {
    process.stderr.write(`vrmeta dev: port ${taken} on 127.0.0.1 is already in use; stop ` +
      'whatever holds it or pass --http-port / --replica-port / --tcp-port\n');
    return 2;
  }
  const tty = process.stdout.isTTY === true;
  let secret: SecretChoice;
  let chosen: ReturnType<typeof chooseLogFormat>;
  try {
    secret = chooseSecret(options.dataDir);
    chosen = chooseLogFormat(options.logFormat ?? 'auto', tty);
  } catch (error) {
    process.stderr.write(`vrmeta dev: ${(error as Error).message}\n`);
    return 2;
  }
  const cli = fileURLToPath(new URL('./cli.js', import.meta.url));
  const indices = Array.from({ length: options.replicas }, (_, index) => index);
  const args = indices.map((index) => replicaArgs(options, ports, index, secret));
  const prefixes = indices.map((index) => prefixOf(index, tty));
  // Built right after the children are spawned (loading pino-pretty takes a while), in the same
  // synchronous run, so it is set before any of their lines can arrive.
  let format: (line: string) => string = (line) => line;
  const supervisor = new Supervisor(
    {
      spawn: (index, callbacks) =>
        spawnReplica(cli, args[index]!, prefixes[index]!, (line) => format(line), callbacks),
      log: (index, message) => {
        const lines = message.split('\n').map((line) => `${prefixes[index]!}${line}\n`);
        process.stdout.write(lines.join(''));
      },
      nowMs: () => performance.now(),
      setTimer: (run, delayMs) => setTimeout(run, delayMs),
      clearTimer: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
    },
    { dataDirs: indices.map((index) => replicaDataDir(options, index)) },
  );
  supervisor.start();
  format = lineFormatter(chosen, { colorize: tty && (process.env['NO_COLOR'] ?? '') === '' });
  return superviseUntilDone(supervisor, banner(options, ports, secret));
}

/**
 * Prints the banner and waits for the supervisor to stop. SIGINT and SIGTERM stop it (a second
 * one SIGKILLs what is left); if this process exits any other way (an uncaught error), its
 * replicas are SIGKILLed on the way out instead of being left running without a supervisor.
 */
async function superviseUntilDone(supervisor: Supervisor, bannerText: string): Promise<number> {
  const onSignal = (signal: NodeJS.Signals): void => supervisor.stop(signal);
  const onExit = (): void => supervisor.killAllNow();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', onExit);
  process.stdout.write(bannerText);
  try {
    return await supervisor.done;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', onExit);
  }
}

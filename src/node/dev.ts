/**
 * `vrmeta dev` (what `npm start` runs): a local cluster of child processes on 127.0.0.1, one
 * replica each, data under ./data/replica-N, HTTP on consecutive ports from 3000. Prints the URLs
 * and the credentials, forwards every child's log lines with a replica prefix, and stops all
 * children on Ctrl-C (or when one of them dies). Refuses clearly when a port is taken.
 *
 * Secure by default: the cluster's secret is `<data-dir>/cluster.secret`, created once (mode
 * 0600, random) and reused on every later run, and every replica is given its path (never the
 * secret on a command line). A secret the caller configured in the environment
 * (VRMETA_CLUSTER_SECRET / VRMETA_CLUSTER_SECRET_FILE) is used instead.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DATA_DIRECTORY_MODE } from '../storage/fs-disk.js';
import { ensureDevClusterSecret } from './cluster-secret.js';
import { chooseLogFormat, lineFormatter } from './log-format.js';

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

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

const COLORS = ['\x1b[36m', '\x1b[35m', '\x1b[33m', '\x1b[32m', '\x1b[34m'];

export async function dev(options: DevOptions): Promise<number> {
  const httpPorts = Array.from({ length: options.replicas }, (_, index) => options.httpPort + index);
  const replicaPorts = Array.from({ length: options.replicas }, (_, index) => options.replicaPort + index);
  const tcpPorts = Array.from({ length: options.replicas }, (_, index) => (options.tcpPort ?? 8090) + index);
  // Every port probed at once: the replicas are spawned as early as possible (issue 15).
  const allPorts = [...httpPorts, ...replicaPorts, ...tcpPorts];
  const free = await Promise.all(allPorts.map((port) => portFree(port)));
  const taken = allPorts.find((_, index) => !free[index]);
  if (taken !== undefined) {
    process.stderr.write(`vrmeta dev: port ${taken} on 127.0.0.1 is already in use; stop whatever holds it or pass --http-port / --replica-port / --tcp-port\n`);
    return 2;
  }
  const fromEnvironment = ['VRMETA_CLUSTER_SECRET', 'VRMETA_CLUSTER_SECRET_FILE'].some((name) => (process.env[name] ?? '') !== '');
  let secretArgs: string[] = [];
  let secretLine: string;
  if (fromEnvironment) {
    secretLine = '  cluster secret: from the environment (VRMETA_CLUSTER_SECRET / VRMETA_CLUSTER_SECRET_FILE)';
  } else {
    // The replicas' own directories are tightened by each replica at boot; this one holds the
    // cluster secret beside them.
    mkdirSync(options.dataDir, { recursive: true, mode: DATA_DIRECTORY_MODE });
    let secretFile: ReturnType<typeof ensureDevClusterSecret>;
    try {
      secretFile = ensureDevClusterSecret(options.dataDir);
    } catch (error) {
      process.stderr.write(`vrmeta dev: ${(error as Error).message}\n`);
      return 2;
    }
    secretArgs = ['--cluster-secret-file', secretFile.path];
    secretLine = `  cluster secret: ${secretFile.path} (mode 0600, ${secretFile.created ? 'created now' : 'reused'})`;
  }
  const cli = fileURLToPath(new URL('./cli.js', import.meta.url));
  const replicas = replicaPorts.map((port) => `127.0.0.1:${port}`).join(',');
  const children: ChildProcess[] = [];
  const tty = process.stdout.isTTY === true;
  let chosen: ReturnType<typeof chooseLogFormat>;
  try {
    chosen = chooseLogFormat(options.logFormat ?? 'auto', tty);
  } catch (error) {
    process.stderr.write(`vrmeta dev: ${(error as Error).message}\n`);
    return 2;
  }
  // Built right after the children are spawned (loading pino-pretty takes a while), in the same
  // synchronous run, so it is set before any of their lines can arrive.
  let format: (line: string) => string;
  let stopping = false;
  const stopAll = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    for (const child of children) if (child.exitCode === null) child.kill(signal);
  };
  const exited = Promise.all(
    httpPorts.map((httpPort, index) => {
      const child = spawn(
        process.execPath,
        [
          cli,
          'start',
          '--replica-id',
          String(index),
          '--replicas',
          replicas,
          '--http',
          `127.0.0.1:${httpPort}`,
          '--tcp',
          `127.0.0.1:${tcpPorts[index]!}`,
          '--data-dir',
          join(options.dataDir, `replica-${index}`),
          '--kernels',
          options.kernels,
          '--log-level',
          options.logLevel,
          ...secretArgs,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: process.env },
      );
      children.push(child);
      const prefix = tty ? `${COLORS[index % COLORS.length]}[replica ${index}]\x1b[0m ` : `[replica ${index}] `;
      for (const stream of [child.stdout!, child.stderr!]) {
        createInterface({ input: stream }).on('line', (line) => process.stdout.write(`${prefix}${format(line)}\n`));
      }
      return new Promise<number>((resolve) => {
        child.once('exit', (code, signal) => {
          if (!stopping) {
            process.stdout.write(`${prefix}exited (${signal ?? code}); stopping the cluster\n`);
            stopAll('SIGTERM');
          }
          resolve(code ?? 0);
        });
      });
    }),
  );
  format = lineFormatter(chosen, { colorize: tty && (process.env['NO_COLOR'] ?? '') === '' });
  process.once('SIGINT', () => stopAll('SIGINT'));
  process.once('SIGTERM', () => stopAll('SIGTERM'));
  const password = process.env['VRMETA_ROOT_PASSWORD'] === undefined ? 'iggy' : '(VRMETA_ROOT_PASSWORD)';
  process.stdout.write(
    [
      '',
      `vrmeta: a ${options.replicas}-replica cluster on 127.0.0.1, data under ${options.dataDir}`,
      ...httpPorts.map((port, index) => `  replica ${index}: http://127.0.0.1:${port}  iggy tcp 127.0.0.1:${tcpPorts[index]!}`),
      `  credentials: iggy / ${password}`,
      secretLine,
      `  try: curl -s -X POST http://127.0.0.1:${httpPorts[0]}/users/login -H 'content-type: application/json' -d '{"username":"iggy","password":"iggy"}'`,
      '  Ctrl-C stops every replica.',
      '',
    ].join('\n') + '\n',
  );
  const codes = await exited;
  return codes.every((code) => code === 0 || stopping) ? 0 : 1;
}

/**
 * `vrmeta start`: one replica per process. Loads the configuration, recovers the data directory,
 * starts the replica and its HTTP listener, and shuts down gracefully on SIGTERM/SIGINT (stop
 * accepting, finish in-flight writes, close files). A kill -9 at any moment loses nothing that
 * was acknowledged: acknowledgements follow fsync.
 */
import { PASSWORD_GATE_DEFAULTS, PasswordGate } from '../http/password-gate.js';
import { pino, type Logger } from 'pino';
import { setKernelsWarn } from '../kernels/index.js';
import { StorageRefusal } from '../storage/refusal.js';
import { prefetchFile } from '../storage/fs-disk.js';
import { SNAPSHOT_FILE, SNAPSHOT_FILE_SIZE_MAX } from '../storage/snapshot-file.js';
import { ConfigError, readConfigEnv, readConfigFile, resolveConfig, type ConfigKey, type NodeConfig } from './config.js';
import { processOnlySecret, tokenKeyOf } from './cluster-secret.js';
import type { ReplicaNode } from './replica-node.js';
import { httpsFetch, serverTlsOptions } from './tls.js';
import type { AddressInfo } from 'node:net';
import { assert } from '../stdx/assert.js';
import { formatHostPort, parseHostPort } from '../transport/address.js';

export interface StartOptions {
  readonly configFile?: string;
  /** Flag values by config key (highest precedence). */
  readonly flags: Partial<Record<ConfigKey, unknown>>;
}

export function loadConfig(options: StartOptions, env: NodeJS.ProcessEnv = process.env): NodeConfig {
  const file = options.configFile === undefined ? {} : readConfigFile(options.configFile);
  return resolveConfig(file, readConfigEnv(env), options.flags);
}

function createLogger(config: NodeConfig): Logger {
  const pretty = process.stdout.isTTY === true;
  return pino({
    level: config.logLevel,
    base: { replica: config.replicaId },
    // A safety net, not the defence: nothing logs the config or the secret, and a test greps the
    // logs for it. Should a future line log the config anyway, the secret comes out censored.
    redact: { paths: ['clusterSecret', '*.clusterSecret', 'cluster_secret', '*.cluster_secret'], censor: '[secret]' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } } : {}),
  });
}

function splitHostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}

/** `host:port` of a bound listener: the configured host (as written), the port actually bound. */
function boundHostPort(host: string, address: string | AddressInfo | null): string {
  assert(address !== null && typeof address === 'object', 'a TCP listener has an address');
  return formatHostPort({ host, port: address.port });
}

/**
 * Where a replica's boot time goes: ms per phase, logged once as the `boot phases` info record
 * (operators ask where restart time goes). `process` runs from the process's time origin to
 * `start()`: node's own startup, the command line, and this module's static imports.
 */
class BootPhases {
  readonly phasesMs: Record<string, number> = {};
  private last = 0;

  constructor() {
    this.mark('process');
  }

  /** Charges the time since the previous mark to `phase`. */
  mark(phase: string): void {
    const now = performance.now();
    this.phasesMs[phase] = (this.phasesMs[phase] ?? 0) + Math.round(now - this.last);
    this.last = now;
  }

  get totalMs(): number {
    return Math.round(this.last);
  }
}

/** Runs the replica until a signal; returns the process exit code. */
export async function start(options: StartOptions): Promise<number> {
  const boot = new BootPhases();
  let config: NodeConfig;
  try {
    config = loadConfig(options);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`vrmeta: invalid configuration: ${error.key}: ${error.message.slice(error.key.length + 2)}\n`);
      return 2;
    }
    throw error;
  }
  boot.mark('config');
  // snapshot.bin comes off the disk on the thread pool while the modules below load; recovery
  // takes the bytes if the file is still the one read, and checks them as it checks any read.
  const prefetching = prefetchFile(config.dataDir, SNAPSHOT_FILE, SNAPSHOT_FILE_SIZE_MAX);
  const logger = createLogger(config);
  setKernelsWarn((message) => logger.warn(message));
  const { DEFAULT_ROOT_PASSWORD, ReplicaNode } = await import('./replica-node.js');
  boot.mark('import_replica');
  // Loaded before the replica starts, on purpose: loading it later (~0.5 s of module compilation
  // then) stalled the event loop in the middle of a wiped replica's state transfer (`bench
  // transfer`). What it defers to first use (lazy-compile.ts, jose) is a fraction of that.
  const { buildApp } = await import('../http/app.js');
  boot.mark('import_http');
  const rootPassword = process.env['VRMETA_ROOT_PASSWORD'] ?? DEFAULT_ROOT_PASSWORD;
  if (process.env['VRMETA_ROOT_PASSWORD'] === undefined) {
    logger.warn('using the default root credentials (iggy/iggy); set VRMETA_ROOT_PASSWORD');
  }
  // Every key derives from the secret; `insecure` (one replica only, checked by the config) draws
  // it at random here, so nothing about it can be guessed and nothing survives the process.
  const clusterSecret = config.clusterSecret === null ? processOnlySecret() : new TextEncoder().encode(config.clusterSecret);
  if (config.insecure) {
    logger.warn(
      '--insecure: no cluster secret; access tokens are signed with a random key of this process and do not survive a restart. ' +
        'For a throwaway single replica only: configure --cluster-secret-file for anything else',
    );
  } else {
    logger.info({ cluster_secret_source: config.clusterSecretSource }, 'cluster secret configured');
  }
  // `vrmeta bench login-flood` measures the server with and without the password gate; the
  // variable exists for that comparison only and is not a configuration key.
  const unboundedLogins = process.env['VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY'] === '1';
  // One gate for both edges that take password logins (HTTP and the Iggy binary protocol).
  const passwordGate = new PasswordGate(unboundedLogins ? { concurrencyMax: Infinity, queueMax: Infinity, startsPerSecondMax: Infinity } : PASSWORD_GATE_DEFAULTS);
  const prefetched = await prefetching;
  boot.mark('prefetch_wait');
  let node: ReplicaNode;
  try {
    node = await ReplicaNode.create({
      config,
      logger,
      rootPassword,
      clusterSecret,
      passwordGate,
      ...(prefetched === null ? {} : { prefetched: new Map([[SNAPSHOT_FILE, prefetched]]) }),
    });
  } catch (error) {
    if (error instanceof StorageRefusal) {
      logger.fatal({ file: error.file, reason: error.reason }, error.message);
      return 1;
    }
    throw error;
  }
  boot.mark('recovery');
  logger.info({ kernels: node.kernels.build, data_dir: config.dataDir, replicas: config.replicas }, `kernels: ${node.kernels.build}`);
  if (unboundedLogins) logger.warn('VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY=1: password verifications are NOT bounded (benchmark baseline only)');
  const tls = config.tls;
  const app = buildApp({
    node,
    jwtSecret: tokenKeyOf(clusterSecret, node.cluster),
    logger: logger.child({ component: 'http' }),
    passwordGate,
    cors: { allowedOrigins: config.corsOrigins },
    metricsPublic: config.metricsPublic,
    // Every replica is configured alike: with HTTPS here, the primary's listener is HTTPS too.
    ...(tls === null ? {} : { https: serverTlsOptions(tls.material), forward: { scheme: 'https', fetch: httpsFetch(tls.material.ca) } }),
  });
  boot.mark('http_app');
  // The replica bus listens and announces the restart first; the HTTP listener gets ready while
  // the peers dial back and the handshakes run (a restarted replica is ready once it has both).
  const { host, port } = splitHostPort(config.http);
  const replicaListening = node.start().then(() => boot.mark('replica_listen'));
  await Promise.all([replicaListening, app.listen({ host, port })]);
  boot.mark('http_listen');
  const scheme = tls === null ? 'http' : 'https';
  // The bound addresses (a configured port 0 resolved): what the logs name and the peers learn.
  const http = boundHostPort(host, app.server.address());
  logger.info({ http, tls: tls !== null, replica_tls: tls?.files.ca != null }, `HTTP listening on ${scheme}://${http}`);
  const tcpBound = await node.startClientListener();
  const tcp = boundHostPort(parseHostPort(config.tcp).host, tcpBound);
  logger.info({ tcp, tls: config.tcpTlsCert !== null }, `Iggy binary protocol listening on ${tcp}`);
  node.advertise({ http, tcp });
  boot.mark('tcp_listen');
  // CPU time to here (user + system, node's own start included): what a boot costs whatever the
  // machine's load, where wall-clock phases stretch when replicas share cores.
  const cpu = process.cpuUsage();
  const cpuMs = Math.round((cpu.user + cpu.system) / 1000);
  logger.info({ boot_ms: boot.totalMs, cpu_ms: cpuMs, phases_ms: boot.phasesMs, prefetched_reads: node.prefetchedReads }, `boot phases (ms): ${Object.entries(boot.phasesMs).map(([phase, ms]) => `${phase} ${ms}`).join(', ')}; cpu ${cpuMs}`);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      void (async () => {
        try {
          await app.close();
          await node.close();
          resolve(0);
        } catch (error) {
          logger.error({ err: error }, 'shutdown failed');
          resolve(1);
        }
      })();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/**
 * `vrmeta start` configuration: defaults < TOML file < `VRMETA_*` environment < flags
 * (DESIGN.md §2.2). Every key is validated here, once; a bad value is a `ConfigError` naming the
 * key and the reason, which the CLI prints as one line and exits with status 2.
 */
import { readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { parseKernelsMode } from '../kernels/index.js';
import type { KernelsMode } from '../kernels/kernel.js';
import { ConfigError, replicaConfig } from '../vsr/config.js';

export { ConfigError };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface NodeConfig {
  readonly replicaId: number;
  /** host:port of every replica's replication listener, in replica order. */
  readonly replicas: readonly string[];
  /** host:port of this replica's HTTP listener. */
  readonly http: string;
  readonly dataDir: string;
  readonly clusterName: string;
  readonly journalSlots: number;
  readonly clientsTableMax: number;
  readonly prepareQueueDepth: number;
  readonly kernels: KernelsMode;
  /** Pre-shared key for replica authentication (and the JWT key); null = none. */
  readonly clusterSecret: string | null;
  readonly logLevel: LogLevel;
  /** HTTP addresses of every replica, in replica order (for forwarding and /cluster/metadata). */
  readonly httpPeers: readonly string[] | null;
  /**
   * This replica lost its disk and rejoins with an empty data directory: it must not vote on
   * what it may have acknowledged before (ignored when the data directory is not empty).
   */
  readonly rejoin: boolean;
  /** host:port of this replica's Iggy binary client listener (DESIGN.md §2.4). */
  readonly tcp: string;
  /** Binary client addresses of every replica, in replica order (GetClusterMetadata); null = unknown. */
  readonly tcpPeers: readonly string[] | null;
  /** Client connections held at once; one more is refused with CannotEstablishConnection. */
  readonly tcpConnectionsMax: number;
  /** PEM files: TLS on the client port when both are set. */
  readonly tcpTlsCert: string | null;
  readonly tcpTlsKey: string | null;
}

/** Key name (as in the TOML file) -> environment variable. */
export const CONFIG_KEYS = {
  replica_id: 'VRMETA_REPLICA_ID',
  replicas: 'VRMETA_REPLICAS',
  http: 'VRMETA_HTTP',
  http_peers: 'VRMETA_HTTP_PEERS',
  data_dir: 'VRMETA_DATA_DIR',
  cluster_name: 'VRMETA_CLUSTER_NAME',
  journal_slots: 'VRMETA_JOURNAL_SLOTS',
  clients_table_max: 'VRMETA_CLIENTS_TABLE_MAX',
  prepare_queue_depth: 'VRMETA_PREPARE_QUEUE_DEPTH',
  kernels: 'VRMETA_KERNELS',
  cluster_secret: 'VRMETA_CLUSTER_SECRET',
  log_level: 'VRMETA_LOG_LEVEL',
  rejoin: 'VRMETA_REJOIN',
  tcp: 'VRMETA_TCP',
  tcp_peers: 'VRMETA_TCP_PEERS',
  tcp_connections_max: 'VRMETA_TCP_CONNECTIONS_MAX',
  tcp_tls_cert: 'VRMETA_TCP_TLS_CERT',
  tcp_tls_key: 'VRMETA_TCP_TLS_KEY',
} as const;
export type ConfigKey = keyof typeof CONFIG_KEYS;

const DEFAULTS: Record<ConfigKey, unknown> = {
  replica_id: 0,
  replicas: ['127.0.0.1:9090'],
  http: '127.0.0.1:3000',
  http_peers: null,
  data_dir: './data',
  cluster_name: 'vrmeta',
  journal_slots: 1024,
  clients_table_max: 8192,
  prepare_queue_depth: 32,
  kernels: 'auto',
  cluster_secret: null,
  log_level: 'info',
  rejoin: false,
  tcp: '127.0.0.1:8090',
  tcp_peers: null,
  tcp_connections_max: 10_000,
  tcp_tls_cert: null,
  tcp_tls_key: null,
};

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

function hostPort(key: string, value: unknown): string {
  if (typeof value !== 'string' || !HOST_PORT.test(value)) throw new ConfigError(key, `expected host:port, got ${JSON.stringify(value)}`);
  const port = Number(HOST_PORT.exec(value)![2]);
  if (port > 65535) throw new ConfigError(key, `port ${port} out of range`);
  return value;
}

function integer(key: string, value: unknown, min: number, max: number): number {
  const parsed = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof parsed !== 'number' || !Number.isInteger(parsed) || parsed < min || parsed > max) {
    throw new ConfigError(key, `expected an integer in ${min}..${max}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}

function list(key: string, value: unknown): string[] {
  if (typeof value === 'string') return value.split(',').map((item) => item.trim()).filter((item) => item !== '');
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value as string[];
  throw new ConfigError(key, 'expected a list of host:port (an array, or a comma-separated string)');
}

function optionalPath(key: string, value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || value === '') throw new ConfigError(key, 'expected a file path');
  return value;
}

/** Reads a TOML config file into raw key -> value (unknown keys refused). */
export function readConfigFile(path: string): Partial<Record<ConfigKey, unknown>> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError('config', `cannot read ${path}: ${(error as Error).message}`);
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = parseToml(text) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError('config', `${path} is not valid TOML: ${(error as Error).message.split('\n')[0]}`);
  }
  for (const key of Object.keys(parsed)) {
    if (!(key in CONFIG_KEYS)) throw new ConfigError(key, `unknown configuration key in ${path}`);
  }
  return parsed as Partial<Record<ConfigKey, unknown>>;
}

export function readConfigEnv(env: NodeJS.ProcessEnv): Partial<Record<ConfigKey, unknown>> {
  const out: Partial<Record<ConfigKey, unknown>> = {};
  for (const [key, variable] of Object.entries(CONFIG_KEYS) as [ConfigKey, string][]) {
    const value = env[variable];
    if (value !== undefined && value !== '') out[key] = value;
  }
  return out;
}

/** Merges the layers (later wins) and validates every key. */
export function resolveConfig(...layers: Partial<Record<ConfigKey, unknown>>[]): NodeConfig {
  const raw: Record<ConfigKey, unknown> = { ...DEFAULTS };
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer) as [ConfigKey, unknown][]) if (value !== undefined) raw[key] = value;
  }
  const replicas = list('replicas', raw.replicas).map((address, index) => hostPort(`replicas[${index}]`, address));
  if (replicas.length < 1 || replicas.length > 32) throw new ConfigError('replicas', 'expected 1..32 replica addresses');
  const replicaId = integer('replica_id', raw.replica_id, 0, 31);
  if (replicaId >= replicas.length) throw new ConfigError('replica_id', `must be below the number of replicas (${replicas.length})`);
  const httpPeers = raw.http_peers === null ? null : list('http_peers', raw.http_peers).map((address, index) => hostPort(`http_peers[${index}]`, address));
  if (httpPeers !== null && httpPeers.length !== replicas.length) {
    throw new ConfigError('http_peers', `expected one HTTP address per replica (${replicas.length})`);
  }
  const dataDir = raw.data_dir;
  if (typeof dataDir !== 'string' || dataDir === '') throw new ConfigError('data_dir', 'expected a directory path');
  const clusterName = raw.cluster_name;
  if (typeof clusterName !== 'string' || clusterName.length < 1 || clusterName.length > 255) {
    throw new ConfigError('cluster_name', 'expected 1..255 characters');
  }
  let kernels: KernelsMode;
  try {
    kernels = parseKernelsMode(String(raw.kernels));
  } catch {
    throw new ConfigError('kernels', `expected auto, wasm or ts, got ${JSON.stringify(raw.kernels)}`);
  }
  const secret = raw.cluster_secret;
  if (secret !== null && (typeof secret !== 'string' || secret.length < 32)) {
    throw new ConfigError('cluster_secret', 'expected at least 32 characters');
  }
  const logLevel = raw.log_level;
  if (typeof logLevel !== 'string' || !(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('log_level', `expected one of ${LOG_LEVELS.join(', ')}`);
  }
  const rejoin = raw.rejoin === true || raw.rejoin === 'true' || raw.rejoin === '1';
  if (!(rejoin || raw.rejoin === false || raw.rejoin === 'false' || raw.rejoin === '0')) {
    throw new ConfigError('rejoin', 'expected true or false');
  }
  const tcpPeers = raw.tcp_peers === null ? null : list('tcp_peers', raw.tcp_peers).map((address, index) => hostPort(`tcp_peers[${index}]`, address));
  if (tcpPeers !== null && tcpPeers.length !== replicas.length) {
    throw new ConfigError('tcp_peers', `expected one binary client address per replica (${replicas.length})`);
  }
  const tcpTlsCert = optionalPath('tcp_tls_cert', raw.tcp_tls_cert);
  const tcpTlsKey = optionalPath('tcp_tls_key', raw.tcp_tls_key);
  if ((tcpTlsCert === null) !== (tcpTlsKey === null)) {
    throw new ConfigError(tcpTlsCert === null ? 'tcp_tls_cert' : 'tcp_tls_key', 'TLS on the client port needs both tcp_tls_cert and tcp_tls_key');
  }
  const config: NodeConfig = {
    replicaId,
    replicas,
    http: hostPort('http', raw.http),
    dataDir,
    clusterName,
    journalSlots: integer('journal_slots', raw.journal_slots, 16, 1 << 20),
    clientsTableMax: integer('clients_table_max', raw.clients_table_max, 2, 65536),
    prepareQueueDepth: integer('prepare_queue_depth', raw.prepare_queue_depth, 1, 127),
    kernels,
    clusterSecret: secret as string | null,
    logLevel: logLevel as LogLevel,
    httpPeers,
    rejoin,
    tcp: hostPort('tcp', raw.tcp),
    tcpPeers,
    tcpConnectionsMax: integer('tcp_connections_max', raw.tcp_connections_max, 1, 1_000_000),
    tcpTlsCert,
    tcpTlsKey,
  };
  // The replica's own checks (journal slots vs pipeline, and so on), reported by key.
  replicaConfig({
    cluster: 0n,
    replica: config.replicaId,
    replicaCount: config.replicas.length,
    journalSlots: config.journalSlots,
    prepareQueueDepth: config.prepareQueueDepth,
    clientsTableMax: config.clientsTableMax,
  });
  return config;
}

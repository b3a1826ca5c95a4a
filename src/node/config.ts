/**
 * `vrmeta start` configuration: defaults < TOML file < `VRMETA_*` environment < flags
 * (DESIGN.md §2.2). Every key is validated here, once; a bad value is a `ConfigError` naming the
 * key and the reason, which the CLI prints as one line and exits with status 2.
 */
import { CLIENT_BUFFERS_SIZE_MAX_DEFAULT } from '../transport/buffer-budget.js';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseKernelsMode } from '../kernels/index.js';
import type { KernelsMode } from '../kernels/kernel.js';
import { corsOriginsProblem } from '../http/cors.js';
import { BATCH_REQUESTS_MAX } from '../vsr/batch.js';
import {
  ConfigError,
  HEARTBEATS_PER_TIMEOUT_MIN,
  PREPARE_BATCH_MAX_DEFAULT,
  detectorTimeouts,
  replicaConfig,
  type TimeoutTicks,
} from '../vsr/config.js';
import { CLUSTER_SECRET_LENGTH_MIN, ClusterSecretError, readClusterSecretFile } from './cluster-secret.js';
import { TlsConfigError, loadTls, type TlsFiles, type TlsMaterial } from './tls.js';

export { ConfigError };

/** The consensus clock: 10 ms per tick (iggy-metadata-plane.md §2.3). */
export const TICK_MS = 10;
/** The primary's heartbeat interval and a backup's wait without one, unless configured. */
export const HEARTBEAT_MS_DEFAULT = 100;
export const ELECTION_TIMEOUT_MS_DEFAULT = 500;

/** Iggy's default segment.size is 1 GiB; ours is smaller so a sealed segment is removed sooner. */
export const SEGMENT_SIZE_DEFAULT = 256 * 1024 * 1024;
export const SEGMENT_SIZE_MIN = 4096;
/** Segment positions are u32 in the 24-byte index. */
export const SEGMENT_SIZE_MAX = 4 * 1024 * 1024 * 1024 - 1;

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
  /**
   * Sessions one user may hold in the client table (src/vsr/client-table.ts): its next login
   * gives up its own least recent session. Same on every replica, as clients_table_max.
   */
  readonly sessionsPerUserMax: number;
  /** The HTTP edge's VSR sessions per credential (client-sessions.ts): concurrent writes of one token. */
  readonly httpSessionsPerCredential: number;
  readonly prepareQueueDepth: number;
  /** How often the primary heartbeats its backups, in ms (a multiple of TICK_MS). */
  readonly heartbeatMs: number;
  /**
   * How long a backup waits without a heartbeat before it starts a view change, in ms (a multiple
   * of TICK_MS, at least HEARTBEATS_PER_TIMEOUT_MIN heartbeats).
   */
  readonly electionTimeoutMs: number;
  /** Queued requests the primary puts into one prepare (src/vsr/batch.ts); 1 disables batching. */
  readonly prepareBatchMax: number;
  readonly kernels: KernelsMode;
  /**
   * The pre-shared secret every key of the cluster derives from (replica authentication, access
   * tokens): from `cluster_secret` or read from `cluster_secret_file`. Null only with `insecure`
   * (a single replica whose keys come from random bytes of the process). Never logged.
   */
  readonly clusterSecret: string | null;
  /** Where the secret came from (loggable; the secret itself is not). */
  readonly clusterSecretSource: ClusterSecretSource;
  /** `--insecure`: no configured secret, a throwaway single replica (see cluster-secret.ts). */
  readonly insecure: boolean;
  /**
   * TLS (src/node/tls.ts): the files, loaded and checked. HTTPS when set; mutual TLS on the
   * replica port when `files.ca` is set too. Null: plain HTTP and TCP.
   */
  readonly tls: { readonly files: TlsFiles; readonly material: TlsMaterial } | null;
  readonly logLevel: LogLevel;
  /**
   * HTTP addresses of every replica, in replica order (for forwarding and /cluster/metadata).
   * An override: without it each replica learns its peers' addresses from their advertisements.
   */
  readonly httpPeers: readonly string[] | null;
  /** The HTTP address this replica advertises to its peers; null: the bound address. */
  readonly advertiseHttp: string | null;
  /** The binary client address this replica advertises; null: the bound address. */
  readonly advertiseTcp: string | null;
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
  /** Bytes all client connections may hold in buffers together (src/transport/buffer-budget.ts). */
  readonly tcpBuffersSizeMax: number;
  /** PEM files: TLS on the client port when both are set. */
  readonly tcpTlsCert: string | null;
  readonly tcpTlsKey: string | null;
  /** Origins browsers may call the HTTP API from (src/http/cors.ts): `['*']` any, `[]` CORS off. */
  readonly corsOrigins: readonly string[];
  /** GET /metrics answers without a bearer (default false: it needs one, as Iggy's does). */
  readonly metricsPublic: boolean;
  /** Bytes a partition segment grows to before the next one starts (Iggy's segment.size). */
  readonly segmentSize: number;
  /** How often a partition group's primary applies retention (expiry, max topic size), in ms. */
  readonly retentionIntervalMs: number;
}

/**
 * The share of the client table one user may hold by default (sessions_per_user_max unset): one
 * user's login flood then evicts only its own sessions, and eight users at their share fill it.
 */
export const SESSIONS_PER_USER_SHARE = 8;

/** Key name (as in the TOML file) -> environment variable. */
export const CONFIG_KEYS = {
  replica_id: 'VRMETA_REPLICA_ID',
  replicas: 'VRMETA_REPLICAS',
  http: 'VRMETA_HTTP',
  http_peers: 'VRMETA_HTTP_PEERS',
  advertise_http: 'VRMETA_ADVERTISE_HTTP',
  advertise_tcp: 'VRMETA_ADVERTISE_TCP',
  data_dir: 'VRMETA_DATA_DIR',
  cluster_name: 'VRMETA_CLUSTER_NAME',
  journal_slots: 'VRMETA_JOURNAL_SLOTS',
  clients_table_max: 'VRMETA_CLIENTS_TABLE_MAX',
  sessions_per_user_max: 'VRMETA_SESSIONS_PER_USER_MAX',
  http_sessions_per_credential: 'VRMETA_HTTP_SESSIONS_PER_CREDENTIAL',
  prepare_queue_depth: 'VRMETA_PREPARE_QUEUE_DEPTH',
  prepare_batch_max: 'VRMETA_PREPARE_BATCH_MAX',
  heartbeat_ms: 'VRMETA_HEARTBEAT_MS',
  election_timeout_ms: 'VRMETA_ELECTION_TIMEOUT_MS',
  kernels: 'VRMETA_KERNELS',
  cluster_secret: 'VRMETA_CLUSTER_SECRET',
  cluster_secret_file: 'VRMETA_CLUSTER_SECRET_FILE',
  insecure: 'VRMETA_INSECURE',
  tls_cert: 'VRMETA_TLS_CERT',
  tls_key: 'VRMETA_TLS_KEY',
  tls_ca: 'VRMETA_TLS_CA',
  log_level: 'VRMETA_LOG_LEVEL',
  rejoin: 'VRMETA_REJOIN',
  tcp: 'VRMETA_TCP',
  tcp_peers: 'VRMETA_TCP_PEERS',
  tcp_connections_max: 'VRMETA_TCP_CONNECTIONS_MAX',
  tcp_buffers_size_max: 'VRMETA_TCP_BUFFERS_SIZE_MAX',
  tcp_tls_cert: 'VRMETA_TCP_TLS_CERT',
  tcp_tls_key: 'VRMETA_TCP_TLS_KEY',
  cors_origins: 'VRMETA_CORS_ORIGINS',
  metrics_public: 'VRMETA_METRICS_PUBLIC',
  segment_size: 'VRMETA_SEGMENT_SIZE',
  retention_interval_ms: 'VRMETA_RETENTION_INTERVAL_MS',
} as const;
export type ConfigKey = keyof typeof CONFIG_KEYS;

const DEFAULTS: Record<ConfigKey, unknown> = {
  replica_id: 0,
  replicas: ['127.0.0.1:9090'],
  http: '127.0.0.1:3000',
  http_peers: null,
  advertise_http: null,
  advertise_tcp: null,
  data_dir: './data',
  cluster_name: 'vrmeta',
  journal_slots: 1024,
  clients_table_max: 8192,
  // Null: an eighth of clients_table_max (SESSIONS_PER_USER_SHARE).
  sessions_per_user_max: null,
  http_sessions_per_credential: 64,
  prepare_queue_depth: 32,
  prepare_batch_max: PREPARE_BATCH_MAX_DEFAULT,
  heartbeat_ms: HEARTBEAT_MS_DEFAULT,
  election_timeout_ms: ELECTION_TIMEOUT_MS_DEFAULT,
  kernels: 'auto',
  cluster_secret: null,
  cluster_secret_file: null,
  insecure: false,
  tls_cert: null,
  tls_key: null,
  tls_ca: null,
  log_level: 'info',
  rejoin: false,
  tcp: '127.0.0.1:8090',
  tcp_peers: null,
  tcp_connections_max: 10_000,
  tcp_buffers_size_max: CLIENT_BUFFERS_SIZE_MAX_DEFAULT,
  tcp_tls_cert: null,
  tcp_tls_key: null,
  // Iggy's `[http.cors] allowed_origins` default: any origin (the web UI runs elsewhere).
  cors_origins: ['*'],
  metrics_public: false,
  segment_size: SEGMENT_SIZE_DEFAULT,
  // Iggy's `[data_maintenance.messages] interval` default: one minute.
  retention_interval_ms: 60_000,
};

export type ClusterSecretSource = 'cluster_secret' | 'cluster_secret_file' | 'insecure';

/** Named by the refusal of a start without a secret: every way to give one. */
export const NO_SECRET_REASON =
  'no cluster secret: pass --cluster-secret (or set VRMETA_CLUSTER_SECRET), or a secret file with ' +
  '--cluster-secret-file (or VRMETA_CLUSTER_SECRET_FILE, mode 0600); `vrmeta dev` creates one for you. ' +
  '--insecure runs a throwaway single replica without one';

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

function hostPort(key: string, value: unknown): string {
  if (typeof value !== 'string' || !HOST_PORT.test(value)) throw new ConfigError(key, `expected host:port, got ${JSON.stringify(value)}`);
  const port = Number(HOST_PORT.exec(value)![2]);
  if (port > 65535) throw new ConfigError(key, `port ${port} out of range`);
  return value;
}

/** An advertised address: a concrete host:port peers can reach (no port 0, no 0.0.0.0 / ::). */
function advertised(key: string, value: unknown): string | null {
  if (value === null) return null;
  const address = hostPort(key, value);
  const match = HOST_PORT.exec(address)!;
  if (Number(match[2]) === 0) throw new ConfigError(key, 'expected a concrete port, not 0');
  if (/^(0\.0\.0\.0|\[[0:]+\])$/.test(match[1]!)) throw new ConfigError(key, `${match[1]} is not an address peers can reach; name this host`);
  return address;
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

/** Allowed CORS origins: a list (array or comma-separated; empty = CORS off), checked by cors.ts. */
function originList(key: string, value: unknown): string[] {
  let origins: string[];
  if (typeof value === 'string') origins = value.split(',').map((item) => item.trim()).filter((item) => item !== '');
  else if (Array.isArray(value) && value.every((item) => typeof item === 'string')) origins = (value as string[]).map((item) => item.trim());
  else throw new ConfigError(key, 'expected a list of origins (an array, or a comma-separated string)');
  const problem = corsOriginsProblem(origins);
  if (problem !== null) throw new ConfigError(key, problem);
  return origins;
}

function boolean(key: string, value: unknown): boolean {
  if (value === true || value === 'true' || value === '1') return true;
  if (value === false || value === 'false' || value === '0') return false;
  throw new ConfigError(key, 'expected true or false');
}

/**
 * The secret from the highest-precedence layer that sets `cluster_secret` or
 * `cluster_secret_file` (a flag's file beats an environment's secret, as for every key); one
 * layer setting both is ambiguous and refused. Without one, only `insecure` with one replica runs.
 */
function resolveSecret(
  layers: readonly Partial<Record<ConfigKey, unknown>>[],
  insecure: boolean,
  replicaCount: number,
): { secret: string | null; source: ClusterSecretSource } {
  for (let index = layers.length - 1; index >= 0; index--) {
    const layer = layers[index]!;
    const inline = layer.cluster_secret ?? null;
    const file = layer.cluster_secret_file ?? null;
    if (inline === null && file === null) continue;
    if (inline !== null && file !== null) {
      throw new ConfigError('cluster_secret', 'set either cluster_secret or cluster_secret_file, not both');
    }
    if (insecure) throw new ConfigError('insecure', 'a cluster secret is configured; drop --insecure');
    if (inline !== null) {
      if (typeof inline !== 'string' || inline.length < CLUSTER_SECRET_LENGTH_MIN) {
        throw new ConfigError('cluster_secret', `expected at least ${CLUSTER_SECRET_LENGTH_MIN} characters`);
      }
      return { secret: inline, source: 'cluster_secret' };
    }
    if (typeof file !== 'string' || file === '') throw new ConfigError('cluster_secret_file', 'expected a file path');
    try {
      return { secret: readClusterSecretFile(file), source: 'cluster_secret_file' };
    } catch (error) {
      if (error instanceof ClusterSecretError) throw new ConfigError('cluster_secret_file', error.message);
      throw error;
    }
  }
  if (!insecure) throw new ConfigError('cluster_secret', NO_SECRET_REASON);
  if (replicaCount !== 1) {
    throw new ConfigError(
      'insecure',
      `only a single replica may run without a cluster secret (replicas lists ${replicaCount}); a cluster needs a secret so replicas authenticate each other`,
    );
  }
  return { secret: null, source: 'insecure' };
}

function optionalPath(key: ConfigKey, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'string' || value === '') throw new ConfigError(key, 'expected a file path');
  return value;
}

/** Certificate and key come together; a CA (mesh TLS) needs them both. Files are loaded here. */
function resolveTls(raw: Record<ConfigKey, unknown>): NodeConfig['tls'] {
  const cert = optionalPath('tls_cert', raw.tls_cert);
  const key = optionalPath('tls_key', raw.tls_key);
  const ca = optionalPath('tls_ca', raw.tls_ca);
  if (cert === null && key === null) {
    if (ca !== null) throw new ConfigError('tls_ca', 'mutual TLS on the replica port needs this replica\'s certificate too: set tls_cert and tls_key');
    return null;
  }
  if (cert === null) throw new ConfigError('tls_cert', 'tls_key is set: give the certificate too');
  if (key === null) throw new ConfigError('tls_key', 'tls_cert is set: give its private key too');
  const files: TlsFiles = { cert, key, ca };
  try {
    return { files, material: loadTls(files) };
  } catch (error) {
    if (error instanceof TlsConfigError) throw new ConfigError(error.key, error.message);
    throw error;
  }
}

/** smol-toml, loaded only when there is a config file to read: a replica without one boots
 * without loading a TOML parser. */
function parseToml(text: string): unknown {
  const { parse } = createRequire(import.meta.url)('smol-toml') as typeof import('smol-toml');
  return parse(text);
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
  const insecure = boolean('insecure', raw.insecure);
  const { secret, source } = resolveSecret(layers, insecure, replicas.length);
  const logLevel = raw.log_level;
  if (typeof logLevel !== 'string' || !(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('log_level', `expected one of ${LOG_LEVELS.join(', ')}`);
  }
  const rejoin = boolean('rejoin', raw.rejoin);
  const tls = resolveTls(raw);
  const tcpPeers = raw.tcp_peers === null ? null : list('tcp_peers', raw.tcp_peers).map((address, index) => hostPort(`tcp_peers[${index}]`, address));
  if (tcpPeers !== null && tcpPeers.length !== replicas.length) {
    throw new ConfigError('tcp_peers', `expected one binary client address per replica (${replicas.length})`);
  }
  const tcpTlsCert = optionalPath('tcp_tls_cert', raw.tcp_tls_cert);
  const tcpTlsKey = optionalPath('tcp_tls_key', raw.tcp_tls_key);
  if ((tcpTlsCert === null) !== (tcpTlsKey === null)) {
    throw new ConfigError(tcpTlsCert === null ? 'tcp_tls_cert' : 'tcp_tls_key', 'TLS on the client port needs both tcp_tls_cert and tcp_tls_key');
  }
  const corsOrigins = originList('cors_origins', raw.cors_origins);
  const clientsTableMax = integer('clients_table_max', raw.clients_table_max, 2, 65536);
  const sessionsPerUserMax =
    raw.sessions_per_user_max === null
      ? Math.max(1, Math.floor(clientsTableMax / SESSIONS_PER_USER_SHARE))
      : integer('sessions_per_user_max', raw.sessions_per_user_max, 1, clientsTableMax);
  const { heartbeatMs, electionTimeoutMs } = failureDetector(raw);
  const config: NodeConfig = {
    replicaId,
    replicas,
    http: hostPort('http', raw.http),
    dataDir,
    clusterName,
    journalSlots: integer('journal_slots', raw.journal_slots, 16, 1 << 20),
    clientsTableMax,
    sessionsPerUserMax,
    httpSessionsPerCredential: integer('http_sessions_per_credential', raw.http_sessions_per_credential, 1, 1024),
    prepareQueueDepth: integer('prepare_queue_depth', raw.prepare_queue_depth, 1, 127),
    prepareBatchMax: integer('prepare_batch_max', raw.prepare_batch_max, 1, BATCH_REQUESTS_MAX),
    heartbeatMs,
    electionTimeoutMs,
    kernels,
    clusterSecret: secret,
    clusterSecretSource: source,
    insecure,
    tls,
    logLevel: logLevel as LogLevel,
    httpPeers,
    advertiseHttp: advertised('advertise_http', raw.advertise_http),
    advertiseTcp: advertised('advertise_tcp', raw.advertise_tcp),
    rejoin,
    tcp: hostPort('tcp', raw.tcp),
    tcpPeers,
    tcpConnectionsMax: integer('tcp_connections_max', raw.tcp_connections_max, 1, 1_000_000),
    tcpBuffersSizeMax: integer('tcp_buffers_size_max', raw.tcp_buffers_size_max, 1024 * 1024, 2 ** 40),
    tcpTlsCert,
    tcpTlsKey,
    corsOrigins,
    metricsPublic: boolean('metrics_public', raw.metrics_public),
    segmentSize: integer('segment_size', raw.segment_size, SEGMENT_SIZE_MIN, SEGMENT_SIZE_MAX),
    retentionIntervalMs: integer('retention_interval_ms', raw.retention_interval_ms, 100, 86_400_000),
  };
  // The replica's own checks (journal slots vs pipeline, and so on), reported by key.
  replicaConfig({
    cluster: 0n,
    replica: config.replicaId,
    replicaCount: config.replicas.length,
    journalSlots: config.journalSlots,
    prepareQueueDepth: config.prepareQueueDepth,
    prepareBatchMax: config.prepareBatchMax,
    clientsTableMax: config.clientsTableMax,
    sessionsPerUserMax: config.sessionsPerUserMax,
    timeouts: nodeTimeouts(config),
  });
  return config;
}

/** The replica core's timers for `config`'s failure detector settings. */
export function nodeTimeouts(config: Pick<NodeConfig, 'heartbeatMs' | 'electionTimeoutMs'>): TimeoutTicks {
  return detectorTimeouts(config.heartbeatMs / TICK_MS, config.electionTimeoutMs / TICK_MS);
}

/**
 * heartbeat_ms and election_timeout_ms, in whole ticks. An election timeout under
 * HEARTBEATS_PER_TIMEOUT_MIN heartbeats is refused here, by its own key: a primary whose
 * heartbeats are merely late by a tick would be deposed.
 */
function failureDetector(raw: Record<ConfigKey, unknown>): { heartbeatMs: number; electionTimeoutMs: number } {
  const heartbeatMs = integer('heartbeat_ms', raw.heartbeat_ms, TICK_MS, 10_000);
  const electionTimeoutMs = integer('election_timeout_ms', raw.election_timeout_ms, 3 * TICK_MS, 600_000);
  for (const [key, value] of [['heartbeat_ms', heartbeatMs], ['election_timeout_ms', electionTimeoutMs]] as const) {
    if (value % TICK_MS !== 0) throw new ConfigError(key, `must be a multiple of the ${TICK_MS} ms tick, got ${value}`);
  }
  const floor = HEARTBEATS_PER_TIMEOUT_MIN * heartbeatMs;
  if (electionTimeoutMs < floor) {
    throw new ConfigError(
      'election_timeout_ms',
      `must be at least ${HEARTBEATS_PER_TIMEOUT_MIN} heartbeat intervals (${floor} ms with heartbeat_ms ${heartbeatMs}), got ${electionTimeoutMs}`,
    );
  }
  return { heartbeatMs, electionTimeoutMs };
}

/**
 * One replica process, wired: the real disk (node:fs), recovery, the VSR core, the replica TCP
 * bus, the 10 ms tick, the HTTP edge's client sessions, and the `NodeApi` the HTTP edge uses.
 * This is the only place real IO meets the core (STYLE.md: src/node is where IO is wired).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Logger as PinoLogger } from 'pino';
import type { Registry } from 'prom-client';
import type {
  ClientSessionInfo,
  ClusterNode,
  ClusterStatus,
  DataPlaneApi,
  NodeApi,
  ReplicaTransportCounters,
  SessionKey,
  WriteOutcome,
} from '../http/node-api.js';
import { HttpError } from '../http/errors.js';
import { PASSWORD_GATE_DEFAULTS, PasswordGate } from '../http/password-gate.js';
import { loadKernels } from '../kernels/index.js';
import { workerCheckpointEncoder } from './checkpoint-encoder.js';
import type { Kernels } from '../kernels/kernel.js';
import { Operation as MetadataOperation } from '../metadata/operations.js';
import { MetadataStateMachine } from '../metadata/state-machine.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { GENESIS_PASSWORD_MARKER } from '../metadata/validation.js';
import { DATA_DIRECTORY_MODE, FsDisk, tightenDataDirModes } from '../storage/fs-disk.js';
import type { PrefetchedFile } from '../storage/fs-disk.js';
import { recover, toReplicaBootState } from '../storage/recovery.js';
import { PRNG_SEED_BYTES, Prng } from '../stdx/prng.js';
import { FramePool } from '../transport/frame-pool.js';
import { ReplicaBus } from '../transport/tcp-bus.js';
import { randomClientId } from '../transport/binary-client.js';
import { ClientListener, type ClientListenerOptions } from '../transport/client-listener.js';
import { formatHostPort, parseHostPort } from '../transport/address.js';
import type { Advertisement } from '../transport/advertisement.js';
import { SERVER_VERSION_DEFAULT } from '../http/version.js';
import { processSystemInfo } from '../http/system-info.js';
import { CLIENT_NO_USER_ID, ClusterNodeRole, ClusterNodeStatus, clientTransportName, encodeStats, type ClusterNodeView } from '../metadata/binary-responses.js';
import { Command, HEADER_SIZE, STATE_CHUNK_SIZE_MAX } from '../constants.js';
import type { DecodedFrame } from '../vsr/frame.js';
import type { SessionCore } from './binary-host.js';
import { BinarySessions } from './binary-sessions.js';
import { replicaConfig, type ReplicaConfig } from '../vsr/config.js';
import type { LogLevel as CoreLogLevel, Logger } from '../vsr/io.js';
import { DivergenceFailure, Replica } from '../vsr/replica.js';
import { STATE_CHUNKS_UNWRITTEN_MAX } from '../vsr/state-transfer.js';
import { CHUNK_READ_AHEAD, CHUNK_READS_PER_OFFER_MAX } from '../vsr/transfer-server.js';
import { ClientSessions } from './client-sessions.js';
import { TICK_MS, nodeTimeouts, type NodeConfig } from './config.js';
import { NodeMetrics } from './node-metrics.js';
import { createPasswordVerifier, hashPassword, type PasswordVerifier } from '../http/secrets.js';
import { StorageDriver } from './storage-driver.js';
import { PartitionGroups, type PartitionGroup } from './partition-groups.js';
import { ROOT_USER_ID } from '../metadata/state.js';
import { metadataIncarnation, PartitionMaintenance } from './partition-maintenance.js';
import { PartitionEdge, httpDataPlane } from './partition-edge.js';
import { FetchCollector, IdleCollector, fullCollection, minorCollection, type IdleCollectorView } from './idle-collector.js';
import { replicaMeshTls } from './tls.js';

export { TICK_MS };
/** How often idle HTTP sessions are expired, in ticks (1 s). */
const SESSION_EXPIRY_TICKS = 100;
/** Ticks between the idle collector's checks (src/node/idle-collector.ts): 1 s. */
const IDLE_COLLECT_TICKS = 100;
/** Bytes fetched between young-generation collections during a state transfer (FetchCollector). */
export const FETCH_COLLECT_BYTES = 8 * 1024 * 1024;
/** Exit status of a replica that stopped because its own history diverged (wipe and --rejoin). */
export const EXIT_DIVERGENCE = 3;
/** How long a stopping primary waits for its hand-over StartViewChange to go out. */
const ABDICATE_WAIT_MS = 500;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** How many tightened paths the boot warning names (the count is always complete). */
const TIGHTENED_PATHS_LOGGED_MAX = 8;

/**
 * Makes the data directory, or makes an existing one the owner's only, before anything in it is
 * read (it holds every password hash; fs-disk.ts, "Permissions"). The operator is told once what
 * changed, in case a backup or a tool read it as another user.
 */
function openDataDir(dataDir: string, logger: PinoLogger): void {
  mkdirSync(dataDir, { recursive: true, mode: DATA_DIRECTORY_MODE });
  const tightened = tightenDataDirModes(dataDir);
  if (tightened.length === 0) return;
  logger.warn(
    { dataDir, tightened: tightened.length, paths: tightened.slice(0, TIGHTENED_PATHS_LOGGED_MAX) },
    'data directory was readable by others: tightened to 0700 directories and 0600 files',
  );
}

/** How far a peer's last reported commit trails ours (0 when it is ahead); null when unheard. */
function peerLag(commitMax: number, peerCommit: number | null): number | null {
  return peerCommit === null ? null : Math.max(0, commitMax - peerCommit);
}

export const DEFAULT_ROOT_USERNAME = 'iggy';
export const DEFAULT_ROOT_PASSWORD = 'iggy';

/** The cluster id: the first 16 bytes of SHA-256(cluster name), read little-endian. */
export function clusterIdOf(name: string): bigint {
  const digest = createHash('sha256').update(`vrmeta-cluster\0${name}`).digest();
  let value = 0n;
  for (let index = 15; index >= 0; index--) value = (value << 8n) | BigInt(digest[index]!);
  return value;
}

export interface ReplicaNodeOptions {
  readonly config: NodeConfig;
  /**
   * The bound on Argon2id verifications, shared by the HTTP and the binary edge (both take logins).
   * Defaults to PASSWORD_GATE_DEFAULTS.
   */
  readonly passwordGate?: PasswordGate;
  readonly logger: PinoLogger;
  readonly rootPassword?: string;
  readonly kernels?: Kernels;
  /**
   * The cluster secret's bytes (cluster-secret.ts): the replica bus derives its MAC key from it.
   * Always present: replica connections are always authenticated.
   */
  readonly clusterSecret: Uint8Array;
  /** Tests: the grace before a closed binary connection's session is logged out (default 10 s). */
  readonly binaryDisconnectGraceMs?: number;
  /** Data files read ahead while the process loaded its modules (`prefetchFile`), for recovery. */
  readonly prefetched?: ReadonlyMap<string, PrefetchedFile>;
}

export class ReplicaNode implements NodeApi {
  readonly config: NodeConfig;
  readonly replica: number;
  readonly clusterName: string;
  readonly cluster: bigint;
  readonly state: MetadataStateMachine;
  readonly kernels: Kernels;
  readonly core: Replica<MetadataMachineSnapshot>;
  readonly bus: ReplicaBus;
  readonly storage: StorageDriver<MetadataMachineSnapshot>;
  /** The partition groups this replica is a member of (the data plane). */
  readonly partitions: PartitionGroups;
  readonly dataPlane: DataPlaneApi;
  /** The metadata commit at the last sweep of the partitions' statistics (-1: none yet). */
  private statsSyncedAtCommit = -2;
  /**
   * The node's own client in the partition groups, for the drops it proposes (a random id per
   * process, as any client's; root, since the drops are the node's own bookkeeping).
   */
  private readonly maintenanceCaller = {
    connection: null,
    client: randomClientId(),
    userId: ROOT_USER_ID,
    principal: { id: ROOT_USER_ID, permissions: null },
  };
  /** The drops and trims this node proposes in the partition groups it leads. */
  private readonly maintenance: PartitionMaintenance;
  readonly sessions: ClientSessions;
  /** The Iggy binary protocol's sessions (one per client connection). */
  readonly binary: BinarySessions;
  /** Bounds Argon2id verifications of both edges (HTTP's app takes this same gate). */
  readonly passwordGate: PasswordGate;
  /** Unbounded; both edges run it under `passwordGate`. Maps root's genesis marker (secrets.ts). */
  readonly verifyPassword: PasswordVerifier;
  /** Latency histograms and counters of this node (registered on its app's /metrics registry). */
  readonly metrics: NodeMetrics;
  private clientListener: ClientListener | null = null;
  private clientListenerAddress: AddressInfo | null = null;
  /** What this replica advertises (advertise()); null until its listeners are bound. */
  private advertisedOwn: Advertisement | null = null;
  /** The last u32 client id handed out (Iggy lists clients by u32 ids; 0 is never used). */
  private clientIdLast = 0;
  private readonly logger: PinoLogger;
  private readonly disk: FsDisk;
  /**
   * State chunk frames of a transfer this replica receives, reused: the bus decodes a chunk into
   * one, the storage driver gives it back once the chunk is written. The core never has more
   * chunks requested and unwritten than STATE_CHUNKS_UNWRITTEN_MAX, so that many cover a fetch.
   */
  private readonly framePool = new FramePool(HEADER_SIZE + STATE_CHUNK_SIZE_MAX, STATE_CHUNKS_UNWRITTEN_MAX);
  /**
   * Chunks this replica serves from its snapshot file, reused: the storage reads a chunk into one,
   * the bus gives it back once the socket wrote it. A fresh 256 KiB buffer per chunk cost a
   * serving primary ~47 ms of collection in a 255 ms fetch of 64 MiB (a CPU profile of `bench
   * transfer`). Each offer has at most CHUNK_READS_PER_OFFER_MAX reads queued and twice
   * CHUNK_READ_AHEAD chunks read ahead; a buffer a chunk never gives back is garbage.
   */
  private readonly chunkReadPool = new FramePool(
    STATE_CHUNK_SIZE_MAX,
    CHUNK_READS_PER_OFFER_MAX + 2 * CHUNK_READ_AHEAD,
  );
  private ticker: NodeJS.Timeout | null = null;
  /** Collects the garbage a let-go checkpoint payload leaves, once idle (null: no gc here). */
  private idleCollector: IdleCollector | null = null;
  /** Frees a fetch's socket-read buffers as it goes (null where `--expose-gc` is refused). */
  private fetchCollector: FetchCollector | null = null;
  private closed = false;
  private readonly startedAtMs = Date.now();

  /** Reads recovery answered with bytes read ahead (`prefetchFile`): 1 when `snapshot.bin` was. */
  get prefetchedReads(): number {
    return this.disk.prefetchedUsed;
  }

  static async create(options: ReplicaNodeOptions): Promise<ReplicaNode> {
    const cluster = clusterIdOf(options.config.clusterName);
    // A random salt, in memory only: the state stores GENESIS_PASSWORD_MARKER for root instead.
    const genesisHash = await hashPassword(options.rootPassword ?? DEFAULT_ROOT_PASSWORD);
    return new ReplicaNode(options, cluster, createPasswordVerifier(genesisHash));
  }

  private constructor(
    options: ReplicaNodeOptions,
    cluster: bigint,
    verifyPassword: PasswordVerifier,
  ) {
    const { config } = options;
    this.config = config;
    this.passwordGate = options.passwordGate ?? new PasswordGate(PASSWORD_GATE_DEFAULTS);
    this.logger = options.logger;
    this.replica = config.replicaId;
    this.clusterName = config.clusterName;
    this.cluster = cluster;
    this.kernels = options.kernels ?? loadKernels(config.kernels);
    openDataDir(config.dataDir, this.logger);
    this.disk = new FsDisk(config.dataDir, { create: true, ...(options.prefetched === undefined ? {} : { prefetched: options.prefetched }) });
    const coreLogger = this.coreLogger();
    const replicaConfigValue: ReplicaConfig = replicaConfig({
      cluster,
      replica: config.replicaId,
      replicaCount: config.replicas.length,
      journalSlots: config.journalSlots,
      prepareQueueDepth: config.prepareQueueDepth,
      prepareBatchMax: config.prepareBatchMax,
      clientsTableMax: config.clientsTableMax,
      sessionsPerUserMax: config.sessionsPerUserMax,
      timeouts: nodeTimeouts(config),
    });
    const recovered = recover(this.disk, this.kernels, {
      cluster,
      replica: config.replicaId,
      replicaCount: config.replicas.length,
      journalSlots: config.journalSlots,
      logger: coreLogger,
    });
    // Whatever recovery did not take (a file it did not read, or one that changed) is let go.
    this.disk.dropPrefetched();
    // Checkpoints are encoded on a worker thread with the same kernel implementation.
    const checkpointEncoder = workerCheckpointEncoder(this.kernels.name);
    // A range of two chunks (an unaligned request) is larger than the pool's buffers.
    const chunkBuffer = (len: number): Uint8Array =>
      len <= this.chunkReadPool.frameSizeMax ? this.chunkReadPool.take(len) : new Uint8Array(len);
    this.storage = new StorageDriver({ wal: recovered.wal, superblock: recovered.superblock, snapshotFile: recovered.snapshotFile, chunkBuffer }, { checkpointEncoder });
    this.metrics = new NodeMetrics(() => this.core, {
      framesDropped: () => this.framesDropped(),
      httpSessionEvictions: () => this.sessions.evictions,
      httpSessions: () => this.sessions.counts(),
      tcpEvictions: () => this.binary.counters.evictionsSent,
      idleCollections: () => this.idleCollector?.collections ?? 0,
      fetchCollections: () => this.fetchCollector?.collections ?? 0,
      tcpBuffers: () => {
        const stats = this.clientListener?.stats();
        return stats === undefined ? null : { used: stats.buffersUsed, refusals: stats.budgetRefusals };
      },
    });
    this.storage.onFsync = (seconds) => this.metrics.observeFsync(seconds);
    // A chunk's frame goes back to the pool once the chunk is in the transfer file.
    this.storage.onTransferWritten = (bytes) => this.framePool.release(bytes);
    this.verifyPassword = verifyPassword;
    this.state = new MetadataStateMachine({
      rootUsername: DEFAULT_ROOT_USERNAME,
      rootPasswordHash: GENESIS_PASSWORD_MARKER,
    });
    this.sessions = new ClientSessions(
      {
        cluster,
        kernels: this.kernels,
        submit: (header, body) => {
          this.core.onRequest(header, body);
          this.observeCore();
        },
        canAccept: () => this.core.canAcceptRequests(),
        allocateClientId: () => this.allocateClientId(),
        startRequest: () => this.metrics.startRequest('http'),
      },
      {
        sessionsMax: Math.max(1, Math.floor(config.clientsTableMax / 2)),
        sessionsPerCredentialMax: config.httpSessionsPerCredential,
        // Half of a user's share of the table, as HTTP takes half of the table: a user's HTTP
        // sessions cannot push out its own binary ones either.
        sessionsPerUserMax: Math.max(1, Math.floor(config.sessionsPerUserMax / 2)),
      },
    );
    this.bus = new ReplicaBus({
      replica: config.replicaId,
      addresses: config.replicas,
      cluster,
      kernels: this.kernels,
      clusterSecret: options.clusterSecret,
      tls: config.tls === null ? undefined : (replicaMeshTls(config.tls.material) ?? undefined),
      onMessage: (frame) => this.guard(() => this.onBusFrame(frame)),
      onDisconnect: (replica) =>
        this.guard(() => {
          this.core.onPeerDisconnected(replica);
          this.partitions.onPeerDisconnected(replica);
        }),
      logger: coreLogger,
      framePool: this.framePool,
      sentBodyPool: this.chunkReadPool,
    });
    this.core = new Replica({
      config: replicaConfigValue,
      stateMachine: this.state,
      boot: toReplicaBootState(recovered),
      rejoin: config.rejoin,
      env: {
        kernels: this.kernels,
        // Checkpoint duration and size are measured from the requests that make a checkpoint.
        storage: {
          submit: (id, request) => {
            this.metrics.storageSubmitted(id, request);
            this.storage.submit(id, request);
          },
        },
        // Nonces and the boot incarnation: 128 bits of real entropy, never the clock.
        prng: Prng.fromSeedBytes(randomBytes(PRNG_SEED_BYTES)),
        clock: { realtimeUs: () => Date.now() * 1000 },
        logger: coreLogger,
        bus: {
          sendToReplica: (target, frame) => this.bus.sendToReplica(target, frame),
          sendToReplicaParts: (target, header, body) => this.bus.sendToReplicaParts(target, header, body),
          sendToClient: (client, frame) => this.routeClientFrame(client, frame),
        },
      },
    });
    this.storage.onDone = (id, result) =>
      this.guard(() => {
        this.metrics.storageDone(id, result);
        this.core.onStorageDone(id, result);
      });
    this.partitions = new PartitionGroups({
      dataDir: config.dataDir,
      kernels: this.kernels,
      config: { ...replicaConfigValue, journalSlots: replicaConfigValue.journalSlots },
      rejoin: config.rejoin,
      logger: (index) => this.groupLogger(index),
      randomBytes: (count) => randomBytes(count),
      sendToReplica: (target, frame) => this.bus.sendToReplica(target, frame),
      sendToReplicaParts: (target, header, body) => this.bus.sendToReplicaParts(target, header, body),
      sendToClient: (client, frame) => this.routeClientFrame(client, frame),
      guard: (fn) => this.guard(fn),
      segmentSizeBytes: config.segmentSize,
      onPartitionChanged: (group, namespace) => this.syncPartitionStats(group, namespace),
    });
    this.maintenance = new PartitionMaintenance({
      state: this.state,
      partitions: this.partitions,
      edge: () => this.binary.edge,
      caller: this.maintenanceCaller,
      metadataCommit: () => this.core.commitMin,
      log: (event, fields) => this.logger.info(fields, event),
      nowUs: () => Date.now() * 1000,
    });
    // The statistics registry is not persisted: read every partition's once at boot.
    this.syncAllPartitionStatsIfMetadataMoved();
    this.binary = new BinarySessions({
      cluster,
      replica: config.replicaId,
      clusterName: config.clusterName,
      kernels: this.kernels,
      state: this.state,
      core: this.sessionCore(),
      serverVersion: SERVER_VERSION_DEFAULT,
      startRequest: () => this.metrics.startRequest('tcp'),
      sendToReplica: (target, frame) => this.bus.sendToReplica(target, frame),
      clusterNodes: () => this.binaryClusterNodes(),
      stats: () => this.binaryStats(),
      allocateClientId: () => this.allocateClientId(),
      log: (level, event, fields) => this.logger[level]({ component: 'tcp', ...fields }, event),
      verifyPassword: async (passwordHash, password) => {
        try {
          return await this.passwordGate.run(() => this.verifyPassword(passwordHash, password));
        } catch (error) {
          if (error instanceof HttpError && error.statusCode === 429) return 'busy';
          throw error;
        }
      },
      admitLogin: (userId) => this.passwordGate.admitLogin(userId),
      ...(options.binaryDisconnectGraceMs === undefined ? {} : { disconnectLogoutGraceMs: options.binaryDisconnectGraceMs }),
    });
    this.binary.edge = new PartitionEdge({
      kernels: this.kernels,
      state: this.state,
      partitions: this.partitions,
      submit: (connection, input, body, target) => this.binary.submit(connection, input, body, target),
    });
    this.dataPlane = httpDataPlane(this.binary.edge, randomClientId);
  }

  /** The core as the binary sessions see it: a local submission is observed like every core call. */
  private sessionCore(): SessionCore {
    const core = this.core;
    return {
      get view() {
        return core.view;
      },
      get status() {
        return core.status;
      },
      get commitMax() {
        return core.commitMax;
      },
      get clientTable() {
        return core.clientTable;
      },
      isPrimary: () => core.isPrimary(),
      primaryIndex: () => core.primaryIndex(),
      canAcceptRequests: () => core.canAcceptRequests(),
      hasAdmissionRoom: () => core.hasAdmissionRoom(),
      onRequest: (header, body) => {
        core.onRequest(header, body);
        this.observeCore();
      },
    };
  }

  /** Metrics that follow the core's state: view changes, prepare -> commit, transfers. */
  private observeCore(): void {
    if (!this.closed) this.metrics.observeCore(this.core);
  }

  /** Outbound replica frames the bus dropped, by reason (vsr_replica_frames_dropped_total). */
  private framesDropped(): Record<string, number> {
    const stats = this.bus.stats();
    let queueFull = 0;
    let queueBytes = 0;
    for (const peer of stats.peers) {
      queueFull += peer.droppedQueueFull;
      queueBytes += peer.droppedQueueBytes;
    }
    return { queue_full: queueFull, queue_bytes: queueBytes, self: stats.droppedSelf, closed: stats.droppedClosed };
  }

  /**
   * A frame from a peer replica. Replies and evictions are the primary relaying the answer to a
   * request this replica forwarded for one of its binary clients; a Request is such a forward,
   * whose reply must go back to the replica stamped in it.
   */
  private onBusFrame(frame: DecodedFrame): void {
    const header = frame.header;
    if (header.command === Command.reply || header.command === Command.eviction) {
      this.binary.deliver(header.client, frame.frame);
      return;
    }
    if (header.command === Command.request && header.replica !== this.replica) this.binary.forwarded.note(header.client, header.replica);
    const group = 'group' in header ? this.partitions.byGroupId(header.group) : null;
    if (group !== null) this.partitions.onMessage(group, frame);
    else this.core.onMessage(frame);
  }

  /** A reply or eviction from the core: a binary client here, one forwarded here, or HTTP's. */
  private routeClientFrame(client: bigint, frame: Uint8Array): void {
    if (this.binary.deliver(client, frame)) return;
    const replica = this.binary.forwarded.routeOf(client);
    if (replica !== undefined && replica !== this.replica) {
      this.bus.sendToReplica(replica, frame);
      return;
    }
    this.sessions.onClientFrame(client, frame);
  }

  private allocateClientId(): number {
    this.clientIdLast = (this.clientIdLast % 0xffff_ffff) + 1;
    return this.clientIdLast;
  }

  /**
   * Tells the peers where this replica serves clients: the bound addresses, or the
   * `--advertise-http` / `--advertise-tcp` overrides. Called once both listeners are bound.
   */
  advertise(bound: Advertisement): void {
    const own = { http: this.config.advertiseHttp ?? bound.http, tcp: this.config.advertiseTcp ?? bound.tcp };
    this.advertisedOwn = own;
    this.bus.setAdvertisement(own);
    this.logger.info({ http: own.http, tcp: own.tcp }, 'advertising client addresses to peers');
  }

  /** A replica's HTTP address: `--http-peers` if given, else our own, else what the peer advertised. */
  private httpAddressOf(replica: number): string | null {
    const override = this.config.httpPeers?.[replica];
    if (override !== undefined) return override;
    if (replica === this.replica) return this.advertisedOwn?.http ?? this.config.http;
    return this.bus.advertised(replica)?.http ?? null;
  }

  /** A replica's binary client address, likewise (`--tcp-peers` overrides). */
  private tcpAddressOf(replica: number): string | null {
    const override = this.config.tcpPeers?.[replica];
    if (override !== undefined) return override;
    if (replica === this.replica) {
      if (this.advertisedOwn?.tcp != null) return this.advertisedOwn.tcp;
      // Our own entry names the port actually bound (a configured port 0 means "any").
      const bound = this.clientListenerAddress;
      return bound === null ? this.config.tcp : formatHostPort({ host: parseHostPort(this.config.tcp).host, port: bound.port });
    }
    return this.bus.advertised(replica)?.tcp ?? null;
  }

  /** Binds the Iggy binary client port (`--tcp`); TLS when a certificate and key are set. */
  async startClientListener(overrides: Pick<ClientListenerOptions, 'timers'> = {}): Promise<AddressInfo> {
    const { host, port } = parseHostPort(this.config.tcp);
    const tls =
      this.config.tcpTlsCert === null || this.config.tcpTlsKey === null
        ? null
        : { cert: readFileSync(this.config.tcpTlsCert), key: readFileSync(this.config.tcpTlsKey) };
    this.clientListener = new ClientListener({
      host,
      port,
      connectionsMax: this.config.tcpConnectionsMax,
      buffersSizeMax: this.config.tcpBuffersSizeMax,
      tls,
      cluster: this.cluster,
      open: (io) => this.binary.open(io),
      log: (level, event, fields) => this.logger[level]({ component: 'tcp', ...fields }, event),
      ...overrides,
    });
    this.clientListenerAddress = await this.clientListener.listen();
    return this.clientListenerAddress;
  }

  get clientListenerStats(): ReturnType<ClientListener['stats']> | null {
    return this.clientListener?.stats() ?? null;
  }

  /** GetClusterMetadata's roster: the replicas whose binary address is known (all with --tcp-peers). */
  private binaryClusterNodes(): ClusterNodeView[] {
    const tcpPeers = this.config.replicas.map((_, index) => this.tcpAddressOf(index));
    const httpPeers = this.config.replicas.map((_, index) => this.httpAddressOf(index));
    const stats = this.bus.stats();
    const leader = this.core.status === 'normal' ? this.core.primaryIndex() : -1;
    const nodes: ClusterNodeView[] = [];
    tcpPeers.forEach((address, replica) => {
      if (address === null) return;
      const tcp = parseHostPort(address);
      const http = httpPeers[replica];
      const connected = replica === this.replica || (stats.peers.find((peer) => peer.replica === replica)?.connected ?? false);
      nodes.push({
        name: `${this.clusterName}-${replica}`,
        ip: tcp.host,
        tcpPort: tcp.port,
        quicPort: 0,
        httpPort: http === null || http === undefined ? 0 : parseHostPort(http).port,
        websocketPort: 0,
        role: replica === leader ? ClusterNodeRole.leader : ClusterNodeRole.follower,
        status: connected ? ClusterNodeStatus.healthy : ClusterNodeStatus.unreachable,
      });
    });
    return nodes;
  }

  private binaryStats(): Uint8Array {
    const system = processSystemInfo();
    const metadata = this.state.queries.statsView();
    return encodeStats({
      processId: system.processId,
      cpuUsage: system.cpuUsagePercent,
      totalCpuUsage: system.totalCpuUsagePercent,
      memoryUsage: system.memoryUsageBytes,
      totalMemory: system.totalMemoryBytes,
      availableMemory: system.availableMemoryBytes,
      runTimeUs: system.runTimeUs,
      startTimeUs: system.startTimeUs,
      readBytes: system.readBytes,
      writtenBytes: system.writtenBytes,
      ...metadata,
      // The connections GetClients lists (Iggy counts `list_all_clients`), not HTTP sessions.
      clientsCount: this.binary.connectionCount,
      hostname: system.hostname,
      osName: system.osName,
      osVersion: system.osVersion,
      kernelVersion: system.kernelVersion,
      serverVersion: SERVER_VERSION_DEFAULT,
      serverSemver: null,
      threadsCount: system.threadsCount,
      freeDiskSpace: system.freeDiskSpaceBytes,
      totalDiskSpace: system.totalDiskSpaceBytes,
    });
  }

  /** Binds the replication listener and starts the clock. */
  async start(): Promise<void> {
    await this.bus.listen();
    const gc = fullCollection();
    if (gc !== null) {
      this.fetchCollector = new FetchCollector(minorCollection(gc), FETCH_COLLECT_BYTES);
      this.idleCollector = new IdleCollector(() => {
        const startedMs = performance.now();
        gc();
        const ms = Math.round((performance.now() - startedMs) * 10) / 10;
        this.logger.debug({ ms }, 'idle: collected the garbage a checkpoint payload left');
      }, this.collectorView());
    }
    let ticks = 0;
    const retentionTicks = Math.max(1, Math.round(this.config.retentionIntervalMs / TICK_MS));
    this.ticker = setInterval(
      () =>
        this.guard(() => {
          this.core.tick();
          this.partitions.tick();
          ticks += 1;
          // Idle HTTP sessions are looked for once a second (a pass over every credential's pool).
          if (ticks % SESSION_EXPIRY_TICKS === 0) {
            this.sessions.expireIdle();
            this.syncAllPartitionStatsIfMetadataMoved();
            this.maintenance.dropDeadPartitions();
          }
          if (ticks % retentionTicks === 0) this.maintenance.applyRetention();
          if (ticks % IDLE_COLLECT_TICKS === 0) this.idleCollector?.check(this.collectorView());
          this.fetchCollector?.check(this.core.stateTransferProgress());
        }),
      TICK_MS,
    );
    this.logger.info(
      { view: this.core.view, op: this.core.op, commit_min: this.core.commitMin, kernels: this.kernels.build },
      'replica started',
    );
  }

  /**
   * What the idle collector watches, and the commit number. Each counter marks payload-sized
   * garbage: a payload let go, replaced by a checkpoint's or dropped after an install, or a whole
   * snapshot read to check it at rest, to build an offer or to serve one.
   */
  private collectorView(): IdleCollectorView {
    const counters = this.core.counters;
    const released =
      counters.payloadsReleased +
      counters.checkpoints +
      counters.stateTransfersInstalled +
      counters.offersServed +
      counters.offerSourceChecks +
      counters.offerSourceReads;
    // An offer stays held until 3 repair timeouts after its final chunk: a receiver repairs the
    // ops above the checkpoint meanwhile, from us among others.
    const busy = this.core.offersHeld > 0 || this.core.stateTransfer.transferring;
    return { released, commit: this.core.commitMin, busy };
  }

  /**
   * Graceful stop: no new ticks or messages, finish in-flight storage (everything acknowledged
   * is already durable; this completes what was queued), close sockets and files.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    // A primary hands over first: its StartViewChange lets the backups elect at once instead of
    // after their heartbeat timeout. Bounded: shutdown never waits on the network.
    if (this.guardValue(() => this.core.abdicate())) {
      const deadline = Date.now() + ABDICATE_WAIT_MS;
      while (Date.now() < deadline && !this.core.viewChangeAnnounced) await sleep(5);
      await sleep(20); // let the sockets flush the StartViewChange
    }
    this.closed = true;
    if (this.ticker !== null) clearInterval(this.ticker);
    this.binary.close();
    await this.clientListener?.close();
    this.sessions.close();
    await this.bus.close();
    try {
      this.partitions.close();
      this.storage.close();
    } finally {
      this.disk.close();
    }
  }

  private guardValue(fn: () => boolean): boolean {
    let value = false;
    this.guard(() => {
      value = fn();
    });
    return value;
  }

  /** An assertion failure in the core is fatal: log it and let the process die (fail-stop). */
  private guard(fn: () => void): void {
    if (this.closed) return;
    try {
      fn();
      this.observeCore();
    } catch (error) {
      this.closed = true;
      if (this.ticker !== null) clearInterval(this.ticker);
      if (error instanceof DivergenceFailure) {
        // Not a bug in this process but damage in its data: say what and what to do, and exit.
        this.logger.fatal({ op: error.op, view: this.core?.view, exit_code: EXIT_DIVERGENCE }, error.message);
        setImmediate(() => process.exit(EXIT_DIVERGENCE));
        return;
      }
      this.logger.fatal({ err: error, view: this.core?.view, op: this.core?.op }, 'replica failed; stopping');
      setImmediate(() => {
        throw error;
      });
    }
  }

  /**
   * Reads every partition's statistics again once the metadata moved (a partition created, a
   * restore, a purge zeroed its counters): nothing when idle.
   */
  private syncAllPartitionStatsIfMetadataMoved(): void {
    const commit = this.core?.commitMin ?? -1;
    if (commit === this.statsSyncedAtCommit) return;
    this.statsSyncedAtCommit = commit;
    for (const group of this.partitions.groups) {
      for (const namespace of group.machine.namespaces()) this.syncPartitionStats(group, namespace);
    }
  }

  /**
   * Sets the metadata statistics of a partition (messages, bytes, segments, current offset) to
   * what its group's committed log holds, when the partition's incarnation is the live one.
   */
  private syncPartitionStats(group: PartitionGroup, namespace: number): void {
    const resolved = metadataIncarnation(this.state, namespace);
    if (resolved === null || resolved.live === null) return;
    const { streamId, topicId, partitionId, live } = resolved;
    const view = group.machine.partition({ namespace, incarnation: live });
    const stats = this.state.partitionStats(streamId, topicId, partitionId);
    if (view === null || stats === null) return;
    stats.add({
      messagesCount: view.messagesCount - stats.messagesCount,
      sizeBytes: view.sizeBytes - stats.sizeBytes,
      segmentsCount: view.segmentsCount - stats.segmentsCount,
    });
    stats.setCurrentOffset(view.nextOffset === 0 ? 0 : view.nextOffset - 1);
  }

  /** The log of partition group `index`'s core: its lines name the group and its view. */
  private groupLogger(index: number): Logger {
    const logger = this.logger;
    return {
      get debugEnabled(): boolean {
        return logger.isLevelEnabled('debug');
      },
      log: (level: CoreLogLevel, event: string, fields?: Readonly<Record<string, unknown>>) => {
        if (!logger.isLevelEnabled(level)) return;
        const core = this.partitions?.groups[index]?.core;
        logger[level]({ ...toJson(fields), partition_group: index, view: core?.view, op: core?.op }, event);
      },
    };
  }

  private coreLogger(): Logger {
    const logger = this.logger;
    return {
      // The core builds a debug record only when this says it is wanted.
      get debugEnabled(): boolean {
        return logger.isLevelEnabled('debug');
      },
      log: (level: CoreLogLevel, event: string, fields?: Readonly<Record<string, unknown>>) => {
        // Build nothing for a level that is off (a bench runs at warn).
        if (!this.logger.isLevelEnabled(level)) return;
        const bindings = {
          ...toJson(fields),
          view: this.core?.view,
          op: this.core?.op,
        };
        this.logger[level](bindings, event);
      },
    };
  }

  // ---------------------------------------------------------------- NodeApi

  view(): number {
    return this.core.view;
  }

  isPrimary(): boolean {
    return this.core.status === 'normal' && this.core.isPrimary();
  }

  primaryHttpAddress(): string | null {
    if (this.core.status !== 'normal') return null;
    return this.httpAddressOf(this.core.primaryIndex());
  }

  primaryUnavailableReason(): string {
    const core = this.core;
    if (core.status !== 'normal') {
      return `replica ${this.replica} is in status ${core.status} (view ${core.view}): there is no primary until the view change completes`;
    }
    const primary = core.primaryIndex();
    if (this.httpAddressOf(primary) !== null) return `the primary is replica ${primary} at ${this.httpAddressOf(primary)!}`;
    if (!this.bus.connected(primary)) {
      return (
        `the primary, replica ${primary}, is not connected to replica ${this.replica} (its replication address ${this.config.replicas[primary] ?? '?'}), ` +
        'and its HTTP address is learned from it over that connection; check that it runs and is reachable from here, or set --http-peers'
      );
    }
    return (
      `the primary, replica ${primary}, is connected but has not advertised an HTTP address ` +
      '(a replica of an earlier version, or its advertisement was refused: see the replica bus log); set --http-peers'
    );
  }

  ready(): boolean {
    return this.core.readyForReads;
  }

  status(): ClusterStatus {
    const core = this.core;
    const progress = core.stateTransferProgress();
    const elapsedMs = (this.ticksNow() - progress.startedAtTick) * TICK_MS;
    const rate = elapsedMs > 0 ? progress.bytesDone / elapsedMs : 0;
    const stats = this.bus.stats();
    return {
      replica: this.replica,
      replicaCount: this.config.replicas.length,
      view: core.view,
      status: core.status,
      primary: core.primaryIndex(),
      op: core.op,
      commitMin: core.commitMin,
      commitMax: core.commitMax,
      checkpointOp: core.checkpointOp,
      checkpointId: core.checkpointChecksum.toString(16).padStart(16, '0'),
      // From the core's own timers, so the status shows what runs, not what was asked for.
      heartbeatMs: core.config.timeouts.commitMessage * TICK_MS,
      electionTimeoutMs: core.config.timeouts.normalHeartbeat * TICK_MS,
      stateTransfer:
        progress.stage === 'idle'
          ? null
          : {
              stage: progress.stage,
              peer: progress.peer,
              artifact: progress.artifact,
              bytesDone: progress.bytesDone,
              bytesTotal: progress.bytesTotal,
              startedAtMs: Date.now() - elapsedMs,
              etaMs: rate > 0 ? Math.round((progress.bytesTotal - progress.bytesDone) / rate) : null,
            },
      replicas: this.config.replicas.map((address, replica) => ({
        replica,
        address,
        connected: replica === this.replica ? true : (stats.peers.find((peer) => peer.replica === replica)?.connected ?? false),
        commitMax: replica === this.replica ? core.commitMax : core.peerCommits[replica] ?? null,
        lagOps: replica === this.replica ? core.commitMax - core.commitMin : peerLag(core.commitMax, core.peerCommits[replica] ?? null),
      })),
    };
  }

  private ticksNow(): number {
    return Math.floor((Date.now() - this.startedAtMs) / TICK_MS);
  }

  nodes(): readonly ClusterNode[] {
    const peers = this.config.replicas.map((_, index) => this.httpAddressOf(index) ?? '');
    const stats = this.bus.stats();
    const tcpPorts = this.binaryClusterNodes();
    return this.config.replicas.map((_, replica) => ({
      replica,
      name: `${this.clusterName}-${replica}`,
      http: peers[replica] ?? '',
      tcpPort: tcpPorts.find((node) => node.name === `${this.clusterName}-${replica}`)?.tcpPort ?? 0,
      role: replica === this.core.primaryIndex() ? 'leader' : 'follower',
      status:
        replica === this.replica || (stats.peers.find((peer) => peer.replica === replica)?.connected ?? false)
          ? 'healthy'
          : 'unreachable',
    }));
  }

  /**
   * The clients connected to this replica as Iggy lists them: the binary connections, logged in
   * or not, by u32 id. HTTP sessions are not connections and Iggy does not list them, so /clients,
   * GetClients and both edges' `clients_count` agree.
   */
  clients(): readonly ClientSessionInfo[] {
    return this.binary.clients().map((client) => ({
      clientId: client.clientId,
      userId: client.userId === CLIENT_NO_USER_ID ? null : client.userId,
      session: this.binary.sessionOf(client.clientId),
      consumerGroups: client.consumerGroups,
      address: client.address,
      transport: clientTransportName(client.transport),
    }));
  }

  replicaTransport(): ReplicaTransportCounters {
    const stats = this.bus.stats();
    const authFailures: Record<string, number> = { ...stats.inbound.authFailures };
    const rejectedFrames: Record<string, number> = { ...stats.inbound.rejected };
    for (const peer of stats.peers) {
      for (const [reason, count] of Object.entries(peer.authFailures)) authFailures[reason] = (authFailures[reason] ?? 0) + count;
      for (const [reason, count] of Object.entries(peer.rejected)) rejectedFrames[reason] = (rejectedFrames[reason] ?? 0) + count;
    }
    return { authFailures, rejectedFrames };
  }

  registerMetrics(registry: Registry): void {
    this.metrics.register(registry);
  }

  async write(session: SessionKey, userId: number, operation: number, body: Uint8Array): Promise<WriteOutcome> {
    if (!this.isPrimary()) return { kind: 'not_primary', primaryHttp: this.primaryHttpAddress() };
    const deletedUser = operation === MetadataOperation.deleteUser ? this.state.deleteUserTarget(body) : null;
    const outcome = await this.sessions.write(session, userId, operation, body);
    // The deleted user's id may be reused: its sessions must not act as the next owner.
    if (outcome.kind === 'committed' && deletedUser !== null) this.sessions.dropUser(deletedUser);
    return outcome;
  }

  async logout(session: SessionKey): Promise<void> {
    await this.sessions.logout(session);
  }
}

function toJson(fields: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> {
  if (fields === undefined) return {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) out[key] = typeof value === 'bigint' ? value.toString(16) : value;
  return out;
}

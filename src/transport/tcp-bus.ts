/**
 * The replica-to-replica message bus over TCP: the production `MessageBus.sendToReplica` (the
 * simulator's `NetworkSim` is the other implementation; the replica cannot tell them apart).
 *
 * Topology: one connection per replica pair, dialled by the lower index (`dials`) and accepted by
 * the higher one, so two replicas never race to dial each other and there is nothing to
 * tie-break. The acceptor refuses a Hello from a higher index. If a second connection from the
 * same peer authenticates (the peer restarted before our side noticed the old socket died), the
 * newer one wins and the older is closed.
 *
 * Every connection starts with the replica-auth handshake (`replica-auth.ts`), always in mode psk:
 * the bus cannot be built without the cluster secret, so there is no unauthenticated replica port.
 * Frames flow only after it, and each frame is delivered with `fromReplica` = the authenticated
 * peer (`connection.ts` drops frames whose sender field names another replica). Every failed
 * handshake is counted by reason (`stats()`, exported as a metric) and logged with the remote
 * address, at most AUTH_FAILURE_LOGS_PER_WINDOW_MAX lines per window so a flood of attempts
 * cannot flood the log as well (the counters keep counting).
 *
 * Sending never blocks or throws on network conditions: each peer has a bounded queue (frames
 * and bytes) that outlives its connections; a full queue drops its oldest frame, counted. Queued
 * frames are flushed in one corked batch per event-loop turn (setImmediate), so everything sent
 * to a peer while the loop handles one round of IO (every request read in that round, every
 * handler) leaves in one writev: under load one syscall carries many prepares or PrepareOks.
 *
 * Inbound connections are admitted before anything is read from them (admission.ts): bounded
 * per source and in all, a random unverified one making room for a newcomer; a connection
 * whose Hello verifies (its sender holds the key) moves to a reserve of the replica it claims,
 * which nothing an outsider sends can take. An unverified connection must present its Hello
 * within `helloTimeoutMs`, the rest of the handshake within `handshakeTimeoutMs`.
 *
 * With mesh TLS (`tls`), the listener and every dial run mutual TLS first (src/node/tls.ts builds
 * the options: each side's certificate is verified against the cluster's CA), and the PSK
 * handshake then runs inside the TLS stream. The listener is plain TCP: a socket is admitted
 * first and only then handed to a (never listening) TLS server, which runs and verifies the TLS
 * handshake within `helloTimeoutMs`; so sockets in their TLS handshake hold admission slots like
 * the rest. A TLS handshake that fails is an auth failure `tls_failed`, counted and logged like
 * the others.
 *
 * Reconnects use jittered exponential backoff with a cap (`backoff.ts`); a link that
 * authenticates resets it. After `close()` nothing fires: no timer, no callback, no dial.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Server as TlsServer, connect as tlsConnect, type ConnectionOptions, type TLSSocket, type TlsOptions } from 'node:tls';
import { HEADER_SIZE, MESSAGE_SIZE_MAX, REPLICAS_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { buildFrame, type ChecksumKernels } from '../vsr/frame.js';
import { readSize } from '../vsr/header.js';
import type { Logger, MessageBus } from '../vsr/io.js';
import {
  ADMISSION_GRACE_MS_DEFAULT,
  CLAIMS_PER_PEER_MAX,
  INBOUND_PER_SOURCE_MAX_DEFAULT,
  InboundAdmission,
  sourceOf,
  type AdmissionBound,
} from './admission.js';
import { BACKOFF_DEFAULTS, assertBackoffOptions, backoffDelayMs, type BackoffOptions } from './backoff.js';
import { Connection, rejectionCounters, type ConnectionEvents, type RejectionReason } from './connection.js';
import type { DecodedFrame } from './frame-decoder.js';
import type { FramePool } from './frame-pool.js';
import {
  AcceptorHandshake,
  InitiatorHandshake,
  announceHello,
  authFailureCounters,
  deriveAuthKey,
  dials,
  type AuthFailure,
} from './replica-auth.js';
import { SendQueue, type OutboundFrame } from './send-queue.js';
import {
  ADVERTISEMENT_VERSION,
  advertisementRefusalCounters,
  decodeAdvertisement,
  encodeAdvertisement,
  resolveAdvertisedHost,
  type Advertisement,
  type AdvertisementRefusal,
} from './advertisement.js';
import { Command } from '../constants.js';
import { formatHostPort, parseHostPort, type HostPort } from './address.js';

export { TransportRejection, type RejectionReason } from './connection.js';
export { AuthFailure } from './replica-auth.js';
export { parseHostPort, type HostPort } from './address.js';

/** Frames queued per peer by default. */
export const PEER_QUEUE_FRAME_COUNT_DEFAULT = 256;
/** Bytes queued per peer by default (32 full-size frames). */
export const PEER_QUEUE_SIZE_DEFAULT = 32 * MESSAGE_SIZE_MAX;
/** From a verified Hello (or, dialling, from the socket's creation) to an authenticated link. */
export const HANDSHAKE_TIMEOUT_MS_DEFAULT = 2_000;
/** From accept to a verified Hello (a TLS handshake first, with mesh TLS). */
export const HELLO_TIMEOUT_MS_DEFAULT = 1_000;
/** The buffer a dialed plain-TCP connection reads into (Node's own per-read size). */
const READ_BUFFER_BYTES = 64 * 1024;
/**
 * Inbound connections without a verified Hello. Bounds what unauthenticated sockets can hold
 * (256 staged bytes, a timer, a TLS session); admission.ts decides who makes room.
 */
export const INBOUND_HANDSHAKES_MAX_DEFAULT = 8 * REPLICAS_MAX;
/** Handshake failures logged per window; the rest are counted and summarized in one line. */
export const AUTH_FAILURE_LOGS_PER_WINDOW_MAX = 20;
export const AUTH_FAILURE_LOG_WINDOW_MS = 10_000;

export interface ReplicaBusOptions {
  readonly replica: number;
  /** `host:port` of every replica's replication listener, in replica order. Port 0 for a peer
   * means "not known yet" (see `setPeerAddress`); for this replica, an ephemeral port. */
  readonly addresses: readonly string[];
  readonly cluster: bigint;
  readonly kernels: ChecksumKernels;
  /** The cluster secret: only replicas holding it can connect. Required: no unauthenticated mode. */
  readonly clusterSecret: Uint8Array;
  /** Every frame that passed every check, with the authenticated sender. */
  readonly onMessage: (frame: DecodedFrame, fromReplica: number) => void;
  /** The authenticated connection to `replica` closed (evidence for the failure detector). */
  readonly onDisconnect?: ((replica: number) => void) | undefined;
  readonly logger?: Logger | undefined;
  /** Frames queued per peer before the oldest is dropped. */
  readonly queueCapacity?: number | undefined;
  /** Bytes queued per peer before the oldest frame is dropped (>= MESSAGE_SIZE_MAX). */
  readonly queueSizeMax?: number | undefined;
  readonly reconnect?: Partial<BackoffOptions> | undefined;
  readonly handshakeTimeoutMs?: number | undefined;
  readonly helloTimeoutMs?: number | undefined;
  /** Inbound connections without a verified Hello, in all and per source (admission.ts). */
  readonly inboundHandshakesMax?: number | undefined;
  readonly inboundPerSourceMax?: number | undefined;
  /** How long an admitted connection keeps its slot against newcomers (admission.ts). */
  readonly admissionGraceMs?: number | undefined;
  /** Jitter source in [0, 1); tests pass a seeded one. */
  readonly random?: (() => number) | undefined;
  /** Mutual TLS on the replica port (src/node/tls.ts `replicaMeshTls`); plain TCP when absent. */
  readonly tls?: { readonly server: TlsOptions; readonly client: ConnectionOptions } | undefined;
  /**
   * Inbound state chunk frames are taken from this pool; whoever ends their use gives them back
   * (the node layer: once a chunk is written). Without one, every frame is allocated.
   */
  readonly framePool?: FramePool | undefined;
  /**
   * The bodies of frames sent in parts (served state chunks) are given back to this pool once the
   * socket wrote them; buffers it did not hand out (views of a held payload) are ignored.
   */
  readonly sentBodyPool?: FramePool | undefined;
}

export interface PeerStats {
  readonly replica: number;
  readonly address: string;
  /** This replica dials the peer (lower index) rather than accepting from it. */
  readonly outbound: boolean;
  /** An authenticated connection is open. */
  readonly connected: boolean;
  /** Frames and bytes waiting in the send queue. */
  readonly queued: number;
  readonly queuedBytes: number;
  /** Frames handed to the socket (a connection that then fails may lose some). */
  readonly sent: number;
  /** Frames delivered to `onMessage`. */
  readonly received: number;
  /** Socket reads of the current connection, and those into its own buffer (dialed, plain TCP). */
  readonly reads: number;
  readonly readsIntoOwnBuffer: number;
  /** Frames dropped from the send queue, in all and by bound. */
  readonly dropped: number;
  readonly droppedQueueFull: number;
  readonly droppedQueueBytes: number;
  readonly dialAttempts: number;
  /** Outbound: announcements that the peer (re)started, each answered by an immediate dial if not connected. */
  readonly announcesHeard: number;
  /** Inbound: announcements of our start sent to the peer (one per `listen()`). */
  readonly announcesSent: number;
  /** Authenticated connections established, and how many of them replaced an earlier one. */
  readonly connects: number;
  readonly reconnects: number;
  /** Inbound frames rejected on connections to/from this peer, by reason (zeros omitted). */
  readonly rejected: Partial<Record<RejectionReason, number>>;
  /** Failed handshakes with this peer, by reason (zeros omitted). */
  readonly authFailures: Partial<Record<AuthFailure, number>>;
  /** The peer's last accepted advertisement (hosts resolved), null until one arrived. */
  readonly advertised: Advertisement | null;
  /** Advertisements from this peer refused, by reason (zeros omitted). */
  readonly advertisementsRefused: Partial<Record<AdvertisementRefusal, number>>;
}

export interface ReplicaBusStats {
  readonly replica: number;
  /** The bound port, or null before `listen()`. */
  readonly port: number | null;
  /** Every other replica, in index order. */
  readonly peers: readonly PeerStats[];
  /** Inbound connections before they authenticate: attributed to no peer (the claim is unproven). */
  readonly inbound: {
    readonly accepted: number;
    readonly handshaking: number;
    /** Of those, the connections whose Hello verified, waiting for the rest of the handshake. */
    readonly claimed: number;
    /** Unverified connections closed to make room for a newcomer, by the bound it reached. */
    readonly evicted: Partial<Record<AdmissionBound, number>>;
    /** Verified claims replaced by a newer claim of the same replica. */
    readonly claimsReplaced: number;
    readonly rejected: Partial<Record<RejectionReason, number>>;
    readonly authFailures: Partial<Record<AuthFailure, number>>;
  };
  /** `sendToReplica` to this replica itself (dropped, as the simulator does). */
  readonly droppedSelf: number;
  /** `sendToReplica` after `close()`. */
  readonly droppedClosed: number;
}

interface Peer {
  readonly replica: number;
  readonly outbound: boolean;
  address: HostPort | null;
  readonly queue: SendQueue;
  /** The authenticated connection, if any. */
  connection: Connection | null;
  /** Outbound only: a dial in progress (TCP connect or handshake). */
  dialing: Connection | null;
  reconnectTimer: NodeJS.Timeout | null;
  /** Failed dials since the last authenticated connection (the backoff exponent). */
  attempt: number;
  flushScheduled: boolean;
  /** Whether the last push dropped frames (log once per episode, not per frame). */
  dropping: boolean;
  sent: number;
  received: number;
  dialAttempts: number;
  announcesHeard: number;
  announcesSent: number;
  connects: number;
  readonly rejected: Record<RejectionReason, number>;
  readonly authFailures: Record<AuthFailure, number>;
  advertised: Advertisement | null;
  readonly advertisementsRefused: Record<AdvertisementRefusal, number>;
}

/**
 * An inbound connection from accept on, as admission counts it: its raw socket until (with mesh
 * TLS) the TLS handshake completes, then its connection.
 */
class InboundSlot {
  readonly raw: Socket;
  connection: Connection | null = null;
  constructor(raw: Socket) {
    this.raw = raw;
  }
}

/** A socket's remote address and port: unique among the live connections to one listener. */
function remoteKey(socket: Socket): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
}

function nonZero<K extends string>(counters: Record<K, number>): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const key of Object.keys(counters) as K[]) if (counters[key] > 0) out[key] = counters[key];
  return out;
}

const NO_LOGGER: Logger = { log: () => {} };

export class ReplicaBus implements Pick<MessageBus, 'sendToReplica' | 'sendToReplicaParts'> {
  readonly replica: number;
  readonly replicaCount: number;
  readonly cluster: bigint;

  readonly #options: ReplicaBusOptions;
  readonly #logger: Logger;
  readonly #backoff: BackoffOptions;
  readonly #handshakeTimeoutMs: number;
  readonly #helloTimeoutMs: number;
  readonly #admission: InboundAdmission<InboundSlot>;
  /** The slot of each inbound connection still in its handshake. */
  readonly #slotOf = new Map<Connection, InboundSlot>();
  /** Mesh TLS: admitted sockets in their TLS handshake, by remote address and port. */
  readonly #tlsPending = new Map<string, InboundSlot>();
  readonly #random: () => number;
  readonly #key: ReturnType<typeof deriveAuthKey>;
  readonly #listenAddress: HostPort;
  /** Indexed by replica; null at our own index. */
  readonly #peers: (Peer | null)[];
  /** Inbound connections still in their handshake. */
  readonly #inboundHandshaking = new Set<Connection>();
  /** Every live connection, so close() can wait for each socket to close. */
  readonly #connections = new Set<Connection>();
  /** Announcement sockets in flight (at most one per lower peer, each closed within the handshake timeout). */
  readonly #announcing = new Set<Socket>();
  readonly #events: ConnectionEvents;
  /** Hands a written body back to `sentBodyPool` (undefined: nothing to hand back). */
  readonly #bodyWritten: ((body: Uint8Array) => void) | undefined;

  #server: Server | null = null;
  /** Settles when `listen()` has bound or failed; close() waits for it so no listener leaks. */
  #listening: Promise<void> | null = null;
  #port: number | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  #inboundAccepted = 0;
  readonly #inboundEvicted: Record<AdmissionBound, number> = { source_max: 0, handshakes_max: 0 };
  #claimsReplaced = 0;
  /** The server side of mesh TLS (it never listens: #onAccept hands it admitted sockets). */
  #tlsServer: TlsServer | null = null;
  readonly #inboundRejected = rejectionCounters();
  readonly #inboundAuthFailures = authFailureCounters();
  #droppedSelf = 0;
  #droppedClosed = 0;
  /** This replica's ReplicaAdvertise frame, sent first on every authenticated connection. */
  #advertisement: Uint8Array | null = null;
  /** Auth-failure log lines in the current window, its start, and the lines it suppressed. */
  #authLogCount = 0;
  #authLogWindowStartMs = 0;
  #authLogSuppressed = 0;

  constructor(options: ReplicaBusOptions) {
    const replicaCount = options.addresses.length;
    assert(replicaCount >= 1 && replicaCount <= REPLICAS_MAX, 'bus: 1..REPLICAS_MAX addresses');
    assert(Number.isInteger(options.replica) && options.replica >= 0 && options.replica < replicaCount, 'bus: replica index within addresses');
    assert(options.cluster >= 0n && options.cluster < 1n << 128n, 'bus: cluster is a u128');
    const addresses = options.addresses.map(parseHostPort);
    this.replica = options.replica;
    this.replicaCount = replicaCount;
    this.cluster = options.cluster;
    this.#options = options;
    const sentBodyPool = options.sentBodyPool;
    this.#bodyWritten = sentBodyPool === undefined ? undefined : (body) => sentBodyPool.release(body);
    this.#logger = options.logger ?? NO_LOGGER;
    this.#backoff = { ...BACKOFF_DEFAULTS, ...options.reconnect };
    assertBackoffOptions(this.#backoff);
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS_DEFAULT;
    assert(this.#handshakeTimeoutMs > 0, 'bus: handshakeTimeoutMs > 0');
    this.#helloTimeoutMs = options.helloTimeoutMs ?? HELLO_TIMEOUT_MS_DEFAULT;
    assert(this.#helloTimeoutMs > 0, 'bus: helloTimeoutMs > 0');
    this.#random = options.random ?? Math.random;
    const unclaimedMax = options.inboundHandshakesMax ?? INBOUND_HANDSHAKES_MAX_DEFAULT;
    this.#admission = new InboundAdmission({
      unclaimedMax,
      perSourceMax: Math.min(unclaimedMax, options.inboundPerSourceMax ?? INBOUND_PER_SOURCE_MAX_DEFAULT),
      claimsPerPeerMax: CLAIMS_PER_PEER_MAX,
      graceMs: options.admissionGraceMs ?? ADMISSION_GRACE_MS_DEFAULT,
    }, this.#random);
    assert(options.clusterSecret instanceof Uint8Array && options.clusterSecret.byteLength > 0, 'bus: a cluster secret (no unauthenticated mode)');
    this.#key = deriveAuthKey(options.clusterSecret, options.cluster);
    const own = addresses[options.replica];
    assert(own !== undefined);
    this.#listenAddress = own;
    const queueCapacity = options.queueCapacity ?? PEER_QUEUE_FRAME_COUNT_DEFAULT;
    const queueSizeMax = options.queueSizeMax ?? PEER_QUEUE_SIZE_DEFAULT;
    this.#peers = addresses.map((address, replica) =>
      replica === options.replica
        ? null
        : {
            replica,
            outbound: dials(options.replica, replica),
            address: address.port === 0 ? null : address,
            queue: new SendQueue(queueCapacity, queueSizeMax),
            connection: null,
            dialing: null,
            reconnectTimer: null,
            attempt: 0,
            flushScheduled: false,
            dropping: false,
            sent: 0,
            received: 0,
            dialAttempts: 0,
            announcesHeard: 0,
            announcesSent: 0,
            connects: 0,
            rejected: rejectionCounters(),
            authFailures: authFailureCounters(),
            advertised: null,
            advertisementsRefused: advertisementRefusalCounters(),
          },
    );
    this.#events = {
      onEstablished: (connection) => this.#onEstablished(connection),
      onFrame: (connection, frame) => this.#onFrame(connection, frame),
      onRejected: (connection, reason) => this.#onRejected(connection, reason),
      onAuthFailure: (connection, failure) => this.#onAuthFailure(connection, failure),
      onAnnounce: (connection, peer) => this.#onAnnounce(connection, peer),
      onClaimed: (connection, peer) => this.#onClaimed(connection, peer),
      onAdvertisement: (connection, frame) => this.#onAdvertisement(connection, frame),
      onWritable: (connection) => this.#onWritable(connection),
      onClose: (connection) => this.#onClose(connection),
    };
  }

  /** Binds this replica's address (only its host) and starts dialling the higher-index peers. */
  async listen(): Promise<{ readonly port: number }> {
    assert(this.#server === null && !this.#closed, 'bus: listen() once, before close()');
    const tls = this.#options.tls;
    // Plain TCP either way: TLS starts on a socket once admission let it in (#onAccept).
    if (tls !== undefined) this.#tlsServer = this.#meshTlsServer(tls.server);
    const server: Server = createServer({ noDelay: true }, (socket) => this.#onAccept(socket));
    this.#server = server;
    this.#listening = new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.#listenAddress.host, port: this.#listenAddress.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    await this.#listening;
    server.on('error', (error) => this.#logger.log('error', 'replica bus: listener error', { error: String(error) }));
    const bound = server.address();
    assert(bound !== null && typeof bound === 'object', 'a TCP server has an address');
    this.#port = bound.port;
    this.#logger.log('info', 'replica bus: listening', { host: this.#listenAddress.host, port: bound.port, tls: tls !== undefined });
    if (this.#closed) return { port: bound.port };
    for (const peer of this.#peers) {
      if (peer === null) continue;
      if (peer.outbound) this.#dial(peer);
      else this.#announce(peer);
    }
    return { port: bound.port };
  }

  /**
   * Sets a peer's address after construction (a peer listening on an ephemeral port, a moved
   * replica). An outbound peer that is not connected is dialled at once.
   */
  setPeerAddress(replica: number, address: string): void {
    const peer = this.#peers[replica];
    assert(peer !== null && peer !== undefined, 'setPeerAddress: another replica of this cluster');
    const parsed = parseHostPort(address);
    assert(parsed.port !== 0, 'setPeerAddress: a concrete port');
    peer.address = parsed;
    if (this.#closed || this.#server === null || !peer.outbound) return;
    if (peer.connection !== null || peer.dialing !== null) return;
    this.#clearReconnect(peer);
    peer.attempt = 0;
    this.#dial(peer);
  }

  /**
   * This replica's client-facing addresses, sent to every connected peer now and to every peer
   * that connects later, ahead of anything queued (advertisement.ts).
   */
  setAdvertisement(advertisement: Advertisement): void {
    const frame = buildFrame(
      this.#options.kernels,
      { command: Command.replicaAdvertise, cluster: this.cluster, view: 0, release: 0, replica: this.replica, version: ADVERTISEMENT_VERSION },
      encodeAdvertisement(advertisement),
    );
    this.#advertisement = frame;
    if (this.#closed) return;
    for (const peer of this.#peers) if (peer?.connection?.open === true) peer.connection.sendNow(frame);
  }

  /** What `replica` last advertised (hosts resolved), or null when nothing usable arrived. */
  advertised(replica: number): Advertisement | null {
    return this.#peers[replica]?.advertised ?? null;
  }

  /**
   * Queues `frame` for `replica`. Never blocks and never throws on network conditions: a down or
   * slow peer fills its bounded queue and the oldest frames are dropped, counted. The frame must
   * not be modified afterwards (it is written by reference). Sending to this replica itself is
   * dropped, counted, as the simulator does. An index outside the cluster or a frame whose size
   * field is not its length is a bug in the caller and asserts (STYLE.md: invariants crash).
   */
  sendToReplica(replica: number, frame: Uint8Array): void {
    assert(frame.byteLength >= HEADER_SIZE && frame.byteLength <= MESSAGE_SIZE_MAX, 'sendToReplica: a whole frame');
    // A frame whose size field lies would make the peer reject it and drop the whole connection.
    assert(readSize(frame) === frame.byteLength, 'sendToReplica: size field equals the frame length');
    this.#enqueue(replica, frame);
  }

  /**
   * `sendToReplica` for a frame given as its sealed header and its body: both are written by
   * reference, back to back in one writev, never joined (a state chunk's body is a view of the
   * served payload, so serving it copies nothing). Neither part may be modified afterwards.
   */
  sendToReplicaParts(replica: number, header: Uint8Array, body: Uint8Array): void {
    assert(header.byteLength === HEADER_SIZE, 'sendToReplicaParts: a 256-byte header');
    assert(HEADER_SIZE + body.byteLength <= MESSAGE_SIZE_MAX, 'sendToReplicaParts: a frame within MESSAGE_SIZE_MAX');
    assert(readSize(header) === HEADER_SIZE + body.byteLength, 'sendToReplicaParts: size field equals header + body');
    this.#enqueue(replica, { header, body });
  }

  #enqueue(replica: number, frame: OutboundFrame): void {
    assert(Number.isInteger(replica) && replica >= 0 && replica < this.replicaCount, 'sendToReplica: replica index');
    if (this.#closed) {
      this.#droppedClosed += 1;
      return;
    }
    const peer = this.#peers[replica];
    if (peer === null || peer === undefined) {
      this.#droppedSelf += 1;
      return;
    }
    const dropped = peer.queue.push(frame);
    if (dropped > 0 && !peer.dropping) {
      peer.dropping = true;
      this.#logger.log('warn', 'replica bus: send queue full, dropping oldest frames', {
        peer: replica,
        connected: peer.connection !== null,
        queued: peer.queue.length,
      });
    }
    this.#scheduleFlush(peer);
  }

  /** Closes the listener and every connection and stops every timer; nothing fires afterwards. */
  close(): Promise<void> {
    if (this.#closing !== null) return this.#closing;
    this.#closed = true;
    for (const peer of this.#peers) {
      if (peer === null) continue;
      this.#clearReconnect(peer);
      peer.queue.clear();
    }
    const sockets = [...this.#connections].map((connection) => {
      connection.destroy();
      return connection.closed;
    });
    for (const socket of this.#announcing) socket.destroy();
    for (const slot of this.#tlsPending.values()) slot.raw.destroy();
    this.#tlsPending.clear();
    this.#announcing.clear();
    const server = this.#server;
    const listening = this.#listening ?? Promise.resolve();
    const listener =
      server === null
        ? Promise.resolve()
        : listening.then(
            () => new Promise<void>((resolve) => server.close(() => resolve())),
            // listen() failed: nothing is bound, and listen() reports the error itself.
            () => undefined,
          );
    this.#closing = Promise.all([...sockets, listener])
      // The listener's close callback runs before libuv has released its handle (that happens in
      // the loop's close phase); two check-phase turns later it has, so when close() resolves no
      // handle of ours is left, not even one being torn down.
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => {
        this.#logger.log('info', 'replica bus: closed', {});
      });
    return this.#closing;
  }

  get port(): number | null {
    return this.#port;
  }

  /** Whether an authenticated connection to `replica` is open. */
  connected(replica: number): boolean {
    return this.#peers[replica]?.connection?.open === true;
  }

  stats(): ReplicaBusStats {
    const peers: PeerStats[] = [];
    for (const peer of this.#peers) {
      if (peer === null) continue;
      const configured = parseHostPort(this.#options.addresses[peer.replica] ?? '');
      peers.push({
        replica: peer.replica,
        address: formatHostPort(peer.address ?? configured),
        outbound: peer.outbound,
        connected: peer.connection?.open === true,
        queued: peer.queue.length,
        queuedBytes: peer.queue.size,
        sent: peer.sent,
        received: peer.received,
        reads: peer.connection?.reads ?? 0,
        readsIntoOwnBuffer: peer.connection?.readsIntoOwnBuffer ?? 0,
        dropped: peer.queue.dropped,
        droppedQueueFull: peer.queue.droppedCountFull,
        droppedQueueBytes: peer.queue.droppedSizeFull,
        dialAttempts: peer.dialAttempts,
        announcesHeard: peer.announcesHeard,
        announcesSent: peer.announcesSent,
        connects: peer.connects,
        reconnects: Math.max(0, peer.connects - 1),
        rejected: nonZero(peer.rejected),
        authFailures: nonZero(peer.authFailures),
        advertised: peer.advertised,
        advertisementsRefused: nonZero(peer.advertisementsRefused),
      });
    }
    return {
      replica: this.replica,
      port: this.#port,
      peers,
      inbound: {
        accepted: this.#inboundAccepted,
        handshaking: this.#inboundHandshaking.size,
        claimed: this.#admission.claimed,
        evicted: nonZero(this.#inboundEvicted),
        claimsReplaced: this.#claimsReplaced,
        rejected: nonZero(this.#inboundRejected),
        authFailures: nonZero(this.#inboundAuthFailures),
      },
      droppedSelf: this.#droppedSelf,
      droppedClosed: this.#droppedClosed,
    };
  }

  // ---------------------------------------------------------------- connections

  #handshakeOptions() {
    return {
      kernels: this.#options.kernels,
      cluster: this.cluster,
      replica: this.replica,
      replicaCount: this.replicaCount,
      key: this.#key,
    };
  }

  #connectionOptions(direction: 'inbound' | 'outbound') {
    return {
      kernels: this.#options.kernels,
      cluster: this.cluster,
      handshakeTimeoutMs: this.#handshakeTimeoutMs,
      helloTimeoutMs: direction === 'inbound' ? this.#helloTimeoutMs : undefined,
      framePool: this.#options.framePool,
    };
  }

  #dial(peer: Peer): void {
    assert(peer.outbound && peer.connection === null && peer.dialing === null && peer.reconnectTimer === null);
    if (this.#closed || peer.address === null) return;
    peer.dialAttempts += 1;
    const tls = this.#options.tls;
    // A dialed plain-TCP socket reads into one buffer of its own (`onread`) instead of a fresh
    // 64 KiB buffer per read: a state transfer's receiver otherwise left ~1 MiB of garbage per MiB
    // fetched (accepted sockets cannot: net.Server has no `onread`; TLS sockets neither).
    let reader: Connection | null = null;
    const onread = {
      buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
      callback: (length: number, buffer: Uint8Array): boolean => {
        reader?.received(buffer.subarray(0, length));
        return true;
      },
    };
    const socket =
      tls === undefined
        ? connect({ host: peer.address.host, port: peer.address.port, onread })
        : tlsConnect({ ...tls.client, host: peer.address.host, port: peer.address.port });
    const handshake = new InitiatorHandshake({ ...this.#handshakeOptions(), peer: peer.replica });
    const connection = new Connection({
      socket,
      handshake,
      peer: peer.replica,
      events: this.#events,
      connection: this.#connectionOptions('outbound'),
    });
    reader = connection;
    this.#connections.add(connection);
    peer.dialing = connection;
    connection.start(handshake.hello());
  }

  /**
   * Tells a lower index that we (re)started, so it dials us now: its reconnect backoff since our
   * previous incarnation died could otherwise hold the link down for up to `delayMaxMs` after we
   * are ready (the restarted replica could not hear its peers, nor they it). Best effort: a peer
   * that is down dials us when it starts anyway (the lower index dials on `listen()`).
   */
  #announce(peer: Peer): void {
    assert(!peer.outbound);
    if (this.#closed || peer.address === null) return;
    const tls = this.#options.tls;
    const address = peer.address;
    const socket =
      tls === undefined ? connect({ host: address.host, port: address.port }) : tlsConnect({ ...tls.client, host: address.host, port: address.port });
    this.#announcing.add(socket);
    peer.announcesSent += 1;
    const hello = announceHello(this.#handshakeOptions(), peer.replica);
    // Written once connected (buffered until then); the peer closes after reading it.
    socket.end(hello);
    socket.setTimeout(this.#handshakeTimeoutMs, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.#announcing.delete(socket));
  }

  #onAnnounce(connection: Connection, replica: number): void {
    this.#inboundHandshaking.delete(connection);
    this.#releaseSlot(connection);
    if (this.#closed) return;
    const peer = this.#peers[replica];
    assert(peer !== null && peer !== undefined && peer.outbound, 'only a higher index announces to us');
    peer.announcesHeard += 1;
    this.#logger.log('info', 'replica bus: peer announced its start', { peer: replica, connected: peer.connection !== null });
    // A dial in flight may be failing against the old incarnation: its retry starts from the
    // shortest delay. Connected: the old connection's close (or keepalive) reports it.
    peer.attempt = 0;
    if (peer.connection !== null || peer.dialing !== null) return;
    this.#clearReconnect(peer);
    this.#dial(peer);
  }

  #onAccept(raw: Socket): void {
    if (this.#closed) {
      raw.destroy();
      return;
    }
    const source = sourceOf(raw.remoteAddress);
    const nowMs = performance.now();
    const decision = this.#admission.admit(source, nowMs);
    if (decision.evict !== null && decision.bound !== null) {
      this.#inboundEvicted[decision.bound] += 1;
      this.#evict(decision.evict);
    }
    this.#inboundAccepted += 1;
    const slot = new InboundSlot(raw);
    this.#admission.add(slot, source, nowMs);
    raw.once('close', () => this.#admission.release(slot));
    const tlsServer = this.#tlsServer;
    if (tlsServer === null) {
      this.#inbound(slot, raw);
      return;
    }
    const key = remoteKey(raw);
    this.#tlsPending.set(key, slot);
    raw.once('close', () => {
      if (this.#tlsPending.get(key) === slot) this.#tlsPending.delete(key);
    });
    // Runs the TLS handshake and Node's certificate checks; 'secureConnection' hands it back.
    tlsServer.emit('connection', raw);
  }

  /** An admitted socket (TLS secured, with mesh TLS) becomes a connection in its handshake. */
  #inbound(slot: InboundSlot, socket: Socket): void {
    const connection = new Connection({
      socket,
      handshake: new AcceptorHandshake(this.#handshakeOptions()),
      peer: null,
      events: this.#events,
      connection: this.#connectionOptions('inbound'),
    });
    slot.connection = connection;
    this.#slotOf.set(connection, slot);
    this.#connections.add(connection);
    this.#inboundHandshaking.add(connection);
  }

  /** Closes an unauthenticated inbound slot to make room: counted as the auth failure `evicted`. */
  #evict(slot: InboundSlot): void {
    this.#admission.release(slot);
    if (slot.connection !== null) {
      slot.connection.evict();
      return;
    }
    // Still in its TLS handshake: no connection to count it, so count it here.
    this.#inboundAuthFailures.evicted += 1;
    slot.raw.destroy();
  }

  #meshTlsServer(options: TlsOptions): TlsServer {
    const server = new TlsServer({ ...options, handshakeTimeout: this.#helloTimeoutMs });
    server.on('secureConnection', (socket: TLSSocket) => {
      const key = remoteKey(socket);
      const slot = this.#tlsPending.get(key);
      this.#tlsPending.delete(key);
      // Evicted or closed meanwhile, or the bus closed: the slot is gone with it.
      if (slot === undefined || this.#closed) {
        socket.destroy();
        return;
      }
      this.#inbound(slot, socket);
    });
    server.on('tlsClientError', (error: Error & { code?: string }, socket: TLSSocket) => {
      if (this.#closed) return;
      this.#inboundAuthFailures.tls_failed += 1;
      if (!this.#authLogAllowed()) return;
      this.#logger.log('warn', 'replica bus: handshake failed', {
        peer: null,
        remote: remoteKey(socket),
        failure: 'tls_failed',
        reason: error.code ?? error.message,
      });
    });
    return server;
  }

  /** A verified Hello: the connection leaves the open pool for the claimed replica's reserve. */
  #onClaimed(connection: Connection, replica: number): void {
    const slot = this.#slotOf.get(connection);
    if (this.#closed || slot === undefined) return;
    const replaced = this.#admission.claim(slot, replica);
    if (replaced === null) return;
    this.#claimsReplaced += 1;
    this.#evict(replaced);
  }

  /** The connection no longer needs an admission slot (authenticated, announced or closed). */
  #releaseSlot(connection: Connection): void {
    const slot = this.#slotOf.get(connection);
    if (slot === undefined) return;
    this.#slotOf.delete(connection);
    this.#admission.release(slot);
  }

  /** The peer a connection's counters belong to: the dialled peer, or the authenticated one. */
  #peerOf(connection: Connection): Peer | null {
    if (connection.peer === null) return null;
    return this.#peers[connection.peer] ?? null;
  }

  #onEstablished(connection: Connection): void {
    if (this.#closed) {
      connection.destroy();
      return;
    }
    const peer = this.#peerOf(connection);
    assert(peer !== null, 'the handshake authenticates another replica of this cluster');
    this.#inboundHandshaking.delete(connection);
    this.#releaseSlot(connection);
    if (connection.direction === 'outbound') {
      assert(peer.dialing === connection);
      peer.dialing = null;
    } else {
      assert(!peer.outbound, 'only lower indexes dial us');
    }
    const previous = peer.connection;
    if (previous !== null) {
      // The peer restarted (or re-dialled) before our side saw the old socket fail.
      this.#logger.log('info', 'replica bus: newer connection replaces the old one', { peer: peer.replica });
      previous.destroy();
    }
    peer.connection = connection;
    peer.connects += 1;
    peer.attempt = 0;
    peer.dropping = false;
    this.#logger.log('info', 'replica bus: connected', {
      peer: peer.replica,
      direction: connection.direction,
      remote: connection.remoteAddress,
    });
    if (this.#advertisement !== null) connection.sendNow(this.#advertisement);
    this.#flush(peer);
  }

  #onAdvertisement(connection: Connection, frame: DecodedFrame): void {
    if (this.#closed) return;
    const peer = this.#peerOf(connection);
    assert(peer !== null && connection.open, 'advertisements arrive on authenticated connections');
    const header = frame.header;
    assert(header.command === Command.replicaAdvertise);
    const decoded = decodeAdvertisement(header.version, frame.body);
    if (!decoded.ok) {
      peer.advertisementsRefused[decoded.reason] += 1;
      this.#logger.log('warn', 'replica bus: advertisement refused', { peer: peer.replica, reason: decoded.reason, version: header.version });
      return;
    }
    // An unspecified host (0.0.0.0, ::) means "every interface" on the sender: use the host we
    // reach it at, the one we dialled or the one its connection came from.
    const reached = connection.direction === 'outbound' ? (peer.address?.host ?? null) : connection.remoteHost;
    const resolve = (address: string | null): string | null =>
      address === null ? null : reached === null ? address : resolveAdvertisedHost(address, reached);
    const advertised = { http: resolve(decoded.advertisement.http), tcp: resolve(decoded.advertisement.tcp) };
    const previous = peer.advertised;
    peer.advertised = advertised;
    if (previous?.http !== advertised.http || previous?.tcp !== advertised.tcp) {
      this.#logger.log('info', 'replica bus: peer advertised its addresses', { peer: peer.replica, http: advertised.http, tcp: advertised.tcp });
    }
  }

  #onFrame(connection: Connection, frame: DecodedFrame): void {
    if (this.#closed) return;
    const peer = this.#peerOf(connection);
    assert(peer !== null && peer.connection === connection, 'frames arrive on the current authenticated connection');
    peer.received += 1;
    this.#options.onMessage(frame, peer.replica);
  }

  #onRejected(connection: Connection, reason: RejectionReason): void {
    if (this.#closed) return;
    const peer = connection.open || connection.direction === 'outbound' ? this.#peerOf(connection) : null;
    if (peer === null) this.#inboundRejected[reason] += 1;
    else peer.rejected[reason] += 1;
    this.#logger.log('warn', 'replica bus: frame rejected', {
      peer: peer?.replica ?? null,
      remote: connection.remoteAddress,
      reason,
    });
  }

  #onAuthFailure(connection: Connection, failure: AuthFailure): void {
    if (this.#closed) return;
    // Inbound failures stay unattributed: the index the peer claimed was never proven.
    const peer = connection.direction === 'outbound' ? this.#peerOf(connection) : null;
    if (peer === null) this.#inboundAuthFailures[failure] += 1;
    else peer.authFailures[failure] += 1;
    if (!this.#authLogAllowed()) return;
    this.#logger.log('warn', 'replica bus: handshake failed', {
      peer: peer?.replica ?? null,
      claimed: connection.direction === 'inbound' ? connection.claimedPeer : undefined,
      remote: connection.remoteAddress,
      failure,
      ...(connection.lastError === null ? {} : { reason: connection.lastError }),
    });
  }

  /** Whether another auth-failure line fits in the current log window (see the module comment). */
  #authLogAllowed(): boolean {
    const nowMs = Date.now();
    if (nowMs - this.#authLogWindowStartMs >= AUTH_FAILURE_LOG_WINDOW_MS) {
      if (this.#authLogSuppressed > 0) {
        this.#logger.log('warn', 'replica bus: handshake failures not logged in the last window', {
          suppressed: this.#authLogSuppressed,
          window_ms: AUTH_FAILURE_LOG_WINDOW_MS,
        });
      }
      this.#authLogWindowStartMs = nowMs;
      this.#authLogCount = 0;
      this.#authLogSuppressed = 0;
    }
    if (this.#authLogCount >= AUTH_FAILURE_LOGS_PER_WINDOW_MAX) {
      this.#authLogSuppressed += 1;
      return false;
    }
    this.#authLogCount += 1;
    return true;
  }

  #onWritable(connection: Connection): void {
    const peer = this.#peerOf(connection);
    if (peer !== null && peer.connection === connection) this.#flush(peer);
  }

  #onClose(connection: Connection): void {
    this.#connections.delete(connection);
    this.#inboundHandshaking.delete(connection);
    this.#releaseSlot(connection);
    const peer = this.#peerOf(connection);
    if (peer === null) return;
    if (peer.dialing === connection) peer.dialing = null;
    if (peer.connection === connection) {
      peer.connection = null;
      if (!this.#closed) {
        this.#logger.log('warn', 'replica bus: disconnected', { peer: peer.replica });
        this.#options.onDisconnect?.(peer.replica);
      }
    }
    if (!this.#closed && peer.outbound && peer.connection === null && peer.dialing === null) this.#scheduleReconnect(peer);
  }

  // ---------------------------------------------------------------- sending and timers

  #scheduleFlush(peer: Peer): void {
    if (peer.flushScheduled || peer.connection === null) return;
    peer.flushScheduled = true;
    // One batch per event-loop turn: everything sent to this peer while the loop handles one
    // round of IO (every socket read, timer and completion of that turn) goes out in one writev.
    setImmediate(() => {
      peer.flushScheduled = false;
      if (!this.#closed) this.#flush(peer);
    });
  }

  #flush(peer: Peer): void {
    const connection = peer.connection;
    if (connection === null) return;
    const written = connection.flush(peer.queue, this.#bodyWritten);
    peer.sent += written;
    if (written > 0 && peer.queue.length === 0) peer.dropping = false;
  }

  #scheduleReconnect(peer: Peer): void {
    assert(peer.outbound && !this.#closed);
    if (peer.reconnectTimer !== null || peer.address === null) return;
    const delayMs = backoffDelayMs(peer.attempt, this.#backoff, this.#random);
    peer.attempt += 1;
    peer.reconnectTimer = setTimeout(() => {
      peer.reconnectTimer = null;
      if (!this.#closed && peer.connection === null && peer.dialing === null) this.#dial(peer);
    }, delayMs);
  }

  #clearReconnect(peer: Peer): void {
    if (peer.reconnectTimer !== null) clearTimeout(peer.reconnectTimer);
    peer.reconnectTimer = null;
  }
}

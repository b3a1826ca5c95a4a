/**
 * The Iggy binary client port (`--tcp`, default 127.0.0.1:8090): TCP, or TLS when a certificate
 * and key are configured (`--tcp-tls-cert`, `--tcp-tls-key`, as Iggy's `[tcp.tls]`). One socket
 * is one client session (src/node/binary-sessions.ts does the protocol; this file does bytes,
 * bounds and time).
 *
 * Design note (the client wire, read from apache/iggy cc269ef70 `foreign/node/src/wire/vsr`,
 * `foreign/node/src/client`, `core/binary_protocol`, `core/sdk/src/vsr.rs`):
 * - Framing: every frame is a 256-byte little-endian header plus an optional body; `size` (u32 at
 *   48) is header + body. The client sends Request frames (command 5) with checksums and cluster
 *   zero; the server answers each with one Reply (8) or an Eviction (13, header only). An SDK
 *   sends one request at a time and waits (lockstep), so the listener reads the next frame only
 *   after the current one is answered: at most one frame in flight per connection.
 * - Login: the SDK's login is a Register (operation 1, session 0, request 0) whose body starts
 *   with ClientVersionInfo {protocol u32, sdk name, sdk version}, then username + password, or a
 *   personal access token. The reply's body is result-framed (count u32 = 0, then user_id u32,
 *   session u64, protocol u32, server version); `session` is the Register's commit op.
 * - Request numbering: metadata operations carry session = that epoch and request = 1, 2, 3...
 *   (the SDK's counter, one in flight); non-replicated commands (reads, ping) carry operation 2,
 *   the Iggy command code at bytes 196..200 and the current counter without advancing it.
 * - Replies: status u32 at 216 is a pre-commit deny (the code, empty body); otherwise the body
 *   answers, with a result section first for metadata operations (count 0 then the payload, or
 *   count 1, index 0, the IggyError code). The SDK replays the same frame on 57 and 58 every
 *   50 ms for up to 30 s, and the client table answers a replayed request number with the cached
 *   reply, byte for byte.
 * - Evictions: reason u8 at 255 ends the session (the SDK resets its client id and session and
 *   maps the reason to an error: InvalidCredentials 42, InvalidToken 53, StaleClient 30,
 *   MalformedLogin 4, IncompatibleProtocol 14003, bad operation/body/size 3, the rest 40).
 * - Leader following: after a login the SDK reads GetClusterMetadata and, when a healthy node
 *   with role Leader is another endpoint, reconnects there and logs in again. Writes that still
 *   reach a backup are forwarded to the primary (binary-sessions.ts), so both work.
 *
 * Bounds, each with a counted refusal: `connectionsMax` sockets (one over it gets its first
 * request answered with CannotEstablishConnection, then is closed; at most REFUSALS_MAX such at
 * once, beyond that they are dropped at accept); per connection one decoder (one frame buffered,
 * of at most PRE_LOGIN_FRAME_SIZE_MAX before a login and CLIENT_FRAME_SIZE_MAX after) and unsent
 * replies: the next request is read only once they are below the connection's high-water mark
 * (PRE_LOGIN_SEND_HIGH_WATER / CLIENT_SEND_HIGH_WATER: a client that does not read stops being
 * read), and a connection past CLIENT_SEND_BUFFER_MAX is closed; all connections together hold
 * at most `buffersSizeMax` (buffer-budget.ts), past which requests are refused with a retryable
 * error before any work. A frame must complete within CLIENT_FRAME_TIMEOUT_MS of its first byte
 * (slowloris, half frames); a connection silent for CLIENT_STALE_TIMEOUT_MS is evicted as stale
 * and closed (Iggy: 1.2 x its 30 s heartbeat interval; SDKs ping every 5 s).
 */
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { HEADER_SIZE } from '../constants.js';
import { BufferBudget, CLIENT_BUFFERS_SIZE_MAX_DEFAULT } from './buffer-budget.js';
import { ClientFrameDecoder, type ClientDecodeResult } from './client-frame-decoder.js';
import { CLIENT_FRAME_SIZE_MAX, encodeClientReply, readClientRequest } from './client-wire.js';

/** A frame must arrive whole within this long of its first byte. */
export const CLIENT_FRAME_TIMEOUT_MS = 10_000;
/** Iggy evicts a connection silent for 1.2 x its 30 s heartbeat interval. */
export const CLIENT_STALE_TIMEOUT_MS = 36_000;
/** Replies queued to a client that does not read are bounded; past this it is disconnected. */
export const CLIENT_SEND_BUFFER_MAX = 16 * 1024 * 1024;
/**
 * Before a login a connection can send only a login or a ping: a frame of at most this (a login
 * body is a few hundred bytes), and it stops being read with this much of its replies unsent.
 */
export const PRE_LOGIN_FRAME_SIZE_MAX = 4096;
export const PRE_LOGIN_SEND_HIGH_WATER = 64 * 1024;
/** A logged-in connection's next request waits while this much of its replies is unsent. */
export const CLIENT_SEND_HIGH_WATER = 1024 * 1024;
/** Connections over the limit being told so at once; more are dropped at accept. */
export const REFUSALS_MAX = 64;
/** How long a refused connection gets to send the request its refusal answers. */
export const REFUSAL_WAIT_MS = 2_000;
/** The timers sweep every connection this often (one interval, not one timer per socket). */
export const SWEEP_INTERVAL_MS = 1_000;
/** Iggy `CannotEstablishConnection`: the answer of a connection over the limit. */
export const CANNOT_ESTABLISH_CONNECTION = 9;
export const CLIENT_CONNECTIONS_MAX_DEFAULT = 10_000;

/** The socket side of one connection, as the session sees it. */
export interface ClientIo {
  readonly address: string;
  readonly transport: 'tcp' | 'tls';
  /** Queues bytes; false when the connection is gone. */
  send(frame: Uint8Array): boolean;
  /** Stop delivering frames until `resume` (one request in flight at a time). */
  pause(): void;
  resume(): void;
  /** Closes the socket (after flushing what was sent). */
  close(reason: string): void;
  /** The connection logged in (or out): its bounds on frames and unsent replies follow. */
  setAuthenticated(authenticated: boolean): void;
  /**
   * Resolves when the next request may run: on a later turn of the event loop (one connection's
   * pipelined requests never run back to back), and once its unsent replies are below its
   * high-water mark.
   */
  ready(): Promise<void>;
  /** The replica-wide buffer budget is spent: a request now is refused, retryably (counted). */
  overBudget(): boolean;
}

/** The session side of one connection (src/node/binary-sessions.ts). */
export interface ClientHandle {
  /** A decoded frame, a skipped oversize data-plane frame, or the refusal that ends the stream. */
  receive(result: ClientDecodeResult): void;
  /** The socket closed. */
  onClosed(): void;
  /** Silent past the stale window. */
  onStale(): void;
}

export interface ClientListenerOptions {
  readonly host: string;
  readonly port: number;
  readonly connectionsMax: number;
  /** PEM certificate and key: TLS on this port when both are set. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer } | null;
  /** A new connection's session (binary-sessions.ts). */
  open(io: ClientIo): ClientHandle;
  log(level: 'debug' | 'info' | 'warn', event: string, fields?: Record<string, unknown>): void;
  readonly cluster: bigint;
  /** The budget of every connection's buffers (default CLIENT_BUFFERS_SIZE_MAX_DEFAULT). */
  readonly buffersSizeMax?: number;
  nowMs?: () => number;
  /** Tests shorten the timers. */
  readonly timers?: { readonly frameTimeoutMs?: number; readonly staleTimeoutMs?: number; readonly sweepIntervalMs?: number };
}

export interface ClientListenerStats {
  readonly connections: number;
  readonly accepted: number;
  readonly refusedOverLimit: number;
  readonly droppedOverLimit: number;
  readonly slowFrames: number;
  readonly stale: number;
  readonly sendOverflows: number;
  readonly refusedFrames: number;
  /** Bytes of frames being received and replies unsent, over every connection. */
  readonly buffersUsed: number;
  /** Buffers the budget refused and requests turned away while it was spent. */
  readonly budgetRefusals: number;
}

interface Tracked {
  readonly socket: Socket;
  readonly decoder: ClientFrameDecoder;
  readonly connection: ClientHandle;
  /** Last complete frame or sent reply. */
  lastActivityMs: number;
  /** When the frame in progress started (0: none). */
  frameStartMs: number;
  /** A request is being answered: the silence is ours, not the client's. */
  busy: boolean;
  /** Unsent bytes above which the next request waits (by login state). */
  sendHighWater: number;
  /** Bytes written whose write has not completed, charged to the budget. */
  unsent: number;
}

export class ClientListener {
  private readonly options: ClientListenerOptions;
  private readonly server: Server;
  private readonly tracked = new Set<Tracked>();
  private readonly refusing = new Set<Socket>();
  private sweeper: NodeJS.Timeout | null = null;
  private readonly nowMs: () => number;
  private readonly frameTimeoutMs: number;
  private readonly staleTimeoutMs: number;
  private readonly counters = { accepted: 0, refusedOverLimit: 0, droppedOverLimit: 0, slowFrames: 0, stale: 0, sendOverflows: 0, refusedFrames: 0 };
  private readonly warned = new Map<string, number>();
  readonly budget: BufferBudget;

  constructor(options: ClientListenerOptions) {
    this.options = options;
    this.budget = new BufferBudget(options.buffersSizeMax ?? CLIENT_BUFFERS_SIZE_MAX_DEFAULT);
    this.nowMs = options.nowMs ?? Date.now;
    this.frameTimeoutMs = options.timers?.frameTimeoutMs ?? CLIENT_FRAME_TIMEOUT_MS;
    this.staleTimeoutMs = options.timers?.staleTimeoutMs ?? CLIENT_STALE_TIMEOUT_MS;
    const onSocket = (socket: Socket): void => this.accept(socket);
    if (options.tls) {
      this.server = createTlsServer({ cert: options.tls.cert, key: options.tls.key, handshakeTimeout: this.frameTimeoutMs }, onSocket);
      // A failed handshake never reaches `accept`; it only costs a log line (rate-limited).
      this.server.on('tlsClientError', (error: Error) => this.warn('tls_handshake', 'TLS handshake failed on the client port', { error: error.message }));
    } else {
      this.server = createTcpServer({ noDelay: true }, onSocket);
    }
  }

  async listen(): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.options.host, port: this.options.port, backlog: 1024 }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const sweepMs = this.options.timers?.sweepIntervalMs ?? SWEEP_INTERVAL_MS;
    this.sweeper = setInterval(() => this.sweep(), sweepMs);
    this.sweeper.unref();
    return this.server.address() as AddressInfo;
  }

  stats(): ClientListenerStats {
    return { connections: this.tracked.size, ...this.counters, buffersUsed: this.budget.used, budgetRefusals: this.budget.refusals };
  }

  async close(): Promise<void> {
    if (this.sweeper !== null) clearInterval(this.sweeper);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const tracked of this.tracked) tracked.socket.destroy();
    for (const socket of this.refusing) socket.destroy();
    await closed;
  }

  /** Rate-limited: one line per kind per 10 s, so an attack cannot flood the log. */
  private warn(kind: string, event: string, fields: Record<string, unknown>): void {
    const now = this.nowMs();
    if ((this.warned.get(kind) ?? 0) + 10_000 > now) return;
    this.warned.set(kind, now);
    this.options.log('warn', event, fields);
  }

  private accept(socket: Socket): void {
    socket.setNoDelay(true);
    if (this.tracked.size >= this.options.connectionsMax) {
      this.refuse(socket);
      return;
    }
    this.counters.accepted += 1;
    const address = `${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`.replace(/^::ffff:/, '');
    const decoder = new ClientFrameDecoder({ frameSizeMax: PRE_LOGIN_FRAME_SIZE_MAX, budget: this.budget });
    let tracked: Tracked | null = null;
    const budget = this.budget;
    // Bytes charged for writes still in flight, given back once each completes (or the socket died).
    const written = (size: number) => (): void => {
      if (tracked === null || tracked.unsent < size) return;
      tracked.unsent -= size;
      budget.release(size);
    };
    const io: ClientIo = {
      address,
      transport: this.options.tls ? 'tls' : 'tcp',
      send: (frame) => {
        if (socket.destroyed) return false;
        if (socket.writableLength + frame.byteLength > CLIENT_SEND_BUFFER_MAX) {
          this.counters.sendOverflows += 1;
          this.warn('send_overflow', 'client does not read its replies; disconnecting', { address });
          socket.destroy();
          return false;
        }
        if (tracked !== null) {
          tracked.lastActivityMs = this.nowMs();
          tracked.unsent += frame.byteLength;
          budget.charge(frame.byteLength);
        }
        socket.write(frame, written(frame.byteLength));
        return true;
      },
      pause: () => {
        if (tracked !== null) tracked.busy = true;
        socket.pause();
      },
      resume: () => {
        if (tracked !== null) {
          tracked.busy = false;
          tracked.lastActivityMs = this.nowMs();
        }
        if (socket.destroyed) return;
        // A client that does not read its replies is not read either, until it has.
        if (tracked !== null && socket.writableLength > tracked.sendHighWater) socket.once('drain', () => socket.resume());
        else socket.resume();
      },
      close: (reason) => {
        // Per connection, so debug: what an operator needs is counted in stats() and the
        // rate-limited warnings.
        this.options.log('debug', 'client connection closed by the server', { address, reason });
        socket.end();
        // A client that keeps the socket open after the FIN is not owed a wait.
        setTimeout(() => socket.destroy(), 1_000).unref();
      },
      setAuthenticated: (authenticated) => {
        decoder.frameSizeMax = authenticated ? CLIENT_FRAME_SIZE_MAX : PRE_LOGIN_FRAME_SIZE_MAX;
        if (tracked !== null) tracked.sendHighWater = authenticated ? CLIENT_SEND_HIGH_WATER : PRE_LOGIN_SEND_HIGH_WATER;
      },
      ready: () =>
        new Promise<void>((resolve) => {
          const congested = tracked !== null && !socket.destroyed && socket.writableLength > tracked.sendHighWater;
          if (!congested) {
            setImmediate(resolve);
            return;
          }
          // Drained, or closed meanwhile (the session sees that and stops).
          const done = (): void => {
            socket.off('drain', done);
            socket.off('close', done);
            resolve();
          };
          socket.on('drain', done);
          socket.on('close', done);
        }),
      overBudget: () => {
        if (!budget.refuseIfSpent()) return false;
        this.warn('over_budget', 'client buffers at the replica budget; refusing requests until they drain', { buffers_size_max: budget.sizeMax });
        return true;
      },
    };
    const connection = this.options.open(io);
    tracked = { socket, decoder, connection, lastActivityMs: this.nowMs(), frameStartMs: 0, busy: false, sendHighWater: PRE_LOGIN_SEND_HIGH_WATER, unsent: 0 };
    const entry = tracked;
    this.tracked.add(entry);
    socket.on('data', (chunk: Buffer) => {
      const wasInFrame = decoder.inFrame;
      decoder.push(chunk);
      for (const result of decoder) {
        if (result.kind === 'refused') this.counters.refusedFrames += 1;
        else entry.lastActivityMs = this.nowMs();
        connection.receive(result);
      }
      if (!decoder.inFrame) entry.frameStartMs = 0;
      else if (!wasInFrame || entry.frameStartMs === 0) entry.frameStartMs = this.nowMs();
    });
    socket.on('error', () => {
      // ECONNRESET and friends: 'close' follows and does the cleanup.
    });
    socket.once('close', () => {
      this.tracked.delete(entry);
      decoder.dispose();
      // Writes that never completed give their bytes back now (their callbacks may never come).
      budget.release(entry.unsent);
      entry.unsent = 0;
      connection.onClosed();
    });
  }

  /**
   * Over the connection limit: answer the connection's first request with
   * CannotEstablishConnection (an SDK surfaces it as that error), then close. Bounded.
   */
  private refuse(socket: Socket): void {
    if (this.refusing.size >= REFUSALS_MAX) {
      this.counters.droppedOverLimit += 1;
      socket.destroy();
      return;
    }
    this.counters.refusedOverLimit += 1;
    this.warn('over_limit', 'client connection refused: tcp_connections_max reached', { connections_max: this.options.connectionsMax });
    this.refusing.add(socket);
    const header = new Uint8Array(HEADER_SIZE);
    let received = 0;
    const timer = setTimeout(() => socket.destroy(), REFUSAL_WAIT_MS);
    timer.unref();
    socket.on('data', (chunk: Buffer) => {
      const take = Math.min(chunk.byteLength, HEADER_SIZE - received);
      header.set(chunk.subarray(0, take), received);
      received += take;
      if (received < HEADER_SIZE) return;
      socket.removeAllListeners('data');
      socket.pause();
      const request = readClientRequest(header);
      socket.end(
        encodeClientReply({
          cluster: this.options.cluster,
          view: 0,
          replica: 0,
          requestChecksum: request.requestChecksum,
          client: request.client,
          op: 0n,
          commit: 0n,
          timestamp: request.timestamp,
          request: request.request,
          operation: request.operation,
          status: CANNOT_ESTABLISH_CONNECTION,
        }),
      );
    });
    socket.on('error', () => {});
    socket.once('close', () => {
      clearTimeout(timer);
      this.refusing.delete(socket);
    });
  }

  private sweep(): void {
    const now = this.nowMs();
    for (const tracked of this.tracked) {
      if (tracked.frameStartMs !== 0 && now - tracked.frameStartMs > this.frameTimeoutMs) {
        this.counters.slowFrames += 1;
        this.warn('slow_frame', 'client frame not completed in time; disconnecting', { timeout_ms: this.frameTimeoutMs });
        tracked.frameStartMs = 0;
        tracked.socket.destroy();
        continue;
      }
      if (!tracked.busy && now - tracked.lastActivityMs > this.staleTimeoutMs) {
        this.counters.stale += 1;
        tracked.lastActivityMs = now;
        tracked.connection.onStale();
      }
    }
  }
}

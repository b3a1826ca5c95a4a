/**
 * One replica-to-replica TCP connection: framing, the auth handshake, delivery checks and batched
 * writes. The bus decides which connections exist and what to send; this file decides what a byte
 * stream may do.
 *
 * Inbound, every byte goes through a `FrameDecoder` (size bound, seal, validate, cluster, body
 * checksum). Until the handshake completes the stream may carry only 256-byte handshake frames,
 * so the bytes are staged 256 at a time and the `size` field is checked before they reach the
 * decoder: an unauthenticated peer can make us hold 256 bytes, never a 1 MiB body buffer. Any
 * other frame before the handshake completes fails it. After it, a frame is delivered only if
 * its `replica` field names the authenticated peer (Prepare, RepairPrepare and Request excepted,
 * see `senderStamped`); a rejected frame closes the connection, because the decoder cannot find
 * the next frame boundary after one.
 *
 * Outbound, frames are written in batches under cork/uncork (one writev per flush) until
 * `socket.write` reports backpressure; then nothing more is written until 'drain', and the
 * frames wait in the peer's bounded queue instead of in an unbounded socket buffer.
 */
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { Command, HEADER_SIZE, HeaderOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';
import type { ChecksumKernels } from '../vsr/frame.js';
import { readSize } from '../vsr/header.js';
import type { Header } from '../vsr/header-types.js';
import { FrameDecoder, FrameRejection, type DecodedFrame } from './frame-decoder.js';
import type { FramePool } from './frame-pool.js';
import { AuthFailure, type AcceptorHandshake, type HandshakeStep, type InitiatorHandshake } from './replica-auth.js';
import type { SendQueue } from './send-queue.js';
import { zeroedCounters } from '../stdx/counters.js';

/** Rejections the transport adds to the decoder's (stable snake_case metric labels). */
export const TransportRejection = {
  /** A frame before the handshake completed whose `size` is not 256 (handshake frames are header-only). */
  handshakeSizeInvalid: 'handshake_size_invalid',
  /** A handshake frame on an authenticated connection: the stream is confused, close it. */
  handshakeAfterAuth: 'handshake_after_auth',
  /** `replica` names another replica than the authenticated peer; dropped, connection kept. */
  replicaImpersonation: 'replica_impersonation',
  /** A frame only clients receive (Reply, Eviction, PingClient, PongClient); dropped. */
  clientCommand: 'client_command',
} as const;
export type TransportRejection = (typeof TransportRejection)[keyof typeof TransportRejection];
export type RejectionReason = FrameRejection | TransportRejection;

export function rejectionCounters(): Record<RejectionReason, number> {
  return zeroedCounters<RejectionReason>([...Object.values(FrameRejection), ...Object.values(TransportRejection)]);
}

/**
 * Whether a command's `replica` field names its sender. Not for Prepare (a backup forwards the
 * primary's prepare along the chain), RepairPrepare (a stored prepare served verbatim, stamped by
 * the primary that prepared it), Request (stamped by the client) and Reply (a committed reply
 * names the replica that prepared its op, and a retry is answered with those cached bytes: a
 * primary relaying one to the backup that forwarded the retry relays an older primary's stamp):
 * their header is relayed byte for byte under a checksum that covers `replica`, so it cannot be
 * re-stamped. No replica acts on a Reply's `replica`.
 */
function senderStamped(command: number): boolean {
  return command !== Command.prepare && command !== Command.repairPrepare && command !== Command.request && command !== Command.reply;
}

/**
 * Client-session commands no replica sends to another. Reply and Eviction are not among them: a
 * primary relays the answer to a request a backup forwarded for its binary client (the node
 * layer delivers those to the client; the core never sees them).
 */
function clientOnly(command: number): boolean {
  return command === Command.pingClient || command === Command.pongClient;
}

function handshakeCommand(command: number): boolean {
  return command === Command.replicaHello || command === Command.replicaChallenge || command === Command.replicaFinish;
}

/** After a refusal is written, how long the peer gets to read it before the socket is destroyed. */
const REFUSAL_LINGER_MS = 200;
/** TCP keepalive, so a peer that vanished without a FIN (power loss) is noticed. */
const KEEPALIVE_INITIAL_DELAY_MS = 10_000;
const SIZE_END = HeaderOffset.size + 4;

export interface ConnectionEvents {
  /** The handshake completed; `connection.peer` is the authenticated replica index. */
  onEstablished(connection: Connection): void;
  onFrame(connection: Connection, frame: DecodedFrame): void;
  onRejected(connection: Connection, reason: RejectionReason): void;
  onAuthFailure(connection: Connection, failure: AuthFailure): void;
  /** An announcement (its MAC verified) that higher index `peer` (re)started; the connection closes. */
  onAnnounce(connection: Connection, peer: number): void;
  /**
   * Inbound: the peer's Hello verified (it holds the key) and claims to be replica `peer`; the
   * handshake continues. The connection is still unauthenticated (a Hello can be replayed).
   */
  onClaimed(connection: Connection, peer: number): void;
  /** A ReplicaAdvertise from the authenticated peer (consumed by the bus, never the core). */
  onAdvertisement(connection: Connection, frame: DecodedFrame): void;
  /** Backpressure cleared: the socket wants more frames. */
  onWritable(connection: Connection): void;
  /** Fires exactly once, last. */
  onClose(connection: Connection): void;
}

export interface ConnectionOptions {
  readonly kernels: ChecksumKernels;
  readonly cluster: bigint;
  /** From socket creation (including the TCP connect) to an authenticated connection. */
  readonly handshakeTimeoutMs: number;
  /**
   * Inbound only: from the hand-over (after the TLS handshake, with mesh TLS) to a verified Hello.
   * Short, because until then the connection holds a slot anyone can take; `handshakeTimeoutMs`
   * runs from the verified Hello on.
   */
  readonly helloTimeoutMs?: number | undefined;
  /** State chunk frames come from here (see `FramePool`); allocated per frame without one. */
  readonly framePool?: FramePool | null | undefined;
}

export type ConnectionState = 'handshake' | 'open' | 'closing' | 'closed';

export class Connection {
  readonly direction: 'outbound' | 'inbound';
  /** Outbound: the replica dialled. Inbound: null until the handshake authenticates the peer. */
  peer: number | null;
  /** Resolves when the socket has closed (after `onClose`). */
  readonly closed: Promise<void>;

  #state: ConnectionState = 'handshake';
  readonly #socket: Socket;
  readonly #handshake: InitiatorHandshake | AcceptorHandshake;
  readonly #events: ConnectionEvents;
  readonly #decoder: FrameDecoder;
  /** A handshake frame in progress (bounded pre-auth buffering). */
  readonly #staging = new Uint8Array(HEADER_SIZE);
  #stagedLength = 0;
  #waitingDrain = false;
  #authFailed = false;
  /** TCP connected (inbound sockets are born connected). A failed dial is not an auth failure. */
  #connected: boolean;
  /**
   * The TLS handshake completed, or there is none (plain TCP; inbound TLS sockets are handed
   * over only once secured). A TLS socket that closes before is a `tls_failed`, not a `closed`.
   */
  #secured: boolean;
  /** The socket's last error (a code such as ECONNRESET or a TLS alert), for the failure log. */
  #lastError: string | null = null;
  #timer: NodeJS.Timeout | null;
  readonly #handshakeTimeoutMs: number;
  /** When the connection was made (ms, monotonic): admission evicts the oldest first. */
  readonly createdAtMs = performance.now();
  /** Socket reads delivered, and those of them read into a buffer of ours (`received`). */
  reads = 0;
  readsIntoOwnBuffer = 0;

  constructor(options: {
    readonly socket: Socket;
    readonly handshake: InitiatorHandshake | AcceptorHandshake;
    readonly peer: number | null;
    readonly events: ConnectionEvents;
    readonly connection: ConnectionOptions;
  }) {
    assert(options.connection.handshakeTimeoutMs > 0, 'connection: handshakeTimeoutMs > 0');
    const helloTimeoutMs = options.connection.helloTimeoutMs;
    assert(helloTimeoutMs === undefined || (helloTimeoutMs > 0 && options.peer === null), 'connection: helloTimeoutMs > 0, inbound only');
    this.#handshakeTimeoutMs = options.connection.handshakeTimeoutMs;
    this.#socket = options.socket;
    this.#handshake = options.handshake;
    this.#events = options.events;
    this.peer = options.peer;
    this.direction = options.peer === null ? 'inbound' : 'outbound';
    this.#connected = this.direction === 'inbound';
    this.#secured = !(options.socket instanceof TLSSocket) || this.direction === 'inbound';
    this.#decoder = new FrameDecoder(options.connection.kernels, { cluster: options.connection.cluster }, options.connection.framePool ?? null);

    let resolveClosed: () => void = () => {};
    this.closed = new Promise((resolve) => {
      resolveClosed = resolve;
    });
    const socket = this.#socket;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_INITIAL_DELAY_MS);
    if (!this.#connected) {
      socket.once('connect', () => {
        this.#connected = true;
      });
    }
    if (!this.#secured) {
      socket.once('secureConnect', () => {
        this.#secured = true;
      });
    }
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('drain', () => this.#onDrain());
    // Without a listener an 'error' event throws; every error ends in 'close', handled there.
    socket.on('error', (error: Error & { code?: string }) => {
      this.#lastError = error.code ?? error.message;
    });
    socket.on('close', () => {
      this.#onClose();
      resolveClosed();
    });
    this.#timer = setTimeout(() => this.#onHandshakeTimeout(), helloTimeoutMs ?? this.#handshakeTimeoutMs);
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** Authenticated and not closing: frames may be written and are delivered. */
  get open(): boolean {
    return this.#state === 'open';
  }

  /** Inbound: the replica index the peer's Hello claimed (unproven until established), if any. */
  get claimedPeer(): number | null {
    return 'claimedPeer' in this.#handshake ? this.#handshake.claimedPeer : null;
  }

  get lastError(): string | null {
    return this.#lastError;
  }

  get remoteAddress(): string {
    return `${this.#socket.remoteAddress ?? '?'}:${this.#socket.remotePort ?? '?'}`;
  }

  /** The peer's IP as this socket sees it (the source address of an inbound connection). */
  get remoteHost(): string | null {
    return this.#socket.remoteAddress ?? null;
  }

  /**
   * Writes one small control frame now, ahead of the peer's queue (the advertisement goes first
   * on a fresh connection). Only on an open connection.
   */
  sendNow(frame: Uint8Array): void {
    assert(this.#state === 'open', 'sendNow: an authenticated connection');
    this.#socket.write(frame);
  }

  /** Outbound only: sends Hello. Written before the TCP connect completes; Node buffers it. */
  start(hello: Uint8Array): void {
    assert(this.direction === 'outbound' && this.#state === 'handshake');
    this.#socket.write(hello);
  }

  /**
   * Writes queued frames in one corked batch until the queue is empty or the socket reports
   * backpressure. Returns the number of frames handed to the socket. `bodyWritten` is called with
   * the body of each frame in parts once the socket has written it (nothing reads it after that):
   * never for a frame the socket failed to write.
   */
  flush(queue: SendQueue, bodyWritten?: (body: Uint8Array) => void): number {
    if (this.#state !== 'open' || this.#waitingDrain || queue.length === 0) return 0;
    let written = 0;
    this.#socket.cork();
    for (let frame = queue.shift(); frame !== undefined; frame = queue.shift()) {
      written += 1;
      // A frame in parts is two writes into the same corked writev: its body goes out as is.
      if (!(frame instanceof Uint8Array)) this.#socket.write(frame.header);
      // `false` means the socket buffer is past its high-water mark (the frame is still
      // buffered): stop here and let the rest wait in the bounded queue until 'drain'.
      const done = bodyWritten !== undefined && !(frame instanceof Uint8Array) ? bodyWrittenOf(frame.body, bodyWritten) : undefined;
      if (!this.#socket.write(frame instanceof Uint8Array ? frame : frame.body, done)) {
        this.#waitingDrain = true;
        break;
      }
    }
    this.#socket.uncork();
    return written;
  }

  /**
   * Inbound, still in its handshake: closed to make room for another connection (the bus's
   * admission), counted as the auth failure `evicted`. A no-op once the handshake is over.
   */
  evict(): void {
    if (this.#state !== 'handshake') return;
    this.#failHandshake(AuthFailure.evicted, null);
  }

  /** Closes at once; `onClose` follows asynchronously. Idempotent. */
  destroy(): void {
    if (this.#state === 'closed') return;
    if (this.#state !== 'closing') this.#state = 'closing';
    this.#clearTimer();
    this.#socket.destroy();
  }

  /**
   * Bytes a dialed socket read into a buffer of ours (`onread`, which replaces its 'data' events),
   * valid only during this call: the next read overwrites them. Safe because nothing here keeps a
   * view of a read: the handshake stages bytes into its own buffer and the decoder copies every
   * frame out of the chunk before `#onData` returns (a connection that closes meanwhile reads no
   * more).
   */
  received(bytes: Uint8Array): void {
    this.readsIntoOwnBuffer += 1;
    this.#onData(bytes);
  }

  #onData(chunk: Uint8Array): void {
    this.reads += 1;
    // A plain Uint8Array view: the decoder copies frames out of it (a Buffer's `slice` would not).
    let bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (this.#state === 'handshake' && bytes.byteLength > 0) {
      const take = Math.min(HEADER_SIZE - this.#stagedLength, bytes.byteLength);
      const before = this.#stagedLength;
      this.#staging.set(bytes.subarray(0, take), before);
      this.#stagedLength += take;
      bytes = bytes.subarray(take);
      if (before < SIZE_END && this.#stagedLength >= SIZE_END && readSize(this.#staging) !== HEADER_SIZE) {
        this.#reject(TransportRejection.handshakeSizeInvalid);
        this.#failHandshake(AuthFailure.frameRejected, null);
        return;
      }
      if (this.#stagedLength < HEADER_SIZE) return;
      this.#stagedLength = 0;
      const header = this.#decodeHandshakeFrame();
      if (header === null) return;
      this.#onHandshakeStep(this.#handshake.onFrame(header));
    }
    if (this.#state !== 'open' || bytes.byteLength === 0) return;
    this.#decoder.push(bytes);
    for (const result of this.#decoder) {
      if (!result.ok) {
        this.#reject(result.reason);
        this.destroy();
        return;
      }
      this.#deliver(result);
      // A delivery may close this connection (the bus closed, or a newer connection replaced it).
      if (this.#state !== 'open') return;
    }
  }

  /** The staged 256 bytes through the decoder: one frame or a rejection (which fails the handshake). */
  #decodeHandshakeFrame(): Header | null {
    this.#decoder.push(this.#staging);
    let header: Header | null = null;
    for (const result of this.#decoder) {
      if (!result.ok) {
        this.#reject(result.reason);
        this.#failHandshake(AuthFailure.frameRejected, null);
        return null;
      }
      assert(header === null, 'a 256-byte chunk holds one frame');
      header = result.header;
    }
    assert(header !== null, 'a staged 256-byte frame of size 256 decodes to one result');
    return header;
  }

  #onHandshakeStep(step: HandshakeStep): void {
    switch (step.kind) {
      case 'continue':
        this.#socket.write(step.send);
        if (step.claimed !== null) {
          // The rest of the handshake gets its own deadline, from the verified Hello on.
          this.#clearTimer();
          this.#timer = setTimeout(() => this.#onHandshakeTimeout(), this.#handshakeTimeoutMs);
          this.#events.onClaimed(this, step.claimed);
        }
        return;
      case 'refused':
        this.#failHandshake(step.failure, step.send);
        return;
      case 'announced':
        // Not a failure: the peer closes this connection itself; nothing else may flow on it.
        this.#state = 'closing';
        this.#clearTimer();
        this.#events.onAnnounce(this, step.peer);
        this.destroy();
        return;
      case 'established':
        if (step.send !== null) this.#socket.write(step.send);
        assert(this.peer === null || this.peer === step.peer, 'the initiator authenticates the replica it dialled');
        this.peer = step.peer;
        this.#state = 'open';
        this.#clearTimer();
        this.#events.onEstablished(this);
        return;
    }
  }

  #deliver(result: DecodedFrame): void {
    const command = result.header.command;
    const peer = this.peer;
    assert(peer !== null && this.#state === 'open');
    if (handshakeCommand(command)) {
      this.#reject(TransportRejection.handshakeAfterAuth);
      this.destroy();
      return;
    }
    if (clientOnly(command)) {
      this.#reject(TransportRejection.clientCommand);
      return;
    }
    // The replica trusts `header.replica` as the sender (PrepareOk votes, DoViewChange quorums):
    // an authenticated peer must not be able to speak for another replica.
    if (senderStamped(command) && result.header.replica !== peer) {
      this.#reject(TransportRejection.replicaImpersonation);
      return;
    }
    if (command === Command.replicaAdvertise) {
      this.#events.onAdvertisement(this, result);
      return;
    }
    this.#events.onFrame(this, result);
  }

  #reject(reason: RejectionReason): void {
    this.#events.onRejected(this, reason);
  }

  #failHandshake(failure: AuthFailure, refusal: Uint8Array | null): void {
    assert(this.#state === 'handshake');
    this.#authFailed = true;
    this.#events.onAuthFailure(this, failure);
    this.#clearTimer();
    if (refusal === null) {
      this.destroy();
      return;
    }
    // Tell the peer why (its operator sees the status), then close. The linger bounds how long a
    // peer that never reads or closes can hold the socket.
    this.#state = 'closing';
    this.#socket.end(refusal);
    this.#timer = setTimeout(() => this.destroy(), REFUSAL_LINGER_MS);
  }

  #onHandshakeTimeout(): void {
    this.#timer = null;
    if (this.#state !== 'handshake') return;
    // A dial that never connected timed out in TCP, not in the handshake: just retry later.
    if (!this.#connected) this.destroy();
    else this.#failHandshake(AuthFailure.timeout, null);
  }

  #onDrain(): void {
    this.#waitingDrain = false;
    if (this.#state === 'open') this.#events.onWritable(this);
  }

  #onClose(): void {
    const wasHandshaking = this.#state === 'handshake';
    this.#state = 'closed';
    this.#clearTimer();
    if (wasHandshaking && this.#connected && !this.#authFailed) {
      this.#authFailed = true;
      this.#events.onAuthFailure(this, this.#secured ? AuthFailure.closed : AuthFailure.tlsFailed);
    }
    this.#events.onClose(this);
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** The socket's write callback for `body`: hands it on only when the write succeeded. */
function bodyWrittenOf(body: Uint8Array, bodyWritten: (body: Uint8Array) => void): (error?: Error | null) => void {
  return (error) => {
    if (error === undefined || error === null) bodyWritten(body);
  };
}

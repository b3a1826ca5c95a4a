/**
 * Replica authentication: the 3-message handshake every replica connection starts with, as two
 * sans-IO state machines (one per side) that take decoded headers and return the frame to send.
 * The connection owns the socket and the deadline; this file owns the rules.
 *
 *   initiator (lower index)                            acceptor (higher index)
 *   Hello{replica=i, nonce_i, mode, peerReplica=a, mac_h}  ->
 *                                                   <-  Challenge{replica=a, nonce_a, mac_a, mode, status}
 *   Finish{replica=i, mac_i, status}                ->
 *
 * Every connection runs in mode psk: a replica always has a cluster secret (src/node/cluster-secret.ts;
 * there is no configuration without one), and each side proves knowledge of a key derived from it:
 *   key   = HKDF-SHA256(ikm = secret, salt = "vrmeta/replica-auth/v1", info = "mac key" || cluster u128 LE)
 *   mac_x = HMAC-SHA256(key, transcript(direction_x)), 32 bytes (the header's MAC field, no truncation)
 *   transcript = "vrmeta/replica-auth/v1\0" || direction u8 || mode u8 || cluster u128 LE
 *                || initiator u8 || acceptor u8 || nonce_i[32] || nonce_a[32]
 * direction is 1 for the acceptor's Challenge MAC and 2 for the initiator's Finish MAC, so a MAC
 * reflected back at its sender does not verify; both fresh 32-byte nonces (node:crypto) make every
 * transcript unique, so a recorded handshake cannot be replayed. HMAC-SHA256 stands in for the
 * reference's keyed BLAKE3 (not in node:crypto); it fills the same 32-byte field.
 *
 * The Hello carries a MAC of its own (direction 3, the acceptor's nonce all zero: it does not
 * exist yet), checked before anything else. It is not what authenticates the connection (a
 * recorded Hello replays; only Finish, over the acceptor's fresh nonce, proves the peer is live);
 * it is what lets the acceptor tell, at the first message, a sender holding the key from anyone
 * else. The bus gives a verified Hello a slot of its own per claimed replica, so an outsider
 * without the key, however many connections it opens, can only ever hold the slots of the
 * connections that have not said anything yet (tcp-bus.ts, admission), never a peer's.
 * Announcements carry the same MAC, so only a replica holding the key can make us dial early.
 *
 * What this does not do: there is no TLS, so no exporter binds the handshake to the TCP stream and
 * frames after it carry no MAC. It keeps out a replica (or anything else) that does not hold the
 * secret: it cannot open a connection that delivers a frame. An on-path attacker who can hijack an
 * established TCP stream is out of scope; that needs TLS.
 *
 * Besides the MACs, the exchange checks the peer's replica index against the configuration (the
 * initiator dialled the address of replica `a`, and replica `a` answers; the acceptor is the replica
 * the initiator meant, and the initiator is a lower index of this cluster), so swapped address
 * lists fail loudly.
 *
 * Mode none (zero MACs) still exists on the wire, because the header format has the field, but
 * it is never spoken and always refused with status modeMismatch: a peer that offers it is
 * either misconfigured or probing for the unauthenticated mode this cluster once had.
 */
import { createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { Command } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { buildFrame, type ChecksumKernels } from '../vsr/frame.js';
import { writeU128 } from '../vsr/header.js';
import {
  AUTH_MAC_SIZE,
  AUTH_NONCE_SIZE,
  ReplicaAuthMode,
  ReplicaAuthStatus,
  type Header,
  type ReplicaChallengeHeader,
  type ReplicaFinishHeader,
  type ReplicaHelloHeader,
} from '../vsr/header-types.js';
import { zeroedCounters } from '../stdx/counters.js';

export const AUTH_DOMAIN_TAG = 'vrmeta/replica-auth/v1';

/** Which MAC a transcript is for; part of the transcript so a reflected MAC fails. */
export const AuthDirection = {
  /** The acceptor's MAC, sent in Challenge. */
  challenge: 1,
  /** The initiator's MAC, sent in Finish. */
  finish: 2,
  /** The initiator's MAC over its Hello (the acceptor's nonce all zero), sent in Hello. */
  hello: 3,
} as const;
export type AuthDirection = (typeof AuthDirection)[keyof typeof AuthDirection];

/**
 * Why a handshake failed. Stable snake_case strings: metric labels and log fields.
 * The first three are detected locally and sent to the peer as a status; `peer_refused` means
 * the peer sent a non-ok status.
 */
export const AuthFailure = {
  modeMismatch: 'mode_mismatch',
  macMismatch: 'mac_mismatch',
  replicaMismatch: 'replica_mismatch',
  peerRefused: 'peer_refused',
  /** A frame other than the next handshake message arrived before the handshake completed. */
  unexpectedFrame: 'unexpected_frame',
  /** A handshake frame failed the frame checks (counted by reason among rejected frames too). */
  frameRejected: 'frame_rejected',
  /** The handshake did not complete before the deadline. */
  timeout: 'timeout',
  /** The socket closed or failed before the handshake completed. */
  closed: 'closed',
  /** Mesh TLS: the TLS handshake failed (no certificate, or one the CA did not issue, or the wrong name). */
  tlsFailed: 'tls_failed',
  /** Closed before its handshake completed to make room: admission (tcp-bus.ts) or a newer claim. */
  evicted: 'evicted',
} as const;
export type AuthFailure = (typeof AuthFailure)[keyof typeof AuthFailure];
export const AUTH_FAILURES: readonly AuthFailure[] = Object.values(AuthFailure);

export function authFailureCounters(): Record<AuthFailure, number> {
  return zeroedCounters(AUTH_FAILURES);
}

/**
 * Connection topology: one connection per replica pair, dialled by the lower index. Deterministic
 * (no tie-break race between two simultaneous dials) and checked by the acceptor.
 */
export function dials(replica: number, peer: number): boolean {
  return replica < peer;
}

/** The MAC key for a cluster, derived once at startup. Opaque so it is never logged as bytes. */
export function deriveAuthKey(secret: Uint8Array, cluster: bigint): KeyObject {
  assert(secret.byteLength > 0, 'replica auth: the cluster secret is not empty');
  const info = new Uint8Array(7 + 16);
  info.set(new TextEncoder().encode('mac key'), 0);
  writeU128(info, 7, cluster);
  const key = hkdfSync('sha256', secret, new TextEncoder().encode(AUTH_DOMAIN_TAG), info, 32);
  return createSecretKey(new Uint8Array(key));
}

export interface TranscriptInput {
  readonly direction: AuthDirection;
  readonly mode: ReplicaAuthMode;
  readonly cluster: bigint;
  readonly initiator: number;
  readonly acceptor: number;
  readonly nonceInitiator: Uint8Array;
  readonly nonceAcceptor: Uint8Array;
}

const DOMAIN_TAG_BYTES = new TextEncoder().encode(`${AUTH_DOMAIN_TAG}\0`);
export const TRANSCRIPT_SIZE = DOMAIN_TAG_BYTES.byteLength + 1 + 1 + 16 + 1 + 1 + AUTH_NONCE_SIZE * 2;

export function authTranscript(input: TranscriptInput): Uint8Array {
  assert(input.nonceInitiator.byteLength === AUTH_NONCE_SIZE && input.nonceAcceptor.byteLength === AUTH_NONCE_SIZE);
  assert(input.initiator >= 0 && input.initiator <= 0xff && input.acceptor >= 0 && input.acceptor <= 0xff);
  const transcript = new Uint8Array(TRANSCRIPT_SIZE);
  let offset = 0;
  transcript.set(DOMAIN_TAG_BYTES, offset);
  offset += DOMAIN_TAG_BYTES.byteLength;
  transcript[offset++] = input.direction;
  transcript[offset++] = input.mode;
  writeU128(transcript, offset, input.cluster);
  offset += 16;
  transcript[offset++] = input.initiator;
  transcript[offset++] = input.acceptor;
  transcript.set(input.nonceInitiator, offset);
  offset += AUTH_NONCE_SIZE;
  transcript.set(input.nonceAcceptor, offset);
  offset += AUTH_NONCE_SIZE;
  assert(offset === TRANSCRIPT_SIZE);
  return transcript;
}

export function authMac(key: KeyObject, input: TranscriptInput): Uint8Array {
  const mac = new Uint8Array(createHmac('sha256', key).update(authTranscript(input)).digest());
  assert(mac.byteLength === AUTH_MAC_SIZE, 'HMAC-SHA256 fills the 32-byte MAC field');
  return mac;
}

/** Constant-time: a MAC comparison must not leak how many leading bytes matched. */
export function macMatches(expected: Uint8Array, actual: Uint8Array): boolean {
  return expected.byteLength === actual.byteLength && timingSafeEqual(expected, actual);
}

const ZERO_32: Uint8Array = new Uint8Array(32);

/** The Hello's MAC: the transcript of direction hello, with the acceptor's nonce all zero. */
export function helloMac(
  key: KeyObject,
  hello: { readonly cluster: bigint; readonly replica: number; readonly peerReplica: number; readonly nonce: Uint8Array },
): Uint8Array {
  return authMac(key, {
    direction: AuthDirection.hello,
    mode: ReplicaAuthMode.psk,
    cluster: hello.cluster,
    initiator: hello.replica,
    acceptor: hello.peerReplica,
    nonceInitiator: hello.nonce,
    nonceAcceptor: ZERO_32,
  });
}

/** A Hello frame from `replica` to `peer`, MAC'd with `key` (the dial's and the announcement's). */
function buildHello(options: HandshakeOptions, peer: number, nonce: Uint8Array): Uint8Array {
  return buildFrame(options.kernels, {
    command: Command.replicaHello,
    cluster: options.cluster,
    view: 0,
    release: 0,
    replica: options.replica,
    nonce,
    mode: ReplicaAuthMode.psk,
    peerReplica: peer,
    mac: helloMac(options.key, { cluster: options.cluster, replica: options.replica, peerReplica: peer, nonce }),
  });
}

export type HandshakeStep =
  /**
   * Send `send` and wait for the next handshake frame. `claimed`: the acceptor verified a Hello's
   * MAC, so its sender holds the key and claims to be replica `claimed` (not yet proven live).
   */
  | { readonly kind: 'continue'; readonly send: Uint8Array; readonly claimed: number | null }
  /** Authenticated: send `send` (if any) first, then frames may flow both ways. */
  | { readonly kind: 'established'; readonly peer: number; readonly send: Uint8Array | null }
  /** Refused: send `send` (if any, it carries the status), then close. */
  | { readonly kind: 'refused'; readonly failure: AuthFailure; readonly send: Uint8Array | null }
  /**
   * A higher index announced that it (re)started (`announceHello`): close, and dial it now
   * instead of at the end of the reconnect backoff. Unauthenticated, so it may only ever make
   * us run the authenticated dial to the address we have configured for `peer` sooner.
   */
  | { readonly kind: 'announced'; readonly peer: number };

export interface HandshakeOptions {
  readonly kernels: ChecksumKernels;
  readonly cluster: bigint;
  /** This replica's index. */
  readonly replica: number;
  readonly replicaCount: number;
  /** From `deriveAuthKey`: there is no unauthenticated mode. */
  readonly key: KeyObject;
  /** Tests inject fixed nonces; production uses node:crypto. */
  readonly nonce?: () => Uint8Array;
}

function freshNonce(options: HandshakeOptions): Uint8Array {
  const nonce = options.nonce?.() ?? new Uint8Array(randomBytes(AUTH_NONCE_SIZE));
  assert(nonce.byteLength === AUTH_NONCE_SIZE, 'replica auth: 32-byte nonce');
  return nonce;
}

const STATUS_FAILURE = {
  [ReplicaAuthStatus.modeMismatch]: AuthFailure.modeMismatch,
  [ReplicaAuthStatus.macMismatch]: AuthFailure.macMismatch,
  [ReplicaAuthStatus.replicaMismatch]: AuthFailure.replicaMismatch,
} as const;
type RefusalStatus = keyof typeof STATUS_FAILURE;

/** The dialling side: sends Hello, checks Challenge, answers Finish. */
export class InitiatorHandshake {
  readonly peer: number;
  readonly #options: HandshakeOptions;
  readonly #mode: ReplicaAuthMode = ReplicaAuthMode.psk;
  #nonce: Uint8Array | null = null;
  #stage: 'hello' | 'challenge' | 'done' = 'hello';

  constructor(options: HandshakeOptions & { readonly peer: number }) {
    assert(options.replica < options.replicaCount && options.peer < options.replicaCount);
    assert(dials(options.replica, options.peer), 'the lower index dials');
    assert(options.key !== null && options.key !== undefined, 'replica auth: a key (no unauthenticated mode)');
    this.#options = options;
    this.peer = options.peer;
  }

  hello(): Uint8Array {
    assert(this.#stage === 'hello', 'Hello is sent once, first');
    this.#stage = 'challenge';
    this.#nonce = freshNonce(this.#options);
    return buildHello(this.#options, this.peer, this.#nonce);
  }

  onFrame(header: Header): HandshakeStep {
    if (this.#stage !== 'challenge' || header.command !== Command.replicaChallenge) {
      this.#stage = 'done';
      return { kind: 'refused', failure: AuthFailure.unexpectedFrame, send: null };
    }
    this.#stage = 'done';
    return this.#onChallenge(header);
  }

  #onChallenge(challenge: ReplicaChallengeHeader): HandshakeStep {
    const nonce = this.#nonce;
    assert(nonce !== null);
    if (challenge.status !== ReplicaAuthStatus.ok) {
      return { kind: 'refused', failure: AuthFailure.peerRefused, send: null };
    }
    // The address we dialled belongs to replica `peer`; anything else is a misconfiguration.
    if (challenge.replica !== this.peer) return this.#refuse(ReplicaAuthStatus.replicaMismatch);
    if (challenge.mode !== this.#mode) return this.#refuse(ReplicaAuthStatus.modeMismatch);
    const key = this.#options.key;
    const transcript = {
      mode: this.#mode,
      cluster: this.#options.cluster,
      initiator: this.#options.replica,
      acceptor: this.peer,
      nonceInitiator: nonce,
      nonceAcceptor: challenge.nonce,
    };
    const expected = authMac(key, { ...transcript, direction: AuthDirection.challenge });
    if (!macMatches(expected, challenge.mac)) return this.#refuse(ReplicaAuthStatus.macMismatch);
    const mac = authMac(key, { ...transcript, direction: AuthDirection.finish });
    return { kind: 'established', peer: this.peer, send: this.#finish(ReplicaAuthStatus.ok, mac) };
  }

  #refuse(status: RefusalStatus): HandshakeStep {
    return { kind: 'refused', failure: STATUS_FAILURE[status], send: this.#finish(status, ZERO_32) };
  }

  #finish(status: ReplicaAuthStatus, mac: Uint8Array): Uint8Array {
    return buildFrame(this.#options.kernels, {
      command: Command.replicaFinish,
      cluster: this.#options.cluster,
      view: 0,
      release: 0,
      replica: this.#options.replica,
      mac,
      status,
    });
  }
}

/**
 * What a freshly started replica sends to each LOWER index, on a connection of its own that it
 * closes right after: a Hello naming itself (the higher index) and the peer. The peer never
 * answers it as a handshake (only the lower index dials); it dials us at once instead of waiting
 * out the reconnect backoff it was in since our previous incarnation died.
 */
export function announceHello(options: HandshakeOptions, peer: number): Uint8Array {
  assert(peer < options.replicaCount && dials(peer, options.replica), 'announce to a lower index (one that dials us)');
  return buildHello(options, peer, freshNonce(options));
}

/** The listening side: checks Hello, sends Challenge, checks Finish. */
export class AcceptorHandshake {
  readonly #options: HandshakeOptions;
  readonly #mode: ReplicaAuthMode = ReplicaAuthMode.psk;
  #stage: 'hello' | 'finish' | 'done' = 'hello';
  #hello: ReplicaHelloHeader | null = null;
  #nonce: Uint8Array | null = null;
  /** The claimed initiator index, known once Hello arrived (not yet authenticated). */
  claimedPeer: number | null = null;

  constructor(options: HandshakeOptions) {
    assert(options.replica < options.replicaCount);
    assert(options.key !== null && options.key !== undefined, 'replica auth: a key (no unauthenticated mode)');
    this.#options = options;
  }

  onFrame(header: Header): HandshakeStep {
    if (this.#stage === 'hello' && header.command === Command.replicaHello) return this.#onHello(header);
    if (this.#stage === 'finish' && header.command === Command.replicaFinish) {
      this.#stage = 'done';
      return this.#onFinish(header);
    }
    this.#stage = 'done';
    return { kind: 'refused', failure: AuthFailure.unexpectedFrame, send: null };
  }

  #onHello(hello: ReplicaHelloHeader): HandshakeStep {
    // For the failure log only: until the MAC verifies, the claim is a stranger's word.
    this.claimedPeer = hello.replica;
    if (hello.mode !== this.#mode) return this.#refuse(ReplicaAuthStatus.modeMismatch);
    // Before the claim is judged: without the key, nothing else about a Hello matters (and the
    // refusal tells a misconfigured replica that its secret differs).
    const expected = helloMac(this.#options.key, hello);
    if (!macMatches(expected, hello.mac)) return this.#refuse(ReplicaAuthStatus.macMismatch);
    const replica = this.#options.replica;
    if (hello.replica < this.#options.replicaCount && dials(replica, hello.replica) && hello.peerReplica === replica) {
      // A higher index never dials; its Hello to us is an announcement (`announceHello`).
      this.#stage = 'done';
      return { kind: 'announced', peer: hello.replica };
    }
    // The initiator must be another replica of this cluster with a lower index (only the lower
    // index dials), and must have meant to reach us (its address list agrees with ours).
    if (
      hello.replica >= this.#options.replicaCount ||
      !dials(hello.replica, replica) ||
      hello.peerReplica !== replica
    ) {
      return this.#refuse(ReplicaAuthStatus.replicaMismatch);
    }
    this.#stage = 'finish';
    this.#hello = hello;
    this.#nonce = freshNonce(this.#options);
    const mac = authMac(this.#options.key, { ...this.#transcript(hello, this.#nonce), direction: AuthDirection.challenge });
    return { kind: 'continue', send: this.#challenge(ReplicaAuthStatus.ok, this.#nonce, mac), claimed: hello.replica };
  }

  #onFinish(finish: ReplicaFinishHeader): HandshakeStep {
    const hello = this.#hello;
    const nonce = this.#nonce;
    assert(hello !== null && nonce !== null);
    if (finish.status !== ReplicaAuthStatus.ok) return { kind: 'refused', failure: AuthFailure.peerRefused, send: null };
    // The same connection carries both messages, but the sender field is checked anyway: a Finish
    // must come from the replica the Hello named.
    if (finish.replica !== hello.replica) return { kind: 'refused', failure: AuthFailure.replicaMismatch, send: null };
    const expected = authMac(this.#options.key, { ...this.#transcript(hello, nonce), direction: AuthDirection.finish });
    // No status goes back: Finish is the last message, the close says it.
    if (!macMatches(expected, finish.mac)) return { kind: 'refused', failure: AuthFailure.macMismatch, send: null };
    return { kind: 'established', peer: hello.replica, send: null };
  }

  #transcript(hello: ReplicaHelloHeader, nonce: Uint8Array): Omit<TranscriptInput, 'direction'> {
    return {
      mode: this.#mode,
      cluster: this.#options.cluster,
      initiator: hello.replica,
      acceptor: this.#options.replica,
      nonceInitiator: hello.nonce,
      nonceAcceptor: nonce,
    };
  }

  #refuse(status: RefusalStatus): HandshakeStep {
    this.#stage = 'done';
    return { kind: 'refused', failure: STATUS_FAILURE[status], send: this.#challenge(status, ZERO_32, ZERO_32) };
  }

  #challenge(status: ReplicaAuthStatus, nonce: Uint8Array, mac: Uint8Array): Uint8Array {
    return buildFrame(this.#options.kernels, {
      command: Command.replicaChallenge,
      cluster: this.#options.cluster,
      view: 0,
      release: 0,
      replica: this.#options.replica,
      nonce,
      mac,
      mode: this.#mode,
      status,
    });
  }
}

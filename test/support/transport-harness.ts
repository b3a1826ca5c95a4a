/**
 * Real-socket harness for the replica bus tests: buses on 127.0.0.1 with ports from listen(0),
 * a raw-socket "replica" that speaks the handshake by hand (to send what a real bus never would),
 * frame builders, and polling with short timeouts instead of sleeps.
 */
import { connect, type Socket } from 'node:net';
import { Command } from '../../src/constants.js';
import { buildFrame } from '../../src/vsr/frame.js';
import { decodeFrame, type DecodedFrame } from '../../src/transport/frame-decoder.js';
import { deriveAuthKey, helloMac, InitiatorHandshake, type HandshakeStep } from '../../src/transport/replica-auth.js';
import { randomBytes } from 'node:crypto';
import { ReplicaAuthMode } from '../../src/vsr/header.js';
import { ReplicaBus, type ReplicaBusOptions } from '../../src/transport/tcp-bus.js';
import { Operation } from '../../src/metadata/operations.js';
import { tsKernels } from './wire-fixtures.js';

export const kernels = tsKernels;
export const CLUSTER = 0x7a11_0c0d_e5e1_f00d_0123_4567_89ab_cdefn;
export const HOST = '127.0.0.1';

/** The cluster secret of every test bus unless a test gives one (the bus requires a secret). */
export const TEST_SECRET = new TextEncoder().encode('transport-harness-secret-0123456789abcdef');

/**
 * A Hello from `replica` to `peerReplica`, MAC'd with `secret` (the harness's by default; null:
 * an all-zero MAC, as a sender without the key would send).
 */
export function helloFrame(options: {
  readonly replica: number;
  readonly peerReplica: number;
  readonly mode?: number;
  readonly secret?: Uint8Array | null;
  readonly nonce?: Uint8Array;
}): Uint8Array {
  const fields = { cluster: CLUSTER, replica: options.replica, peerReplica: options.peerReplica, nonce: options.nonce ?? new Uint8Array(randomBytes(32)) };
  const mode = options.mode ?? ReplicaAuthMode.psk;
  const secret = options.secret === undefined ? TEST_SECRET : options.secret;
  const mac = secret === null || mode !== ReplicaAuthMode.psk ? new Uint8Array(32) : helloMac(deriveAuthKey(secret, CLUSTER), fields);
  return buildFrame(kernels, { command: Command.replicaHello, view: 0, release: 0, mode, mac, ...fields });
}

/** Fast reconnects so restart tests take milliseconds, not seconds. */
export const FAST_RECONNECT = { delayMinMs: 5, delayMaxMs: 100, jitter: 0.5 } as const;

export interface Received {
  readonly frame: DecodedFrame;
  readonly from: number;
}

export interface Node {
  readonly replica: number;
  readonly bus: ReplicaBus;
  readonly received: Received[];
}

export type NodeOptions = Partial<Omit<ReplicaBusOptions, 'replica' | 'addresses' | 'onMessage'>>;

/** Polls `condition` every few ms; fails with `what` after `timeoutMs`. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Lets pending IO run for a short while (used only to show that something does *not* happen). */
export async function settle(ms = 50): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

export function createNode(replica: number, addresses: readonly string[], options: NodeOptions = {}): Node {
  const received: Received[] = [];
  const bus = new ReplicaBus({
    replica,
    addresses,
    cluster: CLUSTER,
    kernels,
    reconnect: FAST_RECONNECT,
    handshakeTimeoutMs: 2_000,
    clusterSecret: TEST_SECRET,
    ...options,
    onMessage: (frame, from) => received.push({ frame, from }),
  });
  return { replica, bus, received };
}

/** Closes everything it created, in afterEach. */
export class Harness {
  readonly #buses = new Set<ReplicaBus>();
  readonly #sockets = new Set<Socket>();

  track(bus: ReplicaBus): ReplicaBus {
    this.#buses.add(bus);
    return bus;
  }

  trackSocket(socket: Socket): Socket {
    this.#sockets.add(socket);
    return socket;
  }

  /**
   * Starts buses for `replicas` (indexes of a `replicaCount` cluster) on ephemeral ports and tells
   * each the others' ports. `ports` pins a replica's port (a restart on the same address).
   */
  async start(
    replicaCount: number,
    options: {
      readonly replicas?: readonly number[];
      readonly ports?: readonly number[];
      readonly node?: (replica: number) => NodeOptions;
    } = {},
  ): Promise<{ nodes: Node[]; ports: number[] }> {
    const replicas = options.replicas ?? Array.from({ length: replicaCount }, (_, index) => index);
    const ports = options.ports?.slice() ?? new Array<number>(replicaCount).fill(0);
    const addresses = ports.map((port) => `${HOST}:${port}`);
    const nodes = replicas.map((replica) => createNode(replica, addresses, options.node?.(replica) ?? {}));
    for (const node of nodes) {
      this.track(node.bus);
      ports[node.replica] = (await node.bus.listen()).port;
    }
    for (const node of nodes) {
      for (let peer = 0; peer < replicaCount; peer++) {
        if (peer !== node.replica && ports[peer] !== 0) node.bus.setPeerAddress(peer, `${HOST}:${ports[peer]}`);
      }
    }
    return { nodes, ports };
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await Promise.all([...this.#buses].map((bus) => bus.close()));
    this.#buses.clear();
    this.#sockets.clear();
  }
}

/** A header-only Commit (heartbeat) from `replica`; `commit` tells frames apart. */
export function commitFrame(replica: number, commit: number, cluster = CLUSTER): Uint8Array {
  return buildFrame(kernels, {
    command: Command.commit,
    cluster,
    view: 1,
    release: 0,
    replica,
    commitChecksum: 0n,
    timestampMonotonic: 1,
    commit,
    checkpointOp: 0,
    group: 0n,
  });
}

/** A Prepare prepared by `primary` with a patterned body of `bodySize` bytes. */
export function prepareFrame(primary: number, op: number, bodySize: number): Uint8Array {
  const body = new Uint8Array(bodySize);
  for (let index = 0; index < bodySize; index++) body[index] = (index * 31 + op) & 0xff;
  return buildFrame(
    kernels,
    {
      command: Command.prepare,
      cluster: CLUSTER,
      view: 1,
      release: 0,
      replica: primary,
      client: 0xc11en,
      parent: 0xabcn,
      requestChecksum: 0x99n,
      op,
      commit: op - 1,
      timestamp: 1_700_000_000_000_000,
      request: 1,
      operation: Operation.createStream,
      group: 0n,
      userId: 1,
    },
    body,
  );
}

export function commitsFrom(node: Node, from: number): number[] {
  return node.received
    .filter((entry) => entry.from === from && entry.frame.header.command === Command.commit)
    .map((entry) => (entry.frame.header.command === Command.commit ? entry.frame.header.commit : -1));
}

/**
 * A hand-driven replica: a raw TCP socket that dials a bus, runs the initiator handshake with the
 * real state machine (so it can authenticate, or be made to fail), then writes arbitrary bytes.
 */
export class RawPeer {
  readonly socket: Socket;
  /** Every byte the bus sent us. */
  readonly chunks: Buffer[] = [];
  closed = false;

  constructor(harness: Harness, port: number) {
    this.socket = harness.trackSocket(connect({ host: HOST, port }));
    this.socket.on('data', (chunk: Buffer) => this.chunks.push(chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      this.closed = true;
    });
  }

  write(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  bytes(): Uint8Array {
    return new Uint8Array(Buffer.concat(this.chunks));
  }

  /** The 256-byte frames received so far, decoded (handshake frames are header-only). */
  frames(): DecodedFrame[] {
    const bytes = this.bytes();
    const frames: DecodedFrame[] = [];
    for (let offset = 0; offset + 256 <= bytes.byteLength; offset += 256) {
      const result = decodeFrame(kernels, bytes.subarray(offset, offset + 256));
      if (result.ok) frames.push(result);
    }
    return frames;
  }

  /**
   * Completes the handshake as replica `replica` (dialling `peer`) with `secret` (the harness's
   * by default). Returns the initiator's final step, so a test can check an expected refusal.
   */
  async handshake(options: {
    readonly replica: number;
    readonly peer: number;
    readonly replicaCount: number;
    readonly secret?: Uint8Array;
    /** Waits this long after the Challenge before answering it (a slow but honest peer). */
    readonly holdFinishMs?: number;
  }): Promise<HandshakeStep> {
    const handshake = new InitiatorHandshake({
      kernels,
      cluster: CLUSTER,
      replica: options.replica,
      peer: options.peer,
      replicaCount: options.replicaCount,
      key: deriveAuthKey(options.secret ?? TEST_SECRET, CLUSTER),
    });
    this.write(handshake.hello());
    await waitFor(() => this.bytes().byteLength >= 256 || this.closed, 'a Challenge');
    const challenge = this.frames()[0];
    if (challenge === undefined) throw new Error('no Challenge received');
    const step = handshake.onFrame(challenge.header);
    if (options.holdFinishMs !== undefined) await settle(options.holdFinishMs);
    if ('send' in step && step.send !== null) this.write(step.send);
    return step;
  }
}

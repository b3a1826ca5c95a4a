/**
 * Replica authentication: the handshake state machines on their own (transcript layout, MAC
 * binding, reflection, mode and replica checks), then over real sockets with cluster secrets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Command, HEADER_SIZE } from '../../src/constants.js';
import {
  AUTH_DOMAIN_TAG,
  AcceptorHandshake,
  AuthDirection,
  AuthFailure,
  InitiatorHandshake,
  TRANSCRIPT_SIZE,
  authMac,
  authTranscript,
  deriveAuthKey,
  type HandshakeStep,
  type TranscriptInput,
} from '../../src/transport/replica-auth.js';
import { decodeFrame } from '../../src/transport/frame-decoder.js';
import { AUTH_FAILURE_LOGS_PER_WINDOW_MAX } from '../../src/transport/tcp-bus.js';
import { buildFrame } from '../../src/vsr/frame.js';
import { ReplicaAuthMode, ReplicaAuthStatus, type Header } from '../../src/vsr/header.js';
import { CLUSTER, Harness, RawPeer, commitFrame, commitsFrom, kernels, settle, waitFor, type Node } from '../support/transport-harness.js';

const SECRET = new TextEncoder().encode('correct horse battery staple');
const WRONG = new TextEncoder().encode('correct horse battery stapler');
const KEY = deriveAuthKey(SECRET, CLUSTER);

function header(frame: Uint8Array): Header {
  expect(frame.byteLength).toBe(HEADER_SIZE);
  const decoded = decodeFrame(kernels, frame, { cluster: CLUSTER });
  if (!decoded.ok) throw new Error(`handshake frame does not decode: ${decoded.reason}`);
  return decoded.header;
}

function sent(step: HandshakeStep): Header {
  const send = 'send' in step ? step.send : null;
  expect(send).not.toBeNull();
  return header(send!);
}

function pair(options: { initiatorKey?: ReturnType<typeof deriveAuthKey>; acceptorKey?: ReturnType<typeof deriveAuthKey> } = {}) {
  const common = { kernels, cluster: CLUSTER, replicaCount: 3 };
  const initiator = new InitiatorHandshake({ ...common, replica: 0, peer: 1, key: options.initiatorKey ?? KEY });
  const acceptor = new AcceptorHandshake({ ...common, replica: 1, key: options.acceptorKey ?? KEY });
  return { initiator, acceptor };
}

/** A Hello in mode none (zero MACs): what an unauthenticated peer, or one probing for it, sends. */
function modeNoneHello(replica = 0, peerReplica = 1): Uint8Array {
  return buildFrame(kernels, {
    command: Command.replicaHello,
    cluster: CLUSTER,
    view: 0,
    release: 0,
    replica,
    nonce: new Uint8Array(32).fill(7),
    mode: ReplicaAuthMode.none,
    peerReplica,
    mac: new Uint8Array(32),
  });
}

describe('replica auth handshake (state machines)', () => {
  it('the transcript is the documented layout', () => {
    const input: TranscriptInput = {
      direction: AuthDirection.finish,
      mode: ReplicaAuthMode.psk,
      cluster: CLUSTER,
      initiator: 3,
      acceptor: 5,
      nonceInitiator: new Uint8Array(32).fill(0xaa),
      nonceAcceptor: new Uint8Array(32).fill(0xbb),
    };
    const transcript = authTranscript(input);
    const tag = new TextEncoder().encode(`${AUTH_DOMAIN_TAG}\0`);
    expect(transcript.byteLength).toBe(TRANSCRIPT_SIZE);
    expect(transcript.subarray(0, tag.byteLength)).toEqual(tag);
    let offset = tag.byteLength;
    expect([transcript[offset], transcript[offset + 1]]).toEqual([AuthDirection.finish, ReplicaAuthMode.psk]);
    offset += 2;
    expect(Buffer.from(transcript.subarray(offset, offset + 16)).readBigUInt64LE(0)).toBe(CLUSTER & 0xffff_ffff_ffff_ffffn);
    expect(Buffer.from(transcript.subarray(offset, offset + 16)).readBigUInt64LE(8)).toBe(CLUSTER >> 64n);
    offset += 16;
    expect([transcript[offset], transcript[offset + 1]]).toEqual([3, 5]);
    offset += 2;
    expect(transcript.subarray(offset, offset + 32).every((byte) => byte === 0xaa)).toBe(true);
    expect(transcript.subarray(offset + 32, offset + 64).every((byte) => byte === 0xbb)).toBe(true);
    expect(offset + 64).toBe(TRANSCRIPT_SIZE);
  });

  it('every transcript field changes the MAC, and so does the key', () => {
    const base: TranscriptInput = {
      direction: AuthDirection.challenge,
      mode: ReplicaAuthMode.psk,
      cluster: CLUSTER,
      initiator: 0,
      acceptor: 1,
      nonceInitiator: new Uint8Array(32).fill(1),
      nonceAcceptor: new Uint8Array(32).fill(2),
    };
    const mac = Buffer.from(authMac(KEY, base)).toString('hex');
    const variants: TranscriptInput[] = [
      { ...base, direction: AuthDirection.finish },
      { ...base, mode: ReplicaAuthMode.none },
      { ...base, cluster: CLUSTER + 1n },
      { ...base, initiator: 2 },
      { ...base, acceptor: 2 },
      { ...base, nonceInitiator: new Uint8Array(32).fill(3) },
      { ...base, nonceAcceptor: new Uint8Array(32).fill(3) },
      // Swapping the roles (and nonces) is a different transcript too.
      { ...base, initiator: 1, acceptor: 0, nonceInitiator: base.nonceAcceptor, nonceAcceptor: base.nonceInitiator },
    ];
    const macs = new Set([mac, ...variants.map((variant) => Buffer.from(authMac(KEY, variant)).toString('hex'))]);
    expect(macs.size).toBe(variants.length + 1);
    expect(Buffer.from(authMac(deriveAuthKey(WRONG, CLUSTER), base)).toString('hex')).not.toBe(mac);
    // The key is bound to the cluster as well.
    expect(Buffer.from(authMac(deriveAuthKey(SECRET, CLUSTER + 1n), base)).toString('hex')).not.toBe(mac);
    expect(authMac(KEY, base).byteLength).toBe(32);
  });

  it('mode psk: the same secret authenticates both sides', () => {
    const { initiator, acceptor } = pair({ initiatorKey: KEY, acceptorKey: KEY });
    const hello = header(initiator.hello());
    expect(hello).toMatchObject({ command: Command.replicaHello, replica: 0, peerReplica: 1, mode: ReplicaAuthMode.psk });
    const challengeStep = acceptor.onFrame(hello);
    expect(challengeStep.kind).toBe('continue');
    const challenge = sent(challengeStep);
    expect(challenge).toMatchObject({ command: Command.replicaChallenge, replica: 1, status: ReplicaAuthStatus.ok });
    const finishStep = initiator.onFrame(challenge);
    expect(finishStep).toMatchObject({ kind: 'established', peer: 1 });
    const finish = sent(finishStep);
    expect(finish).toMatchObject({ command: Command.replicaFinish, replica: 0, status: ReplicaAuthStatus.ok });
    expect(acceptor.onFrame(finish)).toEqual({ kind: 'established', peer: 0, send: null });
  });

  it('mode none is never spoken: the handshake needs a key, and a mode-none Hello is refused', () => {
    const common = { kernels, cluster: CLUSTER, replicaCount: 3 };
    // There is no configuration without a key: the state machines refuse to exist without one.
    expect(() => new AcceptorHandshake({ ...common, replica: 1, key: null as unknown as ReturnType<typeof deriveAuthKey> })).toThrow(/no unauthenticated mode/);
    expect(() => new InitiatorHandshake({ ...common, replica: 0, peer: 1, key: null as unknown as ReturnType<typeof deriveAuthKey> })).toThrow(/no unauthenticated mode/);
    const { initiator } = pair();
    expect(header(initiator.hello())).toMatchObject({ mode: ReplicaAuthMode.psk });
    const { acceptor } = pair();
    const step = acceptor.onFrame(header(modeNoneHello()));
    expect(step.kind === 'refused' && step.failure).toBe(AuthFailure.modeMismatch);
    const challenge = sent(step);
    expect(challenge.command === Command.replicaChallenge && challenge.status).toBe(ReplicaAuthStatus.modeMismatch);
  });

  it('a wrong secret is refused at the Hello: the acceptor answers macMismatch without a Challenge MAC', () => {
    const { initiator, acceptor } = pair({ initiatorKey: deriveAuthKey(WRONG, CLUSTER), acceptorKey: KEY });
    const refusal = acceptor.onFrame(header(initiator.hello()));
    expect(refusal).toMatchObject({ kind: 'refused', failure: AuthFailure.macMismatch });
    const challenge = sent(refusal);
    expect(challenge.command === Command.replicaChallenge && challenge.status).toBe(ReplicaAuthStatus.macMismatch);
    expect(challenge.command === Command.replicaChallenge && challenge.mac.every((byte) => byte === 0)).toBe(true);
    expect(initiator.onFrame(challenge)).toMatchObject({ kind: 'refused', failure: AuthFailure.peerRefused });
  });

  it('a Hello MAC that does not verify is refused, whatever else the Hello says', () => {
    const { initiator, acceptor } = pair();
    const hello = header(initiator.hello());
    if (hello.command !== Command.replicaHello) throw new Error('expected a Hello');
    const forged = { ...hello, mac: hello.mac.map((byte, index) => (index === 0 ? byte ^ 1 : byte)) } as Header;
    expect(acceptor.onFrame(forged)).toMatchObject({ kind: 'refused', failure: AuthFailure.macMismatch });
    expect(acceptor.claimedPeer).toBe(0);
    // The same Hello unforged is accepted and names its sender as the claim.
    expect(pair().acceptor.onFrame(hello)).toMatchObject({ kind: 'continue', claimed: 0 });
  });

  it('a Challenge MAC that does not verify fails at the initiator, and its refusal carries macMismatch', () => {
    const { initiator, acceptor } = pair();
    const challenge = sent(acceptor.onFrame(header(initiator.hello())));
    if (challenge.command !== Command.replicaChallenge) throw new Error('expected a Challenge');
    const forged = { ...challenge, mac: challenge.mac.map((byte) => byte ^ 0x80) } as Header;
    const step = initiator.onFrame(forged);
    expect(step.kind === 'refused' && step.failure).toBe(AuthFailure.macMismatch);
    const finish = sent(step);
    expect(finish.command === Command.replicaFinish && finish.status).toBe(ReplicaAuthStatus.macMismatch);
    expect(acceptor.onFrame(finish)).toMatchObject({ kind: 'refused', failure: AuthFailure.peerRefused });
  });

  it('a forged Finish MAC fails at the acceptor', () => {
    const { initiator, acceptor } = pair({ initiatorKey: KEY, acceptorKey: KEY });
    const challenge = sent(acceptor.onFrame(header(initiator.hello())));
    const finish = sent(initiator.onFrame(challenge));
    const forged = { ...finish, mac: finish.command === Command.replicaFinish ? finish.mac.map((byte) => byte ^ 1) : new Uint8Array(32) } as Header;
    expect(acceptor.onFrame(forged)).toEqual({ kind: 'refused', failure: AuthFailure.macMismatch, send: null });
  });

  it('a reflected MAC does not verify: the Challenge MAC sent back as the Finish MAC', () => {
    // An attacker without the key replays a Hello it recorded and echoes the acceptor's own MAC back.
    const recorded = pair().initiator.hello();
    const { acceptor } = pair();
    const challenge = sent(acceptor.onFrame(header(recorded)));
    if (challenge.command !== Command.replicaChallenge) throw new Error('expected a Challenge');
    const reflected = header(
      buildFrame(kernels, { command: Command.replicaFinish, cluster: CLUSTER, view: 0, release: 0, replica: 0, mac: challenge.mac, status: 0 }),
    );
    expect(acceptor.onFrame(reflected)).toMatchObject({ kind: 'refused', failure: AuthFailure.macMismatch });
  });

  it('a recorded Finish does not verify against a fresh acceptor nonce (replay)', () => {
    const first = pair({ initiatorKey: KEY, acceptorKey: KEY });
    const hello = first.initiator.hello();
    const finish = sent(first.initiator.onFrame(sent(first.acceptor.onFrame(header(hello)))));
    // The attacker replays the recorded Hello and Finish to a new acceptor.
    const replayed = pair({ acceptorKey: KEY }).acceptor;
    expect(replayed.onFrame(header(hello)).kind).toBe('continue');
    expect(replayed.onFrame(finish)).toMatchObject({ kind: 'refused', failure: AuthFailure.macMismatch });
  });

  it('the initiator refuses a Challenge in mode none (no downgrade), with status modeMismatch', () => {
    const { initiator } = pair();
    initiator.hello();
    const downgraded = unauthenticatedChallenge(1);
    const step = initiator.onFrame(downgraded);
    expect(step.kind === 'refused' && step.failure).toBe(AuthFailure.modeMismatch);
    expect(sent(step)).toMatchObject({ command: Command.replicaFinish, status: ReplicaAuthStatus.modeMismatch });
  });

  it('the initiator refuses a Challenge from a replica it did not dial, or in another mode', () => {
    const { initiator } = pair();
    initiator.hello();
    const fromReplica2 = unauthenticatedChallenge(2);
    const step = initiator.onFrame(fromReplica2);
    expect(step.kind === 'refused' && step.failure).toBe(AuthFailure.replicaMismatch);
    expect(sent(step)).toMatchObject({ command: Command.replicaFinish, status: ReplicaAuthStatus.replicaMismatch });

    const second = pair({ initiatorKey: KEY });
    second.initiator.hello();
    const noneMode = { ...fromReplica2, replica: 1 } as Header;
    expect(second.initiator.onFrame(noneMode)).toMatchObject({ kind: 'refused', failure: AuthFailure.modeMismatch });
  });

  it('any frame out of order fails the handshake', () => {
    const { initiator, acceptor } = pair();
    const commit = header(commitFrame(0, 1));
    expect(acceptor.onFrame(commit)).toMatchObject({ kind: 'refused', failure: AuthFailure.unexpectedFrame });
    initiator.hello();
    expect(initiator.onFrame(commit)).toMatchObject({ kind: 'refused', failure: AuthFailure.unexpectedFrame });
    // A second Hello where a Finish is due.
    const fresh = pair();
    const hello = header(fresh.initiator.hello());
    fresh.acceptor.onFrame(hello);
    expect(fresh.acceptor.onFrame(hello)).toMatchObject({ kind: 'refused', failure: AuthFailure.unexpectedFrame });
  });
});

/** A Challenge in mode none from `replica` (no MAC): what a downgrade or a stranger sends. */
function unauthenticatedChallenge(replica: number): Header {
  return header(
    buildFrame(kernels, {
      command: Command.replicaChallenge,
      cluster: CLUSTER,
      view: 0,
      release: 0,
      replica,
      nonce: new Uint8Array(32).fill(9),
      mac: new Uint8Array(32),
      mode: ReplicaAuthMode.none,
      status: ReplicaAuthStatus.ok,
    }),
  );
}

const harness = new Harness();
afterEach(() => harness.close());

function secrets(map: Record<number, Uint8Array>) {
  return (replica: number) => (map[replica] === undefined ? {} : { clusterSecret: map[replica] });
}

/** Sends a few frames every way between `nodes`. */
function chatter(nodes: readonly Node[]): void {
  for (const node of nodes) {
    for (const peer of nodes) if (peer !== node) node.bus.sendToReplica(peer.replica, commitFrame(node.replica, 1));
  }
}

describe('replica auth over sockets', () => {
  it('replicas with the same secret connect and exchange frames', async () => {
    const { nodes } = await harness.start(3, { node: secrets({ 0: SECRET, 1: SECRET, 2: SECRET }) });
    await waitFor(() => nodes.every((node) => node.bus.stats().peers.every((peer) => peer.connected)), 'every pair connected');
    chatter(nodes);
    await waitFor(() => nodes.every((node) => node.received.length === 2), 'frames both ways');
    for (const node of nodes) expect(node.bus.stats().peers.every((peer) => Object.keys(peer.authFailures).length === 0)).toBe(true);
  });

  it('a replica with the wrong secret is refused either way round and never delivers a frame', async () => {
    // Replica 1 has the wrong secret: 0 dials it (it is the acceptor), it dials 2 (it is the initiator).
    const { nodes } = await harness.start(3, { node: secrets({ 0: SECRET, 1: WRONG, 2: SECRET }) });
    const [node0, node1, node2] = nodes as [Node, Node, Node];
    await waitFor(() => node0.bus.connected(2), 'the honest pair connects');
    // Each acceptor refuses the other side's Hello on its MAC; each initiator is told so.
    await waitFor(
      () =>
        (node1.bus.stats().inbound.authFailures.mac_mismatch ?? 0) >= 1 &&
        (node2.bus.stats().inbound.authFailures.mac_mismatch ?? 0) >= 1 &&
        (node0.bus.stats().peers[0]?.authFailures.peer_refused ?? 0) >= 1 &&
        (node1.bus.stats().peers[1]?.authFailures.peer_refused ?? 0) >= 1,
      'both handshakes with replica 1 fail on the Hello MAC',
    );
    chatter(nodes);
    node0.bus.sendToReplica(2, commitFrame(0, 77));
    await waitFor(() => commitsFrom(node2, 0).includes(77), 'the honest link still works');
    await settle(50);
    expect(node1.received).toEqual([]);
    expect(node0.received.filter((entry) => entry.from === 1)).toEqual([]);
    expect(node2.received.filter((entry) => entry.from === 1)).toEqual([]);
    expect(node0.bus.connected(1) || node1.bus.connected(0) || node1.bus.connected(2) || node2.bus.connected(1)).toBe(false);
  });

  it('a peer offering mode none (no secret) is refused with modeMismatch, counted, and never delivers a frame', async () => {
    const { nodes, ports } = await harness.start(3, { replicas: [1, 2], node: secrets({ 1: SECRET, 2: SECRET }) });
    const node1 = nodes[0]!;
    const peer = new RawPeer(harness, ports[1]!);
    // The Hello and, right behind it, frames an unauthenticated replica would send.
    peer.write(Buffer.concat([modeNoneHello(), commitFrame(0, 1), commitFrame(0, 2)]));
    await waitFor(() => peer.closed, 'refused and closed');
    const challenge = peer.frames()[0]?.header;
    expect(challenge?.command === Command.replicaChallenge && challenge.status).toBe(ReplicaAuthStatus.modeMismatch);
    await settle(20);
    expect(node1.received).toEqual([]);
    expect(node1.bus.stats().inbound.authFailures).toEqual({ mode_mismatch: 1 });
    expect(node1.bus.connected(0)).toBe(false);
  });

  it('a raw socket without the key cannot inject a frame, even after a well-formed handshake', async () => {
    const { nodes, ports } = await harness.start(3, { replicas: [1, 2], node: secrets({ 1: SECRET, 2: SECRET }) });
    const node1 = nodes[0]!;
    // It knows the protocol and the mode, not the secret: it completes the exchange with a guessed key.
    const peer = new RawPeer(harness, ports[1]!);
    const step = await peer.handshake({ replica: 0, peer: 1, replicaCount: 3, secret: WRONG });
    expect(step.kind === 'refused' && step.failure).toBe(AuthFailure.peerRefused);
    peer.write(commitFrame(0, 1));
    await waitFor(() => peer.closed, 'closed');
    expect(node1.received).toEqual([]);

    // Now one that sends a Finish with a made-up MAC and then frames right behind it.
    const forger = new RawPeer(harness, ports[1]!);
    const hello = new InitiatorHandshake({ kernels, cluster: CLUSTER, replica: 0, peer: 1, replicaCount: 3, key: deriveAuthKey(WRONG, CLUSTER) });
    forger.write(hello.hello());
    await waitFor(() => forger.frames().length === 1, 'a refusal');
    const finish = buildFrame(kernels, {
      command: Command.replicaFinish,
      cluster: CLUSTER,
      view: 0,
      release: 0,
      replica: 0,
      mac: new Uint8Array(32).fill(0x5a),
      status: ReplicaAuthStatus.ok,
    });
    forger.write(Buffer.concat([finish, commitFrame(0, 2), commitFrame(0, 3)]));
    await waitFor(() => forger.closed, 'closed');
    await settle(20);
    expect(node1.received).toEqual([]);
    expect(node1.bus.stats().inbound.authFailures).toMatchObject({ mac_mismatch: 2 });
    expect(node1.bus.connected(0)).toBe(false);
  });

  it('with the secret, a raw peer that authenticates can send (the test peer is sound)', async () => {
    const { nodes, ports } = await harness.start(3, { replicas: [1, 2], node: secrets({ 1: SECRET, 2: SECRET }) });
    const node1 = nodes[0]!;
    const peer = new RawPeer(harness, ports[1]!);
    const step = await peer.handshake({ replica: 0, peer: 1, replicaCount: 3, secret: SECRET });
    expect(step.kind).toBe('established');
    peer.write(commitFrame(0, 5));
    await waitFor(() => node1.received.length === 1, 'the frame');
    expect(node1.received[0]?.from).toBe(0);
  });
});

describe('replica auth failures are counted and logged, the log bounded', () => {
  it('every failure is counted; log lines stop at the per-window maximum', async () => {
    const lines: { event: string; fields: Record<string, unknown> }[] = [];
    const logger = { log: (_level: string, event: string, fields?: Readonly<Record<string, unknown>>) => lines.push({ event, fields: { ...fields } }) };
    const { nodes, ports } = await harness.start(3, { replicas: [1], node: () => ({ logger }) });
    const node1 = nodes[0]!;
    const attempts = AUTH_FAILURE_LOGS_PER_WINDOW_MAX + 5;
    for (let index = 0; index < attempts; index++) {
      const peer = new RawPeer(harness, ports[1]!);
      peer.write(modeNoneHello());
      await waitFor(() => peer.closed, 'refused');
    }
    expect(node1.bus.stats().inbound.authFailures).toEqual({ mode_mismatch: attempts });
    const failures = lines.filter((line) => line.event === 'replica bus: handshake failed');
    expect(failures).toHaveLength(AUTH_FAILURE_LOGS_PER_WINDOW_MAX);
    expect(failures[0]!.fields).toMatchObject({ failure: 'mode_mismatch', claimed: 0, remote: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
  });
});

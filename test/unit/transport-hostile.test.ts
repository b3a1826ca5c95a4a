/**
 * Hostile bytes on a replica connection, from a raw socket: whatever arrives, the replica never
 * sees a bad frame, the process never throws, the connection is closed (or the frame dropped) and
 * the reason is counted. The raw peer plays replica 0 of a 3-replica cluster; real buses run
 * replicas 1 and 2 (replica 0 is the lowest index, so nobody dials it).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Command, HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX } from '../../src/constants.js';
import { buildFrame } from '../../src/vsr/frame.js';
import { ReplicaAuthStatus, writeU32 } from '../../src/vsr/header.js';
import {
  CLUSTER,
  Harness,
  RawPeer,
  commitFrame,
  commitsFrom,
  helloFrame,
  kernels,
  prepareFrame,
  settle,
  waitFor,
  type Node,
} from '../support/transport-harness.js';

const harness = new Harness();
afterEach(() => harness.close());

/** Buses for replicas 1 and 2; the raw peer will be replica 0. */
async function cluster(handshakeTimeoutMs = 2_000): Promise<{ node1: Node; node2: Node; port1: number }> {
  const { nodes, ports } = await harness.start(3, { replicas: [1, 2], node: () => ({ handshakeTimeoutMs }) });
  const [node1, node2] = nodes as [Node, Node];
  await waitFor(() => node1.bus.connected(2), 'replicas 1 and 2 connected');
  return { node1, node2, port1: ports[1]! };
}

/** A raw replica 0 that has completed the mode-none handshake with replica 1. */
async function authenticatedPeer(node1: Node, port1: number): Promise<RawPeer> {
  const peer = new RawPeer(harness, port1);
  const step = await peer.handshake({ replica: 0, peer: 1, replicaCount: 3 });
  expect(step.kind).toBe('established');
  await waitFor(() => node1.bus.connected(0), 'replica 1 accepted the raw replica 0');
  return peer;
}

function peerStats(node: Node, replica: number) {
  const stats = node.bus.stats().peers.find((peer) => peer.replica === replica);
  expect(stats).toBeDefined();
  return stats!;
}

describe('replica bus: hostile input', () => {
  it('an authenticated peer can send frames, delivered with its index', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    peer.write(commitFrame(0, 5));
    await waitFor(() => node1.received.length === 1, 'the frame');
    expect(node1.received[0]?.from).toBe(0);
  });

  it('garbage bytes before the handshake close the connection, counted, nothing delivered', async () => {
    const { node1, port1 } = await cluster();
    const peer = new RawPeer(harness, port1);
    const garbage = randomBytes(4096);
    writeU32(garbage, HeaderOffset.size, 0xdead_beef);
    peer.write(garbage);
    await waitFor(() => peer.closed, 'the connection closed');
    expect(node1.bus.stats().inbound).toMatchObject({
      rejected: { handshake_size_invalid: 1 },
      authFailures: { frame_rejected: 1 },
    });
    expect(node1.received).toEqual([]);
  });

  it('garbage after the handshake closes the connection, counted against the peer', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    const garbage = randomBytes(4096);
    // A plausible size and command, so the seal is what fails.
    writeU32(garbage, HeaderOffset.size, 512);
    garbage[HeaderOffset.command] = Command.commit;
    peer.write(garbage);
    await waitFor(() => peer.closed, 'the connection closed');
    await waitFor(() => !node1.bus.connected(0), 'replica 1 dropped the connection');
    expect(peerStats(node1, 0).rejected).toEqual({ seal_mismatch: 1 });
    expect(node1.received).toEqual([]);
  });

  it('a corrupted frame (one body bit) closes the connection; the frames before it were delivered', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    const good = prepareFrame(0, 1, 1000);
    const bad = prepareFrame(0, 2, 1000);
    bad[HEADER_SIZE + 500]! ^= 0x10;
    const after = commitFrame(0, 9);
    peer.write(Buffer.concat([good, bad, after]));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(peerStats(node1, 0).rejected).toEqual({ body_checksum_mismatch: 1 });
    expect(node1.received.map((entry) => entry.frame.header.command === Command.prepare && entry.frame.header.op)).toEqual([1]);
  });

  it('an oversized size field closes the connection before any body is buffered', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    const frame = commitFrame(0, 1);
    writeU32(frame, HeaderOffset.size, MESSAGE_SIZE_MAX + 1);
    // Only the first 52 bytes: the size is refused as soon as it is readable.
    peer.write(frame.subarray(0, HeaderOffset.size + 4));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(peerStats(node1, 0).rejected).toEqual({ size_above_max: 1 });
  });

  it('a frame for another cluster closes the connection', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    peer.write(commitFrame(0, 1, CLUSTER + 1n));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(peerStats(node1, 0).rejected).toEqual({ cluster_mismatch: 1 });
  });

  it('impersonation: a frame naming another replica is dropped and counted, the connection stays', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    peer.write(commitFrame(2, 1)); // replica 0 speaking as replica 2
    peer.write(commitFrame(0, 2));
    await waitFor(() => node1.received.length === 1, 'the honest frame');
    expect(commitsFrom(node1, 0)).toEqual([2]);
    expect(commitsFrom(node1, 2)).toEqual([]);
    expect(peerStats(node1, 0).rejected).toEqual({ replica_impersonation: 1 });
    expect(peer.closed).toBe(false);
  });

  it('frames only clients receive and handshake frames after the handshake are refused', async () => {
    const { node1, port1 } = await cluster();
    const peer = await authenticatedPeer(node1, port1);
    const base = { cluster: CLUSTER, view: 0, release: 0, replica: 0 } as const;
    peer.write(buildFrame(kernels, { ...base, command: Command.pongClient }));
    peer.write(commitFrame(0, 3));
    await waitFor(() => node1.received.length === 1, 'the commit');
    expect(peerStats(node1, 0).rejected).toEqual({ client_command: 1 });
    peer.write(helloFrame({ replica: 0, peerReplica: 1 }));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(peerStats(node1, 0).rejected).toEqual({ client_command: 1, handshake_after_auth: 1 });
  });

  it('a replica frame before the handshake fails it and is never delivered', async () => {
    const { node1, port1 } = await cluster();
    const peer = new RawPeer(harness, port1);
    peer.write(commitFrame(0, 1));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(node1.bus.stats().inbound.authFailures).toEqual({ unexpected_frame: 1 });
    expect(node1.received).toEqual([]);
  });

  it('an oversized size field before the handshake is refused at 52 bytes', async () => {
    const { node1, port1 } = await cluster();
    const peer = new RawPeer(harness, port1);
    const frame = prepareFrame(0, 1, 100_000);
    peer.write(frame.subarray(0, HeaderOffset.size + 4));
    await waitFor(() => peer.closed, 'the connection closed');
    expect(node1.bus.stats().inbound.rejected).toEqual({ handshake_size_invalid: 1 });
  });

  it('a raw socket that never completes the handshake is closed after the deadline', async () => {
    const { node1, port1 } = await cluster(150);
    const silent = new RawPeer(harness, port1);
    const partial = new RawPeer(harness, port1);
    partial.write(new Uint8Array(HeaderOffset.size)); // part of a header (not yet its size), then nothing
    await waitFor(() => silent.closed && partial.closed, 'both closed by the deadline', 2_000);
    expect(node1.bus.stats().inbound).toMatchObject({ handshaking: 0, authFailures: { timeout: 2 } });
  });

  it('a Hello with a wrong replica index is refused with replicaMismatch', async () => {
    const { node1, port1 } = await cluster();
    const cases = [
      { replica: 7, peerReplica: 1 }, // not a replica of this 3-replica cluster
      { replica: 0, peerReplica: 2 }, // meant to reach replica 2: address lists disagree
    ];
    for (const { replica, peerReplica } of cases) {
      const peer = new RawPeer(harness, port1);
      peer.write(helloFrame({ replica, peerReplica }));
      await waitFor(() => peer.closed, 'refused and closed');
      const challenge = peer.frames()[0]?.header;
      expect(challenge?.command === Command.replicaChallenge && challenge.status).toBe(ReplicaAuthStatus.replicaMismatch);
    }
    expect(node1.bus.stats().inbound.authFailures).toEqual({ replica_mismatch: 2 });
    expect(node1.bus.connected(0)).toBe(false);
  });

  it('a Hello from a higher index is an announcement: no challenge, no failure, at most a sooner dial', async () => {
    const { node1, port1 } = await cluster();
    const peer = new RawPeer(harness, port1);
    peer.write(helloFrame({ replica: 2, peerReplica: 1 }));
    await waitFor(() => peer.closed, 'closed without an answer');
    expect(peer.frames()).toEqual([]);
    expect(node1.bus.stats().inbound.authFailures).toEqual({});
    expect(node1.bus.stats().peers.find((stats) => stats.replica === 2)?.announcesHeard).toBe(1);
  });

  it('a bus dialling an address that answers as another replica refuses it', async () => {
    // Replica 0's list says replica 1 is at replica 2's port.
    const { nodes, ports } = await harness.start(3, { replicas: [2] });
    const node2 = nodes[0]!;
    const wrong = await harness.start(3, { replicas: [0], ports: [0, ports[2]!, 0] });
    const node0 = wrong.nodes[0]!;
    await waitFor(() => (peerStats(node0, 1).authFailures.peer_refused ?? 0) >= 1, 'replica 2 refuses a Hello meant for 1');
    expect(node0.bus.connected(1)).toBe(false);
    expect(node2.bus.stats().inbound.authFailures.replica_mismatch).toBeGreaterThanOrEqual(1);
  });

  it('many hostile connections never throw and leave the honest link working', async () => {
    const { node1, node2, port1 } = await cluster();
    for (let index = 0; index < 20; index++) {
      const peer = new RawPeer(harness, port1);
      peer.write(randomBytes(1 + ((index * 97) % 700)));
      peer.socket.end();
    }
    await waitFor(() => node1.bus.stats().inbound.handshaking === 0 && node1.bus.stats().inbound.accepted === 20, 'all hostile sockets gone');
    node2.bus.sendToReplica(1, commitFrame(2, 42));
    await waitFor(() => commitsFrom(node1, 2).includes(42), 'the honest frame');
    await settle(10);
    expect(node1.received.every((entry) => entry.from === 2)).toBe(true);
  });
});

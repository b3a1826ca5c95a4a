/**
 * The replica TCP bus over real loopback sockets: delivery both ways with the authenticated
 * sender, batching under load, reconnect after a restart, bounded queues with counted drops,
 * and a close() that leaves nothing running.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { FramePool } from '../../src/transport/frame-pool.js';
import { ReplicaBus } from '../../src/transport/tcp-bus.js';
import { buildFrame, buildFrameHeader } from '../../src/vsr/frame.js';
import {
  CLUSTER,
  HOST,
  Harness,
  RawPeer,
  TEST_SECRET,
  commitFrame,
  commitsFrom,
  createNode,
  kernels,
  prepareFrame,
  waitFor,
  type Node,
} from '../support/transport-harness.js';

const harness = new Harness();
afterEach(() => harness.close());

function allConnected(nodes: readonly Node[]): boolean {
  return nodes.every((node) => node.bus.stats().peers.every((peer) => peer.connected));
}

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, index) => from + index);

describe('ReplicaBus', () => {
  it('3 buses exchange frames in both directions, in order, with the authenticated sender', async () => {
    const { nodes } = await harness.start(3);
    await waitFor(() => allConnected(nodes), 'every pair connected');
    for (const node of nodes) {
      for (const peer of nodes) {
        if (peer === node) continue;
        for (let commit = 1; commit <= 50; commit++) node.bus.sendToReplica(peer.replica, commitFrame(node.replica, commit));
      }
    }
    await waitFor(() => nodes.every((node) => node.received.length === 100), 'every node received 2 x 50 frames');
    for (const node of nodes) {
      for (const peer of nodes) {
        if (peer === node) continue;
        expect(commitsFrom(node, peer.replica)).toEqual(range(1, 50));
      }
      const stats = node.bus.stats();
      expect(stats.peers.map((peer) => [peer.replica, peer.sent, peer.received, peer.dropped, peer.connects])).toEqual(
        stats.peers.map((peer) => [peer.replica, 50, 50, 0, 1]),
      );
      // Lower indexes dial, higher ones accept.
      expect(stats.peers.map((peer) => peer.outbound)).toEqual(stats.peers.map((peer) => node.replica < peer.replica));
    }
  });

  it('delivers large frames that span many socket reads byte for byte, and forwarded prepares', async () => {
    const { nodes } = await harness.start(3);
    const [node0, node1, node2] = nodes as [Node, Node, Node];
    await waitFor(() => allConnected(nodes), 'every pair connected');
    const big = prepareFrame(0, 10, 900 * 1024);
    node0.bus.sendToReplica(1, big);
    await waitFor(() => node1.received.length === 1, 'the 900 KiB prepare');
    // Buffer.equals, not toEqual: a deep compare of 900 KiB element by element takes seconds.
    expect(Buffer.from(node1.received[0]!.frame.frame).equals(big)).toBe(true);
    expect(node1.received[0]?.from).toBe(0);
    // Chain replication: replica 1 forwards the primary's prepare (header replica 0) to replica 2.
    // It is delivered from 1: the sender check exempts prepares relayed verbatim.
    node1.bus.sendToReplica(2, big);
    await waitFor(() => node2.received.length === 1, 'the forwarded prepare');
    expect(node2.received[0]?.from).toBe(1);
    expect(node2.received[0]?.frame.header.replica).toBe(0);
    expect(node2.bus.stats().peers.find((peer) => peer.replica === 1)?.rejected).toEqual({});
  });

  it('a frame sent in parts (header + a view of a payload) arrives as the joined frame, in order with whole frames', async () => {
    const { nodes } = await harness.start(2);
    const [node0, node1] = nodes as [Node, Node];
    await waitFor(() => allConnected(nodes), 'connected');
    // A payload served in 256 KiB chunks: each chunk is a view, sealed with its sum, never copied.
    const chunkSize = 256 * 1024;
    const payload = new Uint8Array(3 * chunkSize - 1000);
    for (let index = 0; index < payload.byteLength; index++) payload[index] = (index * 31 + 7) & 0xff;
    const chunkInput = (offset: number) => ({
      command: Command.stateChunk,
      cluster: CLUSTER,
      view: 1,
      release: 0,
      replica: 0,
      nonce: 42n,
      offset,
      group: 0n,
      artifact: 0,
    } as const);
    const joined: Uint8Array[] = [];
    for (let offset = 0; offset < payload.byteLength; offset += chunkSize) {
      const body = payload.subarray(offset, Math.min(payload.byteLength, offset + chunkSize));
      node0.bus.sendToReplicaParts(1, buildFrameHeader(kernels, chunkInput(offset), body.byteLength, kernels.xxh3_64(body, 0n)), body);
      node0.bus.sendToReplica(1, commitFrame(0, offset / chunkSize + 1));
      joined.push(buildFrame(kernels, chunkInput(offset), body));
    }
    await waitFor(() => node1.received.length === 6, 'three chunks and three commits');
    const chunks = node1.received.filter((entry) => entry.frame.header.command === Command.stateChunk);
    expect(chunks.map((entry) => Buffer.from(entry.frame.frame).equals(joined.shift()!))).toEqual([true, true, true]);
    expect(node1.received.map((entry) => entry.frame.header.command)).toEqual([
      Command.stateChunk, Command.commit, Command.stateChunk, Command.commit, Command.stateChunk, Command.commit,
    ]);
    expect(node0.bus.stats().peers[0]).toMatchObject({ sent: 6, dropped: 0, queued: 0 });
  });

  it('the body of a frame sent in parts goes back to the sent-body pool once the socket wrote it, never before; other bodies are left alone', async () => {
    const pool = new FramePool(256 * 1024, 4);
    const { nodes } = await harness.start(2, { node: (replica) => (replica === 0 ? { sentBodyPool: pool } : {}) });
    const [node0, node1] = nodes as [Node, Node];
    await waitFor(() => allConnected(nodes), 'connected');
    const input = (offset: number) => ({
      command: Command.stateChunk, cluster: CLUSTER, view: 1, release: 0, replica: 0, nonce: 42n, offset, group: 0n, artifact: 0,
    } as const);
    const send = (body: Uint8Array, offset: number) => {
      node0.bus.sendToReplicaParts(1, buildFrameHeader(kernels, input(offset), body.byteLength, kernels.xxh3_64(body, 0n)), body);
    };
    // Two chunks read into pooled buffers and one view of a payload the pool never handed out.
    const pooled = [pool.take(200_000), pool.take(100_000)];
    pooled.forEach((body, index) => body.fill(index + 1));
    const held = new Uint8Array(50_000).fill(9);
    send(pooled[0]!, 0);
    send(pooled[1]!, 200_000);
    send(held, 300_000);
    // Queued, not written yet (the flush runs at the end of this turn): nothing is given back.
    expect(pool.freeCount).toBe(0);
    await waitFor(() => node1.received.length === 3, 'three chunks');
    await waitFor(() => pool.freeCount === 2, 'both pooled bodies given back');
    expect(pool.counters.kept).toBe(2);
    const bodies = node1.received.map((entry) => entry.frame.body);
    expect(bodies.map((body) => [body.byteLength, body[0]])).toEqual([[200_000, 1], [100_000, 2], [50_000, 9]]);
    // The pool hands the written buffers out again.
    pool.take(1000);
    expect(pool.counters.reused).toBe(1);
  });

  it('a dialed connection reads into one buffer of its own, reused read after read, and still delivers every frame intact', async () => {
    const { nodes } = await harness.start(2);
    const [node0, node1] = nodes as [Node, Node];
    await waitFor(() => allConnected(nodes), 'connected');
    // 64 frames of 100 KiB each way: many reads, most of them filling the 64 KiB buffer.
    const frames = range(1, 64).map((op) => prepareFrame(0, op, 100 * 1024));
    for (const frame of frames) {
      node0.bus.sendToReplica(1, frame);
      node1.bus.sendToReplica(0, frame);
    }
    await waitFor(() => node0.received.length === 64 && node1.received.length === 64, 'every frame both ways', 15_000);
    for (const node of nodes) {
      expect(node.received.map((entry) => Buffer.from(entry.frame.frame).equals(frames[entry.frame.header.command === Command.prepare ? entry.frame.header.op - 1 : 0]!))).toEqual(frames.map(() => true));
    }
    const [of0, of1] = [node0.bus.stats().peers[0]!, node1.bus.stats().peers[0]!];
    // The higher index dials: replica 1 reads its connection into its own buffer; replica 0
    // accepted it, and an accepted socket reads into Node's buffers.
    const [dialer, acceptor] = of1.outbound ? [of1, of0] : [of0, of1];
    expect(dialer.outbound && !acceptor.outbound).toBe(true);
    expect(dialer.reads).toBeGreaterThan(10);
    expect(dialer.readsIntoOwnBuffer).toBe(dialer.reads);
    expect(acceptor.reads).toBeGreaterThan(10);
    expect(acceptor.readsIntoOwnBuffer).toBe(0);
  });

  it('batches a burst larger than the socket buffer and honours backpressure without losing frames', async () => {
    const { nodes } = await harness.start(2, { node: () => ({ queueCapacity: 4096 }) });
    const [node0, node1] = nodes as [Node, Node];
    await waitFor(() => allConnected(nodes), 'connected');
    // 1000 x 8 KiB = 8 MiB in one tick: far beyond the socket's 16 KiB high-water mark.
    const frames = range(1, 1000).map((op) => prepareFrame(0, op, 8 * 1024));
    for (const frame of frames) node0.bus.sendToReplica(1, frame);
    // One flush (at the end of this event-loop turn) later most frames still wait in the bounded
    // queue: the flush stopped when the socket reported backpressure instead of buffering 8 MiB.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const afterFirstFlush = node0.bus.stats().peers[0]!;
    expect(afterFirstFlush.sent).toBeGreaterThan(0);
    expect(afterFirstFlush.queued).toBeGreaterThan(500);
    await waitFor(() => node1.received.length === frames.length, 'all 1000 frames', 15_000);
    expect(node1.received.map((entry) => entry.frame.header.command === Command.prepare && entry.frame.header.op)).toEqual(
      range(1, 1000),
    );
    expect(node0.bus.stats().peers[0]).toMatchObject({ sent: 1000, dropped: 0, queued: 0 });
  });

  it('reconnects after a peer closes and restarts on the same address, in both roles', async () => {
    const { nodes, ports } = await harness.start(3);
    await waitFor(() => allConnected(nodes), 'every pair connected');
    const [node0, , node2] = nodes as [Node, Node, Node];

    // Replica 1 dials 2 and is dialled by 0: a restart exercises both sides.
    await nodes[1]!.bus.close();
    await waitFor(() => !node0.bus.connected(1) && !node2.bus.connected(1), 'peers notice replica 1 is gone');
    // Frames sent while it is down wait in the bounded queue.
    node0.bus.sendToReplica(1, commitFrame(0, 7));
    node2.bus.sendToReplica(1, commitFrame(2, 8));

    const node1 = createNode(1, ports.map((port) => `${HOST}:${port}`));
    const restarted = harness.track(node1.bus);
    expect((await restarted.listen()).port).toBe(ports[1]);
    await waitFor(() => restarted.connected(0) && restarted.connected(2), 'replica 1 reconnected to 0 and 2');
    await waitFor(() => node0.bus.connected(1) && node2.bus.connected(1), 'peers see replica 1 again');
    // The frame replica 2 queued is delivered on the new connection (replica 0's may have been
    // written to the old socket before the close was noticed: best effort, as VSR expects).
    await waitFor(() => commitsFrom(node1, 2).includes(8), 'the frame queued while replica 1 was down');

    const stats0 = node0.bus.stats().peers.find((peer) => peer.replica === 1);
    expect(stats0?.reconnects).toBeGreaterThanOrEqual(1);
    expect(stats0?.dialAttempts).toBeGreaterThanOrEqual(2);
    const stats2 = node2.bus.stats().peers.find((peer) => peer.replica === 1);
    expect(stats2?.reconnects).toBeGreaterThanOrEqual(1);

    // And traffic flows both ways again.
    restarted.sendToReplica(0, commitFrame(1, 100));
    restarted.sendToReplica(2, commitFrame(1, 200));
    await waitFor(() => commitsFrom(node0, 1).includes(100) && commitsFrom(node2, 1).includes(200), 'frames from the restarted replica');
  });

  it('a restarted higher index announces itself: the lower one dials at once instead of waiting out its backoff', async () => {
    // Replica 0 dials 1 with a backoff no test could wait out: only the announcement reconnects it.
    const slow = { reconnect: { delayMinMs: 600_000, delayMaxMs: 600_000, jitter: 0 } };
    const { nodes, ports } = await harness.start(2, { node: () => slow });
    const [node0] = nodes as [Node, Node];
    await waitFor(() => allConnected(nodes), 'connected');
    await nodes[1]!.bus.close();
    await waitFor(() => !node0.bus.connected(1), 'replica 0 notices replica 1 is gone');
    // Replica 0 is now in its backoff (one dial, refused or pending, then the long timer).
    const before = node0.bus.stats().peers[0]!;
    expect(before.announcesHeard).toBe(0);
    const node1 = createNode(1, ports.map((port) => `${HOST}:${port}`), slow);
    const restarted = harness.track(node1.bus);
    expect((await restarted.listen()).port).toBe(ports[1]);
    await waitFor(() => node0.bus.connected(1) && restarted.connected(0), 'replica 0 dialled the restarted replica 1');
    const after = node0.bus.stats().peers[0]!;
    expect(after.announcesHeard).toBe(1);
    expect(after.authFailures).toEqual({});
    expect(restarted.stats().peers[0]).toMatchObject({ announcesSent: 1, connected: true });
    expect(node0.bus.stats().inbound.authFailures).toEqual({});
    restarted.sendToReplica(0, commitFrame(1, 5));
    await waitFor(() => commitsFrom(node0, 1).includes(5), 'a frame from the restarted replica');
  });

  it('a restarted replica receives what was queued for it while it was down', async () => {
    const { nodes, ports } = await harness.start(2);
    await waitFor(() => allConnected(nodes), 'connected');
    const node0 = nodes[0]!;
    await nodes[1]!.bus.close();
    await waitFor(() => !node0.bus.connected(1), 'replica 1 is gone');
    for (const commit of [1, 2, 3]) node0.bus.sendToReplica(1, commitFrame(0, commit));
    const node1 = createNode(1, ports.map((port) => `${HOST}:${port}`));
    harness.track(node1.bus);
    await node1.bus.listen();
    await waitFor(() => node1.received.length === 3, 'the queued frames');
    expect(commitsFrom(node1, 0)).toEqual([1, 2, 3]);
  });

  it('a full queue for a down peer drops the oldest frames, counted, and delivers the newest', async () => {
    // Learn a free port for replica 1, then leave it closed.
    const probe = await harness.start(2, { replicas: [1] });
    const port1 = probe.ports[1]!;
    await probe.nodes[0]!.bus.close();

    const node0 = createNode(0, [`${HOST}:0`, `${HOST}:${port1}`], { queueCapacity: 8 });
    harness.track(node0.bus);
    await node0.bus.listen();
    for (let commit = 1; commit <= 20; commit++) node0.bus.sendToReplica(1, commitFrame(0, commit));
    expect(node0.bus.stats().peers[0]).toMatchObject({
      connected: false,
      queued: 8,
      dropped: 12,
      droppedQueueFull: 12,
      droppedQueueBytes: 0,
      sent: 0,
    });
    // Dials fail while nothing listens; backoff keeps retrying.
    await waitFor(() => (node0.bus.stats().peers[0]?.dialAttempts ?? 0) >= 2, 'retries with backoff');

    const node1 = createNode(1, [`${HOST}:${node0.bus.port}`, `${HOST}:${port1}`]);
    harness.track(node1.bus);
    await node1.bus.listen();
    await waitFor(() => node1.received.length === 8, 'the 8 newest frames');
    expect(commitsFrom(node1, 0)).toEqual(range(13, 8));
    expect(node0.bus.stats().peers[0]).toMatchObject({ connected: true, queued: 0, sent: 8, dropped: 12 });
  });

  it('bounds queued bytes as well as frames', async () => {
    const node0 = createNode(0, [`${HOST}:0`, `${HOST}:1`], { queueCapacity: 256, queueSizeMax: 1024 * 1024 });
    harness.track(node0.bus);
    // Not listening and port 1 is never dialled successfully: everything stays queued.
    const frame = prepareFrame(0, 1, 300 * 1024);
    for (let index = 0; index < 5; index++) node0.bus.sendToReplica(1, frame);
    const stats = node0.bus.stats().peers[0];
    expect(stats).toMatchObject({ queued: 3, dropped: 2, droppedQueueBytes: 2, droppedQueueFull: 0 });
    expect(stats?.queuedBytes).toBe(3 * frame.byteLength);
  });

  it('sending to itself or after close() is counted, never thrown', async () => {
    const { nodes } = await harness.start(2);
    const node0 = nodes[0]!;
    node0.bus.sendToReplica(0, commitFrame(0, 1));
    await node0.bus.close();
    node0.bus.sendToReplica(1, commitFrame(0, 2));
    expect(node0.bus.stats()).toMatchObject({ droppedSelf: 1, droppedClosed: 1 });
    // close() is idempotent.
    await node0.bus.close();
  });

  it('close() leaves no sockets, servers or timers behind, even mid-reconnect and mid-handshake', async () => {
    const baseline = handleCounts();
    const { nodes, ports } = await harness.start(3, { node: () => ({ reconnect: { delayMinMs: 1_000, delayMaxMs: 10_000, jitter: 0 } }) });
    await waitFor(() => allConnected(nodes), 'every pair connected');
    // A socket that never says Hello: replica 1 holds it with a handshake deadline armed.
    const silent = new RawPeer(harness, ports[1]!);
    await waitFor(() => nodes[1]!.bus.stats().inbound.handshaking === 1, 'the silent socket accepted');
    // Replica 2 goes away: 0 and 1 now have reconnect timers armed.
    await nodes[2]!.bus.close();
    await waitFor(() => !nodes[0]!.bus.connected(2) && !nodes[1]!.bus.connected(2), 'peers notice');
    nodes[0]!.bus.sendToReplica(1, commitFrame(0, 1));
    await Promise.all(nodes.map((node) => node.bus.close()));
    await waitFor(() => silent.closed, 'the bus closed its side of the silent socket');
    expectNoHandlesBeyond(baseline);
    // Nothing fires after close: no delivery, no dial.
    const received = nodes.map((node) => node.received.length);
    const dials = nodes.map((node) => node.bus.stats().peers.map((peer) => peer.dialAttempts));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(nodes.map((node) => node.received.length)).toEqual(received);
    expect(nodes.map((node) => node.bus.stats().peers.map((peer) => peer.dialAttempts))).toEqual(dials);
  });

  it('close() during listen() does not leak the listener', async () => {
    const baseline = handleCounts();
    const node0 = createNode(0, [`${HOST}:0`, `${HOST}:0`]);
    const listening = node0.bus.listen();
    await node0.bus.close();
    await listening;
    await node0.bus.close();
    expectNoHandlesBeyond(baseline);
  });

  it('listen() binds only the configured host and reports the chosen port', async () => {
    const node0 = createNode(0, [`${HOST}:0`, `${HOST}:0`]);
    harness.track(node0.bus);
    const { port } = await node0.bus.listen();
    expect(port).toBeGreaterThan(0);
    expect(node0.bus.port).toBe(port);
    expect(node0.bus.stats().port).toBe(port);
  });

  it('rejects a bad address list at construction', () => {
    expect(() => new ReplicaBus({ replica: 0, addresses: ['127.0.0.1'], cluster: CLUSTER, kernels, clusterSecret: TEST_SECRET, onMessage: () => {} })).toThrow(
      /invalid replica address/,
    );
    expect(() => new ReplicaBus({ replica: 0, addresses: ['h:70000'], cluster: CLUSTER, kernels, clusterSecret: TEST_SECRET, onMessage: () => {} })).toThrow(
      /invalid replica address/,
    );
    expect(() => new ReplicaBus({ replica: 2, addresses: ['[::1]:1', 'a:2'], cluster: CLUSTER, kernels, clusterSecret: TEST_SECRET, onMessage: () => {} })).toThrow();
  });

  it('refuses to exist without a cluster secret: there is no unauthenticated replica port', () => {
    const options = { replica: 0, addresses: [`${HOST}:0`, `${HOST}:0`], cluster: CLUSTER, kernels, onMessage: () => {} };
    expect(() => new ReplicaBus({ ...options, clusterSecret: undefined as unknown as Uint8Array })).toThrow(/no unauthenticated mode/);
    expect(() => new ReplicaBus({ ...options, clusterSecret: new Uint8Array(0) })).toThrow(/no unauthenticated mode/);
  });
});

/** Handles that keep a process alive, by type (timers, sockets, servers). */
function handleCounts(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/**
 * No TCP handle at all (vitest talks to its workers over IPC pipes, never TCP) and no more timers
 * than before the test (the runner keeps a test-timeout timer of its own, which may come and go).
 */
function expectNoHandlesBeyond(baseline: Record<string, number>): void {
  const after = handleCounts();
  const tcp = Object.keys(after).filter((type) => type.startsWith('TCP'));
  expect(tcp).toEqual([]);
  expect(after['Timeout'] ?? 0).toBeLessThanOrEqual(baseline['Timeout'] ?? 0);
}

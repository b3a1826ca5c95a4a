/**
 * Who gets an inbound slot on the replica port before authenticating (src/transport/admission.ts):
 * the rules on their own, then against real sockets. The outsider holds connections open and
 * reopens each one the moment it is closed (the holding attack that once kept a restarted
 * replica out for as long as it lasted); an honest peer must get in anyway.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { InboundAdmission, sourceOf } from '../../src/transport/admission.js';
import { Harness, HOST, RawPeer, commitFrame, commitsFrom, helloFrame, settle, waitFor, type Node } from '../support/transport-harness.js';

describe('inbound admission: the rules', () => {
  const options = { unclaimedMax: 4, perSourceMax: 2, claimsPerPeerMax: 2, graceMs: 100 };
  /** A fixed sequence of "random" picks: index i of n candidates is i / n. */
  const picks = (...values: number[]) => () => values.shift() ?? 0;

  it('a source past its share displaces one of its own, past the grace when it can, and is always admitted', () => {
    const admission = new InboundAdmission<string>(options, picks(0.99, 0.99, 0));
    admission.add('a1', 'A', 0);
    admission.add('a2', 'A', 60);
    // At 120 only a1 is past the grace: it goes, whatever the pick.
    expect(admission.admit('A', 120)).toEqual({ evict: 'a1', bound: 'source_max' });
    // At 50 neither is: a random one of the two (the pick 0.99 names the last).
    expect(admission.admit('A', 50)).toEqual({ evict: 'a2', bound: 'source_max' });
    // Another source is not affected by A's share.
    expect(admission.admit('B', 50)).toEqual({ evict: null, bound: null });
  });

  it('a full pool displaces a connection of any source, past the grace when it can', () => {
    const admission = new InboundAdmission<string>(options, picks(0.5, 0));
    admission.add('a1', 'A', 0);
    admission.add('b1', 'B', 20);
    admission.add('c1', 'C', 40);
    admission.add('d1', 'D', 60);
    // At 130: a1 and b1 are past the grace; the pick 0.5 of those two names b1.
    expect(admission.admit('E', 130)).toEqual({ evict: 'b1', bound: 'handshakes_max' });
    admission.release('b1');
    admission.add('e1', 'E', 130);
    expect(admission.unclaimed).toBe(4);
    expect(admission.admit('F', 10)).toEqual({ evict: 'a1', bound: 'handshakes_max' });
  });

  it('under a flood that reopens every displaced connection, a newcomer is displaced only by lot', () => {
    let seed = 7;
    const random = (): number => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    const admission = new InboundAdmission<string>({ ...options, unclaimedMax: 64, perSourceMax: 64 }, random);
    for (let index = 0; index < 64; index++) admission.add(`old-${index}`, 'A', 0);
    admission.admit('A', 1_000);
    let survived = 0;
    for (let trial = 0; trial < 200; trial++) {
      const now = 1_000 + trial;
      const first = admission.admit('A', now);
      if (first.evict !== null) admission.release(first.evict);
      admission.add(`honest-${trial}`, 'A', now);
      // Five more arrivals before the honest Hello is read, each displacing someone.
      let alive = true;
      for (let step = 0; step < 5; step++) {
        const decision = admission.admit('A', now);
        if (decision.evict === `honest-${trial}`) alive = false;
        if (decision.evict !== null) admission.release(decision.evict);
        admission.add(`flood-${trial}-${step}`, 'A', now);
      }
      if (alive) {
        survived += 1;
        admission.claim(`honest-${trial}`, 0);
        admission.release(`honest-${trial}`);
      }
    }
    // (63/64)^5 is about 0.92: most dials make it through the first time.
    expect(survived).toBeGreaterThan(160);
  });

  it('a claimed connection leaves the pool for its replica reserve, which only a newer claim of that replica replaces', () => {
    const admission = new InboundAdmission<string>(options, () => 0);
    admission.add('honest', 'A', 0);
    expect(admission.claim('honest', 0)).toBeNull();
    expect(admission.unclaimed).toBe(0);
    expect(admission.claimed).toBe(1);
    // A flood of newcomers is admitted into the pool around the claim, never displacing it.
    for (let index = 0; index < 100; index++) {
      const decision = admission.admit('A', 1_000 + index * 200);
      if (decision.evict !== null) {
        expect(decision.evict).not.toBe('honest');
        admission.release(decision.evict);
      }
      admission.add(`flood-${index}`, 'A', 1_000 + index * 200);
    }
    expect(admission.claimed).toBe(1);
    admission.add('other', 'B', 0);
    expect(admission.claim('other', 1)).toBeNull();
    admission.add('again', 'B', 0);
    expect(admission.claim('again', 0)).toBeNull();
    admission.add('third', 'C', 0);
    // Replica 0's reserve holds two claims: the third replaces the oldest, replica 1's is untouched.
    expect(admission.claim('third', 0)).toBe('honest');
    expect(admission.claimed).toBe(3);
    admission.release('honest');
    admission.release('honest');
    expect(admission.claimed).toBe(3);
  });

  it('sources: IPv4 as is (also mapped), IPv6 by its /64', () => {
    expect(sourceOf('10.1.2.3')).toBe('10.1.2.3');
    expect(sourceOf('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(sourceOf('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(sourceOf('2001:db8:1:2::7')).toBe('2001:db8:1:2::/64');
    expect(sourceOf('2001:0db8::1')).toBe('2001:db8:0:0::/64');
    expect(sourceOf('::1')).toBe('0:0:0:0::/64');
    expect(sourceOf(undefined)).toBe('?');
  });
});

const harness = new Harness();
const holds: { stop(): void }[] = [];
afterEach(async () => {
  for (const hold of holds.splice(0)) hold.stop();
  await harness.close();
});

/**
 * Holds `count` raw connections to `port` from `localAddress`, reopening each as soon as it is
 * closed, until the test ends (afterEach stops it and closes them).
 */
function holdConnections(port: number, count: number, localAddress: string): void {
  const sockets = new Set<Socket>();
  let stopped = false;
  const open = (): void => {
    if (stopped) return;
    const socket = connect({ host: HOST, port, localAddress });
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => {
      sockets.delete(socket);
      setImmediate(open);
    });
  };
  for (let index = 0; index < count; index++) open();
  holds.push({
    stop: () => {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    },
  });
}

async function acceptor(options: { handshakeTimeoutMs?: number } = {}): Promise<{ node1: Node; port1: number; ports: number[] }> {
  const { nodes, ports } = await harness.start(2, { replicas: [1], node: () => ({ handshakeTimeoutMs: options.handshakeTimeoutMs ?? 2_000 }) });
  return { node1: nodes[0]!, port1: ports[1]!, ports };
}

async function dialer(ports: number[]): Promise<Node> {
  const { nodes } = await harness.start(2, { replicas: [0], ports: [0, ports[1]!] });
  return nodes[0]!;
}

describe('inbound admission: an outsider cannot keep a replica out', () => {
  it('connections held open from another address take only that address share; the peer connects at once', async () => {
    const { node1, port1, ports } = await acceptor();
    holdConnections(port1, 300, '127.0.0.2');
    await waitFor(() => (node1.bus.stats().inbound.evicted.source_max ?? 0) >= 100, 'the outsider displaces only its own');
    expect(node1.bus.stats().inbound.handshaking).toBeLessThanOrEqual(64);
    const node0 = await dialer(ports);
    await waitFor(() => node0.bus.connected(1) && node1.bus.connected(0), 'replica 0 connects during the attack', 3_000);
    node0.bus.sendToReplica(1, commitFrame(0, 5));
    await waitFor(() => commitsFrom(node1, 0).includes(5), 'a frame crosses');
  });

  it('connections held open from the peer own address cannot keep its dial out', async () => {
    const { node1, port1, ports } = await acceptor();
    holdConnections(port1, 300, HOST);
    await waitFor(() => (node1.bus.stats().inbound.evicted.source_max ?? 0) >= 100, 'the holder churns its share');
    const node0 = await dialer(ports);
    await waitFor(() => node0.bus.connected(1) && node1.bus.connected(0), 'replica 0 connects during the attack', 3_000);
    expect(node1.bus.stats().inbound.authFailures.evicted ?? 0).toBeGreaterThanOrEqual(1);
  });

  it('a Hello without the key is refused at once and never claims a replica slot', async () => {
    const { node1, port1 } = await acceptor();
    const peers = Array.from({ length: 20 }, () => new RawPeer(harness, port1));
    for (const peer of peers) peer.write(helloFrame({ replica: 0, peerReplica: 1, secret: null }));
    await waitFor(() => peers.every((peer) => peer.closed), 'all refused and closed');
    expect(node1.bus.stats().inbound.authFailures).toEqual({ mac_mismatch: 20 });
    expect(node1.bus.stats().inbound.claimed).toBe(0);
  });

  it('a claim with a verified Hello survives any flood of unverified connections and completes its handshake', async () => {
    const { node1, port1 } = await acceptor();
    const honest = new RawPeer(harness, port1);
    const handshake = honest.handshake({ replica: 0, peer: 1, replicaCount: 2, holdFinishMs: 600 });
    await waitFor(() => node1.bus.stats().inbound.claimed === 1, 'the Hello verified');
    holdConnections(port1, 300, HOST);
    await settle(100);
    expect((await handshake).kind).toBe('established');
    await waitFor(() => node1.bus.connected(0), 'the claim authenticated');
    expect(node1.bus.stats().inbound.claimsReplaced).toBe(0);
  });

  it('an unverified connection that sends nothing is closed after the Hello deadline, long before the handshake one', async () => {
    const { nodes, ports } = await harness.start(2, { replicas: [1], node: () => ({ handshakeTimeoutMs: 10_000, helloTimeoutMs: 150 }) });
    const silent = new RawPeer(harness, ports[1]!);
    await waitFor(() => silent.closed, 'closed by the Hello deadline', 2_000);
    expect(nodes[0]!.bus.stats().inbound.authFailures).toEqual({ timeout: 1 });
  });
});

/**
 * What client connections can make a replica hold (src/transport/client-listener.ts,
 * buffer-budget.ts), against a real node: before a login a connection may buffer only a small
 * frame and is not read while its replies pile up unread; every connection's buffers together
 * stay within the replica-wide budget, and past it requests are refused with a retryable error
 * (TransientNotAccepted) before any work, until the buffers drain.
 */
import { createConnection, type Socket } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BufferBudget } from '../../src/transport/buffer-budget.js';
import { ClientFrameDecoder } from '../../src/transport/client-frame-decoder.js';
import { PRE_LOGIN_FRAME_SIZE_MAX, PRE_LOGIN_SEND_HIGH_WATER } from '../../src/transport/client-listener.js';
import { CODE, OP, REASON, RawClient, name, randomClientId, readReply, requestFrame } from '../support/iggy-frames.js';
import { startBinaryNode, type BinaryNode } from '../support/binary-node.js';

const BUDGET = 2 * 1024 * 1024;
let server: BinaryNode;

beforeAll(async () => {
  server = await startBinaryNode({ tcp_buffers_size_max: BUDGET });
});

afterAll(async () => {
  await server?.close();
});

function stats() {
  const listener = server.node.clientListenerStats;
  if (listener === null) throw new Error('no listener');
  return listener;
}

async function rawSocket(): Promise<{ socket: Socket; closed: Promise<void>; received: Buffer[] }> {
  const socket = createConnection({ host: '127.0.0.1', port: server.port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => {});
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, closed, received };
}

async function until(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('client port: memory a connection can make the replica hold', () => {
  it('before a login, a frame larger than a login is refused at its header and never buffered', async () => {
    const { socket, closed, received } = await rawSocket();
    // A Register declaring a 1 MiB body, then only half of it: the old half-frame hold.
    const header = requestFrame({ client: randomClientId(), operation: OP.register, size: 1024 * 1024 }).subarray(0, 256);
    socket.write(Buffer.concat([header, Buffer.alloc(512 * 1024)]));
    await closed;
    expect(stats().buffersUsed).toBe(0);
    const eviction = readReply(Buffer.concat(received));
    expect(eviction.command === 13 && eviction.reason).toBe(REASON.invalidRequestBodySize);
  });

  it('a logged-in connection may send a frame larger than a login', async () => {
    const client = await RawClient.connect(server.port);
    try {
      expect((await client.login()).status).toBe(0);
      // A stream name is at most 255 bytes: the body is refused by its rule, not its size.
      const reply = await client.write(OP.createStream, Buffer.concat([name('big'), Buffer.alloc(PRE_LOGIN_FRAME_SIZE_MAX * 4)]));
      // Buffered and decoded: the trailing bytes make it a bad body, not an oversized frame.
      expect(reply.command === 13 && reply.reason).toBe(REASON.invalidRequestBody);
    } finally {
      client.close();
    }
  });

  it('a client that pipelines pings and never reads stops being read: its unsent replies stay near the pre-login high-water mark', async () => {
    const { socket } = await rawSocket();
    socket.pause(); // reads nothing the server sends
    const ping = requestFrame({ client: randomClientId(), operation: OP.nonReplicated, code: CODE.ping });
    // 40,000 pings: 10 MiB of replies if each were answered.
    for (let batch = 0; batch < 40; batch++) socket.write(Buffer.concat(Array.from({ length: 1000 }, () => ping)));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // What the kernel's socket buffers took, plus at most the high-water mark and one chunk of
    // pipelined pings: far below the 10 MiB the pings ask for.
    expect(stats().buffersUsed).toBeLessThan(PRE_LOGIN_SEND_HIGH_WATER + 256 * 1024);
    socket.destroy();
    await until(() => stats().buffersUsed === 0, 'the buffers given back at close');
  });

  it('past the replica-wide budget a request is refused with TransientNotAccepted before any work, and served again once buffers drain', async () => {
    const client = await RawClient.connect(server.port);
    const hogs: Socket[] = [];
    try {
      expect((await client.login()).status).toBe(0);
      // Logged-in clients each holding half of a 1 MiB frame spend the 2 MiB budget.
      const logged: RawClient[] = [];
      for (let index = 0; index < 3; index++) {
        const hog = await RawClient.connect(server.port);
        expect((await hog.login()).status).toBe(0);
        logged.push(hog);
      }
      for (const hog of logged) {
        const frame = requestFrame({ client: hog.clientId, operation: OP.createStream, session: hog.session, request: 1n, size: 1024 * 1024 });
        hog.socket.write(Buffer.concat([frame.subarray(0, 256), Buffer.alloc(1024)]));
        hogs.push(hog.socket);
      }
      await until(() => stats().buffersUsed >= BUDGET, 'the budget spent');
      const refused = await client.write(OP.createStream, name('over-budget'));
      expect(refused.status).toBe(58);
      expect(stats().budgetRefusals).toBeGreaterThanOrEqual(1);
      const registry = new Registry();
      server.node.registerMetrics(registry);
      const metrics = await registry.metrics();
      expect(metrics).toMatch(/^vsr_tcp_buffer_budget_refusals_total [1-9]/m);
      expect(metrics).toMatch(/^vsr_tcp_buffers_bytes [1-9]/m);
      expect(stats().buffersUsed).toBeLessThanOrEqual(BUDGET);
      for (const hog of hogs) hog.destroy();
      await until(() => stats().buffersUsed < BUDGET, 'the hogs gone');
      const served = await client.write(OP.createStream, name('over-budget'));
      expect(served.status).toBe(0);
    } finally {
      client.close();
      for (const hog of hogs) hog.destroy();
    }
  });
});

describe('buffer budget and decoder', () => {
  it('a frame the budget has no room for is read past, unbuffered, and yielded as over_budget; the budget is given back', () => {
    const budget = new BufferBudget(10_000);
    const decoder = new ClientFrameDecoder({ budget });
    const frame = requestFrame({ client: 5n, operation: OP.createStream, session: 1n, request: 1n }, Buffer.alloc(12_000));
    decoder.push(frame.subarray(0, 6_000));
    expect([...decoder]).toEqual([]);
    expect(budget.used).toBe(0);
    decoder.push(frame.subarray(6_000));
    const results = [...decoder];
    expect(results.map((result) => (result.kind === 'skipped' ? result.reason : result.kind))).toEqual(['over_budget']);
    const small = requestFrame({ client: 5n, operation: OP.createStream, session: 1n, request: 1n }, Buffer.alloc(1_000));
    decoder.push(small.subarray(0, 600));
    expect([...decoder]).toEqual([]);
    expect(budget.used).toBe(small.byteLength);
    decoder.push(small.subarray(600));
    expect([...decoder].map((result) => result.kind)).toEqual(['frame']);
    expect(budget.used).toBe(0);
    decoder.push(small.subarray(0, 600));
    expect([...decoder]).toEqual([]);
    decoder.dispose();
    expect(budget.used).toBe(0);
  });
});

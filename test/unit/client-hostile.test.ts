/**
 * Bad input on the client port, against a real node (timers shortened): garbage, oversize and
 * undersize declared lengths, half frames, slowloris trickles, silent sessions, request floods
 * and the connection limit each get a clear eviction or close, and the node keeps serving.
 * Also TLS on the client port.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODE, OP, REASON, RawClient, name, randomClientId, readReply, requestFrame } from '../support/iggy-frames.js';
import { startBinaryNode, type BinaryNode } from '../support/binary-node.js';

const FRAME_TIMEOUT_MS = 300;
const STALE_TIMEOUT_MS = 600;
const SWEEP_MS = 50;

let server: BinaryNode;

beforeAll(async () => {
  server = await startBinaryNode(
    { tcp_connections_max: 12 },
    { timers: { frameTimeoutMs: FRAME_TIMEOUT_MS, staleTimeoutMs: STALE_TIMEOUT_MS, sweepIntervalMs: SWEEP_MS } },
  );
});

afterAll(async () => {
  await server?.close();
});

async function rawSocket(port: number): Promise<{ socket: Socket; received: Buffer[]; closed: Promise<number> }> {
  const socket = createConnection({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => {});
  const opened = Date.now();
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  return { socket, received, closed };
}

async function stillServing(): Promise<void> {
  const client = await RawClient.connect(server.port);
  const login = await client.login();
  expect(login.status).toBe(0);
  const write = await client.write(OP.createStream, name(`alive-${client.clientId.toString(36).slice(0, 8)}`));
  expect(write.status).toBe(0);
  client.close();
}

describe('client port: hostile input', () => {
  it('garbage (not a request header) closes the connection; the node keeps serving', async () => {
    const { socket, received, closed } = await rawSocket(server.port);
    const garbage = Buffer.alloc(512, 0xa5);
    garbage.writeUInt32LE(512, 48);
    socket.write(garbage);
    await closed;
    expect(Buffer.concat(received).length).toBe(0);
    await stillServing();
  });

  it('a declared size beyond the bound: InvalidRequestBodySize eviction, then close, nothing buffered', async () => {
    const { socket, received, closed } = await rawSocket(server.port);
    socket.write(requestFrame({ client: 7n, operation: OP.createStream, session: 1n, request: 1n, size: 32 * 1024 * 1024 }));
    await closed;
    const reply = readReply(Buffer.concat(received));
    expect([reply.command, reply.reason, reply.client]).toEqual([13, REASON.invalidRequestBodySize, 7n]);
    await stillServing();
  });

  it('a declared size below a header closes at once', async () => {
    const { socket, closed } = await rawSocket(server.port);
    socket.write(requestFrame({ client: 7n, operation: OP.register, size: 17 }));
    expect(await closed).toBeLessThan(FRAME_TIMEOUT_MS);
  });

  it('a half frame that never completes is closed after the frame timeout', async () => {
    const { socket, closed } = await rawSocket(server.port);
    socket.write(requestFrame({ client: 7n, operation: OP.nonReplicated, code: CODE.ping }, Buffer.alloc(64)).subarray(0, 300));
    const lifetime = await closed;
    expect(lifetime).toBeGreaterThanOrEqual(FRAME_TIMEOUT_MS);
    expect(lifetime).toBeLessThan(FRAME_TIMEOUT_MS + 1000);
    await stillServing();
  });

  it('slowloris: a frame trickled byte by byte is closed by the frame timeout, not kept alive', async () => {
    const { socket, closed } = await rawSocket(server.port);
    const frame = requestFrame({ client: 7n, operation: OP.nonReplicated, code: CODE.ping });
    let index = 0;
    const trickle = setInterval(() => {
      if (index < frame.length && !socket.destroyed) socket.write(frame.subarray(index, ++index));
    }, 20);
    const lifetime = await closed;
    clearInterval(trickle);
    expect(lifetime).toBeLessThan(FRAME_TIMEOUT_MS + 1000);
    expect(index).toBeLessThan(frame.length);
  });

  it('a silent session is evicted as StaleClient, then closed', async () => {
    const client = await RawClient.connect(server.port);
    await client.login();
    expect(server.node.core.clientTable.get(client.clientId)).toBeDefined();
    const eviction = await client.next(STALE_TIMEOUT_MS * 4);
    expect(eviction === null ? null : readReply(eviction).reason).toBe(REASON.staleClient);
    expect(await client.next(2000)).toBeNull();
    // Its session is logged out at once (Iggy drops a stale client from the table and its groups).
    const deadline = Date.now() + 2000;
    while (server.node.core.clientTable.get(client.clientId) !== undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.node.core.clientTable.get(client.clientId)).toBeUndefined();
  });

  it('a flood of pipelined requests beyond the queue bound is closed; the node keeps serving', async () => {
    const { socket, closed } = await rawSocket(server.port);
    const ping = requestFrame({ client: 7n, operation: OP.nonReplicated, code: CODE.ping });
    socket.write(Buffer.concat(Array.from({ length: 2000 }, () => ping)));
    await closed;
    await stillServing();
  });

  it('over tcp_connections_max: the first request is answered CannotEstablishConnection, then closed', async () => {
    const limited = await startBinaryNode({ tcp_connections_max: 3 });
    const held: RawClient[] = [];
    try {
      for (let index = 0; index < 3; index++) held.push(await RawClient.connect(limited.port));
      while (limited.node.clientListenerStats!.connections < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      const over = await RawClient.connect(limited.port);
      const reply = await over.call(requestFrame({ client: randomClientId(), operation: OP.register }, Buffer.alloc(8)));
      expect([reply.command, reply.status]).toEqual([8, 9]);
      expect(await over.next(3000)).toBeNull();
      expect(limited.node.clientListenerStats).toMatchObject({ connections: 3, refusedOverLimit: 1 });
      // A slot freed is a slot usable.
      held.pop()!.close();
      while (limited.node.clientListenerStats!.connections >= 3) await new Promise((resolve) => setTimeout(resolve, 5));
      const next = await RawClient.connect(limited.port);
      expect((await next.login()).status).toBe(0);
      next.close();
    } finally {
      for (const client of held) client.close();
      await limited.close();
    }
  });
});

describe('client port: closed connections', () => {
  it("a closed connection's session is logged out after the grace; one resumed within it is not", async () => {
    const GRACE_MS = 300;
    const node = await startBinaryNode({}, {}, GRACE_MS);
    try {
      const gone = await RawClient.connect(node.port);
      await gone.login();
      const resumed = await RawClient.connect(node.port);
      await resumed.login();
      const request = resumed.requestNext++;
      const original = await resumed.write(OP.createStream, name('grace-resume'), request);
      gone.close();
      resumed.close();
      // Within the grace the resuming client logs in again with its client id and replays.
      const again = await RawClient.connect(node.port);
      again.clientId = resumed.clientId;
      await again.login();
      await new Promise((resolve) => setTimeout(resolve, GRACE_MS * 3));
      expect(node.node.core.clientTable.get(gone.clientId)).toBeUndefined();
      expect(node.node.core.clientTable.get(resumed.clientId)).toBeDefined();
      // The late Logout of the old epoch did not end the resumed session or its dedup history.
      const replayed = await again.write(OP.createStream, name('grace-resume'), request);
      expect(replayed.frame).toEqual(original.frame);
      again.close();
    } finally {
      await node.close();
    }
  });
});

describe('client port: bursts beyond the core queues', () => {
  it("more concurrent writers than the pipeline and request queue hold all commit, none waits out a timeout", async () => {
    // prepare_queue_depth 1: one prepare in flight and two queued; 24 writers arrive at once.
    const small = await startBinaryNode({ prepare_queue_depth: 1, journal_slots: 64 });
    const clients: RawClient[] = [];
    try {
      for (let index = 0; index < 24; index++) {
        const client = await RawClient.connect(small.port);
        await client.login();
        clients.push(client);
      }
      const started = Date.now();
      const replies = await Promise.all(clients.map((client, index) => client.write(OP.createStream, name(`burst-${index}`))));
      expect(replies.map((reply) => reply.status)).toEqual(clients.map(() => 0));
      // Far below the 5 s write timeout a dropped request would have waited for.
      expect(Date.now() - started).toBeLessThan(3000);
      expect(small.node.binary.counters.writesQueued).toBeGreaterThan(0);
      expect(small.node.core.counters.requestsDropped).toBe(0);
    } finally {
      for (const client of clients) client.close();
      await small.close();
    }
  });
});

describe('client port: TLS', () => {
  it('with --tcp-tls-cert/--tcp-tls-key the port speaks TLS and the protocol runs over it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vrmeta-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const tls = await startBinaryNode({ tcp_tls_cert: cert, tcp_tls_key: key });
    try {
      const { readFileSync } = await import('node:fs');
      const client = await RawClient.connect(tls.port, { tls: { ca: readFileSync(cert) } });
      expect((await client.login()).status).toBe(0);
      expect((await client.write(OP.createStream, name('over-tls'))).status).toBe(0);
      client.close();
      // A plaintext client gets no protocol out of a TLS port.
      const plain = await rawSocket(tls.port);
      plain.socket.write(requestFrame({ client: 7n, operation: OP.nonReplicated, code: CODE.ping }));
      await plain.closed;
      const bytes = Buffer.concat(plain.received);
      expect(bytes.length >= 256 && bytes.readUInt8(60) === 8).toBe(false);
    } finally {
      await tls.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * VrmetaClient over the binary protocol (`tcp`), against a real node that also serves HTTP: the
 * same calls answer the same JSON over both transports, and a write whose reply is lost with its
 * connection is retried by the client on a new connection, resuming its session, and gets the
 * cached reply instead of running twice.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { IggyBinaryError, VrmetaClient } from '../../src/client/client.js';
import { ErrorCode } from '../../src/metadata/errors.js';
import { idOf } from '../../src/metadata/operations.js';
import { GENESIS_PASSWORD_MARKER, isArgon2idPhc } from '../../src/metadata/validation.js';
import { BinaryClient } from '../../src/transport/binary-client.js';
import { startBinaryNode, type BinaryNode } from '../support/binary-node.js';

let server: BinaryNode;
let app: ReturnType<typeof buildApp>;
let http: VrmetaClient;
let binary: VrmetaClient;

beforeAll(async () => {
  server = await startBinaryNode();
  app = buildApp({ node: server.node, jwtSecret: server.jwtSecret });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address() as { port: number };
  http = new VrmetaClient({ baseUrl: `http://127.0.0.1:${address.port}` });
  await http.login('iggy', 'iggy');
  binary = new VrmetaClient({ tcp: [`127.0.0.1:${server.port}`] });
  await binary.login('iggy', 'iggy');
});

afterAll(async () => {
  binary?.close();
  await app?.close();
  await server?.close();
});

describe('VrmetaClient over the binary protocol', () => {
  it('writes and reads answer the JSON the HTTP API answers', async () => {
    const created = await binary.createStream('both-ways');
    expect(created).toEqual(await http.getStream('both-ways'));
    const topic = await binary.createTopic('both-ways', { name: 't', partitionsCount: 2, compressionAlgorithm: 'gzip' });
    expect(topic).toEqual(await http.getTopic('both-ways', 't'));
    expect(await binary.getTopics('both-ways')).toEqual(await http.getTopics('both-ways'));
    expect(await binary.getStreams()).toEqual(await http.getStreams());
    const group = await binary.createConsumerGroup('both-ways', 't', 'g');
    expect(group).toEqual(await http.getConsumerGroup('both-ways', 't', 'g'));
    expect(await binary.getConsumerGroups('both-ways', 't')).toEqual(await http.getConsumerGroups('both-ways', 't'));
    const user = await binary.createUser({ username: 'bin-user', password: 'secret-123', permissions: { global: { read_streams: true } } as never });
    expect(user).toEqual(await http.getUser('bin-user'));
    expect(await binary.getUsers()).toEqual(await http.getUsers());
    await binary.updateUser('bin-user', { status: 'inactive' });
    expect((await http.getUser('bin-user')).status).toBe('inactive');
    await binary.changePassword('bin-user', 'secret-123', 'secret-456');
    await binary.deleteUser('bin-user');
    const token = await binary.createPersonalAccessToken('bin-token');
    expect(token.length).toBeGreaterThan(20);
    expect(await binary.getPersonalAccessTokens()).toEqual(await http.getPersonalAccessTokens());
    const viaToken = new VrmetaClient({ tcp: [`127.0.0.1:${server.port}`] });
    expect((await viaToken.loginWithPersonalAccessToken(token)).user_id).toBe(0);
    viaToken.close();
    await binary.deletePersonalAccessToken('bin-token');
    expect((await binary.getClusterMetadata()).nodes).toHaveLength(1);
    expect((await binary.getStats()).streams_count).toBe((await http.getStats()).streams_count);
    expect((await binary.getClients()).some((client) => client.transport === 'TCP' && client.user_id === 0)).toBe(true);
    await binary.deleteConsumerGroup('both-ways', 't', 'g');
    await binary.deleteTopic('both-ways', 't');
    await binary.deleteStream('both-ways');
    await expect(binary.getStream('both-ways')).rejects.toMatchObject({ code: 1009 });
    await expect(binary.createStream('')).rejects.toBeInstanceOf(IggyBinaryError);
    await expect(binary.getClusterStatus()).rejects.toThrow(/HTTP only/);
  });

  it("root's ChangePassword from the genesis marker: verified against the node's own hash, then a stored hash on both edges", async () => {
    expect(server.node.state.passwordHashOf(idOf(0))).toBe(GENESIS_PASSWORD_MARKER);
    await expect(binary.changePassword(0, 'not-iggy', 'root-pass-2')).rejects.toMatchObject({ code: ErrorCode.invalidCredentials });
    await binary.changePassword(0, 'iggy', 'root-pass-2');
    expect(isArgon2idPhc(server.node.state.passwordHashOf(idOf(0))!)).toBe(true);
    const fresh = new VrmetaClient({ tcp: [`127.0.0.1:${server.port}`] });
    try {
      await expect(fresh.login('iggy', 'iggy')).rejects.toBeInstanceOf(IggyBinaryError);
    } finally {
      fresh.close();
    }
    const again = new VrmetaClient({ baseUrl: http.baseUrl });
    await again.login('iggy', 'root-pass-2');
    // Back to the default (now a stored hash, as in a data directory of an earlier version).
    await again.changePassword(0, 'root-pass-2', 'iggy');
    await new VrmetaClient({ baseUrl: http.baseUrl }).login('iggy', 'iggy');
  });

  it('a write whose reply is lost with its connection is retried on a new one and answered from the cache', async () => {
    // A proxy that forwards everything but cuts the client's connection on the first reply to a
    // CreateStream (operation 128 at byte 208 of a reply), after the server committed it.
    let cut = 0;
    const sockets: Socket[] = [];
    const proxy: Server = createServer((inbound) => {
      const outbound = createConnection({ host: '127.0.0.1', port: server.port });
      sockets.push(inbound, outbound);
      inbound.on('data', (chunk) => outbound.write(chunk));
      outbound.on('data', (chunk: Buffer) => {
        if (cut === 0 && chunk.length >= 256 && chunk.readUInt8(60) === 8 && chunk.readUInt8(208) === 128) {
          cut += 1;
          inbound.destroy();
          outbound.destroy();
          return;
        }
        inbound.write(chunk);
      });
      inbound.on('error', () => outbound.destroy());
      outbound.on('error', () => inbound.destroy());
      inbound.on('close', () => outbound.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const port = (proxy.address() as { port: number }).port;
    const client = await BinaryClient.connect({ addresses: [`127.0.0.1:${port}`], username: 'iggy', password: 'iggy', followLeader: false });
    try {
      const firstSession = client.currentSession;
      const payload = await client.write(128, Uint8Array.of(10, ...new TextEncoder().encode('lost-reply')));
      expect(cut).toBe(1);
      expect(client.currentSession > firstSession).toBe(true);
      const created = server.node.state.queries.stream({ kind: 'name', name: 'lost-reply' })!;
      expect(new DataView(payload.buffer, payload.byteOffset).getUint32(0, true)).toBe(created.id);
      expect(server.node.state.queries.streams().filter((stream) => stream.name === 'lost-reply')).toHaveLength(1);
    } finally {
      client.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});

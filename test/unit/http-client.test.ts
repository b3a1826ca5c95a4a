/**
 * The typed client (src/client/client.ts) against a real listening app on 127.0.0.1: every call
 * maps to its route, u64 sentinels arrive as exact bigints, and errors surface as IggyHttpError
 * with Iggy's body, the view and Retry-After.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { IggyHttpError, U64_MAX, VrmetaClient } from '../../src/client/client.js';
import { createTestNode, type TestNode } from '../../src/http/test-node.js';
import { ALL_FALSE_GLOBAL, JWT_SECRET } from './http-fixtures.js';

let node: TestNode;
let app: FastifyInstance;
let baseUrl: string;

beforeAll(async () => {
  node = await createTestNode({ view: 4 });
  app = buildApp({ node, jwtSecret: JWT_SECRET });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  baseUrl = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await app.close();
});

async function caught(promise: Promise<unknown>): Promise<IggyHttpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof IggyHttpError) return error;
    throw error;
  }
  throw new Error('expected an IggyHttpError');
}

describe('VrmetaClient', () => {
  it('health, login and the view of the last response', async () => {
    const client = new VrmetaClient({ baseUrl: `${baseUrl}/` });
    expect(await client.ping()).toBe('pong');
    expect(client.lastResponse).toEqual({ status: 200, view: null });
    expect(await client.livez()).toEqual({ status: 'live' });
    expect(await client.ready()).toBe(true);
    node.isReady = false;
    expect(await client.ready()).toBe(false);
    node.isReady = true;
    const identity = await client.login('iggy', 'iggy');
    expect(identity.user_id).toBe(0);
    expect(client.token).toBe(identity.access_token?.token);
    expect((await client.getUser('me')).username).toBe('iggy');
    expect(client.lastResponse).toEqual({ status: 200, view: 4 });
  });

  it('streams, topics with u64::MAX, partitions, groups', async () => {
    const client = new VrmetaClient({ baseUrl });
    await client.login('iggy', 'iggy');
    const stream = await client.createStream('client-stream');
    expect(stream.name).toBe('client-stream');
    const topic = await client.createTopic('client-stream', { name: 't', partitionsCount: 2, messageExpiryUs: U64_MAX, maxTopicSizeBytes: U64_MAX });
    expect(topic.message_expiry).toBe(U64_MAX);
    expect(topic.max_topic_size).toBe(U64_MAX);
    await client.updateTopic('client-stream', 't', { name: 't', messageExpiryUs: 9007199254740993n });
    expect((await client.getTopic('client-stream', 't')).message_expiry).toBe(9007199254740993n);
    await client.createPartitions('client-stream', 't', 2);
    await client.deletePartitions('client-stream', 't', 1);
    await client.deleteSegments('client-stream', 't', 0, 1);
    expect((await client.getTopics('client-stream'))[0]?.partitions_count).toBe(3);
    const group = await client.createConsumerGroup('client-stream', 't', 'g');
    expect(group).toEqual({ id: 0, name: 'g', partitions_count: 3, members_count: 0, members: [] });
    expect(await client.getConsumerGroups('client-stream', 't')).toHaveLength(1);
    expect((await client.getConsumerGroup('client-stream', 't', 'g')).id).toBe(0);
    await client.deleteConsumerGroup('client-stream', 't', 'g');
    await client.purgeTopic('client-stream', 't');
    await client.deleteTopic('client-stream', 't');
    await client.updateStream('client-stream', 'renamed');
    expect((await client.getStream('renamed')).topics).toEqual([]);
    await client.purgeStream('renamed');
    await client.deleteStream('renamed');
    expect(await client.getStreams()).toEqual([]);
  });

  it('users, passwords, permissions, PATs and refresh', async () => {
    const root = new VrmetaClient({ baseUrl });
    await root.login('iggy', 'iggy');
    const user = await root.createUser({ username: 'client-user', password: 'first-pass', permissions: { global: { ...ALL_FALSE_GLOBAL, read_streams: true } } });
    expect(user.permissions?.global.read_streams).toBe(true);
    await root.updatePermissions('client-user', null);
    expect((await root.getUser('client-user')).permissions).toBeNull();
    const self = new VrmetaClient({ baseUrl });
    await self.login('client-user', 'first-pass');
    await self.changePassword('client-user', 'first-pass', 'second-pass');
    await self.login('client-user', 'second-pass');
    const raw = await self.createPersonalAccessToken('client-pat');
    expect((await self.getPersonalAccessTokens()).map((token) => token.name)).toEqual(['client-pat']);
    const viaPat = new VrmetaClient({ baseUrl, token: raw });
    expect((await viaPat.getUser('me')).username).toBe('client-user');
    const patLogin = new VrmetaClient({ baseUrl });
    expect((await patLogin.loginWithPersonalAccessToken(raw)).user_id).toBe(user.id);
    await self.deletePersonalAccessToken('client-pat');
    const previous = self.token;
    await self.refreshToken();
    expect(self.token).not.toBe(previous);
    await self.logout();
    await root.updateUser('client-user', { status: 'inactive' });
    expect((await root.getUsers()).map((entry) => entry.status)).toEqual(['active', 'inactive']);
    await root.deleteUser('client-user');
  });

  it('system routes', async () => {
    const client = new VrmetaClient({ baseUrl });
    await client.login('iggy', 'iggy');
    await client.createStream('sys');
    expect((await client.getStats()).streams_count).toBe(1);
    expect((await client.getClusterMetadata()).nodes).toHaveLength(1);
    expect((await client.getClusterStatus()).view).toBe(4);
    node.connectedClients = [{ clientId: 5, userId: 0, session: 1, consumerGroups: [], address: '127.0.0.1:40000', transport: 'TCP' }];
    const clients = await client.getClients();
    expect(clients.map((listed) => listed.client_id)).toEqual([5]);
    expect((await client.getClient(clients[0]!.client_id)).client_id).toBe(clients[0]!.client_id);
    expect(await client.getMetrics()).toContain('vsr_view');
    await client.deleteStream('sys');
  });

  it('errors carry the Iggy body, the status, the view and Retry-After', async () => {
    const anonymous = new VrmetaClient({ baseUrl });
    const missing = await caught(anonymous.getStreams());
    expect(missing.status).toBe(401);
    expect(missing.id).toBe(77);
    expect(missing.code).toBe('access_token_missing');
    // Iggy names the view on successes and redirects only.
    expect(missing.view).toBeNull();

    const client = new VrmetaClient({ baseUrl });
    await client.login('iggy', 'iggy');
    const notFound = await caught(client.getStream('nope'));
    expect(notFound.status).toBe(404);
    expect(notFound.body).toEqual({ id: 404, code: 'not_found', reason: 'Resource not found', field: null });

    node.scripted.push({ kind: 'unavailable', reason: 'pipeline full' });
    const busy = await caught(client.createStream('busy'));
    expect(busy.status).toBe(503);
    expect(busy.id).toBe(58);
    expect(busy.retryAfterSeconds).toBe(1);

    const wrong = await caught(new VrmetaClient({ baseUrl }).login('iggy', 'nope'));
    expect(wrong.status).toBe(400);
    expect(wrong.code).toBe('invalid_credentials');
  });
});

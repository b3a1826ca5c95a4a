/**
 * Authentication and authorization with Iggy's semantics: every non-public route refuses a
 * missing or bad bearer with 401 and the error body; a user without the permission gets 403;
 * JWTs are HS256 with the session key as `jti`, expire after an hour, refresh statelessly, and
 * stop working when their user is deleted or deactivated.
 */
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { JWT_CLOCK_SKEW_SECONDS, REVOCATION_CLOCK_MARGIN_SECONDS } from '../../src/http/auth.js';
import { Operation } from '../../src/metadata/operations.js';
import { createTestNode } from '../../src/http/test-node.js';
import { ALL_FALSE_GLOBAL, expectErrorShape, harness, JWT_SECRET, userWith, type Harness, type Method } from './http-fixtures.js';

const PUBLIC_ROUTES = new Set(['GET /ping', 'GET /livez', 'GET /readyz', 'POST /users/login', 'POST /users/refresh-token', 'POST /personal-access-tokens/login']);

let h: Harness;
let root: string;

beforeEach(async () => {
  h = await harness();
  root = await h.rootToken();
});
afterEach(async () => {
  await h.close();
});

describe('every non-public route needs a valid bearer', () => {
  it('enumerates the app routes and gets 401 with the Iggy body for a missing or bad token', async () => {
    const node = await createTestNode();
    const app = buildApp({ node, jwtSecret: JWT_SECRET });
    const routes: { method: string; url: string }[] = [];
    app.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push({ method, url: route.url });
    });
    await app.ready();
    const protectedRoutes = routes.filter((route) => !PUBLIC_ROUTES.has(`${route.method} ${route.url}`));
    expect(protectedRoutes.length).toBeGreaterThan(30);
    const forged = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setJti('x').setSubject('0').setIssuer('iggy.apache.org').setAudience('iggy.apache.org').setExpirationTime('1h').sign(new Uint8Array(32).fill(9));
    for (const route of protectedRoutes) {
      const url = route.url.replace(/:([a-z_]+)/g, (_match, name: string) => (name === 'partition_id' || name === 'client_id' ? '1' : 'x'));
      const missing = await app.inject({ method: route.method as Method, url, ...(route.method === 'GET' ? {} : { payload: { name: 'x' } }) });
      expect(missing.statusCode, `${route.method} ${url} without a token`).toBe(401);
      expect(missing.json()).toEqual({ id: 77, code: 'access_token_missing', reason: 'Access token is missing', field: null });
      for (const bearer of ['garbage', forged, 'a.b.c']) {
        const bad = await app.inject({ method: route.method as Method, url, headers: { authorization: `Bearer ${bearer}` } });
        expect(bad.statusCode, `${route.method} ${url} with a bad token`).toBe(401);
        expect(bad.json()).toMatchObject({ id: 40, code: 'unauthenticated', field: null });
      }
    }
    expect(node.writes).toEqual([]);
    await app.close();
  });

  it('a non-Bearer scheme is a missing token', async () => {
    const reply = await h.request('GET', '/streams', { headers: { authorization: `Basic ${root}` } });
    expect(reply.status).toBe(401);
    expect(expectErrorShape(reply).id).toBe(77);
  });
});

describe('a user without permission gets 403', () => {
  it('on every gated read and write; ungated routes stay open', async () => {
    await h.request('POST', '/streams', { token: root, body: { name: 's' } });
    await h.request('POST', '/streams/s/topics', { token: root, body: { name: 't', partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 } });
    await h.request('POST', '/streams/s/topics/t/consumer-groups', { token: root, body: { name: 'g' } });
    const nobody = await userWith(h, 'nobody');
    const writesBefore = h.node.writes.length;
    const denied: [Method, string, unknown?][] = [
      ['GET', '/streams'],
      ['POST', '/streams', { name: 'mine' }],
      ['GET', '/streams/s'],
      ['PUT', '/streams/s', { name: 'renamed' }],
      ['DELETE', '/streams/s'],
      ['DELETE', '/streams/s/purge'],
      ['GET', '/streams/s/topics'],
      ['POST', '/streams/s/topics', { name: 't2', partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 }],
      ['GET', '/streams/s/topics/t'],
      ['PUT', '/streams/s/topics/t', { name: 't' }],
      ['DELETE', '/streams/s/topics/t'],
      ['DELETE', '/streams/s/topics/t/purge'],
      ['POST', '/streams/s/topics/t/partitions', { partitions_count: 1 }],
      ['DELETE', '/streams/s/topics/t/partitions?partitions_count=1'],
      ['DELETE', '/streams/s/topics/t/partitions/0?segments_count=1'],
      ['GET', '/streams/s/topics/t/consumer-groups'],
      ['GET', '/streams/s/topics/t/consumer-groups/g'],
      ['POST', '/streams/s/topics/t/consumer-groups', { name: 'g2' }],
      ['DELETE', '/streams/s/topics/t/consumer-groups/g'],
      ['GET', '/users'],
      ['GET', '/users/0'],
      ['POST', '/users', { username: 'other', password: 'password', status: 'active' }],
      ['PUT', '/users/0', { username: 'root2' }],
      ['DELETE', '/users/0'],
      ['PUT', '/users/0/permissions', { permissions: null }],
      ['PUT', '/users/0/password', { current_password: 'iggy', new_password: 'hijacked' }],
      ['GET', '/stats'],
      ['GET', '/clients'],
      ['GET', '/clients/1'],
    ];
    for (const [method, url, body] of denied) {
      const reply = await h.request(method, url, { token: nobody, body });
      expect(reply.status, `${method} ${url}`).toBe(403);
      expect(expectErrorShape(reply)).toEqual({ id: 41, code: 'unauthorized', reason: 'Unauthorized', field: null });
    }
    // Precheck refused every write: nothing reached the replica.
    expect(h.node.writes.length).toBe(writesBefore);

    for (const url of ['/users/me', '/cluster/metadata', '/cluster/status', '/metrics', '/personal-access-tokens']) {
      expect((await h.request('GET', url, { token: nobody })).status, url).toBe(200);
    }
  });

  it('granted permissions open exactly their scope', async () => {
    await h.request('POST', '/streams', { token: root, body: { name: 'a' } });
    await h.request('POST', '/streams', { token: root, body: { name: 'b' } });
    const reader = await userWith(h, 'reader', {
      global: ALL_FALSE_GLOBAL,
      streams: { '1': { manage_stream: false, read_stream: true, manage_topics: false, read_topics: false, poll_messages: false, send_messages: false } },
    });
    expect((await h.request('GET', '/streams/b', { token: reader })).status).toBe(200);
    expect((await h.request('GET', '/streams/a', { token: reader })).status).toBe(403);
    expect((await h.request('GET', '/streams', { token: reader })).status).toBe(403);
    expect((await h.request('PUT', '/streams/b', { token: reader, body: { name: 'c' } })).status).toBe(403);
  });
});

describe('login and tokens', () => {
  it('login answers IdentityInfo with an HS256 JWT that expires in an hour', async () => {
    const reply = await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'iggy' } });
    expect(reply.status).toBe(200);
    const nowSeconds = Math.floor(h.clock.nowMs / 1000);
    expect(reply.json).toEqual({ user_id: 0, access_token: { token: expect.any(String), expiry: nowSeconds + 3600 } });
    const token: string = reply.json.access_token.token;
    expect(decodeProtectedHeader(token).alg).toBe('HS256');
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ sub: '0', iss: 'iggy.apache.org', aud: 'iggy.apache.org', exp: nowSeconds + 3600 });
    expect(typeof claims.jti).toBe('string');
    expect(reply.headers['iggy-view']).toBe('0');
  });

  it('the JWT id is the VSR session key; a PAT writes under its hash', async () => {
    await h.request('POST', '/streams', { token: root, body: { name: 's1' } });
    expect(h.node.writes.at(-1)?.sessionKey).toBe(decodeJwt(root).jti);
    const pat = (await h.request('POST', '/personal-access-tokens', { token: root, body: { name: 'writer', expiry: 0 } })).json.token as string;
    await h.request('POST', '/streams', { token: pat, body: { name: 's2' } });
    expect(h.node.writes.at(-1)?.sessionKey).toMatch(/^pat:[0-9a-f]{64}$/);
    expect(h.node.writes.at(-1)?.sessionKey).not.toContain(pat);
  });

  it('wrong password, unknown user and inactive user are all 400 invalid_credentials (no account probing)', async () => {
    for (const body of [{ username: 'iggy', password: 'wrong' }, { username: 'nobody', password: 'iggy' }]) {
      const reply = await h.request('POST', '/users/login', { body });
      expect(reply.status).toBe(400);
      expect(expectErrorShape(reply)).toMatchObject({ id: 42, code: 'invalid_credentials' });
    }
    await userWith(h, 'sleepy');
    await h.request('PUT', '/users/sleepy', { token: root, body: { status: 'inactive' } });
    const inactive = await h.request('POST', '/users/login', { body: { username: 'sleepy', password: 'secret-pass' } });
    expect(inactive.status).toBe(400);
    expect(expectErrorShape(inactive)).toEqual(expectErrorShape(await h.request('POST', '/users/login', { body: { username: 'nobody', password: 'x-pass' } })));
    expect(expectErrorShape(inactive)).toMatchObject({ id: 42, code: 'invalid_credentials' });
  });

  it('an expired token is 401; refresh mints a new one and the old stays valid until exp', async () => {
    const refreshed = await h.request('POST', '/users/refresh-token', { body: { token: root } });
    expect(refreshed.status).toBe(200);
    const fresh: string = refreshed.json.access_token.token;
    expect(decodeJwt(fresh).jti).not.toBe(decodeJwt(root).jti);
    expect((await h.request('GET', '/streams', { token: root })).status).toBe(200);
    expect((await h.request('GET', '/streams', { token: fresh })).status).toBe(200);

    h.clock.nowMs += 3600_000 + 10_000;
    const expired = await h.request('GET', '/streams', { token: root });
    expect(expired.status).toBe(401);
    expect(expectErrorShape(expired)).toMatchObject({ id: 40, code: 'unauthenticated' });
    expect((await h.request('POST', '/users/refresh-token', { body: { token: root } })).status).toBe(401);
  });

  it('refresh refuses garbage and empty tokens with 401', async () => {
    for (const token of ['not-a-jwt', '']) {
      const reply = await h.request('POST', '/users/refresh-token', { body: { token } });
      expect(reply.status).toBe(401);
      expect(expectErrorShape(reply).id).toBe(40);
    }
  });

  it("a deleted or deactivated user's token is refused", async () => {
    const mallory = await userWith(h, 'mallory');
    const trent = await userWith(h, 'trent');
    expect((await h.request('GET', '/users/me', { token: mallory })).status).toBe(200);
    await h.request('DELETE', '/users/mallory', { token: root });
    expect((await h.request('GET', '/users/me', { token: mallory })).status).toBe(401);
    expect((await h.request('POST', '/users/refresh-token', { body: { token: mallory } })).status).toBe(401);
    // The id is reused: the next user must not inherit the old token.
    await userWith(h, 'oscar');
    expect((await h.request('GET', '/users/me', { token: mallory })).status).toBe(401);

    await h.request('PUT', '/users/trent', { token: root, body: { status: 'inactive' } });
    expect((await h.request('GET', '/users/me', { token: trent })).status).toBe(401);
  });

  it('logout is 204, revokes the token through the log, and ends its VSR session', async () => {
    // Used once before, so the signature check is cached: the revocation must beat the cache.
    expect((await h.request('GET', '/users/me', { token: root })).status).toBe(200);
    const other = await h.login('iggy', 'iggy');
    const reply = await h.request('DELETE', '/users/logout', { token: root });
    expect(reply.status).toBe(204);
    expect(h.node.logouts).toEqual([decodeJwt(root).jti]);
    // What entered the replicated log: the token's id and expiry, never the token.
    const revocations = h.node.writes.filter((write) => write.operation === Operation.revokeAccessToken);
    expect(revocations).toHaveLength(1);
    const claims = decodeJwt(root);
    const body = revocations[0]!.body;
    expect(Buffer.from(body.subarray(0, 16)).toString('hex')).toBe((claims.jti as string).replaceAll('-', ''));
    expect(new DataView(body.buffer, body.byteOffset).getBigUint64(16, true)).toBe(BigInt(((claims.exp as number) + JWT_CLOCK_SKEW_SECONDS + REVOCATION_CLOCK_MARGIN_SECONDS) * 1_000_000));
    expect(Buffer.from(body).includes(Buffer.from(root))).toBe(false);
    // The token is dead everywhere it is checked; another token of the same user is not.
    for (const [method, url] of [['GET', '/users/me'], ['GET', '/streams'], ['DELETE', '/users/logout']] as const) {
      const refused = await h.request(method, url, { token: root });
      expect(refused.status, `${method} ${url}`).toBe(401);
      expect(expectErrorShape(refused)).toMatchObject({ code: 'unauthenticated' });
    }
    expect((await h.request('POST', '/users/refresh-token', { body: { token: root } })).status).toBe(401);
    expect((await h.request('GET', '/users/me', { token: other })).status).toBe(200);
  });

  it('a revocation lasts until the token expires, and no longer', async () => {
    await h.request('DELETE', '/users/logout', { token: root });
    const expiresAtS = decodeJwt(root).exp as number;
    h.clock.nowMs = (expiresAtS + JWT_CLOCK_SKEW_SECONDS + REVOCATION_CLOCK_MARGIN_SECONDS) * 1000 - 1;
    expect(h.node.state.isAccessTokenRevoked(Buffer.from((decodeJwt(root).jti as string).replaceAll('-', ''), 'hex'), h.clock.nowMs * 1000)).toBe(true);
    // The token itself expired long before the entry does.
    expect((await h.request('GET', '/users/me', { token: root })).status).toBe(401);
    const fresh = await h.login('iggy', 'iggy');
    // The next revocation, committed past the first one's expiry, prunes it.
    h.clock.nowMs += 2;
    await h.request('DELETE', '/users/logout', { token: fresh });
    expect(h.node.state.revokedTokenCount()).toBe(1);
  });

  it('a full revocation list: logout answers the limit (the token stays valid until it expires) and still ends the session', async () => {
    const small = await harness({ node: { stateOptions: { limits: { revokedTokensPerUserMax: 1 } } } });
    try {
      const first = await small.login('iggy', 'iggy');
      const second = await small.login('iggy', 'iggy');
      expect((await small.request('DELETE', '/users/logout', { token: first })).status).toBe(204);
      const full = await small.request('DELETE', '/users/logout', { token: second });
      expect(full.status).toBe(400);
      expect(expectErrorShape(full)).toMatchObject({ id: 90_003, code: 'revoked_tokens_limit_reached' });
      expect(small.node.logouts).toHaveLength(2);
      expect((await small.request('GET', '/users/me', { token: second })).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('logout with a personal access token ends its session only: a PAT is revoked by deleting it', async () => {
    const created = await h.request('POST', '/personal-access-tokens', { token: root, body: { name: 'ci-token', expiry: 0 } });
    expect(created.status, created.text).toBe(200);
    const pat = created.json.token as string;
    expect((await h.request('DELETE', '/users/logout', { token: pat })).status).toBe(204);
    expect(h.node.writes.some((write) => write.operation === Operation.revokeAccessToken)).toBe(false);
    expect((await h.request('GET', '/users/me', { token: pat })).status).toBe(200);
  });

  it('an evicted session answers 401 so the client logs in again', async () => {
    await h.request('POST', '/streams', { token: root, body: { name: 'first' } });
    h.node.evict(decodeJwt(root).jti as string);
    const reply = await h.request('POST', '/streams', { token: root, body: { name: 'second' } });
    expect(reply.status).toBe(401);
    expect(expectErrorShape(reply)).toMatchObject({ id: 40, code: 'unauthenticated' });
    const again = await h.login('iggy', 'iggy');
    expect((await h.request('POST', '/streams', { token: again, body: { name: 'second' } })).status).toBe(200);
  });
});

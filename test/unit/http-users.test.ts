/**
 * Users, permissions, passwords and personal access tokens over HTTP: Iggy's shapes and codes,
 * and the secrets rule: passwords are hashed and PATs minted on the replica that handles the
 * request, so no op body the replica receives ever holds a plaintext secret, and the raw PAT is
 * shown exactly once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation } from '../../src/metadata/operations.js';
import { ALL_FALSE_GLOBAL, expectErrorShape, harness, userWith, type Harness } from './http-fixtures.js';

const utf8 = new TextEncoder();

function contains(haystack: Uint8Array, needle: string): boolean {
  const bytes = utf8.encode(needle);
  outer: for (let start = 0; start + bytes.length <= haystack.length; start++) {
    for (let index = 0; index < bytes.length; index++) if (haystack[start + index] !== bytes[index]) continue outer;
    return true;
  }
  return false;
}

let h: Harness;
let root: string;

beforeEach(async () => {
  h = await harness();
  root = await h.rootToken();
});
afterEach(async () => {
  await h.close();
});

const PERMISSIONS = {
  global: { ...ALL_FALSE_GLOBAL, read_streams: true, poll_messages: true },
  streams: {
    '3': {
      manage_stream: false,
      read_stream: true,
      manage_topics: false,
      read_topics: true,
      poll_messages: true,
      send_messages: false,
      topics: { '1': { manage_topic: true, read_topic: true, poll_messages: false, send_messages: false } },
    },
  },
};

describe('users', () => {
  it('create answers UserInfoDetails; the body carries an Argon2id hash, never the password', async () => {
    const reply = await h.request('POST', '/users', {
      token: root,
      body: { username: 'alice', password: 'alice-secret-1', status: 'active', permissions: PERMISSIONS },
    });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      id: 1,
      created_at: h.clock.nowMs * 1000,
      status: 'active',
      username: 'alice',
      permissions: PERMISSIONS,
      options: {},
    });
    const write = h.node.writes.at(-1)!;
    expect(write.operation).toBe(Operation.createUser);
    expect(contains(write.body, 'alice-secret-1')).toBe(false);
    const decoded = decodeRequest(write.operation, write.body);
    expect(decoded.ok && decoded.request.operation === Operation.createUser && decoded.request.passwordHash).toMatch(/^\$argon2id\$/);
  });

  it('list, get by id, name and "me", update, delete', async () => {
    await userWith(h, 'bob');
    const list = await h.request('GET', '/users', { token: root });
    expect(list.json.map((user: { username: string }) => user.username)).toEqual(['iggy', 'bob']);
    expect(Object.keys(list.json[0]).sort()).toEqual(['created_at', 'id', 'options', 'status', 'username']);

    expect((await h.request('GET', '/users/bob', { token: root })).json.id).toBe(1);
    const me = await h.request('GET', '/users/me', { token: root });
    expect(me.json).toMatchObject({ id: 0, username: 'iggy', status: 'active' });
    expect(me.json.permissions.global.manage_servers).toBe(true);

    const update = await h.request('PUT', '/users/1', { token: root, body: { username: 'robert', status: 'inactive' } });
    expect(update.status).toBe(204);
    expect((await h.request('GET', '/users/1', { token: root })).json).toMatchObject({ username: 'robert', status: 'inactive' });

    expect((await h.request('DELETE', '/users/robert', { token: root })).status).toBe(204);
    expect((await h.request('GET', '/users/1', { token: root })).status).toBe(404);
  });

  it('a user without permissions may read only themselves', async () => {
    const carol = await userWith(h, 'carol');
    expect((await h.request('GET', '/users/me', { token: carol })).json.username).toBe('carol');
    expect((await h.request('GET', '/users/carol', { token: carol })).status).toBe(200);
    const other = await h.request('GET', '/users/0', { token: carol });
    expect(other.status).toBe(403);
    expect(expectErrorShape(other)).toMatchObject({ id: 41, code: 'unauthorized' });
    expect((await h.request('GET', '/users/nobody', { token: carol })).status).toBe(403);
  });

  it('duplicates, bad usernames and passwords use the Iggy codes', async () => {
    await userWith(h, 'dave');
    const duplicate = await h.request('POST', '/users', { token: root, body: { username: 'dave', password: 'whatever', status: 'active' } });
    expect(duplicate.status).toBe(400);
    expect(expectErrorShape(duplicate)).toMatchObject({ id: 46, code: 'user_already_exists', field: 'username' });
    const shortName = await h.request('POST', '/users', { token: root, body: { username: 'ab', password: 'whatever', status: 'active' } });
    expect(expectErrorShape(shortName)).toMatchObject({ id: 43, code: 'invalid_username' });
    const shortPassword = await h.request('POST', '/users', { token: root, body: { username: 'erin', password: 'ab', status: 'active' } });
    expect(expectErrorShape(shortPassword)).toMatchObject({ id: 44, code: 'invalid_password' });
    const badStatus = await h.request('POST', '/users', { token: root, body: { username: 'erin', password: 'whatever', status: 'sleeping' } });
    expect(badStatus.status).toBe(422);
    expect(expectErrorShape(badStatus).field).toBe('status');
  });

  it("root has a real created_at from the cluster's first write, and its earlier token stays valid", async () => {
    const before = await h.request('GET', '/users/me', { token: root });
    expect(before.json.created_at).toBe(0);
    h.clock.nowMs += 5_000;
    const stream = await h.request('POST', '/streams', { token: root, body: { name: 'first-write' } });
    expect(stream.status).toBe(200);
    const after = await h.request('GET', '/users/me', { token: root });
    // The token was issued while root's created_at was 0: root is not a new user for it.
    expect(after.status).toBe(200);
    expect(after.json.created_at).toBe(stream.json.created_at);
    expect(after.json.created_at).toBe(h.clock.nowMs * 1000);
    expect((await h.request('GET', '/users', { token: root })).json[0].created_at).toBe(after.json.created_at);
    await h.request('POST', '/streams', { token: root, body: { name: 'second-write' } });
    expect((await h.request('GET', '/users/0', { token: root })).json.created_at).toBe(after.json.created_at);
  });

  it('root cannot be deleted or re-permissioned (400, Iggy 48 / 49)', async () => {
    const del = await h.request('DELETE', '/users/0', { token: root });
    expect(del.status).toBe(400);
    expect(expectErrorShape(del)).toMatchObject({ id: 48, code: 'cannot_delete_user' });
    const perms = await h.request('PUT', '/users/0/permissions', { token: root, body: { permissions: null } });
    expect(perms.status).toBe(400);
    expect(expectErrorShape(perms)).toMatchObject({ id: 49, code: 'cannot_change_permissions' });
  });

  it('permissions update round-trips the JSON shape; bad map keys are refused', async () => {
    await userWith(h, 'frank');
    expect((await h.request('PUT', '/users/frank/permissions', { token: root, body: { permissions: PERMISSIONS } })).status).toBe(204);
    expect((await h.request('GET', '/users/frank', { token: root })).json.permissions).toEqual(PERMISSIONS);
    const bad = await h.request('PUT', '/users/frank/permissions', {
      token: root,
      body: { permissions: { global: ALL_FALSE_GLOBAL, streams: { 'not-a-number': PERMISSIONS.streams['3'] } } },
    });
    expect(bad.status).toBe(422);
    expect(expectErrorShape(bad).field).toBe('permissions');
    const missingFlag = await h.request('PUT', '/users/frank/permissions', {
      token: root,
      body: { permissions: { global: { manage_servers: true } } },
    });
    expect(missingFlag.status).toBe(422);
  });
});

describe('passwords', () => {
  it('a user changes their own password; the old one stops working, no plaintext in the body', async () => {
    const grace = await userWith(h, 'grace');
    const reply = await h.request('PUT', '/users/grace/password', {
      token: grace,
      body: { current_password: 'secret-pass', new_password: 'brand-new-pass' },
    });
    expect(reply.status).toBe(204);
    const write = h.node.writes.at(-1)!;
    expect(write.operation).toBe(Operation.changePassword);
    expect(contains(write.body, 'secret-pass')).toBe(false);
    expect(contains(write.body, 'brand-new-pass')).toBe(false);
    expect((await h.request('POST', '/users/login', { body: { username: 'grace', password: 'secret-pass' } })).status).toBe(400);
    expect((await h.request('POST', '/users/login', { body: { username: 'grace', password: 'brand-new-pass' } })).status).toBe(200);
  });

  it('wrong current password is 400 invalid_credentials; unknown user 404; other user 403', async () => {
    const heidi = await userWith(h, 'heidi');
    await userWith(h, 'ivan');
    const wrong = await h.request('PUT', '/users/heidi/password', { token: heidi, body: { current_password: 'nope-nope', new_password: 'another-one' } });
    expect(wrong.status).toBe(400);
    expect(expectErrorShape(wrong)).toMatchObject({ id: 42, code: 'invalid_credentials' });
    const missing = await h.request('PUT', '/users/ghost/password', { token: root, body: { current_password: 'whatever', new_password: 'whatever-else' } });
    expect(missing.status).toBe(404);
    expect(expectErrorShape(missing)).toMatchObject({ id: 20, code: 'resource_not_found' });
    const other = await h.request('PUT', '/users/ivan/password', { token: heidi, body: { current_password: 'secret-pass', new_password: 'stolen-pass' } });
    expect(other.status).toBe(403);
  });
});

describe('personal access tokens', () => {
  it('the raw token is shown once, only its hash is replicated, and it logs in and authenticates', async () => {
    const created = await h.request('POST', '/personal-access-tokens', { token: root, body: { name: 'ci-token', expiry: 0 } });
    expect(created.status).toBe(200);
    expect(Object.keys(created.json)).toEqual(['token']);
    const raw: string = created.json.token;
    expect(raw.length).toBeGreaterThanOrEqual(32);

    // No op body the replica ever received holds the raw token.
    for (const write of h.node.writes) expect(contains(write.body, raw)).toBe(false);

    const list = await h.request('GET', '/personal-access-tokens', { token: root });
    expect(list.json).toEqual([{ name: 'ci-token', expiry_at: null }]);
    expect(list.text).not.toContain(raw);

    // The raw token works as a bearer and for PAT login.
    expect((await h.request('GET', '/streams', { token: raw })).status).toBe(200);
    const login = await h.request('POST', '/personal-access-tokens/login', { body: { token: raw } });
    expect(login.status).toBe(200);
    expect(login.json.user_id).toBe(0);

    expect((await h.request('DELETE', '/personal-access-tokens/ci-token', { token: root })).status).toBe(204);
    expect((await h.request('GET', '/streams', { token: raw })).status).toBe(401);
    const gone = await h.request('POST', '/personal-access-tokens/login', { body: { token: raw } });
    expect(gone.status).toBe(401);
    expect(expectErrorShape(gone)).toMatchObject({ id: 53, code: 'invalid_personal_access_token' });
  });

  it('an expiring token reports expiry_at and stops working after it', async () => {
    const created = await h.request('POST', '/personal-access-tokens', { token: root, body: { name: 'short', expiry: 60_000_000 } });
    const raw: string = created.json.token;
    const list = await h.request('GET', '/personal-access-tokens', { token: root });
    expect(list.json[0].expiry_at).toBe(h.clock.nowMs * 1000 + 60_000_000);
    expect((await h.request('GET', '/streams', { token: raw })).status).toBe(200);
    h.clock.nowMs += 61_000;
    expect((await h.request('GET', '/streams', { token: raw })).status).toBe(401);
    expect((await h.request('POST', '/personal-access-tokens/login', { body: { token: raw } })).status).toBe(401);
  });

  it('tokens are self-scoped and sorted by name; names are validated; duplicates refused', async () => {
    const judy = await userWith(h, 'judy');
    for (const name of ['zeta', 'alpha']) {
      expect((await h.request('POST', '/personal-access-tokens', { token: judy, body: { name, expiry: 0 } })).status).toBe(200);
    }
    expect((await h.request('GET', '/personal-access-tokens', { token: judy })).json.map((token: { name: string }) => token.name)).toEqual(['alpha', 'zeta']);
    expect((await h.request('GET', '/personal-access-tokens', { token: root })).json).toEqual([]);
    const duplicate = await h.request('POST', '/personal-access-tokens', { token: judy, body: { name: 'alpha', expiry: 0 } });
    expect(expectErrorShape(duplicate)).toMatchObject({ id: 51, code: 'personal_access_token_already_exists', field: 'name' });
    const short = await h.request('POST', '/personal-access-tokens', { token: judy, body: { name: 'ab', expiry: 0 } });
    expect(expectErrorShape(short)).toMatchObject({ id: 50, code: 'invalid_personal_access_token_name' });
    const missing = await h.request('DELETE', '/personal-access-tokens/nothing', { token: judy });
    expect(missing.status).toBe(404);
  });
});

/**
 * Bad input and failure outcomes all answer Iggy's `{id, code, reason, field}` body with the
 * right status: malformed JSON, wrong types, missing fields, over-long names, oversized bodies,
 * unknown routes and ids, and every WriteOutcome the replica can return. Nothing invalid reaches
 * the replica, and every response but /ping carries `iggy-view`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_REQUEST_SIZE_BYTES } from '../../src/http/app.js';
import { expectErrorShape, harness, type Harness } from './http-fixtures.js';

let h: Harness;
let token: string;

beforeEach(async () => {
  h = await harness();
  token = await h.rootToken();
  h.node.currentView = 42;
});
afterEach(async () => {
  await h.close();
});

describe('bad input', () => {
  it('malformed JSON is 400 invalid_json', async () => {
    for (const body of ['{bad', '{"name": "x",}', '{"name": "x"} trailing', '[1,2']) {
      const reply = await h.request('POST', '/streams', { token, body });
      expect(reply.status, body).toBe(400);
      expect(expectErrorShape(reply)).toMatchObject({ id: 400, code: 'invalid_json', field: null });
    }
  });

  it('valid JSON with a missing or mistyped field is 422 naming the field (Iggy/axum), never 400', async () => {
    const cases: [string, unknown, string][] = [
      ['/streams', { name: 5 }, 'name'],
      ['/streams', {}, 'name'],
      ['/streams', 'null', 'body'],
      ['/streams/0/topics', { name: 't', partitions_count: 'one', compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 }, 'partitions_count'],
      ['/streams/0/topics', { name: 't', partitions_count: 1, compression_algorithm: 'none', message_expiry: '0', max_topic_size: 0 }, 'message_expiry'],
      ['/streams/0/topics', { name: 't', partitions_count: 1, compression_algorithm: 'none', message_expiry: 0 }, 'max_topic_size'],
      ['/streams/0/topics', { name: 't', partitions_count: 1.5, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 }, 'partitions_count'],
      ['/streams/0/topics', { name: 't', partitions_count: 1, compression_algorithm: 'zstd', message_expiry: 0, max_topic_size: 0 }, 'compression_algorithm'],
      ['/users', { username: 'someone', password: 'password', status: 'active', permissions: { global: 'all' } }, 'permissions.global'],
      ['/users', { username: 'someone', password: 'password', status: 'sleeping' }, 'status'],
    ];
    await h.request('POST', '/streams', { token, body: { name: 'exists' } });
    const writesBefore = h.node.writes.length;
    for (const [url, body, field] of cases) {
      const reply = await h.request('POST', url, { token, body });
      expect(reply.status, JSON.stringify(body)).toBe(422);
      expect(expectErrorShape(reply), JSON.stringify(body)).toMatchObject({ id: 422, code: 'unprocessable_entity', field });
    }
    expect(h.node.writes.length).toBe(writesBefore);
  });

  it('a POST without any body is 400 (not JSON), and query or path type errors stay 400', async () => {
    const empty = await h.request('POST', '/streams', { token, headers: { 'content-type': 'application/json' } });
    expect(empty.status).toBe(400);
    expect(expectErrorShape(empty)).toMatchObject({ id: 400, code: 'invalid_json' });
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    await h.request('POST', '/streams/s/topics', { token, body: { name: 't', partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 } });
    const query = await h.request('DELETE', '/streams/s/topics/t/partitions?partitions_count=many', { token });
    expect(query.status).toBe(400);
    expect(expectErrorShape(query)).toMatchObject({ id: 400, code: 'invalid_request', field: 'partitions_count' });
  });

  it('a bigint outside a u64 field is refused, never rounded', async () => {
    const reply = await h.request('POST', '/streams/0/topics', {
      token,
      body: '{"name":"t","partitions_count":18446744073709551615,"compression_algorithm":"none","message_expiry":0,"max_topic_size":0}',
    });
    expect(reply.status).toBe(422);
    expect(expectErrorShape(reply).field).toBe('partitions_count');
  });

  it('over-long names answer the Iggy code of the field', async () => {
    const long = 'x'.repeat(256);
    const stream = await h.request('POST', '/streams', { token, body: { name: long } });
    expect(stream.status).toBe(400);
    expect(expectErrorShape(stream)).toMatchObject({ id: 1013, code: 'invalid_stream_name', field: 'name' });
    // 255 bytes is the limit in UTF-8 bytes, not characters: 128 two-byte characters is 256.
    expect(expectErrorShape(await h.request('POST', '/streams', { token, body: { name: 'é'.repeat(128) } })).id).toBe(1013);
    expect((await h.request('POST', '/streams', { token, body: { name: 'x'.repeat(255) } })).status).toBe(200);
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    const topic = await h.request('POST', '/streams/s/topics', {
      token,
      body: { name: long, partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 },
    });
    expect(expectErrorShape(topic)).toMatchObject({ id: 2014, code: 'invalid_topic_name', field: 'name' });
    const empty = await h.request('PUT', '/streams/s', { token, body: { name: '' } });
    expect(expectErrorShape(empty).id).toBe(1013);
    const user = await h.request('POST', '/users', { token, body: { username: 'u'.repeat(51), password: 'password', status: 'active' } });
    expect(expectErrorShape(user)).toMatchObject({ id: 43, code: 'invalid_username' });
    const lone = await h.request('POST', '/streams', { token, body: '{"name":"\\ud800"}' });
    expect(expectErrorShape(lone).id).toBe(1013);
  });

  it('a path name longer than 255 bytes is 400 invalid_identifier', async () => {
    for (const method of ['GET', 'DELETE'] as const) {
      const reply = await h.request(method, `/streams/${'n'.repeat(256)}`, { token });
      expect(reply.status).toBe(400);
      expect(expectErrorShape(reply)).toMatchObject({ id: 6, code: 'invalid_identifier' });
    }
    const tooLong = await h.request('GET', `/streams/${'n'.repeat(2000)}`, { token });
    expect(tooLong.status).toBe(414);
    expect(expectErrorShape(tooLong)).toMatchObject({ id: 414, code: 'uri_too_long' });
  });

  it(`a body over ${MAX_REQUEST_SIZE_BYTES} bytes is 413 and closes the connection`, async () => {
    const reply = await h.request('POST', '/streams', { token, body: `{"name":"${'x'.repeat(MAX_REQUEST_SIZE_BYTES)}"}` });
    expect(reply.status).toBe(413);
    expect(expectErrorShape(reply)).toMatchObject({ id: 413, code: 'payload_too_large', field: null });
    expect(reply.headers.connection).toBe('close');
    expect(reply.headers['iggy-view']).toBeUndefined();
  });

  it('a non-JSON content type is 415', async () => {
    const reply = await h.request('POST', '/streams', { token, body: 'name=x', headers: { 'content-type': 'text/plain' } });
    expect(reply.status).toBe(415);
    expect(expectErrorShape(reply)).toMatchObject({ id: 415, code: 'unsupported_media_type' });
  });

  it('unknown routes are 404 with the legacy body', async () => {
    for (const [method, url] of [['GET', '/nope'], ['POST', '/ping'], ['GET', '/streams/0/unknown']] as const) {
      const reply = await h.request(method, url, { token });
      expect(reply.status, url).toBe(404);
      expect(expectErrorShape(reply)).toEqual({ id: 404, code: 'not_found', reason: 'Resource not found', field: null });
    }
  });
});

describe('write outcomes', () => {
  it('unavailable is 503 TransientNotAccepted with Retry-After: 1', async () => {
    h.node.scripted.push({ kind: 'unavailable', reason: 'view change in progress' });
    const reply = await h.request('POST', '/streams', { token, body: { name: 's' } });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(expectErrorShape(reply)).toMatchObject({ id: 58, code: 'transient_not_accepted' });
    expect(expectErrorShape(reply).reason).toContain('view change in progress');
  });

  it('unknown is 503 TransientNotCommitted with Retry-After: 1', async () => {
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    h.node.scripted.push({ kind: 'unknown', reason: 'no reply in time' });
    const reply = await h.request('DELETE', '/streams/s', { token });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(expectErrorShape(reply)).toMatchObject({ id: 57, code: 'transient_not_committed' });
  });

  it('a committed rejection maps to its status (404 here) without Retry-After', async () => {
    h.node.scripted.push({ kind: 'rejected', errorCode: 1009 });
    const reply = await h.request('POST', '/streams', { token, body: { name: 's' } });
    expect(reply.status).toBe(404);
    expect(reply.headers['retry-after']).toBeUndefined();
    expect(expectErrorShape(reply)).toMatchObject({ id: 1009, code: 'stream_id_not_found', field: 'stream_id' });
  });

  it('a precheck rejection never reaches the replica', async () => {
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    const writes = h.node.writes.length;
    expect((await h.request('POST', '/streams', { token, body: { name: 's' } })).status).toBe(400);
    expect(h.node.writes.length).toBe(writes);
  });

  it('an unexpected failure is a 500 with the error body and no detail leak', async () => {
    h.node.status = () => {
      throw new Error('secret internals');
    };
    const reply = await h.request('GET', '/cluster/status', { token });
    expect(reply.status).toBe(500);
    expect(expectErrorShape(reply)).toEqual({ id: 500, code: 'internal_error', reason: 'Internal server error', field: null });
    expect(reply.text).not.toContain('secret');
  });
});

describe('iggy-view header', () => {
  it('is on successes, never on errors or /ping (Iggy stamps 2xx and 3xx answers only)', async () => {
    const ping = await h.request('GET', '/ping');
    expect(ping.status).toBe(200);
    expect(ping.text).toBe('pong');
    expect(ping.headers['content-type']).toMatch(/^text\/plain/);
    expect(ping.headers['iggy-view']).toBeUndefined();

    for (const [method, url, useToken, status] of [
      ['GET', '/streams', true, 200],
      ['POST', '/streams', true, 200],
      ['POST', '/streams', true, 400],
      ['GET', '/livez', false, 200],
      ['DELETE', '/streams/v', true, 204],
      ['GET', '/streams', false, 401],
      ['GET', '/nope', false, 404],
      ['DELETE', '/streams/9', true, 404],
    ] as const) {
      const reply = await h.request(method, url, { token: useToken ? token : null, body: method === 'POST' ? { name: 'v' } : undefined });
      expect(reply.status, `${method} ${url}`).toBe(status);
      expect(reply.headers['iggy-view'], `${method} ${url}`).toBe(status < 400 ? '42' : undefined);
    }
    // A framework-level rejection (bad percent-encoding) carries none either.
    const badUrl = await h.request('GET', '/streams/%E0%A4%A', { token });
    expect(badUrl.status).toBe(400);
    expect(badUrl.headers['iggy-view']).toBeUndefined();
  });
});

/**
 * Iggy's option catalog and option maps over HTTP: `GET /options/{scope}`, options on
 * topic create/update echoed back with provenance, Iggy's 4041/4042 refusals, and options that
 * survive a checkpoint (snapshot encode -> decode -> restore on another node).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadKernels } from '../../src/kernels/index.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import { fullSnapshot } from './metadata-fixtures.js';
import { harness, type Harness } from './http-fixtures.js';

const U64_MAX = 18446744073709551615n;

let open: Harness[] = [];
afterEach(async () => {
  await Promise.all(open.map((h) => h.close()));
  open = [];
});

async function start(): Promise<Harness> {
  const h = await harness();
  open.push(h);
  return h;
}

const TOPIC_BODY = { name: 'orders', partitions_count: 2, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 };

async function withStream(h: Harness): Promise<string> {
  const token = await h.rootToken();
  expect((await h.request('POST', '/streams', { token, body: { name: 's' } })).status).toBe(200);
  return token;
}

describe('GET /options/{scope}', () => {
  it('lists the topic catalog with kinds and little-endian defaults; streams and users have none', async () => {
    const h = await start();
    const token = await h.rootToken();
    const topic = await h.request('GET', '/options/topic', { token });
    expect(topic.status).toBe(200);
    expect(topic.json.map((spec: { key: string }) => spec.key).sort()).toEqual([
      'compression_algorithm',
      'enforce_fsync',
      'max_topic_size',
      'message_expiry',
      'messages_required_to_save',
      'preallocate_segments',
      'segment_size',
      'size_of_messages_required_to_save',
    ]);
    const byKey = Object.fromEntries(topic.json.map((spec: { key: string }) => [spec.key, spec]));
    expect(byKey.segment_size).toMatchObject({ kind: 'uint64', default_value: [0, 0, 0, 64, 0, 0, 0, 0] });
    expect(byKey.message_expiry).toMatchObject({ kind: 'uint64', default_value: [255, 255, 255, 255, 255, 255, 255, 255] });
    expect(byKey.enforce_fsync).toMatchObject({ kind: 'bool', default_value: [0] });
    expect(byKey.messages_required_to_save).toMatchObject({ kind: 'uint32', default_value: [0, 4, 0, 0] });
    expect(byKey.compression_algorithm).toMatchObject({ kind: 'string', default_value: [...Buffer.from('none')] });
    expect(typeof byKey.segment_size.description).toBe('string');
    for (const scope of ['stream', 'user']) {
      const reply = await h.request('GET', `/options/${scope}`, { token });
      expect(reply.status).toBe(200);
      expect(reply.json).toEqual([]);
    }
  });

  it('answers an unknown scope 400 invalid_command and a request without a token 401', async () => {
    const h = await start();
    const token = await h.rootToken();
    const unknown = await h.request('GET', '/options/partition', { token });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ id: 3, code: 'invalid_command' });
    expect((await h.request('GET', '/options/Topic', { token })).status).toBe(400);
    expect((await h.request('GET', '/options/topic')).status).toBe(401);
  });
});

describe('topic option maps', () => {
  it('accepts catalog options on create and echoes every key with its value and provenance', async () => {
    const h = await start();
    const token = await withStream(h);
    const created = await h.request('POST', '/streams/s/topics', {
      token,
      body: { ...TOPIC_BODY, options: { segment_size: '128MiB', enforce_fsync: 'true', messages_required_to_save: '7' } },
    });
    expect(created.status).toBe(200);
    const options = created.json.options;
    expect(Object.keys(options)).toEqual([...Object.keys(options)].sort());
    expect(options).toEqual({
      compression_algorithm: { value: 'none', explicit: false },
      enforce_fsync: { value: 'true', explicit: true },
      max_topic_size: { value: U64_MAX.toString(), explicit: false },
      message_expiry: { value: U64_MAX.toString(), explicit: false },
      messages_required_to_save: { value: '7', explicit: true },
      preallocate_segments: { value: 'false', explicit: false },
      segment_size: { value: '134217728', explicit: true },
      size_of_messages_required_to_save: { value: '1048576', explicit: false },
    });
    const read = await h.request('GET', '/streams/s/topics/orders', { token });
    expect(read.json.options).toEqual(options);
    // A named field that is set counts as explicit; an option string for a typed field lands in it.
    const second = await h.request('POST', '/streams/s/topics', {
      token,
      body: { ...TOPIC_BODY, name: 'second', compression_algorithm: 'gzip', options: { message_expiry: '5s' } },
    });
    expect(second.status).toBe(200);
    expect(second.json.message_expiry).toBe(5_000_000);
    expect(second.json.options.message_expiry).toEqual({ value: '5000000', explicit: true });
    expect(second.json.options.compression_algorithm).toEqual({ value: 'gzip', explicit: true });
    // The stream list carries the same options.
    const stream = await h.request('GET', '/streams/s', { token });
    expect(stream.json.topics.find((topic: { name: string }) => topic.name === 'second').options.message_expiry.explicit).toBe(true);
    expect(stream.json.options).toEqual({});
  });

  it("refuses an unknown key with Iggy's 4041 unsupported_option_key and creates nothing", async () => {
    const h = await start();
    const token = await withStream(h);
    const reply = await h.request('POST', '/streams/s/topics', { token, body: { ...TOPIC_BODY, options: { segment_size: '128MiB', partitions_count: '7' } } });
    expect(reply.status).toBe(400);
    expect(reply.json).toEqual({ id: 4041, code: 'unsupported_option_key', reason: 'Unsupported option key: partitions_count', field: null });
    expect((await h.request('GET', '/streams/s/topics/orders', { token })).status).toBe(404);
  });

  it('refuses a value that does not parse or breaks its bound with 4042 invalid_option_value', async () => {
    const h = await start();
    const token = await withStream(h);
    for (const [key, value] of [
      ['segment_size', '1KiB'],
      ['segment_size', '1000001'],
      ['segment_size', 'huge'],
      ['enforce_fsync', 'yes'],
      ['messages_required_to_save', '0'],
      ['message_expiry', '1000'],
      ['compression_algorithm', 'zstd'],
      ['size_of_messages_required_to_save', '2GiB'],
    ] as const) {
      const reply = await h.request('POST', '/streams/s/topics', { token, body: { ...TOPIC_BODY, options: { [key]: value } } });
      expect(reply.status, `${key}=${value}`).toBe(400);
      expect(reply.json, `${key}=${value}`).toEqual({ id: 4042, code: 'invalid_option_value', reason: `Invalid option value for key: ${key}`, field: null });
    }
    // The preallocation cap: 64 GiB across the topic's partitions.
    const prealloc = await h.request('POST', '/streams/s/topics', {
      token,
      body: { ...TOPIC_BODY, partitions_count: 65, options: { preallocate_segments: 'true' } },
    });
    expect(prealloc.json).toMatchObject({ id: 4042, reason: 'Invalid option value for key: preallocate_segments' });
    expect((await h.request('GET', '/streams/s/topics', { token })).json).toEqual([]);
  });

  it("measures the max_topic_size floor against the topic's own segment size", async () => {
    const h = await start();
    const token = await withStream(h);
    const small = { ...TOPIC_BODY, max_topic_size: 4 * 1024 * 1024, options: { segment_size: '1MiB' } };
    expect((await h.request('POST', '/streams/s/topics', { token, body: small })).status).toBe(200);
    const below = await h.request('POST', '/streams/s/topics', { token, body: { ...small, name: 'below', options: { segment_size: '8MiB' } } });
    expect(below.status).toBe(400);
    expect(below.json.code).toBe('invalid_topic_size');
    // An update is held to the same floor.
    const update = await h.request('PUT', '/streams/s/topics/orders', { token, body: { name: 'orders', max_topic_size: 512 * 1024 } });
    expect(update.json.code).toBe('invalid_topic_size');
    expect((await h.request('PUT', '/streams/s/topics/orders', { token, body: { name: 'orders', max_topic_size: 2 * 1024 * 1024 } })).status).toBe(204);
  });

  it('after an update, message_expiry and max_topic_size echo as explicit options (Iggy system scenario)', async () => {
    const h = await start();
    const token = await withStream(h);
    await h.request('POST', '/streams/s/topics', { token, body: { ...TOPIC_BODY, options: { segment_size: '128MiB' } } });
    const update = await h.request('PUT', '/streams/s/topics/orders', {
      token,
      body: { name: 'orders-updated', compression_algorithm: 'gzip', message_expiry: 1000, max_topic_size: 2_000_000_000 },
    });
    expect(update.status).toBe(204);
    const topic = (await h.request('GET', '/streams/s/topics/orders-updated', { token })).json;
    expect(topic.message_expiry).toBe(1000);
    expect(topic.max_topic_size).toBe(2_000_000_000);
    expect(topic.options.message_expiry).toEqual({ value: '1000', explicit: true });
    expect(topic.options.max_topic_size).toEqual({ value: '2000000000', explicit: true });
    expect(topic.options.compression_algorithm).toEqual({ value: 'gzip', explicit: true });
    // Keys the update did not send keep what create resolved.
    expect(topic.options.segment_size).toEqual({ value: '134217728', explicit: true });
    expect(topic.options.enforce_fsync).toEqual({ value: 'false', explicit: false });
    // The options map patches the same fields; a create-only knob is refused by name.
    const viaOptions = await h.request('PUT', '/streams/s/topics/orders-updated', { token, body: { name: 'orders-updated', options: { message_expiry: '1m' } } });
    expect(viaOptions.status).toBe(204);
    expect((await h.request('GET', '/streams/s/topics/orders-updated', { token })).json.message_expiry).toBe(60_000_000);
    const createOnly = await h.request('PUT', '/streams/s/topics/orders-updated', { token, body: { name: 'orders-updated', options: { segment_size: '2MiB' } } });
    expect(createOnly.status).toBe(400);
    expect(createOnly.json).toMatchObject({ id: 4041, reason: 'Unsupported option key: segment_size' });
  });

  it('refuses every option key on streams and users (empty catalogs), accepts an empty map', async () => {
    const h = await start();
    const token = await withStream(h);
    const cases: Array<[string, string, unknown]> = [
      ['POST', '/streams', { name: 't', options: { future_key: '1' } }],
      ['PUT', '/streams/s', { name: 's2', options: { future_key: '1' } }],
      ['POST', '/users', { username: 'opt-user', password: 'secret123', status: 'active', options: { future_key: '1' } }],
      ['PUT', '/users/0', { username: 'iggy', options: { future_key: '1' } }],
    ];
    for (const [method, url, body] of cases) {
      const reply = await h.request(method as 'POST' | 'PUT', url, { token, body });
      expect(reply.status, `${method} ${url}`).toBe(400);
      expect(reply.json, `${method} ${url}`).toEqual({ id: 4041, code: 'unsupported_option_key', reason: 'Unsupported option key: future_key', field: null });
    }
    expect((await h.request('PUT', '/streams/s', { token, body: { name: 's2', options: {} } })).status).toBe(204);
    expect((await h.request('GET', '/streams/s2', { token })).json.options).toEqual({});
    expect((await h.request('GET', '/users/0', { token })).json.options).toEqual({});
  });
});

describe('topic options across a checkpoint', () => {
  it('survive snapshot encode (TS and WASM, same bytes) -> decode -> restore on another node', async () => {
    const h = await start();
    const token = await withStream(h);
    await h.request('POST', '/streams/s/topics', { token, body: { ...TOPIC_BODY, options: { segment_size: '128MiB', preallocate_segments: 'true' } } });
    await h.request('PUT', '/streams/s/topics/orders', { token, body: { name: 'orders', message_expiry: 1000 } });
    const before = (await h.request('GET', '/streams/s/topics/orders', { token })).json;
    const snapshot = fullSnapshot(h.node.state.snapshot(), 9);
    const bytes = loadKernels('ts').snapshotEncode(snapshot);
    const wasm = (() => {
      try {
        return loadKernels('wasm');
      } catch {
        return null;
      }
    })();
    if (wasm !== null) expect(Buffer.from(wasm.snapshotEncode(snapshot))).toEqual(Buffer.from(bytes));
    const decoded = decodeSnapshot(bytes);
    const other = await start();
    other.node.state.restore({ users: decoded.users, streams: decoded.streams, revokedTokens: decoded.revokedTokens });
    const after = (await other.request('GET', '/streams/s/topics/orders', { token: await other.rootToken() })).json;
    expect(after.options).toEqual(before.options);
    expect(after.options.segment_size).toEqual({ value: '134217728', explicit: true });
    expect(after.options.preallocate_segments).toEqual({ value: 'true', explicit: true });
    expect(after.options.message_expiry).toEqual({ value: '1000', explicit: true });
  });
});

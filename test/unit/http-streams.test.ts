/**
 * Streams, topics, partitions, segments and consumer groups over HTTP: Iggy's routes, JSON
 * shapes and status codes (iggy-http-api-and-ops.md §1.2-1.3), path ids by number or name, and
 * u64 sentinels that survive the trip losslessly.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Operation } from '../../src/metadata/operations.js';
import { expectErrorShape, harness, type Harness } from './http-fixtures.js';

const U64_MAX = 18446744073709551615n;
const GIB = 1024n * 1024n * 1024n;

let h: Harness;
let token: string;

beforeEach(async () => {
  h = await harness();
  token = await h.rootToken();
});
afterEach(async () => {
  await h.close();
});

async function createStream(name: string) {
  const reply = await h.request('POST', '/streams', { token, body: { name } });
  expect(reply.status).toBe(200);
  return reply.json;
}

async function createTopic(stream: string, body: Record<string, unknown>) {
  return h.request('POST', `/streams/${stream}/topics`, {
    token,
    body: { partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0, ...body },
  });
}

describe('streams', () => {
  it('create answers 200 with StreamDetails read back from the state', async () => {
    const stream = await createStream('orders');
    expect(stream).toEqual({
      id: 0,
      created_at: h.clock.nowMs * 1000,
      name: 'orders',
      size: '0 B',
      messages_count: 0,
      topics_count: 0,
      topics: [],
      options: {},
    });
    expect(h.node.writes.at(-1)?.operation).toBe(Operation.createStream);
  });

  it('list, get by id and by name, update, purge and delete', async () => {
    await createStream('a');
    await createStream('b');
    const list = await h.request('GET', '/streams', { token });
    expect(list.status).toBe(200);
    expect(list.json.map((stream: { name: string }) => stream.name)).toEqual(['a', 'b']);
    expect(Object.keys(list.json[0]).sort()).toEqual(['created_at', 'id', 'messages_count', 'name', 'options', 'size', 'topics_count']);

    expect((await h.request('GET', '/streams/1', { token })).json.name).toBe('b');
    expect((await h.request('GET', '/streams/b', { token })).json.id).toBe(1);

    const update = await h.request('PUT', '/streams/b', { token, body: { name: 'c' } });
    expect(update.status).toBe(204);
    expect(update.text).toBe('');
    expect((await h.request('GET', '/streams/1', { token })).json.name).toBe('c');

    expect((await h.request('DELETE', '/streams/c/purge', { token })).status).toBe(204);
    expect((await h.request('DELETE', '/streams/1', { token })).status).toBe(204);
    const gone = await h.request('GET', '/streams/1', { token });
    expect(gone.status).toBe(404);
    expect(expectErrorShape(gone)).toEqual({ id: 404, code: 'not_found', reason: 'Resource not found', field: null });
  });

  it('a duplicate name is a 400 with the Iggy code and field (no 409)', async () => {
    await createStream('dup');
    const reply = await h.request('POST', '/streams', { token, body: { name: 'dup' } });
    expect(reply.status).toBe(400);
    expect(expectErrorShape(reply)).toMatchObject({ id: 1012, code: 'stream_name_already_exists', field: 'name' });
  });

  it('writes to an unknown stream are 404 with the Iggy not-found code', async () => {
    for (const [method, url, body] of [
      ['PUT', '/streams/77', { name: 'x' }],
      ['DELETE', '/streams/nope', undefined],
      ['DELETE', '/streams/nope/purge', undefined],
    ] as const) {
      const reply = await h.request(method, url, { token, body });
      expect(reply.status, url).toBe(404);
      expect(expectErrorShape(reply)).toMatchObject({ id: 1009, code: 'stream_id_not_found', field: 'stream_id' });
    }
  });
});

describe('topics', () => {
  beforeEach(async () => {
    await createStream('s');
  });

  it('create resolves the 0 sentinels to the server defaults and answers TopicDetails', async () => {
    const reply = await createTopic('s', { name: 't', partitions_count: 3 });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      id: 0,
      name: 't',
      size: '0 B',
      message_expiry: U64_MAX,
      compression_algorithm: 'none',
      max_topic_size: U64_MAX,
      messages_count: 0,
      partitions_count: 3,
      options: {},
    });
    expect(reply.json.partitions).toHaveLength(3);
    expect(Object.keys(reply.json.partitions[0]).sort()).toEqual(['created_at', 'current_offset', 'id', 'messages_count', 'segments_count', 'size']);
  });

  it('u64::MAX round-trips losslessly for message_expiry and max_topic_size', async () => {
    const reply = await createTopic('s', { name: 'forever', message_expiry: U64_MAX, max_topic_size: U64_MAX });
    expect(reply.status).toBe(200);
    expect(reply.text).toContain('"message_expiry":18446744073709551615');
    expect(reply.text).toContain('"max_topic_size":18446744073709551615');
    const read = await h.request('GET', '/streams/s/topics/forever', { token });
    expect(read.text).toContain('"message_expiry":18446744073709551615');
    expect(read.json.max_topic_size).toBe(U64_MAX);
  });

  it('values above 2^53 below u64::MAX keep every digit', async () => {
    const expiry = 9007199254740993n; // 2^53 + 1: JSON.parse would make it 2^53
    const size = U64_MAX - 1n;
    const reply = await createTopic('s', { name: 'exact', message_expiry: expiry, max_topic_size: size });
    expect(reply.status).toBe(200);
    expect(reply.json.message_expiry).toBe(expiry);
    expect(reply.json.max_topic_size).toBe(size);
    expect(reply.text).toContain('"message_expiry":9007199254740993');
  });

  it('u64 fields out of range are a 422 naming the field; a business rule stays 400', async () => {
    const tooBig = await createTopic('s', { name: 'x', max_topic_size: U64_MAX + 1n });
    expect(tooBig.status).toBe(422);
    expect(expectErrorShape(tooBig)).toMatchObject({ code: 'unprocessable_entity', field: 'max_topic_size' });
    const negative = await createTopic('s', { name: 'x', message_expiry: -1 });
    expect(negative.status).toBe(422);
    expect(expectErrorShape(negative).field).toBe('message_expiry');
    const small = await createTopic('s', { name: 'x', max_topic_size: 1000 });
    expect(small.status).toBe(400);
    expect(expectErrorShape(small)).toMatchObject({ id: 1019, code: 'invalid_topic_size' });
  });

  it('compression is case-insensitive; an unknown one is a 422 (valid JSON, bad value)', async () => {
    expect((await createTopic('s', { name: 'g', compression_algorithm: 'Gzip' })).json.compression_algorithm).toBe('gzip');
    const bad = await createTopic('s', { name: 'z', compression_algorithm: 'zstd' });
    expect(bad.status).toBe(422);
    expect(expectErrorShape(bad).field).toBe('compression_algorithm');
  });

  it('list, get, update (absent settings keep their value), purge, delete', async () => {
    await createTopic('s', { name: 't', message_expiry: 5_000_000, max_topic_size: 2n * GIB });
    const list = await h.request('GET', '/streams/0/topics', { token });
    expect(list.status).toBe(200);
    expect(list.json).toHaveLength(1);
    expect(list.json[0]).not.toHaveProperty('partitions');

    const rename = await h.request('PUT', '/streams/s/topics/t', { token, body: { name: 't2' } });
    expect(rename.status).toBe(204);
    const renamed = (await h.request('GET', '/streams/s/topics/0', { token })).json;
    expect(renamed).toMatchObject({ name: 't2', message_expiry: 5_000_000, max_topic_size: Number(2n * GIB) });

    const reset = await h.request('PUT', '/streams/s/topics/t2', { token, body: { name: 't2', message_expiry: 0, max_topic_size: 0, compression_algorithm: 'gzip' } });
    expect(reset.status).toBe(204);
    expect((await h.request('GET', '/streams/s/topics/t2', { token })).json).toMatchObject({
      message_expiry: U64_MAX,
      max_topic_size: U64_MAX,
      compression_algorithm: 'gzip',
    });

    expect((await h.request('DELETE', '/streams/s/topics/t2/purge', { token })).status).toBe(204);
    expect((await h.request('DELETE', '/streams/s/topics/t2', { token })).status).toBe(204);
    expect((await h.request('GET', '/streams/s/topics/t2', { token })).status).toBe(404);
  });

  it('unknown stream or topic: reads 404 (legacy body), writes 404 (Iggy code)', async () => {
    expect((await h.request('GET', '/streams/nope/topics', { token })).status).toBe(404);
    expect((await h.request('GET', '/streams/s/topics/nope', { token })).status).toBe(404);
    const missingStream = await createTopic('nope', { name: 't' });
    expect(missingStream.status).toBe(404);
    expect(expectErrorShape(missingStream)).toMatchObject({ id: 1009, field: 'stream_id' });
    const missingTopic = await h.request('DELETE', '/streams/s/topics/9', { token });
    expect(missingTopic.status).toBe(404);
    expect(expectErrorShape(missingTopic)).toMatchObject({ id: 2010, code: 'topic_id_not_found', field: 'topic_id' });
  });

  it('too many partitions at creation is Iggy 2015', async () => {
    const reply = await createTopic('s', { name: 't', partitions_count: 1001 });
    expect(reply.status).toBe(400);
    expect(expectErrorShape(reply)).toMatchObject({ id: 2015, code: 'too_many_partitions' });
  });
});

describe('partitions and segments', () => {
  beforeEach(async () => {
    await createStream('s');
    await createTopic('s', { name: 't', partitions_count: 1 });
  });

  it('create partitions is 200 with an empty body; delete is 204', async () => {
    const created = await h.request('POST', '/streams/s/topics/t/partitions', { token, body: { partitions_count: 2 } });
    expect(created.status).toBe(200);
    expect(created.text).toBe('');
    expect((await h.request('GET', '/streams/s/topics/t', { token })).json.partitions_count).toBe(3);

    const deleted = await h.request('DELETE', '/streams/s/topics/t/partitions?partitions_count=2', { token });
    expect(deleted.status).toBe(204);
    expect((await h.request('GET', '/streams/s/topics/t', { token })).json.partitions_count).toBe(1);
  });

  it('partition counts outside 1..=1000 and a missing query are 400', async () => {
    const zero = await h.request('POST', '/streams/s/topics/t/partitions', { token, body: { partitions_count: 0 } });
    expect(expectErrorShape(zero)).toMatchObject({ id: 2015, code: 'too_many_partitions' });
    const missing = await h.request('DELETE', '/streams/s/topics/t/partitions', { token });
    expect(missing.status).toBe(400);
    expect(expectErrorShape(missing).field).toBe('partitions_count');
    const notNumber = await h.request('DELETE', '/streams/s/topics/t/partitions?partitions_count=abc', { token });
    expect(notNumber.status).toBe(400);
    expect(expectErrorShape(notNumber).field).toBe('partitions_count');
    const tooMany = await h.request('DELETE', '/streams/s/topics/t/partitions?partitions_count=5', { token });
    expect(expectErrorShape(tooMany)).toMatchObject({ id: 2019, code: 'invalid_partitions_count' });
  });

  it('delete segments is 204; an unknown partition is 404 partition_not_found', async () => {
    expect((await h.request('DELETE', '/streams/s/topics/t/partitions/0?segments_count=3', { token })).status).toBe(204);
    const missing = await h.request('DELETE', '/streams/s/topics/t/partitions/5?segments_count=1', { token });
    expect(missing.status).toBe(404);
    expect(expectErrorShape(missing)).toMatchObject({ id: 3007, code: 'partition_not_found', field: 'partition_id' });
    const badId = await h.request('DELETE', '/streams/s/topics/t/partitions/x?segments_count=1', { token });
    expect(badId.status).toBe(400);
    expect(expectErrorShape(badId).field).toBe('partition_id');
  });

  it('segments_count: one empty segment per partition, as Iggy; delete-segments and purge keep it, /stats sums it', async () => {
    const segments = async () => (await h.request('GET', '/streams/s/topics/t', { token })).json.partitions.map((p: { segments_count: number }) => p.segments_count);
    const statsSegments = async () => (await h.request('GET', '/stats', { token })).json.segments_count;
    expect(await segments()).toEqual([1]);
    expect(await statsSegments()).toBe(1);
    // The active segment is never deleted: asking for more than the sealed ones leaves it.
    expect((await h.request('DELETE', '/streams/s/topics/t/partitions/0?segments_count=5', { token })).status).toBe(204);
    expect((await h.request('DELETE', '/streams/s/topics/t/purge', { token })).status).toBe(204);
    expect(await segments()).toEqual([1]);
    expect((await h.request('POST', '/streams/s/topics/t/partitions', { token, body: { partitions_count: 3 } })).status).toBe(200);
    expect(await segments()).toEqual([1, 1, 1, 1]);
    expect(await statsSegments()).toBe(4);
    const created = await createTopic('s', { name: 'fresh', partitions_count: 2 });
    expect(created.json.partitions.map((p: { segments_count: number }) => p.segments_count)).toEqual([1, 1]);
    expect(await statsSegments()).toBe(6);
  });
});

describe('consumer groups', () => {
  beforeEach(async () => {
    await createStream('s');
    await createTopic('s', { name: 't', partitions_count: 2 });
  });

  it('create answers ConsumerGroupDetails; list, get by id and name, delete', async () => {
    const created = await h.request('POST', '/streams/s/topics/t/consumer-groups', { token, body: { name: 'g' } });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({ id: 0, name: 'g', partitions_count: 2, members_count: 0, members: [] });

    const list = await h.request('GET', '/streams/0/topics/0/consumer-groups', { token });
    expect(list.json).toEqual([{ id: 0, name: 'g', partitions_count: 2, members_count: 0 }]);
    expect((await h.request('GET', '/streams/s/topics/t/consumer-groups/g', { token })).json.id).toBe(0);
    expect((await h.request('GET', '/streams/s/topics/t/consumer-groups/0', { token })).json.name).toBe('g');

    const duplicate = await h.request('POST', '/streams/s/topics/t/consumer-groups', { token, body: { name: 'g' } });
    expect(expectErrorShape(duplicate)).toMatchObject({ id: 5004, code: 'consumer_group_name_already_exists', field: 'name' });

    expect((await h.request('DELETE', '/streams/s/topics/t/consumer-groups/g', { token })).status).toBe(204);
    expect((await h.request('GET', '/streams/s/topics/t/consumer-groups/g', { token })).status).toBe(404);
    const again = await h.request('DELETE', '/streams/s/topics/t/consumer-groups/g', { token });
    expect(again.status).toBe(404);
    expect(expectErrorShape(again)).toMatchObject({ id: 5000, code: 'consumer_group_id_not_found' });
  });
});

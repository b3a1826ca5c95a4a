/**
 * Whole-state list reads (src/http/list-reads.ts): built in slices with the event loop's turns
 * between them, one build per state version shared by every read at it, one build at a time, a
 * client's own writes always in what it reads next, and bodies byte for byte what a one-shot
 * encoding (binary) or the route schema's serializer (HTTP) gives.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { buildSliced, LIST_SLICE, ListReads, SharedList, type ListSpec } from '../../src/http/list-reads.js';
import { renderStream, renderUser } from '../../src/http/render.js';
import { Stream, UserInfo } from '../../src/http/schemas.js';
import { encodeStreams, encodeUsers } from '../../src/metadata/binary-responses.js';
import type { MetadataStateMachine } from '../../src/metadata/state-machine.js';
import { harness } from './http-fixtures.js';
import { Driver, ROOT, req } from './metadata-fixtures.js';

/** More than two slices, with names that need escaping in JSON and several UTF-8 byte widths. */
function streamName(index: number): string {
  return ['plain', 'quote"d', 'back\\slash', 'zürich', '東京', 'emoji-😀'][index % 6]! + `-${index}`;
}

function machineWithStreams(count: number): Driver {
  const driver = new Driver(undefined);
  for (let index = 0; index < count; index++) driver.created(ROOT, req.createStream(streamName(index)));
  return driver;
}

describe('list reads', () => {
  it('the sliced binary bodies are the bytes of a one-shot encoding, gaps in the ids included', async () => {
    const driver = machineWithStreams(LIST_SLICE * 2 + 300);
    // Holes at and around the slice edges: a keyset slice resumes after the last id it saw.
    for (const id of [0, LIST_SLICE - 1, LIST_SLICE, LIST_SLICE + 1, 2 * LIST_SLICE + 299]) {
      expect(driver.code(ROOT, req.deleteStream(id))).toBe(0);
    }
    for (let index = 0; index < 40; index++) driver.created(ROOT, req.createUser(`user-${index}`));
    const sm = driver.sm;
    const lists = new ListReads(sm);
    expect(await lists.streamsBody.get()).toEqual(encodeStreams(sm.queries.streams()));
    expect(await lists.usersBody.get()).toEqual(encodeUsers(sm.queries.users()));
    expect(sm.queries.streams()).toHaveLength(LIST_SLICE * 2 + 295);
  });

  it('reads at one version share one build; a write makes the next read build anew and see it', async () => {
    const driver = machineWithStreams(LIST_SLICE + 10);
    const lists = new ListReads(driver.sm);
    const bodies = await Promise.all(Array.from({ length: 40 }, () => lists.streamsBody.get()));
    expect(lists.streamsBody.builds).toBe(1);
    expect(new Set(bodies).size).toBe(1);
    expect(await lists.streamsBody.get()).toBe(bodies[0]);
    expect(lists.streamsBody.builds).toBe(1);
    driver.created(ROOT, req.createStream('written-just-now'));
    const after = await lists.streamsBody.get();
    expect(lists.streamsBody.builds).toBe(2);
    expect(after).toEqual(encodeStreams(driver.sm.queries.streams()));
    expect(Buffer.from(after).includes(Buffer.from('written-just-now'))).toBe(true);
  });

  it('a data-plane counter moving is a new version too (list bodies carry stream sizes)', async () => {
    const driver = machineWithStreams(3);
    driver.created(ROOT, req.createTopic(1, 't', 1));
    const lists = new ListReads(driver.sm);
    const before = await lists.streamsBody.get();
    const stats = driver.sm.partitionStats(1, 0, 0)!;
    stats.add({ sizeBytes: 4096, messagesCount: 7, segmentsCount: 0 });
    const after = await lists.streamsBody.get();
    expect(after).not.toEqual(before);
    expect(after).toEqual(encodeStreams(driver.sm.queries.streams()));
  });

  it('one build at a time: a read during a stale build waits for it, then gets a newer one', async () => {
    let version = 0;
    let running = 0;
    let overlapped = false;
    const started: number[] = [];
    const list = new SharedList(
      () => version,
      async () => {
        running += 1;
        overlapped ||= running > 1;
        const at = version;
        started.push(at);
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        running -= 1;
        return at;
      },
    );
    const first = list.get();
    version = 1;
    const second = list.get();
    const third = list.get();
    expect(await first).toBe(0);
    expect(await second).toBe(1);
    expect(await third).toBe(1);
    expect(started).toEqual([0, 1]);
    expect(overlapped).toBe(false);
  });

  it('a build gives the event loop a turn between slices, and none for a list within one', async () => {
    const ids = Array.from({ length: 3 * 10 + 4 }, (_, index) => index);
    const turns: string[] = [];
    const spec: ListSpec<number, number[], number[]> = {
      page: (fromId, limit) => {
        turns.push(`slice@${fromId}`);
        return ids.filter((id) => id >= fromId).slice(0, limit);
      },
      idOf: (id) => id,
      start: () => [],
      add: (out, views) => out.push(...views),
      finish: (out) => out,
    };
    const building = buildSliced(spec, 10);
    setImmediate(() => turns.push('other work'));
    expect(await building).toEqual(ids);
    // Queued after the build's first turn: it runs before the build's later slices.
    expect(turns.indexOf('other work')).toBeGreaterThan(0);
    expect(turns.indexOf('other work')).toBeLessThan(turns.indexOf('slice@30'));
    expect(turns.filter((turn) => turn.startsWith('slice'))).toEqual(['slice@0', 'slice@10', 'slice@20', 'slice@30']);
    const small = buildSliced({ ...spec, page: (fromId, limit) => ids.slice(0, 3).filter((id) => id >= fromId).slice(0, limit) }, 10);
    let yielded = false;
    setImmediate(() => (yielded = true));
    expect(await small).toEqual([0, 1, 2]);
    expect(yielded).toBe(false);
  });

  it('GET /streams and GET /users are the text the schema serializer gives for the whole array', async () => {
    let state: MetadataStateMachine | null = null;
    const h = await harness({
      routes: (app, node) => {
        state = node.state;
        // What the routes answered before lists were sliced: the whole array, serialized once.
        app.get('/whole/streams', { schema: { response: { 200: Type.Array(Stream) } } }, () => node.state.queries.streams().map(renderStream));
        app.get('/whole/users', { schema: { response: { 200: Type.Array(UserInfo) } } }, () => node.state.queries.users().map(renderUser));
      },
    });
    try {
      const token = await h.rootToken();
      for (let index = 0; index < LIST_SLICE + 20; index++) {
        const created = await h.request('POST', '/streams', { token, body: { name: streamName(index) } });
        expect(created.status).toBe(200);
      }
      expect(state).not.toBeNull();
      for (const [route, whole] of [['/streams', '/whole/streams'], ['/users', '/whole/users']] as const) {
        const listed = await h.request('GET', route, { token });
        const expected = await h.request('GET', whole, { token });
        expect(listed.status).toBe(200);
        expect(listed.headers['content-type']).toBe(expected.headers['content-type']);
        expect(listed.text).toBe(expected.text);
      }
      expect((await h.request('GET', '/streams', { token })).json).toHaveLength(LIST_SLICE + 20);
    } finally {
      await h.close();
    }
  });
});

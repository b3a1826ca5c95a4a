/**
 * `?consistency=serializable|linearizable` on reads (Iggy error.rs `ConsistencyQuery`, reads.rs
 * `authorize_read`): serializable reads are served by whichever replica is asked; a linearizable
 * read on a backup is a 307 to the same path and query on the primary, or a retryable 503
 * `not_primary` when the backup does not know where the primary listens; a bad value is a 400.
 * In process (inject), with a fetch that fails the test if the backup ever relays a read.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { expectErrorShape, harness, type Harness } from './http-fixtures.js';

const PRIMARY = '10.0.0.9:3000';

let h: Harness;
let relayed: string[];

async function backup(options: { primaryHttp?: string | null; scheme?: 'http' | 'https' } = {}): Promise<Harness> {
  relayed = [];
  const created = await harness({
    node: { primary: false, primaryHttp: options.primaryHttp === undefined ? PRIMARY : options.primaryHttp, view: 3 },
    app: {
      forward: {
        retryDeadlineMs: 0,
        ...(options.scheme === undefined ? {} : { scheme: options.scheme }),
        fetch: async (input) => {
          relayed.push(String(input));
          throw new Error('a read must never be relayed');
        },
      },
    },
  });
  // Writes on a backup are forwarded: state for the reads is made directly on the node's state.
  created.node.primary = true;
  const token = await created.rootToken();
  await created.request('POST', '/streams', { token, body: { name: 's' } });
  await created.request('POST', '/streams/s/topics', {
    token,
    body: { name: 't', partitions_count: 1, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 },
  });
  await created.request('POST', '/streams/s/topics/t/consumer-groups', { token, body: { name: 'g' } });
  created.node.primary = false;
  return created;
}

afterEach(async () => {
  await h.close();
});

const READS = [
  '/streams',
  '/streams/s',
  '/streams/s/topics',
  '/streams/s/topics/t',
  '/streams/s/topics/t/consumer-groups',
  '/streams/s/topics/t/consumer-groups/g',
  '/users',
  '/users/me',
  '/personal-access-tokens',
  '/stats',
  '/clients',
];

describe('consistency on a backup', () => {
  it('serializable (explicit or absent) is served locally', async () => {
    h = await backup();
    const token = await h.rootToken();
    for (const url of READS) {
      for (const query of ['', '?consistency=serializable']) {
        const reply = await h.request('GET', `${url}${query}`, { token });
        expect(reply.status, `${url}${query}`).toBe(200);
        expect(reply.headers['iggy-view']).toBe('3');
      }
    }
    expect(relayed).toEqual([]);
  });

  it('linearizable is a 307 to the same path and query on the primary, with an empty body', async () => {
    h = await backup();
    const token = await h.rootToken();
    for (const url of READS) {
      const reply = await h.request('GET', `${url}?consistency=linearizable&x=1`, { token });
      expect(reply.status, url).toBe(307);
      expect(reply.headers.location).toBe(`http://${PRIMARY}${url}?consistency=linearizable&x=1`);
      expect(reply.text).toBe('');
      expect(reply.headers['iggy-view']).toBe('3');
    }
    expect(relayed).toEqual([]);
  });

  it('the redirect uses the listener scheme (HTTPS cluster)', async () => {
    h = await backup({ scheme: 'https' });
    const reply = await h.request('GET', '/streams?consistency=linearizable', { token: await h.rootToken() });
    expect(reply.status).toBe(307);
    expect(reply.headers.location).toBe(`https://${PRIMARY}/streams?consistency=linearizable`);
  });

  it('an unknown primary address is a retryable 503 not_primary that says so', async () => {
    h = await backup({ primaryHttp: null });
    const reply = await h.request('GET', '/streams/s?consistency=linearizable', { token: await h.rootToken() });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(reply.headers.location).toBeUndefined();
    const body = expectErrorShape(reply);
    expect(body).toMatchObject({ id: 503, code: 'not_primary', field: null });
    expect(body.reason).toContain("does not know the primary's HTTP address");
    expect(relayed).toEqual([]);
  });

  it('node-local reads ignore consistency (cluster metadata, cluster status)', async () => {
    h = await backup();
    const token = await h.rootToken();
    for (const url of ['/cluster/metadata', '/cluster/status']) {
      expect((await h.request('GET', `${url}?consistency=linearizable`, { token })).status, url).toBe(200);
    }
  });

  it('the caller is authenticated before any redirect', async () => {
    h = await backup();
    const reply = await h.request('GET', '/streams?consistency=linearizable');
    expect(reply.status).toBe(401);
    expect(reply.headers.location).toBeUndefined();
  });
});

describe('consistency on the primary', () => {
  it('linearizable is served here', async () => {
    h = await harness();
    const token = await h.rootToken();
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    const reply = await h.request('GET', '/streams?consistency=linearizable', { token });
    expect(reply.status).toBe(200);
    expect(reply.json.map((stream: { name: string }) => stream.name)).toEqual(['s']);
  });

  it('a bad value is a 400 naming the consistency field, on primary and backup alike', async () => {
    for (const make of [() => harness(), () => backup()]) {
      h = await make();
      const token = await h.rootToken();
      for (const query of ['consistency=strong', 'consistency=Linearizable', 'consistency=', 'consistency=linearizable&consistency=serializable']) {
        const reply = await h.request('GET', `/streams?${query}`, { token });
        expect(reply.status, query).toBe(400);
        expect(expectErrorShape(reply), query).toMatchObject({ id: 400, code: 'invalid_request', field: 'consistency' });
        expect(reply.headers['iggy-view']).toBeUndefined();
      }
      await h.close();
    }
    h = await harness();
  });
});

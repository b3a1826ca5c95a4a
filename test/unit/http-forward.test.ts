/**
 * Backup -> primary forwarding (iggy-http-api-and-ops.md §1.5, Iggy forward.rs): a backup relays
 * control-plane writes to the primary's HTTP listener with the caller's bearer and the loop-guard
 * header, serves reads itself, refuses a second hop, and retries only what provably never entered
 * a pipeline. The primary is a real app listening on 127.0.0.1 (port from listen(0)); the backup
 * is driven with inject().
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { Operation } from '../../src/metadata/operations.js';
import { createTestNode, type TestNode } from '../../src/http/test-node.js';
import { expectErrorShape, harness, JWT_SECRET, type Harness } from './http-fixtures.js';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

let primaryNode: TestNode;
let primary: FastifyInstance;
let primaryAddress: string;
let seen: Seen[];
let backup: Harness;
let token: string;

beforeEach(async () => {
  seen = [];
  primaryNode = await createTestNode({ replica: 0, view: 7 });
  // One wall clock for both replicas: the backup's token must be valid on the primary too.
  primary = buildApp({ node: primaryNode, jwtSecret: JWT_SECRET, nowMs: () => backup.clock.nowMs });
  primary.addHook('preValidation', async (request) => {
    seen.push({ method: request.method, url: request.url, headers: { ...request.headers }, body: JSON.stringify(request.body ?? null) });
  });
  await primary.listen({ port: 0, host: '127.0.0.1' });
  const address = primary.server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  primaryAddress = `127.0.0.1:${address.port}`;
  backup = await harness({ node: { replica: 1, view: 6, primary: false, primaryHttp: primaryAddress }, app: { forward: { retryDeadlineMs: 0 } } });
  token = await backup.rootToken();
});
afterEach(async () => {
  await backup.close();
  await primary.close();
});

describe('forwarding', () => {
  it('a write on a backup is relayed to the primary with the bearer and the loop guard', async () => {
    const reply = await backup.request('POST', '/streams', { token, body: { name: 'forwarded' } });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ id: 0, name: 'forwarded', topics: [] });
    // The primary's view, not the backup's: the relayed header is kept.
    expect(reply.headers['iggy-view']).toBe('7');
    expect(backup.node.writes).toEqual([]);
    expect(primaryNode.writes.map((write) => write.operation)).toEqual([Operation.createStream]);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/streams', body: '{"name":"forwarded"}' });
    expect(seen[0]!.headers['iggy-forwarded']).toBe('1');
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${token}`);
  });

  it('errors, empty bodies and query strings are relayed as the primary answered them', async () => {
    const duplicate = await backup.request('POST', '/streams', { token, body: { name: 'x' } });
    expect(duplicate.status).toBe(200);
    const again = await backup.request('POST', '/streams', { token, body: { name: 'x' } });
    expect(again.status).toBe(400);
    expect(expectErrorShape(again)).toMatchObject({ id: 1012, code: 'stream_name_already_exists', field: 'name' });

    await backup.request('POST', '/streams/x/topics', { token, body: { name: 't', partitions_count: 2, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 } });
    const deleted = await backup.request('DELETE', '/streams/x/topics/t/partitions?partitions_count=1', { token });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect(seen.at(-1)?.url).toBe('/streams/x/topics/t/partitions?partitions_count=1');
    expect(primaryNode.state.queries.topic({ kind: 'name', name: 'x' }, { kind: 'name', name: 't' })?.partitionsCount).toBe(1);
  });

  it('reads are served locally; a linearizable read is redirected (307) to the primary, not relayed', async () => {
    await backup.request('POST', '/streams', { token, body: { name: 'only-on-primary' } });
    const relayedBefore = seen.length;
    const local = await backup.request('GET', '/streams', { token });
    expect(local.json).toEqual([]);
    expect(local.headers['iggy-view']).toBe('6');
    const linearizable = await backup.request('GET', '/streams?consistency=linearizable', { token });
    expect(linearizable.status).toBe(307);
    expect(linearizable.headers.location).toBe(`http://${primaryAddress}/streams?consistency=linearizable`);
    expect(linearizable.text).toBe('');
    expect(linearizable.headers['iggy-view']).toBe('6');
    expect(seen.length).toBe(relayedBefore);
    // Following the redirect, the primary answers with its state and its view.
    const followed = await fetch(String(linearizable.headers.location), { headers: { authorization: `Bearer ${token}` } });
    expect(followed.status).toBe(200);
    expect(((await followed.json()) as { name: string }[]).map((stream) => stream.name)).toEqual(['only-on-primary']);
    expect(followed.headers.get('iggy-view')).toBe('7');
  });

  it('a request already forwarded once gets the retryable 503 instead of a second hop', async () => {
    const reply = await backup.request('POST', '/streams', { token, body: { name: 'loop' }, headers: { 'iggy-forwarded': '1' } });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(expectErrorShape(reply)).toMatchObject({ id: 58, code: 'transient_not_accepted' });
    expect(seen).toEqual([]);
  });

  it('a bad bearer is refused by the backup and never relayed', async () => {
    const reply = await backup.request('POST', '/streams', { token: 'garbage', body: { name: 'x' } });
    expect(reply.status).toBe(401);
    expect(seen).toEqual([]);
  });

  it('a primary that learns late it is not primary forwards from the write path', async () => {
    backup.node.primary = true;
    backup.node.scripted.push({ kind: 'not_primary', primaryHttp: primaryAddress });
    const reply = await backup.request('POST', '/streams', { token, body: { name: 'late' } });
    expect(reply.status).toBe(200);
    expect(reply.json.name).toBe('late');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.body).toBe('{"name":"late"}');
    expect(backup.node.writes.map((write) => write.outcome.kind)).toEqual(['not_primary']);
  });

  it('a PAT is minted by the primary and shown once through the backup', async () => {
    const reply = await backup.request('POST', '/personal-access-tokens', { token, body: { name: 'relayed', expiry: 0 } });
    expect(reply.status).toBe(200);
    const raw: string = reply.json.token;
    // Minted on the primary: the backup proposed nothing, and the log holds only the hash.
    expect(backup.node.writes).toEqual([]);
    expect(Buffer.from(primaryNode.writes.at(-1)!.body).includes(Buffer.from(raw))).toBe(false);
    const list = await primary.inject({ method: 'GET', url: '/personal-access-tokens', headers: { authorization: `Bearer ${token}` } });
    expect(list.json()).toEqual([{ name: 'relayed', expiry_at: null }]);
    const login = await primary.inject({ method: 'POST', url: '/personal-access-tokens/login', payload: { token: raw } });
    expect(login.statusCode).toBe(200);
  });
});

describe('forwarding failures', () => {
  it('an unreachable primary is a retryable 503 once the retry budget is spent', async () => {
    await primary.close();
    const reply = await backup.request('POST', '/streams', { token, body: { name: 'x' } });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(expectErrorShape(reply)).toMatchObject({ id: 503, code: 'no_reachable_primary' });
    // It says exactly why: which address it could not connect to, and the socket error.
    expect(expectErrorShape(reply).reason).toContain(`at ${backup.node.primaryHttp!} failed (ECONNREFUSED)`);
  });

  it('no known primary is the same 503', async () => {
    backup.node.primaryHttp = null;
    backup.node.unavailableReason = 'the primary, replica 2, is not connected to replica 1';
    const reply = await backup.request('DELETE', '/streams/1', { token });
    expect(reply.status).toBe(503);
    expect(expectErrorShape(reply).code).toBe('no_reachable_primary');
    expect(expectErrorShape(reply).reason).toContain(': the primary, replica 2, is not connected to replica 1; retry');
  });
});

describe('forwarding outcomes (injected fetch, no sockets)', () => {
  let calls: number;
  const withFetch = async (answer: () => Promise<Response>) => {
    calls = 0;
    const h = await harness({
      node: { primary: false, primaryHttp: '10.0.0.1:3000' },
      app: {
        forward: {
          retryDeadlineMs: 1_000,
          retryIntervalMs: 1,
          fetch: async () => {
            calls++;
            return answer();
          },
        },
      },
    });
    const result = await h.request('POST', '/streams', { token: await h.rootToken(), body: { name: 'x' } });
    await h.close();
    return result;
  };

  it('a TransientNotCommitted 503 is relayed, never retried (it may still commit)', async () => {
    const reply = await withFetch(async () => new Response('{"id":57,"code":"transient_not_committed","reason":"r","field":null}', { status: 503, headers: { 'content-type': 'application/json', 'retry-after': '1' } }));
    expect(calls).toBe(1);
    expect(reply.status).toBe(503);
    expect(expectErrorShape(reply).id).toBe(57);
  });

  it('a TransientNotAccepted 503 is retried until the primary answers', async () => {
    let attempt = 0;
    const reply = await withFetch(async () =>
      ++attempt < 3
        ? new Response('{"id":58,"code":"transient_not_accepted","reason":"r","field":null}', { status: 503 })
        : new Response('{"ok":true}', { status: 200, headers: { 'content-type': 'application/json', 'iggy-view': '9' } }),
    );
    expect(calls).toBe(3);
    expect(reply.status).toBe(200);
    expect(reply.headers['iggy-view']).toBe('9');
  });

  it('a timeout is 504 (outcome unknown); a reset after sending is 502', async () => {
    const timeout = await withFetch(async () => {
      throw new DOMException('The operation timed out.', 'TimeoutError');
    });
    expect(timeout.status).toBe(504);
    expect(expectErrorShape(timeout).code).toBe('forward_timeout');
    const reset = await withFetch(async () => {
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
    });
    expect(calls).toBe(1);
    expect(reset.status).toBe(502);
    expect(expectErrorShape(reset).code).toBe('forward_failed');
  });

  it('a forward to a primary that is replaced while it hangs is answered at once as unknown (TransientNotCommitted)', async () => {
    let aborted = false;
    const h = await harness({
      node: { primary: false, primaryHttp: '10.0.0.1:3000' },
      app: {
        forward: {
          // Far beyond the test's own timeout: only the change of primary can end this attempt.
          attemptTimeoutMs: 600_000,
          primaryCheckIntervalMs: 5,
          // A frozen primary: the request is written and nothing ever comes back.
          fetch: async (_input, init) =>
            new Promise<Response>((_resolve, reject) => {
              init?.signal?.addEventListener('abort', () => {
                aborted = true;
                reject(new DOMException('This operation was aborted', 'AbortError'));
              });
            }),
        },
      },
    });
    try {
      const pending = h.request('POST', '/streams', { token: await h.rootToken(), body: { name: 'x' } });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(aborted).toBe(false);
      // This replica starts a view change: its view names no primary any more.
      h.node.primaryHttp = null;
      const reply = await pending;
      expect(aborted).toBe(true);
      expect(reply.status).toBe(503);
      const error = expectErrorShape(reply);
      expect(error.id).toBe(57);
      expect(error.reason).toContain('was replaced while the forwarded request was in flight');
    } finally {
      await h.close();
    }
  });
});

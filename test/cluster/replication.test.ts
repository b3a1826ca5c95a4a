/**
 * One 3-replica cluster with a cluster secret and mixed kernels (replica 0 runs the TypeScript
 * kernels, replicas 1 and 2 WASM), shared by the specs below in order:
 *   - writes on the primary and forwarded from a backup reach every replica, which then serve
 *     byte-identical reads and agree on view and commit;
 *   - auth: every non-public route refuses a missing or bad token with 401 on every replica; a
 *     user without permission gets 403, also through forwarding; neither reaches the log;
 *   - mixed kernels: past a checkpoint, every replica has the same checkpoint id and the same
 *     snapshot bytes on disk, and the same journal entries;
 *   - cluster secret: replicas authenticate; a replica restarted with a wrong secret never joins
 *     (the others keep committing, it never becomes ready), and back with the right one it
 *     catches up;
 *   - root's password: the genesis marker verifies against each replica's own hash, and a change
 *     made through a backup holds on every replica.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { ErrorCode } from '../../src/metadata/errors.js';
import { IggyHttpError, type VrmetaClient } from '../../src/client/client.js';
import { createTestNode } from '../../src/http/test-node.js';
import { loadKernels } from '../../src/kernels/index.js';
import { runInspect } from '../../src/storage/inspect.js';
import { sample } from '../support/prometheus-text.js';
import { Cluster, clusterForAll, sleep } from './harness.js';
import { metricByReason } from './security-support.js';
import { writeStreamsUntilOp } from './workload.js';

const SECRET = 'cluster-test-secret-0123456789abcdef';
const WRONG_SECRET = 'not-the-cluster-secret-0123456789abcdef';
const KERNELS = ['ts', 'wasm', 'wasm'] as const;
/** --journal-slots 128, --prepare-queue-depth 8: a checkpoint every 128 - 2 * 8 = 112 ops. */
const CHECKPOINT_INTERVAL = 112;

const PUBLIC_ROUTES = new Set(['GET /ping', 'GET /livez', 'GET /readyz', 'POST /users/login', 'POST /users/refresh-token', 'POST /personal-access-tokens/login']);

let cluster: Cluster;
clusterForAll({ kernels: KERNELS, clusterSecret: SECRET, journalSlots: 128, prepareQueueDepth: 8 }, (started) => (cluster = started));

/** The status code of a request expected to fail, with its Iggy error id. */
async function refused(fn: () => Promise<unknown>): Promise<{ status: number; id: number }> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof IggyHttpError) return { status: error.status, id: error.id };
    throw error;
  }
  return { status: 200, id: 0 };
}

/** The app's routes, enumerated from the real fastify instance (so a new route cannot be missed). */
async function protectedRoutes(): Promise<{ method: string; url: string }[]> {
  const app = buildApp({ node: await createTestNode(), jwtSecret: new Uint8Array(32).fill(1) });
  const routes: { method: string; url: string }[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push({ method, url: route.url });
  });
  await app.ready();
  await app.close();
  return routes.filter((route) => !PUBLIC_ROUTES.has(`${route.method} ${route.url}`));
}

describe.sequential('a 3-replica cluster (cluster secret, ts + wasm kernels)', () => {
  it('writes on the primary and forwarded from a backup: every replica serves the same reads and agrees on view and commit', async () => {
    await cluster.explain(async () => {
      const primary = await cluster.primary();
      const backup = cluster.indices().find((index) => index !== primary)!;
      const onPrimary = cluster.client(primary);
      const onBackup = cluster.client(backup);

      const orders = await onPrimary.createStream('orders');
      expect(orders.name).toBe('orders');
      // Forwarded: the backup relays the primary's committed answer, view header included.
      const payments = await onBackup.createStream('payments');
      expect(payments.name).toBe('payments');
      expect(payments.id).not.toBe(orders.id);
      const view = (await cluster.status(primary)).view;
      expect(onBackup.lastResponse?.view).toBe(view);

      await onBackup.createTopic('orders', { name: 'created', partitionsCount: 3 });
      await onPrimary.createTopic('payments', { name: 'settled', partitionsCount: 2, compressionAlgorithm: 'gzip' });
      await onBackup.createPartitions('payments', 'settled', 2);
      await onBackup.createConsumerGroup('orders', 'created', 'billing');
      await onPrimary.createUser({ username: 'alice', password: 'alice-password' });
      await onBackup.createUser({
        username: 'bob',
        password: 'bob-password',
        permissions: { global: { manage_servers: false, read_servers: true, manage_users: false, read_users: true, manage_streams: false, read_streams: true, manage_topics: false, read_topics: true, poll_messages: true, send_messages: false }, streams: null },
      });
      await onBackup.updateStream('payments', 'payments-v2');

      const statuses = await cluster.waitForConverged(cluster.indices(), 20_000);
      for (const status of statuses) {
        expect(status.view).toBe(view);
        expect(status.primary).toBe(primary);
        // Nine writes (plus at least one Register) committed everywhere.
        expect(status.commit_max).toBeGreaterThanOrEqual(10);
      }
      const compared = await cluster.assertIdenticalReads(cluster.indices());
      expect(compared).toBeGreaterThanOrEqual(8);
      for (const index of cluster.indices()) {
        const client = cluster.client(index);
        expect((await client.getStreams()).map((stream) => stream.name).sort()).toEqual(['orders', 'payments-v2']);
        const topic = await client.getTopic('payments-v2', 'settled');
        expect(topic.partitions_count).toBe(4);
        expect(topic.compression_algorithm).toBe('gzip');
        expect((await client.getConsumerGroups('orders', 'created')).map((group) => group.name)).toEqual(['billing']);
        expect((await client.getUsers()).map((user) => user.username).sort()).toEqual(['alice', 'bob', 'iggy']);
      }
    });
  }, 60_000);

  it('auth: every non-public route refuses a missing or bad token with 401; a user without permission gets 403, also through forwarding', async () => {
    await cluster.explain(async () => {
      const primary = await cluster.primary();
      const backup = cluster.indices().find((index) => index !== primary)!;
      const before = await cluster.status(primary);
      const routes = await protectedRoutes();
      expect(routes.length).toBeGreaterThan(30);
      // A well-formed JWT of this issuer and audience, signed with another key.
      const forged = await new SignJWT({ user_created_at: 0 })
        .setProtectedHeader({ alg: 'HS256' })
        .setJti('forged')
        .setSubject('0')
        .setIssuer('iggy.apache.org')
        .setAudience('iggy.apache.org')
        .setExpirationTime('1h')
        .sign(new Uint8Array(32).fill(9));
      for (const index of [primary, backup]) {
        const base = `http://${cluster.httpAddress(index)}`;
        for (const route of routes) {
          const url = route.url.replace(/:([a-z_]+)/g, (_match, name: string) => (name === 'partition_id' || name === 'client_id' || name === 'user_id' ? '1' : 'orders'));
          for (const bearer of [null, 'garbage', forged, 'a.b.c']) {
            const response = await fetch(`${base}${url}`, {
              method: route.method,
              headers: {
                ...(bearer === null ? {} : { authorization: `Bearer ${bearer}` }),
                ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { 'content-type': 'application/json' }),
              },
              ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { body: JSON.stringify({ name: 'intruder' }) }),
            });
            const body = (await response.json()) as { id: number };
            expect(response.status, `${route.method} ${url} on replica ${index} with ${bearer === null ? 'no token' : 'a bad token'}`).toBe(401);
            expect(body.id).toBe(bearer === null ? 77 : 40);
          }
        }
      }

      const root = cluster.client(primary);
      await root.createUser({ username: 'nobody', password: 'nobody-password' });
      await cluster.waitForConverged(cluster.indices(), 20_000);
      const afterUser = (await cluster.status(primary)).commit_max;
      for (const index of [primary, backup]) {
        const nobody: VrmetaClient = await cluster.login(index, 'nobody', 'nobody-password');
        const denied: [string, () => Promise<unknown>][] = [
          ['GET /streams', () => nobody.getStreams()],
          ['GET /streams/orders', () => nobody.getStream('orders')],
          ['POST /streams', () => nobody.createStream('forbidden')],
          ['PUT /streams/orders', () => nobody.updateStream('orders', 'taken')],
          ['DELETE /streams/orders', () => nobody.deleteStream('orders')],
          ['GET /streams/orders/topics', () => nobody.getTopics('orders')],
          ['POST /streams/orders/topics', () => nobody.createTopic('orders', { name: 'forbidden', partitionsCount: 1 })],
          ['DELETE /streams/orders/topics/created', () => nobody.deleteTopic('orders', 'created')],
          ['POST partitions', () => nobody.createPartitions('orders', 'created', 1)],
          ['POST consumer group', () => nobody.createConsumerGroup('orders', 'created', 'forbidden')],
          ['GET /users', () => nobody.getUsers()],
          ['POST /users', () => nobody.createUser({ username: 'mallory', password: 'mallory-password' })],
          ['DELETE /users/0', () => nobody.deleteUser(0)],
          ['PUT /users/0/permissions', () => nobody.updatePermissions(0, null)],
          ['GET /stats', () => nobody.getStats()],
          ['GET /clients', () => nobody.getClients()],
        ];
        for (const [what, call] of denied) {
          expect(await refused(call), `${what} on replica ${index} (${index === primary ? 'primary' : 'backup, forwarded'})`).toEqual({ status: 403, id: 41 });
        }
        // Ungated: the caller's own identity and the operational reads.
        expect((await nobody.getUser('me')).username).toBe('nobody');
        expect((await nobody.getClusterStatus()).replica).toBe(index);
      }
      // No refused request reached the replicated log: only nobody's logins' sessions could,
      // and a 403 is decided before a session registers.
      const after = await cluster.waitForConverged(cluster.indices(), 20_000);
      expect(after[0]!.commit_max).toBe(afterUser);
      expect(before.commit_max).toBeLessThan(afterUser);
    });
  }, 90_000);

  it('mixed kernels: a ts replica and wasm replicas checkpoint to the same id with byte-identical snapshots and journal entries', async () => {
    await cluster.explain(async () => {
      const builds = cluster.indices().map((index) => cluster.records(index, 'kernels:')[0]?.['kernels']);
      expect(builds[0]).toBe('ts');
      expect(builds[1]).toMatch(/^wasm/);
      expect(builds[2]).toMatch(/^wasm/);

      // Past the first checkpoint on every replica.
      await writeStreamsUntilOp(cluster, 'kernel', CHECKPOINT_INTERVAL + 8, 6);
      const statuses = await cluster.waitForConverged(cluster.indices(), 30_000);
      const checkpoints = await cluster.waitFor(
        'every replica at the same checkpoint',
        async () => {
          const all = await Promise.all(cluster.indices().map((index) => cluster.status(index)));
          return all.every((status) => status.checkpoint_op >= CHECKPOINT_INTERVAL && status.checkpoint_op === all[0]!.checkpoint_op) ? all : null;
        },
        20_000,
      );
      expect(new Set(checkpoints.map((status) => status.checkpoint_id)).size, JSON.stringify(checkpoints.map((s) => [s.checkpoint_op, s.checkpoint_id]))).toBe(1);
      expect(checkpoints[0]!.checkpoint_id).not.toBe('0000000000000000');

      const snapshots = cluster.indices().map((index) => readFileSync(join(cluster.dataDir(index), 'snapshot.bin')));
      for (const snapshot of snapshots.slice(1)) expect(Buffer.compare(snapshot, snapshots[0]!)).toBe(0);

      const kernels = loadKernels('ts');
      const journals = cluster.indices().map((index) => {
        const report = JSON.parse(runInspect('wal', cluster.dataDir(index), { json: true, kernels }).output) as {
          status: string;
          entries: { op: number; identity: string; sizeBytes: number }[];
        };
        expect(report.status).toBe('valid');
        return new Map(report.entries.map((entry) => [entry.op, `${entry.identity}/${entry.sizeBytes}`]));
      });
      let common = 0;
      for (const [op, identity] of journals[0]!) {
        if (!journals.every((journal) => journal.has(op))) continue;
        common += 1;
        for (const journal of journals) expect(journal.get(op), `journal entry ${op}`).toBe(identity);
      }
      expect(common).toBeGreaterThan(0);
      await cluster.assertIdenticalReads(statuses.map((status) => status.replica));
      // The wire: no replica rejected a frame from a peer running the other kernels (the counter
      // every refusal increments, by reason).
      for (const index of cluster.indices()) {
        expect(metricByReason(await cluster.rawGet(index, '/metrics'), 'vsr_replica_frames_rejected_total'), `replica ${index}`).toEqual({});
      }
    });
  }, 120_000);

  it('cluster secret: replicas authenticate; one restarted with a wrong secret never joins while the others keep working, and rejoins with the right one', async () => {
    await cluster.explain(async () => {
      for (const index of cluster.indices()) {
        // Every connection is authenticated (the bus has no other mode): each peer is connected.
        const metrics = await cluster.rawGet(index, '/metrics');
        for (const peer of cluster.indices().filter((other) => other !== index)) {
          expect(sample(metrics, 'vsr_replica_connected', { peer: String(peer) }), `replica ${index} to ${peer}`).toBe(1);
        }
      }
      const primary = await cluster.primary();
      // The primary's successor is shut out: the primary sends every prepare to every backup, so
      // the other two keep committing at full speed.
      const outsider = (primary + 1) % 3;
      const insider = (primary + 2) % 3;
      // Handshakes refused, by the counter every refusal increments (any reason).
      const authFailures = async (index: number): Promise<number> =>
        Object.values(metricByReason(await cluster.rawGet(index, '/metrics'), 'vsr_replica_auth_failures_total')).reduce((sum, count) => sum + count, 0);
      const [primaryBefore, insiderBefore] = [await authFailures(primary), await authFailures(insider)];
      await cluster.restart(outsider, { clusterSecret: WRONG_SECRET });
      await cluster.waitFor(
        'the outsider refused by its peers',
        async () => (await authFailures(primary)) > primaryBefore && (await authFailures(insider)) > insiderBefore,
        20_000,
      );
      // Its HTTP listener is up (it answers /readyz, with 503).
      await cluster.waitFor('the outsider answering /readyz', async () => ((await cluster.ready(outsider)) ? 'ready' : 'not ready'), 20_000);

      const names: string[] = [];
      for (let n = 0; n < 5; n++) {
        names.push((await cluster.client(n % 2 === 0 ? primary : insider).createStream(`while-outsider-${n}`)).name);
      }
      // Longer than a fresh election (5 probes of 1 s): it must never become ready.
      const watchUntil = Date.now() + 8_000;
      while (Date.now() < watchUntil) {
        expect(await cluster.ready(outsider), 'the replica with the wrong secret is ready').toBe(false);
        await sleep(500);
      }
      expect(cluster.isRunning(outsider)).toBe(true);
      const survivors = await cluster.waitForConverged([primary, insider], 20_000);
      expect(survivors[0]!.primary).toBe(primary);

      await cluster.restart(outsider, {});
      await cluster.waitForConverged(cluster.indices(), 40_000, 'rejoin with the right secret');
      await cluster.assertIdenticalReads(cluster.indices());
      for (const name of names) expect((await cluster.client(outsider).getStream(name)).name).toBe(name);
    });
  }, 120_000);

  it("root's password: each replica checks the genesis marker against its own hash; a change through a backup holds on every replica", async () => {
    await cluster.explain(async () => {
      const primary = await cluster.primary();
      const backup = cluster.indices().find((index) => index !== primary)!;
      const invalidCredentials = { status: 400, id: ErrorCode.invalidCredentials };
      // The default password, verified against each replica's own random-salted in-memory hash.
      for (const index of cluster.indices()) await cluster.login(index);
      const root = await cluster.login(backup);
      expect(await refused(() => root.changePassword(0, 'not-iggy', 'root-pass-2'))).toEqual(invalidCredentials);
      await root.changePassword(0, 'iggy', 'root-pass-2');
      await cluster.waitForConverged(cluster.indices(), 20_000, 'the new root password applied');
      for (const index of cluster.indices()) {
        expect(await refused(() => cluster.login(index)), `old password on ${index}`).toEqual(invalidCredentials);
        await cluster.login(index, 'iggy', 'root-pass-2');
      }
      // Back to the default, now as a stored hash (what later logins of the harness use).
      await (await cluster.login(primary, 'iggy', 'root-pass-2')).changePassword(0, 'root-pass-2', 'iggy');
      await cluster.waitForConverged(cluster.indices(), 20_000, 'the default root password back');
      for (const index of cluster.indices()) await cluster.login(index);
    });
  }, 60_000);
});

/**
 * kill -9 of the primary under write load: the survivors elect a new view, no write a
 * client got a definitive success for is lost (on the survivors, and on the old primary once it
 * is back), and retried writes never apply twice.
 *
 * Duplicates are checked two ways. Stream creates are retried until definitive, so every name is
 * created at most once by construction of the state machine; what the test pins is that an
 * "already exists" only ever answers a retry that followed an ambiguous attempt (never a first
 * attempt, which would mean someone applied our write twice or invented one). Partition creates
 * are NOT idempotent (each adds one partition) and are never retried by the client: the final
 * count must lie between 1 + acknowledged and 1 + acknowledged + ambiguous, so a server-side
 * retry that applied a write twice (a forward re-sent after the op entered a pipeline) shows.
 *
 * Over the binary protocol, sessions through each survivor (forwarded by a backup) must keep
 * writing after the kill. A retry of a write the dead primary had committed is answered with the
 * cached reply, which names that primary; the new primary relays it to the backup, whose bus once
 * dropped it as an impersonation, so those sessions answered TransientNotCommitted forever.
 */
import { afterEach, expect, it } from 'vitest';
import { BinaryClient } from '../../src/transport/binary-client.js';
import { Cluster, attempt, sleep } from './harness.js';
import { Writer, firstFailure, streamNames } from './workload.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

it('kill -9 the primary under write load: a new view is elected, no acknowledged write is lost, retries do not duplicate', async () => {
  const c = await Cluster.start({ journalSlots: 128, prepareQueueDepth: 8 });
  cluster = c;
  await c.explain(async () => {
    const before = await c.waitForConverged(c.indices(), 20_000);
    const oldPrimary = before[0]!.primary;
    const oldView = before[0]!.view;
    const root = c.client(oldPrimary);
    await root.createStream('counter');
    await root.createTopic('counter', { name: 'partitions', partitionsCount: 1 });

    const writerCount = 4;
    const writers = await Promise.all(Array.from({ length: writerCount }, (_, index) => Writer.login(`writer-${index}`, c, index)));
    const attempted = new Set<string>();
    const created = new Set<string>();
    let killed = false;
    let createdAfterKill = 0;
    let stop = false;
    let partitionsAcked = 0;
    let partitionsUnknown = 0;

    const streamLoops = writers.map(async (writer, w) => {
      for (let n = 0; !stop; n++) {
        const name = `f-${w}-${n}`;
        attempted.add(name);
        await writer.createStream(name);
        created.add(name);
        if (killed) createdAfterKill += 1;
      }
    });
    const counterLoop = (async () => {
      // One partition per request, never retried: an ambiguous answer stays ambiguous.
      let target = 0;
      while (!stop) {
        const client = c.client(target, await c.rootToken(), 15_000);
        const outcome = await attempt(() => client.createPartitions('counter', 'partitions', 1));
        if (outcome.kind === 'ok') partitionsAcked += 1;
        else if (outcome.kind === 'unknown') {
          partitionsUnknown += 1;
          target = (target + 1) % 3;
          await sleep(200);
        } else throw outcome.error;
      }
    })();

    const failed = firstFailure([...streamLoops, counterLoop]);
    try {
      await Promise.race([failed, c.waitFor('20 acknowledged creates before the kill', () => created.size >= 20, 30_000)]);
      await c.kill9(oldPrimary);
      killed = true;
      const createdAtKill = created.size;
      // The survivors must keep committing: 20 more creates acknowledged after the kill.
      await Promise.race([failed, c.waitFor('20 acknowledged creates after the kill (a new view serves writes)', () => createdAfterKill >= 20, 45_000)]);
      expect(created.size).toBeGreaterThan(createdAtKill);
    } finally {
      stop = true;
      await Promise.allSettled([...streamLoops, counterLoop]);
    }
    // A loop that failed (e.g. "already exists" on a first attempt) fails the test here.
    await Promise.all([...streamLoops, counterLoop]);

    const survivors = c.indices().filter((index) => index !== oldPrimary);
    const after = await c.waitForConverged(survivors, 30_000, 'the survivors in a new view');
    expect(after[0]!.view).toBeGreaterThan(oldView);
    expect(after[0]!.primary).not.toBe(oldPrimary);

    // The old primary comes back with whatever its WAL held (possibly uncommitted prepares of the
    // old view) and must converge on the new history.
    c.start(oldPrimary);
    await c.waitForConverged(c.indices(), 45_000, 'the old primary rejoining');

    for (const index of c.indices()) {
      const names = await streamNames(c, index);
      const unique = new Set(names);
      expect(unique.size, `replica ${index}: a stream name appears twice`).toBe(names.length);
      const lost = [...created].filter((name) => !unique.has(name));
      expect(lost, `replica ${index} lost acknowledged creates`).toEqual([]);
      const invented = names.filter((name) => name !== 'counter' && !attempted.has(name));
      expect(invented, `replica ${index} has streams nobody created`).toEqual([]);
      const topic = await c.client(index).getTopic('counter', 'partitions');
      expect(topic.partitions_count, `replica ${index}: ${partitionsAcked} acked, ${partitionsUnknown} ambiguous`).toBeGreaterThanOrEqual(1 + partitionsAcked);
      expect(topic.partitions_count, `replica ${index}: ${partitionsAcked} acked, ${partitionsUnknown} ambiguous`).toBeLessThanOrEqual(1 + partitionsAcked + partitionsUnknown);
    }
    await c.assertIdenticalReads(c.indices());
    expect(partitionsAcked).toBeGreaterThan(0);
  });
}, 150_000);

it('kill -9 the primary under binary writes through every survivor: each keeps writing, nothing acknowledged is lost', async () => {
  const c = await Cluster.start({ journalSlots: 128, prepareQueueDepth: 8 });
  cluster = c;
  await c.explain(async () => {
    const before = await c.waitForConverged(c.indices(), 20_000);
    const oldPrimary = before[0]!.primary;
    const survivors = c.indices().filter((index) => index !== oldPrimary);
    // Two sessions through each survivor, never following the leader: a backup forwards them.
    const routes = survivors.flatMap((index) => [index, index]);
    const clients = await Promise.all(
      routes.map((index) => BinaryClient.connect({ addresses: [`127.0.0.1:${c.tcpPort(index)}`], username: 'iggy', password: 'iggy', followLeader: false })),
    );
    const created = new Set<string>();
    const afterKill = new Map<number, number>(survivors.map((index) => [index, 0]));
    let killed = false;
    let stop = false;
    const loops = clients.map(async (client, w) => {
      for (let n = 0; !stop; n++) {
        const name = Buffer.from(`b-${w}-${n}`);
        // A write is retried with its request number (on the next replica after a lost
        // connection): an acknowledgement is definitive, an error fails the test.
        const payload = await client.write(128, Buffer.concat([Buffer.from([name.length]), name]));
        expect(Buffer.from(payload.subarray(33, 33 + name.length)).equals(name)).toBe(true);
        created.add(name.toString());
        if (killed) afterKill.set(routes[w]!, afterKill.get(routes[w]!)! + 1);
      }
    });
    const failed = firstFailure(loops);
    try {
      await Promise.race([failed, c.waitFor('20 acknowledged creates before the kill', () => created.size >= 20, 30_000)]);
      await c.kill9(oldPrimary);
      killed = true;
      await Promise.race([
        failed,
        c.waitFor('10 acknowledged creates through each survivor after the kill', () => [...afterKill.values()].every((count) => count >= 10), 45_000),
      ]);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      for (const client of clients) client.close();
    }
    await Promise.all(loops);
    c.start(oldPrimary);
    await c.waitForConverged(c.indices(), 45_000, 'the old primary rejoining');
    for (const index of c.indices()) {
      const names = await streamNames(c, index);
      expect(new Set(names).size, `replica ${index}: a stream name appears twice`).toBe(names.length);
      expect([...created].filter((name) => !names.includes(name)), `replica ${index} lost acknowledged creates`).toEqual([]);
    }
  });
}, 150_000);

it('the detector runs the configured timers, and a kill -9 of the primary reaches the survivors as a closed connection', async () => {
  // A timeout far longer than the disconnect grace (min(3000, 3 x 200) ms): a view change for
  // any reason but the closed connection shows in its reason.
  const c = await Cluster.start({
    journalSlots: 128,
    prepareQueueDepth: 8,
    extraArgs: ['--heartbeat-ms', '200', '--election-timeout-ms', '3000'],
  });
  cluster = c;
  await c.explain(async () => {
    const before = await c.waitForConverged(c.indices(), 20_000);
    for (const status of before) {
      expect({ heartbeat: status.heartbeat_ms, election: status.election_timeout_ms }).toEqual({ heartbeat: 200, election: 3000 });
    }
    const oldPrimary = before[0]!.primary;
    const survivors = c.indices().filter((index) => index !== oldPrimary);
    await c.kill9(oldPrimary);
    await c.waitFor(
      'a new view on the survivors',
      async () => {
        const statuses = await Promise.all(survivors.map(async (index) => c.status(index)));
        return statuses.every((status) => status.view > before[0]!.view && status.status === 'normal');
      },
      30_000,
    );
    const reasons = survivors.flatMap((index) => c.events(index, 'view_change_started').map((record) => record['reason']));
    expect(reasons).toContain('primary_disconnected');
  });
}, 90_000);

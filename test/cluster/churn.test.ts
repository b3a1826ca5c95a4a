/**
 * Concurrent writers creating and deleting resources over HTTP while one replica restarts
 * the final state of every replica equals what the writers' definitive answers imply.
 *
 * Each writer owns its names (`c-<writer>-<n>`, never reused, so no answer can be about someone
 * else's object) and keeps a model: a stream exists after a create that answered 200 (or
 * "already exists" after an ambiguous attempt), with the topics created in it, and is gone after
 * a delete that answered 200 (or "not found" after an ambiguous attempt). The restart is the
 * primary's, gracefully (SIGTERM: stop accepting, finish in-flight writes), so writes in flight
 * meet a shutdown, a view change and forwarding to a new primary; it then rejoins with its data.
 */
import { afterEach, expect, it } from 'vitest';
import { Cluster } from './harness.js';
import { Writer, firstFailure } from './workload.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

/** A small deterministic PRNG (mulberry32) so a failing run's op mix can be replayed by seed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

it('concurrent creates and deletes while the primary restarts: the final state equals what the acknowledged writes imply', async () => {
  const seed = Number(process.env['VRMETA_CLUSTER_SEED'] ?? Date.now() % 1_000_000);
  const c = await Cluster.start({ journalSlots: 128, prepareQueueDepth: 8 });
  cluster = c;
  await c.explain(() => withSeed(seed, async () => {
    const before = await c.waitForConverged(c.indices(), 20_000);
    const restarted = before[0]!.primary;

    const writerCount = 4;
    const writers = await Promise.all(Array.from({ length: writerCount }, (_, index) => Writer.login(`writer-${index}`, c, index)));
    /** Model: stream name -> its topic names, per the definitive answers. */
    const model = new Map<string, Set<string>>();
    let stop = false;
    let opsTotal = 0;
    let opsAfterRejoin = 0;
    let rejoined = false;
    let deletes = 0;

    const loops = writers.map(async (writer, w) => {
      const random = prng(seed * 31 + w);
      const mine: string[] = [];
      for (let n = 0; !stop; n++) {
        const roll = random();
        if (mine.length > 0 && roll < 0.3) {
          const name = mine.splice(Math.floor(random() * mine.length), 1)[0]!;
          await writer.deleteStream(name);
          model.delete(name);
          deletes += 1;
        } else if (mine.length > 0 && roll < 0.55) {
          const name = mine[Math.floor(random() * mine.length)]!;
          const topics = model.get(name)!;
          const topic = `t${topics.size}`;
          await writer.createTopic(name, topic, 1 + Math.floor(random() * 3));
          topics.add(topic);
        } else {
          const name = `c-${w}-${n}`;
          await writer.createStream(name);
          model.set(name, new Set());
          mine.push(name);
        }
        opsTotal += 1;
        if (rejoined) opsAfterRejoin += 1;
      }
    });

    const failed = firstFailure(loops);
    try {
      await Promise.race([failed, c.waitFor('some writes before the restart', () => model.size + deletes >= 20, 30_000)]);
      await c.stop(restarted);
      const opsAtStop = opsTotal;
      await Promise.race([failed, c.waitFor('writes committing without the old primary', () => opsTotal >= opsAtStop + 20, 45_000)]);
      c.start(restarted);
      await Promise.race([failed, c.waitFor('the restarted replica ready', () => c.ready(restarted), 45_000)]);
      rejoined = true;
      await Promise.race([failed, c.waitFor('writes after the rejoin', () => opsAfterRejoin >= 4 * writerCount, 30_000)]);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
    }
    await Promise.all(loops);
    expect(deletes, `seed ${seed}`).toBeGreaterThan(0);

    const statuses = await c.waitForConverged(c.indices(), 45_000, 'the final state');
    expect(statuses[0]!.view).toBeGreaterThan(before[0]!.view);
    const expected = [...model.entries()].map(([name, topics]) => `${name}:${[...topics].sort().join(',')}`).sort();
    for (const index of c.indices()) {
      const client = c.client(index);
      const actual: string[] = [];
      for (const stream of await client.getStreams()) {
        const details = await client.getStream(stream.id);
        actual.push(`${details.name}:${details.topics.map((topic) => topic.name).sort().join(',')}`);
      }
      expect(actual.sort(), `replica ${index} (seed ${seed})`).toEqual(expected);
    }
    await c.assertIdenticalReads(c.indices());
  }));
}, 150_000);

/** A failure names the seed of the op mix, so the run can be replayed. */
async function withSeed(seed: number, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof Error) error.message = `[op mix seed ${seed}; replay with VRMETA_CLUSTER_SEED=${seed}] ${error.message}`;
    throw error;
  }
}

/**
 * The data plane across real processes (a 3-replica cluster on 127.0.0.1), over Iggy's binary
 * protocol as the Node SDK speaks it (partition operations reuse the session's current request
 * number):
 *   - sends through a backup (forwarded to the partition group's primary) and through the primary
 *     get dense offsets per partition; every replica's poll returns the same committed messages,
 *     byte for byte, and never an uncommitted one;
 *   - consumer offsets are replicated: stored through one replica, read through every other;
 *   - kill -9 of the primary during sends: sends resume through the survivors, and afterwards
 *     every acknowledged message is on every replica exactly once (counted, not timed), the
 *     restarted replica included;
 *   - a replica whose data directory was wiped while sends went on rejoins its partition group by
 *     state transfer, fetches the messages below the installed checkpoint back from a peer
 *     (store backfill), and then serves the same log, byte for byte, from offset 0.
 */
import { describe, expect, it } from 'vitest';
import { encodeBatch } from '../support/message-batches.js';
import { RawClient, result, type ReplyView } from '../support/iggy-frames.js';
import { offsetPrefix, pollBody, sendMessagesBody } from '../unit/partition/wire.js';
import { Cluster, clusterForAll, sleep, type LogRecord } from './harness.js';

let cluster: Cluster;
// A checkpoint every 112 ops that drains the WAL below it: a replica down for a few hundred
// sends has a gap no peer's journal holds, and must rejoin by state transfer.
// Small segments and a fast retention pass, so that expiry has sealed segments to act on.
const SEGMENT_SIZE = 4096;
clusterForAll(
  { journalSlots: 128, prepareQueueDepth: 8, extraArgs: ['--segment-size', String(SEGMENT_SIZE), '--retention-interval-ms', '200'] },
  (started) => (cluster = started),
);

const SEND = 160;
const STORE_OFFSET = 161;
const POLL = 100;
const GET_OFFSET = 120;
const PARTITIONS = 3;

async function loggedIn(index: number): Promise<RawClient> {
  const client = await cluster.waitFor(`replica ${index}'s binary port`, () => RawClient.connect(cluster.tcpPort(index)).catch(() => null), 30_000);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const reply = await client.login();
    if (reply.command === 8 && reply.status === 0 && result(reply.body).code === 0) return client;
    if (Date.now() > deadline) throw new Error(`login kept failing: status ${reply.status}`);
    await sleep(100);
  }
}

/** A new stream with one topic of `partitions` partitions, and who is primary once it exists. */
async function freshTopic(prefix: string, topicName: string, partitions: number, settings: { messageExpiryUs?: number } = {}): Promise<{ token: string; streamId: number; primary: number }> {
  const token = await cluster.rootToken();
  const stream = await cluster.client(0, token).createStream(`${prefix}-${Date.now()}`);
  await cluster.client(0, token).createTopic(stream.id, { name: topicName, partitionsCount: partitions, ...settings });
  return { token, streamId: stream.id, primary: await cluster.primary() };
}

/** A partition-plane request, as the SDK sends it: the session's current request number. */
function partitionCall(client: RawClient, operation: number, body: Uint8Array): Promise<ReplyView> {
  return client.write(operation, Buffer.from(body), client.requestNext);
}

function payloadOf(tag: string, index: number, padding = 0): Uint8Array {
  return new TextEncoder().encode(`${tag}-${index}${'.'.repeat(padding)}`);
}

/** Sends `count` messages to `partitionId`; the base offset the reply confirms. */
async function send(client: RawClient, streamId: number, partitionId: number, tag: string, count: number, padding = 0): Promise<ReplyView> {
  const messages = Array.from({ length: count }, (_, index) => ({ payload: payloadOf(tag, index, padding) }));
  const body = sendMessagesBody({ stream: streamId, topic: 0, partitioning: { partitionId }, messagesCount: count, batch: encodeBatch(messages) });
  return partitionCall(client, SEND, body);
}

function confirmedOffset(reply: ReplyView): number {
  expect([reply.command, reply.status]).toEqual([8, 0]);
  expect(reply.body.readUInt32LE(0)).toBe(1);
  return Number(reply.body.readBigUInt64LE(16));
}

/** Every message of a partition through `client`: [offset, payload] from a poll of offset 0. */
async function pollAll(client: RawClient, streamId: number, partitionId: number): Promise<{ currentOffset: number; messages: [number, string][] }> {
  const prefix = offsetPrefix({ consumerKind: 1, consumerId: 1, stream: streamId, topic: 0, partitionId });
  const reply = await client.read(POLL, Buffer.from(pollBody(prefix, 1, 0n, 100_000, 0)));
  expect([reply.command, reply.status]).toEqual([8, 0]);
  const body = reply.body;
  expect(body.readUInt32LE(0)).toBe(partitionId);
  const messages: [number, string][] = [];
  let at = 16;
  while (at < body.length) {
    const base = Number(body.readBigUInt64LE(at + 8));
    const length = Number(body.readBigUInt64LE(at + 32));
    let frame = at + 256;
    while (frame < at + length) {
      const delta = body.readUInt32LE(frame + 24);
      const userHeaders = body.readUInt32LE(frame + 32);
      const payloadLength = body.readUInt32LE(frame + 36);
      messages.push([base + delta, body.subarray(frame + 48, frame + 48 + payloadLength).toString('utf8')]);
      frame += 48 + payloadLength + userHeaders;
    }
    at += length;
  }
  expect(messages.length).toBe(body.readUInt32LE(12));
  return { currentOffset: Number(body.readBigUInt64LE(4)), messages };
}

async function waitForMessages(index: number, client: RawClient, streamId: number, partitionId: number, count: number): Promise<[number, string][]> {
  return cluster.waitFor(
    `replica ${index} serving ${count} messages of partition ${partitionId}`,
    async () => {
      const polled = await pollAll(client, streamId, partitionId);
      // Never past the commit: what a backup serves is a prefix of the log, never more.
      expect(polled.messages.length).toBeLessThanOrEqual(count);
      return polled.messages.length === count ? polled.messages : null;
    },
    30_000,
  );
}

describe('the data plane across processes', () => {
  it('sends through a backup and the primary, polls the same messages and offsets from every replica', async () => {
    const { token, streamId, primary } = await freshTopic('messages', 'orders', PARTITIONS);
    const clients = await Promise.all([0, 1, 2].map((index) => loggedIn(index)));
    try {
      // Dense offsets per partition, whichever replica a send came through.
      const sent = new Map<number, string[]>();
      for (let round = 0; round < 4; round++) {
        for (let partitionId = 0; partitionId < PARTITIONS; partitionId++) {
          const via = (primary + 1 + round) % 3;
          const tag = `r${round}-p${partitionId}`;
          const before = sent.get(partitionId) ?? [];
          const offset = confirmedOffset(await send(clients[via]!, streamId, partitionId, tag, 2 + round));
          expect(offset).toBe(before.length);
          sent.set(partitionId, [...before, ...Array.from({ length: 2 + round }, (_, index) => `${tag}-${index}`)]);
        }
      }
      for (let index = 0; index < 3; index++) {
        for (let partitionId = 0; partitionId < PARTITIONS; partitionId++) {
          const expected = sent.get(partitionId)!;
          const messages = await waitForMessages(index, clients[index]!, streamId, partitionId, expected.length);
          expect(messages).toEqual(expected.map((payload, offset) => [offset, payload]));
        }
      }
      // The topic's statistics are the partitions' logs, on every replica.
      for (let index = 0; index < 3; index++) {
        const topic = await cluster.client(index, token).getTopic(streamId, 0);
        const partitions = (topic.partitions as unknown as { id: number; messages_count: number; current_offset: number }[]).map((partition) => [partition.id, partition.messages_count, partition.current_offset]);
        expect(partitions).toEqual([0, 1, 2].map((id) => [id, sent.get(id)!.length, sent.get(id)!.length - 1]));
        expect(Number(topic.messages_count)).toBe([0, 1, 2].reduce((sum, id) => sum + sent.get(id)!.length, 0));
      }
      // A consumer offset stored through one replica is read through every other.
      const prefix = offsetPrefix({ consumerKind: 1, consumerId: 'reader', stream: streamId, topic: 0, partitionId: 1 });
      const stored = await partitionCall(clients[(primary + 1) % 3]!, STORE_OFFSET, new Uint8Array([...prefix, ...new Uint8Array([5, 0, 0, 0, 0, 0, 0, 0]), 1]));
      expect([stored.status, result(stored.body).code]).toEqual([0, 0]);
      for (let index = 0; index < 3; index++) {
        const offset = await cluster.waitFor(
          `replica ${index} reading the stored offset`,
          async () => {
            const reply = await clients[index]!.read(GET_OFFSET, Buffer.from(prefix));
            expect(reply.status).toBe(0);
            return reply.body.length === 20 ? Number(reply.body.readBigUInt64LE(12)) : null;
          },
          30_000,
        );
        expect(offset).toBe(5);
      }
      // Above the partition's current offset: Iggy's InvalidOffset, committed as a refusal.
      const tooFar = await partitionCall(clients[primary]!, STORE_OFFSET, new Uint8Array([...prefix, ...new Uint8Array([99, 0, 0, 0, 0, 0, 0, 0]), 1]));
      expect(tooFar.status).toBe(4100);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('a purge through a backup empties every partition on every replica: offsets and stored offsets restart', async () => {
    const { token, streamId, primary } = await freshTopic('purge-messages', 'orders', 2);
    const backup = (primary + 1) % 3;
    const clients = await Promise.all([0, 1, 2].map((index) => loggedIn(index)));
    try {
      for (const partitionId of [0, 1]) confirmedOffset(await send(clients[primary]!, streamId, partitionId, `old-p${partitionId}`, 4));
      const prefix = offsetPrefix({ consumerKind: 1, consumerId: 'reader', stream: streamId, topic: 0, partitionId: 0 });
      const stored = await partitionCall(clients[primary]!, STORE_OFFSET, new Uint8Array([...prefix, ...new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0]), 1]));
      expect([stored.status, result(stored.body).code]).toEqual([0, 0]);
      for (let index = 0; index < 3; index++) await waitForMessages(index, clients[index]!, streamId, 1, 4);
      await cluster.client(backup, token).purgeTopic(streamId, 0);
      for (let index = 0; index < 3; index++) {
        for (const partitionId of [0, 1]) {
          await cluster.waitFor(
            `replica ${index} serving partition ${partitionId} empty after the purge`,
            async () => {
              const polled = await pollAll(clients[index]!, streamId, partitionId);
              return polled.messages.length === 0 && polled.currentOffset === 0 ? true : null;
            },
            30_000,
          );
        }
        const reply = await clients[index]!.read(GET_OFFSET, Buffer.from(prefix));
        expect([reply.status, reply.body.length]).toEqual([0, 0]);
        const topic = await cluster.client(index, token).getTopic(streamId, 0);
        expect(Number(topic.messages_count)).toBe(0);
      }
      // The next send starts the partition over at offset 0; the purged messages never return.
      expect(confirmedOffset(await send(clients[backup]!, streamId, 0, 'new', 1))).toBe(0);
      for (let index = 0; index < 3; index++) {
        expect(await waitForMessages(index, clients[index]!, streamId, 0, 1)).toEqual([[0, 'new-0']]);
        expect((await pollAll(clients[index]!, streamId, 1)).messages).toEqual([]);
      }
      // The purged log of partition 1 is dropped in its group (its files go two checkpoints
      // later), and deleting the topic drops partition 0's new log: each by its group's primary.
      // A drop names the incarnation it ends: the partitions' creation for the purged logs.
      const dropped = (partitionId: number, after = 0): LogRecord | null =>
        [0, 1, 2]
          .flatMap((index) => cluster.records(index, 'partition_dropped'))
          .find((record) => record.namespace === streamId * 2 ** 32 + partitionId && (record.incarnation as number) > after) ?? null;
      const purged = await cluster.waitFor('the purged partition 1 dropped', () => dropped(1), 30_000);
      await cluster.client(0, token).deleteTopic(streamId, 0);
      // Partition 0's log after the purge: the purge's incarnation, later than its creation.
      await cluster.waitFor('the deleted partition 0 dropped', () => dropped(0, purged.incarnation as number), 30_000);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('expired segments stop being served at the same offset on every replica, held back by a stored offset', async () => {
    const { token, streamId, primary } = await freshTopic('retention-messages', 'logs', 1, { messageExpiryUs: 2_000_000 });
    const clients = await Promise.all([0, 1, 2].map((index) => loggedIn(index)));
    try {
      // Each batch of two ~2.1 KB messages fills a 4 KiB segment: segment k holds offsets 2k, 2k+1.
      const BATCHES = 12;
      for (let batch = 0; batch < BATCHES; batch++) {
        expect(confirmedOffset(await send(clients[primary]!, streamId, 0, `b${batch}`, 2, SEGMENT_SIZE / 2))).toBe(batch * 2);
      }
      const prefix = offsetPrefix({ consumerKind: 1, consumerId: 'reader', stream: streamId, topic: 0, partitionId: 0 });
      const storeOffset = async (offset: number): Promise<void> => {
        const reply = await partitionCall(clients[primary]!, STORE_OFFSET, new Uint8Array([...prefix, ...new Uint8Array(new BigUint64Array([BigInt(offset)]).buffer), 1]));
        expect([reply.status, result(reply.body).code]).toEqual([0, 0]);
      };
      // A consumer stored offset 2: the segment holding offset 3 is not yet read, and stays.
      await storeOffset(2);
      const firstServed = (first: number): Promise<void> =>
        Promise.all(
          [0, 1, 2].map((index) =>
            cluster.waitFor(
              `replica ${index} serving the partition from offset ${first}`,
              async () => {
                const polled = await pollAll(clients[index]!, streamId, 0);
                if (polled.messages[0]?.[0] !== first) return null;
                const topic = await cluster.client(index, token).getTopic(streamId, 0);
                return Number(topic.messages_count) === BATCHES * 2 - first ? true : null;
              },
              30_000,
            ),
          ),
        ).then(() => undefined);
      await firstServed(2);
      // Reading on lets the rest go, but never the newest segment.
      await storeOffset(BATCHES * 2 - 1);
      await firstServed(BATCHES * 2 - 2);
      for (const client of clients) {
        expect((await pollAll(client, streamId, 0)).messages).toEqual([[22, `b11-0${'.'.repeat(SEGMENT_SIZE / 2)}`], [23, `b11-1${'.'.repeat(SEGMENT_SIZE / 2)}`]]);
      }
      // The trims were proposed by the partition group's primary and committed.
      const namespace = streamId * 2 ** 32;
      const trims = [0, 1, 2].flatMap((index) => cluster.records(index, 'partition_trimmed')).filter((record) => record.namespace === namespace);
      expect(trims.map((record) => record.first_offset)).toContain(BATCHES * 2 - 2);
      // The next send goes on after the newest offset.
      expect(confirmedOffset(await send(clients[primary]!, streamId, 0, 'after', 1))).toBe(BATCHES * 2);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('kill -9 of the primary during sends: sends resume, every acknowledged message is on every replica once', async () => {
    const { token, streamId, primary } = await freshTopic('failover-messages', 'orders', 1);
    const survivors = [0, 1, 2].filter((index) => index !== primary);
    const acknowledged: string[] = [];
    let clients = await Promise.all(survivors.map((index) => loggedIn(index)));
    try {
      let round = 0;
      const sendRound = async (): Promise<void> => {
        const via = clients[round % clients.length]!;
        const tag = `k${round}`;
        round += 1;
        const reply = await send(via, streamId, 0, tag, 3);
        // A transient answer (no caught-up primary yet): the outcome is unknown, not counted.
        if (reply.command === 8 && reply.status === 0) acknowledged.push(`${tag}-0`, `${tag}-1`, `${tag}-2`);
        else expect([57, 58]).toContain(reply.status);
      };
      for (let index = 0; index < 10; index++) await sendRound();
      await cluster.kill9(primary);
      const deadline = Date.now() + 30_000;
      const before = acknowledged.length;
      while (acknowledged.length < before + 30 && Date.now() < deadline) {
        await sendRound();
        await sleep(10);
      }
      expect(acknowledged.length).toBeGreaterThanOrEqual(before + 30);
      await cluster.restart(primary);
      for (const client of clients) client.close();
      clients = await Promise.all([0, 1, 2].map((index) => loggedIn(index)));
      for (let index = 0; index < 3; index++) {
        const messages = await cluster.waitFor(
          `replica ${index} holding every acknowledged message`,
          async () => {
            const polled = await pollAll(clients[index]!, streamId, 0);
            const payloads = new Set(polled.messages.map(([, payload]) => payload));
            return acknowledged.every((payload) => payloads.has(payload)) ? polled.messages : null;
          },
          60_000,
        );
        // Exactly once, offsets dense from 0, the same log on every replica.
        const payloads = messages.map(([, payload]) => payload);
        expect(new Set(payloads).size).toBe(payloads.length);
        expect(messages.map(([offset]) => offset)).toEqual(messages.map((_, offset) => offset));
      }
      // The restarted replica's statistics come back from its partition log (they are not persisted).
      const restartedTopic = await cluster.client(primary, token).getTopic(streamId, 0);
      const counted = (restartedTopic.partitions as unknown as { messages_count: number }[])[0]!.messages_count;
      const logs = await Promise.all(clients.map((client) => pollAll(client, streamId, 0)));
      expect(counted).toBe(logs[0]!.messages.length);
      expect(logs[1]).toEqual(logs[0]);
      expect(logs[2]).toEqual(logs[0]);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('a wiped replica rejoins by state transfer, fetches the messages below its checkpoint, serves the same log', async () => {
    const { token, streamId, primary } = await freshTopic('wiped-messages', 'orders', 1);
    const victim = (primary + 1) % 3;
    const survivors = [0, 1, 2].filter((index) => index !== victim);
    let clients = await Promise.all(survivors.map((index) => loggedIn(index)));
    let victimClient: RawClient | null = null;
    try {
      let sent = 0;
      const sendSome = async (rounds: number): Promise<void> => {
        for (let round = 0; round < rounds; round++, sent += 2) {
          expect(confirmedOffset(await send(clients[round % 2]!, streamId, 0, `w${sent}`, 2))).toBe(sent);
        }
      };
      await sendSome(40);
      await cluster.stop(victim);
      cluster.wipe(victim);
      // Several checkpoints of the partition group while it is down, and more sends than the
      // frames its peers queue for it (256): no journal holds its gap any more.
      await sendSome(560);
      cluster.start(victim);
      const completed = await cluster.waitFor('the wiped replica fetching its store back', () => cluster.events(victim, 'store_backfill_completed')[0], 60_000);
      // Fetched before the install: the replica never held a checkpoint without its messages.
      expect([completed['before_install'], (completed['offsets'] as number) > 0]).toEqual([true, true]);
      // The install follows the fetch (a storage write later): wait for it, then the messages.
      await cluster.waitFor('the wiped replica installing the checkpoint', () => cluster.events(victim, 'state_transfer_installed')[0], 60_000);
      victimClient = await loggedIn(victim);
      const messages = await waitForMessages(victim, victimClient, streamId, 0, sent);
      expect(messages.map(([offset]) => offset)).toEqual(messages.map((_, offset) => offset));
      for (const client of clients) expect(await pollAll(client, streamId, 0)).toEqual(await pollAll(victimClient, streamId, 0));
      // Its statistics are the whole log again.
      const topic = await cluster.client(victim, token).getTopic(streamId, 0);
      expect((topic.partitions as unknown as { messages_count: number }[])[0]!.messages_count).toBe(sent);
    } finally {
      for (const client of clients) client.close();
      victimClient?.close();
      clients = [];
    }
  });

  it('over HTTP: a JSON send through a backup is polled as JSON from another replica; offsets put, get, delete', async () => {
    const { token, streamId, primary } = await freshTopic('http-messages', 'events', 2);
    const backup = (primary + 1) % 3;
    const other = (primary + 2) % 3;
    const call = async (index: number, method: string, path: string, body?: unknown): Promise<{ status: number; headers: Headers; text: string }> => {
      const response = await fetch(`http://${cluster.httpAddress(index)}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, headers: response.headers, text: await response.text() };
    };
    const base = `/streams/${streamId}/topics/0`;
    const payloads = ['alpha', 'beta', 'gamma'].map((text) => Buffer.from(text).toString('base64'));
    const sent = await call(backup, 'POST', `${base}/messages`, {
      partitioning: { kind: 'partition_id', value: Buffer.from([1, 0, 0, 0]).toString('base64') },
      messages: payloads.map((payload, index) => ({ id: index + 1, payload })),
    });
    expect(sent.status).toBe(201);
    expect(sent.headers.get('iggy-durability')).toBe('replicated');
    expect(JSON.parse(sent.text)).toEqual({ confirmations: [{ stream_id: streamId, topic_id: 0, partition_id: 1, base_offset: 0 }] });
    const polled = await cluster.waitFor(
      `replica ${other} serving the JSON send`,
      async () => {
        const reply = await call(other, 'GET', `${base}/messages?consumer_id=1&partition_id=1&kind=offset&value=0&count=10`);
        expect(reply.status).toBe(200);
        const json = JSON.parse(reply.text) as { count: number; messages: { header: { offset: number; id: number }; payload: string }[] };
        return json.count === 3 ? json : null;
      },
      30_000,
    );
    expect(polled.messages.map((message) => [message.header.offset, message.header.id, message.payload])).toEqual(payloads.map((payload, index) => [index, index + 1, payload]));
    // An empty batch is refused with Iggy's code, before anything is proposed.
    const empty = await call(backup, 'POST', `${base}/messages`, { partitioning: { kind: 'balanced' }, messages: [] });
    expect(empty.status).toBeGreaterThanOrEqual(400);
    const stored = await call(backup, 'PUT', `${base}/consumer-offsets`, { consumer_id: 9, partition_id: 1, offset: 1 });
    expect(stored.status).toBe(204);
    const read = await cluster.waitFor(
      `replica ${other} reading the stored offset`,
      async () => {
        const reply = await call(other, 'GET', `${base}/consumer-offsets?consumer_id=9&partition_id=1`);
        return reply.status === 200 ? JSON.parse(reply.text) : null;
      },
      30_000,
    );
    expect(read).toEqual({ partition_id: 1, current_offset: 2, stored_offset: 1 });
    expect((await call(primary, 'DELETE', `${base}/consumer-offsets/9?partition_id=1`)).status).toBe(204);
    expect((await call(primary, 'DELETE', `${base}/consumer-offsets/9?partition_id=1`)).status).toBe(404);
  });
});

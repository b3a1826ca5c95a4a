/**
 * The binary client plane across real processes (a 3-replica cluster on 127.0.0.1), driven by a
 * raw client that speaks Iggy's wire as the Node SDK does but never follows the leader:
 *   - a client connected to a backup logs in and writes: the backup forwards each request to the
 *     primary over the replica bus and relays the committed reply;
 *   - kill -9 the primary mid-write: the client resumes its session on a survivor (login with the
 *     same client id keeps the session's watermark) and retries the same request number; the
 *     retry returns the cached reply byte for byte and nothing is applied twice;
 *   - 10,000 idle connections on one replica cost bounded memory, the over-limit connection is
 *     refused with CannotEstablishConnection, and the cluster keeps serving writes meanwhile.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadKernels } from '../../src/kernels/index.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import type { ClientEntrySnapshot } from '../../src/format/snapshot-model.js';
import { createConnection, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { BinaryClient } from '../../src/transport/binary-client.js';
import { OP, RawClient, name, randomClientId, requestFrame, result, stringId, type ReplyView } from '../support/iggy-frames.js';
import { Cluster, clusterForAll, sleep } from './harness.js';

const IDLE_CONNECTIONS = 10_000;

let cluster: Cluster;
clusterForAll({ extraArgs: ['--tcp-connections-max', String(IDLE_CONNECTIONS)] }, (started) => (cluster = started));

/** Logs in, replaying transient answers (57/58: no caught-up primary yet), as the SDK does. */
async function loginRetrying(client: RawClient, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = await client.login();
    if (reply.command === 8 && reply.status === 0 && result(reply.body).code === 0) return;
    if (Date.now() > deadline) throw new Error(`login kept failing: command ${reply.command} status ${reply.status} reason ${reply.reason}`);
    await sleep(100);
  }
}

/** A write replayed on 57/58 with the same request number, as the SDK does. */
async function writeRetrying(client: RawClient, operation: number, body: Buffer, request: bigint, timeoutMs = 30_000): Promise<ReplyView> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = await client.write(operation, body, request);
    if (!(reply.command === 8 && (reply.status === 57 || reply.status === 58))) return reply;
    if (Date.now() > deadline) throw new Error(`write kept answering ${reply.status}`);
    await sleep(100);
  }
}

async function streamsNamed(index: number, streamName: string): Promise<number> {
  const client = cluster.client(index, await cluster.rootToken());
  const streams = await client.getStreams();
  return streams.filter((stream) => stream.name === streamName).length;
}

describe('binary clients across processes', () => {
  it('a client on a backup that does not follow the leader: login and writes are forwarded and answered', async () => {
    const primary = await cluster.primary();
    const backup = (primary + 1) % 3;
    const client = await RawClient.connect(cluster.tcpPort(backup));
    try {
      await loginRetrying(client);
      const reply = await writeRetrying(client, OP.createStream, name('via-backup'), client.requestNext++);
      expect([reply.command, reply.status, result(reply.body).code]).toEqual([8, 0, 0]);
      expect(await streamsNamed(primary, 'via-backup')).toBe(1);
      // A retry of the same request number through the backup is the cached reply, byte for byte.
      const again = await client.write(OP.createStream, name('via-backup'), reply.request);
      expect(again.frame).toEqual(reply.frame);
    } finally {
      client.close();
    }
  });

  it('the TypeScript client dialing a backup follows the leader through GetClusterMetadata', async () => {
    const primary = await cluster.primary();
    const backup = (primary + 2) % 3;
    const client = await BinaryClient.connect({ addresses: [`127.0.0.1:${cluster.tcpPort(backup)}`], username: 'iggy', password: 'iggy' });
    try {
      expect(client.address).toBe(`127.0.0.1:${cluster.tcpPort(primary)}`);
      const payload = await client.write(OP.createStream, name('followed'));
      expect(payload.byteLength).toBeGreaterThan(0);
    } finally {
      client.close();
    }
  });

  it('kill -9 the primary mid-write: the retry on a survivor returns the cached reply; nothing applied twice', async () => {
    const primary = await cluster.primary();
    const survivor = (primary + 1) % 3;
    const client = await RawClient.connect(cluster.tcpPort(primary));
    await loginRetrying(client);
    // Committed everywhere, reply in hand: the reference bytes.
    const request = client.requestNext++;
    const original = await client.write(OP.createStream, name('kill9-a'), request);
    expect(result(original.body).code).toBe(0);
    await cluster.waitFor('the stream on the survivor', async () => (await streamsNamed(survivor, 'kill9-a')) === 1, 10_000);
    // The next write is in flight when the primary dies.
    const inFlight = client.requestNext++;
    client.socket.write(requestFrame({ client: client.clientId, operation: OP.createStream, session: client.session, request: inFlight }, name('kill9-b')));
    await cluster.kill9(primary);
    client.close();

    // Resume the same session (same client id) on a survivor and replay both request numbers.
    const resumed = await RawClient.connect(cluster.tcpPort(survivor));
    try {
      resumed.clientId = client.clientId;
      await loginRetrying(resumed, 60_000);
      expect(resumed.session > client.session).toBe(true);
      const replayed = await writeRetrying(resumed, OP.createStream, name('kill9-a'), request, 60_000);
      expect(replayed.frame).toEqual(original.frame);
      const second = await writeRetrying(resumed, OP.createStream, name('kill9-b'), inFlight, 60_000);
      expect([second.status, result(second.body).code]).toEqual([0, 0]);
      const secondAgain = await resumed.write(OP.createStream, name('kill9-b'), inFlight);
      expect(secondAgain.frame).toEqual(second.frame);
      expect(await streamsNamed(survivor, 'kill9-a')).toBe(1);
      expect(await streamsNamed(survivor, 'kill9-b')).toBe(1);
    } finally {
      resumed.close();
    }
    cluster.start(primary);
    await cluster.waitForConverged(cluster.indices(), 60_000);
  }, 120_000);

  it('binary sessions are in the checkpoint and travel with a state transfer to a wiped replica', async () => {
    const kernels = loadKernels('ts');
    const tableOf = (index: number): ClientEntrySnapshot[] => {
      const split = kernels.trailerSplit(new Uint8Array(readFileSync(join(cluster.dataDir(index), 'snapshot.bin'))));
      expect(split.status).toBe('valid');
      return [...decodeSnapshot(split.payload).clientTable];
    };
    const primary = await cluster.primary();
    const wiped = (primary + 1) % 3;
    await cluster.kill9(wiped);
    cluster.wipe(wiped);
    // Client A writes past a checkpoint (every 112 ops here), then client B moves the cluster one
    // more checkpoint on, so a checkpoint holds A's session with its last reply.
    const a = await RawClient.connect(cluster.tcpPort(primary));
    const b = await RawClient.connect(cluster.tcpPort(primary));
    try {
      await loginRetrying(a);
      await loginRetrying(b);
      let last: ReplyView | null = null;
      for (let index = 0; index < 120; index++) last = await writeRetrying(a, OP.createStream, name(`ckpt-a-${index}`), a.requestNext++);
      const checkpointed = (await cluster.status(primary)).op;
      for (let index = 0; index < 130; index++) await writeRetrying(b, OP.createStream, name(`ckpt-b-${index}`), b.requestNext++);
      await cluster.waitFor('a checkpoint past client A', async () => (await cluster.status(primary)).checkpoint_op > checkpointed, 20_000);
      const entry = tableOf(primary).find((candidate) => candidate.clientId === a.clientId);
      expect(entry).toMatchObject({ clientId: a.clientId, epoch: Number(a.session), watermark: Number(last!.request) });
      expect(Buffer.from(entry!.reply)).toEqual(last!.frame);

      // The wiped replica rejoins by state transfer: the same entry, byte for byte.
      cluster.start(wiped);
      await cluster.waitFor('state transfer installed', () => cluster.events(wiped, 'state_transfer_installed')[0], 45_000);
      await cluster.waitForConverged(cluster.indices(), 45_000);
      const transferred = tableOf(wiped).find((candidate) => candidate.clientId === a.clientId);
      expect(transferred).toEqual(entry);

      // And A, resuming its session through the rejoined replica, gets that reply for a replay.
      const resumed = await RawClient.connect(cluster.tcpPort(wiped));
      try {
        resumed.clientId = a.clientId;
        await loginRetrying(resumed);
        const replayed = await writeRetrying(resumed, OP.createStream, name('replay-ignored'), last!.request);
        expect(replayed.frame).toEqual(last!.frame);
      } finally {
        resumed.close();
      }
    } finally {
      a.close();
      b.close();
    }
  }, 120_000);

  it(`${IDLE_CONNECTIONS.toLocaleString('en')} idle connections: bounded memory, a clear refusal past the limit, writes keep committing`, async () => {
    const target = (await cluster.primary() + 1) % 3;
    const pid = cluster.pid(target)!;
    const rssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    const before = rssKiB();
    const sockets: Socket[] = [];
    try {
      for (let batch = 0; batch < IDLE_CONNECTIONS; batch += 500) {
        const opened = await Promise.all(
          Array.from({ length: Math.min(500, IDLE_CONNECTIONS - batch) }, () =>
            new Promise<Socket>((resolve, reject) => {
              const socket = createConnection({ host: '127.0.0.1', port: cluster.tcpPort(target) }, () => resolve(socket));
              socket.once('error', reject);
            }),
          ),
        );
        for (const socket of opened) socket.on('error', () => {});
        sockets.push(...opened);
      }
      await sleep(500);
      const growthKiB = rssKiB() - before;
      // Far below a frame buffer per connection (1 MiB): what a socket and a session cost.
      expect(growthKiB / IDLE_CONNECTIONS).toBeLessThan(16);

      // One more: its first request is answered CannotEstablishConnection, then it is closed.
      const over = await RawClient.connect(cluster.tcpPort(target));
      const refusal = await over.call(requestFrame({ client: randomClientId(), operation: OP.register }, Buffer.alloc(8)));
      expect([refusal.command, refusal.status]).toEqual([8, 9]);
      over.close();

      // The cluster keeps serving: a write through another replica commits, and the loaded one
      // still answers its reads over HTTP.
      const other = (target + 1) % 3;
      const client = await RawClient.connect(cluster.tcpPort(other));
      await loginRetrying(client);
      const started = Date.now();
      const reply = await writeRetrying(client, OP.createStream, name('under-load'), client.requestNext++);
      expect(result(reply.body).code).toBe(0);
      expect(Date.now() - started).toBeLessThan(5_000);
      client.close();
      await cluster.waitFor('the write on the loaded replica', async () => (await streamsNamed(target, 'under-load')) === 1, 10_000);
      process.stdout.write(`[binary-client] ${IDLE_CONNECTIONS} idle connections: RSS +${(growthKiB / 1024).toFixed(1)} MiB (${(growthKiB / IDLE_CONNECTIONS).toFixed(2)} KiB each)\n`);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 120_000);

  it('a read of GetStream on the replica that served the writes', async () => {
    const client = await RawClient.connect(cluster.tcpPort(await cluster.primary()));
    try {
      await loginRetrying(client);
      const reply = await client.read(200, stringId('kill9-a'));
      expect(reply.status).toBe(0);
      expect(reply.body.length).toBeGreaterThan(0);
    } finally {
      client.close();
    }
  });
});

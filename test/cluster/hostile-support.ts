/**
 * The measuring side of the hostile-load suite (hostile.test.ts): a well-behaved writer whose
 * every write's latency and outcome is recorded while an attack runs, the checks every attack is
 * judged by (p99 under a second, no view change, replica RSS under a bound, every acknowledged
 * write present afterwards), and the raw binary clients the attacks are made of. Loopback only.
 */
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { expect } from 'vitest';
import { OP, RawClient, name, readReply as readReplyView, result, tokenLoginBody, requestFrame, type ReplyView } from '../support/iggy-frames.js';
import { sleep, type Cluster } from './harness.js';

/** What every attack must leave a well-behaved client: its writes' p99 latency below this. */
export const WRITE_P99_MS_MAX = 1_000;
/** A replica's resident memory never exceeds this during an attack (the state is a few MiB). */
export const REPLICA_RSS_MIB_MAX = 400;

/** A writer creating one stream every `intervalMs` through `index` (the primary), one at a time. */
export class Probe {
  readonly acknowledged: string[] = [];
  readonly latenciesMs: number[] = [];
  readonly failures: string[] = [];
  #stopped = false;
  #done: Promise<void> | null = null;

  readonly #cluster: Cluster;
  readonly #index: number;
  readonly #tag: string;
  readonly #intervalMs: number;

  constructor(cluster: Cluster, index: number, tag: string, intervalMs = 25) {
    this.#cluster = cluster;
    this.#index = index;
    this.#tag = tag;
    this.#intervalMs = intervalMs;
  }

  start(token: string): this {
    const client = this.#cluster.client(this.#index, token, 15_000);
    this.#done = (async () => {
      for (let sequence = 0; !this.#stopped; sequence++) {
        const streamName = `probe-${this.#tag}-${sequence}`;
        const startedMs = performance.now();
        try {
          await client.createStream(streamName);
          this.latenciesMs.push(performance.now() - startedMs);
          this.acknowledged.push(streamName);
        } catch (error) {
          this.latenciesMs.push(performance.now() - startedMs);
          this.failures.push(`${streamName}: ${String(error)}`);
        }
        await sleep(this.#intervalMs);
      }
    })();
    return this;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#done;
  }

  p99Ms(): number {
    const sorted = [...this.latenciesMs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
  }
}

/** Each replica's view, in replica order. */
export async function views(cluster: Cluster): Promise<number[]> {
  return Promise.all(cluster.indices().map(async (index) => (await cluster.status(index)).view));
}

/** The replica process's resident set size in MiB, from /proc. */
export function rssMiB(cluster: Cluster, index: number): number {
  const pid = cluster.pid(index);
  if (pid === null) return 0;
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? 0 : Number(match[1]) / 1024;
}

/** Samples every replica's RSS every 100 ms until stopped; returns the largest seen. */
export function watchRss(cluster: Cluster): { stop(): number } {
  let largest = 0;
  const sample = (): void => {
    for (const index of cluster.runningIndices()) largest = Math.max(largest, rssMiB(cluster, index));
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return largest;
    },
  };
}

/**
 * Runs `attack` for `durationMs` with a probe writing through the primary, then asserts what
 * the suite promises: the probe's writes all committed with p99 under WRITE_P99_MS_MAX, no
 * replica changed view, RSS stayed under REPLICA_RSS_MIB_MAX, and every acknowledged write is
 * on every replica afterwards.
 */
export async function underAttack(
  cluster: Cluster,
  tag: string,
  durationMs: number,
  attack: () => Promise<() => Promise<void> | void>,
): Promise<{ probe: Probe; rssMiBMax: number }> {
  const token = await cluster.rootToken();
  const primary = await cluster.primary();
  const before = await views(cluster);
  const rss = watchRss(cluster);
  const stopAttack = await attack();
  const probe = new Probe(cluster, primary, tag).start(token);
  await sleep(durationMs);
  await probe.stop();
  await stopAttack();
  const rssMiBMax = rss.stop();
  const after = await views(cluster);
  expect(probe.failures, `${tag}: the probe's writes failed`).toEqual([]);
  // The probe ran: at least as many writes as the p99 bound allows one writer in the attack.
  // Throughput under attack is not the promise; latency (the p99 below) is.
  expect(probe.acknowledged.length, `${tag}: the probe wrote`).toBeGreaterThanOrEqual(durationMs / WRITE_P99_MS_MAX);
  expect(probe.p99Ms(), `${tag}: write p99 (ms)`).toBeLessThan(WRITE_P99_MS_MAX);
  expect(after, `${tag}: views (a view change happened)`).toEqual(before);
  expect(rssMiBMax, `${tag}: replica RSS (MiB)`).toBeLessThan(REPLICA_RSS_MIB_MAX);
  await expectAcknowledgedEverywhere(cluster, probe.acknowledged);
  return { probe, rssMiBMax };
}

/** Every name in `names` is a stream on every running replica (once they caught up). */
export async function expectAcknowledgedEverywhere(cluster: Cluster, names: readonly string[]): Promise<void> {
  await cluster.waitForConverged();
  for (const index of cluster.runningIndices()) {
    const present = new Set((await cluster.client(index, await cluster.rootToken(), 60_000).getStreams()).map((stream) => stream.name));
    const missing = names.filter((streamName) => !present.has(streamName));
    expect(missing, `acknowledged writes missing on replica ${index}`).toEqual([]);
  }
}

/**
 * Keeps `count` raw connections to `port` open, each reopened as soon as it closes, until
 * stopped; `onOpen` may write to each (e.g. half a frame).
 */
export function holdConnections(
  port: number,
  count: number,
  options: { readonly onOpen?: (socket: Socket) => void; readonly reopenDelayMs?: number } = {},
): { stop(): void; opened(): number; ready(): Promise<void> } {
  const onOpen = options.onOpen ?? (() => {});
  let connected = 0;
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  const reopenDelayMs = options.reopenDelayMs ?? 5;
  const sockets = new Set<Socket>();
  let stopped = false;
  let opened = 0;
  const open = (): void => {
    if (stopped) return;
    const socket = connect({ host: '127.0.0.1', port });
    opened += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('connect', () => {
      onOpen(socket);
      connected += 1;
      if (connected === count) onReady();
    });
    socket.once('close', () => {
      sockets.delete(socket);
      // Not in a tight loop when the port is down (a replica being restarted).
      setTimeout(open, reopenDelayMs);
    });
  };
  for (let index = 0; index < count; index++) open();
  return {
    stop: () => {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    },
    opened: () => opened,
    ready: () => ready,
  };
}

/** A binary login with a personal access token on a fresh connection. */
export async function tokenLogin(port: number, token: string): Promise<{ client: RawClient; reply: ReplyView }> {
  const client = await RawClient.connect(port);
  const reply = await client.call(requestFrame({ client: client.clientId, operation: OP.register }, tokenLoginBody(token)));
  if (reply.command === 8 && reply.status === 0) {
    const { code, payload } = result(reply.body);
    if (code === 0) client.session = payload.readBigUInt64LE(4);
  }
  return { client, reply };
}

/**
 * Creates `count` streams named `${prefix}-i` over the binary port, `parallel` writers at once,
 * each logged in with the personal access token `token` (password logins are rate-bounded).
 */
export async function createStreams(port: number, token: string, prefix: string, count: number, parallel = 32): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      const { client, reply: login } = await tokenLogin(port, token);
      try {
        expect(login.command, 'a token login').toBe(8);
        for (let index = next++; index < count; index = next++) {
          const reply = await client.write(OP.createStream, name(`${prefix}-${index}`));
          const outcome = { command: reply.command, status: reply.status, reason: reply.reason, code: reply.body.byteLength >= 4 ? result(reply.body).code : null };
          expect(outcome, `create ${prefix}-${index}`).toEqual({ command: 8, status: 0, reason: outcome.reason, code: 0 });
        }
      } finally {
        client.close();
      }
    }),
  );
}

/**
 * Sends `count` copies of the non-replicated command `code` back to back on `client` without
 * waiting, then reads their `count` replies (what a client pipelining reads does).
 */
export async function pipelineReads(client: RawClient, code: number, count: number, body: Buffer = Buffer.alloc(0)): Promise<ReplyView[]> {
  const frame = requestFrame({ client: client.clientId, operation: OP.nonReplicated, code, session: client.session, request: client.requestNext }, body);
  client.socket.write(Buffer.concat(Array.from({ length: count }, () => frame)));
  const replies: ReplyView[] = [];
  for (let index = 0; index < count; index++) {
    const reply = await client.next(60_000);
    if (reply === null) throw new Error('the connection closed before every pipelined reply');
    replies.push(readReplyView(reply));
  }
  return replies;
}

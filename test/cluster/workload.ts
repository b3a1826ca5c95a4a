/**
 * Client-side workload for the cluster tests: writers that behave like a careful application on
 * top of the HTTP API. Each writer has its own login (its own VSR session), sends one request at
 * a time, and turns every ambiguous outcome into a definitive one by retrying an operation whose
 * retry is safe to judge (create-by-name: "already exists" means the earlier attempt committed;
 * delete: "not found" means it did). The tests then compare the cluster's final state with what
 * the definitive answers imply.
 */
import type { IggyHttpError, VrmetaClient } from '../../src/client/client.js';
import { attempt, ClusterError, sleep, type Cluster } from './harness.js';

/** Iggy error ids the workload reads (src/metadata/errors.ts). */
export const IggyId = {
  unauthorized: 41,
  streamIdNotFound: 1009,
  streamNameNotFound: 1010,
  streamNameAlreadyExists: 1012,
  topicNameAlreadyExists: 2013,
} as const;

/** Pause after an ambiguous answer before asking again (Retry-After is 1 s; views change faster). */
const RETRY_PAUSE_MS = 200;

export interface Settled<T> {
  readonly kind: 'ok' | 'rejected';
  readonly value?: T;
  readonly error?: IggyHttpError;
  /** Ambiguous answers seen before the definitive one (each may have committed). */
  readonly unknowns: number;
}

/**
 * One writer: a token valid on every replica (logins are local, the JWT key is shared) and a
 * current target that moves to the next replica after every ambiguous answer, as a client behind
 * a load balancer would.
 */
export class Writer {
  readonly name: string;
  private readonly cluster: Cluster;
  private readonly clients: VrmetaClient[];
  private target: number;
  readonly unknownReasons: string[] = [];

  private constructor(name: string, cluster: Cluster, token: string, firstTarget: number) {
    this.name = name;
    this.cluster = cluster;
    this.clients = cluster.indices().map((index) => cluster.client(index, token, 15_000));
    this.target = firstTarget % this.clients.length;
  }

  static async login(name: string, cluster: Cluster, firstTarget: number): Promise<Writer> {
    const index = cluster.runningIndices()[firstTarget % cluster.runningIndices().length]!;
    const client = await cluster.login(index);
    if (client.token === null) throw new ClusterError('login returned no token');
    return new Writer(name, cluster, client.token, firstTarget);
  }

  /** Retries `fn` on ambiguous answers, moving between replicas, until it is definitive. */
  async settle<T>(what: string, fn: (client: VrmetaClient) => Promise<T>, budgetMs = 45_000): Promise<Settled<T>> {
    const deadline = Date.now() + budgetMs;
    let unknowns = 0;
    for (;;) {
      const client = this.clients[this.target]!;
      const outcome = await attempt(() => fn(client));
      if (outcome.kind === 'ok') return { kind: 'ok', value: outcome.value, unknowns };
      if (outcome.kind === 'rejected') return { kind: 'rejected', error: outcome.error, unknowns };
      unknowns += 1;
      if (this.unknownReasons.length < 50) this.unknownReasons.push(`${what} @${this.target}: ${outcome.reason}`);
      this.target = (this.target + 1) % this.clients.length;
      if (Date.now() >= deadline) {
        this.cluster.assertNoUnexpectedExit();
        throw new ClusterError(`${this.name}: ${what} stayed ambiguous for ${budgetMs} ms (last: ${outcome.reason})`);
      }
      await sleep(RETRY_PAUSE_MS);
    }
  }

  /**
   * Creates stream `name` until the answer is definitive. True when it exists now because of us:
   * a 200, or "already exists" after an ambiguous attempt (names are never reused, so nobody
   * else created it). "Already exists" on a first attempt is a duplicate and fails the test.
   */
  async createStream(name: string): Promise<{ created: boolean; unknowns: number }> {
    const settled = await this.settle(`create stream ${name}`, (client) => client.createStream(name));
    if (settled.kind === 'ok') return { created: true, unknowns: settled.unknowns };
    if (settled.error!.id === IggyId.streamNameAlreadyExists && settled.unknowns > 0) return { created: true, unknowns: settled.unknowns };
    throw new ClusterError(`${this.name}: create stream ${name} answered ${settled.error!.message} after ${settled.unknowns} ambiguous attempts`);
  }

  /** Deletes stream `name` until definitive; "not found" after an ambiguous attempt means it committed. */
  async deleteStream(name: string): Promise<{ unknowns: number }> {
    const settled = await this.settle(`delete stream ${name}`, (client) => client.deleteStream(name));
    if (settled.kind === 'ok') return { unknowns: settled.unknowns };
    const id = settled.error!.id;
    if ((id === IggyId.streamIdNotFound || id === IggyId.streamNameNotFound) && settled.unknowns > 0) return { unknowns: settled.unknowns };
    throw new ClusterError(`${this.name}: delete stream ${name} answered ${settled.error!.message} after ${settled.unknowns} ambiguous attempts`);
  }

  /** Creates topic `topic` in `stream` until definitive (same rule as createStream). */
  async createTopic(stream: string, topic: string, partitionsCount: number): Promise<{ unknowns: number }> {
    const settled = await this.settle(`create topic ${stream}/${topic}`, (client) => client.createTopic(stream, { name: topic, partitionsCount }));
    if (settled.kind === 'ok') return { unknowns: settled.unknowns };
    if (settled.error!.id === IggyId.topicNameAlreadyExists && settled.unknowns > 0) return { unknowns: settled.unknowns };
    throw new ClusterError(`${this.name}: create topic ${stream}/${topic} answered ${settled.error!.message} after ${settled.unknowns} ambiguous attempts`);
  }
}

/**
 * Writes `count` streams named `${prefix}-${n}` with `writers` concurrent writers. Returns the
 * names that exist because of it.
 */
export async function writeStreams(cluster: Cluster, prefix: string, count: number, writerCount = 6): Promise<string[]> {
  const writers = await Promise.all(Array.from({ length: writerCount }, (_, index) => Writer.login(`${prefix}-writer-${index}`, cluster, index)));
  const names: string[] = [];
  let next = 0;
  await Promise.all(
    writers.map(async (writer) => {
      for (;;) {
        const n = next++;
        if (n >= count) return;
        const name = `${prefix}-${n}`;
        await writer.createStream(name);
        names.push(name);
      }
    }),
  );
  return names;
}

/**
 * Writes streams `${prefix}-${round}-${n}` until the primary's commit_max reaches `op`. Concurrent
 * writes share prepares (the primary batches them), so a count of writes is not a count of ops.
 */
export async function writeStreamsUntilOp(cluster: Cluster, prefix: string, op: number, writerCount = 6): Promise<string[]> {
  const names: string[] = [];
  for (let round = 0; ; round++) {
    const commit = (await cluster.status(await cluster.primary())).commit_max;
    if (commit >= op) return names;
    names.push(...(await writeStreams(cluster, `${prefix}-${round}`, op - commit, writerCount)));
  }
}

/** Stream names of replica `index` (as root). */
export async function streamNames(cluster: Cluster, index: number): Promise<string[]> {
  const streams = JSON.parse(await cluster.rawGet(index, '/streams')) as { name: string }[];
  return streams.map((stream) => stream.name);
}

/**
 * A promise that rejects as soon as one of `loops` rejects and never settles otherwise: race it
 * against a wait so a writer's failure (say, a duplicate) fails the test at once, with its own
 * message, instead of surfacing as a timeout of the wait.
 */
export function firstFailure(loops: readonly Promise<unknown>[]): Promise<never> {
  const failed = new Promise<never>((_resolve, reject) => {
    for (const loop of loops) loop.catch(reject);
  });
  // Not an unhandled rejection when no race is listening any more: the caller awaits the loops.
  failed.catch(() => undefined);
  return failed;
}

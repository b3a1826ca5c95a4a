/**
 * `vrmeta bench messages`: produce and consume rates and latencies of 1 KiB messages on a
 * 3-replica vrmeta cluster, against a 3-server NATS JetStream cluster (Debian's `nats-server`,
 * the npm `nats` client) on the same machine, the levels interleaved in one run so a noisy phase
 * of the shared machine hits both systems alike.
 *
 * Each level is (batch size, producers). Producing: every producer has its own connection and its
 * own partition (vrmeta) or subject (JetStream), and sends batches of `batch` messages in a closed
 * loop for the window; an operation is one batch, acknowledged. vrmeta acknowledges a batch once a
 * quorum of replicas fsynced the prepare that holds it (one fsync per prepare, whatever its
 * size); JetStream acknowledges once a quorum of its servers stored it in its file store, which
 * by default fsyncs every two minutes (`sync_interval`). Consuming: one consumer per producer
 * reads back what that producer's partition or subject received, `batch` messages per request,
 * from the start to the end; an operation is one request.
 *
 * Every acknowledged send counts its messages; every read counts the messages it returned and
 * checks them (count and size), and a consumer that reads fewer messages than were acknowledged
 * fails the level.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { AckPolicy, connect, DeliverPolicy, StorageType, type JetStreamClient, type NatsConnection } from 'nats';
import { encodeProducerBatch } from '../src/format/message-batch.js';
import { loadKernels } from '../src/kernels/index.js';
import { BinaryClient } from '../src/transport/binary-client.js';
import { formatMs, formatNumber, machineLine, percentile } from './load.js';
import { HOST, makeTempRoot, removeTempRoot, reservePorts, spawnChild, stopChild, VrmetaCluster, waitFor, type ChildHandle } from './procs.js';

export const MESSAGE_BATCHES = [1, 100, 1000] as const;
export const MESSAGE_PRODUCERS = [1, 8, 64] as const;
export const MESSAGE_BYTES = 1024;

/** VSR operations and Iggy command codes the bench speaks. */
const CREATE_STREAM = 128;
const CREATE_TOPIC = 132;
const SEND_MESSAGES = 160;
const POLL_MESSAGES = 100;
/** Producers logging in at once (the replicas' password gate bounds checks in flight). */
const LOGINS_PARALLEL_MAX = 8;
/** What one vrmeta prepare (and a client frame) may carry: a larger send cannot be made. */
const FRAME_BYTES_MAX = 1024 * 1024;

export interface MessagesBenchOptions {
  readonly kernels: readonly ('wasm' | 'ts')[];
  readonly batches: readonly number[];
  readonly producers: readonly number[];
  readonly durationMs: number;
  /** Run JetStream (when its server is installed). */
  readonly nats: boolean;
  readonly log: (line: string) => void;
}

export type MessagesSystem = 'vrmeta' | 'jetstream';

export interface MessagesBenchRow {
  readonly system: MessagesSystem;
  readonly kernels: 'wasm' | 'ts' | null;
  readonly phase: 'produce' | 'consume';
  readonly batch: number;
  readonly producers: number;
  readonly messages: number;
  readonly seconds: number;
  readonly messagesPerS: number;
  readonly mbPerS: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  /** Why the level did not run (a batch over vrmeta's frame bound), else null. */
  readonly skipped: string | null;
}

export interface MessagesBenchReport {
  readonly date: string;
  readonly machine: string;
  readonly messageBytes: number;
  readonly jetstream: { readonly version: string | null; readonly skipped: string | null };
  readonly rows: MessagesBenchRow[];
}

/** One system under test: a producer and a consumer operation per level. */
interface MessagesTarget {
  readonly system: MessagesSystem;
  readonly kernels: 'wasm' | 'ts' | null;
  /** Why `batch` cannot be sent, or null. */
  refuses(batch: number): string | null;
  /** Prepares `producers` producers (their partitions or subjects, empty) for one level. */
  level(batch: number, producers: number): Promise<LevelHandle>;
  close(): Promise<void>;
}

interface LevelHandle {
  /** Sends one batch as producer `worker`. */
  send(worker: number): Promise<void>;
  /** Reads up to `batch` messages of producer `worker`'s partition from `offset`: how many. */
  read(worker: number, offset: number): Promise<number>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------- vrmeta

function identifier(name: string): Buffer {
  const bytes = Buffer.from(name, 'utf8');
  return Buffer.concat([Buffer.from([2, bytes.length]), bytes]);
}

function u32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32LE(value);
  return out;
}

class VrmetaMessages implements MessagesTarget {
  readonly system = 'vrmeta';
  readonly kernels: 'wasm' | 'ts';
  private readonly cluster: VrmetaCluster;
  private readonly primary: number;
  private levels = 0;

  private constructor(kernels: 'wasm' | 'ts', cluster: VrmetaCluster, primary: number) {
    this.kernels = kernels;
    this.cluster = cluster;
    this.primary = primary;
  }

  static async start(kernels: 'wasm' | 'ts'): Promise<VrmetaMessages> {
    const cluster = await VrmetaCluster.start({ kernels });
    try {
      return new VrmetaMessages(kernels, cluster, await cluster.primary());
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
  }

  refuses(batch: number): string | null {
    const bytes = 256 + batch * (48 + MESSAGE_BYTES) + 64;
    return bytes > FRAME_BYTES_MAX ? `a batch of ${batch} is ${formatNumber(bytes)} bytes, over the 1 MiB frame bound` : null;
  }

  async level(batch: number, producers: number): Promise<LevelHandle> {
    const connectOne = (): Promise<BinaryClient> =>
      BinaryClient.connect({ addresses: [this.cluster.tcpAddress(this.primary)], username: 'iggy', password: 'iggy' });
    // In small batches: a replica bounds the password checks in flight (a login flood's gate).
    const clients: BinaryClient[] = [];
    while (clients.length < producers) {
      const count = Math.min(LOGINS_PARALLEL_MAX, producers - clients.length);
      clients.push(...(await Promise.all(Array.from({ length: count }, connectOne))));
    }
    const stream = `m${this.levels++}b${batch}p${producers}`;
    await clients[0]!.write(CREATE_STREAM, Buffer.concat([Buffer.from([stream.length]), Buffer.from(stream)]));
    const topicBody = Buffer.concat([identifier(stream), u32(producers), Buffer.from([1]), Buffer.from('t')]);
    await clients[0]!.write(CREATE_TOPIC, topicBody);
    // The producers' hashing is the client's, the same for every server mode.
    const kernels = loadKernels();
    const payload = new Uint8Array(MESSAGE_BYTES).fill(0x61);
    let id = 1n;
    const bodyOf = (worker: number): Buffer => {
      const messages = Array.from({ length: batch }, () => ({ id: id++, payload }));
      const encoded = encodeProducerBatch(kernels, messages, { originTimestampUs: Date.now() * 1000 });
      const metadata = Buffer.concat([identifier(stream), identifier('t'), Buffer.from([2, 4]), u32(worker), u32(batch)]);
      return Buffer.concat([u32(metadata.length), metadata, encoded]);
    };
    const pollPrefix = (worker: number): Buffer =>
      Buffer.concat([Buffer.from([1, 1, 4]), u32(1), identifier(stream), identifier('t'), Buffer.from([1]), u32(worker)]);
    return {
      send: async (worker) => {
        await clients[worker]!.write(SEND_MESSAGES, bodyOf(worker));
      },
      read: async (worker, offset) => {
        const tail = Buffer.alloc(14);
        tail.writeUInt8(1, 0); // strategy: offset
        tail.writeBigUInt64LE(BigInt(offset), 1);
        tail.writeUInt32LE(batch, 9);
        tail.writeUInt8(0, 13); // no auto commit
        const reply = await clients[worker]!.read(POLL_MESSAGES, Buffer.concat([pollPrefix(worker), tail]));
        const count = Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength).readUInt32LE(12);
        const expected = 16 + count * (48 + MESSAGE_BYTES);
        if (count > 0 && reply.byteLength < expected) throw new Error(`poll of ${count} messages is ${reply.byteLength} bytes`);
        return count;
      },
      close: async () => {
        await Promise.all(clients.map((client) => client.logout()));
      },
    };
  }

  async close(): Promise<void> {
    await this.cluster.stopAll();
  }
}

// ------------------------------------------------------------------------------- JetStream

const NATS_CANDIDATES = ['/usr/sbin/nats-server', '/usr/bin/nats-server'];

export function findNats(): { binary: string | null; version: string | null } {
  const binary = NATS_CANDIDATES.find((path) => spawnSync(path, ['--version'], { encoding: 'utf8' }).status === 0) ?? null;
  if (binary === null) return { binary, version: null };
  const version = /v(\d+\.\d+\.\d+)/.exec(spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[1] ?? null;
  return { binary, version };
}

/**
 * Three JetStream servers on 127.0.0.1 (client and route ports reserved), one stream `bench` over
 * `bench.>` with three replicas in the file store, defaults otherwise (its `sync_interval`).
 */
class JetStreamMessages implements MessagesTarget {
  readonly system = 'jetstream';
  readonly kernels = null;
  private readonly root: string;
  private readonly children: ChildHandle[];
  private readonly ports: number[];
  private readonly admin: NatsConnection;
  private levels = 0;

  private constructor(root: string, children: ChildHandle[], ports: number[], admin: NatsConnection) {
    this.root = root;
    this.children = children;
    this.ports = ports;
    this.admin = admin;
  }

  static async start(binary: string): Promise<JetStreamMessages> {
    const root = makeTempRoot('nats-bench-');
    const ports = await reservePorts(6);
    const children: ChildHandle[] = [];
    try {
      for (let index = 0; index < 3; index++) {
        const routes = [0, 1, 2].filter((other) => other !== index).map((other) => `nats-route://${HOST}:${ports[3 + other]!}`);
        const config = [
          `server_name: n${index}`,
          `listen: ${HOST}:${ports[index]!}`,
          `jetstream { store_dir: "${join(root, `n${index}`)}" }`,
          `cluster { name: bench, listen: ${HOST}:${ports[3 + index]!}, routes: [${routes.join(', ')}] }`,
        ].join('\n');
        const file = join(root, `n${index}.conf`);
        writeFileSync(file, config);
        children.push(spawnChild(`nats n${index}`, binary, ['-c', file], { logFile: join(root, `n${index}.log`) }));
      }
      const servers = ports.slice(0, 3).map((port) => `${HOST}:${port}`);
      const admin = await waitFor('the JetStream servers', () => connect({ servers }).catch(() => null), 30_000, children);
      // The servers elect a JetStream meta leader first: until then every API call times out.
      const stream = { name: 'bench', subjects: ['bench.>'], num_replicas: 3, storage: StorageType.File };
      await waitFor(
        'the JetStream stream',
        () =>
          admin
            .jetstreamManager()
            .then((manager) => manager.streams.add(stream))
            .then(() => true)
            .catch(() => null),
        60_000,
        children,
      );
      return new JetStreamMessages(root, children, ports, admin);
    } catch (error) {
      for (const child of children) await stopChild(child, 'SIGKILL');
      removeTempRoot(root);
      throw error;
    }
  }

  refuses(): string | null {
    return null;
  }

  async level(batch: number, producers: number): Promise<LevelHandle> {
    const level = `l${this.levels++}`;
    const servers = this.ports.slice(0, 3).map((port) => `${HOST}:${port}`);
    const connections = await Promise.all(Array.from({ length: producers }, () => connect({ servers })));
    const streams: JetStreamClient[] = connections.map((connection) => connection.jetstream());
    const manager = await this.admin.jetstreamManager();
    const payload = new Uint8Array(MESSAGE_BYTES).fill(0x61);
    const subject = (worker: number): string => `bench.${level}.w${worker}`;
    const consumers = new Map<number, Awaited<ReturnType<JetStreamClient['consumers']['get']>>>();
    const consumerOf = async (worker: number): Promise<Awaited<ReturnType<JetStreamClient['consumers']['get']>>> => {
      let consumer = consumers.get(worker);
      if (consumer === undefined) {
        const name = `${level}w${worker}`;
        await manager.consumers.add('bench', {
          durable_name: name,
          filter_subject: subject(worker),
          ack_policy: AckPolicy.None,
          deliver_policy: DeliverPolicy.All,
        });
        consumer = await streams[worker]!.consumers.get('bench', name);
        consumers.set(worker, consumer);
      }
      return consumer;
    };
    return {
      send: async (worker) => {
        const stream = streams[worker]!;
        await Promise.all(Array.from({ length: batch }, () => stream.publish(subject(worker), payload)));
      },
      read: async (worker) => {
        const consumer = await consumerOf(worker);
        const messages = await consumer.fetch({ max_messages: batch, expires: 1_000 });
        let count = 0;
        for await (const message of messages) {
          if (message.data.byteLength !== MESSAGE_BYTES) throw new Error(`a message of ${message.data.byteLength} bytes`);
          count += 1;
        }
        return count;
      },
      close: async () => {
        await Promise.all(connections.map((connection) => connection.close()));
      },
    };
  }

  async close(): Promise<void> {
    await this.admin.close();
    for (const child of this.children) await stopChild(child, 'SIGKILL');
    removeTempRoot(this.root);
  }
}

// ---------------------------------------------------------------------------------- driver

function rowOf(
  target: MessagesTarget,
  phase: 'produce' | 'consume',
  level: { batch: number; producers: number },
  measured: { messages: number; seconds: number; latencies: number[] },
): MessagesBenchRow {
  const sorted = Float64Array.from(measured.latencies).sort();
  const messagesPerS = measured.seconds > 0 ? measured.messages / measured.seconds : 0;
  return {
    system: target.system,
    kernels: target.kernels,
    phase,
    ...level,
    messages: measured.messages,
    seconds: measured.seconds,
    messagesPerS,
    mbPerS: (messagesPerS * MESSAGE_BYTES) / 1e6,
    latencyMsP50: percentile(sorted, 0.5),
    latencyMsP99: percentile(sorted, 0.99),
    skipped: null,
  };
}

/** Producers in a closed loop for `durationMs`; then consumers read back what each one sent. */
async function measureLevel(target: MessagesTarget, batch: number, producers: number, durationMs: number): Promise<MessagesBenchRow[]> {
  const handle = await target.level(batch, producers);
  try {
    const sent = new Array<number>(producers).fill(0);
    const produceLatencies: number[] = [];
    const produceStart = performance.now();
    const stopAt = produceStart + durationMs;
    await Promise.all(
      Array.from({ length: producers }, async (_, worker) => {
        while (performance.now() < stopAt) {
          const began = performance.now();
          await handle.send(worker);
          produceLatencies.push(performance.now() - began);
          sent[worker]! += batch;
        }
      }),
    );
    const produceSeconds = (performance.now() - produceStart) / 1000;
    const consumeLatencies: number[] = [];
    const consumeStart = performance.now();
    const read = await Promise.all(
      Array.from({ length: producers }, async (_, worker) => {
        let offset = 0;
        while (offset < sent[worker]!) {
          const began = performance.now();
          const count = await handle.read(worker, offset);
          consumeLatencies.push(performance.now() - began);
          if (count === 0) throw new Error(`${target.system}: consumer ${worker} read ${offset} of ${sent[worker]} acknowledged messages`);
          offset += count;
        }
        return offset;
      }),
    );
    const consumeSeconds = (performance.now() - consumeStart) / 1000;
    const total = sent.reduce((sum, count) => sum + count, 0);
    const level = { batch, producers };
    return [
      rowOf(target, 'produce', level, { messages: total, seconds: produceSeconds, latencies: produceLatencies }),
      rowOf(target, 'consume', level, { messages: read.reduce((sum, count) => sum + count, 0), seconds: consumeSeconds, latencies: consumeLatencies }),
    ];
  } finally {
    await handle.close();
  }
}

function skippedRows(target: MessagesTarget, batch: number, producers: number, reason: string): MessagesBenchRow[] {
  return (['produce', 'consume'] as const).map((phase) => ({
    system: target.system,
    kernels: target.kernels,
    phase,
    batch,
    producers,
    messages: 0,
    seconds: 0,
    messagesPerS: 0,
    mbPerS: 0,
    latencyMsP50: Number.NaN,
    latencyMsP99: Number.NaN,
    skipped: reason,
  }));
}

export async function runMessagesBench(options: MessagesBenchOptions): Promise<MessagesBenchReport> {
  const targets: MessagesTarget[] = [];
  const nats = findNats();
  let natsSkipped: string | null = null;
  try {
    for (const kernels of options.kernels) {
      options.log(`[bench] starting a 3-replica vrmeta cluster (${kernels} kernels)`);
      targets.push(await VrmetaMessages.start(kernels));
    }
    if (!options.nats) natsSkipped = 'not requested';
    else if (nats.binary === null) natsSkipped = 'nats-server is not installed (apt-get install nats-server)';
    else {
      options.log(`[bench] starting a 3-server JetStream cluster (nats-server ${nats.version ?? '?'})`);
      targets.push(await JetStreamMessages.start(nats.binary));
    }
    const rows: MessagesBenchRow[] = [];
    for (const batch of options.batches) {
      for (const producers of options.producers) {
        for (const target of targets) {
          const refused = target.refuses(batch);
          if (refused !== null) {
            rows.push(...skippedRows(target, batch, producers, refused));
            continue;
          }
          options.log(`[bench] ${target.system}${target.kernels === null ? '' : ` ${target.kernels}`}: batch ${batch}, ${producers} producers`);
          rows.push(...(await measureLevel(target, batch, producers, options.durationMs)));
        }
      }
    }
    return {
      date: new Date().toISOString().slice(0, 10),
      machine: machineLine(),
      messageBytes: MESSAGE_BYTES,
      jetstream: { version: nats.version, skipped: natsSkipped },
      rows,
    };
  } finally {
    for (const target of targets) await target.close();
  }
}

function labelOf(row: MessagesBenchRow): string {
  return row.kernels === null ? row.system : `${row.system} (${row.kernels})`;
}

export function formatMessagesReport(report: MessagesBenchReport): string {
  const lines = [
    `vrmeta bench messages — ${report.date}, ${report.machine}`,
    `${report.messageBytes}-byte messages; JetStream ${report.jetstream.skipped === null ? (report.jetstream.version ?? '') : `skipped: ${report.jetstream.skipped}`}`,
    '',
    '| phase | batch | producers | system | messages/s | MB/s | p50 | p99 |',
    '|---|---:|---:|---|---:|---:|---:|---:|',
  ];
  for (const row of report.rows) {
    const cells =
      row.skipped === null
        ? [formatNumber(row.messagesPerS), formatNumber(row.mbPerS, 1), formatMs(row.latencyMsP50), formatMs(row.latencyMsP99)]
        : [`— (${row.skipped})`, '—', '—', '—'];
    lines.push(`| ${row.phase} | ${row.batch} | ${row.producers} | ${labelOf(row)} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

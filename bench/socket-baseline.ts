/**
 * The floor under vrmeta's chunk fetch: how fast bare node:net moves a snapshot-sized payload
 * over loopback in the shape state transfer uses (256 KiB chunks, 4 requests in flight), with no
 * checksums, no frames to build or verify and no disk. The server runs in this (warm) process, as
 * a serving replica is warm; the receiver is a fresh child process per size, as a wiped replica
 * is. Both sides are written the way a tuned loop would be: the server writes a reused prefix and
 * a view of the payload (no per-chunk buffer, no copy), the receiver copies each chunk straight
 * into one preallocated payload buffer (no per-chunk buffer). Its MB/s is what vrmeta's fetch
 * rate should be read against (`vrmeta bench transfer`).
 */
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { HOST, spawnChild, stopChild, withTails } from './procs.js';

const CHUNK_BYTES = 256 * 1024;
/** Same as the state-transfer header: the server answers with a 256-byte prefix per chunk. */
const PREFIX_BYTES = 256;
const IN_FLIGHT = 4;
const REQUEST_BYTES = 8;
const TIMEOUT_MS = 120_000;

/** The receiver, run by `node --input-type=module -e`: prints `MBPS <rate> RSS_GROWTH <bytes>` and exits. */
const RECEIVER = `
import { connect } from 'node:net';
const [port, total] = [Number(process.argv[1]), Number(process.argv[2])];
const CHUNK = ${CHUNK_BYTES}, FRAME = ${CHUNK_BYTES + PREFIX_BYTES}, WINDOW = ${IN_FLIGHT};
const socket = connect(port, '${HOST}');
socket.setNoDelay(true);
// One payload buffer for the whole transfer, one prefix buffer reused for every frame.
const payload = new Uint8Array(total);
const prefix = new Uint8Array(${PREFIX_BYTES});
let requested = 0, received = 0, have = 0, startedAt = 0;
const request = () => {
  while (requested < total && requested - received < WINDOW * CHUNK) {
    const message = Buffer.allocUnsafe(8);
    message.writeUInt32LE(requested, 0);
    message.writeUInt32LE(Math.min(CHUNK, total - requested), 4);
    socket.write(message);
    requested += CHUNK;
  }
};
let rssAtStart = 0;
socket.on('connect', () => { rssAtStart = process.memoryUsage().rss; startedAt = performance.now(); request(); });
socket.on('data', (data) => {
  for (let at = 0; at < data.length; ) {
    const size = Math.min(FRAME, ${PREFIX_BYTES} + total - received);
    const take = Math.min(data.length - at, size - have);
    if (have < ${PREFIX_BYTES}) {
      const head = Math.min(take, ${PREFIX_BYTES} - have);
      prefix.set(data.subarray(at, at + head), have);
      if (take > head) payload.set(data.subarray(at + head, at + take), received);
    } else {
      payload.set(data.subarray(at, at + take), received + have - ${PREFIX_BYTES});
    }
    have += take;
    at += take;
    if (have < size) continue;
    received += size - ${PREFIX_BYTES};
    have = 0;
    if (received >= total) {
      const mbps = total / 1e6 / ((performance.now() - startedAt) / 1000);
      const rssGrowth = process.resourceUsage().maxRSS * 1024 - rssAtStart;
      process.stdout.write('MBPS ' + mbps + ' RSS_GROWTH ' + rssGrowth + '\\n');
      process.exit(0);
    }
    request();
  }
});
socket.on('error', (error) => { process.stderr.write(String(error) + '\\n'); process.exit(1); });
`;

export interface SocketBaselineRow {
  readonly sizeMiB: number;
  readonly bytes: number;
  readonly mbps: number;
  /** The receiver's peak RSS minus its RSS when it connected: what uncollected chunk buffers cost a bare Node process. */
  readonly rssGrowthBytes: number;
}

/** Serves `bytes` from a warm buffer to one fresh receiver process; its MB/s (10^6 B/s) and RSS growth. */
async function measure(payload: Uint8Array, bytes: number): Promise<{ mbps: number; rssGrowthBytes: number }> {
  // The prefix is the same bytes every time (no checksums here): one buffer, written per chunk.
  const prefix = new Uint8Array(PREFIX_BYTES);
  const server = createServer((socket: Socket) => {
    socket.setNoDelay(true);
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
      socket.cork();
      while (pending.length >= REQUEST_BYTES) {
        const offset = pending.readUInt32LE(0);
        const length = pending.readUInt32LE(4);
        pending = pending.subarray(REQUEST_BYTES);
        // Prefix then a view of the payload, in one writev: no per-chunk buffer, no copy.
        socket.write(prefix);
        socket.write(payload.subarray(offset, offset + length));
      }
      socket.uncork();
    });
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  const child = spawnChild('socket baseline receiver', process.execPath, ['--input-type=module', '-e', RECEIVER, String(port), String(bytes)], {
    keep: (line) => line.startsWith('MBPS '),
  });
  try {
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), TIMEOUT_MS).unref());
    const outcome = await Promise.race([child.exited, timer]);
    const line = child.kept.find(({ line: kept }) => kept.startsWith('MBPS '));
    if (outcome === 'timeout' || outcome.code !== 0 || line === undefined) {
      throw withTails(`socket baseline of ${bytes} bytes failed (${outcome === 'timeout' ? 'timeout' : JSON.stringify(outcome)})`, [child]);
    }
    const fields = line.line.split(' ');
    return { mbps: Number(fields[1]), rssGrowthBytes: Number(fields[3]) };
  } finally {
    await stopChild(child, 'SIGKILL');
    server.close();
  }
}

/** One row per snapshot size (the transfer bench's sizes). */
export async function runSocketBaseline(sizesMiB: readonly number[]): Promise<SocketBaselineRow[]> {
  const largest = Math.max(...sizesMiB.map((size) => Math.ceil(size * 1024 * 1024)));
  const payload = new Uint8Array(largest).fill(0x5a);
  const rows: SocketBaselineRow[] = [];
  for (const sizeMiB of sizesMiB) {
    const bytes = Math.ceil(sizeMiB * 1024 * 1024);
    rows.push({ sizeMiB, bytes, ...(await measure(payload, bytes)) });
  }
  return rows;
}

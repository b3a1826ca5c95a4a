/**
 * `vrmeta bench kernels`: the hot-path kernels side by side in one process, against npm peers
 * and against memcpy of the same bytes (the physical reference).
 *
 * Back of the envelope (2-vCPU build machine, ../shared/reference/hotpath-perf.md): memcpy runs
 * ~60 GB/s for 1 MiB (L2 spill) and ~20 GB/s for 64 MiB (DRAM bound, ~3.2 ms). AS XXH3 with SIMD
 * reaches ~27 GB/s from cache, so hashing 1 MiB is ~0.45x memcpy speed and a 64 MiB journal scan
 * should take about one DRAM memcpy. A hand-written msgpack encoder does ~600 MB/s of output; the
 * WASM encoder over flat tables is bound by marshalling the JS objects (~5 ms for 9 MB).
 *
 * Results are checked before anything is timed. Timings are medians of tinybench samples; the
 * machine is shared and noisy, so compare the ratios measured in one run, not absolute figures.
 */
import { cpus } from 'node:os';
import { Bench } from 'tinybench';
import type { Kernels } from '../src/kernels/kernel.js';
import { createTsKernels } from '../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../src/kernels/wasm-instance.js';
import {
  BATCH_HEADER_SIZE,
  MESSAGE_HEADER_SIZE,
  setBatchChecksum,
  writeBatchHeader,
} from '../src/format/message-batch.js';
import { referenceSnapshot } from '../src/testing/snapshot-fixtures.js';
import { buildImage } from '../src/testing/wal-image.js';

export interface KernelBenchOptions {
  /** Tiny inputs and sampling time: keeps the bench compiling and running inside `npm test`. */
  readonly smoke: boolean;
  /** Milliseconds of sampling per variant (tinybench `time`). */
  readonly timeMs?: number;
  readonly log?: (line: string) => void;
}

export interface KernelBenchRow {
  readonly suite: string;
  readonly variant: string;
  /** Bytes processed per operation (one message, one artifact, one snapshot). */
  readonly bytes: number;
  readonly medianMs: number;
  readonly gbPerS: number;
  /** medianMs / medianMs of memcpy of the same bytes (lower is better); null where n/a. */
  readonly vsMemcpy: number | null;
  /** speed of this variant / speed of the best peer in the suite (higher is better). */
  readonly vsBestPeer: number | null;
}

export interface KernelBenchReport {
  readonly node: string;
  readonly cpu: string;
  readonly smoke: boolean;
  readonly rows: KernelBenchRow[];
}

interface Variant {
  name: string;
  /** `peer` rows form the 'best peer' baseline; `context` rows are shown but not compared. */
  kind: 'ours' | 'peer' | 'memcpy' | 'context';
  /** Operations per call of `run` (batched so a sample covers ~1 MiB of work). */
  opsPerRun: number;
  run: () => unknown;
}

function randomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let state = seed >>> 0 || 1;
  for (let index = 0; index < length; index++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out[index] = state & 0xff;
  }
  return out;
}

async function optionalImport<T>(name: string, log: (line: string) => void): Promise<T | null> {
  try {
    return (await import(name)) as T;
  } catch {
    log(`  (peer ${name} is not installed: skipped; peers are devDependencies)`);
    return null;
  }
}

async function measure(
  suite: string,
  bytes: number,
  variants: Variant[],
  options: KernelBenchOptions,
): Promise<KernelBenchRow[]> {
  // A long warm-up: V8 tiers WASM up in a background thread that a loaded 2-core machine starves,
  // and timing the baseline tier would understate the kernels by half.
  const bench = new Bench({
    time: options.timeMs ?? (options.smoke ? 5 : 400),
    warmup: true,
    warmupTime: options.smoke ? 5 : 1000,
  });
  for (const variant of variants) bench.add(variant.name, variant.run);
  await bench.run();
  const medians = new Map<string, number>();
  for (const task of bench.tasks) {
    const variant = variants.find((candidate) => candidate.name === task.name)!;
    const result = task.result as { latency?: { p50?: number } } | undefined;
    const p50 = result?.latency?.p50;
    if (p50 === undefined) throw new Error(`bench ${suite}/${task.name} produced no samples`);
    medians.set(variant.name, p50 / variant.opsPerRun);
  }
  const memcpy = variants.find((variant) => variant.kind === 'memcpy');
  const memcpyMs = memcpy === undefined ? null : medians.get(memcpy.name)!;
  const peerMs = variants
    .filter((variant) => variant.kind === 'peer')
    .map((variant) => medians.get(variant.name)!);
  const bestPeerMs = peerMs.length === 0 ? null : Math.min(...peerMs);
  return variants.map((variant) => {
    const medianMs = medians.get(variant.name)!;
    return {
      suite,
      variant: variant.name,
      bytes,
      medianMs,
      gbPerS: bytes / (medianMs * 1e6),
      vsMemcpy: memcpyMs === null ? null : medianMs / memcpyMs,
      vsBestPeer: bestPeerMs === null ? null : bestPeerMs / medianMs,
    };
  });
}

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`bench result check failed: ${what}`);
}

interface NodeRsXxhash {
  xxh64(input: Uint8Array, seed?: bigint): bigint;
  xxh3: { Xxh3: { withSeed(seed?: bigint): { update(input: Uint8Array): unknown; digest(): bigint; reset(): void } } };
}
interface HashWasm {
  createXXHash3(): Promise<{ init(): unknown; update(input: Uint8Array): unknown; digest(type: 'binary'): Uint8Array }>;
}
interface XxhashWasm {
  default: () => Promise<{ h64Raw(input: Uint8Array, seed?: bigint): bigint }>;
}

async function benchXxh3(
  wasm: Kernels,
  ts: Kernels,
  options: KernelBenchOptions,
  log: (line: string) => void,
): Promise<KernelBenchRow[]> {
  const nodeRs = await optionalImport<NodeRsXxhash>('@node-rs/xxhash', log);
  const hashWasm = await optionalImport<HashWasm>('hash-wasm', log);
  const xxhashWasm = await optionalImport<XxhashWasm>('xxhash-wasm', log);
  const hashWasmHasher = hashWasm === null ? null : await hashWasm.createXXHash3();
  const xxhashWasmApi = xxhashWasm === null ? null : await xxhashWasm.default();
  const sizes = options.smoke ? [4096] : [4096, 64 * 1024, 1024 * 1024];
  const rows: KernelBenchRow[] = [];
  for (const size of sizes) {
    const count = Math.max(1, Math.floor((1024 * 1024) / size));
    const host = Buffer.from(randomBytes(size * count, size));
    const target = Buffer.alloc(size);
    const resident = wasm.allocate(size * count);
    resident.bytes().set(host);
    const messages = Array.from({ length: count }, (_, index) => host.subarray(index * size, (index + 1) * size));
    const expected = messages.map((message) => ts.xxh3_64(message));
    const residentAt = (index: number) => resident.bytes().subarray(index * size, (index + 1) * size);
    check(expected.every((value, index) => wasm.xxh3_64(residentAt(index)) === value), 'wasm xxh3 (resident)');
    check(expected.every((value, index) => wasm.xxh3_64(messages[index]!) === value), 'wasm xxh3 (copy-in)');
    const variants: Variant[] = [
      {
        name: 'wasm (in WASM memory)',
        kind: 'ours',
        opsPerRun: count,
        run: () => {
          const memory = resident.bytes();
          for (let index = 0; index < count; index++) wasm.xxh3_64(memory.subarray(index * size, (index + 1) * size));
        },
      },
      { name: 'wasm (copy-in)', kind: 'ours', opsPerRun: count, run: () => messages.forEach((m) => wasm.xxh3_64(m)) },
      { name: 'ts', kind: 'ours', opsPerRun: count, run: () => messages.forEach((m) => ts.xxh3_64(m)) },
      { name: 'memcpy (Buffer.copy)', kind: 'memcpy', opsPerRun: count, run: () => messages.forEach((m) => m.copy(target)) },
    ];
    if (nodeRs !== null) {
      const hasher = nodeRs.xxh3.Xxh3.withSeed(0n);
      hasher.update(messages[0]!);
      check(hasher.digest() === expected[0], '@node-rs/xxhash Xxh3 agrees with our XXH3');
      variants.push({
        name: '@node-rs/xxhash Xxh3 class (native)',
        kind: 'peer',
        opsPerRun: count,
        run: () => {
          for (const message of messages) {
            hasher.reset();
            hasher.update(message);
            hasher.digest();
          }
        },
      });
      variants.push({
        name: '@node-rs/xxhash xxh64 (native, XXH64)',
        kind: 'peer',
        opsPerRun: count,
        run: () => messages.forEach((m) => nodeRs.xxh64(m)),
      });
    }
    if (hashWasmHasher !== null) {
      variants.push({
        name: 'hash-wasm createXXHash3',
        kind: 'peer',
        opsPerRun: count,
        run: () => {
          for (const message of messages) {
            hashWasmHasher.init();
            hashWasmHasher.update(message);
            hashWasmHasher.digest('binary');
          }
        },
      });
    }
    if (xxhashWasmApi !== null) {
      variants.push({
        name: 'xxhash-wasm h64Raw (XXH64)',
        kind: 'peer',
        opsPerRun: count,
        run: () => messages.forEach((m) => xxhashWasmApi.h64Raw(m)),
      });
    }
    rows.push(...(await measure(`xxh3 ${formatBytes(size)}`, size, variants, options)));
    resident.release();
  }
  return rows;
}

async function benchJournal(wasm: Kernels, ts: Kernels, options: KernelBenchOptions): Promise<KernelBenchRow[]> {
  const target = options.smoke ? 256 * 1024 : 64 * 1024 * 1024;
  const entries: { op: number; bodySize: number }[] = [];
  let total = 0;
  for (let op = 1; total < target; op++) {
    const bodySize = (op * 2_654_435_761) % 3841;
    entries.push({ op, bodySize });
    total += 256 + bodySize;
  }
  const { image } = buildImage(entries);
  const resident = wasm.allocate(image.byteLength);
  resident.bytes().set(image);
  const copy = Buffer.alloc(image.byteLength);
  const source = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  check(wasm.journalScan(resident.bytes()).entryCount === entries.length, 'wasm journal scan (resident)');
  check(ts.journalScan(image).entryCount === entries.length, 'ts journal scan');
  const rows = await measure(
    `journal scan ${formatBytes(image.byteLength)} (${entries.length} entries)`,
    image.byteLength,
    [
      { name: 'wasm (in WASM memory)', kind: 'ours', opsPerRun: 1, run: () => wasm.journalScan(resident.bytes()) },
      { name: 'wasm (copy-in)', kind: 'ours', opsPerRun: 1, run: () => wasm.journalScan(image) },
      { name: 'ts', kind: 'ours', opsPerRun: 1, run: () => ts.journalScan(image) },
      { name: 'memcpy (Buffer.copy)', kind: 'memcpy', opsPerRun: 1, run: () => source.copy(copy) },
    ],
    options,
  );
  resident.release();
  return rows;
}

async function benchChunks(wasm: Kernels, ts: Kernels, options: KernelBenchOptions): Promise<KernelBenchRow[]> {
  const size = options.smoke ? 1024 * 1024 : 64 * 1024 * 1024;
  const artifact = randomBytes(size, 7);
  const resident = wasm.allocate(size);
  resident.bytes().set(artifact);
  const copy = Buffer.alloc(size);
  const source = Buffer.from(artifact.buffer, artifact.byteOffset, size);
  const rows: KernelBenchRow[] = [];
  for (const chunkSize of [256 * 1024, 64 * 1024]) {
    const expected = ts.chunkManifest(artifact, chunkSize);
    const actual = wasm.chunkManifest(resident.bytes(), chunkSize);
    check(actual.checksum === expected.checksum, 'wasm chunk manifest whole checksum');
    check(actual.chunkChecksums.every((value, index) => value === expected.chunkChecksums[index]), 'chunks');
    rows.push(
      ...(await measure(
        `chunk manifest ${formatBytes(size)} / ${formatBytes(chunkSize)} chunks`,
        size,
        [
          { name: 'wasm (in WASM memory)', kind: 'ours', opsPerRun: 1, run: () => wasm.chunkManifest(resident.bytes(), chunkSize) },
          { name: 'wasm (copy-in)', kind: 'ours', opsPerRun: 1, run: () => wasm.chunkManifest(artifact, chunkSize) },
          { name: 'ts', kind: 'ours', opsPerRun: 1, run: () => ts.chunkManifest(artifact, chunkSize) },
          { name: 'memcpy (Buffer.copy)', kind: 'memcpy', opsPerRun: 1, run: () => source.copy(copy) },
        ],
        options,
      )),
    );
  }
  resident.release();
  return rows;
}

/** A producer's batch of `count` messages of `payloadSize` random bytes, sealed by `ts`. */
function messageBatch(ts: Kernels, count: number, payloadSize: number): Uint8Array {
  const frameSize = MESSAGE_HEADER_SIZE + payloadSize;
  const batch = new Uint8Array(BATCH_HEADER_SIZE + count * frameSize);
  batch.set(randomBytes(count * frameSize, 11), BATCH_HEADER_SIZE);
  const data = new DataView(batch.buffer);
  for (let index = 0; index < count; index++) {
    const at = BATCH_HEADER_SIZE + index * frameSize;
    data.setUint32(at + 24, index, true);
    data.setUint32(at + 28, index, true);
    data.setUint32(at + 32, 0, true);
    data.setUint32(at + 36, payloadSize, true);
    data.setBigUint64(at + 40, 0n, true);
    data.setBigUint64(at, ts.xxh3_64(batch.subarray(at + 8, at + frameSize)), true);
  }
  const header = {
    partitionId: 1,
    baseOffset: 1_000_000,
    baseTimestampUs: 1_700_000_000_000_000,
    originTimestampUs: 1_700_000_000_000_000,
    batchLength: batch.byteLength,
    batchChecksum: 0n,
    messageCount: count,
  };
  writeBatchHeader(batch, 0, header);
  setBatchChecksum(batch, ts.messageBatchChecksum(batch));
  return batch;
}

/**
 * Message batches (1000 x 1 KiB payloads): verify (walk + every frame hashed + batch checksum),
 * checksum (walk + batch checksum only, what a stamp costs) and a poll's slice of half the batch,
 * WASM SIMD and scalar builds against the TS kernels.
 */
async function benchMessageBatch(
  wasm: Kernels,
  scalar: Kernels,
  ts: Kernels,
  options: KernelBenchOptions,
): Promise<KernelBenchRow[]> {
  const count = options.smoke ? 50 : 1000;
  const batch = messageBatch(ts, count, 1024);
  const expected = ts.messageBatchVerify(batch);
  if (expected.status !== 'valid' || expected.messageCount !== count) throw new Error('bench batch does not verify');
  const resident = wasm.allocate(batch.byteLength);
  resident.bytes().set(batch);
  const residentScalar = scalar.allocate(batch.byteLength);
  residentScalar.bytes().set(batch);
  for (const [name, kernels, input] of [
    ['simd resident', wasm, () => resident.bytes()],
    ['simd copy-in', wasm, () => batch],
    ['scalar resident', scalar, () => residentScalar.bytes()],
  ] as const) {
    const verify = kernels.messageBatchVerify(input());
    check(verify.status === 'valid' && verify.checksum === expected.checksum && verify.messageCount === count, `wasm ${name} verify`);
    check(kernels.messageBatchChecksum(input()) === expected.checksum, `wasm ${name} checksum`);
    const slice = kernels.messageBatchSlice(input(), count / 2, count);
    check(Buffer.compare(slice, ts.messageBatchSlice(batch, count / 2, count)) === 0, `wasm ${name} slice`);
  }
  const copy = Buffer.alloc(batch.byteLength);
  const source = Buffer.from(batch.buffer, batch.byteOffset, batch.byteLength);
  const memcpy: Variant = { name: 'memcpy (Buffer.copy)', kind: 'memcpy', opsPerRun: 1, run: () => source.copy(copy) };
  const label = `${count} x 1 KiB (${formatBytes(batch.byteLength)})`;
  const rows: KernelBenchRow[] = [];
  const kernels: [string, (kernels: Kernels, input: Uint8Array) => unknown][] = [
    ['verify', (k, input) => k.messageBatchVerify(input)],
    ['checksum', (k, input) => k.messageBatchChecksum(input)],
    ['slice (second half)', (k, input) => k.messageBatchSlice(input, count / 2, count)],
  ];
  for (const [suite, call] of kernels) {
    rows.push(
      ...(await measure(
        `message batch ${suite} ${label}`,
        batch.byteLength,
        [
          { name: 'wasm simd (in WASM memory)', kind: 'ours', opsPerRun: 1, run: () => call(wasm, resident.bytes()) },
          { name: 'wasm simd (copy-in)', kind: 'ours', opsPerRun: 1, run: () => call(wasm, batch) },
          { name: 'wasm scalar (in WASM memory)', kind: 'ours', opsPerRun: 1, run: () => call(scalar, residentScalar.bytes()) },
          { name: 'ts', kind: 'ours', opsPerRun: 1, run: () => call(ts, batch) },
          memcpy,
        ],
        options,
      )),
    );
  }
  resident.release();
  residentScalar.release();
  return rows;
}

interface Msgpackr {
  Packr: new (options: { useRecords: boolean }) => { pack(value: unknown): Uint8Array };
}
interface MsgpackMsgpack {
  encode(value: unknown, options?: { useBigInt64?: boolean }): Uint8Array;
}

async function benchSnapshot(
  wasm: Kernels,
  ts: Kernels,
  options: KernelBenchOptions,
  log: (line: string) => void,
): Promise<KernelBenchRow[]> {
  const snapshot = options.smoke
    ? referenceSnapshot({ streams: 10, topicsPerStream: 2, partitionsPerTopic: 2, users: 10, clients: 20 })
    : referenceSnapshot();
  const encoded = ts.snapshotEncode(snapshot);
  const fromWasm = wasm.snapshotEncode(snapshot);
  check(encoded.byteLength === fromWasm.byteLength && Buffer.compare(encoded, fromWasm) === 0, 'wasm == ts bytes');
  const variants: Variant[] = [
    { name: 'wasm (marshal + encode + copy out)', kind: 'ours', opsPerRun: 1, run: () => wasm.snapshotEncode(snapshot) },
    { name: 'ts (schema-specialised)', kind: 'ours', opsPerRun: 1, run: () => ts.snapshotEncode(snapshot) },
  ];
  // Generic encoders cannot write u128 (client ids, checksums) as integers: give them the same
  // 16-byte big-endian bins our encoder writes, so every variant encodes the same information.
  const plain = withU128AsBytes(snapshot);
  const msgpackr = await optionalImport<Msgpackr>('msgpackr', log);
  if (msgpackr !== null) {
    const packr = new msgpackr.Packr({ useRecords: false });
    variants.push({ name: 'msgpackr pack (objects as maps)', kind: 'peer', opsPerRun: 1, run: () => packr.pack(plain) });
  }
  const msgpack = await optionalImport<MsgpackMsgpack>('@msgpack/msgpack', log);
  if (msgpack !== null) {
    variants.push({
      name: '@msgpack/msgpack encode (useBigInt64)',
      kind: 'peer',
      opsPerRun: 1,
      run: () => msgpack.encode(plain, { useBigInt64: true }),
    });
  }
  const replacer = (_key: string, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value instanceof Uint8Array ? Buffer.from(value).toString('base64') : value;
  variants.push({ name: 'JSON.stringify (+ bigint/bytes replacer)', kind: 'context', opsPerRun: 1, run: () => JSON.stringify(snapshot, replacer) });
  return measure(`snapshot encode (${formatBytes(encoded.byteLength)} canonical msgpack)`, encoded.byteLength, variants, options);
}

/** The snapshot as plain objects with every u128 (above 2^64) replaced by 16 big-endian bytes. */
function withU128AsBytes(value: unknown): unknown {
  if (typeof value === 'bigint') {
    if (value < 1n << 64n) return value;
    const bytes = new Uint8Array(16);
    let rest = value;
    for (let index = 15; index >= 0; index--) {
      bytes[index] = Number(rest & 0xffn);
      rest >>= 8n;
    }
    return bytes;
  }
  if (Array.isArray(value)) return value.map(withU128AsBytes);
  if (value instanceof Uint8Array || value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) out[key] = withU128AsBytes(field);
  return out;
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${+(bytes / (1024 * 1024)).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${+(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

export async function runKernelBench(options: KernelBenchOptions): Promise<KernelBenchReport> {
  const log = options.log ?? (() => {});
  const wasm = createWasmKernels(new WasmInstance('simd'));
  const ts = createTsKernels();
  const rows: KernelBenchRow[] = [];
  log('xxh3 ...');
  rows.push(...(await benchXxh3(wasm, ts, options, log)));
  log('journal scan ...');
  rows.push(...(await benchJournal(wasm, ts, options)));
  log('chunk manifest ...');
  rows.push(...(await benchChunks(wasm, ts, options)));
  log('message batch ...');
  const scalar = createWasmKernels(new WasmInstance('scalar'));
  rows.push(...(await benchMessageBatch(wasm, scalar, ts, options)));
  log('snapshot encode ...');
  rows.push(...(await benchSnapshot(wasm, ts, options, log)));
  return { node: process.version, cpu: cpus()[0]?.model ?? 'unknown', smoke: options.smoke, rows };
}

function ratio(value: number | null): string {
  return value === null ? '' : `${value.toFixed(2)}x`;
}

/** A Markdown table per suite, as the README shows them. */
export function formatKernelReport(report: KernelBenchReport): string {
  const lines = [
    `node ${report.node}, ${report.cpu}, kernels: wasm (SIMD build) and ts${report.smoke ? ' (SMOKE: tiny inputs, numbers meaningless)' : ''}`,
  ];
  const suites = [...new Set(report.rows.map((row) => row.suite))];
  for (const suite of suites) {
    lines.push('', `### ${suite}`, '', '| variant | median | GB/s | time vs memcpy | speed vs best peer |', '|---|---:|---:|---:|---:|');
    for (const row of report.rows.filter((candidate) => candidate.suite === suite)) {
      const median = row.medianMs >= 1 ? `${row.medianMs.toFixed(2)} ms` : `${(row.medianMs * 1000).toFixed(2)} µs`;
      lines.push(`| ${row.variant} | ${median} | ${row.gbPerS.toFixed(2)} | ${ratio(row.vsMemcpy)} | ${ratio(row.vsBestPeer)} |`);
    }
  }
  return lines.join('\n');
}

/**
 * Where a replica's time went: reads a V8 `.cpuprofile` (node --cpu-prof, e.g. from a bench run
 * with VRMETA_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR") and splits its sampled busy time
 * into the categories the README's benchmark analysis uses. A sample is charged to the first of
 * these that holds: GC, idle, a socket write or fsync system call, else the nearest vrmeta source
 * directory on its stack (src/vsr, src/metadata, src/storage, src/transport, src/http, src/node),
 * else the npm package on its stack, else node's internals.
 *
 *   node dist/bench/profile-summary.js FILE.cpuprofile [--skip-ms N]
 *
 * `--skip-ms` drops the first N ms (process start and warm-up).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const SOURCE_DIRECTORIES: readonly [string, string][] = [
  ['/src/vsr/', 'VSR core'],
  ['/src/metadata/', 'state machine'],
  ['/src/storage/', 'storage'],
  ['/src/transport/', 'replica transport'],
  ['/src/http/', 'HTTP layer (vrmeta)'],
  ['/src/node/', 'node glue (vrmeta)'],
];
const SOCKET_WRITES = new Set(['writeBuffer', 'writev', 'writeUtf8String', 'writeLatin1String', 'writeString']);

export interface ProfileSummary {
  readonly totalMs: number;
  readonly busyMs: number;
  /** Category -> sampled ms, busy categories only, largest first. */
  readonly categories: readonly { readonly name: string; readonly ms: number; readonly shareOfBusy: number }[];
}

export function summarizeProfile(profile: CpuProfile, skipMs = 0): ProfileSummary {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const categoryOf = (id: number): string => {
    const frame = nodes.get(id)!.callFrame;
    if (frame.functionName === '(idle)') return 'idle';
    if (frame.functionName === '(garbage collector)') return 'GC';
    if (frame.url === '' && SOCKET_WRITES.has(frame.functionName)) return 'socket write syscalls';
    if (frame.functionName === 'fsync' || frame.functionName === 'fsyncSync') return 'fsync';
    for (let current: number | undefined = id; current !== undefined; current = parents.get(current)) {
      const url = nodes.get(current)!.callFrame.url;
      for (const [directory, name] of SOURCE_DIRECTORIES) if (url.includes(directory)) return name;
      if (url.includes('node_modules/')) return 'npm packages (fastify, pino, ...)';
    }
    return "node internals (streams, HTTP parser, timers)";
  };
  const byCategory = new Map<string, number>();
  let elapsedUs = 0;
  let totalUs = 0;
  profile.samples.forEach((id, index) => {
    const deltaUs = profile.timeDeltas[index] ?? 0;
    elapsedUs += deltaUs;
    if (elapsedUs <= skipMs * 1000) return;
    totalUs += deltaUs;
    const category = categoryOf(id);
    byCategory.set(category, (byCategory.get(category) ?? 0) + deltaUs);
  });
  const busyUs = totalUs - (byCategory.get('idle') ?? 0);
  const categories = [...byCategory]
    .filter(([name]) => name !== 'idle')
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => ({ name, ms: us / 1000, shareOfBusy: busyUs > 0 ? us / busyUs : 0 }));
  return { totalMs: totalUs / 1000, busyMs: busyUs / 1000, categories };
}

export function formatProfileSummary(summary: ProfileSummary): string {
  const lines = [`sampled ${summary.totalMs.toFixed(0)} ms, busy ${summary.busyMs.toFixed(0)} ms`, '', '| where | ms | share of busy |', '|---|---:|---:|'];
  for (const { name, ms, shareOfBusy } of summary.categories) lines.push(`| ${name} | ${ms.toFixed(0)} | ${(shareOfBusy * 100).toFixed(1)}% |`);
  return lines.join('\n');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, ...rest] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write('usage: node dist/bench/profile-summary.js FILE.cpuprofile [--skip-ms N]\n');
    process.exit(2);
  }
  const skipAt = rest.indexOf('--skip-ms');
  const skipMs = skipAt >= 0 ? Number(rest[skipAt + 1]) : 0;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  process.stdout.write(`${formatProfileSummary(summarizeProfile(profile, skipMs))}\n`);
}

/**
 * `vrmeta bench`: the benchmark commands, their own entry so that the main CLI does not depend on
 * them. `src/node/cli.ts` registers them when this file exists next to it in the build
 * (`dist/bench/cli.js`) and otherwise answers `vrmeta bench` with a message saying where the
 * benchmarks live. Each command imports its bench when it runs; the etcd comparisons need the
 * devDependency `etcd3` (and an etcd binary), which an installed package does not carry: they say
 * so instead of failing with a module-resolution stack.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { BenchEntry } from '../src/node/cli.js';

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed) || parsed < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return parsed;
}

/** A bench whose module (or one of its dev-only imports) is not installed: one line, exit 2. */
async function importBench<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'ERR_MODULE_NOT_FOUND') throw error;
    const missing = /Cannot find (?:package|module) '([^']+)'/.exec((error as Error).message)?.[1] ?? 'a module';
    throw new BenchUnavailable(
      `vrmeta bench ${name}: ${missing} is not installed (benchmark peers are devDependencies); run it from a source checkout after npm ci`,
    );
  }
}

/** `values` without its undefined entries: optional flags a command line left out stay absent. */
function definedOnly<T extends Record<string, unknown>>(values: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) if (value !== undefined) out[key] = value;
  return out as { [K in keyof T]?: Exclude<T[K], undefined> };
}

/** Printed as one line with exit status 2 by the main CLI. */
export class BenchUnavailable extends Error {
  override readonly name = 'BenchUnavailable';
}

/** Adds the bench sub-commands to `bench` (the main CLI's `vrmeta bench` command). */
export function registerBenchCommands(bench: Command): void {

  bench
    .command('kernels')
    .description('XXH3, journal scan, chunk manifest, message batch and snapshot encode: wasm vs ts vs npm peers vs memcpy')
    .option('--json', 'print the report as JSON')
    .option('--smoke', 'tiny inputs (keeps the bench running in the test suite; numbers meaningless)')
    .option('--time-ms <ms>', 'sampling time per variant', positiveInteger)
    .action(async (options: { json?: boolean; smoke?: boolean; timeMs?: number }) => {
      const { formatKernelReport, runKernelBench } = await importBench(() => import('./kernels.js'), 'kernels');
      const report = await runKernelBench({
        smoke: options.smoke === true,
        ...definedOnly({ timeMs: options.timeMs }),
        log: options.json === true ? () => {} : (line) => process.stderr.write(`${line}\n`),
      });
      if (options.json === true) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else process.stdout.write(`${formatKernelReport(report)}\n`);
    });

  /** `--kernels wasm|ts|both` of the cluster benches -> the modes to run, in order. */
  function benchKernels(value: string): ('wasm' | 'ts')[] {
    if (value === 'both') return ['wasm', 'ts'];
    if (value === 'wasm' || value === 'ts') return [value];
    throw new InvalidArgumentError('expected wasm, ts or both');
  }

  /** `--protocol http|binary|both` of `bench cluster`. */
  function benchProtocols(value: string): ('http' | 'binary')[] {
    if (value === 'both') return ['http', 'binary'];
    if (value === 'http' || value === 'binary') return [value];
    throw new InvalidArgumentError('expected http, binary or both');
  }

  function positiveNumber(value: string): number {
    const parsed = Number(value);
    if (!Number.isFinite(parsed) || parsed <= 0) throw new InvalidArgumentError('expected a positive number');
    return parsed;
  }

  function scaleFraction(value: string): number {
    const parsed = Number(value);
    if (!Number.isFinite(parsed) || parsed <= 0 || parsed > 1) throw new InvalidArgumentError('expected a fraction in (0, 1], e.g. 0.1 or 1');
    return parsed;
  }

  function clientsList(value: string): number[] {
    const levels = value.split(',').map((part) => Number(part.trim()));
    if (levels.some((level) => !Number.isSafeInteger(level) || level <= 0)) throw new InvalidArgumentError('expected client counts, e.g. 1,8,64');
    return levels;
  }

  function sizeList(value: string): number[] {
    const sizes = value.split(',').map((part) => Number(part.trim()));
    if (sizes.length === 0 || sizes.some((size) => !Number.isFinite(size) || size <= 0)) throw new InvalidArgumentError('expected MiB sizes, e.g. 16,64');
    return sizes;
  }

  /** The flags both etcd comparisons take: --json, --smoke, --kernels. */
  function etcdBench(name: string, description: string, smoke: string): Command {
    return bench
      .command(name)
      .description(description)
      .option('--json', 'print the report as JSON')
      .option('--smoke', `${smoke} without etcd (keeps the bench running in the test suite; numbers meaningless)`)
      .addOption(new Option('--kernels <mode>', 'wasm | ts | both').argParser(benchKernels).default(['wasm', 'ts'], 'both'));
  }

  /** Progress to stderr; the report, a table or JSON, to stdout. */
  const benchLog = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };

  function printReport<R>(report: R, json: boolean | undefined, format: (report: R) => string): void {
    process.stdout.write(json === true ? `${JSON.stringify(report, null, 2)}\n` : `${format(report)}\n`);
  }

  /**
   * Loads bench `name`, arms procs' signal cleanup (a SIGINT takes every child and data directory
   * with the CLI), runs it and prints its report.
   */
  async function runChildBench<M, R>(name: string, load: () => Promise<M>, json: boolean | undefined, run: (bench: M) => Promise<R>, format: (bench: M) => (report: R) => string): Promise<void> {
    const bench = await importBench(load, name);
    (await import('./procs.js')).installSignalCleanup();
    printReport(await run(bench), json, format(bench));
  }

  interface EtcdBenchFlags {
    readonly json?: boolean;
    readonly smoke?: boolean;
    readonly kernels: ('wasm' | 'ts')[];
  }

  etcdBench('cluster', 'write throughput and latency: a 3-replica vrmeta cluster vs a 3-member etcd cluster on 127.0.0.1', 'tiny run')
    .option('--duration <s>', 'measured seconds per concurrency level', positiveNumber)
    .option('--clients <list>', 'concurrency levels, comma-separated (default 1,8,64 over HTTP, 1,8,64,256 binary)', clientsList)
    .addOption(new Option('--protocol <p>', 'http (REST vs etcd JSON gateway) | binary (Iggy TCP vs etcd gRPC) | both').argParser(benchProtocols).default(['http', 'binary'], 'both'))
    .option('--journal-slots <n>', "vrmeta's journal_slots (default 1024; checkpoints every n - 64 ops)", positiveInteger)
    .option('--shared-login', 'HTTP: every vrmeta client writes with one login (its pool of VSR sessions) instead of one login each')
    .option('--sessions-per-credential <list>', "vrmeta's http_sessions_per_credential, comma-separated: one vrmeta cluster per value, measured in the same rounds (e.g. 1,16)", clientsList)
    .action(
      async (
        options: EtcdBenchFlags & {
          duration?: number;
          clients?: number[];
          journalSlots?: number;
          protocol: ('http' | 'binary')[];
          sharedLogin?: boolean;
          sessionsPerCredential?: number[];
        },
      ) => {
        await runChildBench('cluster', () => import('./cluster.js'), options.json, (bench) => bench.runClusterBench({
          smoke: options.smoke === true,
          kernels: options.kernels,
          ...definedOnly({
            durationS: options.duration,
            levels: options.clients,
            journalSlots: options.journalSlots,
            sessionsPerCredential: options.sessionsPerCredential,
          }),
          sharedLogin: options.sharedLogin === true,
          protocols: options.protocol,
          log: benchLog,
        }), (bench) => bench.formatClusterReport);
      },
    );

  etcdBench('transfer', 'state-transfer catch-up of a wiped replica (vs an etcd member rejoining) and restart recovery', 'tiny snapshot')
    .option('--sizes <mib>', 'snapshot sizes in MiB, comma-separated (shape partitions)', sizeList)
    .addOption(
      new Option('--shape <shape>', 'partitions (the cheapest bytes, grown to each size) | realistic (streams of 100 topics x 10 partitions, users with permissions and a token)')
        .choices(['partitions', 'realistic'])
        .default('partitions'),
    )
    .option('--scale <f>', 'realistic shape size, in (0, 1]: 1 = 100,000 topics and 10,000 users (default 0.1)', scaleFraction)
    .option('--no-etcd', 'vrmeta only (e.g. for the growth curve)')
    .option('--svg <file>', 'also write the growth curve (restart, catch-up, RSS against snapshot size) as an SVG')
    .action(async (options: EtcdBenchFlags & { sizes?: number[]; shape: 'partitions' | 'realistic'; scale?: number; etcd: boolean; svg?: string }) => {
      const conflict =
        options.scale !== undefined && options.shape !== 'realistic'
          ? '--scale applies to --shape realistic only'
          : options.sizes !== undefined && options.shape === 'realistic'
            ? '--sizes applies to --shape partitions only (the realistic shape sets its own size)'
            : null;
      if (conflict !== null) {
        process.stderr.write(`vrmeta bench transfer: ${conflict}\n`);
        process.exitCode = 2;
        return;
      }
      await runChildBench('transfer', () => import('./transfer.js'), options.json, async (bench) => {
        const report = await bench.runTransferBench({
          smoke: options.smoke === true,
          kernels: options.kernels,
          shape: options.shape,
          // Only an explicit --no-etcd: the default (etcd in full mode, never in smoke) stays the bench's.
          ...definedOnly({ sizesMiB: options.sizes, realisticScale: options.scale, etcd: options.etcd ? undefined : false }),
          log: benchLog,
        });
        if (options.svg !== undefined) {
          const { mkdirSync, writeFileSync } = await import('node:fs');
          const { dirname } = await import('node:path');
          mkdirSync(dirname(resolve(options.svg)), { recursive: true });
          writeFileSync(options.svg, bench.transferReportSvg(report));
          benchLog(`[bench] growth curve written to ${options.svg}`);
        }
        return report;
      }, (bench) => bench.formatTransferReport);
    });

  bench
    .command('targets')
    .description("the scale targets in one table: bench transfer at 64 MiB, bench cluster over HTTP (a login each, then one shared), with etcd")
    .option('--json', 'print the report as JSON')
    .option('--smoke', 'tiny run (numbers meaningless)')
    .option('--duration <s>', 'measured seconds per concurrency level in the cluster benches (default 6)', positiveNumber)
    .action(async (options: { json?: boolean; smoke?: boolean; duration?: number }) => {
      await runChildBench('targets', () => import('./targets.js'), options.json, (bench) => bench.runTargetsBench({
        smoke: options.smoke === true,
        ...definedOnly({ durationS: options.duration }),
        log: benchLog,
      }), (bench) => bench.formatTargetsReport);
    });

  bench
    .command('login-flood')
    .description('write p50/p99 of a 3-replica cluster, quiet and under a flood of bogus logins, with the password gate and without it')
    .option('--json', 'print the report as JSON')
    .option('--smoke', 'tiny run (keeps the bench running in the test suite; numbers meaningless)')
    .option('--duration <s>', 'measured seconds per phase (default 10)', positiveNumber)
    .option('--rate <n>', 'bogus logins per second during the flood (default 200)', positiveNumber)
    .option('--writers <n>', 'closed-loop writers (default 4)', positiveInteger)
    .addOption(new Option('--kernels <mode>', 'wasm | ts').choices(['wasm', 'ts']).default('wasm'))
    .action(async (options: { json?: boolean; smoke?: boolean; duration?: number; rate?: number; writers?: number; kernels: 'wasm' | 'ts' }) => {
      await runChildBench('login-flood', () => import('./login-flood.js'), options.json, (bench) => bench.runLoginFloodBench({
        smoke: options.smoke === true,
        kernels: options.kernels,
        ...definedOnly({ durationS: options.duration, rate: options.rate, writers: options.writers }),
        log: benchLog,
      }), (bench) => bench.formatLoginFloodReport);
    });

  bench
    .command('messages')
    .description('produce and consume rates and p50/p99 of 1 KiB messages: a 3-replica vrmeta cluster vs a 3-server NATS JetStream cluster')
    .option('--json', 'print the report as JSON')
    .option('--smoke', 'tiny run without JetStream (keeps the bench running in the test suite; numbers meaningless)')
    .option('--duration <s>', 'seconds each level produces (default 3)', positiveNumber)
    .option('--batches <list>', 'messages per send and per poll, comma-separated (default 1,100,1000)', clientsList)
    .option('--producers <list>', 'producers (and consumers), comma-separated (default 1,8,64)', clientsList)
    .option('--no-nats', 'vrmeta alone')
    .addOption(new Option('--kernels <mode>', 'wasm | ts | both').argParser(benchKernels).default(['wasm'], 'wasm'))
    .action(async (options: { json?: boolean; smoke?: boolean; duration?: number; batches?: number[]; producers?: number[]; nats: boolean; kernels: ('wasm' | 'ts')[] }) => {
      const smoke = options.smoke === true;
      await runChildBench('messages', () => import('./messages.js'), options.json, (bench) => bench.runMessagesBench({
        kernels: options.kernels,
        batches: options.batches ?? (smoke ? [1, 3] : [...bench.MESSAGE_BATCHES]),
        producers: options.producers ?? (smoke ? [1, 2] : [...bench.MESSAGE_PRODUCERS]),
        durationMs: (options.duration ?? (smoke ? 0.3 : 3)) * 1000,
        nats: options.nats && !smoke,
        log: benchLog,
      }), (bench) => bench.formatMessagesReport);
    });

  bench
    .command('failover')
    .description('write unavailability when the primary is killed (SIGKILL) or frozen (SIGSTOP): a 3-replica vrmeta cluster vs a 3-member etcd')
    .option('--json', 'print the report as JSON')
    .option('--rounds <n>', 'rounds per signal and protocol (default 10)', positiveInteger)
    .addOption(new Option('--protocol <p>', 'http | binary | both').argParser(benchProtocols).default(['http', 'binary'], 'both'))
    .addOption(new Option('--signal <s>', 'kill | stop | both').choices(['kill', 'stop', 'both']).default('both'))
    .option('--no-etcd', 'vrmeta alone')
    .action(async (options: { json?: boolean; rounds?: number; protocol: ('http' | 'binary')[]; signal: 'kill' | 'stop' | 'both'; etcd: boolean }) => {
      const signals = options.signal === 'both' ? (['SIGKILL', 'SIGSTOP'] as const) : options.signal === 'kill' ? (['SIGKILL'] as const) : (['SIGSTOP'] as const);
      await runChildBench('failover', () => import('./failover.js'), options.json, (bench) => bench.runFailoverBench({
        rounds: options.rounds ?? 10,
        signals,
        protocols: options.protocol,
        etcd: options.etcd,
        log: benchLog,
      }), (bench) => bench.formatFailoverReport);
    });

  bench
    .command('soak')
    .description('false failovers: view changes of a 3-replica cluster under load, with a large snapshot checkpointed and a backup rejoining by state transfer')
    .option('--json', 'print the report as JSON')
    .option('--minutes <n>', 'soak length (default 10)', positiveNumber)
    .option('--clients <n>', 'binary clients in closed loops (default 64)', positiveInteger)
    .option('--state-mib <n>', 'snapshot size the state is grown to first (default 64)', positiveInteger)
    .option('--transfer-every <s>', 'seconds between backup wipes (default 120)', positiveNumber)
    .action(async (options: { json?: boolean; minutes?: number; clients?: number; stateMib?: number; transferEvery?: number }) => {
      await runChildBench('soak', () => import('./soak.js'), options.json, (bench) => bench.runSoakBench({
        minutes: options.minutes ?? 10,
        clients: options.clients ?? 64,
        stateMiB: options.stateMib ?? 64,
        transferEveryS: options.transferEvery ?? 120,
        log: benchLog,
      }), (bench) => bench.formatSoakReport);
    });

  bench
    .command('restart')
    .description('whole-cluster restart of vrmeta dev (3 replicas): spawn to every /readyz 200, split into boot and election')
    .option('--json', 'print the report as JSON')
    .option('--rounds <n>', 'restarts to time (default 5)', positiveInteger)
    .option('--streams <n>', 'streams written before the first restart (default 50)', positiveInteger)
    .option('--baseline-cli <path>', "another CLI entry (another build's dist/bundle/cli.js, or dist/src/node/cli.js unbundled), restarted alternately with this one in every round (before/after in one run)")
    .action(async (options: { json?: boolean; rounds?: number; streams?: number; baselineCli?: string }) => {
      if (options.baselineCli !== undefined && !existsSync(options.baselineCli)) {
        process.stderr.write(`vrmeta bench restart: --baseline-cli ${options.baselineCli} does not exist (build that checkout first: npm run build)\n`);
        process.exitCode = 2;
        return;
      }
      const baselineCli = options.baselineCli === undefined ? undefined : resolve(options.baselineCli);
      await runChildBench('restart', () => import('./restart.js'), options.json, (bench) => bench.runRestartBench({
        ...definedOnly({ rounds: options.rounds, streams: options.streams, baselineCli }),
        log: benchLog,
      }), (bench) => bench.formatRestartReport);
    });
}

// The shape src/node/cli.ts loads this entry as (it may not import bench/, so bench checks itself).
void ({ registerBenchCommands } satisfies BenchEntry);

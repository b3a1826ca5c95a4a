#!/usr/bin/env node
/**
 * The `vrmeta` command line (DESIGN.md §2.2): start, dev, inspect, simulate, bench.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { loadKernels, parseKernelsMode } from '../kernels/index.js';
import type { ConfigKey } from './config.js';

// Each command imports what it runs when it runs: `vrmeta start` must not pay, at every boot,
// for loading the simulator, the inspector or the benchmark peers.

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed) || parsed < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return parsed;
}

const program = new Command();
program.name('vrmeta').description('Replicated metadata server (Viewstamped Replication)').showHelpAfterError();

/** Flags of `start` -> config keys (each also a TOML key and a VRMETA_* variable). */
const START_FLAGS: readonly [flag: string, key: ConfigKey, description: string][] = [
  ['--replica-id <n>', 'replica_id', 'this replica index in --replicas'],
  ['--replicas <list>', 'replicas', "comma-separated host:port of every replica's replication listener, in replica order"],
  ['--http <host:port>', 'http', 'HTTP listener'],
  ['--http-peers <list>', 'http_peers', 'comma-separated HTTP host:port of every replica (write forwarding)'],
  ['--data-dir <path>', 'data_dir', 'data directory'],
  ['--cluster-name <name>', 'cluster_name', 'cluster name (hashed into every header; cannot change later)'],
  ['--journal-slots <n>', 'journal_slots', 'WAL capacity in prepares between checkpoints'],
  ['--clients-table-max <n>', 'clients_table_max', 'client session table capacity'],
  ['--prepare-queue-depth <n>', 'prepare_queue_depth', 'pipeline depth'],
  ['--kernels <mode>', 'kernels', 'auto | wasm | ts'],
  ['--cluster-secret <secret>', 'cluster_secret', 'pre-shared secret (>= 32 chars) every key derives from; prefer --cluster-secret-file (a command line is visible to other users)'],
  ['--cluster-secret-file <path>', 'cluster_secret_file', 'file holding the cluster secret (mode 0600; refused when group or others can read it)'],
  ['--tls-cert <path>', 'tls_cert', "PEM certificate of this replica: HTTPS on the HTTP listener (with --tls-key)"],
  ['--tls-key <path>', 'tls_key', 'PEM private key of --tls-cert (not readable by others)'],
  ['--tls-ca <path>', 'tls_ca', 'PEM CA bundle: mutual TLS on the replica port, peers must present a certificate it issued'],
  ['--log-level <level>', 'log_level', 'fatal | error | warn | info | debug | trace | silent'],
  ['--tcp <host:port>', 'tcp', 'Iggy binary client listener (default 127.0.0.1:8090)'],
  ['--tcp-peers <list>', 'tcp_peers', 'comma-separated binary client host:port of every replica (leader following)'],
  ['--tcp-connections-max <n>', 'tcp_connections_max', 'client connections held at once (default 10000)'],
  ['--tcp-tls-cert <file>', 'tcp_tls_cert', 'PEM certificate: TLS on the client port (with --tcp-tls-key)'],
  ['--tcp-tls-key <file>', 'tcp_tls_key', 'PEM private key of --tcp-tls-cert'],
];

const start = program.command('start').description('run one replica in the foreground (pino JSON logs on stdout)');
start.option('--config <file>', 'TOML configuration file');
for (const [flag, , description] of START_FLAGS) start.option(flag, description);
start.option('--rejoin', 'this replica lost its disk: rejoin with an empty data directory by state transfer');
start.option('--metrics-public', 'serve GET /metrics without a bearer token (default: any valid token is required, as in Iggy)');
start.option('--insecure', 'run without a cluster secret: a throwaway single replica only (keys random per process start)');
start.action(async (options: Record<string, string | undefined>) => {
  const { start: run } = await import('./main.js');
  const flags: Partial<Record<ConfigKey, unknown>> = {};
  for (const [flag, key] of START_FLAGS) {
    const name = flag.slice(2, flag.indexOf(' ')).replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    if (options[name] !== undefined) flags[key] = options[name];
  }
  if (options['rejoin'] !== undefined) flags.rejoin = true;
  if (options['insecure'] !== undefined) flags.insecure = true;
  if (options['metricsPublic'] !== undefined) flags.metrics_public = true;
  process.exitCode = await run({ ...(options['config'] === undefined ? {} : { configFile: options['config'] }), flags });
});

program
  .command('dev')
  .description('a local cluster of child processes on 127.0.0.1 (what npm start runs)')
  .option('--replicas <n>', 'replica count', positiveInteger, 3)
  .option('--data-dir <path>', 'data directory (one sub-directory per replica)', './data')
  .option('--http-port <port>', 'first HTTP port', positiveInteger, 3000)
  .option('--replica-port <port>', 'first replication port', positiveInteger, 9090)
  .option('--tcp-port <port>', 'first binary client (Iggy TCP) port', positiveInteger, 8090)
  .addOption(new Option('--kernels <mode>', 'auto | wasm | ts').default('auto'))
  .option('--log-level <level>', 'replica log level', 'info')
  .action(async (options: { replicas: number; dataDir: string; httpPort: number; replicaPort: number; tcpPort: number; kernels: string; logLevel: string }) => {
    const { dev } = await import('./dev.js');
    process.exitCode = await dev(options);
  });

program
  .command('inspect')
  .description('verify and print a data file; exit 1 on corruption')
  .argument('<kind>', 'snapshot | wal | superblock')
  .argument('<path>', 'the file or the data directory')
  .option('--json', 'print JSON')
  .action(async (kind: string, path: string, options: { json?: boolean }) => {
    const { runInspect } = await import('../storage/inspect.js');
    const result = runInspect(kind, path, { json: options.json === true, kernels: loadKernels() });
    process.stdout.write(`${result.output}\n`);
    process.exitCode = result.exitCode;
  });

program
  .command('simulate')
  .description('the deterministic cluster simulator (network, disk and crash faults)')
  .option('--seed <n>', 'replay one seed exactly', positiveInteger)
  .option('--seeds <k>', 'run K seeds', positiveInteger)
  .option('--base <n>', 'base seed for --seeds', positiveInteger)
  .option('--kernels <mode>', 'auto | wasm | ts', 'auto')
  .option('--verbose', 'one line per seed')
  .action(async (options: { seed?: number; seeds?: number; base?: number; kernels: string; verbose?: boolean }) => {
    if (options.seed === undefined && options.seeds === undefined) {
      process.stderr.write('vrmeta simulate: pass --seed N or --seeds K\n');
      process.exitCode = 2;
      return;
    }
    const { runSimulate } = await import('../testing/simulate.js');
    const summary = runSimulate({
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.seeds === undefined ? {} : { seeds: options.seeds }),
      ...(options.base === undefined ? {} : { base: options.base }),
      verbose: options.verbose === true,
      kernels: loadKernels(parseKernelsMode(options.kernels)),
      write: (line) => process.stdout.write(`${line}\n`),
    });
    process.exitCode = summary.failures === 0 ? 0 : 1;
  });

const bench = program.command('bench').description('benchmarks (ratios measured in one run)');

bench
  .command('kernels')
  .description('XXH3, journal scan, chunk manifest and snapshot encode: wasm vs ts vs npm peers vs memcpy')
  .option('--json', 'print the report as JSON')
  .option('--smoke', 'tiny inputs (keeps the bench running in the test suite; numbers meaningless)')
  .option('--time-ms <ms>', 'sampling time per variant', positiveInteger)
  .action(async (options: { json?: boolean; smoke?: boolean; timeMs?: number }) => {
    const { formatKernelReport, runKernelBench } = await import('../../bench/kernels.js');
    const report = await runKernelBench({
      smoke: options.smoke === true,
      ...(options.timeMs === undefined ? {} : { timeMs: options.timeMs }),
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
  .action(async (options: EtcdBenchFlags & { duration?: number; clients?: number[]; journalSlots?: number; protocol: ('http' | 'binary')[] }) => {
    const { formatClusterReport, runClusterBench } = await import('../../bench/cluster.js');
    (await import('../../bench/procs.js')).installSignalCleanup();
    const report = await runClusterBench({
      smoke: options.smoke === true,
      kernels: options.kernels,
      ...(options.duration === undefined ? {} : { durationS: options.duration }),
      ...(options.clients === undefined ? {} : { levels: options.clients }),
      ...(options.journalSlots === undefined ? {} : { journalSlots: options.journalSlots }),
      protocols: options.protocol,
      log: benchLog,
    });
    printReport(report, options.json, formatClusterReport);
  });

etcdBench('transfer', 'state-transfer catch-up of a wiped replica (vs an etcd member rejoining) and restart recovery', 'tiny snapshot')
  .option('--sizes <mib>', 'snapshot sizes in MiB, comma-separated', sizeList)
  .action(async (options: EtcdBenchFlags & { sizes?: number[] }) => {
    const { formatTransferReport, runTransferBench } = await import('../../bench/transfer.js');
    (await import('../../bench/procs.js')).installSignalCleanup();
    const report = await runTransferBench({
      smoke: options.smoke === true,
      kernels: options.kernels,
      ...(options.sizes === undefined ? {} : { sizesMiB: options.sizes }),
      log: benchLog,
    });
    printReport(report, options.json, formatTransferReport);
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
    const { formatLoginFloodReport, runLoginFloodBench } = await import('../../bench/login-flood.js');
    (await import('../../bench/procs.js')).installSignalCleanup();
    const report = await runLoginFloodBench({
      smoke: options.smoke === true,
      kernels: options.kernels,
      ...(options.duration === undefined ? {} : { durationS: options.duration }),
      ...(options.rate === undefined ? {} : { rate: options.rate }),
      ...(options.writers === undefined ? {} : { writers: options.writers }),
      log: benchLog,
    });
    printReport(report, options.json, formatLoginFloodReport);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`vrmeta: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});

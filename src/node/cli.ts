#!/usr/bin/env node
/**
 * The `vrmeta` command line (DESIGN.md §2.2): start, dev, inspect, simulate, bench.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
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
  ['--http-peers <list>', 'http_peers', "comma-separated HTTP host:port of every replica (overrides the addresses replicas advertise to each other)"],
  ['--advertise-http <host:port>', 'advertise_http', 'HTTP address peers forward to (default: the bound --http address; set it when binding 0.0.0.0 behind NAT or a proxy)'],
  ['--advertise-tcp <host:port>', 'advertise_tcp', 'binary client address listed in cluster metadata (default: the bound --tcp address)'],
  ['--data-dir <path>', 'data_dir', 'data directory'],
  ['--cluster-name <name>', 'cluster_name', 'cluster name (hashed into every header; cannot change later)'],
  ['--journal-slots <n>', 'journal_slots', 'WAL capacity in prepares between checkpoints'],
  ['--clients-table-max <n>', 'clients_table_max', 'client session table capacity'],
  ['--sessions-per-user-max <n>', 'sessions_per_user_max', 'client sessions one user may hold (default: clients_table_max / 8)'],
  ['--http-sessions-per-credential <n>', 'http_sessions_per_credential', 'VSR sessions one HTTP credential writes through at once'],
  ['--prepare-queue-depth <n>', 'prepare_queue_depth', 'pipeline depth'],
  ['--prepare-batch-max <n>', 'prepare_batch_max', 'queued client requests one prepare may carry (1 disables batching)'],
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
  ['--tcp-buffers-size-max <bytes>', 'tcp_buffers_size_max', 'bytes all client connections may buffer together (default 134217728)'],
  ['--tcp-tls-cert <file>', 'tcp_tls_cert', 'PEM certificate: TLS on the client port (with --tcp-tls-key)'],
  ['--tcp-tls-key <file>', 'tcp_tls_key', 'PEM private key of --tcp-tls-cert'],
  ['--heartbeat-ms <ms>', 'heartbeat_ms', "the primary's heartbeat interval, a multiple of 10 (default 100)"],
  ['--election-timeout-ms <ms>', 'election_timeout_ms', 'how long a backup waits without a heartbeat before it replaces the primary, a multiple of 10, at least 3 heartbeats (default 500)'],
  ['--segment-size <bytes>', 'segment_size', 'bytes a partition segment grows to before the next starts (default 268435456)'],
  ['--retention-interval-ms <ms>', 'retention_interval_ms', 'how often message expiry and max topic size are applied (default 60000)'],
  ['--cors-origins <list>', 'cors_origins', 'comma-separated origins browsers may call the HTTP API from (default *: any; empty: CORS off)'],
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
  .addOption(new Option('--log-format <format>', 'auto (readable on a terminal, JSON otherwise) | pretty | json').choices(['auto', 'pretty', 'json']).default('auto'))
  .action(async (options: { replicas: number; dataDir: string; httpPort: number; replicaPort: number; tcpPort: number; kernels: string; logLevel: string; logFormat: string }) => {
    const { dev } = await import('./dev.js');
    process.exitCode = await dev(options);
  });

program
  .command('inspect')
  .description('verify and print a data file or a partition directory; exit 1 on corruption')
  .argument('<kind>', 'snapshot | wal | superblock | partition')
  .argument('<path>', 'the file, the data directory, or (partition) the partition directory')
  .option('--json', 'print JSON')
  .action(async (kind: string, path: string, options: { json?: boolean }) => {
    const { runInspect } = await import('../storage/inspect.js');
    const { loadKernels } = await import('../kernels/index.js');
    const result = runInspect(kind, path, { json: options.json === true, kernels: loadKernels() });
    process.stdout.write(`${result.output}\n`);
    process.exitCode = result.exitCode;
  });

interface SimulateCliOptions {
  seed?: number;
  seeds?: number;
  base?: number;
  kernels: string;
  verbose?: boolean;
  trace?: boolean;
}

program
  .command('simulate')
  .description('the deterministic cluster simulator (network, disk and crash faults)')
  .option('--seed <n>', 'replay one seed exactly', positiveInteger)
  .option('--seeds <k>', 'run K seeds', positiveInteger)
  .option('--base <n>', 'base seed for --seeds', positiveInteger)
  .option('--kernels <mode>', 'auto | wasm | ts', 'auto')
  .option('--verbose', 'one line per seed')
  .option('--trace', 'with --seed: print its log as it runs, replica debug records included')
  .action(async (options: SimulateCliOptions) => {
    if (options.seed === undefined && options.seeds === undefined) {
      process.stderr.write('vrmeta simulate: pass --seed N or --seeds K\n');
      process.exitCode = 2;
      return;
    }
    if (options.trace === true && options.seed === undefined) {
      process.stderr.write('vrmeta simulate: --trace traces one seed: pass --seed N\n');
      process.exitCode = 2;
      return;
    }
    const { runSimulate } = await import('../testing/simulate.js');
    const { loadKernels, parseKernelsMode } = await import('../kernels/index.js');
    const summary = runSimulate({
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.seeds === undefined ? {} : { seeds: options.seeds }),
      ...(options.base === undefined ? {} : { base: options.base }),
      verbose: options.verbose === true,
      trace: options.trace === true,
      kernels: loadKernels(parseKernelsMode(options.kernels)),
      write: (line) => process.stdout.write(`${line}\n`),
    });
    process.exitCode = summary.failures === 0 ? 0 : 1;
  });

const bench = program.command('bench').description('benchmarks (ratios measured in one run)');
// The benches are their own entry (bench/cli.ts): an installation without them still runs every
// other command, and `vrmeta bench` says what is missing instead of failing to resolve a module.
// src/ never imports bench/ (not even its types): the entry's shape is stated here and bench/cli.ts
// checks itself against it.
// From dist/src/node/cli.js the entry is dist/bench/cli.js; from the bundle (dist/bundle/) too.
const BENCH_ENTRY = [new URL('../../bench/cli.js', import.meta.url), new URL('../bench/cli.js', import.meta.url)].find(
  (url) => existsSync(fileURLToPath(url)),
) ?? new URL('../../bench/cli.js', import.meta.url);
export interface BenchEntry {
  registerBenchCommands(bench: Command): void;
}
// Loaded only for a command line that can reach it (`bench ...`, or help): a replica's boot
// (`start`, and `dev`'s children) does not pay for importing the benches' entry.
const first = process.argv[2];
const benchReachable = first === undefined || first === 'bench' || first === 'help' || first.startsWith('-');
if (!benchReachable) {
  bench.argument('[args...]').allowUnknownOption().helpOption(false);
} else if (existsSync(fileURLToPath(BENCH_ENTRY))) {
  const { registerBenchCommands } = (await import(BENCH_ENTRY.href)) as BenchEntry;
  registerBenchCommands(bench);
} else {
  bench
    .argument('[args...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(() => {
      process.stderr.write(`vrmeta bench: the benchmarks are not part of this installation (${fileURLToPath(BENCH_ENTRY)} is missing); run them from a source checkout: npm ci && npm run bench\n`);
      process.exitCode = 2;
    });
}

program.parseAsync(process.argv).catch((error: unknown) => {
  if ((error as Error).name === 'BenchUnavailable') {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`vrmeta: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});

#!/usr/bin/env node
/**
 * The `vrmeta` command line. Subcommands are added per layer: `bench kernels` now; `start`, `dev`,
 * `inspect` and `simulate` as the server, storage and simulator land.
 */
import { Command, InvalidArgumentError } from 'commander';
import { formatKernelReport, runKernelBench } from '../../bench/kernels.js';

const program = new Command();
program.name('vrmeta').description('Replicated metadata server (Viewstamped Replication)').showHelpAfterError();

const bench = program.command('bench').description('benchmarks (ratios measured in one run)');

bench
  .command('kernels')
  .description('XXH3, journal scan, chunk manifest and snapshot encode: wasm vs ts vs npm peers vs memcpy')
  .option('--json', 'print the report as JSON')
  .option('--smoke', 'tiny inputs (keeps the bench running in the test suite; numbers meaningless)')
  .option('--time-ms <ms>', 'sampling time per variant', (value) => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed <= 0) throw new InvalidArgumentError('a positive integer');
    return parsed;
  })
  .action(async (options: { json?: boolean; smoke?: boolean; timeMs?: number }) => {
    const report = await runKernelBench({
      smoke: options.smoke === true,
      ...(options.timeMs === undefined ? {} : { timeMs: options.timeMs }),
      log: options.json === true ? () => {} : (line) => process.stderr.write(`${line}\n`),
    });
    if (options.json === true) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else process.stdout.write(`${formatKernelReport(report)}\n`);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`vrmeta: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});

/**
 * `vrmeta simulate`: runs the deterministic cluster simulator. `--seed N` replays one seed exactly
 * (same output, byte for byte); `--seeds K` runs K seeds drawn from a base seed and ends with a
 * summary line `seeds=K failures=F` plus what the seeds exercised. A failure prints its seed and
 * the command that replays it.
 */
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import { Prng } from '../stdx/prng.js';
import type { ClusterCounts } from './cluster.js';
import { simulateSeed, type SimResult } from './vopr.js';

export interface SimulateOptions {
  readonly seed?: number;
  readonly seeds?: number;
  /** Seeds for --seeds come from this base (random when absent; printed either way). */
  readonly base?: number;
  readonly verbose?: boolean;
  /**
   * With `seed` only: print the seed's whole log as it runs, each replica's debug records (every
   * message a handler dropped, with its reason) included.
   */
  readonly trace?: boolean;
  readonly kernels: Kernels;
  readonly write: (line: string) => void;
}

/** The seeds' counters summed (evictions are not summed), and what the run covered. */
export interface SimulateSummary extends Omit<ClusterCounts, 'evictions'> {
  readonly seeds: number;
  readonly failures: number;
  readonly failedSeeds: readonly number[];
  /** Seeds that committed at least one batch prepare. */
  readonly seedsWithBatch: number;
  readonly seedsWithTransfer: number;
  /** Targeted faults fired, summed over the seeds (see faults.ts). */
  readonly targeted: Readonly<Record<string, number>>;
  readonly elapsedMs: number;
}

function describe(result: SimResult): string {
  const o = result.options;
  return (
    `seed=${result.seed} ${result.ok ? 'ok' : 'FAILED'} replicas=${o.replicaCount} ` +
    `ticks=${result.ticks} commits=${result.commits} batches=${result.batches} ` +
    `view_changes=${result.viewChanges} checkpoints=${result.checkpoints} ` +
    `repairs=${result.repairs} crashes=${result.crashes} wipes=${result.wipes} ` +
    `transfers=${result.transfers}`
  );
}

/** The counters a run sums over its seeds, all zero. */
function zeroTotals() {
  return {
    commits: 0,
    batches: 0,
    requestsBatched: 0,
    seedsWithBatch: 0,
    viewChanges: 0,
    checkpoints: 0,
    repairs: 0,
    crashes: 0,
    wipes: 0,
    transfers: 0,
    seedsWithTransfer: 0,
  };
}

/** Adds one seed's counters to the run's totals (mutable while the run sums them). */
function addResult(totals: ReturnType<typeof zeroTotals>, result: SimResult): void {
  totals.commits += result.commits;
  totals.batches += result.batches;
  totals.requestsBatched += result.requestsBatched;
  if (result.batches > 0) totals.seedsWithBatch += 1;
  totals.viewChanges += result.viewChanges;
  totals.checkpoints += result.checkpoints;
  totals.repairs += result.repairs;
  totals.crashes += result.crashes;
  totals.wipes += result.wipes;
  totals.transfers += result.transfers;
  if (result.transfers > 0) totals.seedsWithTransfer += 1;
}

export function runSimulate(options: SimulateOptions): SimulateSummary {
  const started = Date.now();
  let seeds: number[];
  // Thousands of lines per seed: one seed at a time, written as they come, never held.
  assert(options.trace !== true || options.seed !== undefined, 'a trace is of one seed');
  const hooks = options.trace === true ? { trace: options.write } : {};
  if (options.seed !== undefined) {
    seeds = [options.seed];
  } else {
    const base = options.base ?? Math.floor(Math.random() * 2 ** 32);
    const count = options.seeds ?? 1;
    const replay = `vrmeta simulate --seeds ${count} --base ${base}`;
    options.write(`base=${base} (replay this run: ${replay})`);
    const prng = new Prng(base);
    seeds = Array.from({ length: count }, () => prng.nextU32() * 1024 + prng.int(1024));
  }
  const totals = zeroTotals();
  const failedSeeds: number[] = [];
  const targeted: Record<string, number> = {};
  for (const seed of seeds) {
    const result = simulateSeed(seed, options.kernels, {}, hooks);
    addResult(totals, result);
    for (const [name, count] of Object.entries(result.targeted)) {
      targeted[name] = (targeted[name] ?? 0) + count;
    }
    if (options.seed !== undefined || options.verbose === true || !result.ok) {
      options.write(describe(result));
    }
    if (!result.ok) {
      failedSeeds.push(seed);
      options.write(`  failure: ${result.failure}`);
      options.write(`  replay:  vrmeta simulate --seed ${seed}`);
      if (options.seed !== undefined) for (const line of result.log) options.write(`  ${line}`);
    }
  }
  const summary: SimulateSummary = {
    seeds: seeds.length,
    failures: failedSeeds.length,
    failedSeeds,
    ...totals,
    targeted,
    elapsedMs: Date.now() - started,
  };
  options.write(summaryLine(summary));
  options.write(targetedLine(targeted));
  return summary;
}

function summaryLine(summary: SimulateSummary): string {
  return (
    `seeds=${summary.seeds} failures=${summary.failures} commits=${summary.commits} ` +
    `batches=${summary.batches} requests_batched=${summary.requestsBatched} ` +
    `seeds_with_batch=${summary.seedsWithBatch} view_changes=${summary.viewChanges} ` +
    `checkpoints=${summary.checkpoints} repairs=${summary.repairs} crashes=${summary.crashes} ` +
    `wipes=${summary.wipes} transfers=${summary.transfers} ` +
    `seeds_with_transfer=${summary.seedsWithTransfer} elapsed_ms=${summary.elapsedMs}`
  );
}

/** `targeted: name=count ...`, each camelCase name in snake_case. */
function targetedLine(targeted: Readonly<Record<string, number>>): string {
  const snake = (name: string): string =>
    name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
  const entries = Object.entries(targeted).map(([name, count]) => `${snake(name)}=${count}`);
  return `targeted: ${entries.join(' ')}`;
}

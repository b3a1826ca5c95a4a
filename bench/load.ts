/**
 * A closed-loop load generator: `concurrency` workers, each sending its next request as soon as
 * the previous one answered, for a fixed wall-clock window after a warm-up. The same driver
 * (and the same node:http keep-alive client, procs.ts `httpCall`) runs against vrmeta and etcd.
 * A level can be measured in several slices (interleaved with the other systems' slices, so slow
 * phases of a shared machine hit every system alike) and summarized together.
 */
import { cpus } from 'node:os';

/** Latency samples kept per slice (beyond it, reservoir sampling keeps the percentiles unbiased). */
const SAMPLES_MAX = 1_000_000;

export interface LoadResult {
  readonly concurrency: number;
  /** Completed operations in the measured windows (warm-ups excluded). */
  readonly ops: number;
  readonly errors: number;
  readonly seconds: number;
  readonly opsPerS: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
  /** The first few error messages (a wrong answer counts as an error, never as an op). */
  readonly errorSamples: string[];
}

/** One measured window of a closed loop. */
export interface LoadSlice {
  readonly ops: number;
  readonly errors: number;
  readonly seconds: number;
  /** Latencies (ms) of the successful operations of the window (a uniform sample past SAMPLES_MAX). */
  readonly latenciesMs: Float64Array;
  readonly errorSamples: string[];
}

/** One operation: resolves when it succeeded, throws (with a reason) when it did not. */
export type Operation = (worker: number, sequence: number) => Promise<void>;

export interface LoadOptions {
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly operation: Operation;
  /** Called when the measured window opens and when it closes (e.g. to read CPU counters). */
  readonly onWindow?: { readonly open: () => void; readonly close: () => void };
}

export function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank]!;
}

/** `concurrency` workers in a closed loop: a warm-up, then one measured window. */
export async function runSlice(options: LoadOptions): Promise<LoadSlice> {
  const samples: number[] = [];
  let ops = 0;
  let errors = 0;
  const errorSamples: string[] = [];
  const startMs = performance.now();
  const measureFromMs = startMs + options.warmupMs;
  const stopAtMs = measureFromMs + options.durationMs;
  let sequence = 0;
  let seed = 0x9e3779b9;
  // The window's hooks run once each, in order: a late close timer is run by hand at the end.
  let windowState: 'before' | 'open' | 'closed' = 'before';
  const openWindow = (): void => {
    if (windowState !== 'before') return;
    windowState = 'open';
    options.onWindow?.open();
  };
  const closeWindow = (): void => {
    openWindow();
    if (windowState !== 'open') return;
    windowState = 'closed';
    options.onWindow?.close();
  };
  const timers = options.onWindow === undefined ? [] : [setTimeout(openWindow, options.warmupMs), setTimeout(closeWindow, options.warmupMs + options.durationMs)];
  const worker = async (index: number): Promise<void> => {
    for (;;) {
      const beganMs = performance.now();
      if (beganMs >= stopAtMs) return;
      let failed = false;
      try {
        await options.operation(index, sequence++);
      } catch (error) {
        failed = true;
        if (errorSamples.length < 5) errorSamples.push((error as Error).message.slice(0, 300));
      }
      const endMs = performance.now();
      // Count what started inside the window and ended before it closed.
      if (beganMs < measureFromMs || endMs > stopAtMs) continue;
      if (failed) {
        errors += 1;
        continue;
      }
      ops += 1;
      const latencyMs = endMs - beganMs;
      if (samples.length < SAMPLES_MAX) samples.push(latencyMs);
      else {
        seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
        const slot = seed % ops;
        if (slot < SAMPLES_MAX) samples[slot] = latencyMs;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, index) => worker(index)));
  for (const timer of timers) clearTimeout(timer);
  if (options.onWindow !== undefined) closeWindow();
  return { ops, errors, seconds: options.durationMs / 1000, latenciesMs: Float64Array.from(samples), errorSamples };
}

/** Merges the slices of one (system, concurrency) into throughput and latency percentiles. */
export function summarize(concurrency: number, slices: readonly LoadSlice[]): LoadResult {
  const ops = slices.reduce((sum, slice) => sum + slice.ops, 0);
  const errors = slices.reduce((sum, slice) => sum + slice.errors, 0);
  const seconds = slices.reduce((sum, slice) => sum + slice.seconds, 0);
  const all = new Float64Array(slices.reduce((sum, slice) => sum + slice.latenciesMs.length, 0));
  let offset = 0;
  for (const slice of slices) {
    all.set(slice.latenciesMs, offset);
    offset += slice.latenciesMs.length;
  }
  all.sort();
  return {
    concurrency,
    ops,
    errors,
    seconds,
    opsPerS: seconds > 0 ? ops / seconds : 0,
    latencyMsP50: percentile(all, 0.5),
    latencyMsP99: percentile(all, 0.99),
    errorSamples: slices.flatMap((slice) => slice.errorSamples).slice(0, 5),
  };
}

/** One warm-up and one window, summarized. */
export function machineLine(): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return `Node ${process.version}, ${cpu.trim()}, ${cpus().length} cores, ${process.platform} ${process.arch}`;
}

/** `1234.5` -> `1,235`; small values keep a decimal. */
export function formatNumber(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return '—';
  return value < 10 ? `${value.toFixed(2)} ms` : value < 100 ? `${value.toFixed(1)} ms` : `${value.toFixed(0)} ms`;
}

export function formatRatio(value: number | null): string {
  return value === null || !Number.isFinite(value) ? '—' : `${value.toFixed(2)}×`;
}

export function formatMiB(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

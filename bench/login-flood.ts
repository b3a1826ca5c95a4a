/**
 * `vrmeta bench login-flood`: what a flood of bogus password logins does to write latency, with
 * the password gate (src/http/password-gate.ts) and without it.
 *
 * Per server mode (bounded: the default server; unbounded: the same build with
 * VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY=1, which lifts the gate, for this comparison only) one
 * 3-replica cluster on 127.0.0.1 runs two phases on its primary:
 *   - quiet: `writers` closed-loop writers (each with its own login, hence its own VSR session)
 *     create streams; write p50/p99 are measured;
 *   - flood: the same writers, while an open-loop generator sends `rate` logins per second with a
 *     wrong password to the same primary (every one costs an Argon2id verification unless the
 *     gate refuses it). A login still unanswered when the next is due does not delay it (open
 *     loop); at most FLOOD_OUTSTANDING_MAX are in flight, beyond that a send is skipped, counted.
 * Every write is checked (200 and its name in the body) before it counts. The flood's answers are
 * counted by status: 400 (verified, wrong password), 429 (refused by the gate), other.
 */
import type { Agent } from 'node:http';
import { formatMs, formatNumber, formatRatio, machineLine, runSlice, summarize, type LoadResult } from './load.js';
import { VrmetaCluster, httpCall, keepAliveAgent } from './procs.js';

export const UNBOUNDED_ENV = 'VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY';
/** Bogus logins in flight at most (a client-side bound: the generator must not exhaust itself). */
const FLOOD_OUTSTANDING_MAX = 4096;
const WARMUP_MS = 1_000;

export interface LoginFloodOptions {
  readonly smoke: boolean;
  /** Measured seconds per phase. */
  readonly durationS?: number;
  /** Bogus logins per second during the flood. */
  readonly rate?: number;
  readonly writers?: number;
  readonly kernels?: 'wasm' | 'ts';
  readonly log?: (line: string) => void;
}

export type ServerMode = 'bounded' | 'unbounded';

export interface FloodCounts {
  readonly sent: number;
  /** Not sent: FLOOD_OUTSTANDING_MAX were in flight. */
  readonly skipped: number;
  readonly answered400: number;
  readonly answered429: number;
  readonly answeredOther: number;
  readonly failed: number;
  /** Still unanswered when the phase ended. */
  readonly outstanding: number;
  readonly ratePerS: number;
}

export interface LoginFloodRow {
  readonly server: ServerMode;
  readonly phase: 'quiet' | 'flood';
  readonly writes: LoadResult;
  readonly flood: FloodCounts | null;
  /** p99 of this phase / p99 of the same server's quiet phase. */
  readonly p99VsQuiet: number;
}

export interface LoginFloodReport {
  readonly bench: 'login-flood';
  readonly smoke: boolean;
  readonly machine: string;
  readonly durationS: number;
  readonly rate: number;
  readonly writers: number;
  readonly kernels: 'wasm' | 'ts';
  readonly rows: LoginFloodRow[];
}

/** The open-loop flood: `rate` bogus logins per second until `stop()`. */
function startFlood(agent: Agent, base: string, rate: number): { stop: () => Promise<FloodCounts> } {
  const counts = { sent: 0, skipped: 0, answered400: 0, answered429: 0, answeredOther: 0, failed: 0 };
  let outstanding = 0;
  let stopped = false;
  const startedMs = performance.now();
  const body = JSON.stringify({ username: 'iggy', password: 'not-the-password' });
  const send = (): void => {
    if (outstanding >= FLOOD_OUTSTANDING_MAX) {
      counts.skipped += 1;
      return;
    }
    outstanding += 1;
    counts.sent += 1;
    httpCall(agent, 'POST', `${base}/users/login`, body, {}, 60_000).then(
      (answer) => {
        outstanding -= 1;
        if (answer.status === 400) counts.answered400 += 1;
        else if (answer.status === 429) counts.answered429 += 1;
        else counts.answeredOther += 1;
      },
      () => {
        outstanding -= 1;
        counts.failed += 1;
      },
    );
  };
  // Paced by the clock, not by a fixed interval: a late timer catches up instead of drifting.
  const intervalMs = 1000 / rate;
  let due = 0;
  const timer = setInterval(() => {
    if (stopped) return;
    const shouldHaveSent = Math.floor((performance.now() - startedMs) / intervalMs);
    while (due < shouldHaveSent) {
      due += 1;
      send();
    }
  }, Math.max(1, Math.floor(intervalMs / 2)));
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      const seconds = (performance.now() - startedMs) / 1000;
      return { ...counts, outstanding, ratePerS: counts.sent / seconds };
    },
  };
}

async function measureServer(mode: ServerMode, options: Required<Omit<LoginFloodOptions, 'log'>>, log: (line: string) => void): Promise<LoginFloodRow[]> {
  log(`[bench] login-flood: starting a 3-replica cluster (${mode})`);
  const cluster = await VrmetaCluster.start({ kernels: options.kernels, env: mode === 'unbounded' ? { [UNBOUNDED_ENV]: '1' } : {} });
  const writeAgent = keepAliveAgent(options.writers);
  const floodAgent = keepAliveAgent(512);
  try {
    const primary = await cluster.primary();
    const base = cluster.url(primary);
    const tokens: string[] = [];
    for (let index = 0; index < options.writers; index++) tokens.push(await cluster.login(primary));
    let written = 0;
    const operation = async (worker: number): Promise<void> => {
      const name = `${mode}-w${worker}-n${written++}`;
      const answer = await httpCall(writeAgent, 'POST', `${base}/streams`, JSON.stringify({ name }), { authorization: `Bearer ${tokens[worker]!}` });
      if (answer.status !== 200 || !answer.text.includes(`"name":"${name}"`)) throw new Error(`create stream ${name}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
    };
    const durationMs = options.durationS * 1000;
    log(`[bench] login-flood: ${mode}: quiet, ${options.writers} writers, ${options.durationS} s`);
    const quiet = summarize(options.writers, [await runSlice({ concurrency: options.writers, warmupMs: WARMUP_MS, durationMs, operation })]);
    log(`[bench] login-flood: ${mode}: ${options.rate} bogus logins/s`);
    const flood = startFlood(floodAgent, base, options.rate);
    const flooded = summarize(options.writers, [await runSlice({ concurrency: options.writers, warmupMs: WARMUP_MS, durationMs, operation })]);
    const counts = await flood.stop();
    return [
      { server: mode, phase: 'quiet', writes: quiet, flood: null, p99VsQuiet: 1 },
      { server: mode, phase: 'flood', writes: flooded, flood: counts, p99VsQuiet: flooded.latencyMsP99 / quiet.latencyMsP99 },
    ];
  } finally {
    writeAgent.destroy();
    floodAgent.destroy();
    await cluster.stopAll();
  }
}

export async function runLoginFloodBench(options: LoginFloodOptions): Promise<LoginFloodReport> {
  const resolved = {
    smoke: options.smoke,
    durationS: options.durationS ?? (options.smoke ? 1 : 10),
    rate: options.rate ?? (options.smoke ? 20 : 200),
    writers: options.writers ?? (options.smoke ? 2 : 4),
    kernels: options.kernels ?? 'wasm',
  };
  const log = options.log ?? (() => {});
  const rows: LoginFloodRow[] = [];
  for (const mode of ['bounded', 'unbounded'] as const) rows.push(...(await measureServer(mode, resolved, log)));
  return { bench: 'login-flood', machine: machineLine(), ...resolved, rows };
}

export function formatLoginFloodReport(report: LoginFloodReport): string {
  const lines = [
    `${report.machine}; 3 replicas on 127.0.0.1, ${report.kernels} kernels; ${report.writers} closed-loop writers on the primary, ` +
      `${report.durationS} s per phase; flood: ${report.rate} logins/s with a wrong password to the primary${report.smoke ? ' (smoke: numbers meaningless)' : ''}`,
    '',
    '| server | phase | writes/s | write p50 | write p99 | p99 vs quiet | logins sent/s | answered 400 | answered 429 | other / failed / unanswered |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of report.rows) {
    const flood = row.flood;
    lines.push(
      `| ${row.server === 'bounded' ? 'gate on (default)' : 'gate off'} | ${row.phase} | ${formatNumber(row.writes.opsPerS)} | ${formatMs(row.writes.latencyMsP50)} | ${formatMs(row.writes.latencyMsP99)} | ` +
        `${formatRatio(row.p99VsQuiet)} | ${flood === null ? '—' : formatNumber(flood.ratePerS)} | ${flood === null ? '—' : formatNumber(flood.answered400)} | ` +
        `${flood === null ? '—' : formatNumber(flood.answered429)} | ${flood === null ? '—' : `${flood.answeredOther} / ${flood.failed} / ${flood.outstanding}`} |`,
    );
  }
  return lines.join('\n');
}

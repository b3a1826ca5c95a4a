/**
 * `vrmeta bench failover` in one round against real `vrmeta start` children of the built server
 * (dist/), without etcd: the primary is killed and frozen, writes through a survivor over both
 * protocols must succeed again after each, and the report has the documented structure. The
 * gaps are asserted finite and positive, never against a timing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { formatFailoverReport, runFailoverBench } from '../../bench/failover.js';
import { cleanupAll, leftovers } from '../../bench/procs.js';

describe('vrmeta bench failover, one round', () => {
  afterAll(async () => {
    await cleanupAll();
  });

  it('writes resume through a survivor after SIGKILL and SIGSTOP of the primary, over HTTP and binary', async () => {
    const report = await runFailoverBench({ rounds: 1, signals: ['SIGKILL', 'SIGSTOP'], protocols: ['http', 'binary'], etcd: false, log: () => {} });
    expect(report.etcd.skipped).toBe('not requested');
    expect(report.series.map((series) => [series.system, series.protocol, series.signal, series.gapsMs.length])).toEqual([
      ['vrmeta', 'http', 'SIGKILL', 1],
      ['vrmeta', 'binary', 'SIGKILL', 1],
      ['vrmeta', 'http', 'SIGSTOP', 1],
      ['vrmeta', 'binary', 'SIGSTOP', 1],
    ]);
    for (const series of report.series) expect(series.gapsMs[0]).toBeGreaterThan(0);
    expect(formatFailoverReport(report)).toContain('| system | writes | primary | p50 | p99 | max |');
    expect(leftovers().children).toBe(0);
  }, 180_000);
});

/**
 * `vrmeta bench cluster --shared-login --sessions-per-credential 1,4 --smoke`: every HTTP worker
 * writes with one login, against one vrmeta cluster per bound, in the same rounds. Real replicas
 * of the built server (dist/), no etcd; the structure and the checked answers are asserted, never
 * a timing. Every child is killed: the bench stops its clusters in `finally`, `cleanupAll` runs in
 * afterAll.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { formatClusterReport, runClusterBench } from '../../bench/cluster.js';
import { cleanupAll } from '../../bench/procs.js';

describe('vrmeta bench cluster --shared-login --smoke', () => {
  afterAll(async () => {
    await cleanupAll();
  });

  it('runs one cluster per sessions-per-credential bound with one login for all workers, every answer checked', async () => {
    const report = await runClusterBench({ smoke: true, kernels: ['wasm'], protocols: ['http'], sharedLogin: true, sessionsPerCredential: [1, 4] });
    expect(report).toMatchObject({ bench: 'cluster', smoke: true, sharedLogin: true, protocols: ['http'], etcd: { ran: false } });
    expect(report.rows.map((row) => [row.system, row.sessionsPerCredential, row.concurrency])).toEqual([
      ['vrmeta', 1, 1],
      ['vrmeta', 1, 4],
      ['vrmeta', 4, 1],
      ['vrmeta', 4, 4],
    ]);
    for (const row of report.rows) {
      expect(row.errorSamples).toEqual([]);
      expect(row.ops).toBeGreaterThan(0);
    }
    const table = formatClusterReport(report);
    expect(table).toContain('one login shared by every client');
    expect(table).toMatch(/\| vrmeta \(4 sessions\/credential\) \| http \| wasm \| 4 \| [\d,]+ \|/);
  }, 180_000);
});

/**
 * The kernel benchmark in smoke mode: tiny inputs and sampling time, so the bench keeps compiling
 * and running (and keeps checking its results before timing) without timing anything here.
 */
import { describe, expect, it } from 'vitest';
import { formatKernelReport, runKernelBench } from '../../bench/kernels.js';

describe('vrmeta bench kernels --smoke', () => {
  it('runs every suite, checks results, and formats a table per suite', async () => {
    const report = await runKernelBench({ smoke: true, timeMs: 2 });
    const suites = new Set(report.rows.map((row) => row.suite.split(' ')[0]));
    expect([...suites]).toEqual(expect.arrayContaining(['xxh3', 'journal', 'chunk', 'message', 'snapshot']));
    for (const row of report.rows) {
      expect(row.medianMs).toBeGreaterThan(0);
      expect(Number.isFinite(row.gbPerS)).toBe(true);
    }
    expect(formatKernelReport(report)).toMatch(/\| wasm \(in WASM memory\) \|/);
  });
});

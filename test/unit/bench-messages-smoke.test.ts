/**
 * `vrmeta bench messages --smoke` against real `vrmeta start` children of the built server
 * (dist/): tiny levels, no JetStream. Every acknowledged message is read back before a level
 * counts, and the report has the documented structure; never a timing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { formatMessagesReport, runMessagesBench } from '../../bench/messages.js';
import { cleanupAll, leftovers } from '../../bench/procs.js';

describe('vrmeta bench messages --smoke', () => {
  afterAll(async () => {
    await cleanupAll();
  });

  it('produces, reads back every acknowledged message, and reports each level; refuses a batch over the frame bound', async () => {
    const report = await runMessagesBench({ kernels: ['wasm'], batches: [2, 1000], producers: [1, 3], durationMs: 300, nats: false, log: () => {} });
    expect(report.jetstream.skipped).toBe('not requested');
    expect(report.rows.map((row) => [row.phase, row.batch, row.producers, row.system, row.kernels])).toEqual([
      ['produce', 2, 1, 'vrmeta', 'wasm'],
      ['consume', 2, 1, 'vrmeta', 'wasm'],
      ['produce', 2, 3, 'vrmeta', 'wasm'],
      ['consume', 2, 3, 'vrmeta', 'wasm'],
      ['produce', 1000, 1, 'vrmeta', 'wasm'],
      ['consume', 1000, 1, 'vrmeta', 'wasm'],
      ['produce', 1000, 3, 'vrmeta', 'wasm'],
      ['consume', 1000, 3, 'vrmeta', 'wasm'],
    ]);
    const [produced1, consumed1, produced3, consumed3] = report.rows;
    for (const [produced, consumed] of [[produced1!, consumed1!], [produced3!, consumed3!]] as const) {
      expect(produced.skipped).toBeNull();
      expect(produced.messages).toBeGreaterThan(0);
      expect(produced.messages % 2).toBe(0);
      // Every acknowledged message came back, no more.
      expect(consumed.messages).toBe(produced.messages);
      expect(produced.latencyMsP50).toBeLessThanOrEqual(produced.latencyMsP99);
    }
    for (const row of report.rows.slice(4)) expect(row.skipped).toMatch(/over the 1 MiB frame bound/);
    expect(formatMessagesReport(report)).toContain('| phase | batch | producers | system | messages/s | MB/s | p50 | p99 |');
    expect(leftovers().children).toBe(0);
  });
});

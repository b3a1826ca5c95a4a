/**
 * `vrmeta bench soak` at toy size against real `vrmeta start` children of the built server
 * (dist/): a grown state, closed-loop binary writes, one backup wiped and rejoined by state
 * transfer, and the report's structure. View changes are counted, never asserted (a loaded CI
 * machine may have some); that they are counted at all is.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, leftovers } from '../../bench/procs.js';
import { formatSoakReport, runSoakBench } from '../../bench/soak.js';

describe('vrmeta bench soak, toy size', () => {
  afterAll(async () => {
    await cleanupAll();
  });

  it('writes under load, rejoins a wiped backup, and counts the view changes', async () => {
    const report = await runSoakBench({ minutes: 0.25, clients: 2, stateMiB: 1, transferEveryS: 4, log: () => {} });
    expect(report.writes).toBeGreaterThan(0);
    expect(report.transfers).toBeGreaterThanOrEqual(1);
    expect(report.snapshotBytes).toBeGreaterThan(0);
    expect(report.viewAtEnd).toBeGreaterThanOrEqual(report.viewAtStart);
    expect(report.viewChangesLogged).toBeGreaterThanOrEqual(0);
    expect(formatSoakReport(report)).toContain('| minutes | clients | snapshot | writes/s |');
    expect(leftovers().children).toBe(0);
  }, 180_000);
});

/**
 * A whole-cluster restart of `vrmeta dev` on real processes (issue 15): every replica leaves
 * recovery because it heard every peer recovering, before its first probe round ran out, instead
 * of waiting out five rounds (5 s). Asserted on the replicas' own typed log fields (reason,
 * probes), never on a timing.
 */
import { afterAll, expect, it } from 'vitest';
import { cleanupAll, leftovers } from '../../bench/procs.js';
import { formatRestartReport, runRestartBench } from '../../bench/restart.js';

afterAll(async () => {
  await cleanupAll();
});

it('every replica of a restarted cluster elects at once from recovery, then every /readyz is 200', async () => {
  const report = await runRestartBench({ rounds: 1, streams: 3 });
  expect(report.rounds).toHaveLength(1);
  const round = report.rounds[0]!;
  expect(round.reasons).toEqual(['peers_recovering', 'peers_recovering', 'peers_recovering']);
  expect(round.probes).toEqual([0, 0, 0]);
  expect(Number.isFinite(round.readyMs)).toBe(true);
  expect(formatRestartReport(report)).toContain('| round | spawn -> last listener (ms) |');
  expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
}, 120_000);

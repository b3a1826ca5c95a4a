/**
 * A whole-cluster restart of `vrmeta dev` on real processes: the replicas leave recovery
 * because they heard their peers recovering, instead of waiting out every probe round. Asserted on the replicas' own typed log fields (reason,
 * probes), never on a timing.
 */
import { afterAll, expect, it } from 'vitest';
import { cleanupAll, leftovers } from '../../bench/procs.js';
import { formatRestartReport, runRestartBench } from '../../bench/restart.js';
import { replicaConfig } from '../../src/vsr/config.js';
import { CLI_PATH, assertDistFresh } from './harness.js';

/** Rounds a recovering replica probes for a live view, by default. */
const VIEW_PROBE_ATTEMPTS_MAX = replicaConfig({ cluster: 1n, replica: 0, replicaCount: 3 }).viewProbeAttemptsMax;

const BOOT_PHASES = ['process', 'config', 'import_replica', 'import_http', 'prefetch_wait', 'recovery', 'http_app', 'replica_listen', 'http_listen', 'tcp_listen'];

afterAll(async () => {
  await cleanupAll();
});

it('every replica of a restarted cluster elects at once from recovery, then every /readyz is 200; --baseline-cli alternates builds', async () => {
  assertDistFresh();
  // This build stands in for the baseline: what is checked there is the alternation and the labels.
  const report = await runRestartBench({ rounds: 1, streams: 3, baselineCli: CLI_PATH });
  expect(report.rounds.map((round) => [round.round, round.build])).toEqual([
    [1, 'this build'],
    [1, 'baseline'],
  ]);
  for (const round of report.rounds) {
    // A view change needs a quorum: at least two replicas elect from recovery, each because it
    // heard its peers recovering (every peer, or a quorum by the end of a probe round), before
    // its probes ran out. The third may instead adopt the new view from the StartView answering
    // its probe, if that arrives first.
    expect(round.reasons.length).toBeGreaterThanOrEqual(2);
    for (const reason of round.reasons) expect(reason).toBe('peers_recovering');
    for (const probes of round.probes) expect(probes).toBeLessThan(VIEW_PROBE_ATTEMPTS_MAX);
    expect(Number.isFinite(round.readyMs)).toBe(true);
    // Every replica said where its boot went (its `boot phases` record), phase by phase.
    expect(round.bootPhases).toHaveLength(3);
    for (const phases of round.bootPhases) expect(Object.keys(phases)).toEqual(BOOT_PHASES);
    // ... and what it cost in CPU time, whatever the machine's load.
    expect(round.bootCpuMs).toHaveLength(3);
    for (const cpuMs of round.bootCpuMs) expect(cpuMs).toBeGreaterThan(0);
  }
  const table = formatRestartReport(report);
  expect(table).toContain('| round | spawn -> last listener (ms) |');
  expect(table).toContain('| baseline |');
  expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
}, 120_000);

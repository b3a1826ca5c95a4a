/**
 * When `vrmeta dev` restarts a replica: backoff doubling to a cap, reset by a stable run, a crash
 * loop named once, and invalid configuration at the first start stopping everything.
 */
import { describe, expect, it } from 'vitest';
import {
  RESTART_POLICY_DEFAULTS,
  RestartPolicy,
  type ChildExit,
  type ExitDecision,
} from '../../src/node/restart-policy.js';

const KILLED: ChildExit = { code: null, signal: 'SIGKILL' };

/** Runs of `uptimesMs` each ended by `exit`, each restarted after the delay it was given. */
function runs(policy: RestartPolicy, uptimesMs: readonly number[], exit = KILLED): ExitDecision[] {
  let nowMs = 1_000;
  const decisions: ExitDecision[] = [];
  for (const uptimeMs of uptimesMs) {
    policy.onStart(nowMs);
    nowMs += uptimeMs;
    const decision = policy.onExit(nowMs, exit);
    decisions.push(decision);
    if (decision.action === 'restart') nowMs += decision.delayMs;
  }
  return decisions;
}

const delays = (decisions: readonly ExitDecision[]): number[] =>
  decisions.map((decision) => (decision.action === 'restart' ? decision.delayMs : -1));

describe('restart policy', () => {
  it('backs off from 250 ms doubling to a 10 s cap while the replica keeps dying young', () => {
    // Each run lasts 20 s: not stable, and too slow to count as a crash loop (3 exits a minute).
    const decisions = runs(new RestartPolicy(), Array.from({ length: 8 }, () => 20_000));
    expect(delays(decisions)).toEqual([250, 500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    expect(decisions.map((decision) => decision.action === 'restart' && decision.crashLoop))
      .toEqual(Array.from({ length: 8 }, () => null));
    expect(decisions.map((decision) => decision.action === 'restart' && decision.restartCount))
      .toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('a run of 30 s or more resets the backoff to 250 ms', () => {
    const policy = new RestartPolicy();
    expect(delays(runs(policy, [20_000, 20_000, 20_000]))).toEqual([250, 500, 1_000]);
    expect(delays(runs(policy, [30_000, 20_000]))).toEqual([250, 500]);
  });

  it('5 exits within 60 s is a crash loop: named once, then every restart waits the cap', () => {
    const policy = new RestartPolicy();
    const decisions = runs(policy, [100, 100, 100, 100, 100, 100, 100]);
    expect(decisions.map((decision) => decision.action === 'restart' && decision.crashLoop))
      .toEqual([null, null, null, null, 'entered', 'ongoing', 'ongoing']);
    expect(delays(decisions)).toEqual([250, 500, 1_000, 2_000, 10_000, 10_000, 10_000]);
    expect(decisions.map((decision) => decision.action === 'restart' && decision.recentExitCount))
      .toEqual([1, 2, 3, 4, 5, 5, 5]);
    expect(policy.crashLooping).toBe(true);
  });

  it('the crash loop never gives up, and ends only when a run lasts 30 s', () => {
    const policy = new RestartPolicy();
    runs(policy, [100, 100, 100, 100, 100]);
    // Slow crashes inside the loop keep it going: the replica never proved it can stay up.
    const slow = runs(policy, Array.from({ length: 20 }, () => 29_000));
    expect(slow.every((decision) => decision.action === 'restart')).toBe(true);
    expect(delays(slow)).toEqual(Array.from({ length: 20 }, () => 10_000));
    expect(policy.crashLooping).toBe(true);
    const recovered = runs(policy, [30_000, 100]);
    expect(delays(recovered)).toEqual([250, 500]);
    expect(recovered.map((decision) => decision.action === 'restart' && decision.crashLoop))
      .toEqual([null, null]);
    expect(policy.crashLooping).toBe(false);
  });

  it('exits older than the window do not count toward a crash loop', () => {
    const options = { ...RESTART_POLICY_DEFAULTS, backoffMaxMs: 250 };
    // Runs of 15 s plus 250 ms: the fifth exit comes 61 s after the first, which has left the
    // window. Runs of 14 s put five exits inside one minute.
    const spread = runs(new RestartPolicy(options), Array.from({ length: 8 }, () => 15_000));
    expect(spread.map((decision) => decision.action === 'restart' && decision.recentExitCount))
      .toEqual([1, 2, 3, 4, 4, 4, 4, 4]);
    expect(spread.every((decision) => decision.action === 'restart' && decision.crashLoop === null))
      .toBe(true);
    const dense = runs(new RestartPolicy(options), Array.from({ length: 5 }, () => 14_000));
    expect(dense.at(-1)).toMatchObject({ action: 'restart', crashLoop: 'entered' });
  });

  it('status 2 at the first start stops everything; later, 2 is an exit like any other', () => {
    const invalid = { code: 2, signal: null } as const;
    const first = runs(new RestartPolicy(), [100], invalid);
    const reason = 'invalid configuration at its first start';
    expect(first).toEqual([{ action: 'stop_all', reason }]);
    const afterGoodRun = new RestartPolicy();
    runs(afterGoodRun, [5_000]);
    expect(runs(afterGoodRun, [100], invalid)).toMatchObject([{ action: 'restart', delayMs: 500 }]);
    // Any other status at the first start is restarted: a crash there may well be transient.
    expect(runs(new RestartPolicy(), [100], { code: 1, signal: null }))
      .toMatchObject([{ action: 'restart', delayMs: 250 }]);
  });

  it('refuses an exit without a start, a double start, and nonsensical options', () => {
    const policy = new RestartPolicy();
    expect(() => policy.onExit(0, KILLED)).toThrow(/an exit without a start/);
    policy.onStart(0);
    expect(() => policy.onStart(1)).toThrow(/started twice/);
    expect(() => new RestartPolicy({ ...RESTART_POLICY_DEFAULTS, backoffMaxMs: 100 }))
      .toThrow(/backoffMaxMs/);
    expect(() => new RestartPolicy({ ...RESTART_POLICY_DEFAULTS, crashLoopExits: 1 }))
      .toThrow(/crashLoopExits/);
  });
});

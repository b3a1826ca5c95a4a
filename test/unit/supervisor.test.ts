/**
 * `vrmeta dev`'s supervisor with fake processes and a fake clock: a replica that exits is
 * restarted alone, on the policy's schedule; a crash loop is named with the replica, its data
 * directory and its last lines; stopping cancels pending restarts, signals every live replica and
 * finishes only when none is left; invalid configuration at the first start stops everything.
 */
import { describe, expect, it } from 'vitest';
import type { ChildExit } from '../../src/node/restart-policy.js';
import {
  Supervisor,
  TAIL_LINES_MAX,
  type ChildCallbacks,
  type SupervisedProcess,
  type SupervisorHost,
} from '../../src/node/supervisor.js';

interface FakeProcess {
  readonly index: number;
  readonly pid: number;
  readonly callbacks: ChildCallbacks;
  readonly signals: NodeJS.Signals[];
  alive: boolean;
}

interface FakeTimer {
  readonly atMs: number;
  readonly run: () => void;
  cleared: boolean;
}

/** A host whose clock moves only when told, whose processes exit only when told. */
class FakeHost implements SupervisorHost {
  nowMsValue = 0;
  nextPid = 100;
  readonly processes: FakeProcess[] = [];
  readonly timers: FakeTimer[] = [];
  readonly logs: { index: number; message: string }[] = [];

  spawn(index: number, callbacks: ChildCallbacks): SupervisedProcess {
    const pid = this.nextPid++;
    const process: FakeProcess = { index, pid, callbacks, signals: [], alive: true };
    this.processes.push(process);
    return { pid: process.pid, kill: (signal) => void process.signals.push(signal) };
  }

  log(index: number, message: string): void {
    this.logs.push({ index, message });
  }

  nowMs(): number {
    return this.nowMsValue;
  }

  setTimer(run: () => void, delayMs: number): FakeTimer {
    const timer = { atMs: this.nowMsValue + delayMs, run, cleared: false };
    this.timers.push(timer);
    return timer;
  }

  clearTimer(timer: unknown): void {
    (timer as FakeTimer).cleared = true;
  }

  /** Moves the clock forward, firing the timers that come due, in order. */
  advance(ms: number): void {
    const endMs = this.nowMsValue + ms;
    for (;;) {
      const due = this.timers
        .filter((timer) => !timer.cleared && timer.atMs <= endMs)
        .sort((a, b) => a.atMs - b.atMs)[0];
      if (due === undefined) break;
      this.nowMsValue = due.atMs;
      due.cleared = true;
      due.run();
    }
    this.nowMsValue = endMs;
  }

  pendingTimers(): number {
    return this.timers.filter((timer) => !timer.cleared).length;
  }

  live(index?: number): FakeProcess[] {
    return this.processes.filter((p) => p.alive && (index === undefined || p.index === index));
  }

  exit(process: FakeProcess, exit: ChildExit): void {
    expect(process.alive).toBe(true);
    process.alive = false;
    process.callbacks.exit(exit);
  }

  /** Every live process exits the way a replica does on the signal it was sent. */
  exitSignalled(): void {
    for (const process of this.live()) {
      if (process.signals.length > 0) this.exit(process, { code: 0, signal: null });
    }
  }
}

const KILLED: ChildExit = { code: null, signal: 'SIGKILL' };
const DATA_DIRS = ['data/replica-0', 'data/replica-1', 'data/replica-2'];

function started(): { host: FakeHost; supervisor: Supervisor } {
  const host = new FakeHost();
  const supervisor = new Supervisor(host, { dataDirs: DATA_DIRS });
  supervisor.start();
  expect(host.live()).toHaveLength(3);
  return { host, supervisor };
}

async function settled(promise: Promise<number>): Promise<number | 'pending'> {
  const pending = new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')));
  return Promise.race([promise, pending]);
}

describe('supervisor', () => {
  it('a replica that exits is logged and restarted alone, with its pid, after the backoff', () => {
    const { host, supervisor } = started();
    const [victim, ...others] = host.live();
    host.advance(5_000);
    host.exit(victim!, KILLED);
    expect(host.logs.at(-1)).toEqual({
      index: 0,
      message: 'exited (SIGKILL, pid 100, up 5.0 s); restarting in 250 ms (restart 1)',
    });
    expect(supervisor.pids()).toEqual([null, 101, 102]);
    host.advance(249);
    expect(host.live(0)).toHaveLength(0);
    host.advance(1);
    expect(supervisor.pids()).toEqual([103, 101, 102]);
    expect(host.logs.at(-1)).toEqual({ index: 0, message: 'started (pid 103, restart 1)' });
    // The others were never signalled.
    expect(others.every((process) => process.alive && process.signals.length === 0)).toBe(true);
    // Any exit is restarted: a clean one too.
    host.exit(host.live(0)[0]!, { code: 0, signal: null });
    host.advance(500);
    expect(host.live(0)).toHaveLength(1);
  });

  it('a crash loop names the replica, its data dir and its last lines, and keeps retrying', () => {
    const { host } = started();
    for (let round = 0; round < 6; round++) {
      const process = host.live(1)[0]!;
      for (let line = 0; line < TAIL_LINES_MAX + 3; line++) {
        process.callbacks.line(`round ${round} line ${line}`);
      }
      host.exit(process, { code: 1, signal: null });
      host.advance(10_000);
    }
    const loops = host.logs.filter((log) => log.message.includes('crash-looping'));
    expect(loops).toHaveLength(1);
    const message = loops[0]!.message;
    expect(loops[0]!.index).toBe(1);
    expect(message).toContain('replica 1 is crash-looping: 5 exits within 60 s');
    expect(message).toContain('(data dir data/replica-1)');
    expect(message).toContain('keeps being restarted every 10 s');
    // The last lines of the run that just died, and only those.
    const kept = message.split('\n').filter((line) => line.startsWith('  | '));
    const expected = Array.from({ length: TAIL_LINES_MAX }, (_, i) => `  | round 4 line ${i + 3}`);
    expect(kept).toEqual(expected);
    expect(host.live(1)).toHaveLength(1);
  });

  it('SIGINT cancels pending restarts, signals the live, ends when none is left', async () => {
    const { host, supervisor } = started();
    host.exit(host.live(2)[0]!, KILLED);
    expect(host.pendingTimers()).toBe(1);
    supervisor.stop('SIGINT');
    // Only the stop's own SIGKILL deadline is pending; the restart was cancelled.
    expect(host.pendingTimers()).toBe(1);
    expect(host.live().map((process) => process.signals)).toEqual([['SIGINT'], ['SIGINT']]);
    host.advance(60_000 - 1);
    // Past the grace: whatever ignored SIGINT is SIGKILLed, and nothing was restarted.
    expect(host.live().map((process) => process.signals)).toEqual([
      ['SIGINT', 'SIGKILL'],
      ['SIGINT', 'SIGKILL'],
    ]);
    expect(host.live(2)).toHaveLength(0);
    expect(await settled(supervisor.done)).toBe('pending');
    for (const process of host.live()) host.exit(process, KILLED);
    expect(await settled(supervisor.done)).toBe(1);
    expect(host.pendingTimers()).toBe(0);
    expect(host.processes).toHaveLength(3);
  });

  it('a clean stop exits 0; an exit during the stop is never restarted', async () => {
    const { host, supervisor } = started();
    supervisor.stop('SIGTERM');
    // A replica whose shutdown failed makes the stop unclean.
    host.exit(host.live(0)[0]!, { code: 1, signal: null });
    host.exitSignalled();
    expect(await settled(supervisor.done)).toBe(1);
    const clean = started();
    clean.supervisor.stop('SIGTERM');
    clean.host.exitSignalled();
    expect(await settled(clean.supervisor.done)).toBe(0);
    clean.host.advance(60_000);
    expect(clean.host.processes).toHaveLength(3);
    expect(clean.host.pendingTimers()).toBe(0);
  });

  it('a second stop SIGKILLs at once what is still running', () => {
    const { host, supervisor } = started();
    supervisor.stop('SIGINT');
    supervisor.stop('SIGINT');
    expect(host.live().map((process) => process.signals)).toEqual([
      ['SIGINT', 'SIGKILL'],
      ['SIGINT', 'SIGKILL'],
      ['SIGINT', 'SIGKILL'],
    ]);
  });

  it('status 2 at the first start stops the cluster with exit 2 and the reason', async () => {
    const { host, supervisor } = started();
    host.exit(host.live(1)[0]!, { code: 2, signal: null });
    expect(host.logs.at(-1)!.message).toMatch(
      /^exited \(code 2, pid 101, up 0\.0 s\): invalid configuration at its first start;/,
    );
    expect(host.logs.at(-1)!.message).toContain('restarting cannot help, stopping the cluster');
    expect(host.live().map((process) => process.signals)).toEqual([['SIGTERM'], ['SIGTERM']]);
    host.exitSignalled();
    expect(await settled(supervisor.done)).toBe(2);
    host.advance(60_000);
    expect(host.processes).toHaveLength(3);
  });
});

/**
 * Keeps `vrmeta dev`'s replica processes running: a replica that exits while the cluster runs is
 * logged and started again with the same arguments, ports and data directory (it recovers from
 * its WAL and superblock and catches up from its peers), on the schedule of restart-policy.ts.
 * The other replicas are never touched, so the cluster keeps serving with a quorum.
 *
 * Stopping (Ctrl-C, SIGTERM, or a replica's invalid configuration) cancels every pending restart
 * first, so no replica is started once stopping began, then signals every live replica and
 * resolves `done` only when none is left: SIGKILL after `stopGraceMs`, or at once on a second
 * stop, so an impatient second Ctrl-C never leaves a replica behind.
 *
 * Processes, the clock, timers and output come through `SupervisorHost`, so the unit tests run
 * every path with fake processes and a fake clock.
 */
import { assert } from '../stdx/assert.js';
import { RingBuffer } from '../stdx/ring-buffer.js';
import {
  RESTART_POLICY_DEFAULTS,
  RestartPolicy,
  EXIT_INVALID_CONFIGURATION,
  type ChildExit,
  type RestartPolicyOptions,
} from './restart-policy.js';

/** Lines of a replica's latest run kept for the crash-loop message (the rest were printed). */
export const TAIL_LINES_MAX = 10;
/** A kept line is cut to this many characters: one runaway line must not flood the message. */
export const TAIL_LINE_CHARS_MAX = 500;
/** How long a replica may take to shut down after the stop signal before it is SIGKILLed. */
export const STOP_GRACE_MS = 10_000;

export interface SupervisedProcess {
  /** undefined when the spawn failed (an exit follows). */
  readonly pid: number | undefined;
  kill(signal: NodeJS.Signals): void;
}

export interface ChildCallbacks {
  /** A line the replica printed (stdout or stderr), as it was shown. */
  line(text: string): void;
  /** Once per process, after its output has ended. */
  exit(exit: ChildExit): void;
}

export type TimerHandle = unknown;

export interface SupervisorHost {
  spawn(index: number, callbacks: ChildCallbacks): SupervisedProcess;
  /** One message about replica `index`. */
  log(index: number, message: string): void;
  nowMs(): number;
  setTimer(run: () => void, delayMs: number): TimerHandle;
  clearTimer(timer: TimerHandle): void;
}

export interface SupervisorOptions {
  /** One per replica, in replica order. */
  readonly dataDirs: readonly string[];
  readonly policy?: RestartPolicyOptions;
  readonly stopGraceMs?: number;
}

/** Why stopping began: a signal the user sent, or a replica whose configuration is invalid. */
type StopCause =
  | { readonly kind: 'signal'; readonly signal: NodeJS.Signals }
  | { readonly kind: 'fatal' };

interface Slot {
  readonly index: number;
  readonly dataDir: string;
  readonly policy: RestartPolicy;
  /** The live process; null while down. */
  process: SupervisedProcess | null;
  /** Bumped per spawn: callbacks of an earlier run are ignored. */
  generation: number;
  /** The pending restart; only while down and not stopping. */
  restartTimer: TimerHandle | null;
  readonly tail: RingBuffer<string>;
}

export function describeExit(exit: ChildExit): string {
  if (exit.signal !== null) return exit.signal;
  return exit.code === null ? 'spawn failed' : `code ${exit.code}`;
}

export class Supervisor {
  readonly done: Promise<number>;
  readonly #host: SupervisorHost;
  readonly #slots: Slot[];
  readonly #stopGraceMs: number;
  #started = false;
  #stopCause: StopCause | null = null;
  #killTimer: TimerHandle | null = null;
  /** Replicas that did not stop cleanly on the stop signal (failed, or were SIGKILLed). */
  #uncleanStopCount = 0;
  #resolveDone: (code: number) => void = () => {};

  constructor(host: SupervisorHost, options: SupervisorOptions) {
    assert(options.dataDirs.length > 0, 'Supervisor: at least one replica');
    this.#host = host;
    this.#stopGraceMs = options.stopGraceMs ?? STOP_GRACE_MS;
    this.#slots = options.dataDirs.map((dataDir, index) => ({
      index,
      dataDir,
      policy: new RestartPolicy(options.policy ?? RESTART_POLICY_DEFAULTS),
      process: null,
      generation: 0,
      restartTimer: null,
      tail: new RingBuffer<string>(TAIL_LINES_MAX),
    }));
    this.done = new Promise<number>((resolve) => (this.#resolveDone = resolve));
  }

  get stopping(): boolean {
    return this.#stopCause !== null;
  }

  /** Pids of the live replicas, by replica index (null while one is down). */
  pids(): (number | null)[] {
    return this.#slots.map((slot) => slot.process?.pid ?? null);
  }

  start(): void {
    assert(!this.#started, 'Supervisor: started twice');
    this.#started = true;
    for (const slot of this.#slots) this.#spawn(slot);
  }

  /** Stops every replica with `signal`; a second call SIGKILLs whatever is still running. */
  stop(signal: NodeJS.Signals): void {
    if (this.#stopCause !== null) {
      this.#killAll('stopped again');
      return;
    }
    this.#beginStop({ kind: 'signal', signal }, signal);
  }

  /** Synchronous last resort (the process is exiting): SIGKILL every live replica. */
  killAllNow(): void {
    for (const slot of this.#slots) slot.process?.kill('SIGKILL');
  }

  #beginStop(cause: StopCause, signal: NodeJS.Signals): void {
    assert(this.#stopCause === null);
    this.#stopCause = cause;
    for (const slot of this.#slots) {
      if (slot.restartTimer === null) continue;
      this.#host.clearTimer(slot.restartTimer);
      slot.restartTimer = null;
    }
    for (const slot of this.#slots) slot.process?.kill(signal);
    this.#killTimer = this.#host.setTimer(() => {
      this.#killTimer = null;
      this.#killAll(`still running ${this.#stopGraceMs} ms after ${signal}`);
    }, this.#stopGraceMs);
    this.#finishIfStopped();
  }

  #killAll(why: string): void {
    for (const slot of this.#slots) {
      if (slot.process === null) continue;
      this.#host.log(slot.index, `${why}: SIGKILL (pid ${slot.process.pid ?? '?'})`);
      slot.process.kill('SIGKILL');
    }
  }

  #spawn(slot: Slot): void {
    assert(this.#stopCause === null, 'Supervisor: no replica is started while stopping');
    assert(slot.process === null && slot.restartTimer === null);
    slot.generation += 1;
    const generation = slot.generation;
    slot.tail.clear();
    slot.policy.onStart(this.#host.nowMs());
    slot.process = this.#host.spawn(slot.index, {
      line: (text) => {
        if (generation !== slot.generation) return;
        if (slot.tail.full) slot.tail.shift();
        const cut = text.length > TAIL_LINE_CHARS_MAX;
        slot.tail.push(cut ? `${text.slice(0, TAIL_LINE_CHARS_MAX)}…` : text);
      },
      exit: (exit) => this.#onExit(slot, generation, exit),
    });
    const restart = generation === 1 ? '' : `, restart ${generation - 1}`;
    this.#host.log(slot.index, `started (pid ${slot.process.pid ?? 'none'}${restart})`);
  }

  #onExit(slot: Slot, generation: number, exit: ChildExit): void {
    if (generation !== slot.generation || slot.process === null) return;
    const pid = slot.process.pid ?? 'none';
    const nowMs = this.#host.nowMs();
    const uptimeS = (slot.policy.uptimeMs(nowMs) / 1000).toFixed(1);
    slot.process = null;
    if (this.#stopCause !== null) {
      this.#onStoppedExit(slot, pid, exit);
      return;
    }
    const decision = slot.policy.onExit(nowMs, exit);
    const what = `exited (${describeExit(exit)}, pid ${pid}, up ${uptimeS} s)`;
    if (decision.action === 'stop_all') {
      this.#host.log(slot.index, `${what}: ${decision.reason}; restarting cannot help, ` +
        'stopping the cluster');
      this.#beginStop({ kind: 'fatal' }, 'SIGTERM');
      return;
    }
    this.#host.log(slot.index, `${what}; restarting in ${decision.delayMs} ms ` +
      `(restart ${decision.restartCount})`);
    if (decision.crashLoop === 'entered') this.#logCrashLoop(slot, decision.recentExitCount);
    slot.restartTimer = this.#host.setTimer(() => {
      slot.restartTimer = null;
      this.#spawn(slot);
    }, decision.delayMs);
  }

  #onStoppedExit(slot: Slot, pid: number | string, exit: ChildExit): void {
    const cause = this.#stopCause;
    assert(cause !== null);
    const clean = exit.code === 0 || (cause.kind === 'signal' && exit.signal === cause.signal);
    if (!clean) this.#uncleanStopCount += 1;
    this.#host.log(slot.index, `stopped (${describeExit(exit)}, pid ${pid})`);
    this.#finishIfStopped();
  }

  #logCrashLoop(slot: Slot, recentExitCount: number): void {
    const options = slot.policy.options;
    const lines = [...slot.tail];
    this.#host.log(slot.index, [
      `replica ${slot.index} is crash-looping: ${recentExitCount} exits within ` +
        `${options.crashLoopWindowMs / 1000} s (data dir ${slot.dataDir}).`,
      `It keeps being restarted every ${options.backoffMaxMs / 1000} s while the other ` +
        'replicas serve; fix the cause (see its last lines) or stop the cluster with Ctrl-C.',
      lines.length === 0 ? 'It printed nothing before its last exit.' : 'Its last lines:',
      ...lines.map((line) => `  | ${line}`),
    ].join('\n'));
  }

  #finishIfStopped(): void {
    const cause = this.#stopCause;
    if (cause === null || this.#slots.some((slot) => slot.process !== null)) return;
    assert(this.#slots.every((slot) => slot.restartTimer === null));
    if (this.#killTimer !== null) {
      this.#host.clearTimer(this.#killTimer);
      this.#killTimer = null;
    }
    const code =
      cause.kind === 'fatal' ? EXIT_INVALID_CONFIGURATION : this.#uncleanStopCount === 0 ? 0 : 1;
    this.#resolveDone(code);
  }
}

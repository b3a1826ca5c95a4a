/**
 * When `vrmeta dev` restarts a replica that exited, as a pure function of the times it is told:
 * no clock or timer of its own, so the unit tests drive it with plain numbers.
 *
 * Backoff: the first restart waits `backoffMinMs` and each further one doubles it up to
 * `backoffMaxMs`. A replica that crashed on a transient fault (a kill -9, the OOM killer) is back
 * within a fraction of a second, and one that crashes at boot every time costs the machine one
 * boot every `backoffMaxMs` instead of a busy loop.
 *
 * Stable: a run of `stableUptimeMs` or longer proves the last restart worked, so the exit that
 * ends it starts over at `backoffMinMs` with a clean exit history.
 *
 * Crash loop: `crashLoopExits` exits within `crashLoopWindowMs` (with no stable run between)
 * is a replica that cannot stay up. It is named once, loudly, and from then on waits the capped
 * backoff every time until a stable run ends the loop. It is not given up on: the other replicas
 * keep serving either way, and what breaks a dev replica at boot (a port held by a stray process,
 * a full disk, a data directory being replaced by hand) is usually fixed by the person at the
 * terminal without restarting the whole cluster; giving up would make them do exactly that.
 *
 * Invalid configuration: exit status 2 from a replica's first run is a configuration error
 * (DESIGN.md §2.2). Every replica gets the same flags, so restarting cannot help and the whole
 * cluster stops with the replica's message. After a successful first run the flags are known to
 * be good, so a later 2 is treated like any other exit.
 */
import { assert } from '../stdx/assert.js';

export interface RestartPolicyOptions {
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
  readonly stableUptimeMs: number;
  readonly crashLoopExits: number;
  readonly crashLoopWindowMs: number;
}

export const RESTART_POLICY_DEFAULTS: RestartPolicyOptions = {
  backoffMinMs: 250,
  backoffMaxMs: 10_000,
  stableUptimeMs: 30_000,
  crashLoopExits: 5,
  crashLoopWindowMs: 60_000,
};

/** The exit status `vrmeta start` uses for invalid configuration (DESIGN.md §2.2). */
export const EXIT_INVALID_CONFIGURATION = 2;

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export type ExitDecision =
  | { readonly action: 'stop_all'; readonly reason: string }
  | {
      readonly action: 'restart';
      readonly delayMs: number;
      /** Restarts of this replica so far, this one included. */
      readonly restartCount: number;
      /** Exits within the crash-loop window, this one included. */
      readonly recentExitCount: number;
      /** `entered` on the exit that starts a crash loop, `ongoing` on every later one. */
      readonly crashLoop: 'entered' | 'ongoing' | null;
    };

export class RestartPolicy {
  readonly options: RestartPolicyOptions;
  /** Start of the current run; null while the replica is down. */
  #startedAtMs: number | null = null;
  /** Runs started so far; the first is the one whose status 2 means invalid configuration. */
  #startCount = 0;
  /** The delay before the next restart, in backoffMinMs..backoffMaxMs. */
  #backoffMs: number;
  /** Exit times within the window, oldest first; at most crashLoopExits entries. */
  readonly #exitTimesMs: number[] = [];
  #crashLooping = false;

  constructor(options: RestartPolicyOptions = RESTART_POLICY_DEFAULTS) {
    assert(options.backoffMinMs > 0, 'RestartPolicy: backoffMinMs is positive');
    assert(options.backoffMaxMs >= options.backoffMinMs, 'RestartPolicy: backoffMaxMs >= min');
    assert(options.stableUptimeMs > 0, 'RestartPolicy: stableUptimeMs is positive');
    assert(Number.isSafeInteger(options.crashLoopExits) && options.crashLoopExits >= 2,
      'RestartPolicy: crashLoopExits is an integer >= 2');
    assert(options.crashLoopWindowMs > 0, 'RestartPolicy: crashLoopWindowMs is positive');
    this.options = options;
    this.#backoffMs = options.backoffMinMs;
  }

  get running(): boolean {
    return this.#startedAtMs !== null;
  }

  get crashLooping(): boolean {
    return this.#crashLooping;
  }

  onStart(nowMs: number): void {
    assert(this.#startedAtMs === null, 'RestartPolicy: started twice without an exit');
    this.#startedAtMs = nowMs;
    this.#startCount += 1;
  }

  /** How long the current run has lasted (0 while down). */
  uptimeMs(nowMs: number): number {
    return this.#startedAtMs === null ? 0 : Math.max(0, nowMs - this.#startedAtMs);
  }

  onExit(nowMs: number, exit: ChildExit): ExitDecision {
    assert(this.#startedAtMs !== null, 'RestartPolicy: an exit without a start');
    const uptimeMs = this.uptimeMs(nowMs);
    this.#startedAtMs = null;
    if (this.#startCount === 1 && exit.code === EXIT_INVALID_CONFIGURATION) {
      return { action: 'stop_all', reason: 'invalid configuration at its first start' };
    }
    if (uptimeMs >= this.options.stableUptimeMs) {
      this.#backoffMs = this.options.backoffMinMs;
      this.#exitTimesMs.length = 0;
      this.#crashLooping = false;
    }
    const windowStartMs = nowMs - this.options.crashLoopWindowMs;
    while (this.#exitTimesMs.length > 0 && this.#exitTimesMs[0]! <= windowStartMs) {
      this.#exitTimesMs.shift();
    }
    this.#exitTimesMs.push(nowMs);
    if (this.#exitTimesMs.length > this.options.crashLoopExits) this.#exitTimesMs.shift();
    assert(this.#exitTimesMs.length <= this.options.crashLoopExits);
    const entered = !this.#crashLooping && this.#exitTimesMs.length >= this.options.crashLoopExits;
    if (entered) this.#crashLooping = true;
    const delayMs = this.#crashLooping ? this.options.backoffMaxMs : this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.options.backoffMaxMs);
    assert(delayMs >= this.options.backoffMinMs && delayMs <= this.options.backoffMaxMs);
    return {
      action: 'restart',
      delayMs,
      restartCount: this.#startCount,
      recentExitCount: this.#exitTimesMs.length,
      crashLoop: entered ? 'entered' : this.#crashLooping ? 'ongoing' : null,
    };
  }
}

/**
 * Reconnect backoff: exponential with a cap and jitter (TigerBeetle `Timeout.backoff`). The cap
 * bounds how long a healed link stays down; the jitter keeps replicas that lost a peer at the
 * same moment (the peer restarted) from redialling it in lockstep.
 */
import { assert } from '../stdx/assert.js';

export interface BackoffOptions {
  /** Delay before the first retry. */
  readonly delayMinMs: number;
  /** Cap on any delay. */
  readonly delayMaxMs: number;
  /** Fraction (0..1) of each delay that is randomised away: delay * (1 - jitter * random()). */
  readonly jitter: number;
}

/**
 * The cap is what a restarted replica waits, at worst, before a peer that dials it (the lower id
 * dials) reconnects: with 5 s, a wiped replica spent seconds unable to hear its second voucher
 * before state transfer could start (`vrmeta bench transfer`). One failed dial per second to a
 * peer that is down costs nothing.
 */
export const BACKOFF_DEFAULTS: BackoffOptions = { delayMinMs: 50, delayMaxMs: 1_000, jitter: 0.5 };

export function assertBackoffOptions(options: BackoffOptions): void {
  assert(Number.isFinite(options.delayMinMs) && options.delayMinMs >= 0, 'backoff: delayMinMs >= 0');
  assert(Number.isFinite(options.delayMaxMs) && options.delayMaxMs >= options.delayMinMs, 'backoff: delayMaxMs >= delayMinMs');
  assert(options.jitter >= 0 && options.jitter <= 1, 'backoff: jitter in 0..1');
}

/**
 * The delay before retry number `attempt` (0 for the first retry): min * 2^attempt, capped at
 * max, minus up to `jitter` of it. `random` returns a float in [0, 1).
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number): number {
  assert(Number.isSafeInteger(attempt) && attempt >= 0, 'backoff: attempt is a non-negative integer');
  // 2^30 * any sane minimum is past every cap; clamping the exponent keeps the product finite.
  const exponentialMs = Math.min(options.delayMaxMs, options.delayMinMs * 2 ** Math.min(attempt, 30));
  const sample = random();
  assert(sample >= 0 && sample < 1, 'backoff: random() in [0, 1)');
  const delayMs = Math.round(exponentialMs * (1 - options.jitter * sample));
  assert(delayMs >= 0 && delayMs <= options.delayMaxMs);
  return delayMs;
}

/**
 * A bound on Argon2id password verifications in flight (password login, change-password).
 *
 * Each verification costs ~20-50 ms of a thread and 19 MiB (Iggy's parameters, secrets.ts), and it
 * runs on libuv's thread pool (4 threads by default), the same pool the WAL's group-commit fsync
 * runs on. Unbounded, a flood of bogus logins (anyone can send them: login is public) fills the
 * pool and the CPU, the fsync of every write queues behind the hashes, and write latency grows
 * with the flood. So: at most VERIFY_CONCURRENCY_MAX run, at most VERIFY_QUEUE_MAX wait their
 * turn (first in, first out), and anything beyond is refused at once with a 429 and `retry-after`
 * (Iggy's error shape), without touching Argon2 at all. A legitimate login in a flood may be
 * refused and retried; the replica keeps serving writes.
 *
 * Bounding the threads, not the request rate, is deliberate: the cost is the hashing, whoever
 * asks, so no per-client bookkeeping (an attacker has many addresses) is needed to protect the
 * replica. What a bound cannot do is keep the flood from crowding out real logins; a rate limit
 * per source in front of the replica is the tool for that (README "Security").
 */
import { assert } from '../stdx/assert.js';
import { httpError, type HttpError } from './errors.js';

/**
 * Verifications running at once. One, measured (`vrmeta bench login-flood`, README "Security"):
 * on the 2-core reference machine two running verifications took both cores from three replicas
 * and doubled to quintupled the write p99 under 200 bogus logins/s; one kept it within 1.4x.
 * One verification is ~15 ms, so a replica still verifies ~60 logins per second.
 */
export const ARGON2_VERIFY_CONCURRENCY_MAX = 1;
/** Verifications waiting for a slot; one more is refused with a 429. */
export const ARGON2_VERIFY_QUEUE_MAX = 8;

export interface PasswordGateOptions {
  /** Running at once (>= 1). `Infinity` only for the login-flood benchmark's unbounded baseline. */
  readonly concurrencyMax: number;
  /** Waiting (>= 0). */
  readonly queueMax: number;
}

export const PASSWORD_GATE_DEFAULTS: PasswordGateOptions = Object.freeze({
  concurrencyMax: ARGON2_VERIFY_CONCURRENCY_MAX,
  queueMax: ARGON2_VERIFY_QUEUE_MAX,
});

export interface PasswordGateStats {
  readonly running: number;
  readonly queued: number;
  /** Refused at once because running and queued were full (for the life of the gate). */
  readonly refused: number;
  readonly completed: number;
}

export class PasswordGate {
  readonly #options: PasswordGateOptions;
  /** Waiters, oldest first; each resumes when a slot frees up. */
  readonly #queue: (() => void)[] = [];
  #running = 0;
  #refused = 0;
  #completed = 0;

  constructor(options: PasswordGateOptions = PASSWORD_GATE_DEFAULTS) {
    assert(options.concurrencyMax >= 1, 'password gate: concurrencyMax >= 1');
    assert(options.queueMax >= 0, 'password gate: queueMax >= 0');
    this.#options = options;
  }

  /**
   * Runs `verify` under the bound; throws the 429 HttpError at once, without calling it, when
   * `concurrencyMax` are running and `queueMax` are waiting.
   */
  async run<T>(verify: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#options.concurrencyMax) {
      if (this.#queue.length >= this.#options.queueMax) {
        this.#refused += 1;
        throw tooManyPasswordVerifications();
      }
      await new Promise<void>((resume) => this.#queue.push(resume));
      // The releasing run handed its slot over: #running was not decremented for us.
    } else {
      this.#running += 1;
    }
    assert(this.#running >= 1 && this.#running <= this.#options.concurrencyMax, 'password gate: running within the bound');
    try {
      return await verify();
    } finally {
      this.#completed += 1;
      const next = this.#queue.shift();
      // Hand the slot straight to the oldest waiter, so a newcomer cannot overtake the queue.
      if (next !== undefined) next();
      else this.#running -= 1;
    }
  }

  stats(): PasswordGateStats {
    return { running: this.#running, queued: this.#queue.length, refused: this.#refused, completed: this.#completed };
  }
}

/** Iggy's error shape, id = the status; `retry-after` as every retryable refusal (errors.ts). */
export function tooManyPasswordVerifications(): HttpError {
  return httpError(429, 'too_many_requests', 'too many password verifications in progress on this replica; retry later');
}

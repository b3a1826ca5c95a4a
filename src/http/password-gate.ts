/**
 * The one gate every credential check of both edges goes through (HTTP and the binary protocol:
 * password logins, personal-access-token logins, change-password): a bound on Argon2id
 * verifications in flight, and a per-user bound on the rate of logins that open sessions.
 *
 * Logins per user: every successful login (either kind of credential) takes a token from its
 * user's bucket (LOGINS_PER_USER_BURST, refilled at LOGINS_PER_USER_PER_SECOND); an empty bucket
 * refuses the login (HTTP 429 with `retry-after`; the binary protocol ends the session, as for
 * any failed login). A token login costs no Argon2, so without this one user could open sessions
 * as fast as the network carries logins, each a replicated Register: its own sessions churn
 * within its share of the client table (src/vsr/client-table.ts), and this keeps the churn from
 * loading the commit path too. The bucket is charged only after the credential verified, so a
 * stranger guessing a user's password cannot spend that user's logins.
 *
 * Each verification costs ~20-50 ms of a thread and 19 MiB (Iggy's parameters, secrets.ts), and it
 * runs on libuv's thread pool (4 threads by default), the same pool the WAL's group-commit fsync
 * runs on. Unbounded, a flood of bogus logins (anyone can send them: login is public) fills the
 * pool and the CPU, the fsync of every write queues behind the hashes, and write latency grows
 * with the flood. So: at most ARGON2_VERIFY_CONCURRENCY_MAX run, at most
 * ARGON2_VERIFY_STARTS_PER_SECOND_MAX start per second (the bound on the CPU they take), at most
 * ARGON2_VERIFY_QUEUE_MAX wait their turn (first in, first out), and anything beyond is refused
 * at once with a 429 and `retry-after` (Iggy's error shape), without touching Argon2 at all. A
 * legitimate login in a flood may be refused and retried; the replica keeps serving writes.
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
/**
 * Verifications started per second at most: with one running, a flood still kept a whole core
 * hashing (~65 verifications/s on the reference machine), which is half of a 2-core machine. At
 * 20 per second the hashing takes about a third of a core, and a replica still admits 1,200
 * password logins a minute (clients log in once per connection; PAT logins cost no Argon2).
 */
export const ARGON2_VERIFY_STARTS_PER_SECOND_MAX = 20;
/**
 * Logins one user may make at once: an application opening a pool of connections (the official
 * SDKs' tests and `bench cluster` open up to 64 at a time) is never refused.
 */
export const LOGINS_PER_USER_BURST = 256;
/** Logins per second one user keeps after its burst. */
export const LOGINS_PER_USER_PER_SECOND = 64;
/** Users whose login allowance is tracked (the state's user limit: one bucket each at most). */
export const LOGIN_BUCKETS_MAX = 1 << 16;

export interface PasswordGateOptions {
  /** Running at once (>= 1). `Infinity` only for the login-flood benchmark's unbounded baseline. */
  readonly concurrencyMax: number;
  /** Waiting (>= 0). */
  readonly queueMax: number;
  /** Verifications started per second at most (> 0); `Infinity` lifts the rate bound. */
  readonly startsPerSecondMax: number;
  /** Logins one user may make at once, and per second after (`Infinity` lifts the bound). */
  readonly loginsPerUserBurst?: number;
  readonly loginsPerUserPerSecond?: number;
}

export const PASSWORD_GATE_DEFAULTS: PasswordGateOptions = Object.freeze({
  concurrencyMax: ARGON2_VERIFY_CONCURRENCY_MAX,
  queueMax: ARGON2_VERIFY_QUEUE_MAX,
  startsPerSecondMax: ARGON2_VERIFY_STARTS_PER_SECOND_MAX,
});

/** Time for the rate bound; tests drive it by hand. */
export interface GateClock {
  nowMs(): number;
  /** Calls `fn` once, `delayMs` from now; must not keep the process alive. */
  schedule(fn: () => void, delayMs: number): void;
}

const REAL_CLOCK: GateClock = {
  nowMs: () => performance.now(),
  schedule: (fn, delayMs) => {
    setTimeout(fn, delayMs).unref();
  },
};

export interface PasswordGateStats {
  readonly running: number;
  readonly queued: number;
  /** Refused at once because running and queued were full (for the life of the gate). */
  readonly refused: number;
  readonly completed: number;
  /** Logins refused because their user's bucket was empty. */
  readonly loginsRefused: number;
}

export class PasswordGate {
  readonly #options: PasswordGateOptions;
  readonly #clock: GateClock;
  /** The spacing of starts the rate bound asks for (0 without one). */
  readonly #startSpacingMs: number;
  /** Waiters, oldest first; each resumes holding a slot (and its start time) handed over by #pump. */
  readonly #queue: (() => void)[] = [];
  #running = 0;
  /** The earliest time the next verification may start. */
  #nextStartMs = Number.NEGATIVE_INFINITY;
  #pumpScheduled = false;
  #refused = 0;
  #completed = 0;
  #loginsRefused = 0;
  readonly #loginBurst: number;
  readonly #loginRatePerMs: number;
  /** User id -> its login allowance; insertion order is the eviction order past the bound. */
  readonly #loginBuckets = new Map<number, { tokens: number; atMs: number }>();

  constructor(options: PasswordGateOptions = PASSWORD_GATE_DEFAULTS, clock: GateClock = REAL_CLOCK) {
    assert(options.concurrencyMax >= 1, 'password gate: concurrencyMax >= 1');
    assert(options.queueMax >= 0, 'password gate: queueMax >= 0');
    assert(options.startsPerSecondMax > 0, 'password gate: startsPerSecondMax > 0');
    this.#options = options;
    this.#clock = clock;
    this.#startSpacingMs = Number.isFinite(options.startsPerSecondMax) ? 1000 / options.startsPerSecondMax : 0;
    this.#loginBurst = options.loginsPerUserBurst ?? LOGINS_PER_USER_BURST;
    this.#loginRatePerMs = (options.loginsPerUserPerSecond ?? LOGINS_PER_USER_PER_SECOND) / 1000;
    assert(this.#loginBurst >= 1 && this.#loginRatePerMs > 0, 'password gate: login bounds > 0');
  }

  /**
   * A login that authenticated `userId` may open its session now: takes one of the user's
   * tokens, false (counted) when there is none. Call only once the credential verified.
   */
  admitLogin(userId: number): boolean {
    if (!Number.isFinite(this.#loginBurst)) return true;
    const nowMs = this.#clock.nowMs();
    let bucket = this.#loginBuckets.get(userId);
    if (bucket === undefined) {
      if (this.#loginBuckets.size >= LOGIN_BUCKETS_MAX) this.#loginBuckets.delete(this.#loginBuckets.keys().next().value!);
      bucket = { tokens: this.#loginBurst, atMs: nowMs };
      this.#loginBuckets.set(userId, bucket);
    }
    bucket.tokens = Math.min(this.#loginBurst, bucket.tokens + (nowMs - bucket.atMs) * this.#loginRatePerMs);
    bucket.atMs = nowMs;
    if (bucket.tokens < 1) {
      this.#loginsRefused += 1;
      return false;
    }
    bucket.tokens -= 1;
    return true;
  }

  /**
   * Runs `verify` under the bounds; throws the 429 HttpError at once, without calling it, when it
   * cannot start now and `queueMax` are already waiting. Waiters start first in first out.
   */
  async run<T>(verify: () => Promise<T>): Promise<T> {
    if (this.#queue.length === 0 && this.#running < this.#options.concurrencyMax && this.#clock.nowMs() >= this.#nextStartMs) {
      this.#start();
    } else {
      if (this.#queue.length >= this.#options.queueMax) {
        this.#refused += 1;
        throw tooManyPasswordVerifications();
      }
      await new Promise<void>((resume) => {
        this.#queue.push(resume);
        this.#pump();
      });
      // #pump started us: the slot and the start time were taken on our behalf.
    }
    assert(this.#running >= 1 && this.#running <= this.#options.concurrencyMax, 'password gate: running within the bound');
    try {
      return await verify();
    } finally {
      this.#completed += 1;
      this.#running -= 1;
      this.#pump();
    }
  }

  stats(): PasswordGateStats {
    return { running: this.#running, queued: this.#queue.length, refused: this.#refused, completed: this.#completed, loginsRefused: this.#loginsRefused };
  }

  #start(): void {
    this.#running += 1;
    this.#nextStartMs = this.#clock.nowMs() + this.#startSpacingMs;
  }

  /** Starts the oldest waiters while a slot and the rate allow; else waits for the rate (once). */
  #pump(): void {
    while (this.#queue.length > 0 && this.#running < this.#options.concurrencyMax) {
      const waitMs = this.#nextStartMs - this.#clock.nowMs();
      if (waitMs > 0) {
        if (!this.#pumpScheduled) {
          this.#pumpScheduled = true;
          this.#clock.schedule(() => {
            this.#pumpScheduled = false;
            this.#pump();
          }, waitMs);
        }
        return;
      }
      this.#start();
      this.#queue.shift()!();
    }
  }
}

/** A login refused by its user's bucket (`admitLogin`), in Iggy's error shape with a 429. */
export function tooManyLogins(): HttpError {
  return httpError(429, 'too_many_requests', 'too many logins of this user on this replica; retry later');
}

/** Iggy's error shape, id = the status; `retry-after` as every retryable refusal (errors.ts). */
export function tooManyPasswordVerifications(): HttpError {
  return httpError(429, 'too_many_requests', 'too many password verifications in progress on this replica; retry later');
}

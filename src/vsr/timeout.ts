/**
 * A timeout counted in ticks, with exponential backoff and jitter from the replica's seeded PRNG
 * (TigerBeetle's `Timeout`): after `attempts` consecutive firings the next deadline is
 * after * 2^min(attempts, 4), plus uniform jitter of up to the same again, so replicas that
 * timed out together do not retry in lockstep forever.
 */
import { assert } from '../stdx/assert.js';
import type { Prng } from '../stdx/prng.js';

export class Timeout {
  readonly name: string;
  readonly afterTicks: number;
  private ticking = false;
  private ticks = 0;
  private deadline: number;
  attempts = 0;

  constructor(name: string, afterTicks: number) {
    assert(afterTicks >= 1, 'a timeout waits at least one tick');
    this.name = name;
    this.afterTicks = afterTicks;
    this.deadline = afterTicks;
  }

  get running(): boolean {
    return this.ticking;
  }

  start(): void {
    this.ticking = true;
    this.ticks = 0;
    this.attempts = 0;
    this.deadline = this.afterTicks;
  }

  stop(): void {
    this.ticking = false;
    this.ticks = 0;
    this.attempts = 0;
  }

  /** Restart the wait without forgetting the attempts (a heartbeat arrived, progress was made). */
  reset(): void {
    assert(this.ticking, `reset of stopped timeout ${this.name}`);
    this.ticks = 0;
    this.attempts = 0;
    this.deadline = this.afterTicks;
  }

  /**
   * Fire within `ticks` from now unless reset first: evidence that what this timeout waits for
   * is gone (its connection closed) arrived before the timeout itself.
   */
  expedite(ticks: number): void {
    assert(this.ticking, `expedite of stopped timeout ${this.name}`);
    assert(Number.isInteger(ticks) && ticks >= 0, 'expedite by whole ticks');
    this.deadline = Math.min(this.deadline, this.ticks + ticks);
  }

  /** Ticks left before the deadline (0 once it passed). */
  get remaining(): number {
    return Math.max(0, this.deadline - this.ticks);
  }

  /** Schedule the next deadline after a firing, with backoff and jitter. */
  backoff(prng: Prng): void {
    assert(this.ticking, `backoff of stopped timeout ${this.name}`);
    this.attempts += 1;
    const base = this.afterTicks * 2 ** Math.min(this.attempts, 4);
    this.ticks = 0;
    this.deadline = base + prng.int(base + 1);
  }

  tick(): void {
    if (this.ticking) this.ticks += 1;
  }

  /** True once the deadline passed; the owner must `reset`, `backoff` or `stop` it. */
  fired(): boolean {
    return this.ticking && this.ticks >= this.deadline;
  }
}

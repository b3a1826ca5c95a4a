/**
 * One replica-wide budget for the bytes client connections make the process hold: request
 * frames being received (their body buffers) and replies written but not yet taken by the kernel.
 * Per-connection bounds alone do not bound the process: 10,000 connections at a per-connection
 * 17 MiB are 170 GiB, and twenty unauthenticated ones once added 214 MiB.
 *
 * A new buffer is taken only when the budget has room for it (`reserve`); a reply already built
 * is always sent (`charge`: refusing it would lose an answer the client waits for) and counts
 * against the next request, which the connection refuses while the budget is spent (`spent`),
 * with a retryable error, before doing any work for it. So the total stays within the budget
 * plus at most one reply per connection.
 */
import { assert } from '../stdx/assert.js';

/** Connection buffers of the client port together, unless configured. */
export const CLIENT_BUFFERS_SIZE_MAX_DEFAULT = 128 * 1024 * 1024;

export class BufferBudget {
  readonly sizeMax: number;
  #used = 0;
  #refusals = 0;

  constructor(sizeMax: number) {
    assert(Number.isSafeInteger(sizeMax) && sizeMax > 0, 'buffer budget: sizeMax > 0');
    this.sizeMax = sizeMax;
  }

  get used(): number {
    return this.#used;
  }

  /** Reservations refused and requests turned away while spent. */
  get refusals(): number {
    return this.#refusals;
  }

  /** Takes `size` bytes if they fit; false (counted) when they do not. */
  reserve(size: number): boolean {
    assert(size >= 0, 'buffer budget: a size');
    if (this.#used + size > this.sizeMax) {
      this.#refusals += 1;
      return false;
    }
    this.#used += size;
    return true;
  }

  /** Takes `size` bytes whether or not they fit (a reply already built). */
  charge(size: number): void {
    assert(size >= 0, 'buffer budget: a size');
    this.#used += size;
  }

  release(size: number): void {
    assert(size >= 0 && size <= this.#used, 'buffer budget: releases what it took');
    this.#used -= size;
  }

  /** No room for new work: a request arriving now is refused (counted). */
  refuseIfSpent(): boolean {
    if (this.#used < this.sizeMax) return false;
    this.#refusals += 1;
    return true;
  }
}

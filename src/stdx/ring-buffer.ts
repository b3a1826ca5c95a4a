/**
 * A fixed-capacity FIFO over a preallocated array (undici's `fixed-queue.js`, TigerBeetle's
 * `RingBuffer`). `Array.prototype.shift` is O(n) and reallocates; a send queue drained on every
 * tick must not be. The capacity is chosen once: a full buffer refuses `push` and the caller
 * decides what to drop and counts it (STYLE.md: every queue is bounded, overflow is explicit).
 */
import { assert } from './assert.js';

export class RingBuffer<T> {
  readonly capacity: number;
  readonly #items: (T | undefined)[];
  /** Index of the oldest item. */
  #headIndex = 0;
  #count = 0;

  constructor(capacity: number) {
    assert(Number.isSafeInteger(capacity) && capacity > 0, 'RingBuffer: capacity is a positive integer');
    this.capacity = capacity;
    this.#items = new Array<T | undefined>(capacity).fill(undefined);
  }

  get length(): number {
    return this.#count;
  }

  get empty(): boolean {
    return this.#count === 0;
  }

  get full(): boolean {
    return this.#count === this.capacity;
  }

  /** Appends `item`; false (and nothing changes) when the buffer is full. */
  push(item: T): boolean {
    if (this.#count === this.capacity) return false;
    this.#items[(this.#headIndex + this.#count) % this.capacity] = item;
    this.#count += 1;
    return true;
  }

  /** The oldest item, or undefined when empty. */
  peek(): T | undefined {
    return this.#count === 0 ? undefined : this.#items[this.#headIndex];
  }

  /** Removes and returns the oldest item, or undefined when empty. */
  shift(): T | undefined {
    if (this.#count === 0) return undefined;
    const item = this.#items[this.#headIndex];
    // Clear the slot so a drained buffer does not keep its items (frames of up to 1 MiB) alive.
    this.#items[this.#headIndex] = undefined;
    this.#headIndex = (this.#headIndex + 1) % this.capacity;
    this.#count -= 1;
    return item;
  }

  clear(): void {
    this.#items.fill(undefined);
    this.#headIndex = 0;
    this.#count = 0;
  }

  /** Oldest to newest. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let offset = 0; offset < this.#count; offset++) {
      yield this.#items[(this.#headIndex + offset) % this.capacity] as T;
    }
  }
}

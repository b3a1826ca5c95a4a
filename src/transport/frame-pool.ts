/**
 * Reused buffers for the frames of a state transfer's chunks on the receiving replica, and (a
 * second pool) for the chunks a serving replica reads from its snapshot file: the storage reads a
 * chunk into one, the bus gives it back once the socket wrote it (`sentBodyPool`).
 *
 * A receiver that allocated a fresh 256 KiB frame per chunk paid for fresh memory on every chunk
 * (zeroing, and a page fault per 4 KiB the first time each page is touched) and left the garbage
 * collector one dead frame per chunk to find. With the pool, the stream decoder takes a chunk's
 * frame from here, and the frame's last user gives it back: the storage driver, once the chunk is
 * written to the transfer file (the core holds a chunk's body only until it submits that write).
 * A frame that is never given back (a chunk the core dropped: a duplicate, a damaged one, a
 * session that ended) is ordinary garbage; the pool allocates another.
 *
 * Bounded: at most `freeMax` free buffers are kept (the node sizes it to the core's bound on chunks
 * requested and not yet written). A buffer given back twice is a bug in the caller and asserts:
 * the second taker would share bytes with the first.
 */
import { assert } from '../stdx/assert.js';

export interface FramePoolCounters {
  /** Frames handed out. */
  taken: number;
  /** ... of which over a buffer given back earlier (no allocation). */
  reused: number;
  /** Buffers given back and kept for reuse. */
  kept: number;
}

export class FramePool {
  /** The largest frame served from the pool, in bytes (every buffer has this size). */
  readonly frameSizeMax: number;
  readonly freeMax: number;
  readonly counters: FramePoolCounters = { taken: 0, reused: 0, kept: 0 };

  /** Buffers this pool allocated: only those are taken back. */
  readonly #mine = new WeakSet<ArrayBuffer>();
  readonly #free: ArrayBuffer[] = [];
  /** Buffers in `#free` (a buffer given back twice asserts). */
  readonly #isFree = new WeakSet<ArrayBuffer>();

  constructor(frameSizeMax: number, freeMax: number) {
    assert(Number.isSafeInteger(frameSizeMax) && frameSizeMax > 0, 'frame pool: frameSizeMax > 0');
    assert(Number.isSafeInteger(freeMax) && freeMax > 0, 'frame pool: freeMax > 0');
    this.frameSizeMax = frameSizeMax;
    this.freeMax = freeMax;
  }

  /** Free buffers kept. */
  get freeCount(): number {
    return this.#free.length;
  }

  /**
   * A frame of `size` bytes (a view from offset 0 of a pooled buffer). Its bytes are whatever the
   * previous frame left: the caller overwrites all of them before anyone reads the frame.
   */
  take(size: number): Uint8Array {
    assert(Number.isSafeInteger(size) && size > 0 && size <= this.frameSizeMax, 'frame pool: size within frameSizeMax');
    this.counters.taken += 1;
    let buffer = this.#free.pop();
    if (buffer === undefined) {
      buffer = new ArrayBuffer(this.frameSizeMax);
      this.#mine.add(buffer);
    } else {
      this.#isFree.delete(buffer);
      this.counters.reused += 1;
    }
    return new Uint8Array(buffer, 0, size);
  }

  /**
   * Gives back the buffer under `bytes` (any view of a frame `take` returned): nothing may read or
   * hold a view of it any more. Buffers the pool did not allocate are ignored.
   */
  release(bytes: Uint8Array): void {
    const buffer = bytes.buffer;
    if (!(buffer instanceof ArrayBuffer) || !this.#mine.has(buffer)) return;
    assert(!this.#isFree.has(buffer), 'frame pool: a frame given back twice');
    if (this.#free.length >= this.freeMax) {
      // Not kept: forgotten, garbage once its last view is.
      this.#mine.delete(buffer);
      return;
    }
    this.#isFree.add(buffer);
    this.#free.push(buffer);
    this.counters.kept += 1;
  }
}

/**
 * Server-assigned ids with slab reuse: an insert takes the LOWEST id not in use (Iggy's
 * `IdSlab::vacant_key`). The next id depends only on the occupied set, never on the order of past
 * deletes, so a state rebuilt from a snapshot (which lists only live ids) allocates exactly as the
 * live state would: nothing about allocation needs to be snapshotted.
 *
 * Entries live in a dense array indexed by id, which is also what gives ascending iteration (the
 * snapshot's canonical order) for free. Free ids below the high-water mark sit in a min-heap.
 */
import { assert } from '../stdx/assert.js';

export class IdSlab<T> {
  /** Dense by id; `undefined` is a free slot below the high-water mark. */
  private readonly entries: (T | undefined)[] = [];
  /** Free ids below `entries.length`, as a binary min-heap. */
  private readonly free: number[] = [];
  private size = 0;
  /** Ids are `< idLimit`: the collection's `*_MAX`. */
  readonly idLimit: number;

  constructor(idLimit: number) {
    assert(
      Number.isSafeInteger(idLimit) && idLimit > 0 && idLimit <= 0x1_0000_0000,
      'id limit fits a u32 space',
    );
    this.idLimit = idLimit;
  }

  /** Rebuilds a slab from (id, value) pairs in any order; ids must be unique and in range. */
  static from<T>(idLimit: number, pairs: Iterable<readonly [number, T]>): IdSlab<T> {
    const slab = new IdSlab<T>(idLimit);
    for (const [id, value] of pairs) {
      // The messages are built only on failure (a restore rebuilds 100,000s of slabs at boot).
      if (!(Number.isInteger(id) && id >= 0 && id < idLimit)) {
        assert(false, `slab id ${id} within the id limit`);
      }
      while (slab.entries.length <= id) slab.entries.push(undefined);
      if (slab.entries[id] !== undefined) assert(false, `slab id ${id} is unique`);
      slab.entries[id] = value;
      slab.size += 1;
    }
    for (let id = 0; id < slab.entries.length; id++) {
      if (slab.entries[id] === undefined) slab.pushFree(id);
    }
    return slab;
  }

  get count(): number {
    return this.size;
  }

  /** The id the next insert takes; `idLimit` when the id space is exhausted. */
  vacantId(): number {
    return this.free.length > 0 ? this.free[0]! : this.entries.length;
  }

  isFull(): boolean {
    return this.vacantId() >= this.idLimit;
  }

  get(id: number): T | undefined {
    return this.entries[id];
  }

  has(id: number): boolean {
    return this.entries[id] !== undefined;
  }

  /** Inserts at `vacantId()` and returns it. The caller checks `isFull()` first. */
  insert(makeValue: (id: number) => T): T {
    assert(!this.isFull(), 'slab is not full');
    const id = this.free.length > 0 ? this.popFree() : this.entries.length;
    const value = makeValue(id);
    if (id === this.entries.length) this.entries.push(value);
    else this.entries[id] = value;
    this.size += 1;
    return value;
  }

  remove(id: number): T {
    const value = this.entries[id];
    assert(value !== undefined, `slab id ${id} is occupied`);
    // The slot stays below the high-water mark and joins the free heap; truncating a trailing
    // slot instead would give the same vacant id, but keeping one rule keeps the proof simple.
    this.entries[id] = undefined;
    this.size -= 1;
    this.pushFree(id);
    return value;
  }

  /** Live values, ids ascending. */
  *values(): IterableIterator<T> {
    for (const value of this.entries) if (value !== undefined) yield value;
  }

  /**
   * At most `limit` live values with ids `>= fromId`, ascending: a keyset page. It costs the
   * values returned plus the free slots skipped, never a walk from id 0, so a list read in
   * slices (or pages) costs O(list) in all.
   */
  page(fromId: number, limit: number): T[] {
    assert(Number.isSafeInteger(fromId) && fromId >= 0, 'page start is a non-negative id');
    assert(Number.isSafeInteger(limit) && limit >= 0, 'page limit is a non-negative count');
    const out: T[] = [];
    const entries = this.entries;
    for (let id = fromId; id < entries.length && out.length < limit; id++) {
      const value = entries[id];
      if (value !== undefined) out.push(value);
    }
    return out;
  }

  /** Live values, ids ascending, into a new array. */
  toArray(): T[] {
    const out: T[] = [];
    for (const value of this.entries) if (value !== undefined) out.push(value);
    return out;
  }

  private pushFree(id: number): void {
    const heap = this.free;
    heap.push(id);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (heap[parent]! <= id) break;
      heap[index] = heap[parent]!;
      index = parent;
    }
    heap[index] = id;
  }

  private popFree(): number {
    const heap = this.free;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      let index = 0;
      for (;;) {
        const left = 2 * index + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && heap[right]! < heap[left]! ? right : left;
        if (heap[child]! >= last) break;
        heap[index] = heap[child]!;
        index = child;
      }
      heap[index] = last;
    }
    return top;
  }
}

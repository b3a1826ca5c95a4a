/**
 * The partitions of one topic as a column, not one object per partition.
 *
 * Partition ids are dense, 0..count-1 (added at the top, deleted from the top), so the id is the
 * index and the only stored field is `createdAtUs`. The column is kept in the snapshot's own
 * encoding (snapshot-model.ts `TopicSnapshot.partitionsCreatedAtUs`: u64 little-endian, 8 bytes
 * per partition), so a checkpoint encodes it and a restore adopts it with one byte copy, and
 * 4.4 million partitions cost 35 MB instead of 4.4 million heap objects: a cluster at its
 * scale target holds that many, and per-object headers would dominate its heap.
 *
 * Invariants (checked by `invariants()`):
 * - `count <= countMax` and `count * 8 <= bytes.byteLength` (capacity); growth never allocates
 *   past countMax partitions, so a topic's column is bounded by its limit.
 * - Every stored value is an integer in [0, 2^53 - 1].
 * - While `shared`, bytes [0, count * 8) may be referenced by a snapshot (`column()`, or the
 *   decoded snapshot a restore adopted): the store copies before its next write (copy-on-write),
 *   so a snapshot never sees later adds and deletes.
 */
import { assert } from '../stdx/assert.js';
import { PARTITION_CREATED_AT_SIZE } from '../format/snapshot-model.js';
import {
  columnCount,
  columnCreatedAtUs,
  columnDecoded,
  columnFirstUnsafe,
} from '../format/partition-column.js';

export { columnCount, columnCreatedAtUs, columnDecoded, columnFirstUnsafe };

const TWO_POW_32 = 0x1_0000_0000;
/**
 * A new store's column: empty, never written (the first add grows into a buffer of its own), so
 * every store can share it; `adopt` replaces it without allocating one first.
 */
const EMPTY_BUFFER = new ArrayBuffer(0);
const EMPTY_BYTES = new Uint8Array(EMPTY_BUFFER);
const EMPTY_WORDS = new Uint32Array(EMPTY_BUFFER);
/** High word of Number.MAX_SAFE_INTEGER (2^53 - 1). */
const SAFE_HIGH_WORD_MAX = 0x1f_ffff;
/**
 * The first growth allocates at least this many slots, so single adds do not reallocate each time.
 */
const CAPACITY_MIN = 4;

// The column is little-endian and read through a Uint32Array, which uses the platform's order.
// Every platform Node and WASM run on here is little-endian; a big-endian one must not misread it.
assert(
  new Uint8Array(new Uint32Array([1]).buffer)[0] === 1,
  'the partition column needs a little-endian platform',
);

/** A partition as the stats registry keys it (an id and its incarnation). Built on demand. */
export interface PartitionRef {
  readonly id: number;
  readonly createdAtUs: number;
}

export class PartitionStore {
  /** The most partitions this store may hold (MetadataLimits.partitionsPerTopicMax). */
  readonly countMax: number;
  private bytes: Uint8Array;
  /** The same memory as `bytes`: words [2i, 2i + 1] are partition i's (low, high) halves. */
  private words: Uint32Array;
  private size = 0;
  private shared = false;

  constructor(countMax: number) {
    assert(
      Number.isSafeInteger(countMax) && countMax >= 0,
      'partition countMax is a non-negative integer',
    );
    this.countMax = countMax;
    this.bytes = EMPTY_BYTES;
    this.words = EMPTY_WORDS;
  }

  /**
   * A store over a decoded snapshot column, without a copy when the bytes are 4-byte aligned (a
   * decoded column is its own buffer): shared from the start, so the first write copies and the
   * snapshot it came from stays intact. The caller validated the column (length multiple of 8,
   * values <= 2^53 - 1, count <= countMax): a violation here is a bug, asserted.
   */
  static adopt(column: Uint8Array, countMax: number): PartitionStore {
    assert(
      column.byteLength % PARTITION_CREATED_AT_SIZE === 0,
      'a partition column holds whole u64 values',
    );
    const store = new PartitionStore(countMax);
    const count = column.byteLength / PARTITION_CREATED_AT_SIZE;
    assert(count <= countMax, 'an adopted partition column is within countMax');
    const bytes = column.byteOffset % 4 === 0 ? column : column.slice();
    store.bytes = bytes;
    store.words = new Uint32Array(bytes.buffer, bytes.byteOffset, count * 2);
    store.size = count;
    store.shared = true;
    // The values were checked by the caller (one pass at restore is enough); `invariants()`
    // re-checks them on demand.
    return store;
  }

  get count(): number {
    return this.size;
  }

  /** Whether partition `id` exists (any number: out of range, fractional and NaN are absent). */
  has(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.size;
  }

  createdAtUs(id: number): number {
    assert(this.has(id), 'partition id is within the store');
    return this.words[id * 2 + 1]! * TWO_POW_32 + this.words[id * 2]!;
  }

  /** Partition `id` as a stats key, or undefined when it does not exist. One small object. */
  ref(id: number): PartitionRef | undefined {
    return this.has(id) ? { id, createdAtUs: this.createdAtUs(id) } : undefined;
  }

  /** Partitions in id order, without allocating per partition. */
  forEach(visit: (id: number, createdAtUs: number) => void): void {
    const words = this.words;
    const count = this.size;
    for (let id = 0; id < count; id++) visit(id, words[id * 2 + 1]! * TWO_POW_32 + words[id * 2]!);
  }

  /** Adds `count` partitions at the top (ids count..count+n-1), all created at `createdAtUs`. */
  append(count: number, createdAtUs: number): void {
    assert(
      Number.isSafeInteger(count) && count >= 0,
      'partitions to append is a non-negative integer',
    );
    assert(
      Number.isSafeInteger(createdAtUs) && createdAtUs >= 0,
      'partition createdAtUs is a non-negative safe integer',
    );
    assert(
      this.size + count <= this.countMax,
      'partitions stay within countMax (the caller checked the limit)',
    );
    if (count === 0) return;
    this.writable(this.size + count);
    const low = createdAtUs % TWO_POW_32;
    const high = (createdAtUs - low) / TWO_POW_32;
    const words = this.words;
    const end = (this.size + count) * 2;
    for (let word = this.size * 2; word < end; word += 2) {
      words[word] = low;
      words[word + 1] = high;
    }
    this.size += count;
  }

  /** Keeps the first `count` partitions (deletes from the top). */
  truncate(count: number): void {
    assert(
      Number.isSafeInteger(count) && count >= 0 && count <= this.size,
      'truncate keeps at most the partitions there are',
    );
    // No bytes change, so a snapshot sharing the column is unaffected; the next append copies.
    this.size = count;
  }

  /**
   * The column in the snapshot encoding (`count * 8` bytes), shared with the store until its
   * next write (copy-on-write): a checkpoint costs no copy, and only topics that change after it
   * pay one. Callers must not write into it.
   */
  column(): Uint8Array {
    this.shared = true;
    return this.bytes.subarray(0, this.size * PARTITION_CREATED_AT_SIZE);
  }

  invariants(): void {
    assert(this.size <= this.countMax, 'partition count within countMax');
    assert(
      this.size * PARTITION_CREATED_AT_SIZE <= this.bytes.byteLength,
      'partition count within capacity',
    );
    assert(
      this.words.buffer === this.bytes.buffer && this.words.byteOffset === this.bytes.byteOffset,
      'words view the column bytes',
    );
    for (let id = 0; id < this.size; id++) {
      const highWord = this.words[id * 2 + 1]!;
      assert(highWord <= SAFE_HIGH_WORD_MAX, 'partition createdAtUs is a safe integer');
    }
  }

  /** Room for `needed` partitions in bytes this store alone owns. */
  private writable(needed: number): void {
    const capacity = this.words.length / 2;
    if (!this.shared && needed <= capacity) return;
    // Doubling keeps repeated small adds amortised O(1); countMax bounds the allocation.
    const grown =
      needed <= capacity
        ? capacity
        : Math.min(this.countMax, Math.max(needed, capacity * 2, CAPACITY_MIN));
    const bytes = new Uint8Array(grown * PARTITION_CREATED_AT_SIZE);
    bytes.set(this.bytes.subarray(0, this.size * PARTITION_CREATED_AT_SIZE));
    this.bytes = bytes;
    this.words = new Uint32Array(bytes.buffer);
    this.shared = false;
  }
}

/**
 * A snapshot column from createdAtUs values (fixtures, tests and the bench build models with it).
 */
export function columnOf(createdAtUs: readonly number[]): Uint8Array {
  const column = new Uint8Array(createdAtUs.length * PARTITION_CREATED_AT_SIZE);
  const view = new DataView(column.buffer);
  createdAtUs.forEach((value, index) =>
    view.setBigUint64(index * PARTITION_CREATED_AT_SIZE, BigInt(value), true),
  );
  return column;
}

/**
 * Reading a topic's partition column (snapshot-model.ts `TopicSnapshot.partitionsCreatedAtUs`):
 * u64 little-endian created-at values, 8 bytes per partition, ids implicit.
 *
 * A leaf with no imports, beside the model it reads, so the encoders (src/kernels), the decoder
 * and the state (src/metadata) check the column's canonical rules with one implementation.
 */
import { PARTITION_CREATED_AT_SIZE } from './snapshot-model.js';

const TWO_POW_32 = 0x1_0000_0000;
/** Bits 53..63 of a u64 are bits 21..31 of its high word: zero for a value <= 2^53 - 1. */
const HIGH_WORD_UNSAFE_SHIFT = 21;
/** Columns shorter than this are checked byte by byte, without a Uint32Array view. */
const WORD_VIEW_COUNT_MIN = 64;
/** A Uint32Array reads the platform's byte order; the fast path needs little-endian. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * The columns this process's snapshot decoder copied out of a snapshot and proved canonical
 * (whole u64 values, each <= 2^53 - 1). A restore adopts them without walking them again: boot
 * and install check each column once. Nothing writes a decoded column (the state adopts it
 * copy-on-write), so the proof stays true; a column built in memory is not in the set and is
 * checked where it is restored.
 */
const decodedCanonical = new WeakSet<Uint8Array>();

/** Records that the decoder proved `column` canonical (snapshot-codec.ts only). */
export function markColumnDecoded(column: Uint8Array): void {
  decodedCanonical.add(column);
}

/** Whether `column` is a decoder's copy it proved canonical (then a restore need not re-check). */
export function columnDecoded(column: Uint8Array): boolean {
  return decodedCanonical.has(column);
}

/** Partitions in a column whose byte length is a multiple of PARTITION_CREATED_AT_SIZE. */
export function columnCount(column: Uint8Array): number {
  return Math.floor(column.byteLength / PARTITION_CREATED_AT_SIZE);
}

/** Partition `index`'s createdAtUs, from a column at any alignment (no allocation). */
export function columnCreatedAtUs(column: Uint8Array, index: number): number {
  const at = index * PARTITION_CREATED_AT_SIZE;
  return wordAt(column, at + 4) * TWO_POW_32 + wordAt(column, at);
}

/** The u32 little-endian at byte `at`. */
function wordAt(column: Uint8Array, at: number): number {
  const low = column[at]! | (column[at + 1]! << 8);
  return (low | (column[at + 2]! << 16) | (column[at + 3]! << 24)) >>> 0;
}

/**
 * The index of the first value above 2^53 - 1, or -1 when every value is a safe integer. The
 * common case (all safe) is one OR over the high words, through a Uint32Array view when the
 * column is 4-byte aligned (decoded columns are): millions of partitions in a few milliseconds;
 * only a column that holds a bad value is walked again to name it.
 * The caller checked the length is a multiple of PARTITION_CREATED_AT_SIZE.
 */
export function columnFirstUnsafe(column: Uint8Array): number {
  const count = columnCount(column);
  let anyUnsafe: boolean;
  // A view costs more than walking a small column's bytes (100,000 topics of 10 partitions).
  if (LITTLE_ENDIAN && column.byteOffset % 4 === 0 && count >= WORD_VIEW_COUNT_MIN) {
    // Word 2i + 1 is partition i's high half.
    const words = new Uint32Array(column.buffer, column.byteOffset, count * 2);
    let high = 0;
    for (let word = 1; word < words.length; word += 2) high |= words[word]!;
    anyUnsafe = high >>> HIGH_WORD_UNSAFE_SHIFT !== 0;
  } else {
    let top = 0;
    for (let at = 0; at < count * PARTITION_CREATED_AT_SIZE; at += PARTITION_CREATED_AT_SIZE) {
      top |= (column[at + 6]! & 0xe0) | column[at + 7]!;
    }
    anyUnsafe = top !== 0;
  }
  if (!anyUnsafe) return -1;
  for (let index = 0; index < count; index++) {
    const at = index * PARTITION_CREATED_AT_SIZE;
    if (column[at + 7] !== 0 || column[at + 6]! > 0x1f) return index;
  }
  return -1;
}

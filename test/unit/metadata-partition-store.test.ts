/**
 * The topic's partition column (partition-store.ts): dense ids, createdAtUs in the snapshot's own
 * u64 little-endian bytes, copy-on-write against the snapshots that share it, bounded by countMax.
 */
import { describe, expect, it } from 'vitest';
import { PartitionStore, columnCount, columnCreatedAtUs, columnFirstUnsafe, columnOf } from '../../src/metadata/partition-store.js';
import { AssertionError } from '../../src/stdx/assert.js';

const T = 1_796_071_487_896_000;

function contents(store: PartitionStore): [number, number][] {
  const out: [number, number][] = [];
  store.forEach((id, createdAtUs) => out.push([id, createdAtUs]));
  return out;
}

/** The column's values as u64 little-endian, read independently of the store. */
function u64s(column: Uint8Array): bigint[] {
  const view = new DataView(column.buffer, column.byteOffset, column.byteLength);
  return Array.from({ length: column.byteLength / 8 }, (_, index) => view.getBigUint64(index * 8, true));
}

describe('PartitionStore', () => {
  it('appends at the top with dense ids and reads createdAtUs back exactly, below and above 2^32', () => {
    const store = new PartitionStore(100);
    expect(store.count).toBe(0);
    store.append(3, T);
    store.append(0, 1);
    store.append(2, 4_294_967_295);
    store.append(1, Number.MAX_SAFE_INTEGER);
    store.append(1, 0);
    expect(store.count).toBe(7);
    expect(contents(store)).toEqual([
      [0, T],
      [1, T],
      [2, T],
      [3, 4_294_967_295],
      [4, 4_294_967_295],
      [5, Number.MAX_SAFE_INTEGER],
      [6, 0],
    ]);
    expect(store.createdAtUs(5)).toBe(Number.MAX_SAFE_INTEGER);
    expect(store.ref(3)).toEqual({ id: 3, createdAtUs: 4_294_967_295 });
    store.invariants();
  });

  it('reports absent ids (out of range, negative, fractional, NaN) without throwing', () => {
    const store = new PartitionStore(10);
    store.append(2, T);
    for (const id of [2, -1, 0.5, Number.NaN, 2 ** 32]) {
      expect(store.has(id)).toBe(false);
      expect(store.ref(id)).toBeUndefined();
    }
    expect(store.has(1)).toBe(true);
    expect(() => store.createdAtUs(2)).toThrow(AssertionError);
  });

  it('truncates from the top and appends again after it', () => {
    const store = new PartitionStore(10);
    store.append(4, T);
    store.truncate(1);
    expect(contents(store)).toEqual([[0, T]]);
    store.append(2, T + 9);
    expect(contents(store)).toEqual([
      [0, T],
      [1, T + 9],
      [2, T + 9],
    ]);
    store.truncate(0);
    expect(store.count).toBe(0);
    expect(() => store.truncate(1)).toThrow(AssertionError);
  });

  it('holds its column in the snapshot encoding: u64 little-endian, 8 bytes per partition', () => {
    const store = new PartitionStore(10);
    store.append(2, 0x0102_0304_0506);
    store.append(1, Number.MAX_SAFE_INTEGER);
    const column = store.column();
    expect(column.byteLength).toBe(24);
    expect(Buffer.from(column.subarray(0, 8)).toString('hex')).toBe('0605040302010000');
    expect(u64s(column)).toEqual([0x0102_0304_0506n, 0x0102_0304_0506n, 2n ** 53n - 1n]);
    expect(column).toEqual(columnOf([0x0102_0304_0506, 0x0102_0304_0506, Number.MAX_SAFE_INTEGER]));
    expect(columnCount(column)).toBe(3);
    expect(columnCreatedAtUs(column, 2)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('keeps a taken column unchanged through later truncates and appends (copy-on-write)', () => {
    const store = new PartitionStore(1_000);
    store.append(3, T);
    const taken = store.column();
    const before = u64s(taken);
    // Within the capacity: without copy-on-write this would overwrite partition 1 in place.
    store.truncate(1);
    store.append(1, T + 1);
    expect(u64s(taken)).toEqual(before);
    store.append(4, T + 1);
    expect(u64s(taken)).toEqual(before);
    expect(u64s(store.column())).toEqual([BigInt(T), ...Array.from({ length: 5 }, () => BigInt(T + 1))]);
    // A column taken and never followed by a write costs no copy: two takes share the bytes.
    const first = store.column();
    const second = store.column();
    expect(second.buffer).toBe(first.buffer);
  });

  it('adopts a decoded column without a copy and never writes into it', () => {
    const column = columnOf([T, T + 1, T + 2]);
    const original = column.slice();
    expect(PartitionStore.adopt(column, 10).column().buffer).toBe(column.buffer);
    const store = PartitionStore.adopt(column, 10);
    expect(store.count).toBe(3);
    // Within the adopted length: without copy-on-write this would write into the snapshot.
    store.truncate(1);
    store.append(1, 99);
    expect(column).toEqual(original);
    store.append(4, 7);
    expect(column).toEqual(original);
    expect(contents(store)).toEqual([
      [0, T],
      [1, 99],
      [2, 7],
      [3, 7],
      [4, 7],
      [5, 7],
    ]);
    store.invariants();
  });

  it('stores adopting neighbouring pieces of one block (a decode\'s shared columns) never write into each other', () => {
    const block = new ArrayBuffer(64);
    const left = new Uint8Array(block, 0, 16);
    const right = new Uint8Array(block, 16, 16);
    left.set(columnOf([T, T + 1]));
    right.set(columnOf([T + 10, T + 11]));
    const before = new Uint8Array(block).slice();
    const stores = [PartitionStore.adopt(left, 10), PartitionStore.adopt(right, 10)];
    expect(stores.map((store) => store.column().buffer)).toEqual([block, block]);
    stores[0]!.truncate(1);
    stores[0]!.append(3, 99);
    stores[1]!.truncate(0);
    stores[1]!.append(1, 5);
    // The block is as decoded; each store writes into a copy of its own.
    expect(new Uint8Array(block)).toEqual(before);
    expect(contents(stores[0]!)).toEqual([[0, T], [1, 99], [2, 99], [3, 99]]);
    expect(contents(stores[1]!)).toEqual([[0, 5]]);
    for (const store of stores) store.invariants();
  });

  it('a new store shares the empty column until its first add, which gets a buffer of its own', () => {
    const stores = [new PartitionStore(10), new PartitionStore(10)];
    expect(stores[0]!.column().buffer).toBe(stores[1]!.column().buffer);
    stores[0]!.append(2, T);
    expect(stores[0]!.column().buffer).not.toBe(stores[1]!.column().buffer);
    expect([contents(stores[0]!), contents(stores[1]!)]).toEqual([[[0, T], [1, T]], []]);
    for (const store of stores) store.invariants();
  });

  it('adopts a column at an odd offset by copying it once', () => {
    const backing = new Uint8Array(8 * 3 + 1);
    backing.set(columnOf([1, 2, 3]), 1);
    const store = PartitionStore.adopt(backing.subarray(1), 10);
    expect(contents(store)).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
    ]);
  });

  it('is bounded by countMax and asserts its inputs', () => {
    const store = new PartitionStore(5);
    store.append(5, T);
    expect(() => store.append(1, T)).toThrow(AssertionError);
    expect(store.count).toBe(5);
    expect(() => new PartitionStore(5).append(1, 2 ** 53)).toThrow(AssertionError);
    expect(() => new PartitionStore(5).append(1, 1.5)).toThrow(AssertionError);
    expect(() => new PartitionStore(5).append(-1, 1)).toThrow(AssertionError);
    expect(() => PartitionStore.adopt(new Uint8Array(12), 5)).toThrow(AssertionError);
    expect(() => PartitionStore.adopt(new Uint8Array(48), 5)).toThrow(AssertionError);
  });

  it('grows geometrically but never past countMax', () => {
    const store = new PartitionStore(1_000);
    for (let index = 0; index < 1_000; index++) store.append(1, index);
    expect(store.count).toBe(1_000);
    expect(store.createdAtUs(999)).toBe(999);
    // Capacity is at most countMax: the shared column's buffer is exactly countMax * 8 here.
    expect(store.column().buffer.byteLength).toBeLessThanOrEqual(1_000 * 8);
    store.invariants();
  });
});

describe('columnFirstUnsafe', () => {
  /** A column of `count` safe values with `value` at `index`, at byte offset `offset` of its buffer. */
  function columnWith(count: number, index: number, value: bigint, offset: number): Uint8Array {
    const column = new Uint8Array(offset + count * 8).subarray(offset);
    const view = new DataView(column.buffer, column.byteOffset);
    for (let at = 0; at < count; at++) view.setBigUint64(at * 8, BigInt(Number.MAX_SAFE_INTEGER - at), true);
    if (index >= 0) view.setBigUint64(index * 8, value, true);
    return column;
  }

  it.each([0, 1, 4])('finds the first value above 2^53 - 1 (any of bits 53..63), aligned or not (offset %d)', (offset) => {
    expect(columnFirstUnsafe(columnWith(0, -1, 0n, offset))).toBe(-1);
    expect(columnFirstUnsafe(columnWith(1_000, -1, 0n, offset))).toBe(-1);
    for (const bit of [53n, 56n, 60n, 63n]) {
      expect(columnFirstUnsafe(columnWith(1_000, 617, 1n << bit, offset))).toBe(617);
    }
    expect(columnFirstUnsafe(columnWith(1_000, 999, 2n ** 53n, offset))).toBe(999);
    expect(columnFirstUnsafe(columnWith(1_000, 3, 2n ** 53n - 1n, offset))).toBe(-1);
  });
});

/**
 * The JS-side allocator over WASM memory: aligned, non-overlapping blocks, reuse after release,
 * merging of free neighbours, and growth of the memory (which detaches old views).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEAP_ALIGNMENT, WASM_PAGE_SIZE, WasmHeap } from '../../src/kernels/wasm-heap.js';

function heap(pages = 1, base = 1024): WasmHeap {
  return new WasmHeap(new WebAssembly.Memory({ initial: pages }), base);
}

describe('WasmHeap', () => {
  it('hands out aligned blocks above the heap base and reuses released ones', () => {
    const h = heap(1, 100);
    const a = h.allocate(10);
    const b = h.allocate(100);
    expect(a).toBeGreaterThanOrEqual(100);
    expect(a % HEAP_ALIGNMENT).toBe(0);
    expect(b % HEAP_ALIGNMENT).toBe(0);
    expect(b).toBeGreaterThanOrEqual(a + 10);
    h.release(a);
    expect(h.allocate(64)).toBe(a);
  });

  it('grows memory when full and re-creates its view', () => {
    const h = heap(1);
    const before = h.bytes();
    const big = h.allocate(3 * WASM_PAGE_SIZE);
    expect(h.memory.buffer.byteLength).toBeGreaterThanOrEqual(big + 3 * WASM_PAGE_SIZE);
    expect(before.byteLength).toBe(0); // detached by the growth
    expect(h.bytes().byteLength).toBe(h.memory.buffer.byteLength);
  });

  it('refuses double release', () => {
    const h = heap();
    const a = h.allocate(1);
    h.release(a);
    expect(() => h.release(a)).toThrow(/not allocated/);
  });

  it('never hands out overlapping blocks and returns to one free block when all are released', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 200_000 })), { maxLength: 60 }),
        (steps) => {
          const h = heap(1);
          const live = new Map<number, number>();
          for (const [release, size] of steps) {
            if (release && live.size > 0) {
              const [ptr] = live.keys();
              h.release(ptr!);
              live.delete(ptr!);
            } else {
              const ptr = h.allocate(size);
              for (const [other, otherSize] of live) {
                expect(ptr + Math.max(size, 1) <= other || other + Math.max(otherSize, 1) <= ptr).toBe(true);
              }
              live.set(ptr, size);
            }
          }
          for (const ptr of live.keys()) h.release(ptr);
          expect(h.bytesInUse).toBe(0);
          const everything = h.memory.buffer.byteLength - 1024;
          expect(h.allocate(everything)).toBe(1024);
        },
      ),
      { numRuns: 100 },
    );
  });
});

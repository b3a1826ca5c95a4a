/**
 * A small first-fit allocator over WASM linear memory, owned by JavaScript.
 *
 * The AssemblyScript module is built with `--runtime stub` and never allocates: everything above
 * its static data (`heap_base()`) belongs to this allocator. Blocks are 64-byte aligned (a cache
 * line, and enough for v128 loads), never move, and are returned with `free`. Free neighbours are
 * merged so a long-running process does not fragment into unusable slivers.
 *
 * Memory only grows (WebAssembly cannot shrink it). Growth detaches every view of the old
 * `ArrayBuffer`, so callers re-create views through `bytes()` instead of keeping them.
 */
import { assert } from '../stdx/assert.js';

export const WASM_PAGE_SIZE = 64 * 1024;
export const HEAP_ALIGNMENT = 64;
/** wasm32 addresses 4 GiB; keep a page of headroom so `ptr + size` never wraps a u32. */
export const HEAP_SIZE_MAX = 4 * 1024 * 1024 * 1024 - WASM_PAGE_SIZE;

interface Block {
  ptr: number;
  size: number;
}

export class WasmHeap {
  readonly memory: WebAssembly.Memory;
  /** Free blocks sorted by `ptr`, never adjacent (adjacent blocks are merged). */
  private readonly free: Block[] = [];
  /** Allocated blocks: ptr -> size. */
  private readonly used = new Map<number, number>();
  /** End of the memory this heap manages (grows with the memory). */
  private end: number;
  private view: Uint8Array;

  constructor(memory: WebAssembly.Memory, heapBase: number) {
    assert(heapBase >= 0 && heapBase <= memory.buffer.byteLength, 'heap base inside memory');
    this.memory = memory;
    const start = alignUp(heapBase, HEAP_ALIGNMENT);
    this.end = memory.buffer.byteLength;
    if (start < this.end) this.free.push({ ptr: start, size: this.end - start });
    this.view = new Uint8Array(memory.buffer);
  }

  /** The current view of all of memory. Valid until the next growth. */
  bytes(): Uint8Array {
    if (this.view.buffer !== this.memory.buffer) this.view = new Uint8Array(this.memory.buffer);
    return this.view;
  }

  get bytesInUse(): number {
    let total = 0;
    for (const size of this.used.values()) total += size;
    return total;
  }

  allocate(byteLength: number): number {
    assert(Number.isSafeInteger(byteLength) && byteLength >= 0, 'allocation size is a count');
    const size = alignUp(Math.max(byteLength, 1), HEAP_ALIGNMENT);
    if (size > HEAP_SIZE_MAX) throw new RangeError(`WASM allocation of ${byteLength} B too large`);
    let index = this.findFit(size);
    if (index < 0) {
      this.grow(size);
      index = this.findFit(size);
      assert(index >= 0, 'growth made room');
    }
    const block = this.free[index]!;
    const ptr = block.ptr;
    if (block.size === size) {
      this.free.splice(index, 1);
    } else {
      block.ptr += size;
      block.size -= size;
    }
    this.used.set(ptr, size);
    assert(ptr % HEAP_ALIGNMENT === 0, 'allocations are aligned');
    return ptr;
  }

  release(ptr: number): void {
    const size = this.used.get(ptr);
    assert(size !== undefined, `release of a pointer that is not allocated: ${ptr}`);
    this.used.delete(ptr);
    // Insert sorted, then merge with the neighbours.
    let index = 0;
    while (index < this.free.length && this.free[index]!.ptr < ptr) index++;
    this.free.splice(index, 0, { ptr, size });
    this.mergeAround(index);
  }

  private findFit(size: number): number {
    for (let index = 0; index < this.free.length; index++) {
      if (this.free[index]!.size >= size) return index;
    }
    return -1;
  }

  private grow(size: number): void {
    const last = this.free[this.free.length - 1];
    // Reuse a free block that ends at the end of memory: only the shortfall is grown.
    const tail = last !== undefined && last.ptr + last.size === this.end ? last.size : 0;
    const needed = size - tail;
    // Grow geometrically so a sequence of growing allocations costs O(log n) grows.
    const pagesNeeded = Math.ceil(needed / WASM_PAGE_SIZE);
    const pagesCurrent = this.end / WASM_PAGE_SIZE;
    const pagesWanted = Math.max(pagesNeeded, Math.min(pagesCurrent, 1024));
    const pagesMax = HEAP_SIZE_MAX / WASM_PAGE_SIZE - pagesCurrent;
    const pages = Math.min(pagesWanted, pagesMax);
    if (pages < pagesNeeded) throw new RangeError('WASM memory exhausted (4 GiB address space)');
    this.memory.grow(pages);
    const start = this.end;
    this.end = this.memory.buffer.byteLength;
    assert(this.end === start + pages * WASM_PAGE_SIZE, 'memory grew by the requested pages');
    this.free.push({ ptr: start, size: this.end - start });
    this.mergeAround(this.free.length - 1);
  }

  private mergeAround(index: number): void {
    const block = this.free[index]!;
    const next = this.free[index + 1];
    if (next !== undefined && block.ptr + block.size === next.ptr) {
      block.size += next.size;
      this.free.splice(index + 1, 1);
    }
    const previous = this.free[index - 1];
    if (previous !== undefined && previous.ptr + previous.size === block.ptr) {
      previous.size += block.size;
      this.free.splice(index, 1);
    }
  }
}

export function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

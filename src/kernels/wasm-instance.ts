/**
 * Loads the AssemblyScript kernels module once and owns its memory.
 *
 * Only numbers cross the boundary: the module takes (pointer, length) pairs and writes results
 * into memory the caller provides. Inputs that already live in WASM memory (views from
 * `allocate(...).bytes()`) are used in place; anything else is staged (copied in) to a scratch
 * block that is reused across calls.
 *
 * WebAssembly memory never shrinks, so one 64 MiB snapshot would pin its high-water mark (the
 * encoder's tables, heap and output, or a staged payload: ~256 MiB) for the life of the process.
 * When memory has grown past `RECYCLE_BYTES` and no `allocate` buffer is outstanding, the
 * instance is recycled on the next turn (`trimSoon`, or `trim` at once): a fresh instance of the
 * same compiled module replaces the old one, whose memory the collector then unmaps. Kernels are
 * pure functions of their inputs, so nothing observable changes.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { assert } from '../stdx/assert.js';
import type { KernelBuffer } from './kernel.js';
import { WasmHeap } from './wasm-heap.js';

/** The module's exports, as numbers-only functions. Each kernel file documents its own ABI. */
export type KernelExports = Record<string, unknown> & {
  readonly memory: WebAssembly.Memory;
  heap_base(): number;
};

export type WasmFlavor = 'simd' | 'scalar';

const MODULE_FILES: Record<WasmFlavor, string> = {
  simd: 'kernels-simd.wasm',
  scalar: 'kernels.wasm',
};

/** Scratch slots: each kernel call stages into distinct slots so inputs and outputs never alias. */
export const ScratchSlot = { input: 0, output: 1, extra: 2, result: 3 } as const;
const SCRATCH_SLOT_COUNT = 4;

/**
 * Memory above which an idle instance is recycled. Every kernel call on the request path (frames,
 * chunks, the journal of a normal journal size) fits far below it, so only snapshot-sized calls
 * pay a re-grow of their memory (page faults, ~10 ms per 64 MiB).
 */
export const RECYCLE_BYTES = 16 * 1024 * 1024;

/** Candidate build directories: from src/kernels (vitest, tsx) and from dist/src/kernels (tsc). */
function buildDirectories(): string[] {
  return [
    fileURLToPath(new URL('../../build/', import.meta.url)),
    fileURLToPath(new URL('../../../build/', import.meta.url)),
  ];
}

export function readKernelModuleBytes(flavor: WasmFlavor): Uint8Array {
  const errors: string[] = [];
  for (const directory of buildDirectories()) {
    try {
      return readFileSync(directory + MODULE_FILES[flavor]);
    } catch (error) {
      errors.push(`${directory}${MODULE_FILES[flavor]}: ${(error as Error).message}`);
    }
  }
  throw new Error(`WASM kernels not built (run npm install): ${errors.join('; ')}`);
}

export class WasmInstance {
  readonly flavor: WasmFlavor;
  private readonly module: WebAssembly.Module;
  private current: KernelExports;
  private currentHeap: WasmHeap;
  private readonly scratchPtr: number[] = new Array<number>(SCRATCH_SLOT_COUNT).fill(-1);
  private readonly scratchSize: number[] = new Array<number>(SCRATCH_SLOT_COUNT).fill(0);
  /** `allocate` buffers not yet released: memory cannot be recycled under them. */
  private outstanding = 0;
  private trimScheduled = false;
  /** Times the instance was replaced by a fresh one (memory returned). */
  recycles = 0;

  constructor(flavor: WasmFlavor, moduleBytes: Uint8Array = readKernelModuleBytes(flavor)) {
    this.flavor = flavor;
    this.module = new WebAssembly.Module(moduleBytes);
    this.current = instantiate(this.module);
    this.currentHeap = new WasmHeap(this.current.memory, this.current.heap_base() >>> 0);
  }

  /** The module's exports. Re-read after a turn: a recycle replaces them. */
  get exports(): KernelExports {
    return this.current;
  }

  get heap(): WasmHeap {
    return this.currentHeap;
  }

  /** Bytes of linear memory the instance holds now. */
  get memoryBytes(): number {
    return this.currentHeap.memory.buffer.byteLength;
  }

  /**
   * Replaces the instance by a fresh one when its memory grew past `RECYCLE_BYTES` and nothing
   * allocated is outstanding. Pointers and views taken before are invalid afterwards: call it
   * only between kernel calls. Returns whether it recycled.
   */
  trim(): boolean {
    if (this.outstanding > 0 || this.memoryBytes <= RECYCLE_BYTES) return false;
    this.current = instantiate(this.module);
    this.currentHeap = new WasmHeap(this.current.memory, this.current.heap_base() >>> 0);
    this.scratchPtr.fill(-1);
    this.scratchSize.fill(0);
    this.recycles += 1;
    return true;
  }

  /** `trim` on the next turn, after the calls of this one (which reuse the grown memory). */
  trimSoon(): void {
    if (this.trimScheduled || this.memoryBytes <= RECYCLE_BYTES) return;
    this.trimScheduled = true;
    setImmediate(() => {
      this.trimScheduled = false;
      this.trim();
    }).unref();
  }

  /** The current view of WASM memory. Valid until memory grows. */
  bytes(): Uint8Array {
    return this.heap.bytes();
  }

  allocate(byteLength: number): KernelBuffer {
    const heap = this.heap;
    let ptr = heap.allocate(byteLength);
    this.outstanding += 1;
    const release = (): void => {
      heap.release(ptr);
      this.outstanding -= 1;
      this.trimSoon();
    };
    return {
      byteLength,
      bytes(): Uint8Array {
        assert(ptr >= 0, 'buffer used after release');
        return new Uint8Array(heap.memory.buffer, ptr, byteLength);
      },
      release(): void {
        assert(ptr >= 0, 'buffer released twice');
        release();
        ptr = -1;
      },
    };
  }

  /** True when `bytes` is a view of this module's memory (no copy needed). */
  inMemory(bytes: Uint8Array): boolean {
    return bytes.buffer === this.heap.memory.buffer;
  }

  /**
   * A pointer to a scratch region of at least `byteLength` bytes in `slot`. Growing a slot may
   * grow memory: take every pointer a call needs before creating views.
   */
  scratch(slot: number, byteLength: number): number {
    assert(slot >= 0 && slot < SCRATCH_SLOT_COUNT, 'scratch slot exists');
    if (this.scratchPtr[slot]! < 0 || this.scratchSize[slot]! < byteLength) {
      if (this.scratchPtr[slot]! >= 0) this.heap.release(this.scratchPtr[slot]!);
      // Round up so a slowly growing input does not reallocate on every call.
      const size = Math.max(byteLength, 4096, this.scratchSize[slot]! * 2);
      this.scratchPtr[slot] = this.heap.allocate(size);
      this.scratchSize[slot] = size;
    }
    return this.scratchPtr[slot]!;
  }

  /**
   * Returns `slot`'s block to the allocator, so the next call can reuse the pages it touched (a
   * snapshot's encoder slots, then the same payload staged for its chunk manifest).
   */
  releaseScratch(slot: number): void {
    assert(slot >= 0 && slot < SCRATCH_SLOT_COUNT, 'scratch slot exists');
    if (this.scratchPtr[slot]! < 0) return;
    this.heap.release(this.scratchPtr[slot]!);
    this.scratchPtr[slot] = -1;
    this.scratchSize[slot] = 0;
  }

  /** A pointer to `bytes` inside WASM memory: in place when possible, else copied to `slot`. */
  stage(bytes: Uint8Array, slot: number): number {
    if (this.inMemory(bytes)) return bytes.byteOffset;
    const ptr = this.scratch(slot, bytes.byteLength);
    this.bytes().set(bytes, ptr);
    return ptr;
  }
}

function instantiate(module: WebAssembly.Module): KernelExports {
  const instance = new WebAssembly.Instance(module, {
    env: {
      abort(messagePtr: number, filePtr: number, line: number, column: number): never {
        void messagePtr;
        void filePtr;
        throw new Error(`WASM kernel assertion failed at ${line}:${column}`);
      },
    },
  });
  const initialize = (instance.exports as Record<string, unknown>)['_initialize'];
  if (typeof initialize === 'function') (initialize as () => void)();
  return instance.exports as unknown as KernelExports;
}

/**
 * Loads the AssemblyScript kernels module once and owns its memory.
 *
 * Only numbers cross the boundary: the module takes (pointer, length) pairs and writes results
 * into memory the caller provides. Inputs that already live in WASM memory (views from
 * `allocate(...).bytes()`) are used in place; anything else is staged (copied in) to a scratch
 * block that is reused across calls.
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
export const ScratchSlot = { input: 0, output: 1, extra: 2 } as const;
const SCRATCH_SLOT_COUNT = 3;

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
  readonly exports: KernelExports;
  readonly heap: WasmHeap;
  private readonly scratchPtr: number[] = new Array<number>(SCRATCH_SLOT_COUNT).fill(-1);
  private readonly scratchSize: number[] = new Array<number>(SCRATCH_SLOT_COUNT).fill(0);

  constructor(flavor: WasmFlavor, moduleBytes: Uint8Array = readKernelModuleBytes(flavor)) {
    this.flavor = flavor;
    const module = new WebAssembly.Module(moduleBytes);
    const instance = new WebAssembly.Instance(module, {
      env: {
        abort(messagePtr: number, filePtr: number, line: number, column: number): never {
          void messagePtr;
          void filePtr;
          throw new Error(`WASM kernel assertion failed at ${line}:${column}`);
        },
      },
    });
    this.exports = instance.exports as unknown as KernelExports;
    const initialize = (instance.exports as Record<string, unknown>)['_initialize'];
    if (typeof initialize === 'function') (initialize as () => void)();
    this.heap = new WasmHeap(this.exports.memory, this.exports.heap_base() >>> 0);
  }

  /** The current view of WASM memory. Valid until memory grows. */
  bytes(): Uint8Array {
    return this.heap.bytes();
  }

  allocate(byteLength: number): KernelBuffer {
    const heap = this.heap;
    let ptr = heap.allocate(byteLength);
    return {
      byteLength,
      bytes(): Uint8Array {
        assert(ptr >= 0, 'buffer used after release');
        return new Uint8Array(heap.memory.buffer, ptr, byteLength);
      },
      release(): void {
        assert(ptr >= 0, 'buffer released twice');
        heap.release(ptr);
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

  /** A pointer to `bytes` inside WASM memory: in place when possible, else copied to `slot`. */
  stage(bytes: Uint8Array, slot: number): number {
    if (this.inMemory(bytes)) return bytes.byteOffset;
    const ptr = this.scratch(slot, bytes.byteLength);
    this.bytes().set(bytes, ptr);
    return ptr;
  }
}

/**
 * Kernel selection, done once per process (undici's lazy llhttp pattern).
 *
 * `auto` takes the SIMD WASM build, then the scalar WASM build (a runtime without wasm SIMD), and
 * falls back to TypeScript with one warning; a forced mode that cannot load throws instead of
 * silently running something else. The mode defaults to the `VRMETA_KERNELS` environment
 * variable, then `auto`.
 */
import type { Kernels, KernelsMode } from './kernel.js';
import { createTsKernels } from './kernels-ts.js';
import { createWasmKernels } from './kernels-wasm.js';
import { readKernelModuleBytes, WasmInstance, type WasmFlavor } from './wasm-instance.js';

export type { Kernels, KernelsMode, KernelsName } from './kernel.js';

const KERNELS_MODES: readonly KernelsMode[] = ['auto', 'wasm', 'ts'];

export function parseKernelsMode(value: string | undefined): KernelsMode {
  if (value === undefined || value === '') return 'auto';
  if ((KERNELS_MODES as readonly string[]).includes(value)) return value as KernelsMode;
  throw new Error(`invalid kernels mode ${JSON.stringify(value)}: expected auto, wasm or ts`);
}

export interface KernelsLoaderOptions {
  readonly readModule?: (flavor: WasmFlavor) => Uint8Array;
  readonly warn?: (message: string) => void;
}

/** Loads each implementation at most once and remembers why WASM failed. */
export class KernelsLoader {
  private ts: Kernels | null = null;
  private wasm: Kernels | null = null;
  private wasmError: Error | null = null;
  private warned = false;
  private readonly readModule: (flavor: WasmFlavor) => Uint8Array;
  warn: (message: string) => void;

  constructor(options: KernelsLoaderOptions = {}) {
    this.readModule = options.readModule ?? readKernelModuleBytes;
    this.warn = options.warn ?? ((message) => process.emitWarning(message, { code: 'VRMETA_KERNELS' }));
  }

  load(mode: KernelsMode): Kernels {
    switch (mode) {
      case 'ts':
        return this.loadTs();
      case 'wasm':
        return this.loadWasm();
      case 'auto':
        try {
          return this.loadWasm();
        } catch (error) {
          if (!this.warned) {
            this.warned = true;
            this.warn(`${(error as Error).message}; falling back to the TypeScript kernels`);
          }
          return this.loadTs();
        }
    }
  }

  private loadTs(): Kernels {
    this.ts ??= createTsKernels();
    return this.ts;
  }

  private loadWasm(): Kernels {
    if (this.wasm !== null) return this.wasm;
    if (this.wasmError !== null) throw this.wasmError;
    const failures: string[] = [];
    for (const flavor of ['simd', 'scalar'] as const) {
      try {
        this.wasm = createWasmKernels(new WasmInstance(flavor, this.readModule(flavor)));
        return this.wasm;
      } catch (error) {
        failures.push(`${flavor}: ${(error as Error).message}`);
      }
    }
    this.wasmError = new Error(`WASM kernels unavailable (${failures.join('; ')})`);
    throw this.wasmError;
  }
}

const defaultLoader = new KernelsLoader();

/** Where `auto`'s one fallback warning goes; the node layer points it at its logger. */
export function setKernelsWarn(warn: (message: string) => void): void {
  defaultLoader.warn = warn;
}

export function loadKernels(
  mode: KernelsMode = parseKernelsMode(process.env['VRMETA_KERNELS']),
): Kernels {
  return defaultLoader.load(mode);
}

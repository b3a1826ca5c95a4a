/**
 * Every kernel implementation that loads on this machine, for the conformance suites.
 *
 * The WASM builds are required: `npm install` builds them, and a suite that silently skipped
 * WASM would prove nothing. Set VRMETA_TEST_ALLOW_NO_WASM=1 only to debug the TS kernels alone.
 */
import type { Kernels } from '../../src/kernels/kernel.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';

export interface Implementation {
  label: 'ts' | 'wasm-simd' | 'wasm-scalar';
  kernels: Kernels;
}

function tryWasm(label: Implementation['label'], flavor: 'simd' | 'scalar'): Implementation[] {
  try {
    return [{ label, kernels: createWasmKernels(new WasmInstance(flavor)) }];
  } catch (error) {
    if (process.env['VRMETA_TEST_ALLOW_NO_WASM'] === '1') return [];
    throw error;
  }
}

export const implementations: Implementation[] = [
  { label: 'ts', kernels: createTsKernels() },
  ...tryWasm('wasm-simd', 'simd'),
  ...tryWasm('wasm-scalar', 'scalar'),
];

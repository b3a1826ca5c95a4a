/**
 * Kernel selection: `auto` picks the SIMD WASM build, the built module really uses SIMD (and the
 * scalar build does not), a forced mode that cannot load throws, and `auto` falls back to
 * TypeScript with exactly one warning.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { KernelsLoader, loadKernels, parseKernelsMode } from '../../src/kernels/index.js';
import { readKernelModuleBytes } from '../../src/kernels/wasm-instance.js';

const buildDirectory = new URL('../../build/', import.meta.url);

describe('kernel loader', () => {
  it('auto picks the SIMD WASM build', () => {
    const kernels = loadKernels('auto');
    expect(kernels.name).toBe('wasm');
    expect(kernels.build).toBe('wasm-simd');
    expect(loadKernels('wasm')).toBe(kernels);
    expect(loadKernels('ts').name).toBe('ts');
  });

  it('the SIMD build uses the extmul lane multiplies; the scalar build has no v128 at all', () => {
    const simd = readFileSync(new URL('kernels-simd.wat', buildDirectory), 'utf8');
    expect(simd).toMatch(/i64x2\.extmul_(low|high)_i32x4_u/);
    expect(simd).toMatch(/v128\.load/);
    const scalar = readFileSync(new URL('kernels.wat', buildDirectory), 'utf8');
    expect(scalar).not.toMatch(/v128|i64x2|i32x4/);
    // The binary carries SIMD opcodes (0xFD prefix) and validates on this runtime.
    const bytes = readKernelModuleBytes('simd');
    expect(WebAssembly.validate(bytes)).toBe(true);
  });

  it('parses VRMETA_KERNELS values and rejects anything else', () => {
    expect(parseKernelsMode(undefined)).toBe('auto');
    expect(parseKernelsMode('')).toBe('auto');
    expect(parseKernelsMode('wasm')).toBe('wasm');
    expect(parseKernelsMode('ts')).toBe('ts');
    expect(() => parseKernelsMode('simd')).toThrow(/invalid kernels mode/);
  });

  it('a forced wasm mode that cannot load throws; auto falls back with one warning', () => {
    const warnings: string[] = [];
    const loader = new KernelsLoader({
      readModule: () => {
        throw new Error('no build here');
      },
      warn: (message) => warnings.push(message),
    });
    expect(() => loader.load('wasm')).toThrow(/WASM kernels unavailable.*no build here/);
    expect(loader.load('auto').name).toBe('ts');
    expect(loader.load('auto').name).toBe('ts');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/falling back to the TypeScript kernels/);
  });

  it('a corrupt module is refused, then the scalar build is tried', () => {
    const loader = new KernelsLoader({
      readModule: (flavor) => (flavor === 'simd' ? new Uint8Array([0, 97, 115, 109]) : readKernelModuleBytes(flavor)),
      warn: () => {},
    });
    expect(loader.load('wasm').build).toBe('wasm-scalar');
  });
});

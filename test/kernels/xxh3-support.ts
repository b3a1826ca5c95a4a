/**
 * Test support for the XXH3 and chunk-manifest kernels: every implementation of the two kernels,
 * called directly (the TS functions, and the WASM exports through a WasmInstance), so these
 * suites do not depend on the other kernels the adapters also load.
 *
 * Each WASM implementation can hash an input either copied in (the usual case for a JS buffer)
 * or already in WASM memory (a view of an allocated KernelBuffer), which are different code paths
 * in the adapter and different alignment cases in the kernel.
 */
import { chunkManifestTs } from '../../src/kernels/chunk-manifest-ts.js';
import type { ChunkManifest } from '../../src/kernels/kernel.js';
import { WasmInstance, type WasmFlavor } from '../../src/kernels/wasm-instance.js';
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';

interface WasmAbi {
  xxh3_64(ptr: number, len: number, seed: bigint): bigint;
  chunk_manifest(ptr: number, len: number, chunkSize: number, outPtr: number): bigint;
}

export interface Xxh3Implementation {
  readonly label: 'ts' | 'wasm-simd' | 'wasm-scalar';
  /** XXH3-64 of `bytes`, copied into the kernel's memory when needed. */
  hash(bytes: Uint8Array, seed?: bigint): bigint;
  /** XXH3-64 of `bytes` placed in the kernel's memory first, at `misalign` bytes past 64-byte alignment. */
  hashInMemory(bytes: Uint8Array, seed: bigint, misalign: number): bigint;
  manifest(artifact: Uint8Array, chunkSize: number): ChunkManifest;
  manifestInMemory(artifact: Uint8Array, chunkSize: number, misalign: number): ChunkManifest;
}

function wasmImplementation(label: 'wasm-simd' | 'wasm-scalar', flavor: WasmFlavor): Xxh3Implementation {
  const instance = new WasmInstance(flavor);
  const abi = instance.exports as unknown as WasmAbi;

  function hashAt(ptr: number, length: number, seed: bigint): bigint {
    // The ABI takes the u64 seed as a signed i64 and returns a signed i64.
    return BigInt.asUintN(64, abi.xxh3_64(ptr, length, BigInt.asIntN(64, seed)));
  }

  function manifestAt(ptr: number, length: number, chunkSize: number): ChunkManifest {
    const chunkCount = Math.ceil(length / chunkSize);
    // Take every pointer before creating views: growing memory detaches them.
    const outPtr = instance.scratch(1, Math.max(8, chunkCount * 8));
    const checksum = BigInt.asUintN(64, abi.chunk_manifest(ptr, length, chunkSize, outPtr));
    const chunkChecksums = new BigUint64Array(chunkCount);
    new Uint8Array(chunkChecksums.buffer).set(instance.bytes().subarray(outPtr, outPtr + chunkCount * 8));
    return { chunkSize, totalSize: length, chunkCount, chunkChecksums, checksum };
  }

  function inMemory<T>(bytes: Uint8Array, misalign: number, run: (ptr: number) => T): T {
    const buffer = instance.allocate(bytes.length + misalign);
    try {
      const view = buffer.bytes().subarray(misalign);
      view.set(bytes);
      return run(view.byteOffset);
    } finally {
      buffer.release();
    }
  }

  return {
    label,
    hash: (bytes, seed = 0n) => hashAt(instance.stage(bytes, 0), bytes.length, seed),
    hashInMemory: (bytes, seed, misalign) =>
      inMemory(bytes, misalign, (ptr) => hashAt(ptr, bytes.length, seed)),
    manifest: (artifact, chunkSize) =>
      manifestAt(instance.stage(artifact, 0), artifact.length, chunkSize),
    manifestInMemory: (artifact, chunkSize, misalign) =>
      inMemory(artifact, misalign, (ptr) => manifestAt(ptr, artifact.length, chunkSize)),
  };
}

function copyAt(bytes: Uint8Array, misalign: number): Uint8Array {
  const copy = new Uint8Array(bytes.length + misalign).subarray(misalign);
  copy.set(bytes);
  return copy;
}

const tsImplementation: Xxh3Implementation = {
  label: 'ts',
  hash: (bytes, seed = 0n) => xxh3_64(bytes, seed),
  hashInMemory: (bytes, seed, misalign) => xxh3_64(copyAt(bytes, misalign), seed),
  manifest: (artifact, chunkSize) => chunkManifestTs(artifact, chunkSize),
  manifestInMemory: (artifact, chunkSize, misalign) => chunkManifestTs(copyAt(artifact, misalign), chunkSize),
};

/**
 * Every implementation. The WASM builds are required (npm install builds them): a suite that
 * silently skipped them would prove nothing.
 */
export const xxh3Implementations: readonly Xxh3Implementation[] = [
  tsImplementation,
  wasmImplementation('wasm-simd', 'simd'),
  wasmImplementation('wasm-scalar', 'scalar'),
];

/** Deterministic pseudo-random bytes (xorshift32), different per seed. */
export function pseudoRandomBytes(length: number, seed = 1): Uint8Array {
  const out = new Uint8Array(length);
  let state = (seed * 0x9e37_79b9) | 1;
  for (let index = 0; index < length; index++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out[index] = state >>> 24;
  }
  return out;
}

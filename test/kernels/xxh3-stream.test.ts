/**
 * Streaming XXH3-64 (assembly/xxh3-stream.ts) and the adapter paths built on it: an input not in
 * WASM memory and larger than STREAM_THRESHOLD_BYTES is hashed in staged pieces, never copied in
 * whole. The stream equals the one-shot WASM kernel and the TS kernel for every length near the
 * stripe (64), buffer (256), block (1024) and short-path (240) boundaries under many split
 * schemes, and for random multi-MiB inputs split at random points; the adapter's large-input
 * results equal the TS kernels and leave WASM memory the size it was.
 */
import { xxh3 } from '@node-rs/xxhash';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TRAILER_SIZE, type TrailerSplit } from '../../src/kernels/kernel.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { STREAM_PIECE_BYTES, STREAM_THRESHOLD_BYTES, createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance, type WasmFlavor } from '../../src/kernels/wasm-instance.js';
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';
import { pseudoRandomBytes } from './xxh3-support.js';

const MiB = 1024 * 1024;
const FLAVORS: readonly WasmFlavor[] = ['simd', 'scalar'];

interface StreamAbi {
  xxh3_64(ptr: number, len: number, seed: bigint): bigint;
  xxh3_stream_state_size(): number;
  xxh3_stream_init(state: number, seed: bigint): void;
  xxh3_stream_update(state: number, ptr: number, len: number): void;
  xxh3_stream_digest(state: number): bigint;
}

const data = pseudoRandomBytes(5 * MiB + 64, 11);

/** The ABI driven directly: `input` staged whole, then fed to the stream in `splits`-sized updates. */
function streamHarness(flavor: WasmFlavor) {
  const instance = new WasmInstance(flavor);
  const abi = instance.exports as unknown as StreamAbi;
  const statePtr = instance.scratch(2, abi.xxh3_stream_state_size());
  return {
    oneShot(input: Uint8Array, seed: bigint): bigint {
      const ptr = instance.stage(input, 0);
      return BigInt.asUintN(64, abi.xxh3_64(ptr, input.byteLength, BigInt.asIntN(64, seed)));
    },
    /** `sizes` are taken cyclically until the input is consumed (a 0 is an empty update). */
    stream(input: Uint8Array, seed: bigint, sizes: readonly number[]): bigint {
      const ptr = instance.stage(input, 0);
      abi.xxh3_stream_init(statePtr, BigInt.asIntN(64, seed));
      let offset = 0;
      for (let index = 0; offset < input.byteLength; index += 1) {
        const size = Math.min(sizes[index % sizes.length]!, input.byteLength - offset);
        abi.xxh3_stream_update(statePtr, ptr + offset, size);
        offset += size;
      }
      return BigInt.asUintN(64, abi.xxh3_stream_digest(statePtr));
    },
  };
}

/** Update sizes around the stripe, buffer and block sizes, uneven mixes and a whole-input update. */
const SPLIT_SCHEMES: readonly (readonly number[])[] = [
  [Number.MAX_SAFE_INTEGER],
  [1],
  [63],
  [64],
  [65],
  [255],
  [256],
  [257],
  [1024],
  [7, 0, 300, 1, 64, 1000],
  [241, 15],
];

describe.each(FLAVORS)('streaming xxh3_64 (wasm %s)', (flavor) => {
  const harness = streamHarness(flavor);

  it('equals the one-shot kernel and the TS kernel for every length 0..2100 under every split scheme', () => {
    const mismatches: string[] = [];
    for (let length = 0; length <= 2100; length += 1) {
      const input = data.subarray(0, length);
      const seed = length % 3 === 0 ? 0n : BigInt(length) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn;
      const expected = xxh3_64(input, seed);
      if (harness.oneShot(input, seed) !== expected) mismatches.push(`one-shot ${length}`);
      for (const scheme of SPLIT_SCHEMES) {
        if (harness.stream(input, seed, scheme) !== expected) mismatches.push(`${length} [${scheme.join(',')}]`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('equals the one-shot kernel and the reference for random lengths up to 5 MiB split at random points', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5 * MiB }),
        fc.array(fc.integer({ min: 0, max: 3 * STREAM_PIECE_BYTES }), { minLength: 1, maxLength: 8 }),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        (length, sizes, seed) => {
          // An all-zero scheme would never advance: keep one size positive.
          const scheme = sizes.some((size) => size > 0) ? sizes : [...sizes, 1];
          const input = data.subarray(0, length);
          const expected = xxh3.xxh64(input, seed);
          expect(harness.stream(input, seed, scheme)).toBe(expected);
          expect(harness.oneShot(input, seed)).toBe(expected);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('a digest does not consume the state: updating after a digest continues the same stream', () => {
    const instance = new WasmInstance(flavor);
    const abi = instance.exports as unknown as StreamAbi;
    const statePtr = instance.scratch(2, abi.xxh3_stream_state_size());
    const input = data.subarray(0, 5000);
    const ptr = instance.stage(input, 0);
    abi.xxh3_stream_init(statePtr, 0n);
    for (const [start, end] of [[0, 100], [100, 300], [300, 3000], [3000, 5000]] as const) {
      abi.xxh3_stream_update(statePtr, ptr + start, end - start);
      const digest = BigInt.asUintN(64, abi.xxh3_stream_digest(statePtr));
      expect(digest, `prefix ${end}`).toBe(xxh3_64(input.subarray(0, end)));
    }
  });
});

/** A split without its payload (deep-comparing MiB-sized arrays is slow); the payload range stays checked. */
function summary(split: TrailerSplit, file: Uint8Array): Record<string, unknown> {
  const { payload, ...rest } = split;
  const payloadIsView = payload.buffer === file.buffer && payload.byteOffset === file.byteOffset;
  return { ...rest, payloadIsView, payloadBytes: payload.byteLength };
}

describe.each(FLAVORS)('large inputs not in WASM memory (wasm %s)', (flavor) => {
  const ts = createTsKernels();

  /** A kernel set whose instance has already staged a piece, so its scratch slots exist. */
  function warmed(): { instance: WasmInstance; wasm: ReturnType<typeof createWasmKernels> } {
    const instance = new WasmInstance(flavor);
    const wasm = createWasmKernels(instance);
    wasm.chunkManifest(data.subarray(0, STREAM_THRESHOLD_BYTES + 1), 4096);
    wasm.chunkManifest(data.subarray(0, STREAM_THRESHOLD_BYTES + 1), 2 * STREAM_PIECE_BYTES);
    wasm.trailerSplit(data.subarray(0, STREAM_THRESHOLD_BYTES + 1));
    return { instance, wasm };
  }

  it('xxh3_64 and trailerWrite equal the TS kernels and leave WASM memory its size', () => {
    const { instance, wasm } = warmed();
    const before = instance.memoryBytes;
    for (const length of [3 * MiB, 3 * MiB + 17, 8 * MiB - 1]) {
      const input = length <= data.byteLength ? data.subarray(0, length) : pseudoRandomBytes(length, length);
      for (const seed of [0n, 1n, 0xffff_ffff_ffff_ffffn]) {
        expect(wasm.xxh3_64(input, seed), `length ${length} seed ${seed}`).toBe(ts.xxh3_64(input, seed));
      }
      const trailer = new Uint8Array(TRAILER_SIZE + 3);
      const trailerTs = new Uint8Array(TRAILER_SIZE + 3);
      wasm.trailerWrite(input, trailer, 3);
      ts.trailerWrite(input, trailerTs, 3);
      expect(trailer).toEqual(trailerTs);
    }
    expect(instance.memoryBytes).toBe(before);
  });

  it('trailerSplit tells valid, mismatch and no trailer apart like the TS kernel, without growing memory', () => {
    const { instance, wasm } = warmed();
    const before = instance.memoryBytes;
    const sealed = ts.trailerSeal(data.subarray(0, 4 * MiB + 5));
    const valid = wasm.trailerSplit(sealed);
    expect(summary(valid, sealed)).toEqual(summary(ts.trailerSplit(sealed), sealed));
    expect(valid).toMatchObject({ status: 'valid', checksum: xxh3_64(sealed.subarray(0, 4 * MiB + 5)) });
    // The payload is a view of the file, not a copy.
    expect(valid.payload.buffer).toBe(sealed.buffer);
    expect(valid.payload.byteLength).toBe(4 * MiB + 5);

    const damaged = sealed.slice();
    damaged[12_345]! ^= 1;
    const mismatch = wasm.trailerSplit(damaged);
    expect(mismatch.status).toBe('checksum_mismatch');
    expect(summary(mismatch, damaged)).toEqual(summary(ts.trailerSplit(damaged), damaged));

    const highHalf = sealed.slice();
    highHalf[sealed.byteLength - 1] = 1;
    expect(summary(wasm.trailerSplit(highHalf), highHalf)).toEqual(summary(ts.trailerSplit(highHalf), highHalf));
    expect(wasm.trailerSplit(highHalf).status).toBe('checksum_mismatch');

    const noMagic = sealed.slice();
    noMagic[sealed.byteLength - TRAILER_SIZE]! ^= 0xff;
    const none = wasm.trailerSplit(noMagic);
    expect(none.status).toBe('no_trailer');
    expect(none.payload).toBe(noMagic);
    expect(instance.memoryBytes).toBe(before);
  });

  it.each([1000, 4096, 64 * 1024, STREAM_PIECE_BYTES, STREAM_PIECE_BYTES + 1024, MiB, 3 * MiB, 8 * MiB])(
    'chunkManifest with %i-byte chunks equals the TS kernel and leaves WASM memory its size',
    (chunkSize) => {
      const { instance, wasm } = warmed();
      const before = instance.memoryBytes;
      const artifact = data.subarray(0, 5 * MiB + 7);
      const manifest = wasm.chunkManifest(artifact, chunkSize);
      expect(manifest).toEqual(ts.chunkManifest(artifact, chunkSize));
      expect(instance.memoryBytes).toBe(before);
    },
  );

  it('inputs already in WASM memory still take the one-pass kernels (and agree)', () => {
    const instance = new WasmInstance(flavor);
    const wasm = createWasmKernels(instance);
    const buffer = wasm.allocate(3 * MiB);
    try {
      buffer.bytes().set(data.subarray(0, 3 * MiB));
      expect(wasm.xxh3_64(buffer.bytes())).toBe(ts.xxh3_64(data.subarray(0, 3 * MiB)));
      expect(wasm.chunkManifest(buffer.bytes(), 4096)).toEqual(ts.chunkManifest(data.subarray(0, 3 * MiB), 4096));
    } finally {
      buffer.release();
    }
  });
});

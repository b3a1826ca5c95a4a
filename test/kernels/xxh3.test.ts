/**
 * XXH3-64 kernel conformance: the TS kernel and both WASM builds (SIMD and scalar) compute
 * XXH3_64bits_withSeed of xxHash 0.8 exactly. Two independent golden sources: xxHash's published
 * sanity vectors (xxh3-vectors.ts, no dependency on node_modules) and the reference C
 * implementation through @node-rs/xxhash for every length 0..2048 and larger sizes, with seeds
 * below and above 2^32 and 2^63. Plus unaligned inputs, inputs already in WASM memory, and a
 * differential property between TS and WASM.
 */
import { xxh3 } from '@node-rs/xxhash';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AssertionError } from '../../src/stdx/assert.js';
import { xxh3_64, xxh3_64_into } from '../../src/kernels/xxh3-ts.js';
import { pseudoRandomBytes, xxh3Implementations } from './xxh3-support.js';
import {
  SANITY_PRIME64,
  XXH3_64_EMPTY,
  XXH3_64_SANITY_VECTORS,
  sanityBuffer,
} from './xxh3-vectors.js';

const MiB = 1024 * 1024;

/**
 * Seeds: zero (default secret), small, just below 2^32 (borrow/carry between the u32 halves of
 * the seed arithmetic), above 2^32, above 2^63, all ones, and xxHash's sanity-test seed.
 */
const SEEDS: readonly bigint[] = [
  0n,
  1n,
  0xffff_ffffn,
  0x1_0000_0001n,
  0x8000_0000_0000_0001n,
  0xffff_ffff_ffff_ffffn,
  SANITY_PRIME64,
];

/** Every length through the short paths, the 129-240 path and the first two blocks. */
const LENGTHS_DENSE = Array.from({ length: 2049 }, (_, index) => index);
/** Block and stripe boundaries of larger inputs, and multi-MiB inputs. */
const LENGTHS_LARGE = [4095, 4096, 4097, 65_536, 65_537, 100_000, MiB, 3 * MiB + 1];

/** Lengths at every path boundary (0, 1-3, 4-8, 9-16, 17-128, 129-240, > 240, blocks). */
const EDGE_LENGTHS = [0, 1, 2, 3, 4, 8, 9, 16, 17, 32, 33, 64, 65, 96, 97, 128, 129, 240, 241, 255, 256, 1023, 1024, 1025, 2048, 4103];

const data = pseudoRandomBytes(3 * MiB + 64, 7);

/** Reference values, computed once and shared by every implementation. */
const referenceCache = new Map<string, bigint>();
function reference(length: number, seed: bigint, offset = 0): bigint {
  const key = `${offset}:${length}:${seed}`;
  let value = referenceCache.get(key);
  if (value === undefined) {
    value = xxh3.xxh64(data.subarray(offset, offset + length), seed);
    referenceCache.set(key, value);
  }
  return value;
}

describe('xxh3 golden vectors (independent of any npm package)', () => {
  it('the sanity buffer generator reproduces xxHash’s first bytes', () => {
    // byteGen starts at PRIME32 (0x9E3779B1): the first byte is its top 8 bits of the u64, 0.
    const buffer = sanityBuffer();
    expect(buffer[0]).toBe(0);
    expect(buffer.length).toBe(4096 + 64 + 1);
    // The generator is deterministic and not constant.
    expect(new Set(buffer).size).toBeGreaterThan(200);
  });
});

describe.each(xxh3Implementations)('xxh3_64 ($label)', (implementation) => {
  it('hashes the empty input to 0x2D06800538D394C2', () => {
    expect(implementation.hash(new Uint8Array(0))).toBe(XXH3_64_EMPTY);
    expect(implementation.hash(new Uint8Array(0), 0n)).toBe(XXH3_64_EMPTY);
  });

  it('matches xxHash’s published sanity vectors (every code path, seeded and not)', () => {
    const buffer = sanityBuffer();
    for (const vector of XXH3_64_SANITY_VECTORS) {
      const actual = implementation.hash(buffer.subarray(0, vector.length), vector.seed);
      expect(actual, `length ${vector.length} seed ${vector.seed}`).toBe(vector.hash);
    }
  });

  it('matches the reference for every length 0..2048 with every seed', () => {
    const mismatches: string[] = [];
    for (const length of LENGTHS_DENSE) {
      const bytes = data.subarray(0, length);
      for (const seed of SEEDS) {
        if (implementation.hash(bytes, seed) !== reference(length, seed)) mismatches.push(`${length}/${seed}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('matches the reference at block boundaries and multi-MiB sizes, seeded long inputs included', () => {
    for (const length of LENGTHS_LARGE) {
      const bytes = data.subarray(0, length);
      for (const seed of SEEDS) {
        expect(implementation.hash(bytes, seed), `length ${length} seed ${seed}`).toBe(reference(length, seed));
      }
    }
  });

  it('reads unaligned inputs (subarrays at offsets 1..15 of a larger buffer)', () => {
    for (let offset = 1; offset < 16; offset++) {
      for (const length of EDGE_LENGTHS) {
        const bytes = data.subarray(offset, offset + length);
        const seed = SEEDS[offset % SEEDS.length]!;
        expect(implementation.hash(bytes, seed), `offset ${offset} length ${length}`).toBe(
          reference(length, seed, offset),
        );
      }
    }
  });

  it('hashes inputs already in its memory the same as copied-in inputs, at any alignment', () => {
    for (let misalign = 0; misalign < 16; misalign++) {
      for (const length of EDGE_LENGTHS) {
        const bytes = data.subarray(0, length);
        const seed = SEEDS[misalign % SEEDS.length]!;
        expect(implementation.hashInMemory(bytes, seed, misalign), `misalign ${misalign} length ${length}`).toBe(
          reference(length, seed),
        );
      }
    }
    expect(implementation.hashInMemory(data.subarray(0, 3 * MiB + 1), 0n, 5)).toBe(reference(3 * MiB + 1, 0n));
  });

  it('alternating seeds on long inputs each get their own derived secret', () => {
    // The TS kernel caches the last derived secret; the WASM kernel rebuilds it per call.
    const bytes = data.subarray(0, 5000);
    for (const seed of [1n, 2n, 1n, 0n, 2n, 0xffff_ffff_ffff_ffffn, 1n]) {
      expect(implementation.hash(bytes, seed)).toBe(reference(5000, seed));
    }
  });

  it('every byte of the input matters (a flipped byte changes the hash)', () => {
    // Guards against a path that reads the wrong range but happens to agree on random data.
    for (const length of [3, 8, 16, 100, 240, 241, 1100]) {
      const bytes = data.slice(0, length);
      const original = implementation.hash(bytes);
      for (let index = 0; index < length; index++) {
        bytes[index]! ^= 0x40;
        expect(implementation.hash(bytes), `length ${length} byte ${index}`).not.toBe(original);
        bytes[index]! ^= 0x40;
      }
    }
  });
});

describe('xxh3_64_into (the BigInt-free TS entry point)', () => {
  it('equals xxh3_64 for any range, seed halves and output slot', () => {
    const out = new Uint32Array(6);
    for (const [offset, length] of [[0, 0], [3, 1], [5, 7], [1, 16], [9, 200], [7, 241], [2, 5000]] as const) {
      for (const seed of SEEDS) {
        const seedLo = Number(seed & 0xffff_ffffn);
        const seedHi = Number(seed >> 32n);
        xxh3_64_into(data, offset, length, seedLo, seedHi, out, 2);
        const actual = (BigInt(out[3]!) << 32n) | BigInt(out[2]!);
        expect(actual, `offset ${offset} length ${length} seed ${seed}`).toBe(reference(length, seed, offset));
      }
    }
  });

  it('refuses a range outside the input or an output slot outside the array', () => {
    const out = new Uint32Array(2);
    const bytes = new Uint8Array(10);
    expect(() => xxh3_64_into(bytes, 5, 6, 0, 0, out, 0)).toThrow(AssertionError);
    expect(() => xxh3_64_into(bytes, -1, 2, 0, 0, out, 0)).toThrow(AssertionError);
    expect(() => xxh3_64_into(bytes, 0, 10, 0, 0, out, 1)).toThrow(AssertionError);
    expect(() => xxh3_64_into(bytes, 0.5, 2, 0, 0, out, 0)).toThrow(AssertionError);
  });

  it('takes the seed modulo 2^64 at the BigInt edge', () => {
    const bytes = data.subarray(0, 300);
    expect(xxh3_64(bytes, 1n << 64n)).toBe(xxh3_64(bytes, 0n));
    expect(xxh3_64(bytes, (1n << 64n) + 5n)).toBe(reference(300, 5n));
  });
});

describe('xxh3 differential properties', () => {
  const [ts, ...wasm] = xxh3Implementations;

  it('wasm(x, seed) == ts(x, seed) == reference for random bytes, offsets and u64 seeds', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 4500 }),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        fc.integer({ min: 0, max: 15 }),
        (bytes, seed, offset) => {
          const placed = new Uint8Array(bytes.length + offset).subarray(offset);
          placed.set(bytes);
          const expected = xxh3.xxh64(bytes, seed);
          expect(ts!.hash(placed, seed)).toBe(expected);
          for (const implementation of wasm) {
            expect(implementation.hash(placed, seed)).toBe(expected);
            expect(implementation.hashInMemory(bytes, seed, offset)).toBe(expected);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lengths around every path and block boundary agree for random data', () => {
    const boundaries = [0, 3, 8, 16, 128, 240, 1024, 2048, 16 * 1024];
    fc.assert(
      fc.property(
        fc.constantFrom(...boundaries),
        fc.integer({ min: -2, max: 70 }),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        fc.integer({ min: 1, max: 1 << 30 }),
        (boundary, delta, seed, dataSeed) => {
          const length = Math.max(0, boundary + delta);
          const bytes = pseudoRandomBytes(length, dataSeed);
          const expected = xxh3.xxh64(bytes, seed);
          for (const implementation of [ts!, ...wasm]) expect(implementation.hash(bytes, seed)).toBe(expected);
        },
      ),
      { numRuns: 200 },
    );
  });
});

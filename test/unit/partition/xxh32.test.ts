/**
 * XXH32 against xxHash's own published sanity vectors, then against an independent
 * implementation for every tail length.
 *
 * Vectors: Cyan4973/xxHash `cli/xsum_sanity_check.c` (commit b2e9dbb05fb7), table
 * `XSUM_XXH32_testdata`, over the buffer `XSUM_fillTestBuffer` fills (byteGen = PRIME32; each
 * byte is byteGen >> 56, then byteGen *= PRIME64, wrapping at 2^64).
 */
import { xxh32 as referenceXxh32 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { xxh32 } from '../../../src/partition/xxh32.js';

const PRIME32 = 2654435761;
const PRIME64 = 11400714785074694797n;

function sanityBuffer(length: number): Uint8Array {
  const buffer = new Uint8Array(length);
  let byteGen = BigInt(PRIME32);
  for (let index = 0; index < length; index += 1) {
    buffer[index] = Number(byteGen >> 56n);
    byteGen = (byteGen * PRIME64) & 0xffff_ffff_ffff_ffffn;
  }
  return buffer;
}

/** `{ len, seed, Nresult }` rows of XSUM_XXH32_testdata. */
const SANITY_VECTORS: readonly [number, number, number][] = [
  [0, 0, 0x02cc5d05],
  [0, PRIME32, 0x36b78ae7],
  [1, 0, 0xcf65b03e],
  [1, PRIME32, 0xb4545aa4],
  [14, 0, 0x1208e7e2],
  [14, PRIME32, 0x6af1d1fe],
  [222, 0, 0x5bd11dbd],
  [222, PRIME32, 0x58803c5f],
];

describe('xxh32', () => {
  const buffer = sanityBuffer(2367);

  for (const [length, seed, expected] of SANITY_VECTORS) {
    it(`xxHash sanity vector: ${length} bytes, seed ${seed}`, () => {
      expect(xxh32(buffer.subarray(0, length), seed)).toBe(expected);
    });
  }

  it('empty input with seed 0 is 0x02CC5D05 (no stripe, no tail)', () => {
    expect(xxh32(new Uint8Array(0))).toBe(0x02cc5d05);
  });

  it('the seed defaults to 0', () => {
    expect(xxh32(buffer.subarray(0, 14))).toBe(xxh32(buffer.subarray(0, 14), 0));
    expect(xxh32(buffer.subarray(0, 14))).not.toBe(xxh32(buffer.subarray(0, 14), 1));
  });

  it('matches @node-rs/xxhash for every length 0..100 (1..6 stripes, tails 0..15) and seeds', () => {
    const mismatches: string[] = [];
    for (const seed of [0, 1, PRIME32, 0xffff_ffff]) {
      for (let length = 0; length <= 100; length += 1) {
        const input = buffer.subarray(0, length);
        const expected = referenceXxh32(input, seed);
        const actual = xxh32(input, seed);
        if (actual !== expected) mismatches.push(`len ${length} seed ${seed}: ${actual} != ${expected}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('reads a subarray at its own offset, not the underlying buffer', () => {
    const input = buffer.subarray(3, 3 + 37);
    expect(xxh32(input)).toBe(referenceXxh32(input.slice(), 0));
  });

  it('a non-u32 seed is a programming error', () => {
    expect(() => xxh32(new Uint8Array(1), -1)).toThrow();
    expect(() => xxh32(new Uint8Array(1), 2 ** 32)).toThrow();
  });
});

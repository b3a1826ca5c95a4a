/**
 * XXH32 (Yann Collet's xxHash, 32-bit variant), as Iggy's `XxHash32` / `iggy_common::calculate_32`
 * computes it: the hash that picks a partition for a messages key, names a consumer identified by
 * a string, and spreads partitions over partition groups. Every replica and every SDK must agree
 * on it bit for bit, so it is the standard algorithm, not a variant.
 *
 * All arithmetic is u32: `Math.imul` for the wrapping multiply and `>>> 0` to bring a result back
 * to an unsigned 32-bit value, so no intermediate ever leaves the safe-integer range.
 */
import { assert } from '../stdx/assert.js';

const PRIME32_1 = 0x9e3779b1;
const PRIME32_2 = 0x85ebca77;
const PRIME32_3 = 0xc2b2ae3d;
const PRIME32_4 = 0x27d4eb2f;
const PRIME32_5 = 0x165667b1;

/** The input is consumed in 16-byte stripes of four u32 lanes. */
const STRIPE_SIZE = 16;

function rotl(value: number, bits: number): number {
  return ((value << bits) | (value >>> (32 - bits))) >>> 0;
}

function readU32(bytes: Uint8Array, at: number): number {
  const b0 = bytes[at]!;
  const b1 = bytes[at + 1]!;
  const b2 = bytes[at + 2]!;
  const b3 = bytes[at + 3]!;
  return (b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)) >>> 0;
}

function round(accumulator: number, lane: number): number {
  const mixed = (accumulator + Math.imul(lane, PRIME32_2)) >>> 0;
  return Math.imul(rotl(mixed, 13), PRIME32_1) >>> 0;
}

/** The four-lane accumulation over every whole stripe, folded into one u32. */
function stripes(bytes: Uint8Array, seed: number, stripeEnd: number): number {
  let v1 = (seed + PRIME32_1 + PRIME32_2) >>> 0;
  let v2 = (seed + PRIME32_2) >>> 0;
  let v3 = seed;
  let v4 = (seed - PRIME32_1) >>> 0;
  for (let at = 0; at < stripeEnd; at += STRIPE_SIZE) {
    v1 = round(v1, readU32(bytes, at));
    v2 = round(v2, readU32(bytes, at + 4));
    v3 = round(v3, readU32(bytes, at + 8));
    v4 = round(v4, readU32(bytes, at + 12));
  }
  return (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) >>> 0;
}

function avalanche(hash: number): number {
  let h = hash;
  h = Math.imul(h ^ (h >>> 15), PRIME32_2) >>> 0;
  h = Math.imul(h ^ (h >>> 13), PRIME32_3) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * XXH32 of `bytes` with `seed` (a u32; Iggy always uses 0). Returns a u32 as a non-negative
 * number.
 */
export function xxh32(bytes: Uint8Array, seed = 0): number {
  const length = bytes.byteLength;
  assert(Number.isInteger(seed) && seed >= 0 && seed <= 0xffff_ffff, 'xxh32 seed is a u32');
  const stripeEnd = length - (length % STRIPE_SIZE);
  let h = length >= STRIPE_SIZE ? stripes(bytes, seed, stripeEnd) : (seed + PRIME32_5) >>> 0;
  // The length enters mod 2^32, as the reference's `(U32)len`.
  h = (h + length) >>> 0;
  let at = length >= STRIPE_SIZE ? stripeEnd : 0;
  for (; at + 4 <= length; at += 4) {
    h = (h + Math.imul(readU32(bytes, at), PRIME32_3)) >>> 0;
    h = Math.imul(rotl(h, 17), PRIME32_4) >>> 0;
  }
  for (; at < length; at += 1) {
    h = (h + Math.imul(bytes[at]!, PRIME32_5)) >>> 0;
    h = Math.imul(rotl(h, 11), PRIME32_1) >>> 0;
  }
  return avalanche(h);
}

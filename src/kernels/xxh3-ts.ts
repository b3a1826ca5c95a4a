/**
 * XXH3-64, exactly `XXH3_64bits_withSeed` of xxHash 0.8, in TypeScript: the reference the WASM
 * kernel (assembly/xxh3.ts) must match, the fallback when WebAssembly is unavailable, and the
 * hash the test fixtures use.
 *
 * Written for speed in plain 32-bit arithmetic: a u64 is a (lo, hi) pair of int32 values,
 * 32x32->64 products are split into 16-bit halves so every partial product is an exact
 * `Math.imul`, and carries are recovered with bit tricks. BigInt appears only at the API edge
 * (`xxh3_64`); hot callers use `xxh3_64_into`, which is BigInt-free end to end. BigInt in the
 * inner loop would be about 100x slower.
 *
 * Layout of the algorithm (names follow xxhash.h):
 * - 0..16 bytes: three special cases (0, 1-3, 4-8, 9-16), keyed with the default secret and seed.
 * - 17..128 and 129..240 bytes: sums of `mix16B` (128-bit multiply, folded) and an avalanche.
 * - more than 240 bytes: eight u64 accumulators over 64-byte stripes; a 1024-byte block is 16
 *   stripes with the secret advancing 8 bytes per stripe, and a scramble at each block end; the
 *   last stripe (the final 64 bytes, possibly overlapping) uses the secret at 121; the merge uses
 *   the secret at 11 and `length * PRIME64_1`. With a non-zero seed the long path runs on a secret
 *   derived from the seed (default secret words + seed / - seed alternately), while the short
 *   paths fold the seed in directly.
 */
import { assert } from '../stdx/assert.js';

// The long path reads input and secret through Int32Array views, which use the platform byte
// order; XXH3 reads little-endian. Every platform Node ships on is little-endian, but a wrong
// checksum on disk would be silent, so refuse to load instead.
assert(new Uint8Array(Uint32Array.of(1).buffer)[0] === 1, 'xxh3-ts requires a little-endian platform');

export const XXH3_SECRET_SIZE = 192;
export const XXH3_STRIPE_SIZE = 64;
/** 16 stripes: (secret size - stripe size) / 8 bytes of secret advance per stripe. */
export const XXH3_STRIPES_PER_BLOCK = 16;
export const XXH3_BLOCK_SIZE = 1024;
/** Inputs up to this size take the short paths (no accumulators, no derived secret). */
export const XXH3_MIDSIZE_MAX = 240;

/** The default secret, `XXH3_kSecret` (192 bytes). */
// prettier-ignore
const K_SECRET = Uint8Array.of(
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
);

// Primes as int32 halves (lo, hi). PRIME32_x are u64 values below 2^32 (hi = 0).
const PRIME32_1 = 0x9e3779b1 | 0;
const PRIME32_2 = 0x85ebca77 | 0;
const PRIME32_3 = 0xc2b2ae3d | 0;
const PRIME64_1_LO = 0x85ebca87 | 0;
const PRIME64_1_HI = 0x9e3779b1 | 0;
const PRIME64_2_LO = 0x27d4eb4f | 0;
const PRIME64_2_HI = 0xc2b2ae3d | 0;
const PRIME64_3_LO = 0x9e3779f9 | 0;
const PRIME64_3_HI = 0x165667b1 | 0;
const PRIME64_4_LO = 0xc2b2ae63 | 0;
const PRIME64_4_HI = 0x85ebca77 | 0;
const PRIME64_5_LO = 0x165667c5 | 0;
const PRIME64_5_HI = 0x27d4eb2f | 0;
const PRIME_MX1_LO = 0x9e3779f9 | 0;
const PRIME_MX1_HI = 0x16566791 | 0;
const PRIME_MX2_LO = 0x1e98df25 | 0;
const PRIME_MX2_HI = 0x9fb21c65 | 0;

const TWO_POW_32 = 0x1_0000_0000;

/**
 * The high half of every u64 result. Functions below return the low half and leave the high half
 * here: returning an object or array per operation would allocate in the hot paths. Read it
 * immediately after the call that set it.
 */
let resultHi = 0;

function read32(b: Uint8Array, i: number): number {
  return b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
}

function bswap32(x: number): number {
  return ((x >>> 24) | ((x >>> 8) & 0xff00) | ((x & 0xff00) << 8) | (x << 24)) | 0;
}

/** High 32 bits of the unsigned product a * b (the low 32 bits are `Math.imul(a, b)`). */
function mulHi32(a: number, b: number): number {
  const aL = a & 0xffff;
  const aH = a >>> 16;
  const bL = b & 0xffff;
  const bH = b >>> 16;
  const lh = Math.imul(aL, bH);
  const hl = Math.imul(aH, bL);
  const carry = ((Math.imul(aL, bL) >>> 16) + (lh & 0xffff) + (hl & 0xffff)) >>> 16;
  return (Math.imul(aH, bH) + (lh >>> 16) + (hl >>> 16) + carry) | 0;
}

/** (a * b) mod 2^64. Returns lo, sets resultHi. */
function mul64(aLo: number, aHi: number, bLo: number, bHi: number): number {
  resultHi = (mulHi32(aLo, bLo) + Math.imul(aLo, bHi) + Math.imul(aHi, bLo)) | 0;
  return Math.imul(aLo, bLo);
}

/** Carry out of the u32 add a + b = sum (all as int32 bit patterns). */
function carry32(a: number, b: number, sum: number): number {
  return ((a & b) | ((a | b) & ~sum)) >>> 31;
}

/** `XXH3_mul128_fold64`: the 128-bit product, low half XOR high half. Returns lo, sets resultHi. */
function mul128Fold64(aLo: number, aHi: number, bLo: number, bHi: number): number {
  // Schoolbook over u32 words: w0..w3 = aLo*bLo + (aLo*bHi + aHi*bLo) << 32 + aHi*bHi << 64.
  // All int32 arithmetic (carries recovered bitwise), so V8 keeps every value in a register
  // as a word; a double-based column sum measured the same speed but is harder to check.
  const p1Lo = Math.imul(aLo, bHi);
  const p2Lo = Math.imul(aHi, bLo);
  const p0Hi = mulHi32(aLo, bLo);
  const t1 = (p0Hi + p1Lo) | 0;
  const w1 = (t1 + p2Lo) | 0;
  const carry1 = carry32(p0Hi, p1Lo, t1) + carry32(t1, p2Lo, w1);
  const p1Hi = mulHi32(aLo, bHi);
  const p2Hi = mulHi32(aHi, bLo);
  const p3Lo = Math.imul(aHi, bHi);
  const t2 = (p1Hi + p2Hi) | 0;
  const t3 = (t2 + p3Lo) | 0;
  const w2 = (t3 + carry1) | 0;
  const carry2 = carry32(p1Hi, p2Hi, t2) + carry32(t2, p3Lo, t3) + carry32(t3, carry1, w2);
  const w3 = (mulHi32(aHi, bHi) + carry2) | 0;
  resultHi = w1 ^ w3;
  return Math.imul(aLo, bLo) ^ w2;
}

/** `XXH64_avalanche`. Returns lo, sets resultHi. */
function avalancheXxh64(lo: number, hi: number): number {
  lo ^= hi >>> 1; // h ^= h >> 33
  lo = mul64(lo, hi, PRIME64_2_LO, PRIME64_2_HI);
  hi = resultHi;
  lo ^= (lo >>> 29) | (hi << 3); // h ^= h >> 29
  hi ^= hi >>> 29;
  lo = mul64(lo, hi, PRIME64_3_LO, PRIME64_3_HI);
  hi = resultHi;
  resultHi = hi;
  return lo ^ hi; // h ^= h >> 32
}

/** `XXH3_avalanche`. Returns lo, sets resultHi. */
function avalanche(lo: number, hi: number): number {
  lo ^= hi >>> 5; // h ^= h >> 37
  lo = mul64(lo, hi, PRIME_MX1_LO, PRIME_MX1_HI);
  hi = resultHi;
  resultHi = hi;
  return lo ^ hi; // h ^= h >> 32
}

/** `XXH3_rrmxmx`, the 4..8-byte finalizer. Returns lo, sets resultHi. */
function rrmxmx(lo: number, hi: number, length: number): number {
  // h ^= rotl64(h, 49) ^ rotl64(h, 24)
  const r49Lo = (hi << 17) | (lo >>> 15);
  const r49Hi = (lo << 17) | (hi >>> 15);
  const r24Lo = (lo << 24) | (hi >>> 8);
  const r24Hi = (hi << 24) | (lo >>> 8);
  lo ^= r49Lo ^ r24Lo;
  hi ^= r49Hi ^ r24Hi;
  lo = mul64(lo, hi, PRIME_MX2_LO, PRIME_MX2_HI);
  hi = resultHi;
  lo ^= ((hi >>> 3) + length) | 0; // h ^= (h >> 35) + len; (h >> 35) + 8 cannot carry
  lo = mul64(lo, hi, PRIME_MX2_LO, PRIME_MX2_HI);
  hi = resultHi;
  lo ^= (lo >>> 28) | (hi << 4); // h ^= h >> 28
  hi ^= hi >>> 28;
  resultHi = hi;
  return lo;
}

/**
 * The secret as little-endian u32 words at every byte offset 0..188, so the short paths can read
 * a u64 of the secret at any offset with two array loads.
 */
const K_SECRET_AT = new Int32Array(XXH3_SECRET_SIZE - 3);
for (let offset = 0; offset < K_SECRET_AT.length; offset++) K_SECRET_AT[offset] = read32(K_SECRET, offset);

/**
 * `XXH3_mix16B`: 16 input bytes against 16 secret bytes, seeded. Returns lo, sets resultHi.
 * The caller guarantees `i + 16 <= bytes.length` and `secretOffset + 16 <= 192`.
 */
function mix16B(
  b: Uint8Array,
  i: number,
  secretOffset: number,
  seedLo: number,
  seedHi: number,
): number {
  // (input_lo ^ (secret_lo + seed)) and (input_hi ^ (secret_hi - seed)), then fold.
  const sLo0 = K_SECRET_AT[secretOffset]!;
  const sLo = (sLo0 + seedLo) | 0;
  const sHi = (K_SECRET_AT[secretOffset + 4]! + seedHi + (((sLo0 & seedLo) | ((sLo0 | seedLo) & ~sLo)) >>> 31)) | 0;
  const tLo0 = K_SECRET_AT[secretOffset + 8]!;
  const tLo = (tLo0 - seedLo) | 0;
  const tHi = (K_SECRET_AT[secretOffset + 12]! - seedHi - (((~tLo0 & seedLo) | (~(tLo0 ^ seedLo) & tLo)) >>> 31)) | 0;
  return mul128Fold64(read32(b, i) ^ sLo, read32(b, i + 4) ^ sHi, read32(b, i + 8) ^ tLo, read32(b, i + 12) ^ tHi);
}

/** Adds (lo, hi) to the running sum in `sumLo` / `sumHi` (module registers for the short paths). */
let sumLo = 0;
let sumHi = 0;
function sumAdd(lo: number, hi: number): void {
  const t = (sumLo + lo) | 0;
  sumHi = (sumHi + hi + (((sumLo & lo) | ((sumLo | lo) & ~t)) >>> 31)) | 0;
  sumLo = t;
}

/** Starts the sum at length * PRIME64_1 (lengths here are below 2^32). */
function sumStartLength(length: number): void {
  sumLo = mul64(length, 0, PRIME64_1_LO, PRIME64_1_HI);
  sumHi = resultHi;
}

function hashEmpty(seedLo: number, seedHi: number): number {
  // XXH64_avalanche(seed ^ (secret[56..64] ^ secret[64..72]))
  return avalancheXxh64(
    seedLo ^ K_SECRET_AT[56]! ^ K_SECRET_AT[64]!,
    seedHi ^ K_SECRET_AT[60]! ^ K_SECRET_AT[68]!,
  );
}

function hash1to3(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  const c1 = b[i]!;
  const c2 = b[i + (length >>> 1)]!;
  const c3 = b[i + length - 1]!;
  const combined = (c1 << 16) | (c2 << 24) | c3 | (length << 8);
  // bitflip = (secret[0..4] ^ secret[4..8]) + seed, as u64
  const flip = K_SECRET_AT[0]! ^ K_SECRET_AT[4]!;
  const flipLo = (flip + seedLo) | 0;
  const flipHi = (seedHi + (((flip & seedLo) | ((flip | seedLo) & ~flipLo)) >>> 31)) | 0;
  return avalancheXxh64(combined ^ flipLo, flipHi);
}

function hash4to8(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  seedHi ^= bswap32(seedLo); // seed ^= (u64)swap32((u32)seed) << 32
  const input1 = read32(b, i);
  const input2 = read32(b, i + length - 4);
  // bitflip = (secret[8..16] ^ secret[16..24]) - seed
  const fLo0 = K_SECRET_AT[8]! ^ K_SECRET_AT[16]!;
  const fHi0 = K_SECRET_AT[12]! ^ K_SECRET_AT[20]!;
  const flipLo = (fLo0 - seedLo) | 0;
  const flipHi = (fHi0 - seedHi - (((~fLo0 & seedLo) | (~(fLo0 ^ seedLo) & flipLo)) >>> 31)) | 0;
  // input64 = input2 + (input1 << 32): the halves do not overlap, so the add is a concatenation.
  return rrmxmx(input2 ^ flipLo, input1 ^ flipHi, length);
}

function hash9to16(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  // bitflip1 = (secret[24..32] ^ secret[32..40]) + seed; bitflip2 = (secret[40..48] ^ secret[48..56]) - seed
  const f1Lo0 = K_SECRET_AT[24]! ^ K_SECRET_AT[32]!;
  const f1Hi0 = K_SECRET_AT[28]! ^ K_SECRET_AT[36]!;
  const f1Lo = (f1Lo0 + seedLo) | 0;
  const f1Hi = (f1Hi0 + seedHi + (((f1Lo0 & seedLo) | ((f1Lo0 | seedLo) & ~f1Lo)) >>> 31)) | 0;
  const f2Lo0 = K_SECRET_AT[40]! ^ K_SECRET_AT[48]!;
  const f2Hi0 = K_SECRET_AT[44]! ^ K_SECRET_AT[52]!;
  const f2Lo = (f2Lo0 - seedLo) | 0;
  const f2Hi = (f2Hi0 - seedHi - (((~f2Lo0 & seedLo) | (~(f2Lo0 ^ seedLo) & f2Lo)) >>> 31)) | 0;
  const inLoLo = read32(b, i) ^ f1Lo;
  const inLoHi = read32(b, i + 4) ^ f1Hi;
  const inHiLo = read32(b, i + length - 8) ^ f2Lo;
  const inHiHi = read32(b, i + length - 4) ^ f2Hi;
  // acc = len + swap64(input_lo) + input_hi + mul128_fold64(input_lo, input_hi)
  sumLo = length;
  sumHi = 0;
  sumAdd(bswap32(inLoHi), bswap32(inLoLo));
  sumAdd(inHiLo, inHiHi);
  const foldLo = mul128Fold64(inLoLo, inLoHi, inHiLo, inHiHi);
  sumAdd(foldLo, resultHi);
  return avalanche(sumLo, sumHi);
}

function hash17to128(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  sumStartLength(length);
  const end = i + length;
  if (length > 32) {
    if (length > 64) {
      if (length > 96) {
        sumAdd(mix16B(b, i + 48, 96, seedLo, seedHi), resultHi);
        sumAdd(mix16B(b, end - 64, 112, seedLo, seedHi), resultHi);
      }
      sumAdd(mix16B(b, i + 32, 64, seedLo, seedHi), resultHi);
      sumAdd(mix16B(b, end - 48, 80, seedLo, seedHi), resultHi);
    }
    sumAdd(mix16B(b, i + 16, 32, seedLo, seedHi), resultHi);
    sumAdd(mix16B(b, end - 32, 48, seedLo, seedHi), resultHi);
  }
  sumAdd(mix16B(b, i, 0, seedLo, seedHi), resultHi);
  sumAdd(mix16B(b, end - 16, 16, seedLo, seedHi), resultHi);
  return avalanche(sumLo, sumHi);
}

function hash129to240(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  sumStartLength(length);
  for (let round = 0; round < 8; round++) sumAdd(mix16B(b, i + 16 * round, 16 * round, seedLo, seedHi), resultHi);
  sumLo = avalanche(sumLo, sumHi);
  sumHi = resultHi;
  // Rounds 8.. use the secret from offset 3 (XXH3_MIDSIZE_STARTOFFSET); the final 16 bytes use
  // offset 136 - 17 (XXH3_SECRET_SIZE_MIN - XXH3_MIDSIZE_LASTOFFSET).
  const roundCount = length >>> 4;
  for (let round = 8; round < roundCount; round++) {
    sumAdd(mix16B(b, i + 16 * round, 16 * (round - 8) + 3, seedLo, seedHi), resultHi);
  }
  sumAdd(mix16B(b, i + length - 16, 119, seedLo, seedHi), resultHi);
  return avalanche(sumLo, sumHi);
}

/** XXH3-64 of a short input (length <= 240). Returns lo, sets resultHi. */
export function hashShort(b: Uint8Array, i: number, length: number, seedLo: number, seedHi: number): number {
  if (length <= 16) {
    if (length > 8) return hash9to16(b, i, length, seedLo, seedHi);
    if (length >= 4) return hash4to8(b, i, length, seedLo, seedHi);
    if (length > 0) return hash1to3(b, i, length, seedLo, seedHi);
    return hashEmpty(seedLo, seedHi);
  }
  if (length <= 128) return hash17to128(b, i, length, seedLo, seedHi);
  return hash129to240(b, i, length, seedLo, seedHi);
}

// ---------------------------------------------------------------------------------------------
// Long inputs (> 240 bytes).

/** A secret prepared for the long path: whole words plus the two unaligned windows it reads. */
export interface LongSecret {
  /** The 192-byte secret as 48 little-endian u32 words (stripe n reads words 2n..2n+16). */
  readonly words: Int32Array;
  /** 16 words of the secret from byte 121: the last stripe's key. */
  readonly lastStripe: Int32Array;
  /** 16 words of the secret from byte 11: the merge key. */
  readonly merge: Int32Array;
}

function longSecret(secret: Uint8Array): LongSecret {
  assert(secret.length === XXH3_SECRET_SIZE, 'secret is 192 bytes');
  const words = new Int32Array(XXH3_SECRET_SIZE / 4);
  for (let w = 0; w < words.length; w++) words[w] = read32(secret, 4 * w);
  const lastStripe = new Int32Array(16);
  const merge = new Int32Array(16);
  for (let w = 0; w < 16; w++) {
    lastStripe[w] = read32(secret, 121 + 4 * w);
    merge[w] = read32(secret, 11 + 4 * w);
  }
  return { words, lastStripe, merge };
}

export const DEFAULT_LONG_SECRET: LongSecret = longSecret(K_SECRET);

/** The secret derived from a seed (`XXH3_initCustomSecret`), cached for the last seed used. */
let seededSecret: LongSecret = DEFAULT_LONG_SECRET;
let seededSecretLo = 0;
let seededSecretHi = 0;

function secretForSeed(seedLo: number, seedHi: number): LongSecret {
  if (seedLo === 0 && seedHi === 0) return DEFAULT_LONG_SECRET;
  if (seedLo === seededSecretLo && seedHi === seededSecretHi && seededSecret !== DEFAULT_LONG_SECRET) {
    return seededSecret;
  }
  const derived = new Uint8Array(XXH3_SECRET_SIZE);
  const view = new DataView(derived.buffer);
  for (let offset = 0; offset < XXH3_SECRET_SIZE; offset += 16) {
    // Even u64 words get + seed, odd ones - seed.
    const aLo0 = read32(K_SECRET, offset);
    const aLo = (aLo0 + seedLo) | 0;
    const aHi = (read32(K_SECRET, offset + 4) + seedHi + (((aLo0 & seedLo) | ((aLo0 | seedLo) & ~aLo)) >>> 31)) | 0;
    const bLo0 = read32(K_SECRET, offset + 8);
    const bLo = (bLo0 - seedLo) | 0;
    const bHi = (read32(K_SECRET, offset + 12) - seedHi - (((~bLo0 & seedLo) | (~(bLo0 ^ seedLo) & bLo)) >>> 31)) | 0;
    view.setInt32(offset, aLo, true);
    view.setInt32(offset + 4, aHi, true);
    view.setInt32(offset + 8, bLo, true);
    view.setInt32(offset + 12, bHi, true);
  }
  seededSecret = longSecret(derived);
  seededSecretLo = seedLo;
  seededSecretHi = seedHi;
  return seededSecret;
}

/** Accumulators as 16 int32 words (lane i is words 2i, 2i+1), set to `XXH3_INIT_ACC`. */
export function accInit(acc: Int32Array): void {
  acc[0] = PRIME32_3;
  acc[1] = 0;
  acc[2] = PRIME64_1_LO;
  acc[3] = PRIME64_1_HI;
  acc[4] = PRIME64_2_LO;
  acc[5] = PRIME64_2_HI;
  acc[6] = PRIME64_3_LO;
  acc[7] = PRIME64_3_HI;
  acc[8] = PRIME64_4_LO;
  acc[9] = PRIME64_4_HI;
  acc[10] = PRIME32_2;
  acc[11] = 0;
  acc[12] = PRIME64_5_LO;
  acc[13] = PRIME64_5_HI;
  acc[14] = PRIME32_1;
  acc[15] = 0;
}

/** `XXH3_scrambleAcc` with the secret's last 64 bytes: acc = (acc ^ acc >> 47 ^ key) * PRIME32_1. */
export function scrambleAcc(acc: Int32Array, secret: LongSecret): void {
  const s = secret.words;
  for (let lane = 0; lane < 8; lane++) {
    const hi = acc[2 * lane + 1]! ^ s[33 + 2 * lane]!;
    const lo = acc[2 * lane]! ^ (acc[2 * lane + 1]! >>> 15) ^ s[32 + 2 * lane]!;
    acc[2 * lane] = Math.imul(lo, PRIME32_1);
    acc[2 * lane + 1] = (mulHi32(lo, PRIME32_1) + Math.imul(hi, PRIME32_1)) | 0;
  }
}

/** `XXH3_mergeAccs` at secret + 11 with start length * PRIME64_1, then avalanche. Returns lo, sets resultHi. */
export function mergeAcc(acc: Int32Array, secret: LongSecret, length: number): number {
  const m = secret.merge;
  // length * PRIME64_1 with a length of up to 2^53 (two words).
  const lengthHi = Math.floor(length / TWO_POW_32);
  sumLo = mul64(length | 0, lengthHi | 0, PRIME64_1_LO, PRIME64_1_HI);
  sumHi = resultHi;
  for (let pair = 0; pair < 4; pair++) {
    const lo = mul128Fold64(
      acc[4 * pair]! ^ m[4 * pair]!,
      acc[4 * pair + 1]! ^ m[4 * pair + 1]!,
      acc[4 * pair + 2]! ^ m[4 * pair + 2]!,
      acc[4 * pair + 3]! ^ m[4 * pair + 3]!,
    );
    sumAdd(lo, resultHi);
  }
  return avalanche(sumLo, sumHi);
}

/**
 * Word views over input bytes for the long path. An input whose start is 4-byte aligned is read
 * in place through one Int32Array view; any other input is copied a window at a time into an
 * aligned scratch buffer (bounded: WINDOW_SIZE bytes, reused), which costs a memcpy per window,
 * a few percent of the hashing time.
 */
const WINDOW_SIZE = 16 * XXH3_BLOCK_SIZE;

export class WordReader {
  // Each reader owns its window, so the manifest's reader and xxh3's cannot clobber each other.
  private readonly windowBytes = new Uint8Array(WINDOW_SIZE);
  private readonly windowWords = new Int32Array(this.windowBytes.buffer);
  private bytes: Uint8Array = this.windowBytes;
  private start = 0;
  private inPlace: Int32Array | null = null;
  /** Word index into the array returned by the last `words()` call. */
  wordIndex = 0;

  /** Reads [start, start + length) of `bytes` from now on. */
  reset(bytes: Uint8Array, start: number, length: number): void {
    this.bytes = bytes;
    this.start = start;
    const byteOffset = bytes.byteOffset + start;
    this.inPlace =
      (byteOffset & 3) === 0 ? new Int32Array(bytes.buffer, byteOffset, Math.floor(length / 4)) : null;
  }

  /**
   * Words covering [at, at + byteCount) relative to the reset start (inside the reset range),
   * byteCount <= 16 KiB. Sets `wordIndex`. In place when the input is aligned and `at` is a
   * multiple of 4; otherwise the bytes are copied to the window.
   */
  words(at: number, byteCount: number): Int32Array {
    if (this.inPlace !== null && (at & 3) === 0) {
      this.wordIndex = at >>> 2;
      return this.inPlace;
    }
    assert(byteCount <= WINDOW_SIZE, 'window fits');
    const from = this.start + at;
    this.windowBytes.set(this.bytes.subarray(from, from + byteCount), 0);
    this.wordIndex = 0;
    return this.windowWords;
  }

  /** Drops the reference to the input so a large buffer is not kept alive by the reader. */
  clear(): void {
    this.bytes = this.windowBytes;
    this.inPlace = null;
  }
}

const reader = new WordReader();
const longAcc = new Int32Array(16);

/** Stripes and blocks of [start, start + length), length > 240, into `acc` (initialized). */
function hashLongInto(
  b: Uint8Array,
  start: number,
  length: number,
  secret: LongSecret,
  acc: Int32Array,
): number {
  reader.reset(b, start, length);
  const s = secret.words;
  const blockCount = Math.floor((length - 1) / XXH3_BLOCK_SIZE);
  // Full blocks, a window of up to 16 blocks at a time.
  const blocksPerWindow = WINDOW_SIZE / XXH3_BLOCK_SIZE;
  for (let block = 0; block < blockCount; block += blocksPerWindow) {
    const windowBlocks = Math.min(blocksPerWindow, blockCount - block);
    const w = reader.words(block * XXH3_BLOCK_SIZE, windowBlocks * XXH3_BLOCK_SIZE);
    let p = reader.wordIndex;
    for (let k = 0; k < windowBlocks; k++) {
      accumulateStripes(w, p, XXH3_STRIPES_PER_BLOCK, s, 0, acc);
      scrambleAcc(acc, secret);
      p += XXH3_BLOCK_SIZE / 4;
    }
  }
  // The partial last block: whole stripes that end before the final byte...
  const tailStart = blockCount * XXH3_BLOCK_SIZE;
  const stripeCount = ((length - 1 - tailStart) / XXH3_STRIPE_SIZE) | 0;
  if (stripeCount > 0) {
    const w = reader.words(tailStart, stripeCount * XXH3_STRIPE_SIZE);
    accumulateStripes(w, reader.wordIndex, stripeCount, s, 0, acc);
  }
  // ...then the last 64 bytes (overlapping the previous stripe unless length % 64 == 0) with
  // the secret at 121.
  const w = reader.words(length - XXH3_STRIPE_SIZE, XXH3_STRIPE_SIZE);
  accumulateStripes(w, reader.wordIndex, 1, secret.lastStripe, 0, acc);
  reader.clear();
  return mergeAcc(acc, secret, length);
}

/** The core: XXH3-64 of b[start, start + length). Returns lo, sets resultHi. */
function hash(b: Uint8Array, start: number, length: number, seedLo: number, seedHi: number): number {
  if (length <= XXH3_MIDSIZE_MAX) return hashShort(b, start, length, seedLo, seedHi);
  accInit(longAcc);
  return hashLongInto(b, start, length, secretForSeed(seedLo, seedHi), longAcc);
}

/** The high half of the last result from `hashShort` or `mergeAcc` (for sibling kernels). */
export function lastResultHi(): number {
  return resultHi;
}

const U64_MASK = 0xffff_ffff_ffff_ffffn;

/** XXH3-64 (`XXH3_64bits_withSeed`) of `bytes`; `seed` is a u64 (taken modulo 2^64). */
export function xxh3_64(bytes: Uint8Array, seed = 0n): bigint {
  const seed64 = seed & U64_MASK;
  const lo = hash(bytes, 0, bytes.length, Number(seed64 & 0xffff_ffffn) | 0, Number(seed64 >> 32n) | 0);
  return (BigInt(resultHi >>> 0) << 32n) | BigInt(lo >>> 0);
}

/**
 * BigInt-free XXH3-64 of bytes[offset, offset + length) with the u64 seed (seedLo, seedHi).
 * Writes the result's low and high u32 to out[outIndex] and out[outIndex + 1].
 */
export function xxh3_64_into(
  bytes: Uint8Array,
  offset: number,
  length: number,
  seedLo: number,
  seedHi: number,
  out: Uint32Array,
  outIndex: number,
): void {
  // Checked once here: every read below stays inside [offset, offset + length), so the loops
  // never index past the array (which would read `undefined` and silently hash zeros).
  assert(Number.isInteger(offset) && Number.isInteger(length), 'offset and length are integers');
  assert(Number.isInteger(outIndex), 'output index is an integer');
  assert(offset >= 0 && length >= 0 && offset + length <= bytes.length, 'range inside bytes');
  assert(outIndex >= 0 && outIndex + 2 <= out.length, 'result fits');
  const lo = hash(bytes, offset, length, seedLo | 0, seedHi | 0);
  out[outIndex] = lo;
  out[outIndex + 1] = resultHi;
}

// ---------------------------------------------------------------------------------------------
// The stripe loop, `XXH3_accumulate` over up to one block. For each 8-byte lane i of a stripe:
// key = data ^ secret; acc[i] += lo32(key) * hi32(key) (a full 32x32->64 product);
// acc[i ^ 1] += data.
//
// Doing that with exact u64 adds per lane costs about 30 int32 operations (carry recovery on
// every add) and measured 0.9 GB/s. Instead the loop runs lane-major (a pair of lanes at a time
// through all stripes of the call; lanes do not interact within a block) and defers every carry:
// lo32(key) * (16-bit half of hi32(key)) is below 2^48, so up to 16 of them sum exactly in a
// double (< 2^52), and so do 16 u32 data words. The sums are folded into the u64 accumulator
// once per lane per call (`addToLane`). Measured 1.5-2 GB/s. The 16-stripe cap is what keeps
// every double exact; callers pass at most one block.
//
// `accSecond`, when given, receives the same terms: the chunk manifest's one-pass mode, where a
// chunk's hash and the whole artifact's hash see identical stripes (chunk-manifest-ts.ts).
//
// Callers guarantee: w has 16 * stripeCount words from wordIndex, s has 2 * stripeCount + 14
// words from secretWordIndex (the typed arrays would read `undefined` past the end, not throw).
export function accumulateStripes(
  w: Int32Array,
  wordIndex: number,
  stripeCount: number,
  s: Int32Array,
  secretWordIndex: number,
  acc: Int32Array,
  accSecond: Int32Array | null = null,
): void {
  assert(stripeCount <= XXH3_STRIPES_PER_BLOCK, 'at most one block per call keeps the sums exact');
  for (let lane = 0; lane < 8; lane += 2) {
    let sum0L = 0;
    let sum0H = 0;
    let sum1L = 0;
    let sum1H = 0;
    let data0L = 0;
    let data0H = 0;
    let data1L = 0;
    let data1H = 0;
    let p = wordIndex + 2 * lane;
    let q = secretWordIndex + 2 * lane;
    for (let n = 0; n < stripeCount; n++) {
      const a = w[p]!;
      const b = w[p + 1]!;
      const c = w[p + 2]!;
      const d = w[p + 3]!;
      const key0L = (a ^ s[q]!) >>> 0;
      const key0H = b ^ s[q + 1]!;
      const key1L = (c ^ s[q + 2]!) >>> 0;
      const key1H = d ^ s[q + 3]!;
      sum0L += key0L * (key0H & 0xffff);
      sum0H += key0L * (key0H >>> 16);
      sum1L += key1L * (key1H & 0xffff);
      sum1H += key1L * (key1H >>> 16);
      // acc[i ^ 1] += data: lane `lane` collects its partner's words and vice versa.
      data0L += c >>> 0;
      data0H += d >>> 0;
      data1L += a >>> 0;
      data1H += b >>> 0;
      p += 16;
      q += 2;
    }
    addToLane(acc, lane, sum0L, sum0H, data0L, data0H);
    addToLane(acc, lane + 1, sum1L, sum1H, data1L, data1H);
    if (accSecond !== null) {
      addToLane(accSecond, lane, sum0L, sum0H, data0L, data0H);
      addToLane(accSecond, lane + 1, sum1L, sum1H, data1L, data1H);
    }
  }
}

/**
 * acc[lane] += sumL + sumH * 2^16 + dataL + dataH * 2^32 (mod 2^64), where the inputs are exact
 * non-negative doubles below 2^52. Every intermediate stays below 2^53, so the doubles are exact;
 * `| 0` then reduces modulo 2^32.
 */
function addToLane(
  acc: Int32Array,
  lane: number,
  sumL: number,
  sumH: number,
  dataL: number,
  dataH: number,
): void {
  const sumHLow = sumH % 65536;
  const low = (acc[2 * lane]! >>> 0) + sumL + sumHLow * 65536 + dataL;
  const carry = Math.floor(low / TWO_POW_32);
  const high = (acc[2 * lane + 1]! >>> 0) + carry + (sumH - sumHLow) / 65536 + dataH;
  acc[2 * lane] = low | 0;
  acc[2 * lane + 1] = high | 0;
}

// XXH3-64 (WASM kernel): exactly XXH3_64bits_withSeed of xxHash 0.8, the same function as
// src/kernels/xxh3-ts.ts, which documents the algorithm. One source builds both targets: the long
// path's stripe loop has a SIMD branch (hotpath-perf.md §8 "m3": a paired v128.shuffle splits two
// key vectors into their low and high u32 halves, then i64x2.extmul_low/high_i32x4_u form the four
// 32x32->64 products) and a scalar u64 branch, chosen at compile time by ASC_FEATURE_SIMD.
//
// Memory: no allocation (runtime stub). The default secret and two scratch areas are static data.
// Bounds: checked once, by the caller. kernels-wasm.ts (or another kernel) passes a range it staged
// or validated inside linear memory, and every load below stays inside [ptr, ptr + len) or the
// 192-byte secret, so the loops need no per-access checks. A wrong range cannot read outside the
// module: WebAssembly traps on any access past the end of memory.

// @ts-ignore: decorator
@inline export const SECRET_SIZE: usize = 192;
// @ts-ignore: decorator
@inline export const STRIPE_SIZE: usize = 64;
// @ts-ignore: decorator
@inline export const STRIPES_PER_BLOCK: usize = 16;
// @ts-ignore: decorator
@inline export const BLOCK_SIZE: usize = 1024;
// @ts-ignore: decorator
@inline export const MIDSIZE_MAX: usize = 240;
// Where the long path reads its secret: the last stripe at 121, the merge at 11, the scramble key
// in the last 64 bytes (at 128).
// @ts-ignore: decorator
@inline export const SECRET_LAST_STRIPE: usize = 121;
// @ts-ignore: decorator
@inline const SECRET_MERGE: usize = 11;
// @ts-ignore: decorator
@inline export const SECRET_SCRAMBLE: usize = 128;

// @ts-ignore: decorator
@inline const PRIME32_1: u64 = 0x9E3779B1;
// @ts-ignore: decorator
@inline const PRIME32_2: u64 = 0x85EBCA77;
// @ts-ignore: decorator
@inline const PRIME32_3: u64 = 0xC2B2AE3D;
// @ts-ignore: decorator
@inline const PRIME64_1: u64 = 0x9E3779B185EBCA87;
// @ts-ignore: decorator
@inline const PRIME64_2: u64 = 0xC2B2AE3D27D4EB4F;
// @ts-ignore: decorator
@inline const PRIME64_3: u64 = 0x165667B19E3779F9;
// @ts-ignore: decorator
@inline const PRIME64_4: u64 = 0x85EBCA77C2B2AE63;
// @ts-ignore: decorator
@inline const PRIME64_5: u64 = 0x27D4EB2F165667C5;
// @ts-ignore: decorator
@inline const PRIME_MX1: u64 = 0x165667919E3779F9;
// @ts-ignore: decorator
@inline const PRIME_MX2: u64 = 0x9FB21C651E98DF25;

// The default secret, XXH3_kSecret.
export const K_SECRET: usize = memory.data<u8>([
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
], 16);

// The secret derived from a non-zero seed for the long path (XXH3_initCustomSecret), rebuilt per
// call: 12 u64 pairs cost far less than the > 240 input bytes that need it.
const SEEDED_SECRET: usize = memory.data(<i32>SECRET_SIZE, 16);
// The eight u64 accumulators of xxh3_64's long path.
const ACC: usize = memory.data(64, 16);

// 64x64->128 multiply folded to 64 bits (XXH3_mul128_fold64). Wasm has no 64-bit high multiply,
// so the product is built from four 32x32->64 products; `cross` cannot overflow (its maximum is
// exactly 2^64 - 1).
// @ts-ignore: decorator
@inline function mul128Fold64(a: u64, b: u64): u64 {
  const aLo = a & 0xFFFFFFFF;
  const aHi = a >> 32;
  const bLo = b & 0xFFFFFFFF;
  const bHi = b >> 32;
  const loLo = aLo * bLo;
  const hiLo = aHi * bLo;
  const loHi = aLo * bHi;
  const hiHi = aHi * bHi;
  const cross = (loLo >> 32) + (hiLo & 0xFFFFFFFF) + loHi;
  const upper = (hiLo >> 32) + (cross >> 32) + hiHi;
  const lower = (cross << 32) | (loLo & 0xFFFFFFFF);
  return lower ^ upper;
}

// @ts-ignore: decorator
@inline function avalancheXxh64(h: u64): u64 {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline export function avalanche(h: u64): u64 {
  h ^= h >> 37;
  h *= PRIME_MX1;
  return h ^ (h >> 32);
}

// @ts-ignore: decorator
@inline function rrmxmx(h: u64, len: u64): u64 {
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24);
  h *= PRIME_MX2;
  h ^= (h >> 35) + len;
  h *= PRIME_MX2;
  return h ^ (h >> 28);
}

// @ts-ignore: decorator
@inline function mix16B(ip: usize, sp: usize, seed: u64): u64 {
  return mul128Fold64(
    load<u64>(ip) ^ (load<u64>(sp) + seed),
    load<u64>(ip, 8) ^ (load<u64>(sp, 8) - seed),
  );
}

function hash0to16(ip: usize, len: usize, seed: u64): u64 {
  const s = K_SECRET;
  if (len > 8) {
    const bitflip1 = (load<u64>(s, 24) ^ load<u64>(s, 32)) + seed;
    const bitflip2 = (load<u64>(s, 40) ^ load<u64>(s, 48)) - seed;
    const inputLo = load<u64>(ip) ^ bitflip1;
    const inputHi = load<u64>(ip + len - 8) ^ bitflip2;
    const acc = <u64>len + bswap<u64>(inputLo) + inputHi + mul128Fold64(inputLo, inputHi);
    return avalanche(acc);
  }
  if (len >= 4) {
    seed ^= <u64>bswap<u32>(<u32>seed) << 32;
    const input1 = <u64>load<u32>(ip);
    const input2 = <u64>load<u32>(ip + len - 4);
    const bitflip = (load<u64>(s, 8) ^ load<u64>(s, 16)) - seed;
    return rrmxmx((input2 + (input1 << 32)) ^ bitflip, <u64>len);
  }
  if (len > 0) {
    const c1 = <u32>load<u8>(ip);
    const c2 = <u32>load<u8>(ip + (len >> 1));
    const c3 = <u32>load<u8>(ip + len - 1);
    const combined = (c1 << 16) | (c2 << 24) | c3 | (<u32>len << 8);
    const bitflip = <u64>(load<u32>(s) ^ load<u32>(s, 4)) + seed;
    return avalancheXxh64(<u64>combined ^ bitflip);
  }
  return avalancheXxh64(seed ^ (load<u64>(s, 56) ^ load<u64>(s, 64)));
}

function hash17to128(ip: usize, len: usize, seed: u64): u64 {
  const s = K_SECRET;
  let acc = <u64>len * PRIME64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16B(ip + 48, s + 96, seed);
        acc += mix16B(ip + len - 64, s + 112, seed);
      }
      acc += mix16B(ip + 32, s + 64, seed);
      acc += mix16B(ip + len - 48, s + 80, seed);
    }
    acc += mix16B(ip + 16, s + 32, seed);
    acc += mix16B(ip + len - 32, s + 48, seed);
  }
  acc += mix16B(ip, s, seed);
  acc += mix16B(ip + len - 16, s + 16, seed);
  return avalanche(acc);
}

function hash129to240(ip: usize, len: usize, seed: u64): u64 {
  const s = K_SECRET;
  let acc = <u64>len * PRIME64_1;
  for (let i: usize = 0; i < 8; i++) acc += mix16B(ip + 16 * i, s + 16 * i, seed);
  acc = avalanche(acc);
  // Rounds 8.. read the secret from 3 (XXH3_MIDSIZE_STARTOFFSET); the last 16 bytes from
  // 136 - 17 (XXH3_SECRET_SIZE_MIN - XXH3_MIDSIZE_LASTOFFSET).
  const rounds = len >> 4;
  for (let i: usize = 8; i < rounds; i++) acc += mix16B(ip + 16 * i, s + 16 * (i - 8) + 3, seed);
  acc += mix16B(ip + len - 16, s + 119, seed);
  return avalanche(acc);
}

// XXH3-64 of an input of at most 240 bytes.
export function hashShort(ip: usize, len: usize, seed: u64): u64 {
  if (len <= 16) return hash0to16(ip, len, seed);
  if (len <= 128) return hash17to128(ip, len, seed);
  return hash129to240(ip, len, seed);
}

// ---------------------------------------------------------------------------------------------
// Long path building blocks (shared with chunks.ts). An accumulator set is 64 bytes of memory
// holding eight u64 lanes; the loops keep it in locals and write it back once per call.

export function accInit(acc: usize): void {
  store<u64>(acc, PRIME32_3, 0);
  store<u64>(acc, PRIME64_1, 8);
  store<u64>(acc, PRIME64_2, 16);
  store<u64>(acc, PRIME64_3, 24);
  store<u64>(acc, PRIME64_4, 32);
  store<u64>(acc, PRIME32_2, 40);
  store<u64>(acc, PRIME64_5, 48);
  store<u64>(acc, PRIME32_1, 56);
}

// XXH3_scrambleAcc with the secret's last 64 bytes: acc = (acc ^ acc >> 47 ^ key) * PRIME32_1.
export function scrambleAcc(acc: usize, secret: usize): void {
  const key = secret + SECRET_SCRAMBLE;
  for (let i: usize = 0; i < 64; i += 8) {
    let a = load<u64>(acc + i);
    a ^= a >> 47;
    a ^= load<u64>(key + i);
    store<u64>(acc + i, a * PRIME32_1);
  }
}

// XXH3_mergeAccs at secret + 11 starting from len * PRIME64_1, then the avalanche.
export function mergeAccs(acc: usize, secret: usize, len: u64): u64 {
  const key = secret + SECRET_MERGE;
  let result = <u64>len * PRIME64_1;
  for (let i: usize = 0; i < 64; i += 16) {
    result += mul128Fold64(load<u64>(acc + i) ^ load<u64>(key + i), load<u64>(acc + i, 8) ^ load<u64>(key + i, 8));
  }
  return avalanche(result);
}

// `stripeCount` consecutive stripes from ip into acc. The secret advances 8 bytes per stripe from
// `secret`; after every 16th stripe (a full block) the accumulators are scrambled and the secret
// restarts. Callers start at a block boundary, so a call with 16 * blocks + tail stripes does
// exactly the reference's blocks, scrambles and partial block. A call with a single stripe and
// secret + 121 is the last stripe. Reads [ip, ip + 64 * stripeCount) and the 192-byte secret.
export function accumulate(acc: usize, ip: usize, stripeCount: usize, secret: usize): void {
  if (ASC_FEATURE_SIMD) {
    let a0 = v128.load(acc);
    let a1 = v128.load(acc, 16);
    let a2 = v128.load(acc, 32);
    let a3 = v128.load(acc, 48);
    let sp = secret;
    let inBlock: usize = 0;
    const end = ip + stripeCount * STRIPE_SIZE;
    while (ip < end) {
      const d0 = v128.load(ip);
      const d1 = v128.load(ip, 16);
      const d2 = v128.load(ip, 32);
      const d3 = v128.load(ip, 48);
      const k0 = v128.xor(d0, v128.load(sp));
      const k1 = v128.xor(d1, v128.load(sp, 16));
      const k2 = v128.xor(d2, v128.load(sp, 32));
      const k3 = v128.xor(d3, v128.load(sp, 48));
      // lo01 = low u32 of lanes 0..3, hi01 = their high u32; extmul pairs them up per lane.
      const lo01 = v128.shuffle<i32>(k0, k1, 0, 2, 4, 6);
      const hi01 = v128.shuffle<i32>(k0, k1, 1, 3, 5, 7);
      const lo23 = v128.shuffle<i32>(k2, k3, 0, 2, 4, 6);
      const hi23 = v128.shuffle<i32>(k2, k3, 1, 3, 5, 7);
      // acc[i] += product, acc[i ^ 1] += data: swap each data vector's two u64 lanes.
      a0 = i64x2.add(a0, i64x2.add(v128.shuffle<i64>(d0, d0, 1, 0), i64x2.extmul_low_i32x4_u(lo01, hi01)));
      a1 = i64x2.add(a1, i64x2.add(v128.shuffle<i64>(d1, d1, 1, 0), i64x2.extmul_high_i32x4_u(lo01, hi01)));
      a2 = i64x2.add(a2, i64x2.add(v128.shuffle<i64>(d2, d2, 1, 0), i64x2.extmul_low_i32x4_u(lo23, hi23)));
      a3 = i64x2.add(a3, i64x2.add(v128.shuffle<i64>(d3, d3, 1, 0), i64x2.extmul_high_i32x4_u(lo23, hi23)));
      ip += STRIPE_SIZE;
      sp += 8;
      if (++inBlock == STRIPES_PER_BLOCK) {
        a0 = scrambleLanes(a0, secret + SECRET_SCRAMBLE);
        a1 = scrambleLanes(a1, secret + SECRET_SCRAMBLE + 16);
        a2 = scrambleLanes(a2, secret + SECRET_SCRAMBLE + 32);
        a3 = scrambleLanes(a3, secret + SECRET_SCRAMBLE + 48);
        sp = secret;
        inBlock = 0;
      }
    }
    v128.store(acc, a0);
    v128.store(acc, a1, 16);
    v128.store(acc, a2, 32);
    v128.store(acc, a3, 48);
  } else {
    let a0 = load<u64>(acc);
    let a1 = load<u64>(acc, 8);
    let a2 = load<u64>(acc, 16);
    let a3 = load<u64>(acc, 24);
    let a4 = load<u64>(acc, 32);
    let a5 = load<u64>(acc, 40);
    let a6 = load<u64>(acc, 48);
    let a7 = load<u64>(acc, 56);
    let sp = secret;
    let inBlock: usize = 0;
    const end = ip + stripeCount * STRIPE_SIZE;
    while (ip < end) {
      const d0 = load<u64>(ip);
      const d1 = load<u64>(ip, 8);
      const d2 = load<u64>(ip, 16);
      const d3 = load<u64>(ip, 24);
      const d4 = load<u64>(ip, 32);
      const d5 = load<u64>(ip, 40);
      const d6 = load<u64>(ip, 48);
      const d7 = load<u64>(ip, 56);
      const k0 = d0 ^ load<u64>(sp);
      const k1 = d1 ^ load<u64>(sp, 8);
      const k2 = d2 ^ load<u64>(sp, 16);
      const k3 = d3 ^ load<u64>(sp, 24);
      const k4 = d4 ^ load<u64>(sp, 32);
      const k5 = d5 ^ load<u64>(sp, 40);
      const k6 = d6 ^ load<u64>(sp, 48);
      const k7 = d7 ^ load<u64>(sp, 56);
      a0 += d1 + (k0 & 0xFFFFFFFF) * (k0 >> 32);
      a1 += d0 + (k1 & 0xFFFFFFFF) * (k1 >> 32);
      a2 += d3 + (k2 & 0xFFFFFFFF) * (k2 >> 32);
      a3 += d2 + (k3 & 0xFFFFFFFF) * (k3 >> 32);
      a4 += d5 + (k4 & 0xFFFFFFFF) * (k4 >> 32);
      a5 += d4 + (k5 & 0xFFFFFFFF) * (k5 >> 32);
      a6 += d7 + (k6 & 0xFFFFFFFF) * (k6 >> 32);
      a7 += d6 + (k7 & 0xFFFFFFFF) * (k7 >> 32);
      ip += STRIPE_SIZE;
      sp += 8;
      if (++inBlock == STRIPES_PER_BLOCK) {
        const key = secret + SECRET_SCRAMBLE;
        a0 = scrambleLane(a0, load<u64>(key));
        a1 = scrambleLane(a1, load<u64>(key, 8));
        a2 = scrambleLane(a2, load<u64>(key, 16));
        a3 = scrambleLane(a3, load<u64>(key, 24));
        a4 = scrambleLane(a4, load<u64>(key, 32));
        a5 = scrambleLane(a5, load<u64>(key, 40));
        a6 = scrambleLane(a6, load<u64>(key, 48));
        a7 = scrambleLane(a7, load<u64>(key, 56));
        sp = secret;
        inBlock = 0;
      }
    }
    store<u64>(acc, a0);
    store<u64>(acc, a1, 8);
    store<u64>(acc, a2, 16);
    store<u64>(acc, a3, 24);
    store<u64>(acc, a4, 32);
    store<u64>(acc, a5, 40);
    store<u64>(acc, a6, 48);
    store<u64>(acc, a7, 56);
  }
}

// @ts-ignore: decorator
@inline export function scrambleLane(a: u64, key: u64): u64 {
  return (a ^ (a >> 47) ^ key) * PRIME32_1;
}

// Two lanes of the scramble. i64x2.mul is slow without AVX-512 but runs once per 16 stripes.
// @ts-ignore: decorator
@inline export function scrambleLanes(a: v128, key: usize): v128 {
  const mixed = v128.xor(v128.xor(a, i64x2.shr_u(a, 47)), v128.load(key));
  return i64x2.mul(mixed, i64x2.splat(PRIME32_1));
}

// Fills SEEDED_SECRET from the seed: even u64 words of the default secret + seed, odd ones - seed.
function deriveSecret(seed: u64): usize {
  deriveSecretInto(SEEDED_SECRET, seed);
  return SEEDED_SECRET;
}

// XXH3_initCustomSecret into the 192 bytes at `out` (seed 0 gives the default secret).
export function deriveSecretInto(out: usize, seed: u64): void {
  for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
    store<u64>(out + i, load<u64>(K_SECRET + i) + seed);
    store<u64>(out + i, load<u64>(K_SECRET + i, 8) - seed, 8);
  }
}

// The long path over [ip, ip + len), len > 240, with the given 192-byte secret, using `acc`.
export function hashLong(acc: usize, ip: usize, len: usize, secret: usize): u64 {
  accInit(acc);
  // Whole stripes that end before the last byte, with a scramble after each full block; then the
  // last 64 bytes (overlapping unless len % 64 == 0) with the secret at 121.
  accumulate(acc, ip, (len - 1) / STRIPE_SIZE, secret);
  accumulate(acc, ip + len - STRIPE_SIZE, 1, secret + SECRET_LAST_STRIPE);
  return mergeAccs(acc, secret, len);
}

// XXH3_64bits_withSeed of [ptr, ptr + len). Also called by the journal, trailer and chunk kernels.
export function xxh3_64(ptr: usize, len: usize, seed: u64): u64 {
  if (len <= MIDSIZE_MAX) return hashShort(ptr, len, seed);
  return hashLong(ACC, ptr, len, seed == 0 ? K_SECRET : deriveSecret(seed));
}

/**
 * Published XXH3-64 values that do not depend on any implementation in node_modules.
 *
 * Source: xxHash's own self-test (cli/xsum_sanity_check.c, `XSUM_XXH3_testdata`, the same values
 * as tests/sanity_test_vectors.h). The values are hashes of prefixes of a generated buffer:
 * byteGen starts at PRIME32 = 2654435761; for each byte, buffer[i] = byteGen >> 56, then
 * byteGen *= PRIME64 = 11400714785074694797 (mod 2^64). The seeded rows use seed = PRIME64.
 * Note this PRIME64 ends in ...797, not XXH_PRIME64_1 (...791).
 */

export const SANITY_PRIME32 = 2654435761n;
export const SANITY_PRIME64 = 11400714785074694797n;
export const SANITY_BUFFER_SIZE = 4096 + 64 + 1;

/** XXH3_64bits of the empty input (seed 0), the value quoted in xxhash.h and every port. */
export const XXH3_64_EMPTY = 0x2d06800538d394c2n;

/** `XSUM_fillTestBuffer`. */
export function sanityBuffer(length = SANITY_BUFFER_SIZE): Uint8Array {
  const buffer = new Uint8Array(length);
  let byteGen = SANITY_PRIME32;
  for (let index = 0; index < length; index++) {
    buffer[index] = Number(byteGen >> 56n);
    byteGen = (byteGen * SANITY_PRIME64) & 0xffff_ffff_ffff_ffffn;
  }
  return buffer;
}

export interface Xxh3Vector {
  /** Hash of sanityBuffer()[0, length). */
  readonly length: number;
  readonly seed: bigint;
  readonly hash: bigint;
}

const P = SANITY_PRIME64;

/** One row per XXH3 code path: 0, 1-3, 4-8, 9-16, 17-128 (three sub-ranges), 129-240, long. */
export const XXH3_64_SANITY_VECTORS: readonly Xxh3Vector[] = [
  { length: 0, seed: 0n, hash: 0x2d06800538d394c2n },
  { length: 0, seed: P, hash: 0xa8a6b918b2f0364an },
  { length: 1, seed: 0n, hash: 0xc44bdff4074eecdbn },
  { length: 1, seed: P, hash: 0x032be332dd766ef8n },
  { length: 6, seed: 0n, hash: 0x27b56a84cd2d7325n },
  { length: 6, seed: P, hash: 0x84589c116ab59ab9n },
  { length: 12, seed: 0n, hash: 0xa713daf0dfbb77e7n },
  { length: 12, seed: P, hash: 0xe7303e1b2336de0en },
  { length: 24, seed: 0n, hash: 0xa3fe70bf9d3510ebn },
  { length: 24, seed: P, hash: 0x850e80fc35bdd690n },
  { length: 48, seed: 0n, hash: 0x397da259ecba1f11n },
  { length: 48, seed: P, hash: 0xadc2cbaa44acc616n },
  { length: 80, seed: 0n, hash: 0xbcdefbbb2c47c90an },
  { length: 80, seed: P, hash: 0xc6dd0cb699532e73n },
  { length: 195, seed: 0n, hash: 0xcd94217ee362ec3an },
  { length: 195, seed: P, hash: 0xba68003d370cb3d9n },
  // One block, last stripe overlapping.
  { length: 403, seed: 0n, hash: 0xcdeb804d65c6dea4n },
  { length: 403, seed: P, hash: 0x6259f6ecfd6443fdn },
  // One block, ending on a stripe boundary.
  { length: 512, seed: 0n, hash: 0x617e49599013cb6bn },
  { length: 512, seed: P, hash: 0x3ce457de14c27708n },
  // Two blocks, ending on a block boundary.
  { length: 2048, seed: 0n, hash: 0xdd59e2c3a5f038e0n },
  { length: 2048, seed: P, hash: 0x66f81670669ababcn },
  // Two blocks and a partial block (off-by-one scrambling, a bug once found in upstream xxHash).
  { length: 2099, seed: 0n, hash: 0xc6b9d9b3fc9ac765n },
  { length: 2099, seed: P, hash: 0x184f316843663974n },
  // Three blocks, ending on a stripe boundary.
  { length: 2240, seed: 0n, hash: 0x6e73a90539cf2948n },
  { length: 2240, seed: P, hash: 0x757ba8487d1b5247n },
  // Three blocks, last stripe overlapping.
  { length: 2367, seed: 0n, hash: 0xcb37aeb9e5d361edn },
  { length: 2367, seed: P, hash: 0xd2db3415b942b42an },
];

/**
 * A small, seeded, deterministic PRNG (xoshiro128**, seeded through splitmix32). Every random
 * choice in the simulator and in the replica (timeouts' jitter, nonces) comes from one of these,
 * so a seed replays exactly. Not for secrets: the node layer uses node:crypto for those.
 */
import { assert } from './assert.js';

/** Bytes of real entropy `Prng.fromSeedBytes` takes: the generator's whole state. */
export const PRNG_SEED_BYTES = 16;

function splitmix32(state: number): [next: number, output: number] {
  const next = (state + 0x9e37_79b9) >>> 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x85eb_ca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2_ae35) >>> 0;
  return [next, (z ^ (z >>> 16)) >>> 0];
}

export class Prng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** `seed` is any safe integer (including seeds above 2^32, as `vrmeta simulate` prints them). */
  constructor(seed: number) {
    assert(Number.isSafeInteger(seed) && seed >= 0, 'PRNG seed is a non-negative safe integer');
    let state = (seed >>> 0) ^ Math.floor(seed / 0x1_0000_0000);
    const words: number[] = [];
    for (let index = 0; index < 4; index++) {
      const [next, output] = splitmix32(state);
      state = next;
      words.push(output);
    }
    [this.s0, this.s1, this.s2, this.s3] = words as [number, number, number, number];
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /**
   * A generator whose whole 128-bit state is `bytes` (16 bytes, little-endian words), for the
   * server: nonces and the boot incarnation must not be guessable, and the numeric seed above
   * carries at most 32 bits. The node layer passes node:crypto's randomBytes(16).
   */
  static fromSeedBytes(bytes: Uint8Array): Prng {
    assert(bytes.byteLength === PRNG_SEED_BYTES, `a PRNG seed is ${PRNG_SEED_BYTES} bytes`);
    const prng = new Prng(0);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    prng.s0 = view.getUint32(0, true);
    prng.s1 = view.getUint32(4, true);
    prng.s2 = view.getUint32(8, true);
    prng.s3 = view.getUint32(12, true);
    if ((prng.s0 | prng.s1 | prng.s2 | prng.s3) === 0) prng.s0 = 1; // xoshiro's one forbidden state
    return prng;
  }

  /** A uniform u32. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    this.s0 >>>= 0;
    this.s1 >>>= 0;
    this.s2 >>>= 0;
    return result;
  }

  /** A uniform float in [0, 1). */
  float(): number {
    return (this.nextU32() * 0x20_0000 + (this.nextU32() >>> 11)) / 2 ** 53;
  }

  /** A uniform integer in [0, max). */
  int(max: number): number {
    assert(Number.isSafeInteger(max) && max > 0, 'int(max) takes a positive bound');
    return Math.floor(this.float() * max);
  }

  /** A uniform integer in [min, max]. */
  range(min: number, max: number): number {
    assert(min <= max, 'range(min, max) with min <= max');
    return min + this.int(max - min + 1);
  }

  /** True with probability `probability`. */
  chance(probability: number): boolean {
    return probability > 0 && this.float() < probability;
  }

  /** A non-zero u128 (nonces, incarnations, client ids in the simulator). */
  u128(): bigint {
    let value = 0n;
    for (let index = 0; index < 4; index++) value = (value << 32n) | BigInt(this.nextU32());
    return value === 0n ? 1n : value;
  }

  pick<T>(items: readonly T[]): T {
    assert(items.length > 0, 'pick from a non-empty list');
    return items[this.int(items.length)]!;
  }

  shuffle<T>(items: T[]): T[] {
    for (let index = items.length - 1; index > 0; index--) {
      const other = this.int(index + 1);
      [items[index], items[other]] = [items[other]!, items[index]!];
    }
    return items;
  }
}

function rotl(value: number, shift: number): number {
  return ((value << shift) | (value >>> (32 - shift))) >>> 0;
}

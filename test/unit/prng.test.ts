import { describe, expect, it } from 'vitest';
import { PRNG_SEED_BYTES, Prng } from '../../src/stdx/prng.js';

function firstWords(prng: Prng, count = 4): number[] {
  return Array.from({ length: count }, () => prng.nextU32());
}

describe('Prng', () => {
  it('a numeric seed replays exactly (the simulator relies on it)', () => {
    expect(firstWords(new Prng(42))).toEqual(firstWords(new Prng(42)));
  });

  it('fromSeedBytes takes 128 bits of state: every seed bit changes the stream', () => {
    const seed = new Uint8Array(PRNG_SEED_BYTES).map((_, index) => index * 37 + 11);
    const base = firstWords(Prng.fromSeedBytes(seed));
    for (let bit = 0; bit < PRNG_SEED_BYTES * 8; bit++) {
      const flipped = seed.slice();
      flipped[bit >> 3]! ^= 1 << (bit & 7);
      expect(firstWords(Prng.fromSeedBytes(flipped)), `bit ${bit}`).not.toEqual(base);
    }
  });

  it('fromSeedBytes refuses a seed shorter than its state', () => {
    expect(() => Prng.fromSeedBytes(new Uint8Array(8))).toThrow(/16 bytes/);
  });
});

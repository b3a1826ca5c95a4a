/**
 * Trailer kernel conformance: every implementation seals and splits the 20-byte "ISNP" trailer
 * identically and tells valid, checksum mismatch and no trailer apart.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TRAILER_SIZE } from '../../src/kernels/kernel.js';
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';
import { implementations } from './implementations.js';

function bytes(length: number, seed = 1): Uint8Array {
  const out = new Uint8Array(length);
  let state = seed >>> 0;
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    out[index] = state >>> 24;
  }
  return out;
}

describe.each(implementations)('trailer ($label)', ({ kernels }) => {
  it('seals with the documented layout: magic, XXH3-64 widened to 16 bytes little-endian', () => {
    const payload = bytes(1000);
    const sealed = kernels.trailerSeal(payload);
    expect(sealed.byteLength).toBe(1000 + TRAILER_SIZE);
    expect(sealed.subarray(0, 1000)).toEqual(payload);
    expect([...sealed.subarray(1000, 1004)]).toEqual([0x50, 0x4e, 0x53, 0x49]);
    const view = new DataView(sealed.buffer, sealed.byteOffset + 1004, 16);
    expect(view.getBigUint64(0, true)).toBe(xxh3_64(payload));
    expect(view.getBigUint64(8, true)).toBe(0n);
  });

  it.each([0, 1, 19, 20, 21, 4096, 1 << 20])('round-trips a %i-byte payload', (size) => {
    const payload = bytes(size, size + 3);
    const split = kernels.trailerSplit(kernels.trailerSeal(payload));
    expect(split.status).toBe('valid');
    expect(split.payload).toEqual(payload);
    if (split.status === 'valid') expect(split.checksum).toBe(xxh3_64(payload));
  });

  it('writes the trailer at an offset inside a larger buffer', () => {
    const payload = bytes(333);
    const target = new Uint8Array(400).fill(0xaa);
    kernels.trailerWrite(payload, target, 7);
    expect(target.subarray(0, 7).every((byte) => byte === 0xaa)).toBe(true);
    expect(target.subarray(27).every((byte) => byte === 0xaa)).toBe(true);
    expect(target.subarray(7, 27)).toEqual(kernels.trailerSeal(payload).subarray(333));
  });

  it('reports a flipped payload bit as checksum_mismatch with both checksums', () => {
    const payload = bytes(512);
    const sealed = kernels.trailerSeal(payload);
    sealed[100]! ^= 0x10;
    const split = kernels.trailerSplit(sealed);
    expect(split.status).toBe('checksum_mismatch');
    if (split.status !== 'checksum_mismatch') return;
    expect(split.expected).toBe(xxh3_64(payload));
    expect(split.actual).toBe(xxh3_64(sealed.subarray(0, 512)));
  });

  it('reports a damaged checksum, including the zero upper half, as checksum_mismatch', () => {
    for (const at of [4, 11, 12, 19]) {
      const sealed = kernels.trailerSeal(bytes(64));
      sealed[64 + at]! ^= 0x01;
      expect(kernels.trailerSplit(sealed).status).toBe('checksum_mismatch');
    }
  });

  it('reports no_trailer for short files and files without the magic', () => {
    for (const size of [0, 1, 19]) expect(kernels.trailerSplit(bytes(size)).status).toBe('no_trailer');
    const sealed = kernels.trailerSeal(bytes(64));
    sealed[64]! ^= 0xff;
    const split = kernels.trailerSplit(sealed);
    expect(split.status).toBe('no_trailer');
    expect(split.payload.byteLength).toBe(sealed.byteLength);
  });

  it('reads a file placed at an unaligned offset and one already in kernel memory', () => {
    const sealed = kernels.trailerSeal(bytes(777));
    const host = new Uint8Array(sealed.byteLength + 5);
    host.set(sealed, 3);
    expect(kernels.trailerSplit(host.subarray(3, 3 + sealed.byteLength)).status).toBe('valid');
    const buffer = kernels.allocate(sealed.byteLength);
    buffer.bytes().set(sealed);
    expect(kernels.trailerSplit(buffer.bytes()).status).toBe('valid');
    buffer.release();
  });
});

describe('trailer: every implementation agrees on random payloads', () => {
  it('seals identically and splits identically', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), fc.nat(3020), (payload, flipAt) => {
        const sealed = implementations.map(({ kernels }) => kernels.trailerSeal(payload));
        for (const other of sealed) expect(other).toEqual(sealed[0]);
        const damaged = sealed[0]!.slice();
        if (flipAt < damaged.byteLength) damaged[flipAt]! ^= 0x80;
        const splits = implementations.map(({ kernels }) => kernels.trailerSplit(damaged));
        for (const split of splits) expect(split).toEqual(splits[0]);
      }),
      { numRuns: 300 },
    );
  });
});

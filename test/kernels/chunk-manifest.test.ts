/**
 * Chunk manifest conformance: for every implementation (TS, WASM SIMD, WASM scalar), each chunk
 * checksum is the XXH3-64 of that slice and the whole checksum is the XXH3-64 of the artifact,
 * checked against the reference (@node-rs/xxhash). The one-pass layout (chunk sizes that are
 * multiples of 1024) is exercised at every place where the chunk's hash and the whole's hash part:
 * a chunk's last stripe, a short last chunk (<= 240 bytes, its own path), a last chunk of exactly
 * one stripe, block, or chunk.
 */
import { xxh3 } from '@node-rs/xxhash';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkManifestTs } from '../../src/kernels/chunk-manifest-ts.js';
import type { ChunkManifest } from '../../src/kernels/kernel.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { pseudoRandomBytes, xxh3Implementations } from './xxh3-support.js';
import { XXH3_64_EMPTY } from './xxh3-vectors.js';

const KiB = 1024;
const MiB = 1024 * KiB;

const data = pseudoRandomBytes(3 * MiB + 64, 11);

function expectManifestOf(manifest: ChunkManifest, artifact: Uint8Array, chunkSize: number, what: string): void {
  const chunkCount = Math.ceil(artifact.length / chunkSize);
  expect(manifest.chunkSize, what).toBe(chunkSize);
  expect(manifest.totalSize, what).toBe(artifact.length);
  expect(manifest.chunkCount, what).toBe(chunkCount);
  expect(manifest.chunkChecksums.length, what).toBe(chunkCount);
  expect(manifest.checksum, `${what}: whole`).toBe(xxh3.xxh64(artifact, 0n));
  for (let chunk = 0; chunk < chunkCount; chunk++) {
    const slice = artifact.subarray(chunk * chunkSize, Math.min(artifact.length, (chunk + 1) * chunkSize));
    expect(manifest.chunkChecksums[chunk], `${what}: chunk ${chunk}`).toBe(xxh3.xxh64(slice, 0n));
  }
}

/**
 * (artifact length, chunk size). With chunk size C = k * 1024 the last chunk is:
 * one byte, one stripe (64), 240 (short path), 241 (long path, first byte), one block, C - 1,
 * or exactly C.
 */
const CASES: readonly (readonly [number, number])[] = [
  ...[1024, 2048, 3072, 64 * KiB].flatMap((c) =>
    [1, 63, 64, 65, 240, 241, 1023, 1024, 1025, c - 1, c].filter((tail) => tail <= c).flatMap((tail) => [
      [c + tail, c] as const,
      [3 * c + tail, c] as const,
    ]),
  ),
  // Chunk sizes that are not multiples of 1024 (the two-pass path), 1, and larger than the artifact.
  [5000, 1000],
  [5000, 1],
  [777, 7],
  [4096, 64],
  [10_000, 4095],
  [10_000, 4097],
  [1000, 5000],
  [240, 1024],
  [241, 1024],
  [1024, 1024],
  [1, 1],
  [100, 100_000],
];

describe.each(xxh3Implementations)('chunk manifest ($label)', (implementation) => {
  it('an empty artifact has no chunks and the checksum of the empty input', () => {
    for (const chunkSize of [1, 1024, 64 * KiB]) {
      const manifest = implementation.manifest(new Uint8Array(0), chunkSize);
      expect(manifest.chunkCount).toBe(0);
      expect(manifest.chunkChecksums.length).toBe(0);
      expect(manifest.checksum).toBe(XXH3_64_EMPTY);
    }
  });

  it('chunk and whole checksums equal the reference at every tail shape and chunk size', () => {
    for (const [length, chunkSize] of CASES) {
      const artifact = data.subarray(0, length);
      expectManifestOf(implementation.manifest(artifact, chunkSize), artifact, chunkSize, `${length}/${chunkSize}`);
    }
  });

  it('reads unaligned artifacts and artifacts already in its memory', () => {
    for (const [length, chunkSize] of [[5 * KiB + 300, 2 * KiB], [3 * KiB + 64, 1024], [9000, 1000], [2 * KiB + 100, KiB]] as const) {
      for (let offset = 1; offset < 16; offset += 3) {
        const artifact = data.subarray(offset, offset + length);
        expectManifestOf(implementation.manifest(artifact, chunkSize), artifact, chunkSize, `offset ${offset}`);
        const inMemory = implementation.manifestInMemory(data.subarray(0, length), chunkSize, offset);
        expectManifestOf(inMemory, data.subarray(0, length), chunkSize, `in memory, misalign ${offset}`);
      }
    }
  });

  it('multi-MiB artifacts with 64 KiB and 1 MiB chunks, and 1 KiB chunks with a short last chunk', () => {
    const artifact = data.subarray(0, 3 * MiB + 1);
    for (const chunkSize of [64 * KiB, MiB]) {
      expectManifestOf(implementation.manifest(artifact, chunkSize), artifact, chunkSize, `3 MiB + 1 / ${chunkSize}`);
    }
    const small = data.subarray(5, 5 + MiB + 100);
    expectManifestOf(implementation.manifestInMemory(small, KiB, 0), small, KiB, '1 MiB + 100 / 1 KiB');
  });
});

describe('chunk manifest (ts) input checks', () => {
  it('refuses chunk sizes that are not positive integers', () => {
    for (const chunkSize of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      expect(() => chunkManifestTs(new Uint8Array(10), chunkSize)).toThrow(AssertionError);
    }
  });
});

describe('chunk manifest differential properties', () => {
  const [ts, ...wasm] = xxh3Implementations;
  // Chunk sizes: tiny, arbitrary, multiples of 1024 (the one-pass path), and larger than the artifact.
  const chunkSizeArbitrary = fc.oneof(
    fc.integer({ min: 1, max: 64 }),
    fc.integer({ min: 65, max: 30_000 }),
    fc.integer({ min: 1, max: 12 }).map((blocks) => blocks * 1024),
    fc.constant(1 << 20),
  );

  it('ts == wasm, each chunk == xxh3(slice), whole == xxh3(artifact)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40_000 }),
        chunkSizeArbitrary,
        fc.integer({ min: 0, max: 15 }),
        fc.integer({ min: 1, max: 1 << 30 }),
        (length, chunkSize, offset, dataSeed) => {
          // Keep the chunk count (and the reference's per-chunk calls) bounded.
          fc.pre(length / chunkSize <= 2000);
          const artifact = pseudoRandomBytes(length + offset, dataSeed).subarray(offset);
          const expected = ts!.manifest(artifact, chunkSize);
          expectManifestOf(expected, artifact, chunkSize, `ts ${length}/${chunkSize}`);
          for (const implementation of wasm) {
            const actual = implementation.manifest(artifact, chunkSize);
            expect(actual.checksum).toBe(expected.checksum);
            expect(actual.chunkChecksums).toEqual(expected.chunkChecksums);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

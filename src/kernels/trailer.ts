/**
 * The 20-byte integrity trailer that seals `snapshot.bin` (iggy-metadata-plane.md §4.3):
 * bytes 0..4 the magic "ISNP" (0x4953_4E50 little-endian, on disk 50 4E 53 49), bytes 4..20 the
 * XXH3-64 of the payload widened to u128, little-endian (so the last 8 bytes are zero).
 *
 * These helpers are the TypeScript kernel; they take the hash function so the reference logic is
 * written once. The WASM kernel implements the same layout in assembly/trailer.ts.
 */
import { assert } from '../stdx/assert.js';
import { TRAILER_MAGIC, TRAILER_SIZE, type TrailerSplit } from './kernel.js';

export type Xxh3 = (bytes: Uint8Array, seed?: bigint) => bigint;

export function trailerWriteWith(
  xxh3: Xxh3,
  payload: Uint8Array,
  target: Uint8Array,
  targetOffset: number,
): void {
  trailerWriteChecksum(xxh3(payload, 0n), target, targetOffset);
}

/** The trailer for a payload whose XXH3-64 the caller already computed (and just verified). */
export function trailerWriteChecksum(checksum: bigint, target: Uint8Array, targetOffset: number): void {
  assert(targetOffset >= 0 && targetOffset + TRAILER_SIZE <= target.byteLength, 'trailer fits');
  const view = new DataView(target.buffer, target.byteOffset + targetOffset, TRAILER_SIZE);
  view.setUint32(0, TRAILER_MAGIC, true);
  view.setBigUint64(4, checksum, true);
  view.setBigUint64(12, 0n, true);
}

export function trailerSealWith(xxh3: Xxh3, payload: Uint8Array): Uint8Array {
  const sealed = new Uint8Array(payload.byteLength + TRAILER_SIZE);
  sealed.set(payload, 0);
  trailerWriteWith(xxh3, payload, sealed, payload.byteLength);
  return sealed;
}

/**
 * A file whose last 20 bytes do not start with the magic has no trailer; the caller decides
 * whether that is acceptable (vrmeta always writes one, so its readers refuse such files).
 */
export function trailerSplitWith(xxh3: Xxh3, file: Uint8Array): TrailerSplit {
  if (file.byteLength < TRAILER_SIZE) return { status: 'no_trailer', payload: file };
  const at = file.byteLength - TRAILER_SIZE;
  const view = new DataView(file.buffer, file.byteOffset + at, TRAILER_SIZE);
  if (view.getUint32(0, true) !== TRAILER_MAGIC) return { status: 'no_trailer', payload: file };
  const payload = file.subarray(0, at);
  const expected = view.getBigUint64(4, true) | (view.getBigUint64(12, true) << 64n);
  const actual = xxh3(payload, 0n);
  if (expected === actual) return { status: 'valid', payload, checksum: actual };
  return { status: 'checksum_mismatch', payload, expected, actual };
}

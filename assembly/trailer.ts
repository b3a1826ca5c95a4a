// The 20-byte snapshot trailer (WASM kernel); layout and semantics in src/kernels/trailer.ts.
import { xxh3_64 } from './xxh3';

// @ts-ignore: decorator
@inline const TRAILER_SIZE: usize = 20;
// "ISNP" read as a little-endian u32.
// @ts-ignore: decorator
@inline const TRAILER_MAGIC: u32 = 0x4953_4e50;

// Writes the trailer of [ptr, ptr + len) at out (20 bytes; may be unaligned).
export function trailer_write(ptr: usize, len: usize, out: usize): void {
  const checksum = xxh3_64(ptr, len, 0);
  store<u32>(out, TRAILER_MAGIC);
  store<u64>(out, checksum, 4);
  store<u64>(out, 0, 12);
}

// Returns 0 valid, 1 checksum mismatch, 2 no trailer. Writes the stored checksum (u128 LE) at
// result and the computed XXH3-64 at result + 16.
export function trailer_split(ptr: usize, len: usize, result: usize): i32 {
  if (len < TRAILER_SIZE) return 2;
  const trailer = ptr + len - TRAILER_SIZE;
  if (load<u32>(trailer) != TRAILER_MAGIC) return 2;
  const storedLow = load<u64>(trailer, 4);
  const storedHigh = load<u64>(trailer, 12);
  const actual = xxh3_64(ptr, len - TRAILER_SIZE, 0);
  store<u64>(result, storedLow);
  store<u64>(result, storedHigh, 8);
  store<u64>(result, actual, 16);
  return storedLow == actual && storedHigh == 0 ? 0 : 1;
}

/**
 * Chunk manifest (TypeScript kernel): the XXH3-64 (seed 0) of each `chunkSize` slice of an
 * artifact (the last one may be short) and of the whole artifact. Same results as the WASM
 * kernel (assembly/chunks.ts), which uses the same one-pass layout.
 *
 * One pass when chunkSize is a multiple of 1024 bytes (the XXH3 block size with the default
 * secret): every chunk then starts on a block boundary of the whole artifact, so each stripe of a
 * chunk meets the same secret bytes in the chunk's hash and in the whole's hash, and its terms are
 * computed once and added to both accumulator sets. The two hashes part only where a chunk ends:
 * the chunk's 16th stripe of its last block is its "last stripe" (secret at 121), while for the
 * whole it is an ordinary stripe (secret at 120) followed by a scramble. The last chunk shares
 * even that, because the whole artifact ends where it ends.
 *
 * Other chunk sizes hash each chunk and then the whole: correct, twice the work.
 */
import { assert } from '../stdx/assert.js';
import type { ChunkManifest } from './kernel.js';
import {
  accInit,
  accumulateStripes,
  DEFAULT_LONG_SECRET,
  hashShort,
  lastResultHi,
  mergeAcc,
  scrambleAcc,
  WordReader,
  XXH3_BLOCK_SIZE,
  XXH3_MIDSIZE_MAX,
  XXH3_STRIPE_SIZE,
  XXH3_STRIPES_PER_BLOCK,
  xxh3_64_into,
} from './xxh3-ts.js';

/** The adapter's bound too (kernels-wasm.ts): chunk offsets stay far below 2^53. */
const CHUNK_SIZE_MAX = 0x7fff_ffff;

const reader = new WordReader();
const accWhole = new Int32Array(16);
const accChunk = new Int32Array(16);

export function chunkManifestTs(artifact: Uint8Array, chunkSize: number): ChunkManifest {
  assert(Number.isInteger(chunkSize) && chunkSize > 0 && chunkSize <= CHUNK_SIZE_MAX, 'chunk size');
  const totalSize = artifact.length;
  const chunkCount = Math.ceil(totalSize / chunkSize);
  const chunkChecksums = new BigUint64Array(chunkCount);
  // Written as (lo, hi) u32 pairs: xxh3-ts asserts a little-endian platform, so pair i is u64 i.
  const out = new Uint32Array(chunkChecksums.buffer);
  const whole = new Uint32Array(2);
  if (chunkCount >= 2 && chunkSize % XXH3_BLOCK_SIZE === 0) {
    manifestOnePass(artifact, chunkSize, chunkCount, out, whole);
  } else {
    for (let chunk = 0; chunk < chunkCount; chunk++) {
      const start = chunk * chunkSize;
      xxh3_64_into(artifact, start, Math.min(chunkSize, totalSize - start), 0, 0, out, 2 * chunk);
    }
    xxh3_64_into(artifact, 0, totalSize, 0, 0, whole, 0);
  }
  const checksum = (BigInt(whole[1]!) << 32n) | BigInt(whole[0]!);
  return { chunkSize, totalSize, chunkCount, chunkChecksums, checksum };
}

/**
 * chunkCount >= 2 and chunkSize a multiple of 1024: the whole artifact is longer than one block
 * (so it takes the long path) and every chunk but the last is a whole number of blocks.
 */
function manifestOnePass(
  artifact: Uint8Array,
  chunkSize: number,
  chunkCount: number,
  out: Uint32Array,
  whole: Uint32Array,
): void {
  const totalSize = artifact.length;
  assert(totalSize > XXH3_BLOCK_SIZE && chunkSize % XXH3_BLOCK_SIZE === 0, 'one-pass layout');
  const secret = DEFAULT_LONG_SECRET;
  const s = secret.words;
  const blockWords = XXH3_BLOCK_SIZE / 4;
  reader.reset(artifact, 0, totalSize);
  accInit(accWhole);
  for (let chunk = 0; chunk < chunkCount - 1; chunk++) {
    const start = chunk * chunkSize;
    accInit(accChunk);
    const blockCount = chunkSize / XXH3_BLOCK_SIZE;
    for (let block = 0; block < blockCount; block++) {
      const w = reader.words(start + block * XXH3_BLOCK_SIZE, XXH3_BLOCK_SIZE);
      const p = reader.wordIndex;
      if (block < blockCount - 1) {
        accumulateStripes(w, p, XXH3_STRIPES_PER_BLOCK, s, 0, accWhole, accChunk);
        scrambleAcc(accWhole, secret);
        scrambleAcc(accChunk, secret);
        continue;
      }
      // The chunk's last block: 15 shared stripes, then the 16th stripe, which is an ordinary
      // stripe plus a scramble for the whole and the last stripe (secret at 121) for the chunk.
      accumulateStripes(w, p, XXH3_STRIPES_PER_BLOCK - 1, s, 0, accWhole, accChunk);
      const last = p + blockWords - XXH3_STRIPE_SIZE / 4;
      accumulateStripes(w, last, 1, s, 2 * (XXH3_STRIPES_PER_BLOCK - 1), accWhole);
      scrambleAcc(accWhole, secret);
      accumulateStripes(w, last, 1, secret.lastStripe, 0, accChunk);
    }
    out[2 * chunk] = mergeAcc(accChunk, secret, chunkSize);
    out[2 * chunk + 1] = lastResultHi();
  }
  const lastIndex = chunkCount - 1;
  const lastStart = lastIndex * chunkSize;
  const lastSize = totalSize - lastStart;
  // The whole's tail has the last chunk's structure: the same block boundaries and the same
  // final 64 bytes. A long last chunk shares all of it; a short one (<= 240 bytes) hashes on its
  // own path while the whole still takes its stripes and its last stripe, which may reach back
  // into the previous chunk.
  const shared = lastSize > XXH3_MIDSIZE_MAX;
  if (shared) {
    accInit(accChunk);
  } else {
    out[2 * lastIndex] = hashShort(artifact, lastStart, lastSize, 0, 0);
    out[2 * lastIndex + 1] = lastResultHi();
  }
  const second = shared ? accChunk : null;
  const tailStripes = Math.floor((lastSize - 1) / XXH3_STRIPE_SIZE);
  for (let done = 0; done < tailStripes; done += XXH3_STRIPES_PER_BLOCK) {
    const stripes = Math.min(XXH3_STRIPES_PER_BLOCK, tailStripes - done);
    const w = reader.words(lastStart + done * XXH3_STRIPE_SIZE, stripes * XXH3_STRIPE_SIZE);
    accumulateStripes(w, reader.wordIndex, stripes, s, 0, accWhole, second);
    if (stripes === XXH3_STRIPES_PER_BLOCK) {
      scrambleAcc(accWhole, secret);
      if (second !== null) scrambleAcc(second, secret);
    }
  }
  const w = reader.words(totalSize - XXH3_STRIPE_SIZE, XXH3_STRIPE_SIZE);
  accumulateStripes(w, reader.wordIndex, 1, secret.lastStripe, 0, accWhole, second);
  reader.clear();
  if (shared) {
    out[2 * lastIndex] = mergeAcc(accChunk, secret, lastSize);
    out[2 * lastIndex + 1] = lastResultHi();
  }
  whole[0] = mergeAcc(accWhole, secret, totalSize);
  whole[1] = lastResultHi();
}

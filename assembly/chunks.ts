// Chunk manifest (WASM kernel): the XXH3-64 (seed 0) of each chunkSize slice of [ptr, ptr + len)
// written as u64 LE at outPtr + 8 * i, and the XXH3-64 of the whole range as the result. Same
// results as src/kernels/chunk-manifest-ts.ts. The caller provides 8 * ceil(len / chunkSize) bytes
// at outPtr (kernels-wasm.ts sizes its scratch slot from the same formula).
//
// One pass when chunkSize is a multiple of 1024 (the block size of the default secret): a chunk
// then starts on a block boundary of the whole artifact, so every stripe of the chunk meets the
// same secret bytes in the chunk's hash and in the whole's hash, and its product/accumulate term
// is computed once and added to two accumulator sets (`accumulateDual`). They part only where the
// chunk's hash ends: its 16th stripe of the last block is the chunk's "last stripe" (secret at
// 121), while the whole artifact treats it as an ordinary stripe (secret at 120) and scrambles.
// Other chunk sizes hash each chunk and then the whole (two passes; correct, not the fast path).
import {
  accInit,
  accumulate,
  BLOCK_SIZE,
  hashShort,
  K_SECRET,
  mergeAccs,
  MIDSIZE_MAX,
  SECRET_LAST_STRIPE,
  scrambleAcc,
  scrambleLanes,
  SECRET_SCRAMBLE,
  STRIPE_SIZE,
  STRIPES_PER_BLOCK,
  xxh3_64,
} from './xxh3';

// Accumulators of the whole artifact's hash and of the current chunk's hash.
const ACC_WHOLE: usize = memory.data(64, 16);
const ACC_CHUNK: usize = memory.data(64, 16);

export function chunk_manifest(ptr: usize, len: usize, chunkSize: usize, outPtr: usize): u64 {
  // chunkSize 0 has no meaning (and would divide by zero); the adapter asserts it is positive.
  assert(chunkSize > 0);
  if (len == 0) return xxh3_64(ptr, 0, 0);
  const chunkCount = (len - 1) / chunkSize + 1;
  if (chunkCount == 1) {
    const whole = xxh3_64(ptr, len, 0);
    store<u64>(outPtr, whole);
    return whole;
  }
  if (chunkSize % BLOCK_SIZE != 0) {
    for (let i: usize = 0; i < chunkCount; i++) {
      const start = i * chunkSize;
      const size = min(chunkSize, len - start);
      store<u64>(outPtr + 8 * i, xxh3_64(ptr + start, size, 0));
    }
    return xxh3_64(ptr, len, 0);
  }
  // From here: at least two chunks of a multiple of 1024 bytes, so len > 1024 > 240 and the whole
  // takes the long path; every chunk but the last is a whole number (>= 1) of blocks.
  const secret = K_SECRET;
  accInit(ACC_WHOLE);
  const stripesPerChunk = chunkSize / STRIPE_SIZE;
  for (let i: usize = 0; i < chunkCount - 1; i++) {
    const chunk = ptr + i * chunkSize;
    accInit(ACC_CHUNK);
    // All stripes but the last: full blocks scramble both sets at the same points.
    accumulateDual(ACC_WHOLE, ACC_CHUNK, chunk, stripesPerChunk - 1, secret);
    const lastStripe = chunk + chunkSize - STRIPE_SIZE;
    // The whole: an ordinary 16th stripe (secret at 15 * 8) closing a block, then the scramble.
    accumulate(ACC_WHOLE, lastStripe, 1, secret + (STRIPES_PER_BLOCK - 1) * 8);
    scrambleAcc(ACC_WHOLE, secret);
    // The chunk: the same bytes are its last stripe.
    accumulate(ACC_CHUNK, lastStripe, 1, secret + SECRET_LAST_STRIPE);
    store<u64>(outPtr + 8 * i, mergeAccs(ACC_CHUNK, secret, chunkSize));
  }
  const lastIndex = chunkCount - 1;
  const last = ptr + lastIndex * chunkSize;
  const lastSize = len - lastIndex * chunkSize;
  // The whole's tail has the same structure as the last chunk's hash (same block boundaries, same
  // final 64 bytes), so a long last chunk shares everything.
  const tailStripes = (lastSize - 1) / STRIPE_SIZE;
  if (lastSize > MIDSIZE_MAX) {
    accInit(ACC_CHUNK);
    accumulateDual(ACC_WHOLE, ACC_CHUNK, last, tailStripes, secret);
    accumulateDual(ACC_WHOLE, ACC_CHUNK, ptr + len - STRIPE_SIZE, 1, secret + SECRET_LAST_STRIPE);
    store<u64>(outPtr + 8 * lastIndex, mergeAccs(ACC_CHUNK, secret, lastSize));
  } else {
    // A short last chunk hashes on its own path; the whole still needs its stripes (fewer than
    // a block) and its last stripe, which may reach back into the previous chunk.
    store<u64>(outPtr + 8 * lastIndex, hashShort(last, lastSize, 0));
    accumulate(ACC_WHOLE, last, tailStripes, secret);
    accumulate(ACC_WHOLE, ptr + len - STRIPE_SIZE, 1, secret + SECRET_LAST_STRIPE);
  }
  return mergeAccs(ACC_WHOLE, secret, len);
}

// `accumulate` (see xxh3.ts) into two accumulator sets at once. Between scrambles both sets only
// add the same per-stripe terms, so the loop sums a block's terms once into `delta` (the single
// hash's inner loop, unchanged) and applies them at each block end: a = scramble(a + delta),
// b = scramble(b + delta). The second set costs 4 adds and a scramble per 1 KiB block.
// Reads [ip, ip + 64 * stripeCount) and the secret.
function accumulateDual(accA: usize, accB: usize, ip: usize, stripeCount: usize, secret: usize): void {
  if (ASC_FEATURE_SIMD) {
    // The two sets stay in memory: only the block end touches them, and keeping them in locals
    // as well (12 live v128 values) made V8 spill inside the stripe loop (measured 1.5x slower).
    let delta0 = i64x2.splat(0);
    let delta1 = i64x2.splat(0);
    let delta2 = i64x2.splat(0);
    let delta3 = i64x2.splat(0);
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
      const lo01 = v128.shuffle<i32>(k0, k1, 0, 2, 4, 6);
      const hi01 = v128.shuffle<i32>(k0, k1, 1, 3, 5, 7);
      const lo23 = v128.shuffle<i32>(k2, k3, 0, 2, 4, 6);
      const hi23 = v128.shuffle<i32>(k2, k3, 1, 3, 5, 7);
      delta0 = i64x2.add(delta0, i64x2.add(v128.shuffle<i64>(d0, d0, 1, 0), i64x2.extmul_low_i32x4_u(lo01, hi01)));
      delta1 = i64x2.add(delta1, i64x2.add(v128.shuffle<i64>(d1, d1, 1, 0), i64x2.extmul_high_i32x4_u(lo01, hi01)));
      delta2 = i64x2.add(delta2, i64x2.add(v128.shuffle<i64>(d2, d2, 1, 0), i64x2.extmul_low_i32x4_u(lo23, hi23)));
      delta3 = i64x2.add(delta3, i64x2.add(v128.shuffle<i64>(d3, d3, 1, 0), i64x2.extmul_high_i32x4_u(lo23, hi23)));
      ip += STRIPE_SIZE;
      sp += 8;
      if (++inBlock == STRIPES_PER_BLOCK) {
        addDeltaScramble(accA, delta0, delta1, delta2, delta3, secret);
        addDeltaScramble(accB, delta0, delta1, delta2, delta3, secret);
        delta0 = i64x2.splat(0);
        delta1 = i64x2.splat(0);
        delta2 = i64x2.splat(0);
        delta3 = i64x2.splat(0);
        sp = secret;
        inBlock = 0;
      }
    }
    v128.store(accA, i64x2.add(v128.load(accA), delta0));
    v128.store(accA, i64x2.add(v128.load(accA, 16), delta1), 16);
    v128.store(accA, i64x2.add(v128.load(accA, 32), delta2), 32);
    v128.store(accA, i64x2.add(v128.load(accA, 48), delta3), 48);
    v128.store(accB, i64x2.add(v128.load(accB), delta0));
    v128.store(accB, i64x2.add(v128.load(accB, 16), delta1), 16);
    v128.store(accB, i64x2.add(v128.load(accB, 32), delta2), 32);
    v128.store(accB, i64x2.add(v128.load(accB, 48), delta3), 48);
  } else {
    let sp = secret;
    let inBlock: usize = 0;
    let delta0: u64 = 0, delta1: u64 = 0, delta2: u64 = 0, delta3: u64 = 0;
    let delta4: u64 = 0, delta5: u64 = 0, delta6: u64 = 0, delta7: u64 = 0;
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
      delta0 += d1 + (k0 & 0xFFFFFFFF) * (k0 >> 32);
      delta1 += d0 + (k1 & 0xFFFFFFFF) * (k1 >> 32);
      delta2 += d3 + (k2 & 0xFFFFFFFF) * (k2 >> 32);
      delta3 += d2 + (k3 & 0xFFFFFFFF) * (k3 >> 32);
      delta4 += d5 + (k4 & 0xFFFFFFFF) * (k4 >> 32);
      delta5 += d4 + (k5 & 0xFFFFFFFF) * (k5 >> 32);
      delta6 += d7 + (k6 & 0xFFFFFFFF) * (k6 >> 32);
      delta7 += d6 + (k7 & 0xFFFFFFFF) * (k7 >> 32);
      ip += STRIPE_SIZE;
      sp += 8;
      const blockEnd = ++inBlock == STRIPES_PER_BLOCK;
      if (blockEnd || ip >= end) {
        addDelta(accA, delta0, delta1, delta2, delta3, delta4, delta5, delta6, delta7);
        addDelta(accB, delta0, delta1, delta2, delta3, delta4, delta5, delta6, delta7);
        delta0 = delta1 = delta2 = delta3 = delta4 = delta5 = delta6 = delta7 = 0;
      }
      if (blockEnd) {
        scrambleAcc(accA, secret);
        scrambleAcc(accB, secret);
        sp = secret;
        inBlock = 0;
      }
    }
  }
}

// acc = scramble(acc + delta), in memory (SIMD build).
function addDeltaScramble(acc: usize, delta0: v128, delta1: v128, delta2: v128, delta3: v128, secret: usize): void {
  const key = secret + SECRET_SCRAMBLE;
  v128.store(acc, scrambleLanes(i64x2.add(v128.load(acc), delta0), key));
  v128.store(acc, scrambleLanes(i64x2.add(v128.load(acc, 16), delta1), key + 16), 16);
  v128.store(acc, scrambleLanes(i64x2.add(v128.load(acc, 32), delta2), key + 32), 32);
  v128.store(acc, scrambleLanes(i64x2.add(v128.load(acc, 48), delta3), key + 48), 48);
}

// acc += delta, in memory (scalar build).
function addDelta(acc: usize, d0: u64, d1: u64, d2: u64, d3: u64, d4: u64, d5: u64, d6: u64, d7: u64): void {
  store<u64>(acc, load<u64>(acc) + d0);
  store<u64>(acc, load<u64>(acc, 8) + d1, 8);
  store<u64>(acc, load<u64>(acc, 16) + d2, 16);
  store<u64>(acc, load<u64>(acc, 24) + d3, 24);
  store<u64>(acc, load<u64>(acc, 32) + d4, 32);
  store<u64>(acc, load<u64>(acc, 40) + d5, 40);
  store<u64>(acc, load<u64>(acc, 48) + d6, 48);
  store<u64>(acc, load<u64>(acc, 56) + d7, 56);
}

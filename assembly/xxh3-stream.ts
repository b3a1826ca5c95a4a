// Streaming XXH3-64 (WASM kernel): init / update / digest over a state block the caller owns, so an
// input that is not in WASM memory can be hashed in fixed-size staged pieces (kernels-wasm.ts)
// instead of being copied in whole. Same result as xxh3_64 of the concatenated updates, by the
// reference's streaming algorithm (XXH3_64bits_reset_withSeed / _update / _digest of xxHash 0.8):
// - up to 256 bytes are kept in an internal buffer; while the total is <= 240 nothing else runs and
//   the digest is the short path over the buffer;
// - otherwise whole stripes are consumed as they arrive, always keeping at least the last byte
//   buffered, so the digest owns the final (possibly partial) stripe: the "last stripe" is the last
//   64 bytes of the input, read with the secret at 121, and when fewer than 64 bytes are buffered
//   its head is the end of the previous stripe, which the buffer's last 64 bytes always hold;
// - stripes count across updates: a block (16 stripes) scrambles the accumulators when it completes,
//   whichever update completes it.
//
// State layout (STATE_SIZE bytes, 16-aligned by the caller): the eight u64 accumulators, the
// 192-byte secret derived from the seed, the 256-byte buffer, then the counters.
// Bounds: the caller provides STATE_SIZE bytes at `state` and a range [ptr, ptr + len) inside
// memory (kernels-wasm.ts stages it); every access below stays inside those or the static areas.
import {
  accumulate,
  accInit,
  deriveSecretInto,
  hashShort,
  mergeAccs,
  MIDSIZE_MAX,
  SECRET_LAST_STRIPE,
  scrambleAcc,
  STRIPE_SIZE,
  STRIPES_PER_BLOCK,
} from './xxh3';

// @ts-ignore: decorator
@inline const STATE_ACC: usize = 0;
// @ts-ignore: decorator
@inline const STATE_SECRET: usize = 64;
// @ts-ignore: decorator
@inline const STATE_BUFFER: usize = 256;
// @ts-ignore: decorator
@inline const BUFFER_SIZE: usize = 256;
// @ts-ignore: decorator
@inline const STATE_TOTAL: usize = 512;
// @ts-ignore: decorator
@inline const STATE_SEED: usize = 520;
// @ts-ignore: decorator
@inline const STATE_BUFFERED: usize = 528;
// @ts-ignore: decorator
@inline const STATE_STRIPES: usize = 532;
// @ts-ignore: decorator
@inline export const STATE_SIZE: usize = 544;

// The digest works on copies: a state can be digested and then updated further.
const DIGEST_ACC: usize = memory.data(64, 16);
const LAST_STRIPE: usize = memory.data(64, 16);

export function xxh3_stream_state_size(): usize {
  return STATE_SIZE;
}

export function xxh3_stream_init(state: usize, seed: u64): void {
  accInit(state + STATE_ACC);
  deriveSecretInto(state + STATE_SECRET, seed);
  store<u64>(state + STATE_TOTAL, 0);
  store<u64>(state + STATE_SEED, seed);
  store<u32>(state + STATE_BUFFERED, 0);
  store<u32>(state + STATE_STRIPES, 0);
}

// `stripeCount` stripes from ip into acc, `stripesSoFar` of the current block already done (the
// secret resumes 8 bytes per stripe into the block). Returns the stripes done in the block after.
function consumeStripes(acc: usize, secret: usize, stripesSoFar: usize, ip: usize, stripeCount: usize): usize {
  if (stripesSoFar > 0) {
    const toBlockEnd = STRIPES_PER_BLOCK - stripesSoFar;
    if (stripeCount < toBlockEnd) {
      accumulate(acc, ip, stripeCount, secret + 8 * stripesSoFar);
      return stripesSoFar + stripeCount;
    }
    // accumulate scrambles only after 16 stripes of its own call: close this block by hand.
    accumulate(acc, ip, toBlockEnd, secret + 8 * stripesSoFar);
    scrambleAcc(acc, secret);
    ip += toBlockEnd * STRIPE_SIZE;
    stripeCount -= toBlockEnd;
  }
  // From a block boundary: accumulate does the full blocks (with their scrambles) and the rest.
  accumulate(acc, ip, stripeCount, secret);
  return stripeCount % STRIPES_PER_BLOCK;
}

export function xxh3_stream_update(state: usize, ptr: usize, len: usize): void {
  if (len == 0) return;
  store<u64>(state + STATE_TOTAL, load<u64>(state + STATE_TOTAL) + <u64>len);
  const buffer = state + STATE_BUFFER;
  let buffered = <usize>load<u32>(state + STATE_BUFFERED);
  if (buffered + len <= BUFFER_SIZE) {
    memory.copy(buffer + buffered, ptr, len);
    store<u32>(state + STATE_BUFFERED, <u32>(buffered + len));
    return;
  }
  const acc = state + STATE_ACC;
  const secret = state + STATE_SECRET;
  let stripes = <usize>load<u32>(state + STATE_STRIPES);
  const end = ptr + len;
  if (buffered > 0) {
    // Complete the buffer and consume it whole: more input follows, so none of it is the last stripe.
    const fill = BUFFER_SIZE - buffered;
    memory.copy(buffer + buffered, ptr, fill);
    ptr += fill;
    stripes = consumeStripes(acc, secret, stripes, buffer, BUFFER_SIZE / STRIPE_SIZE);
  }
  // ptr < end here. Consume the stripes that end before the last byte straight from the input,
  // and keep the last of them at the buffer's end for a digest that has < 64 bytes buffered.
  if (end - ptr > BUFFER_SIZE) {
    const stripeCount = (end - ptr - 1) / STRIPE_SIZE;
    stripes = consumeStripes(acc, secret, stripes, ptr, stripeCount);
    ptr += stripeCount * STRIPE_SIZE;
    memory.copy(buffer + BUFFER_SIZE - STRIPE_SIZE, ptr - STRIPE_SIZE, STRIPE_SIZE);
  }
  buffered = end - ptr;
  memory.copy(buffer, ptr, buffered);
  store<u32>(state + STATE_BUFFERED, <u32>buffered);
  store<u32>(state + STATE_STRIPES, <u32>stripes);
}

export function xxh3_stream_digest(state: usize): u64 {
  const total = load<u64>(state + STATE_TOTAL);
  const buffer = state + STATE_BUFFER;
  // Nothing was consumed yet: the whole input is in the buffer.
  if (total <= <u64>MIDSIZE_MAX) return hashShort(buffer, <usize>total, load<u64>(state + STATE_SEED));
  const secret = state + STATE_SECRET;
  const buffered = <usize>load<u32>(state + STATE_BUFFERED);
  memory.copy(DIGEST_ACC, state + STATE_ACC, 64);
  let lastStripe: usize;
  if (buffered >= STRIPE_SIZE) {
    const stripeCount = (buffered - 1) / STRIPE_SIZE;
    consumeStripes(DIGEST_ACC, secret, <usize>load<u32>(state + STATE_STRIPES), buffer, stripeCount);
    lastStripe = buffer + buffered - STRIPE_SIZE;
  } else {
    const catchUp = STRIPE_SIZE - buffered;
    memory.copy(LAST_STRIPE, buffer + BUFFER_SIZE - catchUp, catchUp);
    memory.copy(LAST_STRIPE + catchUp, buffer, buffered);
    lastStripe = LAST_STRIPE;
  }
  accumulate(DIGEST_ACC, lastStripe, 1, secret + SECRET_LAST_STRIPE);
  return mergeAccs(DIGEST_ACC, secret, total);
}

// Message-batch kernels (WASM): verify, checksum and slice of an Iggy message batch. The rules,
// their order and every reported field are those of walkBatch (src/format/message-batch.ts, the
// readable statement) and src/kernels/message-batch-ts.ts; the two must agree field for field.
//
// Checksums: each frame's is XXH3-64 (seed 0) of the frame after its first 8 bytes, one-shot
// (xxh3.ts). The batch checksum is XXH3-64 of the 44-byte header prefix followed by every frame's
// stored checksum (44 + 8N bytes). Those bytes are not contiguous in the batch, so they are
// gathered 8 at a time into a small static ring that is fed to the streaming XXH3 (same result
// as the one-shot hash of the concatenation, xxh3-stream.ts): the kernels need no memory beyond
// the batch itself, whatever N is, so a batch already in WASM memory is verified without growing
// it.
//
// Bounds: the adapter passes [ptr, ptr + len) inside memory (staged, or a KernelBuffer view). The
// walk reads the header only after len >= 256 and a frame header only after 48 bytes remain,
// and it admits a frame only when its whole size fits before len; sizes are summed in u64, so
// lengths near 2^32 cannot wrap. The hashing passes run only after the walk accepted the layout,
// so they re-read only frames it proved in bounds. One exception to the range, on purpose: for
// len > BATCH_SIZE_MAX the adapter stages only the first 256 bytes, since walkHeader refuses such
// a length (batch_length out of bounds, or not len) before it reads past the header.
import { xxh3_64 } from './xxh3';
import {
  STATE_SIZE,
  xxh3_stream_digest,
  xxh3_stream_init,
  xxh3_stream_update,
} from './xxh3-stream';

// @ts-ignore: decorator
@inline const BATCH_HEADER_SIZE: usize = 256;
// @ts-ignore: decorator
@inline const MESSAGE_HEADER_SIZE: usize = 48;
// @ts-ignore: decorator
@inline const BATCH_LENGTH: usize = 32;
// @ts-ignore: decorator
@inline const BATCH_CHECKSUM: usize = 40;
// @ts-ignore: decorator
@inline const MESSAGE_COUNT: usize = 48;
// @ts-ignore: decorator
@inline const HEADER_RESERVED: usize = 52;
// @ts-ignore: decorator
@inline const OFFSET_DELTA: usize = 24;
// @ts-ignore: decorator
@inline const USER_HEADERS_LENGTH: usize = 32;
// @ts-ignore: decorator
@inline const PAYLOAD_LENGTH: usize = 36;
// @ts-ignore: decorator
@inline const FRAME_RESERVED: usize = 40;
// @ts-ignore: decorator
@inline const PREFIX_SIZE: usize = 44;
// @ts-ignore: decorator
@inline const BATCH_SIZE_MAX: u64 = 64 * 1024 * 1024;
// @ts-ignore: decorator
@inline const BATCH_MESSAGES_MAX: u64 = (BATCH_SIZE_MAX - 256) / 48;
// A u64 field is held as a JS number: its high half may not exceed 2^21 - 1 (value < 2^53).
// @ts-ignore: decorator
@inline const SAFE_HIGH_MAX: u32 = 0x1f_ffff;

// Fault codes: 1 + the index in BATCH_FAULT_CODES (src/kernels/message-batch-wasm.ts).
// @ts-ignore: decorator
@inline const FAULT_HEADER_TRUNCATED: u32 = 1;
// @ts-ignore: decorator
@inline const FAULT_HEADER_FIELD: u32 = 2;
// @ts-ignore: decorator
@inline const FAULT_HEADER_RESERVED: u32 = 3;
// @ts-ignore: decorator
@inline const FAULT_LENGTH: u32 = 4;
// @ts-ignore: decorator
@inline const FAULT_FRAME_TRUNCATED: u32 = 5;
// @ts-ignore: decorator
@inline const FAULT_FRAME_RESERVED: u32 = 6;
// @ts-ignore: decorator
@inline const FAULT_OFFSET_DELTA: u32 = 7;
// @ts-ignore: decorator
@inline const FAULT_TILING: u32 = 8;
// @ts-ignore: decorator
@inline const FAULT_COUNT: u32 = 9;
// @ts-ignore: decorator
@inline const FAULT_EMPTY: u32 = 10;

// Result statuses.
// @ts-ignore: decorator
@inline const STATUS_VALID: u32 = 0;
// @ts-ignore: decorator
@inline const STATUS_LAYOUT: u32 = 1;
// @ts-ignore: decorator
@inline const STATUS_MESSAGE_CHECKSUM: u32 = 2;
// @ts-ignore: decorator
@inline const STATUS_BATCH_CHECKSUM: u32 = 3;
// @ts-ignore: decorator
@inline const STATUS_RANGE: u32 = 4;

// Result block layout (BatchResult in src/kernels/message-batch-wasm.ts).
// @ts-ignore: decorator
@inline const RESULT_STATUS: usize = 0;
// @ts-ignore: decorator
@inline const RESULT_FAULT: usize = 4;
// @ts-ignore: decorator
@inline const RESULT_POSITION: usize = 8;
// @ts-ignore: decorator
@inline const RESULT_INDEX: usize = 16;
// @ts-ignore: decorator
@inline const RESULT_STORED: usize = 24;
// @ts-ignore: decorator
@inline const RESULT_COMPUTED: usize = 32;
// @ts-ignore: decorator
@inline const RESULT_COUNT: usize = 40;
// @ts-ignore: decorator
@inline const RESULT_END: usize = 48;

// The batch checksum's gather ring and streaming state (see the top of the file). The ring comes
// first: a write past its end would land in the state and break every checksum, not pass unseen.
// @ts-ignore: decorator
@inline const RING_SIZE: usize = 256;
const RING: usize = memory.data(<i32>RING_SIZE, 16);
const STREAM: usize = memory.data(<i32>STATE_SIZE, 16);
let ringFill: usize = 0;

function zeroRange(start: usize, end: usize): bool {
  let bits: u8 = 0;
  for (let at = start; at < end; at++) bits |= load<u8>(at);
  return bits == 0;
}

function layoutFault(result: usize, fault: u32, position: usize, messageIndex: i64): bool {
  store<u32>(result, STATUS_LAYOUT, RESULT_STATUS);
  store<u32>(result, fault, RESULT_FAULT);
  store<u64>(result, <u64>position, RESULT_POSITION);
  store<i64>(result, messageIndex, RESULT_INDEX);
  return false;
}

// The u64 header field at `at` is above 2^53 - 1 (readBatchHeader's safeU64 gives -1).
// @ts-ignore: decorator
@inline function unsafeField(ptr: usize, at: usize): bool {
  return load<u32>(ptr + at + 4) > SAFE_HIGH_MAX;
}

// The header's own rules, in readBatchHeader's order, then walkBatch's whole-batch rules.
function walkHeader(ptr: usize, len: usize, result: usize): bool {
  if (len < BATCH_HEADER_SIZE) return layoutFault(result, FAULT_HEADER_TRUNCATED, 0, -1);
  if (unsafeField(ptr, 0) || unsafeField(ptr, 8) || unsafeField(ptr, 16) || unsafeField(ptr, 24)) {
    return layoutFault(result, FAULT_HEADER_FIELD, 0, -1);
  }
  const batchLength = load<u64>(ptr + BATCH_LENGTH);
  if (batchLength < <u64>BATCH_HEADER_SIZE || batchLength > BATCH_SIZE_MAX) {
    return layoutFault(result, FAULT_HEADER_FIELD, 0, -1);
  }
  if (!zeroRange(ptr + HEADER_RESERVED, ptr + BATCH_HEADER_SIZE)) {
    return layoutFault(result, FAULT_HEADER_RESERVED, 0, -1);
  }
  if (<u64>len < batchLength) return layoutFault(result, FAULT_HEADER_TRUNCATED, 0, -1);
  if (<u64>len != batchLength) return layoutFault(result, FAULT_LENGTH, 0, -1);
  if (load<u32>(ptr + MESSAGE_COUNT) == 0) return layoutFault(result, FAULT_EMPTY, 0, -1);
  return true;
}

// Frame header plus payload plus user headers, in u64 (two u32 lengths may sum past 2^32).
// @ts-ignore: decorator
@inline function frameSize(frame: usize): u64 {
  const userHeaders = <u64>load<u32>(frame + USER_HEADERS_LENGTH);
  return <u64>MESSAGE_HEADER_SIZE + <u64>load<u32>(frame + PAYLOAD_LENGTH) + userHeaders;
}

// walkBatch: the header, then message_count frames that tile [256, len) exactly. `contiguous`
// selects BatchDeltas.contiguous (delta == first delta + index) over BatchDeltas.index.
function walk(ptr: usize, len: usize, contiguous: bool, result: usize): bool {
  if (!walkHeader(ptr, len, result)) return false;
  const messageCount = load<u32>(ptr + MESSAGE_COUNT);
  let position = BATCH_HEADER_SIZE;
  let messageIndex: u32 = 0;
  let firstDelta: u64 = 0;
  while (position < len) {
    const index = <i64>messageIndex;
    if (messageIndex == messageCount) return layoutFault(result, FAULT_TILING, position, index);
    if (len - position < MESSAGE_HEADER_SIZE) {
      return layoutFault(result, FAULT_FRAME_TRUNCATED, position, index);
    }
    const frame = ptr + position;
    const size = frameSize(frame);
    if (size > <u64>(len - position)) {
      return layoutFault(result, FAULT_FRAME_TRUNCATED, position, index);
    }
    if (load<u64>(frame + FRAME_RESERVED) != 0) {
      return layoutFault(result, FAULT_FRAME_RESERVED, position, index);
    }
    const delta = <u64>load<u32>(frame + OFFSET_DELTA);
    if (messageIndex == 0) firstDelta = delta;
    const expected = contiguous ? firstDelta + <u64>messageIndex : <u64>messageIndex;
    if (delta != expected || delta >= BATCH_MESSAGES_MAX) {
      return layoutFault(result, FAULT_OFFSET_DELTA, position, index);
    }
    messageIndex += 1;
    position += <usize>size;
  }
  if (messageIndex != messageCount) {
    return layoutFault(result, FAULT_COUNT, position, <i64>messageIndex);
  }
  return true;
}

// Starts the batch checksum of the batch whose header is at `header`: its 44-byte prefix.
function checksumBegin(header: usize): void {
  xxh3_stream_init(STREAM, 0);
  memory.copy(RING, header, 40);
  store<u32>(RING + 40, load<u32>(header + MESSAGE_COUNT));
  ringFill = PREFIX_SIZE;
}

// Appends one frame's stored checksum; the ring goes to the stream when it has no room left.
// @ts-ignore: decorator
@inline function checksumAppend(frameChecksum: u64): void {
  if (ringFill > RING_SIZE - 8) {
    xxh3_stream_update(STREAM, RING, ringFill);
    ringFill = 0;
  }
  store<u64>(RING + ringFill, frameChecksum);
  ringFill += 8;
}

function checksumEnd(): u64 {
  xxh3_stream_update(STREAM, RING, ringFill);
  ringFill = 0;
  return xxh3_stream_digest(STREAM);
}

function reportValid(result: usize, messageCount: u32, stored: u64, computed: u64): void {
  store<u32>(result, STATUS_VALID, RESULT_STATUS);
  store<u32>(result, messageCount, RESULT_COUNT);
  store<u64>(result, stored, RESULT_STORED);
  store<u64>(result, computed, RESULT_COMPUTED);
}

// Layout, then every frame's checksum in order, then the batch checksum (BatchVerify).
export function message_batch_verify(ptr: usize, len: usize, contiguous: u32, result: usize): void {
  if (!walk(ptr, len, contiguous != 0, result)) return;
  const messageCount = load<u32>(ptr + MESSAGE_COUNT);
  checksumBegin(ptr);
  let position = BATCH_HEADER_SIZE;
  for (let index: u32 = 0; index < messageCount; index++) {
    const frame = ptr + position;
    const size = <usize>frameSize(frame);
    const stored = load<u64>(frame);
    const computed = xxh3_64(frame + 8, size - 8, 0);
    if (stored != computed) {
      store<u32>(result, STATUS_MESSAGE_CHECKSUM, RESULT_STATUS);
      store<i64>(result, <i64>index, RESULT_INDEX);
      store<u64>(result, <u64>position, RESULT_POSITION);
      store<u64>(result, stored, RESULT_STORED);
      store<u64>(result, computed, RESULT_COMPUTED);
      return;
    }
    checksumAppend(stored);
    position += size;
  }
  const computed = checksumEnd();
  const stored = load<u64>(ptr + BATCH_CHECKSUM);
  reportValid(result, messageCount, stored, computed);
  if (stored != computed) store<u32>(result, STATUS_BATCH_CHECKSUM, RESULT_STATUS);
}

// The batch checksum over the stored frame checksums (no frame hashed), once the layout walks.
export function message_batch_checksum(ptr: usize, len: usize, contiguous: u32, result: usize): void {
  if (!walk(ptr, len, contiguous != 0, result)) return;
  const messageCount = load<u32>(ptr + MESSAGE_COUNT);
  checksumBegin(ptr);
  let position = BATCH_HEADER_SIZE;
  for (let index: u32 = 0; index < messageCount; index++) {
    checksumAppend(load<u64>(ptr + position));
    position += <usize>frameSize(ptr + position);
  }
  reportValid(result, messageCount, load<u64>(ptr + BATCH_CHECKSUM), checksumEnd());
}

// The start of frame `index` of a walked batch (index <= message_count; at the count, len).
function frameStart(ptr: usize, index: u32): usize {
  let position = BATCH_HEADER_SIZE;
  for (let at: u32 = 0; at < index; at++) position += <usize>frameSize(ptr + position);
  return position;
}

// Frames [fromIndex, fromIndex + count) (count clamped) of a batch under contiguous deltas: the
// slice's header, with batch_length, message_count and batch_checksum rewritten, at `header`
// (256 bytes); the frames it holds are [position, end) of the batch, copied out by the adapter.
export function message_batch_slice(
  ptr: usize,
  len: usize,
  fromIndex: u32,
  count: u32,
  header: usize,
  result: usize,
): void {
  if (!walk(ptr, len, true, result)) return;
  const messageCount = load<u32>(ptr + MESSAGE_COUNT);
  if (fromIndex >= messageCount) {
    store<u32>(result, STATUS_RANGE, RESULT_STATUS);
    store<u32>(result, messageCount, RESULT_COUNT);
    return;
  }
  // Written so that fromIndex + count cannot wrap a u32.
  const sliceCount = count > messageCount - fromIndex ? messageCount - fromIndex : count;
  const blobStart = frameStart(ptr, fromIndex);
  let blobEnd = blobStart;
  for (let index: u32 = 0; index < sliceCount; index++) blobEnd += <usize>frameSize(ptr + blobEnd);
  memory.copy(header, ptr, BATCH_HEADER_SIZE);
  store<u64>(header + BATCH_LENGTH, <u64>(BATCH_HEADER_SIZE + blobEnd - blobStart));
  store<u32>(header + MESSAGE_COUNT, sliceCount);
  checksumBegin(header);
  for (let at = blobStart; at < blobEnd; at += <usize>frameSize(ptr + at)) {
    checksumAppend(load<u64>(ptr + at));
  }
  const checksum = checksumEnd();
  store<u64>(header + BATCH_CHECKSUM, checksum);
  reportValid(result, sliceCount, checksum, checksum);
  store<u64>(result, <u64>blobStart, RESULT_POSITION);
  store<u64>(result, <u64>blobEnd, RESULT_END);
}

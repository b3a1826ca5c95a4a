// Journal scan (WASM kernel). Same checks, order and classification as
// src/kernels/journal-scan-ts.ts, which documents them; the two must agree byte for byte.
import { xxh3_64 } from './xxh3';

// @ts-ignore: decorator
@inline const HEADER_SIZE: usize = 256;
// @ts-ignore: decorator
@inline const OFFSET_CHECKSUM_BODY: usize = 16;
// @ts-ignore: decorator
@inline const OFFSET_SIZE: usize = 48;
// @ts-ignore: decorator
@inline const OFFSET_VIEW: usize = 52;
// @ts-ignore: decorator
@inline const OFFSET_COMMAND: usize = 60;
// @ts-ignore: decorator
@inline const OFFSET_RESERVED_FRAME: usize = 62;
// @ts-ignore: decorator
@inline const OFFSET_COMMAND_SPECIFIC: usize = 128;
// @ts-ignore: decorator
@inline const OFFSET_PARENT: usize = 144;
// @ts-ignore: decorator
@inline const OFFSET_OP: usize = 176;
// @ts-ignore: decorator
@inline const OFFSET_PAD: usize = 209;
// @ts-ignore: decorator
@inline const OFFSET_GROUP: usize = 216;
// @ts-ignore: decorator
@inline const OFFSET_RESERVED: usize = 228;
// @ts-ignore: decorator
@inline const COMMAND_PREPARE: u8 = 6;

// Result block layout (see src/kernels/kernels-wasm.ts JournalResult).
// @ts-ignore: decorator
@inline const RESULT_VALID_END: usize = 0;
// @ts-ignore: decorator
@inline const RESULT_ENTRY_COUNT: usize = 8;
// @ts-ignore: decorator
@inline const RESULT_LAST_OP: usize = 16;
// @ts-ignore: decorator
@inline const RESULT_FAILURE_OFFSET: usize = 24;
// @ts-ignore: decorator
@inline const RESULT_REASON: usize = 32;
// @ts-ignore: decorator
@inline const RESULT_TORN: usize = 36;

// A private copy of the header with `checksum` and `view` zeroed: the prepare identity covers
// everything else, so a retransmit re-stamped with a newer view keeps its identity.
const identityScratch: usize = memory.data(256, 16);

function identityAt(entry: usize): u64 {
  memory.copy(identityScratch, entry, HEADER_SIZE);
  store<u64>(identityScratch, 0, 0);
  store<u64>(identityScratch, 0, 8);
  store<u32>(identityScratch, 0, OFFSET_VIEW);
  return xxh3_64(identityScratch, HEADER_SIZE, 0);
}

function zeroRange(start: usize, end: usize): bool {
  let bits: u8 = 0;
  for (let at = start; at < end; at++) bits |= load<u8>(at);
  return bits == 0;
}

// Checks 1-7 for the entry at base + offset. Returns 0 or a reason code (1-7). Every read stays
// inside [base, base + len): the header reads happen only after `len - offset >= 256`, the body
// read only after `size <= len - offset`.
function verifyEntry(base: usize, len: usize, offset: usize, sizeMax: u32): u32 {
  if (len - offset < HEADER_SIZE) return 1;
  const entry = base + offset;
  if (load<u64>(entry) != identityAt(entry) || load<u64>(entry, 8) != 0) return 6;
  if (load<u8>(entry + OFFSET_COMMAND) != COMMAND_PREPARE) return 2;
  const size = load<u32>(entry + OFFSET_SIZE);
  if (size < <u32>HEADER_SIZE || size > sizeMax) return 3;
  if (!zeroRange(entry + OFFSET_RESERVED_FRAME, entry + OFFSET_COMMAND_SPECIFIC)) return 5;
  if (!zeroRange(entry + OFFSET_PAD, entry + OFFSET_GROUP)) return 5;
  if (!zeroRange(entry + OFFSET_RESERVED, entry + HEADER_SIZE)) return 5;
  if (<usize>size > len - offset) return 4;
  const bodySum = xxh3_64(entry + HEADER_SIZE, <usize>size - HEADER_SIZE, 0);
  if (load<u64>(entry + OFFSET_CHECKSUM_BODY) != bodySum) return 7;
  if (load<u64>(entry + OFFSET_CHECKSUM_BODY + 8) != 0) return 7;
  return 0;
}

// True when some offset >= start holds a complete entry that verifies (checks 2-7).
function validEntryAfter(base: usize, len: usize, start: usize, sizeMax: u32): bool {
  if (len < HEADER_SIZE) return false;
  for (let offset = start; offset <= len - HEADER_SIZE; offset++) {
    // Cheap filters first: only a plausible header is worth hashing.
    const entry = base + offset;
    if (load<u8>(entry + OFFSET_COMMAND) != COMMAND_PREPARE) continue;
    const size = load<u32>(entry + OFFSET_SIZE);
    if (size < <u32>HEADER_SIZE || size > sizeMax || <usize>size > len - offset) continue;
    if (verifyEntry(base, len, offset, sizeMax) == 0) return true;
  }
  return false;
}

export function journal_scan(base: usize, len: usize, sizeMax: u32, result: usize): void {
  let offset: usize = 0;
  let entryCount: u64 = 0;
  let lastOp: i64 = -1;
  let previousIdentity: u64 = 0;
  store<i64>(result, -1, RESULT_FAILURE_OFFSET);
  store<u32>(result, 0, RESULT_REASON);
  store<u32>(result, 0, RESULT_TORN);
  while (offset < len) {
    let code = verifyEntry(base, len, offset, sizeMax);
    const entry = base + offset;
    const op: i64 = code == 0 ? load<i64>(entry + OFFSET_OP) : -1;
    if (code == 0 && entryCount > 0 && op == lastOp + 1) {
      if (load<u64>(entry + OFFSET_PARENT) != previousIdentity) code = 8;
      else if (load<u64>(entry + OFFSET_PARENT + 8) != 0) code = 8;
    }
    if (code != 0) {
      const torn = !validEntryAfter(base, len, offset + 1, sizeMax);
      store<i64>(result, <i64>offset, RESULT_FAILURE_OFFSET);
      store<u32>(result, code, RESULT_REASON);
      store<u32>(result, torn ? 1 : 0, RESULT_TORN);
      break;
    }
    previousIdentity = load<u64>(entry);
    lastOp = op;
    entryCount += 1;
    offset += <usize>load<u32>(entry + OFFSET_SIZE);
  }
  store<u64>(result, <u64>offset, RESULT_VALID_END);
  store<u64>(result, entryCount, RESULT_ENTRY_COUNT);
  store<i64>(result, lastOp, RESULT_LAST_OP);
}

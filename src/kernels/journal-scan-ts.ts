/**
 * Journal scan (TypeScript kernel): verifies a WAL image, a concatenation of raw prepare frames
 * (256-byte header + body of `size - 256` bytes, no other framing), and reports the valid prefix.
 *
 * Per entry, in order (iggy-metadata-plane.md §4.8, hardened):
 *   1. at least 256 bytes remain                      else header_truncated
 *   2. the identity checksum matches                  else identity
 *      (XXH3-64 of the header with `checksum` and `view` zeroed, widened to u128)
 *   3. command == Prepare                             else command
 *   4. 256 <= size <= MESSAGE_SIZE_MAX                else size
 *   5. reserved regions are zero                      else reserved
 *   6. the body fits in the image                     else body_truncated
 *   7. checksum_body == XXH3-64(body), widened        else body
 *   8. consecutive ops chain: parent == identity(op - 1) else parent
 * Identity goes first so that every later check reads fields the checksum vouches for.
 *
 * Unlike the reference, a zero checksum is never "unsealed, skip": vrmeta always seals, so a
 * zeroed block is corruption. Duplicate or non-consecutive ops are not failures here (the WAL
 * layer applies last-wins and gap rules); only consecutive ops are chain-checked.
 *
 * Classification: after the first failure, probe every later byte offset for a complete entry
 * that verifies (steps 2-7). None: a torn final append (`torn_tail`, safe to truncate). One: the
 * damage is interior (`interior`, refuse boot: acknowledged prepares would be lost).
 */
import { HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX, PrepareOffset, Command } from '../constants.js';
import { assert } from '../stdx/assert.js';
import {
  JournalFailureReason,
  type JournalFailure,
  type JournalFailureReason as Reason,
  type JournalScan,
} from './kernel.js';
import { xxh3_64 } from './xxh3-ts.js';

/** Numeric reason codes shared with assembly/journal.ts (0 = entry valid). */
export const JOURNAL_REASON_CODES: readonly Reason[] = [
  JournalFailureReason.headerTruncated, // 1
  JournalFailureReason.command, // 2
  JournalFailureReason.size, // 3
  JournalFailureReason.bodyTruncated, // 4
  JournalFailureReason.reserved, // 5
  JournalFailureReason.identity, // 6
  JournalFailureReason.body, // 7
  JournalFailureReason.parent, // 8
];

export function journalFailureFromCodes(offset: number, code: number, torn: boolean): JournalFailure {
  const reason = JOURNAL_REASON_CODES[code - 1];
  assert(reason !== undefined, `journal reason code ${code}`);
  return { offset, reason, kind: torn ? 'torn_tail' : 'interior' };
}

const identityScratch = new Uint8Array(HEADER_SIZE);

/** XXH3-64 identity of the prepare header at `offset` (checksum and view zeroed). */
export function prepareIdentityAt(image: Uint8Array, offset: number): bigint {
  assert(offset + HEADER_SIZE <= image.byteLength, 'identity reads a whole header');
  identityScratch.set(image.subarray(offset, offset + HEADER_SIZE));
  identityScratch.fill(0, HeaderOffset.checksum, HeaderOffset.checksum + 16);
  identityScratch.fill(0, HeaderOffset.view, HeaderOffset.view + 4);
  return xxh3_64(identityScratch, 0n);
}

function readU64(view: DataView, offset: number): number {
  return view.getUint32(offset, true) + view.getUint32(offset + 4, true) * 0x1_0000_0000;
}

function zeroRange(image: Uint8Array, start: number, end: number): boolean {
  for (let index = start; index < end; index++) if (image[index] !== 0) return false;
  return true;
}

/** Steps 1-7 for the entry at `offset`; returns 0 or a reason code. */
function verifyEntry(image: Uint8Array, view: DataView, offset: number): number {
  if (image.byteLength - offset < HEADER_SIZE) return 1;
  const identity = prepareIdentityAt(image, offset);
  if (view.getBigUint64(offset + 0, true) !== identity) return 6;
  if (view.getBigUint64(offset + 8, true) !== 0n) return 6;
  if (image[offset + HeaderOffset.command] !== Command.prepare) return 2;
  const size = view.getUint32(offset + HeaderOffset.size, true);
  if (size < HEADER_SIZE || size > MESSAGE_SIZE_MAX) return 3;
  if (!zeroRange(image, offset + HeaderOffset.reservedFrame, offset + HeaderOffset.commandSpecific)) return 5;
  if (!zeroRange(image, offset + PrepareOffset.pad, offset + PrepareOffset.group)) return 5;
  if (!zeroRange(image, offset + PrepareOffset.reserved, offset + HEADER_SIZE)) return 5;
  if (size > image.byteLength - offset) return 4;
  const body = image.subarray(offset + HEADER_SIZE, offset + size);
  if (view.getBigUint64(offset + HeaderOffset.checksumBody, true) !== xxh3_64(body, 0n)) return 7;
  if (view.getBigUint64(offset + HeaderOffset.checksumBody + 8, true) !== 0n) return 7;
  return 0;
}

/** True when some offset >= `start` holds a complete entry that verifies. */
function validEntryAfter(image: Uint8Array, view: DataView, start: number): boolean {
  for (let offset = start; offset + HEADER_SIZE <= image.byteLength; offset++) {
    // Cheap filters first: only a plausible header is worth hashing.
    if (image[offset + HeaderOffset.command] !== Command.prepare) continue;
    const size = view.getUint32(offset + HeaderOffset.size, true);
    if (size < HEADER_SIZE || size > MESSAGE_SIZE_MAX || size > image.byteLength - offset) continue;
    if (verifyEntry(image, view, offset) === 0) return true;
  }
  return false;
}

export function journalScanTs(image: Uint8Array): JournalScan {
  const view = new DataView(image.buffer, image.byteOffset, image.byteLength);
  let offset = 0;
  let entryCount = 0;
  let lastOp = -1;
  let previousIdentity = 0n;
  while (offset < image.byteLength) {
    let code = verifyEntry(image, view, offset);
    const op = code === 0 ? readU64(view, offset + PrepareOffset.op) : -1;
    if (code === 0 && entryCount > 0 && op === lastOp + 1) {
      const parentLow = view.getBigUint64(offset + PrepareOffset.parent, true);
      const parentHigh = view.getBigUint64(offset + PrepareOffset.parent + 8, true);
      if (parentLow !== previousIdentity || parentHigh !== 0n) code = 8;
    }
    if (code !== 0) {
      const torn = !validEntryAfter(image, view, offset + 1);
      return {
        validEnd: offset,
        entryCount,
        lastOp,
        failure: journalFailureFromCodes(offset, code, torn),
      };
    }
    previousIdentity = view.getBigUint64(offset, true);
    lastOp = op;
    entryCount += 1;
    offset += view.getUint32(offset + HeaderOffset.size, true);
  }
  assert(offset === image.byteLength, 'a clean scan ends exactly at the end of the image');
  return { validEnd: offset, entryCount, lastOp, failure: null };
}

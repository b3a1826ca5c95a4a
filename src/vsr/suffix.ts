/**
 * Header suffixes: the DoViewChange and StartView bodies, a run of 256-byte prepare headers from
 * the sender's head downwards. A DoViewChange marks ops the sender lacks with a "blank" header
 * (command Prepare, operation Reserved, only `op` and `size` set), which has no identity.
 */
import { Command, HEADER_SIZE, HeaderOffset, PrepareOffset } from '../constants.js';
import type { ChecksumKernels } from './frame.js';
import { prepareIdentity } from './frame.js';
import { decodeHeader, encodeHeader, type PrepareHeader } from './header.js';
import type { SuffixSlot } from './view-change.js';

export function writeBlank(target: Uint8Array, offset: number, op: number): void {
  target.fill(0, offset, offset + HEADER_SIZE);
  const view = new DataView(target.buffer, target.byteOffset + offset, HEADER_SIZE);
  target[offset + HeaderOffset.command] = Command.prepare;
  view.setUint32(HeaderOffset.size, HEADER_SIZE, true);
  view.setBigUint64(PrepareOffset.op, BigInt(op), true);
}

const blankScratch = new Uint8Array(HEADER_SIZE);

export function isBlank(body: Uint8Array, offset: number, op: number): boolean {
  writeBlank(blankScratch, 0, op);
  for (let index = 0; index < HEADER_SIZE; index++) {
    if (body[offset + index] !== blankScratch[index]) return false;
  }
  return true;
}

/** Encodes slots (high to low op) and their nack/present bitsets. */
export function encodeSuffix(
  slots: readonly SuffixSlot[],
): { body: Uint8Array; nack: bigint; present: bigint } {
  const body = new Uint8Array(slots.length * HEADER_SIZE);
  let nack = 0n;
  let present = 0n;
  slots.forEach((slot, index) => {
    if (slot.header !== null) encodeHeader(slot.header, body, index * HEADER_SIZE);
    else writeBlank(body, index * HEADER_SIZE, slot.op);
    if (slot.nack) nack |= 1n << BigInt(index);
    if (slot.present) present |= 1n << BigInt(index);
  });
  return { body, nack, present };
}

/**
 * Decodes a suffix whose first slot is `op`. Every non-blank slot must be a sealed prepare of
 * this cluster at exactly its position; anything else makes the whole suffix untrustworthy (null).
 */
export function decodeSuffix(
  kernels: ChecksumKernels,
  cluster: bigint,
  body: Uint8Array,
  op: number,
  nack: bigint,
  present: bigint,
): SuffixSlot[] | null {
  const slots: SuffixSlot[] = [];
  for (let index = 0; index * HEADER_SIZE < body.byteLength; index++) {
    const at = index * HEADER_SIZE;
    const slotOp = op - index;
    if (slotOp < 0) return null;
    const bit = 1n << BigInt(index);
    if (isBlank(body, at, slotOp)) {
      slots.push({ op: slotOp, header: null, present: false, nack: (nack & bit) !== 0n });
      continue;
    }
    const decoded = decodeHeader(body, at);
    if (!decoded.ok || decoded.header.command !== Command.prepare) return null;
    const header: PrepareHeader = decoded.header;
    if (header.op !== slotOp || header.cluster !== cluster) return null;
    if (prepareIdentity(kernels, body, at) !== header.checksum) return null;
    slots.push({ op: slotOp, header, present: (present & bit) !== 0n, nack: (nack & bit) !== 0n });
  }
  return slots;
}

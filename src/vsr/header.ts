/**
 * The wire header codec: typed encode/decode of the 256-byte little-endian header, driven by the
 * layout tables in header-layout.ts. This module only maps bytes to fields; checksums live in
 * frame.ts and the §1.6 rules in header-validate.ts.
 *
 * Decode never throws on untrusted bytes: anything that cannot be represented by the typed header
 * (an invalid command byte, non-zero reserved bytes, a u64 counter above 2^53 - 1) is a rejection
 * with a reason. Encode asserts its input: a typed header with an out-of-range value is a bug in
 * the caller, not a property of the network.
 */
import { HEADER_SIZE, HeaderOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { FrameRejection } from './frame-reason.js';
import {
  COMMON_FIELDS,
  COMMON_ZERO,
  FieldKind,
  commandLayout,
  type FieldSpec,
  type ZeroRange,
} from './header-layout.js';
import type { Header } from './header-types.js';

export * from './header-types.js';
export { FrameRejection, FRAME_REJECTIONS, frameRejectionCounters } from './frame-reason.js';
export {
  COMMAND_LAYOUTS,
  COMMON_FIELDS,
  COMMON_ZERO,
  FIELD_SIZE,
  FieldKind,
  commandLayout,
  isHeaderCommand,
  type ChecksumKind,
  type CommandLayout,
  type FieldSpec,
  type ZeroRange,
} from './header-layout.js';
export { validateHeader } from './header-validate.js';

export type DecodeHeaderResult =
  | { readonly ok: true; readonly header: Header }
  | { readonly ok: false; readonly reason: FrameRejection };

const U32_MAX = 0xffff_ffff;
const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;
/** The high u32 of Number.MAX_SAFE_INTEGER (2^53 - 1). */
const SAFE_HIGH_MAX = 0x1f_ffff;

// Scratch for bigint conversion without a DataView per call. BigUint64Array uses the platform's
// byte order, so the little-endian wire format maps onto it only on little-endian hosts (every
// platform Node 20 ships for); checked once here rather than trusted.
const scratch64 = new BigUint64Array(2);
const scratchBytes = new Uint8Array(scratch64.buffer);
scratch64[0] = 1n;
assert(scratchBytes[0] === 1, 'the header codec requires a little-endian host');

export function readU8(bytes: Uint8Array, offset: number): number {
  return bytes[offset]!;
}

export function readU32(bytes: Uint8Array, offset: number): number {
  const low = bytes[offset]! | (bytes[offset + 1]! << 8) | (bytes[offset + 2]! << 16);
  return low + bytes[offset + 3]! * 0x100_0000;
}

/** A u64 as a number, or -1 when it exceeds Number.MAX_SAFE_INTEGER. */
export function readU64Safe(bytes: Uint8Array, offset: number): number {
  const high = readU32(bytes, offset + 4);
  if (high > SAFE_HIGH_MAX) return -1;
  return high * 0x1_0000_0000 + readU32(bytes, offset);
}

export function readU64Big(bytes: Uint8Array, offset: number): bigint {
  for (let index = 0; index < 8; index++) scratchBytes[index] = bytes[offset + index]!;
  return scratch64[0]!;
}

export function readU128(bytes: Uint8Array, offset: number): bigint {
  for (let index = 0; index < 16; index++) scratchBytes[index] = bytes[offset + index]!;
  const low = scratch64[0]!;
  const high = scratch64[1]!;
  return high === 0n ? low : (high << 64n) | low;
}

export function writeU32(bytes: Uint8Array, offset: number, value: number): void {
  bytes[offset] = value & 0xff;
  bytes[offset + 1] = (value >>> 8) & 0xff;
  bytes[offset + 2] = (value >>> 16) & 0xff;
  bytes[offset + 3] = (value >>> 24) & 0xff;
}

export function writeU64Number(bytes: Uint8Array, offset: number, value: number): void {
  writeU32(bytes, offset, value >>> 0);
  writeU32(bytes, offset + 4, Math.floor(value / 0x1_0000_0000));
}

export function writeU64Big(bytes: Uint8Array, offset: number, value: bigint): void {
  scratch64[0] = value;
  for (let index = 0; index < 8; index++) bytes[offset + index] = scratchBytes[index]!;
}

export function writeU128(bytes: Uint8Array, offset: number, value: bigint): void {
  scratch64[0] = value; // BigUint64Array stores value mod 2^64: the low half.
  scratch64[1] = value >> 64n;
  for (let index = 0; index < 16; index++) bytes[offset + index] = scratchBytes[index]!;
}

function isZero(bytes: Uint8Array, start: number, end: number): boolean {
  for (let index = start; index < end; index++) if (bytes[index] !== 0) return false;
  return true;
}

function rangesZero(bytes: Uint8Array, base: number, ranges: readonly ZeroRange[]): boolean {
  for (const range of ranges) {
    if (!isZero(bytes, base + range.offset, base + range.offset + range.size)) return false;
  }
  return true;
}

/** The command byte of the header at `offset` (unchecked: may be invalid). */
export function readCommand(bytes: Uint8Array, offset = 0): number {
  return bytes[offset + HeaderOffset.command]!;
}

/** The `size` field of the header at `offset` (unchecked). */
export function readSize(bytes: Uint8Array, offset = 0): number {
  return readU32(bytes, offset + HeaderOffset.size);
}

/** Reads one field; returns undefined for a u64 counter above 2^53 - 1. */
function readField(
  bytes: Uint8Array,
  base: number,
  field: FieldSpec,
): number | bigint | Uint8Array | undefined {
  const at = base + field.offset;
  switch (field.kind) {
    case FieldKind.u8:
      return bytes[at]!;
    case FieldKind.u32:
      return readU32(bytes, at);
    case FieldKind.u64: {
      const value = readU64Safe(bytes, at);
      return value < 0 ? undefined : value;
    }
    case FieldKind.u64Big:
      return readU64Big(bytes, at);
    case FieldKind.u128:
      return readU128(bytes, at);
    case FieldKind.bytes32:
      // A copy: the header must not alias a receive buffer the transport may reuse.
      return bytes.slice(at, at + 32);
  }
}

/**
 * Decodes the header at `bytes[offset..offset + 256]`. Structural checks only (command byte,
 * reserved bytes, u64 range); checksums and §1.6 rules are the caller's next steps.
 */
export function decodeHeader(bytes: Uint8Array, offset = 0): DecodeHeaderResult {
  if (bytes.byteLength - offset < HEADER_SIZE) {
    return { ok: false, reason: FrameRejection.headerTruncated };
  }
  const layout = commandLayout(readCommand(bytes, offset));
  if (layout === undefined) return { ok: false, reason: FrameRejection.commandInvalid };
  const zeroStart = offset + COMMON_ZERO.offset;
  const commonZero = isZero(bytes, zeroStart, zeroStart + COMMON_ZERO.size);
  if (!commonZero || !rangesZero(bytes, offset, layout.zero)) {
    return { ok: false, reason: FrameRejection.reservedNonzero };
  }
  const header: Record<string, number | bigint | Uint8Array> = {};
  for (const field of COMMON_FIELDS) header[field.name] = readField(bytes, offset, field)!;
  for (const field of layout.fields) {
    const value = readField(bytes, offset, field);
    if (value === undefined) return { ok: false, reason: FrameRejection.u64AboveSafeInteger };
    header[field.name] = value;
  }
  // The layout's compile-time check (defineLayout<H>) ties these names and kinds to the interface.
  return { ok: true, header: header as unknown as Header };
}

function writeField(bytes: Uint8Array, base: number, field: FieldSpec, value: unknown): void {
  const at = base + field.offset;
  switch (field.kind) {
    case FieldKind.u8:
      assert(
        typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xff,
        `${field.name}: u8`,
      );
      bytes[at] = value;
      return;
    case FieldKind.u32:
      assert(
        typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= U32_MAX,
        `${field.name}: u32`,
      );
      writeU32(bytes, at, value);
      return;
    case FieldKind.u64:
      assert(
        typeof value === 'number' && Number.isSafeInteger(value) && value >= 0,
        `${field.name}: u64 (safe)`,
      );
      writeU64Number(bytes, at, value);
      return;
    case FieldKind.u64Big:
      assert(typeof value === 'bigint' && value >= 0n && value <= U64_MAX, `${field.name}: u64`);
      writeU64Big(bytes, at, value);
      return;
    case FieldKind.u128:
      assert(typeof value === 'bigint' && value >= 0n && value <= U128_MAX, `${field.name}: u128`);
      writeU128(bytes, at, value);
      return;
    case FieldKind.bytes32:
      assert(value instanceof Uint8Array && value.byteLength === 32, `${field.name}: 32 bytes`);
      bytes.set(value, at);
      return;
  }
}

/**
 * Writes `header` into `target[offset..offset + 256]`, reserved and pad bytes zeroed. Writes the
 * checksums as given; sealing is frame.ts's job and happens after the body is in place.
 */
export function encodeHeader(header: Header, target: Uint8Array, offset = 0): void {
  assert(target.byteLength - offset >= HEADER_SIZE, 'encodeHeader: target holds a header');
  const layout = commandLayout(header.command);
  assert(layout !== undefined, `encodeHeader: command ${header.command}`);
  target.fill(0, offset, offset + HEADER_SIZE);
  const fields = header as unknown as Record<string, unknown>;
  for (const field of COMMON_FIELDS) writeField(target, offset, field, fields[field.name]);
  for (const field of layout.fields) writeField(target, offset, field, fields[field.name]);
}

/** `encodeHeader` into a fresh 256-byte array. */
export function encodeHeaderBytes(header: Header): Uint8Array {
  const bytes = new Uint8Array(HEADER_SIZE);
  encodeHeader(header, bytes);
  return bytes;
}

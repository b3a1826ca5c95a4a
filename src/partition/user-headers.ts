/**
 * Iggy's user headers in their binary form, the bytes after a frame's payload
 * (`core/binary_protocol/src/primitives/user_headers.rs`, `core/common/src/types/message/
 * user_headers.rs` `HeaderKind`, `core/common/src/wire_conversions.rs` `user_headers_to_wire` and
 * `user_headers_from_wire`, cc269ef70; iggy-partition-plane.md §2.5): TLV pairs, per entry
 * `key_kind u8 · key_length u32 LE · key · value_kind u8 · value_length u32 LE · value`. The
 * server stores them as opaque bytes; only the HTTP JSON shapes read them, so they live here.
 */
import { assert } from '../stdx/assert.js';

/** A TLV field's length bound in `validate_user_headers` (what a poll renders as entries). */
export const HEADER_FIELD_SIZE_MAX = 255;

/** Iggy's `HeaderKind`: JSON names (snake_case) and wire codes. */
export const HeaderKind = {
  raw: 1,
  string: 2,
  bool: 3,
  int8: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  int128: 8,
  uint8: 9,
  uint16: 10,
  uint32: 11,
  uint64: 12,
  uint128: 13,
  float32: 14,
  float64: 15,
} as const;
export type HeaderKindName = keyof typeof HeaderKind;

export const HEADER_KIND_NAMES = Object.keys(HeaderKind) as HeaderKindName[];

/** The byte size a fixed-size kind requires (`HeaderKind::expected_size`); 0 for raw and string. */
export function headerKindSize(code: number): number {
  if (code <= HeaderKind.string) return 0;
  if (code === HeaderKind.bool || code === HeaderKind.int8 || code === HeaderKind.uint8) return 1;
  if (code === HeaderKind.int16 || code === HeaderKind.uint16) return 2;
  if (code === HeaderKind.int32 || code === HeaderKind.uint32) return 4;
  if (code === HeaderKind.float32) return 4;
  if (code === HeaderKind.int128 || code === HeaderKind.uint128) return 16;
  return 8;
}

export interface HeaderField {
  readonly kind: number;
  readonly value: Uint8Array;
}

function compareBytes(left: Uint8Array, right: Uint8Array): number {
  const shared = Math.min(left.byteLength, right.byteLength);
  for (let index = 0; index < shared; index += 1) {
    const difference = left[index]! - right[index]!;
    if (difference !== 0) return difference;
  }
  return left.byteLength - right.byteLength;
}

/** `HeaderField`'s `Ord`: kind code, then the bytes. */
function compareFields(left: HeaderField, right: HeaderField): number {
  return left.kind !== right.kind ? left.kind - right.kind : compareBytes(left.value, right.value);
}

export type HeaderEntry = readonly [key: HeaderField, value: HeaderField];

/**
 * Entries as Iggy's `BTreeMap<HeaderKey, HeaderValue>` holds them: sorted by key, one per key,
 * the last value for a repeated key (insert replaces). This order is what `user_headers_to_wire`
 * writes and what a poll renders.
 */
export function canonicalEntries(entries: readonly HeaderEntry[]): HeaderEntry[] {
  const sorted = [...entries].sort((left, right) => compareFields(left[0], right[0]));
  const out: HeaderEntry[] = [];
  for (const entry of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && compareFields(last[0], entry[0]) === 0) out[out.length - 1] = entry;
    else out.push(entry);
  }
  return out;
}

/** The TLV bytes of `entries`: per entry `kind u8 · length u32 LE · bytes`, key then value. */
export function encodeUserHeaders(entries: readonly HeaderEntry[]): Uint8Array {
  const canonical = canonicalEntries(entries);
  let size = 0;
  for (const [key, value] of canonical) size += 10 + key.value.byteLength + value.value.byteLength;
  const out = new Uint8Array(size);
  const data = new DataView(out.buffer);
  let at = 0;
  for (const entry of canonical) {
    for (const field of entry) {
      out[at] = field.kind;
      data.setUint32(at + 1, field.value.byteLength, true);
      out.set(field.value, at + 5);
      at += 5 + field.value.byteLength;
    }
  }
  assert(at === size, 'the entries fill the TLV bytes');
  return out;
}

/**
 * The TLV entries of `bytes` if Iggy's poll would render them as entries: the structure
 * `validate_user_headers` accepts (kind not 0, lengths 1..=255, whole key-value pairs), then the
 * known kinds and fixed sizes `user_headers_from_wire` requires. Null means "render as base64".
 */
export function typedHeaderEntries(bytes: Uint8Array): HeaderEntry[] | null {
  const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields: HeaderField[] = [];
  let at = 0;
  while (at < bytes.byteLength) {
    if (bytes.byteLength - at < 5) return null;
    const kind = bytes[at]!;
    const size = data.getUint32(at + 1, true);
    if (kind === 0 || size === 0 || size > HEADER_FIELD_SIZE_MAX) return null;
    if (size > bytes.byteLength - at - 5) return null;
    fields.push({ kind, value: bytes.subarray(at + 5, at + 5 + size) });
    at += 5 + size;
  }
  if (fields.length % 2 !== 0) return null;
  const entries: HeaderEntry[] = [];
  for (let index = 0; index < fields.length; index += 2) {
    const key = fields[index]!;
    const value = fields[index + 1]!;
    for (const field of [key, value]) {
      if (field.kind > HeaderKind.float64) return null;
      const size = headerKindSize(field.kind);
      if (size !== 0 && field.value.byteLength !== size) return null;
    }
    entries.push([key, value]);
  }
  return canonicalEntries(entries);
}

/**
 * Standard base64 (RFC 4648 §4, `+` and `/`) as Iggy's HTTP JSON reads and writes it. Two decoders
 * because Iggy has two: message payloads and raw user-header strings go through the `base64`
 * crate's `STANDARD` engine (padding required and canonical), while partitioning values and user
 * header fields go through `serde_with::base64::Base64`, whose decoder is padding-indifferent
 * (padding may be left out, but when present it must be the canonical amount). Both refuse
 * whitespace, the URL-safe alphabet, characters after padding and non-zero trailing bits, so a
 * string that decodes here decodes there and the other way round. Encoding always pads.
 */
import { assert } from '../stdx/assert.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const SEXTETS: readonly number[] = (() => {
  const table = new Array<number>(128).fill(-1);
  for (let index = 0; index < ALPHABET.length; index += 1) {
    table[ALPHABET.charCodeAt(index)] = index;
  }
  return table;
})();

export type Base64Padding = 'required' | 'indifferent';

function sextet(text: string, index: number): number {
  const code = text.charCodeAt(index);
  return code < 128 ? (SEXTETS[code] ?? -1) : -1;
}

/** The bytes `text` encodes, or null when it is not canonical standard base64 under `padding`. */
export function decodeBase64(text: string, padding: Base64Padding): Uint8Array | null {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x3d && text.length - end < 2) end -= 1;
  const padCount = text.length - end;
  const tail = end % 4;
  if (tail === 1) return null;
  const canonicalPad = tail === 0 ? 0 : 4 - tail;
  if (padCount !== canonicalPad && (padding === 'required' || padCount !== 0)) return null;
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  let bits = 0;
  let bitCount = 0;
  let at = 0;
  for (let index = 0; index < end; index += 1) {
    const value = sextet(text, index);
    if (value < 0) return null;
    bits = ((bits << 6) | value) & 0xfff;
    bitCount += 6;
    if (bitCount >= 8) {
      bitCount -= 8;
      out[at] = (bits >> bitCount) & 0xff;
      at += 1;
    }
  }
  // Bits left over after the last whole byte must be zero, or two strings would decode alike.
  if ((bits & ((1 << bitCount) - 1)) !== 0) return null;
  assert(at === out.byteLength, 'every sextet group filled its bytes');
  return out;
}

export function encodeBase64(bytes: Uint8Array): string {
  let out = '';
  for (let at = 0; at < bytes.byteLength; at += 3) {
    const remaining = bytes.byteLength - at;
    const chunk = ((bytes[at] ?? 0) << 16) | ((bytes[at + 1] ?? 0) << 8) | (bytes[at + 2] ?? 0);
    out += ALPHABET[(chunk >> 18) & 63]! + ALPHABET[(chunk >> 12) & 63]!;
    out += remaining > 1 ? ALPHABET[(chunk >> 6) & 63]! : '=';
    out += remaining > 2 ? ALPHABET[chunk & 63]! : '=';
  }
  return out;
}

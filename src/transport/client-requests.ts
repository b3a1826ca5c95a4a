/**
 * Encoders for the client side of Iggy's binary request bodies (`core/binary_protocol/src/
 * requests/**`, cc269ef70): the primitives every command body is made of. Used by BinaryClient
 * (the login body) and by VrmetaClient over TCP (src/client/client-binary.ts). Values a field
 * cannot hold throw a RangeError before anything is sent.
 */
import { IGGY_PROTOCOL_VERSION } from './client-wire.js';

const encoder = new TextEncoder();

export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

export function encodeU8(value: number): Uint8Array {
  return Uint8Array.of(value);
}

export function encodeU32(value: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value, true);
  return out;
}

export function encodeU64(value: number | bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), true);
  return out;
}

/** WireName: u8 size 1..=255, UTF-8. */
export function encodeName(value: string): Uint8Array {
  const bytes = encoder.encode(value);
  if (bytes.byteLength < 1 || bytes.byteLength > 255) throw new RangeError(`"${value.slice(0, 20)}" must be 1..255 bytes`);
  return concatBytes(encodeU8(bytes.byteLength), bytes);
}

/** A password or token: u8 size (0 allowed: the server answers the validation error), UTF-8. */
export function encodeSecret(value: string): Uint8Array {
  const bytes = encoder.encode(value);
  if (bytes.byteLength > 255) throw new RangeError('a password or token is at most 255 bytes');
  return concatBytes(encodeU8(bytes.byteLength), bytes);
}

/** WireIdentifier, read as the HTTP paths read one: digits that fit a u32 are an id, else a name. */
export function encodeIdentifier(value: number | string): Uint8Array {
  const numeric = typeof value === 'number' ? value : /^(?:0|[1-9][0-9]{0,9})$/.test(value) && Number(value) <= 0xffff_ffff ? Number(value) : null;
  if (numeric !== null) return concatBytes(Uint8Array.of(1, 4), encodeU32(numeric));
  const bytes = encoder.encode(String(value));
  if (bytes.byteLength < 1 || bytes.byteLength > 255) throw new RangeError('an identifier name is 1..255 bytes');
  return concatBytes(Uint8Array.of(2, bytes.byteLength), bytes);
}

/** One options TLV pair: a string key (kind 2) and a typed value. */
export function encodeOption(key: string, kind: number, value: Uint8Array): Uint8Array {
  const keyBytes = encoder.encode(key);
  return concatBytes(encodeU8(2), encodeU32(keyBytes.byteLength), keyBytes, encodeU8(kind), encodeU32(value.byteLength), value);
}

/** LoginRegister (username, password) or LoginRegisterWithPat (token), after ClientVersionInfo. */
export function encodeLoginBody(credentials: { username?: string; password?: string; token?: string }, sdkName: string, sdkVersion: string): Uint8Array {
  const version = concatBytes(encodeU32(IGGY_PROTOCOL_VERSION), encodeName(sdkName), encodeName(sdkVersion));
  if (credentials.token !== undefined) return concatBytes(version, encodeSecret(credentials.token), encodeU32(0));
  if (credentials.username === undefined || credentials.password === undefined) throw new TypeError('pass username and password, or token');
  return concatBytes(version, encodeName(credentials.username), encodeSecret(credentials.password), encodeU32(0));
}

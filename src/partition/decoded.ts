/**
 * The result of decoding untrusted bytes: a value, or the reason the bytes are not one. The same
 * shape as the client wire's decoders (src/transport/client-bodies.ts), declared here because
 * that layer sits above this one; the two are structurally identical, so either side's results
 * pass where the other's are expected.
 */
import type { BodyReader } from '../metadata/body-io.js';

export type Decoded<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

export function refuse(reason: string): { readonly ok: false; readonly reason: string } {
  return { ok: false, reason };
}

/**
 * `value` if every read succeeded, else the first reason. Bytes after the last field are ignored,
 * as Iggy's `decode_from` does for fixed-layout bodies (src/partition/consumer.ts says why).
 */
export function fixedLayout<T>(reader: BodyReader, value: T): Decoded<T> {
  if (reader.ok) return { ok: true, value };
  return { ok: false, reason: reader.finish() ?? 'malformed' };
}

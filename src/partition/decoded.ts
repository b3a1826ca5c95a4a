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
 * `value` if the reader consumed the whole body without a failure, else the first reason (a
 * trailing byte counts: one request has one encoding).
 */
export function finished<T>(reader: BodyReader, value: T): Decoded<T> {
  const reason = reader.finish();
  return reason === null ? { ok: true, value } : { ok: false, reason };
}

/**
 * Request-side translation shared by the route plugins: path identifiers, u64 fields, and the
 * shape rules a schema cannot state. Each returns a value or throws the 400 that names the field.
 *
 * These run before anything is encoded: the operation codec asserts its field sizes (names of at
 * most 255 bytes, u8/u32 ranges), because a body it writes must decode on every replica. Untrusted
 * input therefore never reaches the encoder unchecked.
 */
import { ErrorCode } from '../metadata/errors.js';
import { createdIdOf } from '../metadata/create-replies.js';
import { parseIdentifier, type Identifier } from '../metadata/operations.js';
import { NAME_SIZE_MAX, utf8Size } from '../metadata/validation.js';
import { assert } from '../stdx/assert.js';
import { refuseAnyOption, type OptionRefusal } from '../metadata/options.js';
import { HttpError, httpError, iggyError, unprocessableBody } from './errors.js';
import { toU64 } from './json.js';

/**
 * A path segment as an Identifier: digits that fit a u32 are an id, anything else a name of
 * 1..=255 UTF-8 bytes (Iggy `Identifier::from_str_value`; InvalidIdentifier otherwise).
 */
export function pathIdentifier(text: string): Identifier {
  const identifier = parseIdentifier(text);
  if (identifier === null) throw iggyError(ErrorCode.invalidIdentifier);
  if (identifier.kind === 'name') {
    const size = utf8Size(identifier.name);
    if (size < 1 || size > NAME_SIZE_MAX) throw iggyError(ErrorCode.invalidIdentifier);
  }
  return identifier;
}

/** A u64 body field (number or bigint from the lossless parser) as a bigint. */
export function u64Field(value: number | bigint, field: string): bigint {
  const u64 = toU64(value);
  if (u64 === null) throw unprocessableBody(field, `${field} must be an integer in 0..=18446744073709551615`);
  return u64;
}

/** An option refusal as Iggy answers it: `{id: 4041|4042, reason: "...: <key>"}`, 400. */
export function optionRefused(refusal: OptionRefusal): HttpError {
  return iggyError(refusal.code, refusal.key);
}

/** Streams and users have no option keys yet: any key is refused by name (4041), never ignored. */
export function noOptions(options: Readonly<Record<string, string>> | undefined): void {
  const refusal = refuseAnyOption(options);
  if (refusal !== null) throw optionRefused(refusal);
}

/** Runs a metadata validator and throws its Iggy code (e.g. 1013 invalid_stream_name). */
export function check(code: ErrorCode): void {
  if (code !== ErrorCode.ok) throw iggyError(code);
}

/**
 * The object a create committed, read back from the local state (NodeApi.write resolves after the
 * local apply). Null only if a later op already deleted it again; the create did commit, so the
 * answer says so instead of pretending it failed.
 */
export function createdView<T>(view: T | null): T {
  if (view === null) throw httpError(404, 'not_found', 'Resource was created, then deleted before it could be read back');
  return view;
}

/** The id a create's success payload starts with (create-replies.ts: Iggy's response, id first). */
export function createdId(payload: Uint8Array): number {
  const id = createdIdOf(payload);
  assert(id !== null, 'a committed create replies with its id');
  return id;
}

/**
 * Assertions stay on in production: a broken invariant crashes the process instead of corrupting
 * replicated state. Untrusted bytes (disk, network, HTTP) are validated with a reason, never
 * asserted on.
 */
export class AssertionError extends Error {
  override readonly name = 'AssertionError';
}

export function assert(condition: unknown, message = 'assertion failed'): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/** Documents that a condition may or may not hold; both cases are expected and handled. */
export function maybe(_condition: unknown): void {}

export function unreachable(value: never, message = 'unreachable'): never {
  throw new AssertionError(`${message}: ${String(value)}`);
}

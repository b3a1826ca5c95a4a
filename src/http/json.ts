/**
 * Lossless JSON for the HTTP edge, used both by the server's content-type parser and by the typed
 * client (src/client/client.ts), so both sides read and write the same numbers.
 *
 * Why not JSON.parse: Iggy emits and accepts u64 values as bare JSON numbers, and the sentinels
 * that matter most sit far above 2^53 (`message_expiry` and `max_topic_size` u64::MAX =
 * 18446744073709551615 mean "never expire" and "unlimited"). JSON.parse rounds that to
 * 18446744073709552000, which is a different u64, so a topic created "unlimited" would be stored
 * as a cap nobody asked for. Node 20's JSON.parse cannot show a reviver the source text either.
 *
 * Rule: an integer literal (no fraction, no exponent) that is not a safe integer parses as a
 * `bigint`; every other number parses as `number`, exactly as JSON.parse would. Schemas then say
 * which fields may hold a bigint (the u64 ones); anywhere else a bigint fails validation with a
 * 400 instead of being silently rounded.
 *
 * Bounded: nesting deeper than JSON_DEPTH_MAX is refused (the body size is bounded by fastify's
 * bodyLimit before this runs), and a `__proto__` key is refused like fastify's own parser does
 * (`onProtoPoisoning: 'error'`), because assigning it would replace the object's prototype.
 */
import { U64_MAX } from '../format/snapshot-model.js';

/** Nesting bound: every request body of the API is at most 4 levels deep (permissions). */
export const JSON_DEPTH_MAX = 64;

export class JsonSyntaxError extends Error {
  /** UTF-16 offset into the text where parsing stopped. */
  readonly offset: number;

  constructor(reason: string, offset: number) {
    super(`${reason} at position ${offset}`);
    this.name = 'JsonSyntaxError';
    this.offset = offset;
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

class Parser {
  private index = 0;
  private readonly text: string;

  constructor(text: string) {
    this.text = text;
  }

  parse(): unknown {
    this.skipWhitespace();
    const value = this.value(0);
    this.skipWhitespace();
    if (this.index !== this.text.length) this.fail('unexpected trailing characters');
    return value;
  }

  private fail(reason: string): never {
    throw new JsonSyntaxError(reason, this.index);
  }

  private skipWhitespace(): void {
    const text = this.text;
    while (this.index < text.length) {
      const unit = text.charCodeAt(this.index);
      // JSON whitespace is exactly space, tab, line feed and carriage return.
      if (unit !== 0x20 && unit !== 0x09 && unit !== 0x0a && unit !== 0x0d) return;
      this.index++;
    }
  }

  private value(depth: number): unknown {
    if (depth > JSON_DEPTH_MAX) this.fail(`nesting deeper than ${JSON_DEPTH_MAX}`);
    const unit = this.text.charCodeAt(this.index);
    if (unit === 0x7b /* { */) return this.object(depth);
    if (unit === 0x5b /* [ */) return this.array(depth);
    if (unit === 0x22 /* " */) return this.string();
    if (unit === 0x2d /* - */ || (unit >= 0x30 && unit <= 0x39)) return this.number();
    if (this.text.startsWith('true', this.index)) return this.literal(4, true);
    if (this.text.startsWith('false', this.index)) return this.literal(5, false);
    if (this.text.startsWith('null', this.index)) return this.literal(4, null);
    return this.fail(this.index >= this.text.length ? 'unexpected end of input' : 'unexpected character');
  }

  private literal(size: number, value: boolean | null): boolean | null {
    this.index += size;
    return value;
  }

  private object(depth: number): Record<string, unknown> {
    this.index++; // {
    const out: Record<string, unknown> = {};
    this.skipWhitespace();
    if (this.text.charCodeAt(this.index) === 0x7d /* } */) {
      this.index++;
      return out;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text.charCodeAt(this.index) !== 0x22) this.fail('expected a string key');
      const keyOffset = this.index;
      const key = this.string();
      if (key === '__proto__') throw new JsonSyntaxError('a "__proto__" key is not allowed', keyOffset);
      this.skipWhitespace();
      if (this.text.charCodeAt(this.index) !== 0x3a /* : */) this.fail("expected ':'");
      this.index++;
      this.skipWhitespace();
      out[key] = this.value(depth + 1);
      this.skipWhitespace();
      const next = this.text.charCodeAt(this.index);
      this.index++;
      if (next === 0x2c /* , */) continue;
      if (next === 0x7d /* } */) return out;
      this.index--;
      this.fail("expected ',' or '}'");
    }
  }

  private array(depth: number): unknown[] {
    this.index++; // [
    const out: unknown[] = [];
    this.skipWhitespace();
    if (this.text.charCodeAt(this.index) === 0x5d /* ] */) {
      this.index++;
      return out;
    }
    for (;;) {
      this.skipWhitespace();
      out.push(this.value(depth + 1));
      this.skipWhitespace();
      const next = this.text.charCodeAt(this.index);
      this.index++;
      if (next === 0x2c) continue;
      if (next === 0x5d) return out;
      this.index--;
      this.fail("expected ',' or ']'");
    }
  }

  /** Finds the closing quote, then lets JSON.parse decode escapes (exact, and native speed). */
  private string(): string {
    const text = this.text;
    const start = this.index;
    let escaped = false;
    let index = start + 1;
    for (;;) {
      if (index >= text.length) {
        this.index = index;
        this.fail('unterminated string');
      }
      const unit = text.charCodeAt(index);
      if (unit === 0x22) break;
      if (unit < 0x20) {
        this.index = index;
        this.fail('control character in string');
      }
      if (unit === 0x5c /* \ */) {
        escaped = true;
        index += 2;
        continue;
      }
      index++;
    }
    this.index = index + 1;
    if (!escaped) return text.slice(start + 1, index);
    try {
      return JSON.parse(text.slice(start, index + 1)) as string;
    } catch {
      this.index = start;
      return this.fail('invalid escape in string');
    }
  }

  private number(): number | bigint {
    NUMBER.lastIndex = this.index;
    const match = NUMBER.exec(this.text);
    if (match === null) this.fail('invalid number');
    const literal = match[0];
    this.index += literal.length;
    const isInteger = match[1] === undefined && match[2] === undefined;
    const value = Number(literal);
    if (isInteger && !Number.isSafeInteger(value)) return BigInt(literal);
    return value;
  }
}

/** Parses JSON text; integers beyond 2^53 become `bigint`. Throws JsonSyntaxError. */
export function parseJsonLossless(text: string): unknown {
  return new Parser(text).parse();
}

/**
 * Serializes like JSON.stringify (undefined object members dropped, non-finite numbers as null),
 * except that a `bigint` is written as its exact decimal digits.
 */
export function stringifyJsonLossless(value: unknown): string {
  return write(value, 0);
}

function write(value: unknown, depth: number): string {
  if (depth > JSON_DEPTH_MAX) throw new RangeError(`nesting deeper than ${JSON_DEPTH_MAX}`);
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'number':
    case 'boolean':
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        return `[${value.map((item: unknown) => (item === undefined ? 'null' : write(item, depth + 1))).join(',')}]`;
      }
      const members: string[] = [];
      for (const [key, member] of Object.entries(value)) {
        if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
        members.push(`${JSON.stringify(key)}:${write(member, depth + 1)}`);
      }
      return `{${members.join(',')}}`;
    }
    default:
      return 'null';
  }
}

/** A JSON integer (number or bigint) as a u64, or null when negative, fractional or too large. */
export function toU64(value: number | bigint): bigint | null {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) return null;
    return BigInt(value);
  }
  return value >= 0n && value <= U64_MAX ? value : null;
}

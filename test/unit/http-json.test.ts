/**
 * Lossless JSON (src/http/json.ts): u64 values beyond 2^53 survive a parse and a stringify, and
 * everything else reads exactly as JSON.parse reads it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JSON_DEPTH_MAX, JsonSyntaxError, parseJsonLossless, stringifyJsonLossless, toU64 } from '../../src/http/json.js';

const U64_MAX = 18446744073709551615n;

describe('lossless JSON', () => {
  it('parses u64::MAX as an exact bigint, where JSON.parse rounds it', () => {
    const text = '{"message_expiry":18446744073709551615,"max_topic_size":18446744073709551615}';
    expect(parseJsonLossless(text)).toEqual({ message_expiry: U64_MAX, max_topic_size: U64_MAX });
    expect(BigInt((JSON.parse(text) as { message_expiry: number }).message_expiry)).not.toBe(U64_MAX);
  });

  it('keeps safe integers, fractions and exponents as numbers', () => {
    expect(parseJsonLossless('[0,-1,9007199254740991,1.5,1e3,-0.25e-2]')).toEqual([0, -1, 9007199254740991, 1.5, 1000, -0.0025]);
    expect(parseJsonLossless('9007199254740992')).toBe(9007199254740992n);
    expect(parseJsonLossless('-9007199254740993')).toBe(-9007199254740993n);
  });

  it('reads strings, escapes and literals exactly as JSON.parse', () => {
    const text = '{"a":"x\\"y\\\\z\\u00e9\\n","b":[true,false,null],"c":{},"d":[],"e":"é😀"}';
    expect(parseJsonLossless(text)).toEqual(JSON.parse(text));
  });

  it('refuses malformed input with a position', () => {
    for (const text of ['', '{', '{"a":}', '{"a":1,}', '[1 2]', '"unterminated', '{"a":1} x', "{'a':1}", '01', 'nul', '"\u0001"']) {
      expect(() => parseJsonLossless(text), text).toThrow(JsonSyntaxError);
    }
  });

  it('refuses a __proto__ key instead of replacing the prototype', () => {
    expect(() => parseJsonLossless('{"__proto__":{"polluted":true}}')).toThrow(/__proto__/);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it(`refuses nesting deeper than ${JSON_DEPTH_MAX}`, () => {
    expect(() => parseJsonLossless('['.repeat(JSON_DEPTH_MAX + 2) + ']'.repeat(JSON_DEPTH_MAX + 2))).toThrow(/nesting/);
    expect(() => parseJsonLossless('['.repeat(JSON_DEPTH_MAX) + ']'.repeat(JSON_DEPTH_MAX))).not.toThrow();
  });

  it('stringifies bigint as digits and otherwise like JSON.stringify', () => {
    expect(stringifyJsonLossless({ a: U64_MAX, b: undefined, c: [1, undefined, 'x'], d: null, e: Number.NaN })).toBe(
      '{"a":18446744073709551615,"c":[1,null,"x"],"d":null,"e":null}',
    );
  });

  it('round-trips any JSON value with u64 integers (property)', () => {
    const leaf = fc.oneof(
      fc.bigInt({ min: 0n, max: U64_MAX }).map((value) => (value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value)),
      fc.string(),
      fc.boolean(),
      fc.constant(null),
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((value) => !Number.isInteger(value)),
    );
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(fc.string().filter((key) => key !== '__proto__'), tie('node'), { maxKeys: 4 })),
    })).node;
    fc.assert(
      fc.property(value, (input) => {
        expect(parseJsonLossless(stringifyJsonLossless(input))).toEqual(input);
      }),
    );
  });

  it('toU64 accepts 0..=u64::MAX only', () => {
    expect(toU64(0)).toBe(0n);
    expect(toU64(U64_MAX)).toBe(U64_MAX);
    expect(toU64(U64_MAX + 1n)).toBeNull();
    expect(toU64(-1)).toBeNull();
    expect(toU64(1.5)).toBeNull();
  });
});

/**
 * Header codec properties: encode/decode round trips for every command with random field values,
 * decode never throws on arbitrary bytes, and every valid frame survives build -> decode intact.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE } from '../../src/constants.js';
import { decodeFrame } from '../../src/vsr/frame.js';
import {
  COMMON_ZERO,
  FieldKind,
  FrameRejection,
  commandLayout,
  decodeHeader,
  encodeHeaderBytes,
  validateHeader,
} from '../../src/vsr/header.js';
import {
  HEADER_COMMANDS,
  anyHeader,
  anyHeaderOfAnyCommand,
  frameOf,
  headerOfSpec,
  tsKernels,
  validSpec,
} from '../support/wire-fixtures.js';

const STRUCTURAL: readonly FrameRejection[] = ['header_truncated', 'command_invalid', 'reserved_nonzero', 'u64_above_safe_integer'];

describe('header codec properties', () => {
  it.each(HEADER_COMMANDS.map((command) => [commandLayout(command)!.name, command] as const))(
    'decode(encode(header)) == header for random %s fields',
    (_name, command) => {
      fc.assert(
        fc.property(anyHeader(command), (header) => {
          expect(decodeHeader(encodeHeaderBytes(header))).toEqual({ ok: true, header });
        }),
        { numRuns: 50 },
      );
    },
  );

  it('encode(decode(bytes)) == bytes for any representable header bytes', () => {
    const representable = fc
      .tuple(fc.uint8Array({ minLength: HEADER_SIZE, maxLength: HEADER_SIZE }), fc.constantFrom(...HEADER_COMMANDS))
      .map(([bytes, command]) => {
        const layout = commandLayout(command)!;
        bytes[60] = command;
        for (const range of [COMMON_ZERO, ...layout.zero]) bytes.fill(0, range.offset, range.offset + range.size);
        for (const field of layout.fields) if (field.kind === FieldKind.u64) bytes[field.offset + 6]! &= 0x1f;
        for (const field of layout.fields) if (field.kind === FieldKind.u64) bytes[field.offset + 7] = 0;
        return bytes;
      });
    fc.assert(
      fc.property(representable, (bytes) => {
        const decoded = decodeHeader(bytes);
        expect(decoded.ok).toBe(true);
        if (decoded.ok) expect(encodeHeaderBytes(decoded.header)).toEqual(bytes);
      }),
    );
  });

  it('decodeHeader and validateHeader never throw on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 300 }), fc.integer({ min: 0, max: 40 }), (bytes, command) => {
        if (bytes.byteLength > 60) bytes[60] = command;
        const decoded = decodeHeader(bytes);
        if (!decoded.ok) {
          expect(STRUCTURAL).toContain(decoded.reason);
          return;
        }
        const reason = validateHeader(decoded.header);
        expect(reason === null || Object.values(FrameRejection).includes(reason)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('validateHeader never throws on any representable header', () => {
    fc.assert(
      fc.property(anyHeaderOfAnyCommand, (header) => {
        const reason = validateHeader(header);
        expect(reason === null || Object.values(FrameRejection).includes(reason)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it.each(HEADER_COMMANDS.map((command) => [commandLayout(command)!.name, command] as const))(
    'a valid %s frame decodes to the header it was built from',
    (_name, command) => {
      fc.assert(
        fc.property(validSpec(command), (spec) => {
          const frame = frameOf(tsKernels, spec);
          const result = decodeFrame(tsKernels, frame);
          expect(result.ok).toBe(true);
          if (!result.ok) return;
          const { checksum: _c, checksumBody: _b, ...expected } = headerOfSpec(spec);
          const { checksum: _c2, checksumBody: _b2, ...actual } = result.header;
          expect(actual).toEqual(expected);
          expect(result.body).toEqual(spec.body);
        }),
        { numRuns: 30 },
      );
    },
  );
});

/**
 * Snapshot codec properties over arbitrary canonical models (fast-check prints the seed and the
 * shrunk counterexample on failure; replay with `{ seed, path }` in fc.assert):
 * - decode(encode(x)) equals x, with bigint, number and Uint8Array fields as in the model;
 * - the TS and both WASM encoders write the same bytes, and so does a generic msgpack encoder
 *   over the positional form;
 * - the decoder accepts only canonical bytes: whatever it accepts re-encodes to the same bytes,
 *   and anything else (prefixes, garbage, mutations) is refused with a SnapshotDecodeError.
 */
import { encode as msgpackEncode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { decodeSnapshot, peekSnapshotVersion, SnapshotDecodeError } from '../../src/format/snapshot-codec.js';
import { SNAPSHOT_FORMAT_VERSION } from '../../src/format/snapshot-model.js';
import { hex, positional, snapshotEncoders } from '../kernels/snapshot-encoders.js';
import { arbitrarySnapshot } from './snapshot-arbitrary.js';

const RUNS = 150;

/** Decodes, and fails the property on any exception other than a SnapshotDecodeError. */
function decodeOrRefuse(bytes: Uint8Array): { ok: true; bytes: Uint8Array } | { ok: false; reason: string } {
  try {
    return { ok: true, bytes: snapshotEncodeTs(decodeSnapshot(bytes)) };
  } catch (error) {
    if (!(error instanceof SnapshotDecodeError)) throw error;
    return { ok: false, reason: error.reason };
  }
}

describe('snapshot codec properties', () => {
  it('decode(encode(x)) deep-equals x', () => {
    fc.assert(
      fc.property(arbitrarySnapshot(), (snapshot) => {
        expect(decodeSnapshot(snapshotEncodeTs(snapshot))).toEqual(snapshot);
      }),
      { numRuns: RUNS },
    );
  });

  it('the TS, WASM SIMD and WASM scalar encoders and a generic encoder write the same bytes', () => {
    fc.assert(
      fc.property(arbitrarySnapshot(), (snapshot) => {
        const expected = hex(msgpackEncode(positional(snapshot), { useBigInt64: true }));
        for (const encoder of snapshotEncoders) expect(hex(encoder.encode(snapshot)), encoder.label).toBe(expected);
      }),
      { numRuns: RUNS },
    );
  });

  it('re-encoding a decoded snapshot is byte identical', () => {
    fc.assert(
      fc.property(arbitrarySnapshot(), (snapshot) => {
        const bytes = snapshotEncodeTs(snapshot);
        expect(hex(snapshotEncodeTs(decodeSnapshot(bytes)))).toBe(hex(bytes));
        expect(peekSnapshotVersion(bytes)).toBe(SNAPSHOT_FORMAT_VERSION);
      }),
      { numRuns: RUNS },
    );
  });

  it('every strict prefix of an encoding is refused as truncated', () => {
    fc.assert(
      fc.property(
        arbitrarySnapshot({ collectionMax: 3 }).chain((snapshot) => {
          const bytes = snapshotEncodeTs(snapshot);
          return fc.tuple(fc.constant(bytes), fc.integer({ min: 0, max: bytes.byteLength - 1 }));
        }),
        ([bytes, length]) => {
          expect(decodeOrRefuse(bytes.subarray(0, length))).toEqual({ ok: false, reason: 'truncated' });
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('trailing bytes are refused', () => {
    fc.assert(
      fc.property(arbitrarySnapshot({ collectionMax: 2 }), fc.uint8Array({ minLength: 1, maxLength: 8 }), (snapshot, extra) => {
        const bytes = snapshotEncodeTs(snapshot);
        const padded = new Uint8Array(bytes.byteLength + extra.byteLength);
        padded.set(bytes);
        padded.set(extra, bytes.byteLength);
        expect(decodeOrRefuse(padded)).toEqual({ ok: false, reason: 'trailing_bytes' });
      }),
      { numRuns: RUNS },
    );
  });

  it('garbage is refused with a SnapshotDecodeError, never another exception', () => {
    const garbage = fc.oneof(
      fc.uint8Array({ maxLength: 64 }),
      // A plausible start (array of 7, version 1) followed by noise reaches the deeper readers.
      fc.uint8Array({ maxLength: 64 }).map((tail) => Uint8Array.of(0x97, 0x01, ...tail)),
    );
    fc.assert(
      fc.property(garbage, (bytes) => {
        const result = decodeOrRefuse(bytes);
        if (result.ok) expect(hex(result.bytes)).toBe(hex(bytes));
      }),
      { numRuns: 500 },
    );
  });

  it('a mutated encoding is refused or re-encodes to exactly the mutated bytes', () => {
    fc.assert(
      fc.property(
        arbitrarySnapshot({ collectionMax: 3 }).chain((snapshot) => {
          const bytes = snapshotEncodeTs(snapshot);
          return fc.tuple(
            fc.constant(bytes),
            fc.array(fc.tuple(fc.integer({ min: 0, max: bytes.byteLength - 1 }), fc.integer({ min: 0, max: 255 })), {
              minLength: 1,
              maxLength: 3,
            }),
          );
        }),
        ([bytes, edits]) => {
          const mutated = bytes.slice();
          for (const [offset, value] of edits) mutated[offset] = value;
          const result = decodeOrRefuse(mutated);
          // Canonical means no two byte strings decode to the same model.
          if (result.ok) expect(hex(result.bytes)).toBe(hex(mutated));
        },
      ),
      { numRuns: 300 },
    );
  });
});

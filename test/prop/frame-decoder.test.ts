/**
 * Decoder fuzzing: random bytes, valid frames cut at random chunk boundaries, truncated streams,
 * wrong sizes and corrupted bits. The decoder never throws, never yields after a rejection, and
 * never accepts a corrupted frame.
 *
 * The one corruption a frame cannot detect, by design: the `view` of a Prepare/RepairPrepare
 * (bytes 52..56) is outside the prepare identity so retransmits can be re-stamped with a newer view
 * (frame.ts). Those flips are accepted and the property pins exactly that: the decoded header
 * differs from the original in `view` alone, and the identity is unchanged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX } from '../../src/constants.js';
import { FrameDecoder, decodeFrame, type FrameResult } from '../../src/transport/frame-decoder.js';
import { prepareIdentity } from '../../src/vsr/frame.js';
import { Command, readCommand, writeU32 } from '../../src/vsr/header.js';
import { concat, splitAt, tsKernels, validFrameOfAnyCommand } from '../support/wire-fixtures.js';

const kernels = tsKernels;
const validFrame = validFrameOfAnyCommand(kernels);
const cuts = fc.array(fc.nat(), { maxLength: 12 });

function run(chunks: readonly Uint8Array[]): { results: FrameResult[]; decoder: FrameDecoder } {
  const decoder = new FrameDecoder(kernels);
  const results: FrameResult[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (const result of decoder) results.push(result);
  }
  return { results, decoder };
}

/** At most one rejection, and only as the last result; the decoder is poisoned iff it rejected. */
function expectWellFormed(results: readonly FrameResult[], decoder: FrameDecoder): void {
  const rejections = results.filter((result) => !result.ok);
  expect(rejections.length).toBeLessThanOrEqual(1);
  if (rejections.length === 1) expect(results.at(-1)!.ok).toBe(false);
  expect(decoder.poisoned).toBe(rejections.length === 1);
  const counted = Object.values(decoder.rejections).reduce((sum, count) => sum + count, 0);
  expect(counted).toBe(rejections.length);
  expect(decoder.framesDecoded).toBe(results.length - rejections.length);
}

function isPrepare(frame: Uint8Array): boolean {
  const command = readCommand(frame);
  return command === Command.prepare || command === Command.repairPrepare;
}

const inPrepareView = (frame: Uint8Array, offset: number): boolean =>
  isPrepare(frame) && offset >= HeaderOffset.view && offset < HeaderOffset.view + 4;

describe('FrameDecoder fuzzing', () => {
  it('random bytes in random chunks: never throws, rejects at most once, then yields nothing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), cuts, (bytes, points) => {
        const { results, decoder } = run(splitAt(bytes, points));
        expectWellFormed(results, decoder);
      }),
      { numRuns: 300 },
    );
  });

  it('random bytes behind a plausible size field: never throws, never accepts', () => {
    const plausible = fc
      .tuple(fc.uint8Array({ minLength: 256, maxLength: 2048 }), fc.integer({ min: 0, max: 40 }), cuts)
      .map(([bytes, command, points]) => {
        writeU32(bytes, HeaderOffset.size, bytes.byteLength);
        bytes[HeaderOffset.command] = command;
        return { bytes, points };
      });
    fc.assert(
      fc.property(plausible, ({ bytes, points }) => {
        const { results, decoder } = run(splitAt(bytes, points));
        expectWellFormed(results, decoder);
        expect(results.filter((result) => result.ok)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('valid frames cut at arbitrary chunk boundaries all decode, same as one at a time', () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 8 }), cuts, (frames, points) => {
        const stream = concat(frames);
        const { results, decoder } = run(splitAt(stream, points.map((point) => point % (stream.byteLength + 1))));
        expect(results).toEqual(frames.map((frame) => decodeFrame(kernels, frame)));
        expect(results.every((result) => result.ok)).toBe(true);
        expect(decoder.bufferedBytes).toBe(0);
        expect(decoder.poisoned).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it('a truncated stream yields the complete frames and nothing else', () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 5 }), fc.nat(), cuts, (frames, cut, points) => {
        const last = frames.at(-1)!;
        const keep = cut % last.byteLength; // strictly inside the last frame
        const stream = concat([...frames.slice(0, -1), last.subarray(0, keep)]);
        const { results, decoder } = run(splitAt(stream, points.map((point) => point % (stream.byteLength + 1))));
        expect(results).toEqual(frames.slice(0, -1).map((frame) => decodeFrame(kernels, frame)));
        expect(decoder.bufferedBytes).toBe(keep);
        expect(decoder.poisoned).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it('a wrong size field is rejected without waiting for the body it claims', () => {
    fc.assert(
      fc.property(validFrame, fc.integer({ min: 0, max: 0xffff_ffff }), cuts, (frame, size, points) => {
        fc.pre(size !== frame.byteLength);
        const bad = frame.slice();
        writeU32(bad, HeaderOffset.size, size);
        const { results, decoder } = run(splitAt(bad, points));
        expectWellFormed(results, decoder);
        expect(results).toHaveLength(1);
        const expected =
          size < HEADER_SIZE
            ? 'size_below_header'
            : size > MESSAGE_SIZE_MAX
              ? 'size_above_max'
              : isPrepare(frame)
                ? 'identity_mismatch'
                : 'seal_mismatch';
        expect(results[0]).toEqual({ ok: false, reason: expected });
      }),
      { numRuns: 300 },
    );
  });

  it('every single-bit flip is rejected, except a Prepare view flip, which changes only the view', () => {
    fc.assert(
      fc.property(validFrame, fc.nat(), fc.integer({ min: 0, max: 7 }), cuts, (frame, at, bit, points) => {
        const offset = at % frame.byteLength;
        const flipped = frame.slice();
        flipped[offset]! ^= 1 << bit;
        const { results, decoder } = run(splitAt(flipped, points));
        expectWellFormed(results, decoder);
        expect(results).toHaveLength(1);
        const result = results[0]!;
        if (inPrepareView(frame, offset)) {
          const original = decodeFrame(kernels, frame);
          expect(result.ok && original.ok).toBe(true);
          if (!result.ok || !original.ok) return;
          expect(result.header).toEqual({ ...original.header, view: result.header.view });
          expect(result.header.view).not.toBe(original.header.view);
          expect(prepareIdentity(kernels, flipped)).toBe(prepareIdentity(kernels, frame));
        } else {
          expect(result.ok).toBe(false);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('random multi-byte corruption is rejected unless it only touched a Prepare view', () => {
    const corruption = fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 8 });
    fc.assert(
      fc.property(validFrame, corruption, cuts, (frame, edits, points) => {
        const corrupted = frame.slice();
        for (const [at, mask] of edits) corrupted[at % frame.byteLength]! ^= mask;
        const changed = [...corrupted.keys()].filter((index) => corrupted[index] !== frame[index]);
        fc.pre(changed.length > 0);
        const { results, decoder } = run(splitAt(corrupted, points));
        expectWellFormed(results, decoder);
        const onlyView = changed.every((index) => inPrepareView(frame, index));
        if (onlyView) {
          expect(results).toHaveLength(1);
          expect(results[0]!.ok).toBe(true);
        } else {
          // Even a corrupted size that claims more bytes than were sent is caught at 256 bytes:
          // the seal covers the size field, so the decoder never waits on a lie.
          expect(results).toHaveLength(1);
          expect(results[0]!.ok).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('streaming and one-shot decode agree on any single frame, corrupted or not', () => {
    const maybeCorrupted = fc.tuple(validFrame, fc.option(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })))).map(
      ([frame, edit]) => {
        const bytes = frame.slice();
        if (edit !== null) bytes[edit[0] % bytes.byteLength]! ^= edit[1];
        return bytes;
      },
    );
    fc.assert(
      fc.property(maybeCorrupted, cuts, (bytes, points) => {
        const { results } = run(splitAt(bytes, points));
        const oneShot = decodeFrame(kernels, bytes);
        expect(results).toHaveLength(1);
        if (oneShot.ok || oneShot.reason !== 'size_mismatch') {
          expect(results).toEqual([oneShot]);
        } else {
          // A corrupted size: the one-shot decode compares it with the buffer length first, the
          // stream finds it through the seal.
          expect(results[0]!.ok).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });
});

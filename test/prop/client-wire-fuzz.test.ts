/**
 * Fuzzing the client port's decoders with untrusted bytes: the streaming frame decoder (random
 * bytes, valid Iggy frames cut anywhere, corrupted bytes) and every request body decoder. They
 * never throw, refuse at most once and then stay silent, never yield a frame above the buffer
 * bound, and chunking never changes what they decide.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as bodies from '../../src/transport/client-bodies.js';
import { ClientFrameDecoder, type ClientDecodeResult } from '../../src/transport/client-frame-decoder.js';
import { CLIENT_FRAME_SIZE_MAX } from '../../src/transport/client-wire.js';
import { CODE, OP, loginBody, name, requestFrame, stringId, u32 } from '../support/iggy-frames.js';
import { splitAt } from '../support/wire-fixtures.js';

const cuts = fc.array(fc.nat(), { maxLength: 12 });

function run(chunks: readonly Uint8Array[]): { results: ClientDecodeResult[]; decoder: ClientFrameDecoder } {
  const decoder = new ClientFrameDecoder();
  const results: ClientDecodeResult[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (const result of decoder) results.push(result);
  }
  return { results, decoder };
}

function expectWellFormed(results: readonly ClientDecodeResult[], decoder: ClientFrameDecoder): void {
  const refusals = results.filter((result) => result.kind === 'refused');
  expect(refusals.length).toBeLessThanOrEqual(1);
  if (refusals.length === 1) expect(results.at(-1)!.kind).toBe('refused');
  expect(decoder.poisoned).toBe(refusals.length === 1);
  for (const result of results) if (result.kind === 'frame') expect(result.frame.byteLength).toBeLessThanOrEqual(CLIENT_FRAME_SIZE_MAX);
}

const client = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value) => (value === 0n ? 1n : value));
const validFrame = fc.oneof(
  client.map((id) => requestFrame({ client: id, operation: OP.register }, loginBody('iggy', 'iggy'))),
  fc.tuple(client, fc.constantFrom(...Object.values(CODE))).map(([id, code]) => requestFrame({ client: id, operation: OP.nonReplicated, code })),
  fc.tuple(client, fc.uint8Array({ maxLength: 300 })).map(([id, body]) => requestFrame({ client: id, operation: OP.createStream, session: 3n, request: 1n }, body)),
);

describe('client frame decoder fuzzing', () => {
  it('random bytes in random chunks: never throws, refuses at most once, then yields nothing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), cuts, (bytes, points) => {
        const { results, decoder } = run(splitAt(bytes, points));
        expectWellFormed(results, decoder);
      }),
      { numRuns: 400 },
    );
  });

  it('valid frames cut anywhere decode to exactly themselves', () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 6 }), cuts, (frames, points) => {
        const stream = Buffer.concat(frames);
        const { results, decoder } = run(splitAt(stream, points));
        expectWellFormed(results, decoder);
        expect(results.map((result) => (result.kind === 'frame' ? Buffer.from(result.frame) : result.kind))).toEqual(frames);
      }),
      { numRuns: 300 },
    );
  });

  it('a corrupted byte anywhere: the same decisions whatever the chunking', () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 4 }), fc.nat(), fc.integer({ min: 1, max: 255 }), cuts, (frames, at, xor, points) => {
        const stream = Buffer.concat(frames);
        const index = at % stream.length;
        stream[index] = stream[index]! ^ xor;
        const whole = run([stream]);
        const chunked = run(splitAt(stream, points));
        expectWellFormed(whole.results, whole.decoder);
        expect(chunked.results).toEqual(whole.results);
      }),
      { numRuns: 400 },
    );
  });
});

describe('client request body decoders fuzzing', () => {
  const decoders: readonly ((body: Uint8Array) => unknown)[] = [
    bodies.decodeClientVersion,
    bodies.decodePasswordLogin,
    bodies.decodeTokenLogin,
    bodies.decodeStreamId,
    bodies.decodeTopicAddress,
    bodies.decodeGroupAddress,
    bodies.decodeCreateStream,
    bodies.decodeUpdateStream,
    bodies.decodeCreateTopic,
    bodies.decodeUpdateTopic,
    bodies.decodePartitionsChange,
    bodies.decodeDeleteSegments,
    bodies.decodeCreateGroup,
    bodies.decodeCreateUser,
    bodies.decodeUpdateUser,
    bodies.decodeUserId,
    bodies.decodeChangePassword,
    bodies.decodeUpdatePermissions,
    bodies.decodeCreateToken,
    bodies.decodeTokenName,
    bodies.decodeClientId,
    bodies.decodeOptions,
  ];

  it('never throw: any bytes decode to a request or a reason', () => {
    const seeds = [loginBody('iggy', 'iggy'), Buffer.concat([stringId('s'), u32(3), name('t')]), Buffer.concat([name('u'), name('p'), Buffer.from([1, 1]), u32(11)])];
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 600 }), fc.constantFrom(...seeds).chain((seed) => fc.tuple(fc.constant(seed), fc.nat(), fc.nat(255)).map(([base, at, byte]) => {
        const copy = Buffer.from(base);
        copy[at % copy.length] = byte;
        return copy;
      }))), (bytes) => {
        for (const decode of decoders) {
          const outcome = decode(bytes) as { ok: boolean; reason?: string };
          expect(typeof outcome.ok).toBe('boolean');
          if (!outcome.ok) expect(typeof outcome.reason).toBe('string');
        }
      }),
      { numRuns: 500 },
    );
  });

  it('a permissions block claiming more streams than allowed is refused, not looped over', () => {
    const flags = Buffer.alloc(10);
    const stream = Buffer.concat([u32(1), Buffer.alloc(6), Buffer.from([0]), Buffer.from([1])]);
    const many = Buffer.concat([flags, Buffer.from([1]), ...Array.from({ length: 5000 }, () => stream)]);
    const body = Buffer.concat([stringId('u'), Buffer.from([1]), u32(many.length), many]);
    const decoded = bodies.decodeUpdatePermissions(body);
    expect(decoded).toMatchObject({ ok: false });
  });
});

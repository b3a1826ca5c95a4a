/**
 * The batch envelope (src/vsr/batch.ts): round trips, every malformed form refused with its reason,
 * and the frame decoders refusing a batch prepare whose envelope does not decode.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE, MESSAGE_BODY_SIZE_MAX } from '../../src/constants.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { FrameDecoder } from '../../src/transport/frame-decoder.js';
import {
  BATCH_ENTRY_HEADER_SIZE,
  BATCH_ENVELOPE_HEADER_SIZE,
  BATCH_REQUESTS_MAX,
  BatchRejection,
  decodeBatch,
  encodeBatch,
  isBatchable,
  type BatchRequest,
} from '../../src/vsr/batch.js';
import { buildFrame, decodeFrame } from '../../src/vsr/frame.js';
import { Operation as StateMachineOperation } from '../../src/metadata/operations.js';
import { Command, Operation, writeU128, writeU32, type Header, type HeaderInput } from '../../src/vsr/header.js';
import { base } from '../support/wire-bases.js';
import { sealUnchecked, tsKernels } from '../support/wire-fixtures.js';

function request(index: number, body: Uint8Array = new Uint8Array([index, 1, 2])): BatchRequest {
  return {
    client: 0x1000_0000_0000_0000_0000_0000_0000n + BigInt(index),
    request: 7 + index,
    requestChecksum: 0xfeed_0000_0000_0000_0000_0000_0000_0000n + BigInt(index),
    operation: StateMachineOperation.createStream,
    userId: 3 + index,
    body,
  };
}

const TWO = [request(1), request(2)];

/** Offset of entry `index`'s header in an envelope of TWO (3-byte bodies). */
function entryAt(index: number): number {
  return BATCH_ENVELOPE_HEADER_SIZE + index * (BATCH_ENTRY_HEADER_SIZE + 3);
}

function expectRefused(body: Uint8Array, reason: BatchRejection, index: number | null): void {
  expect(decodeBatch(body)).toEqual({ ok: false, reason, index });
}

describe('batch envelope', () => {
  it('round-trips requests in order, bodies (empty ones included) as views of the envelope', () => {
    const requests = [request(1), request(2, new Uint8Array(0)), { ...request(3), client: (1n << 128n) - 1n, request: Number.MAX_SAFE_INTEGER, userId: 0xffff_ffff, operation: 255 }];
    const envelope = encodeBatch(requests);
    expect(envelope.byteLength).toBe(BATCH_ENVELOPE_HEADER_SIZE + 3 * BATCH_ENTRY_HEADER_SIZE + 3 + 0 + 3);
    const decoded = decodeBatch(envelope);
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    expect(decoded.requests.map((entry) => ({ ...entry, body: [...entry.body] }))).toEqual(requests.map((entry) => ({ ...entry, body: [...entry.body] })));
    expect(decoded.requests[0]!.body.buffer).toBe(envelope.buffer);
  });

  it('round-trips any batch of distinct clients (property)', () => {
    const arbitrary = fc.uniqueArray(
      fc.record({
        client: fc.bigInt({ min: 1n, max: (1n << 128n) - 1n }),
        request: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        requestChecksum: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        operation: fc.integer({ min: 5, max: 255 }),
        userId: fc.integer({ min: 0, max: 0xffff_ffff }),
        body: fc.uint8Array({ maxLength: 40 }),
      }),
      { minLength: 2, maxLength: 12, selector: (entry) => entry.client },
    );
    fc.assert(
      fc.property(arbitrary, (requests) => {
        const decoded = decodeBatch(encodeBatch(requests));
        expect(decoded.ok && decoded.requests.map((entry) => ({ ...entry, body: [...entry.body] }))).toEqual(
          requests.map((entry) => ({ ...entry, body: [...entry.body] })),
        );
      }),
      { numRuns: 100 },
    );
  });

  it('decode never throws on arbitrary bytes, and refuses with a known reason', () => {
    const reasons = Object.values(BatchRejection) as string[];
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.integer({ min: 0, max: 300 }), (bytes, count) => {
        if (bytes.byteLength >= 4) writeU32(bytes, 0, count);
        const decoded = decodeBatch(bytes);
        if (!decoded.ok) expect(reasons).toContain(decoded.reason);
      }),
      { numRuns: 500 },
    );
  });

  it('only plain requests are batchable: not register, logout, non-replicated, reserved or batch', () => {
    for (const operation of [Operation.reserved, Operation.register, Operation.nonReplicated, Operation.logout, Operation.batch]) {
      expect(isBatchable(operation), String(operation)).toBe(false);
    }
    for (const operation of [StateMachineOperation.createStream, StateMachineOperation.createUser, StateMachineOperation.revokeAccessToken, StateMachineOperation.createPersonalAccessToken]) {
      expect(isBatchable(operation), String(operation)).toBe(true);
    }
  });

  it('encode refuses (asserts) what decode would refuse: one request, a duplicate client, a register', () => {
    expect(() => encodeBatch([request(1)])).toThrow(AssertionError);
    expect(() => encodeBatch([request(1), request(1)])).toThrow(AssertionError);
    expect(() => encodeBatch([request(1), { ...request(2), operation: Operation.register }])).toThrow(AssertionError);
    expect(() => encodeBatch([request(1), request(2, new Uint8Array(MESSAGE_BODY_SIZE_MAX))])).toThrow(AssertionError);
  });
});

describe('batch envelope: malformed forms are refused with a reason', () => {
  const cases: { name: string; reason: BatchRejection; index: number | null; body: () => Uint8Array }[] = [
    { name: 'an empty body', reason: 'envelope_truncated', index: null, body: () => new Uint8Array(0) },
    { name: 'a body shorter than the envelope header', reason: 'envelope_truncated', index: null, body: () => encodeBatch(TWO).subarray(0, 7) },
    {
      name: 'a non-zero envelope reserved byte',
      reason: 'reserved_nonzero',
      index: null,
      body: () => {
        const bytes = encodeBatch(TWO);
        bytes[5] = 1;
        return bytes;
      },
    },
    {
      name: 'a count of 0',
      reason: 'count_below_two',
      index: null,
      body: () => new Uint8Array(BATCH_ENVELOPE_HEADER_SIZE),
    },
    {
      name: 'a count of 1 (a lone request is a plain prepare)',
      reason: 'count_below_two',
      index: null,
      body: () => {
        const bytes = encodeBatch(TWO).slice(0, entryAt(1));
        writeU32(bytes, 0, 1);
        return bytes;
      },
    },
    {
      name: 'a count above BATCH_REQUESTS_MAX',
      reason: 'count_above_max',
      index: null,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU32(bytes, 0, BATCH_REQUESTS_MAX + 1);
        return bytes;
      },
    },
    {
      name: 'a count beyond the entries present',
      reason: 'entry_truncated',
      index: 2,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU32(bytes, 0, 3);
        return bytes;
      },
    },
    { name: 'an entry header cut short', reason: 'entry_truncated', index: 1, body: () => encodeBatch(TWO).slice(0, entryAt(1) + 20) },
    {
      name: 'a non-zero entry reserved byte',
      reason: 'reserved_nonzero',
      index: 1,
      body: () => {
        const bytes = encodeBatch(TWO);
        bytes[entryAt(1) + 55] = 1;
        return bytes;
      },
    },
    {
      name: 'an entry body running past the envelope',
      reason: 'entry_body_truncated',
      index: 1,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU32(bytes, entryAt(1) + 44, 4);
        return bytes;
      },
    },
    {
      name: 'an entry body size near 2^32',
      reason: 'entry_body_truncated',
      index: 0,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU32(bytes, entryAt(0) + 44, 0xffff_ffff);
        return bytes;
      },
    },
    {
      name: 'bytes after the last entry',
      reason: 'trailing_bytes',
      index: null,
      body: () => {
        const envelope = encodeBatch(TWO);
        const bytes = new Uint8Array(envelope.byteLength + 1);
        bytes.set(envelope);
        return bytes;
      },
    },
    {
      name: 'client 0',
      reason: 'client_zero',
      index: 1,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU128(bytes, entryAt(1), 0n);
        return bytes;
      },
    },
    {
      name: 'the same client twice',
      reason: 'client_duplicate',
      index: 1,
      body: () => {
        const bytes = encodeBatch(TWO);
        writeU128(bytes, entryAt(1), TWO[0]!.client);
        return bytes;
      },
    },
    {
      name: 'request number 0',
      reason: 'request_zero',
      index: 0,
      body: () => {
        const bytes = encodeBatch(TWO);
        bytes.fill(0, entryAt(0) + 32, entryAt(0) + 40);
        return bytes;
      },
    },
    {
      name: 'a request number above 2^53',
      reason: 'request_above_safe_integer',
      index: 0,
      body: () => {
        const bytes = encodeBatch(TWO);
        bytes[entryAt(0) + 39] = 0x80;
        return bytes;
      },
    },
    ...[Operation.reserved, Operation.register, Operation.nonReplicated, Operation.logout, Operation.batch].map((operation) => ({
      name: `operation ${operation}`,
      reason: 'operation_not_batchable' as const,
      index: 1,
      body: () => {
        const bytes = encodeBatch(TWO);
        bytes[entryAt(1) + 48] = operation;
        return bytes;
      },
    })),
  ];

  it.each(cases.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
    expectRefused(entry.body(), entry.reason, entry.index);
  });

  it('covers every rejection reason', () => {
    const covered = new Set(cases.map((entry) => entry.reason));
    expect(Object.values(BatchRejection).filter((reason) => !covered.has(reason))).toEqual([]);
  });
});

describe('batch prepares on the wire', () => {
  function batchHeader(command: typeof Command.prepare | typeof Command.repairPrepare = Command.prepare): Header {
    return { ...base(command), client: 0n, request: 0, requestChecksum: 0n, userId: 0, operation: Operation.batch } as Header;
  }

  function input(header: Header): HeaderInput {
    const { size: _size, checksum: _checksum, checksumBody: _checksumBody, ...rest } = header;
    return rest as HeaderInput;
  }

  it('a batch prepare and repair prepare with a valid envelope decode, one-shot and streamed', () => {
    for (const command of [Command.prepare, Command.repairPrepare] as const) {
      const frame = buildFrame(tsKernels, input(batchHeader(command)), encodeBatch(TWO));
      const decoded = decodeFrame(tsKernels, frame);
      expect(decoded.ok && decoded.header.command === command && decoded.header.operation).toBe(Operation.batch);
      const decoder = new FrameDecoder(tsKernels);
      decoder.push(frame);
      const streamed = decoder.next();
      expect(streamed?.ok).toBe(true);
    }
  });

  it('a sealed batch prepare whose envelope does not decode is refused by both decoders (batch_envelope_invalid)', () => {
    const bad = encodeBatch(TWO);
    writeU128(bad, entryAt(1), TWO[0]!.client);
    for (const command of [Command.prepare, Command.repairPrepare] as const) {
      const frame = sealUnchecked(tsKernels, batchHeader(command), bad);
      expect(decodeFrame(tsKernels, frame)).toEqual({ ok: false, reason: 'batch_envelope_invalid' });
      const decoder = new FrameDecoder(tsKernels);
      decoder.push(frame);
      expect(decoder.next()).toEqual({ ok: false, reason: 'batch_envelope_invalid' });
      expect(decoder.rejections.batch_envelope_invalid).toBe(1);
    }
  });

  it('a plain prepare body is not read as an envelope', () => {
    const frame = buildFrame(tsKernels, input(base(Command.prepare)), new Uint8Array([1, 2, 3]));
    expect(decodeFrame(tsKernels, frame).ok).toBe(true);
  });

  it('buildFrame asserts: a replica never sends a batch its peers would refuse', () => {
    expect(() => buildFrame(tsKernels, input(batchHeader()), new Uint8Array(HEADER_SIZE))).toThrow(AssertionError);
  });
});

/**
 * Message-batch kernels conformance: every implementation accepts a batch built from the spec
 * (test/support/message-batches.ts, independent of the codec), names the first rule a damaged
 * one breaks, recomputes the batch checksum after a stamp, and slices a batch for poll into the
 * batch the spec encoder builds from the same frames. Then a differential property: on random
 * batches, random single-byte corruptions and truncations, the TS kernels and every WASM build
 * return deep-equal results (or throw the same error).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BATCH_MESSAGES_MAX,
  BatchDeltas,
  BatchFault,
  stampBatch,
  walkBatch,
} from '../../src/format/message-batch.js';
import type { Kernels } from '../../src/kernels/kernel.js';
import {
  batchChecksumOf,
  encodeBatch,
  textMessages,
  type TestBatchFields,
  type TestMessage,
} from '../support/message-batches.js';
import { implementations } from './implementations.js';

function setU32(bytes: Uint8Array, at: number, value: number): void {
  new DataView(bytes.buffer, bytes.byteOffset).setUint32(at, value, true);
}

const STAMPED: TestBatchFields = {
  partitionId: 3,
  baseOffset: 5_000,
  baseTimestampUs: 1_700_000_000_123_456,
  originTimestampUs: 1_700_000_000_000_001,
};

/** Makes `batch_length` match the bytes (a truncation that is not a header fault). */
function setBatchLength(bytes: Uint8Array): Uint8Array {
  const copy = bytes.slice();
  setU32(copy, 32, copy.byteLength);
  return copy;
}

describe.each(implementations)('message batch verify ($label)', ({ kernels }) => {
  it('accepts a batch built from the spec and reports its count and checksum', () => {
    const batch = encodeBatch(textMessages(5));
    expect(kernels.messageBatchVerify(batch)).toEqual({ status: 'valid', messageCount: 5, checksum: batchChecksumOf(batch, 5) });
  });

  it('names a flipped payload byte as a message checksum failure of that frame', () => {
    const batch = encodeBatch(textMessages(3));
    const walk = walkBatch(batch);
    if (!walk.ok) throw new Error(`spec batch refused: ${walk.fault}`);
    const third = walk.frameStarts[2] ?? -1;
    batch.set([(batch[third + 48] ?? 0) ^ 1], third + 48);
    const verify = kernels.messageBatchVerify(batch);
    expect(verify).toMatchObject({ status: 'message_checksum', messageIndex: 2, position: third });
  });

  it('names a changed header field as a batch checksum failure', () => {
    const batch = encodeBatch(textMessages(2), { baseOffset: 10 });
    stampBatch(batch, { partitionId: 1, baseOffset: 10, baseTimestampUs: 0 });
    expect(kernels.messageBatchVerify(batch)).toMatchObject({ status: 'batch_checksum' });
  });

  it('refuses layouts by the first rule broken', () => {
    const base = encodeBatch(textMessages(2));
    const cases: [string, (bytes: Uint8Array) => Uint8Array, BatchFault][] = [
      ['short header', (bytes) => bytes.subarray(0, 255), BatchFault.headerTruncated],
      ['reserved header byte', (bytes) => ((bytes[100] = 1), bytes), BatchFault.headerReserved],
      ['length of more bytes', (bytes) => bytes.subarray(0, bytes.byteLength - 1), BatchFault.headerTruncated],
      ['zero messages', (bytes) => (setU32(bytes, 48, 0), bytes), BatchFault.empty],
      ['one message too many counted', (bytes) => (setU32(bytes, 48, 3), bytes), BatchFault.count],
      ['one message too few counted', (bytes) => (setU32(bytes, 48, 1), bytes), BatchFault.tiling],
      ['frame reserved byte', (bytes) => ((bytes[256 + 41] = 1), bytes), BatchFault.frameReserved],
      ['offset delta not the index', (bytes) => (setU32(bytes, 256 + 24, 7), bytes), BatchFault.offsetDelta],
      ['payload past the batch', (bytes) => (setU32(bytes, 256 + 36, 1 << 20), bytes), BatchFault.frameTruncated],
      // 0xffff_fff0 + 0x20 is 0x10 in u32 arithmetic: a frame that seems to fit.
      [
        'lengths whose sum wraps a u32',
        (bytes) => (setU32(bytes, 256 + 36, 0xffff_fff0), setU32(bytes, 256 + 32, 0x20), bytes),
        BatchFault.frameTruncated,
      ],
      ['partition id above 2^53', (bytes) => ((bytes[6] = 0x20), bytes), BatchFault.headerField],
      ['batch length below the header', (bytes) => (setU32(bytes, 32, 255), bytes), BatchFault.headerField],
      ['batch length above the maximum', (bytes) => (setU32(bytes, 36, 1), bytes), BatchFault.headerField],
      ['batch length short of the bytes', (bytes) => (setU32(bytes, 32, bytes.byteLength - 1), bytes), BatchFault.length],
      ['a header cut short of a frame', (bytes) => setBatchLength(bytes.subarray(0, 256 + 40)), BatchFault.frameTruncated],
    ];
    for (const [name, damage, fault] of cases) {
      const verify = kernels.messageBatchVerify(damage(base.slice()));
      expect({ name, verify }).toMatchObject({ name, verify: { status: 'layout', fault } });
    }
  });

  it('reports the first rule in the walk order when a batch breaks several', () => {
    const base = encodeBatch(textMessages(3));
    const second = 256 + 48 + 9;
    const cases: [string, (bytes: Uint8Array) => Uint8Array, object][] = [
      ['header field before reserved', (bytes) => ((bytes[7] = 1), (bytes[60] = 1), bytes), { fault: BatchFault.headerField }],
      ['reserved before truncation', (bytes) => ((bytes[60] = 1), bytes.subarray(0, 300)), { fault: BatchFault.headerReserved }],
      ['frame truncation before reserved', (bytes) => (setU32(bytes, 256 + 36, 1 << 20), (bytes[256 + 41] = 1), bytes), { fault: BatchFault.frameTruncated }],
      ['frame reserved before delta', (bytes) => ((bytes[256 + 47] = 1), setU32(bytes, 256 + 24, 9), bytes), { fault: BatchFault.frameReserved }],
      ['an earlier frame first', (bytes) => (setU32(bytes, second + 24, 9), (bytes[256 + 41] = 1), bytes), { fault: BatchFault.frameReserved, messageIndex: 0 }],
      ['layout before any hash', (bytes) => ((bytes[256 + 50]! ^= 1), setU32(bytes, second + 24, 9), bytes), { fault: BatchFault.offsetDelta, messageIndex: 1, position: second }],
      ['message checksum before batch checksum', (bytes) => ((bytes[second + 50]! ^= 1), (bytes[40]! ^= 1), bytes), { status: 'message_checksum', messageIndex: 1 }],
    ];
    for (const [name, damage, expected] of cases) {
      const verify = kernels.messageBatchVerify(damage(base.slice()));
      expect({ name, verify }).toMatchObject({ name, verify: { status: 'layout', ...expected } });
    }
  });

  it('hashes the checksums of many frames (the 44 + 8N bytes run past any one buffer)', () => {
    for (const count of [26, 27, 28, 59, 200, 1_000]) {
      const batch = encodeBatch(textMessages(count), STAMPED);
      const checksum = batchChecksumOf(batch, count);
      expect({ count, verify: kernels.messageBatchVerify(batch) }).toEqual({ count, verify: { status: 'valid', messageCount: count, checksum } });
      expect(kernels.messageBatchChecksum(batch)).toBe(checksum);
      const slice = kernels.messageBatchSlice(batch, 1, count - 2);
      expect(kernels.messageBatchVerify(slice, BatchDeltas.contiguous)).toMatchObject({ status: 'valid', messageCount: count - 2 });
      expect(slice).toEqual(encodeBatch(textMessages(count).slice(1, count - 1), { ...STAMPED, firstDelta: 1 }));
    }
  });

  it('recomputes the batch checksum after a stamp without re-hashing frames', () => {
    const batch = encodeBatch(textMessages(4));
    stampBatch(batch, { partitionId: 2, baseOffset: 1_000, baseTimestampUs: 1_700_000_000_000_123 });
    expect(kernels.messageBatchChecksum(batch)).toBe(batchChecksumOf(batch, 4));
    expect(() => kernels.messageBatchChecksum(batch.subarray(0, 100))).toThrow(/not a batch/);
  });
});

/** Messages of varied sizes: short and long hash paths, user headers on some. */
function variedMessages(count: number): TestMessage[] {
  return Array.from({ length: count }, (_, index) => ({
    id: BigInt(index) * 0x1_0000_0000_0000_0001n + 7n,
    payload: new Uint8Array((index * 97) % 700).map((_, at) => (at * 31 + index) & 0xff),
    userHeaders: new Uint8Array(index % 3 === 0 ? index % 40 : 0).fill(index),
    timestampDelta: index * 1_000,
  }));
}


describe.each(implementations)('message batch slice ($label)', ({ kernels }) => {
  const messages = variedMessages(9);
  const batch = encodeBatch(messages, STAMPED);

  it('cuts frames [from, from + count) into the batch the spec builds from those frames', () => {
    for (const [from, count] of [[0, 1], [2, 3], [4, 5], [8, 1], [0, 9]] as const) {
      const expected = encodeBatch(messages.slice(from, from + count), { ...STAMPED, firstDelta: from });
      const slice = kernels.messageBatchSlice(batch, from, count);
      expect({ from, count, slice: Buffer.from(slice).toString('hex') }).toEqual({
        from,
        count,
        slice: Buffer.from(expected).toString('hex'),
      });
    }
  });

  it('clamps count to the frames left and returns the whole batch unchanged for all of it', () => {
    const tail = kernels.messageBatchSlice(batch, 6, 1_000);
    expect(tail).toEqual(encodeBatch(messages.slice(6), { ...STAMPED, firstDelta: 6 }));
    expect(kernels.messageBatchSlice(batch, 0, 2 ** 40)).toEqual(batch);
    expect(kernels.messageBatchSlice(batch, 0, 9)).not.toBe(batch);
  });

  it('gives a slice that verifies with contiguous deltas and not with the admission rule', () => {
    const slice = kernels.messageBatchSlice(batch, 3, 4);
    const checksum = batchChecksumOf(slice, 4);
    const verify = kernels.messageBatchVerify(slice, BatchDeltas.contiguous);
    expect(verify).toEqual({ status: 'valid', messageCount: 4, checksum });
    expect(kernels.messageBatchChecksum(slice, BatchDeltas.contiguous)).toBe(checksum);
    expect(kernels.messageBatchVerify(slice)).toEqual({
      status: 'layout',
      fault: BatchFault.offsetDelta,
      position: 256,
      messageIndex: 0,
    });
    expect(() => kernels.messageBatchChecksum(slice)).toThrow(/not a batch \(offset_delta at 256\)/);
    // A slice of a slice is the slice of the batch.
    expect(kernels.messageBatchSlice(slice, 1, 2)).toEqual(kernels.messageBatchSlice(batch, 4, 2));
  });

  it('refuses an index past the batch, a count below 1, and bytes that are not a batch', () => {
    expect(() => kernels.messageBatchSlice(batch, 9, 1)).toThrow(/fromIndex 9 is not below the batch's 9/);
    expect(() => kernels.messageBatchSlice(batch, 2 ** 33, 1)).toThrow(/fromIndex 8589934592 is not below/);
    expect(() => kernels.messageBatchSlice(batch, 0, 0)).toThrow(/count 0 is not a count/);
    expect(() => kernels.messageBatchSlice(batch, 1.5, 1)).toThrow(/fromIndex 1.5 is not an index/);
    expect(() => kernels.messageBatchSlice(batch, -1, 1)).toThrow(/fromIndex -1 is not an index/);
    const damaged = batch.slice();
    damaged[256 + 44] = 1;
    expect(() => kernels.messageBatchSlice(damaged, 0, 1)).toThrow(/not a batch \(frame_reserved at 256\)/);
    expect(() => kernels.messageBatchSlice(batch.subarray(0, 200), 0, 1)).toThrow(/header_truncated/);
  });

  it('reads a batch in place from kernel memory and from an unaligned view', () => {
    const buffer = kernels.allocate(batch.byteLength);
    buffer.bytes().set(batch);
    const expected = encodeBatch(messages.slice(2, 5), { ...STAMPED, firstDelta: 2 });
    expect(kernels.messageBatchSlice(buffer.bytes(), 2, 3)).toEqual(expected);
    const verify = kernels.messageBatchVerify(buffer.bytes());
    expect(verify).toEqual({ status: 'valid', messageCount: 9, checksum: batchChecksumOf(batch, 9) });
    buffer.release();
    const host = new Uint8Array(batch.byteLength + 7);
    host.set(batch, 3);
    const unaligned = host.subarray(3, 3 + batch.byteLength);
    expect(kernels.messageBatchSlice(unaligned, 2, 3)).toEqual(expected);
    expect(kernels.messageBatchVerify(unaligned)).toEqual(verify);
  });
});

describe.each(implementations)('message batch offset-delta rules ($label)', ({ kernels }) => {
  function withDeltas(deltas: readonly number[]): Uint8Array {
    const batch = encodeBatch(textMessages(deltas.length), { firstDelta: deltas[0] ?? 0 });
    const data = new DataView(batch.buffer);
    let at = 256;
    for (const delta of deltas) {
      data.setUint32(at + 24, delta, true);
      at += 48 + data.getUint32(at + 36, true) + data.getUint32(at + 32, true);
    }
    return batch;
  }

  it('admission takes only delta == index; contiguous takes any run by one below the maximum', () => {
    const cases: [readonly number[], number | null, number | null][] = [
      // deltas, first offending frame under index, under contiguous (null: accepted)
      [[0, 1, 2], null, null],
      [[4, 5, 6], 0, null],
      [[0, 2, 3], 1, 1],
      [[5, 6, 6], 0, 2],
      [[BATCH_MESSAGES_MAX - 2, BATCH_MESSAGES_MAX - 1], 0, null],
      [[BATCH_MESSAGES_MAX - 1, BATCH_MESSAGES_MAX], 0, 1],
      [[BATCH_MESSAGES_MAX, BATCH_MESSAGES_MAX + 1], 0, 0],
      [[0xffff_ffff, 0], 0, 0],
    ];
    for (const [deltas, underIndex, underContiguous] of cases) {
      for (const [rules, offending] of [
        [BatchDeltas.index, underIndex],
        [BatchDeltas.contiguous, underContiguous],
      ] as const) {
        const verify = kernels.messageBatchVerify(withDeltas(deltas), rules);
        const expected = offending === null ? { status: 'valid' } : { status: 'layout', fault: 'offset_delta', messageIndex: offending };
        expect({ deltas, rules, verify }).toMatchObject({ deltas, rules, verify: expected });
      }
    }
  });

  it('walkBatch states the same rules', () => {
    expect(walkBatch(withDeltas([4, 5, 6])).ok).toBe(false);
    expect(walkBatch(withDeltas([4, 5, 6]), BatchDeltas.contiguous).ok).toBe(true);
    expect(walkBatch(withDeltas([0, 1, 2]), BatchDeltas.contiguous).ok).toBe(true);
  });
});

/** What a kernel call returned or threw, so implementations can be compared deep-equal. */
function outcome(run: () => unknown): unknown {
  try {
    const value = run();
    return value instanceof Uint8Array ? { bytes: Buffer.from(value).toString('hex') } : { value };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

function allKernels(run: (kernels: Kernels) => unknown): { label: string; result: unknown }[] {
  return implementations.map(({ label, kernels }) => ({ label, result: outcome(() => run(kernels)) }));
}

function expectAgreement(run: (kernels: Kernels) => unknown): unknown {
  const results = allKernels(run);
  for (const { label, result } of results) {
    expect({ label, result }).toEqual({ label, result: results[0]!.result });
  }
  return results[0]!.result;
}

describe('message batch kernels: random batches, corruptions and truncations (differential)', () => {
  const message = fc.record({
    id: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
    payload: fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ maxLength: 600 })),
    userHeaders: fc.uint8Array({ maxLength: 60 }),
    timestampDelta: fc.nat(),
  });
  const batchArbitrary = fc.record({
    // Up to 40 frames: past the 27th the batch checksum's input outgrows a 256-byte buffer.
    messages: fc.array(message, { minLength: 1, maxLength: 40 }),
    fields: fc.record({
      partitionId: fc.nat(),
      baseOffset: fc.maxSafeNat(),
      baseTimestampUs: fc.maxSafeNat(),
      originTimestampUs: fc.maxSafeNat(),
      firstDelta: fc.oneof(fc.constant(0), fc.nat({ max: 40 })),
    }),
  });
  const damage = fc.oneof(
    fc.constant({ kind: 'none' as const }),
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), mask: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  );
  const cut = fc.record({ from: fc.nat({ max: 14 }), count: fc.integer({ min: 1, max: 16 }) });

  type Damage = { kind: 'none' } | { kind: 'flip'; at: number; mask: number } | { kind: 'truncate'; at: number };
  function damaged(batch: Uint8Array, change: Damage): Uint8Array {
    const bytes = batch.slice();
    if (change.kind === 'flip') bytes[change.at % bytes.byteLength]! ^= change.mask;
    if (change.kind === 'truncate') return bytes.subarray(0, change.at % bytes.byteLength);
    return bytes;
  }

  it('every implementation returns the same verify, checksum and slice, both delta rule sets', () => {
    let faults = 0;
    fc.assert(
      fc.property(batchArbitrary, damage, cut, ({ messages, fields }, change, { from, count }) => {
        const bytes = damaged(encodeBatch(messages, fields), change);
        for (const rules of [BatchDeltas.index, BatchDeltas.contiguous]) {
          const verify = expectAgreement((kernels) => kernels.messageBatchVerify(bytes, rules)) as { value: { status: string } };
          if (verify.value.status !== 'valid') faults += 1;
          expectAgreement((kernels) => kernels.messageBatchChecksum(bytes, rules));
        }
        expectAgreement((kernels) => kernels.messageBatchSlice(bytes, from, count));
      }),
      { numRuns: 400 },
    );
    // The property ran on damaged batches, not only on clean ones.
    expect(faults).toBeGreaterThan(100);
  });

  it('a clean random batch verifies everywhere and a flipped byte is always detected', () => {
    fc.assert(
      fc.property(batchArbitrary, fc.nat(), fc.integer({ min: 1, max: 255 }), ({ messages, fields }, at, mask) => {
        const batch = encodeBatch(messages, fields);
        const rules = fields.firstDelta === 0 ? BatchDeltas.index : BatchDeltas.contiguous;
        const clean = expectAgreement((kernels) => kernels.messageBatchVerify(batch, rules));
        expect(clean).toEqual({ value: { status: 'valid', messageCount: messages.length, checksum: batchChecksumOf(batch, messages.length) } });
        const flipped = batch.slice();
        flipped[at % batch.byteLength]! ^= mask;
        const verify = expectAgreement((kernels) => kernels.messageBatchVerify(flipped, rules)) as { value: { status: string } };
        expect(verify.value.status).not.toBe('valid');
      }),
      { numRuns: 300 },
    );
  });
});

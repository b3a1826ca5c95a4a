/**
 * Message-batch kernels conformance: every implementation accepts a batch built from the spec
 * (test/support/message-batches.ts, independent of the codec), names the first rule a damaged
 * one breaks, and recomputes the batch checksum after a stamp.
 */
import { describe, expect, it } from 'vitest';
import { BatchFault, stampBatch, walkBatch } from '../../src/format/message-batch.js';
import { batchChecksumOf, encodeBatch, textMessages } from '../support/message-batches.js';
import { implementations } from './implementations.js';

function setU32(bytes: Uint8Array, at: number, value: number): void {
  new DataView(bytes.buffer, bytes.byteOffset).setUint32(at, value, true);
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
    ];
    for (const [name, damage, fault] of cases) {
      const verify = kernels.messageBatchVerify(damage(base.slice()));
      expect({ name, verify }).toMatchObject({ name, verify: { status: 'layout', fault } });
    }
  });

  it('recomputes the batch checksum after a stamp without re-hashing frames', () => {
    const batch = encodeBatch(textMessages(4));
    stampBatch(batch, { partitionId: 2, baseOffset: 1_000, baseTimestampUs: 1_700_000_000_000_123 });
    expect(kernels.messageBatchChecksum(batch)).toBe(batchChecksumOf(batch, 4));
    expect(() => kernels.messageBatchChecksum(batch.subarray(0, 100))).toThrow(/not a batch/);
  });
});

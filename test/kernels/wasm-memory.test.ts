/**
 * WASM linear memory never shrinks: a snapshot-sized kernel call must not pin its high-water mark
 * for the life of the process. After such a call the instance is recycled on the next turn (a
 * fresh instance of the same module), the results stay byte-identical to the TS kernels, and a
 * buffer still allocated in WASM memory holds the recycle off. A message batch of BATCH_SIZE_MAX
 * is verified and sliced in place from a buffer without growing memory, or copied in and then
 * returned; an input past the maximum is refused without being copied in.
 */
import { describe, expect, it } from 'vitest';
import { BATCH_SIZE_MAX } from '../../src/format/message-batch.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { alignUp, HEAP_ALIGNMENT } from '../../src/kernels/wasm-heap.js';
import { RECYCLE_BYTES, WasmInstance } from '../../src/kernels/wasm-instance.js';
import { referenceSnapshot } from '../../src/testing/snapshot-fixtures.js';
import { encodeBatch, type TestMessage } from '../support/message-batches.js';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** 24 MiB of partition column: above the recycle threshold, small enough for a unit test. */
const large = referenceSnapshot({ streams: 60, topicsPerStream: 10, partitionsPerTopic: 5_000, users: 20, clients: 20 });
const ts = createTsKernels();

describe('WASM memory after a snapshot-sized call', () => {
  it('is returned on the next turn, and the kernels stay byte-identical afterwards', async () => {
    const instance = new WasmInstance('simd');
    const wasm = createWasmKernels(instance);
    const expected = ts.snapshotEncode(large);
    expect(expected.byteLength).toBeGreaterThan(RECYCLE_BYTES);

    const payload = wasm.snapshotEncode(large);
    const grown = instance.memoryBytes;
    const manifest = wasm.chunkManifest(payload, 256 * 1024);
    // Calls of one turn reuse the grown memory: the payload staged for the manifest fits in the
    // blocks the encoder returned.
    expect(grown).toBeGreaterThan(2 * expected.byteLength);
    expect(instance.memoryBytes).toBe(grown);
    expect(instance.recycles).toBe(0);
    await nextTurn();
    expect(instance.recycles).toBe(1);
    expect(instance.memoryBytes).toBeLessThanOrEqual(RECYCLE_BYTES);

    expect(Buffer.from(payload).equals(expected)).toBe(true);
    expect(manifest.checksum).toBe(ts.xxh3_64(expected));
    // The recycled instance encodes and hashes the same bytes again.
    const again = wasm.snapshotEncode(large);
    expect(Buffer.from(again).equals(expected)).toBe(true);
    expect(wasm.xxh3_64(again)).toBe(manifest.checksum);
    const trailer = new Uint8Array(20);
    const trailerTs = new Uint8Array(20);
    wasm.trailerWrite(again, trailer, 0);
    ts.trailerWrite(expected, trailerTs, 0);
    expect(trailer).toEqual(trailerTs);
    await nextTurn();
    expect(instance.recycles).toBe(2);
    expect(instance.memoryBytes).toBeLessThanOrEqual(RECYCLE_BYTES);
  });

  it('is kept while a buffer allocated in it is outstanding, and returned when it is released', async () => {
    const instance = new WasmInstance('simd');
    const wasm = createWasmKernels(instance);
    const sealed = ts.trailerSeal(ts.snapshotEncode(large));
    const buffer = wasm.allocate(sealed.byteLength);
    buffer.bytes().set(sealed);
    const split = wasm.trailerSplit(buffer.bytes());
    await nextTurn();
    expect(instance.recycles).toBe(0);
    expect(split.status).toBe('valid');
    // The split's payload is a view of the buffer: still readable.
    expect(split.payload.byteLength).toBe(sealed.byteLength - 20);
    expect(split.payload[7]).toBe(sealed[7]);
    buffer.release();
    await nextTurn();
    expect(instance.recycles).toBe(1);
    expect(instance.memoryBytes).toBeLessThanOrEqual(RECYCLE_BYTES);
    // Small calls do not recycle.
    wasm.xxh3_64(new Uint8Array(1024));
    await nextTurn();
    expect(instance.recycles).toBe(1);
  });
});

/**
 * A batch of exactly BATCH_SIZE_MAX bytes: 4096 frames, 4095 of 16 KiB and a last one that takes
 * the rest, so the batch checksum covers 44 + 8 * 4096 bytes.
 */
function maximalBatch(): Uint8Array {
  const frameCount = 4096;
  const frameSize = 16 * 1024;
  const lastSize = BATCH_SIZE_MAX - 256 - (frameCount - 1) * frameSize;
  const messages: TestMessage[] = Array.from({ length: frameCount }, (_, index) => {
    const payload = new Uint8Array((index === frameCount - 1 ? lastSize : frameSize) - 48);
    for (let at = 0; at < payload.byteLength; at += 512) payload[at] = (index + at) & 0xff;
    return { payload };
  });
  return encodeBatch(messages, { partitionId: 1, baseOffset: 77, baseTimestampUs: 1_700_000_000_000_000 });
}

describe('WASM memory with a message batch of BATCH_SIZE_MAX', () => {
  const batch = maximalBatch();
  const expected = ts.messageBatchVerify(batch);

  it('is the largest batch there is, and valid', () => {
    expect(batch.byteLength).toBe(BATCH_SIZE_MAX);
    expect(expected).toMatchObject({ status: 'valid', messageCount: 4096 });
  });

  it('copied in, verifies and slices like the TS kernels, and the memory is returned next turn', async () => {
    for (const flavor of ['simd', 'scalar'] as const) {
      const instance = new WasmInstance(flavor);
      const wasm = createWasmKernels(instance);
      const slice = ts.messageBatchSlice(batch, 100, 3_000);
      const calls: [string, () => unknown, unknown][] = [
        ['verify', () => wasm.messageBatchVerify(batch), expected],
        ['checksum', () => wasm.messageBatchChecksum(batch), ts.messageBatchChecksum(batch)],
        ['slice', () => Buffer.from(wasm.messageBatchSlice(batch, 100, 3_000)).equals(slice), true],
      ];
      // Each call on its own turn: each must schedule the recycle itself. The recycled instance
      // serves the next call.
      for (const [index, [name, call, result]] of calls.entries()) {
        expect({ flavor, name, result: call() }).toEqual({ flavor, name, result });
        expect(instance.memoryBytes).toBeGreaterThan(BATCH_SIZE_MAX);
        await nextTurn();
        expect({ flavor, name, recycles: instance.recycles }).toEqual({ flavor, name, recycles: index + 1 });
        expect(instance.memoryBytes).toBeLessThanOrEqual(RECYCLE_BYTES);
      }
    }
  });

  it('in a KernelBuffer, is verified and sliced in place without growing memory', async () => {
    const instance = new WasmInstance('simd');
    const wasm = createWasmKernels(instance);
    wasm.messageBatchVerify(batch.subarray(0, 1_000)); // takes the result and header slots
    const buffer = wasm.allocate(batch.byteLength);
    buffer.bytes().set(batch);
    const grown = instance.memoryBytes;
    expect(wasm.messageBatchVerify(buffer.bytes())).toEqual(expected);
    const slice = wasm.messageBatchSlice(buffer.bytes(), 4_000, 1_000);
    expect(Buffer.from(slice).equals(ts.messageBatchSlice(batch, 4_000, 1_000))).toBe(true);
    const last = buffer.bytes();
    last[BATCH_SIZE_MAX - 1]! ^= 0x40;
    const damaged = batch.slice();
    damaged[BATCH_SIZE_MAX - 1]! ^= 0x40;
    const verify = wasm.messageBatchVerify(last);
    expect(verify).toEqual(ts.messageBatchVerify(damaged));
    expect(verify).toMatchObject({ status: 'message_checksum', messageIndex: 4095 });
    expect(instance.memoryBytes).toBe(grown);
    buffer.release();
    await nextTurn();
    expect(instance.recycles).toBe(1);
  });

  it('in a KernelBuffer that fills memory, is still read when the call grows memory for its slots', () => {
    const instance = new WasmInstance('simd');
    const wasm = createWasmKernels(instance);
    const buffer = wasm.allocate(batch.byteLength);
    buffer.bytes().set(batch);
    const heapStart = alignUp(instance.exports.heap_base(), HEAP_ALIGNMENT);
    const rest = instance.memoryBytes - heapStart - instance.heap.bytesInUse;
    const filler = rest > 0 ? wasm.allocate(rest) : null;
    const full = instance.memoryBytes;
    // The view is taken before the call; growing memory for the result block detaches it.
    expect(wasm.messageBatchVerify(buffer.bytes())).toEqual(expected);
    expect(instance.memoryBytes).toBeGreaterThan(full);
    filler?.release();
    buffer.release();
  });

  it('past BATCH_SIZE_MAX, is refused like the TS kernels without being copied in', () => {
    const instance = new WasmInstance('simd');
    const wasm = createWasmKernels(instance);
    const before = instance.memoryBytes;
    const longer = new Uint8Array(BATCH_SIZE_MAX + 1);
    longer.set(batch);
    const garbage = new Uint8Array(3 * BATCH_SIZE_MAX).fill(0xa5);
    for (const input of [longer, garbage]) {
      const verify = wasm.messageBatchVerify(input);
      expect(verify).toEqual(ts.messageBatchVerify(input));
      expect(verify.status).toBe('layout');
      expect(() => wasm.messageBatchChecksum(input)).toThrow(/not a batch/);
      expect(() => wasm.messageBatchSlice(input, 0, 1)).toThrow(/not a batch/);
    }
    expect(wasm.messageBatchVerify(longer)).toMatchObject({ fault: 'length' });
    expect(wasm.messageBatchVerify(garbage)).toMatchObject({ fault: 'header_field' });
    expect(instance.memoryBytes).toBe(before);
  });
});

/**
 * WASM linear memory never shrinks: a snapshot-sized kernel call must not pin its high-water mark
 * for the life of the process. After such a call the instance is recycled on the next turn (a
 * fresh instance of the same module), the results stay byte-identical to the TS kernels, and a
 * buffer still allocated in WASM memory holds the recycle off.
 */
import { describe, expect, it } from 'vitest';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { RECYCLE_BYTES, WasmInstance } from '../../src/kernels/wasm-instance.js';
import { referenceSnapshot } from '../../src/testing/snapshot-fixtures.js';

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

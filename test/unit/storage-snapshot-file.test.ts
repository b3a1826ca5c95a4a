/**
 * snapshot.bin: payload + "ISNP" trailer, durable replace, and the checkpoint checksum over the
 * payload bytes as stored.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { METADATA_CHECKPOINT_CODEC } from '../../src/storage/metadata-checkpoint-codec.js';
import { describe, expect, it } from 'vitest';
import { TRAILER_SIZE } from '../../src/kernels/kernel.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { STREAM_THRESHOLD_BYTES, createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import { SNAPSHOT_FORMAT_VERSION } from '../../src/format/snapshot-model.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE, SNAPSHOT_GENERATIONS_HELD, SNAPSHOT_TEMP_FILE, SnapshotFile } from '../../src/storage/snapshot-file.js';
import { referenceSnapshot, REFERENCE_SNAPSHOT_SMALL } from '../../src/testing/snapshot-fixtures.js';
import { Prng } from '../../src/stdx/prng.js';
import { kernelVariants, snapshotPayload } from './storage-fixtures.js';

describe.each(kernelVariants())('snapshot file ($label kernels)', ({ kernels }) => {
  function fresh(): { disk: SimDisk; file: SnapshotFile<MetadataMachineSnapshot> } {
    const disk = new SimDisk(new Prng(1));
    return { disk, file: new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC) };
  }

  function refusal(file: SnapshotFile<MetadataMachineSnapshot>): StorageRefusal {
    try {
      file.read();
    } catch (error) {
      if (error instanceof StorageRefusal) return error;
      throw error;
    }
    throw new Error('expected a refusal');
  }

  it('has no snapshot until one is written', () => {
    expect(fresh().file.read()).toBeNull();
  });

  it('writes payload + trailer durably; the checksum is XXH3-64 of the stored payload', () => {
    const { disk, file } = fresh();
    const payload = kernels.snapshotEncode(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 3 }));
    const checksum = file.write(payload);
    expect(checksum).toBe(kernels.xxh3_64(payload));
    expect(disk.exists(SNAPSHOT_TEMP_FILE)).toBe(false);
    disk.crash();
    const stored = disk.readAll(SNAPSHOT_FILE);
    expect(stored.byteLength).toBe(payload.byteLength + TRAILER_SIZE);
    expect([...stored.subarray(payload.byteLength, payload.byteLength + 4)]).toEqual([0x50, 0x4e, 0x53, 0x49]);
    const read = new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC).read();
    expect(read?.checksum).toBe(checksum);
    expect(read?.payload).toEqual(payload);
    expect(read?.version).toBe(SNAPSHOT_FORMAT_VERSION);
    expect(decodeSnapshot(read!.payload).sequenceNumber).toBe(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 3 }).sequenceNumber);
  });

  it('takes a checksum the caller already computed for the trailer: no second pass, same bytes', () => {
    const payload = kernels.snapshotEncode(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 5 }));
    const checksum = kernels.xxh3_64(payload);
    const hashed = fresh();
    hashed.file.write(payload);
    let passes = 0;
    const counting = { ...kernels, trailerWrite: (...args: Parameters<typeof kernels.trailerWrite>) => {
      passes += 1;
      kernels.trailerWrite(...args);
    } };
    const disk = new SimDisk(new Prng(1));
    const known = new SnapshotFile(disk, counting, METADATA_CHECKPOINT_CODEC);
    expect(known.write(payload, checksum)).toBe(checksum);
    expect(passes).toBe(0);
    const stored = new Uint8Array(disk.size(SNAPSHOT_FILE));
    disk.read(SNAPSHOT_FILE, 0, stored);
    const expected = new Uint8Array(hashed.disk.size(SNAPSHOT_FILE));
    hashed.disk.read(SNAPSHOT_FILE, 0, expected);
    expect(Buffer.from(stored).equals(Buffer.from(expected))).toBe(true);
    expect(known.read()?.checksum).toBe(checksum);
    // Without one, the trailer is computed.
    known.write(payload);
    expect(passes).toBe(1);
  });

  it('replaces an older snapshot atomically', () => {
    const { disk, file } = fresh();
    file.write(snapshotPayload(kernels, 4));
    const newer = snapshotPayload(kernels, 9);
    file.write(newer);
    disk.crash();
    expect(new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC).read()?.payload).toEqual(newer);
  });

  it('refuses a file without a trailer, a trailer mismatch, and an unknown format version', () => {
    const { disk, file } = fresh();
    const payload = snapshotPayload(kernels, 4);
    file.write(payload);
    disk.truncateAtRest(SNAPSHOT_FILE, payload.byteLength);
    expect(refusal(file).reason).toBe(RefusalReason.snapshotNoTrailer);

    file.write(payload);
    disk.corrupt(SNAPSHOT_FILE, 2);
    const mismatch = refusal(file);
    expect(mismatch.reason).toBe(RefusalReason.snapshotChecksum);
    expect(mismatch.message).toMatch(/snapshot\.bin.*wipe the data directory/);

    const future = payload.slice();
    future[1] = 7; // version 7 (positive fixint right after the array header)
    file.write(future);
    expect(refusal(file).reason).toBe(RefusalReason.snapshotVersion);

    file.write(new Uint8Array([0xc0]));
    expect(refusal(file).reason).toBe(RefusalReason.snapshotUndecodable);
  });

  it('refuses a version-2 snapshot (written before topic options existed) with its version and the remedy', () => {
    const { file } = fresh();
    // An empty version-2 snapshot: 8 fields, the layout before topics carried options.
    file.write(new Uint8Array(Buffer.from('980200009090900090', 'hex')));
    const error = refusal(file);
    expect(error.reason).toBe(RefusalReason.snapshotVersion);
    expect(error.detail).toBe('format version 2, this build reads 4 and 5');
    expect(error.message).toMatch(/remedy: /);
  });

  it('refuses a version-3 snapshot (partitions as records, before the column) with its version and the remedy', () => {
    const { file } = fresh();
    // A version-3 snapshot with one topic holding one [id, createdAtUs] partition record.
    file.write(new Uint8Array(Buffer.from('98030000909194' + '01a17300' + '919a01a174' + '0000010001' + '91920005' + '9090' + '900090', 'hex')));
    const error = refusal(file);
    expect(error.reason).toBe(RefusalReason.snapshotVersion);
    expect(error.detail).toBe('format version 3, this build reads 4 and 5');
    expect(error.message).toMatch(/remedy: /);
  });

  it('serves payload chunks of the snapshot it holds: the current one and the one it replaced, none older', () => {
    const { file } = fresh();
    const payload = kernels.snapshotEncode(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 5 }));
    const checksum = file.write(payload);
    const chunk = new Uint8Array(1000);
    const parts: Uint8Array[] = [];
    for (let offset = 0; ; offset += chunk.byteLength) {
      const count = file.readPayloadChunk(checksum, offset, chunk);
      expect(count).not.toBeNull();
      if (count === 0) break;
      parts.push(chunk.slice(0, count!));
    }
    const joined = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
    let at = 0;
    for (const part of parts) {
      joined.set(part, at);
      at += part.byteLength;
    }
    expect(joined).toEqual(payload); // the trailer is never served as payload
    // A newer checkpoint renamed over snapshot.bin: the old one is still read, from its own inode.
    const newer = snapshotPayload(kernels, 99);
    const newerChecksum = file.write(newer);
    expect(file.readPayloadChunk(checksum, 0, chunk)).toBe(1000);
    expect(chunk).toEqual(payload.subarray(0, 1000));
    expect(file.readPayloadChunk(newerChecksum, 0, chunk)).toBe(Math.min(1000, newer.byteLength));
    expect(file.heldCount).toBe(SNAPSHOT_GENERATIONS_HELD);
    // Two newer ones: the first is released (its handle closed), never read from another file.
    file.write(snapshotPayload(kernels, 100));
    expect(file.readPayloadChunk(checksum, 0, chunk)).toBeNull();
    expect(file.readPayloadChunk(newerChecksum, 0, chunk)).toBe(Math.min(1000, newer.byteLength));
    expect(file.heldCount).toBe(SNAPSHOT_GENERATIONS_HELD);
  });

  it('a rewrite of the same checkpoint (a healed file) replaces its held generation: reads see the new file', () => {
    const { disk, file } = fresh();
    const payload = kernels.snapshotEncode(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 5 }));
    const checksum = file.write(payload);
    disk.corrupt(SNAPSHOT_FILE, 10, 0);
    expect(file.write(payload, checksum)).toBe(checksum);
    const chunk = new Uint8Array(64);
    expect(file.readPayloadChunk(checksum, 0, chunk)).toBe(64);
    expect(chunk).toEqual(payload.subarray(0, 64));
    expect(file.heldCount).toBe(1);
  });

  it('a held generation shows what is at rest: corruption of its file reaches the chunk reads', () => {
    const { disk, file } = fresh();
    const payload = kernels.snapshotEncode(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 5 }));
    const checksum = file.write(payload);
    disk.corrupt(SNAPSHOT_FILE, 10, 0);
    const chunk = new Uint8Array(64);
    expect(file.readPayloadChunk(checksum, 0, chunk)).toBe(64);
    expect(chunk[10]).toBe(payload[10]! ^ 1);
  });
});

describe('snapshot file read with the WASM kernels (a multi-MiB snapshot)', () => {
  // ~3.2 MB of partition column: above the adapter's staging threshold, small for a unit test.
  const payload = createTsKernels().snapshotEncode(
    referenceSnapshot({ streams: 4, topicsPerStream: 10, partitionsPerTopic: 10_000, users: 5, clients: 5 }),
  );

  it.each(['simd', 'scalar'] as const)(
    'reads into a plain buffer: the payload is a view of it and WASM memory keeps its size (%s)',
    (flavor) => {
      expect(payload.byteLength).toBeGreaterThan(STREAM_THRESHOLD_BYTES);
      const instance = new WasmInstance(flavor);
      const kernels = createWasmKernels(instance);
      const disk = new SimDisk(new Prng(1));
      const checksum = new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC).write(payload);
      const before = instance.memoryBytes;

      const read = new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC).read();
      expect(read?.checksum).toBe(checksum);
      expect(read?.checksum).toBe(createTsKernels().xxh3_64(payload));
      expect(Buffer.from(read!.payload).equals(payload)).toBe(true);
      // No second copy: the payload is the file as read, whose buffer ends with the trailer.
      expect(read!.payload.byteOffset).toBe(0);
      expect(read!.payload.buffer.byteLength).toBe(payload.byteLength + TRAILER_SIZE);
      expect(instance.inMemory(read!.payload)).toBe(false);
      expect(new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC).verify(checksum)).toBeNull();
      expect(instance.memoryBytes).toBe(before);

      // Refusals keep their reasons and details on this path too.
      const stored = disk.readAll(SNAPSHOT_FILE);
      stored[1000]! ^= 1;
      disk.write(SNAPSHOT_FILE, 0, stored);
      const damaged = new SnapshotFile(disk, kernels, METADATA_CHECKPOINT_CODEC);
      expect(() => damaged.read()).toThrow(StorageRefusal);
      try {
        damaged.read();
      } catch (error) {
        expect((error as StorageRefusal).reason).toBe(RefusalReason.snapshotChecksum);
        expect((error as StorageRefusal).detail).toMatch(/^trailer says 0x[0-9a-f]+, payload hashes to 0x[0-9a-f]{16}$/);
      }
      expect(instance.memoryBytes).toBe(before);
    },
  );
});

/**
 * snapshot.bin: payload + "ISNP" trailer, durable replace, and the checkpoint checksum over the
 * payload bytes as stored.
 */
import { describe, expect, it } from 'vitest';
import { TRAILER_SIZE } from '../../src/kernels/kernel.js';
import { decodeSnapshot } from '../../src/metadata/snapshot-codec.js';
import { SNAPSHOT_FORMAT_VERSION } from '../../src/format/snapshot-model.js';
import { RefusalReason, StorageRefusal } from '../../src/storage/refusal.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE, SNAPSHOT_TEMP_FILE, SNAPSHOT_TRANSFER_FILE, SnapshotFile } from '../../src/storage/snapshot-file.js';
import { referenceSnapshot, REFERENCE_SNAPSHOT_SMALL } from '../../src/testing/snapshot-fixtures.js';
import { Prng } from '../../src/stdx/prng.js';
import { kernelVariants, snapshotPayload } from './storage-fixtures.js';

describe.each(kernelVariants())('snapshot file ($label kernels)', ({ kernels }) => {
  function fresh(): { disk: SimDisk; file: SnapshotFile } {
    const disk = new SimDisk(new Prng(1));
    return { disk, file: new SnapshotFile(disk, kernels) };
  }

  function refusal(file: SnapshotFile): StorageRefusal {
    try {
      file.read();
    } catch (error) {
      if (error instanceof StorageRefusal) return error;
      throw error;
    }
    throw new Error('expected a refusal');
  }

  /** A disk that logs the transfer file's writes (offset, the buffer written from) and reads. */
  function spied(): { disk: SimDisk; file: SnapshotFile; writes: { offset: number; bytes: Uint8Array }[]; reads: number[] } {
    const { disk, file } = fresh();
    const writes: { offset: number; bytes: Uint8Array }[] = [];
    const reads: number[] = [];
    const write = disk.write.bind(disk);
    const read = disk.read.bind(disk);
    disk.write = (name, offset, bytes) => {
      if (name === SNAPSHOT_TRANSFER_FILE) writes.push({ offset, bytes });
      write(name, offset, bytes);
    };
    disk.read = (name, offset, target) => {
      if (name === SNAPSHOT_TRANSFER_FILE) reads.push(offset);
      return read(name, offset, target);
    };
    return { disk, file, writes, reads };
  }

  function chunksOf(payload: Uint8Array, chunkSize: number): { offset: number; bytes: Uint8Array }[] {
    const chunks: { offset: number; bytes: Uint8Array }[] = [];
    // Each chunk in a buffer of its own, as the frame decoder hands them over.
    for (let offset = 0; offset < payload.byteLength; offset += chunkSize) chunks.push({ offset, bytes: payload.slice(offset, offset + chunkSize) });
    return chunks;
  }

  it('transfer: chunks are written positionally from one payload buffer, and the install decodes it without reading back', () => {
    const { disk, file, writes, reads } = spied();
    const model = { ...referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 5 }), sequenceNumber: 77 };
    const payload = kernels.snapshotEncode(model);
    const chunks = chunksOf(payload, 1000);
    expect(chunks.length).toBeGreaterThan(2);
    for (const { offset, bytes } of chunks) file.transferWrite(offset, bytes, payload.byteLength);
    // One write per chunk at its offset (the trailer comes at the install), all views of one buffer.
    expect(writes.map(({ offset }) => offset)).toEqual(chunks.map(({ offset }) => offset));
    const buffers = new Set(writes.map(({ bytes }) => bytes.buffer));
    expect(buffers.size).toBe(1);
    expect(writes.every(({ bytes }, index) => bytes.buffer !== chunks[index]!.bytes.buffer)).toBe(true);
    const installed = file.transferInstall(77, payload.byteLength, kernels.xxh3_64(payload));
    expect(installed).toMatchObject({ ok: true, snapshot: { sequenceNumber: 77 } });
    expect(reads).toEqual([]);
    expect(file.installsFromMemory).toBe(1);
    expect(file.read()?.payload).toEqual(payload);
    expect(disk.exists(SNAPSHOT_TRANSFER_FILE)).toBe(false);
  });

  it('transfer: without the length, or after an out-of-order write, the install reads the file it wrote', () => {
    for (const mode of ['no length', 'gap'] as const) {
      const { file, reads } = spied();
      const payload = kernels.snapshotEncode({ ...referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 6 }), sequenceNumber: 78 });
      const chunks = chunksOf(payload, 1000);
      if (mode === 'gap') [chunks[1], chunks[2]] = [chunks[2]!, chunks[1]!];
      for (const { offset, bytes } of chunks) file.transferWrite(offset, bytes, mode === 'no length' ? undefined : payload.byteLength);
      expect(file.transferInstall(78, payload.byteLength, kernels.xxh3_64(payload))).toMatchObject({ ok: true });
      expect(reads).toEqual([0]);
      expect(file.installsFromMemory).toBe(0);
      expect(file.read()?.payload).toEqual(payload);
    }
  });

  it('transfer: a payload kept in memory that does not hash to the checkpoint id is refused, and nothing installed', () => {
    const { file } = spied();
    const payload = kernels.snapshotEncode({ ...referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 7 }), sequenceNumber: 79 });
    for (const { offset, bytes } of chunksOf(payload, 1000)) file.transferWrite(offset, bytes, payload.byteLength);
    expect(file.transferInstall(79, payload.byteLength, kernels.xxh3_64(payload) ^ 1n)).toMatchObject({ ok: false, error: expect.stringMatching(/checkpoint id/) });
    expect(file.read()).toBeNull();
  });

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
    const read = new SnapshotFile(disk, kernels).read();
    expect(read?.checksum).toBe(checksum);
    expect(read?.payload).toEqual(payload);
    expect(read?.version).toBe(SNAPSHOT_FORMAT_VERSION);
    expect(decodeSnapshot(read!.payload).sequenceNumber).toBe(referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 3 }).sequenceNumber);
  });

  it('replaces an older snapshot atomically', () => {
    const { disk, file } = fresh();
    file.write(snapshotPayload(kernels, 4));
    const newer = snapshotPayload(kernels, 9);
    file.write(newer);
    disk.crash();
    expect(new SnapshotFile(disk, kernels).read()?.payload).toEqual(newer);
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
    expect(error.detail).toBe('format version 2, this build reads 3');
    expect(error.message).toMatch(/remedy: /);
  });

  it('serves payload chunks of the snapshot it knows, and none once a newer one replaced it', () => {
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
    file.write(snapshotPayload(kernels, 99));
    expect(file.readPayloadChunk(checksum, 0, chunk)).toBeNull();
  });
});

/**
 * The request executor between the replica core and the durable structures, and the boot state
 * handed back to the core: every request kind, IO failures reported as results, state transfer
 * installs that verify before touching snapshot.bin.
 */
import { describe, expect, it } from 'vitest';
import { recover, toReplicaBootState, type RecoveryConfig } from '../../src/storage/recovery.js';
import { SimDisk } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE, SNAPSHOT_TRANSFER_FILE } from '../../src/storage/snapshot-file.js';
import { executeStorageRequest } from '../../src/storage/storage-executor.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import { referenceSnapshot, REFERENCE_SNAPSHOT_SMALL } from '../../src/testing/snapshot-fixtures.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { Prng } from '../../src/stdx/prng.js';
import { chain, checkpointWrite, CLUSTER, kernelVariants, snapshotPayload, vsrState } from './storage-fixtures.js';
import { checkpointModelOf } from '../../src/storage/metadata-checkpoint-codec.js';

const CONFIG: RecoveryConfig = { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 };

describe.each(kernelVariants())('storage executor ($label kernels)', ({ kernels }) => {
  function boot(disk = new SimDisk(new Prng(1))) {
    return { disk, recovered: recover(disk, kernels, CONFIG) };
  }

  it('runs a checkpoint cycle as the core requests it, and boots the core from it', () => {
    const { disk, recovered } = boot();
    const prepares = chain(1, 6);
    for (const entry of prepares) {
      expect(executeStorageRequest(recovered, { kind: 'wal_append', op: entry.op, frame: entry.frame })).toEqual({ ok: true });
    }
    const payload = snapshotPayload(kernels, 4);
    expect(executeStorageRequest(recovered, checkpointWrite(4))).toMatchObject({ ok: true, checkpoint: { payload } });
    const state = vsrState({ commitMax: 6, checkpointOp: 4, checkpointChecksum: kernels.xxh3_64(payload) });
    expect(executeStorageRequest(recovered, { kind: 'superblock_write', state, stateTransfer: false })).toEqual({ ok: true });
    expect(executeStorageRequest(recovered, { kind: 'wal_drain', keepFromOp: 4 })).toEqual({ ok: true });
    expect(executeStorageRequest(recovered, { kind: 'wal_truncate', fromOp: 6 })).toEqual({ ok: true });
    disk.crash();
    const bootState = toReplicaBootState(recover(disk, kernels, CONFIG));
    expect(bootState.vsrState).toMatchObject(state);
    expect(bootState.snapshot?.decoded.op).toBe(4);
    // The checkpoint entry (op 4) anchors the chain, then ops 5..head.
    expect(bootState.prepares).toEqual([prepares[3]!.frame, prepares[4]!.frame]);
    expect(bootState.provableCommit).toBe(4);
  });

  it('reads a served chunk into the buffer the node supplies (its pool), or a fresh one without it', () => {
    const { recovered } = boot();
    for (const entry of chain(1, 4)) executeStorageRequest(recovered, { kind: 'wal_append', op: entry.op, frame: entry.frame });
    const written = executeStorageRequest(recovered, checkpointWrite(4));
    const checkpoint = written.ok ? written.checkpoint! : null;
    const request = { kind: 'snapshot_chunk_read', op: 4, checksum: checkpoint!.checksum, offset: 4, len: 8 } as const;
    const supplied = new Uint8Array(64).fill(0xee);
    const lengths: number[] = [];
    const pooled = executeStorageRequest({ ...recovered, chunkBuffer: (len) => (lengths.push(len), supplied.subarray(0, len)) }, request);
    const fresh = executeStorageRequest(recovered, request);
    const expected = checkpoint!.payload.subarray(4, 12);
    expect(lengths).toEqual([8]);
    expect(pooled.ok && pooled.chunk!.buffer).toBe(supplied.buffer);
    expect(pooled.ok && pooled.chunk).toEqual(expected);
    expect(fresh.ok && fresh.chunk!.buffer).not.toBe(supplied.buffer);
    expect(fresh.ok && fresh.chunk).toEqual(expected);
  });

  it('removes single WAL entries and keeps the verified ones above them across a crash', () => {
    const { disk, recovered } = boot();
    const prepares = chain(1, 6);
    for (const entry of prepares) executeStorageRequest(recovered, { kind: 'wal_append', op: entry.op, frame: entry.frame });
    expect(executeStorageRequest(recovered, { kind: 'wal_remove', ops: [3, 4] })).toEqual({ ok: true });
    disk.crash();
    const bootState = toReplicaBootState(recover(disk, kernels, CONFIG));
    expect(bootState.prepares).toEqual([1, 2, 5, 6].map((op) => prepares[op - 1]!.frame));
  });

  it('reports IO failures as results and keeps assertion failures fatal', () => {
    const { disk, recovered } = boot();
    const [first, second] = chain(1, 2);
    disk.failNextFsync(WAL_FILE);
    const failed = executeStorageRequest(recovered, { kind: 'wal_append', op: 1, frame: first!.frame });
    expect(failed).toMatchObject({ ok: false, error: expect.stringMatching(/fsync/) });
    expect(executeStorageRequest(recovered, { kind: 'wal_append', op: 2, frame: second!.frame })).toMatchObject({ ok: false, error: expect.stringMatching(/poisoned/) });
    expect(() => executeStorageRequest(recovered, { kind: 'wal_append', op: 9, frame: first!.frame })).toThrow(AssertionError);
  });

  it('snapshot_read returns the verified payload, or the real cause', () => {
    const { disk, recovered } = boot();
    expect(executeStorageRequest(recovered, { kind: 'snapshot_read', op: 0 })).toMatchObject({ ok: false, error: expect.stringMatching(/no snapshot\.bin/) });
    const payload = snapshotPayload(kernels, 3);
    executeStorageRequest(recovered, checkpointWrite(3));
    expect(executeStorageRequest(recovered, { kind: 'snapshot_read', op: 3 })).toEqual({ ok: true, payload });
    disk.corrupt(SNAPSHOT_FILE, 1);
    expect(executeStorageRequest(recovered, { kind: 'snapshot_read', op: 3 })).toMatchObject({ ok: false, error: expect.stringMatching(/snapshot_checksum_mismatch/) });
  });

  it('state transfer: chunks stream to the transfer file; the install verifies, then replaces snapshot.bin', () => {
    const { disk, recovered } = boot();
    executeStorageRequest(recovered, checkpointWrite(3));
    const model = { ...referenceSnapshot({ ...REFERENCE_SNAPSHOT_SMALL, seed: 9 }), sequenceNumber: 500 };
    const payload = kernels.snapshotEncode(model);
    const checksum = kernels.xxh3_64(payload);
    const chunkSize = 700;
    for (let offset = 0; offset < payload.byteLength; offset += chunkSize) {
      const bytes = payload.subarray(offset, offset + chunkSize);
      expect(executeStorageRequest(recovered, { kind: 'transfer_write', offset, bytes })).toEqual({ ok: true });
    }
    // A wrong length, checksum or op installs nothing.
    expect(executeStorageRequest(recovered, { kind: 'transfer_install', op: 500, len: payload.byteLength + 1, checksum })).toMatchObject({ ok: false });
    expect(executeStorageRequest(recovered, { kind: 'transfer_install', op: 500, len: payload.byteLength, checksum: checksum ^ 1n })).toMatchObject({ ok: false, error: expect.stringMatching(/checkpoint id/) });
    expect(executeStorageRequest(recovered, { kind: 'transfer_install', op: 501, len: payload.byteLength, checksum })).toMatchObject({ ok: false, error: expect.stringMatching(/op 500/) });
    expect(recovered.snapshotFile.read()?.checksum).toBe(kernels.xxh3_64(snapshotPayload(kernels, 3)));

    const installed = executeStorageRequest(recovered, { kind: 'transfer_install', op: 500, len: payload.byteLength, checksum });
    expect(installed).toMatchObject({ ok: true, model: { op: 500 } });
    expect(disk.exists(SNAPSHOT_TRANSFER_FILE)).toBe(false);
    expect(executeStorageRequest(recovered, { kind: 'wal_drain', keepFromOp: 500 })).toEqual({ ok: true });
    const state = vsrState({ commitMax: 500, checkpointOp: 500, checkpointChecksum: checksum });
    expect(executeStorageRequest(recovered, { kind: 'superblock_write', state, stateTransfer: true })).toEqual({ ok: true });
    disk.crash();
    const after = recover(disk, kernels, CONFIG);
    expect(after.snapshot?.checksum).toBe(checksum);
    expect(after.snapshot?.decoded).toEqual(checkpointModelOf(model));
    expect(after.checkpointOp).toBe(500);
  });

  it('a discarded or crash-interrupted transfer leaves no file behind', () => {
    const { disk, recovered } = boot();
    executeStorageRequest(recovered, { kind: 'transfer_write', offset: 0, bytes: new Uint8Array(100) });
    expect(executeStorageRequest(recovered, { kind: 'transfer_discard' })).toEqual({ ok: true });
    expect(disk.exists(SNAPSHOT_TRANSFER_FILE)).toBe(false);
    executeStorageRequest(recovered, { kind: 'transfer_write', offset: 0, bytes: new Uint8Array(100) });
    recover(disk, kernels, CONFIG);
    expect(disk.exists(SNAPSHOT_TRANSFER_FILE)).toBe(false);
  });
});

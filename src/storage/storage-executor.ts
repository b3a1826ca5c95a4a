/**
 * Executes the replica core's storage requests (`StorageRequest` of src/vsr/io.ts) against the
 * durable structures that `recover` opened. This is the synchronous heart of a driver: the node
 * layer runs it and delivers `onStorageDone`; a disk-backed simulator store can call it directly.
 *
 * Results: an IO failure becomes `{ ok: false, error }` (the core retries superblock writes and
 * treats WAL and snapshot failures as fatal, restarting through recovery). Assertion failures
 * (a request that breaks a storage precondition is a bug in the core) and anything else
 * propagate: they must crash the process, not be reported as an IO error.
 */
import { assert, unreachable } from '../stdx/assert.js';
import type { StorageRequest, StorageResult } from '../vsr/io.js';
import { encodeCheckpoint } from './checkpoint-encode.js';
import { DiskError } from './disk.js';
import { DurableWriteError, StoragePoisoned } from './durable-file.js';
import { readPrepareFields } from './prepare-frame.js';
import { StorageRefusal } from './refusal.js';
import { SNAPSHOT_FILE, type SnapshotFile } from './snapshot-file.js';
import type { Superblock } from './superblock.js';
import type { Wal } from './wal.js';

export interface DurableHandles<S> {
  readonly wal: Wal;
  readonly superblock: Superblock;
  /** Its codec encodes checkpoint writes and decodes installs. */
  readonly snapshotFile: SnapshotFile<S>;
  /**
   * Where a served chunk is read into (the node's pool of chunk buffers, given back once the
   * socket took the chunk); a fresh buffer per read without it.
   */
  readonly chunkBuffer?: ((len: number) => Uint8Array) | undefined;
}

export function executeStorageRequest<S>(handles: DurableHandles<S>, request: StorageRequest<S>): StorageResult<S> {
  try {
    switch (request.kind) {
      case 'wal_append':
        assert(readPrepareFields(request.frame).op === request.op, 'wal_append op matches its frame');
        handles.wal.append(request.frame);
        break;
      case 'wal_truncate':
        handles.wal.truncateFrom(request.fromOp);
        break;
      case 'wal_remove':
        handles.wal.remove(request.ops);
        break;
      case 'wal_drain':
        handles.wal.drain(request.keepFromOp);
        break;
      case 'superblock_write':
        handles.superblock.write(request.state, { stateTransfer: request.stateTransfer });
        break;
      case 'checkpoint_write': {
        assert(request.model.op === request.op, 'checkpoint_write op matches its model');
        const { kernels, codec } = handles.snapshotFile;
        const written = encodeCheckpoint(kernels, codec, request.model, request.chunkSize);
        handles.snapshotFile.write(written.payload, written.checksum);
        return { ok: true, checkpoint: written };
      }
      case 'snapshot_read': {
        // Serving a state transfer: a snapshot that no longer verifies is reported with its
        // real cause (the offer is refused), not thrown as a boot refusal.
        const read = handles.snapshotFile.read();
        if (read === null) return { ok: false, error: `no ${SNAPSHOT_FILE} for checkpoint op ${request.op}` };
        return { ok: true, payload: read.payload };
      }
      case 'snapshot_verify': {
        const problem = handles.snapshotFile.verify(request.checksum);
        if (problem !== null) return { ok: false, error: `${SNAPSHOT_FILE} for checkpoint op ${request.op}: ${problem}` };
        break;
      }
      case 'snapshot_rewrite':
        handles.snapshotFile.write(request.payload, request.checksum);
        break;
      case 'snapshot_chunk_read': {
        const chunk = handles.chunkBuffer?.(request.len) ?? new Uint8Array(request.len);
        const count = handles.snapshotFile.readPayloadChunk(request.checksum, request.offset, chunk);
        if (count === null) return { ok: true };
        if (count !== request.len) {
          return { ok: false, error: `${SNAPSHOT_FILE} for checkpoint op ${request.op}: ${count} of ${request.len} bytes at offset ${request.offset}` };
        }
        return { ok: true, chunk };
      }
      case 'transfer_write':
        handles.snapshotFile.transferWrite(request.offset, request.bytes);
        break;
      case 'transfer_install': {
        const installed = handles.snapshotFile.transferInstall(request.op, request.len, request.checksum);
        if (!installed.ok) return installed;
        return { ok: true, model: installed.model, installedPayload: installed.payload };
      }
      case 'transfer_decode': {
        const decoded = handles.snapshotFile.transferDecode(request.op, request.len, request.checksum);
        if (!decoded.ok) return decoded;
        return { ok: true, model: decoded.model };
      }
      case 'transfer_discard':
        handles.snapshotFile.transferDiscard();
        break;
      default:
        unreachable(request, 'storage request kind');
    }
    return { ok: true };
  } catch (error) {
    if (
      error instanceof DiskError ||
      error instanceof DurableWriteError ||
      error instanceof StoragePoisoned ||
      error instanceof StorageRefusal
    ) {
      return { ok: false, error: error.message };
    }
    throw error;
  }
}

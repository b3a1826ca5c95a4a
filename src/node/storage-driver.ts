/**
 * The production storage driver: executes the replica's storage requests against the durable
 * structures on a real disk (node:fs, real fsync) and delivers each completion as an event on a
 * later turn of the event loop, in submission order (the `Storage` contract).
 *
 * Group commit: requests submitted within one turn are executed together on the next, and a run
 * of consecutive WAL appends is written with one fsync. The replica batches client requests this
 * way without any change to per-request semantics: every prepare is still its own op, and none is
 * acknowledged before the fsync that covers it returned.
 *
 * The work is synchronous (node:fs sync calls) on purpose: a storage request is never interleaved
 * with another, and a crash between two steps leaves exactly the states recovery was built for.
 * The exceptions are the fsyncs, which run on libuv's thread pool while no other request starts:
 * - the fsync that ends a run of appends (`Wal.syncAsync`): none of the run completes before it;
 * - a checkpoint's snapshot write (and a rotten snapshot's rewrite), its WAL drain and every
 *   superblock write (`writeDurablyAsync`): the temp file
 *   is written, fsynced off the loop, renamed, and the directory fsynced off the loop, in that
 *   order, and the request completes after the directory fsync.
 * - a checkpoint (`checkpoint_write`): the captured model is encoded and its chunk manifest computed
 *   on a worker thread (checkpoint-encoder.ts), then written like a snapshot write; the requests
 *   behind it wait, as behind any durable write, so completions keep submission order.
 * The event loop meanwhile serves HTTP and the replication sockets: a blocking fsync was ~12% of
 * the primary's wall time at 64 concurrent writers (`vrmeta bench cluster`), and a checkpoint's
 * two blocking fsyncs of a multi-megabyte snapshot stalled every client for their duration. A
 * crash while one is in flight is a crash between two steps of the synchronous version, which
 * recovery handles; nothing that depends on the request was acknowledged.
 */
import { performance } from 'node:perf_hooks';
import { readPrepareFields } from '../storage/prepare-frame.js';
import { executeStorageRequest, type DurableHandles } from '../storage/storage-executor.js';
import { DiskError } from '../storage/disk.js';
import { DurableWriteError, StoragePoisoned } from '../storage/durable-file.js';
import { assert } from '../stdx/assert.js';
import type { CheckpointWritten, Storage, StorageRequest, StorageResult } from '../vsr/io.js';
import { encodeCheckpoint } from '../storage/checkpoint-encode.js';
import type { CheckpointEncoder } from './checkpoint-encoder.js';

/** Requests executed per turn before yielding to the event loop (bounds one turn's latency). */
const REQUESTS_PER_TURN_MAX = 256;
/**
 * Below this previous snapshot size a checkpoint encodes in-thread: starting a worker (module load,
 * WASM compile) costs more than encoding a small state, and with small states checkpoints come
 * often (README, "Checkpoints encode off the event loop", has the measurements).
 */
export const CHECKPOINT_WORKER_MIN_BYTES = 16 * 1024 * 1024;

export interface StorageDriverCounters {
  requests: number;
  walAppends: number;
  walSyncs: number;
  /** Snapshot, superblock and WAL-drain writes whose fsyncs ran on the thread pool. */
  durableWritesAsync: number;
  /** Checkpoints encoded on the event loop (no worker, or the state is small). */
  checkpointsEncodedInThread: number;
  failures: number;
}

type Completion<S> = { id: number; result: StorageResult<S> };

/** `S` is the snapshot type of the state machine whose checkpoints it writes. */
export class StorageDriver<S> implements Storage<S> {
  private readonly handles: DurableHandles<S>;
  private readonly queue: { id: number; request: StorageRequest<S> }[] = [];
  private scheduled = false;
  private closed = false;
  /**
   * Requests waiting for IO on the thread pool: an append run's fsync, or one durable write (the
   * token tells a stale callback). `redo` completes them synchronously (shutdown).
   */
  private syncing: { readonly token: number; readonly ids: readonly number[]; readonly redo: () => Completion<S>[] } | null = null;
  private syncTokens = 0;
  /** Where completions go (the replica's onStorageDone); set once the replica exists. */
  onDone: ((id: number, result: StorageResult<S>) => void) | null = null;
  readonly counters: StorageDriverCounters = {
    requests: 0,
    walAppends: 0,
    walSyncs: 0,
    durableWritesAsync: 0,
    checkpointsEncodedInThread: 0,
    failures: 0,
  };
  /** Metrics: the duration of each successful WAL fsync, in seconds. */
  onFsync: ((seconds: number) => void) | null = null;
  /**
   * A state-transfer chunk was written (its request executed): the bytes are given back to
   * whoever lent them (the replica bus's frame pool). Runs before the request's completion.
   */
  onTransferWritten: ((bytes: Uint8Array) => void) | null = null;

  /** Encodes checkpoints off the event loop (a worker thread); null: in-thread, synchronously. */
  private readonly checkpointEncoder: CheckpointEncoder<S> | null;
  /**
   * The worker takes a checkpoint only when the previous snapshot was at least this large: a
   * worker's start (module load, WASM compile) costs more than encoding a small state in-thread,
   * and requests queued behind the checkpoint wait for it either way.
   */
  private readonly checkpointWorkerMinBytes: number;
  /** Abandons the checkpoint encode in flight (shutdown redoes it synchronously). */
  private cancelEncode: (() => void) | null = null;

  constructor(
    handles: DurableHandles<S>,
    options: {
      /** Must encode with the codec of `handles.snapshotFile` (same bytes, same checkpoint id). */
      readonly checkpointEncoder?: CheckpointEncoder<S>;
      readonly checkpointWorkerMinBytes?: number;
    } = {},
  ) {
    this.handles = handles;
    this.checkpointEncoder = options.checkpointEncoder ?? null;
    this.checkpointWorkerMinBytes = options.checkpointWorkerMinBytes ?? CHECKPOINT_WORKER_MIN_BYTES;
    assert(this.checkpointWorkerMinBytes >= 0, 'checkpointWorkerMinBytes >= 0');
  }

  submit(id: number, request: StorageRequest<S>): void {
    assert(!this.closed, 'storage request after close');
    this.queue.push({ id, request });
    this.schedule();
  }

  /**
   * Completes everything queued, synchronously (graceful shutdown waits for in-flight writes): an
   * fsync in flight on the thread pool is redone here, and its late callback is ignored.
   */
  flush(): void {
    const syncing = this.syncing;
    if (syncing !== null) {
      this.syncing = null;
      this.cancelEncode?.();
      this.cancelEncode = null;
      this.deliver(syncing.redo());
    }
    while (this.queue.length > 0) this.runBatch(false);
  }

  close(): void {
    this.flush();
    this.closed = true;
  }

  get pending(): number {
    return this.queue.length + (this.syncing?.ids.length ?? 0);
  }

  private schedule(): void {
    if (this.scheduled || this.closed || this.syncing !== null || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => this.drain());
  }

  private drain(): void {
    this.scheduled = false;
    if (this.closed || this.syncing !== null) return;
    this.runBatch(this.handles.wal.canSyncAsync);
    this.schedule();
  }

  private deliver(done: readonly Completion<S>[]): void {
    for (const { id, result } of done) this.onDone?.(id, result);
  }

  /**
   * Executes queued requests in order. With `async`, a run of appends is written and its fsync
   * handed to the thread pool: what completed before the run is delivered now, the run when the
   * fsync returns, and the requests behind it wait in the queue until then.
   */
  private runBatch(async: boolean): void {
    const batch = this.queue.splice(0, REQUESTS_PER_TURN_MAX);
    const done: Completion<S>[] = [];
    let index = 0;
    while (index < batch.length) {
      const first = batch[index]!;
      if (first.request.kind === 'wal_append') {
        let end = index;
        while (end < batch.length && batch[end]!.request.kind === 'wal_append') end++;
        const run = batch.slice(index, end);
        const ids = run.map(({ id }) => id);
        const failed = this.writeRun(run);
        if (failed !== null) {
          done.push(...failed);
        } else if (async) {
          this.queue.unshift(...batch.slice(end));
          // The fsync's callback runs on a later turn, after these completions.
          this.syncRunAsync(ids);
          this.deliver(done);
          return;
        } else {
          done.push(...this.syncRun(ids));
        }
        index = end;
        continue;
      }
      if (async && this.startDurableWrite(first)) {
        this.queue.unshift(...batch.slice(index + 1));
        this.deliver(done);
        return;
      }
      this.counters.requests += 1;
      const result = executeStorageRequest(this.handles, first.request);
      // The chunk is in the file (or failed, fatally): nothing reads its bytes again.
      if (first.request.kind === 'transfer_write') this.onTransferWritten?.(first.request.bytes);
      if (!result.ok) this.counters.failures += 1;
      done.push({ id: first.id, result });
      index += 1;
    }
    this.deliver(done);
  }

  /** Writes a run of appends without fsync; null on success, else the run's failed completions. */
  private writeRun(run: readonly { id: number; request: StorageRequest<S> }[]): Completion<S>[] | null {
    this.counters.requests += run.length;
    try {
      for (const { request } of run) {
        assert(request.kind === 'wal_append', 'an append run holds appends');
        assert(readPrepareFields(request.frame).op === request.op, 'wal_append op matches its frame');
        this.handles.wal.append(request.frame, { sync: false });
        this.counters.walAppends += 1;
      }
      return null;
    } catch (error) {
      return this.failRun(run.map(({ id }) => id), error);
    }
  }

  private syncRun(ids: readonly number[]): Completion<S>[] {
    try {
      const startedMs = performance.now();
      this.handles.wal.sync();
      this.onFsync?.((performance.now() - startedMs) / 1000);
      this.counters.walSyncs += 1;
      return ids.map((id) => ({ id, result: { ok: true } }));
    } catch (error) {
      return this.failRun(ids, error);
    }
  }

  /**
   * Starts a snapshot or superblock write with its fsyncs on the thread pool; false when the
   * request is another kind or the disk cannot. Completes like `syncRunAsync`: when the directory
   * fsync returns, with nothing behind it started before.
   */
  private startDurableWrite(entry: { id: number; request: StorageRequest<S> }): boolean {
    const { id, request } = entry;
    const { snapshotFile, superblock, wal } = this.handles;
    const capable =
      (request.kind === 'checkpoint_write' && snapshotFile.canWriteAsync) ||
      (request.kind === 'snapshot_rewrite' && snapshotFile.canWriteAsync) ||
      (request.kind === 'superblock_write' && superblock.canWriteAsync) ||
      (request.kind === 'wal_drain' && wal.canDrainAsync);
    if (!capable) return false;
    this.counters.requests += 1;
    const token = ++this.syncTokens;
    // Shutdown redoes the whole write synchronously (both are idempotent: same bytes, same slot).
    this.syncing = { token, ids: [id], redo: () => [{ id, result: executeStorageRequest(this.handles, request) }] };
    const live = (): boolean => this.syncing?.token === token && !this.closed;
    const finish = (error: Error | null, ok: StorageResult<S> = { ok: true }): void => {
      assert(live(), 'a durable write completes while it is the one in flight');
      this.syncing = null;
      if (error === null) this.counters.durableWritesAsync += 1;
      this.deliver(error === null ? [{ id, result: ok }] : this.failRun([id], error));
      if (!this.scheduled) this.drain();
    };
    if (request.kind === 'checkpoint_write') {
      assert(request.model.op === request.op, 'checkpoint_write op matches its model');
      const write = (written: CheckpointWritten): void => {
        snapshotFile.writeAsync(written.payload, written.checksum, live, (result) =>
          finish(typeof result === 'bigint' ? null : result, { ok: true, checkpoint: written }),
        );
      };
      const previousBytes = snapshotFile.known?.payloadSizeBytes ?? 0;
      const encoder = previousBytes >= this.checkpointWorkerMinBytes ? this.checkpointEncoder : null;
      if (encoder === null) {
        this.counters.checkpointsEncodedInThread += 1;
        write(encodeCheckpoint(snapshotFile.kernels, snapshotFile.codec, request.model, request.chunkSize));
        return true;
      }
      // Encode and manifest on the worker; the payload then goes through the same durable write
      // (temp, fsync, rename, directory fsync) as every snapshot, in this request's turn.
      this.cancelEncode = encoder(request.model, request.chunkSize, (encoded) => {
        this.cancelEncode = null;
        if (!live()) return;
        if (encoded instanceof Error) {
          // Like a disk error: the replica stops (`fatal`) and restarts through recovery.
          this.syncing = null;
          this.counters.failures += 1;
          this.deliver([{ id, result: { ok: false, error: encoded.message } }]);
          if (!this.scheduled) this.drain();
          return;
        }
        write(encoded);
      });
    } else if (request.kind === 'snapshot_rewrite') {
      // A rotten file rewritten from the payload the core holds: the same durable write.
      snapshotFile.writeAsync(request.payload, request.checksum, live, (result) =>
        finish(typeof result === 'bigint' ? null : result),
      );
    } else if (request.kind === 'wal_drain') {
      wal.drainAsync(request.keepFromOp, live, finish);
    } else {
      assert(request.kind === 'superblock_write');
      superblock.writeAsync(request.state, { stateTransfer: request.stateTransfer }, live, finish);
    }
    return true;
  }

  private syncRunAsync(ids: readonly number[]): void {
    const token = ++this.syncTokens;
    this.syncing = { token, ids, redo: () => this.syncRun(ids) };
    const startedMs = performance.now();
    this.handles.wal.syncAsync((error) => {
      // Stale: flush() completed the run synchronously (shutdown).
      if (this.syncing?.token !== token) return;
      this.syncing = null;
      if (this.closed) return;
      if (error === null) {
        this.counters.walSyncs += 1;
        this.onFsync?.((performance.now() - startedMs) / 1000);
      }
      this.deliver(error === null ? ids.map((id) => ({ id, result: { ok: true } })) : this.failRun(ids, error));
      if (!this.scheduled) this.drain();
    });
  }

  /** IO failures complete the run with the error; anything else is a bug and stays fatal. */
  private failRun(ids: readonly number[], error: unknown): Completion<S>[] {
    if (!(error instanceof DiskError || error instanceof DurableWriteError || error instanceof StoragePoisoned)) throw error;
    this.counters.failures += 1;
    const message = (error as Error).message;
    return ids.map((id) => ({ id, result: { ok: false, error: message } }));
  }
}

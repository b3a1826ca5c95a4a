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
 */
import { readPrepareFields } from '../storage/prepare-frame.js';
import { executeStorageRequest, type DurableHandles } from '../storage/storage-executor.js';
import { DiskError } from '../storage/disk.js';
import { DurableWriteError, StoragePoisoned } from '../storage/durable-file.js';
import { assert } from '../stdx/assert.js';
import type { Storage, StorageRequest, StorageResult } from '../vsr/io.js';

/** Requests executed per turn before yielding to the event loop (bounds one turn's latency). */
const REQUESTS_PER_TURN_MAX = 256;

export interface StorageDriverCounters {
  requests: number;
  walAppends: number;
  walSyncs: number;
  failures: number;
}

export class StorageDriver implements Storage {
  private readonly handles: DurableHandles;
  private readonly queue: { id: number; request: StorageRequest }[] = [];
  private scheduled = false;
  private closed = false;
  /** Where completions go (the replica's onStorageDone); set once the replica exists. */
  onDone: ((id: number, result: StorageResult) => void) | null = null;
  readonly counters: StorageDriverCounters = { requests: 0, walAppends: 0, walSyncs: 0, failures: 0 };

  constructor(handles: DurableHandles) {
    this.handles = handles;
  }

  submit(id: number, request: StorageRequest): void {
    assert(!this.closed, 'storage request after close');
    this.queue.push({ id, request });
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.drain());
    }
  }

  /** Completes everything queued (graceful shutdown waits for in-flight writes). */
  flush(): void {
    while (this.queue.length > 0) this.runBatch();
  }

  close(): void {
    this.flush();
    this.closed = true;
  }

  get pending(): number {
    return this.queue.length;
  }

  private drain(): void {
    this.scheduled = false;
    if (this.closed) return;
    this.runBatch();
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.drain());
    }
  }

  private runBatch(): void {
    const batch = this.queue.splice(0, REQUESTS_PER_TURN_MAX);
    const done: { id: number; result: StorageResult }[] = [];
    let index = 0;
    while (index < batch.length) {
      const first = batch[index]!;
      if (first.request.kind === 'wal_append') {
        // A run of appends: write each, fsync once, then complete them all.
        let end = index;
        while (end < batch.length && batch[end]!.request.kind === 'wal_append') end++;
        done.push(...this.appendRun(batch.slice(index, end)));
        index = end;
        continue;
      }
      this.counters.requests += 1;
      const result = executeStorageRequest(this.handles, first.request);
      if (!result.ok) this.counters.failures += 1;
      done.push({ id: first.id, result });
      index += 1;
    }
    for (const { id, result } of done) this.onDone?.(id, result);
  }

  private appendRun(run: { id: number; request: StorageRequest }[]): { id: number; result: StorageResult }[] {
    this.counters.requests += run.length;
    try {
      for (const { request } of run) {
        assert(request.kind === 'wal_append', 'an append run holds appends');
        assert(readPrepareFields(request.frame).op === request.op, 'wal_append op matches its frame');
        this.handles.wal.append(request.frame, { sync: false });
        this.counters.walAppends += 1;
      }
      this.handles.wal.sync();
      this.counters.walSyncs += 1;
      return run.map(({ id }) => ({ id, result: { ok: true } as StorageResult }));
    } catch (error) {
      if (!(error instanceof DiskError || error instanceof DurableWriteError || error instanceof StoragePoisoned)) throw error;
      this.counters.failures += 1;
      const message = (error as Error).message;
      return run.map(({ id }) => ({ id, result: { ok: false, error: message } as StorageResult }));
    }
  }
}

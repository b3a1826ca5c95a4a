/**
 * The production storage driver (src/node/storage-driver.ts) on a real directory: group commit
 * with the run's fsync on the thread pool. Nothing of a run completes before its fsync returned,
 * nothing queued behind it starts before then, completions keep submission order, shutdown
 * completes a run whose fsync is still in flight exactly once, and a failed fsync fails the run
 * and poisons the WAL.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StorageDriver } from '../../src/node/storage-driver.js';
import { FsyncError } from '../../src/storage/disk.js';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { recover } from '../../src/storage/recovery.js';
import type { StorageResult } from '../../src/vsr/io.js';
import { chain, checkpointWrite, CLUSTER, tsKernels, vsrState } from './storage-fixtures.js';
import { SNAPSHOT_FILE, SNAPSHOT_TRANSFER_FILE } from '../../src/storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../../src/storage/superblock.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A driver over a real disk whose async fsyncs wait until the test releases them. */
function setup() {
  const root = mkdtempSync(join(tmpdir(), 'vrmeta-driver-'));
  roots.push(root);
  const disk = new FsDisk(root, { create: true });
  const kernels = tsKernels();
  const recovered = recover(disk, kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
  const held: { release: (error?: FsyncError) => void }[] = [];
  const realFsyncAsync = disk.fsyncAsync.bind(disk);
  disk.fsyncAsync = (name, done) => {
    held.push({ release: (error) => realFsyncAsync(name, (real) => done(error ?? real)) });
  };
  const driver = new StorageDriver({ wal: recovered.wal, superblock: recovered.superblock, snapshotFile: recovered.snapshotFile });
  const completed: { id: number; result: StorageResult<MetadataMachineSnapshot> }[] = [];
  driver.onDone = (id, result) => completed.push({ id, result });
  return { root, disk, kernels, driver, held, completed, wal: recovered.wal };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function until(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 1000 && !condition(); attempt++) await new Promise((resolve) => setTimeout(resolve, 1));
  expect(condition()).toBe(true);
}

describe('storage driver: group commit with the fsync off the event loop', () => {
  it('completes a run only after its fsync, holds the requests behind it, and keeps submission order', async () => {
    const { driver, held, completed } = setup();
    const prepares = chain(1, 4);
    driver.submit(1, { kind: 'snapshot_read', op: 0 });
    for (const [index, prepare] of prepares.slice(0, 3).entries()) driver.submit(10 + index, { kind: 'wal_append', op: prepare.op, frame: prepare.frame });
    driver.submit(20, { kind: 'snapshot_read', op: 0 });
    await turn();
    // The request before the run completed; the run waits for its one fsync; the read behind it waits too.
    expect(completed.map(({ id }) => id)).toEqual([1]);
    expect(held).toHaveLength(1);
    expect(driver.pending).toBe(4);
    await turn();
    expect(completed.map(({ id }) => id)).toEqual([1]);

    // An append submitted meanwhile joins the queue behind the read.
    driver.submit(30, { kind: 'wal_append', op: prepares[3]!.op, frame: prepares[3]!.frame });
    held[0]!.release();
    await until(() => completed.length === 5);
    expect(completed.map(({ id }) => id)).toEqual([1, 10, 11, 12, 20]);
    expect(completed.slice(1, 4).every(({ result }) => result.ok)).toBe(true);
    await until(() => held.length === 2);
    held[1]!.release();
    await until(() => completed.length === 6);
    expect(completed[5]).toEqual({ id: 30, result: { ok: true } });
    expect(driver.counters).toMatchObject({ walAppends: 4, walSyncs: 2 });
  });

  it('shutdown completes a run whose fsync is in flight, exactly once, and the data is durable', async () => {
    const { root, disk, kernels, driver, held, completed, wal } = setup();
    const prepares = chain(1, 2);
    for (const prepare of prepares) driver.submit(prepare.op, { kind: 'wal_append', op: prepare.op, frame: prepare.frame });
    await turn();
    expect(held).toHaveLength(1);
    driver.close();
    expect(completed).toEqual([
      { id: 1, result: { ok: true } },
      { id: 2, result: { ok: true } },
    ]);
    // The late answer fails (as on a descriptor closed meanwhile): it neither completes anything
    // again nor poisons the WAL, whose synchronous fsync already answered for the run.
    held[0]!.release(new FsyncError('/x/journal.wal', new Error('EBADF')));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(completed).toHaveLength(2);
    expect(() => wal.sync()).not.toThrow();
    disk.close();
    const reopened = recover(new FsDisk(root), kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
    expect(reopened.wal.get(2)?.op).toBe(2);
  });

  it('reports the duration of each successful WAL fsync, async and at shutdown, and none for a failed one', async () => {
    const { driver, held, completed } = setup();
    const fsyncs: number[] = [];
    driver.onFsync = (seconds) => fsyncs.push(seconds);
    const prepares = chain(1, 4);
    driver.submit(1, { kind: 'wal_append', op: prepares[0]!.op, frame: prepares[0]!.frame });
    await turn();
    held[0]!.release();
    await until(() => completed.length === 1);
    expect(fsyncs).toHaveLength(1);
    driver.submit(2, { kind: 'wal_append', op: prepares[1]!.op, frame: prepares[1]!.frame });
    await turn();
    held[1]!.release(new FsyncError('/x/journal.wal', new Error('EIO')));
    await until(() => completed.length === 2);
    expect(fsyncs).toHaveLength(1);
    expect(fsyncs.every((seconds) => Number.isFinite(seconds) && seconds >= 0)).toBe(true);
  });

  it('a synchronous fsync (shutdown) is timed too', async () => {
    const { driver, held } = setup();
    const fsyncs: number[] = [];
    driver.onFsync = (seconds) => fsyncs.push(seconds);
    const prepares = chain(1, 1);
    driver.submit(1, { kind: 'wal_append', op: prepares[0]!.op, frame: prepares[0]!.frame });
    await turn();
    expect(held).toHaveLength(1);
    driver.close();
    expect(fsyncs).toHaveLength(1);
  });

  it('a failed fsync fails the whole run with its cause and poisons the WAL', async () => {
    const { driver, held, completed } = setup();
    const prepares = chain(1, 3);
    for (const prepare of prepares.slice(0, 2)) driver.submit(prepare.op, { kind: 'wal_append', op: prepare.op, frame: prepare.frame });
    await turn();
    held[0]!.release(new FsyncError('/x/journal.wal', new Error('EIO')));
    await until(() => completed.length === 2);
    for (const { result } of completed) expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/EIO|fsync/) });
    driver.submit(3, { kind: 'wal_append', op: prepares[2]!.op, frame: prepares[2]!.frame });
    await until(() => completed.length === 3);
    expect(completed[2]!.result).toMatchObject({ ok: false, error: expect.stringMatching(/poisoned/) });
    expect(driver.counters.failures).toBe(2);
  });
});

describe('storage driver: state transfer chunks', () => {
  it('gives a chunk\'s bytes back (onTransferWritten) once it is written, before its completion, in order', async () => {
    const { root, driver, completed } = setup();
    const given: Uint8Array[] = [];
    driver.onTransferWritten = (bytes) => {
      // Written already: the file holds the chunk when the bytes are given back.
      expect(readFileSync(join(root, SNAPSHOT_TRANSFER_FILE)).subarray(given.length * 4, given.length * 4 + 4)).toEqual(Buffer.from(bytes));
      expect(completed.map(({ id }) => id)).not.toContain(given.length + 1);
      given.push(bytes);
    };
    const chunks = [new Uint8Array([1, 2, 3, 4]), new Uint8Array([5, 6, 7, 8])];
    driver.submit(1, { kind: 'transfer_write', offset: 0, bytes: chunks[0]! });
    driver.submit(2, { kind: 'transfer_write', offset: 4, bytes: chunks[1]! });
    driver.submit(3, { kind: 'snapshot_read', op: 0 });
    expect(given).toHaveLength(0);
    await turn();
    expect(given).toEqual(chunks);
    expect(given[0]).toBe(chunks[0]);
    expect(completed.map(({ id }) => id)).toEqual([1, 2, 3]);
  });
});

describe('storage driver: checkpoint IO with its fsyncs off the event loop', () => {
  /** `setup()` plus a log of every disk call that matters for the crash order, and held directory fsyncs. */
  function instrumented() {
    const context = setup();
    const { disk } = context;
    const calls: string[] = [];
    const heldDirectory: { release: (error?: FsyncError) => void }[] = [];
    const realWrite = disk.write.bind(disk);
    const realRename = disk.rename.bind(disk);
    const realFsync = disk.fsync.bind(disk);
    const realFsyncDirectory = disk.fsyncDirectory.bind(disk);
    const realFsyncDirectoryAsync = disk.fsyncDirectoryAsync.bind(disk);
    const heldFsyncAsync = disk.fsyncAsync;
    disk.write = (name, offset, bytes) => {
      calls.push(`write ${name}`);
      realWrite(name, offset, bytes);
    };
    disk.rename = (from, to) => {
      calls.push(`rename ${from} ${to}`);
      realRename(from, to);
    };
    disk.fsync = (name) => {
      calls.push(`fsyncSync ${name}`);
      realFsync(name);
    };
    disk.fsyncDirectory = () => {
      calls.push('fsyncDirectorySync');
      realFsyncDirectory();
    };
    /** Every async fsync's callback, to answer late without touching the disk. */
    const answers: ((error: FsyncError | null) => void)[] = [];
    disk.fsyncAsync = (name, done) => {
      calls.push(`fsyncAsync ${name}`);
      answers.push(done);
      heldFsyncAsync(name, done);
    };
    disk.fsyncDirectoryAsync = (done) => {
      calls.push('fsyncDirectoryAsync');
      heldDirectory.push({ release: (error) => realFsyncDirectoryAsync((real) => done(error ?? real)) });
    };
    return { ...context, calls, heldDirectory, answers };
  }

  it('a snapshot write completes after its directory fsync, in crash-safe order, with no fsync on the loop', async () => {
    const { driver, held, heldDirectory, completed, calls, kernels, disk } = instrumented();
    const prepares = chain(1, 1);
    driver.submit(1, checkpointWrite(4));
    driver.submit(2, { kind: 'wal_append', op: prepares[0]!.op, frame: prepares[0]!.frame });
    await turn();
    // The temp file is written and its fsync is on the thread pool; nothing behind it started.
    expect(completed).toEqual([]);
    expect(held).toHaveLength(1);
    expect(calls).toEqual([`write ${SNAPSHOT_FILE}.tmp`, `write ${SNAPSHOT_FILE}.tmp`, `fsyncAsync ${SNAPSHOT_FILE}.tmp`]);
    await turn();
    expect(completed).toEqual([]);
    held[0]!.release();
    await until(() => heldDirectory.length === 1);
    expect(calls.slice(3)).toEqual([`rename ${SNAPSHOT_FILE}.tmp ${SNAPSHOT_FILE}`, 'fsyncDirectoryAsync']);
    expect(completed).toEqual([]);
    heldDirectory[0]!.release();
    await until(() => completed.length === 1);
    expect(completed[0]).toMatchObject({ id: 1, result: { ok: true } });
    // Only now does the append behind it run.
    await until(() => held.length === 2);
    held[1]!.release();
    await until(() => completed.length === 2);
    expect(completed[1]).toEqual({ id: 2, result: { ok: true } });
    expect(calls.filter((call) => call.includes('Sync'))).toEqual([]);
    expect(driver.counters.durableWritesAsync).toBe(1);
    const stored = disk.readAll(SNAPSHOT_FILE);
    expect(kernels.trailerSplit(stored).status).toBe('valid');
  });

  it('a rotten snapshot rewritten from the payload held in memory takes the same durable path, no fsync on the loop', async () => {
    const { driver, held, heldDirectory, completed, calls, kernels, disk } = instrumented();
    driver.submit(1, checkpointWrite(4));
    await until(() => held.length === 1);
    held[0]!.release();
    await until(() => heldDirectory.length === 1);
    heldDirectory[0]!.release();
    await until(() => completed.length === 1);
    const written = completed[0]!.result.ok ? completed[0]!.result.checkpoint! : null;
    expect(written).not.toBeNull();
    const file = disk.readAll(SNAPSHOT_FILE);
    file[3] = file[3]! ^ 0x40;
    disk.write(SNAPSHOT_FILE, 0, file);
    expect(kernels.trailerSplit(disk.readAll(SNAPSHOT_FILE)).status).toBe('checksum_mismatch');
    driver.submit(2, { kind: 'snapshot_rewrite', op: 4, checksum: written!.checksum, payload: written!.payload });
    await until(() => held.length === 2);
    expect(completed).toHaveLength(1);
    held[1]!.release();
    await until(() => heldDirectory.length === 2);
    heldDirectory[1]!.release();
    await until(() => completed.length === 2);
    expect(completed[1]).toEqual({ id: 2, result: { ok: true } });
    expect(calls.filter((call) => call.includes('Sync'))).toEqual([]);
    expect(driver.counters.durableWritesAsync).toBe(2);
    const split = kernels.trailerSplit(disk.readAll(SNAPSHOT_FILE));
    expect(split.status === 'valid' && split.checksum).toBe(written!.checksum);
  });

  it('a superblock write runs its fsyncs on the thread pool and becomes the newest record only when durable', async () => {
    const { driver, held, heldDirectory, completed, calls, root, disk, kernels } = instrumented();
    const state = vsrState({ view: 3, logView: 3, commitMax: 0 });
    driver.submit(1, { kind: 'superblock_write', state, stateTransfer: false });
    await turn();
    expect(held).toHaveLength(1);
    held[0]!.release();
    await until(() => heldDirectory.length === 1);
    expect(completed).toEqual([]);
    heldDirectory[0]!.release();
    await until(() => completed.length === 1);
    expect(completed[0]).toEqual({ id: 1, result: { ok: true } });
    const slot = calls.find((call) => call.startsWith('rename '))!.split(' ')[2]!;
    expect(SUPERBLOCK_FILES).toContain(slot);
    expect(calls.filter((call) => call.includes('Sync'))).toEqual([]);
    disk.close();
    const reopened = recover(new FsDisk(root), kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
    expect(reopened.superblock.state?.view).toBe(3);
  });

  it('a checkpoint\'s WAL drain rewrites the journal with its fsyncs on the thread pool', async () => {
    const { driver, held, heldDirectory, completed, calls, root, disk, kernels } = instrumented();
    const prepares = chain(1, 3);
    for (const prepare of prepares) driver.submit(prepare.op, { kind: 'wal_append', op: prepare.op, frame: prepare.frame });
    await until(() => held.length === 1);
    held[0]!.release();
    await until(() => completed.length === 3);
    calls.length = 0;
    driver.submit(10, { kind: 'wal_drain', keepFromOp: 3 });
    await until(() => held.length === 2);
    expect(completed).toHaveLength(3);
    held[1]!.release();
    await until(() => heldDirectory.length === 1);
    expect(completed).toHaveLength(3);
    heldDirectory[0]!.release();
    await until(() => completed.length === 4);
    expect(completed[3]).toEqual({ id: 10, result: { ok: true } });
    expect(calls.filter((call) => call.includes('Sync'))).toEqual([]);
    expect(calls).toContain('rename journal.wal.tmp journal.wal');
    disk.close();
    const reopened = recover(new FsDisk(root), kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
    expect(reopened.wal.get(3)?.op).toBe(3);
    expect(reopened.wal.get(2)).toBeNull();
  });

  it('a failed directory fsync fails the write with its stage', async () => {
    const { driver, held, heldDirectory, completed } = instrumented();
    driver.submit(1, checkpointWrite(4));
    await turn();
    held[0]!.release();
    await until(() => heldDirectory.length === 1);
    heldDirectory[0]!.release(new FsyncError('/x', new Error('EIO')));
    await until(() => completed.length === 1);
    expect(completed[0]!.result).toMatchObject({ ok: false, error: expect.stringMatching(/dir_sync/) });
  });

  it('shutdown redoes a durable write in flight synchronously, exactly once', async () => {
    const { driver, held, completed, calls, kernels, disk, answers } = instrumented();
    driver.submit(1, checkpointWrite(4));
    await turn();
    expect(held).toHaveLength(1);
    driver.close();
    expect(completed).toHaveLength(1);
    expect(completed[0]).toMatchObject({ id: 1, result: { ok: true } });
    expect(calls).toContain('fsyncDirectorySync');
    const renames = calls.filter((call) => call.startsWith('rename')).length;
    // The late fsync answer neither renames again nor completes anything.
    answers[0]!(null);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls.filter((call) => call.startsWith('rename')).length).toBe(renames);
    expect(completed).toHaveLength(1);
    expect(kernels.trailerSplit(disk.readAll(SNAPSHOT_FILE)).status).toBe('valid');
  });
});

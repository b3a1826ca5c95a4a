/**
 * Checkpoints encoded on a worker thread (src/node/checkpoint-encoder.ts) through the production
 * storage driver: the payload, checkpoint id and chunk sums are byte-identical to the in-thread
 * encoder in both kernel modes, the main thread encodes nothing, the file at rest is that payload,
 * a failing worker fails the request like a disk error, and shutdown redoes an encode in flight.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKernels } from '../../src/kernels/index.js';
import type { KernelsName } from '../../src/kernels/kernel.js';
import { workerCheckpointEncoder, type CheckpointEncoder } from '../../src/node/checkpoint-encoder.js';
import { StorageDriver } from '../../src/node/storage-driver.js';
import { encodeCheckpoint } from '../../src/storage/checkpoint-encode.js';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { recover } from '../../src/storage/recovery.js';
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { METADATA_CHECKPOINT_CODEC, checkpointModelOf } from '../../src/storage/metadata-checkpoint-codec.js';
import type { CheckpointModel } from '../../src/vsr/state-machine.js';
import type { CheckpointWritten, StorageResult } from '../../src/vsr/io.js';
import { CLUSTER } from './storage-fixtures.js';
import { Driver, ROOT, fullSnapshot, req } from './metadata-fixtures.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const CHUNK_SIZE = 4096;

/** A model of several chunks: partition columns, groups, users with tokens. */
function model(): CheckpointModel<MetadataMachineSnapshot> {
  const driver = new Driver();
  for (let stream = 0; stream < 3; stream++) {
    driver.created(ROOT, req.createStream(`s${stream}`));
    for (let topic = 0; topic < 4; topic++) driver.created(ROOT, req.createTopic(`s${stream}`, `t${topic}`, 300 + topic));
  }
  driver.created(ROOT, req.createGroup('s0', 't0', 'g'));
  expect(driver.code(ROOT, req.joinGroup('s0', 't0', 'g'), 10n)).toBe(0);
  const alice = driver.created(ROOT, req.createUser('alice', { global: 1, streams: [] }));
  expect(driver.code(alice, req.createPat('pat', 3))).toBe(0);
  return checkpointModelOf(fullSnapshot(driver.sm.snapshot(), 48));
}

function setup(mode: KernelsName, encoder: CheckpointEncoder<MetadataMachineSnapshot> | undefined, checkpointWorkerMinBytes = 0) {
  const root = mkdtempSync(join(tmpdir(), 'vrmeta-ckworker-'));
  roots.push(root);
  const kernels = loadKernels(mode);
  const disk = new FsDisk(root, { create: true });
  const recovered = recover(disk, kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
  const handles = { wal: recovered.wal, superblock: recovered.superblock, snapshotFile: recovered.snapshotFile };
  const options = encoder === undefined ? {} : { checkpointEncoder: encoder, checkpointWorkerMinBytes };
  const driver = new StorageDriver(handles, options);
  const completed: { id: number; result: StorageResult<MetadataMachineSnapshot> }[] = [];
  driver.onDone = (id, result) => completed.push({ id, result });
  return { root, kernels, disk, driver, completed, snapshotFile: recovered.snapshotFile };
}

async function until(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 3000 && !condition(); attempt++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(condition()).toBe(true);
}

/** The worker encoder, recording what each worker answered. */
function recording(mode: KernelsName): { encoder: CheckpointEncoder<MetadataMachineSnapshot>; answers: (CheckpointWritten | Error)[] } {
  const inner = workerCheckpointEncoder(mode);
  const answers: (CheckpointWritten | Error)[] = [];
  const encoder: CheckpointEncoder<MetadataMachineSnapshot> = (snapshot, chunkSize, done) =>
    inner(snapshot, chunkSize, (result) => {
      answers.push(result);
      done(result);
    });
  return { encoder, answers };
}

describe('checkpoint encoded on a worker thread', () => {
  it.each(['wasm', 'ts'] as const)('gives the in-thread payload, id and chunk sums (%s kernels) and writes that payload', async (mode) => {
    const snapshot = model();
    const expected = encodeCheckpoint(loadKernels(mode), METADATA_CHECKPOINT_CODEC, snapshot, CHUNK_SIZE);
    expect(expected.chunkChecksums.length).toBeGreaterThan(2);
    const { encoder, answers } = recording(mode);
    const { driver, completed, kernels, snapshotFile, root } = setup(mode, encoder);
    // The main thread encodes nothing: its kernels refuse to.
    const realEncode = kernels.snapshotEncode;
    kernels.snapshotEncode = () => {
      throw new Error('encoded on the main thread');
    };
    try {
      driver.submit(1, { kind: 'checkpoint_write', op: 48, model: snapshot, chunkSize: CHUNK_SIZE });
      driver.submit(2, { kind: 'snapshot_read', op: 48 });
      await until(() => completed.length === 2);
    } finally {
      kernels.snapshotEncode = realEncode;
    }
    expect(answers).toHaveLength(1);
    expect(answers[0]).not.toBeInstanceOf(Error);
    expect(completed.map(({ id }) => id)).toEqual([1, 2]);
    const result = completed[0]!.result;
    expect(result.ok).toBe(true);
    const written = (result as { checkpoint?: CheckpointWritten }).checkpoint!;
    expect(written.payload).toEqual(expected.payload);
    expect(written.checksum).toBe(expected.checksum);
    expect(written.chunkChecksums).toEqual(expected.chunkChecksums);
    // At rest: the same payload, sealed with the id.
    expect(completed[1]!.result).toEqual({ ok: true, payload: expected.payload });
    expect(snapshotFile.known).toEqual({ payloadSizeBytes: expected.payload.byteLength, checksum: expected.checksum });
    expect(snapshotFile.verify(expected.checksum)).toBeNull();
    driver.close();
    // And from a fresh process's view (recovery reads it back).
    const reread = recover(new FsDisk(root), loadKernels(mode), { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
    expect(reread.snapshot?.checksum).toBe(expected.checksum);
  });

  it('wasm and ts workers agree byte for byte', async () => {
    const snapshot = model();
    const results = await Promise.all(
      (['wasm', 'ts'] as const).map(
        (mode) => new Promise<CheckpointWritten | Error>((resolve) => workerCheckpointEncoder(mode)(snapshot, CHUNK_SIZE, resolve)),
      ),
    );
    expect(results[0]).not.toBeInstanceOf(Error);
    expect(results[0]).toEqual(results[1]);
  });

  it('a model the encoder rejects fails the request with the worker\'s error', async () => {
    const { driver, completed } = setup('ts', workerCheckpointEncoder('ts'));
    const bad = { ...model(), writerRelease: -1 };
    driver.submit(1, { kind: 'checkpoint_write', op: 48, model: bad, chunkSize: CHUNK_SIZE });
    driver.submit(2, { kind: 'snapshot_read', op: 48 });
    await until(() => completed.length === 2);
    expect(completed[0]!.result).toMatchObject({ ok: false, error: expect.stringMatching(/checkpoint encode failed in its worker/) });
    // Nothing was written (the read behind it finds no snapshot), and completion kept its order.
    expect(completed[1]).toMatchObject({ id: 2, result: { ok: false, error: expect.stringMatching(/no snapshot\.bin/) } });
    driver.close();
  });

  it('a worker that crashes fails the request like a disk error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vrmeta-ckworker-entry-'));
    roots.push(dir);
    const entry = join(dir, 'crash.mjs');
    writeFileSync(entry, 'process.exit(7);\n');
    const { driver, completed } = setup('ts', workerCheckpointEncoder('ts', entry));
    driver.submit(1, { kind: 'checkpoint_write', op: 48, model: model(), chunkSize: CHUNK_SIZE });
    await until(() => completed.length === 1);
    expect(completed[0]!.result).toMatchObject({ ok: false, error: expect.stringMatching(/exited \(code 7\)/) });
    driver.close();
  });

  it('shutdown redoes an encode in flight synchronously, exactly once', async () => {
    const snapshot = model();
    const expected = encodeCheckpoint(loadKernels('ts'), METADATA_CHECKPOINT_CODEC, snapshot, CHUNK_SIZE);
    const { encoder, answers } = recording('ts');
    const { driver, completed } = setup('ts', encoder);
    driver.submit(1, { kind: 'checkpoint_write', op: 48, model: snapshot, chunkSize: CHUNK_SIZE });
    await new Promise((resolve) => setImmediate(resolve));
    expect(completed).toHaveLength(0);
    driver.close();
    expect(completed).toHaveLength(1);
    expect(completed[0]!.result).toMatchObject({ ok: true, checkpoint: { checksum: expected.checksum } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The terminated worker answers nothing, and nothing completes twice.
    expect(answers).toHaveLength(0);
    expect(completed).toHaveLength(1);
  });
});

/** `model()` and one more stream of two 1,000-partition topics (16 KB more column), at `op`. */
function largerModel(op: number): CheckpointModel<MetadataMachineSnapshot> {
  const driver = new Driver();
  for (let stream = 0; stream < 3; stream++) {
    driver.created(ROOT, req.createStream(`s${stream}`));
    for (let topic = 0; topic < 4; topic++) driver.created(ROOT, req.createTopic(`s${stream}`, `t${topic}`, 300 + topic));
  }
  driver.created(ROOT, req.createStream('big'));
  driver.created(ROOT, req.createTopic('big', 't', 1000));
  driver.created(ROOT, req.createTopic('big', 'u', 1000));
  return checkpointModelOf(fullSnapshot(driver.sm.snapshot(), op));
}

describe('the worker takes only large checkpoints', () => {
  it('a checkpoint after a small snapshot encodes in-thread; after one at the threshold, on the worker', async () => {
    const snapshot = model();
    const first = encodeCheckpoint(loadKernels('wasm'), METADATA_CHECKPOINT_CODEC, snapshot, CHUNK_SIZE);
    const { encoder, answers } = recording('wasm');
    // The threshold sits just above the model's payload: the first checkpoint (no snapshot
    // yet) and the second (after a smaller one) stay in-thread.
    const threshold = first.payload.byteLength + 1;
    const { driver, completed } = setup('wasm', encoder, threshold);
    driver.submit(1, { kind: 'checkpoint_write', op: 48, model: snapshot, chunkSize: CHUNK_SIZE });
    await until(() => completed.length === 1);
    expect(completed[0]!.result).toMatchObject({ ok: true, checkpoint: { checksum: first.checksum } });
    expect(answers).toEqual([]);
    expect(driver.counters.checkpointsEncodedInThread).toBe(1);
    // A larger model: its snapshot reaches the threshold, so the next checkpoint goes to a worker.
    const larger = largerModel(96);
    expect(encodeCheckpoint(loadKernels('wasm'), METADATA_CHECKPOINT_CODEC, larger, CHUNK_SIZE).payload.byteLength).toBeGreaterThanOrEqual(threshold);
    driver.submit(2, { kind: 'checkpoint_write', op: 96, model: larger, chunkSize: CHUNK_SIZE });
    await until(() => completed.length === 2);
    expect(driver.counters.checkpointsEncodedInThread).toBe(2);
    expect(answers).toEqual([]);
    const third = largerModel(144);
    driver.submit(3, { kind: 'checkpoint_write', op: 144, model: third, chunkSize: CHUNK_SIZE });
    await until(() => completed.length === 3);
    expect(answers).toHaveLength(1);
    expect(driver.counters.checkpointsEncodedInThread).toBe(2);
    const expected = encodeCheckpoint(loadKernels('wasm'), METADATA_CHECKPOINT_CODEC, third, CHUNK_SIZE);
    expect(completed[2]!.result).toMatchObject({ ok: true, checkpoint: { checksum: expected.checksum } });
    driver.close();
  });
});

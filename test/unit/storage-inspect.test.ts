/**
 * `vrmeta inspect` on real files written by the real storage (FsDisk in a temp directory),
 * healthy and corrupt: exit codes, key fields, and that inspecting never changes a file.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { runInspect } from '../../src/storage/inspect.js';
import { recover } from '../../src/storage/recovery.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../../src/storage/superblock.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import { chain, CLUSTER, snapshotPayload, tempDirectory, tsKernels, vsrState } from './storage-fixtures.js';

const kernels = tsKernels();
let directory: { path: string; cleanup: () => void };
let snapshotChecksum = 0n;
let snapshotSize = 0;

/** Ops 1..4, checkpoint at 4, ops 5..9; superblock written three times (a=3, b=2). */
beforeAll(() => {
  directory = tempDirectory('vrmeta-inspect-');
  const disk = new FsDisk(directory.path);
  const booted = recover(disk, kernels, { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: 16 });
  booted.superblock.write(vrState(0, 0, 0n));
  const prepares = chain(1, 9);
  for (const entry of prepares.slice(0, 4)) booted.wal.append(entry.frame);
  const payload = snapshotPayload(kernels, 4);
  snapshotSize = payload.byteLength;
  snapshotChecksum = booted.snapshotFile.write(payload);
  booted.superblock.write(vrState(4, 4, snapshotChecksum));
  booted.wal.drain(4);
  for (const entry of prepares.slice(4)) booted.wal.append(entry.frame);
  booted.superblock.write(vrState(9, 4, snapshotChecksum));
  disk.close();
});
afterAll(() => directory.cleanup());

function vrState(commitMax: number, checkpointOp: number, checkpointChecksum: bigint) {
  return vsrState({ view: 3, logView: 2, commitMax, checkpointOp, checkpointChecksum });
}

/** A private copy of the healthy directory's files, to damage. */
function copy(): { path: string; cleanup: () => void } {
  const target = tempDirectory('vrmeta-inspect-copy-');
  for (const name of [WAL_FILE, SNAPSHOT_FILE, ...SUPERBLOCK_FILES]) {
    writeFileSync(join(target.path, name), readFileSync(join(directory.path, name)));
  }
  return target;
}

function json(kind: string, path: string): { exitCode: number; report: Record<string, any> } {
  const result = runInspect(kind, path, { json: true, kernels });
  return { exitCode: result.exitCode, report: JSON.parse(result.output) as Record<string, any> };
}

describe('inspect wal', () => {
  it('reports entries, ops, valid end and no failure for a healthy WAL (file or directory path)', () => {
    const size = statSync(join(directory.path, WAL_FILE)).size;
    for (const path of [join(directory.path, WAL_FILE), directory.path]) {
      const { exitCode, report } = json('wal', path);
      expect(exitCode).toBe(0);
      expect(report).toMatchObject({ status: 'valid', entryCount: 6, firstOp: 4, lastOp: 9, validEnd: size, failure: null, gapCount: 0 });
      expect(report['entries']).toHaveLength(6);
    }
    const text = runInspect('wal', directory.path, { json: false, kernels }).output;
    expect(text).toContain('entryCount: 6');
    expect(text).toContain('lastOp: 9');
  });

  it('reports a torn tail (exit 0: boot truncates it) without changing the file', () => {
    const damaged = copy();
    try {
      const path = join(damaged.path, WAL_FILE);
      const original = readFileSync(path);
      writeFileSync(path, Buffer.concat([original, original.subarray(0, 270)]));
      const { exitCode, report } = json('wal', path);
      expect(exitCode).toBe(0);
      expect(report).toMatchObject({ status: 'torn_tail', validEnd: original.byteLength, failure: { kind: 'torn_tail' } });
      expect(report['note']).toMatch(/truncates 270 bytes/);
      expect(statSync(path).size).toBe(original.byteLength + 270);
    } finally {
      damaged.cleanup();
    }
  });

  it('reports interior corruption with exit 1, the offset and the reason', () => {
    const damaged = copy();
    try {
      const path = join(damaged.path, WAL_FILE);
      const bytes = readFileSync(path);
      const healthy = json('wal', path).report['entries'] as { offset: number }[];
      const offset = healthy[2]!.offset;
      bytes[offset + 300] = bytes[offset + 300]! ^ 1;
      writeFileSync(path, bytes);
      const { exitCode, report } = json('wal', path);
      expect(exitCode).toBe(1);
      expect(report).toMatchObject({ status: 'corrupt', entryCount: 2, lastOp: 5, failure: { offset, kind: 'interior' } });
      expect(runInspect('wal', path, { json: false, kernels }).output).toMatch(/wipe the data directory/);
    } finally {
      damaged.cleanup();
    }
  });
});

describe('inspect snapshot', () => {
  it('reports trailer, checksum, version and the decoded sequence number', () => {
    const { exitCode, report } = json('snapshot', directory.path);
    expect(exitCode).toBe(0);
    expect(report).toMatchObject({
      status: 'valid',
      trailer: 'valid',
      checksum: `0x${snapshotChecksum.toString(16).padStart(32, '0')}`,
      version: 5,
      sequenceNumber: 4,
      payloadSizeBytes: snapshotSize,
      sizeBytes: snapshotSize + 20,
      users: 0,
      streams: 0,
    });
  });

  it('exit 1 on a checksum mismatch and on a missing trailer', () => {
    const damaged = copy();
    try {
      const path = join(damaged.path, SNAPSHOT_FILE);
      const bytes = readFileSync(path);
      bytes[3] = bytes[3]! ^ 0x40;
      writeFileSync(path, bytes);
      expect(json('snapshot', path)).toMatchObject({ exitCode: 1, report: { status: 'corrupt', trailer: 'checksum_mismatch' } });
      writeFileSync(path, bytes.subarray(0, snapshotSize));
      expect(json('snapshot', path)).toMatchObject({ exitCode: 1, report: { trailer: 'missing' } });
    } finally {
      damaged.cleanup();
    }
  });
});

describe('inspect superblock', () => {
  it('reports both slots and the newest VsrState', () => {
    const { exitCode, report } = json('superblock', directory.path);
    expect(exitCode).toBe(0);
    expect(report).toMatchObject({
      status: 'valid',
      newest: 'superblock.a',
      sequence: 3,
      state: { view: 3, logView: 2, commitMax: 9, checkpointOp: 4, replica: 0, replicaCount: 3 },
    });
    expect(report['slots']).toMatchObject([
      { file: 'superblock.a', status: 'valid', sequence: 3 },
      { file: 'superblock.b', status: 'valid', sequence: 2 },
    ]);
    // A slot file path inspects its directory.
    expect(json('superblock', join(directory.path, 'superblock.b')).exitCode).toBe(0);
    expect(runInspect('superblock', directory.path, { json: false, kernels }).output).toContain('commitMax: 9');
  });

  it('exit 1 when a slot does not verify, naming the slot and the reason', () => {
    const damaged = copy();
    try {
      const path = join(damaged.path, 'superblock.b');
      const bytes = readFileSync(path);
      bytes[50] = bytes[50]! ^ 2;
      writeFileSync(path, bytes);
      const { exitCode, report } = json('superblock', damaged.path);
      expect(exitCode).toBe(1);
      expect(report).toMatchObject({ status: 'corrupt', refusal: { file: 'superblock.b', reason: 'superblock_slot_corrupt' } });
      expect(report['slots'][0]).toMatchObject({ status: 'valid' });
    } finally {
      damaged.cleanup();
    }
  });

  it('a directory without slots is a fresh replica (exit 0)', () => {
    const empty = tempDirectory();
    try {
      expect(json('superblock', empty.path)).toMatchObject({ exitCode: 0, report: { status: 'fresh' } });
    } finally {
      empty.cleanup();
    }
  });
});

describe('inspect usage', () => {
  it('exit 2 for an unknown kind, a missing path, or a directory without the file', () => {
    expect(runInspect('journal', directory.path, { json: false, kernels }).exitCode).toBe(2);
    expect(runInspect('wal', join(directory.path, 'nope', 'journal.wal'), { json: false, kernels }).exitCode).toBe(2);
    const empty = tempDirectory();
    try {
      const result = runInspect('snapshot', empty.path, { json: true, kernels });
      expect(result.exitCode).toBe(2);
      expect(JSON.parse(result.output)).toMatchObject({ status: 'usage_error' });
    } finally {
      empty.cleanup();
    }
  });
});

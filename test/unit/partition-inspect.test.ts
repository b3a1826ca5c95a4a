/**
 * `vrmeta inspect partition DIR`: a real partition directory (FsDisk in a temp dir), healthy and
 * damaged. Exit codes and key fields, the agreement with boot (exit 0 exactly when
 * PartitionLog.open accepts the directory), and that inspecting never changes a file.
 */
import { readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsDisk } from '../../src/storage/fs-disk.js';
import { runInspect } from '../../src/storage/inspect.js';
import { ConsumerKind, ConsumerOffsets } from '../../src/storage/partition-offsets.js';
import { StorageRefusal } from '../../src/storage/refusal.js';
import { appendAll, batchRun, expectedSegments, name20, openLog, PARTITION } from './partition-fixtures.js';
import { tempDirectory, tsKernels } from './storage-fixtures.js';

const kernels = tsKernels();
const COUNTS = [3, 1, 4, 1, 5, 2, 6, 2, 3, 5, 1];
const SEGMENT_BYTES = 1000;
const batches = batchRun(COUNTS);
const segments = expectedSegments(batches, SEGMENT_BYTES);
const total = COUNTS.reduce((sum, count) => sum + count, 0);

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function partitionDirectory(): string {
  const directory = tempDirectory('vrmeta-inspect-partition-');
  cleanups.push(directory.cleanup);
  const disk = new FsDisk(directory.path);
  const { log } = openLog(disk, kernels, SEGMENT_BYTES);
  appendAll(log, batches);
  log.flush();
  ConsumerOffsets.load(disk, kernels).store(ConsumerKind.group, 4, 17);
  disk.close();
  return directory.path;
}

function snapshot(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(path).sort()) out[name] = readFileSync(join(path, name)).toString('hex');
  return out;
}

/** Runs inspect, checks it changed nothing, and that boot agrees with its verdict. */
function inspect(path: string): { exitCode: number; report: Record<string, unknown> } {
  const before = snapshot(path);
  const result = runInspect('partition', path, { json: true, kernels });
  expect(snapshot(path)).toEqual(before);
  expect(JSON.parse(result.output)).toEqual(result.report);
  const disk = new FsDisk(path);
  let bootRefused = false;
  try {
    openLog(disk, kernels, SEGMENT_BYTES);
    ConsumerOffsets.load(disk, kernels);
  } catch (error) {
    if (!(error instanceof StorageRefusal)) throw error;
    bootRefused = true;
  } finally {
    disk.close();
  }
  expect(bootRefused).toBe(result.exitCode === 1);
  return result;
}

describe('vrmeta inspect partition', () => {
  it('reports a healthy partition: segments, stats and offsets, exit 0', () => {
    const path = partitionDirectory();
    const { exitCode, report } = inspect(path);
    expect(exitCode).toBe(0);
    expect(report).toMatchObject({
      kind: 'partition',
      status: 'valid',
      partitionId: PARTITION,
      segmentsCount: segments.length,
      messagesCount: total,
      startOffset: 0,
      endOffset: total - 1,
      offsets: [{ file: 'group-4.offset', kind: 'group', id: 4, offset: 17 }],
      problems: [],
      notes: [],
    });
    expect((report['segments'] as { startOffset: number }[]).map((segment) => segment.startOffset)).toEqual(
      segments.map((segment) => segment[0]!.baseOffset),
    );
    const text = runInspect('partition', path, { json: false, kernels }).output;
    expect(text).toMatch(/status: valid/);
  });

  it('exit 1 for a damaged sealed segment, a hole and a corrupt offset file, naming each', () => {
    const sealed = partitionDirectory();
    const first = readFileSync(join(sealed, name20(0, 'log')));
    first[first.byteLength - 1]! ^= 1;
    writeFileSync(join(sealed, name20(0, 'log')), first);
    const sealedReport = inspect(sealed);
    expect(sealedReport.exitCode).toBe(1);
    expect(String((sealedReport.report['problems'] as string[])[0])).toMatch(/^00000000000000000000\.log: segment_sealed_corrupt at \d+/);

    const hole = partitionDirectory();
    const middle = segments[1]![0]!.baseOffset;
    unlinkSync(join(hole, name20(middle, 'log')));
    const holeReport = inspect(hole);
    expect(holeReport.exitCode).toBe(1);
    expect(holeReport.report['problems']).toEqual([expect.stringContaining('segment_discontinuity')]);

    const offsets = partitionDirectory();
    writeFileSync(join(offsets, 'group-4.offset'), new Uint8Array(16));
    const offsetReport = inspect(offsets);
    expect(offsetReport.exitCode).toBe(1);
    expect(offsetReport.report['problems']).toEqual([expect.stringMatching(/^group-4\.offset: consumer_offset_corrupt/)]);
  });

  it('exit 0 with notes for what boot repairs: a torn last tail and a missing index', () => {
    const path = partitionDirectory();
    const last = segments[segments.length - 1]![0]!.baseOffset;
    const tail = readFileSync(join(path, name20(last, 'log')));
    writeFileSync(join(path, name20(last, 'log')), Buffer.concat([tail, Buffer.alloc(40, 7)]));
    unlinkSync(join(path, name20(0, 'index')));
    const { exitCode, report } = inspect(path);
    expect(exitCode).toBe(0);
    expect(report['notes']).toEqual([
      expect.stringMatching(/^00000000000000000000\.log: index missing: boot rebuilds it/),
      expect.stringMatching(/torn tail at \d+ \(header_truncated\): boot truncates 40 bytes/),
    ]);
  });

  it('is a usage error on a file or a missing path', () => {
    const path = partitionDirectory();
    expect(runInspect('partition', join(path, name20(0, 'log')), { json: false, kernels }).exitCode).toBe(2);
    expect(runInspect('partition', join(path, 'nope'), { json: false, kernels }).exitCode).toBe(2);
  });
});

/**
 * Data file modes: a data directory holds every user's Argon2id password hash, so what a replica
 * creates there is the owner's only (files 0600, directories 0700) whatever the umask, and what
 * an older build left readable by others is tightened when a replica opens the directory.
 *
 * The umask is 0 while these run: under a strict umask (077) a file created without an explicit
 * mode comes out 0600 anyway and the test could not fail; under 0 it shows as 0666 (0777 for a
 * directory), so only the explicit mode passes.
 */
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DATA_DIRECTORY_MODE,
  DATA_FILE_MODE,
  FsDisk,
  tightenDataDirModes,
} from '../../src/storage/fs-disk.js';
import { recover } from '../../src/storage/recovery.js';
import { SNAPSHOT_FILE, SNAPSHOT_TRANSFER_FILE } from '../../src/storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../../src/storage/superblock.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import {
  chain,
  CLUSTER,
  snapshotPayload,
  tempDirectory,
  tsKernels,
  vsrState,
} from './storage-fixtures.js';

let umaskBefore: number;
const cleanups: (() => void)[] = [];
beforeEach(() => {
  umaskBefore = process.umask(0);
});
afterEach(() => {
  process.umask(umaskBefore);
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function root(): string {
  const directory = tempDirectory('vrmeta-modes-');
  cleanups.push(directory.cleanup);
  return directory.path;
}

const modeOf = (path: string): number => lstatSync(path).mode & 0o7777;

/** Every path under `directory` (itself included) with its mode in octal, symlinks left out. */
function modes(directory: string): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (path: string): void => {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) return;
    out[path.slice(directory.length) || '/'] = modeOf(path).toString(8);
    if (stats.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(directory);
  return out;
}

describe('data file modes', () => {
  it('every file the storage creates is 0600 and every directory 0700, under umask 0', () => {
    const base = root();
    // Two levels FsDisk creates itself: `recursive` must pass the mode to the parent too.
    const dataDir = join(base, 'data', 'replica-0');
    const kernels = tsKernels();
    const disk = new FsDisk(dataDir, { create: true });
    cleanups.unshift(() => disk.close());
    const { wal, superblock, snapshotFile } = recover(disk, kernels, {
      cluster: CLUSTER,
      replica: 0,
      replicaCount: 3,
      journalSlots: 16,
    });
    for (const prepare of chain(1, 6)) wal.append(prepare.frame, { sync: true });
    const checksum = snapshotFile.write(snapshotPayload(kernels, 4));
    const checkpoint = { commitMax: 4, checkpointOp: 4, checkpointChecksum: checksum };
    // Twice: the first write fills one superblock slot, the second the other.
    superblock.write(vsrState({ view: 2, logView: 2, ...checkpoint }));
    superblock.write(vsrState({ view: 3, logView: 3, ...checkpoint }));
    // The drain rewrites the journal through a temporary file renamed over it.
    wal.drain(4);
    // A state transfer's staging file, left as a crash would leave it.
    snapshotFile.transferWrite(0, new Uint8Array(64));

    const found = modes(join(base, 'data'));
    const names = Object.keys(found).filter((path) => path.startsWith('/replica-0/'));
    const created = [WAL_FILE, ...SUPERBLOCK_FILES, SNAPSHOT_FILE, SNAPSHOT_TRANSFER_FILE];
    expect(names.sort()).toEqual(created.map((name) => `/replica-0/${name}`).sort());
    const expected: Record<string, string> = { '/': '700', '/replica-0': '700' };
    for (const name of names) expected[name] = '600';
    expect(found).toEqual(expected);
  });

  it('an older build\'s 0755 directory and 0644 files are tightened once, links untouched', () => {
    const base = root();
    const dataDir = join(base, 'replica-0');
    mkdirSync(join(dataDir, 'staging'), { recursive: true, mode: 0o755 });
    writeFileSync(join(dataDir, WAL_FILE), 'journal', { mode: 0o644 });
    writeFileSync(join(dataDir, SNAPSHOT_FILE), 'snapshot', { mode: 0o666 });
    writeFileSync(join(dataDir, 'staging', 'chunk'), 'chunk', { mode: 0o640 });
    // Already stricter than the data mode: kept as it is.
    writeFileSync(join(dataDir, 'superblock.a'), 'superblock', { mode: 0o400 });
    // A link to a file outside: chmod would follow it, the walk must not.
    const outside = join(base, 'outside.txt');
    writeFileSync(outside, 'not ours', { mode: 0o644 });
    symlinkSync(outside, join(dataDir, 'link'));
    chmodSync(dataDir, 0o755);

    const changed = tightenDataDirModes(dataDir);

    const loose = [WAL_FILE, SNAPSHOT_FILE, 'staging', join('staging', 'chunk')];
    expect(changed.sort()).toEqual([dataDir, ...loose.map((name) => join(dataDir, name))].sort());
    expect(modes(dataDir)).toEqual({
      '/': '700',
      [`/${WAL_FILE}`]: '600',
      [`/${SNAPSHOT_FILE}`]: '600',
      '/staging': '700',
      '/staging/chunk': '600',
      '/superblock.a': '400',
    });
    expect(modeOf(outside)).toBe(0o644);
    expect(tightenDataDirModes(dataDir)).toEqual([]);
  });

  it('a data directory reached through a link is still tightened', () => {
    const base = root();
    const real = join(base, 'real');
    mkdirSync(real, { mode: 0o755 });
    writeFileSync(join(real, WAL_FILE), 'journal', { mode: 0o644 });
    const link = join(base, 'replica-0');
    symlinkSync(real, link);

    expect(tightenDataDirModes(link)).toEqual([link, join(link, WAL_FILE)]);
    expect(statSync(real).mode & 0o777).toBe(DATA_DIRECTORY_MODE);
    expect(statSync(join(real, WAL_FILE)).mode & 0o777).toBe(DATA_FILE_MODE);
  });
});

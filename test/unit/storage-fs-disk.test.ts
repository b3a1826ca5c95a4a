/**
 * FsDisk: the node:fs Disk on a real temp directory. Durability itself cannot be observed without
 * pulling the power; these tests pin the semantics the storage relies on (positional writes,
 * reads into a caller's buffer, atomic rename over an existing file, descriptor caching that
 * follows renames) and that every failure names the operation and the path.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskError, FsyncError } from '../../src/storage/disk.js';
import { FsDisk, prefetchFile, resolveDataPath } from '../../src/storage/fs-disk.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { tempDirectory } from './storage-fixtures.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function open(): { disk: FsDisk; path: string } {
  const directory = tempDirectory();
  const disk = new FsDisk(directory.path);
  cleanups.push(() => {
    disk.close();
    directory.cleanup();
  });
  return { disk, path: directory.path };
}

const text = (value: string): Uint8Array => new TextEncoder().encode(value);

describe('FsDisk', () => {
  it('writes at positions, creating and extending the file', () => {
    const { disk, path } = open();
    expect(disk.exists('f')).toBe(false);
    disk.write('f', 0, text('hello'));
    disk.write('f', 8, text('!'));
    disk.fsync('f');
    disk.fsyncDirectory();
    expect(disk.size('f')).toBe(9);
    expect([...readFileSync(join(path, 'f'))]).toEqual([...text('hello'), 0, 0, 0, ...text('!')]);
  });

  it('reads into the caller buffer and reports short reads at end of file', () => {
    const { disk } = open();
    disk.write('f', 0, text('abcdef'));
    const target = new Uint8Array(4);
    expect(disk.read('f', 4, target)).toBe(2);
    expect(new TextDecoder().decode(target.subarray(0, 2))).toBe('ef');
    expect(disk.read('f', 10, target)).toBe(0);
    expect(new TextDecoder().decode(disk.readAll('f'))).toBe('abcdef');
  });

  it('truncates, renames over an existing file and follows the rename with fresh descriptors', () => {
    const { disk, path } = open();
    disk.write('a', 0, text('old contents'));
    disk.write('tmp', 0, text('new'));
    disk.fsync('tmp');
    disk.rename('tmp', 'a');
    disk.fsyncDirectory();
    expect(new TextDecoder().decode(disk.readAll('a'))).toBe('new');
    disk.truncate('a', 2);
    disk.fsync('a');
    expect(readFileSync(join(path, 'a'), 'utf8')).toBe('ne');
    expect(disk.list()).toEqual(['a']);
  });

  it('a reader keeps reading the file it opened after a rename over its name and a remove', () => {
    const { disk } = open();
    disk.write('snap', 0, text('first'));
    const reader = disk.openRead('snap');
    disk.write('snap.tmp', 0, text('second'));
    disk.rename('snap.tmp', 'snap');
    const target = new Uint8Array(5);
    expect(reader.read(0, target)).toBe(5);
    expect(new TextDecoder().decode(target)).toBe('first');
    expect(new TextDecoder().decode(disk.readAll('snap'))).toBe('second');
    disk.remove('snap');
    expect(reader.read(1, target.subarray(0, 4))).toBe(4);
    expect(new TextDecoder().decode(target.subarray(0, 4))).toBe('irst');
    reader.close();
    reader.close();
    expect(() => reader.read(0, target)).toThrow(AssertionError);
    expect(() => disk.openRead('snap')).toThrow(DiskError);
  });

  it('removes files; removing a missing file is a no-op', () => {
    const { disk } = open();
    disk.write('f', 0, text('x'));
    disk.remove('f');
    disk.remove('f');
    expect(disk.exists('f')).toBe(false);
  });

  it('sees changes made behind its back after a rename drops the cached descriptor', () => {
    const { disk, path } = open();
    disk.write('f', 0, text('one'));
    writeFileSync(join(path, 'g'), 'two');
    disk.rename('g', 'f');
    expect(new TextDecoder().decode(disk.readAll('f'))).toBe('two');
  });

  it('errors name the operation and the full path', () => {
    const { disk, path } = open();
    expect(() => disk.readAll('missing')).toThrow(DiskError);
    expect(() => disk.readAll('missing')).toThrow(join(path, 'missing'));
    expect(() => disk.fsync('missing')).toThrow(/fsync/);
    expect(() => disk.rename('missing', 'x')).toThrow(/rename failed/);
  });

  it('refuses names that are not plain file names (a bug, not input)', () => {
    const { disk } = open();
    expect(() => disk.exists('../escape')).toThrow(AssertionError);
    expect(() => disk.write('a/b', 0, text('x'))).toThrow(AssertionError);
  });

  it('fails to open a directory that does not exist unless asked to create it', () => {
    const directory = tempDirectory();
    cleanups.push(directory.cleanup);
    expect(() => new FsDisk(join(directory.path, 'nope'))).toThrow(DiskError);
    const disk = new FsDisk(join(directory.path, 'made', 'deep'), { create: true });
    disk.write('f', 0, text('x'));
    disk.close();
    expect(() => disk.exists('f')).toThrow(AssertionError);
  });

  it('FsyncError is a DiskError', () => {
    expect(new FsyncError('/x', new Error('EIO'))).toBeInstanceOf(DiskError);
  });

  it('resolveDataPath splits a file path and recognizes a directory', () => {
    const { path } = open();
    writeFileSync(join(path, 'journal.wal'), '');
    expect(resolveDataPath(path)).toEqual({ directory: path, name: null, exists: true });
    expect(resolveDataPath(join(path, 'journal.wal'))).toEqual({ directory: path, name: 'journal.wal', exists: true });
    expect(resolveDataPath(join(path, 'nothing'))).toMatchObject({ exists: false });
  });
});

describe('prefetched files', () => {
  function withFile(name: string, contents: string): string {
    const directory = tempDirectory();
    cleanups.push(() => directory.cleanup());
    writeFileSync(join(directory.path, name), contents);
    return directory.path;
  }

  it('prefetchFile reads a whole file, and nothing for a missing or an oversized one', async () => {
    const path = withFile('snapshot.bin', 'abcdef');
    const prefetched = await prefetchFile(path, 'snapshot.bin', 1024);
    expect(prefetched?.bytes).toEqual(text('abcdef'));
    expect(prefetched?.identity.size).toBe(6);
    expect(await prefetchFile(path, 'missing.bin', 1024)).toBeNull();
    expect(await prefetchFile(path, 'snapshot.bin', 5)).toBeNull();
  });

  it('readAll hands out the prefetched bytes once, while the file is the one read', async () => {
    const path = withFile('snapshot.bin', 'abcdef');
    const prefetched = (await prefetchFile(path, 'snapshot.bin', 1024))!;
    const disk = new FsDisk(path, { prefetched: new Map([['snapshot.bin', prefetched]]) });
    cleanups.push(() => disk.close());
    expect(disk.readAll('snapshot.bin')).toBe(prefetched.bytes);
    expect(disk.prefetchedUsed).toBe(1);
    // Once: the next read is a read.
    const again = disk.readAll('snapshot.bin');
    expect(again).not.toBe(prefetched.bytes);
    expect(again).toEqual(text('abcdef'));
    expect(disk.prefetchedUsed).toBe(1);
  });

  it('readAll reads the file itself when it changed after the prefetch (renamed over, rewritten)', async () => {
    const path = withFile('snapshot.bin', 'abcdef');
    const prefetched = (await prefetchFile(path, 'snapshot.bin', 1024))!;
    // Another file renamed over the name: same size, another inode.
    writeFileSync(join(path, 'next.bin'), 'ghijkl');
    const disk = new FsDisk(path, { prefetched: new Map([['snapshot.bin', prefetched]]) });
    cleanups.push(() => disk.close());
    disk.rename('next.bin', 'snapshot.bin');
    expect(disk.readAll('snapshot.bin')).toEqual(text('ghijkl'));
    expect(disk.prefetchedUsed).toBe(0);
    // Rewritten in place with another size.
    const rewritten = withFile('snapshot.bin', 'abcdef');
    const early = (await prefetchFile(rewritten, 'snapshot.bin', 1024))!;
    writeFileSync(join(rewritten, 'snapshot.bin'), 'abcdefg');
    const other = new FsDisk(rewritten, { prefetched: new Map([['snapshot.bin', early]]) });
    cleanups.push(() => other.close());
    expect(other.readAll('snapshot.bin')).toEqual(text('abcdefg'));
    expect(other.prefetchedUsed).toBe(0);
  });

  it('dropPrefetched lets go of what recovery did not take', async () => {
    const path = withFile('snapshot.bin', 'abcdef');
    const prefetched = (await prefetchFile(path, 'snapshot.bin', 1024))!;
    const disk = new FsDisk(path, { prefetched: new Map([['snapshot.bin', prefetched]]) });
    cleanups.push(() => disk.close());
    disk.dropPrefetched();
    expect(disk.readAll('snapshot.bin')).not.toBe(prefetched.bytes);
    expect(disk.prefetchedUsed).toBe(0);
  });
});

describe('storage boundaries', () => {
  it('src/storage touches node:* only in fs-disk.ts, and never the clock or Math.random', () => {
    const directory = new URL('../../src/storage/', import.meta.url).pathname;
    const problems: string[] = [];
    for (const name of readdirSync(directory).filter((file) => file.endsWith('.ts'))) {
      const text = readFileSync(join(directory, name), 'utf8');
      if (name !== 'fs-disk.ts' && /from 'node:/.test(text)) problems.push(`${name} imports node:*`);
      if (/\bMath\.random\b|\bDate\.now\b|new Date\b/.test(text)) problems.push(`${name} uses the clock or Math.random`);
    }
    expect(problems).toEqual([]);
  });
});

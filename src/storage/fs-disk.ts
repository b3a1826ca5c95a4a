/**
 * The production `Disk`: one data directory through node:fs, synchronous (the storage runs
 * between event-loop turns; an fsync is milliseconds and the replica must not act before it).
 *
 * - `fsync(name)` is fsyncSync on the file's descriptor, never a no-op fdatasync substitute:
 *   truncation changes the size, which fdatasync may not flush on every filesystem.
 * - `fsyncDirectory()` opens the directory read-only and fsyncs it, which is what makes a
 *   create, rename or unlink survive a power loss on Linux.
 * - File descriptors are cached per name (a WAL append is one write + one fsync; reopening per
 *   call would double the syscalls) and closed by `close()`. A rename or remove drops the cached
 *   descriptors of both names, so a name never maps to the inode it had before.
 * - Every failure is a DiskError naming the operation, the full path and the platform error.
 */
import {
  chmodSync,
  close,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fsync,
  fsyncSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  open,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { open as openAsync } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { assert } from '../stdx/assert.js';
import { assertFileName, DiskError, FsyncError, type Disk, type DiskFileReader, type DiskOperation } from './disk.js';

/*
 * Permissions. The snapshot and the WAL hold every user's Argon2id password hash, so another
 * local account reading them could attack the hashes offline: data files are the owner's only,
 * and so are data directories, which also keeps others from learning file names and sizes. The
 * modes are passed explicitly on create (the umask can only narrow them); a directory an older
 * build left readable (0644 files, a 0755 directory) is tightened by `tightenDataDirModes`.
 */
/** Read and write for the owner only. */
export const DATA_FILE_MODE = 0o600;
/** List, create and enter for the owner only. */
export const DATA_DIRECTORY_MODE = 0o700;
/** The permission bits checked (setuid, setgid and sticky included: none belongs on data). */
const PERMISSION_BITS = 0o7777;

/** A data directory holds about seven files; more open descriptors than this means a leak. */
const DESCRIPTORS_CACHED_MAX = 16;

export class FsDisk implements Disk {
  readonly location: string;
  private readonly descriptors = new Map<string, number>();
  /** Descriptors of `openRead` handles not closed yet (closed with the disk). */
  private readonly readers = new Set<number>();
  private closed = false;
  /** Whole files read before the disk opened (`prefetchFile`), each handed out once by `readAll`. */
  private readonly prefetched: Map<string, PrefetchedFile>;
  /** `readAll` calls answered with prefetched bytes (the file unchanged since it was read). */
  prefetchedUsed = 0;

  /**
   * Opens (and with `create`, makes) the directory. `prefetched`: files read ahead of time, used
   * by `readAll` only while the file is still the one that was read.
   */
  constructor(
    directory: string,
    options: { create?: boolean; prefetched?: ReadonlyMap<string, PrefetchedFile> } = {},
  ) {
    this.location = directory;
    this.prefetched = new Map(options.prefetched ?? []);
    try {
      // The mode applies to every directory `recursive` creates, not only the last.
      if (options.create === true) {
        mkdirSync(directory, { recursive: true, mode: DATA_DIRECTORY_MODE });
      }
      if (!statSync(directory).isDirectory()) throw new Error('not a directory');
    } catch (error) {
      throw new DiskError('open', directory, error);
    }
  }

  private path(name: string): string {
    assert(!this.closed, 'FsDisk used after close');
    assertFileName(name);
    return join(this.location, name);
  }

  private fail(operation: DiskOperation, name: string, error: unknown): never {
    throw new DiskError(operation, join(this.location, name), error);
  }

  /** The cached descriptor for `name`, opened read-write; `create` makes a missing file. */
  private descriptor(name: string, operation: DiskOperation, create: boolean): number {
    const cached = this.descriptors.get(name);
    if (cached !== undefined) return cached;
    const path = this.path(name);
    let fd: number;
    try {
      // Not 'a+': O_APPEND makes Linux ignore the position of positional writes. The mode
      // matters on create only (DATA_FILE_MODE: the files hold password hashes).
      const flags = create ? constants.O_RDWR | constants.O_CREAT : constants.O_RDWR;
      fd = openSync(path, flags, DATA_FILE_MODE);
    } catch (error) {
      this.fail(operation, name, error);
    }
    if (this.descriptors.size >= DESCRIPTORS_CACHED_MAX) {
      const [oldestName, oldestFd] = this.descriptors.entries().next().value as [string, number];
      this.descriptors.delete(oldestName);
      closeSync(oldestFd);
    }
    this.descriptors.set(name, fd);
    return fd;
  }

  private forget(name: string): void {
    const fd = this.descriptors.get(name);
    if (fd === undefined) return;
    this.descriptors.delete(name);
    try {
      closeSync(fd);
    } catch (error) {
      this.fail('open', name, error);
    }
  }

  exists(name: string): boolean {
    return existsSync(this.path(name));
  }

  size(name: string): number {
    try {
      const fd = this.descriptors.get(name);
      return fd === undefined ? statSync(this.path(name)).size : fstatSync(fd).size;
    } catch (error) {
      this.fail('size', name, error);
    }
  }

  read(name: string, offset: number, target: Uint8Array): number {
    return this.readAt(this.descriptor(name, 'read', false), name, offset, target);
  }

  private readAt(fd: number, name: string, offset: number, target: Uint8Array): number {
    assert(Number.isSafeInteger(offset) && offset >= 0, 'read offset');
    let done = 0;
    try {
      while (done < target.byteLength) {
        const count = readSync(fd, target, done, target.byteLength - done, offset + done);
        if (count === 0) break;
        done += count;
      }
    } catch (error) {
      this.fail('read', name, error);
    }
    return done;
  }

  openRead(name: string): DiskFileReader {
    const path = this.path(name);
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY);
    } catch (error) {
      this.fail('open', name, error);
    }
    this.readers.add(fd);
    assert(this.readers.size <= DESCRIPTORS_CACHED_MAX, 'open readers are bounded');
    return {
      read: (offset, target) => {
        assert(this.readers.has(fd), 'read on an open reader');
        return this.readAt(fd, name, offset, target);
      },
      close: () => {
        if (!this.readers.delete(fd)) return;
        try {
          closeSync(fd);
        } catch (error) {
          this.fail('open', name, error);
        }
      },
    };
  }

  readAll(name: string): Uint8Array {
    const prefetched = this.takePrefetched(name);
    if (prefetched !== null) return prefetched;
    const bytes = new Uint8Array(this.size(name));
    const count = this.read(name, 0, bytes);
    // A concurrent writer is a bug: the data directory belongs to one replica process.
    if (count !== bytes.byteLength) this.fail('read', name, new Error(`short read ${count}/${bytes.byteLength}`));
    return bytes;
  }

  /** The prefetched bytes of `name` when the file is still the one read (once); else null. */
  private takePrefetched(name: string): Uint8Array | null {
    const prefetched = this.prefetched.get(name);
    if (prefetched === undefined) return null;
    this.prefetched.delete(name);
    let current;
    try {
      current = statSync(this.path(name));
    } catch {
      return null;
    }
    if (!sameFile(prefetched.identity, current)) return null;
    this.prefetchedUsed += 1;
    return prefetched.bytes;
  }

  /** Lets go of prefetched files recovery did not take (they would otherwise stay in memory). */
  dropPrefetched(): void {
    this.prefetched.clear();
  }

  write(name: string, offset: number, bytes: Uint8Array): void {
    assert(Number.isSafeInteger(offset) && offset >= 0, 'write offset');
    const fd = this.descriptor(name, 'write', true);
    let done = 0;
    try {
      while (done < bytes.byteLength) {
        done += writeSync(fd, bytes, done, bytes.byteLength - done, offset + done);
      }
    } catch (error) {
      this.fail('write', name, error);
    }
  }

  truncate(name: string, sizeBytes: number): void {
    assert(Number.isSafeInteger(sizeBytes) && sizeBytes >= 0, 'truncate size');
    const fd = this.descriptor(name, 'truncate', false);
    try {
      ftruncateSync(fd, sizeBytes);
    } catch (error) {
      this.fail('truncate', name, error);
    }
  }

  fsync(name: string): void {
    const fd = this.descriptor(name, 'fsync', false);
    try {
      fsyncSync(fd);
    } catch (error) {
      // The descriptor stays open but its dirty pages may be gone; callers poison themselves.
      throw new FsyncError(join(this.location, name), error);
    }
  }

  fsyncAsync(name: string, done: (error: FsyncError | null) => void): void {
    const fd = this.descriptor(name, 'fsync', false);
    const path = join(this.location, name);
    fsync(fd, (error) => done(error === null ? null : new FsyncError(path, error)));
  }

  rename(from: string, to: string): void {
    const fromPath = this.path(from);
    const toPath = this.path(to);
    this.forget(from);
    this.forget(to);
    try {
      renameSync(fromPath, toPath);
    } catch (error) {
      throw new DiskError('rename', `${fromPath} -> ${toPath}`, error);
    }
  }

  remove(name: string): void {
    const path = this.path(name);
    this.forget(name);
    try {
      unlinkSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      this.fail('remove', name, error);
    }
  }

  fsyncDirectoryAsync(done: (error: FsyncError | null) => void): void {
    assert(!this.closed, 'FsDisk used after close');
    const location = this.location;
    open(location, 'r', (openError, fd) => {
      if (openError !== null) {
        done(new FsyncError(location, openError));
        return;
      }
      fsync(fd, (syncError) => {
        close(fd, () => done(syncError === null ? null : new FsyncError(location, syncError)));
      });
    });
  }

  fsyncDirectory(): void {
    assert(!this.closed, 'FsDisk used after close');
    let fd: number | null = null;
    try {
      fd = openSync(this.location, 'r');
      fsyncSync(fd);
    } catch (error) {
      throw new FsyncError(this.location, error);
    } finally {
      if (fd !== null) closeSync(fd);
    }
  }

  list(): string[] {
    assert(!this.closed, 'FsDisk used after close');
    try {
      return readdirSync(this.location, { withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => entry.name)
        .sort();
    } catch (error) {
      throw new DiskError('list', this.location, error);
    }
  }

  close(): void {
    if (this.closed) return;
    for (const name of [...this.descriptors.keys()]) this.forget(name);
    for (const fd of this.readers) closeSync(fd);
    this.readers.clear();
    this.closed = true;
  }
}

/**
 * Chmods `directory`, and every regular file and directory under it, to the data modes wherever
 * the current mode grants a bit the data mode does not (a stricter mode, say 0400, is kept).
 * Returns the paths changed, for the caller's one warning line.
 *
 * Symbolic links inside the directory are neither followed nor changed: chmod follows links, and
 * a link in the data directory must not make a boot change a file elsewhere. Not following them
 * also means the walk cannot loop. `directory` itself may be a link (the operator chose that
 * path). A failed chmod is a DiskError: a replica does not start on a directory it cannot make
 * private.
 */
export function tightenDataDirModes(directory: string): string[] {
  const changed: string[] = [];
  const visit = (path: string): void => {
    let stats;
    try {
      stats = path === directory ? statSync(path) : lstatSync(path);
    } catch (error) {
      throw new DiskError('open', path, error);
    }
    const isDirectory = stats.isDirectory();
    if (!isDirectory && !stats.isFile()) return;
    const mode = isDirectory ? DATA_DIRECTORY_MODE : DATA_FILE_MODE;
    if ((stats.mode & PERMISSION_BITS & ~mode) !== 0) {
      try {
        chmodSync(path, stats.mode & mode);
      } catch (error) {
        throw new DiskError('chmod', path, error);
      }
      changed.push(path);
    }
    if (!isDirectory) return;
    let names: string[];
    try {
      names = readdirSync(path).sort();
    } catch (error) {
      throw new DiskError('list', path, error);
    }
    for (const name of names) visit(join(path, name));
  };
  visit(directory);
  return changed;
}

/**
 * Splits a command-line path into the directory a FsDisk opens and a file name inside it: a
 * directory gives `name: null` (the caller picks the default file); anything else is a file path.
 * `exists` is false when nothing is there.
 */
export function resolveDataPath(path: string): { directory: string; name: string | null; exists: boolean } {
  try {
    if (statSync(path).isDirectory()) return { directory: path, name: null, exists: true };
    return { directory: dirname(path), name: basename(path), exists: true };
  } catch {
    return { directory: dirname(path), name: basename(path), exists: false };
  }
}

// ---------------------------------------------------------------------------------------------
/*
 * Prefetch: reading a data file while the process is still loading its modules, to shorten a
 * restart (a restarting replica is missing from the cluster until its recovery ends).
 *
 * A restarting replica's largest read is `snapshot.bin` (64 MiB at the bench's size, ~40 ms from
 * the page cache here, most of it faulting in the fresh buffer). Started right after the
 * configuration is read, the read runs on libuv's thread pool while the main thread compiles the
 * replica's and the HTTP stack's modules (~90 ms), and recovery takes the bytes instead of reading
 * them again (the `prefetched` option of FsDisk).
 *
 * The bytes are only a head start, never trusted more than a read: the disk hands them out only
 * while the file is still the one read (same device, inode, size and modification time, checked
 * by a stat at use), once, and everything a read goes through (trailer, checksum, decode) checks
 * them as it checks a read. Any failure here is silent: recovery then reads the file itself and
 * reports what is wrong with it.
 */

/** What identifies the file a prefetch read (a replaced or rewritten file differs). */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

export interface PrefetchedFile {
  readonly identity: FileIdentity;
  readonly bytes: Uint8Array;
}

export function sameFile(left: FileIdentity, right: FileIdentity): boolean {
  const sameInode = left.dev === right.dev && left.ino === right.ino;
  return sameInode && left.size === right.size && left.mtimeMs === right.mtimeMs;
}

function identityOf(stats: FileIdentity): FileIdentity {
  return { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeMs: stats.mtimeMs };
}

/**
 * The whole of `directory/name`, read off the main thread; null when it is missing, larger than
 * `sizeMax`, unreadable, or changed while it was read.
 */
export async function prefetchFile(
  directory: string,
  name: string,
  sizeMax: number,
): Promise<PrefetchedFile | null> {
  let handle;
  try {
    handle = await openAsync(join(directory, name), 'r');
  } catch {
    return null;
  }
  try {
    const before = identityOf(await handle.stat());
    if (before.size > sizeMax) return null;
    const bytes = new Uint8Array(before.size);
    let done = 0;
    while (done < bytes.byteLength) {
      const { bytesRead } = await handle.read(bytes, done, bytes.byteLength - done, done);
      if (bytesRead === 0) return null;
      done += bytesRead;
    }
    const after = identityOf(await handle.stat());
    return sameFile(before, after) ? { identity: after, bytes } : null;
  } catch {
    return null;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

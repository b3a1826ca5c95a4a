/**
 * The one seam between the durable structures (WAL, superblock, snapshot file) and a real or
 * simulated filesystem: a synchronous view of ONE directory.
 *
 * Durability contract (what every implementation models and every caller relies on):
 * - `write` and `truncate` change what `read` sees at once, but survive a crash only after
 *   `fsync(name)` returned.
 * - Creating a file (the first `write` to a missing name), `rename` and `remove` are directory
 *   operations: they survive a crash only after `fsyncDirectory()` returned. `fsync(name)` does
 *   NOT make a new file's directory entry durable (POSIX; ext4 and xfs behave so in practice).
 * - `rename` atomically replaces `to`.
 * - A call that throws leaves the file in an unknown state: after a failed `fsync` the kernel
 *   may already have dropped the dirty pages (the 2018 "fsyncgate" lesson), so callers never
 *   retry an fsync and trust what they wrote; they poison themselves and reopen.
 *
 * Names are plain file names inside the directory: no separators, no `.`/`..`, bounded length.
 */
import { assert } from '../stdx/assert.js';

export interface Disk {
  /** Where this disk lives, for messages: a directory path or `sim:<seed>`. */
  readonly location: string;
  exists(name: string): boolean;
  /** Size in bytes of an existing file. */
  size(name: string): number;
  /**
   * Reads up to `target.byteLength` bytes at `offset` into `target` (for example a view of WASM
   * memory, so a kernel can scan it without a copy). Returns the number of bytes read: fewer at
   * end of file.
   */
  read(name: string, offset: number, target: Uint8Array): number;
  /** The whole file in a new array. */
  readAll(name: string): Uint8Array;
  /**
   * Opens `name` for reading on a handle of its own: it keeps reading the file it opened after a
   * rename or remove replaced or dropped the name (POSIX: the inode lives while a descriptor holds
   * it), so a replica can serve the previous checkpoint's bytes after a newer one was renamed in.
   * Closed by its `close`, or by the disk's.
   */
  openRead(name: string): DiskFileReader;
  /** Writes `bytes` at `offset`, creating the file when missing and extending it as needed. */
  write(name: string, offset: number, bytes: Uint8Array): void;
  /** Sets the file's size (shrinks it, or extends it with zeros). */
  truncate(name: string, sizeBytes: number): void;
  /** Makes this file's written bytes and size durable (not its directory entry). */
  fsync(name: string): void;
  /**
   * `fsync` off the calling thread, where the implementation can (the node:fs disk): `done` runs
   * on a later turn with null, or the FsyncError `fsync` would have thrown. The caller touches the
   * file again only after `done`.
   */
  fsyncAsync?(name: string, done: (error: FsyncError | null) => void): void;
  /** `fsyncDirectory` off the calling thread, where the implementation can (as `fsyncAsync`). */
  fsyncDirectoryAsync?(done: (error: FsyncError | null) => void): void;
  rename(from: string, to: string): void;
  /** Removes a file; removing a missing file is a no-op. */
  remove(name: string): void;
  /** Makes every create, rename and remove in the directory durable. */
  fsyncDirectory(): void;
  /** Names of the files in the directory, sorted. */
  list(): string[];
  /** Releases cached handles. The disk must not be used afterwards. */
  close(): void;
}

/** A file held open for reading (`Disk.openRead`). */
export interface DiskFileReader {
  /** As `Disk.read`, on the file this handle opened. */
  read(offset: number, target: Uint8Array): number;
  /** Releases the handle; later reads are a bug. Closing twice is a no-op. */
  close(): void;
}

/** Longer names are a bug: every name vrmeta uses is a short constant. */
export const FILE_NAME_LENGTH_MAX = 64;

/** Internal invariant: file names are constants chosen by the storage layer, never user input. */
export function assertFileName(name: string): void {
  assert(name.length > 0 && name.length <= FILE_NAME_LENGTH_MAX, `file name length: ${JSON.stringify(name)}`);
  assert(!/[/\\\0]/.test(name) && name !== '.' && name !== '..', `plain file name: ${JSON.stringify(name)}`);
}

export type DiskOperation =
  | 'exists'
  | 'size'
  | 'read'
  | 'write'
  | 'truncate'
  | 'fsync'
  | 'rename'
  | 'remove'
  | 'fsync_directory'
  | 'list'
  | 'open'
  | 'chmod';

/** An IO call failed. Names the operation and the path; `cause` carries the platform error. */
export class DiskError extends Error {
  override name = 'DiskError';
  readonly operation: DiskOperation;
  readonly path: string;

  constructor(operation: DiskOperation, path: string, cause: unknown) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(`disk ${operation} failed for ${path}: ${detail}`, { cause });
    this.operation = operation;
    this.path = path;
  }
}

/**
 * `fsync` failed. The file's unsynced writes are now in an unknown state (lost, applied or torn,
 * and what `read` returns may not be what reaches the platter): never retry and trust them.
 */
export class FsyncError extends DiskError {
  override name = 'FsyncError';

  constructor(path: string, cause: unknown) {
    super('fsync', path, cause);
  }
}

/**
 * A view of a Disk that holds only the files whose names start with `prefix`, under their names
 * without it: the segment store of one partition (which names its files `{start}.log`) can then
 * share one directory with the stores of other partitions, and with a replica's WAL and superblock
 * under the simulator, where each replica has one disk and its crashes and losses take every
 * store with it.
 */
import { assert } from '../stdx/assert.js';
import { assertFileName, type Disk, type DiskFileReader, type FsyncError } from './disk.js';

export class PrefixedDisk implements Disk {
  private readonly base: Disk;
  readonly prefix: string;
  readonly location: string;
  /** Offered when the base disk offers it (the segment store then flushes off the loop). */
  readonly fsyncAsync?: (name: string, done: (error: FsyncError | null) => void) => void;
  readonly fsyncDirectoryAsync?: (done: (error: FsyncError | null) => void) => void;

  constructor(base: Disk, prefix: string) {
    assert(prefix.length > 0, 'a prefix');
    assertFileName(prefix);
    this.base = base;
    this.prefix = prefix;
    this.location = `${base.location}/${prefix}*`;
    const { fsyncAsync, fsyncDirectoryAsync } = base;
    if (fsyncAsync !== undefined && fsyncDirectoryAsync !== undefined) {
      this.fsyncAsync = (name, done) => fsyncAsync.call(base, this.name(name), done);
      this.fsyncDirectoryAsync = (done) => fsyncDirectoryAsync.call(base, done);
    }
  }

  private name(name: string): string {
    const full = this.prefix + name;
    assertFileName(full);
    return full;
  }

  exists(name: string): boolean {
    return this.base.exists(this.name(name));
  }
  size(name: string): number {
    return this.base.size(this.name(name));
  }
  read(name: string, offset: number, target: Uint8Array): number {
    return this.base.read(this.name(name), offset, target);
  }
  readAll(name: string): Uint8Array {
    return this.base.readAll(this.name(name));
  }
  openRead(name: string): DiskFileReader {
    return this.base.openRead(this.name(name));
  }
  write(name: string, offset: number, bytes: Uint8Array): void {
    this.base.write(this.name(name), offset, bytes);
  }
  truncate(name: string, sizeBytes: number): void {
    this.base.truncate(this.name(name), sizeBytes);
  }
  fsync(name: string): void {
    this.base.fsync(this.name(name));
  }
  rename(from: string, to: string): void {
    this.base.rename(this.name(from), this.name(to));
  }
  remove(name: string): void {
    this.base.remove(this.name(name));
  }
  fsyncDirectory(): void {
    this.base.fsyncDirectory();
  }
  list(): string[] {
    return this.base
      .list()
      .filter((name) => name.startsWith(this.prefix))
      .map((name) => name.slice(this.prefix.length));
  }
  /** The base disk is the owner's to close. */
  close(): void {}
}

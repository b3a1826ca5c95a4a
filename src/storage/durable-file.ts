/**
 * The two disk idioms every durable structure shares.
 *
 * `writeDurably` replaces a file atomically (iggy-metadata-plane.md §4.4): write `<name>.tmp`,
 * fsync it, rename it over `<name>`, fsync the directory. A crash at any point leaves either the
 * old file or the new one, never a mix: the rename is atomic and only happens once the new bytes
 * are durable, and the directory fsync makes the rename itself durable before the caller
 * acknowledges anything that depends on it.
 *
 * `readUntilStable` re-reads before trusting a failed verification: a transient read fault (a bit
 * flipped on the bus, not at rest) must never make the storage truncate a WAL tail or refuse
 * boot. Two consecutive reads that agree are the answer; reads that never agree are a hardware
 * fault the operator has to see.
 */
import { assert } from '../stdx/assert.js';
import { DiskError, type Disk } from './disk.js';

export type DurableWriteStage = 'write' | 'sync' | 'rename' | 'dir_sync';

/**
 * A durable write failed. Before the rename (`write`, `sync`) the target is untouched and the
 * write may be retried. From the rename on (`rename`, `dir_sync`) the target may hold the old or
 * the new bytes and what reads show may not be what survives a crash: the owner must stop using
 * its in-memory view and reopen.
 */
export class DurableWriteError extends Error {
  override name = 'DurableWriteError';
  readonly stage: DurableWriteStage;
  readonly file: string;

  constructor(file: string, stage: DurableWriteStage, cause: DiskError) {
    super(`durable write of ${file} failed at ${stage}: ${cause.message}`, { cause });
    this.file = file;
    this.stage = stage;
  }

  /** True when the target file itself may have changed. */
  get targetUncertain(): boolean {
    return this.stage === 'rename' || this.stage === 'dir_sync';
  }
}

/**
 * A structure saw an IO failure it cannot reason past (a failed fsync, a failure after a rename)
 * and refuses all further IO: its in-memory view may no longer match the disk. Reopening
 * re-reads the files and re-verifies everything.
 */
export class StoragePoisoned extends Error {
  override name = 'StoragePoisoned';

  constructor(file: string, cause: unknown) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(`${file} is poisoned by an earlier IO failure (${detail}); reopen it`, { cause });
  }
}

export function temporaryName(name: string): string {
  return `${name}.tmp`;
}

/**
 * Atomically replaces `name` with the concatenation of `parts`. Throws DurableWriteError on an IO
 * failure; anything else (an assertion, a simulated crash) propagates untouched.
 */
export function writeDurably(disk: Disk, name: string, parts: readonly Uint8Array[]): void {
  const temporary = temporaryName(name);
  let stage: DurableWriteStage = 'write';
  try {
    writeTemporary(disk, temporary, parts);
    stage = 'sync';
    disk.fsync(temporary);
    stage = 'rename';
    disk.rename(temporary, name);
    stage = 'dir_sync';
    disk.fsyncDirectory();
  } catch (error) {
    if (error instanceof DiskError) throw new DurableWriteError(name, stage, error);
    throw error;
  }
}

/** Writes `parts` as the whole of `temporary` (not durable yet). */
function writeTemporary(disk: Disk, temporary: string, parts: readonly Uint8Array[]): void {
  // A temp file left by a crash may be longer than this one; never let its tail survive.
  if (disk.exists(temporary)) disk.truncate(temporary, 0);
  let offset = 0;
  for (const part of parts) {
    disk.write(temporary, offset, part);
    offset += part.byteLength;
  }
  if (offset === 0) disk.write(temporary, 0, new Uint8Array(0));
}

/** The disk can run both of a durable write's fsyncs off the event loop. */
export function canWriteDurablyAsync(disk: Disk): boolean {
  return disk.fsyncAsync !== undefined && disk.fsyncDirectoryAsync !== undefined;
}

/**
 * `writeDurably` with its two fsyncs on the thread pool (the writes into the page cache and the
 * rename stay synchronous: they do not wait for the device). Same stages in the same order, so
 * the crash states are exactly those of `writeDurably`; `done` runs once, on a later turn, with
 * null or the DurableWriteError the synchronous version would have thrown. Anything else thrown
 * by a step (an assertion, a simulated crash) propagates from the callback and crashes.
 *
 * `live` is asked before each step after an fsync: false abandons the write without touching
 * the disk again and without calling `done` (the owner redid the write synchronously at
 * shutdown; a late rename here would race it).
 */
export function writeDurablyAsync(
  disk: Disk,
  name: string,
  parts: readonly Uint8Array[],
  live: () => boolean,
  done: (error: DurableWriteError | null) => void,
): void {
  const fsyncAsync = disk.fsyncAsync;
  const fsyncDirectoryAsync = disk.fsyncDirectoryAsync;
  assert(fsyncAsync !== undefined && fsyncDirectoryAsync !== undefined, 'writeDurablyAsync needs a disk with async fsyncs');
  const temporary = temporaryName(name);
  const fail = (stage: DurableWriteStage, error: unknown): void => {
    if (!(error instanceof DiskError)) throw error;
    done(new DurableWriteError(name, stage, error));
  };
  try {
    writeTemporary(disk, temporary, parts);
  } catch (error) {
    // Deliver on a later turn like every other outcome: the caller never sees `done` re-entrantly.
    setImmediate(() => {
      if (live()) fail('write', error);
    });
    return;
  }
  fsyncAsync.call(disk, temporary, (syncError) => {
    if (!live()) return;
    if (syncError !== null) return fail('sync', syncError);
    try {
      disk.rename(temporary, name);
    } catch (error) {
      return fail('rename', error);
    }
    fsyncDirectoryAsync.call(disk, (directoryError) => {
      if (!live()) return;
      if (directoryError !== null) return fail('dir_sync', directoryError);
      done(null);
    });
  });
}

/** Reads of one file before giving up on getting the same answer twice. */
export const READ_ATTEMPTS_MAX = 8;

/**
 * Runs `readOnce` until it verifies, or until two consecutive attempts fail the same way (`key`
 * names the failure). Returns the last result.
 */
export function readUntilStable<T>(
  file: string,
  readOnce: () => T,
  verified: (result: T) => boolean,
  key: (result: T) => string,
): T {
  let previous: string | null = null;
  for (let attempt = 0; attempt < READ_ATTEMPTS_MAX; attempt++) {
    const result = readOnce();
    if (verified(result)) return result;
    const failure = key(result);
    if (failure === previous) return result;
    previous = failure;
  }
  throw new DiskError('read', file, new Error(`${READ_ATTEMPTS_MAX} reads disagree (failing hardware?)`));
}

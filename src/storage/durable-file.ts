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
    // A temp file left by a crash may be longer than this one; never let its tail survive.
    if (disk.exists(temporary)) disk.truncate(temporary, 0);
    let offset = 0;
    for (const part of parts) {
      disk.write(temporary, offset, part);
      offset += part.byteLength;
    }
    if (offset === 0) disk.write(temporary, 0, new Uint8Array(0));
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

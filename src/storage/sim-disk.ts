/**
 * A deterministic in-memory `Disk` with seeded fault injection, for the crash-consistency
 * property tests and the cluster simulator. Every random choice comes from the injected PRNG, so
 * a seed replays exactly.
 *
 * Model (the durability contract of disk.ts, made executable):
 * - A file is an inode with DURABLE bytes, CURRENT bytes (what `read` sees) and an ordered list
 *   of unsynced operations (writes and truncations). `fsync(name)` makes CURRENT durable.
 * - The directory maps names to inodes, twice: CURRENT and DURABLE, plus an ordered list of
 *   unsynced directory operations (link on create, rename, unlink). `fsyncDirectory()` makes
 *   CURRENT durable. A renamed or removed inode keeps its data: names and bytes are separate,
 *   as on a real filesystem, which is why an fsynced temp file renamed without a directory fsync
 *   may still vanish.
 * - `crash()` is a power loss followed by a restart: every unsynced file operation is
 *   independently lost, applied, or (writes only) TORN: a random prefix lands, and the rest of
 *   the range is left alone, zeroed or filled with garbage. Every unsynced directory operation is
 *   independently applied or lost (replayed in order; an operation whose source no longer exists
 *   at that point is skipped, as a journaled filesystem would never persist it).
 * - `crashAtOperation(k)`: the k-th mutating call from now partially applies (nothing, a torn
 *   prefix, or everything) and throws `SimulatedCrash`; every later call throws too until
 *   `crash()` restarts the disk. This reaches crash points INSIDE multi-step writes.
 * - Faults at rest: `corrupt` (bit flip), `zeroRange`, `truncateAtRest`; on read: transient bit
 *   flips; on write: misdirected writes (the bytes land at another offset of the same file);
 *   `fsync` failure (`FsyncError`, after which the file's unsynced writes are resolved like a
 *   crash: lost, applied or torn, and reads show that result).
 * Latency is not modelled here: the simulator adds it when it delivers completions.
 */
import { assert } from '../stdx/assert.js';
import { assertFileName, DiskError, FsyncError, type Disk, type DiskFileReader, type DiskOperation } from './disk.js';

/** The PRNG surface the disk needs; `Prng` from src/stdx/prng.ts satisfies it. */
export interface SimRandom {
  /** A uniform integer in [0, max). */
  int(max: number): number;
  /** True with probability `probability`. */
  chance(probability: number): boolean;
}

export interface SimDiskFaults {
  /** On crash, each unsynced write is torn with this probability... */
  readonly tornWriteProbability?: number;
  /** ...else lost with this probability, else applied. */
  readonly lostWriteProbability?: number;
  /** A torn write's unwritten remainder is garbage (else zeros or untouched, evenly). */
  readonly tornGarbageProbability?: number;
  /** On crash, each unsynced directory operation is lost with this probability. */
  readonly lostDirectoryOperationProbability?: number;
  /** Each read flips one bit of what it returns (transient: the data at rest is intact). */
  readonly readBitFlipProbability?: number;
  /** Each write lands at another offset of the same file. */
  readonly misdirectedWriteProbability?: number;
  /** Each fsync (file or directory) fails. */
  readonly fsyncFailureProbability?: number;
}

/** The process died at a crash point; call `crash()` to restart the disk. */
export class SimulatedCrash extends Error {
  override name = 'SimulatedCrash';
}

/** A caller that never fsyncs is a bug; bound the unsynced backlog per file and directory. */
export const SIM_PENDING_OPERATIONS_MAX = 4096;
/**
 * Bound on files in the simulated directory: a replica's own files, and the segment files of the
 * partition stores that share its disk under the partition plane's simulation.
 */
export const SIM_FILES_MAX = 512;
/** Bound on one simulated file (the WAL of a test is kilobytes). */
export const SIM_FILE_SIZE_MAX = 256 * 1024 * 1024;

type FileOperation =
  | { readonly kind: 'write'; readonly offset: number; readonly bytes: Uint8Array }
  | { readonly kind: 'truncate'; readonly sizeBytes: number };

type DirectoryOperation =
  | { readonly kind: 'link'; readonly name: string; readonly inode: Inode }
  | { readonly kind: 'rename'; readonly from: string; readonly to: string; readonly inode: Inode }
  | { readonly kind: 'unlink'; readonly name: string; readonly inode: Inode };

class Inode {
  durable: Uint8Array = new Uint8Array(0);
  current: Uint8Array = new Uint8Array(0);
  pending: FileOperation[] = [];
}

function withWrite(bytes: Uint8Array, offset: number, data: Uint8Array): Uint8Array {
  const end = offset + data.byteLength;
  const out = end > bytes.byteLength ? new Uint8Array(end) : bytes.slice();
  if (end > bytes.byteLength) out.set(bytes, 0);
  out.set(data, offset);
  return out;
}

function withSize(bytes: Uint8Array, sizeBytes: number): Uint8Array {
  if (sizeBytes <= bytes.byteLength) return bytes.slice(0, sizeBytes);
  const out = new Uint8Array(sizeBytes);
  out.set(bytes, 0);
  return out;
}

export class SimDisk implements Disk {
  readonly location: string;
  private readonly random: SimRandom;
  private readonly faults: { -readonly [K in keyof SimDiskFaults]-?: number };
  private current = new Map<string, Inode>();
  private durable = new Map<string, Inode>();
  private pendingDirectory: DirectoryOperation[] = [];
  /** Mutating calls left before the crash point fires; null when no crash point is armed. */
  private crashCountdown: number | null = null;
  private halted = false;
  private readonly misdirections = new Map<string, { offset: number; skipWrites: number }>();
  private readonly fsyncFailures = new Set<string>();
  /** Mutating calls since construction: tests run a scenario once to pick a crash point. */
  mutatingOperationCount = 0;
  crashCount = 0;

  constructor(random: SimRandom, faults: SimDiskFaults = {}, location = 'sim') {
    this.location = location;
    this.random = random;
    this.faults = {
      tornWriteProbability: faults.tornWriteProbability ?? 0,
      lostWriteProbability: faults.lostWriteProbability ?? 0,
      tornGarbageProbability: faults.tornGarbageProbability ?? 0.5,
      lostDirectoryOperationProbability: faults.lostDirectoryOperationProbability ?? 0,
      readBitFlipProbability: faults.readBitFlipProbability ?? 0,
      misdirectedWriteProbability: faults.misdirectedWriteProbability ?? 0,
      fsyncFailureProbability: faults.fsyncFailureProbability ?? 0,
    };
    for (const [key, value] of Object.entries(this.faults)) {
      assert(value >= 0 && value <= 1, `SimDisk fault ${key} is a probability`);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Fault controls.

  /** Arms a crash point: the `k`-th mutating call from now (1 = the next) crashes. */
  crashAtOperation(k: number): void {
    assert(Number.isSafeInteger(k) && k >= 1, 'crash point is a positive count');
    this.crashCountdown = k;
  }

  /** Disarms a crash point that has not fired (a scenario finished before reaching it). */
  clearCrashPoint(): void {
    this.crashCountdown = null;
  }

  /** Changes fault probabilities from now on (e.g. read faults only while recovering). */
  setFaults(faults: SimDiskFaults): void {
    for (const [key, value] of Object.entries(faults)) {
      assert(typeof value === 'number' && value >= 0 && value <= 1, `SimDisk fault ${key} is a probability`);
      (this.faults as Record<string, number>)[key] = value;
    }
  }

  /**
   * A coming write to `name` lands at `offset` instead of where it was aimed: the next one, or
   * the one after `skipWrites` others (to hit, say, the trailer write of a two-part file).
   */
  misdirectNextWrite(name: string, offset: number, skipWrites = 0): void {
    assertFileName(name);
    assert(Number.isSafeInteger(offset) && offset >= 0 && skipWrites >= 0, 'misdirection target');
    this.misdirections.set(name, { offset, skipWrites });
  }

  /** The next fsync of `name` (or of the directory, with name `.`) fails. */
  failNextFsync(name: string): void {
    this.fsyncFailures.add(name);
  }

  /**
   * Power loss and restart: resolves every unsynced file and directory operation at random (see
   * the module comment), forgets unreachable inodes and disarms the crash point.
   */
  crash(): void {
    const directory = new Map(this.durable);
    for (const operation of this.pendingDirectory) {
      if (this.random.chance(this.faults.lostDirectoryOperationProbability)) continue;
      applyDirectoryOperation(directory, operation);
    }
    this.pendingDirectory = [];
    const resolved = new Set<Inode>();
    for (const inode of directory.values()) {
      if (resolved.has(inode)) continue;
      resolved.add(inode);
      this.resolvePending(inode);
    }
    this.current = directory;
    this.durable = new Map(directory);
    this.halted = false;
    this.crashCountdown = null;
    this.misdirections.clear();
    this.fsyncFailures.clear();
    this.crashCount += 1;
  }

  /**
   * An independent copy of this disk (files, unsynced operations, directory state) driven by
   * `random`: tests run a scenario on the copy to count its mutating calls, then aim a crash
   * point inside the real run.
   */
  clone(random: SimRandom): SimDisk {
    assert(!this.halted, 'clone a running disk');
    const copy = new SimDisk(random, this.faults, this.location);
    const inodes = new Map<Inode, Inode>();
    const cloneInode = (inode: Inode): Inode => {
      let twin = inodes.get(inode);
      if (twin === undefined) {
        twin = new Inode();
        twin.durable = inode.durable.slice();
        twin.current = inode.current.slice();
        twin.pending = inode.pending.map((operation) =>
          operation.kind === 'write' ? { ...operation, bytes: operation.bytes.slice() } : operation,
        );
        inodes.set(inode, twin);
      }
      return twin;
    };
    for (const [name, inode] of this.current) copy.current.set(name, cloneInode(inode));
    for (const [name, inode] of this.durable) copy.durable.set(name, cloneInode(inode));
    copy.pendingDirectory = this.pendingDirectory.map((operation) => ({ ...operation, inode: cloneInode(operation.inode) }));
    return copy;
  }

  /** Flips one bit of a file at rest (durable and current bytes alike). */
  corrupt(name: string, offset?: number, bit?: number): void {
    const inode = this.inodeOrThrow(name);
    assert(inode.current.byteLength > 0, 'corrupt a non-empty file');
    const at = offset ?? this.random.int(inode.current.byteLength);
    const mask = 1 << (bit ?? this.random.int(8));
    this.atRest(inode, (bytes) => {
      const out = bytes.slice();
      if (at < out.byteLength) out[at] = out[at]! ^ mask;
      return out;
    });
  }

  /** Zeroes a range of a file at rest (a lost or unwritten block). */
  zeroRange(name: string, offset: number, length: number): void {
    const inode = this.inodeOrThrow(name);
    this.atRest(inode, (bytes) => {
      const out = bytes.slice();
      out.fill(0, Math.min(offset, out.byteLength), Math.min(offset + length, out.byteLength));
      return out;
    });
  }

  /** Cuts a file at rest. */
  truncateAtRest(name: string, sizeBytes: number): void {
    const inode = this.inodeOrThrow(name);
    this.atRest(inode, (bytes) => withSize(bytes, Math.min(sizeBytes, bytes.byteLength)));
  }

  /** The durable bytes of `name` (what a crash right now would keep at least), for tests. */
  durableBytes(name: string): Uint8Array | null {
    const inode = this.durable.get(name);
    return inode === undefined ? null : inode.durable.slice();
  }

  private atRest(inode: Inode, change: (bytes: Uint8Array) => Uint8Array): void {
    inode.durable = change(inode.durable);
    inode.current = change(inode.current);
  }

  private inodeOrThrow(name: string): Inode {
    assertFileName(name);
    const inode = this.current.get(name);
    assert(inode !== undefined, `sim file exists: ${name}`);
    return inode;
  }

  // ---------------------------------------------------------------------------------------------
  // Disk.

  exists(name: string): boolean {
    this.checkAlive();
    assertFileName(name);
    return this.current.has(name);
  }

  size(name: string): number {
    this.checkAlive();
    return this.file(name, 'size').current.byteLength;
  }

  read(name: string, offset: number, target: Uint8Array): number {
    return this.readInode(this.file(name, 'read'), offset, target);
  }

  private readInode(inode: Inode, offset: number, target: Uint8Array): number {
    this.checkAlive();
    assert(Number.isSafeInteger(offset) && offset >= 0, 'read offset');
    const bytes = inode.current;
    const count = Math.max(0, Math.min(target.byteLength, bytes.byteLength - offset));
    target.set(bytes.subarray(offset, offset + count), 0);
    if (count > 0 && this.random.chance(this.faults.readBitFlipProbability)) {
      const at = this.random.int(count);
      target[at] = target[at]! ^ (1 << this.random.int(8));
    }
    return count;
  }

  readAll(name: string): Uint8Array {
    const bytes = new Uint8Array(this.size(name));
    this.read(name, 0, bytes);
    return bytes;
  }

  openRead(name: string): DiskFileReader {
    // The inode, not the name: a rename over `name` or its removal leaves this handle reading it.
    const inode = this.file(name, 'open');
    let open = true;
    return {
      read: (offset, target) => {
        assert(open, 'read on an open reader');
        return this.readInode(inode, offset, target);
      },
      close: () => {
        open = false;
      },
    };
  }

  write(name: string, offset: number, bytes: Uint8Array): void {
    assert(Number.isSafeInteger(offset) && offset >= 0, 'write offset');
    assertFileName(name);
    const crashing = this.beginMutation();
    let inode = this.current.get(name);
    if (inode === undefined) {
      if (crashing && this.random.chance(0.5)) this.die();
      assert(this.current.size < SIM_FILES_MAX, 'sim directory is bounded');
      inode = new Inode();
      this.current.set(name, inode);
      this.pushDirectory({ kind: 'link', name, inode });
    }
    let target = offset;
    const misdirected = this.misdirections.get(name);
    if (misdirected !== undefined && misdirected.skipWrites > 0) {
      this.misdirections.set(name, { offset: misdirected.offset, skipWrites: misdirected.skipWrites - 1 });
    } else if (misdirected !== undefined) {
      this.misdirections.delete(name);
      target = misdirected.offset;
    } else if (this.random.chance(this.faults.misdirectedWriteProbability)) {
      target = this.random.int(inode.current.byteLength + 1);
    }
    assert(target + bytes.byteLength <= SIM_FILE_SIZE_MAX, 'sim file size is bounded');
    let data = bytes.slice();
    if (crashing) {
      const choice = this.random.int(3);
      if (choice === 0) this.die();
      if (choice === 1) data = data.subarray(0, this.random.int(data.byteLength + 1));
    }
    this.pushFile(inode, { kind: 'write', offset: target, bytes: data });
    inode.current = withWrite(inode.current, target, data);
    if (crashing) this.die();
  }

  truncate(name: string, sizeBytes: number): void {
    assert(Number.isSafeInteger(sizeBytes) && sizeBytes >= 0, 'truncate size');
    const inode = this.file(name, 'truncate');
    const crashing = this.beginMutation();
    if (crashing && this.random.chance(0.5)) this.die();
    this.pushFile(inode, { kind: 'truncate', sizeBytes });
    inode.current = withSize(inode.current, sizeBytes);
    if (crashing) this.die();
  }

  fsync(name: string): void {
    const inode = this.file(name, 'fsync');
    const crashing = this.beginMutation();
    if (crashing && this.random.chance(0.5)) this.die();
    if (this.fsyncFailures.delete(name) || this.random.chance(this.faults.fsyncFailureProbability)) {
      // Unknown state: the kernel wrote back some pages and dropped the rest as clean.
      this.resolvePending(inode);
      throw new FsyncError(`${this.location}/${name}`, new Error('simulated EIO'));
    }
    inode.durable = inode.current.slice();
    inode.pending = [];
    if (crashing) this.die();
  }

  rename(from: string, to: string): void {
    assertFileName(to);
    const inode = this.file(from, 'rename');
    const crashing = this.beginMutation();
    if (crashing && this.random.chance(0.5)) this.die();
    this.pushDirectory({ kind: 'rename', from, to, inode });
    this.current.delete(from);
    this.current.set(to, inode);
    if (crashing) this.die();
  }

  remove(name: string): void {
    assertFileName(name);
    const crashing = this.beginMutation();
    const inode = this.current.get(name);
    if (crashing && this.random.chance(0.5)) this.die();
    if (inode !== undefined) {
      this.pushDirectory({ kind: 'unlink', name, inode });
      this.current.delete(name);
    }
    if (crashing) this.die();
  }

  fsyncDirectory(): void {
    const crashing = this.beginMutation();
    if (crashing && this.random.chance(0.5)) this.die();
    if (this.fsyncFailures.delete('.') || this.random.chance(this.faults.fsyncFailureProbability)) {
      const directory = new Map(this.durable);
      for (const operation of this.pendingDirectory) {
        if (this.random.chance(0.5)) applyDirectoryOperation(directory, operation);
      }
      this.pendingDirectory = [];
      this.current = directory;
      this.durable = new Map(directory);
      throw new FsyncError(this.location, new Error('simulated EIO'));
    }
    this.durable = new Map(this.current);
    this.pendingDirectory = [];
    if (crashing) this.die();
  }

  list(): string[] {
    this.checkAlive();
    return [...this.current.keys()].sort();
  }

  close(): void {}

  // ---------------------------------------------------------------------------------------------

  private file(name: string, operation: DiskOperation): Inode {
    this.checkAlive();
    assertFileName(name);
    const inode = this.current.get(name);
    if (inode === undefined) throw new DiskError(operation, `${this.location}/${name}`, new Error('ENOENT: no such file'));
    return inode;
  }

  private checkAlive(): void {
    if (this.halted) throw new SimulatedCrash('simulated disk is halted at a crash point');
  }

  /** Counts a mutating call; true when it is the armed crash point. */
  private beginMutation(): boolean {
    this.checkAlive();
    this.mutatingOperationCount += 1;
    if (this.crashCountdown === null) return false;
    this.crashCountdown -= 1;
    return this.crashCountdown === 0;
  }

  private die(): never {
    this.halted = true;
    this.crashCountdown = null;
    throw new SimulatedCrash(`simulated crash at mutating operation ${this.mutatingOperationCount}`);
  }

  private pushFile(inode: Inode, operation: FileOperation): void {
    assert(inode.pending.length < SIM_PENDING_OPERATIONS_MAX, 'unsynced writes per file are bounded');
    inode.pending.push(operation);
  }

  private pushDirectory(operation: DirectoryOperation): void {
    assert(this.pendingDirectory.length < SIM_PENDING_OPERATIONS_MAX, 'unsynced directory operations are bounded');
    this.pendingDirectory.push(operation);
  }

  /** Lost, applied or torn, independently per pending operation; the result is durable. */
  private resolvePending(inode: Inode): void {
    let bytes = inode.durable;
    for (const operation of inode.pending) {
      if (operation.kind === 'truncate') {
        if (!this.random.chance(this.faults.lostWriteProbability)) bytes = withSize(bytes, operation.sizeBytes);
        continue;
      }
      if (this.random.chance(this.faults.tornWriteProbability)) {
        bytes = this.tear(bytes, operation.offset, operation.bytes);
      } else if (!this.random.chance(this.faults.lostWriteProbability)) {
        bytes = withWrite(bytes, operation.offset, operation.bytes);
      }
    }
    inode.durable = bytes;
    inode.current = bytes.slice();
    inode.pending = [];
  }

  private tear(bytes: Uint8Array, offset: number, data: Uint8Array): Uint8Array {
    if (data.byteLength === 0) return bytes;
    const prefixLength = this.random.int(data.byteLength);
    const torn = data.slice();
    const tail = this.random.chance(this.faults.tornGarbageProbability) ? 'garbage' : this.random.chance(0.5) ? 'zero' : 'none';
    if (tail === 'none') return withWrite(bytes, offset, torn.subarray(0, prefixLength));
    for (let index = prefixLength; index < torn.byteLength; index++) {
      torn[index] = tail === 'zero' ? 0 : this.random.int(256);
    }
    return withWrite(bytes, offset, torn);
  }
}

function applyDirectoryOperation(directory: Map<string, Inode>, operation: DirectoryOperation): void {
  switch (operation.kind) {
    case 'link':
      directory.set(operation.name, operation.inode);
      return;
    case 'rename':
      if (directory.get(operation.from) !== operation.inode) return;
      directory.delete(operation.from);
      directory.set(operation.to, operation.inode);
      return;
    case 'unlink':
      if (directory.get(operation.name) === operation.inode) directory.delete(operation.name);
      return;
  }
}

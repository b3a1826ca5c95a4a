/**
 * `journal.wal`: the write-ahead log of prepares (iggy-metadata-plane.md §4.8). The file is a
 * concatenation of raw prepare frames (256-byte header + body), no other framing; every append is
 * one write + one fsync, and a prepare is acknowledged (PrepareOk) only after `append` returned.
 *
 * Open reads the whole file into kernel memory and runs the journal-scan kernel:
 * - a torn tail (the failed entry has no valid entry after it: an append that never completed)
 *   is truncated and fsynced, after a second read agrees (a transient read fault must never
 *   destroy an acknowledged prepare);
 * - interior damage (a valid entry follows the bad one) refuses boot: acknowledged prepares were
 *   damaged, and truncating there is the classic WAL bug that deletes committed data.
 *
 * In memory, one slot per `op mod slotCount` holds the newest entry for that op (duplicate ops:
 * last wins, in file order). Entries below the checkpoint op are not indexed; they are dropped by
 * the next rewrite. The slot rule is the reference's: an append may not overwrite a slot whose
 * op is above the checkpoint op; the upper layer must checkpoint (and `drain`) first.
 *
 * Chain invariant: wherever two indexed entries have consecutive ops, the higher one's `parent`
 * is the lower one's identity. `append` asserts it, so a divergent suffix must be removed with
 * `truncateFrom` before a replacement is written. The boot scan checks the chain between entries
 * that are adjacent in the file; the invariant (plus compaction when a stale physically-last
 * entry would not chain) guarantees every file this class writes passes that check.
 *
 * `truncateFrom` and `drain` rewrite the file (temp, fsync, rename, directory fsync). Any IO
 * failure that may have changed `journal.wal` poisons the instance: everything is refused until
 * the replica reopens it, because its view of the file may be wrong.
 */
import { HEADER_SIZE, MESSAGE_SIZE_MAX } from '../constants.js';
import type { JournalScan, Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Logger } from '../vsr/io.js';
import { DiskError, type Disk } from './disk.js';
import {
  DurableWriteError,
  canWriteDurablyAsync,
  writeDurablyAsync,
  readUntilStable,
  StoragePoisoned,
  temporaryName,
  writeDurably,
} from './durable-file.js';
import { hex, readPrepareFields } from './prepare-frame.js';
import { RefusalReason, silentLogger, StorageRefusal } from './refusal.js';

export const WAL_FILE = 'journal.wal';
export const WAL_TEMP_FILE = temporaryName(WAL_FILE);

/** The reference caps `journal_slots` at 2^20. */
export const WAL_SLOT_COUNT_MAX = 1 << 20;

/**
 * Entries the file may hold before an append compacts it: the live entries plus as many
 * superseded (duplicate op) or stale (below the checkpoint) ones. Keeps the file, and the memory
 * needed to open it, proportional to `slotCount`.
 */
export function walFileEntriesMax(slotCount: number): number {
  return 2 * slotCount;
}

/**
 * The largest WAL the open path loads: a full file of maximum-size entries, plus one
 * checkpoint's worth of stale entries that a crash before `drain` left behind.
 */
export function walFileSizeMax(slotCount: number): number {
  return (walFileEntriesMax(slotCount) + slotCount) * MESSAGE_SIZE_MAX;
}

export interface WalEntry {
  readonly op: number;
  /** The primary's commit number when it prepared this op. */
  readonly commit: number;
  /** The prepare's identity checksum (its header `checksum`, u128). */
  readonly identity: bigint;
  /** The previous op's identity. */
  readonly parent: bigint;
  /** The whole frame, owned by the WAL (never a view of kernel memory). Do not mutate. */
  readonly frame: Uint8Array;
  /** Where the frame starts in `journal.wal`. */
  readonly offset: number;
}

export interface WalOptions {
  /** `journal_slots`: capacity in entries between the checkpoint op and the head. */
  readonly slotCount: number;
  /** The durable checkpoint op (the snapshot's): entries below it are not indexed. */
  readonly checkpointOp: number;
  /** When set, every entry must name this cluster (a WAL from another cluster refuses boot). */
  readonly cluster?: bigint;
  readonly logger?: Logger;
}

export interface WalOpenReport {
  /** File size before any truncation. */
  readonly fileSizeBytes: number;
  /** Entries in the file's valid prefix, including superseded and stale ones. */
  readonly fileEntryCount: number;
  /** Entries below the checkpoint op (a crash before the last drain left them). */
  readonly staleEntryCount: number;
  /** Entries replaced by a later entry for the same op. */
  readonly supersededEntryCount: number;
  readonly tornTail: {
    readonly offset: number;
    readonly reason: string;
    readonly droppedBytes: number;
  } | null;
}

/** The physically last entry of the file: what the next append lands after. */
interface FileTail {
  readonly op: number;
  readonly identity: bigint;
}

export class Wal {
  private readonly disk: Disk;
  private readonly kernels: Kernels;
  private readonly logger: Logger;
  readonly slotCount: number;
  private readonly cluster: bigint | null;
  private slots: (WalEntry | null)[];
  private checkpoint: number;
  private fileSizeBytes: number;
  private fileEntryCount: number;
  private fileTail: FileTail | null;
  private poisonedBy: unknown = null;
  /** Syncs started, sync and async (tells a superseded async fsync's late answer). */
  private syncs = 0;
  readonly openReport: WalOpenReport;

  private constructor(disk: Disk, kernels: Kernels, options: WalOptions, opened: OpenedFile) {
    this.disk = disk;
    this.kernels = kernels;
    this.logger = options.logger ?? silentLogger;
    this.slotCount = options.slotCount;
    this.cluster = options.cluster ?? null;
    this.checkpoint = options.checkpointOp;
    this.slots = opened.slots;
    this.fileSizeBytes = opened.fileSizeBytes;
    this.fileEntryCount = opened.report.fileEntryCount;
    this.fileTail = opened.fileTail;
    this.openReport = opened.report;
  }

  /**
   * Opens (creating when missing) and verifies `journal.wal`. Throws StorageRefusal when the
   * bytes cannot be trusted, DiskError when IO fails.
   */
  static open(disk: Disk, kernels: Kernels, options: WalOptions): Wal {
    assert(
      Number.isSafeInteger(options.slotCount) && options.slotCount >= 2 && options.slotCount <= WAL_SLOT_COUNT_MAX,
      `journal slot count ${options.slotCount}`,
    );
    assert(Number.isSafeInteger(options.checkpointOp) && options.checkpointOp >= 0, 'checkpoint op');
    const logger = options.logger ?? silentLogger;
    // A temp file is the remains of a rewrite that crashed before its rename: the journal proper
    // is intact (the rename is the commit point), so the temp is garbage.
    if (disk.exists(WAL_TEMP_FILE)) disk.remove(WAL_TEMP_FILE);
    if (!disk.exists(WAL_FILE)) {
      // Create it durably now, so a later append's fsync is never the only thing standing
      // between an acknowledged prepare and a directory entry that a crash can lose.
      disk.write(WAL_FILE, 0, new Uint8Array(0));
      disk.fsync(WAL_FILE);
      disk.fsyncDirectory();
      logger.log('info', 'wal_created', { file: WAL_FILE });
    }
    const opened = openFile(disk, kernels, options, logger);
    return new Wal(disk, kernels, options, opened);
  }

  get checkpointOp(): number {
    return this.checkpoint;
  }

  /** Highest indexed op, or the checkpoint op when nothing above it is held. */
  get headOp(): number {
    let head = this.checkpoint;
    for (const entry of this.slots) if (entry !== null && entry.op > head) head = entry.op;
    return head;
  }

  get poisoned(): boolean {
    return this.poisonedBy !== null;
  }

  /** The entry for `op`, or null (not held, superseded by a later slot user, or below the checkpoint). */
  get(op: number): WalEntry | null {
    if (!Number.isSafeInteger(op) || op < this.checkpoint) return null;
    const entry = this.slots[op % this.slotCount] ?? null;
    return entry !== null && entry.op === op ? entry : null;
  }

  /** Indexed entries in op order (at most `slotCount`). */
  entries(): WalEntry[] {
    const out: WalEntry[] = [];
    for (const entry of this.slots) if (entry !== null && entry.op >= this.checkpoint) out.push(entry);
    return out.sort((a, b) => a.op - b.op);
  }

  /** Whether `op` may be appended without overwriting an entry above the checkpoint. */
  hasRoomFor(op: number): boolean {
    if (!Number.isSafeInteger(op) || op < this.checkpoint) return false;
    const entry = this.slots[op % this.slotCount] ?? null;
    return entry === null || entry.op === op || entry.op <= this.checkpoint;
  }

  /**
   * Appends one sealed prepare and fsyncs. When this returns, the prepare survives a crash.
   * Preconditions (asserted: a violation is a bug in the caller): the frame verifies as a single
   * prepare; op >= checkpoint op; `hasRoomFor(op)`; it chains with the held ops op-1 and op+1.
   */
  append(frame: Uint8Array, options: { readonly sync?: boolean } = {}): void {
    this.checkUsable();
    const scan = this.kernels.journalScan(frame);
    assert(
      scan.failure === null && scan.entryCount === 1,
      `WAL append of an invalid prepare (${scan.failure?.reason ?? `${scan.entryCount} entries`})`,
    );
    const fields = readPrepareFields(frame);
    assert(fields.sizeBytes === frame.byteLength && fields.op >= 0 && fields.commit >= 0, 'prepare fields');
    assert(this.cluster === null || fields.cluster === this.cluster, 'WAL append of another cluster');
    const op = fields.op;
    assert(op >= this.checkpoint, `WAL append of op ${op} below the checkpoint op ${this.checkpoint}`);
    const slotIndex = op % this.slotCount;
    const occupant = this.slots[slotIndex] ?? null;
    assert(
      this.hasRoomFor(op),
      `WAL slot ${slotIndex} holds op ${occupant?.op} above checkpoint op ${this.checkpoint}: checkpoint before appending op ${op}`,
    );
    const previous = this.get(op - 1);
    assert(
      previous === null || previous.identity === fields.parent,
      `WAL append of op ${op} does not chain to the held op ${op - 1}: truncateFrom(${op - 1}) first`,
    );
    const next = this.get(op + 1);
    assert(
      next === null || next.parent === fields.identity,
      `WAL append of op ${op} does not chain to the held op ${op + 1}: truncateFrom(${op}) first`,
    );
    // The boot scan checks the chain between file neighbours. A stale or superseded physical
    // tail at op-1 that this frame does not chain to would read as a torn or corrupt entry.
    const tail = this.fileTail;
    const breaksFileChain = tail !== null && tail.op === op - 1 && tail.identity !== fields.parent;
    if (breaksFileChain || this.fileEntryCount >= walFileEntriesMax(this.slotCount)) this.compact();

    const offset = this.fileSizeBytes;
    const owned = frame.slice();
    try {
      this.disk.write(WAL_FILE, offset, owned);
      // Group commit: a driver may append several prepares and fsync once (`sync()`), and
      // acknowledges none of them before that fsync returned.
      if (options.sync !== false) this.disk.fsync(WAL_FILE);
    } catch (error) {
      // A failed write or fsync may leave a torn entry at the end; appending after it would turn
      // a truncatable torn tail into interior corruption. Reopen to re-scan.
      this.poison(error);
      throw error;
    }
    this.slots[slotIndex] = {
      op,
      commit: fields.commit,
      identity: fields.identity,
      parent: fields.parent,
      frame: owned,
      offset,
    };
    this.fileSizeBytes += owned.byteLength;
    this.fileEntryCount += 1;
    this.fileTail = { op, identity: fields.identity };
  }

  /** Makes every unsynced append durable (the end of a group commit). */
  sync(): void {
    this.checkUsable();
    this.syncs += 1;
    try {
      this.disk.fsync(WAL_FILE);
    } catch (error) {
      this.poison(error);
      throw error;
    }
  }

  /** The disk can fsync off the event loop (`syncAsync`). */
  get canSyncAsync(): boolean {
    return this.disk.fsyncAsync !== undefined;
  }

  /**
   * `sync` off the event loop: `done` runs on a later turn with null once every unsynced append
   * is durable, or with the error (the WAL is then poisoned, as after a failed `sync`). The caller
   * issues no other WAL operation until `done`.
   */
  syncAsync(done: (error: Error | null) => void): void {
    this.checkUsable();
    const fsyncAsync = this.disk.fsyncAsync;
    assert(fsyncAsync !== undefined, 'syncAsync needs a disk with fsyncAsync');
    const sync = ++this.syncs;
    fsyncAsync.call(this.disk, WAL_FILE, (error) => {
      // A later sync (shutdown completing this one synchronously) covered the same writes and
      // answered for them; this one's failure, e.g. on a descriptor closed since, is not news.
      if (error !== null && sync === this.syncs) this.poison(error);
      done(error);
    });
  }

  /**
   * Removes every entry with op >= `fromOp` (a divergent suffix), durably. The checkpoint entry
   * is committed and can never be part of a divergent suffix: `fromOp` > checkpoint op.
   */
  truncateFrom(fromOp: number): void {
    this.checkUsable();
    assert(Number.isSafeInteger(fromOp) && fromOp > this.checkpoint, `truncateFrom(${fromOp}) above checkpoint op ${this.checkpoint}`);
    const kept = this.entries().filter((entry) => entry.op < fromOp);
    if (kept.length === this.liveCount()) return;
    this.rewrite(kept);
  }

  /**
   * Removes the entries at `ops` (each above the checkpoint op), durably, and keeps every other
   * one: a replica that adopts a new log drops the entries it cannot vouch for without dropping
   * the verified ones above them. Removing entries never makes two held entries consecutive that
   * were not before, so the chain invariant holds for what is kept.
   */
  remove(ops: readonly number[]): void {
    this.checkUsable();
    const removed = new Set(ops);
    for (const op of removed) {
      assert(Number.isSafeInteger(op) && op > this.checkpoint, `remove(${op}) above checkpoint op ${this.checkpoint}`);
    }
    const kept = this.entries().filter((entry) => !removed.has(entry.op));
    if (kept.length === this.liveCount()) return;
    this.rewrite(kept);
  }

  /**
   * Removes every entry with op < `keepFromOp` and makes `keepFromOp` the checkpoint op, durably.
   * Called after the checkpoint's snapshot and superblock are durable; the entry AT the
   * checkpoint op is kept (a DoViewChange may need the commit-point header). A state transfer
   * may drain past the head, leaving the WAL empty.
   */
  drain(keepFromOp: number): void {
    this.checkUsable();
    assert(
      Number.isSafeInteger(keepFromOp) && keepFromOp >= this.checkpoint,
      `drain(${keepFromOp}) below checkpoint op ${this.checkpoint}`,
    );
    const kept = this.entries().filter((entry) => entry.op >= keepFromOp);
    // Stale and superseded entries are physical only; rewrite whenever the file holds any.
    if (kept.length !== this.fileEntryCount) this.rewrite(kept);
    this.drained(keepFromOp);
  }

  /**
   * `drain` with the rewrite's fsyncs on the thread pool (`writeDurablyAsync`); `done` runs on a
   * later turn with null or the error `drain` would have thrown. Nothing else may touch the WAL
   * until then. `live` as for `writeDurablyAsync`.
   */
  drainAsync(keepFromOp: number, live: () => boolean, done: (error: Error | null) => void): void {
    this.checkUsable();
    assert(
      Number.isSafeInteger(keepFromOp) && keepFromOp >= this.checkpoint,
      `drain(${keepFromOp}) below checkpoint op ${this.checkpoint}`,
    );
    const kept = this.entries().filter((entry) => entry.op >= keepFromOp);
    if (kept.length === this.fileEntryCount) {
      this.drained(keepFromOp);
      setImmediate(() => {
        if (live()) done(null);
      });
      return;
    }
    const plan = this.rewritePlan(kept);
    writeDurablyAsync(this.disk, WAL_FILE, [plan.image], live, (error) => {
      if (error !== null) {
        if (error.targetUncertain) this.poison(error);
        done(error);
        return;
      }
      this.rewritten(plan);
      this.drained(keepFromOp);
      done(null);
    });
  }

  /** The disk can run `drainAsync`'s fsyncs off the event loop. */
  get canDrainAsync(): boolean {
    return canWriteDurablyAsync(this.disk);
  }

  private drained(keepFromOp: number): void {
    this.checkpoint = keepFromOp;
    for (let index = 0; index < this.slots.length; index++) {
      const entry = this.slots[index] ?? null;
      if (entry !== null && entry.op < keepFromOp) this.slots[index] = null;
    }
  }

  private liveCount(): number {
    let count = 0;
    for (const entry of this.slots) if (entry !== null && entry.op >= this.checkpoint) count += 1;
    return count;
  }

  /** Drops superseded and stale entries from the file, keeping every indexed entry. */
  private compact(): void {
    this.rewrite(this.entries());
  }

  /** Replaces the file with `kept` (op order, chained by the invariant) and re-indexes. */
  private rewrite(kept: readonly WalEntry[]): void {
    const plan = this.rewritePlan(kept);
    try {
      writeDurably(this.disk, WAL_FILE, [plan.image]);
    } catch (error) {
      // Before the rename `journal.wal` is untouched and this view still matches it.
      if (!(error instanceof DurableWriteError && !error.targetUncertain)) this.poison(error);
      throw error;
    }
    this.rewritten(plan);
  }

  /** The file image and index of a rewrite to `kept`, verified, nothing written. */
  private rewritePlan(kept: readonly WalEntry[]): RewritePlan {
    let sizeBytes = 0;
    for (const entry of kept) sizeBytes += entry.frame.byteLength;
    const image = new Uint8Array(sizeBytes);
    const slots: (WalEntry | null)[] = new Array<WalEntry | null>(this.slotCount).fill(null);
    let offset = 0;
    for (const entry of kept) {
      image.set(entry.frame, offset);
      slots[entry.op % this.slotCount] = { ...entry, offset };
      offset += entry.frame.byteLength;
    }
    // Cheap next to the fsyncs (rewrites happen per checkpoint or truncation): a rewrite that the
    // boot scan would not accept in full is a bug here, and must not become a refused boot.
    const scan = this.kernels.journalScan(image);
    assert(scan.failure === null && scan.entryCount === kept.length, `WAL rewrite does not verify: ${scan.failure?.reason}`);
    return { kept, image, slots, sizeBytes };
  }

  private rewritten(plan: RewritePlan): void {
    const { kept, slots, sizeBytes } = plan;
    this.slots = slots;
    this.fileSizeBytes = sizeBytes;
    this.fileEntryCount = kept.length;
    const last = kept[kept.length - 1];
    this.fileTail = last === undefined ? null : { op: last.op, identity: last.identity };
  }

  private checkUsable(): void {
    if (this.poisonedBy !== null) throw new StoragePoisoned(WAL_FILE, this.poisonedBy);
  }

  private poison(cause: unknown): void {
    this.poisonedBy ??= cause;
    this.logger.log('error', 'wal_poisoned', { file: WAL_FILE, error: String(cause) });
  }
}

interface RewritePlan {
  readonly kept: readonly WalEntry[];
  readonly image: Uint8Array;
  readonly slots: (WalEntry | null)[];
  readonly sizeBytes: number;
}

interface OpenedFile {
  readonly slots: (WalEntry | null)[];
  readonly fileSizeBytes: number;
  readonly fileTail: FileTail | null;
  readonly report: WalOpenReport;
}

function scanKey(scan: JournalScan): string {
  const failure = scan.failure;
  return failure === null ? 'ok' : `${failure.offset}:${failure.reason}:${failure.kind}:${scan.validEnd}`;
}

function openFile(disk: Disk, kernels: Kernels, options: WalOptions, logger: Logger): OpenedFile {
  const fileSizeBytes = disk.size(WAL_FILE);
  if (fileSizeBytes > walFileSizeMax(options.slotCount)) {
    throw new StorageRefusal(
      WAL_FILE,
      RefusalReason.walTooLarge,
      `${fileSizeBytes} bytes exceed ${walFileSizeMax(options.slotCount)} for ${options.slotCount} journal slots`,
    );
  }
  const slots: (WalEntry | null)[] = new Array<WalEntry | null>(options.slotCount).fill(null);
  const emptyReport = {
    fileSizeBytes,
    fileEntryCount: 0,
    staleEntryCount: 0,
    supersededEntryCount: 0,
    tornTail: null,
  };
  if (fileSizeBytes === 0) return { slots, fileSizeBytes, fileTail: null, report: emptyReport };

  // Read straight into kernel (WASM) memory: the scan then hashes it in place, no copy-in.
  const buffer = kernels.allocate(fileSizeBytes);
  try {
    const scan = readUntilStable(
      WAL_FILE,
      () => {
        const count = disk.read(WAL_FILE, 0, buffer.bytes());
        if (count !== fileSizeBytes) {
          throw new DiskError('read', WAL_FILE, new Error(`short read ${count}/${fileSizeBytes}`));
        }
        return kernels.journalScan(buffer.bytes());
      },
      (result) => result.failure === null,
      // Two reads agree only when they read the same bytes: two transient faults can fail the
      // same entry the same way, and an interior failure refuses boot.
      (result) => `${scanKey(result)}:${kernels.xxh3_64(buffer.bytes())}`,
    );
    let tornTail: WalOpenReport['tornTail'] = null;
    if (scan.failure !== null) {
      const failure = scan.failure;
      if (failure.kind === 'interior') {
        throw new StorageRefusal(
          WAL_FILE,
          RefusalReason.walInteriorCorruption,
          `entry fails verification (${failure.reason}) and valid entries follow it; ${scan.entryCount} entries verified before it`,
          failure.offset,
        );
      }
      tornTail = { offset: failure.offset, reason: failure.reason, droppedBytes: fileSizeBytes - scan.validEnd };
      logger.log('warn', 'wal_torn_tail_truncated', { file: WAL_FILE, ...tornTail });
      disk.truncate(WAL_FILE, scan.validEnd);
      disk.fsync(WAL_FILE);
    }
    return buildIndex(buffer.bytes(), scan, options, slots, fileSizeBytes, tornTail);
  } finally {
    buffer.release();
  }
}

/** Builds the slot index from the verified prefix of `image` (kernel memory: frames are copied). */
function buildIndex(
  image: Uint8Array,
  scan: JournalScan,
  options: WalOptions,
  slots: (WalEntry | null)[],
  fileSizeBytes: number,
  tornTail: WalOpenReport['tornTail'],
): OpenedFile {
  const checkpointOp = options.checkpointOp;
  let offset = 0;
  let fileEntryCount = 0;
  let staleEntryCount = 0;
  let supersededEntryCount = 0;
  let fileTail: FileTail | null = null;
  while (offset < scan.validEnd) {
    assert(offset + HEADER_SIZE <= scan.validEnd, 'the scan verified whole entries');
    const fields = readPrepareFields(image.subarray(offset, offset + HEADER_SIZE));
    assert(fields.sizeBytes >= HEADER_SIZE && offset + fields.sizeBytes <= scan.validEnd, 'the scan verified the size');
    if (fields.op < 0 || fields.commit < 0) {
      throw new StorageRefusal(WAL_FILE, RefusalReason.walInvalidEntry, 'op or commit above 2^53', offset);
    }
    if (options.cluster !== undefined && fields.cluster !== options.cluster) {
      throw new StorageRefusal(
        WAL_FILE,
        RefusalReason.walClusterMismatch,
        `prepare op ${fields.op} names cluster ${hex(fields.cluster)}, expected ${hex(options.cluster)}`,
        offset,
      );
    }
    fileEntryCount += 1;
    fileTail = { op: fields.op, identity: fields.identity };
    const entry: WalEntry = {
      op: fields.op,
      commit: fields.commit,
      identity: fields.identity,
      parent: fields.parent,
      frame: image.slice(offset, offset + fields.sizeBytes),
      offset,
    };
    offset += fields.sizeBytes;
    if (entry.op < checkpointOp) {
      staleEntryCount += 1;
      continue;
    }
    const slotIndex = entry.op % options.slotCount;
    const occupant = slots[slotIndex] ?? null;
    if (occupant === null) {
      slots[slotIndex] = entry;
    } else if (occupant.op === entry.op) {
      slots[slotIndex] = entry; // Duplicate op: the later append wins.
      supersededEntryCount += 1;
    } else if (occupant.op <= checkpointOp || entry.op <= checkpointOp) {
      // The checkpoint entry may share a slot with op checkpoint + slotCount; the higher wins.
      if (entry.op > occupant.op) slots[slotIndex] = entry;
      supersededEntryCount += 1;
    } else {
      throw new StorageRefusal(
        WAL_FILE,
        RefusalReason.walSlotCollision,
        `ops ${occupant.op} and ${entry.op} both above checkpoint op ${checkpointOp} share slot ${slotIndex} of ${options.slotCount}`,
        entry.offset,
      );
    }
  }
  assert(fileEntryCount === scan.entryCount, 'index agrees with the scan');
  return {
    slots,
    fileSizeBytes: scan.validEnd,
    fileTail,
    report: { fileSizeBytes, fileEntryCount, staleEntryCount, supersededEntryCount, tornTail },
  };
}

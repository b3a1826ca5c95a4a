/**
 * Consumer and consumer-group offsets of one partition (iggy-partition-plane.md §6.2): one file
 * per consumer or group in the partition's directory, `consumer-{id}.offset` / `group-{id}.offset`
 * (id a u32), holding the 16-byte record `offset u64 LE | XXH3-64(offset bytes) u64 LE`.
 *
 * Every store is durable when it returns (temp + fsync + rename + directory fsync,
 * durable-file.ts), so no crash can leave a torn or half-written offset file: a leftover `.tmp` is
 * a write that never reached its rename and is removed.
 *
 * A file that does not verify is therefore damage at rest, and it refuses boot. The reference
 * reads it as absent (with a warning), but offsets are replicated state: a replica that forgot
 * one would silently serve a consumer from another position than its peers (a `next` poll
 * restarting at 0, re-delivering the partition). Refusing lets the operator rejoin the replica by
 * state transfer, which carries the offset tables, instead of diverging. A transient read fault
 * never refuses: the file is re-read until two reads agree (`readUntilStable`).
 */
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Logger } from '../vsr/io.js';
import type { Disk } from './disk.js';
import { DurableWriteError, readUntilStable, StoragePoisoned, temporaryName, writeDurably } from './durable-file.js';
import { RefusalReason, silentLogger, StorageRefusal } from './refusal.js';

export const OFFSET_RECORD_SIZE = 16;
/** Offset files one partition tracks (one per consumer or group that stored an offset). */
export const CONSUMER_OFFSETS_MAX = 64 * 1024;
const U32_MAX = 0xffff_ffff;

export const ConsumerKind = { consumer: 'consumer', group: 'group' } as const;
export type ConsumerKind = (typeof ConsumerKind)[keyof typeof ConsumerKind];

const OFFSET_FILE = /^(consumer|group)-(\d{1,10})\.offset$/;

export function offsetFileName(kind: ConsumerKind, id: number): string {
  assert(Number.isInteger(id) && id >= 0 && id <= U32_MAX, `consumer id ${id}`);
  return `${kind}-${id}.offset`;
}

/** The kind and id an offset file name encodes, or null when it is not one. */
export function parseOffsetFileName(name: string): { kind: ConsumerKind; id: number } | null {
  const match = OFFSET_FILE.exec(name);
  if (match === null) return null;
  const id = Number(match[2]);
  if (id > U32_MAX || String(id) !== match[2]) return null;
  return { kind: match[1] as ConsumerKind, id };
}

export function encodeOffsetRecord(kernels: Kernels, offset: number): Uint8Array {
  assert(Number.isSafeInteger(offset) && offset >= 0, `consumer offset ${offset}`);
  const record = new Uint8Array(OFFSET_RECORD_SIZE);
  const data = new DataView(record.buffer);
  data.setBigUint64(0, BigInt(offset), true);
  data.setBigUint64(8, kernels.xxh3_64(record.subarray(0, 8)), true);
  return record;
}

export type OffsetRecordRead =
  | { readonly ok: true; readonly offset: number }
  | { readonly ok: false; readonly reason: string };

export function decodeOffsetRecord(kernels: Kernels, record: Uint8Array): OffsetRecordRead {
  if (record.byteLength !== OFFSET_RECORD_SIZE) {
    return { ok: false, reason: `${record.byteLength} bytes, expected ${OFFSET_RECORD_SIZE}` };
  }
  const data = new DataView(record.buffer, record.byteOffset, record.byteLength);
  const stored = data.getBigUint64(8, true);
  const computed = kernels.xxh3_64(record.subarray(0, 8));
  if (stored !== computed) return { ok: false, reason: `checksum ${stored} != ${computed}` };
  const offset = data.getBigUint64(0, true);
  if (offset > BigInt(Number.MAX_SAFE_INTEGER)) return { ok: false, reason: `offset ${offset} above 2^53` };
  return { ok: true, offset: Number(offset) };
}

export interface StoredOffset {
  readonly kind: ConsumerKind;
  readonly id: number;
  readonly offset: number;
}

export class ConsumerOffsets {
  private readonly offsets = new Map<string, StoredOffset>();
  private poisonedBy: unknown = null;

  private readonly disk: Disk;
  private readonly kernels: Kernels;
  private readonly logger: Logger;

  private constructor(disk: Disk, kernels: Kernels, logger: Logger) {
    this.disk = disk;
    this.kernels = kernels;
    this.logger = logger;
  }

  /** Loads every offset file. Throws StorageRefusal on one that does not verify. */
  static load(disk: Disk, kernels: Kernels, logger: Logger = silentLogger): ConsumerOffsets {
    const offsets = new ConsumerOffsets(disk, kernels, logger);
    let removedTemporary = false;
    for (const name of disk.list()) {
      const target = name.endsWith('.tmp') ? parseOffsetFileName(name.slice(0, -'.tmp'.length)) : null;
      if (target !== null) {
        disk.remove(name);
        removedTemporary = true;
        logger.log('info', 'consumer_offset_temporary_removed', { file: name });
        continue;
      }
      const key = parseOffsetFileName(name);
      if (key === null) continue;
      if (offsets.offsets.size >= CONSUMER_OFFSETS_MAX) {
        throw new StorageRefusal(name, RefusalReason.consumerOffsetCorrupt, `more than ${CONSUMER_OFFSETS_MAX} offset files`);
      }
      const read = readUntilStable(
        name,
        () => (disk.size(name) === OFFSET_RECORD_SIZE ? decodeOffsetRecord(kernels, disk.readAll(name)) : sizeFailure(disk, name)),
        (result) => result.ok,
        (result) => (result.ok ? 'ok' : result.reason),
      );
      if (!read.ok) throw new StorageRefusal(name, RefusalReason.consumerOffsetCorrupt, read.reason);
      offsets.offsets.set(name, { ...key, offset: read.offset });
    }
    if (removedTemporary) disk.fsyncDirectory();
    return offsets;
  }

  get(kind: ConsumerKind, id: number): number | null {
    return this.offsets.get(offsetFileName(kind, id))?.offset ?? null;
  }

  /** Every stored offset, in file name order. */
  entries(): StoredOffset[] {
    return [...this.offsets.keys()].sort().map((name) => this.offsets.get(name)!);
  }

  /**
   * Stores `offset` durably, then in memory (§6.2: persist, then apply). Throws DurableWriteError
   * on an IO failure: the old value stays in effect unless the failure came after the rename,
   * which poisons the instance (the file may hold either value).
   */
  store(kind: ConsumerKind, id: number, offset: number): void {
    this.checkUsable();
    const name = offsetFileName(kind, id);
    if (!this.offsets.has(name) && this.offsets.size >= CONSUMER_OFFSETS_MAX) {
      throw new RangeError(`partition holds ${CONSUMER_OFFSETS_MAX} consumer offsets already`);
    }
    try {
      writeDurably(this.disk, name, [encodeOffsetRecord(this.kernels, offset)]);
    } catch (error) {
      if (!(error instanceof DurableWriteError && !error.targetUncertain)) this.poison(error);
      throw error;
    }
    this.offsets.set(name, { kind, id, offset });
  }

  /** Removes a stored offset durably; false when there was none. */
  delete(kind: ConsumerKind, id: number): boolean {
    this.checkUsable();
    const name = offsetFileName(kind, id);
    if (!this.offsets.has(name)) return false;
    this.unlink([name]);
    this.offsets.delete(name);
    return true;
  }

  /** Removes every stored offset durably (a purge, §3.9 step 3). */
  clear(): void {
    this.checkUsable();
    this.unlink([...this.offsets.keys()]);
    this.offsets.clear();
  }

  private unlink(names: readonly string[]): void {
    try {
      for (const name of names) this.disk.remove(name);
      this.disk.fsyncDirectory();
    } catch (error) {
      this.poison(error);
      throw error;
    }
  }

  private checkUsable(): void {
    if (this.poisonedBy !== null) throw new StoragePoisoned(this.disk.location, this.poisonedBy);
  }

  private poison(cause: unknown): void {
    this.poisonedBy ??= cause;
    this.logger.log('error', 'consumer_offsets_poisoned', { location: this.disk.location, error: String(cause) });
  }
}

function sizeFailure(disk: Disk, name: string): OffsetRecordRead {
  return { ok: false, reason: `${disk.size(name)} bytes, expected ${OFFSET_RECORD_SIZE}` };
}

/** The temp file a store writes first; exported for tests. */
export function offsetTemporaryName(kind: ConsumerKind, id: number): string {
  return temporaryName(offsetFileName(kind, id));
}

/**
 * The segment stores of one partition group on one replica, over one Disk: each store is a
 * PartitionLog whose files carry the prefix `p{namespace}.{incarnation}-` (both in hex), so a
 * store's files are found, opened and removed by name alone. Structurally the `PartitionStores`
 * port of src/partition/store.ts (this layer sits below it and cannot name it).
 */
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { Disk } from './disk.js';
import { PartitionLog } from './partition-log.js';
import { segmentIndexName, segmentLogName } from './partition-segment.js';
import { PrefixedDisk } from './prefixed-disk.js';
import type { Logger } from '../vsr/io.js';

export interface StoreKeyOf {
  readonly namespace: number;
  readonly incarnation: number;
  readonly partitionId: number;
}

export interface DiskPartitionStoresOptions {
  readonly segmentSizeBytes: number;
  readonly pendingBytesMax?: number;
  readonly logger?: Logger;
}

const PREFIX = /^p([0-9a-f]{1,14})\.([0-9a-f]{1,14})-/;
const STAGING_PREFIX = /^s([0-9a-f]{1,14})\.([0-9a-f]{1,14})-/;

type KeyNames = { readonly namespace: number; readonly incarnation: number };

function prefixOf(letter: 'p' | 's', key: KeyNames): string {
  assert(Number.isSafeInteger(key.namespace) && key.namespace >= 0, 'namespace');
  assert(Number.isSafeInteger(key.incarnation) && key.incarnation >= 0, 'incarnation');
  return `${letter}${key.namespace.toString(16)}.${key.incarnation.toString(16)}-`;
}

export function storePrefix(key: KeyNames): string {
  return prefixOf('p', key);
}

/**
 * A store's staging log: the start of its log being fetched from a peer (src/partition/
 * backfill.ts). Boot never reads it as a store; `adoptStaging` moves its segments in.
 */
export function stagingPrefix(key: KeyNames): string {
  return prefixOf('s', key);
}

export class DiskPartitionStores {
  private readonly disk: Disk;
  private readonly kernels: Kernels;
  private readonly options: DiskPartitionStoresOptions;
  private readonly open_ = new Map<string, PartitionLog>();

  constructor(disk: Disk, kernels: Kernels, options: DiskPartitionStoresOptions) {
    this.disk = disk;
    this.kernels = kernels;
    this.options = options;
  }

  open(key: StoreKeyOf): PartitionLog {
    return this.openPrefixed(storePrefix(key), key);
  }

  /** The staging log of `key`'s store, created empty at offset 0 when there is none. */
  openStaging(key: StoreKeyOf): PartitionLog {
    return this.openPrefixed(stagingPrefix(key), key);
  }

  /** The stores that have a staging log. */
  listStaging(): StoreKeyOf[] {
    return this.listMatching(STAGING_PREFIX);
  }

  removeStaging(key: StoreKeyOf): void {
    this.removePrefixed(stagingPrefix(key));
  }

  /**
   * Moves the staging log's segments in front of the store's, which must start right where the
   * staging log ends. Newest segment first, each durable before the next (its log renamed, then
   * its index, then the directory fsynced): a crash in between leaves a store that starts later
   * and a staging log that ends where it starts, never a hole. The staging log is gone after.
   */
  adoptStaging(key: StoreKeyOf): PartitionLog {
    const live = this.open(key);
    const staged = this.openStaging(key);
    assert(staged.nextOffset === live.stats().startOffset, 'the staging log ends where the store starts');
    const from = stagingPrefix(key);
    const to = storePrefix(key);
    const segments = staged.handOverSegments();
    this.open_.delete(from);
    for (const start of [...segments.startOffsets].reverse()) {
      for (const name of [segmentLogName(start), segmentIndexName(start)]) this.disk.rename(from + name, to + name);
      this.disk.fsyncDirectory();
    }
    live.adoptOlderSegments(segments);
    this.removePrefixed(from);
    return live;
  }

  /**
   * Moves the staging log's segments after the store's, which must end right where the staging
   * log starts (a checkpoint's messages fetched before it was installed). Oldest segment first,
   * each durable before the next: a crash in between leaves a shorter store and a staging log
   * that starts where it ends. The staging log is gone after.
   */
  appendStaging(key: StoreKeyOf): PartitionLog {
    const live = this.open(key);
    const staged = this.openStaging(key);
    assert(staged.stats().startOffset === live.nextOffset, 'the staging log starts where the store ends');
    live.flush();
    const from = stagingPrefix(key);
    const to = storePrefix(key);
    const segments = staged.handOverSegments();
    this.open_.delete(from);
    for (const start of segments.startOffsets) {
      for (const name of [segmentLogName(start), segmentIndexName(start)]) this.disk.rename(from + name, to + name);
      this.disk.fsyncDirectory();
    }
    live.adoptNewerSegments(segments);
    this.removePrefixed(from);
    return live;
  }

  /** Where the staging log of `key` starts and ends, or null when there is none. */
  stagingRange(key: StoreKeyOf): { readonly startOffset: number; readonly nextOffset: number } | null {
    if (!this.disk.list().some((name) => name.startsWith(stagingPrefix(key)))) return null;
    const staged = this.openStaging(key);
    return { startOffset: staged.stats().startOffset, nextOffset: staged.nextOffset };
  }

  /**
   * Keeps what a store that fell behind its checkpoint still holds: when it starts at offset 0
   * (or right where its staging log ends), its segments move to the end of the staging log,
   * oldest first, each durable before the next (a crash leaves both logs contiguous), and the
   * store is left empty. A backfill then fetches only what the staging log lacks. Returns whether
   * anything moved.
   */
  keepAsStaging(key: StoreKeyOf): boolean {
    const live = this.open(key);
    const stats = live.stats();
    if (stats.messagesCount === 0) return false;
    let staged = this.openStaging(key);
    if (staged.nextOffset !== stats.startOffset) {
      // A staging log that does not continue into the store: a store from offset 0 is worth more.
      if (stats.startOffset !== 0) return false;
      this.removeStaging(key);
      staged = this.openStaging(key);
    }
    live.flush();
    staged.flush();
    const from = storePrefix(key);
    const to = stagingPrefix(key);
    const names = this.disk.list().filter((name) => name.startsWith(from));
    this.open_.delete(from);
    this.open_.delete(to);
    const starts = live.segmentInfos().filter((info) => info.batchCount > 0).map((info) => info.startOffset);
    for (const start of starts) {
      for (const name of [segmentLogName(start), segmentIndexName(start)]) this.disk.rename(from + name, to + name);
      this.disk.fsyncDirectory();
    }
    // What is left (an empty segment) goes; the store reopens empty at 0 for its caller to purge.
    for (const name of names) if (this.disk.exists(name)) this.disk.remove(name);
    this.disk.fsyncDirectory();
    return true;
  }

  private openPrefixed(prefix: string, key: StoreKeyOf): PartitionLog {
    const opened = this.open_.get(prefix);
    if (opened !== undefined) return opened;
    const log = PartitionLog.open(new PrefixedDisk(this.disk, prefix), this.kernels, {
      partitionId: key.partitionId,
      segmentSizeBytes: this.options.segmentSizeBytes,
      ...(this.options.pendingBytesMax === undefined ? {} : { pendingBytesMax: this.options.pendingBytesMax }),
      ...(this.options.logger === undefined ? {} : { logger: this.options.logger }),
    });
    this.open_.set(prefix, log);
    return log;
  }

  /** The stores on the disk. Their partition id is not in a name: -1 (open takes the caller's). */
  list(): StoreKeyOf[] {
    return this.listMatching(PREFIX);
  }

  private listMatching(pattern: RegExp): StoreKeyOf[] {
    const seen = new Map<string, StoreKeyOf>();
    for (const name of this.disk.list()) {
      const match = pattern.exec(name);
      if (match === null || seen.has(match[0])) continue;
      seen.set(match[0], { namespace: parseInt(match[1]!, 16), incarnation: parseInt(match[2]!, 16), partitionId: -1 });
    }
    return [...seen.values()];
  }

  remove(key: StoreKeyOf): void {
    this.removePrefixed(storePrefix(key));
  }

  private removePrefixed(prefix: string): void {
    this.open_.delete(prefix);
    const names = this.disk.list().filter((name) => name.startsWith(prefix));
    if (names.length === 0) return;
    for (const name of names) this.disk.remove(name);
    this.disk.fsyncDirectory();
  }
}

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

export function storePrefix(key: { readonly namespace: number; readonly incarnation: number }): string {
  assert(Number.isSafeInteger(key.namespace) && key.namespace >= 0, 'namespace');
  assert(Number.isSafeInteger(key.incarnation) && key.incarnation >= 0, 'incarnation');
  return `p${key.namespace.toString(16)}.${key.incarnation.toString(16)}-`;
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
    const prefix = storePrefix(key);
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
    const seen = new Map<string, StoreKeyOf>();
    for (const name of this.disk.list()) {
      const match = PREFIX.exec(name);
      if (match === null || seen.has(match[0])) continue;
      seen.set(match[0], { namespace: parseInt(match[1]!, 16), incarnation: parseInt(match[2]!, 16), partitionId: -1 });
    }
    return [...seen.values()];
  }

  remove(key: StoreKeyOf): void {
    const prefix = storePrefix(key);
    this.open_.delete(prefix);
    const names = this.disk.list().filter((name) => name.startsWith(prefix));
    if (names.length === 0) return;
    for (const name of names) this.disk.remove(name);
    this.disk.fsyncDirectory();
  }
}

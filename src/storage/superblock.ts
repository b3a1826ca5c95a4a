/**
 * The superblock: the replica's durable VSR state (view, log_view, commit_max and the checkpoint
 * pairing) in two alternately written slot files, `superblock.a` and `superblock.b`
 * (iggy-metadata-plane.md §4.5; TigerBeetle's superblock, vsr-invariants-and-testing.md §1.9).
 *
 * Record (little-endian, RECORD_SIZE = 102 bytes):
 *   0  magic u32 = 0x5342_4C4B ("SBLK")     4  version u16 = 1      6  reserved u16 = 0
 *   8  sequence u64 (1 for the first record, +1 per write)
 *  16  parent_checksum u64: the previous record's checksum (0 for sequence 1). The reference
 *      leaves this 0; we chain, so a slot that silently went back in time is detected as a fork.
 *  24  payload_len u32                    28  payload: VsrState (66 bytes, below); then, when
 *      flags has VSR_FLAG_CHECKPOINT_ANCHOR, the checkpoint anchor u128; then k view headers
 *      (256-byte prepare headers, ascending op, k <= VIEW_HEADERS_MAX). These two are vrmeta
 *      extensions: without them the record is the reference's, byte for byte.
 *  28 + payload_len  checksum u64: XXH3-64 of every byte before it (the record's identity, what a
 *      child's parent names). With k = 0 the record is 102 bytes and the checksum sits at 94.
 * VsrState: cluster u128 @0, replica u8 @16, replica_count u8 @17, view u32 @18, log_view u32 @22,
 *   commit_max u64 @26, checkpoint_op u64 @34, checkpoint_checksum u128 @42, flags u64 @58
 *   (the reference's offset_frontier, partition plane only; vrmeta keeps VsrState flags here).
 *
 * Slots: record `sequence` lives in slot (sequence - 1) mod 2, so a write always targets the slot
 * NOT holding the newest record and a crash mid-write (each write is temp + fsync + rename +
 * directory fsync) leaves the newest record intact. After any write the slots hold sequences n
 * and n - 1, the newer chaining to the older.
 *
 * Read rules (each refusal stops boot AND blocks writes, since `open` returns no handle):
 * - both slot files absent: fresh replica, no state;
 * - one absent: accepted only when the other holds sequence 1 (the second slot was never made
 *   durable); otherwise the missing slot may have held the newest state;
 * - any present slot that does not verify, or has an unknown version: refuse (a corrupt slot may
 *   have held the newer sequence: falling back to the older one could regress the view and let
 *   this replica vote twice in a view);
 * - both verify: sequences must be adjacent and in their own slots, the newer must chain to the
 *   older and must not regress view, log_view or commit_max; the newer wins;
 * - the winner's state must hold log_view <= view and checkpoint_op <= commit_max.
 */
import type { Kernels } from '../kernels/kernel.js';
import { REPLICAS_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { VIEW_HEADERS_MAX, VSR_FLAG_CHECKPOINT_ANCHOR, VSR_FLAGS_KNOWN, type Logger, type VsrState } from '../vsr/io.js';
import type { Disk } from './disk.js';
import { DurableWriteError, canWriteDurablyAsync, readUntilStable, temporaryName, writeDurably, writeDurablyAsync } from './durable-file.js';
import { hex } from './prepare-frame.js';
import { RefusalReason, silentLogger, StorageRefusal } from './refusal.js';

export const SUPERBLOCK_FILES = ['superblock.a', 'superblock.b'] as const;
export const SUPERBLOCK_MAGIC = 0x5342_4c4b;
export const SUPERBLOCK_VERSION = 1;
export const SUPERBLOCK_HEADER_SIZE = 28;
export const VSR_STATE_SIZE = 66;
/** The record without view headers (the reference's layout). */
export const SUPERBLOCK_RECORD_SIZE = SUPERBLOCK_HEADER_SIZE + VSR_STATE_SIZE + 8;
const VIEW_HEADER_SIZE = 256;
const ANCHOR_SIZE = 16;
/** The largest record: the anchor and every view header present. */
export const SUPERBLOCK_RECORD_SIZE_MAX = SUPERBLOCK_RECORD_SIZE + ANCHOR_SIZE + VIEW_HEADERS_MAX * VIEW_HEADER_SIZE;

assert(SUPERBLOCK_RECORD_SIZE === 102);

const U64_MASK = 0xffff_ffff_ffff_ffffn;
const U128_MASK = (1n << 128n) - 1n;

/** VsrState as stored (the flags live at the reference's offset_frontier). */
export type StoredVsrState = VsrState;

export interface SuperblockRecord {
  readonly sequence: number;
  readonly parentChecksum: bigint;
  readonly checksum: bigint;
  readonly state: StoredVsrState;
}

export type SlotRead =
  | { readonly status: 'absent' }
  | { readonly status: 'valid'; readonly record: SuperblockRecord }
  | { readonly status: 'corrupt'; readonly reason: RefusalReason; readonly detail: string; readonly sizeBytes: number };

// -------------------------------------------------------------------------------------------------
// Record codec.

export function encodeVsrState(state: VsrState, target: Uint8Array, offset: number): void {
  const view = new DataView(target.buffer, target.byteOffset + offset, VSR_STATE_SIZE);
  view.setBigUint64(0, state.cluster & U64_MASK, true);
  view.setBigUint64(8, (state.cluster >> 64n) & U64_MASK, true);
  view.setUint8(16, state.replica);
  view.setUint8(17, state.replicaCount);
  view.setUint32(18, state.view, true);
  view.setUint32(22, state.logView, true);
  view.setBigUint64(26, BigInt(state.commitMax), true);
  view.setBigUint64(34, BigInt(state.checkpointOp), true);
  view.setBigUint64(42, state.checkpointChecksum & U64_MASK, true);
  view.setBigUint64(50, (state.checkpointChecksum >> 64n) & U64_MASK, true);
  const flags = (state.flags & ~VSR_FLAG_CHECKPOINT_ANCHOR) | (state.checkpointAnchor === undefined ? 0 : VSR_FLAG_CHECKPOINT_ANCHOR);
  view.setBigUint64(58, BigInt(flags), true);
}

export function encodeSuperblockRecord(
  kernels: Kernels,
  sequence: number,
  parentChecksum: bigint,
  state: VsrState,
): { bytes: Uint8Array; checksum: bigint } {
  const viewHeaders = state.viewHeaders ?? new Uint8Array(0);
  assert(viewHeaders.byteLength % VIEW_HEADER_SIZE === 0, 'view headers are whole headers');
  assert(viewHeaders.byteLength <= VIEW_HEADERS_MAX * VIEW_HEADER_SIZE, 'view headers are bounded');
  const anchorSize = state.checkpointAnchor === undefined ? 0 : ANCHOR_SIZE;
  const payloadLength = VSR_STATE_SIZE + anchorSize + viewHeaders.byteLength;
  const size = SUPERBLOCK_HEADER_SIZE + payloadLength + 8;
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, SUPERBLOCK_MAGIC, true);
  view.setUint16(4, SUPERBLOCK_VERSION, true);
  view.setUint16(6, 0, true);
  view.setBigUint64(8, BigInt(sequence), true);
  view.setBigUint64(16, parentChecksum, true);
  view.setUint32(24, payloadLength, true);
  encodeVsrState(state, bytes, SUPERBLOCK_HEADER_SIZE);
  if (state.checkpointAnchor !== undefined) {
    view.setBigUint64(SUPERBLOCK_HEADER_SIZE + VSR_STATE_SIZE, state.checkpointAnchor & U64_MASK, true);
    view.setBigUint64(SUPERBLOCK_HEADER_SIZE + VSR_STATE_SIZE + 8, (state.checkpointAnchor >> 64n) & U64_MASK, true);
  }
  bytes.set(viewHeaders, SUPERBLOCK_HEADER_SIZE + VSR_STATE_SIZE + anchorSize);
  const checksum = kernels.xxh3_64(bytes.subarray(0, size - 8));
  view.setBigUint64(size - 8, checksum, true);
  return { bytes, checksum };
}

function safe(value: bigint): number | null {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : null;
}

/** Why a state is not one this replica could have written (null when it is). */
export function vsrStateProblem(state: StoredVsrState): string | null {
  if (state.replicaCount < 1 || state.replicaCount > REPLICAS_MAX) return `replica_count ${state.replicaCount}`;
  if (state.replica >= state.replicaCount) return `replica ${state.replica} >= replica_count ${state.replicaCount}`;
  if (state.logView > state.view) return `log_view ${state.logView} > view ${state.view}`;
  if (state.checkpointOp > state.commitMax) {
    return `checkpoint_op ${state.checkpointOp} > commit_max ${state.commitMax}`;
  }
  if (state.flags > VSR_FLAGS_KNOWN || !Number.isInteger(state.flags)) return `unknown flags ${state.flags}`;
  return null;
}

/** Decodes and verifies one slot's bytes. Never throws on bad bytes: returns the reason. */
export function decodeSuperblockRecord(kernels: Kernels, bytes: Uint8Array): SlotRead {
  const corrupt = (reason: RefusalReason, detail: string): SlotRead => ({
    status: 'corrupt',
    reason,
    detail,
    sizeBytes: bytes.byteLength,
  });
  const slotCorrupt = RefusalReason.superblockSlotCorrupt;
  if (bytes.byteLength < SUPERBLOCK_HEADER_SIZE) return corrupt(slotCorrupt, `${bytes.byteLength} bytes, shorter than a header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0, true);
  if (magic !== SUPERBLOCK_MAGIC) return corrupt(slotCorrupt, `magic ${hex(BigInt(magic), 4)}`);
  // The checksum decides before any field is trusted; a version we do not know is reported as
  // such only when the record is intact (a bit flip is corruption, not a newer release). The
  // record's length must agree with its (not yet verified) payload_len: a flipped payload_len
  // then fails either the length or the checksum.
  const claimedPayload = bytes.byteLength >= SUPERBLOCK_HEADER_SIZE ? view.getUint32(24, true) : 0;
  const extension = claimedPayload - VSR_STATE_SIZE;
  const payloadShapeOk =
    extension >= 0 &&
    extension <= ANCHOR_SIZE + VIEW_HEADERS_MAX * VIEW_HEADER_SIZE &&
    (extension % VIEW_HEADER_SIZE === 0 || extension % VIEW_HEADER_SIZE === ANCHOR_SIZE);
  const size = SUPERBLOCK_HEADER_SIZE + claimedPayload + 8;
  if (!payloadShapeOk || bytes.byteLength !== size) {
    const version = view.getUint16(4, true);
    if (version !== SUPERBLOCK_VERSION) {
      return corrupt(RefusalReason.superblockVersion, `version ${version} (this build reads ${SUPERBLOCK_VERSION}), ${bytes.byteLength} bytes`);
    }
    if (!payloadShapeOk) return corrupt(slotCorrupt, `payload_len ${claimedPayload}, ${bytes.byteLength} bytes`);
    return corrupt(slotCorrupt, `${bytes.byteLength} bytes, expected ${size} for payload_len ${claimedPayload}`);
  }
  const stored = view.getBigUint64(size - 8, true);
  const actual = kernels.xxh3_64(bytes.subarray(0, size - 8));
  if (stored !== actual) return corrupt(slotCorrupt, `checksum ${hex(stored, 8)} != computed ${hex(actual, 8)}`);
  const version = view.getUint16(4, true);
  if (version !== SUPERBLOCK_VERSION) {
    return corrupt(RefusalReason.superblockVersion, `version ${version} (this build reads ${SUPERBLOCK_VERSION})`);
  }
  if (view.getUint16(6, true) !== 0) return corrupt(slotCorrupt, 'reserved bytes are not zero');
  const sequence = safe(view.getBigUint64(8, true));
  const p = SUPERBLOCK_HEADER_SIZE;
  const commitMax = safe(view.getBigUint64(p + 26, true));
  const checkpointOp = safe(view.getBigUint64(p + 34, true));
  const flags = safe(view.getBigUint64(p + 58, true));
  if (sequence === null || sequence < 1 || commitMax === null || checkpointOp === null || flags === null) {
    return corrupt(RefusalReason.superblockInvalidState, 'sequence, commit_max, checkpoint_op or flags out of range');
  }
  const state: StoredVsrState = {
    cluster: view.getBigUint64(p, true) | (view.getBigUint64(p + 8, true) << 64n),
    replica: view.getUint8(p + 16),
    replicaCount: view.getUint8(p + 17),
    view: view.getUint32(p + 18, true),
    logView: view.getUint32(p + 22, true),
    commitMax,
    checkpointOp,
    checkpointChecksum: view.getBigUint64(p + 42, true) | (view.getBigUint64(p + 50, true) << 64n),
    flags: flags & ~VSR_FLAG_CHECKPOINT_ANCHOR,
  };
  // The flag, now verified, must agree with the payload's shape.
  const anchorSize = (flags & VSR_FLAG_CHECKPOINT_ANCHOR) !== 0 ? ANCHOR_SIZE : 0;
  if ((extension - anchorSize) % VIEW_HEADER_SIZE !== 0 || extension < anchorSize) {
    return corrupt(RefusalReason.superblockInvalidState, `payload_len ${claimedPayload} does not match flags ${flags}`);
  }
  const withExtensions: StoredVsrState = {
    ...state,
    ...(anchorSize > 0
      ? { checkpointAnchor: view.getBigUint64(p + VSR_STATE_SIZE, true) | (view.getBigUint64(p + VSR_STATE_SIZE + 8, true) << 64n) }
      : {}),
    ...(extension > anchorSize ? { viewHeaders: bytes.slice(p + VSR_STATE_SIZE + anchorSize, size - 8) } : {}),
  };
  const problem = vsrStateProblem(state);
  if (problem !== null) return corrupt(RefusalReason.superblockInvalidState, problem);
  return {
    status: 'valid',
    record: { sequence, parentChecksum: view.getBigUint64(16, true), checksum: stored, state: withExtensions },
  };
}

// -------------------------------------------------------------------------------------------------
// Reading both slots.

/** A record is never larger than this; a bigger slot file is corrupt, and not worth reading whole. */
const SLOT_READ_SIZE_MAX = SUPERBLOCK_RECORD_SIZE_MAX + 4096;

export function readSlot(disk: Disk, kernels: Kernels, name: string): SlotRead {
  if (!disk.exists(name)) return { status: 'absent' };
  return readUntilStable(
    name,
    (): SlotRead => {
      const sizeBytes = disk.size(name);
      if (sizeBytes > SLOT_READ_SIZE_MAX) {
        return { status: 'corrupt', reason: RefusalReason.superblockSlotCorrupt, detail: `${sizeBytes} bytes`, sizeBytes };
      }
      const bytes = new Uint8Array(sizeBytes);
      const count = disk.read(name, 0, bytes);
      return decodeSuperblockRecord(kernels, bytes.subarray(0, count));
    },
    (result) => result.status === 'valid',
    (result) => (result.status === 'corrupt' ? `${result.reason}:${result.detail}` : result.status),
  );
}

export type SuperblockVerdict =
  | { readonly status: 'fresh' }
  | { readonly status: 'valid'; readonly newest: SuperblockRecord; readonly slotIndex: number }
  | { readonly status: 'refused'; readonly file: string; readonly reason: RefusalReason; readonly detail: string };

/** The boot decision over both slots (shared with `inspect`, which reports instead of throwing). */
export function judgeSuperblock(slots: readonly [SlotRead, SlotRead]): SuperblockVerdict {
  const [a, b] = slots;
  const refuse = (file: string, reason: RefusalReason, detail: string): SuperblockVerdict => ({
    status: 'refused',
    file,
    reason,
    detail,
  });
  for (const [index, slot] of slots.entries()) {
    if (slot.status === 'corrupt') return refuse(SUPERBLOCK_FILES[index]!, slot.reason, slot.detail);
  }
  for (const [index, slot] of slots.entries()) {
    if (slot.status === 'valid' && (slot.record.sequence - 1) % 2 !== index) {
      return refuse(SUPERBLOCK_FILES[index]!, RefusalReason.superblockSequence, `sequence ${slot.record.sequence} in the wrong slot`);
    }
  }
  if (a.status === 'absent' && b.status === 'absent') return { status: 'fresh' };
  if (a.status === 'absent' || b.status === 'absent') {
    const presentIndex = a.status === 'absent' ? 1 : 0;
    const present = slots[presentIndex];
    assert(present.status === 'valid', 'corrupt slots were refused above');
    // Only the very first write leaves one slot: sequence 1, in slot a.
    if (present.record.sequence !== 1) {
      return refuse(
        SUPERBLOCK_FILES[1 - presentIndex]!,
        RefusalReason.superblockSlotMissing,
        `missing while ${SUPERBLOCK_FILES[presentIndex]} holds sequence ${present.record.sequence}`,
      );
    }
    return { status: 'valid', newest: present.record, slotIndex: presentIndex };
  }
  assert(a.status === 'valid' && b.status === 'valid');
  const newerIndex = a.record.sequence > b.record.sequence ? 0 : 1;
  const newer = newerIndex === 0 ? a.record : b.record;
  const older = newerIndex === 0 ? b.record : a.record;
  const newerName = SUPERBLOCK_FILES[newerIndex]!;
  if (newer.sequence !== older.sequence + 1) {
    return refuse(newerName, RefusalReason.superblockSequence, `sequences ${older.sequence} and ${newer.sequence} are not adjacent`);
  }
  if (newer.parentChecksum !== older.checksum) {
    return refuse(
      newerName,
      RefusalReason.superblockFork,
      `sequence ${newer.sequence} names parent ${hex(newer.parentChecksum, 8)}, the older slot is ${hex(older.checksum, 8)}`,
    );
  }
  const regress = stateRegression(older.state, newer.state);
  if (regress !== null) return refuse(newerName, RefusalReason.superblockInvalidState, regress);
  return { status: 'valid', newest: newer, slotIndex: newerIndex };
}

/** Why `next` could not have been written after `previous` (null when it could). */
function stateRegression(previous: VsrState, next: VsrState): string | null {
  if (next.cluster !== previous.cluster || next.replica !== previous.replica || next.replicaCount !== previous.replicaCount) {
    return 'cluster, replica or replica_count changed between records';
  }
  if (next.view < previous.view) return `view regressed ${previous.view} -> ${next.view}`;
  if (next.logView < previous.logView) return `log_view regressed ${previous.logView} -> ${next.logView}`;
  if (next.commitMax < previous.commitMax) return `commit_max regressed ${previous.commitMax} -> ${next.commitMax}`;
  return null;
}

// -------------------------------------------------------------------------------------------------
// The handle.

export interface SuperblockWriteOptions {
  /**
   * A state transfer installs another replica's checkpoint: checkpoint_op may then move by more
   * than a local checkpoint would, and its checksum changes with it. Without this flag the
   * checkpoint op is monotonic and an unchanged op must keep its checksum.
   */
  readonly stateTransfer?: boolean;
}

/** A record checked and encoded, not yet durable. */
interface PendingRecord {
  readonly name: string;
  readonly slotIndex: number;
  readonly sequence: number;
  readonly parentChecksum: bigint;
  readonly checksum: bigint;
  readonly bytes: Uint8Array;
  readonly state: StoredVsrState;
}

export class Superblock {
  private readonly disk: Disk;
  private readonly kernels: Kernels;
  private readonly logger: Logger;
  private newest: SuperblockRecord | null;
  private newestSlotIndex: number;

  private constructor(disk: Disk, kernels: Kernels, logger: Logger, newest: SuperblockRecord | null, slotIndex: number) {
    this.disk = disk;
    this.kernels = kernels;
    this.logger = logger;
    this.newest = newest;
    this.newestSlotIndex = slotIndex;
  }

  /** Reads and verifies both slots. Throws StorageRefusal when boot must stop. */
  static open(disk: Disk, kernels: Kernels, logger: Logger = silentLogger): Superblock {
    for (const name of SUPERBLOCK_FILES) {
      // Remains of a write that crashed before its rename; the slot itself is intact.
      if (disk.exists(temporaryName(name))) disk.remove(temporaryName(name));
    }
    const verdict = judgeSuperblock([readSlot(disk, kernels, SUPERBLOCK_FILES[0]), readSlot(disk, kernels, SUPERBLOCK_FILES[1])]);
    switch (verdict.status) {
      case 'refused':
        throw new StorageRefusal(verdict.file, verdict.reason, verdict.detail);
      case 'fresh':
        return new Superblock(disk, kernels, logger, null, 1);
      case 'valid':
        return new Superblock(disk, kernels, logger, verdict.newest, verdict.slotIndex);
    }
  }

  /** The newest durable state, or null on a fresh replica. */
  get state(): StoredVsrState | null {
    return this.newest?.state ?? null;
  }

  /** Sequence of the newest acknowledged record (0 on a fresh replica). */
  get sequence(): number {
    return this.newest?.sequence ?? 0;
  }

  /**
   * Durably writes `state` as the next record. Asserts the VSR invariants (a violation is a bug
   * in the caller, and persisting it would be worse than crashing): log_view <= view,
   * checkpoint_op <= commit_max, identity unchanged, view, log_view and commit_max monotonic,
   * checkpoint_op monotonic unless `stateTransfer`.
   *
   * A failed write (DurableWriteError) changes nothing in memory and may be retried (the
   * reference retries with backoff, withholding view-scoped sends meanwhile). The retry targets
   * the same slot with the same sequence, so whatever the failed attempt left in that slot (the
   * old record, or the attempt itself if its rename landed) still chains to the other slot: no
   * crash between attempts can leave two records that do not verify as a pair.
   */
  write(state: VsrState, options: SuperblockWriteOptions = {}): void {
    const next = this.next(state, options);
    try {
      writeDurably(this.disk, next.name, [next.bytes]);
    } catch (error) {
      this.failed(next, error);
      throw error;
    }
    this.committed(next);
  }

  /** The disk can run `writeAsync`'s fsyncs off the event loop. */
  get canWriteAsync(): boolean {
    return canWriteDurablyAsync(this.disk);
  }

  /**
   * `write` with its fsyncs on the thread pool: the same checks up front (assertions throw here),
   * then `done` on a later turn with null or the DurableWriteError `write` would have thrown.
   * Nothing else may write the superblock until then; the record becomes `state` only on success.
   */
  writeAsync(state: VsrState, options: SuperblockWriteOptions, live: () => boolean, done: (error: DurableWriteError | null) => void): void {
    const next = this.next(state, options);
    writeDurablyAsync(this.disk, next.name, [next.bytes], live, (error) => {
      if (error !== null) this.failed(next, error);
      else this.committed(next);
      done(error);
    });
  }

  /** Checks `state` against the newest record and encodes the next one (nothing written). */
  private next(state: VsrState, options: SuperblockWriteOptions): PendingRecord {
    const stored: StoredVsrState = state;
    assert(Number.isSafeInteger(state.commitMax) && state.commitMax >= 0, 'commit_max is an op');
    assert(Number.isSafeInteger(state.checkpointOp) && state.checkpointOp >= 0, 'checkpoint_op is an op');
    assert(Number.isInteger(state.view) && state.view >= 0 && state.view <= 0xffff_ffff, 'view is a u32');
    assert(Number.isInteger(state.logView) && state.logView >= 0, 'log_view is a u32');
    assert(state.cluster >= 0n && state.cluster <= U128_MASK, 'cluster is a u128');
    assert(state.checkpointChecksum >= 0n && state.checkpointChecksum <= U128_MASK, 'checkpoint checksum is a u128');
    const problem = vsrStateProblem(stored);
    assert(problem === null, `superblock write of an invalid state: ${problem}`);
    const previous = this.newest;
    if (previous !== null) {
      const regression = stateRegression(previous.state, state);
      assert(regression === null, `superblock write: ${regression}`);
      if (options.stateTransfer !== true) {
        const before = previous.state;
        assert(state.checkpointOp >= before.checkpointOp, `checkpoint_op regressed ${before.checkpointOp} -> ${state.checkpointOp}`);
        assert(
          state.checkpointOp !== before.checkpointOp || state.checkpointChecksum === before.checkpointChecksum,
          'checkpoint checksum changed without a new checkpoint op',
        );
      }
    }
    const sequence = (previous?.sequence ?? 0) + 1;
    const slotIndex = (sequence - 1) % 2;
    assert(previous === null || slotIndex !== this.newestSlotIndex, 'a write never targets the newest slot');
    const record = encodeSuperblockRecord(this.kernels, sequence, previous?.checksum ?? 0n, state);
    return { name: SUPERBLOCK_FILES[slotIndex]!, slotIndex, sequence, parentChecksum: previous?.checksum ?? 0n, checksum: record.checksum, bytes: record.bytes, state: stored };
  }

  private failed(next: PendingRecord, error: unknown): void {
    if (error instanceof DurableWriteError) {
      this.logger.log('warn', 'superblock_write_failed', { file: next.name, sequence: next.sequence, stage: error.stage, error: error.message });
    }
  }

  private committed(next: PendingRecord): void {
    this.newest = { sequence: next.sequence, parentChecksum: next.parentChecksum, checksum: next.checksum, state: next.state };
    this.newestSlotIndex = next.slotIndex;
  }

}

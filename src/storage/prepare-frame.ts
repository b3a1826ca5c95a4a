/**
 * The few prepare-header fields the storage reads (iggy-metadata-plane.md §1.1, §1.4), read at
 * their documented offsets. Deliberately independent of the wire codec in src/vsr: the WAL only
 * needs op, parent, commit and identity, and every frame it reads has already been verified by
 * the journal-scan kernel (identity, command, size, reserved bytes, body checksum).
 */
import { HEADER_SIZE, HeaderOffset, PrepareOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';

export interface PrepareFields {
  readonly op: number;
  readonly commit: number;
  /** u128 identity checksum of this prepare (header `checksum`). */
  readonly identity: bigint;
  /** u128 identity of the previous op's prepare. */
  readonly parent: bigint;
  readonly cluster: bigint;
  readonly view: number;
  readonly sizeBytes: number;
}

function u128(view: DataView, offset: number): bigint {
  return view.getBigUint64(offset, true) | (view.getBigUint64(offset + 8, true) << 64n);
}

/**
 * Fields of the prepare at `frame[0..]`. A u64 `op` or `commit` above 2^53 is returned as -1 so
 * the caller rejects it with a reason (bytes from disk are never asserted on).
 */
export function readPrepareFields(frame: Uint8Array): PrepareFields {
  assert(frame.byteLength >= HEADER_SIZE, 'a prepare frame holds a header');
  const view = new DataView(frame.buffer, frame.byteOffset, HEADER_SIZE);
  const op = view.getBigUint64(PrepareOffset.op, true);
  const commit = view.getBigUint64(PrepareOffset.commit, true);
  const safe = (value: bigint): number => (value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : -1);
  return {
    op: safe(op),
    commit: safe(commit),
    identity: u128(view, HeaderOffset.checksum),
    parent: u128(view, PrepareOffset.parent),
    cluster: u128(view, HeaderOffset.cluster),
    view: view.getUint32(HeaderOffset.view, true),
    sizeBytes: view.getUint32(HeaderOffset.size, true),
  };
}

export function hex(value: bigint, bytes = 16): string {
  return `0x${value.toString(16).padStart(bytes * 2, '0')}`;
}

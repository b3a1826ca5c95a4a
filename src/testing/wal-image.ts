/**
 * Builds WAL images (concatenated prepare frames) for tests and benchmarks by writing header
 * fields at their documented offsets directly, independent of the wire codec, so the journal scan
 * is checked against the layout of iggy-metadata-plane.md §1.4 rather than against our encoder.
 */
import { HEADER_SIZE, HeaderOffset, PrepareOffset, Command } from '../constants.js';
import { xxh3_64 } from '../kernels/xxh3-ts.js';

export interface FixtureEntry {
  op: number;
  view?: number;
  bodySize?: number;
  /** Override the parent (default: identity of the previous entry). */
  parent?: bigint;
}

export function identityOf(header: Uint8Array): bigint {
  const copy = header.slice(0, HEADER_SIZE);
  copy.fill(0, 0, 16);
  copy.fill(0, HeaderOffset.view, HeaderOffset.view + 4);
  return xxh3_64(copy, 0n);
}

/** One sealed prepare frame. `fill` seeds the body bytes deterministically. */
export function buildPrepare(op: number, parent: bigint, bodySize: number, view = 1): Uint8Array {
  const frame = new Uint8Array(HEADER_SIZE + bodySize);
  const data = new DataView(frame.buffer);
  for (let index = 0; index < bodySize; index++) {
    frame[HEADER_SIZE + index] = (op * 31 + index * 7) & 0xff;
  }
  data.setUint32(HeaderOffset.size, frame.byteLength, true);
  data.setUint32(HeaderOffset.view, view, true);
  frame[HeaderOffset.command] = Command.prepare;
  frame[HeaderOffset.replica] = 0;
  data.setBigUint64(HeaderOffset.cluster, 0x1234_5678_9abc_def0n, true);
  data.setBigUint64(PrepareOffset.client, BigInt(op) * 0x1_0000_0001n + 7n, true);
  data.setBigUint64(PrepareOffset.parent, parent, true);
  data.setBigUint64(PrepareOffset.op, BigInt(op), true);
  data.setBigUint64(PrepareOffset.commit, BigInt(Math.max(0, op - 1)), true);
  data.setBigUint64(PrepareOffset.timestamp, 1_700_000_000_000_000n + BigInt(op), true);
  data.setBigUint64(PrepareOffset.request, BigInt(op), true);
  frame[PrepareOffset.operation] = 128;
  data.setBigUint64(PrepareOffset.group, 1n << 63n, true);
  data.setUint32(PrepareOffset.userId, 0, true);
  data.setBigUint64(HeaderOffset.checksumBody, xxh3_64(frame.subarray(HEADER_SIZE), 0n), true);
  data.setBigUint64(HeaderOffset.checksum, identityOf(frame), true);
  return frame;
}

export interface FixtureImage {
  image: Uint8Array;
  /** Start offset of each entry, plus the end as a last element. */
  offsets: number[];
  ops: number[];
}

/** A hash-chained WAL image of `entries`. */
export function buildImage(entries: readonly FixtureEntry[]): FixtureImage {
  const frames: Uint8Array[] = [];
  let parent = 0n;
  for (const entry of entries) {
    const view = entry.view ?? 1;
    const frame = buildPrepare(entry.op, entry.parent ?? parent, entry.bodySize ?? 64, view);
    parent = identityOf(frame);
    frames.push(frame);
  }
  const total = frames.reduce((sum, frame) => sum + frame.byteLength, 0);
  const image = new Uint8Array(total);
  const offsets: number[] = [];
  let offset = 0;
  for (const frame of frames) {
    offsets.push(offset);
    image.set(frame, offset);
    offset += frame.byteLength;
  }
  offsets.push(offset);
  return { image, offsets, ops: entries.map((entry) => entry.op) };
}

export function consecutive(count: number, firstOp = 1, bodySize?: (index: number) => number) {
  return Array.from({ length: count }, (_, index) => ({
    op: firstOp + index,
    bodySize: bodySize === undefined ? 32 + ((index * 97) % 300) : bodySize(index),
  }));
}

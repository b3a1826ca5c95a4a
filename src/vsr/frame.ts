/**
 * Frame checksums (iggy-metadata-plane.md §1.3) and the one-shot frame decode.
 *
 * Three uses of one algorithm, XXH3-64 (seed 0) widened to u128 (upper 64 bits zero):
 * - frame seal: bytes 16..256, stored in `checksum`; it covers `checksum_body`, so it goes last;
 * - prepare identity (Prepare, RepairPrepare): the whole header with `checksum` and `view` zeroed,
 *   stored in `checksum`. `view` is left out so a retransmit re-stamped with a newer view keeps its
 *   identity (and `parent` hash chain). The command byte of a RepairPrepare counts as Prepare, so a
 *   stored prepare served verbatim with command 19 verifies against the identity it was sealed
 *   with, and the WAL can store it back as command 6 unchanged;
 * - body checksum: bytes 256..size, stored in `checksum_body`.
 *
 * Deliberate deviations from the reference, so that corruption is never accepted:
 * - every frame is sealed, Request/Reply/Eviction included (our only clients are our own HTTP
 *   layer and SDK), and a zero checksum is never "unsealed, skip": it must match like any other;
 * - the body checksum is always verified, StateChunk included, and an empty body's checksum is
 *   XXH3-64 of zero bytes (0x2d06800538d394c2), not 0.
 *
 * Known blind spot, by design: a Prepare's `view` (bytes 52..56) is outside the identity, so a
 * corrupted view is not detectable here. The replica treats a prepare's view as routing data only:
 * a prepare whose view differs from the replica's is dropped or at most prompts a view probe, and
 * it is re-stamped on retransmit. Everything that matters for safety (op, parent, body) is covered.
 */
import { HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX, Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import { decodeBatch } from './batch.js';
import { FrameRejection } from './frame-reason.js';
import {
  decodeHeader,
  encodeHeader,
  readCommand,
  readSize,
  readU64Big,
  writeU128,
  writeU32,
} from './header.js';
import { commandLayout } from './header-layout.js';
import {
  Operation,
  type Header,
  type HeaderCommand,
  type HeaderInput,
  type HeaderOf,
} from './header-types.js';
import { validateHeader } from './header-validate.js';

/** The only kernel the codec needs; tests pass `{ xxh3_64 }` alone. */
export type ChecksumKernels = Pick<Kernels, 'xxh3_64'>;

export interface DecodedFrame<H extends Header = Header> {
  readonly ok: true;
  readonly header: H;
  /** The whole frame (header + body). */
  readonly frame: Uint8Array;
  /** `frame.subarray(256)`. */
  readonly body: Uint8Array;
}

export interface RejectedFrame {
  readonly ok: false;
  readonly reason: FrameRejection;
}

export type FrameResult = DecodedFrame | RejectedFrame;

export interface FrameDecodeOptions {
  /** When set, frames stamped with another cluster id are rejected (`cluster_mismatch`). */
  readonly cluster?: bigint;
}

const SEAL_START = HeaderOffset.checksumBody;
const EMPTY = new Uint8Array(0);

// Reused for every identity computation so the per-prepare hot path does not allocate 256 bytes.
// Safe because the core is single-threaded and nothing here re-enters.
const identityScratch = new Uint8Array(HEADER_SIZE);

/**
 * The identity of the prepare header at `header[offset..offset + 256]`: XXH3-64 of the header with
 * `checksum` and `view` zeroed (and a RepairPrepare's command read as Prepare).
 */
export function prepareIdentity(kernels: ChecksumKernels, header: Uint8Array, offset = 0): bigint {
  assert(header.byteLength - offset >= HEADER_SIZE, 'prepareIdentity: a whole header');
  identityScratch.set(header.subarray(offset, offset + HEADER_SIZE));
  identityScratch.fill(0, HeaderOffset.checksum, HeaderOffset.checksum + 16);
  identityScratch.fill(0, HeaderOffset.view, HeaderOffset.view + 4);
  if (identityScratch[HeaderOffset.command] === Command.repairPrepare) {
    identityScratch[HeaderOffset.command] = Command.prepare;
  }
  return kernels.xxh3_64(identityScratch, 0n);
}

/** XXH3-64 of header bytes 16..256. */
export function frameSeal(kernels: ChecksumKernels, frame: Uint8Array): bigint {
  return kernels.xxh3_64(frame.subarray(SEAL_START, HEADER_SIZE), 0n);
}

function assertSealable(frame: Uint8Array): void {
  const size = frame.byteLength;
  assert(size >= HEADER_SIZE && size <= MESSAGE_SIZE_MAX, 'seal: frame size');
  assert(readSize(frame) === frame.byteLength, 'seal: size field equals the frame length');
  assert(commandLayout(readCommand(frame)) !== undefined, 'seal: valid command');
}

/**
 * Seals a frame in place: `checksum_body` first, then `checksum` (seal or, for Prepare and
 * RepairPrepare, identity), which covers it. The `size` field must already equal the length.
 */
export function sealFrame(kernels: ChecksumKernels, frame: Uint8Array): void {
  assertSealable(frame);
  writeU128(frame, HeaderOffset.checksumBody, kernels.xxh3_64(frame.subarray(HEADER_SIZE), 0n));
  const layout = commandLayout(readCommand(frame));
  assert(layout !== undefined);
  const checksum =
    layout.checksum === 'identity' ? prepareIdentity(kernels, frame) : frameSeal(kernels, frame);
  writeU128(frame, HeaderOffset.checksum, checksum);
}

/** `sealFrame` for a Prepare or RepairPrepare, asserting the command. */
export function sealPrepare(kernels: ChecksumKernels, frame: Uint8Array): void {
  const command = readCommand(frame);
  assert(isPrepareCommand(command), 'sealPrepare: a prepare');
  sealFrame(kernels, frame);
}

/**
 * Re-stamps a sealed prepare's view in place. The identity excludes the view, so the frame stays
 * sealed: this is how a retransmit after a view change keeps its identity and hash chain.
 */
export function setPrepareView(frame: Uint8Array, view: number): void {
  const command = readCommand(frame);
  assert(isPrepareCommand(command), 'setPrepareView: a prepare');
  assert(Number.isInteger(view) && view >= 0 && view <= 0xffff_ffff, 'setPrepareView: u32 view');
  writeU32(frame, HeaderOffset.view, view);
}

/**
 * A copy of a sealed prepare with its command switched between Prepare and RepairPrepare. The
 * identity reads RepairPrepare as Prepare, so the copy stays sealed with the same identity.
 */
export function withPrepareCommand(
  frame: Uint8Array,
  command: typeof Command.prepare | typeof Command.repairPrepare,
): Uint8Array {
  const current = readCommand(frame);
  assert(isPrepareCommand(current), 'withPrepareCommand: a prepare');
  const copy = frame.slice();
  copy[HeaderOffset.command] = command;
  return copy;
}

function isPrepareCommand(command: number): boolean {
  return command === Command.prepare || command === Command.repairPrepare;
}

/** True when the u128 at `offset` equals `checksum` widened (upper 64 bits zero). */
function checksumMatches(frame: Uint8Array, offset: number, checksum: bigint): boolean {
  return readU64Big(frame, offset) === checksum && readU64Big(frame, offset + 8) === 0n;
}

/**
 * Integrity only: size bounds, the command byte, the seal (or identity) and the body checksum of
 * one whole frame. Returns a reason or null; never throws. `decodeFrame` adds structure and rules.
 */
export function verifyFrame(kernels: ChecksumKernels, frame: Uint8Array): FrameRejection | null {
  if (frame.byteLength < HEADER_SIZE) return FrameRejection.headerTruncated;
  const size = readSize(frame);
  const sizeReason = checkFrameSize(size);
  if (sizeReason !== null) return sizeReason;
  if (size !== frame.byteLength) return FrameRejection.sizeMismatch;
  const layout = commandLayout(readCommand(frame));
  if (layout === undefined) return FrameRejection.commandInvalid;
  if (layout.checksum === 'identity') {
    if (!checksumMatches(frame, HeaderOffset.checksum, prepareIdentity(kernels, frame))) {
      return FrameRejection.identityMismatch;
    }
  } else if (!checksumMatches(frame, HeaderOffset.checksum, frameSeal(kernels, frame))) {
    return FrameRejection.sealMismatch;
  }
  if (!verifyBodyChecksum(kernels, frame)) return FrameRejection.bodyChecksumMismatch;
  return null;
}

export type FrameHeaderResult =
  | { readonly ok: true; readonly header: Header }
  | RejectedFrame;

/** The reason a `size` field read off the wire is out of bounds, or null. */
export function checkFrameSize(size: number): FrameRejection | null {
  if (size < HEADER_SIZE) return FrameRejection.sizeBelowHeader;
  if (size > MESSAGE_SIZE_MAX) return FrameRejection.sizeAboveMax;
  return null;
}

/**
 * Everything that can be checked from the 256-byte header alone, in order: size bounds, command,
 * seal or identity, structure (reserved bytes, u64 range), cluster, §1.6 rules. The seal covers
 * only header bytes, so a stream decoder runs this before buffering the body: a corrupt or
 * invalid header never makes us allocate up to MESSAGE_SIZE_MAX. The body checksum is left to
 * `verifyBodyChecksum` once the body is in.
 */
export function decodeFrameHeader(
  kernels: ChecksumKernels,
  bytes: Uint8Array,
  options: FrameDecodeOptions = {},
): FrameHeaderResult {
  if (bytes.byteLength < HEADER_SIZE) return { ok: false, reason: FrameRejection.headerTruncated };
  const sizeReason = checkFrameSize(readSize(bytes));
  if (sizeReason !== null) return { ok: false, reason: sizeReason };
  const layout = commandLayout(readCommand(bytes));
  if (layout === undefined) return { ok: false, reason: FrameRejection.commandInvalid };
  // The header checksum first: it vouches for `checksum_body` and every field read after it.
  if (layout.checksum === 'identity') {
    if (!checksumMatches(bytes, HeaderOffset.checksum, prepareIdentity(kernels, bytes))) {
      return { ok: false, reason: FrameRejection.identityMismatch };
    }
  } else if (!checksumMatches(bytes, HeaderOffset.checksum, frameSeal(kernels, bytes))) {
    return { ok: false, reason: FrameRejection.sealMismatch };
  }
  const decoded = decodeHeader(bytes);
  if (!decoded.ok) return decoded;
  const header = decoded.header;
  if (options.cluster !== undefined && header.cluster !== options.cluster) {
    return { ok: false, reason: FrameRejection.clusterMismatch };
  }
  const reason = validateHeader(header);
  if (reason !== null) return { ok: false, reason };
  return decoded;
}

/** Whether `checksum_body` matches XXH3-64 of `frame[256..]` (an empty body included). */
export function verifyBodyChecksum(kernels: ChecksumKernels, frame: Uint8Array): boolean {
  assert(frame.byteLength >= HEADER_SIZE, 'verifyBodyChecksum: a whole header');
  const body = frame.byteLength === HEADER_SIZE ? EMPTY : frame.subarray(HEADER_SIZE);
  return checksumMatches(frame, HeaderOffset.checksumBody, kernels.xxh3_64(body, 0n));
}

/**
 * Rules on a body whose checksum verified, for the one body the core would otherwise trust without
 * looking: a batch prepare's envelope (src/vsr/batch.ts). Run by every decoder after the body
 * checksum, so a malformed envelope is refused at the edge like any bad frame, never journaled.
 */
export function validateBody(header: Header, body: Uint8Array): FrameRejection | null {
  if (header.command !== Command.prepare && header.command !== Command.repairPrepare) return null;
  if (header.operation !== Operation.batch) return null;
  return decodeBatch(body).ok ? null : FrameRejection.batchEnvelopeInvalid;
}

/**
 * Verifies, decodes and validates one whole frame (a file record, a simulator message). `bytes`
 * must be exactly one frame. The result's `frame` is `bytes` itself and `body` a view into it.
 * Checks run in the same order as the stream decoder's, so both give the same reason.
 */
export function decodeFrame(
  kernels: ChecksumKernels,
  bytes: Uint8Array,
  options: FrameDecodeOptions = {},
): FrameResult {
  if (bytes.byteLength < HEADER_SIZE) return { ok: false, reason: FrameRejection.headerTruncated };
  const size = readSize(bytes);
  const sizeReason = checkFrameSize(size);
  if (sizeReason !== null) return { ok: false, reason: sizeReason };
  if (size !== bytes.byteLength) return { ok: false, reason: FrameRejection.sizeMismatch };
  const decoded = decodeFrameHeader(kernels, bytes, options);
  if (!decoded.ok) return decoded;
  if (!verifyBodyChecksum(kernels, bytes)) {
    return { ok: false, reason: FrameRejection.bodyChecksumMismatch };
  }
  const body = bytes.subarray(HEADER_SIZE);
  const bodyReason = validateBody(decoded.header, body);
  if (bodyReason !== null) return { ok: false, reason: bodyReason };
  return { ok: true, header: decoded.header, frame: bytes, body };
}

/**
 * Builds a sealed frame from a header (without size and checksums) and a body. Asserts that the
 * result passes `validateHeader`: a replica never sends a frame its peers would reject.
 */
export function buildFrame<C extends HeaderCommand>(
  kernels: ChecksumKernels,
  input: Extract<HeaderInput, { readonly command: C }>,
  body: Uint8Array = EMPTY,
): Uint8Array {
  const size = HEADER_SIZE + body.byteLength;
  assert(size <= MESSAGE_SIZE_MAX, 'buildFrame: frame fits MESSAGE_SIZE_MAX');
  const header = { ...input, size, checksum: 0n, checksumBody: 0n } as unknown as HeaderOf<C>;
  const reason = validateHeader(header) ?? validateBody(header, body);
  assert(reason === null, `buildFrame: invalid ${header.command} header: ${reason}`);
  const frame = new Uint8Array(size);
  encodeHeader(header, frame);
  frame.set(body, HEADER_SIZE);
  sealFrame(kernels, frame);
  return frame;
}

/**
 * The sealed 256-byte header of a frame whose body is sent beside it as is (never copied into a
 * frame): exactly the first 256 bytes `buildFrame(kernels, input, body)` would build, given the
 * body's size and its XXH3-64 (seed 0) instead of the body. A state chunk's sum is already in the
 * manifest, so serving a chunk neither copies nor hashes its 256 KiB. The caller vouches that
 * `checksumBody` is the sum of the body it sends; a wrong one makes the receiver reject the frame.
 * Sealed frames only (the seal covers header bytes alone; a prepare's identity is not built here).
 */
export function buildFrameHeader<C extends HeaderCommand>(
  kernels: ChecksumKernels,
  input: Extract<HeaderInput, { readonly command: C }>,
  bodySize: number,
  checksumBody: bigint,
): Uint8Array {
  assert(Number.isSafeInteger(bodySize) && bodySize >= 0, 'buildFrameHeader: body size');
  const size = HEADER_SIZE + bodySize;
  assert(size <= MESSAGE_SIZE_MAX, 'buildFrameHeader: frame fits MESSAGE_SIZE_MAX');
  assert(
    checksumBody >= 0n && checksumBody < 1n << 64n,
    'buildFrameHeader: checksumBody is an XXH3-64 sum',
  );
  const header = { ...input, size, checksum: 0n, checksumBody } as unknown as HeaderOf<C>;
  const reason = validateHeader(header);
  assert(reason === null, `buildFrameHeader: invalid ${header.command} header: ${reason}`);
  assert(commandLayout(header.command)?.checksum === 'seal', 'buildFrameHeader: a sealed command');
  const bytes = new Uint8Array(HEADER_SIZE);
  encodeHeader(header, bytes);
  writeU128(bytes, HeaderOffset.checksum, frameSeal(kernels, bytes));
  return bytes;
}

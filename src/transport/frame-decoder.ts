/**
 * Streaming frame decoder for TCP byte streams (replica bus and client connections).
 *
 * `push(chunk)` hands over the bytes of one socket read; `next()` (or iterating the decoder) pulls
 * results until it returns null, after which the next chunk may be pushed:
 *
 *     decoder.push(chunk);
 *     for (const result of decoder) {
 *       if (!result.ok) { socket.destroy(); break; }   // decoder.poisoned is now true
 *       replica.onMessage(result.header, result.frame);
 *     }
 *
 * Checks, in order, each before the next byte of the frame is trusted:
 *   1. at 52 bytes: 256 <= size <= MESSAGE_SIZE_MAX, before any body byte is buffered;
 *   2. at 256 bytes: command, seal or prepare identity (the seal covers the header only), reserved
 *      bytes, u64 ranges, cluster, validateHeader(). Only then is a body buffer allocated, so a
 *      peer cannot make us buffer up to 1 MiB with a header that does not verify;
 *   3. at `size` bytes: the body checksum.
 * The same checks in the same order as `decodeFrame`, so both give the same reason.
 *
 * After a rejection the stream cannot be trusted (the next frame boundary comes from a `size` we
 * just refused to believe), so the decoder is poisoned: it yields nothing more, drops later chunks,
 * and the transport closes the connection. Rejections are counted by reason.
 *
 * Memory: a 256-byte header buffer, plus one frame buffer of at most MESSAGE_SIZE_MAX while a
 * frame spans chunks, plus a reference to the current chunk until it is drained. Nothing here
 * throws on any input bytes; misuse by the caller (pushing before draining) is an assertion.
 * With a `FramePool`, state chunk frames are taken from it (their consumer gives them back once
 * written) instead of allocated per frame; every other frame is allocated and owned by the caller.
 */
import { Command, HEADER_SIZE, HeaderOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';
import {
  checkFrameSize,
  decodeFrameHeader,
  validateBody,
  verifyBodyChecksum,
  type ChecksumKernels,
  type FrameDecodeOptions,
  type FrameResult,
  type RejectedFrame,
} from '../vsr/frame.js';
import { FrameRejection, frameRejectionCounters } from '../vsr/frame-reason.js';
import { readSize } from '../vsr/header.js';
import type { Header } from '../vsr/header-types.js';
import type { FramePool } from './frame-pool.js';

export { decodeFrame, type DecodedFrame, type FrameResult, type RejectedFrame } from '../vsr/frame.js';
export { FrameRejection } from '../vsr/frame-reason.js';

/** `size` is readable once this many bytes of a frame have arrived. */
const SIZE_END = HeaderOffset.size + 4;

export class FrameDecoder {
  /** Rejections by reason (a stream rejects at most once: it is poisoned after). */
  readonly rejections: Record<FrameRejection, number> = frameRejectionCounters();
  /** Frames yielded that passed every check. */
  framesDecoded = 0;
  /** Bytes pushed after the decoder was poisoned (dropped unread). */
  bytesDropped = 0;

  readonly #kernels: ChecksumKernels;
  readonly #options: FrameDecodeOptions;
  readonly #pool: FramePool | null;

  #poisonReason: FrameRejection | null = null;

  #chunk: Uint8Array | null = null;
  #chunkOffset = 0;

  /** The header of the frame in progress, while it spans chunks. */
  readonly #header = new Uint8Array(HEADER_SIZE);
  #headerLength = 0;

  /** The frame in progress once its header verified, while its body spans chunks. */
  #frame: Uint8Array | null = null;
  #frameHeader: Header | null = null;
  #frameLength = 0;

  constructor(kernels: ChecksumKernels, options: FrameDecodeOptions = {}, pool: FramePool | null = null) {
    this.#kernels = kernels;
    this.#options = options;
    this.#pool = pool;
  }

  get poisoned(): boolean {
    return this.#poisonReason !== null;
  }

  /** The reason that poisoned the decoder, or null. */
  get poisonReason(): FrameRejection | null {
    return this.#poisonReason;
  }

  /** Bytes of an incomplete frame held between chunks (0 at a frame boundary). */
  get bufferedBytes(): number {
    return this.#frame === null ? this.#headerLength : this.#frameLength;
  }

  /** Hands over one chunk. The previous chunk must have been drained (`next()` returned null). */
  push(chunk: Uint8Array): void {
    if (this.#poisonReason !== null) {
      this.bytesDropped += chunk.byteLength;
      return;
    }
    assert(this.#chunk === null, 'FrameDecoder.push: drain the previous chunk first');
    if (chunk.byteLength === 0) return;
    this.#chunk = chunk;
    this.#chunkOffset = 0;
  }

  /** The next decoded frame or rejection, or null when the current chunk is used up. */
  next(): FrameResult | null {
    if (this.#poisonReason !== null) return null;
    const chunk = this.#chunk;
    if (chunk === null) return null;
    for (;;) {
      const available = chunk.byteLength - this.#chunkOffset;

      if (this.#frame !== null) {
        const take = Math.min(this.#frame.byteLength - this.#frameLength, available);
        this.#frame.set(chunk.subarray(this.#chunkOffset, this.#chunkOffset + take), this.#frameLength);
        this.#frameLength += take;
        this.#chunkOffset += take;
        if (this.#frameLength < this.#frame.byteLength) return this.#drained();
        const frame = this.#frame;
        const header = this.#frameHeader;
        assert(header !== null);
        this.#frame = null;
        this.#frameHeader = null;
        this.#frameLength = 0;
        return this.#finish(frame, header);
      }

      if (available === 0) return this.#drained();

      if (this.#headerLength === 0 && available >= HEADER_SIZE) {
        // Fast path: the header is contiguous in the chunk.
        const size = readSize(chunk, this.#chunkOffset);
        const sizeReason = checkFrameSize(size);
        if (sizeReason !== null) return this.#reject(sizeReason);
        const decoded = decodeFrameHeader(
          this.#kernels,
          chunk.subarray(this.#chunkOffset, this.#chunkOffset + HEADER_SIZE),
          this.#options,
        );
        if (!decoded.ok) return this.#reject(decoded.reason);
        if (available >= size) {
          // The caller owns the frame (a pooled one until it gives it back): a copy, so it neither
          // aliases nor pins the chunk. Not `chunk.slice()`: socket chunks are Buffers, whose
          // `slice` is a view, not a copy.
          const frame = this.#allocate(size, decoded.header);
          frame.set(chunk.subarray(this.#chunkOffset, this.#chunkOffset + size));
          this.#chunkOffset += size;
          return this.#finish(frame, decoded.header);
        }
        this.#startBody(size, decoded.header, chunk.subarray(this.#chunkOffset, this.#chunkOffset + HEADER_SIZE));
        this.#chunkOffset += HEADER_SIZE;
        continue;
      }

      // Slow path: gather the header across chunks, checking `size` as soon as it is readable.
      const before = this.#headerLength;
      const take = Math.min(HEADER_SIZE - before, available);
      this.#header.set(chunk.subarray(this.#chunkOffset, this.#chunkOffset + take), before);
      this.#headerLength += take;
      this.#chunkOffset += take;
      if (before < SIZE_END && this.#headerLength >= SIZE_END) {
        const sizeReason = checkFrameSize(readSize(this.#header));
        if (sizeReason !== null) return this.#reject(sizeReason);
      }
      if (this.#headerLength < HEADER_SIZE) return this.#drained();
      const decoded = decodeFrameHeader(this.#kernels, this.#header, this.#options);
      this.#headerLength = 0;
      if (!decoded.ok) return this.#reject(decoded.reason);
      const size = readSize(this.#header);
      if (size === HEADER_SIZE) return this.#finish(this.#header.slice(), decoded.header);
      this.#startBody(size, decoded.header, this.#header);
    }
  }

  *[Symbol.iterator](): IterableIterator<FrameResult> {
    for (let result = this.next(); result !== null; result = this.next()) yield result;
  }

  #startBody(size: number, header: Header, headerBytes: Uint8Array): void {
    assert(size > HEADER_SIZE && headerBytes.byteLength === HEADER_SIZE);
    this.#frame = this.#allocate(size, header);
    this.#frame.set(headerBytes, 0);
    this.#frameHeader = header;
    this.#frameLength = HEADER_SIZE;
  }

  /** A buffer for a whole frame whose header verified; every byte is written before it is yielded. */
  #allocate(size: number, header: Header): Uint8Array {
    const pool = this.#pool;
    if (pool !== null && header.command === Command.stateChunk && size <= pool.frameSizeMax) return pool.take(size);
    return new Uint8Array(size);
  }

  #finish(frame: Uint8Array, header: Header): FrameResult {
    if (!verifyBodyChecksum(this.#kernels, frame)) return this.#reject(FrameRejection.bodyChecksumMismatch);
    const body = frame.subarray(HEADER_SIZE);
    const bodyReason = validateBody(header, body);
    if (bodyReason !== null) return this.#reject(bodyReason);
    this.framesDecoded += 1;
    return { ok: true, header, frame, body };
  }

  #reject(reason: FrameRejection): RejectedFrame {
    this.rejections[reason] += 1;
    this.#poisonReason = reason;
    // Release everything: nothing after a rejection will be read.
    this.#chunk = null;
    this.#frame = null;
    this.#frameHeader = null;
    this.#headerLength = 0;
    this.#frameLength = 0;
    return { ok: false, reason };
  }

  #drained(): null {
    this.#chunk = null;
    this.#chunkOffset = 0;
    return null;
  }
}

/**
 * Streaming decoder for the client port: turns socket reads into whole request frames, judging
 * each byte range before trusting the next (as the replica bus's FrameDecoder does):
 *   1. at 52 bytes: the declared size is at least a header;
 *   2. at 256 bytes: the request header (validateClientRequest), then the size bound. Only then
 *      is a body buffer allocated, so a client cannot make us buffer a body behind a header that
 *      does not validate;
 *   3. at `size` bytes: the frame is yielded.
 * A partition-plane request (a message batch) larger than `frameSizeMax` (CLIENT_FRAME_SIZE_MAX
 * unless the session lowers it: a connection that has not logged in gets a small one), up to
 * Iggy's own frame limit, is read past without buffering and yielded as `skipped`, so the session
 * can answer FeatureUnavailable instead of tearing the connection down. Any other oversize frame
 * is refused with InvalidRequestBodySize. A frame whose body buffer the replica-wide budget has
 * no room for (buffer-budget.ts) is read past too, `skipped` with reason `over_budget`, and the
 * session answers it with a retryable error: memory never grows past the budget for it.
 *
 * After a refusal the byte stream has no trustworthy frame boundary left, so the decoder is
 * poisoned: it yields the refusal once and drops everything after. Memory per connection: one
 * 256-byte header buffer plus at most one frame of `frameSizeMax`, taken from the budget and
 * given back when the frame is yielded (or `dispose`d). Never throws on input.
 */
import { HEADER_SIZE, HeaderOffset } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { EvictionReason } from '../vsr/header-types.js';
import type { BufferBudget } from './buffer-budget.js';
import {
  CLIENT_FRAME_SIZE_MAX,
  CLIENT_SKIP_SIZE_MAX,
  RequestOffset,
  isPartitionOperation,
  readDeclaredSize,
  validateClientRequest,
} from './client-wire.js';

export type ClientDecodeResult =
  /** A whole request frame (header + body), a private copy. */
  | { readonly kind: 'frame'; readonly frame: Uint8Array }
  /**
   * A request whose body was read past unbuffered: a data-plane request too large to buffer, or
   * any request the buffer budget had no room for.
   */
  | { readonly kind: 'skipped'; readonly header: Uint8Array; readonly reason: SkipReason }
  /** The stream is refused; `header` when one arrived (the eviction needs its client id). */
  | { readonly kind: 'refused'; readonly reason: string; readonly header: Uint8Array | null; readonly eviction: EvictionReason | null };

export type SkipReason = 'oversize' | 'over_budget';

const SIZE_END = HeaderOffset.size + 4;

export interface ClientFrameDecoderOptions {
  /** The largest frame buffered (default CLIENT_FRAME_SIZE_MAX); settable later. */
  readonly frameSizeMax?: number;
  /** Where body buffers are taken from; without one they are not accounted. */
  readonly budget?: BufferBudget | null;
}

export class ClientFrameDecoder {
  framesDecoded = 0;
  framesSkipped = 0;
  /** Bytes received after a refusal (dropped unread). */
  bytesDropped = 0;

  readonly #header = new Uint8Array(HEADER_SIZE);
  #headerLength = 0;
  #frame: Uint8Array | null = null;
  #frameLength = 0;
  /** Body bytes still to read past in skip mode (0 = not skipping). */
  #skipRemaining = 0;
  #skipHeader: Uint8Array | null = null;
  #skipReason: SkipReason = 'oversize';
  #frameSizeMax: number;
  readonly #budget: BufferBudget | null;
  #refusal: ClientDecodeResult | null = null;
  #refusalTaken = false;

  #chunk: Uint8Array | null = null;
  #chunkOffset = 0;

  constructor(options: ClientFrameDecoderOptions = {}) {
    this.#frameSizeMax = options.frameSizeMax ?? CLIENT_FRAME_SIZE_MAX;
    this.#budget = options.budget ?? null;
    assert(this.#frameSizeMax >= HEADER_SIZE && this.#frameSizeMax <= CLIENT_FRAME_SIZE_MAX, 'decoder: frameSizeMax in range');
  }

  /** The largest frame buffered from the next header on (a frame in progress keeps its buffer). */
  set frameSizeMax(size: number) {
    assert(size >= HEADER_SIZE && size <= CLIENT_FRAME_SIZE_MAX, 'decoder: frameSizeMax in range');
    this.#frameSizeMax = size;
  }

  get frameSizeMax(): number {
    return this.#frameSizeMax;
  }

  /** The connection is gone: a body buffer in progress goes back to the budget. */
  dispose(): void {
    if (this.#frame !== null) this.#budget?.release(this.#frame.byteLength);
    this.#frame = null;
  }

  get poisoned(): boolean {
    return this.#refusal !== null;
  }

  /** Part of a frame is buffered or being skipped (a slowloris clock runs while this holds). */
  get inFrame(): boolean {
    return this.#headerLength > 0 || this.#frame !== null || this.#skipRemaining > 0;
  }

  push(chunk: Uint8Array): void {
    assert(this.#chunk === null, 'push: drain the previous chunk first');
    if (this.#refusal !== null) {
      this.bytesDropped += chunk.byteLength;
      return;
    }
    if (chunk.byteLength > 0) {
      this.#chunk = chunk;
      this.#chunkOffset = 0;
    }
  }

  next(): ClientDecodeResult | null {
    if (this.#refusal !== null) {
      this.#dropChunk();
      if (this.#refusalTaken) return null;
      this.#refusalTaken = true;
      return this.#refusal;
    }
    while (this.#chunk !== null) {
      const result = this.#step();
      if (result !== null) return result;
    }
    return null;
  }

  *[Symbol.iterator](): IterableIterator<ClientDecodeResult> {
    for (let result = this.next(); result !== null; result = this.next()) yield result;
  }

  #dropChunk(): void {
    if (this.#chunk !== null) this.bytesDropped += this.#chunk.byteLength - this.#chunkOffset;
    this.#chunk = null;
  }

  #take(max: number): Uint8Array {
    const chunk = this.#chunk!;
    const end = Math.min(chunk.byteLength, this.#chunkOffset + max);
    const part = chunk.subarray(this.#chunkOffset, end);
    this.#chunkOffset = end;
    if (end === chunk.byteLength) this.#chunk = null;
    return part;
  }

  #refuse(reason: string, header: Uint8Array | null, eviction: EvictionReason | null): ClientDecodeResult {
    this.#refusal = { kind: 'refused', reason, header, eviction };
    this.#refusalTaken = true;
    this.dispose();
    this.#dropChunk();
    return this.#refusal;
  }

  #step(): ClientDecodeResult | null {
    if (this.#skipRemaining > 0) {
      this.#skipRemaining -= this.#take(this.#skipRemaining).byteLength;
      if (this.#skipRemaining > 0) return null;
      const header = this.#skipHeader!;
      this.#skipHeader = null;
      this.framesSkipped += 1;
      return { kind: 'skipped', header, reason: this.#skipReason };
    }
    if (this.#frame !== null) {
      const part = this.#take(this.#frame.byteLength - this.#frameLength);
      this.#frame.set(part, this.#frameLength);
      this.#frameLength += part.byteLength;
      if (this.#frameLength < this.#frame.byteLength) return null;
      const frame = this.#frame;
      this.#frame = null;
      // Handed over: the session holds it while it runs (one request at a time per connection).
      this.#budget?.release(frame.byteLength);
      this.framesDecoded += 1;
      return { kind: 'frame', frame };
    }
    const part = this.#take(HEADER_SIZE - this.#headerLength);
    this.#header.set(part, this.#headerLength);
    const before = this.#headerLength;
    this.#headerLength += part.byteLength;
    if (before < SIZE_END && this.#headerLength >= SIZE_END) {
      const size = readDeclaredSize(this.#header);
      if (size < HEADER_SIZE) return this.#refuse(`declared size ${size} is below the 256-byte header`, null, null);
      if (size > CLIENT_SKIP_SIZE_MAX) return this.#refuse(`declared size ${size} exceeds ${CLIENT_SKIP_SIZE_MAX}`, null, null);
    }
    if (this.#headerLength < HEADER_SIZE) return null;
    this.#headerLength = 0;
    const header = this.#header.slice();
    const refusal = validateClientRequest(header);
    if (refusal !== null) return this.#refuse(refusal.reason, header, refusal.eviction);
    const size = readDeclaredSize(header);
    if (size > this.#frameSizeMax) {
      if (!isPartitionOperation(header[RequestOffset.operation]!)) {
        return this.#refuse(`declared size ${size} exceeds ${this.#frameSizeMax}`, header, EvictionReason.invalidRequestBodySize);
      }
      return this.#skip(header, size, 'oversize');
    }
    if (size === HEADER_SIZE) {
      this.framesDecoded += 1;
      return { kind: 'frame', frame: header };
    }
    if (this.#budget !== null && !this.#budget.reserve(size)) return this.#skip(header, size, 'over_budget');
    this.#frame = new Uint8Array(size);
    this.#frame.set(header);
    this.#frameLength = HEADER_SIZE;
    return null;
  }

  #skip(header: Uint8Array, size: number, reason: SkipReason): null {
    this.#skipRemaining = size - HEADER_SIZE;
    this.#skipHeader = header;
    this.#skipReason = reason;
    return null;
  }
}

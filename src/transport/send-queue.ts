/**
 * One peer's outbound frames: a ring buffer bounded twice, by frame count and by bytes (256
 * frames of up to 1 MiB each would otherwise be 256 MiB per peer). It outlives connections, so
 * frames sent while a peer is briefly down are delivered when it comes back.
 *
 * When a bound is hit the *oldest* frames are dropped, counted: after an outage the newest frames
 * (the current view, the latest commit) are the ones worth delivering, and VSR's timeouts resend
 * whatever was lost. Frames are held by reference, not copied: a frame handed to the bus is
 * immutable from then on (the replica copies before re-stamping a prepare's view). A frame may be
 * queued as its header and its body (`FrameParts`: a state chunk whose body is a view of the
 * served payload); it counts, is written and is dropped as one frame, never half of one.
 */
import { MESSAGE_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { RingBuffer } from '../stdx/ring-buffer.js';

/** One frame as its 256-byte header and its body, written back to back without being joined. */
export interface FrameParts {
  readonly header: Uint8Array;
  readonly body: Uint8Array;
}

/** A queued frame: whole, or in parts. */
export type OutboundFrame = Uint8Array | FrameParts;

/** Bytes `frame` puts on the wire. */
export function outboundSize(frame: OutboundFrame): number {
  return frame instanceof Uint8Array ? frame.byteLength : frame.header.byteLength + frame.body.byteLength;
}

export class SendQueue {
  readonly frameCountMax: number;
  readonly sizeMax: number;
  /** Frames dropped because `frameCountMax` frames were queued. */
  droppedCountFull = 0;
  /** Frames dropped because the queued bytes would exceed `sizeMax`. */
  droppedSizeFull = 0;

  readonly #frames: RingBuffer<OutboundFrame>;
  #size = 0;

  constructor(frameCountMax: number, sizeMax: number) {
    assert(Number.isSafeInteger(frameCountMax) && frameCountMax > 0, 'send queue: frameCountMax > 0');
    // Any single frame must fit, or a large frame could never be sent at all.
    assert(Number.isSafeInteger(sizeMax) && sizeMax >= MESSAGE_SIZE_MAX, 'send queue: sizeMax >= MESSAGE_SIZE_MAX');
    this.frameCountMax = frameCountMax;
    this.sizeMax = sizeMax;
    this.#frames = new RingBuffer(frameCountMax);
  }

  /** Frames queued. */
  get length(): number {
    return this.#frames.length;
  }

  /** Bytes queued. */
  get size(): number {
    return this.#size;
  }

  get dropped(): number {
    return this.droppedCountFull + this.droppedSizeFull;
  }

  /** Queues `frame`, dropping the oldest frames to make room. Returns how many were dropped. */
  push(frame: OutboundFrame): number {
    const size = outboundSize(frame);
    assert(size <= MESSAGE_SIZE_MAX, 'send queue: frame within MESSAGE_SIZE_MAX');
    let dropped = 0;
    while (this.#size + size > this.sizeMax) {
      this.#dropOldest();
      this.droppedSizeFull += 1;
      dropped += 1;
    }
    if (this.#frames.full) {
      this.#dropOldest();
      this.droppedCountFull += 1;
      dropped += 1;
    }
    const pushed = this.#frames.push(frame);
    assert(pushed);
    this.#size += size;
    assert(this.#size <= this.sizeMax);
    return dropped;
  }

  shift(): OutboundFrame | undefined {
    const frame = this.#frames.shift();
    if (frame !== undefined) this.#size -= outboundSize(frame);
    assert(this.#size >= 0);
    if (this.#frames.empty) assert(this.#size === 0, 'send queue: byte count matches the frames');
    return frame;
  }

  /** Discards everything queued (the bus is closing); not counted as drops. */
  clear(): void {
    this.#frames.clear();
    this.#size = 0;
  }

  #dropOldest(): void {
    const frame = this.#frames.shift();
    assert(frame !== undefined, 'send queue: a bound is exceeded only with frames queued');
    this.#size -= outboundSize(frame);
  }
}

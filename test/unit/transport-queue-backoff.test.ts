/**
 * The replica bus's pieces without sockets: the per-peer send queue (two bounds, oldest dropped,
 * counted), the reconnect backoff, and the frame decoder fed Buffers as sockets deliver them.
 */
import { describe, expect, it } from 'vitest';
import { MESSAGE_SIZE_MAX } from '../../src/constants.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { BACKOFF_DEFAULTS, backoffDelayMs } from '../../src/transport/backoff.js';
import { FrameDecoder } from '../../src/transport/frame-decoder.js';
import { SendQueue } from '../../src/transport/send-queue.js';
import { CLUSTER, commitFrame, kernels, prepareFrame } from '../support/transport-harness.js';

const frame = (size: number): Uint8Array => new Uint8Array(size).fill(size & 0xff);

describe('SendQueue', () => {
  it('drops the oldest frame when the frame count is full, counted', () => {
    const queue = new SendQueue(2, MESSAGE_SIZE_MAX);
    const [a, b, c] = [frame(300), frame(400), frame(500)];
    expect([queue.push(a), queue.push(b), queue.push(c)]).toEqual([0, 0, 1]);
    expect(queue.droppedCountFull).toBe(1);
    expect(queue.size).toBe(900);
    expect([queue.shift(), queue.shift(), queue.shift()]).toEqual([b, c, undefined]);
    expect(queue.size).toBe(0);
  });

  it('drops as many oldest frames as it takes to stay within the byte bound', () => {
    const queue = new SendQueue(100, MESSAGE_SIZE_MAX);
    const small = frame(256 * 1024);
    for (let index = 0; index < 4; index++) expect(queue.push(small)).toBe(0);
    const big = frame(MESSAGE_SIZE_MAX);
    expect(queue.push(big)).toBe(4);
    expect(queue).toMatchObject({ length: 1, size: MESSAGE_SIZE_MAX, droppedSizeFull: 4, dropped: 4 });
  });

  it('holds a frame in parts by reference and counts, shifts and drops it as one frame', () => {
    const queue = new SendQueue(2, MESSAGE_SIZE_MAX);
    const payload = frame(4096);
    const parts = { header: frame(256), body: payload.subarray(1024, 2048) };
    const [a, c] = [frame(300), frame(500)];
    expect([queue.push(a), queue.push(parts)]).toEqual([0, 0]);
    expect(queue).toMatchObject({ length: 2, size: 300 + 256 + 1024 });
    // The count bound drops the oldest whole frame; the parts stay together.
    expect(queue.push(c)).toBe(1);
    const shifted = queue.shift();
    // The body is the caller's view of its payload, not a copy.
    expect(shifted).toBe(parts);
    expect(shifted !== undefined && !(shifted instanceof Uint8Array) && shifted.body.buffer).toBe(payload.buffer);
    expect(queue).toMatchObject({ length: 1, size: 500 });
    // The byte bound drops parts whole too.
    const tight = new SendQueue(10, MESSAGE_SIZE_MAX);
    tight.push({ header: frame(256), body: frame(MESSAGE_SIZE_MAX - 256) });
    expect(tight.push(frame(256))).toBe(1);
    expect(tight).toMatchObject({ length: 1, size: 256, droppedSizeFull: 1 });
  });

  it('refuses bounds that could never send a full-size frame', () => {
    expect(() => new SendQueue(1, MESSAGE_SIZE_MAX - 1)).toThrow(AssertionError);
    expect(() => new SendQueue(0, MESSAGE_SIZE_MAX)).toThrow(AssertionError);
  });
});

describe('backoffDelayMs', () => {
  const options = { delayMinMs: 10, delayMaxMs: 1_000, jitter: 0.5 };

  it('doubles from the minimum up to the cap, without jitter at random() = 0', () => {
    expect([0, 1, 2, 3, 6, 7, 50, 5_000].map((attempt) => backoffDelayMs(attempt, options, () => 0))).toEqual([
      10, 20, 40, 80, 640, 1_000, 1_000, 1_000,
    ]);
  });

  it('jitter takes away up to its fraction of the delay, never more', () => {
    expect(backoffDelayMs(3, options, () => 0.999_999)).toBe(40);
    expect(backoffDelayMs(20, options, () => 0.5)).toBe(750);
    expect(backoffDelayMs(20, { ...options, jitter: 0 }, () => 0.9)).toBe(1_000);
    expect(backoffDelayMs(0, BACKOFF_DEFAULTS, () => 0)).toBe(BACKOFF_DEFAULTS.delayMinMs);
  });
});

describe('FrameDecoder fed socket Buffers', () => {
  it('yields copies, not views of the socket chunk (Buffer.slice does not copy)', () => {
    const frames = [commitFrame(0, 1), prepareFrame(0, 1, 100)];
    const chunk = Buffer.concat(frames);
    const decoder = new FrameDecoder(kernels, { cluster: CLUSTER });
    decoder.push(chunk);
    const results = [...decoder];
    chunk.fill(0);
    expect(results.map((result) => result.ok && Buffer.from(result.frame).equals(frames[results.indexOf(result)]!))).toEqual([true, true]);
    for (const result of results) {
      expect(result.ok && result.frame.buffer).not.toBe(chunk.buffer);
    }
  });
});

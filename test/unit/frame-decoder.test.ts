/**
 * The streaming frame decoder: framing across chunk boundaries, the early size check, header
 * verification before the body is buffered, poisoning after a rejection, and counters.
 */
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX } from '../../src/constants.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { FrameDecoder, decodeFrame, type FrameResult } from '../../src/transport/frame-decoder.js';
import { FramePool } from '../../src/transport/frame-pool.js';
import { buildFrame, frameSeal } from '../../src/vsr/frame.js';
import { Command, writeU128, writeU32, type Header, type HeaderCommand, type HeaderInput } from '../../src/vsr/header.js';
import { base } from '../support/wire-bases.js';
import { HEADER_COMMANDS, concat, sealUnchecked, splitAt, tsKernels } from '../support/wire-fixtures.js';

const kernels = tsKernels;

function frameOf(command: HeaderCommand, changes: Partial<Record<string, unknown>> = {}): Uint8Array {
  const header = { ...base(command), ...changes } as Header;
  const { size, checksum: _c, checksumBody: _b, ...input } = header;
  const body = new Uint8Array(size - HEADER_SIZE).map((_, index) => (index * 13) & 0xff);
  return buildFrame(kernels, input as HeaderInput, body);
}

function drain(decoder: FrameDecoder, chunks: readonly Uint8Array[]): FrameResult[] {
  const results: FrameResult[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (const result of decoder) results.push(result);
  }
  return results;
}

describe('FrameDecoder', () => {
  it('decodes one frame of every command from one chunk, as the one-shot decode does', () => {
    for (const command of HEADER_COMMANDS) {
      const frame = frameOf(command);
      const results = drain(new FrameDecoder(kernels), [frame]);
      expect(results).toHaveLength(1);
      expect(results[0]).toEqual(decodeFrame(kernels, frame));
    }
  });

  it('decodes many frames per chunk and frames fed one byte at a time', () => {
    const frames = [frameOf(Command.prepare), frameOf(Command.commit), frameOf(Command.doViewChange), frameOf(Command.stateChunk)];
    const stream = concat(frames);
    const whole = drain(new FrameDecoder(kernels), [stream]);
    const byteByByte = drain(
      new FrameDecoder(kernels),
      Array.from(stream, (_, index) => stream.subarray(index, index + 1)),
    );
    for (const results of [whole, byteByByte]) {
      expect(results.map((result) => result.ok && result.header.command)).toEqual([
        Command.prepare,
        Command.commit,
        Command.doViewChange,
        Command.stateChunk,
      ]);
      expect(results.map((result) => result.ok && result.frame)).toEqual(frames);
    }
  });

  it('yields frames the caller owns: later writes to the chunk do not reach them', () => {
    const frame = frameOf(Command.request);
    const chunk = frame.slice();
    const decoder = new FrameDecoder(kernels);
    decoder.push(chunk);
    const result = decoder.next();
    chunk.fill(0);
    expect(result?.ok && result.frame).toEqual(frame);
    expect(result?.ok && result.body.buffer).toBe(result?.ok && result.frame.buffer);
  });

  it('a truncated frame yields nothing and stays buffered', () => {
    const frame = frameOf(Command.stateChunk);
    for (const length of [1, 51, 52, 255, 256, 257, frame.byteLength - 1]) {
      const decoder = new FrameDecoder(kernels);
      expect(drain(decoder, [frame.subarray(0, length)])).toEqual([]);
      expect(decoder.bufferedBytes).toBe(length);
      expect(decoder.poisoned).toBe(false);
    }
  });

  it('rejects an oversized size as soon as 52 bytes are in, before buffering anything more', () => {
    const frame = frameOf(Command.commit);
    writeU32(frame, HeaderOffset.size, MESSAGE_SIZE_MAX + 1);
    const decoder = new FrameDecoder(kernels);
    expect(drain(decoder, [frame.subarray(0, 51)])).toEqual([]);
    expect(drain(decoder, [frame.subarray(51, 52)])).toEqual([{ ok: false, reason: 'size_above_max' }]);
    expect(decoder.bufferedBytes).toBe(0);
    expect(decoder.rejections.size_above_max).toBe(1);
  });

  it('rejects a size below the header size at 52 bytes', () => {
    const frame = frameOf(Command.commit);
    writeU32(frame, HeaderOffset.size, 100);
    expect(drain(new FrameDecoder(kernels), [frame.subarray(0, 60)])).toEqual([{ ok: false, reason: 'size_below_header' }]);
  });

  it('verifies the header before buffering the body: a corrupt header is rejected at 256 bytes', () => {
    const frame = frameOf(Command.stateChunk);
    frame[HeaderOffset.cluster]! ^= 0x10;
    const decoder = new FrameDecoder(kernels);
    expect(drain(decoder, [frame.subarray(0, 200), frame.subarray(200, HEADER_SIZE)])).toEqual([
      { ok: false, reason: 'seal_mismatch' },
    ]);
    // An invalid header that is correctly sealed is refused at the same point.
    const invalid = sealUnchecked(kernels, { ...base(Command.stateChunk), artifact: 99 }, new Uint8Array(4096));
    expect(drain(new FrameDecoder(kernels), [invalid.subarray(0, HEADER_SIZE)])).toEqual([
      { ok: false, reason: 'artifact_out_of_range' },
    ]);
  });

  it('checks the body checksum once the body is in', () => {
    const frame = frameOf(Command.stateChunk);
    frame[frame.byteLength - 1]! ^= 0x01;
    expect(drain(new FrameDecoder(kernels), splitAt(frame, [300, 700]))).toEqual([
      { ok: false, reason: 'body_checksum_mismatch' },
    ]);
  });

  it('is poisoned after a rejection: nothing more is yielded and later chunks are dropped', () => {
    const good = frameOf(Command.commit);
    const bad = frameOf(Command.commit);
    bad[HeaderOffset.view]! ^= 1;
    const decoder = new FrameDecoder(kernels);
    const results = drain(decoder, [concat([good, bad, good]), good]);
    expect(results).toEqual([decodeFrame(kernels, good), { ok: false, reason: 'seal_mismatch' }]);
    expect(decoder.poisoned).toBe(true);
    expect(decoder.poisonReason).toBe('seal_mismatch');
    expect(decoder.framesDecoded).toBe(1);
    expect(decoder.bytesDropped).toBe(good.byteLength);
    expect(decoder.rejections.seal_mismatch).toBe(1);
    expect(decoder.next()).toBeNull();
  });

  it('header-only frames are size-checked: a sealed RequestStateChunk with a body is rejected', () => {
    const frame = sealUnchecked(kernels, base(Command.requestStateChunk), new Uint8Array(16));
    expect(drain(new FrameDecoder(kernels), [frame])).toEqual([{ ok: false, reason: 'size_not_header_only' }]);
  });

  it('rejects another cluster when configured with one', () => {
    const frame = frameOf(Command.commit);
    const cluster = base(Command.commit).cluster;
    expect(drain(new FrameDecoder(kernels, { cluster }), [frame])[0]?.ok).toBe(true);
    expect(drain(new FrameDecoder(kernels, { cluster: 1n }), [frame])).toEqual([{ ok: false, reason: 'cluster_mismatch' }]);
  });

  it('a frame of exactly MESSAGE_SIZE_MAX is accepted across chunks', () => {
    const frame = new Uint8Array(MESSAGE_SIZE_MAX);
    const header = { ...base(Command.request), size: MESSAGE_SIZE_MAX };
    const bytes = sealUnchecked(kernels, header, frame.subarray(HEADER_SIZE));
    const results = drain(new FrameDecoder(kernels), splitAt(bytes, [10, 64 * 1024, 700_000]));
    expect(results).toHaveLength(1);
    expect(results[0]?.ok && results[0].frame.byteLength).toBe(MESSAGE_SIZE_MAX);
  });

  it('ignores empty chunks and asserts when a chunk is pushed before the previous one is drained', () => {
    const decoder = new FrameDecoder(kernels);
    decoder.push(new Uint8Array(0));
    expect(decoder.next()).toBeNull();
    const frame = frameOf(Command.ping);
    decoder.push(concat([frame, frame]));
    expect(decoder.next()?.ok).toBe(true);
    expect(() => decoder.push(frame)).toThrow(AssertionError);
  });

  it('a header whose size field lies about the body (header re-sealed) fails its body checksum', () => {
    const frame = frameOf(Command.stateChunk);
    const shorter = frame.slice(0, frame.byteLength - 10);
    writeU32(shorter, HeaderOffset.size, shorter.byteLength);
    // The seal is recomputed, but checksum_body still describes the original, longer body.
    writeU128(shorter, HeaderOffset.checksum, frameSeal(kernels, shorter));
    expect(drain(new FrameDecoder(kernels), [shorter])).toEqual([{ ok: false, reason: 'body_checksum_mismatch' }]);
  });
});

describe('FrameDecoder with a FramePool (state chunk frames reused once their chunk is written)', () => {
  const chunk = (offset: number, fill: number): Uint8Array =>
    buildFrame(kernels, { ...(({ size: _s, checksum: _c, checksumBody: _b, ...input }) => input)(base(Command.stateChunk)), offset } as HeaderInput, new Uint8Array(4096).fill(fill));

  it('decodes state chunks into pooled buffers, whole or across chunks, and reuses a buffer given back', () => {
    const pool = new FramePool(HEADER_SIZE + 4096, 4);
    const decoder = new FrameDecoder(kernels, {}, pool);
    const [first, second, third] = [chunk(0, 1), chunk(4096, 2), chunk(8192, 3)];
    const [a] = drain(decoder, [first]);
    expect(a?.ok && a.body.every((byte) => byte === 1)).toBe(true);
    // Split across socket reads (the body is assembled in the pooled buffer).
    const [b] = drain(decoder, splitAt(second, [100, 300, 2000]));
    expect(b?.ok && b.body.every((byte) => byte === 2)).toBe(true);
    expect(pool.counters).toMatchObject({ taken: 2, reused: 0 });
    if (!a?.ok || !b?.ok) return;
    // Two frames alive at once never share a buffer.
    expect(a.frame.buffer).not.toBe(b.frame.buffer);
    pool.release(a.body);
    const [c] = drain(decoder, splitAt(third, [256]));
    expect(c?.ok && c.frame.buffer).toBe(a.frame.buffer);
    expect(c?.ok && c.body.every((byte) => byte === 3)).toBe(true);
    expect(c?.ok && c.header.command === Command.stateChunk && c.header.offset).toBe(8192);
    expect(pool.counters).toMatchObject({ taken: 3, reused: 1 });
  });

  it('every other frame, and a chunk larger than the pool\'s frames, is allocated as before', () => {
    const pool = new FramePool(HEADER_SIZE + 1024, 4);
    const decoder = new FrameDecoder(kernels, {}, pool);
    const results = drain(decoder, [frameOf(Command.prepare), chunk(0, 9)]);
    expect(results.map((result) => result.ok)).toEqual([true, true]);
    expect(pool.counters.taken).toBe(0);
  });
});

describe('FramePool', () => {
  it('hands out views of its own buffers, keeps at most freeMax given back, ignores foreign ones', () => {
    const pool = new FramePool(1000, 2);
    const frames = [pool.take(1000), pool.take(10), pool.take(500)];
    expect(frames.map((frame) => frame.byteLength)).toEqual([1000, 10, 500]);
    for (const frame of frames) pool.release(frame.subarray(3, 7));
    expect(pool.freeCount).toBe(2);
    pool.release(new Uint8Array(1000));
    expect(pool.freeCount).toBe(2);
    expect(pool.take(1000).buffer).toBe(frames[1]!.buffer);
    expect(pool.counters).toMatchObject({ taken: 4, reused: 1, kept: 2 });
  });

  it('asserts on a frame given back twice (its next two takers would share bytes) and on an oversized take', () => {
    const pool = new FramePool(1000, 4);
    const frame = pool.take(100);
    pool.release(frame);
    expect(() => pool.release(frame)).toThrow(AssertionError);
    expect(() => pool.take(1001)).toThrow(AssertionError);
  });
});

/**
 * RingBuffer: FIFO order across wrap-around, refusal when full, and released slots.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AssertionError } from '../../src/stdx/assert.js';
import { RingBuffer } from '../../src/stdx/ring-buffer.js';

describe('RingBuffer', () => {
  it('is FIFO across wrap-around and refuses a push when full', () => {
    const ring = new RingBuffer<number>(3);
    expect(ring.empty).toBe(true);
    expect([ring.push(1), ring.push(2), ring.push(3), ring.push(4)]).toEqual([true, true, true, false]);
    expect(ring.full).toBe(true);
    expect(ring.shift()).toBe(1);
    expect(ring.push(5)).toBe(true);
    expect([...ring]).toEqual([2, 3, 5]);
    expect(ring.peek()).toBe(2);
    expect([ring.shift(), ring.shift(), ring.shift(), ring.shift()]).toEqual([2, 3, 5, undefined]);
    expect(ring.length).toBe(0);
  });

  it('behaves like a bounded array queue (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.option(fc.integer(), { nil: undefined }), { maxLength: 200 }), (capacity, ops) => {
        const ring = new RingBuffer<number>(capacity);
        const model: number[] = [];
        for (const op of ops) {
          if (op === undefined) {
            expect(ring.shift()).toBe(model.shift());
          } else {
            expect(ring.push(op)).toBe(model.length < capacity);
            if (model.length < capacity) model.push(op);
          }
          expect(ring.length).toBe(model.length);
          expect([...ring]).toEqual(model);
        }
      }),
    );
  });

  it('clear() empties it and the capacity must be positive', () => {
    const ring = new RingBuffer<object>(2);
    ring.push({});
    ring.clear();
    expect(ring.length).toBe(0);
    expect(ring.push({})).toBe(true);
    expect(() => new RingBuffer(0)).toThrow(AssertionError);
  });
});

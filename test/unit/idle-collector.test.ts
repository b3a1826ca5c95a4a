/**
 * The idle collector: one full collection once the replica is idle after a checkpoint payload
 * was let go or replaced, none under load, none twice for the same garbage.
 */
import { describe, expect, it } from 'vitest';
import { FetchCollector, IdleCollector, fullCollection, minorCollection } from '../../src/node/idle-collector.js';

describe('IdleCollector', () => {
  it('collects once the commit number stood still for an interval after a payload was let go, and not again until another is', () => {
    let collected = 0;
    const collector = new IdleCollector(() => (collected += 1), { released: 0, commit: 10, busy: false });
    // Idle, nothing let go: nothing to collect.
    expect(collector.check({ released: 0, commit: 10, busy: false })).toBe(false);
    // A payload let go while commits advance (under load the collector runs by itself).
    expect(collector.check({ released: 1, commit: 20, busy: false })).toBe(false);
    expect(collector.check({ released: 2, commit: 30, busy: false })).toBe(false);
    expect(collected).toBe(0);
    // The first interval without a commit: one collection.
    expect(collector.check({ released: 2, commit: 30, busy: false })).toBe(true);
    expect(collected).toBe(1);
    // Still idle, the same garbage: collected already.
    expect(collector.check({ released: 2, commit: 30, busy: false })).toBe(false);
    // Another let go while a peer fetches or repairs from us: not while it does, once it is done.
    expect(collector.check({ released: 3, commit: 30, busy: true })).toBe(false);
    expect(collector.check({ released: 3, commit: 30, busy: true })).toBe(false);
    expect(collector.check({ released: 3, commit: 30, busy: false })).toBe(true);
    expect([collected, collector.collections]).toEqual([2, 2]);
  });

  it('V8\'s full collection is reachable at run time on this Node', () => {
    const gc = fullCollection();
    expect(typeof gc).toBe('function');
    gc!();
  });
});

describe('FetchCollector', () => {
  it('collects once per everyBytes fetched, only while fetching, and starts over with a new session', () => {
    let collected = 0;
    const collector = new FetchCollector(() => (collected += 1), 100);
    // No fetch: nothing, whatever a finished session's progress says.
    expect(collector.check({ stage: 'idle', bytesDone: 0 })).toBe(false);
    expect(collector.check({ stage: 'awaiting_target', bytesDone: 0 })).toBe(false);
    expect(collector.check({ stage: 'installing', bytesDone: 1_000 })).toBe(false);
    // Fetching: one collection per 100 bytes received, however the ticks fall.
    expect(collector.check({ stage: 'fetching', bytesDone: 99 })).toBe(false);
    expect(collector.check({ stage: 'fetching', bytesDone: 100 })).toBe(true);
    expect(collector.check({ stage: 'fetching', bytesDone: 150 })).toBe(false);
    expect(collector.check({ stage: 'fetching', bytesDone: 260 })).toBe(true);
    expect(collector.check({ stage: 'fetching', bytesDone: 359 })).toBe(false);
    // A new session (its progress starts over): counted from its own start.
    expect(collector.check({ stage: 'fetching', bytesDone: 50 })).toBe(false);
    expect(collector.check({ stage: 'fetching', bytesDone: 100 })).toBe(true);
    // The fetch ended and another began: likewise.
    expect(collector.check({ stage: 'installing', bytesDone: 400 })).toBe(false);
    expect(collector.check({ stage: 'fetching', bytesDone: 99 })).toBe(false);
    expect(collector.check({ stage: 'fetching', bytesDone: 120 })).toBe(true);
    expect([collected, collector.collections]).toEqual([4, 4]);
  });

  it('asks V8 for a young-generation collection, which this Node runs', () => {
    const calls: unknown[] = [];
    minorCollection((...args: unknown[]) => void calls.push(args[0]))();
    expect(calls).toEqual([{ type: 'minor' }]);
    const gc = fullCollection();
    expect(gc).not.toBeNull();
    expect(() => minorCollection(gc!)()).not.toThrow();
  });
});

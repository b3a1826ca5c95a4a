/**
 * The idle collector: one full collection once the replica is idle after a checkpoint payload
 * was let go or replaced, none under load, none twice for the same garbage.
 */
import { describe, expect, it } from 'vitest';
import { IdleCollector, fullCollection } from '../../src/node/idle-collector.js';

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

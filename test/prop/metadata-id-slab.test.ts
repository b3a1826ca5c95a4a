/**
 * Id allocation: an insert takes the lowest id not in use, whatever the history of deletes, and a
 * slab rebuilt from its live ids (a snapshot restore) allocates exactly like the live one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdSlab } from '../../src/metadata/id-slab.js';

describe('id slab', () => {
  it('insert takes the lowest free id; a rebuilt slab continues identically', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant<'insert'>('insert'), fc.nat(40)), { maxLength: 200 }), fc.array(fc.constant(0), { maxLength: 20 }), (steps, tail) => {
        const slab = new IdSlab<{ id: number }>(32);
        const live = new Set<number>();
        for (const step of steps) {
          if (step === 'insert') {
            let lowest = 0;
            while (live.has(lowest)) lowest++;
            if (lowest >= 32) {
              expect(slab.isFull()).toBe(true);
              continue;
            }
            expect(slab.insert((id) => ({ id })).id).toBe(lowest);
            live.add(lowest);
          } else if (live.has(step)) {
            expect(slab.remove(step).id).toBe(step);
            live.delete(step);
          }
        }
        expect(slab.count).toBe(live.size);
        expect(slab.toArray().map((value) => value.id)).toEqual([...live].sort((a, b) => a - b));
        const rebuilt = IdSlab.from(32, slab.toArray().map((value) => [value.id, value] as const));
        for (const _ of tail) {
          if (slab.isFull()) break;
          expect(rebuilt.insert((id) => ({ id })).id).toBe(slab.insert((id) => ({ id })).id);
        }
      }),
      { numRuns: 500 },
    );
  });
});

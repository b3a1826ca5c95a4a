/**
 * `vrmeta simulate --seed N --trace` (runSimulate with `trace`): the seed's log as it runs, with
 * every replica's debug records, which name the guard that dropped each message. Tracing only
 * observes: the seed runs exactly as without it.
 */
import { describe, expect, it } from 'vitest';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { runSimulate } from '../../src/testing/simulate.js';
import { DROP_REASONS, type DropReason } from '../../src/vsr/drop-reason.js';

const kernels = createWasmKernels(new WasmInstance('simd'));
const SEED = 5;
const DROPPED = / r(\d+) debug message dropped (\{.*\})$/;

function run(trace: boolean): string[] {
  const lines: string[] = [];
  runSimulate({ seed: SEED, trace, kernels, write: (line) => lines.push(line) });
  return lines;
}

describe('simulate --trace', () => {
  it('prints each replica\'s dropped messages with a named reason', () => {
    const lines = run(true);
    const drops = lines
      .map((line) => DROPPED.exec(line))
      .filter((match) => match !== null)
      .map((match) => ({
        replica: Number(match[1]),
        fields: JSON.parse(match[2]!) as Record<string, unknown>,
      }));
    expect(drops.length).toBeGreaterThan(100);
    const reasons = new Set(drops.map((drop) => drop.fields['reason']));
    for (const reason of reasons) expect(DROP_REASONS).toContain(reason as DropReason);
    // A view change happens in every seed: votes arriving after it are dropped by status.
    expect(reasons).toContain('status_not_view_change');
    for (const drop of drops) {
      expect(typeof drop.fields['command']).toBe('string');
      expect(typeof drop.fields['view']).toBe('number');
    }
  });

  it('prints no debug record without --trace, and the seed runs the same either way', () => {
    const plain = run(false);
    expect(plain.filter((line) => DROPPED.test(line))).toEqual([]);
    const traced = run(true);
    const summary = (lines: string[]) => lines.find((line) => line.startsWith(`seed=${SEED} `));
    expect(summary(plain)).toMatch(/^seed=5 ok /);
    expect(summary(traced)).toBe(summary(plain));
  });

  it('traces one seed only', () => {
    const options = { seeds: 2, base: 1, trace: true, kernels, write: () => {} };
    const many = (): unknown => runSimulate(options);
    expect(many).toThrow(/one seed/);
  });
});

/**
 * bench/profile-summary.ts charges each CPU-profile sample to the category the README's analysis
 * uses: GC, idle, socket writes and fsync by their native frames, else the nearest vrmeta source
 * directory on the stack, else an npm package, else node's internals; and it can skip warm-up.
 */
import { describe, expect, it } from 'vitest';
import { formatProfileSummary, summarizeProfile } from '../../bench/profile-summary.js';

const frame = (functionName: string, url = ''): { functionName: string; url: string } => ({ functionName, url });

// root -> http handler (node_modules/fastify) -> our route (src/http) -> replica (src/vsr) -> writeBuffer
const profile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 6, 7, 8, 9] },
    { id: 2, callFrame: frame('handle', 'file:///x/node_modules/fastify/lib/route.js'), children: [3] },
    { id: 3, callFrame: frame('createStream', 'file:///x/dist/src/http/routes.js'), children: [4] },
    { id: 4, callFrame: frame('onRequest', 'file:///x/dist/src/vsr/replica.js'), children: [5] },
    { id: 5, callFrame: frame('writeBuffer') },
    { id: 6, callFrame: frame('(garbage collector)') },
    { id: 7, callFrame: frame('(idle)') },
    { id: 8, callFrame: frame('emit', 'node:events') },
    { id: 9, callFrame: frame('fsync', 'node:fs') },
  ],
  // Each sample 1 ms; the first one (a VSR sample) falls in the skipped warm-up.
  samples: [4, 4, 3, 2, 5, 6, 7, 7, 8, 9],
  timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
};

describe('bench profile summary', () => {
  it('charges samples to the README categories and skips warm-up', () => {
    const summary = summarizeProfile(profile, 1);
    expect(summary.totalMs).toBe(9);
    expect(summary.busyMs).toBe(7);
    expect(Object.fromEntries(summary.categories.map(({ name, ms }) => [name, ms]))).toEqual({
      'VSR core': 1,
      'HTTP layer (vrmeta)': 1,
      'npm packages (fastify, pino, ...)': 1,
      'socket write syscalls': 1,
      GC: 1,
      'node internals (streams, HTTP parser, timers)': 1,
      fsync: 1,
    });
    expect(summary.categories.reduce((sum, { shareOfBusy }) => sum + shareOfBusy, 0)).toBeCloseTo(1);
    expect(formatProfileSummary(summary)).toContain('| socket write syscalls | 1 | 14.3% |');
  });
});

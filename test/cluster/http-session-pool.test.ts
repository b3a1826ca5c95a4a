/**
 * One login, many concurrent writes: a 3-replica cluster whose HTTP edge keeps up to
 * SESSIONS_PER_CREDENTIAL VSR sessions per credential. WRITES concurrent creates with one token
 * all commit, and the primary's vsr_http_sessions gauge shows they ran on more than one session
 * and on no more than the bound (a single session per credential would show exactly one).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sample } from '../support/prometheus-text.js';
import { Cluster } from './harness.js';

const SESSIONS_PER_CREDENTIAL = 4;
const WRITES = 24;


async function scrape(c: Cluster, index: number): Promise<string> {
  const response = await fetch(`http://${c.httpAddress(index)}/metrics`, { signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /metrics on replica ${index}: ${response.status} ${text.slice(0, 200)}`);
  return text;
}

let cluster: Cluster | undefined;
const seen = { sessionsBefore: -1, sessionsAfter: -1, busyAfter: -1, created: [] as number[], names: [] as string[] };

beforeAll(async () => {
  const c = await Cluster.start({ extraArgs: ['--metrics-public', '--http-sessions-per-credential', String(SESSIONS_PER_CREDENTIAL)] });
  cluster = c;
  await c.explain(async () => {
    const primary = await c.primary();
    const before = await scrape(c, primary);
    seen.sessionsBefore = sample(before, 'vsr_http_sessions');
    const writer = await c.login(primary);
    const streams = await Promise.all(Array.from({ length: WRITES }, (_, index) => writer.createStream(`pool-${index}`)));
    seen.created = streams.map((stream) => stream.id);
    const after = await scrape(c, primary);
    seen.sessionsAfter = sample(after, 'vsr_http_sessions');
    seen.busyAfter = sample(after, 'vsr_http_sessions', { state: 'busy' });
    seen.names = (await writer.getStreams()).map((stream) => stream.name).filter((name) => name.startsWith('pool-'));
  });
}, 120_000);

afterAll(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

describe('HTTP edge: one token, concurrent writes', () => {
  it('commits every write, once', () => {
    expect(new Set(seen.created).size).toBe(WRITES);
    expect(seen.names.sort()).toEqual(Array.from({ length: WRITES }, (_, index) => `pool-${index}`).sort());
  });

  it('runs them on more than one VSR session, and on no more than the per-credential bound', () => {
    const opened = seen.sessionsAfter - seen.sessionsBefore;
    expect(opened).toBeGreaterThan(1);
    expect(opened).toBeLessThanOrEqual(SESSIONS_PER_CREDENTIAL);
    expect(seen.busyAfter).toBe(0);
  });
});

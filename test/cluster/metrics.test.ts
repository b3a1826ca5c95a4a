/**
 * /metrics of real replicas: a 3-replica cluster started with --metrics-public takes
 * writes, checkpoints and changes view (its primary stops); the scrapes of the primaries before
 * and after carry the latency histograms, counters and process metrics, and pass
 * `promtool check metrics` (Debian's `prometheus` package).
 *
 * Without promtool the promtool check is skipped locally with its reason; CI installs the package
 * and sets VRMETA_REQUIRE_PROMTOOL=1 (.ci/run), under which a missing promtool fails the test.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sample } from '../support/prometheus-text.js';
import { Cluster } from './harness.js';

const PROMTOOL_REQUIRED = process.env['VRMETA_REQUIRE_PROMTOOL'] === '1';
const PROMTOOL_FOUND = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
/** Writes: enough for two checkpoints at journal_slots 32, depth 8 (one every 16 ops). */
const WRITES = 40;
/**
 * clients_table_max 4: at most 2 HTTP sessions per node, 4 in the replicated client table. One
 * user (root) opens every session here, so its share is raised to the whole table: the per-user
 * bound would otherwise evict first.
 */
const CLIENTS_TABLE_MAX = 4;
/** Sessions (one login each) that write after the first: each one beyond the caps evicts one. */
const EXTRA_SESSIONS = 5;


function typeOf(text: string, name: string): string | undefined {
  return new RegExp(`^# TYPE ${name} (\\w+)$`, 'm').exec(text)?.[1];
}

let cluster: Cluster | undefined;
/** Scrapes without a token (the cluster runs with --metrics-public). */
const scrapes: { before: string; after: string; statsStatus: number; survivor: number; oldPrimary: number } = {
  before: '',
  after: '',
  statsStatus: 0,
  survivor: -1,
  oldPrimary: -1,
};

async function scrape(c: Cluster, index: number): Promise<string> {
  const response = await fetch(`http://${c.httpAddress(index)}/metrics`, { signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /metrics on replica ${index} without a token: ${response.status} ${text.slice(0, 200)}`);
  return text;
}

beforeAll(async () => {
  const c = await Cluster.start({ journalSlots: 32, prepareQueueDepth: 8, clientsTableMax: CLIENTS_TABLE_MAX, extraArgs: ['--metrics-public', '--sessions-per-user-max', String(CLIENTS_TABLE_MAX)] });
  cluster = c;
  await c.explain(async () => {
    const primary = await c.primary();
    const root = c.client(primary);
    for (let index = 0; index < WRITES; index++) await root.createStream(`metrics-${index}`);
    // Every login is a session of its own: more of them than the caps hold evict the oldest.
    for (let index = 0; index < EXTRA_SESSIONS; index++) await (await c.login(primary)).createStream(`session-${index}`);
    await c.waitFor('a checkpoint on the primary', async () => (await c.status(primary)).checkpoint_op > 0 || null, 20_000);
    scrapes.before = await scrape(c, primary);
    scrapes.statsStatus = (await fetch(`http://${c.httpAddress(primary)}/stats`, { signal: AbortSignal.timeout(10_000) })).status;
    // A graceful stop of the primary hands over: the survivors elect a new view.
    await c.stop(primary);
    const survivors = c.indices().filter((index) => index !== primary);
    const statuses = await c.waitForConverged(survivors, 30_000, 'a new view without the old primary');
    scrapes.oldPrimary = primary;
    scrapes.survivor = statuses[0]!.primary;
    scrapes.after = await scrape(c, scrapes.survivor);
  });
}, 120_000);

afterAll(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

describe('/metrics of a running cluster', () => {
  it('--metrics-public serves /metrics without a token, and only /metrics', () => {
    expect(scrapes.before).toContain('# TYPE vsr_view gauge');
    expect(scrapes.statsStatus).toBe(401);
  });

  it('the primary timed its writes: request, fsync, prepare -> commit, checkpoints', () => {
    const text = scrapes.before;
    const replica = String(scrapes.oldPrimary);
    // WRITES creates plus the Register of the HTTP session.
    expect(sample(text, 'vsr_client_request_duration_seconds_count', { transport: 'http', outcome: 'reply', replica })).toBeGreaterThanOrEqual(WRITES);
    expect(sample(text, 'vsr_client_request_duration_seconds_sum', { transport: 'http', outcome: 'reply' })).toBeGreaterThan(0);
    expect(sample(text, 'vsr_wal_fsync_duration_seconds_count')).toBeGreaterThan(0);
    expect(sample(text, 'vsr_prepare_to_commit_seconds_count')).toBeGreaterThanOrEqual(WRITES);
    expect(sample(text, 'vsr_checkpoint_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    const checkpoints = sample(text, 'vsr_checkpoint_size_bytes_count');
    expect(checkpoints).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'vsr_checkpoint_size_bytes_sum') / checkpoints).toBeGreaterThan(0);
    for (const reason of ['queue_full', 'queue_bytes', 'self', 'closed']) expect(sample(text, 'vsr_replica_frames_dropped_total', { reason })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'vsr_requests_dropped_total')).toBeGreaterThanOrEqual(0);
  });

  it('counts the evictions: local HTTP sessions over clients_table_max / 2, and the replicated client table', () => {
    const text = scrapes.before;
    const sessions = 1 + EXTRA_SESSIONS;
    expect(sample(text, 'vsr_session_evictions_total', { transport: 'http', reason: 'capacity' })).toBe(sessions - CLIENTS_TABLE_MAX / 2);
    expect(sample(text, 'vsr_client_table_evictions_total')).toBe(sessions - CLIENTS_TABLE_MAX);
  });

  it('the new primary counted the view change', () => {
    // Forming the cluster may already have taken a view change; stopping the primary takes one more.
    expect(sample(scrapes.after, 'vsr_view')).toBeGreaterThan(sample(scrapes.before, 'vsr_view'));
    expect(sample(scrapes.after, 'vsr_view_changes_total', { replica: String(scrapes.survivor) })).toBeGreaterThanOrEqual(1);
  });

  it("carries prom-client's process metrics on the node's registry, with the replica label", () => {
    const text = scrapes.before;
    const replica = String(scrapes.oldPrimary);
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'process_open_fds', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      expect(sample(text, name, { replica }), name).toBeGreaterThanOrEqual(0);
    }
    expect(typeOf(text, 'nodejs_gc_duration_seconds')).toBe('histogram');
    expect(typeOf(text, 'vsr_replica_auth_failures_total')).toBe('counter');
    expect(typeOf(text, 'vsr_replica_frames_rejected_total')).toBe('counter');
    expect(typeOf(text, 'http_password_verifications_refused_total')).toBe('counter');
  });

  it.skipIf(!PROMTOOL_FOUND && !PROMTOOL_REQUIRED)(
    `promtool check metrics passes on both scrapes${PROMTOOL_FOUND || PROMTOOL_REQUIRED ? '' : ' (skipped: promtool is not installed; apt-get install prometheus, or set VRMETA_REQUIRE_PROMTOOL=1 to fail instead)'}`,
    () => {
      expect(PROMTOOL_FOUND, 'VRMETA_REQUIRE_PROMTOOL=1 but promtool is not on PATH (apt-get install prometheus)').toBe(true);
      for (const [which, text] of [['before', scrapes.before], ['after', scrapes.after]] as const) {
        expect(text.length, which).toBeGreaterThan(0);
        const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
        expect({ which, status: result.status, output: `${result.stdout}${result.stderr}` }).toEqual({ which, status: 0, output: '' });
      }
    },
  );
});

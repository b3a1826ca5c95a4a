/**
 * Operational endpoints (DESIGN.md §2.3): /livez, /readyz, /cluster/status, /metrics, plus
 * Iggy's /stats, /cluster/metadata and /clients. Shapes are snake_case and the metrics carry the
 * replica gauges, read from the node at scrape time.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { LazyRequestLogger } from '../../src/http/request-logger.js';
import { createTestNode } from '../../src/http/test-node.js';
import { expectErrorShape, harness, JWT_SECRET, type Harness } from './http-fixtures.js';

let h: Harness;
let token: string;

beforeEach(async () => {
  h = await harness({ node: { replica: 1, clusterName: 'blue' } });
  token = await h.rootToken();
});
afterEach(async () => {
  await h.close();
});

describe('health', () => {
  it('/livez is 200 without a token', async () => {
    const reply = await h.request('GET', '/livez');
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ status: 'live' });
  });

  it('/readyz is 200 only when the node is ready, else 503 with the reason', async () => {
    expect((await h.request('GET', '/readyz')).json).toEqual({ status: 'ready' });
    h.node.isReady = false;
    h.node.stateTransfer = { stage: 'fetching', peer: 2, artifact: 'snapshot', bytesDone: 10, bytesTotal: 100, startedAtMs: 1, etaMs: 5 };
    const reply = await h.request('GET', '/readyz');
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(expectErrorShape(reply)).toMatchObject({ id: 503, code: 'not_ready', reason: 'state transfer in progress (fetching)' });
    h.node.replicaStatus = 'view_change';
    expect(expectErrorShape(await h.request('GET', '/readyz')).reason).toBe('replica status is view_change');
  });
});

describe('/cluster/status', () => {
  it('renders ClusterStatus in snake_case for any valid token', async () => {
    h.node.stateTransfer = { stage: 'installing', peer: 0, artifact: 'snapshot.bin', bytesDone: 64, bytesTotal: 128, startedAtMs: 1_000, etaMs: null };
    h.node.peers = [
      { replica: 0, address: '127.0.0.1:9090', connected: true, commitMax: 12, lagOps: 0 },
      { replica: 2, address: '127.0.0.1:9092', connected: false, commitMax: null, lagOps: null },
    ];
    h.node.currentView = 3;
    const reply = await h.request('GET', '/cluster/status', { token });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({
      replica: 1,
      replica_count: 3,
      view: 3,
      status: 'normal',
      primary: 1,
      op: h.node.lastOp,
      commit_min: h.node.lastOp,
      commit_max: h.node.lastOp,
      checkpoint_op: 0,
      checkpoint_id: '0000000000000000',
      heartbeat_ms: 100,
      election_timeout_ms: 500,
      state_transfer: { stage: 'installing', peer: 0, artifact: 'snapshot.bin', bytes_done: 64, bytes_total: 128, started_at_ms: 1_000, eta_ms: null },
      replicas: [
        { replica: 0, address: '127.0.0.1:9090', connected: true, commit_max: 12, lag_ops: 0 },
        { replica: 2, address: '127.0.0.1:9092', connected: false, commit_max: null, lag_ops: null },
      ],
    });
    expect(reply.headers['iggy-view']).toBe('3');
    expect((await h.request('GET', '/cluster/status')).status).toBe(401);
  });
});

describe('/metrics', () => {
  it('needs a token and exposes the replica gauges and the latency histogram', async () => {
    expect((await h.request('GET', '/metrics')).status).toBe(401);
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    h.node.currentView = 7;
    h.node.peers = [{ replica: 0, address: 'a:1', connected: true, commitMax: 3, lagOps: 4 }];
    h.node.stateTransfer = { stage: 'fetching', peer: 0, artifact: 'snapshot', bytesDone: 512, bytesTotal: 4096, startedAtMs: 1, etaMs: 10 };
    h.node.transport = { authFailures: { mac_mismatch: 3, mode_mismatch: 1 }, rejectedFrames: { checksum_body: 2 } };
    const reply = await h.request('GET', '/metrics', { token });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = reply.text;
    for (const line of [
      'vsr_view{replica="1"} 7',
      `vsr_op{replica="1"} ${h.node.lastOp}`,
      `vsr_commit_min{replica="1"} ${h.node.lastOp}`,
      `vsr_commit_max{replica="1"} ${h.node.lastOp}`,
      'vsr_checkpoint_op{replica="1"} 0',
      'vsr_is_primary{replica="1"} 1',
      'vsr_state_transfer_stage{stage="fetching",replica="1"} 1',
      'vsr_state_transfer_bytes_done{replica="1"} 512',
      'vsr_state_transfer_artifact_bytes{replica="1"} 4096',
      'vsr_replica_lag_ops{peer="0",replica="1"} 4',
      'vsr_replica_auth_failures_total{reason="mac_mismatch",replica="1"} 3',
      'vsr_replica_auth_failures_total{reason="mode_mismatch",replica="1"} 1',
      'vsr_replica_frames_rejected_total{reason="checksum_body",replica="1"} 2',
      'streams{replica="1"} 1',
      '# TYPE http_request_duration_seconds histogram',
    ]) {
      expect(text, line).toContain(line);
    }
    expect(text).toContain('http_request_duration_seconds_count{replica="1",method="POST",route="/streams",status_code="200"} 1');
  });

  it('with metricsPublic it answers without a token; other node-local reads still need one', async () => {
    const open = buildApp({ node: await createTestNode({ replica: 4 }), jwtSecret: JWT_SECRET, metricsPublic: true });
    await open.ready();
    const reply = await open.inject({ method: 'GET', url: '/metrics' });
    expect(reply.statusCode).toBe(200);
    expect(reply.body).toContain('vsr_view{replica="4"} ');
    expect((await open.inject({ method: 'GET', url: '/stats' })).statusCode).toBe(401);
    expect((await open.inject({ method: 'GET', url: '/cluster/status' })).statusCode).toBe(401);
    await open.close();
  });

  it("carries prom-client's process metrics on the app's registry, not the global one", async () => {
    const { register } = await import('prom-client');
    const text = (await h.request('GET', '/metrics', { token })).text;
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_active_handles']) {
      expect(text, name).toMatch(new RegExp(`^${name}\\{[^}]*replica="1"[^}]*\\} `, 'm'));
    }
    expect(text).toContain('# TYPE nodejs_gc_duration_seconds histogram');
    expect(register.getSingleMetric('process_cpu_user_seconds_total')).toBeUndefined();
    // Gauges named `_total` are refused by promtool: counters only end in `_total`.
    for (const match of text.matchAll(/^# TYPE (\w+_total) (\w+)$/gm)) expect(match[2], match[1]).toBe('counter');
  });

  it('each app has its own registry', async () => {
    const other = buildApp({ node: await createTestNode({ replica: 2 }), jwtSecret: JWT_SECRET });
    await other.ready();
    const mine = await h.request('GET', '/metrics', { token });
    expect(mine.text).toContain('vsr_view{replica="1"}');
    expect(mine.text).not.toContain('replica="2"');
    await other.close();
  });
});

describe('Iggy system routes', () => {
  it('/stats carries Iggy fields with metadata counts', async () => {
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    await h.request('POST', '/streams/s/topics', { token, body: { name: 't', partitions_count: 3, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0 } });
    const reply = await h.request('GET', '/stats', { token });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ streams_count: 1, topics_count: 1, partitions_count: 3, consumer_groups_count: 0, clients_count: 0, messages_size_bytes: '0 B' });
    expect(Object.keys(reply.json).sort()).toEqual(
      [
        'available_memory', 'cache_metrics', 'clients_count', 'consumer_groups_count', 'cpu_usage', 'free_disk_space', 'hostname',
        'iggy_server_semver', 'iggy_server_version', 'kernel_version', 'memory_usage', 'messages_count', 'messages_size_bytes',
        'os_name', 'os_version', 'partitions_count', 'process_id', 'read_bytes', 'run_time', 'segments_count', 'start_time',
        'streams_count', 'threads_count', 'topics_count', 'total_cpu_usage', 'total_disk_space', 'total_memory', 'written_bytes',
      ].sort(),
    );
    expect(reply.json.iggy_server_semver).toBe(1000);
  });

  it('/cluster/metadata renders the roster in Iggy shape', async () => {
    h.node.clusterNodes = [
      { replica: 0, name: 'node-0', http: '127.0.0.1:3000', role: 'follower', status: 'healthy' },
      { replica: 1, name: 'node-1', http: '[::1]:3001', role: 'leader', status: 'healthy' },
    ];
    const reply = await h.request('GET', '/cluster/metadata', { token });
    expect(reply.json).toEqual({
      name: 'blue',
      nodes: [
        { name: 'node-0', ip: '127.0.0.1', endpoints: { tcp: 0, quic: 0, http: 3000, websocket: 0 }, role: 'follower', status: 'healthy' },
        { name: 'node-1', ip: '::1', endpoints: { tcp: 0, quic: 0, http: 3001, websocket: 0 }, role: 'leader', status: 'healthy' },
      ],
    });
  });

  it('/clients lists connections as Iggy: by u32 id, sorted, user null before login; /clients/{id} adds memberships', async () => {
    // An HTTP session is not a connection: Iggy does not list it, and neither does vrmeta.
    await h.request('POST', '/streams', { token, body: { name: 's' } });
    expect((await h.request('GET', '/clients', { token })).json).toEqual([]);
    h.node.connectedClients = [
      { clientId: 0xffff_fff0, userId: 0, session: 3, consumerGroups: [{ streamId: 0, topicId: 1, groupId: 2 }], address: '127.0.0.1:50001', transport: 'TCP' },
      { clientId: 7, userId: null, session: 0, consumerGroups: [], address: '127.0.0.1:50002', transport: 'TCP' },
    ];
    const list = await h.request('GET', '/clients', { token });
    expect(list.json).toEqual([
      { client_id: 7, user_id: null, address: '127.0.0.1:50002', transport: 'TCP', consumer_groups_count: 0 },
      { client_id: 0xffff_fff0, user_id: 0, address: '127.0.0.1:50001', transport: 'TCP', consumer_groups_count: 1 },
    ]);
    const details = await h.request('GET', `/clients/${0xffff_fff0}`, { token });
    expect(details.json).toMatchObject({ client_id: 0xffff_fff0, consumer_groups: [{ stream_id: 0, topic_id: 1, group_id: 2 }] });
    expect((await h.request('GET', '/stats', { token })).json.clients_count).toBe(2);
    expect((await h.request('GET', '/clients/999', { token })).status).toBe(404);
    expect((await h.request('GET', '/clients/abc', { token })).status).toBe(400);
  });
});

describe('logging', () => {
  it("uses the node's pino logger with a view binding and never logs secrets", async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
    const logged = await harness({ app: { logger: logger.child({ replica: 1 }) } });
    logged.node.currentView = 5;
    const rootToken = await logged.rootToken();
    const created = await logged.request('POST', '/personal-access-tokens', { token: rootToken, body: { name: 'logged', expiry: 0 } });
    await logged.request('POST', '/users', { token: rootToken, body: { username: 'loggy', password: 'very-secret-password', status: 'active' } });
    await logged.close();
    const requestLines = lines.map((line) => JSON.parse(line) as { replica?: number; view?: number; reqId?: string });
    expect(requestLines.some((line) => line.reqId !== undefined && line.replica === 1 && line.view === 5)).toBe(true);
    const all = lines.join('\n');
    for (const secret of ['very-secret-password', rootToken, created.json.token as string]) expect(all).not.toContain(secret);
  });

  it('makes no pino child for a request that logs nothing at an enabled level', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }).child({ replica: 1 });
    const children: unknown[] = [];
    const child = logger.child.bind(logger);
    logger.child = ((bindings, options) => {
      children.push(bindings);
      return child(bindings, options);
    }) as typeof logger.child;
    const logged = await harness({ app: { logger } });
    logged.node.currentView = 7;
    const rootToken = await logged.rootToken();
    const made = children.length;
    for (let index = 0; index < 5; index += 1) {
      expect((await logged.request('POST', '/streams', { token: rootToken, body: { name: `quiet-${index}` } })).status).toBe(200);
    }
    // fastify's per-request lines are info, below warn: no child for any of the five.
    expect(children.length).toBe(made);
    await logged.close();
    expect(lines).toEqual([]);
  });

  it('a request logger writes what a pino child would, made at its first line at an enabled level', () => {
    const lines: string[] = [];
    const parent = pino({ level: 'warn', timestamp: false }, { write: (line: string) => void lines.push(line) }).child({ replica: 1 });
    const lazy = new LazyRequestLogger(parent, { reqId: 'req-1' }, 4, {});
    lazy.info({ ignored: true }, 'below the level');
    lazy.debug('below the level');
    expect(lazy.materialized).toBe(false);
    expect(lazy.level).toBe('warn');
    lazy.warn({ op: 3 }, 'at the level');
    lazy.error('above it');
    expect(lazy.materialized).toBe(true);
    const eager = parent.child({ reqId: 'req-1', view: 4 }, {});
    eager.warn({ op: 3 }, 'at the level');
    eager.error('above it');
    expect(lines).toHaveLength(4);
    expect(lines.slice(0, 2)).toEqual(lines.slice(2));
    expect(JSON.parse(lines[0]!)).toMatchObject({ replica: 1, reqId: 'req-1', view: 4, op: 3, msg: 'at the level' });
    // A route's own level (fastify `logLevel`) is the child's to judge: info passes at 'info'.
    const routeLevel = new LazyRequestLogger(parent, { reqId: 'req-2' }, 4, { level: 'info' });
    routeLevel.info('route-level info');
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ reqId: 'req-2', view: 4, msg: 'route-level info' });
  });
});

/**
 * Prometheus metrics of one app (one replica), on a per-app Registry so two apps in one process
 * (tests, `vrmeta dev` in process) never share or clobber series.
 *
 * Replica gauges are read from `node.status()` at scrape time (prom-client `collect`), so they
 * cost nothing between scrapes and can never be stale. Names: `vsr_*` for the protocol (what
 * etcd / Kafka KRaft operators look for: view, op, commit, checkpoint, lag, transfer progress),
 * plus Iggy's own entity gauges (`streams`, `topics`, ...; apache/iggy http/metrics.rs) so a
 * dashboard built for Iggy keeps working.
 *
 * Cardinality is bounded: `route` is the route pattern (never the raw URL), unknown routes share
 * one label value, and the per-replica series are bounded by the static replica roster.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { NodeApi, StateTransferStatus } from './node-api.js';
import type { PasswordGateStats } from './password-gate.js';

const STATUS_VALUES = ['normal', 'view_change', 'recovering'] as const;
const TRANSFER_STAGES = ['idle', 'awaiting_target', 'fetching', 'preparing', 'installing'] as const satisfies readonly (
  | StateTransferStatus['stage']
  | 'idle'
)[];

/** Seconds: sub-millisecond reads up to multi-second commits during a view change. */
const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** prom-client default gauges whose `_total` suffix promtool's lint refuses (see createMetrics). */
const DEFAULT_METRICS_MISNAMED = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** The label for requests that matched no route (404s), so scanners cannot grow the series set. */
export const UNMATCHED_ROUTE = 'unmatched';

export interface HttpMetrics {
  readonly registry: Registry;
  observeRequest(method: string, route: string, statusCode: number, durationSeconds: number): void;
}

export function createMetrics(node: NodeApi, passwordGate: () => PasswordGateStats): HttpMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ replica: String(node.replica) });
  // prom-client's process metrics (CPU, memory, heap, event-loop lag, GC, open fds, handles), on
  // this registry: the global one would be shared by every app of the process.
  collectDefaultMetrics({ register: registry });
  // Gauges named like counters (promtool's lint refuses them); each is the sum of the by-type
  // gauge of the same name without `_total`, which stays.
  for (const name of DEFAULT_METRICS_MISNAMED) registry.removeSingleMetric(name);
  node.registerMetrics?.(registry);

  const gauge = (name: string, help: string, read: () => number): Gauge =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });

  gauge('vsr_view', 'current view number', () => node.view());
  gauge('vsr_is_primary', '1 when this replica is the primary of the current view', () => (node.isPrimary() ? 1 : 0));
  gauge('vsr_op', 'highest op in the local log', () => node.status().op);
  gauge('vsr_commit_min', 'highest op applied locally', () => node.status().commitMin);
  gauge('vsr_commit_max', 'highest op known committed', () => node.status().commitMax);
  gauge('vsr_checkpoint_op', 'op of the latest durable checkpoint', () => node.status().checkpointOp);
  gauge('vsr_ready', '1 when /readyz answers 200', () => (node.ready() ? 1 : 0));

  new Gauge({
    name: 'vsr_status',
    help: 'replica status: 1 for the current one',
    labelNames: ['status'],
    registers: [registry],
    collect() {
      const current = node.status().status;
      for (const status of STATUS_VALUES) this.set({ status }, status === current ? 1 : 0);
    },
  });

  new Gauge({
    name: 'vsr_state_transfer_stage',
    help: 'state transfer stage: 1 for the current one (idle when not transferring)',
    labelNames: ['stage'],
    registers: [registry],
    collect() {
      const current = node.status().stateTransfer?.stage ?? 'idle';
      for (const stage of TRANSFER_STAGES) this.set({ stage }, stage === current ? 1 : 0);
    },
  });
  gauge('vsr_state_transfer_bytes_done', 'bytes of the snapshot artifact received', () => node.status().stateTransfer?.bytesDone ?? 0);
  // Not `_bytes_total`: a gauge, and `_total` names counters.
  gauge('vsr_state_transfer_artifact_bytes', 'bytes of the snapshot artifact in total', () => node.status().stateTransfer?.bytesTotal ?? 0);

  new Gauge({
    name: 'vsr_replica_lag_ops',
    help: "ops between this replica's commit_max and the peer's, as last heard",
    labelNames: ['peer'],
    registers: [registry],
    collect() {
      this.reset();
      for (const peer of node.status().replicas) if (peer.lagOps !== null) this.set({ peer: String(peer.replica) }, peer.lagOps);
    },
  });
  new Gauge({
    name: 'vsr_replica_connected',
    help: '1 when the connection to the peer is up',
    labelNames: ['peer'],
    registers: [registry],
    collect() {
      this.reset();
      for (const peer of node.status().replicas) this.set({ peer: String(peer.replica) }, peer.connected ? 1 : 0);
    },
  });

  // The replica port's refusals: counters owned by the bus, copied into the series at scrape
  // time (reset, then inc by the bus's value). Reasons are the bus's fixed vocabularies (bounded).
  new Counter({
    name: 'vsr_replica_auth_failures_total',
    help: 'failed replica handshakes (wrong or missing secret, wrong replica index, timeouts, ...) by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of Object.entries(node.replicaTransport().authFailures)) this.inc({ reason }, count);
    },
  });
  new Counter({
    name: 'vsr_replica_frames_rejected_total',
    help: 'frames refused on the replica port (bad size, seal, checksum, impersonation, ...) by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of Object.entries(node.replicaTransport().rejectedFrames)) this.inc({ reason }, count);
    },
  });

  gauge('http_password_verifications_running', 'Argon2id verifications running (bounded, password-gate.ts)', () => passwordGate().running);
  gauge('http_password_verifications_queued', 'Argon2id verifications waiting for a slot', () => passwordGate().queued);
  new Counter({
    name: 'http_password_verifications_refused_total',
    help: 'password verifications refused with 429: the gate was full',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(passwordGate().refused);
    },
  });

  new Counter({
    name: 'vrmeta_logins_refused_total',
    help: "logins refused because their user's login allowance was spent (both edges, password-gate.ts)",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(passwordGate().loginsRefused);
    },
  });

  // Iggy's entity gauges (same names and help as apache/iggy core/server/src/http/metrics.rs).
  const stats = () => node.state.queries.statsView();
  gauge('streams', 'total count of streams', () => stats().streamsCount);
  gauge('topics', 'total count of topics', () => stats().topicsCount);
  gauge('partitions', 'total count of partitions', () => stats().partitionsCount);
  gauge('segments', 'total count of segments', () => stats().segmentsCount);
  gauge('messages', 'total count of messages', () => stats().messagesCount);
  gauge('users', 'total count of users', () => node.state.queries.users().length);
  gauge('vsr_revoked_access_tokens', 'access tokens revoked by a logout and not yet expired (replicated)', () => node.state.revokedTokenCount());
  gauge('clients', 'total count of clients', () => node.clients().length);

  const requests = new Counter({
    name: 'http_requests_total',
    help: 'total count of HTTP requests',
    labelNames: ['method', 'route', 'status_code'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency, from receipt to the response being sent',
    labelNames: ['method', 'route', 'status_code'],
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [registry],
  });

  return {
    registry,
    observeRequest(method, route, statusCode, durationSeconds) {
      const labels = { method, route, status_code: String(statusCode) };
      requests.inc(labels);
      latency.observe(labels, durationSeconds);
    },
  };
}

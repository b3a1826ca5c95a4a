/**
 * The node layer's Prometheus metrics: what an SRE pages on, measured where the IO happens
 * (STYLE.md: the replica core is pure and has no clock of its own).
 *
 *   - request in -> reply out, per client transport, at the session layer;
 *   - WAL fsync duration, in the storage driver (one fsync per group-commit run);
 *   - prepare -> commit on the primary, from the core's `op` and `commit_max` as they move;
 *   - checkpoint duration (snapshot write submitted -> superblock naming it durable) and size;
 *   - state-transfer duration (the core's transfer stage leaving idle -> back to idle), by outcome;
 *   - view changes seen, dropped frames and requests, client-table and session evictions.
 *
 * The metrics are created unregistered and added to the HTTP app's per-node registry by
 * `register` (http/metrics.ts), so several in-process nodes never share a series. Every label
 * vocabulary is fixed and small; memory is bounded (at most PREPARES_TRACKED_MAX timestamps).
 */
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { StorageRequest, StorageResult } from '../vsr/io.js';
import { EvictionReason } from '../vsr/header-types.js';
import { assert } from '../stdx/assert.js';

/** Latencies: sub-millisecond commits up to a write that times out (10 s). */
const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** fsync: tens of microseconds (tmpfs, NVMe with a write cache) up to a stalled disk. */
const FSYNC_BUCKETS_SECONDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Checkpoints and transfers: milliseconds (a small state) up to minutes (a large one). */
const LONG_BUCKETS_SECONDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Snapshot sizes: 1 KiB .. 1 GiB in powers of 4. */
const SIZE_BUCKETS_BYTES = Array.from({ length: 11 }, (_, index) => 1024 * 4 ** index);
/** Prepares timed at once; the pipeline holds far fewer (prepare_queue_depth <= 127). */
const PREPARES_TRACKED_MAX = 1024;

export type ClientTransport = 'http' | 'tcp';
/** How a client request ended at the session layer. */
export type RequestOutcome = 'reply' | 'eviction' | 'timeout' | 'not_accepted';
export type StateTransferOutcome = 'installed' | 'abandoned';

/** What the node metrics read from the replica core (a subset of `Replica`). */
export interface CoreView {
  readonly view: number;
  readonly op: number;
  readonly commitMax: number;
  readonly status: 'normal' | 'view_change' | 'recovering';
  isPrimary(): boolean;
  readonly stateTransfer: { readonly transferring: boolean };
  readonly counters: {
    readonly stateTransfersInstalled: number;
    readonly requestsDropped: number;
    readonly clientTableEvictions: number;
    readonly batchesPrepared: number;
    readonly requestsBatched: number;
    readonly payloadsReleased: number;
  };
}

/** Counter values owned by other components, read at scrape time. */
export interface NodeMetricSources {
  /** Outbound replica frames dropped by the bus, by reason. */
  framesDropped(): Readonly<Record<string, number>>;
  /**
   * HTTP sessions dropped locally: `capacity` (its slot went to another session), `evicted` (by
   * the primary), `idle` (logged out unused).
   */
  httpSessionEvictions(): Readonly<Record<string, number>>;
  /** The HTTP edge's live VSR sessions (every credential's pool), busy and idle. */
  httpSessions?(): { readonly busy: number; readonly idle: number };
  /** Evictions sent to binary clients, by EvictionReason code. */
  tcpEvictions(): Readonly<Partial<Record<number, number>>>;
  /** Full collections the idle collector ran (src/node/idle-collector.ts); absent: none run. */
  idleCollections?(): number;
  fetchCollections?(): number;
  /** The client port's buffer budget (src/transport/buffer-budget.ts); absent before it listens. */
  tcpBuffers?(): { readonly used: number; readonly refusals: number } | null;
}

const EVICTION_REASON_NAMES = new Map<number, string>(
  Object.entries(EvictionReason).map(([name, code]) => [code, name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)]),
);

function seconds(startedMs: number): number {
  return Math.max(0, (performance.now() - startedMs) / 1000);
}

/** A counter whose value is owned elsewhere: set to the source's values on every scrape. */
function mirroredCounter(name: string, help: string, labelNames: string[], read: () => Iterable<[Record<string, string>, number]>): Counter {
  return new Counter({
    name,
    help,
    labelNames,
    registers: [],
    collect() {
      this.reset();
      for (const [labels, value] of read()) this.inc(labels, value);
    },
  });
}

export class NodeMetrics {
  readonly requestDuration = new Histogram({
    name: 'vsr_client_request_duration_seconds',
    help: 'client write requests, from submission to the replica to the committed reply (or the end without one), by transport and outcome',
    labelNames: ['transport', 'outcome'],
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [],
  });
  readonly fsyncDuration = new Histogram({
    name: 'vsr_wal_fsync_duration_seconds',
    help: 'WAL fsync duration (one per group-commit run of appends)',
    buckets: FSYNC_BUCKETS_SECONDS,
    registers: [],
  });
  readonly prepareToCommit = new Histogram({
    name: 'vsr_prepare_to_commit_seconds',
    help: 'on the primary: from an op entering the pipeline to commit_max reaching it',
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [],
  });
  readonly checkpointDuration = new Histogram({
    name: 'vsr_checkpoint_duration_seconds',
    help: 'checkpoints: from the snapshot write being submitted to the superblock naming it durable',
    buckets: LONG_BUCKETS_SECONDS,
    registers: [],
  });
  readonly checkpointSize = new Histogram({
    name: 'vsr_checkpoint_size_bytes',
    help: 'size of each snapshot written by a checkpoint',
    buckets: SIZE_BUCKETS_BYTES,
    registers: [],
  });
  readonly stateTransferDuration = new Histogram({
    name: 'vsr_state_transfer_duration_seconds',
    help: 'state transfers, from leaving idle to idle again, by outcome',
    labelNames: ['outcome'],
    buckets: LONG_BUCKETS_SECONDS,
    registers: [],
  });
  readonly viewChanges = new Counter({
    name: 'vsr_view_changes_total',
    help: "view changes seen by this replica (each time its view number moved forward)",
    registers: [],
  });
  private readonly mirrored: (Counter | Gauge)[];

  /** Null until the first observation (the boot view is not a change). */
  private lastView: number | null = null;
  /** The last op timed; ops above it entering the primary's log are stamped. */
  private trackedOp = 0;
  private tracking = false;
  /** Ops in the pipeline, ascending, with the time they were seen. */
  private readonly prepares: { op: number; atMs: number }[] = [];
  private checkpoint: { op: number; bytes: number; atMs: number; written: boolean } | null = null;
  private transfer: { atMs: number; installed: number } | null = null;
  /** Storage requests whose completion matters to a metric, by id (bounded: at most two). */
  private readonly storageRequests = new Map<number, StorageRequest<unknown>>();

  /** `core` is read at scrape time only (the node creates the metrics before its core). */
  constructor(core: () => CoreView, sources: NodeMetricSources) {
    this.mirrored = [
      mirroredCounter('vsr_replica_frames_dropped_total', 'outbound replica frames dropped (peer send queue full by count or bytes, sent to self, bus closed) by reason', ['reason'], () =>
        Object.entries(sources.framesDropped()).map(([reason, count]) => [{ reason }, count]),
      ),
      mirroredCounter('vsr_requests_dropped_total', 'client requests the replica dropped (not a caught-up primary, or its request queue full)', [], () => [[{}, core().counters.requestsDropped]]),
      mirroredCounter('vsr_prepare_batches_total', 'prepares this replica built as primary that carry several client requests', [], () => [[{}, core().counters.batchesPrepared]]),
      mirroredCounter('vsr_prepare_batched_requests_total', 'client requests those batch prepares carried', [], () => [[{}, core().counters.requestsBatched]]),
      mirroredCounter('vsr_checkpoint_payloads_released_total', 'checkpoint payloads this replica let go once a peer named the same checkpoint durable (chunks are read from its file after)', [], () => [[{}, core().counters.payloadsReleased]]),
      mirroredCounter('vsr_idle_collections_total', 'full garbage collections run once idle after payload-sized garbage (a payload let go, a snapshot read whole)', [], () => [[{}, sources.idleCollections?.() ?? 0]]),
      mirroredCounter('vsr_fetch_collections_total', 'young-generation collections run while fetching a checkpoint (one per 8 MiB received: the socket reads\' buffers)', [], () => [[{}, sources.fetchCollections?.() ?? 0]]),
      mirroredCounter('vsr_client_table_evictions_total', 'client sessions evicted from the replicated client table to make room for a new one', [], () => [[{}, core().counters.clientTableEvictions]]),
      mirroredCounter('vsr_session_evictions_total', 'client sessions ended by this node: HTTP sessions dropped (capacity, evicted) and evictions sent to binary clients, by reason', ['transport', 'reason'], () => {
        const out: [Record<string, string>, number][] = [];
        for (const [reason, count] of Object.entries(sources.httpSessionEvictions())) out.push([{ transport: 'http', reason }, count]);
        for (const [code, count] of Object.entries(sources.tcpEvictions())) {
          out.push([{ transport: 'tcp', reason: EVICTION_REASON_NAMES.get(Number(code)) ?? 'unknown' }, count ?? 0]);
        }
        return out;
      }),
      mirroredCounter('vsr_tcp_buffer_budget_refusals_total', "client port buffers the replica-wide budget refused, and requests answered TransientNotAccepted while it was spent", [], () => [[{}, sources.tcpBuffers?.()?.refusals ?? 0]]),
      new Gauge({
        name: 'vsr_tcp_buffers_bytes',
        help: 'bytes the client port holds in frames being received and replies not yet sent, over every connection (bounded by tcp_buffers_size_max)',
        registers: [],
        collect() {
          this.set(sources.tcpBuffers?.()?.used ?? 0);
        },
      }),
      new Gauge({
        name: 'vsr_http_sessions',
        help: "the HTTP edge's VSR client sessions on this node (pools of every credential), by state: busy (a write in flight) or idle",
        labelNames: ['state'],
        registers: [],
        collect() {
          const sessions = sources.httpSessions?.() ?? { busy: 0, idle: 0 };
          this.set({ state: 'busy' }, sessions.busy);
          this.set({ state: 'idle' }, sessions.idle);
        },
      }),
    ];
  }

  register(registry: Registry): void {
    for (const metric of [
      this.requestDuration,
      this.fsyncDuration,
      this.prepareToCommit,
      this.checkpointDuration,
      this.checkpointSize,
      this.stateTransferDuration,
      this.viewChanges,
      ...this.mirrored,
    ]) {
      registry.registerMetric(metric);
    }
  }

  /** A client request submitted now; call the returned function once it ended. */
  startRequest(transport: ClientTransport): (outcome: RequestOutcome) => void {
    const startedMs = performance.now();
    return (outcome) => this.requestDuration.observe({ transport, outcome }, seconds(startedMs));
  }

  observeFsync(durationSeconds: number): void {
    this.fsyncDuration.observe(durationSeconds);
  }

  /** After every call into the core: view changes, prepares entering and leaving, transfers. */
  observeCore(core: CoreView): void {
    const now = performance.now();
    if (this.lastView !== null && core.view > this.lastView) this.viewChanges.inc();
    this.lastView = Math.max(this.lastView ?? 0, core.view);
    const primary = core.status === 'normal' && core.isPrimary();
    if (!primary) {
      // Only the primary times its pipeline; a new primary starts with the ops it prepares.
      this.tracking = false;
      this.prepares.length = 0;
    } else {
      if (!this.tracking) {
        this.tracking = true;
        this.trackedOp = core.op;
      }
      for (let op = Math.max(this.trackedOp + 1, core.op - PREPARES_TRACKED_MAX + 1); op <= core.op; op++) {
        this.prepares.push({ op, atMs: now });
      }
      if (core.op > this.trackedOp) this.trackedOp = core.op;
      let committed = 0;
      while (committed < this.prepares.length && this.prepares[committed]!.op <= core.commitMax) {
        this.prepareToCommit.observe((now - this.prepares[committed]!.atMs) / 1000);
        committed++;
      }
      if (committed > 0) this.prepares.splice(0, committed);
      if (this.prepares.length > PREPARES_TRACKED_MAX) this.prepares.splice(0, this.prepares.length - PREPARES_TRACKED_MAX);
    }
    const transferring = core.stateTransfer.transferring;
    if (transferring && this.transfer === null) {
      this.transfer = { atMs: now, installed: core.counters.stateTransfersInstalled };
    } else if (!transferring && this.transfer !== null) {
      const outcome: StateTransferOutcome = core.counters.stateTransfersInstalled > this.transfer.installed ? 'installed' : 'abandoned';
      this.stateTransferDuration.observe({ outcome }, (now - this.transfer.atMs) / 1000);
      this.transfer = null;
    }
  }

  /** A storage request submitted by the core (a checkpoint begins with its checkpoint_write). */
  storageSubmitted(id: number, request: StorageRequest<unknown>): void {
    if (request.kind === 'checkpoint_write') {
      // Its size is known when the storage encoded it (at completion).
      this.checkpoint = { op: request.op, bytes: 0, atMs: performance.now(), written: false };
      this.storageRequests.set(id, request);
    } else if (request.kind === 'superblock_write' && this.checkpoint !== null && request.state.checkpointOp === this.checkpoint.op) {
      this.storageRequests.set(id, request);
    }
  }

  storageDone(id: number, result: StorageResult<unknown>): void {
    const request = this.storageRequests.get(id);
    if (request === undefined) return;
    this.storageRequests.delete(id);
    const checkpoint = this.checkpoint;
    if (!result.ok || checkpoint === null) return;
    if (request.kind === 'checkpoint_write' && request.op === checkpoint.op) {
      checkpoint.written = true;
      assert(result.checkpoint !== undefined, 'a checkpoint write returns what it wrote');
      checkpoint.bytes = result.checkpoint.payload.length;
    } else if (request.kind === 'superblock_write' && checkpoint.written && request.state.checkpointOp === checkpoint.op) {
      this.checkpointDuration.observe(seconds(checkpoint.atMs));
      this.checkpointSize.observe(checkpoint.bytes);
      this.checkpoint = null;
    }
  }
}

/**
 * The only door from the HTTP edge into a replica (STYLE.md: `src/http/` talks to the replica
 * through a client facade). The node layer (src/node) implements it on a live replica; HTTP tests
 * implement it in process.
 *
 * Reads are served from the local state machine (serializable, as Iggy does by default). Writes
 * go through VSR: `write` resolves once the op committed (or could not be committed), with the
 * committed result. HTTP sessions are VSR client sessions: the node keeps a pool of them per
 * session key (up to http_sessions_per_credential, registered lazily as concurrent writes need
 * them) and at most clients_table_max / 2 in all.
 */
import type { Registry } from 'prom-client';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import type { PasswordVerifier } from './secrets.js';
import type { Identifier } from '../metadata/operations.js';
import type { Principal } from '../metadata/permissions.js';
import type { ConsumerOffsetReply } from '../partition/consumer-offsets.js';
import type { OffsetAddress } from '../partition/consumer.js';
import type { PollMessages, PollReply } from '../partition/poll-messages.js';
import type { Partitioning, SendConfirmation } from '../partition/send-messages.js';
import type { HttpBatchKernels } from '../partition/http-messages.js';

/** The credential a request authenticated with: a JWT id, or the hash of a personal access token. */
export type SessionKey = string;

export type WriteOutcome =
  /** Committed; `payload` is the state machine's success payload (e.g. the new id). */
  | { readonly kind: 'committed'; readonly payload: Uint8Array }
  /** Committed as a deterministic no-op: a business rejection with its Iggy error code. */
  | { readonly kind: 'rejected'; readonly errorCode: number }
  /** Never entered the log (no caught-up primary, full pipeline, view change): retry. 503. */
  | { readonly kind: 'unavailable'; readonly reason: string }
  /** This replica is not the primary: forward to the primary's HTTP address (null: unknown). */
  | { readonly kind: 'not_primary'; readonly primaryHttp: string | null }
  /** The VSR session was evicted: the client must log in again. 401. */
  | { readonly kind: 'evicted' }
  /** Submitted but no reply in time: the outcome is unknown (Iggy 57). 503. */
  | { readonly kind: 'unknown'; readonly reason: string };

export interface StateTransferStatus {
  readonly stage: 'awaiting_target' | 'fetching' | 'preparing' | 'installing';
  readonly peer: number | null;
  readonly artifact: string | null;
  readonly bytesDone: number;
  readonly bytesTotal: number;
  readonly startedAtMs: number;
  readonly etaMs: number | null;
}

export interface PeerStatus {
  readonly replica: number;
  readonly address: string;
  readonly connected: boolean;
  /** The peer's commit_max as last heard, null if never. */
  readonly commitMax: number | null;
  readonly lagOps: number | null;
}

/** GET /cluster/status (DESIGN.md §2.3). No secrets. */
export interface ClusterStatus {
  readonly replica: number;
  readonly replicaCount: number;
  readonly view: number;
  readonly status: 'normal' | 'view_change' | 'recovering';
  readonly primary: number;
  readonly op: number;
  readonly commitMin: number;
  readonly commitMax: number;
  readonly checkpointOp: number;
  /** The checkpoint id (XXH3-64 of the snapshot) as 16 hex digits. */
  readonly checkpointId: string;
  /** The failure detector this replica runs: its primary's heartbeat interval and its timeout. */
  readonly heartbeatMs: number;
  readonly electionTimeoutMs: number;
  readonly stateTransfer: StateTransferStatus | null;
  readonly replicas: readonly PeerStatus[];
}

export interface ClusterNode {
  readonly replica: number;
  readonly name: string;
  /** host:port of the node's HTTP listener. */
  readonly http: string;
  /** Port of the node's Iggy binary client listener, 0 when unknown. */
  readonly tcpPort?: number;
  readonly role: 'leader' | 'follower';
  readonly status: 'healthy' | 'starting' | 'unreachable';
}

/**
 * A client connected to this replica, as Iggy lists them (`GET /clients`, GetClients): binary
 * connections, logged in or not. HTTP sessions are not connections and are not listed (Iggy's
 * list is its transport session managers'; HTTP sessions live in the HTTP state only).
 */
export interface ClientSessionInfo {
  /** Iggy's u32 client id, assigned by this replica at connect (the VSR session's u128 id is not shown). */
  readonly clientId: number;
  /** Null before login. */
  readonly userId: number | null;
  readonly session: number;
  readonly consumerGroups: readonly { streamId: number; topicId: number; groupId: number }[];
  /** The peer address the session was last used from (Iggy `ClientInfo.address`); '' if unknown. */
  readonly address?: string;
  /** Iggy `ClientInfo.transport` ('TCP', 'QUIC', 'HTTP', 'WebSocket'); 'TCP' when absent. */
  readonly transport?: string;
}

/**
 * The replica port's refusals, for /metrics: failed handshakes and rejected frames by reason,
 * summed over inbound connections (unattributed: an unauthenticated claim proves nothing) and
 * every peer. Counters: they only grow for the life of the process.
 */
export interface ReplicaTransportCounters {
  readonly authFailures: Readonly<Record<string, number>>;
  readonly rejectedFrames: Readonly<Record<string, number>>;
}

export interface NodeApi {
  readonly replica: number;
  readonly clusterName: string;
  /** The replicated state as applied locally: reads, precheck, credentials. */
  readonly state: MetadataStateMachine;
  /**
   * Every password check against a hash from `state` goes through this (unbounded: the edges run
   * it under their password gate): root's stored hash is a marker this replica maps to its own
   * configured password (secrets.ts `createPasswordVerifier`), which a plain Argon2 verify refuses.
   */
  readonly verifyPassword: PasswordVerifier;
  /** The current view (the `iggy-view` header). */
  view(): number;
  isPrimary(): boolean;
  primaryHttpAddress(): string | null;
  /** Why `primaryHttpAddress()` is null (or what it is): one sentence for the 503 a forward answers. */
  primaryUnavailableReason(): string;
  status(): ClusterStatus;
  /** /readyz: normal, not transferring, caught up within the lag threshold. */
  ready(): boolean;
  nodes(): readonly ClusterNode[];
  clients(): readonly ClientSessionInfo[];
  replicaTransport(): ReplicaTransportCounters;
  /**
   * Adds the node's own metrics (latency histograms, eviction and drop counters) to the app's
   * per-node registry. Optional: in-process test nodes have none.
   */
  registerMetrics?(registry: Registry): void;
  /**
   * Commits `body` as `operation` for `session` acting as `userId` (stamped by the primary).
   * Resolves only after the committed op was applied to `state` here, so the HTTP layer can read
   * the created object back from `state.queries` (Iggy answers creates with the object).
   */
  write(session: SessionKey, userId: number, operation: number, body: Uint8Array): Promise<WriteOutcome>;
  /** Ends the VSR registrations of the session key's pool (a replicated Logout each), if any. */
  logout(session: SessionKey): Promise<void>;
  /** The message data plane; absent on a node without one (the in-process test node). */
  readonly dataPlane?: DataPlaneApi;
}

/** Who a data-plane call acts for: the authenticated user and what it may do. */
export interface DataPlaneCaller {
  readonly userId: number;
  readonly principal: Principal;
}

/**
 * Messages and consumer offsets, served by whichever node is hit: reads from its committed
 * partition state, writes proposed in the partition's group. A number is the Iggy code refusing
 * the call (or the transient code of one that did not complete).
 */
export interface DataPlaneApi {
  /** What a JSON send's batch is built and hashed with. */
  readonly kernels: HttpBatchKernels;
  /** Appends one verified producer batch; the confirmation of the batch's base offset. */
  send(caller: DataPlaneCaller, input: { readonly streamId: Identifier; readonly topicId: Identifier; readonly partitioning: Partitioning; readonly batch: Uint8Array }): Promise<SendConfirmation | number>;
  poll(caller: DataPlaneCaller, request: PollMessages): Promise<PollReply | number>;
  storeOffset(caller: DataPlaneCaller, address: OffsetAddress, offset: bigint): Promise<number>;
  deleteOffset(caller: DataPlaneCaller, address: OffsetAddress): Promise<number>;
  /** The stored offset (null: none stored), or the code refusing the read. */
  offset(caller: DataPlaneCaller, address: OffsetAddress): ConsumerOffsetReply | null | number;
}

/**
 * The boundary between the VSR core and the replicated state machine it drives.
 *
 * The replica owns ordering, durability and the client table; the state machine owns the rest
 * of the replicated state (the metadata plane's users and streams, a partition group's log).
 * Everything here is synchronous and deterministic: given the same sequence of `apply` calls
 * (same op, operation, timestamp, user id and body), every replica returns the same results and
 * ends in a state whose snapshot encodes to the same bytes.
 *
 * The core is generic over the machine's snapshot type `S`: it captures `S` at a checkpoint op,
 * hands it to the storage inside a `CheckpointModel<S>` and restores one from boot or a state
 * transfer, but never looks inside it. The storage is given the codec of `S`, so each plane keeps
 * its own on-disk and on-wire format while running the same view change, repair, checkpoint and
 * state transfer.
 */
import type { Command } from '../constants.js';
import type { ClientEntrySnapshot } from '../format/snapshot-model.js';
import type { DropReason } from './drop-reason.js';
import type { ReplicaEvent } from './events.js';
import type { RequestStoreRangeHeader, StoreRangeHeader } from './header-types.js';
import type { LogLevel } from './io.js';
import type { SendFields } from './send.js';

/**
 * What a checkpoint persists and a state transfer ships: the replica's part (the op it was taken
 * at, the replicated clock there, the client table, the writer's release) around the machine's
 * snapshot. Immutable once captured: the storage may encode it on another thread while later
 * ops commit, so nothing in it may be written into afterwards.
 */
export interface CheckpointModel<S> {
  /** The checkpoint op: the last op whose effects the model contains. */
  readonly op: number;
  /** µs since the epoch, from the replicated clock (the checkpoint prepare's timestamp). */
  readonly createdAtUs: number;
  /** The packed release of the writer (provenance only). */
  readonly writerRelease: number;
  /** Occupied client-table slots, ordered by `slot` ascending. */
  readonly clientTable: readonly ClientEntrySnapshot[];
  /** The state machine's part, as `StateMachine.snapshot()` returned it. */
  readonly machine: S;
}

export interface ApplyInput {
  /** The op number of the committed prepare. */
  readonly op: number;
  /** The `Operation` code (iggy-metadata-plane.md §1.5). */
  readonly operation: number;
  /** The prepare's timestamp: µs since the epoch, monotonic across ops, set by the primary. */
  readonly timestampUs: number;
  /** The authenticated user, stamped by the primary from the client table (never the wire). */
  readonly userId: number;
  /** The client (session) that sent the request; consumer-group membership is per client. */
  readonly clientId: bigint;
  readonly body: Uint8Array;
}

/**
 * The outcome of applying one operation. A business rejection (unknown stream, duplicate name,
 * missing permission) is a committed, deterministic no-op: `errorCode` carries the Iggy error
 * code and `payload` is empty.
 */
export interface ApplyResult {
  /** 0 for success, else the IggyError code. */
  readonly errorCode: number;
  readonly payload: Uint8Array;
}

/**
 * What a machine's store ranges get from their replica: its identity, its one send path for the
 * two range frames, its seeded nonces, its drop counter and its typed events. Everything is read
 * when used.
 */
export interface StoreRangeHost {
  readonly replica: number;
  readonly replicaCount: number;
  /** Ticks a range request may go unanswered before it is sent again (the repair interval). */
  readonly retryTicks: number;
  /** A fresh non-zero session nonce from the replica's seeded PRNG. */
  nonce(): bigint;
  sendRequest(to: number, fields: SendFields<typeof Command.requestStoreRange>): void;
  sendRange(to: number, fields: SendFields<typeof Command.storeRange>, body: Uint8Array): void;
  drop(reason: DropReason, header: RequestStoreRangeHeader | StoreRangeHeader): void;
  emit(level: LogLevel, event: ReplicaEvent, fields?: Readonly<Record<string, unknown>>): void;
}

/**
 * Ranged reads of a machine's stores between the replicas of its group: what a machine whose
 * state is larger than its checkpoint (a partition group's segment logs) uses to fetch bytes its
 * checkpoint names but its disk lacks. The replica forwards the two frames and its ticks; what a
 * store and an offset are is the machine's.
 */
export interface StoreRanges<S = unknown> {
  /** Called once, before the first `restore`. */
  attach(host: StoreRangeHost): void;
  /**
   * A state transfer fetched checkpoint `machine` whole and is about to install it: fetch what it
   * names that this replica's stores lack, so the install never leaves this replica holding
   * less than it did (the journal it replaces may be its only copy of those messages). The
   * replica installs once `installReady` holds; until then it is transferring.
   */
  prepareInstall?(machine: S): void;
  /** Every fetch `prepareInstall` started is complete. */
  readonly installReady?: boolean;
  /** Fetches not completed yet: 0 once every store the checkpoint names is whole here. */
  readonly pending: number;
  tick(): void;
  /** A peer asks for a range: answer it (records, or unavailable). */
  onRequest(header: RequestStoreRangeHeader): void;
  /** A peer's answer to one of our requests (validated frame; the body is not yet trusted). */
  onRange(header: StoreRangeHeader, body: Uint8Array): void;
}

/** A replicated state machine whose snapshot type is `S`. */
export interface StateMachine<S> {
  /** Applies a committed operation. Never throws on bad input: rejections are results. */
  apply(input: ApplyInput): ApplyResult;
  /**
   * A committed Logout of `clientId` (or a session evicted by a committed register): remove the
   * client from every consumer group, deterministically.
   */
  onClientRemoved(clientId: bigint, timestampUs: number): void;
  /**
   * The state as of the last applied op, in canonical order. Later applies must not write into
   * what this returned (see CheckpointModel).
   */
  snapshot(): S;
  /** Replaces the whole state (boot from a checkpoint, or a state-transfer install). */
  restore(snapshot: S): void;
  /**
   * The error code a retry of an already committed request of `operation` is denied with instead
   * of the cached reply, or 0 to replay the cached reply (the default when absent). For a reply
   * that cannot be replayed: one carrying a secret minted outside the log.
   */
  duplicateDenyCode?(operation: number): number;
  /** Ranged reads of the machine's stores between replicas, for a machine that has stores. */
  readonly storeRanges?: StoreRanges<S>;
}

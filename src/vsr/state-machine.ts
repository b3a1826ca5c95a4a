/**
 * The boundary between the VSR core and the replicated state machine it drives.
 *
 * The replica owns ordering, durability and the client table; the state machine owns the
 * metadata. Everything here is synchronous and deterministic: given the same sequence of
 * `apply` calls (same op, operation, timestamp, user id and body), every replica returns the same
 * results and ends in a state whose snapshot encodes to the same bytes.
 */
import type { MetadataSnapshot } from '../format/snapshot-model.js';

/** The replicated part of a snapshot that the state machine owns (the client table is the
 * replica's). */
export type StateMachineSnapshot = Pick<MetadataSnapshot, 'users' | 'streams' | 'revokedTokens'>;

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

export interface StateMachine {
  /** Applies a committed operation. Never throws on bad input: rejections are results. */
  apply(input: ApplyInput): ApplyResult;
  /**
   * A committed Logout of `clientId` (or a session evicted by a committed register): remove the
   * client from every consumer group, deterministically.
   */
  onClientRemoved(clientId: bigint, timestampUs: number): void;
  /** The state as of the last applied op, in canonical order. */
  snapshot(): StateMachineSnapshot;
  /** Replaces the whole state (boot from a checkpoint, or a state-transfer install). */
  restore(snapshot: StateMachineSnapshot): void;
  /**
   * The error code a retry of an already committed request of `operation` is denied with instead
   * of the cached reply, or 0 to replay the cached reply (the default when absent). For a reply
   * that cannot be replayed: one carrying a secret minted outside the log.
   */
  duplicateDenyCode?(operation: number): number;
}

/**
 * What the replica core asks of the world, as small synchronous interfaces (TigerBeetle's `Time`,
 * `MessageBus`, `Storage`). The core never performs IO: it submits storage requests and learns
 * of their completion through `Replica.onStorageDone`, so the simulator can choose completion
 * order and latency from its seed and crash a replica between any two steps.
 */
import type { ReplicaEventSink } from './events.js';
import type { Kernels } from '../kernels/kernel.js';
import type { Prng } from '../stdx/prng.js';
import type { CheckpointModel } from './state-machine.js';

/** The durable part of a replica's VSR state (the superblock's `VsrState`). */
export interface VsrState {
  readonly cluster: bigint;
  readonly replica: number;
  readonly replicaCount: number;
  readonly view: number;
  readonly logView: number;
  readonly commitMax: number;
  readonly checkpointOp: number;
  /** XXH3-64 of the checkpoint's snapshot payload (the checkpoint id), widened to u128. */
  readonly checkpointChecksum: bigint;
  /** VSR_FLAG_* bits. */
  readonly flags: number;
  /**
   * The log view's canonical prepare headers this replica knows but does not hold durably in its
   * WAL (learned from the StartView it adopted, bodies still being repaired), ascending op, 256
   * bytes each; absent or empty when the WAL holds the whole log. Without them a restart would
   * shorten the log this replica claims for its log view (TigerBeetle's view headers).
   */
  readonly viewHeaders?: Uint8Array;
  /**
   * The identity of the prepare at `checkpointOp` (the chain anchor the next op's `parent` names),
   * when known; a replica that installed a checkpoint by state transfer holds no WAL entry at
   * that op, so without it a restart could not prepare or verify the next op.
   */
  readonly checkpointAnchor?: bigint;
}

/** At most this many view headers are persisted (the highest ops win). */
export const VIEW_HEADERS_MAX = 128;

/**
 * The replica booted from an empty data directory and has not caught up with the cluster since:
 * it cannot prove it never acknowledged an op (it may have, before its disk was lost), so its
 * DoViewChanges carry no nacks. Persisted so a second crash during catch-up keeps it.
 */
export const VSR_FLAG_NACK_UNKNOWN = 1;
/** The record carries `checkpointAnchor` (16 bytes after the fixed state). */
export const VSR_FLAG_CHECKPOINT_ANCHOR = 2;
export const VSR_FLAGS_KNOWN = VSR_FLAG_NACK_UNKNOWN | VSR_FLAG_CHECKPOINT_ANCHOR;

/**
 * `S` is the state machine's snapshot type: only a checkpoint write carries one. A request that
 * carries none is a `StorageRequest<never>`, which every `StorageRequest<S>` accepts.
 */
export type StorageRequest<S> =
  /** Append one prepare frame to the WAL and fsync. */
  | { readonly kind: 'wal_append'; readonly op: number; readonly frame: Uint8Array }
  /** Remove every WAL entry with op >= fromOp (a divergent suffix). */
  | { readonly kind: 'wal_truncate'; readonly fromOp: number }
  /**
   * Remove the WAL entries at `ops`, keeping every other one (entries a new log cannot vouch for).
   */
  | { readonly kind: 'wal_remove'; readonly ops: readonly number[] }
  /** Remove every WAL entry with op < keepFromOp (after a durable checkpoint). */
  | { readonly kind: 'wal_drain'; readonly keepFromOp: number }
  | { readonly kind: 'superblock_write'; readonly state: VsrState; readonly stateTransfer: boolean }
  /**
   * A checkpoint: encode `model` canonically (with the storage's codec for `S`; the metadata
   * plane's is the `snapshotEncode` kernel), compute its chunk
   * manifest at `chunkSize` (the whole-payload XXH3-64 is the checkpoint id), then write the
   * payload durably with its trailer (temp, fsync, rename, fsync dir; the trailer takes the id
   * instead of a second pass). The result's `checkpoint` carries all three. The
   * model is captured at the checkpoint op and never changes afterwards (the core hands over a
   * model no later op writes into), so the storage may encode it whenever it executes the request:
   * the node driver encodes on a worker thread, off the event loop.
   */
  | {
      readonly kind: 'checkpoint_write';
      readonly op: number;
      /** Captured at `op` (model.op === op). */
      readonly model: CheckpointModel<S>;
      readonly chunkSize: number;
    }
  /**
   * Read `snapshot.bin`, verify its trailer and format version, and return the payload (trailer
   * stripped). An error carries the real cause (missing, unreadable, checksum mismatch).
   */
  | { readonly kind: 'snapshot_read'; readonly op: number }
  /**
   * Check that `snapshot.bin` at rest still verifies (trailer) and is the checkpoint `checksum`,
   * without returning the payload. An error carries the real cause.
   */
  | { readonly kind: 'snapshot_verify'; readonly op: number; readonly checksum: bigint }
  /**
   * Serving a state transfer: read payload bytes [offset, offset + len) of checkpoint `op`, whose
   * id is `checksum`, from `snapshot.bin` or from the generation a newer checkpoint replaced (the
   * storage holds the last two open). The result's `chunk` is absent when that checkpoint is no
   * longer held. The bytes are as found at rest: the core checks them against its chunk sums.
   */
  | {
      readonly kind: 'snapshot_chunk_read';
      readonly op: number;
      readonly checksum: bigint;
      readonly offset: number;
      readonly len: number;
    }
  /**
   * Our `snapshot.bin` no longer verifies, but we hold the checkpoint's payload (verified against
   * its id when it was taken): rewrite the file from it, durably (temp, fsync, rename, fsync dir;
   * the trailer takes `checksum`, the payload's XXH3-64, without another pass).
   */
  | {
      readonly kind: 'snapshot_rewrite';
      readonly op: number;
      readonly checksum: bigint;
      readonly payload: Uint8Array;
    }
  /** State transfer: write a verified chunk into the temp file (offset 0 truncates it). */
  | { readonly kind: 'transfer_write'; readonly offset: number; readonly bytes: Uint8Array }
  /**
   * State transfer: fsync the temp file, verify its length and XXH3-64 against the manifest,
   * decode it (a model of checkpoint `op`), then install it as `snapshot.bin` durably (trailer,
   * rename, fsync dir). Returns the decoded model. Nothing is installed on any error.
   */
  | {
      readonly kind: 'transfer_install';
      readonly op: number;
      readonly len: number;
      readonly checksum: bigint;
    }
  /**
   * State transfer: the checks of `transfer_install` (length, XXH3-64, version, decode, op)
   * without installing anything: the decoded model, for a machine that must fetch what the
   * checkpoint names before it is installed (StoreRanges.prepareInstall).
   */
  | {
      readonly kind: 'transfer_decode';
      readonly op: number;
      readonly len: number;
      readonly checksum: bigint;
    }
  /** State transfer abandoned: remove the temp file. */
  | { readonly kind: 'transfer_discard' };

export type StorageResult<S> =
  | {
      readonly ok: true;
      /** snapshot_read: the verified payload. */
      readonly payload?: Uint8Array;
      /** snapshot_chunk_read: the bytes read (absent: that checkpoint is no longer held). */
      readonly chunk?: Uint8Array;
      /** transfer_install: the decoded model that is now durable (transfer_decode: not yet). */
      readonly model?: CheckpointModel<S>;
      /**
       * transfer_install: its payload, when the storage holds it (kept for offers only under
       * ReplicaConfig.offerPayloadOnEveryReplica).
       */
      readonly installedPayload?: Uint8Array;
      /** checkpoint_write: what was written durably. */
      readonly checkpoint?: CheckpointWritten;
    }
  | { readonly ok: false; readonly error: string };

/** A checkpoint's snapshot as written: the payload, its id and its chunk sums (the offer). */
export interface CheckpointWritten {
  /** The canonical payload as stored (trailer excluded); owned, not kernel memory. */
  readonly payload: Uint8Array;
  /** XXH3-64 of `payload`: the checkpoint id. */
  readonly checksum: bigint;
  /** XXH3-64 of each `chunkSize` chunk of `payload`, in order. */
  readonly chunkChecksums: readonly bigint[];
}

export interface Storage<S> {
  /** Requests execute in submission order; each gets exactly one `onStorageDone`. */
  submit(id: number, request: StorageRequest<S>): void;
}

export interface MessageBus {
  /** Best effort: frames may be dropped, delayed, duplicated or reordered. */
  sendToReplica(replica: number, frame: Uint8Array): void;
  /**
   * The same, for a frame given as its sealed 256-byte header and its body, written one after the
   * other without joining them (a served state chunk is a view of the checkpoint payload: no
   * 256 KiB copy per chunk). Neither part may change afterwards. Optional: a bus without it is
   * sent the joined frame (the simulator's network), so both carry the same bytes.
   */
  sendToReplicaParts?(replica: number, header: Uint8Array, body: Uint8Array): void;
  /** Replies and evictions to a client session. */
  sendToClient(client: bigint, frame: Uint8Array): void;
}

export interface Clock {
  /** Wall-clock microseconds since the epoch; may jump. The primary's prepare timestamps are
   * max(this, previous + 1), so they are monotonic across ops. */
  realtimeUs(): number;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';

/** Structured events. The node layer maps them to pino; the simulator counts and prints them. */
export interface Logger {
  /**
   * Whether debug records are wanted. The core checks this before building one, so a debug log
   * that is off costs nothing (absent: off).
   */
  readonly debugEnabled?: boolean;
  log(level: LogLevel, event: string, fields?: Readonly<Record<string, unknown>>): void;
}

export interface ReplicaEnv<S> {
  readonly kernels: Kernels;
  readonly storage: Storage<S>;
  readonly bus: MessageBus;
  readonly clock: Clock;
  readonly prng: Prng;
  readonly logger: Logger;
  /** Typed replica events (src/vsr/events.ts), besides their log records. */
  readonly events?: ReplicaEventSink;
}

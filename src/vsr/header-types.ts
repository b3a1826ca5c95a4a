/**
 * Typed views of the 256-byte wire header (iggy-metadata-plane.md §1): one interface per command,
 * discriminated by `command`, plus the small wire enums carried inside headers.
 *
 * Number types follow one rule so callers never guess: u128 fields and the u64 `group` are
 * `bigint`; u64 counters (op, commit, timestamp, request, session, offsets, epochs) are `number`
 * and decode rejects values above Number.MAX_SAFE_INTEGER (2^53 µs of timestamp is 285 years,
 * 2^53 ops is out of reach); u8/u32 are `number`; 32-byte nonces and MACs are `Uint8Array`.
 *
 * Reserved and pad bytes are not fields: decode rejects them when non-zero and encode writes zero,
 * so a typed header always describes every byte of its frame's header.
 */
import { Command } from '../constants.js';

export { Command };

/**
 * `Operation` (u8) of Request, Prepare and Reply (§1.5): the codes the protocol interprets
 * itself (4, batch, is vrmeta's). Every code at or above STATE_MACHINE_OPERATION_MIN belongs to
 * the state machine, which owns its table (src/metadata/operations.ts `Operation`); the replica
 * hands those to it without naming any.
 */
export const Operation = {
  reserved: 0,
  register: 1,
  nonReplicated: 2,
  logout: 3,
  /**
   * vrmeta extension: several client requests in one prepare (src/vsr/batch.ts). Only in
   * Prepare, RepairPrepare and PrepareOk headers; never in a Request or a Reply.
   */
  batch: 4,
} as const;
export type Operation = (typeof Operation)[keyof typeof Operation];

/** The lowest state machine operation code: 5..63 are unassigned and reserved to the protocol. */
export const STATE_MACHINE_OPERATION_MIN = 64;

/** Why a client was evicted (Eviction `reason`, u8). 0 is invalid on the wire. */
export const EvictionReason = {
  reserved: 0,
  noSession: 1,
  clientReleaseTooLow: 2,
  clientReleaseTooHigh: 3,
  invalidRequestOperation: 4,
  invalidRequestBody: 5,
  invalidRequestBodySize: 6,
  sessionTooLow: 7,
  sessionReleaseMismatch: 8,
  invalidCredentials: 9,
  invalidToken: 10,
  userInactive: 11,
  sessionError: 12,
  staleClient: 13,
  incompatibleProtocol: 14,
  malformedLogin: 15,
} as const;
export type EvictionReason = (typeof EvictionReason)[keyof typeof EvictionReason];
export const EVICTION_REASON_MAX = EvictionReason.malformedLogin;

export const ForwardRegisterOutcome = {
  ok: 0,
  notPrimary: 1,
  notCaughtUp: 2,
  pipelineFull: 3,
  inProgress: 4,
  canceled: 5,
  clientIdOwnedByAnotherUser: 6,
} as const;
export type ForwardRegisterOutcome =
  (typeof ForwardRegisterOutcome)[keyof typeof ForwardRegisterOutcome];
export const FORWARD_REGISTER_OUTCOME_MAX = ForwardRegisterOutcome.clientIdOwnedByAnotherUser;

export const ForwardLogoutOutcome = {
  ok: 0,
  notPrimary: 1,
  pipelineFull: 2,
  inProgress: 3,
  canceled: 4,
} as const;
export type ForwardLogoutOutcome = (typeof ForwardLogoutOutcome)[keyof typeof ForwardLogoutOutcome];
export const FORWARD_LOGOUT_OUTCOME_MAX = ForwardLogoutOutcome.canceled;

/** Replica-auth handshake mode: `psk` when a cluster secret is configured. */
export const ReplicaAuthMode = { none: 0, psk: 1 } as const;
export type ReplicaAuthMode = (typeof ReplicaAuthMode)[keyof typeof ReplicaAuthMode];
export const REPLICA_AUTH_MODE_MAX = ReplicaAuthMode.psk;

/** Replica-auth handshake outcome carried by Challenge and Finish; non-ok closes the connection. */
export const ReplicaAuthStatus = {
  ok: 0,
  /** The two sides disagree on whether a cluster secret is configured. */
  modeMismatch: 1,
  /** The peer's MAC does not verify: wrong secret, or a replayed or tampered transcript. */
  macMismatch: 2,
  /** The peer's replica index is not the one configured for its address. */
  replicaMismatch: 3,
} as const;
export type ReplicaAuthStatus = (typeof ReplicaAuthStatus)[keyof typeof ReplicaAuthStatus];
export const REPLICA_AUTH_STATUS_MAX = ReplicaAuthStatus.replicaMismatch;

/** Nonces and MACs of the replica-auth handshake (BLAKE3 output size). */
export const AUTH_NONCE_SIZE = 32;
export const AUTH_MAC_SIZE = 32;

/** Bytes 0..128, shared by every command. `command` lives on each command's interface. */
export interface HeaderCommon {
  /** Frame seal, or the identity for Prepare/RepairPrepare (u128, upper 64 bits zero). */
  readonly checksum: bigint;
  /** XXH3-64 of the body widened to u128 (for an empty body: XXH3-64 of zero bytes). */
  readonly checksumBody: bigint;
  readonly cluster: bigint;
  /** Header + body, in bytes. */
  readonly size: number;
  readonly view: number;
  readonly release: number;
  /** Sender's replica index. */
  readonly replica: number;
}

/**
 * Request (client -> replica) and RoutedRequest (backup/shard -> primary) share command 5 and one
 * layout: `group` (bytes 248..256) is 0 from clients and names the target group when routed.
 * `legacyCommand` (196..200) carries the binary-protocol command code of a NonReplicated op.
 */
export interface RequestHeader extends HeaderCommon {
  readonly command: typeof Command.request;
  readonly client: bigint;
  readonly requestChecksum: bigint;
  readonly timestamp: number;
  readonly request: number;
  readonly operation: number;
  readonly session: number;
  readonly userId: number;
  readonly legacyCommand: number;
  readonly group: bigint;
}

export interface ReplyHeader extends HeaderCommon {
  readonly command: typeof Command.reply;
  readonly requestChecksum: bigint;
  readonly client: bigint;
  readonly op: number;
  readonly commit: number;
  readonly timestamp: number;
  readonly request: number;
  readonly operation: number;
  /** Pre-commit deny code; 0 = ok. */
  readonly status: number;
}

export interface EvictionHeader extends HeaderCommon {
  readonly command: typeof Command.eviction;
  readonly client: bigint;
  readonly serverProtocolVersion: number;
  readonly serverProtocolVersionMin: number;
  readonly reason: number;
}

/** The fields Prepare and RepairPrepare share byte for byte. */
export interface PrepareFields extends HeaderCommon {
  readonly client: bigint;
  /** Identity of the prepare at op - 1 (the hash chain). */
  readonly parent: bigint;
  readonly requestChecksum: bigint;
  readonly op: number;
  /** The primary's commit_max when it prepared this op. */
  readonly commit: number;
  readonly timestamp: number;
  readonly request: number;
  readonly operation: number;
  readonly group: bigint;
  readonly userId: number;
}
export interface PrepareHeader extends PrepareFields {
  readonly command: typeof Command.prepare;
}
/** A stored prepare served verbatim during journal repair, with only the command changed. */
export interface RepairPrepareHeader extends PrepareFields {
  readonly command: typeof Command.repairPrepare;
}

export interface PrepareOkHeader extends HeaderCommon {
  readonly command: typeof Command.prepareOk;
  readonly parent: bigint;
  /** Identity of the acknowledged prepare. */
  readonly prepareChecksum: bigint;
  readonly op: number;
  /** The acking replica's commit_max (may exceed `op`). */
  readonly commit: number;
  readonly timestamp: number;
  readonly request: number;
  readonly operation: number;
  readonly group: bigint;
}

/** The primary's heartbeat. */
export interface CommitHeader extends HeaderCommon {
  readonly command: typeof Command.commit;
  /** Unused by the reference (0); kept as a field so a checkpoint id can travel here. */
  readonly commitChecksum: bigint;
  readonly timestampMonotonic: number;
  readonly commit: number;
  /** Unused by the reference (0); kept as a field for checkpoint exchange. */
  readonly checkpointOp: number;
  readonly group: bigint;
}

export interface StartViewChangeHeader extends HeaderCommon {
  readonly command: typeof Command.startViewChange;
  readonly group: bigint;
}

/** Body: a suffix of prepare headers, high to low op. Bit i of each bitset is suffix header i. */
export interface DoViewChangeHeader extends HeaderCommon {
  readonly command: typeof Command.doViewChange;
  readonly op: number;
  readonly commit: number;
  readonly group: bigint;
  readonly logView: number;
  /**
   * 1: the sender lost its disk and has not caught up since, so it cannot prove it never
   * acknowledged an op: it nacks nothing, and no nack is inferred from its log. (vrmeta extension.)
   */
  readonly nackUnknown: number;
  /**
   * The sender's commit_min: every op at or below it is applied there, hence committed and the
   * same in every later log. (vrmeta extension, byte 160.)
   */
  readonly applied: number;
  readonly nackBitset: bigint;
  readonly presentBitset: bigint;
}

/** Body: a suffix of prepare headers (may be empty). */
export interface StartViewHeader extends HeaderCommon {
  readonly command: typeof Command.startView;
  readonly op: number;
  readonly commit: number;
  readonly group: bigint;
  /** Echo of the prober's incarnation when answering a RequestStartView, else 0. */
  readonly incarnation: bigint;
}

export interface RequestStartViewHeader extends HeaderCommon {
  readonly command: typeof Command.requestStartView;
  readonly group: bigint;
  readonly incarnation: bigint;
  /**
   * 1: the sender is recovering (probing after its boot), 0: a refresh probe from a replica in a
   * view. Recovering replicas that hear each other elect at once instead of waiting out their
   * probes (a whole-cluster restart). (vrmeta extension, byte 136.)
   */
  readonly recovering: number;
}

export interface RequestPreparesHeader extends HeaderCommon {
  readonly command: typeof Command.requestPrepares;
  readonly nonce: bigint;
  readonly fromOp: number;
  readonly toOp: number;
  readonly group: bigint;
  /**
   * 1: serve only prepares the server has applied (committed, hence canonical), so the requester
   * may accept them bottom-up by hash chain. 0: serve any durable prepare; the requester verifies
   * each against a canonical header it already holds. (vrmeta extension, byte 168.)
   */
  readonly committedOnly: number;
}

/** RepairDone: `op` = last op served. RangeEvicted: `op` = oldest retained op. */
export interface RepairDoneFields extends HeaderCommon {
  readonly nonce: bigint;
  readonly op: number;
  readonly group: bigint;
}
export interface RepairDoneHeader extends RepairDoneFields {
  readonly command: typeof Command.repairDone;
  /**
   * The checksum of the prepare at `op` (0 when nothing was served). A committed-only answer is
   * a contiguous run ending there, so the requester verifies the run it buffered by hash chain
   * down from this sum: a prepare of an earlier session, delayed on the wire, that chains onto
   * the same parent is never taken for this one's. (vrmeta extension, bytes 160..176.)
   */
  readonly servedChecksum: bigint;
}
export interface RangeEvictedHeader extends RepairDoneFields {
  readonly command: typeof Command.rangeEvicted;
}

export interface RequestStateTransferHeader extends HeaderCommon {
  readonly command: typeof Command.requestStateTransfer;
  readonly nonce: bigint;
  readonly group: bigint;
}

/** Body: the manifest when `available == 1`, else empty. */
export interface StateTransferTargetHeader extends HeaderCommon {
  readonly command: typeof Command.stateTransferTarget;
  readonly nonce: bigint;
  readonly commitOp: number;
  readonly group: bigint;
  /** 0 or 1. */
  readonly available: number;
  /** 0 or 1: a refusal the requester should retry with a new session. */
  readonly unavailableTransient: number;
  readonly commitMax: number;
  /**
   * Identity of the prepare at the offered checkpoint op (the hash-chain anchor the receiver
   * verifies the next op against); 0 when the server does not know it. (vrmeta extension.)
   */
  readonly checkpointAnchor: bigint;
  /**
   * The server's durable checkpoint (op, id), 0/0 for none. A refusal (`available` 0) that names
   * one vouches for that id without serving it: a replica whose snapshot file is damaged still
   * knows the id from its superblock, so a receiver can install the same checkpoint from another
   * server on the strength of both. An offer's must equal its manifest's. (vrmeta extension.)
   */
  readonly checkpointOp: number;
  readonly checkpointId: bigint;
}

export interface RequestStateChunkHeader extends HeaderCommon {
  readonly command: typeof Command.requestStateChunk;
  readonly nonce: bigint;
  readonly offset: number;
  readonly group: bigint;
  readonly len: number;
  /** Index into the manifest's entries. */
  readonly artifact: number;
}

/** Body: the chunk payload (1..STATE_CHUNK_SIZE_MAX bytes). */
export interface StateChunkHeader extends HeaderCommon {
  readonly command: typeof Command.stateChunk;
  readonly nonce: bigint;
  readonly offset: number;
  readonly group: bigint;
  readonly artifact: number;
}

/**
 * A ranged read of a state machine store (header-only): whole records from `fromOffset` up to
 * (not including) `toOffset`, at most `bytesMax` body bytes unless one record is larger. `store`
 * and `incarnation` name the store; the core does not interpret them. (vrmeta extension.)
 */
export interface RequestStoreRangeHeader extends HeaderCommon {
  readonly command: typeof Command.requestStoreRange;
  readonly nonce: bigint;
  readonly group: bigint;
  readonly store: number;
  readonly incarnation: number;
  readonly fromOffset: number;
  readonly toOffset: number;
  readonly bytesMax: number;
}

/** StoreRange `status` (u8): the records, or why there are none. */
export const StoreRangeStatus = {
  /** The body holds whole records from `fromOffset` up to `nextOffset`. */
  records: 0,
  /** The server does not hold the range (its store is behind, or it was never its own). */
  unavailable: 1,
  /**
   * The store was replaced in the server's committed state (a newer incarnation): its records
   * are obsolete and will never be read again, so a fetch of them may stop.
   */
  replaced: 2,
} as const;
export type StoreRangeStatus = (typeof StoreRangeStatus)[keyof typeof StoreRangeStatus];

/**
 * The answer to a RequestStoreRange. Body: the records (status `records`, non-empty, `nextOffset`
 * above `fromOffset`) or nothing (the other statuses, `nextOffset` equal to `fromOffset`).
 */
export interface StoreRangeHeader extends HeaderCommon {
  readonly command: typeof Command.storeRange;
  readonly nonce: bigint;
  readonly group: bigint;
  readonly store: number;
  readonly incarnation: number;
  readonly fromOffset: number;
  readonly nextOffset: number;
  readonly status: number;
}

export interface ForwardRegisterHeader extends HeaderCommon {
  readonly command: typeof Command.forwardRegister;
  readonly client: bigint;
  readonly nonce: bigint;
  readonly userId: number;
}

export interface ForwardRegisterResultHeader extends HeaderCommon {
  readonly command: typeof Command.forwardRegisterResult;
  readonly nonce: bigint;
  readonly client: bigint;
  readonly epoch: number;
  readonly watermark: number;
  readonly outcome: number;
}

export interface ForwardLogoutHeader extends HeaderCommon {
  readonly command: typeof Command.forwardLogout;
  readonly client: bigint;
  readonly nonce: bigint;
  readonly session: number;
  readonly request: number;
}

export interface ForwardLogoutResultHeader extends HeaderCommon {
  readonly command: typeof Command.forwardLogoutResult;
  readonly nonce: bigint;
  readonly client: bigint;
  readonly commit: number;
  readonly outcome: number;
}

/**
 * Replica-auth handshake (vrmeta layout; the reference only says nonce/MAC/status live in the
 * command-specific area). Initiator -> Hello{nonce_i, mac_h}; acceptor -> Challenge{nonce_a,
 * mac_a}; initiator -> Finish{mac_i}. MACs are HMAC-SHA256 over the transcript (domain tag,
 * cluster, both replica ids, both nonces, mode, direction), computed by the transport, not here.
 */
export interface ReplicaHelloHeader extends HeaderCommon {
  readonly command: typeof Command.replicaHello;
  /** The initiator's 32-byte nonce. */
  readonly nonce: Uint8Array;
  readonly mode: number;
  /** The replica index the initiator believes it dialled (catches swapped address lists). */
  readonly peerReplica: number;
  /**
   * The initiator's MAC over the Hello alone (the acceptor's nonce is not known yet): proves the
   * sender holds the cluster key before the acceptor spends a reserved slot on it.
   */
  readonly mac: Uint8Array;
}

export interface ReplicaChallengeHeader extends HeaderCommon {
  readonly command: typeof Command.replicaChallenge;
  /** The acceptor's 32-byte nonce. */
  readonly nonce: Uint8Array;
  /** The acceptor's MAC (all zero in mode none or on refusal). */
  readonly mac: Uint8Array;
  readonly mode: number;
  readonly status: number;
}

export interface ReplicaFinishHeader extends HeaderCommon {
  readonly command: typeof Command.replicaFinish;
  /** The initiator's MAC (all zero in mode none or on refusal). */
  readonly mac: Uint8Array;
  readonly status: number;
}

/**
 * Sent by each side of a replica connection once it is authenticated (and again when the sender's
 * addresses change): the sender's client-facing addresses, so peers can forward and list them
 * without `--http-peers`. The body is the advertisement (src/transport/advertisement.ts), whose
 * layout `version` names; the transport consumes it, the core never sees it.
 */
export interface ReplicaAdvertiseHeader extends HeaderCommon {
  readonly command: typeof Command.replicaAdvertise;
  readonly version: number;
}

/**
 * A backup's answer to its primary's heartbeat: the checkpoint it holds durably. The reference
 * sends Ping only in transport tests, with no fields; vrmeta gives it the two a heartbeat carries
 * the other way (as TigerBeetle's ping does), so the primary learns that a backup holds the same
 * checkpoint (and may let its own payload go) and checks the backup's checkpoint id.
 */
export interface PingHeader extends HeaderCommon {
  readonly command: typeof Command.ping;
  readonly checkpointId: bigint;
  readonly checkpointOp: number;
  readonly group: bigint;
}

/** Transport liveness probes; header-only, no fields of their own. */
export interface PongHeader extends HeaderCommon {
  readonly command: typeof Command.pong;
}
export interface PingClientHeader extends HeaderCommon {
  readonly command: typeof Command.pingClient;
}
export interface PongClientHeader extends HeaderCommon {
  readonly command: typeof Command.pongClient;
}

export type Header =
  | PingHeader
  | PongHeader
  | PingClientHeader
  | PongClientHeader
  | RequestHeader
  | PrepareHeader
  | PrepareOkHeader
  | ReplyHeader
  | CommitHeader
  | StartViewChangeHeader
  | DoViewChangeHeader
  | StartViewHeader
  | EvictionHeader
  | ReplicaHelloHeader
  | ReplicaChallengeHeader
  | ReplicaFinishHeader
  | ReplicaAdvertiseHeader
  | RequestStartViewHeader
  | RequestPreparesHeader
  | RepairPrepareHeader
  | RepairDoneHeader
  | RangeEvictedHeader
  | RequestStateTransferHeader
  | StateTransferTargetHeader
  | RequestStateChunkHeader
  | StateChunkHeader
  | RequestStoreRangeHeader
  | StoreRangeHeader
  | ForwardRegisterHeader
  | ForwardRegisterResultHeader
  | ForwardLogoutHeader
  | ForwardLogoutResultHeader;

/** Commands that have a typed header: every Command except Reserved. */
export type HeaderCommand = Header['command'];
export type HeaderOf<C extends HeaderCommand> = Extract<Header, { readonly command: C }>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** A header before sealing: `size`, `checksum` and `checksumBody` are filled in by `buildFrame`. */
export type HeaderInput = DistributiveOmit<Header, 'checksum' | 'checksumBody' | 'size'>;
export type HeaderInputOf<C extends HeaderCommand> = Extract<HeaderInput, { readonly command: C }>;

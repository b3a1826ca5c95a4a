/**
 * The VSR replica: a sans-IO state machine driven only by `tick()`, `onMessage()`,
 * `onRequest()` and `onStorageDone()`. It never touches a clock, socket, disk or randomness
 * directly (see io.ts), so the seeded simulator and production run the same code.
 *
 * Vocabulary (TigerBeetle's, iggy-metadata-plane.md §2):
 * - `view`: the epoch; its primary is view mod replica_count. `logView`: the view in which this
 *   replica's log was last made canonical (by a StartView, or by being that view's primary).
 * - `op`: the head, the highest op whose canonical header this replica knows.
 * - `commitMin`: the highest op applied locally; advances strictly by one.
 * - `commitMax`: the highest op known committed cluster-wide (may exceed `op` on a laggard).
 * - Checkpoints land at deterministic ops (multiples of `checkpointInterval`) on every replica;
 *   the snapshot's XXH3-64 is the checkpoint id, exchanged in Commit heartbeats.
 *
 * Journal invariant: every journal entry above commitMin is canonical for `logView` (see
 * journal.ts). Repairs are verified top-down against a canonical successor's `parent`, so the
 * replica never has to trust the peer that serves them.
 *
 * Persist-before-send: every frame that advertises a view (PrepareOk, Commit, StartViewChange,
 * DoViewChange, StartView) is sent only while the superblock durably holds the current view and
 * log view. This is the fence against a restarted replica contradicting a promise it forgot.
 */
import { Command, HEADER_SIZE, HeaderOffset, MESSAGE_BODY_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import {
  BATCH_ENVELOPE_HEADER_SIZE,
  batchEntrySize,
  decodeBatch,
  encodeBatch,
  isBatchable,
  type BatchRequest,
} from './batch.js';
import { ClientTable, type CachedReply } from './client-table.js';
import {
  DVC_SUFFIX_HEADERS_MAX,
  METADATA_GROUP,
  REPAIR_CHUNK_MAX,
  disconnectGraceTicks,
  type ReplicaConfig,
} from './config.js';
import {
  buildFrame,
  prepareIdentity,
  setPrepareView,
  withPrepareCommand,
  type DecodedFrame,
} from './frame.js';
import {
  EvictionReason,
  Operation,
  decodeHeader,
  encodeHeader,
  readCommand,
  readU32,
  type CommitHeader,
  type DoViewChangeHeader,
  type HeaderInputOf,
  type PingHeader,
  type PrepareHeader,
  type PrepareOkHeader,
  type RangeEvictedHeader,
  type RepairDoneHeader,
  type RepairPrepareHeader,
  type RequestHeader,
  type RequestPreparesHeader,
  type RequestStartViewHeader,
  type StartViewChangeHeader,
  type StartViewHeader,
  type StateChunkHeader,
  type StateTransferTargetHeader,
  type RequestStoreRangeHeader,
  type StoreRangeHeader,
} from './header.js';
import { commandName, type DropReason } from './drop-reason.js';
import { REPLICA_EVENTS, type ReplicaEvent } from './events.js';
import {
  VIEW_HEADERS_MAX,
  VSR_FLAG_NACK_UNKNOWN,
  type LogLevel,
  type ReplicaEnv,
  type StorageRequest,
  type StorageResult,
  type VsrState,
} from './io.js';
import { Journal, type JournalEntry } from './journal.js';
import {
  buildDenyReply,
  buildEviction,
  buildReply,
  CommittedReply,
  decodeRegisterBody,
  encodeRegisterPayload,
  resultBody,
} from './reply.js';
import type { CheckpointModel, StateMachine, StoreRangeHost } from './state-machine.js';
import {
  VIEW_FENCE,
  isReplicaSendCommand,
  type ReplicaSendCommand,
  type SendFields,
  type SendTarget,
} from './send.js';
import { decodeSuffix, encodeSuffix } from './suffix.js';
import {
  ArtifactKind,
  STATE_TRANSFER_DECODE_FAILURES_MAX,
  STATE_CHUNKS_IN_FLIGHT_MAX,
  STATE_CHUNKS_UNWRITTEN_MAX,
  STATE_TRANSFER_STALLS_MAX,
  TransferStageMachine,
  chunkCount,
  decodeManifest,
  type Manifest,
  type Stage,
  type TransferSession,
  voteTarget,
} from './state-transfer.js';
import { Timeout } from './timeout.js';
import {
  TransferServer,
  zeroTransferServerCounters,
  type TransferServerCounters,
  type TransferServerHost,
  type CheckpointChunks,
} from './transfer-server.js';
import {
  mergeDoViewChanges,
  type DoViewChangeRecord,
  type MergeOutcome,
  type SuffixSlot,
} from './view-change.js';

export type Status = 'normal' | 'view_change' | 'recovering';

/** Why a replica started a view change (logged with it; the simulator's checkers read it). */
export type ViewChangeReason =
  /** A backup heard no heartbeat from its primary within the timeout. */
  | 'heartbeat_timeout'
  /** Its connection to the primary closed, and no heartbeat came within the grace after. */
  | 'primary_disconnected'
  /** A peer's StartViewChange or DoViewChange names a newer view. */
  | 'peer_start_view_change'
  | 'peer_do_view_change'
  /** The view change itself did not finish in time: try the next primary. */
  | 'view_change_timeout'
  /** No live view answered a restarted replica's probes: a new or fully restarted cluster. */
  | 'probe_exhausted'
  /**
   * Recovering peers answered instead of a live view: every peer (a whole-cluster restart, at
   * once), or with us a view-change quorum after one unanswered probe round.
   */
  | 'peers_recovering'
  /** The primary of our view probed for a view: it restarted and lost its state. */
  | 'primary_restarted'
  /**
   * A primary-elect that cannot lead: its journal cannot hold the merged log, it is behind a
   * checkpoint (its repair was range-evicted), or it holds committed bodies the merged log cannot
   * vouch for (adopting the log would drop them).
   */
  | 'forfeit_cannot_hold_log'
  | 'forfeit_behind_checkpoint'
  | 'forfeit_unvouched_bodies'
  /**
   * A primary at its checkpoint that does not know the checkpoint op's prepare checksum (the
   * parent of its next prepare: its superblock pairing was lost with a crash after an install)
   * and whose peers hold that op only as state: a replica that knows it must lead.
   */
  | 'forfeit_anchor_unknown'
  /** A stopping primary hands over. */
  | 'abdicate';

/** IggyError 59: the request number is below the watermark and its reply left the ring. */
export const ERROR_REQUEST_ALREADY_APPLIED = 59;
/** The packed release this build writes into snapshots (provenance only). */
export const WRITER_RELEASE = 0x0001_0000;

/**
 * What storage recovery hands the replica at boot (see src/storage/recovery.ts); `S` is the state
 * machine's snapshot type.
 */
export interface ReplicaBootState<S> {
  readonly vsrState: VsrState | null;
  readonly snapshot: {
    readonly payload: Uint8Array;
    readonly checksum: bigint;
    /** The payload decoded by the storage's codec; `decoded.op` is the checkpoint op. */
    readonly decoded: CheckpointModel<S>;
  } | null;
  /**
   * WAL prepares in op order, hash-chained, starting at the checkpoint op when the WAL still holds
   * it (the chain anchor) or at the first op after it.
   */
  readonly prepares: readonly Uint8Array[];
  /** Highest op provably committed by the WAL (max stamped commit, floored at the snapshot op). */
  readonly provableCommit: number;
}

interface PipelineEntry {
  readonly op: number;
  readonly checksum: bigint;
  readonly header: PrepareHeader;
  readonly okFrom: Set<number>;
  /**
   * The clients whose requests this prepare carries: the header's client, or a batch's (whose
   * header names none). `inFlight` reads it, so a client is in at most one entry.
   */
  readonly clients: readonly bigint[];
}

/** Where an applied request sits in its prepare: 0 of 1 for a plain prepare. */
export interface BatchPosition {
  readonly index: number;
  readonly count: number;
}
const PLAIN_POSITION: BatchPosition = { index: 0, count: 1 };

/** Sees each applied request with its reply (`onCommitted`). */
type CommittedObserver = (
  header: PrepareHeader,
  body: Uint8Array,
  reply: Uint8Array,
  position: BatchPosition,
) => void;

/** The checkpoint a state transfer accepted (its op, id, manifest and vouching servers). */
type AcceptedTarget = NonNullable<TransferSession['accepted']>;

/** The storage request that verifies and installs the transfer file of an accepted checkpoint. */
function transferInstallRequest(accepted: AcceptedTarget): StorageRequest<never> {
  return {
    kind: 'transfer_install',
    op: accepted.op,
    len: accepted.entry.len,
    checksum: accepted.checksum,
  };
}

/** The chunk sums an installed checkpoint's bytes were received against (what we offer on). */
function acceptedChunks(accepted: AcceptedTarget): CheckpointChunks {
  const { op, checksum, manifest, entry } = accepted;
  const { len, chunkChecksums } = entry;
  return { op, checksum, len, chunkSize: manifest.chunkSize, chunkChecksums, payload: null };
}

/** A DoViewChange merge that decided the new view's log. */
type MergeReady = Extract<MergeOutcome, { kind: 'ready' }>;

interface ParkedRequest {
  readonly header: RequestHeader;
  readonly body: Uint8Array;
}

/** The header fields a prepare takes from its request (zero for a batch, named in its envelope). */
type PrepareClientFields = Pick<
  PrepareHeader,
  'client' | 'requestChecksum' | 'request' | 'operation' | 'userId'
>;

interface RepairSession {
  readonly nonce: bigint;
  readonly peer: number;
  readonly fromOp: number;
  readonly toOp: number;
  /** Bottom-up repair of committed ops (see `repairIfBehind`). */
  readonly committed: boolean;
  /** Prepares received, held until a canonical successor vouches for them. */
  readonly buffer: Map<number, { header: PrepareHeader; frame: Uint8Array }>;
  progressed: boolean;
}

interface PendingView {
  readonly head: number;
  readonly commitMax: number;
  readonly sources: ReadonlyMap<number, readonly number[]>;
}

/** Counters the node layer exports as metrics and the simulator summarises. */
export interface ReplicaCounters extends TransferServerCounters {
  viewChanges: number;
  /** View changes this replica started, by reason. */
  readonly viewChangesByReason: Partial<Record<ViewChangeReason, number>>;
  /** Commit messages a primary sent at once because its pipeline drained (see `acknowledge`). */
  commitsAnnounced: number;
  /** Checkpoint pings a backup held back (the same checkpoint named within a heartbeat). */
  pingsDeferred: number;
  /** Prepare timeouts that fired on a primary (each retransmits the unacknowledged pipeline). */
  prepareTimeouts: number;
  checkpoints: number;
  repairsRequested: number;
  preparesRepaired: number;
  divergences: number;
  requestsDropped: number;
  rangeEvicted: number;
  stateTransfersStarted: number;
  stateTransfersInstalled: number;
  stateTransfersAbandoned: number;
  stateChunksDamaged: number;
  /** Damaged snapshot files rewritten from a peer's copy of the same checkpoint. */
  snapshotRepairs: number;
  /** Sessions evicted from the client table to make room for a Register (node metrics). */
  clientTableEvictions: number;
  /** Messages a handler stopped on, by the guard that held (see `drop`). */
  readonly drops: Partial<Record<DropReason, number>>;
  /** Prepares this replica built as primary that carry several requests (src/vsr/batch.ts). */
  batchesPrepared: number;
  /** Requests those batches carried (a plain prepare's request is not counted). */
  requestsBatched: number;
}

/** State-transfer progress for /cluster/status, /metrics and logs. */
export interface StateTransferProgress {
  readonly stage: Stage;
  readonly peer: number | null;
  readonly artifact: string | null;
  readonly bytesDone: number;
  readonly bytesTotal: number;
  readonly startedAtTick: number;
  readonly checkpointOp: number | null;
}

/** What `drop` logs of a message: any header (or a record standing for one) has these. */
interface DroppedMessage {
  readonly command: number;
  readonly replica: number;
  readonly view: number;
  readonly op?: number;
}

/**
 * One replica of a VSR group, generic over its state machine's snapshot type `S` (the metadata
 * plane's, a partition group's): the protocol never looks inside `S`.
 */
export class Replica<S> {
  readonly config: ReplicaConfig;
  private readonly env: ReplicaEnv<S>;
  readonly stateMachine: StateMachine<S>;
  readonly counters: ReplicaCounters = {
    viewChanges: 0,
    viewChangesByReason: {},
    commitsAnnounced: 0,
    pingsDeferred: 0,
    prepareTimeouts: 0,
    checkpoints: 0,
    repairsRequested: 0,
    preparesRepaired: 0,
    divergences: 0,
    requestsDropped: 0,
    rangeEvicted: 0,
    stateTransfersStarted: 0,
    stateTransfersInstalled: 0,
    stateTransfersAbandoned: 0,
    stateChunksDamaged: 0,
    ...zeroTransferServerCounters(),
    snapshotRepairs: 0,
    clientTableEvictions: 0,
    drops: {},
    batchesPrepared: 0,
    requestsBatched: 0,
  };

  // 'recovering' until bootStatus decides: boot replay applies committed ops, sending no reply.
  status: Status = 'recovering';
  view = 0;
  logView = 0;
  /** What the superblock durably holds. */
  private durableView = -1;
  private durableLogView = -1;
  private superblockWriting = false;
  private superblockDirty = false;
  private superblockFailures = 0;
  private superblockRetryTicks = 0;

  commitMin = 0;
  commitMax = 0;
  /**
   * The commit walk's bound: the highest op known committed whose journal entry is known to be
   * the committed prepare. Invariants: commitMin <= commitCanonical <= commitMax. It is also the
   * commit number every message within a view carries (prepares, heartbeats, PrepareOks,
   * StartViews), since receivers in that view apply their own journal on it; only DoViewChanges
   * carry commit_max, which the merge needs and checks against the logs of a whole quorum.
   *
   * `commitMax` is cluster knowledge from any source (a peer's StateTransferTarget, a DoViewChange
   * of a later view): it is what this replica reports and what a merge must never nack. The
   * journal, though, is canonical only for `logView`: above what that log view committed it may
   * hold a prepare a later view replaced, which chains onto the same committed parent. So the
   * walk applies journal entries only up to a commit number learned from a source whose log the
   * journal agrees with: the primary of our log view (prepares, commits, acks), a StartView the
   * journal was reconciled against, a merged view change, a committed repair (a peer's applied
   * prepare chained onto our applied history), a transferred checkpoint, or the WAL's own
   * stamped commits at boot.
   */
  private commitCanonical = 0;
  /** Identity of the prepare at commitMin (the chain anchor for commitMin + 1); null if unknown. */
  private commitMinChecksum: bigint | null = 0n;
  /** Highest prepare timestamp seen: the primary stamps max(now, this + 1). */
  private timestampLast = 0;

  readonly journal: Journal;
  clientTable: ClientTable;

  /** The latest durable checkpoint (snapshot written and paired in the superblock). */
  checkpointOp = 0;
  checkpointChecksum = 0n;
  /** Checkpoint ids by op, recent ones, for divergence checks against peers. */
  readonly checkpointIds = new Map<number, bigint>();
  /**
   * From the checkpoint op until its superblock pairing is durable. `written` (the id) is null
   * while the storage encodes and writes the snapshot: the id is known only then. The payload
   * goes to the transfer server, which decides how long it is kept.
   */
  private checkpointInProgress: {
    op: number;
    anchor: bigint;
    written: { readonly checksum: bigint } | null;
  } | null = null;
  /** Identity of the prepare at `checkpointOp` (persisted: a transferred one has no WAL entry). */
  private checkpointAnchor: bigint | null = 0n;

  /** Primary: prepared, not yet committed, in op order. */
  private pipeline: PipelineEntry[] = [];
  /** Primary: requests waiting for room in the pipeline. */
  private requestQueue: ParkedRequest[] = [];

  private readonly startViewChangeFrom = new Set<number>();
  private readonly doViewChanges = new Map<number, DoViewChangeRecord>();
  private doViewChangeSent = false;
  /** Primary-elect: the merged log, parked while missing bodies are repaired. */
  private pendingView: PendingView | null = null;

  /** This boot's probe id, echoed by the StartView that answers it. */
  private readonly incarnation: bigint;
  /** Unanswered RequestStartView probes since recovering began. */
  private probeAttempts = 0;
  /** Peers whose probes said they are recovering too, heard while we were recovering. */
  private readonly recoveringPeers = new Set<number>();
  /**
   * Booted from an empty data directory and not caught up since (VSR_FLAG_NACK_UNKNOWN): a lost
   * disk may have held acknowledged prepares, so this replica must not nack anything in a view
   * change until it holds the cluster's log again (TigerBeetle's reason to never re-format).
   */
  nackUnknown = false;
  /** What the superblock durably says of `nackUnknown` (a restart goes back to it). */
  private durableNackUnknown = false;

  /**
   * What this replica's DoViewChanges and superblock say: it can prove nothing about what it
   * acknowledged. A lost disk not caught up (`nackUnknown`), and also an empty data directory
   * that has not yet learned whether the cluster had history (`pristine`): until then it cannot
   * tell a new cluster from its own lost disk, and an empty log counted as knowing dropped a
   * committed op from a merge (seed 4165946773738: a wiped replica restarted once more without
   * --rejoin before its first superblock write, and its view-0 DoViewChange nacked op 26).
   */
  private get knowsNothing(): boolean {
    return this.nackUnknown || this.pristine;
  }

  /** Lost its disk and not caught up, in memory or on disk (a restart now would be again). */
  get nackUnknownDurably(): boolean {
    return this.nackUnknown || this.durableNackUnknown;
  }
  /**
   * The head of the newest StartView adopted since this boot (or of the view this replica started
   * as primary); -1 until one is. A replica that lost its disk may have acknowledged prepares only
   * up to it (see `maybeCaughtUp`).
   */
  private catchUpTarget = -1;
  private readonly peerCommitsReported: (number | null)[];
  /**
   * Canonical headers of our log view whose bodies we lacked when we adopted it (parked by a
   * StartView). Persisted with the superblock until the WAL holds them, so a restart never claims
   * a log view with a log shorter than the head that view announced: the merge trusts the
   * longest log of the highest log view to contain every committed op.
   */
  private readonly viewHeaders = new Map<number, PrepareHeader>();
  /** The view whose StartView our journal was last verified against (top-down, by reconcile). */
  private reconciledView = -1;
  /**
   * The StartView we follow without its log view (lagging: see `onStartView`), and its head:
   * once the commit walk applied that head, the log view is ours (`maybeAdoptLogView`).
   */
  private lagging: { readonly view: number; readonly head: number } | null = null;
  /** Booted from an empty data directory and has not joined a log view since. */
  private pristine = false;
  /** Peers that, since this empty boot, probed for a view from a durable view 0. */
  private readonly virginWitnesses = new Set<number>();
  private heartbeatLast = 0;
  /** Our connection to the primary closed since its last heartbeat (`onPeerDisconnected`). */
  private primaryDisconnected = false;
  private heartbeatCounter = 0;
  /** The last checkpoint ping sent (`sendCheckpointPing`): what it named, in which view, when. */
  private pingLast: {
    readonly view: number;
    readonly checkpointOp: number;
    readonly checkpointId: bigint;
    readonly tick: number;
  } | null = null;
  private repair: RepairSession | null = null;

  private readonly timeoutPrepare: Timeout;
  private readonly timeoutCommitMessage: Timeout;
  private readonly timeoutNormalHeartbeat: Timeout;
  private readonly timeoutStartViewChange: Timeout;
  private readonly timeoutDoViewChange: Timeout;
  private readonly timeoutViewChangeStatus: Timeout;
  private readonly timeoutRequestStartView: Timeout;
  private readonly timeoutRepair: Timeout;

  /** Receiver: the state-transfer stage machine (owns the session). */
  readonly stateTransfer = new TransferStageMachine();
  /**
   * Serving side: re-fetches our own damaged snapshot file (same checkpoint op and id, which the
   * superblock still holds) from a peer, by the transfer protocol, without touching our state.
   * Unlike `stateTransfer` it gates nothing: a primary with a rotten file keeps leading.
   */
  readonly snapshotRepair = new TransferStageMachine();
  /** Server: offers our checkpoint to peers that pull it (src/vsr/transfer-server.ts). */
  private readonly transferServer: TransferServer;
  private ticks = 0;
  /** The next superblock write installs a transferred checkpoint (its op may jump). */
  private superblockStateTransfer = false;
  /** The transfer session whose machine is fetching before its install (`prepareTransferred`). */
  private transferPrepared: bigint | null = null;

  private storageIdNext = 1;
  private readonly storagePending = new Map<number, (result: StorageResult<S>) => void>();

  constructor(options: {
    config: ReplicaConfig;
    env: ReplicaEnv<S>;
    stateMachine: StateMachine<S>;
    boot: ReplicaBootState<S>;
    /**
     * The data directory is empty because this replica's disk was lost (the operator restarts it
     * with --rejoin): until it holds the cluster's log again it must not nack, nor count toward
     * a view-change quorum's knowledge (see `nackUnknown`).
     */
    rejoin?: boolean;
    /** Observers set before boot replay (the simulator's checkers see replayed ops too). */
    observer?: {
      onCommitted?: CommittedObserver | undefined;
      onCheckpoint?: (op: number, checksum: bigint) => void;
    };
  }) {
    const { config, env, stateMachine, boot } = options;
    this.onCommitted = options.observer?.onCommitted ?? null;
    this.onCheckpoint = options.observer?.onCheckpoint ?? null;
    this.config = config;
    this.env = env;
    this.stateMachine = stateMachine;
    this.peerCommitsReported = new Array<number | null>(config.replicaCount).fill(null);
    const t = config.timeouts;
    this.timeoutPrepare = new Timeout('prepare', t.prepare);
    this.timeoutCommitMessage = new Timeout('commit_message', t.commitMessage);
    this.timeoutNormalHeartbeat = new Timeout('normal_heartbeat', t.normalHeartbeat);
    this.timeoutStartViewChange = new Timeout(
      'start_view_change_message',
      t.startViewChangeMessage,
    );
    this.timeoutDoViewChange = new Timeout('do_view_change_message', t.doViewChangeMessage);
    this.timeoutViewChangeStatus = new Timeout('view_change_status', t.viewChangeStatus);
    this.timeoutRequestStartView = new Timeout(
      'request_start_view_message',
      t.requestStartViewMessage,
    );
    this.timeoutRepair = new Timeout('repair', t.repair);
    this.incarnation = env.prng.u128();
    this.transferServer = new TransferServer(this.transferServerHost());
    this.stateMachine.storeRanges?.attach(this.storeRangeHost());

    // Capacity first, then the recovered table (the seed PR's boot crash: see client-table.ts).
    this.clientTable = new ClientTable(config.clientsTableMax, config.sessionsPerUserMax);
    this.bootSnapshot(boot);
    this.journal = new Journal(config.journalSlots, this.checkpointOp);
    this.bootJournal(boot);
    // Before bootStatus: its superblock write must carry the restored view headers again.
    this.bootViewHeaders(boot.vsrState);
    this.bootStatus(boot, options.rejoin === true);
    this.invariants();
  }

  // ---------------------------------------------------------------- boot

  /** Restores the state machine, client table and checkpoint from the snapshot at rest. */
  private bootSnapshot(boot: ReplicaBootState<S>): void {
    const snapshot = boot.snapshot;
    if (snapshot === null) return;
    this.stateMachine.restore(snapshot.decoded.machine);
    this.clientTable = ClientTable.fromSnapshot(
      snapshot.decoded.clientTable,
      this.config.clientsTableMax,
      this.config.sessionsPerUserMax,
    );
    this.checkpointOp = snapshot.decoded.op;
    this.checkpointChecksum = snapshot.checksum;
    this.transferServer.bootPayload(this.checkpointOp, snapshot.checksum, snapshot.payload);
    this.checkpointIds.set(this.checkpointOp, snapshot.checksum);
    this.commitMin = this.checkpointOp;
    this.commitMax = this.checkpointOp;
    this.commitCanonical = this.checkpointOp;
    this.commitMinChecksum = this.checkpointOp === 0 ? 0n : null;
    this.checkpointAnchor = this.commitMinChecksum;
    const state = boot.vsrState;
    if (state?.checkpointAnchor !== undefined && state.checkpointOp === this.checkpointOp) {
      this.checkpointAnchor = state.checkpointAnchor;
      this.commitMinChecksum = state.checkpointAnchor;
    }
  }

  private bootJournal(boot: ReplicaBootState<S>): void {
    for (const frame of boot.prepares) {
      const decoded = decodeHeader(frame);
      assert(
        decoded.ok && decoded.header.command === Command.prepare,
        'recovered WAL entries are prepares',
      );
      const header = decoded.header;
      if (header.op < this.checkpointOp) continue;
      // The kept checkpoint entry anchors the hash chain for the first op after it.
      if (header.op === this.checkpointOp && this.commitMinChecksum === null) {
        this.commitMinChecksum = header.checksum;
        this.checkpointAnchor = header.checksum;
      }
      if (!this.journal.hasRoom(header.op)) break;
      this.journal.put({ op: header.op, header, checksum: header.checksum, frame, durable: true });
      this.timestampLast = Math.max(this.timestampLast, header.timestamp);
    }
    // A solo replica's journal is its quorum: everything durable in it committed. Otherwise the
    // WAL proves its own stamped commits: a prepare's stamped commit covers ops committed in or
    // before its view, which every later log view's log (ours) holds unchanged. The superblock's
    // commit_max is knowledge only: it may come from a view whose log ours does not follow.
    const solo = this.config.replicaCount === 1;
    this.advanceCommitCanonical(solo ? this.op : Math.min(boot.provableCommit, this.op));
    if (boot.vsrState !== null) this.advanceCommitMax(boot.vsrState.commitMax);
    // Replay what is provably committed, without sending replies (nobody is waiting).
    this.commitJournal();
  }

  private bootStatus(boot: ReplicaBootState<S>, rejoin: boolean): void {
    const state = boot.vsrState;
    if (state !== null) {
      assert(state.cluster === this.config.cluster, 'superblock belongs to this cluster');
      assert(
        state.checkpointOp <= this.checkpointOp,
        'recovery refuses a checkpoint ahead of the snapshot',
      );
      this.view = state.view;
      this.logView = state.logView;
      this.durableView = state.view;
      this.durableLogView = state.logView;
      this.nackUnknown = (state.flags & VSR_FLAG_NACK_UNKNOWN) !== 0;
      this.durableNackUnknown = this.nackUnknown;
    } else if (boot.prepares.length > 0) {
      const last = decodeHeader(boot.prepares[boot.prepares.length - 1]!);
      if (last.ok) this.view = last.header.view;
      this.logView = this.view;
    }
    const fresh = state === null && boot.prepares.length === 0 && boot.snapshot === null;
    if (this.config.replicaCount === 1) {
      this.status = 'normal';
      this.logView = this.view;
      this.becomePrimaryOfView();
    } else {
      // Every multi-replica boot first looks for a live view (§2.5), an empty data directory
      // included: it cannot tell a new cluster from a replica whose disk was lost, and a wiped
      // replica that believed itself primary of view 0 could overwrite committed history. A new
      // cluster finds no live view and elects one when the probes run out.
      if (fresh) {
        this.nackUnknown = rejoin;
        this.pristine = true;
      }
      this.status = 'recovering';
      this.timeoutRequestStartView.start();
      this.sendRequestStartView('peers');
    }
    this.persistView();
  }

  /** Logs a typed replica event (its message, with an `event` field) and hands it to the sink. */
  private emit(
    level: LogLevel,
    event: ReplicaEvent,
    fields: Readonly<Record<string, unknown>> = {},
  ): void {
    this.env.logger.log(level, REPLICA_EVENTS[event], { event, ...fields });
    this.env.events?.emit(event, fields);
  }

  /**
   * A handler's guard held: count the named reason and log it at debug level with what the
   * message said and where this replica stands. The record is built only when debug logging is
   * on, so a drop otherwise costs one counter increment. Returns nothing, so a handler ends with
   * `return this.drop(...)`.
   */
  private drop(reason: DropReason, message: DroppedMessage | null = null): void {
    this.counters.drops[reason] = (this.counters.drops[reason] ?? 0) + 1;
    if (this.env.logger.debugEnabled !== true) return;
    this.env.logger.log('debug', 'message dropped', {
      reason,
      ...(message === null
        ? {}
        : {
            command: commandName(message.command),
            from: message.replica,
            message_view: message.view,
          }),
      ...(message?.op === undefined ? {} : { op: message.op }),
      status: this.status,
      view: this.view,
      log_view: this.logView,
      commit_min: this.commitMin,
    });
  }

  // ---------------------------------------------------------------- accessors

  /** The head: the highest op whose canonical header this replica knows. commitMin <= op. */
  get op(): number {
    return Math.max(this.journal.head, this.commitMin);
  }

  primaryIndex(view = this.view): number {
    return view % this.config.replicaCount;
  }

  isPrimary(): boolean {
    return this.primaryIndex() === this.config.replica;
  }

  private viewDurable(): boolean {
    return this.durableView === this.view && this.durableLogView === this.logView;
  }

  /**
   * Serving reads is safe and current: normal in its own log view, not transferring, and every
   * commit it has heard of applied (a read would otherwise miss an acknowledged write it knows of).
   */
  get readyForReads(): boolean {
    return (
      this.status === 'normal' &&
      this.logView === this.view &&
      !this.stateTransfer.transferring &&
      this.commitMin >= this.commitMax
    );
  }

  /** The head a replica that lost its disk must apply to count again (-1: none adopted yet). */
  get catchUpHead(): number {
    return this.catchUpTarget;
  }

  /** A primary that may prepare (and sends heartbeats): normal in its own log view, durable. */
  get activePrimary(): boolean {
    return this.primaryActive();
  }

  /** A primary that may prepare: normal in its own log view, durable. */
  private primaryActive(): boolean {
    return this.primaryBlocker() === null;
  }

  /** Why `primaryActive` is false now, or null when it is true. */
  private primaryBlocker(): DropReason | null {
    if (this.status !== 'normal') return 'status_not_normal';
    if (!this.isPrimary()) return 'not_primary';
    if (this.logView !== this.view) return 'log_view_behind_view';
    if (!this.viewDurable()) return 'view_not_durable';
    return null;
  }

  /**
   * A new request would be admitted now rather than dropped: the pipeline or the request queue
   * has room. Edges that hold many clients queue their requests until this holds, instead of
   * letting the core drop them (a drop costs the client a timeout and a retry).
   */
  hasAdmissionRoom(): boolean {
    return (
      this.pipeline.length < this.config.prepareQueueDepth ||
      this.requestQueue.length < this.config.requestQueueDepth
    );
  }

  /** A primary that may admit client requests: active, caught up, and knows its chain anchor. */
  canAcceptRequests(): boolean {
    return this.admissionBlocker() === null;
  }

  /** Why `canAcceptRequests` is false now, or null when it is true. */
  private admissionBlocker(): DropReason | null {
    const blocker = this.primaryBlocker();
    if (blocker !== null) return blocker;
    if (this.commitMin !== this.commitMax) return 'commit_behind';
    if (this.headChecksum() === null) return 'head_unknown';
    return null;
  }

  /** Identity of the prepare at `op` (the parent of the next prepare), null if unknown. */
  private headChecksum(): bigint | null {
    const op = this.op;
    const entry = this.journal.get(op);
    if (entry !== undefined) return entry.checksum;
    return op === this.commitMin ? this.commitMinChecksum : null;
  }

  /** For the simulator's checkers: the identity of the last applied prepare. */
  get commitChecksum(): bigint | null {
    return this.commitMinChecksum;
  }

  // ---------------------------------------------------------------- drivers

  tick(): void {
    this.ticks += 1;
    for (const timeout of this.timeouts()) timeout.tick();
    this.transferServer.tick();
    this.stateMachine.storeRanges?.tick();
    this.tickTransferPreparing();
    this.tickStateTransfer();
    this.tickSnapshotRepair();
    if (this.superblockRetryTicks > 0 && --this.superblockRetryTicks === 0) this.persistView();
    if (this.timeoutPrepare.fired()) this.onTimeoutPrepare();
    if (this.timeoutCommitMessage.fired()) this.onTimeoutCommitMessage();
    if (this.timeoutNormalHeartbeat.fired()) this.onTimeoutNormalHeartbeat();
    if (this.timeoutStartViewChange.fired()) this.onTimeoutStartViewChange();
    if (this.timeoutDoViewChange.fired()) this.onTimeoutDoViewChange();
    if (this.timeoutViewChangeStatus.fired()) this.onTimeoutViewChangeStatus();
    if (this.timeoutRequestStartView.fired()) this.onTimeoutRequestStartView();
    if (this.timeoutRepair.fired()) this.onTimeoutRepair();
    if (
      this.primaryActive() &&
      this.repair === null &&
      (this.headChecksum() === null || this.commitMin < this.commitMax)
    ) {
      this.repairIfBehind();
    }
    this.invariants();
  }

  private timeouts(): Timeout[] {
    return [
      this.timeoutPrepare,
      this.timeoutCommitMessage,
      this.timeoutNormalHeartbeat,
      this.timeoutStartViewChange,
      this.timeoutDoViewChange,
      this.timeoutViewChangeStatus,
      this.timeoutRequestStartView,
      this.timeoutRepair,
    ];
  }

  /**
   * The commit number each peer last reported (prepares, commits and StartViews from a primary;
   * PrepareOks and DoViewChanges from backups); null until heard from. For operators' lag view
   * only: the protocol never acts on it.
   */
  /** State-transfer offers this replica holds now (a peer is fetching, or just fetched). */
  get offersHeld(): number {
    return this.transferServer.offerCount;
  }

  get peerCommits(): readonly (number | null)[] {
    return this.peerCommitsReported;
  }

  private notePeerCommit(header: DecodedFrame['header']): void {
    if (header.replica === this.config.replica) return;
    switch (header.command) {
      case Command.prepare:
      case Command.prepareOk:
      case Command.commit:
      case Command.doViewChange:
      case Command.startView:
        this.peerCommitsReported[header.replica] = header.commit;
        break;
      default:
        break;
    }
  }

  /**
   * Graceful shutdown of a primary: start electing its successor now, so the backups need not
   * wait out their heartbeat timeout. Returns whether a view change was started; the caller
   * should let `viewChangeAnnounced` become true (the StartViewChange is sent once the new view
   * is durable) before it stops.
   */
  abdicate(): boolean {
    if (this.config.replicaCount === 1 || this.status !== 'normal' || !this.isPrimary()) {
      return false;
    }
    this.env.logger.log('info', 'abdicating: electing a successor before shutdown', {
      view: this.view,
    });
    this.startViewChange(this.view + 1, 'abdicate');
    return true;
  }

  /** A view change is under way and its StartViewChange has been sent (the view is durable). */
  get viewChangeAnnounced(): boolean {
    return this.status === 'view_change' && this.viewDurable();
  }

  /**
   * Whether a frame is for this replica's group. A client's request names no group (0) when it
   * is for the metadata group, the one clients address directly.
   */
  private ofThisGroup(header: DecodedFrame['header']): boolean {
    // A reply or an eviction names no group; no replica acts on one.
    if (!('group' in header) || header.group === this.config.group) return true;
    const metadata = this.config.group === METADATA_GROUP;
    return header.command === Command.request && header.group === 0n && metadata;
  }

  /** A frame from the network, already verified and validated by the transport. */
  onMessage(message: DecodedFrame): void {
    const header = message.header;
    if (header.cluster !== this.config.cluster) return this.drop('wrong_cluster', header);
    if (!this.ofThisGroup(header)) return this.drop('wrong_group', header);
    const { replicaCount } = this.config;
    if (header.replica >= replicaCount) return this.drop('replica_out_of_range', header);
    assert(message.frame.byteLength === header.size, 'a decoded frame is exactly its size');
    assert(message.body.byteLength === header.size - HEADER_SIZE, 'the body follows the header');
    this.notePeerCommit(header);
    switch (header.command) {
      case Command.prepare:
        this.onPrepare(header, message.frame);
        break;
      case Command.prepareOk:
        this.onPrepareOk(header);
        break;
      case Command.commit:
        this.onCommit(header);
        break;
      case Command.ping:
        this.onPing(header);
        break;
      case Command.startViewChange:
        this.onStartViewChange(header);
        break;
      case Command.doViewChange:
        this.onDoViewChange(header, message.body);
        break;
      case Command.startView:
        this.onStartView(header, message.body);
        break;
      case Command.requestStartView:
        this.onRequestStartView(header);
        break;
      case Command.requestPrepares:
        this.onRequestPrepares(header);
        break;
      case Command.repairPrepare:
        this.onRepairPrepare(header, message.frame);
        break;
      case Command.repairDone:
        this.onRepairDone(header);
        break;
      case Command.rangeEvicted:
        this.onRangeEvicted(header);
        break;
      case Command.request:
        this.onRequest(header, message.body);
        break;
      case Command.requestStateTransfer:
        this.transferServer.onRequestStateTransfer(header);
        break;
      case Command.stateTransferTarget:
        this.onStateTransferTarget(header, message.body);
        break;
      case Command.requestStateChunk:
        this.transferServer.onRequestStateChunk(header);
        break;
      case Command.stateChunk:
        this.onStateChunk(header, message.body);
        break;
      case Command.requestStoreRange:
      case Command.storeRange:
        this.onStoreRangeFrame(header, message.body);
        break;
      default:
        break;
    }
    this.invariants();
  }

  onStorageDone(id: number, result: StorageResult<S>): void {
    const continuation = this.storagePending.get(id);
    assert(continuation !== undefined, `unknown storage completion ${id}`);
    this.storagePending.delete(id);
    continuation(result);
    this.invariants();
  }

  private submit(request: StorageRequest<S>, done: (result: StorageResult<S>) => void): void {
    const id = this.storageIdNext++;
    this.storagePending.set(id, done);
    this.env.storage.submit(id, request);
  }

  /** WAL and snapshot write failures are fail-stop: the replica restarts from what is on disk. */
  private fatal(what: string, result: StorageResult<S>): never {
    const error = result.ok ? 'unknown' : result.error;
    this.env.logger.log('error', 'storage failure', { what, error });
    throw new StorageFailure(`${what}: ${error}`);
  }

  // ---------------------------------------------------------------- superblock

  private vsrState(viewHeaders = this.viewHeadersToPersist()): VsrState {
    return {
      cluster: this.config.cluster,
      replica: this.config.replica,
      replicaCount: this.config.replicaCount,
      view: this.view,
      logView: this.logView,
      commitMax: this.commitMax,
      checkpointOp: this.checkpointOp,
      checkpointChecksum: this.checkpointChecksum,
      flags: this.knowsNothing ? VSR_FLAG_NACK_UNKNOWN : 0,
      viewHeaders: encodeViewHeaders(viewHeaders),
      ...(this.checkpointAnchor === null ? {} : { checkpointAnchor: this.checkpointAnchor }),
    };
  }

  /** The view headers a restart would still need: above commit_min and not durable in the WAL. */
  private viewHeadersToPersist(): PrepareHeader[] {
    for (const [op, header] of this.viewHeaders) {
      const entry = this.journal.get(op);
      const durable =
        entry !== undefined &&
        entry.checksum === header.checksum &&
        entry.durable &&
        entry.frame !== null;
      if (op <= this.commitMin || durable) this.viewHeaders.delete(op);
    }
    return [...this.viewHeaders.values()].sort((a, b) => a.op - b.op).slice(-VIEW_HEADERS_MAX);
  }

  /** Records the parked canonical headers of the log view just adopted from a StartView. */
  private noteViewHeaders(logViewChanged: boolean): void {
    if (logViewChanged) this.viewHeaders.clear();
    for (const op of this.journal.ops()) {
      if (op <= this.commitMin) continue;
      const entry = this.journal.get(op)!;
      if (!entry.durable || entry.frame === null) this.viewHeaders.set(op, entry.header);
    }
  }

  /**
   * After a restart: park the persisted view headers the WAL does not hold, so our DoViewChange
   * reports the head our log view reached and repair fetches the bodies.
   */
  private bootViewHeaders(state: VsrState | null): void {
    const bytes = state?.viewHeaders;
    if (bytes === undefined || bytes.byteLength === 0) return;
    for (let offset = 0; offset < bytes.byteLength; offset += HEADER_SIZE) {
      const decoded = decodeHeader(bytes, offset);
      assert(
        decoded.ok && decoded.header.command === Command.prepare,
        'a persisted view header is a prepare header',
      );
      const header = decoded.header;
      assert(
        header.cluster === this.config.cluster,
        'a persisted view header belongs to this cluster',
      );
      assert(
        prepareIdentity(this.env.kernels, bytes, offset) === header.checksum,
        'a persisted view header is sealed',
      );
      if (header.op <= this.commitMin || !this.journal.hasRoom(header.op)) continue;
      const entry = this.journal.get(header.op);
      if (entry !== undefined && entry.checksum === header.checksum) continue;
      // The StartView's truncation is durable before the superblock naming its log view, so a
      // different WAL entry here cannot be canonical: drop it and everything above it.
      if (entry !== undefined) this.truncateFrom(header.op);
      this.journal.put({
        op: header.op,
        header,
        checksum: header.checksum,
        frame: null,
        durable: false,
      });
      this.viewHeaders.set(header.op, header);
    }
    // Before bootStatus: the log view is still the superblock's, not yet this.logView.
    this.emit('info', 'log_view_headers_restored', {
      log_view: state?.logView ?? 0,
      head: this.op,
    });
  }

  /** Makes the current (view, log view, checkpoint) durable; coalesces overlapping requests. */
  private persistView(): void {
    if (this.superblockWriting) {
      this.superblockDirty = true;
      return;
    }
    this.superblockWriting = true;
    this.superblockDirty = false;
    const viewHeaders = this.viewHeadersToPersist();
    const state = this.vsrState(viewHeaders);
    const writtenViewHeaders = new Set(viewHeaders.map((header) => header.checksum));
    const stateTransfer = this.superblockStateTransfer;
    this.superblockStateTransfer = false;
    this.submit({ kind: 'superblock_write', state, stateTransfer }, (result) => {
      this.superblockWriting = false;
      if (!result.ok) {
        // Every view-scoped send stays withheld; retry with backoff (§4.5).
        this.superblockFailures += 1;
        if (stateTransfer) this.superblockStateTransfer = true;
        this.env.logger.log('warn', 'superblock write failed', {
          error: result.error,
          failures: this.superblockFailures,
        });
        this.superblockRetryTicks = Math.min(100, 2 ** Math.min(this.superblockFailures, 8));
        return;
      }
      this.superblockFailures = 0;
      const wasDurable = this.viewDurable();
      this.durableView = state.view;
      this.durableLogView = state.logView;
      this.durableNackUnknown = (state.flags & VSR_FLAG_NACK_UNKNOWN) !== 0;
      // Headers parked since the write started need a new one; headers repaired since do not.
      const viewHeadersCovered = this.viewHeadersToPersist().every((header) =>
        writtenViewHeaders.has(header.checksum),
      );
      if (this.superblockDirty || !this.matchesDurable(state) || !viewHeadersCovered) {
        this.persistView();
      }
      this.onSuperblockWritten(state);
      if (!wasDurable && this.viewDurable()) this.onViewDurable();
    });
  }

  private matchesDurable(state: VsrState): boolean {
    return (
      state.view === this.view &&
      state.logView === this.logView &&
      state.checkpointOp === this.checkpointOp &&
      state.checkpointChecksum === this.checkpointChecksum &&
      state.checkpointAnchor === (this.checkpointAnchor ?? undefined) &&
      state.flags === (this.knowsNothing ? VSR_FLAG_NACK_UNKNOWN : 0)
    );
  }

  /** Sends that waited for the view to be durable. */
  private onViewDurable(): void {
    assert(this.viewDurable(), 'the superblock holds the current view and log view');
    if (this.status === 'view_change') {
      this.sendStartViewChange();
      if (this.doViewChangeSent) this.sendDoViewChange();
    } else if (this.status === 'normal') {
      if (this.isPrimary() && this.logView === this.view) {
        this.sendStartView(null, 0n);
        this.selfAckPipeline();
        this.sendCommitHeartbeat();
        this.timeoutPrepare.start();
        this.onTimeoutPrepare();
        this.promoteRequests();
      } else {
        this.sendPrepareOks(this.commitCanonical, this.op);
      }
    }
  }

  // ---------------------------------------------------------------- client requests

  /** A client request (a local submission or a Request frame). Non-primaries drop requests. */
  onRequest(header: RequestHeader, body: Uint8Array): void {
    const blocker = this.admissionBlocker();
    if (blocker !== null) {
      this.counters.requestsDropped += 1;
      return this.drop(blocker, header);
    }
    assert(this.primaryActive() && this.commitMin === this.commitMax, 'a caught-up primary');
    assert(this.headChecksum() !== null, 'the primary knows the parent of its next prepare');
    if (header.operation === Operation.register) {
      if (decodeRegisterBody(body) === null) return this.drop('register_body_invalid', header);
      if (this.inFlight(header.client)) return this.drop('client_in_flight', header);
      this.admit({ header, body });
      return;
    }
    const { client, session, request, requestChecksum } = header;
    const check = this.clientTable.checkRequest(client, session, request, requestChecksum);
    switch (check.kind) {
      case 'no_session':
        this.sendEviction(header.client, EvictionReason.noSession);
        return;
      case 'fenced':
        this.sendEviction(header.client, EvictionReason.sessionTooLow);
        return;
      case 'epoch_ahead':
        return this.drop('session_epoch_ahead', header);
      case 'checksum_mismatch':
        return this.drop('request_checksum_mismatch', header);
      case 'duplicate': {
        const denyCode = this.stateMachine.duplicateDenyCode?.(header.operation) ?? 0;
        if (denyCode !== 0) {
          this.sendDeny(header, denyCode);
          return;
        }
        this.env.bus.sendToClient(header.client, check.reply.bytes);
        return;
      }
      case 'already_applied':
        this.sendDeny(header, ERROR_REQUEST_ALREADY_APPLIED);
        return;
      case 'new':
        if (this.inFlight(header.client)) return this.drop('client_in_flight', header);
        this.admit({ header, body });
        return;
    }
  }

  private sendDeny(header: RequestHeader, status: number): void {
    this.env.bus.sendToClient(
      header.client,
      buildDenyReply(this.env.kernels, {
        cluster: this.config.cluster,
        replica: this.config.replica,
        view: this.view,
        client: header.client,
        request: header.request,
        operation: header.operation,
        status,
      }),
    );
  }

  private inFlight(client: bigint): boolean {
    return (
      this.pipeline.some((entry) => entry.clients.includes(client)) ||
      this.requestQueue.some((parked) => parked.header.client === client)
    );
  }

  /**
   * Prepares a request at once while fewer than `prepare_eager_max` prepares are in flight;
   * otherwise parks it, and `promoteRequests` sends the parked ones batched at the next commit.
   */
  private admit(request: ParkedRequest): void {
    assert(!this.inFlight(request.header.client), 'one request in flight per client');
    if (this.pipeline.length < this.config.prepareEagerMax && this.roomForPrepare()) {
      this.prepare([request]);
    } else if (this.requestQueue.length < this.config.requestQueueDepth) {
      this.requestQueue.push(request);
    } else {
      this.counters.requestsDropped += 1;
      this.drop('request_queue_full', request.header);
    }
  }

  /** The next op fits the WAL and does not run past a checkpoint that is not yet durable. */
  private roomForPrepare(): boolean {
    return this.journal.hasRoom(this.op + 1);
  }

  /**
   * Turns requests into the next prepare: stamp, seal, journal, replicate. One request is a plain
   * prepare (its header names the client); several are a batch (src/vsr/batch.ts) whose envelope
   * names them, and whose header's client fields are zero.
   */
  private prepare(requests: readonly ParkedRequest[]): void {
    assert(this.primaryActive(), 'only an active primary prepares');
    assert(
      requests.length >= 1 && requests.length <= this.config.prepareBatchMax,
      'a prepare carries 1..prepare_batch_max requests',
    );
    const op = this.op + 1;
    const parent = this.headChecksum();
    assert(parent !== null, 'the primary knows its head identity');
    assert(op > this.commitMin && this.journal.get(op) === undefined, 'the next op is new');
    let fields: PrepareClientFields;
    let body: Uint8Array;
    if (requests.length === 1) {
      const header = requests[0]!.header;
      body = requests[0]!.body;
      const userId =
        header.operation === Operation.register
          ? decodeRegisterBody(body)!
          : (this.clientTable.get(header.client)?.userId ?? 0);
      const { client, requestChecksum, request, operation } = header;
      fields = { client, requestChecksum, request, operation, userId };
    } else {
      const entries: BatchRequest[] = requests.map(({ header, body: requestBody }) => {
        assert(isBatchable(header.operation), 'only plain requests are batched');
        return {
          client: header.client,
          request: header.request,
          requestChecksum: header.requestChecksum,
          operation: header.operation,
          userId: this.clientTable.get(header.client)?.userId ?? 0,
          body: requestBody,
        };
      });
      body = encodeBatch(entries);
      const operation = Operation.batch;
      fields = { client: 0n, requestChecksum: 0n, request: 0, operation, userId: 0 };
      this.counters.batchesPrepared += 1;
      this.counters.requestsBatched += requests.length;
    }
    this.timestampLast = Math.max(this.env.clock.realtimeUs(), this.timestampLast + 1);
    const frame = this.frame(
      Command.prepare,
      { parent, op, commit: this.commitCanonical, timestamp: this.timestampLast, ...fields },
      body,
    );
    const decoded = decodeHeader(frame);
    assert(decoded.ok && decoded.header.command === Command.prepare, 'a built prepare decodes');
    this.journalAppend(decoded.header, frame);
    const clients = requests.map((request) => request.header.client);
    this.pipeline.push({
      op,
      checksum: decoded.header.checksum,
      header: decoded.header,
      okFrom: new Set(),
      clients,
    });
    if (!this.timeoutPrepare.running) this.timeoutPrepare.start();
    // Star replication: the primary sends each prepare to every backup. Metadata prepares are
    // small, so the primary's bandwidth is not the limit a chain would relieve, and a chain stalls
    // every write on the prepare timeout while the primary's successor is down.
    this.sendFrame('peers', frame);
  }

  /**
   * The requests of the next prepare, taken from the front of the queue: the first one, and while
   * it and its followers are plain (batchable) requests, up to `prepare_batch_max` of them whose
   * envelope fits one frame. Queue order is kept; a register or logout goes alone.
   */
  private dequeueBatch(): ParkedRequest[] {
    const first = this.requestQueue.shift();
    assert(first !== undefined, 'dequeue from a non-empty queue');
    const batch = [first];
    if (!isBatchable(first.header.operation)) return batch;
    let bodySize = BATCH_ENVELOPE_HEADER_SIZE + batchEntrySize(first.body.byteLength);
    while (batch.length < this.config.prepareBatchMax && this.requestQueue.length > 0) {
      const next = this.requestQueue[0]!;
      if (!isBatchable(next.header.operation)) break;
      const size = batchEntrySize(next.body.byteLength);
      if (bodySize + size > MESSAGE_BODY_SIZE_MAX) break;
      // onRequest admits a client only when it has nothing in flight, queued included.
      assert(
        !batch.some((parked) => parked.header.client === next.header.client),
        'queued requests are from distinct clients',
      );
      batch.push(this.requestQueue.shift()!);
      bodySize += size;
    }
    return batch;
  }

  /**
   * The clients a journaled prepare carries (the pipeline entry of a view's re-replicated
   * suffix).
   */
  private preparedClients(header: PrepareHeader, frame: Uint8Array): bigint[] {
    if (header.operation !== Operation.batch) return [header.client];
    const batch = decodeBatch(frame.subarray(HEADER_SIZE));
    // Every journaled batch passed validateBody (the frame decoder) or was built here.
    assert(batch.ok, 'a journaled batch decodes');
    return batch.requests.map((request) => request.client);
  }

  /** Journals a canonical prepare and writes it to the WAL. */
  private journalAppend(header: PrepareHeader, frame: Uint8Array): void {
    const existing = this.journal.get(header.op);
    if (existing !== undefined) {
      assert(existing.checksum === header.checksum && existing.frame === null, 'a parked header');
      existing.frame = frame;
      this.writeEntry(existing);
      return;
    }
    assert(header.op > this.commitMin, 'a new journal entry is above what we applied');
    const { op, checksum } = header;
    const entry: JournalEntry = { op, header, checksum, frame, durable: false };
    this.journal.put(entry);
    this.writeEntry(entry);
  }

  private writeEntry(entry: JournalEntry): void {
    assert(entry.frame !== null && !entry.durable, 'write a body once');
    const view = this.view;
    this.submit({ kind: 'wal_append', op: entry.op, frame: entry.frame }, (result) => {
      if (!result.ok) this.fatal('wal_append', result);
      // The entry may have been truncated or replaced while the write was in flight.
      if (this.journal.get(entry.op) !== entry) return;
      entry.durable = true;
      this.onPrepareDurable(entry, view);
    });
  }

  private onPrepareDurable(entry: JournalEntry, view: number): void {
    if (this.status === 'view_change') {
      this.tryStartPendingView();
      return;
    }
    if (this.status !== 'normal') return this.drop('status_not_normal', entry.header);
    if (view !== this.view) return this.drop('view_changed_during_write', entry.header);
    assert(entry.durable && entry.frame !== null, 'a durable entry holds its body');
    assert(this.journal.get(entry.op) === entry, 'the entry is still journaled');
    this.maybeCaughtUp();
    if (this.isPrimary()) this.acknowledge(entry.op, entry.checksum, this.config.replica);
    else this.sendPrepareOk(entry);
    this.commitJournal();
  }

  // ---------------------------------------------------------------- replication (backup)

  private onPrepare(header: PrepareHeader, frame: Uint8Array): void {
    if (header.view > this.view) {
      this.onNewerView(header.view);
      return this.drop('newer_view', header);
    }
    if (this.status !== 'normal') return this.drop('status_not_normal', header);
    if (header.view < this.view) return this.drop('older_view', header);
    if (this.isPrimary()) return this.drop('primary_of_view', header);
    if (this.logView !== this.view) return this.drop('log_view_behind_view', header);
    // A transferring replica ignores live prepares: its journal is about to be replaced.
    if (this.stateTransfer.transferring) return this.drop('state_transferring', header);
    assert(header.view === this.view && this.logView === this.view, 'a prepare of our log view');
    assert(this.status === 'normal' && !this.isPrimary(), 'a normal backup');
    this.timestampLast = Math.max(this.timestampLast, header.timestamp);
    // Our log view is the primary's view: its commit number speaks of our journal.
    this.advanceCommitCanonical(header.commit);
    this.ingestFromPrimary(header, frame);
    this.commitJournal();
    this.repairIfBehind();
  }

  /** A prepare of the current view from its primary: canonical by definition. */
  private ingestFromPrimary(header: PrepareHeader, frame: Uint8Array): void {
    if (header.op <= this.commitMin) {
      // Already committed here (a new primary re-replicating what it could not prove committed):
      // acknowledge it, or that primary waits forever for a quorum we already provide.
      const entry = this.journal.get(header.op);
      const held = entry === undefined
        ? header.op < this.journal.floor
        : entry.checksum === header.checksum && entry.durable;
      if (!held) return this.drop('prepare_committed_not_held', header);
      this.sendPrepareOkFor(header);
      return;
    }
    if (!this.journal.hasRoom(header.op)) return this.drop('journal_full', header);
    assert(header.op > this.commitMin && header.op > this.journal.floor, 'above what we applied');
    const existing = this.journal.get(header.op);
    if (existing !== undefined) {
      if (existing.checksum !== header.checksum) {
        // Both are canonical for this log view: this cannot happen without a bug or a forgery.
        this.reportDivergence('prepare contradicts the journal in the same view', header.op);
        return;
      }
      if (existing.frame === null) this.journalAppend(header, frame);
      else if (existing.durable) this.sendPrepareOk(existing);
      else this.drop('prepare_write_in_flight', header);
      return;
    }
    const previous = this.journal.get(header.op - 1);
    if (previous !== undefined && previous.checksum !== header.parent) {
      this.reportDivergence('prepare does not chain onto the journal in the same view', header.op);
      return;
    }
    this.journalAppend(header, frame);
  }

  /**
   * Removes the uncommitted entries at `ops` from the journal and the WAL, keeping every other
   * entry: verified bodies above a discarded one stay (seed 1786574930811: truncating from the
   * lowest unverifiable op dropped committed ops 25-26 whose other copy was on a lost disk).
   */
  private discardEntries(ops: readonly number[]): void {
    if (ops.length === 0) return;
    const lowest = Math.min(...ops);
    const removed = new Set(ops);
    if (this.journal.ops().every((op) => op < lowest || removed.has(op))) {
      this.truncateFrom(lowest);
      return;
    }
    assert(
      lowest > this.commitMin,
      `discard of applied op ${lowest} (commit_min ${this.commitMin})`,
    );
    for (const op of removed) this.viewHeaders.delete(op);
    this.journal.remove(ops);
    this.pipeline = this.pipeline.filter((entry) => !removed.has(entry.op));
    this.submit({ kind: 'wal_remove', ops: [...removed] }, (result) => {
      if (!result.ok) this.fatal('wal_remove', result);
    });
  }

  /** Removes an uncommitted suffix from the journal and the WAL. */
  private truncateFrom(fromOp: number): void {
    assert(
      fromOp > this.commitMin,
      `truncation of applied op ${fromOp} (commit_min ${this.commitMin})`,
    );
    for (const op of [...this.viewHeaders.keys()]) if (op >= fromOp) this.viewHeaders.delete(op);
    if (fromOp > this.journal.head) return;
    this.journal.removeFrom(fromOp);
    this.pipeline = this.pipeline.filter((entry) => entry.op < fromOp);
    this.submit({ kind: 'wal_truncate', fromOp }, (result) => {
      if (!result.ok) this.fatal('wal_truncate', result);
    });
  }

  private sendPrepareOk(entry: JournalEntry): void {
    if (!entry.durable || entry.frame === null) return;
    this.sendPrepareOkFor(entry.header);
  }

  /** PrepareOk for a prepare this replica holds durably (in its WAL or its checkpoint). */
  private sendPrepareOkFor(header: PrepareHeader): void {
    // Withheld until the view is durable (`onViewDurable` sends them then): the send fence.
    if (!this.viewDurable() || this.status !== 'normal') return;
    if (this.isPrimary() || this.logView !== this.view) return;
    // A transferring replica withholds PrepareOk: it must not count toward any quorum.
    if (this.stateTransfer.transferring) return;
    assert(header.op <= this.op, 'we acknowledge only a prepare of our log');
    this.send(this.primaryIndex(), Command.prepareOk, {
      parent: header.parent,
      prepareChecksum: header.checksum,
      op: header.op,
      commit: this.commitCanonical,
      timestamp: header.timestamp,
      request: header.request,
      operation: header.operation,
    });
  }

  private sendPrepareOks(fromOp: number, toOp: number): void {
    for (let op = Math.max(fromOp, this.commitMin) + 1; op <= toOp; op++) {
      const entry = this.journal.get(op);
      if (entry !== undefined) this.sendPrepareOk(entry);
    }
  }

  // ---------------------------------------------------------------- commit

  private onPrepareOk(header: PrepareOkHeader): void {
    if (header.view > this.view) {
      this.onNewerView(header.view);
      return this.drop('newer_view', header);
    }
    if (header.view !== this.view) return this.drop('older_view', header);
    const blocker = this.primaryBlocker();
    if (blocker !== null) return this.drop(blocker, header);
    assert(this.primaryActive() && header.view === this.view, 'an active primary of the view');
    // A backup's commit_max is true knowledge: ops up to it committed in some view, so a new
    // primary that merged a lower commit number learns it here instead of waiting for acks.
    if (header.commit > this.commitCanonical && header.commit <= this.op) {
      this.advanceCommitCanonical(header.commit);
      this.commitJournal();
    }
    this.acknowledge(header.op, header.prepareChecksum, header.replica);
  }

  private acknowledge(op: number, checksum: bigint, replica: number): void {
    const ack = { command: Command.prepareOk, replica, view: this.view, op };
    const blocker = this.primaryBlocker();
    if (blocker !== null) return this.drop(blocker, ack);
    const entry = this.pipeline.find((candidate) => candidate.op === op);
    if (entry === undefined) return this.drop('prepare_not_in_pipeline', ack);
    if (entry.checksum !== checksum) return this.drop('prepare_checksum_mismatch', ack);
    assert(this.primaryActive(), 'only an active primary counts acknowledgements');
    assert(replica >= 0 && replica < this.config.replicaCount, 'an ack from a replica');
    assert(this.journal.get(op)?.checksum === checksum, 'a pipeline prepare is journaled');
    entry.okFrom.add(replica);
    let committed = this.commitCanonical;
    for (const candidate of this.pipeline) {
      if (candidate.op <= committed) continue;
      if (candidate.op !== committed + 1) break;
      if (candidate.okFrom.size < this.config.quorumReplication) break;
      committed = candidate.op;
    }
    if (committed > this.commitCanonical) {
      this.advanceCommitCanonical(committed);
      this.commitJournal();
      // Backups learn a commit from the next prepare or heartbeat. With nothing left in flight
      // there is no next prepare: tell them now, so a read on a backup trails the primary by a
      // round trip instead of a heartbeat interval.
      if (this.pipeline.length === 0 && this.primaryActive()) {
        this.counters.commitsAnnounced += 1;
        this.timeoutCommitMessage.reset();
        this.sendCommitHeartbeat();
      }
    }
  }

  /** The primary's own ack for pipeline entries that became durable before the view did. */
  private selfAckPipeline(): void {
    for (const entry of [...this.pipeline]) {
      const journaled = this.journal.get(entry.op);
      if (journaled?.durable === true && journaled.checksum === entry.checksum) {
        this.acknowledge(entry.op, entry.checksum, this.config.replica);
      }
    }
  }

  /** Cluster knowledge: ops up to `commit` committed in some view (see `commitCanonical`). */
  private advanceCommitMax(commit: number): void {
    if (commit > this.commitMax) this.commitMax = commit;
  }

  /** Ops up to `commit` committed, and our journal holds them as such (see `commitCanonical`). */
  private advanceCommitCanonical(commit: number): void {
    this.advanceCommitMax(commit);
    if (commit > this.commitCanonical) this.commitCanonical = commit;
  }

  /**
   * Applies committed ops in order while their prepares are in the journal. Stops at the first
   * gap (repair fills it) and before a checkpoint op while the previous checkpoint is still being
   * written (so every replica checkpoints at exactly the same ops).
   */
  private commitJournal(): void {
    // Every commit walk (Commit, StartView, DoViewChange, repair) is suppressed while transferring:
    // commit_min must not move under an install that is about to jump it (seed review, defect 5).
    if (this.stateTransfer.transferring) return;
    while (this.commitMin < this.commitCanonical) {
      const op = this.commitMin + 1;
      const entry = this.journal.prepare(op);
      if (entry === undefined) break;
      if (op % this.config.checkpointInterval === 0 && this.checkpointInProgress !== null) break;
      if (this.commitMinChecksum !== null && entry.header.parent !== this.commitMinChecksum) {
        // Our own history is broken: the journal says this op committed, yet it does not follow
        // what we applied. Applying on would spread the damage; skipping it would wedge us
        // silently. Stop, and let the operator rejoin this replica by state transfer.
        this.failStop('committed prepare does not chain onto the applied history', op);
      }
      this.apply(entry);
    }
    this.maybeCaughtUp();
    this.maybeAdoptLogView();
    if (this.status === 'normal' && this.isPrimary()) {
      let popped = false;
      while (this.pipeline.length > 0 && this.pipeline[0]!.op <= this.commitMin) {
        this.pipeline.shift();
        popped = true;
      }
      // The prepare timeout measures the oldest uncommitted prepare: progress restarts it (and
      // its backoff), so one slow round does not delay every retransmission after it.
      if (this.pipeline.length === 0) this.timeoutPrepare.stop();
      else if (popped) this.timeoutPrepare.start();
      this.promoteRequests();
    }
  }

  /**
   * A replica that booted from an empty data directory has caught up once, in a log view it
   * adopted, it durably holds every op up to the head that view announced: every prepare it
   * might have acknowledged before its disk was lost is at or below that head, so from here on
   * its nacks are truthful again.
   */
  private maybeCaughtUp(): void {
    if (!this.nackUnknown || this.catchUpTarget < 0) return;
    if (this.commitMin < this.catchUpTarget) {
      // Not applied that far: holding every op up to the head durably in the adopted log view
      // proves the same (the ops are canonical for the view and so not nackable).
      if (
        this.status !== 'normal' ||
        this.logView !== this.view ||
        this.stateTransfer.transferring
      ) {
        return;
      }
      for (let op = this.commitMin + 1; op <= this.catchUpTarget; op++) {
        if (this.journal.get(op)?.durable !== true) return;
      }
    }
    // Applied up to the head (by a transfer and repair, also while following a view whose log did
    // not fit the journal, and in any status): every op at or below it is committed and in our
    // state, so our DoViewChange claims it as committed and nacks only ops above it, which our
    // lost disk never held. Counting from here is what lets the survivors of a primary crash elect
    // a new one while this replica rejoins (audit defect D).
    this.nackUnknown = false;
    this.emit('info', 'caught_up_after_lost_disk', {
      commit_min: this.commitMin,
      head: this.catchUpTarget,
    });
    this.persistView();
  }

  /**
   * A lagging follower whose commit walk applied the head of the StartView it follows, and that
   * holds nothing above it: its journal is now the committed prefix of the view's log, so the log
   * view is its own, without waiting for a fresh StartView whose primary may die first (seed
   * 619636282819: the follower, a lost disk caught up by transfer, was starved of that StartView;
   * the primary then lost its disk, and the two survivors wedged: the one holding every committed
   * op claimed log view 0, and the merge took the other's older, shorter log view 3).
   * Claiming it is safe: every op it holds is committed, hence in every later log, and it never
   * acknowledged an op of the view above the head (a lagging follower takes no prepares), so the
   * merge's longest-log rule and its nacks stay truthful.
   */
  private maybeAdoptLogView(): void {
    const lagging = this.lagging;
    if (lagging === null || lagging.view !== this.view || this.status !== 'normal') return;
    if (this.stateTransfer.transferring || this.commitMin < lagging.head) return;
    if (this.journal.head > this.commitMin) return;
    this.lagging = null;
    // Adopted since by another path (a fresh StartView, or a transfer installed past the head).
    if (this.logView === this.view) return;
    assert(
      !this.isPrimary() && this.logView < this.view,
      'a lagging follower is a backup without the log view',
    );
    this.logView = this.view;
    this.reconciledView = this.view;
    this.viewHeaders.clear();
    this.emit('info', 'log_view_adopted', {
      view: this.view,
      commit_min: this.commitMin,
      head: lagging.head,
    });
    this.persistView();
  }

  private promoteRequests(): void {
    while (
      this.requestQueue.length > 0 &&
      this.pipeline.length < this.config.prepareQueueDepth &&
      this.roomForPrepare() &&
      this.primaryActive()
    ) {
      this.prepare(this.dequeueBatch());
    }
  }

  private apply(entry: JournalEntry): void {
    const header = entry.header;
    assert(header.op === this.commitMin + 1, 'ops apply in order');
    assert(entry.frame !== null, 'apply needs the body');
    assert(entry.checksum === header.checksum, 'a journal entry is its header');
    assert(!this.stateTransfer.transferring, 'no commit walk under an install');
    const anchor = this.commitMinChecksum;
    assert(anchor === null || header.parent === anchor, 'an applied op chains onto the last one');
    const body = entry.frame.subarray(HEADER_SIZE);
    switch (header.operation) {
      case Operation.register: {
        const payload = encodeRegisterPayload(header.userId, header.op);
        const reply = buildReply(this.env.kernels, header, resultBody(0, payload));
        const cached: CachedReply = { request: 0, commit: header.op, bytes: reply };
        const evicted = this.clientTable.commitRegister(header.client, header.userId, cached);
        if (evicted !== null) this.counters.clientTableEvictions += 1;
        if (evicted !== null) this.stateMachine.onClientRemoved(evicted, header.timestamp);
        this.applied(header, [{ header, body, reply: cached }]);
        break;
      }
      case Operation.logout: {
        const reply = buildReply(this.env.kernels, header, resultBody(0, new Uint8Array(0)));
        this.clientTable.remove(header.client);
        this.stateMachine.onClientRemoved(header.client, header.timestamp);
        const cached: CachedReply = { request: header.request, commit: header.op, bytes: reply };
        this.applied(header, [{ header, body, reply: cached }]);
        break;
      }
      case Operation.batch: {
        const batch = decodeBatch(body);
        // Validated before it was journaled (frame decode) and checksummed since: a batch that
        // does not decode now means our own history is damaged, as for a broken chain.
        if (!batch.ok) {
          this.failStop(`committed batch does not decode (${batch.reason})`, header.op);
        }
        // Each request applies as if it were its own prepare at this op: the prepare's op, view,
        // timestamp and identity with that request's client fields.
        const results = batch.requests.map((request) => {
          const view: PrepareHeader = {
            ...header,
            client: request.client,
            request: request.request,
            requestChecksum: request.requestChecksum,
            operation: request.operation,
            userId: request.userId,
          };
          return { header: view, body: request.body, reply: this.applyRequest(view, request.body) };
        });
        this.applied(header, results);
        break;
      }
      default:
        this.applied(header, [{ header, body, reply: this.applyRequest(header, body) }]);
        break;
    }
    if (header.op % this.config.checkpointInterval === 0) this.checkpoint(header);
  }

  /**
   * One plain request through the state machine; its reply is cached in the client table, built
   * into wire bytes only when something reads them (CommittedReply).
   */
  private applyRequest(header: PrepareHeader, body: Uint8Array): CachedReply {
    const result = this.stateMachine.apply({
      op: header.op,
      operation: header.operation,
      timestampUs: header.timestamp,
      userId: header.userId,
      clientId: header.client,
      body,
    });
    const reply = new CommittedReply(this.env.kernels, header, result.errorCode, result.payload);
    this.clientTable.commitReply(header.client, header.requestChecksum, reply);
    return reply;
  }

  /** Advances commit_min past an applied prepare, then reports and answers each of its requests. */
  private applied(
    prepare: PrepareHeader,
    results: readonly { header: PrepareHeader; body: Uint8Array; reply: CachedReply }[],
  ): void {
    assert(results.length >= 1, 'a prepare carries a request');
    this.commitMin = prepare.op;
    this.commitMinChecksum = prepare.checksum;
    this.timestampLast = Math.max(this.timestampLast, prepare.timestamp);
    const primary = this.status === 'normal' && this.isPrimary();
    results.forEach((result, index) => {
      assert(
        result.header.op === prepare.op && result.header.checksum === prepare.checksum,
        'a request applies at its prepare',
      );
      const position =
        results.length === 1 ? PLAIN_POSITION : { index, count: results.length };
      // A backup's reply stays unbuilt unless an observer (the simulator's checkers) reads it.
      this.onCommitted?.(result.header, result.body, result.reply.bytes, position);
      if (primary) this.env.bus.sendToClient(result.header.client, result.reply.bytes);
    });
  }

  /** Observer for the simulator's checkers (every checkpoint id, on every replica). */
  onCheckpoint: ((op: number, checksum: bigint) => void) | null = null;

  /**
   * Observer for the simulator's checkers (every applied request, on every replica). A batch
   * reports each of its requests in order, with the prepare's op and identity and `position`.
   */
  onCommitted: CommittedObserver | null = null;

  /**
   * Divergence of this replica's own history (STYLE principle 4): log it and stop. Disagreement
   * from a peer goes to `reportDivergence` instead (counted, logged, the message rejected).
   */
  private failStop(what: string, op: number): never {
    this.counters.divergences += 1;
    const fields = {
      op,
      view: this.view,
      log_view: this.logView,
      commit_min: this.commitMin,
      checkpoint_op: this.checkpointOp,
    };
    this.env.logger.log('fatal', `divergence in this replica's own history: ${what}`, fields);
    throw new DivergenceFailure(what, op);
  }

  private reportDivergence(what: string, op: number): void {
    this.counters.divergences += 1;
    this.env.logger.log('error', `divergence: ${what}`, {
      op,
      view: this.view,
      log_view: this.logView,
    });
  }

  // ---------------------------------------------------------------- checkpoints

  /**
   * A checkpoint at a deterministic op: snapshot durable -> superblock pairing durable -> WAL
   * drain keeping the entry at the checkpoint op. The order is load-bearing: a crash between any
   * two steps leaves a state recovery accepts (a snapshot newer than the superblock's pairing is
   * fine; a drained WAL without a durable snapshot would lose ops).
   */
  private checkpoint(header: PrepareHeader): void {
    assert(this.checkpointInProgress === null, 'commitJournal waits for the previous checkpoint');
    // The model is captured now and encoded when the storage executes the request (the node
    // driver: on a worker thread), while commits continue: nothing in it is written into by a
    // later op (the machine's snapshot contract; replies are immutable).
    const model: CheckpointModel<S> = {
      op: header.op,
      createdAtUs: header.timestamp,
      writerRelease: WRITER_RELEASE,
      clientTable: this.clientTable.toSnapshot(),
      machine: this.stateMachine.snapshot(),
    };
    this.checkpointInProgress = { op: header.op, anchor: header.checksum, written: null };
    const chunkSize = this.config.stateChunkSize;
    this.submit({ kind: 'checkpoint_write', op: header.op, model, chunkSize }, (result) => {
      if (!result.ok) this.fatal('checkpoint_write', result);
      const done = this.checkpointInProgress;
      // Requests complete in order and no checkpoint starts while transferring, so an install can
      // supersede this checkpoint only after this write completed.
      assert(
        done !== null && done.op === header.op && done.written === null,
        'one checkpoint at a time, superseded only once written',
      );
      const written = result.checkpoint;
      assert(written !== undefined, 'a checkpoint write returns what it wrote');
      // The id exists only now: the storage computed it with the offer's chunk sums in one pass
      // over the payload (no read-back on request).
      done.written = { checksum: written.checksum };
      this.checkpointIds.set(done.op, written.checksum);
      this.onCheckpoint?.(done.op, written.checksum);
      for (const op of [...this.checkpointIds.keys()]) {
        if (op < done.op - 8 * this.config.checkpointInterval) this.checkpointIds.delete(op);
      }
      this.checkpointOp = done.op;
      this.checkpointChecksum = written.checksum;
      this.checkpointAnchor = done.anchor;
      // What is offered is what was just written durably, and it hashes to the checkpoint id.
      this.transferServer.checkpointWritten(
        done.op,
        written.checksum,
        done.anchor,
        written.payload,
        written.chunkChecksums,
      );
      this.persistView();
    });
  }

  /** After the pairing is durable, drain the WAL below the checkpoint (keeping its entry). */
  private onSuperblockWritten(state: VsrState): void {
    const pending = this.checkpointInProgress;
    if (pending === null || state.checkpointOp !== pending.op) return;
    this.checkpointInProgress = null;
    this.journal.removeBelow(pending.op);
    this.submit({ kind: 'wal_drain', keepFromOp: pending.op }, (result) => {
      if (!result.ok) this.fatal('wal_drain', result);
    });
    // The pairing names `checkpointOp`, set only once the snapshot was written.
    assert(pending.written !== null, 'a checkpoint is paired only after its snapshot is written');
    const checksum = pending.written.checksum;
    this.counters.checkpoints += 1;
    this.checkpointInvariants(pending.op, checksum);
    this.emit('info', 'checkpoint_completed', {
      checkpoint_op: pending.op,
      checkpoint_id: checksum.toString(16),
    });
    this.commitJournal();
    if (this.primaryActive()) this.promoteRequests();
  }

  private checkCheckpointId(op: number, id: bigint, peer: number): void {
    if (op === 0 || id === 0n) return;
    const ours = this.checkpointIds.get(op);
    if (ours === undefined || ours === id) return;
    this.counters.divergences += 1;
    this.emit('error', 'checkpoint_divergence', {
      checkpoint_op: op,
      ours: ours.toString(16),
      theirs: id.toString(16),
      peer,
    });
  }

  // ---------------------------------------------------------------- heartbeats

  private becomePrimaryOfView(): void {
    this.timeoutNormalHeartbeat.stop();
    this.timeoutCommitMessage.start();
    if (this.pipeline.length > 0) this.timeoutPrepare.start();
  }

  private onTimeoutCommitMessage(): void {
    this.timeoutCommitMessage.reset();
    this.sendCommitHeartbeat();
  }

  private sendCommitHeartbeat(): void {
    if (!this.primaryActive()) return;
    this.heartbeatCounter += 1;
    this.send('peers', Command.commit, {
      commitChecksum: this.checkpointChecksum,
      timestampMonotonic: this.heartbeatCounter,
      commit: this.commitCanonical,
      checkpointOp: this.checkpointOp,
    });
  }

  private onCommit(header: CommitHeader): void {
    if (header.view > this.view) {
      this.onNewerView(header.view);
      return this.drop('newer_view', header);
    }
    if (header.view < this.view) {
      // A primary of an older view: tell it about ours.
      if (this.primaryActive()) this.sendStartView(header.replica, 0n);
      return this.drop('older_view', header);
    }
    const fromOurPrimary = header.replica === this.primaryIndex() && !this.isPrimary();
    if (this.status === 'view_change' && fromOurPrimary) {
      // The view we are changing to started without us (its StartView lost): its primary's
      // heartbeat says so. Ask that primary for the StartView instead of timing out into the next
      // view; an empty data directory that missed its new cluster's first StartView otherwise never
      // learns whether the cluster had history, and two such replicas of four leave no quorum able
      // to nack (seed 307435973307: 190 view changes).
      this.sendRequestStartView(header.replica);
      return this.drop('status_not_normal', header);
    }
    if (this.status !== 'normal') return this.drop('status_not_normal', header);
    if (this.isPrimary()) return this.drop('primary_of_view', header);
    if (header.replica !== this.primaryIndex()) return this.drop('sender_not_primary', header);
    // Only a strictly newer heartbeat proves the primary is alive (a replayed one does not).
    if (header.timestampMonotonic <= this.heartbeatLast) {
      return this.drop('heartbeat_stale', header);
    }
    assert(this.status === 'normal' && header.view === this.view, 'a heartbeat of our view');
    assert(!this.isPrimary() && header.replica === this.primaryIndex(), 'from our primary');
    assert(header.timestampMonotonic > this.heartbeatLast, 'a newer heartbeat');
    this.heartbeatLast = header.timestampMonotonic;
    this.primaryDisconnected = false;
    this.timeoutNormalHeartbeat.reset();
    this.checkCheckpointId(header.checkpointOp, header.commitChecksum, header.replica);
    // The primary holds this checkpoint durably too: ours is not the only copy any more.
    this.transferServer.peerHolds(header.checkpointOp, header.commitChecksum);
    this.sendCheckpointPing(header.replica);
    if (this.journalCanonicalForView()) this.advanceCommitCanonical(header.commit);
    else this.advanceCommitMax(header.commit);
    this.commitJournal();
    this.repairIfBehind();
  }

  /**
   * Answers our primary's heartbeat with the checkpoint we hold durably, so that the primary
   * learns it is not the only holder (and lets its payload go) and checks our checkpoint id. Not
   * under the serving rule regression seeds replay with: it released nothing and sent no pings.
   *
   * Once per checkpoint and view, then again only after a heartbeat interval (a lost ping is
   * resent): an idle primary announces each commit as a heartbeat, and a ping answering every one
   * doubled the messages of a lone writer (`bench cluster --clients 1`: 8 socket writes per write
   * instead of 6).
   */
  private sendCheckpointPing(primary: number): void {
    if (this.config.offerPayloadOnEveryReplica) return;
    assert(!this.isPrimary() && primary === this.primaryIndex(), 'a ping answers our primary');
    const last = this.pingLast;
    if (
      last !== null &&
      last.view === this.view &&
      last.checkpointOp === this.checkpointOp &&
      last.checkpointId === this.checkpointChecksum &&
      this.ticks - last.tick < this.config.timeouts.commitMessage
    ) {
      this.counters.pingsDeferred += 1;
      return;
    }
    this.pingLast = {
      view: this.view,
      checkpointOp: this.checkpointOp,
      checkpointId: this.checkpointChecksum,
      tick: this.ticks,
    };
    this.send(primary, Command.ping, {
      checkpointId: this.checkpointChecksum,
      checkpointOp: this.checkpointOp,
    });
  }

  /** A backup of our view holds a checkpoint durably (its answer to our heartbeat). */
  private onPing(header: PingHeader): void {
    if (header.view > this.view) {
      this.onNewerView(header.view);
      return this.drop('newer_view', header);
    }
    if (header.view < this.view) return this.drop('older_view', header);
    if (this.status !== 'normal') return this.drop('status_not_normal', header);
    if (!this.isPrimary()) return this.drop('not_primary', header);
    if (header.replica === this.config.replica) return this.drop('own_message', header);
    this.checkCheckpointId(header.checkpointOp, header.checkpointId, header.replica);
    this.transferServer.peerHolds(header.checkpointOp, header.checkpointId);
  }

  private onTimeoutNormalHeartbeat(): void {
    if (this.status !== 'normal' || this.isPrimary()) {
      this.timeoutNormalHeartbeat.stop();
      return;
    }
    const reason = this.primaryDisconnected ? 'primary_disconnected' : 'heartbeat_timeout';
    this.startViewChange(this.view + 1, reason);
  }

  /**
   * The node's connection to `replica` closed. When that is our primary, the heartbeat timeout is
   * cut to a short grace (config.ts `disconnectGraceTicks`): a primary killed or crashed closes
   * its sockets at once, and waiting out the whole timeout would only add to the failover. A
   * heartbeat in the grace (the connection came back) cancels it. Only liveness is at stake: a
   * needless view change is safe.
   */
  onPeerDisconnected(replica: number): void {
    assert(Number.isInteger(replica) && replica >= 0 && replica < this.config.replicaCount);
    if (replica === this.config.replica || replica !== this.primaryIndex()) return;
    if (this.status !== 'normal' || this.isPrimary()) return;
    if (!this.timeoutNormalHeartbeat.running) return;
    this.primaryDisconnected = true;
    this.timeoutNormalHeartbeat.expedite(disconnectGraceTicks(this.config.timeouts));
    this.emit('debug', 'primary_disconnected', {
      view: this.view,
      primary: replica,
      ticks_left: this.timeoutNormalHeartbeat.remaining,
    });
  }

  private onTimeoutPrepare(): void {
    if (!this.primaryActive() || this.pipeline.length === 0) {
      this.timeoutPrepare.stop();
      return;
    }
    assert(this.primaryActive() && this.pipeline.length > 0, 'a primary with prepares in flight');
    this.timeoutPrepare.backoff(this.env.prng);
    this.counters.prepareTimeouts += 1;
    // Retransmit to every replica that has not acknowledged.
    for (const entry of this.pipeline) {
      const journaled = this.journal.prepare(entry.op);
      if (journaled === undefined) continue;
      const frame = this.stamped(journaled);
      for (let replica = 0; replica < this.config.replicaCount; replica++) {
        if (replica === this.config.replica || entry.okFrom.has(replica)) continue;
        this.sendFrame(replica, frame);
      }
    }
  }

  /** The prepare re-stamped with the current view (its identity excludes the view). */
  private stamped(entry: JournalEntry): Uint8Array {
    assert(entry.frame !== null, 'stamp needs a body');
    if (entry.header.view === this.view) return entry.frame;
    const copy = entry.frame.slice();
    setPrepareView(copy, this.view);
    return copy;
  }

  // ---------------------------------------------------------------- send path

  /**
   * The one way a frame this replica builds reaches a peer: fills the header fields every frame
   * repeats (cluster, view, release, replica, group) and hands it to `sendFrame`, which asserts
   * persist-before-send. Callers keep their own guards (a send withheld until the view is durable
   * is sent by `onViewDurable`); the assertion makes a missing guard a crash, not a broken promise.
   */
  private send<C extends ReplicaSendCommand>(
    target: SendTarget,
    command: C,
    fields: SendFields<C>,
    body?: Uint8Array,
  ): void {
    this.sendFrame(target, this.frame(command, fields, body));
  }

  /** A frame of `command` from this replica in its current view (see `send`). */
  private frame<C extends ReplicaSendCommand>(
    command: C,
    fields: SendFields<C>,
    body?: Uint8Array,
  ): Uint8Array {
    const input = {
      command,
      cluster: this.config.cluster,
      view: this.view,
      release: 0,
      replica: this.config.replica,
      group: this.config.group,
      ...fields,
    } as unknown as HeaderInputOf<C>;
    return buildFrame<C>(this.env.kernels, input, body);
  }

  /**
   * Sends a sealed frame (built by `frame`, or a journaled prepare) to one peer or to every peer.
   * Every frame that advertises the view (VIEW_FENCE) passes `assertViewFence` first.
   */
  private sendFrame(target: SendTarget, frame: Uint8Array): void {
    const command = readCommand(frame);
    assert(isReplicaSendCommand(command), `send: command ${command} is not a replica command`);
    if (VIEW_FENCE[command]) this.assertViewFence(command, target, frame);
    if (target === 'peers') {
      for (let replica = 0; replica < this.config.replicaCount; replica++) {
        if (replica !== this.config.replica) this.env.bus.sendToReplica(replica, frame);
      }
      return;
    }
    assert(Number.isInteger(target), `send: target ${target} is a replica index`);
    assert(target >= 0 && target < this.config.replicaCount, `send: target ${target} in range`);
    this.env.bus.sendToReplica(target, frame);
  }

  /**
   * Persist-before-send (see VIEW_FENCE), and the state each view-advertising command is sent
   * from: a frame that breaks either is a bug in the caller's guard, never a network condition.
   */
  private assertViewFence(
    command: ReplicaSendCommand,
    target: SendTarget,
    frame: Uint8Array,
  ): void {
    assert(
      this.viewDurable(),
      `persist-before-send: command ${command} advertises view ${this.view} (log view ` +
        `${this.logView}) but the superblock holds view ${this.durableView} (log view ` +
        `${this.durableLogView})`,
    );
    assert(readU32(frame, HeaderOffset.view) === this.view, 'a fenced frame names our view');
    assert(target !== this.config.replica, 'a replica never sends itself a view-advertising frame');
    switch (command) {
      case Command.prepare:
      case Command.commit:
      case Command.startView:
        assert(this.primaryActive(), `command ${command}: only an active primary sends it`);
        break;
      case Command.prepareOk:
        assert(this.status === 'normal' && this.logView === this.view, 'PrepareOk: log view');
        assert(!this.isPrimary() && target === this.primaryIndex(), 'PrepareOk: to our primary');
        assert(!this.stateTransfer.transferring, 'PrepareOk: a transfer counts for nothing');
        break;
      case Command.startViewChange:
        assert(this.status === 'view_change' && target === 'peers', 'StartViewChange: to all');
        break;
      case Command.doViewChange:
        assert(this.status === 'view_change' && this.doViewChangeSent, 'DoViewChange: SVC quorum');
        assert(target === this.primaryIndex(), 'DoViewChange: to the primary of the new view');
        break;
      default:
        assert(false, `command ${command} is fenced but has no sender state`);
    }
  }

  private sendEviction(client: bigint, reason: EvictionReason): void {
    this.env.bus.sendToClient(
      client,
      buildEviction(this.env.kernels, {
        cluster: this.config.cluster,
        replica: this.config.replica,
        view: this.view,
        client,
        reason,
      }),
    );
  }

  // ---------------------------------------------------------------- view change

  /** A message from a newer view: ask that view's primary for its StartView (rate-limited). */
  private onNewerView(view: number): void {
    // `view` is ours when a lagging follower asks for a fresh StartView (see `repairIfBehind`).
    assert(view >= this.view, 'a probe asks for our view or a newer one');
    if (this.status === 'recovering' || this.timeoutRequestStartView.running) return;
    this.timeoutRequestStartView.start();
    this.sendRequestStartView(this.primaryIndex(view));
  }

  private startViewChange(view: number, reason: ViewChangeReason): void {
    assert(view > this.view, 'view changes move forward');
    this.emit('info', 'view_change_started', { from_view: this.view, to_view: view, reason });
    this.counters.viewChanges += 1;
    const byReason = this.counters.viewChangesByReason;
    byReason[reason] = (byReason[reason] ?? 0) + 1;
    this.view = view;
    this.status = 'view_change';
    this.startViewChangeFrom.clear();
    this.startViewChangeFrom.add(this.config.replica);
    this.doViewChanges.clear();
    this.doViewChangeSent = false;
    this.pendingView = null;
    this.pipeline = [];
    this.requestQueue = [];
    this.repair = null;
    for (const timeout of this.timeouts()) timeout.stop();
    this.timeoutStartViewChange.start();
    this.timeoutViewChangeStatus.start();
    this.persistView();
    this.sendStartViewChange();
    this.maybeSendDoViewChange();
    this.repairIfBehind(); // a lost disk catching up goes on (see `repairIfBehind`)
  }

  private sendStartViewChange(): void {
    if (this.status !== 'view_change' || !this.viewDurable()) return;
    this.send('peers', Command.startViewChange, {});
  }

  private onStartViewChange(header: StartViewChangeHeader): void {
    if (this.status === 'recovering') return this.drop('status_recovering', header);
    if (header.view > this.view) this.startViewChange(header.view, 'peer_start_view_change');
    if (header.view !== this.view) return this.drop('older_view', header);
    if (this.status !== 'view_change') return this.drop('status_not_view_change', header);
    assert(header.view === this.view && this.status === 'view_change', 'a vote for our view');
    assert(this.startViewChangeFrom.has(this.config.replica), 'our own vote counts from the start');
    this.startViewChangeFrom.add(header.replica);
    this.maybeSendDoViewChange();
  }

  private maybeSendDoViewChange(): void {
    if (this.doViewChangeSent) return;
    if (this.startViewChangeFrom.size < this.config.quorumViewChange) return;
    this.doViewChangeSent = true;
    this.timeoutDoViewChange.start();
    this.sendDoViewChange();
  }

  private onTimeoutStartViewChange(): void {
    if (this.status !== 'view_change') return this.timeoutStartViewChange.stop();
    this.timeoutStartViewChange.reset();
    this.sendStartViewChange();
  }

  private onTimeoutDoViewChange(): void {
    if (this.status !== 'view_change') return this.timeoutDoViewChange.stop();
    this.timeoutDoViewChange.reset();
    if (this.doViewChangeSent) this.sendDoViewChange();
  }

  private onTimeoutViewChangeStatus(): void {
    if (this.status !== 'view_change') return this.timeoutViewChangeStatus.stop();
    // Stuck (a dead primary-elect, an undecidable merge): escalate to the next view.
    this.startViewChange(this.view + 1, 'view_change_timeout');
  }

  /**
   * Our log as a DoViewChange suffix, high to low from `op`. Entries are canonical for our log
   * view (the journal invariant); a parked header without a body and a missing op are nacks: we
   * never durably held them, so we never acknowledged them.
   */
  private suffixSlots(): SuffixSlot[] {
    const slots: SuffixSlot[] = [];
    for (
      let op = this.op;
      op >= this.journal.floor && op > 0 && slots.length < DVC_SUFFIX_HEADERS_MAX;
      op--
    ) {
      const entry = this.journal.get(op);
      if (entry === undefined) {
        if (op <= this.commitMin) break;
        slots.push({ op, header: null, present: false, nack: true });
      } else {
        const present = entry.durable && entry.frame !== null;
        slots.push({ op, header: entry.header, present, nack: !present && op > this.commitMin });
      }
    }
    if (this.knowsNothing) return slots.map((slot) => ({ ...slot, nack: false }));
    return slots;
  }

  private sendDoViewChange(): void {
    if (this.status !== 'view_change' || !this.viewDurable()) return;
    const slots = this.suffixSlots();
    const record: DoViewChangeRecord = {
      replica: this.config.replica,
      logView: this.logView,
      nackUnknown: this.knowsNothing,
      op: this.op,
      // Our commit_max, even above our head: a later merge must never nack an op we know committed.
      commit: this.commitMax,
      applied: this.commitMin,
      suffix: slots,
    };
    if (this.primaryIndex() === this.config.replica) {
      this.onDoViewChangeRecord(record);
      return;
    }
    const { body, nack, present } = encodeSuffix(slots);
    const fields = {
      op: record.op,
      commit: record.commit,
      logView: this.logView,
      nackUnknown: this.knowsNothing ? 1 : 0,
      applied: record.applied,
      nackBitset: nack,
      presentBitset: present,
    };
    this.send(this.primaryIndex(), Command.doViewChange, fields, body);
  }

  private onDoViewChange(header: DoViewChangeHeader, body: Uint8Array): void {
    // A peer whose log view is 0 never acknowledged a prepare, as a peer probing from view 0
    // (seed 3507385961706: the view-0 probe of one peer was lost, and that peer's DoViewChanges
    // were the only word from it an empty replica heard before the cluster had history).
    if (this.pristine && header.logView === 0 && header.replica !== this.config.replica) {
      this.witnessVirginPeer(header.replica);
    }
    if (this.status === 'recovering') return this.drop('status_recovering', header);
    if (header.view > this.view) this.startViewChange(header.view, 'peer_do_view_change');
    if (header.view !== this.view) return this.drop('older_view', header);
    if (this.status !== 'view_change') return this.drop('status_not_view_change', header);
    if (!this.isPrimary()) return this.drop('not_primary', header);
    assert(header.view === this.view && this.status === 'view_change', 'a DVC for our view change');
    assert(this.primaryIndex() === this.config.replica, 'we are the primary-elect');
    const { nackBitset, presentBitset } = header;
    const cluster = this.config.cluster;
    const { kernels } = this.env;
    const suffix = decodeSuffix(kernels, cluster, body, header.op, nackBitset, presentBitset);
    if (suffix === null) return this.drop('suffix_invalid', header);
    this.onDoViewChangeRecord({
      replica: header.replica,
      logView: header.logView,
      nackUnknown: header.nackUnknown === 1,
      op: header.op,
      commit: header.commit,
      applied: header.applied,
      suffix,
    });
  }

  private onDoViewChangeRecord(record: DoViewChangeRecord): void {
    assert(this.status === 'view_change' && this.isPrimary(), 'only a primary-elect merges');
    assert(record.logView <= this.view, 'a DoViewChange names a log view below its view');
    const { replica, op } = record;
    const dvc = { command: Command.doViewChange, replica, view: this.view, op };
    if (this.pendingView !== null) return this.drop('view_merge_pending', dvc);
    this.doViewChanges.set(record.replica, record);
    // Our own DoViewChange is recorded once our view is durable; we merge only with it.
    if (!this.doViewChanges.has(this.config.replica)) {
      return this.drop('own_do_view_change_missing', dvc);
    }
    const { quorumViewChange, quorumNack } = this.config;
    const records = [...this.doViewChanges.values()];
    const outcome = mergeDoViewChanges(records, quorumViewChange, quorumNack);
    if (outcome.kind !== 'ready') return this.drop('merge_undecided', dvc);
    assert(this.doViewChanges.size >= quorumViewChange, 'a merge needs a view-change quorum');
    assert(outcome.head >= outcome.commitMax, 'the merged log keeps every committed op');
    assert(outcome.logView <= this.view, 'the merged log is of a view before this one');
    this.env.logger.log('info', 'view change merged', {
      view: this.view,
      head: outcome.head,
      commit_max: outcome.commitMax,
      dvcs: records.map(describeDoViewChange).join(' '),
    });
    if (!this.journal.hasRoom(outcome.head)) {
      // More than a WAL behind the merged log: we could not hold it, let alone lead with it.
      // Leave the journal and the log view untouched and let the next replica lead.
      this.env.logger.log('warn', 'primary-elect cannot hold the merged log; forfeiting the view', {
        view: this.view,
        head: outcome.head,
        floor: this.journal.floor,
      });
      this.startViewChange(this.view + 1, 'forfeit_cannot_hold_log');
      return;
    }
    const unvouched = () =>
      this.classifyJournal(outcome.headers, outcome.head, false, outcome.commitMax).keptBodies;
    if (this.logView !== outcome.logView && unvouched()) {
      // We hold bodies at or below the merged commit point that the merged log cannot vouch for
      // (its headers stop above them: its holders' journals start at a later checkpoint).
      // Adopting the merged log would drop them, and one may be a committed op's last copy but one
      // (as seed 3551023059979 showed on the StartView path). Keep them, let a replica of the
      // merged log view lead, and follow its StartView as a lagging replica.
      const message =
        'primary-elect holds committed bodies the merged log cannot vouch for; forfeiting the view';
      this.env.logger.log('warn', message, {
        view: this.view,
        commit_max: outcome.commitMax,
        commit_min: this.commitMin,
      });
      this.startViewChange(this.view + 1, 'forfeit_unvouched_bodies');
      return;
    }
    this.adoptMergedLog(outcome);
  }

  /** The primary-elect adopts the merged log and waits for its bodies (`tryStartPendingView`). */
  private adoptMergedLog(outcome: MergeReady): void {
    this.reconcileJournal(outcome.headers, outcome.head, this.logView === outcome.logView);
    const logViewChanged = outcome.logView > this.logView;
    if (logViewChanged) {
      // Our journal now holds the log of the canonical log view (truncated at the merged head), so
      // that is our log view: if this view never starts, our next DoViewChange must not claim the
      // older log view for entries that came from a newer one.
      this.logView = outcome.logView;
    }
    // The merged log's headers whose bodies we still lack are parked: persist them with the log
    // view, as a StartView's are, or a restart before their repair would claim that log view with
    // a shorter log, and a later merge in which we are its only holder would drop committed ops
    // (seed 1282654390171: op 86, committed in view 1, lost in view 4).
    this.noteViewHeaders(logViewChanged);
    if (logViewChanged || this.viewHeaders.size > 0) this.persistView();
    // The journal now agrees with the merged log: its commit number speaks of our journal.
    this.advanceCommitCanonical(outcome.commitMax);
    const { head, commitMax, sources } = outcome;
    this.pendingView = { head, commitMax, sources };
    this.commitJournal();
    this.tryStartPendingView();
  }

  /**
   * The walk of `reconcileJournal`, without acting on it: which entries a new log (`canonical`
   * headers, `head`) discards, the lowest unverifiable entry kept at or below
   * `keepUnverifiedThrough` (+Infinity: none), whether any kept one holds a body, and the parent
   * the lowest walked op expects of the applied history.
   */
  private classifyJournal(
    canonical: ReadonlyMap<number, PrepareHeader>,
    head: number,
    sameLogView: boolean,
    keepUnverifiedThrough: number,
  ): { discard: number[]; keptLowest: number; keptBodies: boolean; expected: bigint | null } {
    const discard: number[] = [];
    let expected: bigint | null = null;
    let keptLowest = Number.POSITIVE_INFINITY;
    let keptBodies = false;
    for (let op = Math.max(this.journal.head, head); op > this.commitMin; op--) {
      const header = canonical.get(op);
      const want = header?.checksum ?? expected;
      const entry = this.journal.get(op);
      if (op > head) {
        if (entry !== undefined) discard.push(op);
        expected = null;
        continue;
      }
      if (entry === undefined) {
        expected = header?.parent ?? null;
        continue;
      }
      if (want === null && !sameLogView && op <= keepUnverifiedThrough) {
        // Unverifiable, not divergent, our log view stays: kept (nothing below is verified by it).
        keptLowest = op;
        keptBodies ||= entry.frame !== null;
        expected = null;
        continue;
      }
      if (want === null ? !sameLogView : entry.checksum !== want) {
        discard.push(op);
        expected = header?.parent ?? null;
        continue;
      }
      expected = entry.header.parent;
    }
    return { discard, keptLowest, keptBodies, expected };
  }

  /**
   * Makes the journal canonical for a new log: `canonical` headers (keyed by op) and `head`.
   * Walking down from the top, each verified entry vouches for the one below through `parent`.
   * Every entry that is divergent, above the head, or unverifiable while our log came from another
   * log view is discarded; verified entries above it are kept (they match the canonical headers,
   * and may be a committed op's last copy). Then missing canonical headers are parked so their
   * bodies can be repaired and verified. Unverifiable entries at or below
   * `keepUnverifiedThrough` are kept instead (a lagging replica that keeps its log view); returns
   * the lowest kept one, or +Infinity when the journal was verified throughout.
   */
  private reconcileJournal(
    canonical: ReadonlyMap<number, PrepareHeader>,
    head: number,
    sameLogView: boolean,
    keepUnverifiedThrough = -1,
    parkCanonical = true,
  ): number {
    const { discard, keptLowest, expected } = this.classifyJournal(
      canonical,
      head,
      sameLogView,
      keepUnverifiedThrough,
    );
    if (
      expected !== null &&
      this.commitMinChecksum !== null &&
      expected !== this.commitMinChecksum
    ) {
      this.reportDivergence(
        'canonical log does not chain onto the applied history',
        this.commitMin,
      );
    }
    this.discardEntries(discard);
    // A lagging replica keeps its log view, and its journal holds only entries canonical for
    // that log view: the new log's headers it lacks are not parked, or its DoViewChange would
    // claim them for the older log view (seed 3161429547486: two DoViewChanges of log view 6 with
    // different ops 49-50, one of them view 8's). It catches up by committed repair instead.
    if (!parkCanonical) return keptLowest;
    for (const [op, header] of canonical) {
      if (op <= this.commitMin || op > head) continue;
      if (this.journal.get(op) !== undefined || !this.journal.hasRoom(op)) continue;
      this.journal.put({ op, header, checksum: header.checksum, frame: null, durable: false });
    }
    return keptLowest;
  }

  /** The primary-elect starts the view once every body of (commitMin, head] is durable. */
  private tryStartPendingView(): void {
    const pending = this.pendingView;
    if (pending === null || this.status !== 'view_change') return;
    // A replica pulling a checkpoint cannot lead: its commit walk is suspended. The view-change
    // timeout moves the cluster to the next primary.
    if (this.stateTransfer.transferring) return;
    if (this.op < pending.head || this.journal.missing(this.commitMin, pending.head).length > 0) {
      this.repairIfBehind();
      return;
    }
    for (let op = this.commitMin + 1; op <= pending.head; op++) {
      if (this.journal.get(op)?.durable !== true) return;
    }
    this.pendingView = null;
    this.status = 'normal';
    this.logView = this.view;
    this.viewHeaders.clear(); // the new primary holds every body of its log durably
    this.pristine = false;
    this.catchUpTarget = Math.max(this.catchUpTarget, pending.head);
    this.advanceCommitCanonical(pending.commitMax);
    this.repair = null;
    for (const timeout of this.timeouts()) timeout.stop();
    // Re-replicate the uncommitted suffix in the new view.
    this.pipeline = [];
    for (let op = Math.max(this.commitCanonical, this.commitMin) + 1; op <= this.op; op++) {
      const entry = this.journal.prepare(op);
      assert(
        entry !== undefined && entry.frame !== null,
        'the new primary holds every uncommitted body',
      );
      const clients = this.preparedClients(entry.header, entry.frame);
      this.pipeline.push({
        op,
        checksum: entry.checksum,
        header: entry.header,
        okFrom: new Set(),
        clients,
      });
    }
    this.emit('info', 'view_started', { view: this.view, op: this.op, commit_max: this.commitMax });
    this.becomePrimaryOfView();
    this.persistView();
    this.commitJournal();
  }

  private sendStartView(target: number | null, incarnation: bigint): void {
    if (!this.primaryActive()) return;
    const slots: SuffixSlot[] = [];
    const floor = Math.max(this.journal.floor, 1);
    for (let op = this.op; op >= floor && slots.length < DVC_SUFFIX_HEADERS_MAX; op--) {
      const entry = this.journal.get(op);
      if (entry === undefined) break;
      slots.push({ op, header: entry.header, present: true, nack: false });
    }
    assert(slots.length <= DVC_SUFFIX_HEADERS_MAX, 'a StartView suffix fits its bitsets');
    const { body } = encodeSuffix(slots);
    const commit = Math.min(this.commitCanonical, this.op);
    this.send(target ?? 'peers', Command.startView, { op: this.op, commit, incarnation }, body);
  }

  private onStartView(header: StartViewHeader, body: Uint8Array): void {
    if (header.replica !== this.primaryIndex(header.view)) {
      return this.drop('sender_not_primary', header);
    }
    if (header.replica === this.config.replica) return this.drop('own_message', header);
    if (header.view < this.view) return this.drop('older_view', header);
    // Its sender leads header.view and is not us: so when that is our view, we do not lead it.
    assert(header.view > this.view || !this.isPrimary(), 'a StartView of our view is not ours');
    if (this.status === 'recovering') {
      // Only a StartView that provably post-dates our crash: the answer to our probe, or a view
      // newer than any we knew.
      if (header.incarnation !== this.incarnation && header.view <= this.view) {
        return this.drop('start_view_before_restart', header);
      }
    } else if (
      header.view === this.view &&
      this.status === 'normal' &&
      this.logView === this.view &&
      header.op < this.op
    ) {
      // Within one log view our log only grows: a StartView announcing less is stale (delayed or
      // duplicated). Adopting it would truncate prepares we may already have acknowledged.
      return this.drop('start_view_stale', header);
    }
    const suffix = decodeSuffix(this.env.kernels, this.config.cluster, body, header.op, 0n, 0n);
    if (suffix === null) return this.drop('suffix_invalid', header);
    if (suffix.length === 0 && header.op > this.commitMin && header.op > header.commit) {
      return this.drop('start_view_suffix_empty', header);
    }
    assert(header.view >= this.view && header.replica !== this.config.replica, 'one to adopt');
    assert(suffix.every((slot) => slot.op <= header.op), 'the suffix stops at the announced head');
    // A transferring replica adopts a StartView exactly as any other: the install replaces only
    // what lies at or below its checkpoint, so the journal above it must follow the view's log
    // (reconciled, its canonical headers parked), and the heartbeat watermark must restart with
    // the new primary (audit defect C: the old primary's counter made every heartbeat of the new
    // one look stale, and the replica deposed a healthy primary). Its commit walk, PrepareOks and
    // repair stay suppressed by `transferring` alone.
    const lagging = this.adoptStartViewLog(header, suffix);
    this.leavePristine(header.op);
    // Caught up once everything this StartView announced is applied (prepares acknowledged before
    // a disk loss are all at or below its head).
    this.catchUpTarget = Math.max(this.catchUpTarget, header.op);
    this.followStartView(header, lagging);
  }

  /**
   * Reconciles the journal with a StartView's log (or, lagging, keeps what it cannot vouch for)
   * and advances the commit numbers. Returns whether the replica follows the view as a lagging
   * replica (without its log view).
   */
  private adoptStartViewLog(header: StartViewHeader, suffix: readonly SuffixSlot[]): boolean {
    const canonical = new Map<number, PrepareHeader>();
    for (const slot of suffix) if (slot.header !== null) canonical.set(slot.op, slot.header);
    // Journal entries are canonical for our log view, also after a restart: a StartView's
    // truncation is durable before the superblock that records its log view (requests complete
    // in order), so entries recovered from the WAL are canonical for the recovered log view.
    const sameLogView = this.logView === header.view;
    // A replica whose journal cannot hold the view's log (it is more than a WAL behind) follows the
    // view without adopting its log view: claiming log view v with a log that stops short of v's
    // commits would let it win a later view change with a truncated log (the VR Revisited flaw).
    // It catches up by committed repair (or state transfer) and asks for a fresh StartView then.
    const commit = Math.min(header.commit, header.op);
    // Likewise a replica holding bodies at or below the commit point that the StartView cannot
    // vouch for (below its suffix: the primary's journal starts at its checkpoint) while it
    // changes log view: such a body may be a committed op's last copy but one, and adopting the
    // log view would have to drop it (seed 3551023059979: op 44, dropped on adopting view 5, then
    // lost with the one other copy's disk). It follows as a lagging replica until committed
    // repair has applied past them, and adopts the log view from a fresh StartView then.
    const unvouched =
      !sameLogView && this.classifyJournal(canonical, header.op, false, commit).keptBodies;
    const lagging = !this.journal.hasRoom(header.op) || unvouched;
    // A lagging replica keeps its log view, so prepares of that log view the StartView cannot
    // vouch for (below its suffix) stay canonical for what it reports, and at or below the commit
    // point they may be a committed op's last copies but one: dropping them let a single lost disk
    // lose a committed op (seed 2644958924859). They are kept, and applied only once committed
    // repair proves them (see `repairIfBehind`).
    const keepUnverifiedThrough = lagging ? commit : -1;
    const parkCanonical = !lagging || sameLogView;
    const keptLowest = this.reconcileJournal(
      canonical,
      header.op,
      sameLogView,
      keepUnverifiedThrough,
      parkCanonical,
    );
    if (keptLowest === Number.POSITIVE_INFINITY) {
      this.reconciledView = header.view;
      // The journal agrees with this StartView's log now: its commit number speaks of our journal.
      this.advanceCommitCanonical(commit);
    } else {
      this.advanceCommitMax(commit);
    }
    return lagging;
  }

  /** The first StartView a pristine replica hears tells whether the cluster has history. */
  private leavePristine(headOp: number): void {
    if (this.pristine) {
      this.pristine = false;
      if (headOp > 0 && !this.nackUnknown) {
        // An empty replica joining a cluster that already has history: it may be a member whose
        // disk was lost, so it must not nack until it holds the log again (--rejoin makes this
        // explicit; this catches the common case without it).
        this.nackUnknown = true;
        const message =
          'empty data directory joining a cluster with history: treating it as a lost disk';
        this.env.logger.log('warn', message, { op: headOp });
      }
    }
  }

  /** Enters the StartView's view in status normal (lagging: without its log view). */
  private followStartView(header: StartViewHeader, lagging: boolean): void {
    const wasView = this.view;
    const wasStatus = this.status;
    this.view = header.view;
    if (!lagging) {
      const logViewChanged = this.logView !== header.view;
      this.logView = header.view;
      this.noteViewHeaders(logViewChanged);
    }
    this.lagging = lagging ? { view: header.view, head: header.op } : null;
    this.status = 'normal';
    this.pipeline = [];
    this.requestQueue = [];
    this.pendingView = null;
    this.repair = null;
    if (wasView !== header.view || wasStatus !== 'normal') {
      this.heartbeatLast = 0;
      const adopted = { from_view: wasView, view: this.view, op: header.op, commit: header.commit };
      this.emit('info', 'view_adopted', adopted);
    }
    for (const timeout of this.timeouts()) timeout.stop();
    this.primaryDisconnected = false;
    this.timeoutNormalHeartbeat.start();
    this.persistView();
    // Withheld by `sendPrepareOkFor` until the view is durable, then sent by `onViewDurable`.
    this.sendPrepareOks(this.commitCanonical, this.op);
    this.commitJournal();
    this.repairIfBehind();
  }

  // ---------------------------------------------------------------- rejoin probe

  private sendRequestStartView(target: SendTarget): void {
    this.send(target, Command.requestStartView, {
      incarnation: this.incarnation,
      recovering: this.status === 'recovering' ? 1 : 0,
    });
  }

  private onTimeoutRequestStartView(): void {
    if (this.status !== 'recovering') {
      // A refresh probe (newer view seen, or headers needed) went unanswered: allow another.
      this.timeoutRequestStartView.stop();
      return;
    }
    const { viewProbeAttemptsMax } = this.config;
    assert(this.status === 'recovering' && this.probeAttempts < viewProbeAttemptsMax, 'probing');
    this.probeAttempts += 1;
    if (this.probeAttempts >= this.config.viewProbeAttemptsMax) {
      // No live primary answered: a new cluster, or a full-cluster restart. Elect on what we have.
      this.electFromRecovery('probe_exhausted');
      return;
    }
    if (this.recoveringPeers.size + 1 >= this.config.quorumViewChange && this.view > 0) {
      // A probe round went unanswered by any live view, and a view-change quorum is recovering
      // with us: a primary alive in some view would have answered by now.
      this.electFromRecovery('peers_recovering');
      return;
    }
    // A fixed interval (no backoff): a new cluster waits only attempts x interval to elect.
    this.timeoutRequestStartView.reset();
    this.sendRequestStartView('peers');
  }

  /**
   * A recovering replica stops probing and elects. Timing is liveness only: the view change
   * decides from the DoViewChanges of a quorum whenever it starts, so electing early is as safe
   * as after the last probe. Electing while a live view exists costs a needless view change.
   */
  private electFromRecovery(reason: 'probe_exhausted' | 'peers_recovering'): void {
    assert(this.status === 'recovering', 'only a recovering replica elects from recovery');
    this.emit('info', 'election_from_recovery', {
      view: this.view,
      reason,
      probes: this.probeAttempts,
      recovering_peers: [...this.recoveringPeers].sort((a, b) => a - b).join(','),
    });
    this.recoveringPeers.clear();
    this.status = 'view_change';
    this.startViewChange(this.view + 1, reason);
  }

  private onRequestStartView(header: RequestStartViewHeader): void {
    if (header.replica === this.config.replica) return this.drop('own_message', header);
    assert(header.replica < this.config.replicaCount, 'a probe from a peer');
    if (this.pristine && header.view === 0) this.witnessVirginPeer(header.replica);
    const peerRecovering = header.recovering === 1 && header.view > 0;
    if (this.status === 'recovering' && peerRecovering && this.view > 0) {
      // A peer probing from its boot is no live view. When every peer is, none can answer us:
      // the whole cluster restarted, and waiting out the probes only delays the election. Only
      // replicas that joined a view before (view > 0) take the shortcut, and only count peers
      // that did: a new cluster keeps probing until its probes run out, because an empty data
      // directory proves itself a new member only by hearing every peer probe from view 0
      // (`witnessVirginPeer`), and a peer that stopped probing early would leave it claiming no
      // knowledge in every view change (seed 857305262310: two such replicas of four, no quorum).
      this.recoveringPeers.add(header.replica);
      assert(this.recoveringPeers.size < this.config.replicaCount, 'recovering peers are peers');
      if (this.recoveringPeers.size === this.config.replicaCount - 1) {
        this.electFromRecovery('peers_recovering');
        return;
      }
    }
    const blocker = this.primaryBlocker();
    if (blocker === null) {
      this.sendStartView(header.replica, header.incarnation);
      return;
    }
    // The primary of our view probing means it lost its state: elect a new one.
    const primaryProbing = header.replica === this.primaryIndex() && header.view === this.view;
    if (this.status !== 'normal') return this.drop('status_not_normal', header);
    if (!primaryProbing) return this.drop(blocker, header);
    assert(!this.isPrimary(), 'the probing primary is a peer');
    this.startViewChange(this.view + 1, 'primary_restarted');
  }

  /**
   * An empty data directory is a lost disk only if the cluster had history to lose. A commit
   * needs acknowledgements from `quorumReplication >= 2` replicas, each from a durable view of at
   * least 1 (views start at 1; prepares are acknowledged only once their view is durable). So when
   * every peer probes from a durable view 0, nothing was ever committed that this disk could have
   * held, and the replica is a new member, not a lost one: late starters of a new cluster are never
   * mistaken for lost disks (too many of those would leave no quorum able to nack). A probe may
   * also be an old one a peer queued while we were unreachable (the bus keeps a bounded queue per
   * peer across reconnects, in order), but a probe is a peer's first message after its boot, so if
   * every peer's view-0 probe was still queued, no peer had ever reached our earlier incarnation:
   * it received no prepare and acknowledged nothing. An explicit --rejoin is never overridden.
   */
  private witnessVirginPeer(peer: number): void {
    this.virginWitnesses.add(peer);
    if (this.virginWitnesses.size < this.config.replicaCount - 1) return;
    this.pristine = false;
    this.virginWitnesses.clear();
    this.env.logger.log(
      'info',
      'every peer reports a new cluster: the empty data directory lost nothing',
      {},
    );
  }

  // ---------------------------------------------------------------- journal repair

  /**
   * Two kinds of repair, both verified end to end so the serving peer need not be trusted:
   * - committed ops we lack are fetched bottom-up from a peer's APPLIED prepares (committed, so
   *   canonical) and accepted only if they chain onto our applied history;
   * - bodies of uncommitted ops whose canonical header we hold (parked from a StartView or a
   *   merge) are fetched top-down and accepted only if they match that header, or the `parent`
   *   of a canonical successor.
   * A chain check alone cannot vouch for an uncommitted prepare: a stale prepare from an older
   * view chains onto the same parent as the canonical one.
   */
  private repairIfBehind(): void {
    if (this.repair !== null || this.stateTransfer.transferring) return;
    const anchorless = this.status === 'normal' && this.headChecksum() === null;
    const idle = this.op === this.commitMin && this.commitMax === this.commitMin;
    if (anchorless && idle && this.commitMin > 0) {
      // After a state-transfer install whose servers did not know the anchor, with nothing
      // committed above it to learn it from (the next op's parent): fetch the prepare at our
      // commit point (a replica keeps the entry at its checkpoint op).
      const self = this.config.replica;
      const others = [...Array(this.config.replicaCount).keys()].filter((r) => r !== self);
      this.requestPrepares(this.env.prng.pick(others), this.commitMin, this.commitMin, true);
      return;
    }
    const primaryElect = this.status === 'view_change' && this.pendingView !== null;
    const primaryBehind =
      this.status === 'normal' && this.isPrimary() && this.commitMin < this.commitMax;
    // A lost disk in a view change counts toward its quorums only once it applied the head of the
    // StartView it adopted (`maybeCaughtUp`). Committed repair needs no view (the ops come from a
    // peer's applied history, verified by hash chain), so it catches up there too: otherwise a
    // primary dying while it rejoins leaves the survivors unable to elect (a wedge the commit
    // messages of a drained pipeline made reachable: the head it adopted lay above its checkpoint).
    const catchingUp =
      this.status === 'view_change' && this.nackUnknown && this.commitMin < this.catchUpTarget;
    if (catchingUp && !primaryElect) {
      const from = this.commitMin + 1;
      if (this.journal.prepare(from) !== undefined && this.commitCanonical > this.commitMin) return;
      const to = Math.min(this.catchUpTarget, this.commitMin + REPAIR_CHUNK_MAX);
      this.requestPrepares(this.repairPeer(from, true), from, to, true);
      return;
    }
    if (!primaryElect && !primaryBehind && (this.status !== 'normal' || this.isPrimary())) return;
    // The walk is blocked by a missing body, or by a body it may not apply (`commitCanonical`:
    // a prepare of our log view that nothing verified against the committed history).
    const nextPrepared = this.journal.prepare(this.commitMin + 1) !== undefined;
    const fenced = this.commitCanonical <= this.commitMin && nextPrepared;
    // A primary-elect's journal is canonical for the merged log up to its head, so each body it
    // lacks is vouched by its header or its successor's parent: it repairs them top-down below
    // (canonical repair). Committed-only repair would ask for ops some peer applied, and when
    // no live replica applied them (their holder lacks an op below), the view never started
    // (seed 4201942244488: op 19, held only by a replica stuck below it, 400 view changes).
    const committedWalk = !primaryElect || this.journal.get(this.commitMin + 1) !== undefined;
    const walkBlocked = !nextPrepared || fenced;
    if (committedWalk && this.commitMin < this.commitMax && walkBlocked) {
      const from = this.commitMin + 1;
      if (this.journal.get(from) !== undefined && !fenced) {
        // We hold the canonical headers (parked): any replica that journaled these prepares can
        // serve them, applied or not, since each body is verified against its header.
        let to = from;
        const parked = (op: number) => this.journal.get(op)?.frame === null;
        while (to + 1 < from + REPAIR_CHUNK_MAX && parked(to + 1)) to += 1;
        this.requestPrepares(this.repairPeer(to, false), from, to, false);
        return;
      }
      const to = Math.min(this.commitMax, this.commitMin + REPAIR_CHUNK_MAX);
      this.requestPrepares(this.repairPeer(from, true), from, to, true);
      return;
    }
    if (primaryBehind) return;
    if (!primaryElect && this.logView < this.view) {
      // A follower without the view's log: once caught up, ask for a fresh StartView to adopt it.
      if (this.commitMin === this.commitMax) this.onNewerView(this.view);
      return;
    }
    const head = primaryElect ? this.pendingView!.head : this.op;
    const missing = this.journal.missing(this.commitMin, head);
    if (missing.length === 0) return;
    const highest = missing[missing.length - 1]!;
    const from = Math.max(this.commitMin + 1, highest - REPAIR_CHUNK_MAX + 1);
    this.requestPrepares(this.repairPeer(highest, false), from, highest, false);
  }

  /** Consecutive repair rounds that made no progress (rotates the peer). */
  private repairStalls = 0;

  private repairPeer(op: number, committed: boolean): number {
    const others: number[] = [];
    for (let replica = 0; replica < this.config.replicaCount; replica++) {
      if (replica !== this.config.replica) others.push(replica);
    }
    if (this.status === 'normal' && this.isPrimary()) return this.env.prng.pick(others);
    if (this.status === 'normal') {
      // The primary first; after a stall, anyone (they may have applied what the primary drained).
      if (this.repairStalls === 0 && !this.isPrimary()) return this.primaryIndex();
      return this.env.prng.pick(others);
    }
    if (!committed) {
      const holders = this.pendingView?.sources.get(op) ?? [];
      const sources = holders.filter((replica) => replica !== this.config.replica);
      if (sources.length > 0) return this.env.prng.pick(sources);
    }
    // Committed ops: whoever reported the highest commit, then anyone after a stall.
    let peer = -1;
    let commit = -1;
    for (const record of this.doViewChanges.values()) {
      if (record.replica !== this.config.replica && record.commit > commit) {
        commit = record.commit;
        peer = record.replica;
      }
    }
    return peer >= 0 && this.repairStalls === 0 ? peer : this.env.prng.pick(others);
  }

  private requestPrepares(peer: number, fromOp: number, toOp: number, committed: boolean): void {
    assert(fromOp <= toOp && toOp - fromOp < REPAIR_CHUNK_MAX, 'a repair round is bounded');
    assert(peer !== this.config.replica, 'repair asks a peer');
    const nonce = this.env.prng.u128();
    this.repair = { nonce, peer, fromOp, toOp, committed, buffer: new Map(), progressed: false };
    this.counters.repairsRequested += 1;
    this.timeoutRepair.start();
    const committedOnly = committed ? 1 : 0;
    this.send(peer, Command.requestPrepares, { nonce, fromOp, toOp, committedOnly });
  }

  private onTimeoutRepair(): void {
    this.timeoutRepair.stop();
    if (this.repair !== null) this.repairStalls += 1;
    this.repair = null;
    if (this.status === 'view_change' && this.pendingView !== null) this.tryStartPendingView();
    else this.repairIfBehind();
  }

  private onRequestPrepares(header: RequestPreparesHeader): void {
    // A transferring replica still serves its journal: it may be the only holder of a prepare
    // its DoViewChange reported present, and a primary-elect that cannot fetch that body never
    // starts its view (audit defect A). Requesters verify every body they receive.
    if (this.status === 'recovering') return this.drop('status_recovering', header);
    let from = header.fromOp;
    // What we can serve starts at the journal floor, or just above it when the floor (our
    // checkpoint op) is held only as state: an installed checkpoint keeps no body for its own op.
    // Answering such a request with nothing made a lagging follower that needed exactly that op
    // retry forever (seed 2689289529624); an eviction sends it to state transfer instead.
    const floorServed = this.journal.prepare(this.journal.floor)?.durable === true;
    const retainedFrom =
      floorServed || this.journal.floor === 0 ? this.journal.floor : this.journal.floor + 1;
    if (from < retainedFrom) {
      // Below what we retain: only a checkpoint (state transfer) can cover it.
      this.send(header.replica, Command.rangeEvicted, { nonce: header.nonce, op: retainedFrom });
      from = retainedFrom;
    }
    // Committed-only requests get applied prepares alone: those are canonical. They are served
    // as one contiguous run, whose top the RepairDone names by checksum (the requester verifies
    // the run down from it); canonical requests get every durable prepare in the range.
    const committedOnly = header.committedOnly === 1;
    const limit = committedOnly ? this.commitMin : this.op;
    const ceiling = Math.min(header.toOp, limit, from + REPAIR_CHUNK_MAX - 1);
    assert(from >= retainedFrom && ceiling - from < REPAIR_CHUNK_MAX, 'a bounded range');
    let served = from - 1;
    let servedChecksum = 0n;
    for (let op = from; op <= ceiling; op++) {
      const entry = this.journal.prepare(op);
      if (entry === undefined || !entry.durable) {
        if (committedOnly) break;
        continue;
      }
      this.sendFrame(header.replica, withPrepareCommand(entry.frame!, Command.repairPrepare));
      served = op;
      servedChecksum = entry.checksum;
    }
    const op = Math.max(served, 0);
    this.send(header.replica, Command.repairDone, { nonce: header.nonce, op, servedChecksum });
  }

  private onRepairPrepare(header: RepairPrepareHeader, frame: Uint8Array): void {
    const session = this.repair;
    if (session === null) return this.drop('no_repair_session', header);
    if (header.op < session.fromOp || header.op > session.toOp) {
      return this.drop('repair_op_out_of_range', header);
    }
    const prepareFrame = withPrepareCommand(frame, Command.prepare);
    const decoded = decodeHeader(prepareFrame);
    if (!decoded.ok || decoded.header.command !== Command.prepare) {
      return this.drop('repair_prepare_invalid', header);
    }
    assert(decoded.header.checksum === header.checksum, 'switching the command keeps the identity');
    session.buffer.set(header.op, { header: decoded.header, frame: prepareFrame });
    assert(session.buffer.size <= session.toOp - session.fromOp + 1, 'the buffer holds the range');
    // A committed run waits for its RepairDone, which names its top by checksum: a repaired
    // prepare carries no session of its own, and one delayed from an earlier (canonical) session
    // can chain onto our applied history as well as the committed op at its place does (seed
    // 428996525595: a backup applied a view's truncated op 27 that way).
    if (!session.committed) this.drainCanonicalRepair(session);
  }

  /**
   * The committed run a RepairDone closes: the prepares that hash-chain down from the checksum it
   * names, from its top op to the bottom of the range. Any other buffered prepare (a late one of
   * an earlier session, or a run broken by one) is dropped; without the whole run down to the
   * next op we need, nothing applies and the stall retry asks again.
   */
  private verifyCommittedRun(session: RepairSession, top: number, topChecksum: bigint): void {
    let expected = topChecksum;
    const verified = new Set<number>();
    for (let op = top; op >= session.fromOp && topChecksum !== 0n; op--) {
      const received = session.buffer.get(op);
      if (received === undefined || received.header.checksum !== expected) break;
      verified.add(op);
      expected = received.header.parent;
    }
    for (const [op, received] of session.buffer) {
      if (verified.has(op)) continue;
      session.buffer.delete(op);
      this.drop('repair_not_in_served_run', received.header);
    }
  }

  /** Committed repair: accept the next op if it chains onto the applied history, then apply it. */
  private drainCommittedRepair(session: RepairSession): void {
    const anchor = session.buffer.get(this.commitMin);
    const anchorUnknown = this.commitMinChecksum === null;
    if (anchor !== undefined && anchorUnknown && this.journal.get(this.commitMin) === undefined) {
      // The prepare at our commit point, from a peer's applied history: our chain anchor.
      session.buffer.delete(this.commitMin);
      this.commitMinChecksum = anchor.header.checksum;
      if (this.commitMin === this.checkpointOp && this.checkpointAnchor === null) {
        this.checkpointAnchor = anchor.header.checksum;
        this.persistView();
      }
      session.progressed = true;
    }
    for (;;) {
      const op = this.commitMin + 1;
      const received = session.buffer.get(op);
      if (received === undefined) return;
      session.buffer.delete(op);
      const appliedChecksum = this.commitMinChecksum;
      const chained = appliedChecksum === null || received.header.parent === appliedChecksum;
      if (!chained) return this.drop('repair_not_chained', received.header);
      if (!this.journal.hasRoom(op)) return this.drop('journal_full', received.header);
      const existing = this.journal.get(op);
      const { header, frame } = received;
      if (existing !== undefined && existing.checksum !== header.checksum) this.truncateFrom(op);
      if (this.journal.prepare(op) === undefined) this.journalAppend(header, frame);
      assert(this.journal.prepare(op)?.checksum === received.header.checksum, 'now journaled');
      session.progressed = true;
      this.counters.preparesRepaired += 1;
      // A peer's applied prepare, chained onto our applied history: committed, and now ours.
      this.advanceCommitCanonical(op);
      const before = this.commitMin;
      this.commitJournal();
      if (this.commitMin === before) return; // blocked (a checkpoint in progress)
    }
  }

  /** Canonical repair: accept prepares a canonical header or successor vouches for, top-down. */
  private drainCanonicalRepair(session: RepairSession): void {
    let progress = true;
    while (progress) {
      progress = false;
      for (const op of [...session.buffer.keys()].sort((a, b) => b - a)) {
        const { header, frame } = session.buffer.get(op)!;
        if (op <= this.commitMin) {
          session.buffer.delete(op);
          continue;
        }
        const known = this.journal.get(op);
        const next = this.journal.get(op + 1);
        const vouched =
          known !== undefined
            ? known.checksum === header.checksum && known.frame === null
            : next !== undefined && next.header.parent === header.checksum;
        if (!vouched || !this.journal.hasRoom(op)) continue;
        session.buffer.delete(op);
        this.journalAppend(header, frame);
        session.progressed = true;
        this.counters.preparesRepaired += 1;
        progress = true;
      }
    }
  }

  private onRepairDone(header: RepairDoneHeader): void {
    const session = this.repair;
    if (session === null) return this.drop('no_repair_session', header);
    if (session.nonce !== header.nonce) return this.drop('repair_nonce_mismatch', header);
    if (session.committed) {
      this.verifyCommittedRun(session, header.op, header.servedChecksum);
      this.drainCommittedRepair(session);
    }
    this.repair = null;
    this.timeoutRepair.stop();
    this.repairStalls = session.progressed ? 0 : this.repairStalls + 1;
    this.commitJournal();
    if (this.status === 'view_change' && this.pendingView !== null) {
      this.tryStartPendingView();
      return;
    }
    if (session.progressed) this.repairIfBehind();
    // No progress: the stall retry runs repairIfBehind again (no spinning).
    else this.timeoutRepair.start();
  }

  private onRangeEvicted(header: RangeEvictedHeader): void {
    const session = this.repair;
    if (session === null) return this.drop('no_repair_session', header);
    if (session.nonce !== header.nonce) return this.drop('repair_nonce_mismatch', header);
    if (this.anchorEvicted(header)) {
      // Our chain anchor is the checksum of our checkpoint op's prepare, and this peer holds that
      // op only as state too: it cannot give us the parent of our next prepare. A primary without
      // it can admit nothing and would lead forever (seed 730075348166): a peer that knows its
      // anchor must lead instead.
      this.counters.rangeEvicted += 1;
      const message = 'primary without its checkpoint anchor; forfeiting the view';
      this.env.logger.log('warn', message, { view: this.view, checkpoint_op: this.checkpointOp });
      this.startViewChange(this.view + 1, 'forfeit_anchor_unknown');
      return;
    }
    // A late answer: we applied up to the peer's floor since we asked (from prepares that were
    // still in flight), so nothing we need lies below it any more.
    if (this.commitMin + 1 >= header.op) return this.drop('range_evicted_stale', header);
    assert(this.commitMin + 1 < header.op, 'the gap lies below the peer floor');
    this.counters.rangeEvicted += 1;
    if (this.leading()) {
      // A primary (or primary-elect) that cannot reach a committed op by repair forfeits the view.
      const message = 'primary-elect is behind a checkpoint; forfeiting the view';
      this.env.logger.log('warn', message, { view: this.view });
      this.startViewChange(this.view + 1, 'forfeit_behind_checkpoint');
      return;
    }
    this.env.logger.log('warn', 'repair range evicted: the gap lies below the peer checkpoint', {
      peer: header.replica,
      retained_from: header.op,
      commit_min: this.commitMin,
    });
    this.repair = null;
    this.timeoutRepair.stop();
    const backup = this.status === 'normal' && !this.isPrimary();
    if (backup && !this.stateTransfer.transferring) this.armStateTransfer();
  }

  /**
   * Whether `header` answers a leading replica's repair of its own checkpoint op, wanted only for
   * its checksum (the anchor), with a range that starts just above it.
   */
  private anchorEvicted(header: RangeEvictedHeader): boolean {
    return (
      this.leading() &&
      this.commitMinChecksum === null &&
      this.commitMin === this.checkpointOp &&
      this.journal.get(this.commitMin) === undefined &&
      header.op === this.commitMin + 1
    );
  }

  /** The primary of a normal view, or the primary-elect of the view being changed to. */
  private leading(): boolean {
    const primaryElect = this.status === 'view_change' && this.pendingView !== null;
    return primaryElect || (this.status === 'normal' && this.isPrimary());
  }

  // ---------------------------------------------------------------- state transfer: serving

  /** What the transfer server may see and do of this replica (read when used). */
  private transferServerHost(): TransferServerHost {
    const replica = this;
    return {
      config: this.config,
      kernels: this.env.kernels,
      logger: this.env.logger,
      counters: this.counters,
      get view() {
        return replica.view;
      },
      get commitMin() {
        return replica.commitMin;
      },
      get commitMax() {
        return replica.commitMax;
      },
      get checkpointOp() {
        return replica.checkpointOp;
      },
      get checkpointChecksum() {
        return replica.checkpointChecksum;
      },
      get readyToOffer() {
        return replica.status !== 'recovering' && !replica.stateTransfer.transferring;
      },
      anchorOf: (op) =>
        this.journal.get(op)?.checksum ??
        (op === this.commitMin ? this.commitMinChecksum : null) ??
        this.checkpointAnchor ??
        0n,
      sendTarget: (requester, fields, manifestBytes) =>
        this.send(requester, Command.stateTransferTarget, fields, manifestBytes),
      sendChunk: (requester, header, body) => this.sendToReplicaParts(requester, header, body),
      submit: (request, done) => this.submit(request, done),
      emit: (level, event, fields) => this.emit(level, event, fields),
      drop: (reason, header) => this.drop(reason, header),
      startSnapshotRepair: () => this.startSnapshotRepair(),
    };
  }

  /**
   * The machine's store ranges serve and fetch bytes its checkpoint names: committed and
   * immutable, so any status may serve; a machine without stores drops them.
   */
  private onStoreRangeFrame(
    header: RequestStoreRangeHeader | StoreRangeHeader,
    body: Uint8Array,
  ): void {
    const ranges = this.stateMachine.storeRanges;
    if (ranges === undefined) return this.drop('store_range_unsupported', header);
    if (header.replica === this.config.replica) return this.drop('own_message', header);
    if (header.command === Command.requestStoreRange) return ranges.onRequest(header);
    ranges.onRange(header, body);
  }

  private storeRangeHost(): StoreRangeHost {
    const replica = this.config.replica;
    return {
      replica,
      replicaCount: this.config.replicaCount,
      retryTicks: this.config.timeouts.repair,
      nonce: () => this.env.prng.u128() | 1n,
      sendRequest: (to, fields) => this.send(to, Command.requestStoreRange, fields),
      sendRange: (to, fields, body) => this.send(to, Command.storeRange, fields, body),
      drop: (reason, header) => this.drop(reason, header),
      emit: (level, event, fields) => this.emit(level, event, fields),
    };
  }

  /** A frame as header + body: the bus writes the body as is where it can, else joins them. */
  private sendToReplicaParts(replica: number, header: Uint8Array, body: Uint8Array): void {
    const bus = this.env.bus;
    if (bus.sendToReplicaParts !== undefined) {
      bus.sendToReplicaParts(replica, header, body);
      return;
    }
    const frame = new Uint8Array(header.byteLength + body.byteLength);
    frame.set(header, 0);
    frame.set(body, header.byteLength);
    bus.sendToReplica(replica, frame);
  }

  // ---------------------------------------------------------------- state transfer: receiving

  /**
   * Peers that must offer the same checkpoint id before we install it: two, so a single faulty
   * or lying replica cannot make us install wrong state (one in a two-replica cluster, where the
   * only peer is all there is). Deterministic checkpoints make the ids comparable.
   */
  private transferVouchQuorum(): number {
    return Math.min(2, this.config.replicaCount - 1);
  }

  /** Our gap lies below every peer's retained WAL: pull a checkpoint instead. */
  private armStateTransfer(): void {
    // One transfer file: a snapshot repair in progress yields (the install rewrites the file too).
    if (this.snapshotRepair.transferring) {
      this.endSnapshotRepair('a state transfer needs the transfer file');
    }
    const session = this.stateTransfer.arm(this.env.prng.u128(), this.ticks);
    this.counters.stateTransfersStarted += 1;
    this.emit('info', 'state_transfer_started', {
      commit_min: this.commitMin,
      commit_max: this.commitMax,
    });
    this.broadcastRequestStateTransfer(session);
  }

  private broadcastRequestStateTransfer(session: TransferSession): void {
    this.send('peers', Command.requestStateTransfer, { nonce: session.nonce });
  }

  private onStateTransferTarget(header: StateTransferTargetHeader, body: Uint8Array): void {
    const repair = this.snapshotRepair.session(header.nonce, 'awaiting_target');
    const session = repair ?? this.stateTransfer.session(header.nonce, 'awaiting_target');
    if (session === null) return this.drop('no_transfer_session', header);
    assert(session.nonce === header.nonce && session.accepted === null, 'awaiting a target');
    this.advanceCommitMax(header.commitMax);
    if (header.available === 0) {
      // The stall retry re-asks; others may offer. A refusal naming a checkpoint vouches for it.
      if (header.checkpointOp > 0 && repair === null) {
        const vouch = { op: header.checkpointOp, checksum: header.checkpointId };
        session.vouchers.set(header.replica, vouch);
        this.maybeAcceptTarget(session);
      }
      return this.drop('target_unavailable', header);
    }
    const decoded = decodeManifest(this.env.kernels, body);
    if (!decoded.ok) {
      const fields = { peer: header.replica, reason: decoded.reason };
      this.env.logger.log('warn', 'state transfer: undecodable manifest', fields);
      return this.drop('manifest_invalid', header);
    }
    const manifest = decoded.manifest;
    const entry = manifest.entries.find((each) => each.kind === ArtifactKind.metadataSnapshot);
    const chunks = entry === undefined ? -1 : chunkCount(entry.len, manifest.chunkSize);
    if (entry === undefined || entry.chunkChecksums.length !== chunks) {
      return this.drop('manifest_invalid', header);
    }
    if (entry.frontier !== header.checkpointOp || entry.checksum !== header.checkpointId) {
      const message = 'state transfer: offer header and manifest disagree on the checkpoint';
      this.env.logger.log('warn', message, { peer: header.replica });
      return this.drop('manifest_disagrees', header);
    }
    assert(header.available === 1 && entry.frontier === header.checkpointOp, 'an offer to weigh');
    if (repair !== null) {
      const { frontier, checksum } = entry;
      this.acceptSnapshotRepairTarget(repair, header.replica, frontier, checksum, manifest);
      return;
    }
    session.targets.set(header.replica, {
      op: entry.frontier,
      checksum: entry.checksum,
      commitMax: header.commitMax,
      anchor: header.checkpointAnchor,
      manifest: decoded.manifest,
    });
    this.maybeAcceptTarget(session);
  }

  /**
   * Accept the newest checkpoint whose id a quorum of peers vouches for. Deterministic
   * checkpoints make ids comparable, so one faulty or lying replica cannot make us install the
   * wrong state; any voucher can serve chunks, so a dead server is replaced without losing the
   * verified chunks.
   */
  private maybeAcceptTarget(session: TransferSession): void {
    // Degraded fallback: when no quorum holds a checkpoint for a while (the other replicas are
    // behind too), accept the current primary's offer alone. VSR already trusts the primary to
    // order every op, so this does not widen the trust a replica places in its peers; without it,
    // a cluster whose only copy of a checkpoint sits on the primary could never catch up.
    const primaryFallback = session.stalls >= 2 ? this.primaryIndex() : -1;
    const { best, divergentOps } = voteTarget(session, this.transferVouchQuorum(), primaryFallback);
    for (const op of divergentOps) {
      this.reportDivergence('peers offer different checkpoint ids for the same op', op);
    }
    if (best === null) return;
    const known = this.checkpointIds.get(best.op);
    if (known !== undefined && known !== best.checksum) {
      this.reportDivergence('a quorum offers a checkpoint id that differs from ours', best.op);
      return;
    }
    if (best.op <= this.commitMin) {
      // Never restore a snapshot over newer local state (seed review, defect 9): our state machine
      // and client table already contain everything this checkpoint does.
      this.emit('info', 'state_transfer_behind_frontier', {
        checkpoint_op: best.op,
        commit_min: this.commitMin,
      });
      this.stateTransfer.clear();
      this.timeoutRepair.start();
      return;
    }
    // Chunks come from the primary first when it offers: it holds the checkpoint's payload in
    // memory until a backup pings the same checkpoint (the transfer server's rule), and serves
    // views of it where a replica that let its payload go reads its file.
    const primary = this.config.offerPayloadOnEveryReplica ? -1 : this.primaryIndex();
    const servers = [...best.servers].sort((a, b) => Number(b === primary) - Number(a === primary));
    const target = session.targets.get(servers[0]!)!;
    const entry = target.manifest.entries.find(
      (candidate) => candidate.kind === ArtifactKind.metadataSnapshot,
    )!;
    this.stateTransfer.accept({
      op: best.op,
      checksum: best.checksum,
      manifest: target.manifest,
      entry,
      servers,
    });
    session.received = 0;
    session.requested = 0;
    session.written = 0;
    session.ahead.clear();
    session.idleTicks = 0;
    session.stalls = 0;
    this.emit('info', 'state_transfer_target_accepted', {
      checkpoint_op: best.op,
      bytes: entry.len,
      servers,
    });
    this.requestChunks(session);
  }

  /**
   * Keeps STATE_CHUNKS_IN_FLIGHT_MAX chunks requested ahead of the first missing byte, and at most
   * STATE_CHUNKS_UNWRITTEN_MAX ahead of the last written one. `retry` (a stall, a new server) also
   * re-requests every chunk of the window that has not arrived.
   */
  private requestChunks(session: TransferSession, retry = false): void {
    const accepted = session.accepted;
    assert(accepted !== null && session.received < accepted.entry.len, 'a chunk remains');
    assert(
      session.written <= session.received && session.received <= session.requested,
      'written <= received <= requested',
    );
    const chunkSize = accepted.manifest.chunkSize;
    if (retry) {
      for (let offset = session.received; offset < session.requested; offset += chunkSize) {
        if (!session.ahead.has(offset)) this.requestChunk(session, offset);
      }
    }
    const windowEnd = Math.min(
      accepted.entry.len,
      session.received + STATE_CHUNKS_IN_FLIGHT_MAX * chunkSize,
      session.written + STATE_CHUNKS_UNWRITTEN_MAX * chunkSize,
    );
    while (session.requested < windowEnd) {
      this.requestChunk(session, session.requested);
      session.requested = Math.min(accepted.entry.len, session.requested + chunkSize);
    }
  }

  private requestChunk(session: TransferSession, offset: number): void {
    const accepted = session.accepted!;
    this.send(session.peer, Command.requestStateChunk, {
      nonce: session.nonce,
      offset,
      len: Math.min(accepted.manifest.chunkSize, accepted.entry.len - offset),
      artifact: artifactIndex(accepted.manifest, accepted.entry),
    });
  }

  private onStateChunk(header: StateChunkHeader, body: Uint8Array): void {
    // Late chunks for a session that was dropped, or arriving in any other stage, are ignored.
    const repair = this.snapshotRepair.session(header.nonce, 'fetching');
    const session = repair ?? this.stateTransfer.session(header.nonce, 'fetching');
    if (session === null) return this.drop('no_transfer_session', header);
    const accepted = session.accepted;
    assert(accepted !== null, 'a fetching session has accepted a target');
    const artifact = artifactIndex(accepted.manifest, accepted.entry);
    if (header.artifact !== artifact) return this.drop('chunk_artifact_mismatch', header);
    const chunkSize = accepted.manifest.chunkSize;
    // Only a chunk we asked for and still miss: inside the window, on a chunk boundary, not held.
    const { offset } = header;
    if (offset < session.received || offset >= session.requested || offset % chunkSize !== 0) {
      return this.drop('chunk_outside_window', header);
    }
    if (session.ahead.has(offset)) return this.drop('chunk_duplicate', header);
    const expected = Math.min(chunkSize, accepted.entry.len - offset);
    // A zero-byte or short payload never counts as progress (seed review, defect 4).
    if (body.byteLength !== expected || expected === 0) {
      return this.drop('chunk_size_mismatch', header);
    }
    assert(session.received <= offset && offset < session.requested, 'a chunk inside the window');
    assert(session.requested <= accepted.entry.len && expected > 0, 'a window in the artifact');
    assert(session.ahead.size < STATE_CHUNKS_IN_FLIGHT_MAX, 'chunks held ahead fit the window');
    // A DecodedFrame's body was verified against `checksum_body`, the XXH3-64 (seed 0) of the
    // body, which is how the manifest sums each chunk: comparing the two is the chunk check,
    // without hashing 256 KiB a second time.
    if (header.checksumBody !== accepted.entry.chunkChecksums[header.offset / chunkSize]) {
      this.counters.stateChunksDamaged += 1;
      const message = 'state transfer: damaged chunk rejected; re-requesting';
      this.env.logger.log('warn', message, { offset: header.offset, peer: header.replica });
      this.requestChunk(session, header.offset);
      return this.drop('chunk_damaged', header);
    }
    session.idleTicks = 0;
    session.stalls = 0;
    // Verified chunks that overtook a missing one wait here (at most the window, 1 MiB): the
    // transfer file is written strictly in order. The body is a view of this message's frame,
    // kept without a copy until its write completes and never read after (the node layer then
    // reuses the frame for a later chunk).
    session.ahead.set(header.offset, body);
    const before = session.received;
    const next = (): Uint8Array | undefined => session.ahead.get(session.received);
    for (let chunk = next(); chunk !== undefined; chunk = next()) {
      session.ahead.delete(session.received);
      const bytes = chunk.byteLength;
      this.submit({ kind: 'transfer_write', offset: session.received, bytes: chunk }, (result) => {
        if (!result.ok) this.fatal('transfer_write', result);
        this.onTransferChunkWritten(session, bytes);
      });
      session.received += bytes;
    }
    if (session.received === before) return;
    const total = accepted.entry.len;
    const tenth = (bytes: number): number => Math.floor((bytes * 10) / total);
    if (repair === null && tenth(before) !== tenth(session.received)) {
      this.env.logger.log('info', 'state transfer progress', {
        checkpoint_op: accepted.op,
        bytes_done: session.received,
        bytes_total: total,
        percent: Math.floor((session.received * 100) / total),
      });
    }
    if (session.received < total) {
      this.requestChunks(session);
      return;
    }
    if (repair !== null) this.installSnapshotRepair(repair);
    else this.installTransferred(session);
  }

  /** A chunk is in the transfer file: requests held back by unwritten chunks may go out. */
  private onTransferChunkWritten(session: TransferSession, bytes: number): void {
    session.written += bytes;
    assert(session.written <= session.received, 'only submitted chunks complete');
    // Writes complete in order, also after the session ended or began its install: then nothing
    // more to ask.
    const live =
      this.snapshotRepair.session(session.nonce, 'fetching') ??
      this.stateTransfer.session(session.nonce, 'fetching');
    if (live !== session || session.received === session.accepted!.entry.len) return;
    this.requestChunks(session);
  }

  /** Every journal entry above commit_min is canonical for the current view. */
  private journalCanonicalForView(): boolean {
    return (
      this.status === 'normal' &&
      (this.logView === this.view || this.reconciledView === this.view)
    );
  }

  /**
   * Install order (load-bearing, §5.6): persist the snapshot (verified against the manifest and
   * the checkpoint id, then renamed into place), drop the journal below the checkpoint, restore
   * the state machine and the client table (at the configured capacity), jump the commit floor,
   * then write the superblock that pairs the new snapshot.
   *
   * The journal above the checkpoint is kept, whatever the status: it is canonical for our log
   * view, which the install does not change, and our DoViewChanges may already have reported
   * those entries present. Dropping one could erase the last copy of an acknowledged prepare
   * (audit defect A: the install truncated above the applied op during a view change; the next
   * merge counted our nack and committed a different op in its place). Keeping them is safe:
   * - view changes: the entries stay canonical for the log view we report, exactly as before the
   *   install, so every DoViewChange we send stays true and no nack of ours is a lie;
   * - commits: entries above the checkpoint are applied only up to `commitCanonical`, i.e. as far
   *   as a source our journal agrees with proved them committed; a stale branch of an older view
   *   (which may chain onto the same committed parent) is never applied on the strength of a
   *   newer view's commit number, and is reconciled away by that view's StartView;
   * - one exception: when the checkpoint's anchor is known and our entry at the checkpoint op is a
   *   different prepare, our log view's log left the committed history at or below it. That op
   *   committed in a later log view, whose replication quorum (log view >= that view) intersects
   *   every knowledgeable view-change quorum, so entries of our log view above it can never win a
   *   merge again: they are dropped, they could only ever mislead our own head.
   */
  private installTransferred(session: TransferSession): void {
    const accepted = session.accepted!;
    assert(accepted.op > this.commitMin, 'commit walks are suppressed while transferring');
    const ranges = this.stateMachine.storeRanges;
    if (ranges?.prepareInstall !== undefined && this.stateTransfer.stage === 'fetching') {
      return this.prepareTransferred(session, ranges.prepareInstall.bind(ranges));
    }
    this.stateTransfer.beginInstall();
    const startedAtTick = session.startedAtTick;
    const install = transferInstallRequest(accepted);
    this.submit(install, (result) => {
      if (this.stateTransfer.session(session.nonce, 'installing') === null) return;
      if (!result.ok || result.model === undefined) {
        this.installRefused(result.ok ? 'no snapshot' : result.error);
        return;
      }
      const installed = { model: result.model, payload: result.installedPayload };
      this.installAccepted(session, accepted, installed, startedAtTick);
    });
  }

  /**
   * Before the install: the machine fetches what the checkpoint names beyond it (a partition
   * group's messages below its next offsets), so that replacing the journal, which may hold this
   * replica's only copy of some of them, never leaves it holding less. The transfer file is
   * decoded (verified as for the install, nothing installed); `tickTransferPreparing` installs
   * once the machine is ready. Stalls are the machine's to handle meanwhile: it rotates peers.
   */
  private prepareTransferred(session: TransferSession, prepare: (machine: S) => void): void {
    const accepted = session.accepted!;
    this.stateTransfer.beginPreparing();
    const { op, checksum } = accepted;
    const decode = { kind: 'transfer_decode', op, len: accepted.entry.len, checksum } as const;
    this.submit(decode, (result) => {
      if (this.stateTransfer.session(session.nonce, 'preparing') === null) return;
      if (!result.ok || result.model === undefined) {
        this.installRefused(result.ok ? 'no snapshot' : result.error);
        return;
      }
      prepare(result.model.machine);
      this.transferPrepared = session.nonce;
      this.tickTransferPreparing();
    });
  }

  private tickTransferPreparing(): void {
    const nonce = this.transferPrepared;
    if (nonce === null) return;
    const session = this.stateTransfer.session(nonce, 'preparing');
    if (session === null) {
      this.transferPrepared = null;
      return;
    }
    if (this.stateMachine.storeRanges?.installReady !== true) return;
    this.transferPrepared = null;
    this.installTransferred(session);
  }

  /** The storage refused the artifact: fetch it again, or give up after too many. */
  private installRefused(error: string): void {
    this.stateTransfer.decodeFailures += 1;
    this.emit('warn', 'state_transfer_install_refused', {
      error,
      failures: this.stateTransfer.decodeFailures,
    });
    this.stateTransfer.clear();
    if (this.stateTransfer.decodeFailures <= STATE_TRANSFER_DECODE_FAILURES_MAX) {
      this.armStateTransfer();
    } else {
      this.abandonStateTransfer('too many damaged artifacts');
    }
  }

  /** The accepted checkpoint is durable: jump to it (see `installTransferred` for the journal). */
  private installAccepted(
    session: TransferSession,
    accepted: AcceptedTarget,
    installed: { model: CheckpointModel<S>; payload: Uint8Array | undefined },
    startedAtTick: number,
  ): void {
    const model = installed.model;
    assert(
      model.op === accepted.op,
      'the installed snapshot is the accepted checkpoint',
    );
    assert(accepted.op > this.commitMin, 'an install never rewinds');
    const atCheckpoint = this.journal.get(accepted.op);
    const anchor = this.installAnchor(session, accepted, atCheckpoint);
    if (anchor !== null && atCheckpoint !== undefined && atCheckpoint.checksum !== anchor) {
      this.env.logger.log(
        'info',
        'state transfer: the journal left the committed history at the checkpoint op; ' +
          'dropping it',
        {
          checkpoint_op: accepted.op,
          log_view: this.logView,
        },
      );
      this.truncateFrom(accepted.op);
    }
    this.journal.removeBelow(accepted.op);
    this.submit({ kind: 'wal_drain', keepFromOp: accepted.op }, (drained) => {
      if (!drained.ok) this.fatal('wal_drain', drained);
    });
    this.supersedeCheckpointInProgress(accepted.op);
    this.stateMachine.restore(model.machine);
    this.clientTable = ClientTable.fromSnapshot(
      model.clientTable,
      this.config.clientsTableMax,
      this.config.sessionsPerUserMax,
    );
    this.commitMin = accepted.op;
    this.commitMinChecksum = anchor;
    this.checkpointAnchor = anchor;
    this.advanceCommitCanonical(accepted.op);
    this.checkpointOp = accepted.op;
    this.checkpointChecksum = accepted.checksum;
    this.checkpointIds.set(accepted.op, accepted.checksum);
    // What we offer on now: the installed file, with the chunk sums it was received against.
    this.transferServer.checkpointReplaced(acceptedChunks(accepted), installed.payload);
    this.superblockStateTransfer = true;
    this.persistView();
    this.stateTransfer.clear();
    this.stateTransfer.decodeFailures = 0;
    this.counters.stateTransfersInstalled += 1;
    this.installInvariants(accepted.op, accepted.checksum);
    this.emit('info', 'state_transfer_installed', {
      checkpoint_op: accepted.op,
      bytes: accepted.entry.len,
      ticks: this.ticks - startedAtTick,
      peer: session.peer,
      journal_head: this.journal.head,
    });
    this.maybeCaughtUp();
    this.commitJournal();
    this.repairIfBehind();
  }

  /**
   * The chain anchor for the next op, from any voucher that knows it; else our own entry at the
   * checkpoint op if our log view proved it committed; else null (learned by repair).
   */
  private installAnchor(
    session: TransferSession,
    accepted: AcceptedTarget,
    atCheckpoint: JournalEntry | undefined,
  ): bigint | null {
    let anchor: bigint | null = null;
    for (const server of accepted.servers) {
      const target = session.targets.get(server);
      if (target !== undefined && target.anchor !== 0n) anchor = target.anchor;
    }
    if (anchor === null && atCheckpoint !== undefined && accepted.op <= this.commitCanonical) {
      anchor = atCheckpoint.checksum;
    }
    return anchor;
  }

  /**
   * A checkpoint of our own below the installed one may still wait for its superblock pairing
   * (its write failing and retried): the install supersedes it. Left in place, the pairing would
   * be written for the installed op, never for it, and the commit walk would stop at the next
   * checkpoint op for good (audit defect B).
   */
  private supersedeCheckpointInProgress(installedOp: number): void {
    const superseded = this.checkpointInProgress;
    if (superseded !== null) {
      assert(superseded.op < installedOp, 'a checkpoint in progress is below the installed one');
      this.checkpointInProgress = null;
      this.env.logger.log('info', 'state transfer supersedes the checkpoint in progress', {
        checkpoint_op: superseded.op,
        installed_op: installedOp,
      });
    }
  }

  private abandonStateTransfer(reason: string): void {
    this.emit('warn', 'state_transfer_abandoned', { reason });
    this.counters.stateTransfersAbandoned += 1;
    this.stateTransfer.clear();
    this.submit({ kind: 'transfer_discard' }, (result) => {
      // A leftover temp file is harmless (the next transfer truncates it), but say so.
      if (!result.ok) this.emit('warn', 'state_transfer_discard_failed', { error: result.error });
    });
    // The repair retry re-arms a transfer if the gap is still below every peer's floor.
    this.timeoutRepair.start();
  }

  /** Stalls re-ask (same nonce) or rotate the chunk server; too many abandon the session. */
  private tickStateTransfer(): void {
    const session = this.stateTransfer.sessionAny;
    const stage = this.stateTransfer.stage;
    if (session === null || (stage !== 'awaiting_target' && stage !== 'fetching')) return;
    session.idleTicks += 1;
    if (session.idleTicks < this.config.timeouts.repair) return;
    session.idleTicks = 0;
    session.stalls += 1;
    if (session.stalls > STATE_TRANSFER_STALLS_MAX) {
      this.abandonStateTransfer(`no progress after ${STATE_TRANSFER_STALLS_MAX} retries`);
      return;
    }
    if (stage === 'awaiting_target') {
      this.maybeAcceptTarget(session);
      if (this.stateTransfer.stage === 'awaiting_target') {
        this.broadcastRequestStateTransfer(session);
      }
      return;
    }
    const servers = session.accepted!.servers;
    session.peer = servers[(servers.indexOf(session.peer) + 1) % servers.length]!;
    this.requestChunks(session, true);
  }

  // ---------------------------------------------------------------- snapshot repair (serving side)

  /** Fetch our damaged snapshot file back from a peer (see `snapshotRepair`). */
  private startSnapshotRepair(): void {
    const damaged = this.transferServer.damaged;
    if (damaged === null || damaged.op !== this.checkpointOp || this.config.replicaCount === 1) {
      return;
    }
    if (this.snapshotRepair.transferring || this.stateTransfer.transferring) return;
    const session = this.snapshotRepair.arm(this.env.prng.u128(), this.ticks);
    this.env.logger.log('warn', 'snapshot repair started: our snapshot file does not verify', {
      checkpoint_op: damaged.op,
      cause: damaged.cause,
    });
    this.broadcastRequestStateTransfer(session);
  }

  /** Any peer serving exactly our checkpoint (op and id, which we know) will do: no vote needed. */
  private acceptSnapshotRepairTarget(
    session: TransferSession,
    server: number,
    op: number,
    checksum: bigint,
    manifest: Manifest,
  ): void {
    // Another checkpoint.
    if (op !== this.checkpointOp || checksum !== this.checkpointChecksum) return;
    const entry = manifest.entries.find(
      (candidate) => candidate.kind === ArtifactKind.metadataSnapshot,
    )!;
    this.snapshotRepair.accept({ op, checksum, manifest, entry, servers: [server] });
    session.idleTicks = 0;
    session.stalls = 0;
    this.requestChunks(session);
  }

  /**
   * Install the fetched copy as our snapshot file. Only while it is still our latest checkpoint
   * and no checkpoint of ours is being written: requests execute in order, so a later checkpoint's
   * snapshot write always lands after this rename, never under it.
   */
  private installSnapshotRepair(session: TransferSession): void {
    const accepted = session.accepted!;
    if (accepted.op !== this.checkpointOp || this.checkpointInProgress !== null) {
      this.endSnapshotRepair('a newer checkpoint rewrites the file');
      return;
    }
    this.snapshotRepair.beginInstall();
    const install = transferInstallRequest(accepted);
    this.submit(install, (result) => {
      if (this.snapshotRepair.session(session.nonce, 'installing') === null) return;
      this.snapshotRepair.clear();
      if (!result.ok) {
        this.env.logger.log('warn', 'snapshot repair: install refused', { error: result.error });
        return; // the next offer request retries
      }
      this.transferServer.snapshotRepaired(acceptedChunks(accepted), result.installedPayload);
      this.counters.snapshotRepairs += 1;
      this.env.logger.log('info', 'snapshot repaired from a peer', {
        checkpoint_op: accepted.op,
        peer: session.peer,
      });
    });
  }

  private endSnapshotRepair(reason: string): void {
    this.env.logger.log('info', 'snapshot repair ended', { reason });
    this.snapshotRepair.clear();
  }

  /** Stalls re-ask or re-request; too many end the repair (the next offer request restarts it). */
  private tickSnapshotRepair(): void {
    const session = this.snapshotRepair.sessionAny;
    const stage = this.snapshotRepair.stage;
    if (session === null || (stage !== 'awaiting_target' && stage !== 'fetching')) return;
    if (this.transferServer.damaged === null) {
      this.endSnapshotRepair('a newer checkpoint rewrote the file');
      return;
    }
    session.idleTicks += 1;
    if (session.idleTicks < this.config.timeouts.repair) return;
    session.idleTicks = 0;
    session.stalls += 1;
    if (session.stalls > STATE_TRANSFER_STALLS_MAX) {
      this.endSnapshotRepair(`no progress after ${STATE_TRANSFER_STALLS_MAX} retries`);
      return;
    }
    if (stage === 'awaiting_target') this.broadcastRequestStateTransfer(session);
    else this.requestChunks(session, true);
  }

  stateTransferProgress(): StateTransferProgress {
    const session = this.stateTransfer.sessionAny;
    const accepted = session?.accepted ?? null;
    return {
      stage: this.stateTransfer.stage,
      peer: session === null || session.peer < 0 ? null : session.peer,
      artifact: accepted === null ? null : 'metadata_snapshot',
      bytesDone: session?.received ?? 0,
      bytesTotal: accepted?.entry.len ?? 0,
      startedAtTick: session?.startedAtTick ?? 0,
      checkpointOp: accepted?.op ?? null,
    };
  }

  // ---------------------------------------------------------------- invariants

  private invariants(): void {
    this.roleInvariants();
    assert(
      this.commitMin <= this.commitMax,
      `commit_min ${this.commitMin} > commit_max ${this.commitMax}`,
    );
    assert(
      this.commitMin <= this.commitCanonical && this.commitCanonical <= this.commitMax,
      'commit_min <= commit_canonical <= commit_max',
    );
    assert(this.logView <= this.view, 'log_view <= view');
    assert(this.checkpointOp <= this.commitMin, 'checkpoint <= commit_min');
    assert(this.journal.floor <= this.commitMin, 'the journal floor is applied');
    assert(this.pipeline.length <= this.config.prepareQueueDepth, 'pipeline bounded');
    assert(this.requestQueue.length <= this.config.requestQueueDepth, 'request queue bounded');
    for (let index = 1; index < this.pipeline.length; index++) {
      assert(this.pipeline[index]!.op === this.pipeline[index - 1]!.op + 1, 'pipeline contiguous');
    }
  }

  /**
   * Right after an install: the replica stands exactly at the installed checkpoint (applied to it,
   * nothing of its own history below it, the id it verified recorded), so the commit walk resumes
   * from there and a later checkpoint's divergence check compares like with like.
   */
  private installInvariants(op: number, checksum: bigint): void {
    assert(
      this.commitMin === op && this.checkpointOp === op,
      'an install stands at its checkpoint',
    );
    assert(
      this.checkpointChecksum === checksum && this.checkpointIds.get(op) === checksum,
      'the installed id',
    );
    assert(this.journal.floor <= op, 'the journal floor is at or below the installed checkpoint');
    for (const journaled of this.journal.ops()) {
      assert(journaled >= op, 'nothing below the installed checkpoint');
    }
    assert(
      this.commitMinChecksum === this.checkpointAnchor,
      'the chain resumes at the checkpoint anchor',
    );
    assert(this.checkpointInProgress === null, 'an install supersedes a checkpoint in progress');
    this.invariants();
  }

  /**
   * Right after a checkpoint's superblock pairing: the journal starts at the checkpoint (its entry
   * kept as the chain anchor), and the id the checkpoint recorded is the one written.
   */
  private checkpointInvariants(op: number, checksum: bigint): void {
    assert(
      this.checkpointOp === op && this.checkpointChecksum === checksum,
      'the paired checkpoint',
    );
    assert(this.journal.floor === op, 'the journal floor is the checkpoint');
    for (const journaled of this.journal.ops()) {
      assert(journaled >= op, 'the WAL drained below the checkpoint');
    }
    assert(this.commitMin >= op, 'a checkpoint is applied');
    this.invariants();
  }

  /**
   * What each status and role holds, and the per-replica sets bounded by the replica count: a
   * handler that forgot to clear primary-only state on a view change would fail here first.
   */
  private roleInvariants(): void {
    const replicaCount = this.config.replicaCount;
    const { durableView, durableLogView } = this;
    assert(durableView <= this.view && durableLogView <= this.logView, 'durable <= current');
    if (this.pipeline.length > 0 || this.requestQueue.length > 0) {
      assert(this.status === 'normal' && this.isPrimary(), 'only a primary holds a pipeline');
    }
    if (this.pipeline.length > 0) {
      assert(this.pipeline[0]!.op > this.commitMin, 'the pipeline holds only unapplied prepares');
    }
    if (this.pendingView !== null) {
      assert(this.status === 'view_change' && this.isPrimary(), 'only a primary-elect merges');
    }
    if (this.status === 'view_change') {
      assert(this.startViewChangeFrom.has(this.config.replica), 'we vote for our own view change');
    }
    if (this.status === 'recovering') {
      assert(this.repair === null && this.pipeline.length === 0, 'a recovering replica probes');
    }
    assert(this.startViewChangeFrom.size <= replicaCount, 'one StartViewChange per replica');
    assert(this.doViewChanges.size <= replicaCount, 'one DoViewChange per replica');
    assert(this.recoveringPeers.size < replicaCount, 'recovering peers are peers');
    assert(this.virginWitnesses.size < replicaCount, 'witnesses are peers');
  }

  describe(): Record<string, unknown> {
    return {
      replica: this.config.replica,
      status: this.status,
      view: this.view,
      logView: this.logView,
      op: this.op,
      commitMin: this.commitMin,
      commitMax: this.commitMax,
      checkpointOp: this.checkpointOp,
      pipeline: this.pipeline.length,
      durableView: this.durableView,
    };
  }
}

/** A DoViewChange in a log line: `r<replica>:lv<log view>:op<head>:c<commit>:n<suffix length>`. */
function describeDoViewChange(dvc: DoViewChangeRecord): string {
  return `r${dvc.replica}:lv${dvc.logView}:op${dvc.op}:c${dvc.commit}:n${dvc.suffix.length}`;
}

function encodeViewHeaders(headers: readonly PrepareHeader[]): Uint8Array {
  const bytes = new Uint8Array(headers.length * HEADER_SIZE);
  headers.forEach((header, index) => encodeHeader(header, bytes, index * HEADER_SIZE));
  return bytes;
}

function artifactIndex(manifest: Manifest, entry: Manifest['entries'][number]): number {
  const index = manifest.entries.indexOf(entry);
  assert(index >= 0, 'the entry is in its manifest');
  return index;
}

export class StorageFailure extends Error {
  override readonly name = 'StorageFailure';
}

/**
 * This replica's own history diverged (fail-stop). Its data cannot be trusted: the remedy is to
 * wipe the data directory and restart with --rejoin, which rebuilds it from the cluster.
 */
export class DivergenceFailure extends Error {
  override readonly name = 'DivergenceFailure';
  readonly op: number;
  readonly what: string;

  constructor(what: string, op: number) {
    super(
      `divergence in this replica's own history at op ${op}: ${what}; ` +
        'wipe the data directory and restart with --rejoin',
    );
    this.what = what;
    this.op = op;
  }
}

/**
 * The state-transfer server: what a replica does when a peer pulls its latest checkpoint. It
 * builds one offer source per checkpoint (its id, manifest and chunk sums, computed where the
 * payload already passes: the checkpoint's encode, the boot's read, the receiver's install),
 * hands each requester an offer of it (first-wins per requester and nonce), serves its chunks,
 * ages idle offers out, and checks in the background that the file at rest still holds what it
 * offers.
 *
 * The payload stays in memory only while this replica may be the one replica holding the
 * checkpoint: from the checkpoint (or a boot) until a peer names the same checkpoint as durable
 * there (`peerHolds`): a backup hears it in its primary's heartbeat, a primary in a backup's ping
 * (the backup's answer to that heartbeat). While held, chunks
 * are views of it, and a snapshot file found rotten is rewritten from it (`snapshot_rewrite`):
 * a lone copy that rots at rest is never lost. Once released, each chunk is read from the
 * snapshot file and checked against the sum offered for it before it is sent; the storage keeps
 * the current checkpoint's file and the one it replaced open (SNAPSHOT_GENERATIONS_HELD), and a
 * file found rotten is fetched back from a peer, which by then holds the same checkpoint.
 *
 * Like the rest of the core it does no IO and reads no clock: the replica owns it, dispatches the
 * two request commands and the tick to it, and lends it a narrow host (its standing, its send
 * path, its storage queue, its drop counter). The receiving side stays in the replica.
 */
import { Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import type { ReplicaConfig } from './config.js';
import type { DropReason } from './drop-reason.js';
import type { ReplicaEvent } from './events.js';
import { buildFrameHeader } from './frame.js';
import type { RequestStateChunkHeader, RequestStateTransferHeader } from './header.js';
import type { LogLevel, Logger, StorageRequest, StorageResult } from './io.js';
import type { SendFields } from './send.js';
import {
  ArtifactKind,
  chunkCount,
  encodeManifest,
  type Manifest,
  type ManifestEntry,
} from './state-transfer.js';

/** The replica counters the server keeps (`ReplicaCounters` extends these). */
export interface TransferServerCounters {
  offersServed: number;
  offersRefused: number;
  /**
   * Offer sources built: once per checkpoint, when its snapshot write completes (from the payload
   * in memory), or on the first request after a boot or an install (from the payload they hold).
   */
  offerSourcesBuilt: number;
  /** Offer sources that had to be read back from the whole snapshot file (no sums known). */
  offerSourceReads: number;
  /** Checks that the snapshot file at rest still is the offered checkpoint (once per source). */
  offerSourceChecks: number;
  /** Chunks read from the snapshot file to serve a fetch. */
  chunkReads: number;
  /**
   * Offers withdrawn because their checkpoint's file is no longer held (two newer checkpoints
   * were written during the fetch): the requester restarts on the newest.
   */
  offersReleased: number;
  /** Payloads let go once a peer named the same checkpoint durable (`peerHolds`). */
  payloadsReleased: number;
  /** Rotten snapshot files rewritten from the payload held in memory. */
  snapshotsRewritten: number;
  /** Our snapshot file failed verification when an offer was built (it is repaired from a peer). */
  snapshotsDamaged: number;
}

/** Every server counter at zero (a replica's, or a test host's, starting values). */
export function zeroTransferServerCounters(): TransferServerCounters {
  return {
    offersServed: 0,
    offersRefused: 0,
    offerSourcesBuilt: 0,
    offerSourceReads: 0,
    offerSourceChecks: 0,
    chunkReads: 0,
    offersReleased: 0,
    payloadsReleased: 0,
    snapshotsRewritten: 0,
    snapshotsDamaged: 0,
  };
}

type TargetFields = SendFields<typeof Command.stateTransferTarget>;

/** What the server needs of its replica. Every property is read when used, never cached. */
export interface TransferServerHost {
  readonly config: ReplicaConfig;
  readonly kernels: Kernels;
  readonly logger: Logger;
  readonly counters: TransferServerCounters;
  /** The replica's view (a served chunk carries it as routing information). */
  readonly view: number;
  readonly commitMin: number;
  readonly commitMax: number;
  /** The latest durable checkpoint (snapshot written and paired in the superblock). */
  readonly checkpointOp: number;
  readonly checkpointChecksum: bigint;
  /** Not recovering and not pulling a checkpoint itself: it may offer one. */
  readonly readyToOffer: boolean;
  /** Identity of the prepare at `op` as the replica knows it now, 0n if unknown. */
  anchorOf(op: number): bigint;
  /** The replica's one send path, for StateTransferTarget (offers and refusals). */
  sendTarget(requester: number, fields: TargetFields, manifestBytes?: Uint8Array): void;
  /** A sealed StateChunk frame as header + body (the body is the bytes read for it). */
  sendChunk(requester: number, header: Uint8Array, body: Uint8Array): void;
  /**
   * Queues a storage request; `done` runs when it completes (in submission order). Serving reads
   * files, never a model: the requests carry no snapshot type.
   */
  submit(request: StorageRequest<never>, done: (result: StorageResult<unknown>) => void): void;
  emit(level: LogLevel, event: ReplicaEvent, fields?: Readonly<Record<string, unknown>>): void;
  /** The replica's `drop`: counts the reason and debug-logs it with the message. */
  drop(reason: DropReason, header: RequestStateTransferHeader | RequestStateChunkHeader): void;
  /** Fetch our damaged snapshot file back from a peer (the replica's snapshot repair). */
  startSnapshotRepair(): void;
}

/**
 * Chunk reads one offer may have in the storage queue: twice a receiver's window, so duplicated
 * or retried requests cannot queue reads without bound.
 */
export const CHUNK_READS_PER_OFFER_MAX = 8;

/**
 * Whole manifest chunks one offer reads from the file ahead of its receiver's requests (a
 * receiver's window): the chunk a request names is then usually read already, and the fetch does
 * not wait a storage turn per chunk. Bounded memory: at most this many chunks per offer.
 */
export const CHUNK_READ_AHEAD = 4;

/**
 * A checkpoint's chunk sums, computed where its payload passed: `chunkSums[i]` is the XXH3-64 of
 * chunk i at `chunkSize`, `checksum` of the whole payload (the checkpoint id).
 */
export interface CheckpointChunks {
  readonly op: number;
  readonly checksum: bigint;
  readonly len: number;
  readonly chunkSize: number;
  readonly chunkChecksums: readonly bigint[];
  /** The payload itself, while this replica may be its only holder (see the module comment). */
  payload: Uint8Array | null;
}

/**
 * A checkpoint offer, built once per checkpoint from the chunk sums of the payload whose hash is
 * the checkpoint id (the one just written durably, or verified when read at boot or installed).
 */
export interface OfferSource {
  readonly op: number;
  readonly checksum: bigint;
  /** Identity of the prepare at `op`, 0 if unknown. */
  readonly anchor: bigint;
  /**
   * The payload while this replica may be its only holder; null once a peer is known to hold the
   * checkpoint durably (chunks are then read from the snapshot file).
   */
  payload: Uint8Array | null;
  readonly manifest: Manifest;
  readonly manifestBytes: Uint8Array;
  /** The file at rest was checked against this source (`checkSourceAtRest`), or is being. */
  checkedAtRest: boolean;
  /** A rewrite of the file from the held payload is in flight. */
  rewriting: boolean;
}

/** A chunk request's range and the whole manifest chunks read to serve it. */
interface ChunkRead {
  readonly header: RequestStateChunkHeader;
  readonly entry: ManifestEntry;
  readonly chunkSize: number;
  /** The manifest chunks the range covers, first to last. */
  readonly first: number;
  readonly last: number;
  /** The bytes read: those chunks whole. */
  readonly readStart: number;
  readonly readEnd: number;
  /** The range's end (its start is the request's offset). */
  readonly end: number;
}

/** What one requester was offered: first-wins per (requester, nonce). */
interface Offer {
  readonly nonce: bigint;
  readonly source: OfferSource;
  readonly commitOp: number;
  readonly commitMax: number;
  idleTicks: number;
  finalServed: boolean;
  /** Chunk reads submitted for this offer and not completed (<= CHUNK_READS_PER_OFFER_MAX). */
  reads: number;
  /** Chunks read ahead of the receiver, by manifest chunk index (<= 2 * CHUNK_READ_AHEAD). */
  readonly ahead: Map<number, ReadAhead>;
}

/** A manifest chunk read ahead: its bytes once read, and the request waiting for them, if any. */
interface ReadAhead {
  bytes: Uint8Array | null;
  waiting: ChunkRead | null;
}

/** A snapshot file that failed verification for checkpoint `op`, and why. */
export interface SnapshotDamage {
  readonly op: number;
  readonly cause: string;
}

export class TransferServer {
  private readonly host: TransferServerHost;
  /** Offers by requester: at most one per peer (bounded by the replica count). */
  private readonly offers = new Map<number, Offer>();
  private offerSource: OfferSource | null = null;
  private offerLoading = false;
  /**
   * The chunk sums of the durable checkpoint when no offer source is built on them yet (computed
   * at boot, or received with an installed or repaired checkpoint): the first offer request builds
   * the source from them (its anchor is known by then) without reading the file.
   */
  private checkpointChunks: CheckpointChunks | null = null;
  /**
   * Our snapshot file for this checkpoint op failed to load: requests get a vouch for the id
   * instead of a re-read each time, and the replica's snapshot repair fetches the bytes back.
   */
  private offerSourceDamaged: SnapshotDamage | null = null;
  /** Requesters waiting for the offer source to load (bounded by the replica count). */
  private readonly offerWaiting = new Map<number, bigint>();

  constructor(host: TransferServerHost) {
    this.host = host;
  }

  /** The source offers are built on now (null until a checkpoint is offered). */
  get source(): OfferSource | null {
    return this.offerSource;
  }

  /** Our snapshot file's damage, while it is the latest checkpoint's and not repaired. */
  get damaged(): SnapshotDamage | null {
    return this.offerSourceDamaged;
  }

  /** Offers held now, by requester (for tests and invariants). */
  get offerCount(): number {
    return this.offers.size;
  }

  // ---------------------------------------------------------------- the replica's checkpoints

  /** A checkpoint's snapshot is durable: offer exactly what was written (it hashes to its id). */
  checkpointWritten(
    op: number,
    checksum: bigint,
    anchor: bigint,
    payload: Uint8Array,
    chunkChecksums: readonly bigint[],
  ): void {
    this.checkpointChunks = null;
    const chunks = { op, checksum, len: payload.byteLength, chunkChecksums, payload };
    this.offerSource = this.buildSource(chunks, anchor);
  }

  /**
   * Another replica holds checkpoint `op` (id `checksum`) durably (a backup's primary says so in
   * its heartbeat, a primary's backup in its ping): a lone copy of ours can no longer be the only
   * one, so the payload is let go and chunks are read from the file from now on.
   */
  peerHolds(op: number, checksum: bigint): void {
    if (this.host.config.offerPayloadOnEveryReplica) return;
    for (const held of [this.offerSource, this.checkpointChunks]) {
      if (held === null || held.op !== op || held.checksum !== checksum) continue;
      if (held.payload === null) continue;
      held.payload = null;
      this.host.counters.payloadsReleased += 1;
    }
  }

  /**
   * The checkpoint's file was replaced (a transfer installed, or our damaged file repaired): the
   * old source goes; `chunks` are the sums of the manifest the installed bytes were checked
   * against, when they are at our chunk size (else the first request reads the file). The payload
   * the storage handed back is not kept (the peers that served it hold the checkpoint), except
   * under the rule regression seeds replay with (`offerPayloadOnEveryReplica`).
   */
  checkpointReplaced(chunks: CheckpointChunks, installed: Uint8Array | undefined): void {
    const keeps = this.host.config.offerPayloadOnEveryReplica;
    const payload = keeps ? (installed ?? null) : null;
    this.offerSource = null;
    const ours = chunks.chunkSize === this.host.config.stateChunkSize;
    this.checkpointChunks = ours ? { ...chunks, payload } : null;
  }

  /** Our damaged snapshot file was rewritten from a peer's copy. */
  snapshotRepaired(chunks: CheckpointChunks, installed: Uint8Array | undefined): void {
    this.offerSourceDamaged = null;
    this.checkpointReplaced(chunks, installed);
  }

  /**
   * The payload recovery read at boot (its trailer verified): its chunk sums are computed now, in
   * one pass, and the payload is held until a peer is known to hold the checkpoint too.
   */
  bootPayload(op: number, checksum: bigint, payload: Uint8Array): void {
    assert(this.offerSource === null && this.offers.size === 0, 'boot: nothing offered yet');
    const chunkSize = this.host.config.stateChunkSize;
    const sums = this.host.kernels.chunkManifest(payload, chunkSize);
    assert(sums.checksum === checksum, 'the boot verified the payload against its trailer');
    const len = payload.byteLength;
    const chunkChecksums = [...sums.chunkChecksums];
    this.checkpointChunks = { op, checksum, len, chunkSize, chunkChecksums, payload };
  }

  // ---------------------------------------------------------------- handlers

  /**
   * A peer asks for our latest checkpoint. The offer is first-wins per (requester, nonce): a
   * retried request with the same nonce gets the same manifest, even if a newer checkpoint
   * landed, so a retry can never swap the manifest the receiver already accepted (seed review,
   * defect 4). The source (payload + manifest) is built once per checkpoint, when its snapshot
   * is written (or from the payload a boot or an install holds), so the offer goes out at once;
   * the file at rest is checked against it in the background, and damage found there withdraws
   * the offers (`checkSourceAtRest`). Only a replica holding no payload reads the file.
   */
  onRequestStateTransfer(header: RequestStateTransferHeader): void {
    const requester = header.replica;
    if (requester === this.host.config.replica) return this.host.drop('own_message', header);
    assert(requester < this.host.config.replicaCount, 'the transport checked the sender');
    const existing = this.offers.get(requester);
    if (existing !== undefined && existing.nonce === header.nonce) {
      this.sendOffer(requester, existing);
    } else {
      this.offerCheckpoint(header);
    }
  }

  /** A new session: offer our checkpoint, or refuse with the reason, or load the source first. */
  private offerCheckpoint(header: RequestStateTransferHeader): void {
    const host = this.host;
    // Nothing durable to offer (never checkpointed: repair can cover the gap), or not ready.
    if (!host.readyToOffer) return this.refuse(header, 'offer_not_ready', host.checkpointOp !== 0);
    if (host.checkpointOp === 0) return this.refuse(header, 'offer_no_checkpoint', false);
    if (this.offerSourceDamaged?.op === host.checkpointOp) {
      // We cannot serve the bytes, but the id is ours (computed when we took the checkpoint and
      // paired in the superblock): vouch for it so another server's copy can be accepted.
      this.refuse(header, 'offer_snapshot_damaged', true, true);
      return host.startSnapshotRepair();
    }
    const held = this.checkpointChunks;
    if (this.offerSource?.op !== host.checkpointOp && held?.op === host.checkpointOp) {
      this.checkpointChunks = null;
      assert(held.checksum === host.checkpointChecksum, 'the sums are the durable checkpoint\'s');
      this.offerSource = this.buildSource(held, host.anchorOf(held.op));
    }
    assert(host.readyToOffer && host.checkpointOp > 0, 'a durable checkpoint to offer');
    assert(this.offerSourceDamaged?.op !== host.checkpointOp, 'our file verifies, as far as known');
    if (this.offerSource !== null && this.offerSource.op === host.checkpointOp) {
      this.createOffer(header.replica, header.nonce, this.offerSource);
    } else {
      this.offerWaiting.set(header.replica, header.nonce);
      assert(this.offerWaiting.size < host.config.replicaCount, 'one waiting request per peer');
      this.loadSource();
    }
  }

  onRequestStateChunk(header: RequestStateChunkHeader): void {
    const offer = this.offers.get(header.replica);
    if (offer === undefined || offer.nonce !== header.nonce) {
      // We hold no offer for this session (expired, or we restarted): restart your session.
      return this.refuse(header, 'chunk_no_offer', true);
    }
    const entry = offer.source.manifest.entries[header.artifact];
    if (entry === undefined) return this.host.drop('chunk_artifact_unknown', header);
    // At or past the end: never answer with an empty chunk (seed review, defect 4).
    if (header.offset >= entry.len) return this.host.drop('chunk_past_end', header);
    const chunkSize = offer.source.manifest.chunkSize;
    const end = Math.min(entry.len, header.offset + header.len, header.offset + chunkSize);
    assert(offer.nonce === header.nonce && header.offset < entry.len, 'a chunk of the offer');
    assert(header.offset < end && end <= entry.len, 'a non-empty range in the entry');
    assert(end - header.offset <= chunkSize, 'at most one chunk');
    const held = offer.source.payload;
    if (held === null) return this.serveFromFile(offer, header, entry, end);
    offer.idleTicks = 0;
    if (end === entry.len) offer.finalServed = true;
    this.serveHeld(header, entry, held, end);
  }

  /**
   * A chunk of a released payload: the manifest chunks the range covers (one, for what a
   * receiver asks) are read from the file, or were read ahead, so each can be checked against the
   * sum offered for it before a byte of it is sent; the next ones are read ahead.
   */
  private serveFromFile(
    offer: Offer,
    header: RequestStateChunkHeader,
    entry: ManifestEntry,
    end: number,
  ): void {
    const chunkSize = offer.source.manifest.chunkSize;
    const first = Math.floor(header.offset / chunkSize);
    const last = Math.floor((end - 1) / chunkSize);
    const readStart = first * chunkSize;
    const readEnd = Math.min(entry.len, (last + 1) * chunkSize);
    const range: ChunkRead = { header, entry, chunkSize, first, last, readStart, readEnd, end };
    const ahead = first === last ? offer.ahead.get(first) : undefined;
    if (ahead === undefined && offer.reads >= CHUNK_READS_PER_OFFER_MAX) {
      return this.host.drop('chunk_reads_busy', header);
    }
    offer.idleTicks = 0;
    if (end === entry.len) offer.finalServed = true;
    if (ahead !== undefined && ahead.bytes !== null) {
      offer.ahead.delete(first);
      this.serveRead(offer.source, range, ahead.bytes);
    } else if (ahead !== undefined) {
      ahead.waiting = range;
    } else {
      this.readChunks(offer, header.replica, readStart, readEnd, (bytes) => {
        this.serveRead(offer.source, range, bytes);
      });
    }
    this.readAhead(offer, header.replica, entry, last);
  }

  /**
   * Reads `[start, end)` of the offer's checkpoint from the file and hands the bytes to `done`,
   * unless the offer was withdrawn or replaced meanwhile (its source failed, it expired, a new
   * session: the requester no longer waits for them) or the read failed (the source is then
   * unreadable, or no longer held).
   */
  private readChunks(
    offer: Offer,
    requester: number,
    start: number,
    end: number,
    done: (bytes: Uint8Array) => void,
  ): void {
    assert(offer.reads < CHUNK_READS_PER_OFFER_MAX, 'chunk reads per offer are bounded');
    const source = offer.source;
    offer.reads += 1;
    this.host.counters.chunkReads += 1;
    const request = {
      kind: 'snapshot_chunk_read',
      op: source.op,
      checksum: source.checksum,
      offset: start,
      len: end - start,
    } as const;
    this.host.submit(request, (result) => {
      offer.reads -= 1;
      if (this.offers.get(requester) !== offer) return;
      if (!result.ok) return this.sourceUnreadable(source, result.error);
      if (result.chunk === undefined) return this.sourceReleased(source);
      done(result.chunk);
    });
  }

  /**
   * Reads the manifest chunks after `last` (the receiver's next requests) ahead, up to
   * CHUNK_READ_AHEAD of them, within the offer's read budget; those behind it are dropped (the
   * receiver moved past them: they were served another way, or it re-asks and they are read).
   * A receiver that jumps back (re-asking a lost chunk) leaves at most 2 * CHUNK_READ_AHEAD.
   */
  private readAhead(offer: Offer, requester: number, entry: ManifestEntry, last: number): void {
    // Serving the chunk found the file rotten: the offer is withdrawn, nothing more is read.
    if (this.offers.get(requester) !== offer) return;
    for (const [index, ahead] of offer.ahead) {
      if (index <= last && ahead.waiting === null) offer.ahead.delete(index);
    }
    const chunkSize = offer.source.manifest.chunkSize;
    const through = Math.min(chunkCount(entry.len, chunkSize) - 1, last + CHUNK_READ_AHEAD);
    for (let index = last + 1; index <= through; index++) {
      if (offer.ahead.has(index)) continue;
      if (offer.reads >= CHUNK_READS_PER_OFFER_MAX) break;
      if (offer.ahead.size >= 2 * CHUNK_READ_AHEAD) break;
      const ahead: ReadAhead = { bytes: null, waiting: null };
      offer.ahead.set(index, ahead);
      const start = index * chunkSize;
      this.readChunks(offer, requester, start, Math.min(entry.len, start + chunkSize), (bytes) => {
        if (offer.ahead.get(index) !== ahead) return;
        if (ahead.waiting === null) {
          ahead.bytes = bytes;
          return;
        }
        offer.ahead.delete(index);
        this.serveRead(offer.source, ahead.waiting, bytes);
      });
    }
    assert(offer.ahead.size <= 2 * CHUNK_READ_AHEAD, 'reads ahead are bounded');
  }

  /**
   * A chunk of a payload held in memory: a view of it, never copied. A whole manifest chunk (all a
   * receiver asks for) has its sum in the manifest, taken from these same bytes at the
   * checkpoint, so its frame is sealed without hashing it again; any other range is hashed here.
   */
  private serveHeld(
    header: RequestStateChunkHeader,
    entry: ManifestEntry,
    payload: Uint8Array,
    end: number,
  ): void {
    const chunkSize = this.host.config.stateChunkSize;
    const wholeEnd = Math.min(entry.len, header.offset + chunkSize);
    const whole = header.offset % chunkSize === 0 && end === wholeEnd;
    const body = payload.subarray(header.offset, end);
    this.sendBody(header, body, whole ? entry.chunkChecksums[header.offset / chunkSize]! : null);
  }

  /** Seals `body` with `wholeSum` (a whole manifest chunk's sum) or its own hash, and sends it. */
  private sendBody(
    header: RequestStateChunkHeader,
    body: Uint8Array,
    wholeSum: bigint | null,
  ): void {
    const checksumBody = wholeSum ?? this.host.kernels.xxh3_64(body);
    const frameHeader = this.chunkHeader(header, body.byteLength, checksumBody);
    this.host.sendChunk(header.replica, frameHeader, body);
  }

  /** A chunk read completed: check each manifest chunk it covers, then send the range asked. */
  private serveRead(source: OfferSource, range: ChunkRead, bytes: Uint8Array): void {
    const { header, entry, chunkSize, first, last, readStart, readEnd, end } = range;
    assert(bytes.byteLength === readEnd - readStart, 'a chunk read returns what it was asked');
    for (let index = first; index <= last; index++) {
      const at = (index - first) * chunkSize;
      const piece = bytes.subarray(at, Math.min(bytes.byteLength, at + chunkSize));
      const actual = this.host.kernels.xxh3_64(piece);
      const expected = entry.chunkChecksums[index]!;
      if (actual !== expected) {
        const sums = `${actual.toString(16)}, its checkpoint's sum is ${expected.toString(16)}`;
        return this.sourceUnreadable(source, `chunk ${index} at rest hashes to ${sums}`);
      }
    }
    // A whole manifest chunk (all a receiver asks for) is sealed with the sum just checked; any
    // other range is hashed on its own.
    const body = bytes.subarray(header.offset - readStart, end - readStart);
    const whole = header.offset === readStart && end === readEnd && first === last;
    this.sendBody(header, body, whole ? entry.chunkChecksums[first]! : null);
  }

  private chunkHeader(
    request: RequestStateChunkHeader,
    size: number,
    checksum: bigint,
  ): Uint8Array {
    const host = this.host;
    const fields = {
      command: Command.stateChunk,
      cluster: host.config.cluster,
      view: host.view,
      release: 0,
      replica: host.config.replica,
      nonce: request.nonce,
      offset: request.offset,
      group: host.config.group,
      artifact: request.artifact,
    };
    return buildFrameHeader(host.kernels, fields, size, checksum);
  }

  // ---------------------------------------------------------------- offers

  private createOffer(requester: number, nonce: bigint, source: OfferSource): void {
    const { commitMin: commitOp, commitMax } = this.host;
    const offer: Offer = {
      nonce,
      source,
      commitOp,
      commitMax,
      idleTicks: 0,
      finalServed: false,
      reads: 0,
      ahead: new Map(),
    };
    this.offers.set(requester, offer);
    assert(this.offers.size < this.host.config.replicaCount, 'one offer per peer');
    this.host.counters.offersServed += 1;
    this.sendOffer(requester, offer);
  }

  private sendOffer(requester: number, offer: Offer): void {
    const source = offer.source;
    const fields: TargetFields = {
      nonce: offer.nonce,
      commitOp: offer.commitOp,
      available: 1,
      unavailableTransient: 0,
      commitMax: Math.max(offer.commitMax, offer.commitOp),
      checkpointAnchor: source.anchor,
      checkpointOp: source.op,
      checkpointId: source.op === 0 ? 0n : source.checksum,
    };
    this.host.sendTarget(requester, fields, source.manifestBytes);
  }

  /** A handler's refusal: answer the requester, then drop the request with the reason. */
  private refuse(
    header: RequestStateTransferHeader | RequestStateChunkHeader,
    reason: DropReason,
    transient: boolean,
    vouch = false,
  ): void {
    this.refuseTarget(header.replica, header.nonce, transient, vouch);
    return this.host.drop(reason, header);
  }

  /** A refusal; `vouch` names our durable checkpoint id (we hold it but cannot serve its bytes). */
  private refuseTarget(requester: number, nonce: bigint, transient: boolean, vouch = false): void {
    const host = this.host;
    host.counters.offersRefused += 1;
    const vouched = vouch && host.checkpointOp > 0;
    host.sendTarget(requester, {
      nonce,
      commitOp: 0,
      available: 0,
      unavailableTransient: transient ? 1 : 0,
      commitMax: host.commitMax,
      checkpointAnchor: 0n,
      checkpointOp: vouched ? host.checkpointOp : 0,
      checkpointId: vouched ? host.checkpointChecksum : 0n,
    });
  }

  // ---------------------------------------------------------------- the offer source

  /** Our snapshot file does not verify: vouch for its id from now on and fetch it back. */
  private sourceFailed(
    op: number,
    cause: string,
    waiting: readonly (readonly [number, bigint])[],
  ): void {
    this.host.counters.snapshotsDamaged += 1;
    this.offerSourceDamaged = { op, cause };
    for (const [requester, nonce] of waiting) this.refuseTarget(requester, nonce, true, true);
    this.host.startSnapshotRepair();
  }

  /**
   * The offer source of checkpoint `op` from a payload just read from the file. The payload must
   * hash to the checkpoint id; one that does not is refused like a damaged file. The payload is
   * not kept: only its chunk sums.
   */
  private sourceFromPayload(op: number, checksum: bigint, payload: Uint8Array): void {
    // One pass gives the chunk sums and the whole artifact's XXH3-64, which must be the
    // checkpoint id.
    const host = this.host;
    const chunks = host.kernels.chunkManifest(payload, host.config.stateChunkSize);
    if (chunks.checksum !== checksum) {
      const message = 'state transfer offer refused: snapshot does not match its checkpoint id';
      const actual = chunks.checksum.toString(16);
      const expected = checksum.toString(16);
      host.logger.log('error', message, { checkpoint_op: op, expected, actual });
      return this.sourceFailed(op, `payload hashes to ${actual}`, []);
    }
    const anchor = host.anchorOf(op);
    const chunkChecksums = [...chunks.chunkChecksums];
    const len = payload.byteLength;
    // Read back after a repair from a peer (which holds the checkpoint): not held.
    const chunksRead = { op, checksum, len, chunkChecksums, payload: null };
    this.offerSource = this.buildSource(chunksRead, anchor);
  }

  private buildSource(
    chunks: Omit<CheckpointChunks, 'chunkSize'>,
    anchor: bigint,
  ): OfferSource {
    const { op, checksum, len, chunkChecksums, payload } = chunks;
    const host = this.host;
    const chunkSize = host.config.stateChunkSize;
    const count = chunkCount(len, chunkSize);
    assert(chunkChecksums.length === count, 'one chunk sum per chunk');
    const kind = ArtifactKind.metadataSnapshot;
    const entry = { kind, frontier: op, len, checksum, chunkChecksums };
    const manifest: Manifest = { chunkSize, entries: [entry] };
    host.counters.offerSourcesBuilt += 1;
    host.emit('debug', 'offer_source_ready', { checkpoint_op: op, bytes: len });
    const manifestBytes = encodeManifest(host.kernels, manifest);
    const source = { op, checksum, anchor, payload, manifest, manifestBytes };
    return { ...source, checkedAtRest: false, rewriting: false };
  }

  /** The offers of `source` go; returns their (requester, nonce) to answer. */
  private withdraw(source: OfferSource): (readonly [number, bigint])[] {
    const withdrawn: (readonly [number, bigint])[] = [];
    for (const [requester, offer] of this.offers) {
      if (offer.source !== source) continue;
      this.offers.delete(requester);
      withdrawn.push([requester, offer.nonce]);
    }
    if (this.offerSource === source) this.offerSource = null;
    return withdrawn;
  }

  /**
   * `source`'s bytes at rest are unreadable or not what it offered: its offers are withdrawn. If
   * it is our durable checkpoint, we vouch for its id from now on and fetch the file back from a
   * peer; an older generation's requesters simply restart on the newest checkpoint.
   */
  private sourceUnreadable(source: OfferSource, cause: string): void {
    const heals = !this.host.config.offerPayloadOnEveryReplica;
    if (heals && source.payload !== null && source.op === this.host.checkpointOp) {
      return this.rewriteFromPayload(source, source.payload, cause);
    }
    const withdrawn = this.withdraw(source);
    const fields = { checkpoint_op: source.op, cause };
    this.host.emit('error', 'offer_refused_snapshot_unreadable', fields);
    if (source.op !== this.host.checkpointOp) {
      for (const [requester, nonce] of withdrawn) this.refuseTarget(requester, nonce, true);
      return;
    }
    this.sourceFailed(source.op, cause, withdrawn);
  }

  /**
   * Our file of the checkpoint we hold in memory rotted: rewrite it from the payload (which hashes
   * to the id: its sums were taken from it). Offers go on from memory meanwhile; nothing is
   * refused. A failed rewrite is a failed snapshot write: the source is refused as damaged, and
   * the file fetched back from a peer.
   */
  private rewriteFromPayload(source: OfferSource, payload: Uint8Array, cause: string): void {
    if (source.rewriting) return;
    source.rewriting = true;
    const host = this.host;
    host.emit('warn', 'snapshot_rewrite_started', { checkpoint_op: source.op, cause });
    const { op, checksum } = source;
    const request = { kind: 'snapshot_rewrite', op, checksum, payload } as const;
    host.submit(request, (result) => {
      source.rewriting = false;
      if (result.ok) {
        host.counters.snapshotsRewritten += 1;
        host.emit('info', 'snapshot_rewritten', { checkpoint_op: source.op });
        return;
      }
      // A newer checkpoint rewrote the file since: nothing left to heal.
      if (source.op !== host.checkpointOp) return;
      const withdrawn = this.withdraw(source);
      this.sourceFailed(source.op, `${cause}; rewriting it failed: ${result.error}`, withdrawn);
    });
  }

  /**
   * The storage no longer holds `source`'s checkpoint (two newer ones were written during the
   * fetch): its requesters are refused, transiently, and restart on the newest checkpoint.
   */
  private sourceReleased(source: OfferSource): void {
    if (source.op === this.host.checkpointOp) {
      // Our durable checkpoint's own file is not held: it cannot be read as offered.
      return this.sourceUnreadable(source, 'the snapshot file is not held for reading');
    }
    const withdrawn = this.withdraw(source);
    this.host.counters.offersReleased += withdrawn.length;
    const fields = { checkpoint_op: source.op, requesters: withdrawn.length };
    this.host.emit('info', 'offer_released', fields);
    for (const [requester, nonce] of withdrawn) this.refuseTarget(requester, nonce, true);
  }

  /** No payload in memory (a snapshot repaired from a peer): read the file, verify, build. */
  private loadSource(): void {
    if (this.offerLoading) return;
    this.offerLoading = true;
    const op = this.host.checkpointOp;
    const checksum = this.host.checkpointChecksum;
    this.host.counters.offerSourceReads += 1;
    this.host.submit({ kind: 'snapshot_read', op }, (result) => {
      this.offerLoading = false;
      const waiting = [...this.offerWaiting];
      this.offerWaiting.clear();
      if (!result.ok || result.payload === undefined) {
        const cause = result.ok ? 'no payload' : result.error;
        this.host.emit('error', 'offer_refused_snapshot_unreadable', { checkpoint_op: op, cause });
        this.sourceFailed(op, cause, waiting);
        return;
      }
      // A checkpoint written meanwhile built a newer source: keep it for later requests.
      const current = this.offerSource;
      const newer = current !== null && current.op > op ? current : null;
      this.sourceFromPayload(op, checksum, result.payload);
      const source = this.offerSource;
      if (newer !== null) this.offerSource = newer;
      if (this.offerSourceDamaged?.op === op) {
        for (const [requester, nonce] of waiting) this.refuseTarget(requester, nonce, true, true);
        return;
      }
      assert(source !== null && source.op === op, 'a verified payload builds its source');
      // Read and verified just now: no background check needed.
      source.checkedAtRest = true;
      for (const [requester, nonce] of waiting) this.createOffer(requester, nonce, source);
    });
  }

  /**
   * Once no fetch from a source is under way (`sourceIdle`), it checks, in the background, that
   * the snapshot file at rest still holds it: each chunk served is checked as it is read, but a
   * file that rotted where no fetch reads would refuse the next boot. Damage found withdraws
   * this source's offers with a vouch (their requesters take another server's copy) and fetches
   * the file back from a peer.
   */
  private checkSourceAtRest(source: OfferSource): void {
    if (source.checkedAtRest) return;
    source.checkedAtRest = true;
    this.host.counters.offerSourceChecks += 1;
    const request = { kind: 'snapshot_verify', op: source.op, checksum: source.checksum } as const;
    this.host.submit(request, (result) => {
      // A newer checkpoint rewrote the file since (requests run in order): nothing to repair.
      if (result.ok || source.op !== this.host.checkpointOp) return;
      this.sourceUnreadable(source, result.error);
    });
  }

  // ---------------------------------------------------------------- tick

  /** Offers expire when idle; the source stays (built once per checkpoint). */
  tick(): void {
    const repairTicks = this.host.config.timeouts.repair;
    const idleMax = 10 * repairTicks;
    for (const offer of this.offers.values()) offer.idleTicks += 1;
    for (const offer of this.offers.values()) {
      const source = offer.source;
      if (!source.checkedAtRest && this.sourceIdle(source)) this.checkSourceAtRest(source);
    }
    for (const [requester, offer] of this.offers) {
      const limit = offer.finalServed ? 3 * repairTicks : idleMax;
      if (offer.idleTicks >= limit) this.offers.delete(requester);
    }
    // A newer checkpoint rewrote the file: the damage, and any repair of it, is moot.
    const damaged = this.offerSourceDamaged;
    if (damaged !== null && damaged.op !== this.host.checkpointOp) this.offerSourceDamaged = null;
  }

  /**
   * No fetch from `source` is under way: each of its offers has served its final chunk, or has
   * not been asked for one in a repair interval (the receiver's stall timeout, after which it
   * re-asks or moves to another server). The check at rest reads and hashes the whole file on
   * this replica's only thread (~0.1 s the first time at 16 MiB); started after two idle ticks,
   * as it was, a receiver's 20 ms hiccup let it land mid-fetch and stall every chunk behind it.
   */
  private sourceIdle(source: OfferSource): boolean {
    const repairTicks = this.host.config.timeouts.repair;
    for (const offer of this.offers.values()) {
      const fetching = !offer.finalServed && offer.idleTicks < repairTicks;
      if (offer.source === source && fetching) return false;
    }
    return true;
  }
}

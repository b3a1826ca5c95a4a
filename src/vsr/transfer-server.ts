/**
 * The state-transfer server: what a replica does when a peer pulls its latest checkpoint. It
 * builds one offer source per checkpoint (the payload whose XXH3-64 is the checkpoint id, its
 * manifest and chunk sums), hands each requester an offer of it (first-wins per requester and
 * nonce), serves chunks from that payload, ages idle offers out, and checks in the background
 * that the snapshot file at rest still holds what it offers.
 *
 * Like the rest of the core it does no IO and reads no clock: the replica owns it, dispatches the
 * two request commands and the tick to it, and lends it a narrow host (its standing, its send
 * path, its storage queue, its drop counter). The receiving side stays in the replica.
 */
import { Command } from '../constants.js';
import type { Kernels } from '../kernels/kernel.js';
import { assert } from '../stdx/assert.js';
import { METADATA_GROUP, type ReplicaConfig } from './config.js';
import type { DropReason } from './drop-reason.js';
import type { ReplicaEvent } from './events.js';
import { buildFrameHeader } from './frame.js';
import type { RequestStateChunkHeader, RequestStateTransferHeader } from './header.js';
import type { LogLevel, Logger, StorageRequest, StorageResult } from './io.js';
import type { SendFields } from './send.js';
import { ArtifactKind, chunkCount, encodeManifest, type Manifest } from './state-transfer.js';

/** The replica counters the server keeps (`ReplicaCounters` extends these). */
export interface TransferServerCounters {
  offersServed: number;
  offersRefused: number;
  /**
   * Offer sources built: once per checkpoint, when its snapshot write completes (from the payload
   * in memory), or on the first request after a boot or an install (from the payload they hold).
   */
  offerSourcesBuilt: number;
  /** Offer sources that had to be read back from the snapshot file (no payload in memory). */
  offerSourceReads: number;
  /** Checks that the snapshot file at rest still is the offered checkpoint (once per source). */
  offerSourceChecks: number;
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
  /** A sealed StateChunk frame as header + body (the body is a view of the payload). */
  sendChunk(requester: number, header: Uint8Array, body: Uint8Array): void;
  /** Queues a storage request; `done` runs when it completes (in submission order). */
  submit(request: StorageRequest, done: (result: StorageResult) => void): void;
  emit(level: LogLevel, event: ReplicaEvent, fields?: Readonly<Record<string, unknown>>): void;
  /** The replica's `drop`: counts the reason and debug-logs it with the message. */
  drop(reason: DropReason, header: RequestStateTransferHeader | RequestStateChunkHeader): void;
  /** Fetch our damaged snapshot file back from a peer (the replica's snapshot repair). */
  startSnapshotRepair(): void;
}

/**
 * A checkpoint offer, built once per checkpoint from the payload whose hash is the checkpoint id
 * (the one just written durably, or verified when read at boot or installed).
 */
export interface OfferSource {
  readonly op: number;
  readonly checksum: bigint;
  /** Identity of the prepare at `op`, 0 if unknown. */
  readonly anchor: bigint;
  readonly payload: Uint8Array;
  readonly manifest: Manifest;
  readonly manifestBytes: Uint8Array;
  /** The file at rest was checked against this source (`checkSourceAtRest`), or is being. */
  checkedAtRest: boolean;
}

/** What one requester was offered: first-wins per (requester, nonce). */
interface Offer {
  readonly nonce: bigint;
  readonly source: OfferSource;
  readonly commitOp: number;
  readonly commitMax: number;
  idleTicks: number;
  finalServed: boolean;
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
   * The durable snapshot payload of the checkpoint when no offer source holds it yet (read at
   * boot, installed, or repaired): the first offer request builds the source from it without
   * reading the file. Null once the source holds it (one payload per replica).
   */
  private checkpointPayload: { readonly op: number; readonly payload: Uint8Array } | null = null;
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
    this.checkpointPayload = null;
    this.offerSource = this.buildSource(op, checksum, anchor, payload, chunkChecksums);
  }

  /**
   * The checkpoint's file was replaced (a transfer installed, or our damaged file repaired): the
   * old source goes, and the payload the storage handed back (if any) is what we offer on.
   */
  checkpointReplaced(op: number, payload: Uint8Array | undefined): void {
    this.offerSource = null;
    this.checkpointPayload = payload === undefined ? null : { op, payload };
  }

  /** Our damaged snapshot file was rewritten from a peer's copy. */
  snapshotRepaired(op: number, payload: Uint8Array | undefined): void {
    this.offerSourceDamaged = null;
    this.checkpointReplaced(op, payload);
  }

  /** The payload recovery read at boot (verified against the checkpoint id). */
  bootPayload(op: number, payload: Uint8Array): void {
    assert(this.offerSource === null && this.offers.size === 0, 'boot: nothing offered yet');
    this.checkpointPayload = { op, payload };
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
    const held = this.checkpointPayload;
    if (this.offerSource?.op !== host.checkpointOp && held?.op === host.checkpointOp) {
      this.checkpointPayload = null;
      this.sourceFromPayload(held.op, host.checkpointChecksum, held.payload);
      if (this.offerSourceDamaged?.op === held.op) {
        return this.refuse(header, 'offer_snapshot_damaged', true, true);
      }
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
    offer.idleTicks = 0;
    if (end === entry.len) offer.finalServed = true;
    // The body is a view of the payload, never copied. A whole manifest chunk (all a receiver
    // asks for) has its XXH3-64 in the manifest, summed from these same bytes at the checkpoint,
    // so its frame is sealed without hashing it again; any other range is hashed here.
    const body = offer.source.payload.subarray(header.offset, end);
    const wholeEnd = Math.min(entry.len, header.offset + chunkSize);
    const wholeChunk = header.offset % chunkSize === 0 && end === wholeEnd;
    const checksumBody = wholeChunk
      ? entry.chunkChecksums[header.offset / chunkSize]!
      : this.host.kernels.xxh3_64(body);
    const frameHeader = this.chunkHeader(header, body.byteLength, checksumBody);
    this.host.sendChunk(header.replica, frameHeader, body);
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
      group: METADATA_GROUP,
      artifact: request.artifact,
    };
    return buildFrameHeader(host.kernels, fields, size, checksum);
  }

  // ---------------------------------------------------------------- offers

  private createOffer(requester: number, nonce: bigint, source: OfferSource): void {
    const { commitMin: commitOp, commitMax } = this.host;
    const offer: Offer = { nonce, source, commitOp, commitMax, idleTicks: 0, finalServed: false };
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
   * The offer source of checkpoint `op` from a payload held in memory. The payload must hash to
   * the checkpoint id; one that does not is refused like a damaged file.
   */
  private sourceFromPayload(op: number, checksum: bigint, payload: Uint8Array): void {
    // One pass gives the chunk sums and the whole artifact's XXH3-64, which must be the
    // checkpoint id.
    const host = this.host;
    const chunks = host.kernels.chunkManifest(payload, host.config.stateChunkSize);
    if (chunks.checksum !== checksum) {
      const message = 'state transfer offer refused: snapshot does not match its checkpoint id';
      host.logger.log('error', message, {
        checkpoint_op: op,
        expected: checksum.toString(16),
        actual: chunks.checksum.toString(16),
      });
      this.sourceFailed(op, `payload hashes to ${chunks.checksum.toString(16)}`, []);
      return;
    }
    const anchor = host.anchorOf(op);
    this.offerSource = this.buildSource(op, checksum, anchor, payload, [...chunks.chunkChecksums]);
  }

  private buildSource(
    op: number,
    checksum: bigint,
    anchor: bigint,
    payload: Uint8Array,
    chunkChecksums: readonly bigint[],
  ): OfferSource {
    const host = this.host;
    const chunkSize = host.config.stateChunkSize;
    const count = chunkCount(payload.byteLength, chunkSize);
    assert(chunkChecksums.length === count, 'one chunk sum per chunk');
    const entry = {
      kind: ArtifactKind.metadataSnapshot,
      frontier: op,
      len: payload.byteLength,
      checksum,
      chunkChecksums,
    };
    const manifest: Manifest = { chunkSize, entries: [entry] };
    host.counters.offerSourcesBuilt += 1;
    host.emit('debug', 'offer_source_ready', { checkpoint_op: op, bytes: payload.byteLength });
    const manifestBytes = encodeManifest(host.kernels, manifest);
    return { op, checksum, anchor, payload, manifest, manifestBytes, checkedAtRest: false };
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
   * the snapshot file at rest still holds it: the offer itself is served from memory and is
   * right either way, but a file that rotted would refuse the next boot. Damage found withdraws
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
      const cause = result.error;
      const fields = { checkpoint_op: source.op, cause };
      this.host.emit('error', 'offer_refused_snapshot_unreadable', fields);
      const withdrawn: (readonly [number, bigint])[] = [];
      for (const [requester, offer] of this.offers) {
        if (offer.source !== source) continue;
        this.offers.delete(requester);
        withdrawn.push([requester, offer.nonce]);
      }
      if (this.offerSource === source) this.offerSource = null;
      this.sourceFailed(source.op, cause, withdrawn);
    });
  }

  // ---------------------------------------------------------------- tick

  /** Offers expire when idle; the source stays (built once per checkpoint, one payload). */
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

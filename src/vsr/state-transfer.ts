/**
 * State transfer, the pure pieces: the manifest codec and the receiver's stage machine.
 *
 * Manifest (`ISM1`, iggy-metadata-plane.md §5.3, extended with per-chunk checksums), all LE:
 *   magic[4] = "ISM1", count u32 (1..MANIFEST_ENTRIES_MAX), entry_len u8 (= 25),
 *   count x { kind u8, frontier u64, len u64, checksum u64 },
 *   chunk_size u32,
 *   for each entry in order: ceil(len / chunk_size) x XXH3-64 u64 of its chunks,
 *   XXH3-64 u64 over everything before it.
 * The per-chunk checksums let a receiver reject a damaged chunk on arrival and re-request it,
 * instead of discovering the damage after the whole artifact; they are computed from the serving
 * replica's verified snapshot, so they also catch a chunk damaged between disk and socket.
 *
 * Stages: Idle -> AwaitingTarget -> Fetching -> Installing -> Idle, with the legal edges below
 * and nothing else. The seed review's first defect was an unguarded Idle -> Installing move
 * reached by late chunks after the stage had been cleared elsewhere; here the session lives inside
 * the stage machine, so clearing the stage always drops the session, and every receive handler
 * asks the machine for the session matching its nonce and stage.
 */
import {
  ARTIFACT_SIZE_MAX,
  MANIFEST_CHUNKS_MAX,
  MANIFEST_ENTRIES_MAX,
  MANIFEST_ENTRY_SIZE,
  MANIFEST_SIZE_MAX,
  STATE_CHUNK_SIZE_MAX,
} from '../constants.js';
import { assert } from '../stdx/assert.js';
import type { ChecksumKernels } from './frame.js';

export const ArtifactKind = {
  metadataSnapshot: 0,
  clientTable: 1,
  segmentLog: 2,
  consumerOffsets: 3,
} as const;
export type ArtifactKind = (typeof ArtifactKind)[keyof typeof ArtifactKind];

/** The chunk size both sides use (clamped by the frame bound). */
export const STATE_CHUNK_SIZE = STATE_CHUNK_SIZE_MAX;
/**
 * Chunk requests a receiver keeps outstanding. One at a time paid a full round trip (frame build,
 * checksum, socket, verify, write) per 256 KiB chunk, ~50-90 MB/s on loopback; a small window keeps
 * the link busy while bounding what is in flight to 1 MiB. Chunks that overtake a missing one are
 * verified and held (within the window) so the transfer file is still written strictly in order.
 */
export const STATE_CHUNKS_IN_FLIGHT_MAX = 4;
/**
 * Chunks requested but not yet in the transfer file, at most. The window refills as soon as a
 * chunk arrives, and a chunk's write completes a turn later; but a write held behind a durable
 * write's fsync (a superblock, on the thread pool) would let the window run on while received
 * chunks pile up in the storage queue. Past this many unwritten chunks no request goes out until
 * a write completes: what a fetch holds in memory is bounded whatever the disk does.
 */
export const STATE_CHUNKS_UNWRITTEN_MAX = 2 * STATE_CHUNKS_IN_FLIGHT_MAX;
/**
 * Consecutive stalls (no accepted chunk within the retry interval) before a session is abandoned.
 */
export const STATE_TRANSFER_STALLS_MAX = 5;
/** Damaged or undecodable artifacts before the receiver gives up and falls back to repair. */
export const STATE_TRANSFER_DECODE_FAILURES_MAX = 5;

const MAGIC = 0x314d_5349; // "ISM1" little-endian

export interface ManifestEntry {
  readonly kind: number;
  /** For the snapshot: its sequence number (the checkpoint op). */
  readonly frontier: number;
  readonly len: number;
  /** XXH3-64 of the whole artifact (for the snapshot: the checkpoint id). */
  readonly checksum: bigint;
  readonly chunkChecksums: readonly bigint[];
}

export interface Manifest {
  readonly chunkSize: number;
  readonly entries: readonly ManifestEntry[];
}

export function chunkCount(len: number, chunkSize: number): number {
  return Math.ceil(len / chunkSize);
}

export function encodeManifest(kernels: ChecksumKernels, manifest: Manifest): Uint8Array {
  const entryCount = manifest.entries.length;
  assert(entryCount >= 1 && entryCount <= MANIFEST_ENTRIES_MAX, 'manifest entry count');
  let chunks = 0;
  for (const entry of manifest.entries) {
    const entryChunks = chunkCount(entry.len, manifest.chunkSize);
    assert(entry.chunkChecksums.length === entryChunks, 'one checksum per chunk');
    chunks += entry.chunkChecksums.length;
  }
  const size = 4 + 4 + 1 + manifest.entries.length * MANIFEST_ENTRY_SIZE + 4 + chunks * 8 + 8;
  assert(size <= MANIFEST_SIZE_MAX, 'manifest fits its bound');
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, manifest.entries.length, true);
  view.setUint8(8, MANIFEST_ENTRY_SIZE);
  let at = 9;
  for (const entry of manifest.entries) {
    view.setUint8(at, entry.kind);
    view.setBigUint64(at + 1, BigInt(entry.frontier), true);
    view.setBigUint64(at + 9, BigInt(entry.len), true);
    view.setBigUint64(at + 17, entry.checksum, true);
    at += MANIFEST_ENTRY_SIZE;
  }
  view.setUint32(at, manifest.chunkSize, true);
  at += 4;
  for (const entry of manifest.entries) {
    for (const checksum of entry.chunkChecksums) {
      view.setBigUint64(at, checksum, true);
      at += 8;
    }
  }
  view.setBigUint64(at, kernels.xxh3_64(bytes.subarray(0, at)), true);
  assert(at + 8 === size, 'manifest size accounted');
  return bytes;
}

export type ManifestDecode =
  | { readonly ok: true; readonly manifest: Manifest }
  | { readonly ok: false; readonly reason: string };

/** Strict decode of an untrusted manifest; never throws. */
export function decodeManifest(kernels: ChecksumKernels, bytes: Uint8Array): ManifestDecode {
  const fail = (reason: string): ManifestDecode => ({ ok: false, reason });
  if (bytes.byteLength < 21 || bytes.byteLength > MANIFEST_SIZE_MAX) return fail('size');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength - 8;
  const checksum = kernels.xxh3_64(bytes.subarray(0, end));
  if (view.getBigUint64(end, true) !== checksum) return fail('checksum');
  if (view.getUint32(0, true) !== MAGIC) return fail('magic');
  const count = view.getUint32(4, true);
  if (count < 1 || count > MANIFEST_ENTRIES_MAX) return fail('count');
  if (view.getUint8(8) !== MANIFEST_ENTRY_SIZE) return fail('entry_len');
  let at = 9;
  if (at + count * MANIFEST_ENTRY_SIZE + 4 > end) return fail('truncated');
  const heads: { kind: number; frontier: bigint; len: bigint; checksum: bigint }[] = [];
  for (let index = 0; index < count; index++) {
    heads.push({
      kind: view.getUint8(at),
      frontier: view.getBigUint64(at + 1, true),
      len: view.getBigUint64(at + 9, true),
      checksum: view.getBigUint64(at + 17, true),
    });
    at += MANIFEST_ENTRY_SIZE;
  }
  const chunkSize = view.getUint32(at, true);
  at += 4;
  if (chunkSize < 1 || chunkSize > STATE_CHUNK_SIZE_MAX) return fail('chunk_size');
  const entries: ManifestEntry[] = [];
  let chunksTotal = 0;
  for (const head of heads) {
    if (head.len > BigInt(ARTIFACT_SIZE_MAX) || head.len === 0n) return fail('artifact_size');
    if (head.frontier > BigInt(Number.MAX_SAFE_INTEGER)) return fail('frontier');
    const len = Number(head.len);
    const chunks = chunkCount(len, chunkSize);
    chunksTotal += chunks;
    if (chunksTotal > MANIFEST_CHUNKS_MAX || at + chunks * 8 > end) return fail('chunk_table');
    const chunkChecksums: bigint[] = [];
    for (let index = 0; index < chunks; index++) {
      chunkChecksums.push(view.getBigUint64(at, true));
      at += 8;
    }
    const frontier = Number(head.frontier);
    entries.push({ kind: head.kind, frontier, len, checksum: head.checksum, chunkChecksums });
  }
  if (at !== end) return fail('trailing_bytes');
  return { ok: true, manifest: { chunkSize, entries } };
}

/**
 * `preparing`: every byte of the checkpoint is here and verified, and the state machine fetches
 * what the checkpoint names beyond it (a partition group's segments) before it is installed.
 */
export type Stage = 'idle' | 'awaiting_target' | 'fetching' | 'preparing' | 'installing';

const LEGAL: Readonly<Record<Stage, readonly Stage[]>> = {
  idle: ['awaiting_target'],
  awaiting_target: ['fetching', 'idle'],
  fetching: ['preparing', 'installing', 'awaiting_target', 'idle'],
  preparing: ['installing', 'idle'],
  installing: ['idle'],
};

/** The receiver's session: one at a time, one nonce per session. */
export interface TransferSession {
  readonly nonce: bigint;
  /** Targets received for this nonce, by replica: the checkpoint each would serve. */
  readonly targets: Map<
    number,
    { op: number; checksum: bigint; commitMax: number; anchor: bigint; manifest: Manifest }
  >;
  /**
   * Refusals that vouch for a checkpoint id the sender holds but cannot serve (its snapshot file
   * is damaged), by replica. They count toward the vouch quorum of a target that some other
   * replica serves; on their own they can never be accepted.
   */
  readonly vouchers: Map<number, { op: number; checksum: bigint }>;
  /** Set only by the AwaitingTarget -> Fetching move. */
  accepted: {
    op: number;
    checksum: bigint;
    manifest: Manifest;
    entry: ManifestEntry;
    servers: number[];
  } | null;
  /** The replica chunks are requested from (rotates among `accepted.servers` on stalls). */
  peer: number;
  /** Bytes of the snapshot artifact received so far, in order (their writes submitted). */
  received: number;
  /** Bytes requested so far (`received` <= `requested`); the window is the difference. */
  requested: number;
  /** Bytes whose write to the transfer file completed (`written` <= `received`). */
  written: number;
  /**
   * Verified chunks past `received` (they overtook a missing one), by offset; within the window.
   */
  readonly ahead: Map<number, Uint8Array>;
  idleTicks: number;
  stalls: number;
  readonly startedAtTick: number;
}

export class TransferStageMachine {
  private current: Stage = 'idle';
  private active: TransferSession | null = null;
  /** Damaged/undecodable artifacts across sessions (reset on success). */
  decodeFailures = 0;

  get stage(): Stage {
    return this.current;
  }

  get transferring(): boolean {
    return this.current !== 'idle';
  }

  /** The session, if its nonce matches and the stage is one of `stages`. */
  session(nonce: bigint, ...stages: Stage[]): TransferSession | null {
    const session = this.active;
    if (session === null || session.nonce !== nonce || !stages.includes(this.current)) return null;
    return session;
  }

  get sessionAny(): TransferSession | null {
    return this.active;
  }

  /** Idle -> AwaitingTarget with a fresh session. */
  arm(nonce: bigint, startedAtTick: number): TransferSession {
    // A new session starts only from Idle: a running session is cleared first, never replaced.
    assert(
      this.current === 'idle',
      `illegal state transfer stage ${this.current} -> awaiting_target (arm)`,
    );
    this.move('awaiting_target');
    this.active = {
      nonce,
      targets: new Map(),
      vouchers: new Map(),
      accepted: null,
      peer: -1,
      received: 0,
      requested: 0,
      written: 0,
      ahead: new Map(),
      idleTicks: 0,
      stalls: 0,
      startedAtTick,
    };
    return this.active;
  }

  /** AwaitingTarget -> Fetching: the only place `accepted` is set. */
  accept(accepted: NonNullable<TransferSession['accepted']>): void {
    assert(this.active !== null && this.active.accepted === null, 'a session accepts one target');
    this.move('fetching');
    this.active.accepted = accepted;
    this.active.peer = accepted.servers[0]!;
  }

  /** Fetching -> Preparing: the artifact is whole; the machine fetches what it names. */
  beginPreparing(): void {
    assert(
      this.active?.accepted != null && this.active.received === this.active.accepted.entry.len,
      'prepare whole',
    );
    this.move('preparing');
  }

  beginInstall(): void {
    assert(
      this.active?.accepted != null && this.active.received === this.active.accepted.entry.len,
      'install whole',
    );
    this.move('installing');
  }

  /** Any stage -> Idle: the session is dropped together with the stage, always. */
  clear(): void {
    if (this.current === 'idle') return;
    this.move('idle');
    this.active = null;
  }

  private move(next: Stage): void {
    assert(
      LEGAL[this.current].includes(next),
      `illegal state transfer stage ${this.current} -> ${next}`,
    );
    this.current = next;
  }
}

/** What the receiver's vote over the offers and vouches of one session decided. */
export interface TargetVote {
  /**
   * The newest checkpoint a quorum vouches for (servers: the replicas that offered it), or none.
   */
  readonly best: {
    readonly op: number;
    readonly checksum: bigint;
    readonly servers: number[];
  } | null;
  /** Ops for which peers offered or vouched for different ids (divergence), in vote order. */
  readonly divergentOps: readonly number[];
}

/**
 * The pure target vote: accept the newest checkpoint whose id `quorum` peers vouch for, by serving
 * it or, when they hold it but cannot serve it, by a refusal naming it. Deterministic checkpoints
 * make ids comparable, so one faulty or lying replica cannot make us install the wrong state; an
 * op with two ids is never picked (some replica diverged). `fallback` (a replica index, or -1)
 * is accepted alone: the primary after the session stalled (see the replica).
 */
export function voteTarget(
  session: Pick<TransferSession, 'targets' | 'vouchers'>,
  quorum: number,
  fallback: number,
): TargetVote {
  const votes = new Map<string, number[]>();
  const vouches = new Map<string, number>();
  for (const [replica, target] of session.targets) {
    const key = `${target.op}:${target.checksum}`;
    votes.set(key, [...(votes.get(key) ?? []), replica]);
  }
  for (const [replica, vouch] of session.vouchers) {
    if (session.targets.has(replica)) continue; // a later offer from the same replica counts once
    const key = `${vouch.op}:${vouch.checksum}`;
    vouches.set(key, (vouches.get(key) ?? 0) + 1);
  }
  const idsByOp = new Map<number, Set<bigint>>();
  for (const target of [...session.targets.values(), ...session.vouchers.values()]) {
    idsByOp.set(target.op, (idsByOp.get(target.op) ?? new Set()).add(target.checksum));
  }
  let best: TargetVote['best'] = null;
  const divergentOps: number[] = [];
  for (const [key, servers] of votes) {
    // Servers vouch by serving; a replica that holds the id but cannot serve it vouches too.
    const vouchers = servers.length + (vouches.get(key) ?? 0);
    if (vouchers < quorum && !servers.includes(fallback)) continue;
    const target = session.targets.get(servers[0]!)!;
    if (idsByOp.get(target.op)!.size > 1) {
      divergentOps.push(target.op);
      continue;
    }
    if (best === null || target.op > best.op) {
      best = { op: target.op, checksum: target.checksum, servers };
    }
  }
  return { best, divergentOps };
}

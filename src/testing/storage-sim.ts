/**
 * Simulated storage for the cluster simulator: requests complete after a seeded latency, in
 * submission order (the contract of `Storage`), and a crash discards every request that has not
 * completed, exactly like unsynced writes lost by a power failure.
 *
 * `ReplicaStore` is what survives a crash. `MemoryReplicaStore` models the durable files at the
 * granularity of whole requests (each completed request is atomic and durable); the storage layer's
 * own tests cover torn and misdirected writes inside a request on the simulated disk.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { CheckpointCodec } from '../storage/checkpoint-codec.js';
import { recoverWith, toReplicaBootState, type RecoveryConfig } from '../storage/recovery.js';
import { SimDisk, type SimDiskFaults } from '../storage/sim-disk.js';
import { executeStorageRequest, type DurableHandles } from '../storage/storage-executor.js';
import { SNAPSHOT_GENERATIONS_HELD } from '../storage/snapshot-file.js';
import { encodeCheckpoint } from '../storage/checkpoint-encode.js';
import { assert } from '../stdx/assert.js';
import type { Prng } from '../stdx/prng.js';
import { decodeHeader } from '../vsr/header.js';
import type { Storage, StorageRequest, StorageResult, VsrState } from '../vsr/io.js';
import type { ReplicaBootState } from '../vsr/replica.js';

const SNAPSHOT_CORRUPT_AT_REST = 'snapshot.bin: trailer checksum mismatch (corruption at rest)';

/** `S` is the snapshot type of the state machine whose checkpoints it holds. */
export interface ReplicaStore<S> {
  /** Executes one request atomically; returns its result. */
  execute(request: StorageRequest<S>): StorageResult<S>;
  /** What a restarted replica boots from. */
  boot(kernels: Kernels, replicaCount: number): ReplicaBootState<S>;
  /** True when nothing was ever written (an empty data directory). */
  readonly empty: boolean;
  /** Forget everything (a wiped data directory). */
  wipe(): void;
}

interface StoredPrepare {
  readonly op: number;
  readonly frame: Uint8Array;
}

export class MemoryReplicaStore<S> implements ReplicaStore<S> {
  private readonly kernels: Kernels;
  private readonly codec: CheckpointCodec<S>;
  private superblock: VsrState | null = null;
  /** The snapshot file: payload plus the checksum its trailer records. */
  private snapshot: { payload: Uint8Array; checksum: bigint } | null = null;
  /**
   * The checkpoint generations held open for chunk reads, oldest first: the snapshot file and the
   * one it replaced (SNAPSHOT_GENERATIONS_HELD, as the snapshot file does). The same objects as
   * `snapshot` was, so corruption at rest shows through them too.
   */
  private held: { payload: Uint8Array; checksum: bigint }[] = [];
  /** The state-transfer temp file. */
  private transfer: Uint8Array = new Uint8Array(0);

  constructor(kernels: Kernels, codec: CheckpointCodec<S>) {
    this.kernels = kernels;
    this.codec = codec;
  }

  /** Flips a byte of the snapshot at rest (the trailer still records the old checksum). */
  corruptSnapshot(offset: number): boolean {
    if (this.snapshot === null || this.snapshot.payload.byteLength === 0) return false;
    this.snapshot.payload[offset % this.snapshot.payload.byteLength]! ^= 0x20;
    return true;
  }
  /** The WAL in append order (duplicates possible; last wins at boot). */
  private wal: StoredPrepare[] = [];

  get empty(): boolean {
    return this.superblock === null && this.snapshot === null && this.wal.length === 0;
  }

  wipe(): void {
    this.superblock = null;
    this.snapshot = null;
    this.held = [];
    this.wal = [];
    this.transfer = new Uint8Array(0);
  }

  /** `snapshot.bin` was replaced: hold the new generation, release the oldest beyond the bound. */
  private replaceSnapshot(snapshot: { payload: Uint8Array; checksum: bigint }): void {
    this.snapshot = snapshot;
    // A rewrite of the same checkpoint replaces its generation: reads go to the new file.
    this.held = this.held.filter((generation) => generation.checksum !== snapshot.checksum);
    this.held.push(snapshot);
    while (this.held.length > SNAPSHOT_GENERATIONS_HELD) this.held.shift();
  }

  execute(request: StorageRequest<S>): StorageResult<S> {
    switch (request.kind) {
      case 'wal_append':
        this.wal.push({ op: request.op, frame: request.frame.slice() });
        return { ok: true };
      case 'wal_truncate':
        this.wal = this.wal.filter((entry) => entry.op < request.fromOp);
        return { ok: true };
      case 'wal_remove': {
        const removed = new Set(request.ops);
        this.wal = this.wal.filter((entry) => !removed.has(entry.op));
        return { ok: true };
      }
      case 'wal_drain':
        this.wal = this.wal.filter((entry) => entry.op >= request.keepFromOp);
        return { ok: true };
      case 'superblock_write':
        if (this.superblock !== null) {
          assert(request.state.view >= this.superblock.view, 'superblock view never regresses');
          assert(request.state.logView >= this.superblock.logView, 'log view never regresses');
          const checkpointOp = this.superblock.checkpointOp;
          assert(request.state.checkpointOp >= checkpointOp, 'checkpoint never regresses');
        }
        this.superblock = request.state;
        return { ok: true };
      case 'checkpoint_write': {
        // Encoded at completion, as the node's worker does, from the model captured at the op.
        const { model, chunkSize } = request;
        const written = encodeCheckpoint(this.kernels, this.codec, model, chunkSize);
        this.replaceSnapshot({ payload: written.payload.slice(), checksum: written.checksum });
        return { ok: true, checkpoint: written };
      }
      case 'snapshot_read': {
        if (this.snapshot === null) return { ok: false, error: 'snapshot.bin: no such file' };
        if (this.kernels.xxh3_64(this.snapshot.payload) !== this.snapshot.checksum) {
          return { ok: false, error: SNAPSHOT_CORRUPT_AT_REST };
        }
        return { ok: true, payload: this.snapshot.payload.slice() };
      }
      case 'snapshot_verify': {
        if (this.snapshot === null) return { ok: false, error: 'snapshot.bin: no such file' };
        if (this.kernels.xxh3_64(this.snapshot.payload) !== this.snapshot.checksum) {
          return { ok: false, error: SNAPSHOT_CORRUPT_AT_REST };
        }
        if (this.snapshot.checksum !== request.checksum) {
          return { ok: false, error: 'snapshot.bin: another checkpoint' };
        }
        return { ok: true };
      }
      case 'snapshot_rewrite':
        this.replaceSnapshot({ payload: request.payload.slice(), checksum: request.checksum });
        return { ok: true };
      case 'snapshot_chunk_read': {
        const generation = this.held.find((candidate) => candidate.checksum === request.checksum);
        if (generation === undefined) return { ok: true };
        const end = request.offset + request.len;
        const short = end > generation.payload.byteLength;
        if (short) return { ok: false, error: 'snapshot.bin: short read' };
        return { ok: true, chunk: generation.payload.slice(request.offset, end) };
      }
      case 'transfer_write':
      case 'transfer_install':
      case 'transfer_decode':
      case 'transfer_discard':
        return this.executeTransfer(request);
    }
  }

  /** State transfer's temp file: chunk writes, the verified install, the discard. */
  private executeTransfer(
    request: Extract<StorageRequest<S>, { kind: `transfer_${string}` }>,
  ): StorageResult<S> {
    switch (request.kind) {
      case 'transfer_write': {
        const end = request.offset + request.bytes.byteLength;
        const kept = request.offset === 0 ? 0 : this.transfer.byteLength;
        const grown = new Uint8Array(Math.max(end, kept));
        if (request.offset > 0) {
          const carried = Math.min(this.transfer.byteLength, grown.byteLength);
          grown.set(this.transfer.subarray(0, carried));
        }
        grown.set(request.bytes, request.offset);
        this.transfer = grown;
        return { ok: true };
      }
      case 'transfer_decode':
      case 'transfer_install': {
        const payload = this.transfer;
        if (request.kind === 'transfer_install') this.transfer = new Uint8Array(0);
        if (payload.byteLength !== request.len) {
          return { ok: false, error: `transfer: length ${payload.byteLength} != ${request.len}` };
        }
        if (this.kernels.xxh3_64(payload) !== request.checksum) {
          return { ok: false, error: 'transfer: checksum mismatch' };
        }
        const decoded = this.codec.decode(payload);
        if (!decoded.ok) return { ok: false, error: `transfer: ${decoded.message}` };
        if (decoded.model.op !== request.op) {
          return { ok: false, error: 'transfer: sequence number mismatch' };
        }
        if (request.kind === 'transfer_decode') return { ok: true, model: decoded.model };
        this.replaceSnapshot({ payload, checksum: request.checksum });
        return { ok: true, model: decoded.model };
      }
      case 'transfer_discard':
        this.transfer = new Uint8Array(0);
        return { ok: true };
    }
  }

  boot(kernels: Kernels, replicaCount: number): ReplicaBootState<S> {
    // A restart holds only the file at rest: the old generations' handles died with the process.
    this.held = this.snapshot === null ? [] : [this.snapshot];
    let snapshot: ReplicaBootState<S>['snapshot'] = null;
    if (this.snapshot !== null) {
      const payload = this.snapshot.payload;
      const decoded = this.codec.decode(payload);
      // Corruption at rest (corruptSnapshot) can reach a boot: refuse it, never boot from it.
      if (!decoded.ok) throw new Error(`snapshot.bin: ${decoded.message}`);
      snapshot = { payload, checksum: kernels.xxh3_64(payload), decoded: decoded.model };
    }
    const floor = snapshot?.decoded.op ?? 0;
    // Last wins per op, then the hash-chained run from the floor (recovery.ts does the same).
    const byOp = new Map<number, Uint8Array>();
    for (const entry of this.wal) byOp.set(entry.op, entry.frame);
    const prepares: Uint8Array[] = [];
    let provableCommit = floor;
    let previous: { op: number; checksum: bigint } | null = null;
    const ops = [...byOp.keys()].filter((op) => op >= floor).sort((a, b) => a - b);
    for (const op of ops) {
      const decoded = decodeHeader(byOp.get(op)!);
      assert(decoded.ok && decoded.header.command === 6, 'the WAL holds prepares');
      const header = decoded.header;
      if (previous !== null) {
        if (op !== previous.op + 1 || header.parent !== previous.checksum) break;
      }
      if (previous === null && op !== floor && op !== floor + 1) break;
      prepares.push(byOp.get(op)!);
      provableCommit = Math.max(provableCommit, Math.min(header.commit, op));
      previous = { op, checksum: header.checksum };
    }
    if (replicaCount === 1 && previous !== null) provableCommit = previous.op;
    return { vsrState: this.superblock, snapshot, prepares, provableCommit };
  }
}

/** The simulated storage a replica submits to: latency from the PRNG, FIFO completion. */
export class StorageSim<S> implements Storage<S> {
  private readonly prng: Prng;
  private readonly latencyMaxTicks: number;
  private readonly pending: { id: number; request: StorageRequest<S>; readyAt: number }[] = [];
  private now = 0;
  /** Probability that a superblock write fails (retried by the replica). */
  superblockFailureProbability = 0;
  /** Request kinds a scenario makes fail (an IO error, the request not executed). */
  readonly failKinds = new Set<StorageRequest<S>['kind']>();

  /**
   * Request kinds a scenario holds: the first pending request of a held kind, and everything
   * behind it (completion stays in order), waits until its kind is released.
   */
  readonly holdKinds = new Set<StorageRequest<S>['kind']>();

  constructor(prng: Prng, latencyMaxTicks: number) {
    this.prng = prng;
    this.latencyMaxTicks = latencyMaxTicks;
  }

  submit(id: number, request: StorageRequest<S>): void {
    const previous = this.pending[this.pending.length - 1]?.readyAt ?? this.now;
    const readyAt = Math.max(previous, this.now + this.prng.int(this.latencyMaxTicks + 1));
    this.pending.push({ id, request, readyAt });
  }

  /** Completes due requests against `store`, delivering each result through `done`. */
  tick(store: ReplicaStore<S>, done: (id: number, result: StorageResult<S>) => void): void {
    this.now += 1;
    while (this.pending.length > 0 && this.pending[0]!.readyAt <= this.now) {
      if (this.holdKinds.has(this.pending[0]!.request.kind)) break;
      const { id, request } = this.pending.shift()!;
      let result: StorageResult<S>;
      const superblockFailure = this.superblockFailureProbability;
      if (request.kind === 'superblock_write' && this.prng.chance(superblockFailure)) {
        result = { ok: false, error: 'simulated superblock write failure' };
      } else if (this.failKinds.has(request.kind)) {
        result = { ok: false, error: `simulated ${request.kind} failure` };
      } else {
        result = store.execute(request);
      }
      done(id, result);
    }
  }

  /** A crash: requests that did not complete never happened. */
  crash(): number {
    const lost = this.pending.length;
    this.pending.length = 0;
    return lost;
  }

  /** The kinds of the requests not yet completed, in submission order. */
  get pendingKinds(): StorageRequest<S>['kind'][] {
    return this.pending.map(({ request }) => request.kind);
  }

  get inFlight(): number {
    return this.pending.length;
  }
}

/**
 * The real durable structures (WAL, superblock, snapshot file, recovery) over the simulated disk:
 * what the cluster simulator uses by default, so torn and lost writes inside a request, crash
 * points in the middle of a multi-step rewrite and corruption at rest all reach the same boot
 * code that production runs. Boot throws StorageRefusal when the data directory must be wiped.
 */
export class DiskReplicaStore<S> implements ReplicaStore<S> {
  disk: SimDisk;
  private readonly random: Prng;
  private readonly faults: SimDiskFaults;
  private readonly config: Omit<RecoveryConfig, 'logger'>;
  private readonly codec: CheckpointCodec<S>;
  private handles: DurableHandles<S> | null = null;

  constructor(
    random: Prng,
    config: Omit<RecoveryConfig, 'logger'>,
    codec: CheckpointCodec<S>,
    faults: SimDiskFaults = {},
  ) {
    this.random = random;
    this.faults = faults;
    this.config = config;
    this.codec = codec;
    this.disk = new SimDisk(random, faults);
  }

  get empty(): boolean {
    return this.disk.list().length === 0;
  }

  wipe(): void {
    this.disk = new SimDisk(this.random, this.faults);
    this.handles = null;
  }

  /** Power loss: unsynced writes torn or lost, unsynced renames lost or applied. */
  crash(): void {
    this.disk.crash();
    this.handles = null;
  }

  execute(request: StorageRequest<S>): StorageResult<S> {
    assert(this.handles !== null, 'the store is open');
    return executeStorageRequest(this.handles, request);
  }

  boot(kernels: Kernels): ReplicaBootState<S> {
    const recovered = recoverWith(this.disk, kernels, this.codec, this.config);
    const { wal, superblock, snapshotFile } = recovered;
    this.handles = { wal, superblock, snapshotFile };
    return toReplicaBootState(recovered);
  }
}

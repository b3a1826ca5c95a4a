/**
 * `snapshot.bin`: the checkpoint's canonical msgpack payload followed by the 20-byte "ISNP"
 * integrity trailer (iggy-metadata-plane.md §4.3), written durably (temp, fsync, rename,
 * directory fsync; §4.4).
 *
 * The checkpoint checksum (the checkpoint id the superblock pairs with and replicas compare) is
 * XXH3-64 of the payload bytes AS STORED, never of a re-encode: a re-encode by a different build
 * could differ by a byte and turn a healthy pairing into a refused boot.
 *
 * Reading refuses a file without a trailer (vrmeta always writes one; the reference's legacy
 * no-trailer fallback would accept a file cut exactly at the payload end), a trailer mismatch,
 * and a format version this build does not read.
 */
import type { Kernels } from '../kernels/kernel.js';
import { TRAILER_SIZE } from '../kernels/kernel.js';
import { trailerWriteChecksum } from '../kernels/trailer.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import { codecReadsVersion, type CheckpointCodec } from './checkpoint-codec.js';
import { assert } from '../stdx/assert.js';
import { DiskError, type Disk, type DiskFileReader } from './disk.js';
import {
  DurableWriteError,
  canWriteDurablyAsync,
  readUntilStable,
  temporaryName,
  writeDurably,
  writeDurablyAsync,
  type DurableWriteStage,
} from './durable-file.js';
import { hex } from './prepare-frame.js';
import { RefusalReason, StorageRefusal } from './refusal.js';

export const SNAPSHOT_FILE = 'snapshot.bin';
export const SNAPSHOT_TEMP_FILE = temporaryName(SNAPSHOT_FILE);
/**
 * Where an incoming state transfer accumulates, chunk by chunk. Separate from the checkpoint's
 * temp file so a local checkpoint during a transfer cannot clobber it.
 */
export const SNAPSHOT_TRANSFER_FILE = `${SNAPSHOT_FILE}.transfer`;

/**
 * The largest snapshot the storage loads whole. The reference state (DESIGN.md §6) is ~9 MB and
 * state transfer is specified up to 64 MiB; 1 GiB leaves room without letting a corrupt size
 * make us allocate without bound.
 */
export const SNAPSHOT_FILE_SIZE_MAX = 1024 * 1024 * 1024;

/**
 * Checkpoint generations whose bytes stay readable for serving state-transfer chunks: the current
 * `snapshot.bin` and the one it replaced (held open across the rename), so a fetch that began
 * before a checkpoint finishes from the file it began on, and memory never holds a payload for
 * it (TigerBeetle frees a checkpoint's blocks only once the next one is durable, for the same
 * reason). A fetch two checkpoints behind is refused and restarts on the newest.
 */
export const SNAPSHOT_GENERATIONS_HELD = 2;

/** A checkpoint generation held open for chunk reads. */
interface HeldGeneration {
  readonly checksum: bigint;
  readonly payloadSizeBytes: number;
  readonly reader: DiskFileReader;
}

export interface SnapshotRead {
  /**
   * The payload as stored: a view of the file as read (an owned JS buffer, not kernel memory; its
   * `buffer` also holds the 20-byte trailer after the payload).
   */
  readonly payload: Uint8Array;
  /** XXH3-64 of `payload`: the checkpoint checksum. */
  readonly checksum: bigint;
  readonly version: number;
}

/** Why an install was refused: the bytes received are not the accepted checkpoint. */
export type TransferInstallResult<S> =
  | { readonly ok: true; readonly model: CheckpointModel<S>; readonly payload: Uint8Array }
  | { readonly ok: false; readonly error: string };

type Attempt =
  | { readonly ok: true; readonly payload: Uint8Array; readonly checksum: bigint }
  | { readonly ok: false; readonly reason: RefusalReason; readonly detail: string };

/** `S` is the snapshot type of the state machine whose checkpoints the file holds. */
export class SnapshotFile<S> {
  private readonly disk: Disk;
  /** The kernels it seals with (a checkpoint is encoded with the same ones). */
  readonly kernels: Kernels;
  /** Peeks, decodes (and, for a checkpoint write, encodes) the payload. */
  readonly codec: CheckpointCodec<S>;
  /** What `snapshot.bin` holds as far as this instance knows: its payload size and checksum. */
  private current: { readonly payloadSizeBytes: number; readonly checksum: bigint } | null = null;
  /** Generations held open for chunk reads, oldest first (at most SNAPSHOT_GENERATIONS_HELD). */
  private readonly held: HeldGeneration[] = [];

  constructor(disk: Disk, kernels: Kernels, codec: CheckpointCodec<S>) {
    this.disk = disk;
    this.kernels = kernels;
    this.codec = codec;
  }

  /** The checksum and payload size of the snapshot last read or written, if any. */
  get known(): { readonly payloadSizeBytes: number; readonly checksum: bigint } | null {
    return this.current;
  }

  /**
   * Durably replaces `snapshot.bin` with `payload` + trailer and returns the checkpoint checksum.
   * When this returns, a crash keeps this snapshot. After a DurableWriteError from the rename on,
   * `snapshot.bin` may be either snapshot: chunk reads are refused until `read` or `write`
   * succeeds again. `known` is the payload's XXH3-64 when the caller computed it already (the
   * checkpoint's chunk manifest does): the trailer then needs no second pass over the payload.
   */
  write(payload: Uint8Array, known?: bigint): bigint {
    const { trailer, checksum } = this.sealed(payload, known);
    try {
      writeDurably(this.disk, SNAPSHOT_FILE, [payload, trailer]);
    } catch (error) {
      this.failed(error);
      throw error;
    }
    this.current = { payloadSizeBytes: payload.byteLength, checksum };
    this.holdCurrent();
    return checksum;
  }

  /** The disk can run `writeAsync`'s fsyncs off the event loop. */
  get canWriteAsync(): boolean {
    return canWriteDurablyAsync(this.disk);
  }

  /**
   * `write` with its fsyncs on the thread pool (`writeDurablyAsync`): `done` runs on a later turn
   * with the checksum or the DurableWriteError `write` would have thrown; nothing else may touch
   * the snapshot file until then. `live` as for `writeDurablyAsync`.
   */
  writeAsync(
    payload: Uint8Array,
    known: bigint | undefined,
    live: () => boolean,
    done: (result: bigint | DurableWriteError) => void,
  ): void {
    const { trailer, checksum } = this.sealed(payload, known);
    writeDurablyAsync(this.disk, SNAPSHOT_FILE, [payload, trailer], live, (error) => {
      if (error !== null) {
        this.failed(error);
        done(error);
        return;
      }
      this.current = { payloadSizeBytes: payload.byteLength, checksum };
      this.holdCurrent();
      done(checksum);
    });
  }

  private sealed(payload: Uint8Array, known: bigint | undefined): { trailer: Uint8Array; checksum: bigint } {
    assert(payload.byteLength + TRAILER_SIZE <= SNAPSHOT_FILE_SIZE_MAX, 'snapshot size is bounded');
    const trailer = new Uint8Array(TRAILER_SIZE);
    if (known === undefined) this.kernels.trailerWrite(payload, trailer, 0);
    else trailerWriteChecksum(known, trailer, 0);
    return { trailer, checksum: new DataView(trailer.buffer).getBigUint64(4, true) };
  }

  /** After a failed write: from the rename on, `snapshot.bin` may be either snapshot. */
  private failed(error: unknown): void {
    if (!(error instanceof DurableWriteError && !error.targetUncertain)) this.current = null;
  }

  /** Reads and verifies `snapshot.bin`; null when there is none. Throws StorageRefusal. */
  read(): SnapshotRead | null {
    if (!this.disk.exists(SNAPSHOT_FILE)) {
      this.current = null;
      return null;
    }
    const attempt = readUntilStable(
      SNAPSHOT_FILE,
      () => this.readOnce(),
      (result) => result.ok,
      (result) => (result.ok ? 'ok' : `${result.reason}:${result.detail}`),
    );
    if (!attempt.ok) throw new StorageRefusal(SNAPSHOT_FILE, attempt.reason, attempt.detail);
    const version = this.codec.formatVersion(attempt.payload);
    if (version === null) {
      throw new StorageRefusal(SNAPSHOT_FILE, RefusalReason.snapshotUndecodable, 'no msgpack array with a version first');
    }
    if (!codecReadsVersion(this.codec, version)) {
      throw new StorageRefusal(
        SNAPSHOT_FILE,
        RefusalReason.snapshotVersion,
        `format version ${version}, this build reads ${this.codec.versionsReadable.join(' and ')}`,
      );
    }
    this.current = { payloadSizeBytes: attempt.payload.byteLength, checksum: attempt.checksum };
    this.holdCurrent();
    return { payload: attempt.payload, checksum: attempt.checksum, version };
  }

  /**
   * Checks `snapshot.bin` at rest without keeping a copy: null when it verifies (trailer) and its
   * payload hashes to `checksum`, else why not. IO failures throw.
   */
  verify(checksum: bigint): string | null {
    if (!this.disk.exists(SNAPSHOT_FILE)) return 'missing';
    const attempt = readUntilStable(
      SNAPSHOT_FILE,
      () => this.readOnce(false),
      (result) => result.ok,
      (result) => (result.ok ? 'ok' : `${result.reason}:${result.detail}`),
    );
    if (!attempt.ok) return `${attempt.reason}: ${attempt.detail}`;
    if (attempt.checksum !== checksum) return `holds checkpoint id ${hex(attempt.checksum)}, not ${hex(checksum)}`;
    return null;
  }

  /**
   * Reads payload bytes [offset, offset + target.byteLength) of the checkpoint whose id is
   * `checksum` into `target`, for serving state-transfer chunks: from `snapshot.bin`, or from the
   * generation it replaced while that is held open (`SNAPSHOT_GENERATIONS_HELD`). Returns the byte
   * count (short at the payload end, 0 at or past it), or null when that checkpoint is no longer
   * held: chunks of two different snapshots must never be mixed into one transfer. The bytes are
   * as found at rest: the caller checks them against the chunk sums it offered.
   */
  readPayloadChunk(checksum: bigint, offset: number, target: Uint8Array): number | null {
    assert(Number.isSafeInteger(offset) && offset >= 0, 'chunk offset');
    let generation = this.held.find((candidate) => candidate.checksum === checksum);
    if (generation === undefined && this.current?.checksum === checksum) generation = this.openCurrent(this.current);
    if (generation === undefined) return null;
    const length = Math.max(0, Math.min(target.byteLength, generation.payloadSizeBytes - offset));
    if (length === 0) return 0;
    const count = generation.reader.read(offset, target.subarray(0, length));
    if (count !== length) throw new DiskError('read', SNAPSHOT_FILE, new Error(`short read ${count}/${length}`));
    return count;
  }

  /** Generations held open now (for tests). */
  get heldCount(): number {
    return this.held.length;
  }

  /**
   * Holds `snapshot.bin` open as the current generation, after it was written, read or installed
   * (before anything can rename over it). A failure to open is not the write's: it is retried by
   * the next chunk read, which reports it.
   */
  private holdCurrent(): void {
    const current = this.current;
    if (current === null) return;
    // A rewrite of the same checkpoint (its file healed): the new file replaces the old handle.
    const same = this.held.findIndex((generation) => generation.checksum === current.checksum);
    if (same >= 0) this.held.splice(same, 1)[0]!.reader.close();
    try {
      this.openCurrent(current);
    } catch (error) {
      if (!(error instanceof DiskError)) throw error;
    }
  }

  private openCurrent(current: { readonly payloadSizeBytes: number; readonly checksum: bigint }): HeldGeneration {
    const generation = { ...current, reader: this.disk.openRead(SNAPSHOT_FILE) };
    this.held.push(generation);
    while (this.held.length > SNAPSHOT_GENERATIONS_HELD) this.held.shift()!.reader.close();
    return generation;
  }

  // -----------------------------------------------------------------------------------------------
  // State transfer (receiving side): chunks stream to a temp file, so memory does not grow with
  // the snapshot while it arrives; the install verifies everything before touching snapshot.bin.

  /** Writes one received chunk at `offset` of the transfer file; offset 0 starts a new file. */
  transferWrite(offset: number, bytes: Uint8Array): void {
    assert(Number.isSafeInteger(offset) && offset >= 0, 'transfer offset');
    // The core checks chunks against the manifest length; this bound keeps a bug from filling the disk.
    assert(offset + bytes.byteLength <= SNAPSHOT_FILE_SIZE_MAX - TRAILER_SIZE, 'transfer size is bounded');
    if (offset === 0 && this.disk.exists(SNAPSHOT_TRANSFER_FILE)) this.disk.truncate(SNAPSHOT_TRANSFER_FILE, 0);
    this.disk.write(SNAPSHOT_TRANSFER_FILE, offset, bytes);
  }

  /**
   * Verifies the transfer file (length, XXH3-64 = the accepted checkpoint id, format version,
   * decode, sequence number = the accepted op), installing nothing: the decoded model and its
   * payload.
   */
  transferDecode(op: number, sizeBytes: number, checksum: bigint): TransferInstallResult<S> {
    if (!this.disk.exists(SNAPSHOT_TRANSFER_FILE)) return { ok: false, error: 'no transfer in progress' };
    const actualSize = this.disk.size(SNAPSHOT_TRANSFER_FILE);
    if (actualSize !== sizeBytes) return { ok: false, error: `received ${actualSize} bytes, the manifest says ${sizeBytes}` };
    if (sizeBytes > SNAPSHOT_FILE_SIZE_MAX - TRAILER_SIZE) return { ok: false, error: `${sizeBytes} bytes exceed the snapshot bound` };
    const payload = new Uint8Array(sizeBytes);
    const count = this.disk.read(SNAPSHOT_TRANSFER_FILE, 0, payload);
    if (count !== sizeBytes) throw new DiskError('read', SNAPSHOT_TRANSFER_FILE, new Error(`short read ${count}/${sizeBytes}`));
    const actual = this.kernels.xxh3_64(payload);
    if (actual !== checksum) return { ok: false, error: `payload hashes to ${hex(actual, 8)}, the checkpoint id is ${hex(checksum)}` };
    const version = this.codec.formatVersion(payload);
    if (!codecReadsVersion(this.codec, version)) {
      return { ok: false, error: `format version ${String(version)}, this build reads ${this.codec.versionsReadable.join(' and ')}` };
    }
    const decoded = this.codec.decode(payload);
    if (!decoded.ok) return { ok: false, error: decoded.message };
    const model = decoded.model;
    if (model.op !== op) {
      return { ok: false, error: `the snapshot is for op ${model.op}, the accepted checkpoint is op ${op}` };
    }
    return { ok: true, model, payload };
  }

  /**
   * Verifies the transfer file (`transferDecode`) and only then installs it as `snapshot.bin`:
   * trailer appended, fsync, rename, directory fsync. Any mismatch returns an error and
   * installs nothing; IO failures throw (DurableWriteError with the stage).
   */
  transferInstall(op: number, sizeBytes: number, checksum: bigint): TransferInstallResult<S> {
    const decoded = this.transferDecode(op, sizeBytes, checksum);
    if (!decoded.ok) return decoded;
    const { model, payload } = decoded;
    // The payload hashes to the checkpoint id (checked above): the trailer needs no second pass.
    const actual = checksum;
    const trailer = new Uint8Array(TRAILER_SIZE);
    trailerWriteChecksum(actual, trailer, 0);
    let stage: DurableWriteStage = 'write';
    try {
      this.disk.write(SNAPSHOT_TRANSFER_FILE, sizeBytes, trailer);
      stage = 'sync';
      this.disk.fsync(SNAPSHOT_TRANSFER_FILE);
      stage = 'rename';
      this.current = null;
      this.disk.rename(SNAPSHOT_TRANSFER_FILE, SNAPSHOT_FILE);
      stage = 'dir_sync';
      this.disk.fsyncDirectory();
    } catch (error) {
      if (error instanceof DiskError) throw new DurableWriteError(SNAPSHOT_FILE, stage, error);
      throw error;
    }
    this.current = { payloadSizeBytes: sizeBytes, checksum: actual };
    this.holdCurrent();
    return { ok: true, model, payload };
  }

  /** Drops an abandoned transfer's file. */
  transferDiscard(): void {
    if (this.disk.exists(SNAPSHOT_TRANSFER_FILE)) this.disk.remove(SNAPSHOT_TRANSFER_FILE);
  }

  /** One read and trailer check; `keep` returns the payload (else an empty one). */
  private readOnce(keep = true): Attempt {
    const sizeBytes = this.disk.size(SNAPSHOT_FILE);
    if (sizeBytes > SNAPSHOT_FILE_SIZE_MAX) {
      return { ok: false, reason: RefusalReason.snapshotTooLarge, detail: `${sizeBytes} bytes` };
    }
    if (sizeBytes < TRAILER_SIZE) {
      return { ok: false, reason: RefusalReason.snapshotNoTrailer, detail: `${sizeBytes} bytes, shorter than a trailer` };
    }
    // A plain JS buffer, not kernel memory: the WASM trailer kernel hashes a large input in staged
    // pieces (kernels-wasm.ts), so WASM memory does not grow by the snapshot's size, and the
    // payload is returned as a view of this buffer (no second copy of the snapshot). At boot it
    // may be bytes the process read ahead (prefetchFile): checked below exactly as a read.
    const file = this.disk.readAll(SNAPSHOT_FILE);
    if (file.byteLength !== sizeBytes) {
      throw new DiskError('read', SNAPSHOT_FILE, new Error(`read ${file.byteLength} bytes, the file has ${sizeBytes}`));
    }
    const split = this.kernels.trailerSplit(file);
    switch (split.status) {
      case 'no_trailer':
        return { ok: false, reason: RefusalReason.snapshotNoTrailer, detail: 'the last 20 bytes do not start with "ISNP"' };
      case 'checksum_mismatch':
        return {
          ok: false,
          reason: RefusalReason.snapshotChecksum,
          detail: `trailer says ${hex(split.expected)}, payload hashes to ${hex(split.actual, 8)}`,
        };
      case 'valid':
        return { ok: true, payload: keep ? split.payload : new Uint8Array(0), checksum: split.checksum };
    }
  }
}

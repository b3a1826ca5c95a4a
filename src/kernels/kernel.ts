/**
 * The hot-path kernels: one interface, two implementations (WASM SIMD and TypeScript) that must
 * produce byte-identical results. `kernels-ts.ts` is the readable reference; `kernels-wasm.ts`
 * adapts the AssemblyScript exports. `index.ts` picks one once (`loadKernels`).
 *
 * Inputs are plain `Uint8Array`s. The WASM implementation reads an input in place when it already
 * lives in WASM memory (a view from `allocate(...).bytes()`) and copies it in otherwise; copying
 * costs about as much as hashing, so callers on hot paths (file and socket reads) read straight
 * into a `KernelBuffer`. Results never alias WASM memory: returned arrays are owned by the caller.
 */
import type { BatchDeltas, BatchFault } from '../format/message-batch.js';
import type { MetadataSnapshot } from '../format/snapshot-model.js';

export type KernelsName = 'wasm' | 'ts';
export type KernelsMode = 'auto' | KernelsName;

/** `"ISNP"` read as a little-endian u32; on disk the bytes are 50 4E 53 49. */
export const TRAILER_MAGIC = 0x4953_4e50;
/** 4 bytes of magic + the XXH3-64 of the payload widened to 16 bytes, little-endian. */
export const TRAILER_SIZE = 20;

export type TrailerSplit =
  | { readonly status: 'valid'; readonly payload: Uint8Array; readonly checksum: bigint }
  | {
      readonly status: 'checksum_mismatch';
      readonly payload: Uint8Array;
      /** What the trailer says (u128, upper half as stored). */
      readonly expected: bigint;
      /** XXH3-64 of the payload as read. */
      readonly actual: bigint;
    }
  | { readonly status: 'no_trailer'; readonly payload: Uint8Array };

export interface ChunkManifest {
  readonly chunkSize: number;
  readonly totalSize: number;
  /** ceil(totalSize / chunkSize); 0 for an empty artifact. */
  readonly chunkCount: number;
  /** XXH3-64 (seed 0) of each chunk, in order. The last chunk may be short. */
  readonly chunkChecksums: BigUint64Array;
  /** XXH3-64 (seed 0) of the whole artifact. */
  readonly checksum: bigint;
}

/** Why a journal entry failed verification. Stable strings: they appear in logs and `inspect`. */
export const JournalFailureReason = {
  /** Fewer than 256 bytes remain: a header cannot fit. */
  headerTruncated: 'header_truncated',
  /** The command byte is not Prepare. */
  command: 'command',
  /** `size` is below 256 or above MESSAGE_SIZE_MAX. */
  size: 'size',
  /** The entry's `size` runs past the end of the image. */
  bodyTruncated: 'body_truncated',
  /** A reserved region that the identity covers is not zero. */
  reserved: 'reserved',
  /** The header's identity checksum does not match. */
  identity: 'identity',
  /** The body's checksum does not match `checksum_body`. */
  body: 'body',
  /** `parent` does not equal the previous op's identity. */
  parent: 'parent',
} as const;
export type JournalFailureReason = (typeof JournalFailureReason)[keyof typeof JournalFailureReason];

export interface JournalFailure {
  /** Byte offset of the first entry that failed. */
  readonly offset: number;
  readonly reason: JournalFailureReason;
  /**
   * `torn_tail`: no complete valid entry exists anywhere after `offset` (a torn final append;
   * safe to truncate). `interior`: a valid entry follows, so acknowledged data was damaged and
   * boot must refuse.
   */
  readonly kind: 'torn_tail' | 'interior';
}

export interface JournalScan {
  /** Byte offset where the valid prefix ends (== image length when everything verified). */
  readonly validEnd: number;
  /** Entries in the valid prefix. */
  readonly entryCount: number;
  /** Op of the last entry in the valid prefix, or -1 when the prefix is empty. */
  readonly lastOp: number;
  readonly failure: JournalFailure | null;
}

/**
 * A buffer that lives in WASM memory (for the TS kernels, an ordinary `Uint8Array`). Read files
 * and sockets into `bytes()` and pass (a subarray of) that view to a kernel: no copy-in happens.
 *
 * A view returned by `bytes()` is valid until the next call that may grow WASM memory (any
 * `allocate`, or a kernel call given an input that had to be copied in). Call `bytes()` again
 * rather than keeping a view.
 */
export interface KernelBuffer {
  readonly byteLength: number;
  bytes(): Uint8Array;
  /** Returns the memory to the kernels' allocator. The buffer must not be used afterwards. */
  release(): void;
}

/**
 * A message batch's validating read (src/format/message-batch.ts): the layout first (`walkBatch`'s
 * rules and fault names), then every frame's checksum in order, then the batch checksum against
 * the stored one. The first failure wins; `position` is the byte offset of the frame at fault (0
 * for the header).
 */
export type BatchVerify =
  | { readonly status: 'valid'; readonly messageCount: number; readonly checksum: bigint }
  | {
      readonly status: 'layout';
      readonly fault: BatchFault;
      readonly position: number;
      /** The frame at fault, or -1 for the header. */
      readonly messageIndex: number;
    }
  | {
      readonly status: 'message_checksum';
      readonly messageIndex: number;
      readonly position: number;
      readonly stored: bigint;
      readonly computed: bigint;
    }
  | { readonly status: 'batch_checksum'; readonly stored: bigint; readonly computed: bigint };

export interface Kernels {
  readonly name: KernelsName;
  /** Which build runs: the SIMD or scalar WASM module, or the TypeScript kernels. */
  readonly build: 'wasm-simd' | 'wasm-scalar' | 'ts';
  /** Standard XXH3-64 (as `XXH3_64bits_withSeed`). `seed` is a u64, default 0n. */
  xxh3_64(bytes: Uint8Array, seed?: bigint): bigint;
  /** `payload` followed by the 20-byte trailer, in a new array. */
  trailerSeal(payload: Uint8Array): Uint8Array;
  /** Writes the 20-byte trailer for `payload` into `target` at `targetOffset`. */
  trailerWrite(payload: Uint8Array, target: Uint8Array, targetOffset: number): void;
  /** Splits a sealed file into payload and trailer and verifies it. The payload is a subarray. */
  trailerSplit(file: Uint8Array): TrailerSplit;
  /** Per-chunk XXH3-64 and the whole artifact's XXH3-64, in one pass over the bytes. */
  chunkManifest(artifact: Uint8Array, chunkSize: number): ChunkManifest;
  /** Verifies a WAL image (concatenated prepares) and classifies the first failure. */
  journalScan(image: Uint8Array): JournalScan;
  /**
   * Verifies one whole message batch (exactly `batch.byteLength` bytes): see BatchVerify.
   * `deltas` picks the offset-delta rules (`BatchDeltas`): `index` (the default) for producer and
   * stored batches, `contiguous` for a poll reply's slice.
   */
  messageBatchVerify(batch: Uint8Array, deltas?: BatchDeltas): BatchVerify;
  /**
   * The batch checksum of a batch whose layout is valid, over its header and the frames' stored
   * checksums (no frame is re-hashed): what a stamp recomputes. Throws on a batch whose layout
   * is not valid (callers verify untrusted bytes first).
   */
  messageBatchChecksum(batch: Uint8Array, deltas?: BatchDeltas): bigint;
  /**
   * Frames [fromIndex, fromIndex + count) of a verified batch, `count` clamped to its
   * `message_count`, as a new batch (reference §5.3 "Slicing"): the header with `batch_length`,
   * `message_count` and `batch_checksum` rewritten, the frames as they are (deltas kept, so the
   * result verifies under `contiguous` deltas). Throws when `fromIndex` is not below the batch's
   * count, `count` is below 1, or the layout is not valid (frames are not re-hashed).
   */
  messageBatchSlice(batch: Uint8Array, fromIndex: number, count: number): Uint8Array;
  /** Canonical msgpack of the snapshot (see snapshot-model.ts). */
  snapshotEncode(snapshot: MetadataSnapshot): Uint8Array;
  /** A buffer in WASM memory (plain memory for the TS kernels). */
  allocate(byteLength: number): KernelBuffer;
}

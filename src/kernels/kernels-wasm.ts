/**
 * The WASM kernels: adapters from the `Kernels` interface to the AssemblyScript exports.
 *
 * ABI (numbers only; pointers and lengths are u32, u64 values are BigInt):
 * - `xxh3_64(ptr, len, seed: u64): u64`
 * - `trailer_write(ptr, len, outPtr)`: writes the 20-byte trailer of [ptr, ptr+len) at outPtr.
 * - `trailer_split(ptr, len, resultPtr): i32`: 0 valid, 1 checksum mismatch, 2 no trailer; writes
 *   the stored checksum (16 bytes LE) at resultPtr and the computed XXH3-64 (8 bytes) at +16.
 * - `chunk_manifest(ptr, len, chunkSize, outPtr): u64`: per-chunk XXH3-64 written as u64 LE at
 *   outPtr, returns the whole artifact's XXH3-64.
 * - `journal_scan(ptr, len, sizeMax, resultPtr)`: result block layout in `JournalResult` below.
 * - `xxh3_stream_init(state, seed: u64)`, `xxh3_stream_update(state, ptr, len)`,
 *   `xxh3_stream_digest(state): u64`: streaming XXH3-64 over a `xxh3_stream_state_size()`-byte
 *   state block (assembly/xxh3-stream.ts).
 * - message batches (`message_batch_verify`, `_checksum`, `_slice`): see message-batch-wasm.ts.
 * - snapshot encoding: see snapshot-encode-wasm.ts.
 *
 * Results are copied out before returning: nothing handed to callers aliases WASM memory.
 *
 * Inputs not in WASM memory are copied in before a kernel reads them. Up to `STREAM_THRESHOLD_BYTES`
 * they are staged whole (one copy, one kernel call). Larger ones (a snapshot read into a JS buffer,
 * a payload to seal) go through the streaming hash in `STREAM_PIECE_BYTES` pieces staged into one
 * reused scratch slot: WASM memory stays the same size whatever the input's size, so such a call
 * neither grows memory by the input's size nor writes it into fresh pages (that copy cost ~9x the
 * hash at 64 MiB) nor leaves an instance to recycle.
 */
import { MESSAGE_SIZE_MAX } from '../constants.js';
import { BatchDeltas } from '../format/message-batch.js';
import type { MetadataSnapshot } from '../format/snapshot-model.js';
import { assert } from '../stdx/assert.js';
import type { ChunkManifest, JournalScan, Kernels, TrailerSplit } from './kernel.js';
import { TRAILER_SIZE } from './kernel.js';
import { journalFailureFromCodes } from './journal-scan-ts.js';
import { createMessageBatchWasm, MESSAGE_BATCH_EXPORTS } from './message-batch-wasm.js';
import { trailerSplitWith, trailerWriteChecksum } from './trailer.js';
import { snapshotEncodeWasm } from './snapshot-encode-wasm.js';
import { ScratchSlot, WasmInstance } from './wasm-instance.js';

interface AbiExports {
  xxh3_64(ptr: number, len: number, seed: bigint): bigint;
  trailer_write(ptr: number, len: number, outPtr: number): void;
  trailer_split(ptr: number, len: number, resultPtr: number): number;
  chunk_manifest(ptr: number, len: number, chunkSize: number, outPtr: number): bigint;
  journal_scan(ptr: number, len: number, sizeMax: number, resultPtr: number): void;
  xxh3_stream_state_size(): number;
  xxh3_stream_init(state: number, seed: bigint): void;
  xxh3_stream_update(state: number, ptr: number, len: number): void;
  xxh3_stream_digest(state: number): bigint;
}

/** Inputs not in WASM memory above this size are hashed in staged pieces, not copied in whole. */
export const STREAM_THRESHOLD_BYTES = 1024 * 1024;
/** The staged piece: large enough that a kernel call per piece costs nothing measurable. */
export const STREAM_PIECE_BYTES = 256 * 1024;

/** Layout of the journal_scan result block. */
const JournalResult = {
  validEnd: 0,
  entryCount: 8,
  lastOp: 16,
  failureOffset: 24,
  reasonCode: 32,
  tornTail: 36,
  size: 40,
} as const;

const RESULT_BLOCK_SIZE = 64;
const U64_MASK = 0xffff_ffff_ffff_ffffn;

export function createWasmKernels(instance = new WasmInstance('simd')): Kernels {
  const exportNames = [
    'xxh3_64',
    'trailer_write',
    'trailer_split',
    'chunk_manifest',
    'journal_scan',
    'xxh3_stream_state_size',
    'xxh3_stream_init',
    'xxh3_stream_update',
    'xxh3_stream_digest',
    ...MESSAGE_BATCH_EXPORTS,
  ];
  for (const name of exportNames) {
    assert(typeof (instance.exports as Record<string, unknown>)[name] === 'function', `export ${name}`);
  }
  assert(JournalResult.size <= RESULT_BLOCK_SIZE);

  // The exports and every pointer are re-read per call: a recycle between turns replaces them
  // (wasm-instance.ts). Take the result block before staging: both may grow memory.
  function abi(): AbiExports {
    return instance.exports as unknown as AbiExports;
  }
  function resultBlock(): number {
    return instance.scratch(ScratchSlot.result, RESULT_BLOCK_SIZE);
  }
  function view(resultPtr: number): DataView {
    const bytes = instance.bytes();
    return new DataView(bytes.buffer, resultPtr, RESULT_BLOCK_SIZE);
  }
  const stateSize = (instance.exports as unknown as AbiExports).xxh3_stream_state_size();
  const messageBatch = createMessageBatchWasm(instance);
  assert(stateSize > 0 && stateSize % 16 === 0, 'stream state size');

  function streamed(bytes: Uint8Array): boolean {
    return bytes.byteLength > STREAM_THRESHOLD_BYTES && !instance.inMemory(bytes);
  }

  /**
   * Feeds [start, end) of `bytes` to the streaming states at `statePtrs`, one staged piece at a
   * time; `eachPiece` sees every staged piece (pointer, offset in `bytes`, length) first.
   */
  function feed(
    bytes: Uint8Array,
    start: number,
    end: number,
    pieceBytes: number,
    statePtrs: readonly number[],
    eachPiece?: (ptr: number, offset: number, length: number) => void,
  ): void {
    // The piece slot is taken once: pointers stay valid because nothing below allocates.
    const piecePtr = instance.scratch(ScratchSlot.input, pieceBytes);
    for (let offset = start; offset < end; offset += pieceBytes) {
      const length = Math.min(pieceBytes, end - offset);
      instance.bytes().set(bytes.subarray(offset, offset + length), piecePtr);
      eachPiece?.(piecePtr, offset, length);
      for (const statePtr of statePtrs) abi().xxh3_stream_update(statePtr, piecePtr, length);
    }
  }

  /** XXH3-64 of an input not in WASM memory, through the streaming kernel. */
  function hashStreamed(bytes: Uint8Array, seed: bigint): bigint {
    const statePtr = instance.scratch(ScratchSlot.extra, stateSize);
    abi().xxh3_stream_init(statePtr, BigInt.asIntN(64, seed & U64_MASK));
    feed(bytes, 0, bytes.byteLength, STREAM_PIECE_BYTES, [statePtr]);
    return BigInt.asUintN(64, abi().xxh3_stream_digest(statePtr));
  }

  /**
   * The manifest of an artifact not in WASM memory. The whole's hash streams. A chunk that fits a
   * piece is hashed one-shot where it is staged (pieces hold whole chunks); a larger chunk has a
   * streaming state of its own, fed the same pieces.
   */
  function chunkManifestStreamed(artifact: Uint8Array, chunkSize: number): ChunkManifest {
    const totalSize = artifact.byteLength;
    const chunkCount = Math.ceil(totalSize / chunkSize);
    const chunkChecksums = new BigUint64Array(chunkCount);
    const wholePtr = instance.scratch(ScratchSlot.extra, 2 * stateSize);
    const chunkPtr = wholePtr + stateSize;
    abi().xxh3_stream_init(wholePtr, 0n);
    if (chunkSize <= STREAM_PIECE_BYTES) {
      const pieceBytes = Math.floor(STREAM_PIECE_BYTES / chunkSize) * chunkSize;
      feed(artifact, 0, totalSize, pieceBytes, [wholePtr], (ptr, offset, length) => {
        for (let at = 0; at < length; at += chunkSize) {
          const size = Math.min(chunkSize, length - at);
          chunkChecksums[(offset + at) / chunkSize] = BigInt.asUintN(64, abi().xxh3_64(ptr + at, size, 0n));
        }
      });
    } else {
      for (let index = 0; index < chunkCount; index += 1) {
        const start = index * chunkSize;
        abi().xxh3_stream_init(chunkPtr, 0n);
        feed(artifact, start, Math.min(totalSize, start + chunkSize), STREAM_PIECE_BYTES, [wholePtr, chunkPtr]);
        chunkChecksums[index] = BigInt.asUintN(64, abi().xxh3_stream_digest(chunkPtr));
      }
    }
    const checksum = BigInt.asUintN(64, abi().xxh3_stream_digest(wholePtr));
    return { chunkSize, totalSize, chunkCount, chunkChecksums, checksum };
  }

  return {
    name: 'wasm',
    build: instance.flavor === 'simd' ? 'wasm-simd' : 'wasm-scalar',

    xxh3_64(bytes: Uint8Array, seed = 0n): bigint {
      if (streamed(bytes)) return hashStreamed(bytes, seed);
      const ptr = instance.stage(bytes, ScratchSlot.input);
      const hash = BigInt.asUintN(64, abi().xxh3_64(ptr, bytes.byteLength, BigInt.asIntN(64, seed & U64_MASK)));
      instance.trimSoon();
      return hash;
    },

    trailerWrite(payload: Uint8Array, target: Uint8Array, targetOffset: number): void {
      assert(targetOffset >= 0 && targetOffset + TRAILER_SIZE <= target.byteLength, 'trailer fits');
      if (streamed(payload)) {
        trailerWriteChecksum(hashStreamed(payload, 0n), target, targetOffset);
        return;
      }
      const resultPtr = resultBlock();
      const ptr = instance.stage(payload, ScratchSlot.input);
      abi().trailer_write(ptr, payload.byteLength, resultPtr);
      target.set(instance.bytes().subarray(resultPtr, resultPtr + TRAILER_SIZE), targetOffset);
      instance.trimSoon();
    },

    trailerSeal(payload: Uint8Array): Uint8Array {
      const sealed = new Uint8Array(payload.byteLength + TRAILER_SIZE);
      sealed.set(payload, 0);
      this.trailerWrite(payload, sealed, payload.byteLength);
      return sealed;
    },

    trailerSplit(file: Uint8Array): TrailerSplit {
      // The trailer is parsed in JS (trailer.ts, the TS kernel's logic); only the payload is hashed.
      if (streamed(file)) return trailerSplitWith((payload) => hashStreamed(payload, 0n), file);
      const resultPtr = resultBlock();
      const ptr = instance.stage(file, ScratchSlot.input);
      const status = abi().trailer_split(ptr, file.byteLength, resultPtr);
      const result = view(resultPtr);
      instance.trimSoon();
      if (status === 2) return { status: 'no_trailer', payload: file };
      const payload = file.subarray(0, file.byteLength - TRAILER_SIZE);
      const expected = result.getBigUint64(0, true) | (result.getBigUint64(8, true) << 64n);
      const actual = result.getBigUint64(16, true);
      if (status === 0) return { status: 'valid', payload, checksum: actual };
      assert(status === 1, `trailer_split status ${status}`);
      return { status: 'checksum_mismatch', payload, expected, actual };
    },

    chunkManifest(artifact: Uint8Array, chunkSize: number): ChunkManifest {
      assert(Number.isInteger(chunkSize) && chunkSize > 0 && chunkSize <= 0x7fff_ffff, 'chunk size');
      const totalSize = artifact.byteLength;
      if (streamed(artifact)) return chunkManifestStreamed(artifact, chunkSize);
      const chunkCount = Math.ceil(totalSize / chunkSize);
      const ptr = instance.stage(artifact, ScratchSlot.input);
      const outPtr = instance.scratch(ScratchSlot.output, chunkCount * 8);
      const checksum = BigInt.asUintN(64, abi().chunk_manifest(ptr, totalSize, chunkSize, outPtr));
      const chunkChecksums = new BigUint64Array(chunkCount);
      const out = instance.bytes();
      new Uint8Array(chunkChecksums.buffer).set(out.subarray(outPtr, outPtr + chunkCount * 8));
      instance.trimSoon();
      return { chunkSize, totalSize, chunkCount, chunkChecksums, checksum };
    },

    journalScan(image: Uint8Array): JournalScan {
      const resultPtr = resultBlock();
      const ptr = instance.stage(image, ScratchSlot.input);
      abi().journal_scan(ptr, image.byteLength, MESSAGE_SIZE_MAX, resultPtr);
      const result = view(resultPtr);
      instance.trimSoon();
      const failureOffset = Number(result.getBigInt64(JournalResult.failureOffset, true));
      return {
        validEnd: Number(result.getBigUint64(JournalResult.validEnd, true)),
        entryCount: Number(result.getBigUint64(JournalResult.entryCount, true)),
        lastOp: Number(result.getBigInt64(JournalResult.lastOp, true)),
        failure:
          failureOffset < 0
            ? null
            : journalFailureFromCodes(
                failureOffset,
                result.getUint32(JournalResult.reasonCode, true),
                result.getUint32(JournalResult.tornTail, true) === 1,
              ),
      };
    },

    messageBatchVerify(batch: Uint8Array, deltas: BatchDeltas = BatchDeltas.index) {
      return messageBatch.verify(batch, deltas);
    },
    messageBatchChecksum(batch: Uint8Array, deltas: BatchDeltas = BatchDeltas.index): bigint {
      return messageBatch.checksum(batch, deltas);
    },
    messageBatchSlice(batch: Uint8Array, fromIndex: number, count: number): Uint8Array {
      return messageBatch.slice(batch, fromIndex, count);
    },

    snapshotEncode(snapshot: MetadataSnapshot): Uint8Array {
      const payload = snapshotEncodeWasm(instance, snapshot);
      instance.trimSoon();
      return payload;
    },

    allocate(byteLength: number) {
      return instance.allocate(byteLength);
    },
  };
}

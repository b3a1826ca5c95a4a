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
 * - snapshot encoding: see snapshot-encode-wasm.ts.
 *
 * Results are copied out before returning: nothing handed to callers aliases WASM memory.
 */
import { MESSAGE_SIZE_MAX } from '../constants.js';
import type { MetadataSnapshot } from '../format/snapshot-model.js';
import { assert } from '../stdx/assert.js';
import type { ChunkManifest, JournalScan, Kernels, TrailerSplit } from './kernel.js';
import { TRAILER_SIZE } from './kernel.js';
import { journalFailureFromCodes } from './journal-scan-ts.js';
import { snapshotEncodeWasm } from './snapshot-encode-wasm.js';
import { ScratchSlot, WasmInstance } from './wasm-instance.js';

interface AbiExports {
  xxh3_64(ptr: number, len: number, seed: bigint): bigint;
  trailer_write(ptr: number, len: number, outPtr: number): void;
  trailer_split(ptr: number, len: number, resultPtr: number): number;
  chunk_manifest(ptr: number, len: number, chunkSize: number, outPtr: number): bigint;
  journal_scan(ptr: number, len: number, sizeMax: number, resultPtr: number): void;
}

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
  for (const name of ['xxh3_64', 'trailer_write', 'trailer_split', 'chunk_manifest', 'journal_scan']) {
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

  return {
    name: 'wasm',
    build: instance.flavor === 'simd' ? 'wasm-simd' : 'wasm-scalar',

    xxh3_64(bytes: Uint8Array, seed = 0n): bigint {
      const ptr = instance.stage(bytes, ScratchSlot.input);
      const hash = BigInt.asUintN(64, abi().xxh3_64(ptr, bytes.byteLength, BigInt.asIntN(64, seed & U64_MASK)));
      instance.trimSoon();
      return hash;
    },

    trailerWrite(payload: Uint8Array, target: Uint8Array, targetOffset: number): void {
      assert(targetOffset >= 0 && targetOffset + TRAILER_SIZE <= target.byteLength, 'trailer fits');
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

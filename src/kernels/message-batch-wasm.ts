/**
 * The message-batch kernels over their AssemblyScript exports (assembly/message-batch.ts).
 *
 * ABI (numbers only; pointers and lengths u32):
 * - `message_batch_verify(ptr, len, contiguous, resultPtr)`: BatchVerify in the result block.
 * - `message_batch_checksum(ptr, len, contiguous, resultPtr)`: the batch checksum, or the fault.
 * - `message_batch_slice(ptr, len, fromIndex, count, headerPtr, resultPtr)`: the slice's 256-byte
 *   header written at headerPtr, the byte range of the frames it holds in the result block.
 * `contiguous` is 1 for BatchDeltas.contiguous, 0 for BatchDeltas.index.
 *
 * Memory. A batch already in WASM memory (a KernelBuffer view) is read in place, and the kernels
 * need no memory of their own beyond a 64-byte result block and a 256-byte header slot, taken
 * once: verifying a 64 MiB batch read into a KernelBuffer grows nothing. Any other batch is staged
 * whole (one copy, at most BATCH_SIZE_MAX); a batch that large grows memory past RECYCLE_BYTES,
 * which `trimSoon` returns on the next turn. An input longer than BATCH_SIZE_MAX cannot be a batch
 * and the walk refuses it from its header alone (`batch_length` is at most BATCH_SIZE_MAX, so it
 * is out of bounds or differs from the length), so only its first 256 bytes are staged: a
 * gigabyte of garbage costs no gigabyte of WASM memory.
 */
import {
  BATCH_HEADER_SIZE,
  BATCH_SIZE_MAX,
  BatchDeltas,
  BatchFault,
} from '../format/message-batch.js';
import { assert } from '../stdx/assert.js';
import type { BatchVerify } from './kernel.js';
import { checkSliceArguments, notABatch, sliceOutOfRange } from './message-batch-ts.js';
import { ScratchSlot, type WasmInstance } from './wasm-instance.js';

interface BatchAbi {
  message_batch_verify(ptr: number, len: number, contiguous: number, resultPtr: number): void;
  message_batch_checksum(ptr: number, len: number, contiguous: number, resultPtr: number): void;
  message_batch_slice(
    ptr: number,
    len: number,
    fromIndex: number,
    count: number,
    headerPtr: number,
    resultPtr: number,
  ): void;
}

export const MESSAGE_BATCH_EXPORTS = [
  'message_batch_verify',
  'message_batch_checksum',
  'message_batch_slice',
] as const;

/** Layout of the result block (assembly/message-batch.ts RESULT_*). */
const BatchResult = {
  status: 0,
  fault: 4,
  position: 8,
  messageIndex: 16,
  stored: 24,
  computed: 32,
  messageCount: 40,
  end: 48,
  size: 56,
} as const;
const RESULT_BLOCK_SIZE = 64;

const BatchStatus = { valid: 0, layout: 1, messageChecksum: 2, batchChecksum: 3, range: 4 } as const;

/** The kernel's fault codes are 1 + the index here (assembly/message-batch.ts FAULT_*). */
const BATCH_FAULT_CODES: readonly BatchFault[] = [
  BatchFault.headerTruncated,
  BatchFault.headerField,
  BatchFault.headerReserved,
  BatchFault.length,
  BatchFault.frameTruncated,
  BatchFault.frameReserved,
  BatchFault.offsetDelta,
  BatchFault.tiling,
  BatchFault.count,
  BatchFault.empty,
];

const U32_MAX = 0xffff_ffff;

interface Placed {
  readonly ptr: number;
  readonly len: number;
  readonly resultPtr: number;
  readonly headerPtr: number;
}

interface Layout {
  readonly fault: BatchFault;
  readonly position: number;
  readonly messageIndex: number;
}

export interface MessageBatchWasm {
  verify(batch: Uint8Array, deltas: BatchDeltas): BatchVerify;
  checksum(batch: Uint8Array, deltas: BatchDeltas): bigint;
  slice(batch: Uint8Array, fromIndex: number, count: number): Uint8Array;
}

export function createMessageBatchWasm(instance: WasmInstance): MessageBatchWasm {
  assert(BatchResult.size <= RESULT_BLOCK_SIZE, 'batch result fits its block');
  // Re-read per call: a recycle between turns replaces the exports (wasm-instance.ts).
  const abi = (): BatchAbi => instance.exports as unknown as BatchAbi;

  function place(batch: Uint8Array): Placed {
    const len = batch.byteLength;
    // A batch in WASM memory is read in place. Its pointer is taken before the scratch blocks:
    // taking them may grow memory, which detaches the caller's view (not the bytes under it).
    const residentPtr = instance.inMemory(batch) ? batch.byteOffset : -1;
    const resultPtr = instance.scratch(ScratchSlot.result, RESULT_BLOCK_SIZE);
    const headerPtr = instance.scratch(ScratchSlot.extra, BATCH_HEADER_SIZE);
    if (residentPtr >= 0) return { ptr: residentPtr, len, resultPtr, headerPtr };
    const staged = len > BATCH_SIZE_MAX ? batch.subarray(0, BATCH_HEADER_SIZE) : batch;
    return { ptr: instance.stage(staged, ScratchSlot.input), len, resultPtr, headerPtr };
  }

  function result(placed: Placed): DataView {
    return new DataView(instance.bytes().buffer, placed.resultPtr, RESULT_BLOCK_SIZE);
  }

  function layout(view: DataView): Layout {
    const code = view.getUint32(BatchResult.fault, true);
    const fault = BATCH_FAULT_CODES[code - 1];
    assert(fault !== undefined, `message batch fault code ${code}`);
    const position = Number(view.getBigUint64(BatchResult.position, true));
    const messageIndex = Number(view.getBigInt64(BatchResult.messageIndex, true));
    return { fault, position, messageIndex };
  }

  function decodeVerify(view: DataView): BatchVerify {
    const status = view.getUint32(BatchResult.status, true);
    const stored = view.getBigUint64(BatchResult.stored, true);
    const computed = view.getBigUint64(BatchResult.computed, true);
    switch (status) {
      case BatchStatus.valid: {
        const messageCount = view.getUint32(BatchResult.messageCount, true);
        return { status: 'valid', messageCount, checksum: computed };
      }
      case BatchStatus.layout:
        return { status: 'layout', ...layout(view) };
      case BatchStatus.messageChecksum: {
        const messageIndex = Number(view.getBigInt64(BatchResult.messageIndex, true));
        const position = Number(view.getBigUint64(BatchResult.position, true));
        return { status: 'message_checksum', messageIndex, position, stored, computed };
      }
      case BatchStatus.batchChecksum:
        return { status: 'batch_checksum', stored, computed };
      default:
        throw new Error(`message_batch_verify status ${status}`);
    }
  }

  return {
    verify(batch: Uint8Array, deltas: BatchDeltas): BatchVerify {
      const placed = place(batch);
      const contiguous = deltas === BatchDeltas.index ? 0 : 1;
      abi().message_batch_verify(placed.ptr, placed.len, contiguous, placed.resultPtr);
      const verify = decodeVerify(result(placed));
      instance.trimSoon();
      return verify;
    },

    checksum(batch: Uint8Array, deltas: BatchDeltas): bigint {
      const placed = place(batch);
      const contiguous = deltas === BatchDeltas.index ? 0 : 1;
      abi().message_batch_checksum(placed.ptr, placed.len, contiguous, placed.resultPtr);
      const view = result(placed);
      instance.trimSoon();
      if (view.getUint32(BatchResult.status, true) !== BatchStatus.valid) {
        const { fault, position } = layout(view);
        throw notABatch('messageBatchChecksum', fault, position);
      }
      return view.getBigUint64(BatchResult.computed, true);
    },

    slice(batch: Uint8Array, fromIndex: number, count: number): Uint8Array {
      checkSliceArguments(fromIndex, count);
      const placed = place(batch);
      // Clamping to u32 changes nothing: a batch holds fewer than 2^32 frames.
      const from = Math.min(fromIndex, U32_MAX);
      const { ptr, len, headerPtr, resultPtr } = placed;
      abi().message_batch_slice(ptr, len, from, Math.min(count, U32_MAX), headerPtr, resultPtr);
      const view = result(placed);
      const status = view.getUint32(BatchResult.status, true);
      if (status === BatchStatus.layout) {
        instance.trimSoon();
        const { fault, position } = layout(view);
        throw notABatch('messageBatchSlice', fault, position);
      }
      const messageCount = view.getUint32(BatchResult.messageCount, true);
      if (status === BatchStatus.range) {
        instance.trimSoon();
        throw sliceOutOfRange(fromIndex, messageCount);
      }
      assert(status === BatchStatus.valid, `message_batch_slice status ${status}`);
      const blobStart = Number(view.getBigUint64(BatchResult.position, true));
      const blobEnd = Number(view.getBigUint64(BatchResult.end, true));
      assert(BATCH_HEADER_SIZE <= blobStart && blobStart < blobEnd && blobEnd <= len, 'slice range');
      const slice = new Uint8Array(BATCH_HEADER_SIZE + blobEnd - blobStart);
      const memory = instance.bytes();
      slice.set(memory.subarray(headerPtr, headerPtr + BATCH_HEADER_SIZE), 0);
      slice.set(memory.subarray(ptr + blobStart, ptr + blobEnd), BATCH_HEADER_SIZE);
      instance.trimSoon();
      return slice;
    },
  };
}

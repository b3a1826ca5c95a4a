/**
 * The TypeScript kernels: the readable reference that the WASM build must match byte for byte,
 * and the fallback when WebAssembly (or its SIMD build) is unavailable.
 */
import type { BatchDeltas } from '../format/message-batch.js';
import type { MetadataSnapshot } from '../format/snapshot-model.js';
import { chunkManifestTs } from './chunk-manifest-ts.js';
import type { KernelBuffer, Kernels } from './kernel.js';
import { journalScanTs } from './journal-scan-ts.js';
import { messageBatchChecksumTs, messageBatchSliceTs, messageBatchVerifyTs } from './message-batch-ts.js';
import { snapshotEncodeTs } from './snapshot-encode-ts.js';
import { trailerSealWith, trailerSplitWith, trailerWriteWith } from './trailer.js';
import { xxh3_64 } from './xxh3-ts.js';

export function createTsKernels(): Kernels {
  return {
    name: 'ts',
    build: 'ts',
    xxh3_64(bytes: Uint8Array, seed = 0n): bigint {
      return xxh3_64(bytes, seed);
    },
    trailerSeal(payload: Uint8Array): Uint8Array {
      return trailerSealWith(xxh3_64, payload);
    },
    trailerWrite(payload: Uint8Array, target: Uint8Array, targetOffset: number): void {
      trailerWriteWith(xxh3_64, payload, target, targetOffset);
    },
    trailerSplit(file: Uint8Array) {
      return trailerSplitWith(xxh3_64, file);
    },
    chunkManifest(artifact: Uint8Array, chunkSize: number) {
      return chunkManifestTs(artifact, chunkSize);
    },
    journalScan(image: Uint8Array) {
      return journalScanTs(image);
    },
    messageBatchVerify(batch: Uint8Array, deltas?: BatchDeltas) {
      return messageBatchVerifyTs(batch, deltas);
    },
    messageBatchChecksum(batch: Uint8Array, deltas?: BatchDeltas): bigint {
      return messageBatchChecksumTs(batch, deltas);
    },
    messageBatchSlice(batch: Uint8Array, fromIndex: number, count: number): Uint8Array {
      return messageBatchSliceTs(batch, fromIndex, count);
    },
    snapshotEncode(snapshot: MetadataSnapshot): Uint8Array {
      return snapshotEncodeTs(snapshot);
    },
    allocate(byteLength: number): KernelBuffer {
      let bytes: Uint8Array | null = new Uint8Array(byteLength);
      return {
        byteLength,
        bytes(): Uint8Array {
          if (bytes === null) throw new Error('KernelBuffer used after release');
          return bytes;
        },
        release(): void {
          if (bytes === null) throw new Error('KernelBuffer released twice');
          bytes = null;
        },
      };
    },
  };
}

/**
 * vrmeta's public TypeScript API (the package `exports`).
 */
export { loadKernels, parseKernelsMode, setKernelsWarn } from './kernels/index.js';
export type {
  ChunkManifest,
  JournalFailure,
  JournalFailureReason,
  JournalScan,
  KernelBuffer,
  Kernels,
  KernelsMode,
  KernelsName,
  TrailerSplit,
} from './kernels/kernel.js';
export type * from './metadata/snapshot-model.js';

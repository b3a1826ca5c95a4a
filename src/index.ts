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
export type * from './format/snapshot-model.js';
export { VrmetaClient, IggyHttpError, IggyBinaryError, U64_MAX as HTTP_U64_MAX } from './client/client.js';
export { BinaryClient } from './transport/binary-client.js';
export type { BinaryClientOptions } from './transport/binary-client.js';
export type { ClientOptions, CreateTopicInput, CreateUserInput, Id, ResponseMeta, U64, UpdateTopicInput } from './client/client.js';
export type { NodeConfig, ConfigKey } from './node/config.js';

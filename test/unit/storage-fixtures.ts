/**
 * Shared fixtures for the storage suites: the kernel implementations that load, hash-chained
 * prepare frames (built field by field by src/testing/wal-image.ts, independent of the wire
 * codec), small snapshot payloads, temp directories, and a recording logger.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKernels } from '../../src/kernels/index.js';
import type { Kernels } from '../../src/kernels/kernel.js';
import { SNAPSHOT_FORMAT_VERSION, type MetadataMachineSnapshot, type MetadataSnapshot } from '../../src/format/snapshot-model.js';
import { checkpointModelOf } from '../../src/storage/metadata-checkpoint-codec.js';
import { buildPrepare, identityOf } from '../../src/testing/wal-image.js';
import type { Logger, LogLevel, StorageRequest, VsrState } from '../../src/vsr/io.js';

/** The cluster id src/testing/wal-image.ts stamps on every prepare. */
export const CLUSTER = 0x1234_5678_9abc_def0n;

export interface KernelVariant {
  readonly label: string;
  readonly kernels: Kernels;
}

/**
 * The TypeScript and the WASM kernels. WASM is required, as in test/kernels (`npm install` builds
 * it, and a suite that silently skipped it would prove nothing); VRMETA_TEST_ALLOW_NO_WASM=1 runs
 * the TypeScript kernels alone, with a note.
 */
export function kernelVariants(): KernelVariant[] {
  const variants: KernelVariant[] = [{ label: 'ts', kernels: loadKernels('ts') }];
  try {
    variants.push({ label: 'wasm', kernels: loadKernels('wasm') });
  } catch (error) {
    if (process.env['VRMETA_TEST_ALLOW_NO_WASM'] !== '1') throw error;
    process.stderr.write(`storage tests: WASM kernels unavailable, running TS only (${(error as Error).message})\n`);
  }
  return variants;
}

export const tsKernels = (): Kernels => loadKernels('ts');

export interface Prepare {
  readonly op: number;
  readonly frame: Uint8Array;
  readonly identity: bigint;
}

/**
 * A sealed prepare for `op` chaining to `parent`. `generation` varies the body size, so the same
 * op prepared again (after a truncation) gets a different identity.
 */
export function prepare(op: number, parent: bigint, generation = 0, bodySize?: number): Prepare {
  const size = bodySize ?? 8 + ((op * 7 + generation * 31) % 120);
  const frame = buildPrepare(op, parent, size, 1 + generation);
  return { op, frame, identity: identityOf(frame) };
}

/** `count` prepares from `firstOp`, the first chaining to `parent`. */
export function chain(firstOp: number, count: number, parent = 0n, generation = 0): Prepare[] {
  const out: Prepare[] = [];
  let previous = parent;
  for (let index = 0; index < count; index++) {
    const next = prepare(firstOp + index, previous, generation);
    out.push(next);
    previous = next.identity;
  }
  return out;
}

export function snapshotModel(op: number): MetadataSnapshot {
  return {
    version: SNAPSHOT_FORMAT_VERSION,
    createdAtUs: 1_700_000_000_000_000 + op,
    sequenceNumber: op,
    users: [],
    streams: [],
    clientTable: [],
    revokedTokens: [],
    writerRelease: 1,
  };
}

/** The canonical payload of a small snapshot at checkpoint `op`. */
export function snapshotPayload(kernels: Kernels, op: number): Uint8Array {
  return kernels.snapshotEncode(snapshotModel(op));
}

/** The checkpoint write of that small snapshot (its payload is `snapshotPayload(kernels, op)`). */
export function checkpointWrite(op: number): StorageRequest<MetadataMachineSnapshot> {
  return { kind: 'checkpoint_write', op, model: checkpointModelOf(snapshotModel(op)), chunkSize: 4096 };
}

export function vsrState(overrides: Partial<VsrState> = {}): VsrState {
  return {
    cluster: CLUSTER,
    replica: 0,
    replicaCount: 3,
    view: 1,
    logView: 1,
    commitMax: 0,
    checkpointOp: 0,
    checkpointChecksum: 0n,
    flags: 0,
    ...overrides,
  };
}

export interface LogRecord {
  readonly level: LogLevel;
  readonly event: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

export function recordingLogger(): Logger & { records: LogRecord[] } {
  const records: LogRecord[] = [];
  return {
    records,
    log(level, event, fields = {}) {
      records.push({ level, event, fields });
    },
  };
}

/** A fresh directory under the OS temp dir; `cleanup` removes it. */
export function tempDirectory(prefix = 'vrmeta-storage-'): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/**
 * The checkpoint encoder's thread (node:worker_threads): one worker per checkpoint, started by
 * `workerCheckpointEncoder` (checkpoint-encoder.ts). It receives the model captured at the
 * checkpoint op (structured clone), encodes it with the metadata checkpoint codec and the
 * replica's kernel implementation, computes the chunk manifest, posts the payload back as a
 * transferred ArrayBuffer and exits, so its WASM memory (several times the snapshot at its peak)
 * is returned to the system at once.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadKernels } from '../kernels/index.js';
import type { KernelsName } from '../kernels/kernel.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import { encodeCheckpoint } from '../storage/checkpoint-encode.js';
import { METADATA_CHECKPOINT_CODEC } from '../storage/metadata-checkpoint-codec.js';
import type { CheckpointModel } from '../vsr/state-machine.js';

export interface CheckpointWorkerData {
  readonly kernels: KernelsName;
}

export interface CheckpointWorkerRequest {
  readonly model: CheckpointModel<MetadataMachineSnapshot>;
  readonly chunkSize: number;
}

export type CheckpointWorkerReply =
  | { readonly ok: true; readonly payload: Uint8Array; readonly checksum: bigint; readonly chunkChecksums: readonly bigint[] }
  | { readonly ok: false; readonly error: string };

const port = parentPort;
if (port !== null) {
  const { kernels: mode } = workerData as CheckpointWorkerData;
  port.once('message', (request: CheckpointWorkerRequest) => {
    let reply: CheckpointWorkerReply;
    try {
      const written = encodeCheckpoint(loadKernels(mode), METADATA_CHECKPOINT_CODEC, request.model, request.chunkSize);
      reply = { ok: true, payload: written.payload, checksum: written.checksum, chunkChecksums: written.chunkChecksums };
    } catch (error) {
      reply = { ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
    // The payload is this thread's own copy (never kernel memory): hand its buffer over.
    port.postMessage(reply, reply.ok ? [reply.payload.buffer as ArrayBuffer] : []);
    port.close();
  });
}

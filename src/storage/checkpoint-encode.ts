/**
 * A checkpoint's encode: the canonical payload of a captured model (by the state machine's codec)
 * and, in the same pass over the bytes, its chunk manifest (the whole-payload XXH3-64 is the
 * checkpoint id). Pure and synchronous: the storage executor runs it in-thread (simulator,
 * shutdown), the node's checkpoint worker on its own thread with the same kernel implementation.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { CheckpointWritten } from '../vsr/io.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import type { CheckpointCodec } from './checkpoint-codec.js';

export function encodeCheckpoint<S>(
  kernels: Kernels,
  codec: CheckpointCodec<S>,
  model: CheckpointModel<S>,
  chunkSize: number,
): CheckpointWritten {
  const payload = codec.encode(kernels, model);
  const chunks = kernels.chunkManifest(payload, chunkSize);
  return { payload, checksum: chunks.checksum, chunkChecksums: [...chunks.chunkChecksums] };
}

/**
 * A checkpoint's encode: the canonical payload of a captured snapshot model and, in the same
 * pass over the bytes, its chunk manifest (the whole-payload XXH3-64 is the checkpoint id). Pure
 * and synchronous: the storage executor runs it in-thread (simulator, shutdown), the node's
 * checkpoint worker on its own thread with the same kernel implementation.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { MetadataSnapshot } from '../format/snapshot-model.js';
import type { CheckpointWritten } from '../vsr/io.js';

export function encodeCheckpoint(kernels: Kernels, snapshot: MetadataSnapshot, chunkSize: number): CheckpointWritten {
  const payload = kernels.snapshotEncode(snapshot);
  const chunks = kernels.chunkManifest(payload, chunkSize);
  return { payload, checksum: chunks.checksum, chunkChecksums: [...chunks.chunkChecksums] };
}

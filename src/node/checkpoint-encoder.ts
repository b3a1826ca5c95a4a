/**
 * Encodes a checkpoint off the event loop: a worker thread per checkpoint (checkpoint-worker.ts)
 * with the replica's kernel implementation. The model goes in by structured clone (the state keeps
 * its own: nothing is transferred), the payload comes back as a transferred ArrayBuffer.
 *
 * A worker per checkpoint rather than a long-lived one: it exits when done, which returns its WASM
 * memory (grown to several times the snapshot while encoding and hashing) at once; the start-up
 * (~tens of ms, off the event loop) is small next to a checkpoint interval.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { KernelsName } from '../kernels/kernel.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';
import type { CheckpointWritten } from '../vsr/io.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import type { CheckpointWorkerData, CheckpointWorkerReply, CheckpointWorkerRequest } from './checkpoint-worker.js';

/**
 * Starts encoding `model`; `done` runs once, on a later turn, with the result or the error
 * (a worker that failed, crashed or exited without answering). The returned function abandons
 * the encode (terminates the worker; `done` is not called afterwards).
 */
export type CheckpointEncoder<S> = (
  model: CheckpointModel<S>,
  chunkSize: number,
  done: (result: CheckpointWritten | Error) => void,
) => () => void;

/**
 * The worker's entry, next to this module: dist/src/node and dist/bundle both emit
 * `checkpoint-worker.js` beside the code that starts it. From the TypeScript sources (tests), the
 * built copy in dist/src/node.
 */
export function checkpointWorkerPath(): string {
  const candidates = [
    new URL('./checkpoint-worker.js', import.meta.url),
    new URL('../../dist/src/node/checkpoint-worker.js', import.meta.url),
  ].map((url) => fileURLToPath(url));
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined) throw new Error(`checkpoint worker entry not found (looked for ${candidates.join(', ')}; run npm run build:ts)`);
  return found;
}

/**
 * The metadata plane's worker encoder: the worker (checkpoint-worker.ts) encodes with the metadata
 * checkpoint codec, the codec of the snapshot file it writes through.
 */
export function workerCheckpointEncoder(
  kernels: KernelsName,
  entry: string = checkpointWorkerPath(),
): CheckpointEncoder<MetadataMachineSnapshot> {
  return (model, chunkSize, done) => {
    let settled = false;
    const settle = (result: CheckpointWritten | Error): void => {
      if (settled) return;
      settled = true;
      done(result);
    };
    const workerData: CheckpointWorkerData = { kernels };
    const worker = new Worker(entry, { workerData });
    worker.on('message', (reply: CheckpointWorkerReply) => {
      if (reply.ok) {
        settle({ payload: reply.payload, checksum: reply.checksum, chunkChecksums: reply.chunkChecksums });
      } else {
        settle(new Error(`checkpoint encode failed in its worker: ${reply.error}`));
      }
    });
    worker.on('error', (error) => settle(new Error(`checkpoint worker failed: ${error.message}`)));
    worker.on('exit', (code) => settle(new Error(`checkpoint worker exited (code ${code}) without a result`)));
    const request: CheckpointWorkerRequest = { model, chunkSize };
    try {
      worker.postMessage(request);
    } catch (error) {
      // A model that cannot be cloned is a bug in the core, not a disk error.
      void worker.terminate();
      throw error;
    }
    return () => {
      settled = true;
      void worker.terminate();
    };
  };
}

/**
 * The storage's view of a checkpoint payload: the replica core hands over a `CheckpointModel<S>`
 * and takes one back, never bytes it has to understand; the codec for `S` turns one into the
 * other. Each plane has its own (the metadata plane's is metadata-checkpoint-codec.ts), while
 * the snapshot file, its trailer, the chunk manifest and the checkpoint id (XXH3-64 of the
 * payload) stay the same for all of them.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { CheckpointModel } from '../vsr/state-machine.js';

/** A payload that does not decode: the cause, and the byte offset of the failing value. */
export interface CheckpointDecodeFailure {
  readonly ok: false;
  readonly message: string;
  readonly offset: number;
}

export type CheckpointDecoded<S> =
  | { readonly ok: true; readonly model: CheckpointModel<S> }
  | CheckpointDecodeFailure;

export interface CheckpointCodec<S> {
  /**
   * The canonical payload of `model`: one model, one byte string, so replicas at the same op
   * agree on the checkpoint id. Owned bytes, never kernel memory.
   */
  encode(kernels: Kernels, model: CheckpointModel<S>): Uint8Array;
  /**
   * The format version the payload declares, or null when it declares none; peeked before a
   * decode so a payload from another build is refused with the version it holds.
   */
  formatVersion(payload: Uint8Array): number | null;
  /** The versions this build decodes (named in a refusal). */
  readonly versionsReadable: readonly number[];
  /** Validates and decodes untrusted bytes: a failure is a result, never a throw. */
  decode(payload: Uint8Array): CheckpointDecoded<S>;
}

/** Whether `codec` decodes payloads of `version` (null: the payload declares none). */
export function codecReadsVersion<S>(codec: CheckpointCodec<S>, version: number | null): boolean {
  return version !== null && codec.versionsReadable.includes(version);
}

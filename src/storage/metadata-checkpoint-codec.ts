/**
 * The metadata plane's checkpoint codec: a `CheckpointModel<MetadataMachineSnapshot>` is the
 * `MetadataSnapshot` of src/format/snapshot-model.ts with its fields regrouped, and its payload
 * is that snapshot's canonical msgpack (the `snapshotEncode` kernel), so the bytes on disk and on
 * the wire, and with them the checkpoint ids, are those of the snapshot format itself.
 */
import { decodeSnapshot, peekSnapshotVersion, SnapshotDecodeError } from '../format/snapshot-codec.js';
import {
  SNAPSHOT_FORMAT_VERSION,
  SNAPSHOT_FORMAT_VERSIONS_READABLE,
  type MetadataMachineSnapshot,
  type MetadataSnapshot,
} from '../format/snapshot-model.js';
import type { CheckpointModel } from '../vsr/state-machine.js';
import type { CheckpointCodec } from './checkpoint-codec.js';

/** The snapshot the format encodes for `model` (written at the current format version). */
export function metadataSnapshotOf(model: CheckpointModel<MetadataMachineSnapshot>): MetadataSnapshot {
  return {
    version: SNAPSHOT_FORMAT_VERSION,
    createdAtUs: model.createdAtUs,
    sequenceNumber: model.op,
    users: model.machine.users,
    streams: model.machine.streams,
    clientTable: model.clientTable,
    writerRelease: model.writerRelease,
    revokedTokens: model.machine.revokedTokens,
  };
}

/** The model a decoded snapshot carries (its format version was checked by the reader). */
export function checkpointModelOf(snapshot: MetadataSnapshot): CheckpointModel<MetadataMachineSnapshot> {
  return {
    op: snapshot.sequenceNumber,
    createdAtUs: snapshot.createdAtUs,
    writerRelease: snapshot.writerRelease,
    clientTable: snapshot.clientTable,
    machine: { users: snapshot.users, streams: snapshot.streams, revokedTokens: snapshot.revokedTokens },
  };
}

export const METADATA_CHECKPOINT_CODEC: CheckpointCodec<MetadataMachineSnapshot> = {
  encode: (kernels, model) => kernels.snapshotEncode(metadataSnapshotOf(model)),
  formatVersion: peekSnapshotVersion,
  versionsReadable: SNAPSHOT_FORMAT_VERSIONS_READABLE,
  decode(payload) {
    try {
      return { ok: true, model: checkpointModelOf(decodeSnapshot(payload)) };
    } catch (error) {
      if (!(error instanceof SnapshotDecodeError)) throw error;
      return { ok: false, message: error.message, offset: error.offset };
    }
  },
};

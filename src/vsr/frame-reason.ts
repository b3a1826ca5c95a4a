/**
 * Why a frame was rejected. Stable snake_case strings: they are metric labels and log fields, and
 * tests pin them. Grouped by the stage that detects them, in the order the decoder checks.
 */
import { zeroedCounters } from '../stdx/counters.js';
export const FrameRejection = {
  // Framing: detected from the first 52 bytes, before the body is buffered.
  /** Fewer than 256 bytes (one-shot decode only; a stream just waits for more). */
  headerTruncated: 'header_truncated',
  sizeBelowHeader: 'size_below_header',
  sizeAboveMax: 'size_above_max',
  /** One-shot decode: the buffer is not exactly `size` bytes long. */
  sizeMismatch: 'size_mismatch',

  // Integrity: checked before any field is trusted.
  /** `command` is Reserved (0) or above COMMAND_MAX. */
  commandInvalid: 'command_invalid',
  /** Frame seal (XXH3-64 of bytes 16..256) does not match `checksum`. */
  sealMismatch: 'seal_mismatch',
  /** Prepare identity does not match `checksum`. */
  identityMismatch: 'identity_mismatch',
  bodyChecksumMismatch: 'body_checksum_mismatch',

  // Structure: the bytes do not map onto the typed header.
  reservedNonzero: 'reserved_nonzero',
  u64AboveSafeInteger: 'u64_above_safe_integer',
  /** The frame belongs to another cluster (checked only when the decoder knows its cluster). */
  clusterMismatch: 'cluster_mismatch',

  // Semantics: validate() (iggy-metadata-plane.md §1.6, hardened).
  sizeNotHeaderOnly: 'size_not_header_only',
  bodyAboveMax: 'body_above_max',
  releaseNonzero: 'release_nonzero',
  replicaOutOfRange: 'replica_out_of_range',
  clientRequired: 'client_required',
  operationReserved: 'operation_reserved',
  registerSessionNonzero: 'register_session_nonzero',
  sessionRequired: 'session_required',
  legacyCommandUnexpected: 'legacy_command_unexpected',
  evictionReasonInvalid: 'eviction_reason_invalid',
  protocolWindowInvalid: 'protocol_window_invalid',
  commitAboveOp: 'commit_above_op',
  logViewAboveView: 'log_view_above_view',
  suffixNotWholeHeaders: 'suffix_not_whole_headers',
  suffixTooLong: 'suffix_too_long',
  bitsetBeyondSuffix: 'bitset_beyond_suffix',
  prepareChecksumRequired: 'prepare_checksum_required',
  incarnationRequired: 'incarnation_required',
  nonceRequired: 'nonce_required',
  opRangeInvalid: 'op_range_invalid',
  flagInvalid: 'flag_invalid',
  targetFlagsConflict: 'target_flags_conflict',
  manifestSizeInvalid: 'manifest_size_invalid',
  commitOpAboveCommitMax: 'commit_op_above_commit_max',
  /** A checkpoint op without an id, or an id without an op (op 0 is the genesis, id 0). */
  checkpointInvalid: 'checkpoint_invalid',
  chunkLenZero: 'chunk_len_zero',
  chunkLenAboveMax: 'chunk_len_above_max',
  chunkEmpty: 'chunk_empty',
  artifactOutOfRange: 'artifact_out_of_range',
  /** A store range that names no offsets (`to` not above `from`), or an answer that moves none. */
  storeRangeEmpty: 'store_range_empty',
  outcomeInvalid: 'outcome_invalid',
  resultFieldsNonzero: 'result_fields_nonzero',
  authModeInvalid: 'auth_mode_invalid',
  authStatusInvalid: 'auth_status_invalid',
  authNonceRequired: 'auth_nonce_required',
  authMacUnexpected: 'auth_mac_unexpected',
  /** Operation Batch in a Request or a Reply: it names a prepare's envelope, never one request. */
  operationBatchMisplaced: 'operation_batch_misplaced',
  /** A batch prepare whose client, request, request checksum or user id is non-zero. */
  batchHeaderFieldsNonzero: 'batch_header_fields_nonzero',
  /** Body: a batch prepare's envelope does not decode (src/vsr/batch.ts says why). */
  batchEnvelopeInvalid: 'batch_envelope_invalid',
} as const;
export type FrameRejection = (typeof FrameRejection)[keyof typeof FrameRejection];

export const FRAME_REJECTIONS: readonly FrameRejection[] = Object.values(FrameRejection);

/** A zeroed counter per reason, for metrics that must show every label from the start. */
export function frameRejectionCounters(): Record<FrameRejection, number> {
  return zeroedCounters(FRAME_REJECTIONS);
}

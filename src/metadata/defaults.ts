/**
 * Topic settings: the primary resolves every "server default" before proposing, so the committed
 * body carries final values and apply never consults node configuration (a config-dependent apply
 * would fork replicas configured differently; iggy-metadata-plane.md §2.2, "prepare_request
 * rewrites CreateTopic ... primary resolves defaults").
 *
 * Iggy's sentinels (HTTP and binary API): message_expiry 0 = server default, u64::MAX = never
 * expire; max_topic_size 0 = server default, u64::MAX = unlimited; an absent replication factor is
 * 1, and 0 is InvalidReplicationFactor. Defaults match Iggy's `DEFAULT_MESSAGE_EXPIRY`
 * (never), `DEFAULT_MAX_TOPIC_SIZE` (unlimited) and compression `none`.
 */
import { ErrorCode } from './errors.js';
import { CompressionAlgorithm, U64_MAX } from '../format/snapshot-model.js';

/** Iggy `DEFAULT_SEGMENT_SIZE` (1 GiB): a topic cap below one segment cannot be enforced. */
export const SEGMENT_SIZE_BYTES = 1024n * 1024n * 1024n;

export interface TopicDefaults {
  readonly messageExpiryUs: bigint;
  readonly maxTopicSizeBytes: bigint;
  readonly compressionAlgorithm: CompressionAlgorithm;
  readonly replicationFactor: number;
}

export const TOPIC_DEFAULTS: TopicDefaults = Object.freeze({
  messageExpiryUs: U64_MAX,
  maxTopicSizeBytes: U64_MAX,
  compressionAlgorithm: CompressionAlgorithm.none,
  replicationFactor: 1,
});

/** What a client sent: `undefined`/`null` (absent) and the 0 sentinels mean "server default". */
export interface TopicSettingsRequest {
  readonly messageExpiryUs?: bigint | null;
  readonly maxTopicSizeBytes?: bigint | null;
  readonly compressionAlgorithm?: number | null;
  readonly replicationFactor?: number | null;
}

export interface TopicSettings {
  readonly messageExpiryUs: bigint;
  readonly maxTopicSizeBytes: bigint;
  readonly compressionAlgorithm: number;
  readonly replicationFactor: number;
}

/**
 * Resolves a CreateTopic request's settings against this node's defaults. Invalid values pass
 * through unchanged (a replication factor of 0, an unknown compression code) so that precheck and
 * apply reject them with the same code on every replica.
 */
export function resolveTopicSettings(
  request: TopicSettingsRequest,
  defaults: TopicDefaults = TOPIC_DEFAULTS,
): TopicSettings {
  const expiry = request.messageExpiryUs ?? 0n;
  const maxSize = request.maxTopicSizeBytes ?? 0n;
  return {
    messageExpiryUs: expiry === 0n ? defaults.messageExpiryUs : expiry,
    maxTopicSizeBytes: maxSize === 0n ? defaults.maxTopicSizeBytes : maxSize,
    compressionAlgorithm: request.compressionAlgorithm ?? defaults.compressionAlgorithm,
    replicationFactor: request.replicationFactor ?? defaults.replicationFactor,
  };
}

export function validateCompression(code: number): ErrorCode {
  // Iggy's CompressionAlgorithm::from_code answers InvalidCommand for an unknown code.
  const known = code === CompressionAlgorithm.none || code === CompressionAlgorithm.gzip;
  return known ? ErrorCode.ok : ErrorCode.invalidCommand;
}

/** A resolved expiry: 0 (the unresolved sentinel) never reaches the log. */
export function validateMessageExpiry(expiryUs: bigint): ErrorCode {
  return expiryUs > 0n && expiryUs <= U64_MAX ? ErrorCode.ok : ErrorCode.invalidCommand;
}

/**
 * Iggy `validate_topic_size_floor`: a cap is unlimited or at least one segment of the topic's
 * segment size (its `segment_size` option, 1 GiB by default).
 */
export function validateMaxTopicSize(
  sizeBytes: bigint,
  segmentSizeBytes: bigint = SEGMENT_SIZE_BYTES,
): ErrorCode {
  if (sizeBytes === 0n || sizeBytes > U64_MAX) return ErrorCode.invalidCommand;
  if (sizeBytes !== U64_MAX && sizeBytes < segmentSizeBytes) return ErrorCode.invalidTopicSize;
  return ErrorCode.ok;
}

export function validateReplicationFactor(factor: number): ErrorCode {
  const fits = Number.isInteger(factor) && factor >= 1 && factor <= 0xff;
  return fits ? ErrorCode.ok : ErrorCode.invalidReplicationFactor;
}

/** The committed-body rule for resolved settings, in a fixed order so every caller agrees. */
export function validateTopicSettings(
  settings: TopicSettings,
  segmentSizeBytes: bigint = SEGMENT_SIZE_BYTES,
): ErrorCode {
  let code: ErrorCode = validateCompression(settings.compressionAlgorithm);
  if (code === ErrorCode.ok) code = validateMessageExpiry(settings.messageExpiryUs);
  if (code === ErrorCode.ok) {
    code = validateMaxTopicSize(settings.maxTopicSizeBytes, segmentSizeBytes);
  }
  if (code === ErrorCode.ok) code = validateReplicationFactor(settings.replicationFactor);
  return code;
}

/**
 * The partition plane's command and error codes (`core/binary_protocol/src/codes.rs`,
 * `core/common/src/error/iggy_error.rs`, cc269ef70; iggy-partition-plane.md §10, §11). The values
 * are Iggy's: SDKs switch on them, so they are fixed by the protocol, not chosen here. The names
 * match the client wire's `CommandCode` and the metadata plane's `ErrorCode`, which hold the same
 * values for the commands and errors they share.
 */

/** Client command codes of the data plane (RequestHeader code; §11). */
export const DataCommand = {
  /** NonReplicated: answered from this node's committed state. */
  pollMessages: 100,
  /** Replicated as partition operation 160. */
  sendMessages: 101,
  /** NonReplicated; Iggy answers FeatureUnavailable. */
  flushUnsavedBuffer: 102,
  /** NonReplicated. */
  getConsumerOffset: 120,
  /** Replicated as partition operation 161 (or applied on the primary alone with NoAck). */
  storeConsumerOffset: 121,
  /** Replicated as partition operation 162 (or applied on the primary alone with NoAck). */
  deleteConsumerOffset: 122,
  /** A metadata operation (138 → 68) that removes a partition's oldest segments. */
  deleteSegments: 503,
  /** Metadata operations 148 and 149. */
  joinConsumerGroup: 604,
  leaveConsumerGroup: 605,
  /** NonReplicated: the caller's current assignment in a group. */
  syncConsumerGroup: 606,
} as const;
export type DataCommand = (typeof DataCommand)[keyof typeof DataCommand];

/** Iggy error codes the data plane emits (§10), carried in a reply's status or result. */
export const DataError = {
  /** A malformed body, an admission failure, an unknown strategy or consumer kind. */
  invalidCommand: 3,
  /** An HTTP body or query value that is not of its field's type (no more specific code). */
  invalidFormat: 4,
  /** FlushUnsavedBuffer. */
  featureUnavailable: 5,
  /** No partitions for balanced or key partitioning; a group op without a partition. */
  invalidIdentifier: 6,
  /** The namespace of a request does not resolve. */
  resourceNotFound: 20,
  unauthenticated: 40,
  unauthorized: 41,
  transientNotCommitted: 57,
  /** Not the caught-up primary of the partition, or the partition is not materialised yet. */
  transientNotAccepted: 58,
  cannotDecryptData: 72,
  streamIdNotFound: 1009,
  topicIdNotFound: 2010,
  partitionNotFound: 3007,
  /** A delete of an offset that is not stored. */
  consumerOffsetNotFound: 3021,
  /** An HTTP send with no messages. */
  invalidMessagesCount: 4009,
  cannotAppendMessage: 4010,
  /** An HTTP message whose encoded user headers exceed MAX_USER_HEADERS_SIZE. */
  tooBigUserHeaders: 4017,
  /** An HTTP message payload above MAX_PAYLOAD_SIZE. */
  tooBigMessagePayload: 4022,
  /** An HTTP message with an empty payload. */
  invalidMessagePayloadLength: 4025,
  invalidMessageChecksum: 4027,
  /** An HTTP partitioning value: empty for partition id or key partitioning, or over 255 bytes. */
  invalidKeyValueLength: 4028,
  invalidMessageTimestampDelta: 4038,
  invalidBatchChecksum: 4039,
  /** A store above the partition's current offset, or on an empty partition. */
  invalidOffset: 4100,
  consumerGroupMemberNotFound: 5006,
  consumerGroupPartitionNotOwned: 5009,
} as const;
export type DataError = (typeof DataError)[keyof typeof DataError];

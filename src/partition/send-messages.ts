/**
 * SendMessages (command 101, partition operation 160): the request body, the choice of partition
 * and the reply (`core/binary_protocol/src/requests/messages/send_messages.rs`,
 * `primitives/partitioning.rs`, `core/server_common/src/send_messages.rs`,
 * `responses/messages/send_messages.rs`, cc269ef70; iggy-partition-plane.md §2.1, §4).
 *
 * Request body, little-endian:
 *
 *   metadata_length u32 · stream_id identifier · topic_id identifier · partitioning ·
 *   messages_count u32 · batch (256-byte header and frames, src/format/message-batch.ts)
 *
 * `metadata_length` counts the metadata after itself (the two identifiers, the partitioning and
 * the count) and must equal what they decode to: a second length that disagrees with the first
 * is how a truncated or spliced body shows. Partitioning = kind u8 · length u8 · value: 1
 * balanced (length 0), 2 partition id (length 4, u32), 3 messages key (length 1..=255, raw
 * bytes). The batch must hold `messages_count` > 0 messages and end exactly at the body's end.
 */
import { BATCH_HEADER_SIZE, readBatchHeader, type BatchFault } from '../format/message-batch.js';
import { BodyReader, BodyWriter } from '../metadata/body-io.js';
import type { Identifier } from '../metadata/operations.js';
import { assert } from '../stdx/assert.js';
import { DataError } from './codes.js';
import type { Decoded } from './decoded.js';
import { PARTITIONS_MAX } from './namespace.js';
import { xxh32 } from './xxh32.js';

export const PartitioningKind = { balanced: 1, partitionId: 2, messagesKey: 3 } as const;
/** Iggy's MAX_MESSAGES_KEY_LENGTH; the u8 length field could not carry more anyway. */
export const MESSAGES_KEY_SIZE_MAX = 255;

export type Partitioning =
  | { readonly kind: 'balanced' }
  | { readonly kind: 'partition_id'; readonly partitionId: number }
  | { readonly kind: 'messages_key'; readonly key: Uint8Array };

export interface SendMessages {
  readonly streamId: Identifier;
  readonly topicId: Identifier;
  readonly partitioning: Partitioning;
  readonly messagesCount: number;
  /**
   * The batch: a view of the request body, not a copy. A batch is up to 64 MiB, and admission
   * copies it once anyway, into the prepare it stamps.
   */
  readonly batch: Uint8Array;
}

/**
 * What the batch verifier reports: the subset of the kernels' `BatchVerify` this decoder reads,
 * so `kernels.messageBatchVerify` passes as is and this layer stays free of the kernel loader.
 */
export type SendBatchVerify =
  | { readonly status: 'valid'; readonly messageCount: number }
  | { readonly status: 'layout'; readonly fault: BatchFault; readonly messageIndex: number }
  | { readonly status: 'message_checksum'; readonly messageIndex: number }
  | { readonly status: 'batch_checksum' };

/**
 * A decode failure carries the Iggy code it maps to: InvalidCommand for a malformed body, the
 * checksum errors for a batch that does not hash as its producer said. (Iggy drops a failed
 * admission silently on the partition plane; the code is for logs and for a caller that answers.)
 */
export type SendDecoded =
  | { readonly ok: true; readonly value: SendMessages }
  | { readonly ok: false; readonly reason: string; readonly code: DataError };

function invalid(reason: string): SendDecoded {
  return { ok: false, reason, code: DataError.invalidCommand };
}

function readPartitioning(reader: BodyReader): Partitioning {
  const kind = reader.u8('partitioning');
  const size = reader.u8('partitioning');
  if (kind === PartitioningKind.balanced) {
    reader.check(size === 0, `partitioning: balanced with length ${size}`);
    return { kind: 'balanced' };
  }
  if (kind === PartitioningKind.partitionId) {
    reader.check(size === 4, `partitioning: partition id with length ${size}`);
    return { kind: 'partition_id', partitionId: reader.ok ? reader.u32('partitioning') : 0 };
  }
  reader.check(!reader.ok || kind === PartitioningKind.messagesKey, `partitioning: kind ${kind}`);
  reader.check(size >= 1, 'partitioning: empty messages key');
  const key = reader.ok ? reader.bytes(size, 'partitioning') : new Uint8Array(0);
  return { kind: 'messages_key', key };
}

type Metadata = Omit<SendMessages, 'batch'>;

/** The metadata block, which must decode to exactly its declared length. */
function readMetadata(block: Uint8Array): Decoded<Metadata> {
  const reader = new BodyReader(block);
  const streamId = reader.identifier('stream_id');
  const topicId = reader.identifier('topic_id');
  const partitioning = readPartitioning(reader);
  const messagesCount = reader.u32('messages_count');
  const reason = reader.finish();
  if (reason !== null) return { ok: false, reason: `metadata: ${reason}` };
  return { ok: true, value: { streamId, topicId, partitioning, messagesCount } };
}

function verifyFailure(verified: Exclude<SendBatchVerify, { status: 'valid' }>): SendDecoded {
  switch (verified.status) {
    case 'layout':
      return invalid(`batch: ${verified.fault} at message ${verified.messageIndex}`);
    case 'message_checksum':
      return {
        ok: false,
        reason: `batch: message ${verified.messageIndex} checksum mismatch`,
        code: DataError.invalidMessageChecksum,
      };
    case 'batch_checksum':
      return {
        ok: false,
        reason: 'batch: batch checksum mismatch',
        code: DataError.invalidBatchChecksum,
      };
  }
}

/**
 * Decodes and admits a SendMessages body. The cheap checks (lengths, counts) run before `verify`
 * (the caller passes the kernels' `messageBatchVerify`), so a body that lies about its shape costs
 * no hashing. Total: never throws on any bytes.
 */
export function decodeSendMessages(
  body: Uint8Array,
  verify: (batch: Uint8Array) => SendBatchVerify,
): SendDecoded {
  if (body.byteLength < 4) return invalid('metadata_length: truncated');
  const metadataLength = new DataView(body.buffer, body.byteOffset, 4).getUint32(0, true);
  if (metadataLength > body.byteLength - 4) {
    return invalid(`metadata_length ${metadataLength} runs past the body`);
  }
  const metadata = readMetadata(body.subarray(4, 4 + metadataLength));
  if (!metadata.ok) return invalid(metadata.reason);
  const batch = body.subarray(4 + metadataLength);
  const header = readBatchHeader(batch, 0);
  if (!header.ok) return invalid(`batch: ${header.fault}`);
  const { batchLength, messageCount } = header.header;
  if (batchLength !== batch.byteLength) {
    return invalid(`batch: batch_length ${batchLength} but ${batch.byteLength} bytes follow`);
  }
  if (messageCount === 0) return invalid('batch: no messages');
  if (messageCount !== metadata.value.messagesCount) {
    const declared = metadata.value.messagesCount;
    return invalid(`messages_count ${declared} but the batch holds ${messageCount}`);
  }
  const verified = verify(batch);
  if (verified.status !== 'valid') return verifyFailure(verified);
  assert(verified.messageCount === messageCount, 'a valid batch holds its header count');
  assert(batch.byteLength >= BATCH_HEADER_SIZE, 'a valid batch holds its header');
  return { ok: true, value: { ...metadata.value, batch } };
}

export type PartitionChoice =
  | {
      readonly ok: true;
      readonly partitionId: number;
      /** The balanced counter to keep for the topic's next send. */
      readonly balancedCounter: number;
    }
  | { readonly ok: false; readonly reason: string; readonly code: DataError };

/**
 * The partition a send goes to, for a topic with `partitionsCount` partitions (ids 0..n-1:
 * partitions are created and deleted at the end, so ids stay dense):
 * - balanced: `counter mod n`, and the counter moves on to `(counter + 1) mod n`. The counter is
 *   the caller's, per topic and per node, as in Iggy: not replicated, so there is no cluster-wide
 *   round robin.
 * - partition id: as given, if the partition exists (PartitionNotFound otherwise; Iggy's dispatch
 *   surfaces it as ResourceNotFound).
 * - messages key: `xxh32(key) mod n`, so one key always lands on one partition.
 * A topic with no partitions is InvalidIdentifier for balanced and key partitioning.
 */
export function choosePartition(
  partitioning: Partitioning,
  partitionsCount: number,
  balancedCounter: number,
): PartitionChoice {
  assert(Number.isInteger(partitionsCount), 'partitions count is an integer');
  assert(partitionsCount >= 0 && partitionsCount <= PARTITIONS_MAX, 'partitions count in range');
  assert(Number.isSafeInteger(balancedCounter) && balancedCounter >= 0, 'counter is a count');
  const n = partitionsCount;
  if (partitioning.kind === 'partition_id') {
    const { partitionId } = partitioning;
    if (partitionId >= n) {
      const reason = `partition ${partitionId} not found (${n} partitions)`;
      return { ok: false, reason, code: DataError.partitionNotFound };
    }
    return { ok: true, partitionId, balancedCounter };
  }
  if (n === 0) {
    return { ok: false, reason: 'topic has no partitions', code: DataError.invalidIdentifier };
  }
  if (partitioning.kind === 'balanced') {
    const partitionId = balancedCounter % n;
    return { ok: true, partitionId, balancedCounter: (balancedCounter + 1) % n };
  }
  return { ok: true, partitionId: xxh32(partitioning.key) % n, balancedCounter };
}

/** One appended batch, as the reply names it. */
export interface SendConfirmation {
  readonly streamId: number;
  readonly topicId: number;
  readonly partitionId: number;
  /** The offset of the batch's first message. */
  readonly baseOffset: number;
}

export const SEND_CONFIRMATION_SIZE = 20;
/**
 * A send carries one batch, so its reply confirms at most one. None means committed with the
 * offsets no longer resolvable (a purge ran between commit and reply).
 */
export const SEND_CONFIRMATIONS_MAX = 1;

/**
 * The success reply body, not result-framed: `count u32`, then per confirmation `stream_id u32 ·
 * topic_id u32 · partition_id u32 · base_offset u64` (20 bytes).
 */
export function encodeSendReply(confirmations: readonly SendConfirmation[]): Uint8Array {
  assert(confirmations.length <= SEND_CONFIRMATIONS_MAX, 'one batch, at most one confirmation');
  const writer = new BodyWriter();
  writer.u32(confirmations.length);
  for (const confirmation of confirmations) {
    assert(Number.isSafeInteger(confirmation.baseOffset), 'base offset is an exact integer');
    writer.u32(confirmation.streamId);
    writer.u32(confirmation.topicId);
    writer.u32(confirmation.partitionId);
    writer.u64(BigInt(confirmation.baseOffset));
  }
  const bytes = writer.finish();
  assert(bytes.byteLength === 4 + SEND_CONFIRMATION_SIZE * confirmations.length, 'reply size');
  return bytes;
}

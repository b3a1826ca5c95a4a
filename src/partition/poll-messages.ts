/**
 * PollMessages (command 100, NonReplicated): the request and the reply body
 * (`core/binary_protocol/src/requests/messages/poll_messages.rs`,
 * `primitives/polling_strategy.rs`, `core/server/src/responses.rs` `build_polled_messages_body`,
 * `core/server/src/dispatch.rs`, cc269ef70; iggy-partition-plane.md §5.1, §5.2).
 *
 * Request: the consumer-offset prefix (src/partition/consumer.ts), then strategy kind u8 (1
 * offset, 2 timestamp in µs, 3 first, 4 last, 5 next) · strategy value u64 · count u32 ·
 * auto_commit u8.
 *
 * Reply: partition_id u32 · current_offset u64 · count u32 (16 bytes), then the batch records
 * back to back. `count` is the number of messages in the records, `current_offset` the
 * partition's committed offset. The body is never empty: the SDK's decoder needs the 16 bytes,
 * so a failed poll answers the head with zero messages.
 */
import { readBatchHeader } from '../format/message-batch.js';
import { BodyReader } from '../metadata/body-io.js';
import { assert } from '../stdx/assert.js';
import { readOffsetAddress, type OffsetAddress } from './consumer.js';
import { fixedLayout, type Decoded } from './decoded.js';

export const PollingKind = { offset: 1, timestamp: 2, first: 3, last: 4, next: 5 } as const;
export type PollingKindName = keyof typeof PollingKind;

const POLLING_KIND_NAMES: readonly (PollingKindName | undefined)[] = [
  undefined,
  'offset',
  'timestamp',
  'first',
  'last',
  'next',
];

export interface PollingStrategy {
  readonly kind: PollingKindName;
  /**
   * The offset (offset), the µs timestamp (timestamp), else unread. Kept as the u64 it is on the
   * wire: an offset past any log is an empty poll, not a malformed request.
   */
  readonly value: bigint;
}

export interface PollMessages extends OffsetAddress {
  readonly strategy: PollingStrategy;
  readonly count: number;
  readonly autoCommit: boolean;
}

export function decodePollMessages(body: Uint8Array): Decoded<PollMessages> {
  const reader = new BodyReader(body);
  const address = readOffsetAddress(reader);
  const kindCode = reader.u8('strategy_kind');
  const kind = POLLING_KIND_NAMES[kindCode];
  reader.check(kind !== undefined, `strategy_kind: ${kindCode}`);
  const value = reader.u64('strategy_value');
  const count = reader.u32('count');
  const autoCommit = reader.flags('auto_commit', 1) === 1;
  const strategy = { kind: kind ?? 'offset', value };
  return fixedLayout(reader, { ...address, strategy, count, autoCommit });
}

export const POLL_REPLY_HEAD_SIZE = 16;
/**
 * The reply's partition id when a group poll names a partition the member does not own
 * (ConsumerGroupPartitionNotOwned): the SDK drops its cached assignment, re-syncs and retries,
 * instead of reading the empty poll as the end of the partition.
 */
export const RESYNC_REQUIRED_PARTITION = 0xffff_ffff;
/**
 * What the Node SDK reports, never the server, for a group poll with no assigned partition.
 * Named here so that no server reply uses it.
 */
export const NO_ASSIGNMENT_PARTITION = 0xffff_fffe;

export interface PollReply {
  readonly partitionId: number;
  /** The partition's committed offset. */
  readonly currentOffset: number;
  /** Whole or sliced batch records, each verified, in offset order. */
  readonly batches: readonly Uint8Array[];
}

/** The reply body: the 16-byte head, then the batches as they are. */
export function encodePollReply(reply: PollReply): Uint8Array {
  const { partitionId, currentOffset, batches } = reply;
  assert(Number.isInteger(partitionId) && partitionId >= 0 && partitionId <= 0xffff_ffff, 'u32');
  assert(partitionId !== NO_ASSIGNMENT_PARTITION, 'the no-assignment sentinel is the SDK\'s');
  assert(Number.isSafeInteger(currentOffset) && currentOffset >= 0, 'current offset');
  let size = POLL_REPLY_HEAD_SIZE;
  let messageCount = 0;
  for (const batch of batches) {
    const header = readBatchHeader(batch, 0);
    assert(header.ok && header.header.batchLength === batch.byteLength, 'a whole batch record');
    messageCount += header.header.messageCount;
    size += batch.byteLength;
  }
  assert(messageCount <= 0xffff_ffff, 'the message count fits its u32');
  const body = new Uint8Array(size);
  const data = new DataView(body.buffer);
  data.setUint32(0, partitionId, true);
  data.setBigUint64(4, BigInt(currentOffset), true);
  data.setUint32(12, messageCount, true);
  let at = POLL_REPLY_HEAD_SIZE;
  for (const batch of batches) {
    body.set(batch, at);
    at += batch.byteLength;
  }
  assert(at === size, 'the records fill the body');
  return body;
}

/**
 * The reply to a poll that is answered without messages because it failed (a body that does not
 * decode, an error other than a deny): partition 0, or RESYNC_REQUIRED_PARTITION for a group poll
 * of a partition the member does not own; offset 0 and count 0.
 */
export function encodeEmptyPollReply(partitionId: number): Uint8Array {
  assert(partitionId === 0 || partitionId === RESYNC_REQUIRED_PARTITION, 'an empty-poll sentinel');
  return encodePollReply({ partitionId, currentOffset: 0, batches: [] });
}

/**
 * Request bodies for the partition codec suites, written from the byte layouts in
 * iggy-partition-plane.md (§2.1, §5.1, §6.1, §11) with plain byte arithmetic, independently of
 * src/metadata/body-io.ts and src/partition, so a decoder is checked against a second reading of
 * the layout rather than against its own writer.
 */
export function bytes(...values: number[]): Uint8Array {
  return Uint8Array.from(values);
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

export function u32le(value: number): Uint8Array {
  return bytes(value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff);
}

export function u64le(value: bigint): Uint8Array {
  const out = new Uint8Array(8);
  for (let index = 0; index < 8; index += 1) out[index] = Number((value >> BigInt(8 * index)) & 0xffn);
  return out;
}

/** WireIdentifier: kind 1 (numeric, size 4, u32 LE) or kind 2 (string, size, UTF-8). */
export function identifier(id: number | string): Uint8Array {
  if (typeof id === 'number') return concat(bytes(1, 4), u32le(id));
  const text = new TextEncoder().encode(id);
  return concat(bytes(2, text.byteLength), text);
}

/** Consumer: kind u8 (1 consumer, 2 group) then an identifier. */
export function consumer(kind: number, id: number | string): Uint8Array {
  return concat(bytes(kind), identifier(id));
}

export type TestPartitioning = { balanced: true } | { partitionId: number } | { key: Uint8Array };

export function partitioning(value: TestPartitioning): Uint8Array {
  if ('balanced' in value) return bytes(1, 0);
  if ('partitionId' in value) return concat(bytes(2, 4), u32le(value.partitionId));
  return concat(bytes(3, value.key.byteLength), value.key);
}

/** SendMessages: metadata_length u32 (of what follows up to the batch), metadata, batch. */
export function sendMessagesBody(fields: {
  stream: number | string;
  topic: number | string;
  partitioning: TestPartitioning;
  messagesCount: number;
  batch: Uint8Array;
  /** Added to the true metadata length, to build a body whose lengths disagree. */
  metadataLengthSkew?: number;
}): Uint8Array {
  const metadata = concat(
    identifier(fields.stream),
    identifier(fields.topic),
    partitioning(fields.partitioning),
    u32le(fields.messagesCount),
  );
  const declared = metadata.byteLength + (fields.metadataLengthSkew ?? 0);
  return concat(u32le(declared), metadata, fields.batch);
}

/** The consumer-offset prefix: consumer, stream, topic, partition_flag u8, partition_id u32. */
export function offsetPrefix(fields: {
  consumerKind: number;
  consumerId: number | string;
  stream: number | string;
  topic: number | string;
  /** null: flag 0 and id 0, as the SDKs write "no partition". */
  partitionId: number | null;
}): Uint8Array {
  const partition =
    fields.partitionId === null
      ? concat(bytes(0), u32le(0))
      : concat(bytes(1), u32le(fields.partitionId));
  return concat(
    consumer(fields.consumerKind, fields.consumerId),
    identifier(fields.stream),
    identifier(fields.topic),
    partition,
  );
}

/** PollMessages: the prefix, strategy kind u8, value u64, count u32, auto_commit u8. */
export function pollBody(
  prefix: Uint8Array,
  strategyKind: number,
  value: bigint,
  count: number,
  autoCommit: number,
): Uint8Array {
  return concat(prefix, bytes(strategyKind), u64le(value), u32le(count), bytes(autoCommit));
}

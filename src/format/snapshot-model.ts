/**
 * The metadata snapshot model: what a checkpoint persists and what state transfer ships.
 *
 * This module is a leaf of src/format/ (types and constants only, no imports) so the kernels,
 * the protocol core and storage can name the model they encode, carry and store without
 * depending on the state machine above them.
 *
 * Canonical form. Every collection is an array ordered by its key (ids ascending, names for PATs,
 * slot index for the client table), so one state has exactly one encoding. The encoder
 * (`Kernels.snapshotEncode`) writes each record as a positional msgpack array, in the field order
 * documented on each interface below, with the smallest integer encodings, u64 as msgpack integers
 * (never floats) and u128 as a 16-byte big-endian `bin`. Strings are UTF-8 `str`, byte strings are
 * `bin`, absent optional values are `nil`. One exception to "records are arrays": a topic's
 * partitions are a column, one `bin` of u64 little-endian values (TopicSnapshot), so the bulk of
 * a large state encodes and decodes as a byte copy.
 *
 * Data-plane counters (the stats registry) are deliberately NOT part of the snapshot: they are
 * updated outside the log and would make two replicas' checkpoint bytes at the same op differ
 * (DESIGN.md §5.2).
 *
 * Integer representation in TypeScript: u8/u16/u32 and u64 values that stay below 2^53 (ops,
 * epochs, microsecond timestamps, request numbers) are `number`; u64 values that use the full
 * range (sentinels such as u64::MAX for "never expire") and every u128 are `bigint`.
 */

/**
 * Bumped whenever the encoding changes; writers write only this one. Version 2 added the
 * revoked access tokens (field 7); version 3 the topic options (topic field 9); version 4 made a
 * topic's partitions (topic field 7) one `bin` column instead of an array of [id, createdAtUs];
 * version 5 added a topic's last purge (topic field 11).
 */
export const SNAPSHOT_FORMAT_VERSION = 5;
/**
 * Versions readers accept. Version 4 differs only by the missing topic field 11, read as "never
 * purged", so a data directory of the previous release boots and its next checkpoint is written
 * at version 5. Older ones are refused at boot with the version they hold (the operator wipes the
 * directory and the replica rejoins by state transfer).
 */
export const SNAPSHOT_FORMAT_VERSIONS_READABLE: readonly number[] = [4, 5];

export function isReadableSnapshotVersion(version: number | null): boolean {
  return version !== null && SNAPSHOT_FORMAT_VERSIONS_READABLE.includes(version);
}

export const U64_MAX = 0xffff_ffff_ffff_ffffn;

/** Field 1 of the snapshot array; also the first thing a reader peeks. */
export interface MetadataSnapshot {
  /** u32: SNAPSHOT_FORMAT_VERSION when written, any readable version when read. Field index 0. */
  readonly version: number;
  /** u64 µs since the epoch, from the replicated clock (the checkpoint prepare's timestamp). */
  readonly createdAtUs: number;
  /** u64, the checkpoint op: the last op whose effects the snapshot contains. */
  readonly sequenceNumber: number;
  /** Ordered by `id` ascending, ids unique. */
  readonly users: readonly UserSnapshot[];
  /** Ordered by `id` ascending, ids unique. */
  readonly streams: readonly StreamSnapshot[];
  /** Occupied client-table slots, ordered by `slot` ascending. */
  readonly clientTable: readonly ClientEntrySnapshot[];
  /** u32, packed release of the writer (provenance only). */
  readonly writerRelease: number;
  /**
   * Field 7 (version 2): access tokens revoked by a logout and not yet expired, ordered by `jti`
   * bytes ascending, jtis unique. Empty when read from a version-1 snapshot.
   */
  readonly revokedTokens: readonly RevokedTokenSnapshot[];
}

/**
 * The part of a snapshot the metadata state machine owns; the rest (version, op, clock, client
 * table, writer) is the replica's checkpoint model around it (src/vsr/state-machine.ts).
 */
export type MetadataMachineSnapshot = Pick<MetadataSnapshot, 'users' | 'streams' | 'revokedTokens'>;

/** A revoked access token's id (the JWT `jti`, a UUID) as bytes. */
export const ACCESS_TOKEN_ID_SIZE = 16;

/**
 * Encoded as [jti, userId, expiryAtUs]. Kept until `expiryAtUs` (the token's own expiry plus a
 * clock margin, src/http/auth.ts), after which the token is refused on its expiry anyway.
 */
export interface RevokedTokenSnapshot {
  /** ACCESS_TOKEN_ID_SIZE bytes. */
  readonly jti: Uint8Array;
  /** The user that revoked it (per-user bound). */
  readonly userId: number;
  /** u64 µs. */
  readonly expiryAtUs: number;
}

export const UserStatus = { active: 1, inactive: 2 } as const;
export type UserStatus = (typeof UserStatus)[keyof typeof UserStatus];

/** Encoded as [id, username, passwordHash, status, createdAtUs, permissions, tokens]. */
export interface UserSnapshot {
  readonly id: number;
  readonly username: string;
  /** An Argon2id PHC string. Never the password. */
  readonly passwordHash: string;
  readonly status: UserStatus;
  readonly createdAtUs: number;
  readonly permissions: PermissionsSnapshot | null;
  /** Personal access tokens, ordered by `name` (UTF-16 code unit order, as Array#sort). */
  readonly tokens: readonly PersonalAccessTokenSnapshot[];
}

/** Encoded as [name, tokenHash, expiryAtUs]. */
export interface PersonalAccessTokenSnapshot {
  readonly name: string;
  /** XXH3-128/SHA-256 style digest of the secret, never the secret itself. */
  readonly tokenHash: Uint8Array;
  /** u64 µs; null means the token never expires. */
  readonly expiryAtUs: number | null;
}

/**
 * Global permission bits (a u32 bit set). Keeping them as one integer keeps the encoding compact
 * and canonical.
 */
export const GlobalPermission = {
  manageServers: 1 << 0,
  readServers: 1 << 1,
  manageUsers: 1 << 2,
  readUsers: 1 << 3,
  manageStreams: 1 << 4,
  readStreams: 1 << 5,
  manageTopics: 1 << 6,
  readTopics: 1 << 7,
  pollMessages: 1 << 8,
  sendMessages: 1 << 9,
} as const;

/** Per-stream permission bits. */
export const StreamPermission = {
  manageStream: 1 << 0,
  readStream: 1 << 1,
  manageTopics: 1 << 2,
  readTopics: 1 << 3,
  pollMessages: 1 << 4,
  sendMessages: 1 << 5,
} as const;

/** Per-topic permission bits. */
export const TopicPermission = {
  manageTopic: 1 << 0,
  readTopic: 1 << 1,
  pollMessages: 1 << 2,
  sendMessages: 1 << 3,
} as const;

/** Encoded as [global, streams]. */
export interface PermissionsSnapshot {
  /** GlobalPermission bits. */
  readonly global: number;
  /** Ordered by `streamId` ascending. */
  readonly streams: readonly StreamPermissionsSnapshot[];
}

/** Encoded as [streamId, bits, topics]. */
export interface StreamPermissionsSnapshot {
  readonly streamId: number;
  /** StreamPermission bits. */
  readonly bits: number;
  /** Ordered by `topicId` ascending. */
  readonly topics: readonly TopicPermissionsSnapshot[];
}

/** Encoded as [topicId, bits]. */
export interface TopicPermissionsSnapshot {
  readonly topicId: number;
  /** TopicPermission bits. */
  readonly bits: number;
}

/** Encoded as [id, name, createdAtUs, topics]. */
export interface StreamSnapshot {
  readonly id: number;
  readonly name: string;
  readonly createdAtUs: number;
  /** Ordered by `id` ascending. */
  readonly topics: readonly TopicSnapshot[];
}

export const CompressionAlgorithm = { none: 1, gzip: 2 } as const;
export type CompressionAlgorithm = (typeof CompressionAlgorithm)[keyof typeof CompressionAlgorithm];

/**
 * Encoded as [id, name, createdAtUs, messageExpiryUs, compressionAlgorithm, maxTopicSizeBytes,
 * replicationFactor, partitionsCreatedAtUs, consumerGroups, options, purgedAtUs].
 */
export interface TopicSnapshot {
  readonly id: number;
  readonly name: string;
  readonly createdAtUs: number;
  /** u64 µs, resolved by the primary: U64_MAX = never expire. */
  readonly messageExpiryUs: bigint;
  readonly compressionAlgorithm: CompressionAlgorithm;
  /** u64 bytes, resolved by the primary: U64_MAX = unlimited. */
  readonly maxTopicSizeBytes: bigint;
  /** u8. */
  readonly replicationFactor: number;
  /**
   * Field 7 (version 4): the partitions as one column, encoded as ONE msgpack `bin` (smallest
   * header) holding each partition's `createdAtUs` as a u64 little-endian, 8 bytes per partition.
   * Partition ids are implicit: dense 0..n-1 in column order (n = byteLength / 8). Canonical
   * rules: the length is a multiple of PARTITION_CREATED_AT_SIZE and every value is at most
   * 2^53 - 1 (a µs timestamp the model holds as a number). Readers must not write into it.
   */
  readonly partitionsCreatedAtUs: Uint8Array;
  /** Ordered by `id` ascending. */
  readonly consumerGroups: readonly ConsumerGroupSnapshot[];
  /**
   * Field 9 (version 3): the catalog options the client set explicitly (metadata/options.ts),
   * ordered by `key` ascending (UTF-16 order; catalog keys are ASCII), keys unique.
   */
  readonly options: readonly TopicOptionSnapshot[];
  /**
   * Field 11 (version 5): the timestamp of the topic's last committed purge, 0 if never purged.
   * A partition's log incarnation is the later of its createdAtUs and this (queries.ts), so a
   * purge starts every partition of the topic over, empty, at offset 0.
   */
  readonly purgedAtUs: number;
}

/**
 * Encoded as [key, value]: `value` is the canonical text of a runtime knob (segment_size bytes as
 * decimal, flags as true/false), nil for a key whose value is one of the topic's typed fields.
 */
export interface TopicOptionSnapshot {
  readonly key: string;
  readonly value: string | null;
}

/** Bytes per partition in `TopicSnapshot.partitionsCreatedAtUs`: one u64 little-endian. */
export const PARTITION_CREATED_AT_SIZE = 8;

/** Encoded as [id, name, generation, members]. */
export interface ConsumerGroupSnapshot {
  readonly id: number;
  readonly name: string;
  /** u64, bumped on every membership change (rebalance generation). */
  readonly generation: number;
  /** Ordered by `id` ascending. */
  readonly members: readonly ConsumerGroupMemberSnapshot[];
}

/** Encoded as [id, clientId, partitions]. */
export interface ConsumerGroupMemberSnapshot {
  readonly id: number;
  /** u128. */
  readonly clientId: bigint;
  /** Assigned partition ids, ascending. */
  readonly partitions: readonly number[];
}

/**
 * One occupied client-table slot (the checkpoint form of the client table). Only the latest reply
 * is kept: older ring entries are volatile.
 *
 * Encoded as [slot, clientId, epoch, userId, watermark, watermarkChecksum, reply].
 */
export interface ClientEntrySnapshot {
  readonly slot: number;
  /** u128, never 0. */
  readonly clientId: bigint;
  /** u64: commit op of the latest Register of this client. */
  readonly epoch: number;
  readonly userId: number;
  /** u64: highest committed request number. */
  readonly watermark: number;
  /** u128: request_checksum of the watermark request (0 = unstamped). */
  readonly watermarkChecksum: bigint;
  /** The latest reply's wire bytes (header + body). */
  readonly reply: Uint8Array;
}

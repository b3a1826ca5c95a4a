/**
 * Every limit and wire size in one place. Checked when the module loads, so an inconsistent edit
 * fails every test at import time.
 */
import { assert } from './stdx/assert.js';

/** Every frame starts with a 256-byte little-endian header (iggy-metadata-plane.md §1.1). */
export const HEADER_SIZE = 256;

/**
 * The largest frame (header + body) accepted from a socket or stored in the WAL. Bounds the
 * memory a single peer can make us buffer. A state chunk (256 KiB) and a full DoViewChange suffix
 * (128 headers) fit with room to spare.
 */
export const MESSAGE_SIZE_MAX = 1024 * 1024;
export const MESSAGE_BODY_SIZE_MAX = MESSAGE_SIZE_MAX - HEADER_SIZE;

/** Offsets of the common header prefix. */
export const HeaderOffset = {
  checksum: 0,
  checksumBody: 16,
  cluster: 32,
  size: 48,
  view: 52,
  release: 56,
  command: 60,
  replica: 61,
  reservedFrame: 62,
  commandSpecific: 128,
} as const;

/** Offsets of the Prepare (and RepairPrepare) command-specific fields. */
export const PrepareOffset = {
  client: 128,
  parent: 144,
  requestChecksum: 160,
  op: 176,
  commit: 184,
  timestamp: 192,
  request: 200,
  operation: 208,
  pad: 209,
  group: 216,
  userId: 224,
  reserved: 228,
} as const;

/** Wire command discriminants (u8); anything above ForwardLogoutResult is invalid. */
export const Command = {
  reserved: 0,
  ping: 1,
  pong: 2,
  pingClient: 3,
  pongClient: 4,
  request: 5,
  prepare: 6,
  prepareOk: 7,
  reply: 8,
  commit: 9,
  startViewChange: 10,
  doViewChange: 11,
  startView: 12,
  eviction: 13,
  replicaHello: 14,
  replicaChallenge: 15,
  replicaFinish: 16,
  requestStartView: 17,
  requestPrepares: 18,
  repairPrepare: 19,
  repairDone: 20,
  rangeEvicted: 21,
  requestStateTransfer: 22,
  stateTransferTarget: 23,
  requestStateChunk: 24,
  stateChunk: 25,
  forwardRegister: 26,
  forwardRegisterResult: 27,
  forwardLogout: 28,
  forwardLogoutResult: 29,
  /** After the handshake: the sender's client-facing addresses (src/transport/advertisement.ts). */
  replicaAdvertise: 30,
  /**
   * A ranged read of one of the state machine's stores from a peer (a partition group's segment
   * log below a store's start: src/partition/backfill.ts), and its answer.
   */
  requestStoreRange: 31,
  storeRange: 32,
} as const;
export type Command = (typeof Command)[keyof typeof Command];
export const COMMAND_MAX = Command.storeRange;

assert(HEADER_SIZE === 256);
assert(MESSAGE_SIZE_MAX % 4096 === 0, 'MESSAGE_SIZE_MAX is a multiple of the page size');
assert(MESSAGE_SIZE_MAX >= HEADER_SIZE + 256 * 1024, 'a 256 KiB state chunk fits in one frame');
assert(PrepareOffset.reserved + 28 === HEADER_SIZE, 'the Prepare layout fills the header');
assert(HeaderOffset.reservedFrame + 66 === HeaderOffset.commandSpecific);

/** Replica indexes are a u8 on the wire; a cluster has at most this many (§1.1). */
export const REPLICAS_MAX = 32;

/**
 * A DoViewChange or StartView body is a suffix of at most this many 256-byte prepare headers
 * (iggy-metadata-plane.md §1.6): the DVC nack/present bitsets are one u128, one bit per header.
 */
export const DVC_HEADERS_MAX = 128;

/** The largest StateChunk payload and RequestStateChunk `len` (§5.2: STATE_CHUNK_LEN). */
export const STATE_CHUNK_SIZE_MAX = 256 * 1024;

/**
 * A state-transfer manifest (`ISM1`, §5.3, extended by vrmeta with per-chunk checksums) lists at
 * most this many artifacts; it also bounds the `artifact` index of chunk frames. The metadata
 * plane ships one (the checkpoint snapshot, which carries the client table); 16 leaves room
 * without letting a peer make us parse a 65536-entry manifest.
 */
/** A ReplicaAdvertise body: two addresses of up to 255 bytes each, with room for later kinds. */
export const ADVERTISEMENT_SIZE_MAX = 1024;
export const MANIFEST_ENTRIES_MAX = 16;
/** kind u8 + frontier u64 + len u64 + checksum u64. */
export const MANIFEST_ENTRY_SIZE = 25;
/** The largest artifact a receiver accepts (bounds the chunk table and the temp file). */
export const ARTIFACT_SIZE_MAX = 1024 * 1024 * 1024;
/** Per-chunk XXH3-64 checksums a manifest may carry in all (1 GiB of 256 KiB chunks, twice). */
export const MANIFEST_CHUNKS_MAX = 8192;
/** magic[4] + count u32 + entry_len u8 + chunk_size u32 + XXH3-64 trailer: no entries. */
export const MANIFEST_SIZE_MIN = 4 + 4 + 1 + 4 + 8;
/** The StateTransferTarget body bound. */
export const MANIFEST_SIZE_MAX = MANIFEST_SIZE_MIN + MANIFEST_ENTRIES_MAX * MANIFEST_ENTRY_SIZE + MANIFEST_CHUNKS_MAX * 8;

assert(DVC_HEADERS_MAX <= 128, 'the DVC bitsets are one u128');
assert(HEADER_SIZE + DVC_HEADERS_MAX * HEADER_SIZE <= MESSAGE_SIZE_MAX, 'a full DVC suffix fits in one frame');
assert(HEADER_SIZE + STATE_CHUNK_SIZE_MAX <= MESSAGE_SIZE_MAX, 'a full state chunk fits in one frame');
assert(REPLICAS_MAX <= 255, 'replica indexes are a u8');
assert(HEADER_SIZE + MANIFEST_SIZE_MAX <= MESSAGE_SIZE_MAX, 'a full manifest fits in one frame');

/**
 * Deterministic metadata snapshots for tests and benchmarks.
 *
 * `referenceSnapshot()` is the benchmark state of DESIGN.md §6 (1,000 streams x 10 topics x 4
 * partitions, 1,000 users, 10,000 client-table entries) with realistic shapes: argon2id PHC
 * hashes, microsecond timestamps above 2^32 (so u64 fields take the uint64 form), u128 client ids,
 * ~200-byte cached replies. Every choice comes from one seeded PRNG, so a seed always builds the
 * same snapshot and the same bytes.
 *
 * Strings are assembled with `join`, which gives flat strings, like those a server holds after
 * JSON.parse or a snapshot decode. V8 keeps template-literal concatenations as ropes, which
 * every encoder would first have to walk and flatten: that would measure the fixture, not the
 * encoders.
 */
import {
  CompressionAlgorithm,
  GlobalPermission,
  SNAPSHOT_FORMAT_VERSION,
  StreamPermission,
  TopicPermission,
  U64_MAX,
  UserStatus,
  type ClientEntrySnapshot,
  type ConsumerGroupSnapshot,
  type MetadataSnapshot,
  type PermissionsSnapshot,
  type PersonalAccessTokenSnapshot,
  type RevokedTokenSnapshot,
  type StreamSnapshot,
  type TopicSnapshot,
  type UserSnapshot,
} from '../format/snapshot-model.js';
import { compareBytes } from '../format/snapshot-codec.js';
import { columnOf } from '../metadata/partition-store.js';
import { Prng } from '../stdx/prng.js';

export interface ReferenceSnapshotOptions {
  readonly streams?: number;
  readonly topicsPerStream?: number;
  readonly partitionsPerTopic?: number;
  readonly users?: number;
  readonly clients?: number;
  readonly seed?: number;
}

/** The benchmark reference (DESIGN.md §6). */
export const REFERENCE_SNAPSHOT_FULL = {
  streams: 1_000,
  topicsPerStream: 10,
  partitionsPerTopic: 4,
  users: 1_000,
  clients: 10_000,
} as const;

/** Same shapes, small enough for unit and property tests. */
export const REFERENCE_SNAPSHOT_SMALL = {
  streams: 12,
  topicsPerStream: 3,
  partitionsPerTopic: 2,
  users: 40,
  clients: 30,
} as const;

/** 2024-01-01T00:00:00Z in µs: well above 2^32, below 2^53. */
const EPOCH_2024_US = 1_704_067_200_000_000;
const DAY_US = 86_400_000_000;
const ARGON2_PREFIX = '$argon2id$v=19$m=19456,t=2,p=1$';
const BASE64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const STREAM_DOMAINS = [
  'orders',
  'payments',
  'inventory',
  'telemetry',
  'audit',
  'billing',
  'search',
  'users',
];
const STREAM_REGIONS = ['eu-west', 'eu-central', 'us-east', 'us-west', 'ap-south', 'ap-northeast'];
const TOPIC_ENTITIES = [
  'order',
  'invoice',
  'shipment',
  'device',
  'session',
  'account',
  'cart',
  'refund',
];
const TOPIC_EVENTS = [
  'created',
  'updated',
  'deleted',
  'snapshot',
  'heartbeat',
  'changelog',
  'dead-letter',
];
const FIRST_NAMES = [
  'alice',
  'bob',
  'carol',
  'dave',
  'erin',
  'frank',
  'grace',
  'heidi',
  'ivan',
  'judy',
];
const LAST_NAMES = ['smith', 'jones', 'garcia', 'müller', 'kowalski', 'tanaka', 'dubois', 'rossi'];

export function referenceSnapshot(options: ReferenceSnapshotOptions = {}): MetadataSnapshot {
  const streamCount = options.streams ?? REFERENCE_SNAPSHOT_FULL.streams;
  const topicsPerStream = options.topicsPerStream ?? REFERENCE_SNAPSHOT_FULL.topicsPerStream;
  const partitionsPerTopic =
    options.partitionsPerTopic ?? REFERENCE_SNAPSHOT_FULL.partitionsPerTopic;
  const userCount = options.users ?? REFERENCE_SNAPSHOT_FULL.users;
  const clientCount = options.clients ?? REFERENCE_SNAPSHOT_FULL.clients;
  const prng = new Prng(options.seed ?? 1);

  let clockUs = EPOCH_2024_US;
  const tick = (): number => (clockUs += 1 + prng.int(5_000_000));

  const users: UserSnapshot[] = [];
  for (let index = 0; index < userCount; index++) {
    users.push(user(prng, index, tick(), streamCount, topicsPerStream));
  }

  const streams: StreamSnapshot[] = [];
  for (let streamIndex = 0; streamIndex < streamCount; streamIndex++) {
    const createdAtUs = tick();
    const topics: TopicSnapshot[] = [];
    for (let topicIndex = 0; topicIndex < topicsPerStream; topicIndex++) {
      topics.push(topic(prng, topicIndex + 1, tick(), partitionsPerTopic));
    }
    streams.push({
      id: streamIndex + 1,
      name: [
        prng.pick(STREAM_DOMAINS),
        prng.pick(STREAM_REGIONS),
        String(streamIndex + 1).padStart(4, '0'),
      ].join('-'),
      createdAtUs,
      topics,
    });
  }

  const clientTable: ClientEntrySnapshot[] = [];
  let slot = 0;
  for (let index = 0; index < clientCount; index++) {
    // Occupied slots with occasional holes, as eviction and logout leave them.
    slot += prng.chance(0.05) ? 2 : 1;
    clientTable.push(clientEntry(prng, slot - 1, userCount));
  }

  // Logged-out tokens not yet expired: one per 40 clients (drawn last, so the rest of the
  // fixture is what it was before version 2 added them).
  const createdAtUs = tick();
  const sequenceNumber = 1_000_000 + prng.int(1_000_000);
  const revokedTokens: RevokedTokenSnapshot[] = [];
  for (let index = 0; index < Math.ceil(clientCount / 40); index++) {
    revokedTokens.push({
      jti: randomBytes(prng, 16),
      userId: prng.int(userCount),
      expiryAtUs: createdAtUs + prng.int(3_600_000_000),
    });
  }
  revokedTokens.sort((left, right) => compareBytes(left.jti, right.jti));

  return {
    version: SNAPSHOT_FORMAT_VERSION,
    createdAtUs,
    sequenceNumber,
    users,
    streams,
    clientTable,
    writerRelease: 0x0001_0200,
    revokedTokens,
  };
}

function user(
  prng: Prng,
  index: number,
  createdAtUs: number,
  streamCount: number,
  topicsPerStream: number,
): UserSnapshot {
  // id 0 is the root user, as in Iggy.
  const username =
    index === 0
      ? 'iggy'
      : [
          prng.pick(FIRST_NAMES),
          '.',
          prng.pick(LAST_NAMES),
          String(index).padStart(4, '0'),
        ].join('');
  return {
    id: index,
    username,
    passwordHash: [ARGON2_PREFIX, base64(prng, 22), '$', base64(prng, 43)].join(''),
    status: prng.chance(0.95) ? UserStatus.active : UserStatus.inactive,
    createdAtUs,
    permissions:
      index === 0 || prng.chance(0.1) ? permissions(prng, streamCount, topicsPerStream) : null,
    tokens: prng.chance(0.2) ? tokens(prng, createdAtUs) : [],
  };
}

function permissions(
  prng: Prng,
  streamCount: number,
  topicsPerStream: number,
): PermissionsSnapshot {
  const global = prng.chance(0.3)
    ? GlobalPermission.readStreams | GlobalPermission.readTopics | GlobalPermission.pollMessages
    : GlobalPermission.manageServers |
      GlobalPermission.manageUsers |
      GlobalPermission.manageStreams;
  const streams = [];
  const streamIds = streamCount === 0 ? [] : distinctSorted(prng, prng.int(4), streamCount);
  for (const streamId of streamIds) {
    const topicIds =
      topicsPerStream === 0 ? [] : distinctSorted(prng, prng.int(3), topicsPerStream);
    streams.push({
      streamId,
      bits:
        StreamPermission.readStream |
        StreamPermission.pollMessages |
        (prng.chance(0.5) ? StreamPermission.sendMessages : 0),
      topics: topicIds.map((topicId) => ({
        topicId,
        bits:
          TopicPermission.readTopic |
          (prng.chance(0.5) ? TopicPermission.pollMessages : TopicPermission.sendMessages),
      })),
    });
  }
  return { global, streams };
}

function tokens(prng: Prng, createdAtUs: number): PersonalAccessTokenSnapshot[] {
  const names = new Set<string>();
  const count = 1 + prng.int(3);
  while (names.size < count) {
    names.add([prng.pick(['ci', 'deploy', 'grafana', 'backup', 'cli']), prng.int(100)].join('-'));
  }
  return [...names].sort().map((name) => ({
    name,
    tokenHash: randomBytes(prng, 32),
    expiryAtUs: prng.chance(0.5) ? null : createdAtUs + (1 + prng.int(365)) * DAY_US,
  }));
}

function topic(prng: Prng, id: number, createdAtUs: number, partitionCount: number): TopicSnapshot {
  const partitionsCreatedAtUs = columnOf(
    Array.from({ length: partitionCount }, (_, index) => createdAtUs + index),
  );
  const consumerGroups: ConsumerGroupSnapshot[] = [];
  const groupCount = prng.chance(0.2) ? 1 + prng.int(2) : 0;
  for (let index = 0; index < groupCount; index++) {
    const memberCount = 1 + prng.int(3);
    const members = [];
    for (let memberIndex = 0; memberIndex < memberCount; memberIndex++) {
      members.push({
        id: memberIndex + 1,
        clientId: prng.u128(),
        // Round-robin assignment: member m owns partitions m, m+memberCount, ... (ids dense from 0)
        partitions: Array.from({ length: partitionCount }, (_, partition) => partition).filter(
          (partitionId) => partitionId % memberCount === memberIndex,
        ),
      });
    }
    consumerGroups.push({
      id: index + 1,
      name: ['cg', prng.pick(TOPIC_ENTITIES), index + 1].join('-'),
      generation: prng.int(50),
      members,
    });
  }
  const neverExpire = prng.chance(0.6);
  return {
    id,
    name: [prng.pick(TOPIC_ENTITIES), prng.pick(TOPIC_EVENTS), `v${1 + prng.int(3)}`].join('.'),
    createdAtUs,
    messageExpiryUs: neverExpire ? U64_MAX : BigInt((1 + prng.int(30)) * DAY_US),
    compressionAlgorithm: prng.chance(0.8) ? CompressionAlgorithm.none : CompressionAlgorithm.gzip,
    maxTopicSizeBytes: prng.chance(0.5) ? U64_MAX : BigInt(1 + prng.int(100)) * 1_073_741_824n,
    replicationFactor: 1 + prng.int(3),
    partitionsCreatedAtUs,
    consumerGroups,
    // Chosen by id, not drawn, so adding topic options left every other field's draws as they were.
    options: id % 4 === 1 ? TOPIC_OPTIONS_SAMPLE : [],
    // Chosen by id as well: every third topic was purged a day after it was created.
    purgedAtUs: id % 3 === 2 ? createdAtUs + DAY_US : 0,
  };
}

/** Explicit options of every fourth topic: a typed-field key (nil value) and two runtime knobs. */
const TOPIC_OPTIONS_SAMPLE = Object.freeze([
  Object.freeze({ key: 'compression_algorithm', value: null }),
  Object.freeze({ key: 'enforce_fsync', value: 'true' }),
  Object.freeze({ key: 'segment_size', value: '134217728' }),
]);

function clientEntry(prng: Prng, slot: number, userCount: number): ClientEntrySnapshot {
  const epoch = 1 + prng.int(2_000_000);
  return {
    slot,
    clientId: prng.u128(),
    epoch,
    userId: userCount === 0 ? 0 : prng.int(userCount),
    watermark: prng.int(100_000),
    watermarkChecksum: prng.chance(0.1) ? 0n : prng.u128(),
    reply: randomBytes(prng, 192 + prng.int(16)),
  };
}

function distinctSorted(prng: Prng, count: number, idMax: number): number[] {
  const ids = new Set<number>();
  while (ids.size < Math.min(count, idMax)) ids.add(1 + prng.int(idMax));
  return [...ids].sort((a, b) => a - b);
}

function base64(prng: Prng, length: number): string {
  const out: string[] = [];
  for (let index = 0; index < length; index++) out.push(BASE64_ALPHABET[prng.int(64)]!);
  return out.join('');
}

function randomBytes(prng: Prng, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let index = 0; index < length; index += 4) {
    const word = prng.nextU32();
    for (let lane = 0; lane < 4 && index + lane < length; lane++) {
      bytes[index + lane] = (word >>> (lane * 8)) & 0xff;
    }
  }
  return bytes;
}

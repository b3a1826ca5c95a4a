/**
 * Reference-model test: random operation sequences (fast-check) applied to the state machine and
 * to an independent model agree on every reply code, every created id, the final state and the
 * data-plane counters. The same sequences also check determinism (two instances, byte-identical
 * encoded snapshots) and that snapshot -> encode -> decode -> restore continues identically.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { createdIdOf } from '../../src/metadata/create-replies.js';
import { idOf, nameOf, Operation, type Identifier, type MetadataRequest } from '../../src/metadata/operations.js';
import { Operation as ProtocolOperation } from '../../src/vsr/header-types.js';
import { MetadataStateMachine } from '../../src/metadata/state-machine.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import { U64_MAX, type PermissionsSnapshot } from '../../src/format/snapshot-model.js';
import { GENESIS_PASSWORD_MARKER, METADATA_LIMITS, type MetadataLimits } from '../../src/metadata/validation.js';
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { fakeHash, fullSnapshot, GENESIS, tokenHash } from '../unit/metadata-fixtures.js';
import { ReferenceModel } from './metadata-reference-model.js';

const LIMITS: MetadataLimits = {
  ...METADATA_LIMITS,
  streamsMax: 3,
  topicsPerStreamMax: 3,
  partitionsPerTopicMax: 5,
  usersMax: 4,
  patsPerUserMax: 2,
  consumerGroupsPerTopicMax: 2,
  consumerGroupMembersMax: 2,
};

type Step =
  | { readonly kind: 'op'; readonly actor: number; readonly clientId: bigint; readonly request: MetadataRequest }
  | { readonly kind: 'garbage'; readonly actor: number; readonly operation: number; readonly body: Uint8Array }
  | { readonly kind: 'removeClient'; readonly clientId: bigint }
  | { readonly kind: 'bump'; readonly at: readonly [number, number, number]; readonly delta: readonly [number, number, number] }
  | { readonly kind: 'restore' };

const resourceName = fc.constantFrom('a', 'b', 'c', '', '0');
/** Mostly the first resource (so deep paths like stream 0 / topic 0 / group 0 resolve often). */
const ident = (names: fc.Arbitrary<string>): fc.Arbitrary<Identifier> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.constant(idOf(0)) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 }).map(idOf) },
    { weight: 2, arbitrary: names.filter((name) => name !== '').map(nameOf) },
  );
const streamId = ident(resourceName);
const topicId = ident(resourceName);
const groupId = ident(resourceName);
const userId = ident(fc.constantFrom('iggy', 'alice', 'bob', 'carol'));
const username = fc.constantFrom('alice', 'bob', 'carol', 'ab', 'dave');
// The genesis marker is root's stored hash: only a ChangePassword's current hash may name it.
const passwordHash = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 3 }).map(fakeHash) },
  { weight: 1, arbitrary: fc.constant('plaintext') },
  { weight: 2, arbitrary: fc.constant(GENESIS_PASSWORD_MARKER) },
);
const permissions: fc.Arbitrary<PermissionsSnapshot | null> = fc.option(
  fc.record({
    global: fc.constantFrom(0, 0x04, 0x10, 0x20, 0x40, 0x80, 0x3ff),
    streams: fc
      .uniqueArray(
        fc.record({
          streamId: fc.integer({ min: 0, max: 2 }),
          bits: fc.constantFrom(0, 0x01, 0x02, 0x04, 0x08),
          topics: fc
            .uniqueArray(fc.record({ topicId: fc.integer({ min: 0, max: 2 }), bits: fc.constantFrom(0, 0x01, 0x02) }), { selector: (t) => t.topicId, maxLength: 2 })
            .map((topics) => topics.sort((a, b) => a.topicId - b.topicId)),
        }),
        { selector: (s) => s.streamId, maxLength: 2 },
      )
      .map((streams) => streams.sort((a, b) => a.streamId - b.streamId)),
  }),
);
const compression = fc.constantFrom(1, 2, 3);
const expiry = fc.constantFrom(1n, 60_000_000n, U64_MAX, 0n);
const maxSize = fc.constantFrom(U64_MAX, 2n * 1024n ** 3n, 5n, 0n);
const replication = fc.constantFrom(1, 3, 0);
const count = fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.constant(1001) });

function mapConstant<T extends object>(value: T): { [K in keyof T]: fc.Arbitrary<T[K]> } {
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, fc.constant(field)])) as { [K in keyof T]: fc.Arbitrary<T[K]> };
}

/** Every catalog key in a valid canonical form, ascending: any ordered subset is admissible. */
const VALID_TOPIC_OPTIONS = [
  { key: 'compression_algorithm', value: null },
  { key: 'enforce_fsync', value: 'true' },
  { key: 'max_topic_size', value: null },
  { key: 'message_expiry', value: null },
  { key: 'messages_required_to_save', value: '7' },
  { key: 'preallocate_segments', value: 'false' },
  { key: 'segment_size', value: '1048576' },
  { key: 'size_of_messages_required_to_save', value: '4096' },
];

const request: fc.Arbitrary<MetadataRequest> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ operation: fc.constant(Operation.createStream), name: resourceName }) },
  fc.record({ operation: fc.constant(Operation.updateStream), streamId, name: resourceName }),
  fc.record({ operation: fc.constantFrom(Operation.deleteStream, Operation.purgeStream), streamId }),
  {
    weight: 4,
    arbitrary: fc.record({
      operation: fc.constant(Operation.createTopic),
      streamId,
      partitionsCount: count,
      compressionAlgorithm: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: compression }),
      messageExpiryUs: fc.oneof({ weight: 4, arbitrary: fc.constant(U64_MAX) }, { weight: 1, arbitrary: expiry }),
      maxTopicSizeBytes: fc.oneof({ weight: 4, arbitrary: fc.constant(U64_MAX) }, { weight: 1, arbitrary: maxSize }),
      replicationFactor: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: replication }),
      name: resourceName,
      // Valid explicit options (the edge admits nothing else); a 1 MiB segment lowers the size floor.
      options: fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.subarray(VALID_TOPIC_OPTIONS) }),
    }),
  },
  fc.record({
    operation: fc.constant(Operation.updateTopic),
    streamId,
    topicId,
    name: resourceName,
    compressionAlgorithm: fc.option(compression),
    messageExpiryUs: fc.option(expiry),
    maxTopicSizeBytes: fc.option(maxSize),
    replicationFactor: fc.option(replication),
  }),
  fc.record({ operation: fc.constantFrom(Operation.deleteTopic, Operation.purgeTopic), streamId, topicId }),
  { weight: 2, arbitrary: fc.record({ operation: fc.constantFrom(Operation.createPartitions, Operation.deletePartitions), streamId, topicId, partitionsCount: count }) },
  fc.record({ operation: fc.constant(Operation.deleteSegments), streamId, topicId, partitionId: fc.integer({ min: 0, max: 4 }), segmentsCount: fc.nat(3) }),
  { weight: 2, arbitrary: fc.record({ operation: fc.constant(Operation.createConsumerGroup), streamId, topicId, name: resourceName }) },
  fc.record({ operation: fc.constant(Operation.deleteConsumerGroup), streamId, topicId, groupId }),
  {
    // Membership churn on the prelude's group 0/0/0 most of the time, anywhere otherwise.
    weight: 6,
    arbitrary: fc.oneof(
      { weight: 3, arbitrary: fc.constant({ streamId: idOf(0), topicId: idOf(0), groupId: idOf(0) }) },
      { weight: 1, arbitrary: fc.record({ streamId, topicId, groupId }) },
    ).chain((address) => fc.record({ operation: fc.constantFrom(Operation.joinConsumerGroup, Operation.leaveConsumerGroup), ...mapConstant(address) })),
  },
  { weight: 3, arbitrary: fc.record({ operation: fc.constant(Operation.createUser), username, passwordHash, status: fc.constantFrom(1, 2, 1, 3), permissions }) },
  fc.record({ operation: fc.constant(Operation.updateUser), userId, username: fc.option(username), status: fc.option(fc.constantFrom(1, 2, 0)) }),
  fc.record({ operation: fc.constant(Operation.deleteUser), userId }),
  fc.record({ operation: fc.constant(Operation.changePassword), userId, currentPasswordHash: passwordHash, newPasswordHash: passwordHash }),
  { weight: 2, arbitrary: fc.record({ operation: fc.constant(Operation.updatePermissions), userId, permissions }) },
  {
    weight: 2,
    arbitrary: fc.record({
      operation: fc.constant(Operation.createPersonalAccessToken),
      name: fc.constantFrom('tok1', 'tok2', 'tok3', 'ab'),
      expiryUs: fc.constantFrom(0n, U64_MAX, 2_500_000n, 1n << 60n),
      tokenHash: fc.integer({ min: 1, max: 5 }).map(tokenHash),
    }),
  },
  fc.record({
    operation: fc.constant(Operation.deletePersonalAccessToken),
    name: fc.constantFrom('tok1', 'tok2', 'tok3'),
    ownerUserId: fc.option(fc.integer({ min: 0, max: 3 })),
    onlyIfExpired: fc.boolean(),
  }),
) as fc.Arbitrary<MetadataRequest>;

const actor = fc.constantFrom(0, 0, 0, 0, 1, 1, 2, 2, 3, 9);
const CLIENT_IDS = [0n, 1n, 2n, 3n] as const;
const clientId = fc.constantFrom(1n, 1n, 1n, 2n, 3n, 0n);
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 40, arbitrary: fc.record({ kind: fc.constant('op' as const), actor, clientId, request }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('garbage' as const),
      actor,
      operation: fc.constantFrom(Operation.createStream, Operation.createUser, ProtocolOperation.logout, 150),
      body: fc.uint8Array({ maxLength: 3 }).map((bytes) => Uint8Array.from([...bytes, 0xff, 0xff])),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('removeClient' as const), clientId }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('bump' as const),
      at: fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 3 })),
      delta: fc.tuple(fc.nat(1000), fc.nat(10), fc.nat(2)),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('restore' as const) }) },
);

/** snapshot -> encode -> decode -> the state-machine part. */
function throughBytes(part: MetadataMachineSnapshot, sequenceNumber: number): MetadataMachineSnapshot {
  const decoded = decodeSnapshot(snapshotEncodeTs(fullSnapshot(part, sequenceNumber)));
  return { users: decoded.users, streams: decoded.streams, revokedTokens: decoded.revokedTokens };
}

interface Run {
  readonly sm: MetadataStateMachine;
  readonly codes: number[];
}

function run(steps: readonly Step[], model?: ReferenceModel): Run {
  const sm = new MetadataStateMachine(GENESIS, { limits: LIMITS });
  const codes: number[] = [];
  let op = 0;
  let timestampUs = 1_000_000;
  for (const current of steps) {
    op += 1;
    timestampUs += 1_000_000;
    switch (current.kind) {
      case 'op': {
        const result = sm.apply({ op, operation: current.request.operation, timestampUs, userId: current.actor, clientId: current.clientId, body: encodeRequest(current.request) });
        codes.push(result.errorCode);
        if (model !== undefined) {
          const [code, id] = model.apply(current.actor, current.request, current.clientId, timestampUs);
          expect({ op, request: current.request.operation, code: result.errorCode }).toEqual({ op, request: current.request.operation, code });
          expect(createdIdOf(result.payload)).toBe(id);
        }
        break;
      }
      case 'garbage': {
        const result = sm.apply({ op, operation: current.operation, timestampUs, userId: current.actor, clientId: 1n, body: current.body });
        codes.push(result.errorCode);
        expect(result.errorCode).toBe(3);
        break;
      }
      case 'removeClient':
        sm.onClientRemoved(current.clientId, timestampUs);
        model?.removeClient(current.clientId);
        break;
      case 'bump': {
        const [stream, topic, partition] = current.at;
        const [size, messages, segments] = current.delta;
        const bumped = sm.bumpPartitionStats(stream, topic, partition, { sizeBytes: size, messagesCount: messages, segmentsCount: segments });
        if (model !== undefined) expect(bumped).toBe(model.bump(stream, topic, partition, size, messages, segments));
        break;
      }
      case 'restore': {
        const snapshot = sm.snapshot();
        sm.restore(throughBytes(snapshot, op));
        expect(sm.snapshot()).toEqual(snapshot);
        break;
      }
    }
    // The membership index answers what a walk of every group would, after every step.
    if (model !== undefined) {
      for (const client of CLIENT_IDS) expect(sm.consumerGroupsOfClient(client)).toEqual(model.groupsOfClient(client));
    }
  }
  return { sm, codes };
}

function countersOf(sm: MetadataStateMachine): ReturnType<ReferenceModel['counters']> {
  const streams: [number, number, number][] = [];
  const partitions: [number, number, number, number, number, number][] = [];
  for (const stream of sm.queries.streams()) {
    streams.push([stream.id, stream.sizeBytes, stream.messagesCount]);
    for (const topic of sm.queries.topics(idOf(stream.id)) ?? []) {
      for (const partition of sm.queries.topic(idOf(stream.id), idOf(topic.id))?.partitions ?? []) {
        partitions.push([stream.id, topic.id, partition.id, partition.sizeBytes, partition.messagesCount, partition.segmentsCount]);
      }
    }
  }
  return { streams, partitions };
}

/**
 * Sequences open with a prelude (two streams with topics, a group, two users with random grants)
 * so the random steps mostly hit existing resources and users instead of their not-found codes.
 */
const prelude: fc.Arbitrary<Step[]> = fc.tuple(permissions, permissions).map(([alice, bob]) =>
  [
    { operation: Operation.createStream, name: 'a' },
    { operation: Operation.createStream, name: 'b' },
    { operation: Operation.createTopic, streamId: idOf(0), partitionsCount: 2, compressionAlgorithm: 1, messageExpiryUs: U64_MAX, maxTopicSizeBytes: U64_MAX, replicationFactor: 1, name: 'a', options: [] },
    { operation: Operation.createTopic, streamId: idOf(1), partitionsCount: 1, compressionAlgorithm: 1, messageExpiryUs: U64_MAX, maxTopicSizeBytes: U64_MAX, replicationFactor: 1, name: 'b', options: [] },
    { operation: Operation.createConsumerGroup, streamId: idOf(0), topicId: idOf(0), name: 'a' },
    { operation: Operation.createUser, username: 'alice', passwordHash: fakeHash(1), status: 1, permissions: alice },
    { operation: Operation.createUser, username: 'bob', passwordHash: fakeHash(2), status: 1, permissions: bob },
  ].map((request): Step => ({ kind: 'op', actor: 0, clientId: 1n, request: request as MetadataRequest })),
);
const sequences = fc
  .tuple(prelude, fc.array(step, { minLength: 1, maxLength: 150, size: 'max' }))
  .map(([head, tail]) => [...head, ...tail]);

describe('metadata reference model', () => {
  it('agrees with the state machine on every reply, the final state and the counters', () => {
    fc.assert(
      fc.property(sequences, (steps) => {
        const model = new ReferenceModel(GENESIS.rootUsername, GENESIS.rootPasswordHash, LIMITS);
        const { sm } = run(steps, model);
        expect(sm.snapshot()).toEqual(model.snapshot());
        expect(countersOf(sm)).toEqual(model.counters());
      }),
      { numRuns: 300 },
    );
  });

  it('is deterministic: two instances applying one sequence end with byte-identical snapshots', () => {
    fc.assert(
      fc.property(sequences, (steps) => {
        const left = run(steps);
        const right = run(steps);
        expect(right.codes).toEqual(left.codes);
        expect(snapshotEncodeTs(fullSnapshot(right.sm.snapshot()))).toEqual(snapshotEncodeTs(fullSnapshot(left.sm.snapshot())));
      }),
      { numRuns: 100 },
    );
  });

  it('a replica restored from a snapshot at any point continues exactly like one that applied everything', () => {
    fc.assert(
      fc.property(sequences, fc.nat(), (steps, at) => {
        const split = at % (steps.length + 1);
        const full = run(steps);
        const prefix = run(steps.slice(0, split));
        const replica = new MetadataStateMachine(GENESIS, { limits: LIMITS });
        replica.restore(throughBytes(prefix.sm.snapshot(), split));
        expect(replica.snapshot()).toEqual(prefix.sm.snapshot());
        let op = split;
        let timestampUs = 1_000_000 + split * 1_000_000;
        for (const current of steps.slice(split)) {
          op += 1;
          timestampUs += 1_000_000;
          if (current.kind === 'op') {
            replica.apply({ op, operation: current.request.operation, timestampUs, userId: current.actor, clientId: current.clientId, body: encodeRequest(current.request) });
          } else if (current.kind === 'removeClient') {
            replica.onClientRemoved(current.clientId, timestampUs);
          }
        }
        expect(snapshotEncodeTs(fullSnapshot(replica.snapshot()))).toEqual(snapshotEncodeTs(fullSnapshot(full.sm.snapshot())));
      }),
      { numRuns: 100 },
    );
  });
});

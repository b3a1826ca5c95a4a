/**
 * Permissions matrix: every metadata operation against every single grant (global, per stream, per
 * topic, on the target and on a sibling), applied through the state machine; plus the read-side
 * checks. The expected sets restate Iggy's permissioner rules (permissions.ts header).
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/metadata/errors.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation, type MetadataRequest } from '../../src/metadata/operations.js';
import {
  canCreateStream,
  canManageUsers,
  canPollMessages,
  canReadServers,
  canReadStream,
  canReadStreams,
  canReadTopic,
  canReadTopics,
  canReadUsers,
  canSendMessages,
  canonicalPermissions,
  type Principal,
} from '../../src/metadata/permissions.js';
import { GlobalPermission as G, StreamPermission as S, TopicPermission as T, type PermissionsSnapshot } from '../../src/format/snapshot-model.js';
import { Driver, ROOT, fakeHash, req } from './metadata-fixtures.js';

type Grant = { readonly label: string; readonly permissions: PermissionsSnapshot | null };

const globalGrant = (label: string, bits: number): Grant => ({ label: `global.${label}`, permissions: { global: bits, streams: [] } });
const streamGrant = (label: string, streamId: number, bits: number): Grant => ({
  label: `stream${streamId}.${label}`,
  permissions: { global: 0, streams: [{ streamId, bits, topics: [] }] },
});
const topicGrant = (label: string, topicId: number, bits: number): Grant => ({
  label: `stream0.topic${topicId}.${label}`,
  permissions: { global: 0, streams: [{ streamId: 0, bits: 0, topics: [{ topicId, bits }] }] },
});

const GRANTS: readonly Grant[] = [
  { label: 'null', permissions: null },
  { label: 'none', permissions: { global: 0, streams: [] } },
  ...Object.entries(G).map(([label, bit]) => globalGrant(label, bit)),
  ...Object.entries(S).map(([label, bit]) => streamGrant(label, 0, bit)),
  streamGrant('manageStream', 1, S.manageStream),
  streamGrant('manageTopics', 1, S.manageTopics),
  ...Object.entries(T).map(([label, bit]) => topicGrant(label, 0, bit)),
  topicGrant('manageTopic', 1, T.manageTopic),
  topicGrant('readTopic', 1, T.readTopic),
];

const MANAGE_STREAM = ['global.manageStreams', 'stream0.manageStream'];
const CREATE_TOPIC = [...MANAGE_STREAM, 'global.manageTopics', 'stream0.manageTopics'];
const MANAGE_TOPIC = [...CREATE_TOPIC, 'stream0.topic0.manageTopic'];
const READ_TOPIC = [
  'global.readStreams',
  'global.manageStreams',
  'global.manageTopics',
  'global.readTopics',
  'stream0.manageStream',
  'stream0.readStream',
  'stream0.manageTopics',
  'stream0.readTopics',
  'stream0.topic0.manageTopic',
  'stream0.topic0.readTopic',
];
const MANAGE_USERS = ['global.manageUsers'];
const EVERYONE = GRANTS.map((grant) => grant.label);

/** Operations on stream 0 / topic 0 that succeed for root in the fixture below. */
const OPERATIONS: readonly {
  readonly label: string;
  readonly request: MetadataRequest;
  readonly allowed: readonly string[];
  readonly clientId?: bigint;
  /** What root runs instead, when the request is self-scoped (root has no token `mine`). */
  readonly rootRequest?: MetadataRequest;
}[] = [
  { label: 'create stream', request: req.createStream('new'), allowed: ['global.manageStreams'] },
  { label: 'update stream', request: req.updateStream(0, 'renamed'), allowed: MANAGE_STREAM },
  { label: 'delete stream', request: req.deleteStream(0), allowed: MANAGE_STREAM },
  { label: 'purge stream', request: req.purgeStream(0), allowed: MANAGE_STREAM },
  { label: 'create topic', request: req.createTopic(0, 'new'), allowed: CREATE_TOPIC },
  { label: 'update topic', request: req.updateTopic(0, 0, 'renamed'), allowed: MANAGE_TOPIC },
  { label: 'delete topic', request: req.deleteTopic(0, 0), allowed: MANAGE_TOPIC },
  { label: 'purge topic', request: req.purgeTopic(0, 0), allowed: MANAGE_TOPIC },
  { label: 'create partitions', request: req.createPartitions(0, 0, 1), allowed: MANAGE_TOPIC },
  { label: 'delete partitions', request: req.deletePartitions(0, 0, 1), allowed: MANAGE_TOPIC },
  { label: 'delete segments', request: req.deleteSegments(0, 0, 0), allowed: MANAGE_TOPIC },
  { label: 'create group', request: req.createGroup(0, 0, 'new'), allowed: READ_TOPIC },
  { label: 'delete group', request: req.deleteGroup(0, 0, 'g'), allowed: READ_TOPIC },
  { label: 'join group', request: req.joinGroup(0, 0, 'g'), allowed: READ_TOPIC, clientId: 50n },
  { label: 'leave group', request: req.leaveGroup(0, 0, 'g'), allowed: READ_TOPIC, clientId: 60n },
  { label: 'create user', request: req.createUser('newuser'), allowed: MANAGE_USERS },
  { label: 'update user', request: req.updateUser('other', 'other2'), allowed: MANAGE_USERS },
  { label: 'delete user', request: req.deleteUser('other'), allowed: MANAGE_USERS },
  { label: 'update permissions', request: req.updatePermissions('other', null), allowed: MANAGE_USERS },
  { label: "change another's password", request: req.changePassword('other', fakeHash(900), fakeHash(901)), allowed: MANAGE_USERS },
  { label: 'change own password', request: req.changePassword('actor', fakeHash(800), fakeHash(801)), allowed: EVERYONE },
  { label: 'create own token', request: req.createPat('fresh', 77), allowed: EVERYONE },
  { label: 'delete own token', request: req.deletePat('mine'), allowed: EVERYONE, rootRequest: req.deletePat('mine', 1) },
];

/** Streams 0 and 1, topics 0 and 1 in each, group `g` on 0/0 with client 60 as member. */
function fixture(permissions: PermissionsSnapshot | null): { driver: Driver; actor: number } {
  const driver = new Driver();
  for (const stream of ['s0', 's1']) {
    driver.created(ROOT, req.createStream(stream));
    driver.created(ROOT, req.createTopic(stream, 't0', 2));
    driver.created(ROOT, req.createTopic(stream, 't1', 2));
  }
  driver.created(ROOT, req.createGroup(0, 0, 'g'));
  expect(driver.code(ROOT, req.joinGroup(0, 0, 'g'), 60n)).toBe(0);
  const actor = driver.created(ROOT, req.createUser('actor', permissions, fakeHash(800)));
  driver.created(ROOT, req.createUser('other', null, fakeHash(900)));
  expect(driver.code(actor, req.createPat('mine', 78))).toBe(0);
  return { driver, actor };
}

describe('permissions matrix: every operation x every grant, at apply', () => {
  for (const operation of OPERATIONS) {
    it(`${operation.label}: allowed by ${operation.allowed === EVERYONE ? 'everyone' : operation.allowed.join(', ')}`, () => {
      for (const grant of GRANTS) {
        const { driver, actor } = fixture(grant.permissions);
        const body = encodeRequest(operation.request);
        const precheck = driver.sm.precheck(actor, operation.request.operation, body, { clientId: operation.clientId ?? 1n });
        const code = driver.code(actor, operation.request, operation.clientId ?? 1n);
        const expected = operation.allowed.includes(grant.label) ? ErrorCode.ok : ErrorCode.unauthorized;
        expect({ grant: grant.label, code }).toEqual({ grant: grant.label, code: expected });
        expect({ grant: grant.label, precheck }).toEqual({ grant: grant.label, precheck: expected });
      }
      // Root bypasses every check.
      const { driver } = fixture(null);
      expect(driver.code(ROOT, operation.rootRequest ?? operation.request, operation.clientId ?? 1n)).toBe(ErrorCode.ok);
    });
  }
});

describe('permissions: re-checked at apply', () => {
  it('a grant revoked between precheck and commit makes the commit a rejection', () => {
    const { driver, actor } = fixture({ global: G.manageStreams, streams: [] });
    const body = encodeRequest(req.createStream('late'));
    expect(driver.sm.precheck(actor, Operation.createStream, body)).toBe(ErrorCode.ok);
    expect(driver.code(ROOT, req.updatePermissions(actor, null))).toBe(ErrorCode.ok);
    expect(driver.code(actor, req.createStream('late'))).toBe(ErrorCode.unauthorized);
  });

  it('the acting user comes from ApplyInput.userId only: a body naming root changes nothing', () => {
    const { driver, actor } = fixture(null);
    // Deleting root's token "as root" requires being root; the owner field is a target, not an identity.
    expect(driver.code(ROOT, req.createPat('roots', 5))).toBe(ErrorCode.ok);
    expect(driver.code(actor, req.deletePat('roots', ROOT))).toBe(ErrorCode.unauthorized);
  });
});

describe('permissions: read-side checks', () => {
  const principal = (grant: Grant): Principal => ({ id: 5, permissions: grant.permissions });
  const allowedBy = (check: (p: Principal) => boolean): string[] => GRANTS.filter((grant) => check(principal(grant))).map((g) => g.label);

  it('streams', () => {
    expect(allowedBy(canReadStreams)).toEqual(['global.manageStreams', 'global.readStreams']);
    expect(allowedBy((p) => canReadStream(p, 0))).toEqual(['global.manageStreams', 'global.readStreams', 'stream0.manageStream', 'stream0.readStream']);
    expect(allowedBy(canCreateStream)).toEqual(['global.manageStreams']);
  });

  it('topics', () => {
    expect(allowedBy((p) => canReadTopics(p, 0)).sort()).toEqual(READ_TOPIC.filter((label) => !label.includes('topic0')).sort());
    expect(allowedBy((p) => canReadTopic(p, 0, 0)).sort()).toEqual([...READ_TOPIC].sort());
  });

  it('users and servers', () => {
    expect(allowedBy(canManageUsers)).toEqual(['global.manageUsers']);
    expect(allowedBy(canReadUsers)).toEqual(['global.manageUsers', 'global.readUsers']);
    expect(allowedBy(canReadServers)).toEqual(['global.manageServers', 'global.readServers']);
  });

  it('messages', () => {
    expect(allowedBy((p) => canPollMessages(p, 0, 0)).sort()).toEqual(
      [...READ_TOPIC, 'global.pollMessages', 'stream0.pollMessages', 'stream0.topic0.pollMessages'].sort(),
    );
    expect(allowedBy((p) => canSendMessages(p, 0, 0)).sort()).toEqual(
      [
        'global.manageStreams',
        'global.manageTopics',
        'global.sendMessages',
        'stream0.manageStream',
        'stream0.manageTopics',
        'stream0.sendMessages',
        'stream0.topic0.manageTopic',
        'stream0.topic0.sendMessages',
      ].sort(),
    );
  });

  it('root is allowed everything, whatever its stored permissions', () => {
    const root: Principal = { id: 0, permissions: null };
    expect([canReadStreams(root), canManageUsers(root), canSendMessages(root, 9, 9), canReadServers(root)]).toEqual([true, true, true, true]);
  });

  it('canonicalPermissions sorts ids and refuses duplicates', () => {
    expect(
      canonicalPermissions({ global: 1, streams: [{ streamId: 5, bits: 1, topics: [{ topicId: 3, bits: 1 }, { topicId: 1, bits: 2 }] }, { streamId: 2, bits: 2, topics: [] }] }),
    ).toEqual({ global: 1, streams: [{ streamId: 2, bits: 2, topics: [] }, { streamId: 5, bits: 1, topics: [{ topicId: 1, bits: 2 }, { topicId: 3, bits: 1 }] }] });
    expect(canonicalPermissions({ global: 0, streams: [{ streamId: 1, bits: 0, topics: [] }, { streamId: 1, bits: 0, topics: [] }] })).toBeNull();
  });
});

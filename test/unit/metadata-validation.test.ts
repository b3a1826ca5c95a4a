/**
 * Every validation rule and every error code the state machine commits, each pinned by a request
 * that hits it (and, where a boundary exists, the value just inside it that passes).
 */
import { describe, expect, it } from 'vitest';
import { SEGMENT_SIZE_BYTES, TOPIC_DEFAULTS, resolveTopicSettings } from '../../src/metadata/defaults.js';
import { ERROR_NAMES, ErrorCode, errorName } from '../../src/metadata/errors.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation } from '../../src/metadata/operations.js';
import { Operation as ProtocolOperation } from '../../src/vsr/header-types.js';
import { U64_MAX } from '../../src/format/snapshot-model.js';
import {
  METADATA_LIMITS,
  PATS_PER_USER_MAX,
  isArgon2idPhc,
  isWellFormed,
  utf8Size,
  validatePassword,
} from '../../src/metadata/validation.js';
import { Driver, ROOT, fakeHash, newMachine, req } from './metadata-fixtures.js';

function withTopic(limits?: Parameters<typeof newMachine>[0]): Driver {
  const driver = new Driver(newMachine(limits));
  driver.created(ROOT, req.createStream('s'));
  driver.created(ROOT, req.createTopic('s', 't', 2));
  return driver;
}

describe('validation: names', () => {
  it('stream names are 1..=255 UTF-8 bytes (InvalidStreamName 1013)', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createStream(''))).toBe(ErrorCode.invalidStreamName);
    expect(driver.code(ROOT, req.createStream('x'.repeat(255)))).toBe(0);
    // 85 three-byte characters = 255 bytes; one more character is 258 bytes and cannot be encoded,
    // so the rule for long names is exercised through the plain validator below.
    expect(driver.code(ROOT, req.createStream('€'.repeat(85)))).toBe(0);
    driver.created(ROOT, req.createStream('s'));
    expect(driver.code(ROOT, req.updateStream('s', ''))).toBe(ErrorCode.invalidStreamName);
  });

  it('topic names are 1..=255 bytes (InvalidTopicName 2014)', () => {
    const driver = withTopic();
    expect(driver.code(ROOT, req.createTopic('s', ''))).toBe(ErrorCode.invalidTopicName);
    expect(driver.code(ROOT, req.updateTopic('s', 't', ''))).toBe(ErrorCode.invalidTopicName);
  });

  it('consumer group names are 1..=255 bytes (InvalidConsumerGroupName 5005)', () => {
    const driver = withTopic();
    expect(driver.code(ROOT, req.createGroup('s', 't', ''))).toBe(ErrorCode.invalidConsumerGroupName);
  });

  it('usernames are 3..=50 bytes (InvalidUsername 43), on create and rename', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createUser('ab'))).toBe(ErrorCode.invalidUsername);
    expect(driver.code(ROOT, req.createUser('x'.repeat(51)))).toBe(ErrorCode.invalidUsername);
    expect(driver.code(ROOT, req.createUser('abc'))).toBe(0);
    expect(driver.code(ROOT, req.createUser('y'.repeat(50)))).toBe(0);
    expect(driver.code(ROOT, req.updateUser('abc', 'no'))).toBe(ErrorCode.invalidUsername);
  });

  it('token names are 3..=30 bytes (InvalidPersonalAccessTokenName 50)', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createPat('ab'))).toBe(ErrorCode.invalidPersonalAccessTokenName);
    expect(driver.code(ROOT, req.createPat('x'.repeat(31)))).toBe(ErrorCode.invalidPersonalAccessTokenName);
    expect(driver.code(ROOT, req.createPat('x'.repeat(30)))).toBe(0);
  });

  it('lengths are UTF-8 bytes and text with a lone surrogate is never valid', () => {
    expect(utf8Size('abc')).toBe(3);
    expect(utf8Size('é')).toBe(2);
    expect(utf8Size('😀')).toBe(4);
    expect(utf8Size('\ud800x')).toBe(-1);
    expect(isWellFormed('\ud83d\ude00')).toBe(true);
    expect(isWellFormed('\ude00')).toBe(false);
    expect(validatePassword('\ud800\ud800x')).toBe(ErrorCode.invalidPassword);
  });
});

describe('validation: duplicates and not-found', () => {
  it('streams: StreamNameAlreadyExists 1012, StreamIdNotFound 1009', () => {
    const driver = withTopic();
    driver.created(ROOT, req.createStream('other'));
    expect(driver.code(ROOT, req.createStream('s'))).toBe(ErrorCode.streamNameAlreadyExists);
    expect(driver.code(ROOT, req.updateStream('other', 's'))).toBe(ErrorCode.streamNameAlreadyExists);
    expect(driver.code(ROOT, req.updateStream('s', 's'))).toBe(0);
    for (const request of [req.updateStream(9, 'x'), req.deleteStream('nope'), req.purgeStream(9), req.createTopic(9, 't')]) {
      expect(driver.code(ROOT, request)).toBe(ErrorCode.streamIdNotFound);
    }
  });

  it('topics: TopicNameAlreadyExists 2013, TopicIdNotFound 2010', () => {
    const driver = withTopic();
    driver.created(ROOT, req.createTopic('s', 'u'));
    expect(driver.code(ROOT, req.createTopic('s', 't'))).toBe(ErrorCode.topicNameAlreadyExists);
    expect(driver.code(ROOT, req.updateTopic('s', 'u', 't'))).toBe(ErrorCode.topicNameAlreadyExists);
    for (const request of [
      req.updateTopic('s', 9, 'x'),
      req.deleteTopic('s', 'nope'),
      req.purgeTopic('s', 9),
      req.createPartitions('s', 9, 1),
      req.deletePartitions('s', 9, 1),
      req.deleteSegments('s', 9, 0),
      req.createGroup('s', 9, 'g'),
      req.deleteGroup('s', 9, 0),
      req.joinGroup('s', 9, 0),
      req.leaveGroup('s', 9, 0),
    ]) {
      expect(driver.code(ROOT, request)).toBe(ErrorCode.topicIdNotFound);
    }
  });

  it('partitions and groups: PartitionNotFound 3007, ConsumerGroupIdNotFound 5000, NameAlreadyExists 5004, MemberNotFound 5006', () => {
    const driver = withTopic();
    expect(driver.code(ROOT, req.deleteSegments('s', 't', 2))).toBe(ErrorCode.partitionNotFound);
    driver.created(ROOT, req.createGroup('s', 't', 'g'));
    expect(driver.code(ROOT, req.createGroup('s', 't', 'g'))).toBe(ErrorCode.consumerGroupNameAlreadyExists);
    for (const request of [req.deleteGroup('s', 't', 5), req.joinGroup('s', 't', 'h'), req.leaveGroup('s', 't', 5)]) {
      expect(driver.code(ROOT, request)).toBe(ErrorCode.consumerGroupIdNotFound);
    }
    expect(driver.code(ROOT, req.leaveGroup('s', 't', 'g'))).toBe(ErrorCode.consumerGroupMemberNotFound);
  });

  it('users: UserAlreadyExists 46, ResourceNotFound 20, CannotDeleteUser 48, CannotChangePermissions 49', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createUser('alice'));
    driver.created(ROOT, req.createUser('bob'));
    expect(driver.code(ROOT, req.createUser('alice'))).toBe(ErrorCode.userAlreadyExists);
    expect(driver.code(ROOT, req.updateUser('bob', 'alice'))).toBe(ErrorCode.userAlreadyExists);
    expect(driver.code(ROOT, req.updateUser('bob', 'bob'))).toBe(0);
    for (const request of [
      req.updateUser('zed', null, 2),
      req.deleteUser(9),
      req.changePassword('zed', fakeHash(1), fakeHash(2)),
      req.updatePermissions(9, null),
    ]) {
      expect(driver.code(ROOT, request)).toBe(ErrorCode.resourceNotFound);
    }
    expect(driver.code(ROOT, req.deleteUser(0))).toBe(ErrorCode.cannotDeleteUser);
    expect(driver.code(ROOT, req.deleteUser('iggy'))).toBe(ErrorCode.cannotDeleteUser);
    expect(driver.code(ROOT, req.updatePermissions(0, null))).toBe(ErrorCode.cannotChangePermissions);
  });

  it('tokens: PersonalAccessTokenAlreadyExists 51 (name or hash), ResourceNotFound 20 on delete', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createPat('one', 1))).toBe(0);
    expect(driver.code(ROOT, req.createPat('one', 2))).toBe(ErrorCode.personalAccessTokenAlreadyExists);
    expect(driver.code(ROOT, req.createPat('two', 1))).toBe(ErrorCode.personalAccessTokenAlreadyExists);
    expect(driver.code(ROOT, req.deletePat('three'))).toBe(ErrorCode.resourceNotFound);
    expect(driver.code(ROOT, req.deletePat('one', 42))).toBe(ErrorCode.resourceNotFound);
  });
});

describe('validation: values', () => {
  it('user status is 1 or 2 (InvalidUserStatus 45)', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createUser('alice', null, fakeHash(1), 3))).toBe(ErrorCode.invalidUserStatus);
    expect(driver.code(ROOT, req.createUser('alice', null, fakeHash(1), 2))).toBe(0);
    expect(driver.code(ROOT, req.updateUser('alice', null, 0))).toBe(ErrorCode.invalidUserStatus);
  });

  it('password hashes must be Argon2id PHC strings (InvalidPassword 44): a plaintext never persists', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createUser('alice', null, 'hunter2'))).toBe(ErrorCode.invalidPassword);
    expect(driver.code(ROOT, req.createUser('alice', null, '$argon2i$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'))).toBe(
      ErrorCode.invalidPassword,
    );
    driver.created(ROOT, req.createUser('alice', null, fakeHash(1)));
    expect(driver.code(ROOT, req.changePassword('alice', fakeHash(1), 'hunter2'))).toBe(ErrorCode.invalidPassword);
    expect(isArgon2idPhc(fakeHash(5))).toBe(true);
    expect(isArgon2idPhc(`${fakeHash(5)}${'A'.repeat(200)}`)).toBe(false);
  });

  it('change password with a stale current hash is InvalidCredentials 42', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createUser('alice', null, fakeHash(1)));
    expect(driver.code(ROOT, req.changePassword('alice', fakeHash(2), fakeHash(3)))).toBe(ErrorCode.invalidCredentials);
  });

  it('partitions per request: a topic takes 0..=1000, a change 1..=1000 (TooManyPartitions 2015)', () => {
    const driver = withTopic();
    expect(driver.code(ROOT, req.createTopic('s', 'big', 1001))).toBe(ErrorCode.tooManyPartitions);
    expect(driver.code(ROOT, req.createTopic('s', 'zero', 0))).toBe(0);
    expect(driver.code(ROOT, req.createPartitions('s', 't', 0))).toBe(ErrorCode.tooManyPartitions);
    expect(driver.code(ROOT, req.createPartitions('s', 't', 1001))).toBe(ErrorCode.tooManyPartitions);
    expect(driver.code(ROOT, req.deletePartitions('s', 't', 0))).toBe(ErrorCode.tooManyPartitions);
    expect(driver.code(ROOT, req.deletePartitions('s', 't', 3))).toBe(ErrorCode.invalidPartitionsCount);
  });

  it('topic settings: compression 1|2 (InvalidCommand 3), resolved expiry and size, size floor 1019, replication 2018', () => {
    const driver = withTopic();
    const cases: [Parameters<typeof req.createTopic>[3], number][] = [
      [{ compressionAlgorithm: 0 }, ErrorCode.invalidCommand],
      [{ compressionAlgorithm: 3 }, ErrorCode.invalidCommand],
      [{ messageExpiryUs: 0n }, ErrorCode.invalidCommand],
      [{ maxTopicSizeBytes: 0n }, ErrorCode.invalidCommand],
      [{ maxTopicSizeBytes: SEGMENT_SIZE_BYTES - 1n }, ErrorCode.invalidTopicSize],
      [{ replicationFactor: 0 }, ErrorCode.invalidReplicationFactor],
    ];
    for (const [settings, code] of cases) {
      expect(driver.code(ROOT, req.createTopic('s', 'x', 1, settings))).toBe(code);
      expect(driver.code(ROOT, req.updateTopic('s', 't', 't', settings))).toBe(code);
    }
    expect(driver.code(ROOT, req.createTopic('s', 'x', 1, { maxTopicSizeBytes: SEGMENT_SIZE_BYTES, replicationFactor: 255 }))).toBe(0);
  });

  it('the primary resolves server defaults before proposing: sentinels never reach apply', () => {
    expect(resolveTopicSettings({})).toEqual({ messageExpiryUs: U64_MAX, maxTopicSizeBytes: U64_MAX, compressionAlgorithm: 1, replicationFactor: 1 });
    expect(resolveTopicSettings({ messageExpiryUs: 0n, maxTopicSizeBytes: 0n }, { ...TOPIC_DEFAULTS, messageExpiryUs: 60n })).toMatchObject({
      messageExpiryUs: 60n,
      maxTopicSizeBytes: U64_MAX,
    });
    expect(resolveTopicSettings({ replicationFactor: 0, compressionAlgorithm: 9 })).toMatchObject({ replicationFactor: 0, compressionAlgorithm: 9 });
  });

  it('token expiry past the representable range is InvalidPersonalAccessTokenExpiry 56; 0 and u64::MAX never expire', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, req.createPat('far', 1, 1n << 60n))).toBe(ErrorCode.invalidPersonalAccessTokenExpiry);
    expect(driver.code(ROOT, req.createPat('never', 2, U64_MAX))).toBe(0);
    expect(driver.code(ROOT, req.createPat('zero', 3, 0n))).toBe(0);
    expect(driver.sm.queries.personalAccessTokens(ROOT)?.map((token) => token.expiryAtUs)).toEqual([null, null]);
  });

  it('malformed bodies and non-metadata operations are InvalidCommand 3', () => {
    const driver = new Driver();
    expect(driver.raw(ROOT, Operation.createStream, new Uint8Array([2, 0x61]))).toMatchObject({ errorCode: ErrorCode.invalidCommand });
    expect(driver.raw(ROOT, ProtocolOperation.register, new Uint8Array())).toMatchObject({ errorCode: ErrorCode.invalidCommand });
    expect(driver.raw(ROOT, Operation.createTopicWithAssignments, new Uint8Array())).toMatchObject({ errorCode: ErrorCode.invalidCommand });
    expect(driver.raw(ROOT, 200, encodeRequest(req.createStream('s')))).toMatchObject({ errorCode: ErrorCode.invalidCommand });
  });
});

describe('validation: limits (each collection bounded, a clear error when full)', () => {
  it('streams: TooManyStreams 1020', () => {
    const driver = new Driver(newMachine({ streamsMax: 2 }));
    driver.created(ROOT, req.createStream('a'));
    driver.created(ROOT, req.createStream('b'));
    expect(driver.code(ROOT, req.createStream('c'))).toBe(ErrorCode.tooManyStreams);
    driver.code(ROOT, req.deleteStream('a'));
    expect(driver.created(ROOT, req.createStream('c'))).toBe(0);
  });

  it('topics per stream: TooManyTopics 2021 at the production bound of 4096', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s'));
    for (let topic = 0; topic < METADATA_LIMITS.topicsPerStreamMax; topic++) driver.created(ROOT, req.createTopic('s', `t${topic}`, 0));
    expect(driver.code(ROOT, req.createTopic('s', 'one-more', 0))).toBe(ErrorCode.tooManyTopics);
  });

  it('partitions per topic: PartitionIdSpaceExhausted 3013', () => {
    const driver = withTopic({ partitionsPerTopicMax: 4 });
    expect(driver.code(ROOT, req.createTopic('s', 'big', 5))).toBe(ErrorCode.partitionIdSpaceExhausted);
    expect(driver.code(ROOT, req.createPartitions('s', 't', 3))).toBe(ErrorCode.partitionIdSpaceExhausted);
    expect(driver.code(ROOT, req.createPartitions('s', 't', 2))).toBe(0);
  });

  it('users: UsersLimitReached 55 (root counts)', () => {
    const driver = new Driver(newMachine({ usersMax: 2 }));
    driver.created(ROOT, req.createUser('alice'));
    expect(driver.code(ROOT, req.createUser('bob'))).toBe(ErrorCode.usersLimitReached);
  });

  it('tokens per user: PersonalAccessTokensLimitReached 52 at 100, checked before the duplicate name', () => {
    const driver = new Driver();
    expect(PATS_PER_USER_MAX).toBe(100);
    for (let token = 0; token < PATS_PER_USER_MAX; token++) expect(driver.code(ROOT, req.createPat(`tok${token}`, token))).toBe(0);
    expect(driver.code(ROOT, req.createPat('tok0', 500))).toBe(ErrorCode.personalAccessTokensLimitReached);
    expect(driver.code(ROOT, req.createPat('new-one', 501))).toBe(ErrorCode.personalAccessTokensLimitReached);
  });

  it('groups per topic and members per group: the vrmeta extension codes 90001 and 90002', () => {
    const driver = withTopic({ consumerGroupsPerTopicMax: 1, consumerGroupMembersMax: 2 });
    driver.created(ROOT, req.createGroup('s', 't', 'g'));
    expect(driver.code(ROOT, req.createGroup('s', 't', 'h'))).toBe(ErrorCode.consumerGroupsLimitReached);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 1n)).toBe(0);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 2n)).toBe(0);
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 3n)).toBe(ErrorCode.consumerGroupMembersLimitReached);
    // A re-join of an existing member is still fine at the limit.
    expect(driver.code(ROOT, req.joinGroup('s', 't', 'g'), 2n)).toBe(0);
  });
});

describe('error codes', () => {
  it('every code has a snake_case name matching Iggy', () => {
    expect(errorName(1012)).toBe('stream_name_already_exists');
    expect(errorName(5004)).toBe('consumer_group_name_already_exists');
    expect(errorName(41)).toBe('unauthorized');
    expect(errorName(12345)).toBe('error_12345');
    for (const [code, name] of Object.entries(ERROR_NAMES)) {
      expect(name, code).toMatch(/^[a-z0-9_]+$/);
    }
    expect(Object.keys(ERROR_NAMES).map(Number).sort((a, b) => a - b)).toEqual(
      Object.values(ErrorCode).sort((a, b) => a - b),
    );
  });
});

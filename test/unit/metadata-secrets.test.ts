/**
 * Secret handling: passwords and personal access tokens never appear in an operation body or a
 * snapshot. Checked by scanning the actual encoded bytes for the plaintext's UTF-8 bytes.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { ErrorCode } from '../../src/metadata/errors.js';
import { decodeRequest } from '../../src/metadata/operation-codec.js';
import { idOf, nameOf, Operation } from '../../src/metadata/operations.js';
import { MetadataStateMachine } from '../../src/metadata/state-machine.js';
import { GENESIS_PASSWORD_MARKER, isArgon2idPhc } from '../../src/metadata/validation.js';
import {
  changePasswordBody,
  createPasswordVerifier,
  createPersonalAccessTokenBody,
  createUserBody,
  hashPassword,
  personalAccessTokenHash,
  verifyPassword,
} from '../../src/http/secrets.js';
import { fullSnapshot } from './metadata-fixtures.js';

const utf8 = new TextEncoder();

function contains(haystack: Uint8Array, needle: string): boolean {
  const bytes = utf8.encode(needle);
  outer: for (let start = 0; start + bytes.length <= haystack.length; start++) {
    for (let index = 0; index < bytes.length; index++) if (haystack[start + index] !== bytes[index]) continue outer;
    return true;
  }
  return false;
}

/** A replica's genesis: root's stored hash is the marker. */
function machine(): MetadataStateMachine {
  return new MetadataStateMachine({ rootUsername: 'iggy', rootPasswordHash: GENESIS_PASSWORD_MARKER });
}

let op = 0;
function apply(sm: MetadataStateMachine, userId: number, operation: number, body: Uint8Array): number {
  op += 1;
  return sm.apply({ op, operation, timestampUs: 1_000_000 + op, userId, clientId: 1n, body }).errorCode;
}

describe('secrets: password hashing', () => {
  it('hashes with Argon2id and verifies; a wrong password or a garbage hash is false, never a throw', async () => {
    const hash = await hashPassword('correct horse');
    expect(isArgon2idPhc(hash)).toBe(true);
    expect(hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verifyPassword(hash, 'correct horse')).toBe(true);
    expect(await verifyPassword(hash, 'wrong horse')).toBe(false);
    expect(await verifyPassword('not a hash', 'x')).toBe(false);
    expect(await hashPassword('correct horse')).not.toBe(hash);
  });

  it('the genesis state holds the marker and no hash, so it is identical on every replica', () => {
    const left = snapshotEncodeTs(fullSnapshot(machine().snapshot()));
    const right = snapshotEncodeTs(fullSnapshot(machine().snapshot()));
    expect(left).toEqual(right);
    expect(contains(left, 'iggy')).toBe(true); // the username is there...
    expect(contains(left, GENESIS_PASSWORD_MARKER)).toBe(true); // ...with the marker...
    expect(contains(left, '$argon2id$')).toBe(false); // ...and no hash of root's password at all
  });
});

describe('secrets: the password verifier maps root genesis marker to this replica hash', () => {
  it('the marker verifies the configured password against the in-memory hash, and refuses a wrong one', async () => {
    const verify = createPasswordVerifier(hashPassword('configured-pass'));
    expect(await verify(GENESIS_PASSWORD_MARKER, 'configured-pass')).toBe(true);
    expect(await verify(GENESIS_PASSWORD_MARKER, 'iggy')).toBe(false);
    // Without the mapping the marker is no hash: a plain verification refuses everything.
    expect(await verifyPassword(GENESIS_PASSWORD_MARKER, 'configured-pass')).toBe(false);
  });

  it('two replicas configured alike hold different genesis hashes (a random salt each)', async () => {
    const [left, right] = await Promise.all([hashPassword('iggy'), hashPassword('iggy')]);
    expect(isArgon2idPhc(left) && isArgon2idPhc(right)).toBe(true);
    expect(left).not.toBe(right);
    for (const genesisHash of [left, right]) expect(await createPasswordVerifier(genesisHash)(GENESIS_PASSWORD_MARKER, 'iggy')).toBe(true);
  });

  it('a stored PHC verifies as it is: a root hash written by an earlier version keeps working', async () => {
    const verify = createPasswordVerifier(hashPassword('iggy'));
    const stored = await hashPassword('old-root-pass');
    expect(await verify(stored, 'old-root-pass')).toBe(true);
    expect(await verify(stored, 'iggy')).toBe(false);
    expect(await verify('not a hash', 'iggy')).toBe(false);
  });

  it("root's ChangePassword names the marker as current; once applied, root's stored hash is a random-salted PHC", async () => {
    const sm = machine();
    const verify = createPasswordVerifier(hashPassword('iggy'));
    expect(await changePasswordBody(sm, idOf(0), 'not-iggy', 'new-root-pass', verify)).toEqual({ ok: false, errorCode: ErrorCode.invalidCredentials });
    const built = await changePasswordBody(sm, idOf(0), 'iggy', 'new-root-pass', verify);
    expect(built.ok).toBe(true);
    if (!built.ok) return;
    const decoded = decodeRequest(Operation.changePassword, built.body);
    expect(decoded.ok && decoded.request.operation === Operation.changePassword && decoded.request.currentPasswordHash).toBe(GENESIS_PASSWORD_MARKER);
    expect(apply(sm, 0, Operation.changePassword, built.body)).toBe(0);
    const stored = sm.passwordHashOf(idOf(0))!;
    expect(isArgon2idPhc(stored)).toBe(true);
    expect(await verify(stored, 'new-root-pass')).toBe(true);
    expect(await verify(stored, 'iggy')).toBe(false);
    expect(await verify(GENESIS_PASSWORD_MARKER, 'new-root-pass')).toBe(false);
  });
});

describe('secrets: operation bodies and snapshots carry no plaintext', () => {
  it('create user: the body and the snapshot hold a PHC hash, not the password', async () => {
    const sm = machine();
    const password = 'S3cret-Pa55word';
    const built = await createUserBody({ username: 'alice', password });
    expect(built.ok).toBe(true);
    if (!built.ok) return;
    expect(contains(built.body, password)).toBe(false);
    const decoded = decodeRequest(Operation.createUser, built.body);
    expect(decoded.ok && decoded.request.operation === Operation.createUser && isArgon2idPhc(decoded.request.passwordHash)).toBe(true);
    expect(apply(sm, 0, Operation.createUser, built.body)).toBe(0);
    const bytes = snapshotEncodeTs(fullSnapshot(sm.snapshot()));
    expect(contains(bytes, password)).toBe(false);
    expect(await verifyPassword(sm.credentials('alice')!.passwordHash, password)).toBe(true);
  });

  it('create user validates the plaintext first (InvalidPassword 44, InvalidUsername 43)', async () => {
    expect(await createUserBody({ username: 'alice', password: 'ab' })).toEqual({ ok: false, errorCode: ErrorCode.invalidPassword });
    expect(await createUserBody({ username: 'alice', password: 'x'.repeat(101) })).toEqual({ ok: false, errorCode: ErrorCode.invalidPassword });
    expect(await createUserBody({ username: 'al', password: 'secret' })).toEqual({ ok: false, errorCode: ErrorCode.invalidUsername });
  });

  it('change password: verified on the receiving node; the body holds neither password', async () => {
    const sm = machine();
    const created = await createUserBody({ username: 'alice', password: 'old-password' });
    expect(created.ok && apply(sm, 0, Operation.createUser, created.body)).toBe(0);
    const verify = createPasswordVerifier(hashPassword('iggy'));
    expect(await changePasswordBody(sm, nameOf('alice'), 'not-it', 'new-password', verify)).toEqual({ ok: false, errorCode: ErrorCode.invalidCredentials });
    expect(await changePasswordBody(sm, nameOf('bob'), 'old-password', 'new-password', verify)).toEqual({ ok: false, errorCode: ErrorCode.resourceNotFound });
    expect(await changePasswordBody(sm, nameOf('alice'), 'old-password', 'no', verify)).toEqual({ ok: false, errorCode: ErrorCode.invalidPassword });
    const built = await changePasswordBody(sm, nameOf('alice'), 'old-password', 'new-password', verify);
    expect(built.ok).toBe(true);
    if (!built.ok) return;
    expect(contains(built.body, 'old-password')).toBe(false);
    expect(contains(built.body, 'new-password')).toBe(false);
    expect(apply(sm, 1, Operation.changePassword, built.body)).toBe(0);
    expect(await verifyPassword(sm.passwordHashOf(idOf(1))!, 'new-password')).toBe(true);
    // The same body again names a current hash that is no longer stored.
    expect(apply(sm, 1, Operation.changePassword, built.body)).toBe(ErrorCode.invalidCredentials);
    expect(contains(snapshotEncodeTs(fullSnapshot(sm.snapshot())), 'new-password')).toBe(false);
  });

  it('personal access token: only its SHA-256 is replicated; the raw token is returned once', async () => {
    const sm = machine();
    const built = createPersonalAccessTokenBody('ci-token', 0n);
    expect(built.ok).toBe(true);
    if (!built.ok) return;
    expect(built.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(contains(built.body, built.token)).toBe(false);
    expect(personalAccessTokenHash(built.token)).toEqual(new Uint8Array(createHash('sha256').update(built.token).digest()));
    expect(apply(sm, 0, Operation.createPersonalAccessToken, built.body)).toBe(0);
    expect(sm.personalAccessTokenByHash(personalAccessTokenHash(built.token))).toEqual({ userId: 0, name: 'ci-token', expiryAtUs: null });
    expect(sm.personalAccessTokenByHash(personalAccessTokenHash(`${built.token}x`))).toBeNull();
    expect(contains(snapshotEncodeTs(fullSnapshot(sm.snapshot())), built.token)).toBe(false);
    const other = createPersonalAccessTokenBody('ci-token-2', 0n);
    expect(other.ok && other.token !== built.token).toBe(true);
    expect(createPersonalAccessTokenBody('ab', 0n)).toEqual({ ok: false, errorCode: ErrorCode.invalidPersonalAccessTokenName });
  });
});

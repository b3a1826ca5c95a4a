/**
 * RevokeAccessToken (op 150) in the state machine: a revoked id is known until its expiry, the
 * list is pruned at the op's timestamp and bounded (in all, and per user) with a committed
 * rejection when full, duplicates are idempotent, precheck does not mutate, and the list survives
 * snapshot -> encode -> decode -> restore byte for byte (so a replica that catches up by state
 * transfer refuses the same tokens).
 */
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { ErrorCode } from '../../src/metadata/errors.js';
import { encodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation, type MetadataRequest } from '../../src/metadata/operations.js';
import { decodeSnapshot } from '../../src/format/snapshot-codec.js';
import { REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US } from '../../src/metadata/validation.js';
import { Driver, ROOT, fullSnapshot, newMachine, req } from './metadata-fixtures.js';

const HOUR_US = 3_600_000_000;

function jti(seed: number): Uint8Array {
  return Uint8Array.from({ length: 16 }, (_, index) => (seed * 31 + index * 7) & 0xff);
}

function revoke(seed: number, expiryAtUs: number): MetadataRequest {
  return { operation: Operation.revokeAccessToken, jti: jti(seed), expiryAtUs };
}

/** The next op's timestamp of `driver` (it adds 1 s per op). */
function next(driver: Driver): number {
  return driver.timestampUs + 1_000_000;
}

describe('RevokeAccessToken', () => {
  it('a revoked id is known until its expiry, and only that id', () => {
    const driver = new Driver();
    const expiry = next(driver) + HOUR_US;
    expect(driver.code(ROOT, revoke(1, expiry))).toBe(ErrorCode.ok);
    expect(driver.sm.isAccessTokenRevoked(jti(1), driver.timestampUs)).toBe(true);
    expect(driver.sm.isAccessTokenRevoked(jti(2), driver.timestampUs)).toBe(false);
    expect(driver.sm.isAccessTokenRevoked(jti(1), expiry)).toBe(false);
    expect(driver.sm.revokedTokenCount()).toBe(1);
  });

  it('an already expired token is not stored; an expiry beyond any token lifetime is refused', () => {
    const driver = new Driver();
    expect(driver.code(ROOT, revoke(1, next(driver)))).toBe(ErrorCode.ok);
    expect(driver.sm.revokedTokenCount()).toBe(0);
    expect(driver.code(ROOT, revoke(2, next(driver) + REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US + 1))).toBe(ErrorCode.invalidFormat);
    expect(driver.code(ROOT, revoke(2, next(driver) + REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US))).toBe(ErrorCode.ok);
  });

  it('the next revocation prunes what expired at its timestamp', () => {
    const driver = new Driver();
    driver.code(ROOT, revoke(1, next(driver) + 1_500_000)); // expires before the third op
    driver.code(ROOT, revoke(2, next(driver) + HOUR_US));
    expect(driver.sm.revokedTokenCount()).toBe(2);
    driver.code(ROOT, revoke(3, next(driver) + HOUR_US));
    expect(driver.sm.revokedTokenCount()).toBe(2);
    expect(driver.sm.snapshot().revokedTokens.map((token) => token.jti)).toEqual([jti(2), jti(3)].sort(Buffer.compare));
  });

  it('revoking twice is idempotent and keeps the later expiry', () => {
    const driver = new Driver();
    const expiry = next(driver) + HOUR_US;
    driver.code(ROOT, revoke(1, expiry));
    expect(driver.code(ROOT, revoke(1, expiry - 10))).toBe(ErrorCode.ok);
    expect(driver.code(ROOT, revoke(1, expiry + 10))).toBe(ErrorCode.ok);
    expect(driver.sm.snapshot().revokedTokens).toEqual([{ jti: jti(1), userId: ROOT, expiryAtUs: expiry + 10 }]);
  });

  it('bounded per user and in all; a full list refuses with RevokedTokensLimitReached, expired entries do not count', () => {
    const driver = new Driver(newMachine({ revokedTokensMax: 3, revokedTokensPerUserMax: 2 }));
    const alice = driver.created(ROOT, req.createUser('alice'));
    expect(driver.code(ROOT, revoke(1, next(driver) + HOUR_US))).toBe(ErrorCode.ok);
    // Live for the next four ops, expired at the fifth.
    expect(driver.code(ROOT, revoke(2, next(driver) + 4_500_000))).toBe(ErrorCode.ok);
    // Root holds 2: its per-user bound.
    expect(driver.code(ROOT, revoke(3, next(driver) + HOUR_US))).toBe(ErrorCode.revokedTokensLimitReached);
    // Re-revoking an id already held is not a new entry.
    expect(driver.code(ROOT, revoke(1, next(driver) + HOUR_US))).toBe(ErrorCode.ok);
    expect(driver.code(alice, revoke(4, next(driver) + HOUR_US))).toBe(ErrorCode.ok);
    // 3 live entries in all: full for alice too.
    expect(driver.code(alice, revoke(5, next(driver) + HOUR_US))).toBe(ErrorCode.revokedTokensLimitReached);
    expect(driver.sm.revokedTokenCount()).toBe(3);
    // Root's short entry has expired by now: it does not count, and it is pruned.
    expect(driver.code(ROOT, revoke(3, next(driver) + HOUR_US))).toBe(ErrorCode.ok);
    expect(driver.sm.revokedTokenCount()).toBe(3);
    expect(driver.sm.isAccessTokenRevoked(jti(2), driver.timestampUs)).toBe(false);
    expect(driver.sm.isAccessTokenRevoked(jti(3), driver.timestampUs)).toBe(true);
  });

  it('precheck answers like apply and changes nothing', () => {
    const driver = new Driver(newMachine({ revokedTokensMax: 1 }));
    driver.code(ROOT, revoke(1, next(driver) + HOUR_US));
    const before = snapshotEncodeTs(fullSnapshot(driver.sm.snapshot()));
    const body = encodeRequest(revoke(2, next(driver) + HOUR_US));
    expect(driver.sm.precheck(ROOT, Operation.revokeAccessToken, body, { timestampUs: next(driver) })).toBe(ErrorCode.revokedTokensLimitReached);
    expect(driver.sm.precheck(ROOT, Operation.revokeAccessToken, encodeRequest(revoke(1, next(driver) + 2 * HOUR_US)), { timestampUs: next(driver) })).toBe(ErrorCode.ok);
    expect(snapshotEncodeTs(fullSnapshot(driver.sm.snapshot()))).toEqual(before);
  });

  it('survives snapshot -> encode -> decode -> restore, bounds included; two replicas encode the same bytes', () => {
    const run = (): Driver => {
      const driver = new Driver(newMachine({ revokedTokensPerUserMax: 2 }));
      for (let seed = 1; seed <= 2; seed++) driver.code(ROOT, revoke(seed, next(driver) + HOUR_US));
      return driver;
    };
    const left = run();
    const bytes = snapshotEncodeTs(fullSnapshot(left.sm.snapshot(), left.op));
    expect(snapshotEncodeTs(fullSnapshot(run().sm.snapshot(), left.op))).toEqual(bytes);
    const decoded = decodeSnapshot(bytes);
    expect(decoded.revokedTokens).toHaveLength(2);
    const copy = new Driver(newMachine({ revokedTokensPerUserMax: 2 }));
    copy.sm.restore({ users: decoded.users, streams: decoded.streams, revokedTokens: decoded.revokedTokens });
    copy.op = left.op;
    copy.timestampUs = left.timestampUs;
    expect(copy.sm.isAccessTokenRevoked(jti(1), copy.timestampUs)).toBe(true);
    // The per-user count was rebuilt from the snapshot: root is at its bound.
    expect(copy.code(ROOT, revoke(9, next(copy) + HOUR_US))).toBe(ErrorCode.revokedTokensLimitReached);
    expect(snapshotEncodeTs(fullSnapshot(copy.sm.snapshot(), left.op))).toEqual(bytes);
  });
});

/**
 * The verified-JWT cache of the Authenticator: a token that verified once is not HMAC-checked
 * again, but every answer stays exactly jose's answer for that token at that time (exp and nbf
 * with the clock skew, whole seconds), and the cache is bounded.
 */
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { Authenticator, JWT_AUDIENCE, JWT_CLOCK_SKEW_SECONDS, JWT_ISSUER, VERIFIED_JWTS_MAX } from '../../src/http/auth.js';
import { createTestNode } from '../../src/http/test-node.js';
import { JWT_SECRET } from './http-fixtures.js';

const T0_S = 1_750_000_000;

/** A UUID-shaped jti (the only shape this cluster issues), distinct per `n`. */
function jtiOf(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}
const FIRST = jtiOf(0xf1);

async function token(claims: { nbfS?: number; expS: number; jti?: string }): Promise<string> {
  const jwt = new SignJWT({ user_created_at: 1 })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setJti(claims.jti ?? jtiOf(1))
    .setSubject('0')
    .setIssuer(JWT_ISSUER)
    .setAudience(JWT_AUDIENCE)
    .setIssuedAt(T0_S)
    .setExpirationTime(claims.expS);
  if (claims.nbfS !== undefined) jwt.setNotBefore(claims.nbfS);
  return jwt.sign(JWT_SECRET);
}

async function authenticators(): Promise<{ clock: { nowMs: number }; cached: Authenticator; fresh: () => Authenticator }> {
  const node = await createTestNode();
  const clock = { nowMs: T0_S * 1000 };
  const make = (): Authenticator => new Authenticator(node, { jwtSecret: JWT_SECRET, accessTokenExpirySeconds: 3600, nowMs: () => clock.nowMs });
  return { clock, cached: make(), fresh: make };
}

describe('verified-JWT cache', () => {
  it('a cached token expires exactly when jose says it does (skew included)', async () => {
    const { clock, cached, fresh } = await authenticators();
    const expS = T0_S + 60;
    const jwt = await token({ expS });
    expect(await cached.verifyJwt(jwt)).not.toBeNull(); // now cached
    for (let offsetMs = 50_000; offsetMs <= 70_000; offsetMs += 250) {
      clock.nowMs = T0_S * 1000 + offsetMs;
      const expected = await fresh().verifyJwt(jwt);
      expect(await cached.verifyJwt(jwt), `at +${offsetMs} ms`).toEqual(expected);
    }
    // Past exp + skew it is refused, and stays refused.
    clock.nowMs = (expS + JWT_CLOCK_SKEW_SECONDS + 1) * 1000;
    expect(await cached.verifyJwt(jwt)).toBeNull();
  });

  it('a clock that steps back before nbf refuses a cached token as jose does', async () => {
    const { clock, cached, fresh } = await authenticators();
    const jwt = await token({ nbfS: T0_S + 3, expS: T0_S + 3600 });
    expect(await cached.verifyJwt(jwt)).not.toBeNull(); // nbf within the skew
    for (const stepBackS of [0, 1, 2, 5, 10, 30]) {
      clock.nowMs = (T0_S - stepBackS) * 1000;
      expect(await cached.verifyJwt(jwt), `${stepBackS} s back`).toEqual(await fresh().verifyJwt(jwt));
    }
  });

  it('a bad signature is never cached, and a token of another key stays refused', async () => {
    const { cached } = await authenticators();
    const good = await token({ expS: T0_S + 3600 });
    const [header, payload] = good.split('.');
    const forged = `${header}.${payload}.${'A'.repeat(43)}`;
    expect(await cached.verifyJwt(forged)).toBeNull();
    expect(await cached.verifyJwt(good)).not.toBeNull();
    expect(await cached.verifyJwt(forged)).toBeNull();
  });

  it('holds at most VERIFIED_JWTS_MAX tokens and still verifies an evicted one', async () => {
    const { cached } = await authenticators();
    const first = await token({ expS: T0_S + 3600, jti: FIRST });
    expect(await cached.verifyJwt(first)).toMatchObject({ jti: FIRST });
    for (let index = 0; index < VERIFIED_JWTS_MAX; index++) {
      expect(await cached.verifyJwt(await token({ expS: T0_S + 3600, jti: jtiOf(0x1000 + index) }))).not.toBeNull();
    }
    const size = (cached as unknown as { verified: Map<string, unknown> }).verified.size;
    expect(size).toBe(VERIFIED_JWTS_MAX);
    expect((cached as unknown as { verified: Map<string, unknown> }).verified.has(first)).toBe(false);
    expect(await cached.verifyJwt(first)).toMatchObject({ jti: FIRST });
  });

  it('a correctly signed token whose jti is not a UUID was not issued here: refused', async () => {
    const { cached } = await authenticators();
    expect(await cached.verifyJwt(await token({ expS: T0_S + 3600, jti: 'session-1' }))).toBeNull();
    expect(await cached.verifyJwt(await token({ expS: T0_S + 3600 }))).not.toBeNull();
  });
});

/**
 * Bearer authentication: JWTs this cluster issued (HS256, `jose`) and raw personal access tokens,
 * through one chokepoint as Iggy's `resolve_credential` (iggy-http-api-and-ops.md §1.1).
 *
 * Every replica holds the same key (the node layer derives it), so a token minted on any replica
 * verifies on every replica: a backup forwards the caller's bearer to the primary as is, and the
 * primary re-authenticates it. Refresh is stateless (Iggy's current server): a refreshed token
 * does not revoke the old one, which stays valid until its `exp`.
 *
 * A credential names a user id; the user must still exist and be active in the local state on
 * every request. User ids are reused after a delete, so a JWT also carries the user's creation
 * time (`user_created_at`, µs from the committed create op, strictly increasing across ops) and
 * must match it: otherwise a deleted user's token would act as whoever gets the id next.
 *
 * Secrets never reach a log line or an op body: a JWT is checked and dropped, a PAT is hashed
 * (SHA-256, src/http/secrets.ts) and only the hash is looked up or used as a session key.
 *
 * Revocation: `/users/logout` commits RevokeAccessToken with the token's `jti` (a UUID) through
 * VSR, so every replica holds it in its state (and its snapshots) until the token's expiry plus
 * a clock margin, and refuses the token on every request from then on, cached or not. A leaked
 * token is killed by logging out with it.
 */
import { randomUUID } from 'node:crypto';
import { idOf } from '../metadata/operations.js';
import type { Principal } from '../metadata/permissions.js';
import { UserStatus } from '../format/snapshot-model.js';
import { ROOT_USER_ID, hexOf } from '../metadata/state.js';
import { personalAccessTokenHash } from './secrets.js';
import { accessTokenMissing, unauthenticated, type HttpError } from './errors.js';
import type { NodeApi, SessionKey } from './node-api.js';
import type { IdentityInfoJson } from './schemas.js';

/** jose, loaded at the first token issued or verified: a replica boots without loading it. */
let joseModule: Promise<typeof import('jose')> | null = null;
function jose(): Promise<typeof import('jose')> {
  joseModule ??= import('jose');
  return joseModule;
}

/** Iggy `[http.jwt]` defaults: issuer and audience "iggy.apache.org", expiry 1 h, skew 5 s. */
export const JWT_ISSUER = 'iggy.apache.org';
export const JWT_AUDIENCE = 'iggy.apache.org';
export const ACCESS_TOKEN_EXPIRY_SECONDS_DEFAULT = 3600;
export const JWT_CLOCK_SKEW_SECONDS = 5;
/** HS256 keys shorter than the hash output weaken it (RFC 7518 §3.2). */
export const JWT_SECRET_SIZE_MIN = 32;
/** Longer bearers are refused unread: a JWT here is ~300 bytes and a PAT 43. */
export const BEARER_SIZE_MAX = 4096;

/**
 * JWTs whose signature and static claims verified, by token string. A client sends the same token
 * with every request, and the HMAC check (an async WebCrypto job in jose) was the largest single
 * cost of a write on the primary (~18% of its CPU at 64 concurrent writers, `vrmeta bench
 * cluster`). The same bytes under the same key verify the same way, so only the time checks (nbf,
 * exp) are redone on a hit; the user checks run on every request as before. Bounded: the oldest
 * entry is dropped first.
 */
export const VERIFIED_JWTS_MAX = 4096;

/**
 * A revocation outlives its token's `exp` by the verification skew plus this margin, so a replica
 * whose clock trails the primary's (which prunes the list) by up to this much still refuses it.
 */
export const REVOCATION_CLOCK_MARGIN_SECONDS = 60;
/** Token ids this cluster issues: UUIDs (randomUUID), 16 bytes once parsed. */
const JTI_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A JWT session key is its `jti`; a PAT's is its hash, prefixed so the two spaces never meet. */
const PAT_SESSION_PREFIX = 'pat:';
/** Private claim binding a JWT to one incarnation of its user id (see the module comment). */
const USER_CREATED_AT_CLAIM = 'user_created_at';

export interface JwtClaims {
  readonly userId: number;
  readonly jti: string;
  /** The jti's 16 bytes (what a revocation names). */
  readonly jtiBytes: Uint8Array;
  readonly userCreatedAtUs: number;
  /** `exp`, seconds since the epoch. */
  readonly expiresAtS: number;
}

/** The access token a request authenticated with, when it is a JWT (logout revokes it). */
export interface AccessTokenRef {
  readonly jti: Uint8Array;
  readonly expiresAtS: number;
}

export interface Identity {
  readonly userId: number;
  /** The VSR session this credential writes under (node-api.ts `SessionKey`). */
  readonly sessionKey: SessionKey;
  readonly principal: Principal;
  /** Null for a personal access token (revoked by deleting it, not by a logout). */
  readonly accessToken: AccessTokenRef | null;
}

interface VerifiedJwt {
  readonly claims: JwtClaims;
  /** Seconds since the epoch, as in the token. */
  readonly notBeforeS: number | null;
  readonly expiresAtS: number;
}

export interface AuthenticatorOptions {
  readonly jwtSecret: Uint8Array;
  readonly accessTokenExpirySeconds: number;
  readonly nowMs: () => number;
}

export class Authenticator {
  private readonly node: NodeApi;
  private readonly key: Uint8Array;
  private readonly expirySeconds: number;
  private readonly nowMs: () => number;
  private readonly verified = new Map<string, VerifiedJwt>();

  constructor(node: NodeApi, options: AuthenticatorOptions) {
    if (options.jwtSecret.byteLength < JWT_SECRET_SIZE_MIN) {
      throw new RangeError(`jwtSecret must be at least ${JWT_SECRET_SIZE_MIN} bytes`);
    }
    if (!Number.isSafeInteger(options.accessTokenExpirySeconds) || options.accessTokenExpirySeconds <= 0) {
      throw new RangeError('accessTokenExpirySeconds must be a positive integer');
    }
    this.node = node;
    // A private copy: the caller cannot change the key of a running app by mutating its buffer.
    this.key = options.jwtSecret.slice();
    this.expirySeconds = options.accessTokenExpirySeconds;
    this.nowMs = options.nowMs;
  }

  /** Iggy `IdentityInfo` with a fresh access token (a fresh `jti`, so a fresh session). */
  async issue(userId: number): Promise<IdentityInfoJson> {
    const user = this.node.state.queries.user(idOf(userId));
    if (user === null) throw inactiveOrDeleted();
    const issuedAtSeconds = Math.floor(this.nowMs() / 1000);
    const expirySeconds = issuedAtSeconds + this.expirySeconds;
    const { SignJWT } = await jose();
    const token = await new SignJWT({ [USER_CREATED_AT_CLAIM]: user.createdAtUs })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setJti(randomUUID())
      .setSubject(String(userId))
      .setIssuer(JWT_ISSUER)
      .setAudience(JWT_AUDIENCE)
      .setIssuedAt(issuedAtSeconds)
      .setNotBefore(issuedAtSeconds)
      .setExpirationTime(expirySeconds)
      .sign(this.key);
    return { user_id: userId, access_token: { token, expiry: expirySeconds } };
  }

  /** The claims of a valid, unexpired, unrevoked JWT of this cluster, else null. */
  async verifyJwt(token: string): Promise<JwtClaims | null> {
    const claims = await this.verifySignedJwt(token);
    // Checked on every call, cache hit or not: a logout on any replica revokes it everywhere.
    if (claims !== null && this.node.state.isAccessTokenRevoked(claims.jtiBytes, this.nowMs() * 1000)) return null;
    return claims;
  }

  private async verifySignedJwt(token: string): Promise<JwtClaims | null> {
    if (token.length === 0 || token.length > BEARER_SIZE_MAX) return null;
    const cached = this.verified.get(token);
    if (cached !== undefined) {
      // jose's own time checks, with the same tolerance and the same whole-second clock.
      const nowS = Math.floor(this.nowMs() / 1000);
      const active = cached.notBeforeS === null || cached.notBeforeS <= nowS + JWT_CLOCK_SKEW_SECONDS;
      if (active && cached.expiresAtS > nowS - JWT_CLOCK_SKEW_SECONDS) return cached.claims;
      this.verified.delete(token);
    }
    const { jwtVerify } = await jose();
    try {
      const { payload } = await jwtVerify(token, this.key, {
        algorithms: ['HS256'],
        issuer: JWT_ISSUER,
        audience: JWT_AUDIENCE,
        clockTolerance: JWT_CLOCK_SKEW_SECONDS,
        currentDate: new Date(this.nowMs()),
        requiredClaims: ['jti', 'sub', 'exp'],
      });
      const subject = payload.sub ?? '';
      if (!/^[0-9]{1,10}$/.test(subject) || Number(subject) > 0xffff_ffff) return null;
      if (typeof payload.jti !== 'string' || !JTI_PATTERN.test(payload.jti)) return null;
      const userCreatedAtUs = payload[USER_CREATED_AT_CLAIM];
      if (typeof userCreatedAtUs !== 'number' || !Number.isSafeInteger(userCreatedAtUs)) return null;
      if (typeof payload.exp !== 'number' || !Number.isSafeInteger(payload.exp)) return null;
      const claims: JwtClaims = {
        userId: Number(subject),
        jti: payload.jti,
        jtiBytes: new Uint8Array(Buffer.from(payload.jti.replaceAll('-', ''), 'hex')),
        userCreatedAtUs,
        expiresAtS: payload.exp,
      };
      if (this.verified.size >= VERIFIED_JWTS_MAX) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, { claims, notBeforeS: typeof payload.nbf === 'number' ? payload.nbf : null, expiresAtS: payload.exp });
      return claims;
    } catch {
      // Bad signature, expired, wrong issuer or audience, malformed: all the same 401.
      return null;
    }
  }

  /**
   * The principal of an existing, active user; null otherwise (deleted, inactive, or, given
   * `createdAtUs`, a later user that reuses the id).
   */
  activePrincipal(userId: number, createdAtUs?: number): Principal | null {
    const user = this.node.state.queries.user(idOf(userId));
    if (user === null || user.status !== UserStatus.active) return null;
    // Root (id 0) cannot be deleted, so its id never names a later user; its created_at is set once
    // after genesis (state-machine.ts `stampRoot`), which must not end root's sessions.
    if (createdAtUs !== undefined && userId !== ROOT_USER_ID && user.createdAtUs !== createdAtUs) return null;
    return this.node.state.principal(userId);
  }

  /** Resolves `Authorization: Bearer <JWT or raw PAT>`; throws the 401 HttpError otherwise. */
  async authenticate(authorization: string | undefined): Promise<Identity> {
    const bearer = bearerOf(authorization);
    if (bearer === null) throw accessTokenMissing();
    if (bearer.length > BEARER_SIZE_MAX) throw unauthenticated();
    const claims = await this.verifyJwt(bearer);
    if (claims !== null) return this.identity(claims.userId, claims.jti, { jti: claims.jtiBytes, expiresAtS: claims.expiresAtS }, claims.userCreatedAtUs);
    const hash = personalAccessTokenHash(bearer);
    const token = this.node.state.personalAccessTokenByHash(hash);
    if (token === null) throw unauthenticated();
    if (token.expiryAtUs !== null && token.expiryAtUs <= this.nowMs() * 1000) throw unauthenticated('personal access token expired');
    return this.identity(token.userId, `${PAT_SESSION_PREFIX}${hexOf(hash)}`, null);
  }

  private identity(userId: number, sessionKey: SessionKey, accessToken: AccessTokenRef | null, createdAtUs?: number): Identity {
    const principal = this.activePrincipal(userId, createdAtUs);
    if (principal === null) throw inactiveOrDeleted();
    return { userId, sessionKey, principal, accessToken };
  }
}

/** Until when a logout keeps `token` revoked: its expiry, the verification skew, the clock margin. */
export function revocationExpiryUs(token: AccessTokenRef): number {
  return (token.expiresAtS + JWT_CLOCK_SKEW_SECONDS + REVOCATION_CLOCK_MARGIN_SECONDS) * 1_000_000;
}

function inactiveOrDeleted(): HttpError {
  return unauthenticated('the user no longer exists or is inactive');
}

/** The token of `Bearer <token>` (scheme case-insensitive, RFC 7235), or null. */
export function bearerOf(authorization: string | undefined): string | null {
  if (authorization === undefined) return null;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
  return match?.[1] ?? null;
}

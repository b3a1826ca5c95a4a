/**
 * Secrets, on the node that receives a request, before anything is proposed.
 *
 * The replicated log and every snapshot hold only derived values: Argon2id PHC strings for
 * passwords (root's is a marker until root changes it: `createPasswordVerifier`) and the SHA-256
 * of each personal access token. Plaintext passwords are hashed here; a raw token is generated
 * here, its hash goes into the op body, and the token itself is handed back to the caller once
 * (the HTTP layer splices it into the reply after commit). This module is the only
 * non-deterministic part of the metadata path (random salts and tokens), which is why it lives
 * with the auth layer (src/http) and not in the pure src/metadata; the binary protocol's sessions
 * (src/node) use it from here.
 *
 * Argon2id parameters are Iggy's (Rust `argon2` crate defaults, also OWASP's recommendation):
 * m = 19 MiB, t = 2, p = 1, 32-byte output, 16-byte salt.
 */
import { hash, verify, type Algorithm, type Options } from '@node-rs/argon2';
import { createHash, randomBytes } from 'node:crypto';
import { ErrorCode } from '../metadata/errors.js';
import { assert } from '../stdx/assert.js';
import { encodeRequest } from '../metadata/operation-codec.js';
import { Operation, type Identifier } from '../metadata/operations.js';
import type { PermissionsSnapshot } from '../format/snapshot-model.js';
import { UserStatus } from '../format/snapshot-model.js';
import {
  GENESIS_PASSWORD_MARKER,
  PAT_TOKEN_HASH_SIZE,
  validatePassword,
  validatePatName,
  validateUserStatus,
  validateUsername,
} from '../metadata/validation.js';

/** `Algorithm.Argon2id` (a const enum in the package's types, so spelled out here). */
const ARGON2ID = 2 as Algorithm;
export const ARGON2_OPTIONS: Readonly<Options> = Object.freeze({
  algorithm: ARGON2ID,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
  outputLen: 32,
});

/** Raw token entropy: 32 random bytes, rendered base64url (43 characters). */
export const PAT_TOKEN_BYTES = 32;

export async function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

let dummyHash: Promise<string> | null = null;

/**
 * Verified against when a login names no existing user, so a login takes the same Argon2id time
 * whether or not the user exists (no username enumeration by timing). Hashed once per process.
 */
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword('vrmeta: no such user');
  return dummyHash;
}

/** False for a wrong password and for a hash that does not parse (never throws on bad input). */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}

/** Every password check of a node: `passwordHash` is what the state stores for the user. */
export type PasswordVerifier = (passwordHash: string, password: string) => Promise<boolean>;

/**
 * The node's one password verification. Root's stored hash is `GENESIS_PASSWORD_MARKER` until
 * root changes its password (the genesis state must be byte-identical on every replica, so it
 * holds no hash); that marker is checked against `genesisHash`, this replica's configured root
 * password hashed with a random salt at boot and kept in memory only, so no two replicas or
 * clusters store or share a hash of the default password. Any other stored hash, a deterministic
 * root hash in a data directory written by an earlier version included, verifies as it is.
 */
export function createPasswordVerifier(genesisHash: Promise<string> | string): PasswordVerifier {
  return async (passwordHash, password) => {
    const resolved = passwordHash === GENESIS_PASSWORD_MARKER ? await genesisHash : passwordHash;
    assert(resolved !== GENESIS_PASSWORD_MARKER, 'the genesis hash is a hash, not the marker');
    return verifyPassword(resolved, password);
  };
}

export function personalAccessTokenHash(token: string): Uint8Array {
  return new Uint8Array(createHash('sha256').update(token, 'utf8').digest());
}

export interface GeneratedToken {
  /** Shown to the caller once; never stored or replicated. */
  readonly token: string;
  readonly tokenHash: Uint8Array;
}

export function generatePersonalAccessToken(): GeneratedToken {
  const token = randomBytes(PAT_TOKEN_BYTES).toString('base64url');
  const tokenHash = personalAccessTokenHash(token);
  return { token, tokenHash };
}

export type BodyResult = { readonly ok: true; readonly body: Uint8Array } | { readonly ok: false; readonly errorCode: ErrorCode };

export interface CreateUserInput {
  readonly username: string;
  readonly password: string;
  readonly status?: UserStatus;
  readonly permissions?: PermissionsSnapshot | null;
}

/** Validates the plaintext (InvalidUsername, InvalidPassword, InvalidUserStatus), then hashes. */
export async function createUserBody(input: CreateUserInput): Promise<BodyResult> {
  const status = input.status ?? UserStatus.active;
  for (const code of [validateUsername(input.username), validatePassword(input.password), validateUserStatus(status)]) {
    if (code !== ErrorCode.ok) return { ok: false, errorCode: code };
  }
  const passwordHash = await hashPassword(input.password);
  const body = encodeRequest({
    operation: Operation.createUser,
    username: input.username,
    passwordHash,
    status,
    permissions: input.permissions ?? null,
  });
  return { ok: true, body };
}

/** What ChangePassword needs from the local state: the target's stored hash. */
export interface PasswordHashSource {
  passwordHashOf(userId: Identifier): string | null;
}

/**
 * Verifies `currentPassword` against the target's stored hash here (the plaintext never leaves
 * this node), then builds a body naming that stored hash as current, so apply can refuse it if a
 * racing change replaced the hash before this op commits.
 */
export async function changePasswordBody(
  source: PasswordHashSource,
  userId: Identifier,
  currentPassword: string,
  newPassword: string,
  verify: PasswordVerifier,
): Promise<BodyResult> {
  for (const code of [validatePassword(currentPassword), validatePassword(newPassword)]) {
    if (code !== ErrorCode.ok) return { ok: false, errorCode: code };
  }
  const currentPasswordHash = source.passwordHashOf(userId);
  if (currentPasswordHash === null) return { ok: false, errorCode: ErrorCode.resourceNotFound };
  // `verify` is the edge's bounded verification (password-gate.ts), which may throw its 429, over
  // the node's verifier: root's stored hash may be the genesis marker, named as current as it is.
  if (!(await verify(currentPasswordHash, currentPassword))) return { ok: false, errorCode: ErrorCode.invalidCredentials };
  const newPasswordHash = await hashPassword(newPassword);
  return { ok: true, body: encodeRequest({ operation: Operation.changePassword, userId, currentPasswordHash, newPasswordHash }) };
}

export type PatBodyResult =
  | { readonly ok: true; readonly body: Uint8Array; readonly token: string }
  | { readonly ok: false; readonly errorCode: ErrorCode };

/** `expiryUs`: a duration in µs; 0 or u64::MAX = never expires. */
export function createPersonalAccessTokenBody(name: string, expiryUs: bigint): PatBodyResult {
  const invalid = validatePatName(name);
  if (invalid !== ErrorCode.ok) return { ok: false, errorCode: invalid };
  if (expiryUs < 0n || expiryUs > 0xffff_ffff_ffff_ffffn) return { ok: false, errorCode: ErrorCode.invalidPersonalAccessTokenExpiry };
  const { token, tokenHash } = generatePersonalAccessToken();
  assert(tokenHash.byteLength === PAT_TOKEN_HASH_SIZE, 'a SHA-256 digest has 32 bytes');
  const body = encodeRequest({ operation: Operation.createPersonalAccessToken, name, expiryUs, tokenHash });
  return { ok: true, body, token };
}

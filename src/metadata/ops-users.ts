/**
 * Users and personal access tokens.
 *
 * Bodies carry Argon2id PHC strings and SHA-256 token digests, never secrets (operations.ts);
 * apply refuses anything that is not a PHC string, so a bug upstream cannot persist a plaintext
 * password. Check order follows Iggy: request-shape rules, then `manage_users` (Iggy's gate for
 * user operations is unscoped, so it runs before the target is resolved), then the target, then
 * state rules. ChangePassword is the exception Iggy makes: the target is resolved first because
 * a user may always change their own password.
 */
import type { ApplyResult } from '../vsr/state-machine.js';
import { ErrorCode } from './errors.js';
import { createdUserReply } from './create-replies.js';
import { OK, firstError, rejected, type OpContext } from './op-context.js';
import type {
  ChangePasswordRequest,
  CreatePersonalAccessTokenRequest,
  CreateUserRequest,
  DeletePersonalAccessTokenRequest,
  DeleteUserRequest,
  UpdatePermissionsRequest,
  UpdateUserRequest,
} from './operations.js';
import { canManageUsers } from './permissions.js';
import { U64_MAX, type UserStatus } from '../format/snapshot-model.js';
import { ROOT_USER_ID, freezePermissions, hexOf, resolveUser } from './state.js';
import {
  validateCurrentPasswordHash,
  validatePasswordHash,
  validatePatName,
  validateUserStatus,
  validateUsername,
} from './validation.js';

export function createUser(ctx: OpContext, request: CreateUserRequest): ApplyResult {
  const invalid = firstError(
    validateUsername(request.username),
    validateUserStatus(request.status),
    validatePasswordHash(request.passwordHash),
  );
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  if (!canManageUsers(ctx.actor)) return rejected(ErrorCode.unauthorized);
  const { state } = ctx;
  if (state.userIndex.has(request.username)) return rejected(ErrorCode.userAlreadyExists);
  if (state.users.isFull()) return rejected(ErrorCode.usersLimitReached);
  if (!ctx.commit) return OK;
  const user = state.users.insert((id) => ({
    id,
    username: request.username,
    passwordHash: request.passwordHash,
    status: request.status as UserStatus,
    createdAtUs: ctx.timestampUs,
    permissions: request.permissions === null ? null : freezePermissions(request.permissions),
    tokens: new Map(),
  }));
  state.userIndex.set(user.username, user.id);
  return createdUserReply(user);
}

export function updateUser(ctx: OpContext, request: UpdateUserRequest): ApplyResult {
  const invalid = firstError(
    request.username === null ? ErrorCode.ok : validateUsername(request.username),
    request.status === null ? ErrorCode.ok : validateUserStatus(request.status),
  );
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  if (!canManageUsers(ctx.actor)) return rejected(ErrorCode.unauthorized);
  const { state } = ctx;
  const user = resolveUser(state, request.userId);
  if (user === undefined) return rejected(ErrorCode.resourceNotFound);
  if (request.username !== null) {
    const holder = state.userIndex.get(request.username);
    if (holder !== undefined && holder !== user.id) return rejected(ErrorCode.userAlreadyExists);
  }
  if (!ctx.commit) return OK;
  if (request.username !== null) {
    state.userIndex.delete(user.username);
    user.username = request.username;
    state.userIndex.set(user.username, user.id);
  }
  if (request.status !== null) user.status = request.status as UserStatus;
  return OK;
}

export function deleteUser(ctx: OpContext, request: DeleteUserRequest): ApplyResult {
  if (!canManageUsers(ctx.actor)) return rejected(ErrorCode.unauthorized);
  const { state } = ctx;
  const user = resolveUser(state, request.userId);
  if (user === undefined) return rejected(ErrorCode.resourceNotFound);
  // Root is undeletable: its id would be reused, and id 0 bypasses every permission check.
  if (user.id === ROOT_USER_ID) return rejected(ErrorCode.cannotDeleteUser);
  if (!ctx.commit) return OK;
  state.users.remove(user.id);
  state.userIndex.delete(user.username);
  for (const token of user.tokens.values()) state.tokenIndex.delete(hexOf(token.tokenHash));
  // Iggy's DeleteUser reply is empty; the node resolves the deleted id before proposing.
  return OK;
}

export function changePassword(ctx: OpContext, request: ChangePasswordRequest): ApplyResult {
  const invalid = firstError(
    validateCurrentPasswordHash(request.currentPasswordHash),
    validatePasswordHash(request.newPasswordHash),
  );
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const user = resolveUser(ctx.state, request.userId);
  if (user === undefined) return rejected(ErrorCode.resourceNotFound);
  if (user.id !== ctx.actor.id && !canManageUsers(ctx.actor)) {
    return rejected(ErrorCode.unauthorized);
  }
  // The receiving node verified the current password against this hash; if the stored one moved
  // on since (a racing change), that verification proves nothing any more.
  if (user.passwordHash !== request.currentPasswordHash) {
    return rejected(ErrorCode.invalidCredentials);
  }
  if (!ctx.commit) return OK;
  user.passwordHash = request.newPasswordHash;
  return OK;
}

export function updatePermissions(ctx: OpContext, request: UpdatePermissionsRequest): ApplyResult {
  if (!canManageUsers(ctx.actor)) return rejected(ErrorCode.unauthorized);
  const user = resolveUser(ctx.state, request.userId);
  if (user === undefined) return rejected(ErrorCode.resourceNotFound);
  if (user.id === ROOT_USER_ID) return rejected(ErrorCode.cannotChangePermissions);
  if (!ctx.commit) return OK;
  user.permissions = request.permissions === null ? null : freezePermissions(request.permissions);
  return OK;
}

/** 0 and u64::MAX mean "never expires" (Iggy `IggyExpiry::{ServerDefault, NeverExpire}`). */
export function patExpiryAtUs(timestampUs: number, expiryUs: bigint): number | null | 'invalid' {
  if (expiryUs === 0n || expiryUs === U64_MAX) return null;
  const expiryAtUs = BigInt(timestampUs) + expiryUs;
  // The model keeps timestamps below 2^53; an expiry past that is not representable.
  return expiryAtUs <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(expiryAtUs) : 'invalid';
}

export function createPersonalAccessToken(
  ctx: OpContext,
  request: CreatePersonalAccessTokenRequest,
): ApplyResult {
  const invalid = validatePatName(request.name);
  if (invalid !== ErrorCode.ok) return rejected(invalid);
  const { actor, state } = ctx;
  // Iggy checks the limit first, so an at-limit duplicate name reports the limit.
  if (actor.tokens.size >= state.limits.patsPerUserMax) {
    return rejected(ErrorCode.personalAccessTokensLimitReached);
  }
  if (actor.tokens.has(request.name)) return rejected(ErrorCode.personalAccessTokenAlreadyExists);
  const expiryAtUs = patExpiryAtUs(ctx.timestampUs, request.expiryUs);
  if (expiryAtUs === 'invalid') return rejected(ErrorCode.invalidPersonalAccessTokenExpiry);
  const hex = hexOf(request.tokenHash);
  // Logins look tokens up by hash, so a hash names one token (a collision means a broken RNG).
  if (state.tokenIndex.has(hex)) return rejected(ErrorCode.personalAccessTokenAlreadyExists);
  if (!ctx.commit) return OK;
  const tokenHash = request.tokenHash.slice();
  actor.tokens.set(request.name, { name: request.name, tokenHash, expiryAtUs });
  state.tokenIndex.set(hex, { userId: actor.id, name: request.name });
  return OK;
}

export function deletePersonalAccessToken(
  ctx: OpContext,
  request: DeletePersonalAccessTokenRequest,
): ApplyResult {
  const { actor, state } = ctx;
  const ownerId = request.ownerUserId ?? actor.id;
  // Tokens are self-managed; only root (the expired-token cleaner) acts on another user's.
  if (ownerId !== actor.id && actor.id !== ROOT_USER_ID) return rejected(ErrorCode.unauthorized);
  const owner = state.users.get(ownerId);
  if (owner === undefined) return rejected(ErrorCode.resourceNotFound);
  const token = owner.tokens.get(request.name);
  if (request.onlyIfExpired) {
    // A cleaner delete of a token that is gone or was re-created with a later expiry is a
    // successful no-op, so the cleaner stays idempotent under replays (Iggy `only_if_expired`).
    if (token === undefined || token.expiryAtUs === null || token.expiryAtUs > ctx.timestampUs) {
      return OK;
    }
  } else if (token === undefined) {
    return rejected(ErrorCode.resourceNotFound);
  }
  if (!ctx.commit) return OK;
  owner.tokens.delete(token.name);
  state.tokenIndex.delete(hexOf(token.tokenHash));
  return OK;
}

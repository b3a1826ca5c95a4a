/**
 * Access-token revocation: a logout commits RevokeAccessToken, and every replica refuses the
 * token from then on (src/http/auth.ts checks `isAccessTokenRevoked` on every request).
 *
 * The list is bounded twice: by time (an entry is kept only until the token's expiry, and the
 * entries at or past it are pruned by the next revocation, at that op's timestamp, so the list
 * holds at most the tokens of one expiry window) and by count (`revokedTokensMax`, and
 * `revokedTokensPerUserMax` so one user cannot fill it for everyone). A full list refuses the
 * revocation with RevokedTokensLimitReached: the token then stays valid until it expires, which
 * the caller is told. Pruning happens only in apply, at the prepare's timestamp, so every replica
 * prunes the same entries at the same op.
 */
import type { ApplyResult } from '../vsr/state-machine.js';
import { ErrorCode } from './errors.js';
import { OK, rejected, type OpContext } from './op-context.js';
import type { RevokeAccessTokenRequest } from './operations.js';
import { hexOf, type MetadataState } from './state.js';
import { REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US } from './validation.js';

export function revokeAccessToken(ctx: OpContext, request: RevokeAccessTokenRequest): ApplyResult {
  const { state, actor, timestampUs } = ctx;
  if (request.expiryAtUs > timestampUs + REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US) {
    return rejected(ErrorCode.invalidFormat);
  }
  // Already expired: every replica refuses the token on its expiry; nothing to keep.
  if (request.expiryAtUs <= timestampUs) return OK;
  const key = hexOf(request.jti);
  const existing = state.revokedTokens.get(key);
  if (existing === undefined) {
    // Counted after pruning, so a full list of expired entries does not refuse a revocation.
    const live = liveCounts(state, timestampUs, actor.id);
    const { revokedTokensMax, revokedTokensPerUserMax } = state.limits;
    if (live.total >= revokedTokensMax || live.ofUser >= revokedTokensPerUserMax) {
      return rejected(ErrorCode.revokedTokensLimitReached);
    }
  }
  if (!ctx.commit) return OK;
  pruneExpired(state, timestampUs);
  if (existing !== undefined) {
    // Revoked twice (a retried logout): keep the later expiry, owner unchanged.
    if (request.expiryAtUs > existing.expiryAtUs) {
      state.revokedTokens.set(key, { ...existing, expiryAtUs: request.expiryAtUs });
    }
    return OK;
  }
  const revoked = { jti: request.jti.slice(), userId: actor.id, expiryAtUs: request.expiryAtUs };
  state.revokedTokens.set(key, revoked);
  state.revokedTokensByUser.set(actor.id, (state.revokedTokensByUser.get(actor.id) ?? 0) + 1);
  return OK;
}

/** Entries that would remain after pruning at `timestampUs`: in all, and of `userId`. */
function liveCounts(
  state: MetadataState,
  timestampUs: number,
  userId: number,
): { total: number; ofUser: number } {
  let total = 0;
  let ofUser = 0;
  for (const token of state.revokedTokens.values()) {
    if (token.expiryAtUs <= timestampUs) continue;
    total += 1;
    if (token.userId === userId) ofUser += 1;
  }
  return { total, ofUser };
}

function pruneExpired(state: MetadataState, timestampUs: number): void {
  for (const [key, token] of state.revokedTokens) {
    if (token.expiryAtUs > timestampUs) continue;
    state.revokedTokens.delete(key);
    const count = state.revokedTokensByUser.get(token.userId)! - 1;
    if (count === 0) state.revokedTokensByUser.delete(token.userId);
    else state.revokedTokensByUser.set(token.userId, count);
  }
}

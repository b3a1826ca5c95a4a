/**
 * Public identity routes: login with a password or a personal access token, and token refresh
 * (Iggy's `login_user`, `login_with_personal_access_token`, `refresh_token`). Node-local: a login
 * reads the local state and mints a JWT every replica accepts, so it is never forwarded.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorCode } from '../../metadata/errors.js';
import { UserStatus } from '../../format/snapshot-model.js';
import { dummyPasswordHash, personalAccessTokenHash } from '../secrets.js';
import { BEARER_SIZE_MAX } from '../auth.js';
import type { HttpContext } from '../context.js';
import { iggyError, unauthenticated } from '../errors.js';
import { tooManyLogins } from '../password-gate.js';
import { IdentityInfo, LoginBody, PatLoginBody, RefreshTokenBody, responses } from '../schemas.js';

export const identityRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const { node, auth } = ctx;

  app.post('/users/login', { schema: { body: LoginBody, response: responses({ 200: IdentityInfo }) } }, async (request) => {
    const { username, password } = request.body;
    const credentials = node.state.credentials(username);
    // Under the password gate: a flood of logins is refused (429) before it reaches Argon2id.
    const verified = await ctx.verifyPassword(credentials?.passwordHash ?? (await dummyPasswordHash()), password);
    // Iggy answers a wrong username or password with InvalidCredentials (42), a 400, and an
    // inactive account exactly alike (same code, verified at the same cost): a login must not
    // tell which accounts exist but are disabled.
    if (credentials === null || !verified || credentials.status !== UserStatus.active) throw iggyError(ErrorCode.invalidCredentials);
    if (!ctx.passwordGate.admitLogin(credentials.id)) throw tooManyLogins();
    return auth.issue(credentials.id);
  });

  app.post(
    '/personal-access-tokens/login',
    { schema: { body: PatLoginBody, response: responses({ 200: IdentityInfo }) } },
    async (request) => {
      const { token } = request.body;
      if (token.length === 0 || token.length > BEARER_SIZE_MAX) throw iggyError(ErrorCode.invalidPersonalAccessToken);
      const found = node.state.personalAccessTokenByHash(personalAccessTokenHash(token));
      if (found === null) throw iggyError(ErrorCode.invalidPersonalAccessToken);
      if (found.expiryAtUs !== null && found.expiryAtUs <= ctx.nowMs() * 1000) {
        throw iggyError(ErrorCode.invalidPersonalAccessToken, 'the token has expired');
      }
      if (auth.activePrincipal(found.userId) === null) throw iggyError(ErrorCode.userInactive);
      // A token login costs no Argon2id, but it opens a session all the same: the user's login
      // bound applies (password-gate.ts).
      if (!ctx.passwordGate.admitLogin(found.userId)) throw tooManyLogins();
      return auth.issue(found.userId);
    },
  );

  // Stateless (Iggy's current server): the presented token stays valid until its own expiry.
  app.post(
    '/users/refresh-token',
    { schema: { body: RefreshTokenBody, response: responses({ 200: IdentityInfo }) } },
    async (request) => {
      const claims = await auth.verifyJwt(request.body.token);
      if (claims === null) throw unauthenticated();
      if (auth.activePrincipal(claims.userId, claims.userCreatedAtUs) === null) throw unauthenticated('the user no longer exists or is inactive');
      // A fresh token is a fresh credential (its own session pool): a login as any other.
      if (!ctx.passwordGate.admitLogin(claims.userId)) throw tooManyLogins();
      return auth.issue(claims.userId);
    },
  );
};

/**
 * Users, permissions, passwords, logout and personal access tokens (Iggy's user routes). All in
 * the control-plane scope: on a backup, writes are forwarded to the primary before they run here.
 *
 * Secrets: a password is validated and hashed (Argon2id) on the replica that runs the handler and
 * only the hash enters the op body; a personal access token is minted here, only its SHA-256 is
 * replicated, and the raw token is returned once, after the commit (src/http/secrets.ts).
 *
 * Checks run in apply's order (shape, then permission, then state) so the caller sees the code
 * apply would commit, and the expensive Argon2id hash runs only for a caller allowed to write.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorCode } from '../../metadata/errors.js';
import { encodeRequest } from '../../metadata/operation-codec.js';
import { idOf, Operation } from '../../metadata/operations.js';
import { canManageUsers, canReadUsers } from '../../metadata/permissions.js';
import { validatePassword, validatePatName, validateUsername } from '../../metadata/validation.js';
import { changePasswordBody, createPersonalAccessTokenBody, createUserBody } from '../secrets.js';
import { revocationExpiryUs } from '../auth.js';
import type { HttpContext } from '../context.js';
import { HttpError, iggyError, notFound, unauthorized } from '../errors.js';
import { permissionsFromJson } from '../permissions-json.js';
import { JSON_TYPE, listReadsOf } from '../list-reads.js';
import { renderPersonalAccessToken, renderUser, renderUserDetails, userStatusCode } from '../render.js';
import { check, createdId, createdView, noOptions, pathIdentifier, u64Field } from '../requests.js';
import {
  ChangePasswordBody,
  CreatePatBody,
  CreateUserBody,
  Empty,
  PatParams,
  PersonalAccessTokenInfo,
  RawPersonalAccessToken,
  UpdatePermissionsBody,
  UpdateUserBody,
  UserInfo,
  UserInfoDetails,
  UserParams,
  responses,
} from '../schemas.js';

/** GET /users/me resolves to the caller (Iggy's `CURRENT_USER_ALIAS`). */
const CURRENT_USER_ALIAS = 'me';

export const userRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const { node } = ctx;
  const { queries } = node.state;

  // Revokes the access token the call was made with (RevokeAccessToken, committed: every replica
  // refuses it from now on), then ends its VSR session. A personal access token is revoked by
  // deleting it; its logout only ends the session.
  app.delete('/users/logout', { schema: { response: responses({ 204: Empty }) } }, async (request, reply) => {
    const identity = ctx.identity(request);
    const token = identity.accessToken;
    if (token !== null) {
      const body = encodeRequest({ operation: Operation.revokeAccessToken, jti: token.jti, expiryAtUs: revocationExpiryUs(token) });
      try {
        await ctx.commit(identity, Operation.revokeAccessToken, body);
      } catch (error) {
        // The list is full: the token stays valid until it expires (the caller is told), but
        // the session still ends.
        if (error instanceof HttpError && error.body.id === ErrorCode.revokedTokensLimitReached) await node.logout(identity.sessionKey);
        throw error;
      }
    }
    await node.logout(identity.sessionKey);
    return reply.code(204).send();
  });

  app.get('/users', { schema: { response: responses({ 200: Type.Array(UserInfo) }) } }, async (request, reply) => {
    if (!canReadUsers(ctx.identity(request).principal)) throw unauthorized();
    // As GET /streams: sliced, shared per state version, serialized element by element.
    const serialize = reply.compileSerializationSchema(UserInfo as unknown as Record<string, unknown>);
    const json = await listReadsOf(ctx.node.state).usersJson('GET /users', (view) => serialize(renderUser(view)));
    // The schema types the body as the objects it describes; this is their text.
    return reply.type(JSON_TYPE).send(json as never);
  });

  app.get('/users/:user_id', { schema: { params: UserParams, response: responses({ 200: UserInfoDetails }) } }, async (request) => {
    const identity = ctx.identity(request);
    const target = request.params.user_id === CURRENT_USER_ALIAS ? idOf(identity.userId) : pathIdentifier(request.params.user_id);
    const user = queries.user(target);
    // Anyone may read themselves; reading others needs read_users (checked before existence, so
    // an unauthorized caller cannot probe which users exist).
    if (user?.id !== identity.userId && !canReadUsers(identity.principal)) throw unauthorized();
    if (user === null) throw notFound();
    return renderUserDetails(user);
  });

  app.post('/users', { schema: { body: CreateUserBody, response: responses({ 200: UserInfoDetails }) } }, async (request) => {
    const identity = ctx.identity(request);
    const { username, password, status, options } = request.body;
    check(validateUsername(username));
    check(validatePassword(password));
    const permissions = permissionsFromJson(request.body.permissions);
    if (permissions instanceof HttpError) throw permissions;
    // Users have no option keys: any key is refused by name before the password is hashed.
    noOptions(options);
    if (!canManageUsers(identity.principal)) throw unauthorized();
    if (node.state.credentials(username) !== null) throw iggyError(ErrorCode.userAlreadyExists);
    const built = await createUserBody({ username, password, status: userStatusCode(status), permissions });
    if (!built.ok) throw iggyError(built.errorCode);
    const id = createdId(await ctx.commit(identity, Operation.createUser, built.body));
    return renderUserDetails(createdView(queries.user(idOf(id))));
  });

  app.put(
    '/users/:user_id',
    { schema: { params: UserParams, body: UpdateUserBody, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const { username, status, options } = request.body;
      noOptions(options);
      const userId = pathIdentifier(request.params.user_id);
      if (username !== undefined && username !== null) check(validateUsername(username));
      await ctx.submit(request, {
        operation: Operation.updateUser,
        userId,
        username: username ?? null,
        status: status === undefined || status === null ? null : userStatusCode(status),
      });
      return reply.code(204).send();
    },
  );

  app.delete('/users/:user_id', { schema: { params: UserParams, response: responses({ 204: Empty }) } }, async (request, reply) => {
    await ctx.submit(request, { operation: Operation.deleteUser, userId: pathIdentifier(request.params.user_id) });
    return reply.code(204).send();
  });

  app.put(
    '/users/:user_id/password',
    { schema: { params: UserParams, body: ChangePasswordBody, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const identity = ctx.identity(request);
      const { current_password: currentPassword, new_password: newPassword } = request.body;
      check(validatePassword(currentPassword));
      check(validatePassword(newPassword));
      const userId = pathIdentifier(request.params.user_id);
      const target = queries.user(userId);
      if (target === null) throw iggyError(ErrorCode.resourceNotFound);
      // Before verifying: a caller who may not change this password learns nothing about it.
      if (target.id !== identity.userId && !canManageUsers(identity.principal)) throw unauthorized();
      const built = await changePasswordBody(node.state, userId, currentPassword, newPassword, ctx.verifyPassword);
      if (!built.ok) throw iggyError(built.errorCode);
      await ctx.commit(identity, Operation.changePassword, built.body);
      return reply.code(204).send();
    },
  );

  app.put(
    '/users/:user_id/permissions',
    { schema: { params: UserParams, body: UpdatePermissionsBody, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const permissions = permissionsFromJson(request.body.permissions);
      if (permissions instanceof HttpError) throw permissions;
      await ctx.submit(request, { operation: Operation.updatePermissions, userId: pathIdentifier(request.params.user_id), permissions });
      return reply.code(204).send();
    },
  );

  // Personal access tokens are self-scoped: every route acts on the caller's own tokens.

  app.get('/personal-access-tokens', { schema: { response: responses({ 200: Type.Array(PersonalAccessTokenInfo) }) } }, async (request) => {
    return (queries.personalAccessTokens(ctx.identity(request).userId) ?? []).map(renderPersonalAccessToken);
  });

  app.post(
    '/personal-access-tokens',
    { schema: { body: CreatePatBody, response: responses({ 200: RawPersonalAccessToken }) } },
    async (request) => {
      const { name } = request.body;
      check(validatePatName(name));
      const built = createPersonalAccessTokenBody(name, u64Field(request.body.expiry, 'expiry'));
      if (!built.ok) throw iggyError(built.errorCode);
      await ctx.commit(ctx.identity(request), Operation.createPersonalAccessToken, built.body);
      // The only time the raw token exists outside the caller: the log holds its hash.
      return { token: built.token };
    },
  );

  app.delete('/personal-access-tokens/:name', { schema: { params: PatParams, response: responses({ 204: Empty }) } }, async (request, reply) => {
    const { name } = request.params;
    check(validatePatName(name));
    await ctx.submit(request, { operation: Operation.deletePersonalAccessToken, name, ownerUserId: null, onlyIfExpired: false });
    return reply.code(204).send();
  });
};

/**
 * Public health routes: Iggy's `/ping` and the probes operators expect (`/livez`, `/readyz`,
 * iggy-http-api-and-ops.md §4). No credentials, no replica internals beyond "ready or why not".
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { HttpContext } from '../context.js';
import { httpError } from '../errors.js';
import type { ClusterStatus } from '../node-api.js';
import { Health, responses } from '../schemas.js';

/** Why /readyz is 503, in operator words (no secrets: status fields only). */
function notReadyReason(status: ClusterStatus): string {
  if (status.status !== 'normal') return `replica status is ${status.status}`;
  if (status.stateTransfer !== null) return `state transfer in progress (${status.stateTransfer.stage})`;
  if (status.commitMin < status.commitMax) return `catching up: commit_min ${status.commitMin} < commit_max ${status.commitMax}`;
  return 'not ready';
}

/**
 * The probes' bodies are constants and error bodies our error handler builds, so plain
 * JSON.stringify writes them byte for byte as fast-json-stringify would, without loading and
 * compiling it: a restarted replica's first /readyz answers without that (~30 ms) wait. The
 * schemas stay for the documentation and the tests that hold the bodies to them.
 */
const serializerCompiler = () => (data: unknown) => JSON.stringify(data);

export const healthRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  app.get('/ping', { serializerCompiler, schema: { response: responses({ 200: Type.String() }) } }, async (_request, reply) => {
    return reply.type('text/plain; charset=utf-8').send('pong');
  });

  app.get('/livez', { serializerCompiler, schema: { response: responses({ 200: Health }) } }, async () => ({ status: 'live' }));

  app.get('/readyz', { serializerCompiler, schema: { response: responses({ 200: Health }) } }, async () => {
    if (!ctx.node.ready()) throw httpError(503, 'not_ready', notReadyReason(ctx.node.status()));
    return { status: 'ready' };
  });
};

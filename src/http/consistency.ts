/**
 * `?consistency=serializable|linearizable` on reads (apache/iggy core/server/src/http/error.rs
 * `ConsistencyQuery`, reads.rs `authorize_read`, cc269ef70).
 *
 * Serializable (the default) serves from this replica's applied state, which may trail the
 * primary by the replication delay. Linearizable must see every committed write, so only the
 * primary serves it: a backup answers 307 to the same path and query on the primary's HTTP
 * listener, or, when it does not know that address (view change, no `--http-peers` entry), a
 * retryable 503 `not_primary` that says so. A backup never relays a linearizable read itself:
 * the client follows the redirect and the primary answers, with the primary's view in `iggy-view`.
 *
 * The value is checked on every read that takes it, primary or not: anything but the two names
 * (case-sensitive, once) is a 400 naming the `consistency` field, where Iggy's axum `Query`
 * extractor answers 400 too.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { httpError, invalidRequest } from './errors.js';
import type { Forwarder } from './forward.js';
import type { NodeApi } from './node-api.js';

export const Consistency = { serializable: 'serializable', linearizable: 'linearizable' } as const;
export type Consistency = (typeof Consistency)[keyof typeof Consistency];

/**
 * Authenticated reads that ignore `consistency` (Iggy: cluster metadata "bypasses the consistency
 * gate", the scrape describes the node it hit, and /cluster/status is a per-replica view).
 */
const NODE_LOCAL_READS: ReadonlySet<string> = new Set(['/cluster/metadata', '/cluster/status', '/metrics']);

/** The requested consistency, or the 400 that names the bad value. Absent = serializable. */
export function parseConsistency(query: unknown): Consistency {
  const value = typeof query === 'object' && query !== null ? (query as Record<string, unknown>).consistency : undefined;
  if (value === undefined) return Consistency.serializable;
  if (value === Consistency.serializable || value === Consistency.linearizable) return value;
  const shown = Array.isArray(value) ? 'more than one value' : `unknown variant \`${String(value).slice(0, 64)}\``;
  throw invalidRequest('consistency', `consistency: ${shown}, expected \`serializable\` or \`linearizable\``);
}

/** Whether this request is a read that honours `?consistency=` (every GET but the node-local ones). */
export function takesConsistency(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const route = request.routeOptions.url;
  return route !== undefined && !NODE_LOCAL_READS.has(route);
}

/**
 * The gate, run after authentication and before the handler: a bad value is refused, a
 * linearizable read on a backup is redirected (or refused when the primary is unknown). Returns
 * the reply when it answered, undefined when the read goes on here.
 */
export function consistencyGate(
  node: NodeApi,
  forwarder: Forwarder,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply | undefined {
  if (!takesConsistency(request)) return undefined;
  if (parseConsistency(request.query) !== Consistency.linearizable || node.isPrimary()) return undefined;
  const location = forwarder.primaryUrl(request.url);
  if (location === null) {
    throw httpError(
      503,
      'not_primary',
      'a linearizable read needs the primary, and this replica does not know the primary\'s HTTP address ' +
        '(a view change is in progress, or no --http-peers entry names it); retry against the primary or later',
    );
  }
  // Empty body, as Iggy's redirect; `iggy-view` is added on the way out (3xx carries it).
  return reply.code(307).header('location', location).send();
}

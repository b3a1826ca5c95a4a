/**
 * CORS as Iggy's default `[http.cors]` has it (apache/iggy core/server/config.toml and
 * `configure_cors` in core/server/src/http.rs, cc269ef70), so the Iggy web UI, served from another
 * origin, can call vrmeta from a browser: any origin by default, methods GET/POST/PUT/DELETE,
 * request headers `content-type` and `authorization`, `iggy-view` exposed to scripts, no
 * credentials (the bearer travels in `authorization`, never in a cookie).
 *
 * Like tower-http's `CorsLayer`, which Iggy puts outermost, a preflight (`OPTIONS` with
 * `access-control-request-method`) is answered here with 200 and no body, before authentication
 * (a browser sends no `authorization` on a preflight), and every other answer, errors included,
 * carries the allow-origin and expose headers, so a script can read an error body too.
 *
 * Origins: `['*']` allows any; a list allows exactly those (the request's `Origin` is echoed,
 * with `vary: origin`); an empty list turns CORS off (no headers, a preflight is a 404 as any
 * unknown route).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { VIEW_HEADER } from './forward.js';

export interface CorsOptions {
  /** `['*']` (any origin), exact origins (`https://ui.example.com`), or `[]` (CORS off). */
  readonly allowedOrigins: readonly string[];
}

export const CORS_DEFAULTS: CorsOptions = Object.freeze({ allowedOrigins: Object.freeze(['*']) });

/** A longer list is a configuration mistake (and every request scans it). */
export const CORS_ORIGINS_MAX = 64;

const ALLOWED_METHODS = 'GET,POST,PUT,DELETE';
const ALLOWED_HEADERS = 'content-type,authorization';
const EXPOSED_HEADERS = VIEW_HEADER;

/**
 * Why `origins` is not a valid allowed-origins list, or null when it is. Shared by the config
 * layer (which names the key) and `createCors` (which refuses to build from a bad list).
 */
export function corsOriginsProblem(origins: readonly string[]): string | null {
  if (origins.length > CORS_ORIGINS_MAX) return `at most ${CORS_ORIGINS_MAX} origins`;
  if (origins.includes('*')) return origins.length === 1 ? null : '"*" allows every origin and cannot be combined with others';
  for (const origin of origins) {
    let parsed: URL;
    try {
      parsed = new URL(origin);
    } catch {
      return `${JSON.stringify(origin)} is not an origin; expected scheme://host[:port], e.g. https://ui.example.com`;
    }
    // Browsers send the serialized origin (lower-case host, no default port, no path): a listed
    // value in any other form would never match, so it is refused instead of silently ignored.
    if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== origin) {
      return `${JSON.stringify(origin)} is not an origin as a browser sends it; expected scheme://host[:port] with no path, e.g. ${parsed.origin === 'null' ? 'https://ui.example.com' : parsed.origin}`;
    }
  }
  return null;
}

export interface Cors {
  /** Answers a preflight (returns the reply) or returns undefined for any other request. */
  preflight(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined;
  /** Adds the CORS headers of an actual (non-preflight) response. */
  decorate(request: FastifyRequest, reply: FastifyReply): void;
}

export function createCors(options: CorsOptions): Cors | null {
  const problem = corsOriginsProblem(options.allowedOrigins);
  if (problem !== null) throw new RangeError(`CORS allowed origins: ${problem}`);
  if (options.allowedOrigins.length === 0) return null;
  const anyOrigin = options.allowedOrigins[0] === '*';
  const allowed = new Set(options.allowedOrigins);

  /** The allow-origin value for this request, or null when its origin is not allowed. */
  const allowOrigin = (request: FastifyRequest): string | null => {
    if (anyOrigin) return '*';
    const origin = request.headers.origin;
    return typeof origin === 'string' && allowed.has(origin) ? origin : null;
  };
  const originHeaders = (request: FastifyRequest, reply: FastifyReply): void => {
    // A listed-origins answer depends on the request's Origin: caches must key on it.
    if (!anyOrigin) reply.header('vary', 'origin');
    const value = allowOrigin(request);
    if (value !== null) reply.header('access-control-allow-origin', value);
  };

  return {
    preflight(request, reply) {
      if (!isPreflight(request)) return undefined;
      originHeaders(request, reply);
      return reply
        .code(200)
        .headers({ 'access-control-allow-methods': ALLOWED_METHODS, 'access-control-allow-headers': ALLOWED_HEADERS })
        .send();
    },
    decorate(request, reply) {
      originHeaders(request, reply);
      if (allowOrigin(request) !== null) reply.header('access-control-expose-headers', EXPOSED_HEADERS);
    },
  };
}

/** A CORS preflight (answered by `Cors.preflight`, never stamped with the view). */
export function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
}

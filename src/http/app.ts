/**
 * The HTTP edge of one replica: Iggy's metadata REST API plus vrmeta's operational endpoints
 * (DESIGN.md §2.3, iggy-http-api-and-ops.md §1). `buildApp` returns the fastify instance without
 * listening (fastify docs/Guides/Testing.md); the node layer listens, tests use `inject()`.
 *
 * Scopes (fastify encapsulation), outermost first:
 *   - public: /ping, /livez, /readyz, /users/login, /users/refresh-token,
 *     /personal-access-tokens/login; /metrics with `metricsPublic`;
 *   - authenticated (an onRequest hook verifies the bearer before the body is even read):
 *     node-local reads (/stats, /cluster/*, /clients, and /metrics by default);
 *   - control plane (inside authenticated): users, PATs, streams, topics, partitions, consumer
 *     groups. On a backup, a write is forwarded to the primary before validation, so the primary
 *     alone validates, hashes and mints secrets. A `?consistency=linearizable` read on a backup is
 *     redirected (307) to the primary instead (consistency.ts).
 *
 * Handlers only translate: HTTP in, NodeApi calls, HTTP out. Every error leaves as Iggy's
 * `{id, code, reason, field}` body, fastify's own 400/404/413/415 included.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import { TOPIC_DEFAULTS, type TopicDefaults } from '../metadata/defaults.js';
import { ACCESS_TOKEN_EXPIRY_SECONDS_DEFAULT, Authenticator } from './auth.js';
import { consistencyGate } from './consistency.js';
import { CORS_DEFAULTS, createCors, isPreflight, type Cors, type CorsOptions } from './cors.js';
import { createContext, type HttpContext } from './context.js';
import {
  ForwardToPrimary,
  HttpError,
  httpError,
  internalError,
  invalidRequest,
  notFound,
  payloadTooLarge,
  unprocessableBody,
} from './errors.js';
import { FORWARD_DEFAULTS, Forwarder, VIEW_HEADER, type ForwardOptions } from './forward.js';
import { JsonSyntaxError, parseJsonLossless } from './json.js';
import { DeferredTypeBoxCompiler, lazySerializerFactory } from './lazy-compile.js';
import { UNMATCHED_ROUTE, createMetrics } from './metrics.js';
import type { NodeApi } from './node-api.js';
import { PASSWORD_GATE_DEFAULTS, PasswordGate, type PasswordGateOptions } from './password-gate.js';
import { LazyRequestLogger } from './request-logger.js';
import type { PasswordVerifier } from './secrets.js';
import { messageRoutes } from './routes/messages.js';
import { consumerGroupRoutes } from './routes/consumer-groups.js';
import { healthRoutes } from './routes/health.js';
import { identityRoutes } from './routes/identity.js';
import { streamRoutes } from './routes/streams.js';
import { metricsRoutes, systemRoutes } from './routes/system.js';
import { userRoutes } from './routes/users.js';
import { processSystemInfo, type SystemInfo } from './system-info.js';
import { SERVER_VERSION_DEFAULT } from './version.js';

/** Iggy `[http] max_request_size = "2 MB"` (byte-unit decimal: 2,000,000 bytes). */
export const MAX_REQUEST_SIZE_BYTES = 2_000_000;
/** Longer path segments are refused by the router (414) before any handler runs. */
export const PATH_PARAM_LENGTH_MAX = 1024;
// Its own module so that the replica (src/node/replica-node.ts) boots without loading the app.
export { SERVER_VERSION_DEFAULT } from './version.js';

export interface BuildAppOptions {
  readonly node: NodeApi;
  /** HS256 key, >= 32 bytes, identical on every replica (forwarded bearers must verify anywhere). */
  readonly jwtSecret: Uint8Array;
  /** A pino logger (bound with `replica` by the node layer), `true` for fastify's default, or off. */
  readonly logger?: FastifyBaseLogger | boolean;
  readonly bodyLimitBytes?: number;
  readonly accessTokenExpirySeconds?: number;
  /** Server defaults that resolve the 0 sentinels of CreateTopic/UpdateTopic before proposing. */
  readonly topicDefaults?: TopicDefaults;
  /** Wall clock in ms (token times, PAT expiry, precheck timestamps); tests pin it. */
  readonly nowMs?: () => number;
  readonly forward?: Partial<ForwardOptions>;
  /** Process and host facts for GET /stats; the node layer adds disk space and IO counters. */
  readonly systemInfo?: () => SystemInfo;
  readonly serverVersion?: string;
  /** The bound on Argon2id verifications in flight (password-gate.ts). */
  /** The gate itself (shared with the binary edge: `ReplicaNode.passwordGate`), or its options. */
  readonly passwordGate?: Partial<PasswordGateOptions> | PasswordGate;
  /** HTTPS: the listener's certificate and key (src/node/tls.ts `serverTlsOptions`). */
  readonly https?: import('node:tls').TlsOptions;
  /** GET /metrics without a bearer (`metrics_public`); by default it needs one, as Iggy's does. */
  readonly metricsPublic?: boolean;
  /** Tests: a verification they control, wrapping `node.verifyPassword` (the default). */
  readonly passwordVerifier?: PasswordVerifier;
  /** Browser access (cors.ts): Iggy's default, any origin, unless the config lists origins. */
  readonly cors?: CorsOptions;
}

export function buildApp(options: BuildAppOptions): FastifyInstance {
  const { node } = options;
  const nowMs = options.nowMs ?? Date.now;
  const bodyLimitBytes = options.bodyLimitBytes ?? MAX_REQUEST_SIZE_BYTES;
  // TypeBox's compiler instead of ajv: no type coercion of bodies (a string stays a string) and
  // `bigint` support for the u64 fields of the lossless parser. Query and path values are
  // converted (they arrive as strings).
  const typeboxCompiler = new DeferredTypeBoxCompiler();
  const app = Fastify({
    // Typed as the plain HTTP server below: fastify serves HTTPS from the same routes and hooks.
    ...((options.https === undefined ? {} : { https: options.https }) as object),
    ...loggerOptions(options.logger),
    bodyLimit: bodyLimitBytes,
    // A path name may be 255 UTF-8 bytes, up to 765 characters percent-encoded; find-my-way's
    // default (100) would answer 414 before our own InvalidIdentifier check could.
    routerOptions: { maxParamLength: PATH_PARAM_LENGTH_MAX },
    // Replaced by the `closing` hook below, which answers in Iggy's error shape.
    return503OnClosing: false,
    // Validators and response serializers compile at a route's first use, not before the
    // listener is up; given here, fastify does not load its default (ajv) validator compiler.
    // (Cast: fastify types `buildValidator` as an ajv compiler; it is called with the same route
    // definition as `setValidatorCompiler`'s.)
    ...({ schemaController: { compilersFactory: { buildValidator: () => typeboxCompiler.compiler, buildSerializer: lazySerializerFactory() } } } as object),
    // Each request's log lines carry the view it was served in (STYLE.md: replica, view bindings);
    // the pino child is made only when the request logs at an enabled level (request-logger.ts).
    childLoggerFactory: (logger, bindings, childOptions) => new LazyRequestLogger(logger, bindings, node.view(), childOptions),
    // Router-level rejections (bad percent-encoding, over-long path segment) happen before any
    // route, hook or error handler: answer them in Iggy's shape here.
    frameworkErrors: (error, _request, reply) => {
      const http = toHttpError(error, bodyLimitBytes);
      // The generic reply type here knows no schema; the body is the error shape all routes share.
      const untyped = reply as unknown as FastifyReply;
      void untyped.code(http.statusCode).headers(http.headers).send(http.body);
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // The compiler (schemaController above) is loaded at the first request that needs it.
  app.addHook('preValidation', typeboxCompiler.gate);

  const passwordGate =
    options.passwordGate instanceof PasswordGate ? options.passwordGate : new PasswordGate({ ...PASSWORD_GATE_DEFAULTS, ...options.passwordGate });
  const ctx = createContext({
    node,
    passwordGate,
    passwordVerifier:
      options.passwordVerifier ?? ((passwordHash, password) => node.verifyPassword(passwordHash, password)),
    auth: new Authenticator(node, {
      jwtSecret: options.jwtSecret,
      accessTokenExpirySeconds: options.accessTokenExpirySeconds ?? ACCESS_TOKEN_EXPIRY_SECONDS_DEFAULT,
      nowMs,
    }),
    forwarder: new Forwarder(node, { ...FORWARD_DEFAULTS, ...options.forward }),
    metrics: createMetrics(node, () => passwordGate.stats()),
    topicDefaults: options.topicDefaults ?? TOPIC_DEFAULTS,
    nowMs,
    systemInfo: options.systemInfo ?? (() => processSystemInfo(nowMs)),
    serverVersion: options.serverVersion ?? SERVER_VERSION_DEFAULT,
    bodyLimitBytes,
  });

  installBodyParser(app, ctx);
  installErrorHandling(app, ctx);
  installHooks(app, ctx, createCors(options.cors ?? CORS_DEFAULTS));

  app.register(healthRoutes, { ctx });
  app.register(identityRoutes, { ctx });
  const metricsPublic = options.metricsPublic ?? false;
  if (metricsPublic) app.register(metricsRoutes, { ctx });
  app.register(async (authenticated) => {
    authenticated.addHook('onRequest', async (request) => {
      ctx.setIdentity(request, await ctx.auth.authenticate(request.headers.authorization));
    });
    // Callback hooks where nothing waits: an async hook costs a promise and a turn per request.
    authenticated.addHook('preValidation', (request, reply, done) => {
      if (consistencyGate(node, ctx.forwarder, request, reply) === undefined) done();
    });
    await authenticated.register(systemRoutes, { ctx });
    // The data plane: served here, whichever node is hit (never forwarded to the primary).
    await authenticated.register(messageRoutes, { ctx });
    if (!metricsPublic) await authenticated.register(metricsRoutes, { ctx });
    await authenticated.register(async (controlPlane) => {
      controlPlane.addHook('preValidation', (request, reply, done) => {
        if (!isWrite(request) || node.isPrimary()) return done();
        // The forwarder answers (the relayed reply) or throws for the error handler.
        ctx.forwarder.forward(request, ctx.rawBody(request), reply).then(
          () => undefined,
          (error: unknown) => done(error as FastifyError),
        );
      });
      await controlPlane.register(userRoutes, { ctx });
      await controlPlane.register(streamRoutes, { ctx });
      await controlPlane.register(consumerGroupRoutes, { ctx });
    });
  });
  return app;
}

function loggerOptions(logger: FastifyBaseLogger | boolean | undefined): { logger?: boolean; loggerInstance?: FastifyBaseLogger } {
  if (logger === undefined || typeof logger === 'boolean') return { logger: logger ?? false };
  return { loggerInstance: logger };
}

/** Writes go to the primary; reads are served here (or redirected, see consistency.ts). */
function isWrite(request: FastifyRequest): boolean {
  return request.method !== 'GET' && request.method !== 'HEAD';
}

/** `iggy-view` rides on 2xx and 3xx answers only (Iggy's `view_header` middleware). */
export function carriesView(statusCode: number): boolean {
  return statusCode >= 200 && statusCode < 400;
}

function isPing(request: FastifyRequest): boolean {
  return request.url === '/ping' || request.url.startsWith('/ping?');
}

/** The instance as configured above: default server types, TypeBox type provider. */
type App = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;

/** JSON only, parsed losslessly (json.ts); the raw text is kept for forwarding. */
function installBodyParser(app: App, ctx: HttpContext): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    ctx.setRawBody(request, text);
    // Clients send `content-type: application/json` on bodiless DELETEs; treat as no body.
    if (text.trim().length === 0) {
      done(null, undefined);
      return;
    }
    try {
      done(null, parseJsonLossless(text));
    } catch (error) {
      const reason = error instanceof JsonSyntaxError ? error.message : 'unparsable';
      done(httpError(400, 'invalid_json', `Body is not valid JSON: ${reason}`) as unknown as FastifyError, undefined);
    }
  });
}

/** Field named by a schema violation: the missing property, or the path of the bad value. */
function validationField(error: FastifyError): string | null {
  const first = error.validation?.[0];
  if (first === undefined) return null;
  const missing = (first.params as { requiredProperties?: unknown } | undefined)?.requiredProperties;
  if (Array.isArray(missing) && typeof missing[0] === 'string') return missing[0];
  const path = first.instancePath.split('/').filter((segment) => segment.length > 0);
  return path.length === 0 ? null : path.join('.');
}

function toHttpError(error: FastifyError, bodyLimitBytes: number, request?: FastifyRequest): HttpError {
  if (error instanceof HttpError) return error;
  if (error.validation !== undefined) {
    const field = validationField(error) ?? error.validationContext ?? 'body';
    if (error.validationContext !== 'body') return invalidRequest(field, error.message);
    // No body at all is not JSON (axum: 400 on an empty body); a parsed body that does not fit
    // the request type is 422, as Iggy answers it.
    if (request?.body === undefined) return httpError(400, 'invalid_json', 'Body is missing: send a JSON object');
    return unprocessableBody(field, error.message);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return payloadTooLarge(bodyLimitBytes);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return httpError(415, 'unsupported_media_type', 'Unsupported media type: send application/json');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return httpError(414, 'uri_too_long', `a path segment is longer than ${PATH_PARAM_LENGTH_MAX} characters`);
    case 'FST_ERR_BAD_URL':
      return httpError(400, 'invalid_url', 'the URL is not valid (bad percent-encoding)');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return httpError(400, 'invalid_json', 'Body is not valid JSON');
    default:
      break;
  }
  const status = error.statusCode;
  if (status !== undefined && status >= 400 && status < 500) return httpError(status, 'bad_request', error.message);
  return internalError();
}

function installErrorHandling(app: App, ctx: HttpContext): void {
  const render = (error: FastifyError, request: FastifyRequest) => {
    const http = toHttpError(error, ctx.bodyLimitBytes, request);
    if (http.statusCode >= 500 && !(error instanceof HttpError)) request.log.error({ err: error }, 'request failed');
    return http;
  };

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    let http: HttpError;
    if (error instanceof ForwardToPrimary) {
      try {
        return await ctx.forwarder.forward(request, ctx.rawBody(request), reply);
      } catch (forwardError) {
        http = render(forwardError as FastifyError, request);
      }
    } else {
      http = render(error, request);
    }
    return reply
      .code(http.statusCode)
      .headers(http.headers)
      .send(http.body as never);
  });

  app.setNotFoundHandler(async (_request, reply) => {
    const http = notFound();
    return reply.code(http.statusCode).send(http.body as never);
  });
}

function installHooks(app: App, ctx: HttpContext, cors: Cors | null): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // While shutting down, new requests get a retryable 503 and the connection is closed, so the
  // client retries on another replica instead of waiting on one that is going away.
  // (Callback hooks: an async one costs a promise and a microtask turn on every request.)
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    const http = httpError(503, 'shutting_down', 'this replica is shutting down; retry on another replica');
    void reply
      .code(http.statusCode)
      .headers({ ...http.headers, connection: 'close' })
      .send(http.body as never);
  });

  // Preflights are answered before any scope authenticates: a browser sends no bearer on them.
  if (cors !== null) {
    app.addHook('onRequest', (request, reply, done) => {
      if (cors.preflight(request, reply) === undefined) done();
    });
  }

  // Every success and redirect but /ping names the view it was served in; errors do not (Iggy
  // stamps the header only on 2xx/3xx answers). A response relayed from the primary already
  // carries the primary's view, which must not be overwritten with ours.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (cors !== null && isPreflight(request)) return done(null, payload);
    cors?.decorate(request, reply);
    if (!carriesView(reply.statusCode)) {
      // A relayed error keeps no view header either: the rule holds whoever answered.
      reply.removeHeader(VIEW_HEADER);
      return done(null, payload);
    }
    if (!isPing(request) && !reply.hasHeader(VIEW_HEADER)) reply.header(VIEW_HEADER, String(ctx.node.view()));
    done(null, payload);
  });

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url;
    ctx.metrics.observeRequest(request.method, route === undefined || route === '*' ? UNMATCHED_ROUTE : route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

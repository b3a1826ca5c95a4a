/**
 * Backup -> primary forwarding of control-plane requests (apache/iggy core/server/src/http/
 * forward.rs, cc269ef70): a load balancer may land a write on any replica, and a backup can
 * neither register a VSR session nor commit, so it re-issues the request (same method, path,
 * query, body and bearer) against the primary's HTTP listener and relays the answer.
 *
 * Safety rules, in order (each is a failure mode Iggy documents):
 *   - The bearer was verified here before anything is sent (the authenticated scope's hook), so
 *     unauthenticated traffic cannot use a backup to amplify load on the primary. The primary
 *     re-authenticates and re-authorizes everything; `iggy-forwarded` is a loop guard only and
 *     never a trust input.
 *   - One hop: a non-primary that receives a request already carrying `iggy-forwarded` answers the
 *     retryable 503 (TransientNotAccepted) instead of forwarding again, so a stale view cannot
 *     chain hops or loop.
 *   - Retry only what provably never entered a pipeline: a connect failure, a 307, or a 503 whose
 *     body is TransientNotAccepted. Anything else (a TransientNotCommitted 503, a reset after the
 *     request was written, a timeout) is relayed or answered as unknown, because re-issuing it
 *     could apply the op twice.
 *   - The target always comes from the local view (`primaryHttpAddress`), never from a response;
 *     redirects are not followed.
 *   - Bounded: concurrent forwards, attempt time, retry budget and relayed body size.
 *   - A forward does not outlive its primary: when this replica's view no longer names the
 *     primary it was sent to (a view change started), it is abandoned and answered as unknown
 *     (TransientNotCommitted) at once. A frozen primary (SIGSTOP, a hung host) accepts the
 *     connection and never answers; waiting out the attempt timeout would keep the caller long
 *     after the cluster has failed over.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode } from '../metadata/errors.js';
import { httpError, iggyError, transientNotAccepted, type HttpError } from './errors.js';
import type { NodeApi } from './node-api.js';

/** The loop-guard header (Iggy `iggy-forwarded: 1`). */
export const FORWARDED_HEADER = 'iggy-forwarded';
export const VIEW_HEADER = 'iggy-view';

export interface ForwardOptions {
  /** The HTTP client; global fetch (undici) unless a test or HTTPS (src/node/tls.ts) injects one. */
  readonly fetch: typeof fetch;
  /** The primary's listener: HTTPS when the replicas serve TLS (every replica is configured alike). */
  readonly scheme: 'http' | 'https';
  /** One attempt (send + primary commit + body read). Above a commit's own wait, so a slow commit is answered. */
  readonly attemptTimeoutMs: number;
  /** Budget across retryable attempts: long enough to ride out a view change. */
  readonly retryDeadlineMs: number;
  readonly retryIntervalMs: number;
  /** Concurrent forwards held by this replica (Iggy MAX_IN_FLIGHT_FORWARDS). */
  readonly inFlightMax: number;
  /** Relayed response bodies are entity JSON; anything larger is a broken peer. */
  readonly responseBodyBytesMax: number;
  /** How often an in-flight forward checks that its target is still this replica's primary. */
  readonly primaryCheckIntervalMs: number;
}

export const FORWARD_DEFAULTS: ForwardOptions = Object.freeze({
  fetch: (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => fetch(input, init),
  scheme: 'http',
  attemptTimeoutMs: 35_000,
  retryDeadlineMs: 30_000,
  retryIntervalMs: 50,
  inFlightMax: 128,
  responseBodyBytesMax: 16 * 1024 * 1024,
  primaryCheckIntervalMs: 20,
});

/** Response headers relayed from the primary; everything else (hop-by-hop included) is dropped. */
const RELAYED_HEADERS = ['content-type', 'retry-after', VIEW_HEADER] as const;

/** Connection errors that happen before the request is written: safe to retry. */
const CONNECT_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

type Attempt =
  | { readonly kind: 'relay'; readonly status: number; readonly headers: Record<string, string>; readonly body: Buffer }
  | { readonly kind: 'error'; readonly error: HttpError }
  /** Nothing reached a pipeline; `reason` says why, for the 503 if the budget runs out. */
  | { readonly kind: 'retry'; readonly reason: string };

function retry(reason: string): Attempt {
  return { kind: 'retry', reason };
}

export class Forwarder {
  private readonly node: NodeApi;
  private readonly options: ForwardOptions;
  private inFlight = 0;

  constructor(node: NodeApi, options: ForwardOptions) {
    this.node = node;
    this.options = options;
  }

  /**
   * The primary's URL for `pathAndQuery` (`/streams?x=1`), from this replica's own view through
   * `NodeApi.primaryHttpAddress` (the one lookup of the primary's HTTP address; never taken from a
   * response). Null when the address is unknown. Forwarded writes and linearizable-read redirects
   * both go through here.
   */
  primaryUrl(pathAndQuery: string): string | null {
    const primary = this.node.primaryHttpAddress();
    return primary === null ? null : `${this.options.scheme}://${primary}${pathAndQuery}`;
  }

  /** How many forwards are in flight (tests, metrics). */
  get inFlightCount(): number {
    return this.inFlight;
  }

  /**
   * Forwards `request` to the primary and sends the relayed answer on `reply`. Throws an HttpError
   * (rendered by the app's error handler) when it cannot: loop guard, budget, no primary.
   */
  async forward(request: FastifyRequest, rawBody: string | undefined, reply: FastifyReply): Promise<FastifyReply> {
    if (request.headers[FORWARDED_HEADER] !== undefined) {
      throw transientNotAccepted('this replica is not the primary and the request was already forwarded once');
    }
    if (this.inFlight >= this.options.inFlightMax) {
      throw httpError(503, 'forward_busy', 'this replica is at its forward budget; retry with backoff');
    }
    this.inFlight++;
    try {
      const outcome = await this.attemptUntilRelayed(request, rawBody);
      if (outcome.kind === 'error') throw outcome.error;
      if (outcome.kind === 'retry') {
        // Say exactly why: an operator reading this must not have to guess between a view change,
        // a primary this replica cannot reach, and one whose address it never learned.
        throw httpError(503, 'no_reachable_primary', `no primary accepted the request within the forward budget: ${outcome.reason}; retry`);
      }
      reply.code(outcome.status).headers(outcome.headers);
      return outcome.body.byteLength === 0 ? reply.send() : reply.send(outcome.body);
    } finally {
      this.inFlight--;
    }
  }

  private async attemptUntilRelayed(request: FastifyRequest, rawBody: string | undefined): Promise<Attempt> {
    const deadlineMs = Date.now() + this.options.retryDeadlineMs;
    for (;;) {
      const url = this.primaryUrl(request.url);
      const outcome = url === null ? retry(this.node.primaryUnavailableReason()) : await this.attempt(request, rawBody, url);
      if (outcome.kind !== 'retry') return outcome;
      const remainingMs = deadlineMs - Date.now();
      if (remainingMs <= 0) return outcome;
      await sleep(Math.min(this.options.retryIntervalMs, remainingMs));
      // A caller that went away must not hold a forward slot for the rest of the budget.
      if (request.raw.destroyed) return outcome;
    }
  }

  private async attempt(request: FastifyRequest, rawBody: string | undefined, url: string): Promise<Attempt> {
    const headers: Record<string, string> = { [FORWARDED_HEADER]: '1' };
    const authorization = request.headers.authorization;
    if (authorization !== undefined) headers.authorization = authorization;
    const contentType = request.headers['content-type'];
    if (contentType !== undefined && rawBody !== undefined) headers['content-type'] = contentType;
    const deposed = new AbortController();
    const watch = setInterval(() => {
      if (this.primaryUrl(request.url) !== url) deposed.abort();
    }, this.options.primaryCheckIntervalMs);
    watch.unref();
    try {
      const signal = AbortSignal.any([AbortSignal.timeout(this.options.attemptTimeoutMs), deposed.signal]);
      const outcome = await this.send(request, rawBody, url, headers, signal);
      if (outcome.kind === 'error' && deposed.signal.aborted) return { kind: 'error', error: primaryChanged(url) };
      return outcome;
    } finally {
      clearInterval(watch);
    }
  }

  private async send(
    request: FastifyRequest,
    rawBody: string | undefined,
    url: string,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<Attempt> {
    let response: Response;
    try {
      response = await this.options.fetch(url, {
        method: request.method,
        headers,
        ...(rawBody === undefined ? {} : { body: rawBody }),
        redirect: 'manual',
        signal,
      });
    } catch (error) {
      if (isTimeout(error)) return { kind: 'error', error: forwardTimeout() };
      if (isConnectError(error)) return retry(`connecting to the primary's HTTP listener at ${new URL(url).host} failed (${causeCode(error) ?? 'connect error'})`);
      request.log.warn({ err: error, primary: url }, 'forward failed after the request may have been sent; outcome unknown');
      return { kind: 'error', error: forwardFailed() };
    }
    // The primary changed under us and says so: re-resolve from our own view, never the Location.
    if (response.status === 307) {
      await response.body?.cancel();
      return retry(`${new URL(url).host} answered that it is no longer the primary`);
    }
    let body: Buffer;
    try {
      body = await readBounded(response, this.options.responseBodyBytesMax);
    } catch (error) {
      if (isTimeout(error)) return { kind: 'error', error: forwardTimeout() };
      request.log.warn({ err: error, primary: url }, 'reading the relayed response failed; outcome unknown');
      return { kind: 'error', error: forwardFailed() };
    }
    if (response.status === 503 && isTransientNotAccepted(body)) return retry(`${new URL(url).host} did not accept the request (not the primary, or busy)`);
    const relayed: Record<string, string> = {};
    for (const name of RELAYED_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null) relayed[name] = value;
    }
    return { kind: 'relay', status: response.status, headers: relayed, body };
  }
}

async function readBounded(response: Response, bytesMax: number): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > bytesMax) {
    await response.body?.cancel();
    throw new RangeError(`relayed response declares ${declared} bytes, over ${bytesMax}`);
  }
  if (response.body === null) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > bytesMax) {
      await reader.cancel();
      throw new RangeError(`relayed response exceeds ${bytesMax} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

/** Only a well-formed Iggy error body with id 58 counts: when in doubt, relay, never retry. */
function isTransientNotAccepted(body: Buffer): boolean {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && (parsed as { id?: unknown }).id === ErrorCode.transientNotAccepted;
  } catch {
    return false;
  }
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  // undici wraps the socket error in `cause` (TypeError: fetch failed -> Error { code }).
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function isConnectError(error: unknown): boolean {
  const code = causeCode(error);
  return code !== undefined && CONNECT_ERROR_CODES.has(code);
}

function isTimeout(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}

/** The request may be in the old primary's pipeline and survive the view change: unknown. */
function primaryChanged(url: string): HttpError {
  return iggyError(
    ErrorCode.transientNotCommitted,
    `the primary (${new URL(url).host}) was replaced while the forwarded request was in flight; ` +
      'the outcome is unknown: read before retrying',
  );
}

function forwardTimeout(): HttpError {
  return httpError(504, 'forward_timeout', 'the primary did not answer the forwarded request in time; the outcome is unknown');
}

function forwardFailed(): HttpError {
  return httpError(502, 'forward_failed', 'forwarding to the primary failed after the request was sent; the outcome is unknown');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

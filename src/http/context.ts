/**
 * What every route plugin receives: the replica facade and the app's shared services, plus the
 * one write path all mutating routes go through.
 *
 * Per-request state (the authenticated identity, the raw body kept for forwarding) lives in
 * WeakMaps owned by one app rather than in request decorators: no global type augmentation, and
 * two apps in one process cannot see each other's state.
 */
import type { FastifyRequest } from 'fastify';
import type { TopicDefaults } from '../metadata/defaults.js';
import { ErrorCode } from '../metadata/errors.js';
import { encodeRequest } from '../metadata/operation-codec.js';
import type { MetadataRequest } from '../metadata/operations.js';
import { assert } from '../stdx/assert.js';
import type { Authenticator, Identity } from './auth.js';
import { ForwardToPrimary, iggyError, transientNotAccepted, unauthenticated } from './errors.js';
import type { Forwarder } from './forward.js';
import type { HttpMetrics } from './metrics.js';
import type { NodeApi } from './node-api.js';
import type { PasswordGate } from './password-gate.js';
import type { PasswordVerifier } from './secrets.js';
import type { SystemInfo } from './system-info.js';

/** What a context is built from and keeps as it is. */
interface HttpContextFields {
  readonly node: NodeApi;
  readonly auth: Authenticator;
  readonly forwarder: Forwarder;
  readonly metrics: HttpMetrics;
  readonly topicDefaults: TopicDefaults;
  readonly nowMs: () => number;
  readonly systemInfo: () => SystemInfo;
  readonly serverVersion: string;
  readonly bodyLimitBytes: number;
  readonly passwordGate: PasswordGate;
}

export interface HttpContext extends HttpContextFields {
  /**
   * Argon2id verification of `password` against `passwordHash`, under the password gate: throws
   * the 429 at once when the gate is full. Every verification of a request goes through here.
   */
  verifyPassword(passwordHash: string, password: string): Promise<boolean>;
  /** The caller of a request in the authenticated scope (its onRequest hook set it). */
  identity(request: FastifyRequest): Identity;
  setIdentity(request: FastifyRequest, identity: Identity): void;
  /** The request body as received, for forwarding byte for byte. */
  rawBody(request: FastifyRequest): string | undefined;
  setRawBody(request: FastifyRequest, body: string): void;
  /**
   * Prechecks, then commits `body` through VSR for the caller and returns the success payload.
   * Every failure is thrown: an HttpError to render, or ForwardToPrimary when the replica turned
   * out not to be the primary (the error handler forwards the original request).
   */
  commit(identity: Identity, operation: number, body: Uint8Array): Promise<Uint8Array>;
  /** `commit` of a decoded operation for the request's caller: encodes it, names it once. */
  submit(request: FastifyRequest, operation: MetadataRequest): Promise<Uint8Array>;
}

export interface HttpContextParts extends HttpContextFields {
  /** The unbounded verification (`node.verifyPassword`), or a test's wrapping it. */
  readonly passwordVerifier: PasswordVerifier;
}

export function createContext(parts: HttpContextParts): HttpContext {
  const identities = new WeakMap<FastifyRequest, Identity>();
  const rawBodies = new WeakMap<FastifyRequest, string>();
  const { node, nowMs } = parts;
  return {
    ...parts,
    verifyPassword(passwordHash, password) {
      return parts.passwordGate.run(() => parts.passwordVerifier(passwordHash, password));
    },
    identity(request) {
      const identity = identities.get(request);
      assert(identity !== undefined, 'identity() is called only in the authenticated scope');
      return identity;
    },
    setIdentity(request, identity) {
      identities.set(request, identity);
    },
    rawBody(request) {
      return rawBodies.get(request);
    },
    setRawBody(request, body) {
      rawBodies.set(request, body);
    },
    submit(request, operation) {
      return this.commit(this.identity(request), operation.operation, encodeRequest(operation));
    },
    async commit(identity, operation, body) {
      // Fast rejection with the exact code apply would commit; apply checks again (state moves).
      const code = node.state.precheck(identity.userId, operation, body, { timestampUs: Math.floor(nowMs() * 1000) });
      if (code !== ErrorCode.ok) throw iggyError(code);
      const outcome = await node.write(identity.sessionKey, identity.userId, operation, body);
      switch (outcome.kind) {
        case 'committed':
          return outcome.payload;
        case 'rejected':
          throw iggyError(outcome.errorCode);
        case 'unavailable':
          // Never entered the log: TransientNotAccepted tells a forwarding backup it may retry.
          throw transientNotAccepted(outcome.reason);
        case 'unknown':
          // May still commit: TransientNotCommitted, which nobody retries on the caller's behalf.
          throw iggyError(ErrorCode.transientNotCommitted, outcome.reason);
        case 'evicted':
          throw unauthenticated('the session was evicted; log in again');
        case 'not_primary':
          throw new ForwardToPrimary();
      }
    },
  };
}

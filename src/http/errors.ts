/**
 * Every error the HTTP edge answers, in Iggy's one error shape `{id, code, reason, field}`
 * (iggy-http-api-and-ops.md §1.4), with its status code. Kept in one place, like fastify's
 * lib/errors.js, so the status map is reviewable at a glance.
 *
 * Two conventions, as Iggy's `ErrorResponse`: an error that carries an Iggy error code renders
 * that code as `id` and its snake_case name as `code`; an error born in the HTTP layer (unknown
 * route, malformed JSON, oversized body, forwarding failures) uses the HTTP status as `id`.
 */
import { ERROR_NAMES, ERROR_REASONS, ErrorCode, isErrorCode } from '../metadata/errors.js';

export interface ErrorBody {
  readonly id: number;
  readonly code: string;
  readonly reason: string;
  readonly field: string | null;
}

/**
 * Iggy error codes the HTTP layer answers that the replicated state machine never commits, so
 * they live here rather than in metadata/errors.ts (apache/iggy `iggy_error.rs`, cc269ef70).
 */
export const HttpIggyCode = {
  cannotEstablishConnection: 9,
  accessTokenMissing: 77,
  invalidAccessToken: 78,
} as const;

const HTTP_IGGY_NAMES: Readonly<Record<number, readonly [name: string, reason: string]>> = {
  9: ['cannot_establish_connection', 'Cannot establish connection'],
  77: ['access_token_missing', 'Access token is missing'],
  78: ['invalid_access_token', 'Invalid access token'],
};

/** Advisory seconds for every retryable 503 (Iggy `RETRY_AFTER_SECONDS`). */
export const RETRY_AFTER_SECONDS = 1;

/** Iggy's `CustomError` status map: not-found codes 404, credential codes 401, Unauthorized 403. */
const NOT_FOUND_CODES: ReadonlySet<number> = new Set([
  ErrorCode.resourceNotFound,
  ErrorCode.streamIdNotFound,
  ErrorCode.streamNameNotFound,
  ErrorCode.topicIdNotFound,
  ErrorCode.topicNameNotFound,
  ErrorCode.partitionNotFound,
  ErrorCode.consumerGroupIdNotFound,
  ErrorCode.consumerGroupNameNotFound,
  ErrorCode.consumerGroupMemberNotFound,
]);
const UNAUTHENTICATED_CODES: ReadonlySet<number> = new Set([
  ErrorCode.unauthenticated,
  ErrorCode.invalidPersonalAccessToken,
  HttpIggyCode.accessTokenMissing,
  HttpIggyCode.invalidAccessToken,
]);
const TRANSIENT_CODES: ReadonlySet<number> = new Set([ErrorCode.transientNotCommitted, ErrorCode.transientNotAccepted]);

export function statusOfIggyCode(code: number): number {
  if (NOT_FOUND_CODES.has(code)) return 404;
  if (UNAUTHENTICATED_CODES.has(code)) return 401;
  if (code === ErrorCode.unauthorized) return 403;
  if (TRANSIENT_CODES.has(code) || code === HttpIggyCode.cannotEstablishConnection) return 503;
  // Validation errors and business rejections alike (Iggy answers duplicates with 400, not 409).
  return 400;
}

/** Iggy's `ErrorResponse::from_error` field map, kept exactly (SDKs may read it). */
export function fieldOfIggyCode(code: number): string | null {
  switch (code) {
    case ErrorCode.streamIdNotFound:
      return 'stream_id';
    case ErrorCode.topicIdNotFound:
      return 'topic_id';
    case ErrorCode.partitionNotFound:
      return 'partition_id';
    case ErrorCode.invalidStreamName:
    case ErrorCode.streamNameAlreadyExists:
    case ErrorCode.invalidTopicName:
    case ErrorCode.topicNameAlreadyExists:
    case ErrorCode.consumerGroupNameAlreadyExists:
    case ErrorCode.personalAccessTokenAlreadyExists:
      return 'name';
    case ErrorCode.userAlreadyExists:
      return 'username';
    default:
      return null;
  }
}

/** An error response: the status, the body, and any headers it needs (Retry-After, Connection). */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly body: ErrorBody;
  readonly headers: Readonly<Record<string, string>>;

  constructor(statusCode: number, body: ErrorBody, headers: Readonly<Record<string, string>> = {}) {
    super(body.reason);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    this.body = body;
    this.headers = headers;
  }
}

/** 503 (cannot commit now) and 429 (a bounded resource is full) tell the client when to retry. */
function retryable(statusCode: number): Readonly<Record<string, string>> {
  return statusCode === 503 || statusCode === 429 ? { 'retry-after': String(RETRY_AFTER_SECONDS) } : {};
}

/** The error for an Iggy error code; `detail` is appended to the reason (never a secret). */
export function iggyError(code: number, detail?: string): HttpError {
  let name: string;
  let reason: string;
  if (isErrorCode(code)) {
    name = ERROR_NAMES[code];
    reason = ERROR_REASONS[code];
  } else {
    const known = HTTP_IGGY_NAMES[code];
    name = known?.[0] ?? `error_${code}`;
    reason = known?.[1] ?? `Error ${code}`;
  }
  const statusCode = statusOfIggyCode(code);
  const body: ErrorBody = {
    id: code,
    code: name,
    reason: detail === undefined ? reason : `${reason}: ${detail}`,
    field: fieldOfIggyCode(code),
  };
  return new HttpError(statusCode, body, retryable(statusCode));
}

/** A hand-built HTTP-layer error: `id` is the status (Iggy's `error_response`). */
export function httpError(statusCode: number, code: string, reason: string, field: string | null = null): HttpError {
  return new HttpError(statusCode, { id: statusCode, code, reason, field }, retryable(statusCode));
}

/** Iggy's legacy 404 body, for reads of a missing resource and for unknown routes. */
export function notFound(): HttpError {
  return httpError(404, 'not_found', 'Resource not found');
}

/** A request field that fails a shape rule the schema cannot express (ranges, key syntax). */
export function invalidRequest(field: string, reason: string): HttpError {
  return httpError(400, 'invalid_request', reason, field);
}

/**
 * A well-formed JSON body whose fields do not fit the request type: a field missing, of the wrong
 * type, or out of its type's range (a u64 past 2^64 - 1, an unknown enum name). Iggy's server
 * (axum's `Json` extractor) answers these 422 and keeps 400 for malformed JSON; vrmeta does the
 * same, in the one error shape, with the field named. Business rules (name lengths, topic sizes)
 * stay Iggy's own 400 codes.
 */
export function unprocessableBody(field: string, reason: string): HttpError {
  return httpError(422, 'unprocessable_entity', `Failed to deserialize the JSON body into the target type: ${reason}`, field);
}

export function payloadTooLarge(bodyLimitBytes: number): HttpError {
  const error = httpError(413, 'payload_too_large', `request body exceeds the ${bodyLimitBytes}-byte limit`);
  // The body was not read: the connection cannot be reused (Iggy `close_on_payload_too_large`).
  return new HttpError(error.statusCode, error.body, { connection: 'close' });
}

export function internalError(): HttpError {
  return httpError(500, 'internal_error', 'Internal server error');
}

/**
 * Thrown by the write path when the replica says it is not the primary: the app's error handler
 * answers by forwarding the original request (it holds the raw body and headers, the handler does
 * not). Not an HttpError on purpose, so nothing renders it as an error by accident.
 */
export class ForwardToPrimary extends Error {
  constructor() {
    super('not the primary: forward to the primary');
    this.name = 'ForwardToPrimary';
  }
}

/** The body of a 401 for a missing bearer (Iggy `AccessTokenMissing`). */
export function accessTokenMissing(): HttpError {
  return iggyError(HttpIggyCode.accessTokenMissing);
}

export function unauthenticated(detail?: string): HttpError {
  return iggyError(ErrorCode.unauthenticated, detail);
}

export function unauthorized(): HttpError {
  return iggyError(ErrorCode.unauthorized);
}

/** "Never entered the log, retry anywhere" (Iggy 58): the forwarder retries on this body. */
export function transientNotAccepted(detail?: string): HttpError {
  return iggyError(ErrorCode.transientNotAccepted, detail);
}

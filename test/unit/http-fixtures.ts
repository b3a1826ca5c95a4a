/**
 * Shared fixtures for the HTTP tests: an app over an in-process TestNode, a pinned clock, and
 * helpers that log in and send JSON through `app.inject()` (no sockets).
 */
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp, type BuildAppOptions } from '../../src/http/app.js';
import { parseJsonLossless, stringifyJsonLossless } from '../../src/http/json.js';
import { createTestNode, type CreateTestNodeOptions, type TestNode } from '../../src/http/test-node.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'HEAD' | 'PATCH' | 'OPTIONS';

export const JWT_SECRET = new Uint8Array(32).fill(7);
export const ROOT_PASSWORD = 'iggy';

export interface Harness {
  readonly app: FastifyInstance;
  readonly node: TestNode;
  /** The app's wall clock in ms; tests move it to expire tokens. */
  readonly clock: { nowMs: number };
  rootToken(): Promise<string>;
  login(username: string, password: string): Promise<string>;
  request(method: Method, url: string, options?: RequestOptions): Promise<Reply>;
  close(): Promise<void>;
}

export interface RequestOptions {
  readonly token?: string | null;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

export interface Reply {
  readonly status: number;
  readonly headers: LightMyRequestResponse['headers'];
  readonly text: string;
  /** The body parsed losslessly (u64 beyond 2^53 as bigint); undefined for an empty body. */
  readonly json: any;
}

export async function harness(
  options: {
    node?: CreateTestNodeOptions;
    app?: Partial<BuildAppOptions>;
    /** Adds routes of the test's own to the app before it gets ready. */
    routes?: (app: FastifyInstance, node: TestNode) => void;
  } = {},
): Promise<Harness> {
  const clock = { nowMs: 1_750_000_000_000 };
  const node = await createTestNode({ nowUs: () => clock.nowMs * 1000, ...options.node });
  const app = buildApp({ node, jwtSecret: JWT_SECRET, nowMs: () => clock.nowMs, ...options.app });
  options.routes?.(app, node);
  await app.ready();
  let root: string | null = null;
  const request = async (method: Method, url: string, requestOptions: RequestOptions = {}): Promise<Reply> => {
    const headers: Record<string, string> = { ...requestOptions.headers };
    if (requestOptions.token !== undefined && requestOptions.token !== null) headers.authorization = `Bearer ${requestOptions.token}`;
    const inject: InjectOptions = { method, url, headers };
    if (requestOptions.body !== undefined) {
      inject.payload = typeof requestOptions.body === 'string' ? requestOptions.body : stringifyJsonLossless(requestOptions.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await app.inject(inject);
    const text = response.body;
    let json: unknown;
    if (text.length > 0 && String(response.headers['content-type'] ?? '').includes('json')) json = parseJsonLossless(text);
    return { status: response.statusCode, headers: response.headers, text, json };
  };
  const login = async (username: string, password: string): Promise<string> => {
    const reply = await request('POST', '/users/login', { body: { username, password } });
    if (reply.status !== 200) throw new Error(`login ${username}: ${reply.status} ${reply.text}`);
    return reply.json.access_token.token as string;
  };
  return {
    app,
    node,
    clock,
    async rootToken() {
      root ??= await login('iggy', ROOT_PASSWORD);
      return root;
    },
    login,
    request,
    close: () => app.close(),
  };
}

/** Iggy's error body, asserted field by field by the tests. */
export function expectErrorShape(reply: Reply): { id: number; code: string; reason: string; field: string | null } {
  const body = reply.json as { id: unknown; code: unknown; reason: unknown; field: unknown };
  if (typeof body !== 'object' || body === null) throw new Error(`not an error body: ${reply.text}`);
  if (typeof body.id !== 'number' || typeof body.code !== 'string' || typeof body.reason !== 'string') {
    throw new Error(`not an error body: ${reply.text}`);
  }
  if (!(body.field === null || typeof body.field === 'string')) throw new Error(`bad field: ${reply.text}`);
  if (Object.keys(body).sort().join(',') !== 'code,field,id,reason') throw new Error(`extra keys: ${reply.text}`);
  return body as { id: number; code: string; reason: string; field: string | null };
}

/** Creates a user with no permissions (or the given ones) as root and logs in as them. */
export async function userWith(h: Harness, username: string, permissions: unknown = null): Promise<string> {
  const created = await h.request('POST', '/users', {
    token: await h.rootToken(),
    body: { username, password: 'secret-pass', status: 'active', permissions },
  });
  if (created.status !== 200) throw new Error(`create user ${username}: ${created.status} ${created.text}`);
  return h.login(username, 'secret-pass');
}

export const ALL_FALSE_GLOBAL = {
  manage_servers: false,
  read_servers: false,
  manage_users: false,
  read_users: false,
  manage_streams: false,
  read_streams: false,
  manage_topics: false,
  read_topics: false,
  poll_messages: false,
  send_messages: false,
} as const;

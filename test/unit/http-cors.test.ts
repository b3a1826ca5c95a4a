/**
 * CORS as Iggy's default `[http.cors]` (config.toml, http.rs `configure_cors`): any origin,
 * GET/POST/PUT/DELETE, `content-type` and `authorization` allowed, `iggy-view` exposed, preflight
 * answered before authentication; a configured list of origins echoes only those; an empty list
 * turns CORS off. Browser-free: the headers a browser checks, asserted through inject().
 */
import { afterEach, describe, expect, it } from 'vitest';
import { corsOriginsProblem } from '../../src/http/cors.js';
import { ConfigError, readConfigEnv, resolveConfig } from '../../src/node/config.js';
import { harness, type Harness } from './http-fixtures.js';

const UI = 'http://localhost:3050';
let h: Harness;

afterEach(async () => {
  await h.close();
});

function preflight(origin: string, method = 'POST') {
  return h.request('OPTIONS', '/streams', {
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
  });
}

describe('CORS, Iggy defaults (any origin)', () => {
  it('a preflight is 200 with no body, no bearer needed, and allows the methods and headers the UI uses', async () => {
    h = await harness();
    const reply = await preflight(UI);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe('');
    expect(reply.headers['access-control-allow-origin']).toBe('*');
    expect(reply.headers['access-control-allow-methods']).toBe('GET,POST,PUT,DELETE');
    expect(reply.headers['access-control-allow-headers']).toBe('content-type,authorization');
    expect(reply.headers['access-control-allow-credentials']).toBeUndefined();
    expect(reply.headers['iggy-view']).toBeUndefined();
  });

  it('answers carry allow-origin and expose iggy-view, errors included, so a script can read them', async () => {
    h = await harness();
    h.node.currentView = 5;
    const token = await h.rootToken();
    const ok = await h.request('GET', '/streams', { token, headers: { origin: UI } });
    expect(ok.status).toBe(200);
    expect(ok.headers['access-control-allow-origin']).toBe('*');
    expect(ok.headers['access-control-expose-headers']).toBe('iggy-view');
    expect(ok.headers['iggy-view']).toBe('5');
    const unauthenticated = await h.request('GET', '/streams', { headers: { origin: UI } });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers['access-control-allow-origin']).toBe('*');
  });

  it('an OPTIONS that is not a preflight is still an unknown route', async () => {
    h = await harness();
    expect((await h.request('OPTIONS', '/streams', { headers: { origin: UI } })).status).toBe(404);
  });
});

describe('CORS, configured origins', () => {
  it('echoes a listed origin (vary: origin) and gives an unlisted one nothing to read', async () => {
    h = await harness({ app: { cors: { allowedOrigins: [UI, 'https://ui.example.com'] } } });
    const listed = await preflight('https://ui.example.com');
    expect(listed.status).toBe(200);
    expect(listed.headers['access-control-allow-origin']).toBe('https://ui.example.com');
    expect(String(listed.headers.vary)).toContain('origin');
    const unlisted = await preflight('https://evil.example.com');
    expect(unlisted.headers['access-control-allow-origin']).toBeUndefined();
    const token = await h.rootToken();
    const answer = await h.request('GET', '/streams', { token, headers: { origin: 'https://evil.example.com' } });
    expect(answer.status).toBe(200);
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    expect(answer.headers['access-control-expose-headers']).toBeUndefined();
    expect((await h.request('GET', '/streams', { token, headers: { origin: UI } })).headers['access-control-allow-origin']).toBe(UI);
  });

  it('an empty list turns CORS off: no headers, a preflight is a 404', async () => {
    h = await harness({ app: { cors: { allowedOrigins: [] } } });
    const reply = await preflight(UI);
    expect(reply.status).toBe(404);
    expect(reply.headers['access-control-allow-origin']).toBeUndefined();
    const answer = await h.request('GET', '/streams', { token: await h.rootToken(), headers: { origin: UI } });
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('CORS configuration (cors_origins / --cors-origins / VRMETA_CORS_ORIGINS)', () => {
  const SECRET = { cluster_secret: 'a cluster secret of at least 32 characters' };
  const refusal = (value: unknown): string => {
    try {
      resolveConfig(SECRET, { cors_origins: value });
    } catch (error) {
      if (error instanceof ConfigError) return `${error.key} | ${error.message}`;
      throw error;
    }
    return 'accepted';
  };

  it('defaults to any origin; a list, a comma-separated flag or variable, and empty (off) are accepted', () => {
    expect(resolveConfig(SECRET).corsOrigins).toEqual(['*']);
    expect(resolveConfig(SECRET, { cors_origins: [UI] }).corsOrigins).toEqual([UI]);
    expect(resolveConfig(SECRET, readConfigEnv({ VRMETA_CORS_ORIGINS: `${UI}, https://ui.example.com` })).corsOrigins).toEqual([UI, 'https://ui.example.com']);
    expect(resolveConfig(SECRET, { cors_origins: [] }).corsOrigins).toEqual([]);
    expect(resolveConfig(SECRET, { cors_origins: '' }).corsOrigins).toEqual([]);
  });

  it('refuses what a browser would never send, naming the key', () => {
    expect(refusal(['*', UI])).toMatch(/^cors_origins \| .*.*cannot be combined/);
    expect(refusal(['https://ui.example.com/app'])).toMatch(/^cors_origins \| .*.*no path/);
    expect(refusal(['ui.example.com'])).toMatch(/^cors_origins \| .*/);
    expect(refusal(['HTTPS://UI.example.com'])).toMatch(/^cors_origins \| .*/);
    expect(refusal(['ftp://ui.example.com'])).toMatch(/^cors_origins \| .*/);
    expect(refusal(42)).toMatch(/^cors_origins \| .*expected a list/);
    expect(corsOriginsProblem(Array.from({ length: 65 }, (_, index) => `https://u${index}.example.com`))).toMatch(/at most 64/);
  });
});

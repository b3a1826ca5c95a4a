/**
 * A replica's boot on a real process (its length matters: a restarting replica is out of the
 * cluster until it listens): it logs one `boot phases` record with the ms of each phase, and it
 * is listening before it has loaded what only a request needs (jose for tokens, TypeBox's
 * validator compiler for request schemas); the first request that needs them loads them and is
 * answered as before. Which ES modules the process loaded is recorded by a module hook
 * (`node --import`) writing each URL to a file.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cleanupAll, leftovers, makeTempRoot, removeTempRoot, spawnChild, stopChild, withTails } from '../../bench/procs.js';
import { CLI_PATH, ROOT_PASSWORD, ROOT_USERNAME, assertDistFresh, sleep } from './harness.js';

afterAll(async () => {
  await cleanupAll();
});

const PHASES = ['process', 'config', 'import_replica', 'import_http', 'prefetch_wait', 'recovery', 'http_app', 'replica_listen', 'http_listen', 'tcp_listen'];

/** An `--import` module that appends the URL of every ES module the process loads to `out`. */
function moduleRecorder(root: string, out: string): string {
  const hooks = `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) { appendFileSync(${JSON.stringify(out)}, url + '\\n'); return next(url, context); }
`;
  const hooksFile = join(root, 'hooks.mjs');
  writeFileSync(hooksFile, hooks);
  const register = join(root, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooksFile}`)});\n`);
  return register;
}

/**
 * A `--require` module that appends the path of every CommonJS module the process loads to `out`
 * (fastify loads its serializer compiler with require, which the ES module hook does not see).
 */
function requireRecorder(root: string, out: string): string {
  const file = join(root, 'require-recorder.cjs');
  writeFileSync(
    file,
    `const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const load = Module._load;
Module._load = function (request, parent) {
  const exported = load.apply(this, arguments);
  try { appendFileSync(${JSON.stringify(out)}, Module._resolveFilename(request, parent) + '\\n'); } catch {}
  return exported;
};
`,
  );
  return file;
}

function loaded(out: string): string[] {
  return existsSync(out) ? readFileSync(out, 'utf8').split('\n').filter((line) => line !== '') : [];
}

const TOKEN_MODULES = /\/node_modules\/jose\//;
const VALIDATOR_MODULES = /\/node_modules\/(@fastify\/type-provider-typebox\/|typebox\/build\/(compile|value)\/)/;
/** The response serializer's compiler (fastify's error serializer needs only its runtime, lib/). */
const SERIALIZER_COMPILER = /\/node_modules\/(fast-json-stringify\/index\.js|@fastify\/fast-json-stringify-compiler\/)/;

it('a replica logs its boot phases and listens before loading jose, the TypeBox validator compiler and the response serializer compiler; the first login loads them', async () => {
  assertDistFresh();
  const root = makeTempRoot('vrmeta-boot-');
  const out = join(root, 'modules.txt');
  const register = moduleRecorder(root, out);
  const required = join(root, 'required.txt');
  const replica = spawnChild(
    'boot',
    process.execPath,
    ['--import', register, '--require', requireRecorder(root, required), CLI_PATH, 'start', '--insecure', '--replicas', '127.0.0.1:0', '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--data-dir', join(root, 'data')],
    { keep: (line) => line.includes('"phases_ms"') || line.includes('"msg":"HTTP listening') },
  );
  try {
    const deadline = Date.now() + 60_000;
    while (!replica.kept.some(({ line }) => line.includes('"phases_ms"'))) {
      if (replica.exit !== null || Date.now() > deadline) throw withTails('the replica logged no boot phases record', [replica]);
      await sleep(50);
    }
    const atBoot = loaded(out);
    const record = JSON.parse(replica.kept.find(({ line }) => line.includes('"phases_ms"'))!.line) as { level: number; boot_ms: unknown; phases_ms: Record<string, unknown> };
    expect(record.level).toBe(30);
    expect(Object.keys(record.phases_ms)).toEqual(PHASES);
    for (const ms of Object.values(record.phases_ms)) {
      expect(Number.isSafeInteger(ms) && (ms as number) >= 0).toBe(true);
    }
    expect(typeof record.boot_ms).toBe('number');

    // Listening, and neither of them loaded yet (the recorder did see the app's own modules).
    expect(atBoot.some((url) => url.endsWith('/dist/src/http/app.js'))).toBe(true);
    expect(atBoot.filter((url) => TOKEN_MODULES.test(url) || VALIDATOR_MODULES.test(url))).toEqual([]);

    const http = (JSON.parse(replica.kept.find(({ line }) => line.includes('"msg":"HTTP listening'))!.line) as { http: string }).http;
    while ((await fetch(`http://${http}/readyz`)).status !== 200) {
      if (replica.exit !== null || Date.now() > deadline) throw withTails('the replica never became ready', [replica]);
      await sleep(50);
    }
    expect(loaded(out).filter((url) => VALIDATOR_MODULES.test(url))).toEqual([]);
    // Ready without fast-json-stringify's compiler: it loads at the first response with a schema,
    // and the probes write their bodies without it.
    expect(loaded(required).some((path) => path.includes('/node_modules/fastify/'))).toBe(true);
    expect(loaded(required).filter((path) => SERIALIZER_COMPILER.test(path))).toEqual([]);

    // The first request with a body schema waits for the compiler, then is validated as before.
    const bad = await fetch(`http://${http}/users/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: ROOT_USERNAME }) });
    expect(bad.status).toBe(422); // Iggy answers a body its schema refuses with 422
    const login = await fetch(`http://${http}/users/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: ROOT_USERNAME, password: ROOT_PASSWORD }),
    });
    expect(login.status).toBe(200);
    const token = ((await login.json()) as { access_token: { token: string } }).access_token.token;
    const streams = await fetch(`http://${http}/streams`, { headers: { authorization: `Bearer ${token}` } });
    expect(streams.status).toBe(200);
    const afterLogin = loaded(out);
    expect(afterLogin.some((url) => TOKEN_MODULES.test(url))).toBe(true);
    expect(afterLogin.some((url) => VALIDATOR_MODULES.test(url))).toBe(true);
    expect(loaded(required).some((path) => SERIALIZER_COMPILER.test(path))).toBe(true);
  } finally {
    await stopChild(replica);
    removeTempRoot(root);
  }
  expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
}, 120_000);

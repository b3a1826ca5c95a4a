/**
 * TLS on the HTTP listener and mutual TLS on the replica port, with a throwaway CA generated here
 * by `openssl` (node:crypto cannot issue certificates). Three `vrmeta start` replicas on
 * 127.0.0.1, each with its own certificate (SAN IP:127.0.0.1) from the test CA:
 *   - HTTPS: a client trusting the CA is served; one trusting the system's CAs, or another CA,
 *     fails the TLS handshake; plain HTTP gets no answer;
 *   - the mesh: the cluster forms and replicates over mutual TLS (a write sent to a backup is
 *     forwarded to the primary over HTTPS and read back from every replica); the replica port
 *     speaks TLS and demands a client certificate; a replica whose certificate another CA issued
 *     is refused by its peers (counted as tls_failed) and joins once it has a good one;
 *   - plain sockets held open on the mesh port (no TLS handshake ever started) do not keep a
 *     restarted replica out;
 *   - bad TLS configuration exits 2 naming the key.
 * (The Iggy binary client listener does not exist yet; it will take its TLS from src/node/tls.ts.)
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDevClusterSecret } from '../../src/node/cluster-secret.js';
import { reservePorts } from '../../bench/procs.js';
import { sleep } from './harness.js';
import { killAll, metricByReason, modeNoneHello, spawnCli, stopSpawned, waitUntil, type Spawned } from './security-support.js';

const OPENSSL = spawnSync('openssl', ['version'], { encoding: 'utf8' }).status === 0;

function openssl(cwd: string, args: string[]): void {
  const result = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${result.stderr}`);
}

interface Pki {
  readonly dir: string;
  readonly ca: string;
  readonly otherCa: string;
  /** Certificate and key of replica i, issued by `ca`. */
  readonly replica: { cert: string; key: string }[];
  /** A certificate and key issued by `otherCa`. */
  readonly rogue: { cert: string; key: string };
}

/** A CA, a second unrelated CA, and leaf certificates (P-256, one day, SAN 127.0.0.1). */
function makePki(dir: string, replicaCount: number): Pki {
  const ca = (name: string): void =>
    openssl(dir, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-keyout', `${name}.key`, '-out', `${name}.crt`,
      '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  const leaf = (name: string, issuer: string): { cert: string; key: string } => {
    openssl(dir, ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    writeFileSync(join(dir, `${name}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n');
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.crt`, '-CAkey', `${issuer}.key`, '-set_serial', `0x${Date.now().toString(16)}${name.length}`,
      '-days', '1', '-out', `${name}.crt`, '-extfile', `${name}.ext`]);
    chmodSync(join(dir, `${name}.key`), 0o600);
    return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  };
  ca('vrmeta-test-ca');
  ca('other-ca');
  return {
    dir,
    ca: join(dir, 'vrmeta-test-ca.crt'),
    otherCa: join(dir, 'other-ca.crt'),
    replica: Array.from({ length: replicaCount }, (_, index) => leaf(`replica-${index}`, 'vrmeta-test-ca')),
    rogue: leaf('rogue', 'other-ca'),
  };
}

/** One HTTPS request; `ca` null trusts the system's CAs. Rejects on a failed TLS handshake. */
function https(url: string, options: { ca: string | null; method?: string; token?: string; body?: unknown } = { ca: null }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = {};
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const request = httpsRequest(
      url,
      { method: options.method ?? 'GET', headers, agent: false, timeout: 10_000, ...(options.ca === null ? {} : { ca: readFileSync(options.ca) }) },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', reject);
    request.end(body);
  });
}

describe.skipIf(!OPENSSL)('TLS (openssl present)', () => {
  let root: string;
  let pki: Pki;
  let secretFile: string;
  let httpPorts: number[];
  let replicaPorts: number[];
  const replicas: (Spawned | null)[] = [null, null, null];

  const http = (index: number): string => `127.0.0.1:${httpPorts[index]}`;
  const url = (index: number, path: string): string => `https://${http(index)}${path}`;

  function startReplica(index: number, certificate: { cert: string; key: string } = pki.replica[index]!): Spawned {
    const spawned = spawnCli([
      'start',
      '--replica-id', String(index),
      '--replicas', replicaPorts.map((port) => `127.0.0.1:${port}`).join(','),
      '--http', http(index),
      '--http-peers', httpPorts.map((port) => `127.0.0.1:${port}`).join(','),
      '--data-dir', join(root, `replica-${index}`),
      '--cluster-name', 'vrmeta-tls-test',
      '--cluster-secret-file', secretFile,
      '--tls-cert', certificate.cert,
      '--tls-key', certificate.key,
      '--tls-ca', pki.ca,
    ]);
    replicas[index] = spawned;
    return spawned;
  }

  async function ready(index: number): Promise<boolean> {
    try {
      return (await https(url(index, '/readyz'), { ca: pki.ca })).status === 200;
    } catch {
      return false;
    }
  }

  async function login(index: number): Promise<string> {
    const reply = await https(url(index, '/users/login'), { ca: pki.ca, method: 'POST', body: { username: 'iggy', password: 'iggy' } });
    if (reply.status !== 200) throw new Error(`login: ${reply.status} ${reply.text}`);
    return (JSON.parse(reply.text) as { access_token: { token: string } }).access_token.token;
  }

  async function authFailures(index: number, token: string): Promise<Record<string, number>> {
    return metricByReason((await https(url(index, '/metrics'), { ca: pki.ca, token })).text, 'vsr_replica_auth_failures_total');
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'vrmeta-tls-'));
    pki = makePki(root, 3);
    secretFile = ensureDevClusterSecret(root).path;
    const ports = await reservePorts(6);
    httpPorts = ports.slice(0, 3);
    replicaPorts = ports.slice(3);
    for (let index = 0; index < 3; index++) startReplica(index);
    for (let index = 0; index < 3; index++) await waitUntil(`replica ${index} ready over HTTPS`, () => ready(index), 60_000, replicas[index]!);
  }, 90_000);

  afterAll(async () => {
    for (const replica of replicas) if (replica !== null) await stopSpawned(replica, 'SIGKILL');
    await killAll();
    rmSync(root, { recursive: true, force: true });
  });

  it('HTTPS: a client trusting the CA is served; the system CAs, another CA and plain HTTP are not', async () => {
    for (let index = 0; index < 3; index++) {
      expect(await https(url(index, '/ping'), { ca: pki.ca })).toEqual({ status: 200, text: 'pong' });
      await expect(https(url(index, '/ping'), { ca: null })).rejects.toMatchObject({ code: expect.stringMatching(/CERT|SIGNATURE|ISSUER/) });
      await expect(https(url(index, '/ping'), { ca: pki.otherCa })).rejects.toMatchObject({ code: expect.stringMatching(/CERT|SIGNATURE|ISSUER/) });
      await expect(fetch(`http://${http(index)}/ping`, { signal: AbortSignal.timeout(5_000) })).rejects.toThrow();
    }
  }, 30_000);

  it('the mesh replicates over mutual TLS: a write on a backup is forwarded over HTTPS and read on every replica', async () => {
    const token = await login(0);
    const status = JSON.parse((await https(url(0, '/cluster/status'), { ca: pki.ca, token })).text) as { primary: number };
    const backup = (status.primary + 1) % 3;
    const created = await https(url(backup, '/streams'), { ca: pki.ca, method: 'POST', token, body: { name: 'over-tls' } });
    expect(created.status, created.text).toBe(200);
    for (let index = 0; index < 3; index++) {
      await waitUntil(`replica ${index} has the stream`, async () => (await https(url(index, '/streams/over-tls'), { ca: pki.ca, token })).status === 200, 20_000);
    }
    // Every pair authenticated over TLS: no replica counted a failed handshake of a peer.
    for (let index = 0; index < 3; index++) expect(await authFailures(index, token)).toEqual({});
  }, 60_000);

  it('the replica port speaks TLS and demands a certificate from the CA; failures are counted', async () => {
    const token = await login(0);
    const target = 2;
    const before = await authFailures(target, token);
    // With a certificate from the CA: TLS completes, the server names itself, and the replica
    // handshake runs inside (a mode-none Hello is then refused by the PSK check, not by TLS).
    const good = await new Promise<string>((resolve, reject) => {
      let subject = '';
      const socket = tlsConnect({ host: '127.0.0.1', port: replicaPorts[target]!, ca: readFileSync(pki.ca), cert: readFileSync(pki.replica[0]!.cert), key: readFileSync(pki.replica[0]!.key) }, () => {
        subject = String(socket.getPeerCertificate().subject.CN);
        socket.write(modeNoneHello('vrmeta-tls-test', target));
      });
      socket.on('data', () => {});
      socket.on('error', reject);
      socket.on('close', () => resolve(subject));
    });
    expect(good).toBe('replica-2');
    // Without a client certificate, with another CA's, and in plain TCP: refused.
    const refused = (options: ConnectionOptions): Promise<void> =>
      new Promise((resolve) => {
        const socket = tlsConnect({ host: '127.0.0.1', port: replicaPorts[target]!, ca: readFileSync(pki.ca), ...options });
        socket.on('error', () => {});
        socket.on('close', () => resolve());
        // TLS 1.3: the client may see its side complete before the server refuses its certificate.
        socket.on('secureConnect', () => socket.write(Buffer.alloc(256)));
      });
    await refused({});
    await refused({ cert: readFileSync(pki.rogue.cert), key: readFileSync(pki.rogue.key) });
    await new Promise<void>((resolve) => {
      const socket = netConnect({ host: '127.0.0.1', port: replicaPorts[target]! }, () => socket.write(Buffer.alloc(256)));
      socket.on('error', () => {});
      socket.on('close', () => resolve());
    });
    const grew = async (reason: string): Promise<number> => ((await authFailures(target, token))[reason] ?? 0) - (before[reason] ?? 0);
    await waitUntil('three tls_failed counted', async () => (await grew('tls_failed')) >= 3, 10_000);
    expect(await grew('tls_failed')).toBe(3);
    expect(await grew('mode_mismatch')).toBe(1);
  }, 60_000);

  it('a replica with a certificate from another CA is refused by its peers; with a good one it rejoins', async () => {
    const token = await login(1);
    const before = await Promise.all([1, 2].map(async (index) => (await authFailures(index, token))['tls_failed'] ?? 0));
    await stopSpawned(replicas[0]!);
    // Replica 0 dials 1 and 2, which refuse its certificate.
    startReplica(0, pki.rogue);
    await waitUntil(
      'replicas 1 and 2 refusing replica 0',
      async () => (await Promise.all([1, 2].map(async (index, position) => ((await authFailures(index, token))['tls_failed'] ?? 0) > before[position]!))).every(Boolean),
      30_000,
      replicas[0]!,
    );
    // The other two keep committing without it (a write on either is forwarded to the primary).
    const created = await https(url(1, '/streams'), { ca: pki.ca, method: 'POST', token, body: { name: 'while-rogue' } });
    expect(created.status, created.text).toBe(200);
    await sleep(1_000);
    expect(await ready(0)).toBe(false);
    await stopSpawned(replicas[0]!);
    startReplica(0);
    await waitUntil('replica 0 ready with a good certificate', () => ready(0), 60_000, replicas[0]!);
    await waitUntil('replica 0 has the stream', async () => (await https(url(0, '/streams/while-rogue'), { ca: pki.ca, token })).status === 200, 30_000);
  }, 120_000);

  it('sockets held open on the mesh port without starting TLS do not keep a restarted replica out', async () => {
    // Plain TCP connections that never send a ClientHello, each reopened as soon as it closes:
    // they once filled the TLS listener's maxConnections and every dial of a peer was dropped.
    const held = new Set<ReturnType<typeof netConnect>>();
    let holding = true;
    const hold = (port: number): void => {
      if (!holding) return;
      const socket = netConnect({ host: '127.0.0.1', port });
      held.add(socket);
      socket.on('error', () => {});
      socket.once('close', () => {
        held.delete(socket);
        setTimeout(() => hold(port), 5);
      });
    };
    try {
      for (const index of [1, 2]) for (let count = 0; count < 300; count++) hold(replicaPorts[index]!);
      await sleep(500);
      await stopSpawned(replicas[0]!);
      startReplica(0);
      await waitUntil('replica 0 ready during the attack', () => ready(0), 30_000, replicas[0]!);
    } finally {
      holding = false;
      for (const socket of held) socket.destroy();
    }
  }, 90_000);

  it('bad TLS configuration exits 2 naming the key', async () => {
    const ports = await reservePorts(2);
    const base = ['start', '--insecure', '--replicas', `127.0.0.1:${ports[0]}`, '--http', `127.0.0.1:${ports[1]}`, '--data-dir', join(root, 'bad')];
    const loose = join(root, 'loose.key');
    writeFileSync(loose, readFileSync(pki.replica[0]!.key));
    chmodSync(loose, 0o644);
    const cases: [string[], RegExp][] = [
      [['--tls-ca', pki.ca], /tls_ca: .*needs this replica's certificate/],
      [['--tls-cert', pki.replica[0]!.cert], /tls_key: tls_cert is set/],
      [['--tls-cert', pki.replica[0]!.cert, '--tls-key', pki.rogue.key], /tls_key: .* are not a certificate and its private key/],
      [['--tls-cert', pki.replica[0]!.cert, '--tls-key', loose], /tls_key: .*readable by others/],
      [['--tls-cert', pki.replica[0]!.cert, '--tls-key', pki.replica[0]!.key, '--tls-ca', join(root, 'missing.crt')], /tls_ca: cannot open/],
    ];
    for (const [flags, message] of cases) {
      const spawned = spawnCli([...base, ...flags]);
      const exit = await spawned.exited;
      await sleep(20);
      expect(exit.code, spawned.lines.join('\n')).toBe(2);
      expect(spawned.lines.join('\n')).toMatch(message);
    }
  }, 60_000);
});

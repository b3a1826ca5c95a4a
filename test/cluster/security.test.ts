/**
 * Secure by default, against real processes on 127.0.0.1:
 *   - `npm start` (`vrmeta dev`): the data directory gets a 0600 secret file that every replica
 *     uses; a root token forged from public facts gets 401 on every replica; a process that knows
 *     the replica addresses but not the secret gets no frame applied, and is counted and logged;
 *     a restart reuses the secret (tokens stay valid);
 *   - `vrmeta start` with a secret: forged tokens get 401 (and the same token signed with the
 *     real key gets 200, so the forgeries fail on the key alone); the secret appears in no log
 *     line, status, metric, snapshot, WAL or superblock;
 *   - `vrmeta start --insecure` (one replica): forged tokens get 401, tokens die with the process;
 *   - `vrmeta start` without a secret refuses to start (exit 2), naming every way to give one.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_CLUSTER_SECRET_FILE, tokenKeyOf } from '../../src/node/cluster-secret.js';
import { clusterIdOf } from '../../src/node/replica-node.js';
import { consecutiveFreePorts, reservePorts } from '../../bench/procs.js';
import { Cluster, clusterForAll, sleep } from './harness.js';
import {
  attackReplicaPort,
  getText,
  killAll,
  login,
  metricByReason,
  publicFactKeys,
  readyz,
  rootActions,
  rootToken,
  spawnCli,
  stopSpawned,
  waitUntil,
  type Spawned,
} from './security-support.js';

const DEFAULT_CLUSTER_NAME = 'vrmeta';

afterAll(async () => {
  await killAll();
});

/** Every guessed key is refused on `httpAddress`: 401 for creating a user and for listing users. */
async function expectForgeriesRefused(httpAddress: string, clusterNames: readonly string[]): Promise<void> {
  for (const guess of publicFactKeys(clusterNames)) {
    const token = await rootToken(guess.key);
    expect(await rootActions(httpAddress, token), `${guess.name} on ${httpAddress}`).toEqual({ create: 401, list: 401 });
  }
}

describe('npm start (vrmeta dev): secure by default', () => {
  let root: string;
  let dataDir: string;
  let httpPorts: number[];
  let replicaPorts: number[];
  let tcpPorts: number[];
  let dev: Spawned;

  async function startDev(): Promise<Spawned> {
    const spawned = spawnCli([
      'dev',
      '--replicas', '3',
      '--data-dir', dataDir,
      '--http-port', String(httpPorts[0]),
      '--replica-port', String(replicaPorts[0]),
      '--tcp-port', String(tcpPorts[0]),
      '--log-level', 'info',
    ]);
    await waitUntil('every dev replica ready', async () => (await Promise.all(httpPorts.map((port) => readyz(`127.0.0.1:${port}`)))).every(Boolean), 60_000, spawned);
    return spawned;
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'vrmeta-dev-security-'));
    dataDir = join(root, 'data');
    const httpBase = await consecutiveFreePorts(3);
    const replicaBase = await consecutiveFreePorts(3, [httpBase, httpBase + 1, httpBase + 2]);
    httpPorts = [httpBase, httpBase + 1, httpBase + 2];
    replicaPorts = [replicaBase, replicaBase + 1, replicaBase + 2];
    const tcpBase = await consecutiveFreePorts(3, [...httpPorts, ...replicaPorts]);
    tcpPorts = [tcpBase, tcpBase + 1, tcpBase + 2];
    dev = await startDev();
  }, 90_000);

  afterAll(async () => {
    if (dev !== undefined) await stopSpawned(dev, 'SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it('the data directory holds a 0600 secret file, and a root token forged from public facts gets 401 on every replica', async () => {
    const secretPath = join(dataDir, DEV_CLUSTER_SECRET_FILE);
    expect(statSync(secretPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(secretPath, 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
    // Never printed: dev and its replicas name the file, not the secret.
    expect(dev.lines.some((line) => line.includes(readFileSync(secretPath, 'utf8').trim()))).toBe(false);
    for (const port of httpPorts) await expectForgeriesRefused(`127.0.0.1:${port}`, [DEFAULT_CLUSTER_NAME]);
    // Control: the same requests with a real root token succeed.
    const token = await login(`127.0.0.1:${httpPorts[0]}`);
    expect(await rootActions(`127.0.0.1:${httpPorts[1]}`, token)).toEqual({ create: 200, list: 200 });
  }, 60_000);

  it('a process that knows the replica addresses but not the secret gets no frame applied, and is counted and logged', async () => {
    const http = (index: number) => `127.0.0.1:${httpPorts[index]}`;
    const token = await login(http(0));
    const statuses = async () =>
      Promise.all(httpPorts.map(async (_, index) => JSON.parse((await getText(`http://${http(index)}/cluster/status`, token)).text) as { view: number; op: number; commit_max: number }));
    const before = await statuses();
    const view = before[0]!.view;
    const failures = async (index: number) => metricByReason((await getText(`http://${http(index)}/metrics`, token)).text, 'vsr_replica_auth_failures_total');
    const countsBefore = await Promise.all([1, 2].map(failures));

    const guesses = [
      'insecure-default:vrmeta',
      DEFAULT_CLUSTER_NAME,
      '',
      'iggy',
    ].map((text) => new TextEncoder().encode(text.length === 0 ? '\0' : text));
    for (const target of [1, 2]) {
      const port = replicaPorts[target]!;
      expect((await attackReplicaPort(port, target, DEFAULT_CLUSTER_NAME, view, { kind: 'mode_none' })).closedByPeer).toBe(true);
      expect((await attackReplicaPort(port, target, DEFAULT_CLUSTER_NAME, view, { kind: 'frames_only' })).closedByPeer).toBe(true);
      for (const secret of guesses) {
        expect((await attackReplicaPort(port, target, DEFAULT_CLUSTER_NAME, view, { kind: 'guessed_key', secret })).closedByPeer).toBe(true);
      }
    }

    // Counted: every attempt shows in /metrics by reason.
    for (const [position, target] of [1, 2].entries()) {
      const after = await failures(target);
      const grew = (reason: string) => (after[reason] ?? 0) - (countsBefore[position]![reason] ?? 0);
      expect(grew('mode_mismatch'), `replica ${target} mode_mismatch`).toBe(1);
      expect(grew('mac_mismatch'), `replica ${target} mac_mismatch`).toBe(guesses.length);
      expect(grew('frame_rejected') + grew('unexpected_frame'), `replica ${target} frames without a handshake`).toBe(1);
    }
    // Logged, with the remote address.
    for (const target of [1, 2]) {
      const logged = dev.lines.filter((line) => line.startsWith(`[replica ${target}]`) && line.includes('replica bus: handshake failed') && line.includes('"remote":"127.0.0.1:'));
      expect(logged.length, `replica ${target} log lines`).toBeGreaterThanOrEqual(2 + guesses.length);
    }
    // Nothing applied: had one StartViewChange for view + 100 been accepted, the cluster would be
    // in a view change or past it by now. Give it the time a view change takes, then compare.
    await sleep(1_500);
    const after = await statuses();
    for (const [index, status] of after.entries()) {
      expect(status.view, `replica ${index} view`).toBe(view);
      expect(status.op, `replica ${index} op`).toBe(before[index]!.op);
    }
    expect(await rootActions(http(2), token)).toEqual({ create: 200, list: 200 });
  }, 90_000);

  it('a restart reuses the secret file: a token issued before it stays valid', async () => {
    const secretBefore = readFileSync(join(dataDir, DEV_CLUSTER_SECRET_FILE), 'utf8');
    const token = await login(`127.0.0.1:${httpPorts[0]}`);
    await stopSpawned(dev, 'SIGINT');
    dev = await startDev();
    expect(dev.lines.some((line) => line.includes('(mode 0600, reused)'))).toBe(true);
    expect(readFileSync(join(dataDir, DEV_CLUSTER_SECRET_FILE), 'utf8')).toBe(secretBefore);
    expect((await rootActions(`127.0.0.1:${httpPorts[2]}`, token)).list).toBe(200);
  }, 90_000);
});

describe('vrmeta start with a cluster secret', () => {
  const SECRET = 'security-test-cluster-secret-5f1d8e2a9c0b47';
  const CLUSTER_NAME = 'vrmeta-security-test';
  let cluster: Cluster;
  // A checkpoint every 16 - 2 * 2 = 12 ops, so the snapshot file is written too.
  clusterForAll({ clusterSecret: SECRET, clusterName: CLUSTER_NAME, journalSlots: 16, prepareQueueDepth: 2 }, (started) => (cluster = started), 90_000);

  it('a root token forged from public facts gets 401 on every replica; the real derived key gets 200', async () => {
    await cluster.explain(async () => {
      for (const index of cluster.indices()) await expectForgeriesRefused(cluster.httpAddress(index), [CLUSTER_NAME, DEFAULT_CLUSTER_NAME]);
      const real = tokenKeyOf(new TextEncoder().encode(SECRET), clusterIdOf(CLUSTER_NAME));
      expect(await rootActions(cluster.httpAddress(1), await rootToken(real))).toEqual({ create: 200, list: 200 });
    });
  }, 60_000);

  it('the secret appears in no log line, /cluster/status, /metrics, /stats, snapshot, WAL or superblock', async () => {
    await cluster.explain(async () => {
      const client = await cluster.login(0);
      for (let index = 0; index < 30; index++) await client.createStream(`secret-scan-${index}`);
      await cluster.waitForConverged();
      const secretBytes = Buffer.from(SECRET, 'utf8');
      const tokenKey = Buffer.from(tokenKeyOf(secretBytes, clusterIdOf(CLUSTER_NAME)));
      const needles = [SECRET, secretBytes.toString('hex'), secretBytes.toString('base64'), tokenKey.toString('hex'), tokenKey.toString('base64url')];
      const token = await cluster.rootToken();
      let snapshots = 0;
      for (const index of cluster.indices()) {
        const http = cluster.httpAddress(index);
        const bodies = [
          cluster.lines(index).join('\n'),
          readFileSync(join(cluster.root, `replica-${index}.log`), 'utf8'),
          (await getText(`http://${http}/cluster/status`, token)).text,
          (await getText(`http://${http}/cluster/metadata`, token)).text,
          (await getText(`http://${http}/metrics`, token)).text,
          (await getText(`http://${http}/stats`, token)).text,
        ];
        expect(bodies[4]).toContain('vsr_view');
        for (const body of bodies) for (const needle of needles) expect(body.includes(needle), `replica ${index}`).toBe(false);
        // Every file of the data directory, the partition groups' directories included.
        for (const file of readdirSync(cluster.dataDir(index), { recursive: true, encoding: 'utf8' })) {
          const path = join(cluster.dataDir(index), file);
          if (!statSync(path).isFile()) continue;
          const bytes = readFileSync(path);
          if (file === 'snapshot.bin') snapshots += 1;
          for (const needle of [secretBytes, tokenKey, Buffer.from(secretBytes.toString('hex'))]) {
            expect(bytes.includes(needle), `replica ${index} ${file}`).toBe(false);
          }
        }
      }
      expect(snapshots).toBe(3);
    });
  }, 90_000);
});

describe('vrmeta start --insecure (a throwaway single replica)', () => {
  it('forged tokens get 401, the log says tokens do not survive a restart, and they do not', async () => {
    const root = mkdtempSync(join(tmpdir(), 'vrmeta-insecure-'));
    const [httpPort, replicaPort] = await reservePorts(2);
    const http = `127.0.0.1:${httpPort}`;
    const args = ['start', '--insecure', '--replicas', `127.0.0.1:${replicaPort}`, '--http', http, '--data-dir', join(root, 'data')];
    try {
      let replica = spawnCli(args);
      await waitUntil('the insecure replica ready', () => readyz(http), 60_000, replica);
      expect(replica.lines.some((line) => line.includes('do not survive a restart'))).toBe(true);
      await expectForgeriesRefused(http, [DEFAULT_CLUSTER_NAME]);
      const token = await login(http);
      expect(await rootActions(http, token)).toEqual({ create: 200, list: 200 });
      await stopSpawned(replica);
      replica = spawnCli(args);
      await waitUntil('the insecure replica ready again', () => readyz(http), 60_000, replica);
      // A new process, a new random key: the old token is dead.
      expect((await rootActions(http, token)).list).toBe(401);
      expect((await rootActions(http, await login(http))).list).toBe(200);
      await stopSpawned(replica);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('vrmeta start without a secret', () => {
  it('refuses to start (exit 2), naming --cluster-secret, VRMETA_CLUSTER_SECRET and --cluster-secret-file', async () => {
    const root = mkdtempSync(join(tmpdir(), 'vrmeta-nosecret-'));
    try {
      const ports = await reservePorts(4);
      const replicas = `127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}`;
      const common = ['--replica-id', '0', '--replicas', replicas, '--http', `127.0.0.1:${ports[3]}`, '--data-dir', join(root, 'data')];
      for (const extra of [[], ['--insecure']]) {
        const spawned = spawnCli(['start', ...common, ...extra]);
        const exit = await spawned.exited;
        await sleep(20); // the last stderr line may trail the exit event
        expect(exit.code, spawned.lines.join('\n')).toBe(2);
        const message = spawned.lines.join('\n');
        if (extra.length === 0) {
          for (const option of ['--cluster-secret', 'VRMETA_CLUSTER_SECRET', '--cluster-secret-file']) expect(message).toContain(option);
        } else {
          expect(message).toContain('only a single replica may run without a cluster secret');
        }
      }
      // A single replica without --insecure is refused too.
      const single = spawnCli(['start', '--replicas', `127.0.0.1:${ports[0]}`, '--http', `127.0.0.1:${ports[3]}`, '--data-dir', join(root, 'data')]);
      expect((await single.exited).code).toBe(2);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 60_000);
});

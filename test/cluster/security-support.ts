/**
 * What the security cluster tests share: tokens forged from public facts, a replica-port attacker
 * that knows the addresses but not the secret, `vrmeta start` / `vrmeta dev` children that are not
 * harness clusters (an `--insecure` single replica, the dev cluster `npm start` runs), and ports.
 *
 * Every child is a bench/procs.ts child: the leader of its own process group, killed with its group
 * (`vrmeta dev` forks the replicas), on 127.0.0.1 only; ports come from procs too.
 */
import { createHash, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { SignJWT } from 'jose';
import { Command } from '../../src/constants.js';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../src/http/auth.js';
import { tokenKeyOf } from '../../src/node/cluster-secret.js';
import { decodeFrame } from '../../src/transport/frame-decoder.js';
import { clusterIdOf } from '../../src/node/replica-node.js';
import { AuthDirection, authMac, deriveAuthKey, helloMac } from '../../src/transport/replica-auth.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import { buildFrame } from '../../src/vsr/frame.js';
import { ReplicaAuthMode, ReplicaAuthStatus } from '../../src/vsr/header.js';
import { tsKernels } from '../support/wire-fixtures.js';
import { CLI_PATH, HOST, cleanEnv, sleep, spawnChild, stopChild, type ChildHandle, type ExitInfo } from '../../bench/procs.js';

export { HOST };

// ------------------------------------------------------------------------------ forged tokens

export interface GuessedKey {
  readonly name: string;
  readonly key: Uint8Array;
}

const sha256 = (text: string): Uint8Array => new Uint8Array(createHash('sha256').update(text, 'utf8').digest());
const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/**
 * The HS256 keys an attacker can compute from public facts: the old default (SHA-256 of the fixed
 * prefix and the cluster name, what `npm start` used to sign with), its plausible variants, and
 * today's derivation fed with public inputs instead of the secret.
 */
export function publicFactKeys(clusterNames: readonly string[]): GuessedKey[] {
  const keys: GuessedKey[] = [{ name: 'zeros', key: new Uint8Array(32) }];
  for (const name of clusterNames) {
    const cluster = clusterIdOf(name);
    keys.push(
      { name: `old default sha256("vrmeta-jwt\\0insecure-default:${name}")`, key: sha256(`vrmeta-jwt\0insecure-default:${name}`) },
      { name: `sha256("vrmeta-jwt\\0${name}")`, key: sha256(`vrmeta-jwt\0${name}`) },
      { name: `sha256("${name}")`, key: sha256(name) },
      { name: `token KDF of "${name}"`, key: tokenKeyOf(utf8(name), cluster) },
      { name: `token KDF of "insecure-default:${name}"`, key: tokenKeyOf(utf8(`insecure-default:${name}`), cluster) },
    );
  }
  return keys;
}

/** A root token (user 0, created at 0) with every claim a real one has, signed with `key`. */
export async function rootToken(key: Uint8Array): Promise<string> {
  const nowS = Math.floor(Date.now() / 1000);
  return new SignJWT({ user_created_at: 0 })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setJti(randomUUID())
    .setSubject('0')
    .setIssuer(JWT_ISSUER)
    .setAudience(JWT_AUDIENCE)
    .setIssuedAt(nowS)
    .setNotBefore(nowS)
    .setExpirationTime(nowS + 3600)
    .sign(key);
}

/** Status of `POST /users` (creating a user: root's power) and `GET /users` with `token`. */
export async function rootActions(httpAddress: string, token: string): Promise<{ create: number; list: number }> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const create = await fetch(`http://${httpAddress}/users`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ username: `mallory-${randomUUID().slice(0, 8)}`, password: 'mallory-password', status: 'active' }),
    signal: AbortSignal.timeout(10_000),
  });
  await create.arrayBuffer();
  const list = await fetch(`http://${httpAddress}/users`, { headers, signal: AbortSignal.timeout(10_000) });
  await list.arrayBuffer();
  return { create: create.status, list: list.status };
}

export async function login(httpAddress: string, username = 'iggy', password = 'iggy'): Promise<string> {
  const response = await fetch(`http://${httpAddress}/users/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`login on ${httpAddress}: HTTP ${response.status} ${text}`);
  return (JSON.parse(text) as { access_token: { token: string } }).access_token.token;
}

export async function getText(url: string, token: string | null): Promise<{ status: number; text: string }> {
  const response = await fetch(url, { headers: token === null ? {} : { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
  return { status: response.status, text: await response.text() };
}

/** `name{reason="..."} value` lines of a Prometheus text body, by label value. */
export function metricByReason(metrics: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const match of metrics.matchAll(new RegExp(`^${name}\\{[^}]*reason="([a-z_]+)"[^}]*\\} (\\d+)`, 'gm'))) out[match[1]!] = Number(match[2]);
  return out;
}

// ------------------------------------------------------------------------------ replica-port attacker

export type Attack =
  /** Frames without any handshake. */
  | { readonly kind: 'frames_only' }
  /** The handshake in mode none (the unauthenticated mode of old), then frames. */
  | { readonly kind: 'mode_none' }
  /** A psk Hello, then a Finish MACed with a guessed key, then frames. */
  | { readonly kind: 'guessed_key'; readonly secret: Uint8Array };

/**
 * Dials `port` (replica `target`'s) as replica 0 (the lowest index, which every other replica accepts) and tries to get
 * frames in: a StartViewChange for view `view + 100` (on an accepted connection it would drag the
 * cluster into a view change) and a Commit heartbeat. Resolves when the replica closed the socket,
 * or after `timeoutMs` (the socket is then destroyed).
 */
export async function attackReplicaPort(
  port: number,
  target: number,
  clusterName: string,
  view: number,
  attack: Attack,
  timeoutMs = 10_000,
): Promise<{ closedByPeer: boolean }> {
  const cluster = clusterIdOf(clusterName);
  const kernels = tsKernels;
  const frames = Buffer.concat([
    buildFrame(kernels, { command: Command.startViewChange, cluster, view: view + 100, release: 0, replica: 0, group: METADATA_GROUP }),
    buildFrame(kernels, {
      command: Command.commit,
      cluster,
      view: view + 100,
      release: 0,
      replica: 0,
      commitChecksum: 0n,
      timestampMonotonic: 1,
      commit: 0,
      checkpointOp: 0,
      group: METADATA_GROUP,
    }),
  ]);
  const socket = connect({ host: HOST, port });
  const received: Buffer[] = [];
  let closed = false;
  const closedPromise = new Promise<void>((resolve) => socket.once('close', () => {
    closed = true;
    resolve();
  }));
  socket.on('error', () => {});
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  const nonceInitiator = new Uint8Array(32).map((_, index) => (index * 13 + 1) & 0xff);
  // A guessed key MACs its Hello too: the guess is then refused at the first message.
  const guessed = attack.kind === 'guessed_key' ? deriveAuthKey(attack.secret, cluster) : null;
  const hello = (mode: ReplicaAuthMode): Uint8Array => {
    const fields = { cluster, replica: 0, peerReplica: target, nonce: nonceInitiator };
    const mac = guessed === null || mode === ReplicaAuthMode.none ? new Uint8Array(32) : helloMac(guessed, fields);
    return buildFrame(kernels, { command: Command.replicaHello, view: 0, release: 0, mode, mac, ...fields });
  };
  const deadline = Date.now() + timeoutMs;
  const waitBytes = async (count: number): Promise<boolean> => {
    while (Buffer.concat(received).byteLength < count && !closed && Date.now() < deadline) await sleep(10);
    return Buffer.concat(received).byteLength >= count;
  };
  switch (attack.kind) {
    case 'frames_only':
      socket.write(frames);
      break;
    case 'mode_none': {
      // The three messages of the unauthenticated handshake (zero MACs), whatever the Challenge says.
      socket.write(hello(ReplicaAuthMode.none));
      if (!(await waitBytes(256))) break;
      const finish = buildFrame(kernels, { command: Command.replicaFinish, cluster, view: 0, release: 0, replica: 0, mac: new Uint8Array(32), status: ReplicaAuthStatus.ok });
      if (!closed) socket.write(Buffer.concat([finish, frames]));
      break;
    }
    case 'guessed_key': {
      socket.write(hello(ReplicaAuthMode.psk));
      if (!(await waitBytes(256))) break;
      const challenge = decodeFrame(kernels, new Uint8Array(Buffer.concat(received).subarray(0, 256)), { cluster });
      if (!challenge.ok || challenge.header.command !== Command.replicaChallenge) break;
      const key = deriveAuthKey(attack.secret, cluster);
      const mac = authMac(key, {
        direction: AuthDirection.finish,
        mode: ReplicaAuthMode.psk,
        cluster,
        initiator: 0,
        acceptor: challenge.header.replica,
        nonceInitiator,
        nonceAcceptor: challenge.header.nonce,
      });
      const finish = buildFrame(kernels, { command: Command.replicaFinish, cluster, view: 0, release: 0, replica: 0, mac, status: ReplicaAuthStatus.ok });
      socket.write(Buffer.concat([finish, frames]));
      break;
    }
  }
  await Promise.race([closedPromise, sleep(Math.max(0, deadline - Date.now()))]);
  const closedByPeer = closed;
  socket.destroy();
  return { closedByPeer };
}

/** A Hello in mode none from "replica 0" to `target`: refused by every replica (modeMismatch). */
export function modeNoneHello(clusterName: string, target: number): Uint8Array {
  return buildFrame(tsKernels, {
    command: Command.replicaHello,
    cluster: clusterIdOf(clusterName),
    view: 0,
    release: 0,
    replica: 0,
    nonce: new Uint8Array(32).fill(3),
    mode: ReplicaAuthMode.none,
    peerReplica: target,
    mac: new Uint8Array(32),
  });
}

// ------------------------------------------------------------------------------ children

/**
 * Children of this file's tests, killed with their process group by `killAll` (bench/procs.ts
 * tracks them too, and SIGKILLs any left at exit). Only these: a harness cluster of the same
 * test file is not this set's to kill.
 */
const SPAWNED = new Set<ChildHandle>();

/** Every line a child printed is kept (a test asserts a secret is in none of them), up to this many. */
const SPAWNED_LINES_MAX = 200_000;

/** A procs child as the security tests read it: `lines` is every line, stdout and stderr alike. */
export interface Spawned {
  readonly handle: ChildHandle;
  readonly lines: readonly string[];
  readonly exited: Promise<ExitInfo>;
}

/** `node dist/src/node/cli.js ...args` in its own process group, with a clean VRMETA_* environment. */
export function spawnCli(args: readonly string[], env: Readonly<Record<string, string>> = {}): Spawned {
  // A replica also listens for Iggy's binary protocol (default 127.0.0.1:8090): tests never use a
  // fixed port, so a `start` without one binds any free port.
  const fullArgs = args[0] === 'start' && !args.includes('--tcp') ? [...args, '--tcp', '127.0.0.1:0'] : args;
  const handle = spawnChild(`vrmeta ${args[0] ?? ''}`, process.execPath, [CLI_PATH, ...fullArgs], {
    env: cleanEnv(env),
    tailLinesMax: SPAWNED_LINES_MAX,
    stderrPrefix: '',
  });
  SPAWNED.add(handle);
  void handle.exited.then(() => SPAWNED.delete(handle));
  return { handle, lines: handle.tail, exited: handle.exited };
}

/** SIGTERM/SIGINT to the group, SIGKILL after `graceMs`; resolves on exit. */
export async function stopSpawned(spawned: Spawned, signal: 'SIGTERM' | 'SIGINT' | 'SIGKILL' = 'SIGTERM', graceMs = 10_000): Promise<void> {
  await stopChild(spawned.handle, signal, graceMs);
}

export async function killAll(): Promise<void> {
  await Promise.race([Promise.all([...SPAWNED].map((handle) => stopChild(handle, 'SIGKILL'))), sleep(5_000)]);
}

export async function waitUntil<T>(what: string, probe: () => Promise<T | null | false> | T | null | false, timeoutMs: number, spawned?: Spawned): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (spawned !== undefined && spawned.handle.exit !== null) {
      throw new Error(`while waiting for ${what}: the child exited ${JSON.stringify(spawned.handle.exit)}\n${spawned.lines.slice(-40).join('\n')}`);
    }
    try {
      const value = await probe();
      if (value !== null && value !== false) return value;
    } catch (error) {
      last = (error as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what} (${last})${spawned === undefined ? '' : `\n${spawned.lines.slice(-40).join('\n')}`}`);
    }
    await sleep(150);
  }
}

export async function readyz(httpAddress: string): Promise<boolean> {
  try {
    return (await fetch(`http://${httpAddress}/readyz`, { signal: AbortSignal.timeout(2_000) })).status === 200;
  } catch {
    return false;
  }
}

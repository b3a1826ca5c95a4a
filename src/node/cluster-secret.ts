/**
 * The cluster secret: where it comes from, and the keys derived from it.
 *
 * Every key that protects the cluster is derived from one pre-shared secret, never from public
 * facts (the cluster name, the defaults, the version). Before this existed, a cluster started
 * without `--cluster-secret` signed its access tokens with SHA-256 of a fixed prefix and the
 * cluster name (default `vrmeta`), so anyone who could reach the HTTP port could mint a root token,
 * and its replica port accepted anyone who spoke the handshake. So there is no such mode now:
 *
 *   - `vrmeta start` needs a secret (`--cluster-secret`, `VRMETA_CLUSTER_SECRET`, or a file named by
 *     `--cluster-secret-file` / `VRMETA_CLUSTER_SECRET_FILE`) or refuses to start; `--insecure` is
 *     accepted for a throwaway single replica only, and even then the keys come from random bytes
 *     drawn at process start (tokens do not survive a restart).
 *   - `vrmeta dev` (what `npm start` runs) creates `<data-dir>/cluster.secret` once (mode 0600,
 *     O_EXCL, 32 random bytes as hex) and hands its path to every replica; the next run reuses it.
 *
 * Keys, each from HKDF-SHA256 with its own salt (domain separation: no key can be computed from
 * another, and a MAC seen on the replica port says nothing about the token key):
 *   token key = HKDF(ikm = secret, salt = "vrmeta/access-token/v1", info = "hs256 key" || cluster u128 LE, 32)
 *   MAC key   = HKDF(ikm = secret, salt = "vrmeta/replica-auth/v1", info = "mac key"   || cluster u128 LE, 32)
 * (the MAC key is derived in src/transport/replica-auth.ts).
 *
 * The secret is never logged, rendered or persisted by the server: it lives in the config object
 * and in the derived keys only. A file is preferred to the flag: a command line is readable by
 * every user of the machine (`ps`, /proc/PID/cmdline).
 */
import { closeSync, constants, fstatSync, fsyncSync, openSync, readSync, writeSync } from 'node:fs';
import { hkdfSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { assert } from '../stdx/assert.js';
import { writeU128 } from '../vsr/header.js';

/** A secret shorter than this is refused: it must carry at least 128 bits even as hex text. */
export const CLUSTER_SECRET_LENGTH_MIN = 32;
/** A secret file larger than this is not a secret file (refused before it is read). */
export const CLUSTER_SECRET_FILE_SIZE_MAX = 4096;
/** The dev cluster's secret file, under its data directory. */
export const DEV_CLUSTER_SECRET_FILE = 'cluster.secret';
/** Random bytes of a generated secret (written as 64 hex characters). */
export const GENERATED_SECRET_BYTES = 32;

export const TOKEN_KEY_SALT = 'vrmeta/access-token/v1';
const TOKEN_KEY_INFO = 'hs256 key';
/** HS256 keys shorter than the hash output weaken it (RFC 7518 §3.2). */
export const TOKEN_KEY_SIZE = 32;

/** Why a secret file was refused; the message names the file and the remedy, never the content. */
export class ClusterSecretError extends Error {
  override readonly name = 'ClusterSecretError';
}

/**
 * Reads a secret file: a regular file, not readable or writable by group or others (a secret
 * others can read is not a secret), at most CLUSTER_SECRET_FILE_SIZE_MAX bytes, whose content
 * without surrounding whitespace is at least CLUSTER_SECRET_LENGTH_MIN characters.
 */
export function readClusterSecretFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    throw new ClusterSecretError(`cannot open ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    // fstat of the descriptor we read: no window between the check and the read.
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new ClusterSecretError(`${path} is not a regular file`);
    if ((stat.mode & 0o077) !== 0) {
      throw new ClusterSecretError(
        `${path} is accessible by group or others (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')}); run chmod 600 ${path}`,
      );
    }
    if (stat.size > CLUSTER_SECRET_FILE_SIZE_MAX) {
      throw new ClusterSecretError(`${path} is ${stat.size} bytes; a secret file holds at most ${CLUSTER_SECRET_FILE_SIZE_MAX}`);
    }
    const buffer = Buffer.alloc(CLUSTER_SECRET_FILE_SIZE_MAX + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.byteLength - length, null);
      if (read === 0) break;
      length += read;
      if (length > CLUSTER_SECRET_FILE_SIZE_MAX) {
        throw new ClusterSecretError(`${path} grew past ${CLUSTER_SECRET_FILE_SIZE_MAX} bytes while being read`);
      }
    }
    const secret = buffer.subarray(0, length).toString('utf8').trim();
    buffer.fill(0);
    if (secret.length < CLUSTER_SECRET_LENGTH_MIN) {
      throw new ClusterSecretError(`${path} holds ${secret.length} characters; a cluster secret needs at least ${CLUSTER_SECRET_LENGTH_MIN}`);
    }
    return secret;
  } finally {
    closeSync(fd);
  }
}

export interface DevSecretFile {
  readonly path: string;
  /** True when this call created the file, false when an earlier run's file was reused. */
  readonly created: boolean;
}

/**
 * `<dataDir>/cluster.secret`: created once with O_EXCL and mode 0600 (32 random bytes as hex),
 * fsynced, then reused on every later run (so tokens issued before a restart stay valid). A file
 * left by another process is read back through `readClusterSecretFile`, whose checks apply.
 */
export function ensureDevClusterSecret(dataDir: string): DevSecretFile {
  const path = join(dataDir, DEV_CLUSTER_SECRET_FILE);
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    readClusterSecretFile(path);
    return { path, created: false };
  }
  try {
    const text = Buffer.from(`${randomBytes(GENERATED_SECRET_BYTES).toString('hex')}\n`, 'utf8');
    let written = 0;
    while (written < text.byteLength) written += writeSync(fd, text, written, text.byteLength - written);
    text.fill(0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return { path, created: true };
}

/** A secret for one process only (`--insecure`): random, never written anywhere. */
export function processOnlySecret(): Uint8Array {
  return new Uint8Array(randomBytes(GENERATED_SECRET_BYTES));
}

/** The HS256 key of access tokens: every replica holding `secret` derives the same one. */
export function tokenKeyOf(secret: Uint8Array, cluster: bigint): Uint8Array {
  assert(secret.byteLength > 0, 'token key: the cluster secret is not empty');
  const info = new Uint8Array(TOKEN_KEY_INFO.length + 16);
  info.set(new TextEncoder().encode(TOKEN_KEY_INFO), 0);
  writeU128(info, TOKEN_KEY_INFO.length, cluster);
  const key = new Uint8Array(hkdfSync('sha256', secret, new TextEncoder().encode(TOKEN_KEY_SALT), info, TOKEN_KEY_SIZE));
  assert(key.byteLength === TOKEN_KEY_SIZE);
  return key;
}

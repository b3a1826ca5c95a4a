/**
 * The cluster secret: where `vrmeta start` takes it from, what it refuses, the dev cluster's secret
 * file, and the keys derived from it (src/node/cluster-secret.ts, src/node/config.ts).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLUSTER_SECRET_LENGTH_MIN,
  DEV_CLUSTER_SECRET_FILE,
  ensureDevClusterSecret,
  readClusterSecretFile,
  tokenKeyOf,
} from '../../src/node/cluster-secret.js';
import { ConfigError, readConfigEnv, resolveConfig, type ConfigKey } from '../../src/node/config.js';
import { clusterIdOf } from '../../src/node/replica-node.js';
import { deriveAuthKey } from '../../src/transport/replica-auth.js';

const SECRET = 'a-cluster-secret-of-forty-characters-123';
const OTHER = 'another-cluster-secret-of-forty-chars-99';
const THREE = { replicas: '127.0.0.1:9090,127.0.0.1:9091,127.0.0.1:9092' };

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'vrmeta-secret-'));
  dirs.push(dir);
  return dir;
}

function secretFile(content: string, mode = 0o600): string {
  const path = join(tempDir(), 'secret');
  writeFileSync(path, content, { mode });
  chmodSync(path, mode); // the umask may have cleared bits the test asks for
  return path;
}

function refusal(...layers: Partial<Record<ConfigKey, unknown>>[]): { key: string; message: string } {
  try {
    resolveConfig(...layers);
  } catch (error) {
    if (error instanceof ConfigError) return { key: error.key, message: error.message };
    throw error;
  }
  throw new Error('the configuration was accepted');
}

describe('vrmeta start: the cluster secret', () => {
  it('no secret: refused, naming --cluster-secret, VRMETA_CLUSTER_SECRET and the secret file options', () => {
    for (const layers of [[{}], [THREE]]) {
      const { key, message } = refusal(...layers);
      expect(key).toBe('cluster_secret');
      for (const option of ['--cluster-secret', 'VRMETA_CLUSTER_SECRET', '--cluster-secret-file', 'VRMETA_CLUSTER_SECRET_FILE', '--insecure']) {
        expect(message).toContain(option);
      }
    }
  });

  it('--insecure runs one replica without a secret, and never a cluster', () => {
    const config = resolveConfig({ insecure: true });
    expect(config).toMatchObject({ clusterSecret: null, clusterSecretSource: 'insecure', insecure: true });
    expect(refusal(THREE, { insecure: true })).toMatchObject({ key: 'insecure', message: expect.stringContaining('single replica') });
    // A secret and --insecure contradict each other.
    expect(refusal({ cluster_secret: SECRET, insecure: true })).toMatchObject({ key: 'insecure' });
    expect(resolveConfig(readConfigEnv({ VRMETA_INSECURE: 'true' }))).toMatchObject({ insecure: true });
  });

  it('a secret from the flag, the environment or a file; shorter than the minimum is refused', () => {
    expect(resolveConfig(THREE, { cluster_secret: SECRET })).toMatchObject({ clusterSecret: SECRET, clusterSecretSource: 'cluster_secret' });
    expect(resolveConfig(THREE, readConfigEnv({ VRMETA_CLUSTER_SECRET: SECRET }))).toMatchObject({ clusterSecret: SECRET });
    const path = secretFile(`${SECRET}\n`);
    expect(resolveConfig(THREE, readConfigEnv({ VRMETA_CLUSTER_SECRET_FILE: path }))).toMatchObject({
      clusterSecret: SECRET,
      clusterSecretSource: 'cluster_secret_file',
    });
    expect(refusal({ cluster_secret: 'x'.repeat(CLUSTER_SECRET_LENGTH_MIN - 1) })).toMatchObject({ key: 'cluster_secret' });
    expect(refusal({ cluster_secret_file: secretFile('short\n') })).toMatchObject({ key: 'cluster_secret_file', message: expect.stringContaining('at least') });
  });

  it('precedence: the highest layer that names a secret wins; one layer naming both is refused', () => {
    const path = secretFile(OTHER);
    // flag (file) > environment (secret)
    expect(resolveConfig(THREE, { cluster_secret: SECRET }, { cluster_secret_file: path }).clusterSecret).toBe(OTHER);
    // flag (secret) > TOML file (file)
    expect(resolveConfig(THREE, { cluster_secret_file: path }, {}, { cluster_secret: SECRET }).clusterSecret).toBe(SECRET);
    expect(refusal(THREE, { cluster_secret: SECRET, cluster_secret_file: path })).toMatchObject({ key: 'cluster_secret', message: expect.stringContaining('not both') });
  });

  it('a secret file readable or writable by group or others is refused with the remedy', () => {
    for (const mode of [0o640, 0o604, 0o620, 0o644]) {
      const path = secretFile(SECRET, mode);
      const { key, message } = refusal({ cluster_secret_file: path });
      expect(key).toBe('cluster_secret_file');
      expect(message).toContain(`chmod 600 ${path}`);
      expect(message).not.toContain(SECRET);
    }
    expect(readClusterSecretFile(secretFile(SECRET, 0o400))).toBe(SECRET);
  });

  it('a secret file that is a symlink, a directory, missing or oversized is refused', () => {
    const target = secretFile(SECRET);
    const link = join(tempDir(), 'link');
    symlinkSync(target, link);
    expect(() => readClusterSecretFile(link)).toThrow(/cannot open/);
    expect(() => readClusterSecretFile(tempDir())).toThrow(/not a regular file|cannot open/);
    expect(() => readClusterSecretFile(join(tempDir(), 'missing'))).toThrow(/ENOENT/);
    expect(() => readClusterSecretFile(secretFile('x'.repeat(5000)))).toThrow(/at most 4096/);
  });
});

describe('vrmeta dev: the data directory secret file', () => {
  it('is created once with O_EXCL and mode 0600, random, and reused on the next run', () => {
    const dir = tempDir();
    const first = ensureDevClusterSecret(dir);
    expect(first).toEqual({ path: join(dir, DEV_CLUSTER_SECRET_FILE), created: true });
    expect(statSync(first.path).mode & 0o777).toBe(0o600);
    const content = readFileSync(first.path, 'utf8');
    expect(content).toMatch(/^[0-9a-f]{64}\n$/);
    expect(ensureDevClusterSecret(dir)).toEqual({ path: first.path, created: false });
    expect(readFileSync(first.path, 'utf8')).toBe(content);
    // Another data directory gets another secret.
    expect(readFileSync(ensureDevClusterSecret(tempDir()).path, 'utf8')).not.toBe(content);
  });

  it('an existing file others can read is refused, not silently reused', () => {
    const dir = tempDir();
    const path = join(dir, DEV_CLUSTER_SECRET_FILE);
    writeFileSync(path, SECRET);
    chmodSync(path, 0o644);
    expect(() => ensureDevClusterSecret(dir)).toThrow(/chmod 600/);
  });
});

describe('keys derived from the secret', () => {
  const cluster = clusterIdOf('vrmeta');
  const secret = new TextEncoder().encode(SECRET);

  it('the token key is a function of the secret and the cluster, 32 bytes', () => {
    const key = tokenKeyOf(secret, cluster);
    expect(key.byteLength).toBe(32);
    expect(tokenKeyOf(secret, cluster)).toEqual(key);
    expect(tokenKeyOf(new TextEncoder().encode(OTHER), cluster)).not.toEqual(key);
    expect(tokenKeyOf(secret, clusterIdOf('another'))).not.toEqual(key);
  });

  it('the token key is none of the keys public facts give (the old default, the name, the secret hashed)', () => {
    const key = Buffer.from(tokenKeyOf(secret, cluster)).toString('hex');
    const sha = (text: string) => createHash('sha256').update(text).digest('hex');
    for (const guess of [sha('vrmeta-jwt\0insecure-default:vrmeta'), sha('vrmeta-jwt\0vrmeta'), sha(`vrmeta-jwt\0${SECRET}`), sha(SECRET)]) {
      expect(key).not.toBe(guess);
    }
  });

  it('the token key and the replica MAC key are domain-separated', () => {
    const token = Buffer.from(tokenKeyOf(secret, cluster)).toString('hex');
    const mac = deriveAuthKey(secret, cluster).export().toString('hex');
    expect(mac).toHaveLength(64);
    expect(token).not.toBe(mac);
  });
});

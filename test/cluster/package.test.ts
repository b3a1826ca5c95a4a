/**
 * The packed package runs: `npm pack` (what `npm publish` ships), unpacked as an installation
 * with only the production dependencies (each linked from this checkout's node_modules: no
 * network, no registry), then its `bin` runs `--help`, `start` (answers /ping, then its process
 * group is killed) and `bench kernels --smoke`. A file the CLI imports that `files` leaves out, or
 * an import of a devDependency, fails here.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnChild, stopChild, waitFor } from '../../bench/procs.js';
import { REPO_ROOT, assertDistFresh } from './harness.js';

let root: string;
let bin: string;

/** The production closure from the lockfile: every top-level package not marked dev. */
function productionPackages(): string[] {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  return Object.entries(lock.packages)
    .filter(([path, entry]) => path.startsWith('node_modules/') && !path.slice('node_modules/'.length).includes('node_modules/') && entry.dev !== true)
    .map(([path]) => path.slice('node_modules/'.length));
}

/** The bound HTTP address of a listening record (null for any other line). */
function boundHttp(line: string): string | null {
  try {
    const record = JSON.parse(line) as { http?: unknown };
    return typeof record.http === 'string' && !record.http.endsWith(':0') ? record.http : null;
  } catch {
    return null; // not a JSON record
  }
}

beforeAll(() => {
  assertDistFresh();
  root = mkdtempSync(join(tmpdir(), 'vrmeta-pack-'));
  const packed = spawnSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], { cwd: REPO_ROOT, encoding: 'utf8' });
  expect(packed.status, packed.stderr).toBe(0);
  const filename = (JSON.parse(packed.stdout) as { filename: string }[])[0]?.filename;
  expect(filename).toMatch(/^vrmeta-.*\.tgz$/);
  const modules = join(root, 'app', 'node_modules');
  const installed = join(modules, 'vrmeta');
  mkdirSync(installed, { recursive: true });
  const untar = spawnSync('tar', ['-xzf', join(root, filename!), '-C', installed, '--strip-components', '1'], { encoding: 'utf8' });
  expect(untar.status, untar.stderr).toBe(0);
  for (const name of productionPackages()) {
    if (name.includes('/')) mkdirSync(join(modules, name.split('/')[0]!), { recursive: true });
    try {
      symlinkSync(join(REPO_ROOT, 'node_modules', name), join(modules, name), 'dir');
    } catch (error) {
      // An optional platform package npm skipped on this machine.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { bin: Record<string, string> };
  bin = join(installed, manifest.bin['vrmeta']!);
}, 60_000);

afterAll(() => {
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [bin, ...args], { cwd: join(root, 'app'), encoding: 'utf8', timeout: 60_000, env: { ...process.env, VRMETA_KERNELS: '' } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('the packed package', () => {
  it('ships the dist files the CLI imports, and no source or tests', () => {
    const files = readdirSync(join(root, 'app', 'node_modules', 'vrmeta', 'dist'));
    expect(files.sort()).toEqual(['bench', 'bundle', 'src']);
    // The bin is the bundle (scripts/bundle.mjs); the tests below run it.
    expect(readdirSync(join(root, 'app', 'node_modules', 'vrmeta', 'dist', 'bundle'))).toContain('cli.js');
    expect(readdirSync(join(root, 'app', 'node_modules', 'vrmeta', 'dist', 'bench'))).toContain('cli.js');
  });

  it('runs vrmeta --help', () => {
    const result = run(['--help']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^Usage: vrmeta/m);
  });

  it('runs vrmeta bench kernels --smoke', () => {
    const result = run(['bench', 'kernels', '--smoke', '--time-ms', '2', '--json']);
    expect(result.status, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as { rows: { suite: string }[] };
    expect(report.rows.length).toBeGreaterThan(0);
  }, 60_000);

  it('runs vrmeta start, which answers /ping, and stops with its process group', async () => {
    const child = spawnChild(
      'packed vrmeta start',
      process.execPath,
      [bin, 'start', '--insecure', '--replicas', '127.0.0.1:0', '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--data-dir', join(root, 'data')],
      { cwd: join(root, 'app'), keep: (line) => boundHttp(line) !== null },
    );
    try {
      // The bound HTTP address, from the structured field of the listening record.
      const http = await waitFor('the packed vrmeta start listening', () => boundHttp(child.kept[0]?.line ?? ''), 60_000, [child]);
      const response = await fetch(`http://${http}/ping`);
      expect(response.status).toBe(200);
    } finally {
      await stopChild(child, 'SIGKILL');
    }
  }, 60_000);
});

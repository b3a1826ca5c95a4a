/**
 * bench/procs.ts, the one process-management module of the benches and the cluster tests: whole
 * process groups die with their leader, reserved ports are checked again, tails stay bounded,
 * temp roots are removed (or kept on request) and counted, and an exiting process SIGKILLs what is
 * left. Children are small `node -e` scripts on no port at all.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  REPO_ROOT,
  cleanupAll,
  consecutiveFreePorts,
  leftovers,
  makeTempRoot,
  removeTempRoot,
  reservePorts,
  spawnChild,
  stopChild,
  waitFor,
  VrmetaCluster,
} from '../../bench/procs.js';

/** Grandchildren a failed test may leave: killed in afterEach. */
const strays: number[] = [];

afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
});

afterAll(async () => {
  await cleanupAll();
});

/** A pid is gone once signalling it fails or it is a zombie nobody reaped yet (a container's pid 1 may not reap). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A node child that forks a grandchild (same process group), prints its pid, and waits. */
const FORKING_PARENT = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
console.log(JSON.stringify({ grandchild: grandchild.pid }));
setInterval(() => {}, 1000);
`;

describe('bench/procs: children', () => {
  it('stopping a child kills its whole process group: a grandchild it forked dies with it', async () => {
    const child = spawnChild('forking parent', process.execPath, ['-e', FORKING_PARENT], { keep: (line) => line.includes('grandchild') });
    const grandchild = await waitFor('the grandchild pid', () => (child.kept[0] === undefined ? null : (JSON.parse(child.kept[0].line) as { grandchild: number }).grandchild), 20_000, [child]);
    strays.push(grandchild);
    expect(leftovers().children).toBe(1);
    expect(gone(grandchild)).toBe(false);

    const exit = await stopChild(child, 'SIGTERM');
    expect(exit.signal).toBe('SIGTERM');
    expect(child.expectedExit).toBe(true);
    // The group's SIGTERM reached the grandchild too (a kill of the leader alone leaves it running).
    await waitFor('the grandchild gone', () => gone(grandchild), 10_000);
    expect(leftovers().children).toBe(0);
  });

  it('keeps a bounded tail without skipped lines, while the log file gets every line', async () => {
    const root = makeTempRoot('procs-test-');
    const logFile = join(root, 'child.log');
    const script = `for (let i = 0; i < 1000; i++) console.log(i % 2 === 0 ? 'line ' + i : 'skip ' + i); console.error('to stderr');`;
    const child = spawnChild('chatty', process.execPath, ['-e', script], { logFile, tailLinesMax: 10, tailSkip: (line) => line.startsWith('skip'), stderrPrefix: '[err] ' });
    const exit = await child.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    // The last lines may be read after the exit; stdout and stderr interleave in no fixed order.
    await waitFor('the tail complete', () => child.tail.includes('line 998'), 10_000);
    expect(child.tail).toHaveLength(10);
    expect(child.tail.some((line) => line.startsWith('skip'))).toBe(false);
    const printed = child.tail.filter((line) => line.startsWith('line '));
    expect(printed.length).toBeGreaterThanOrEqual(7);
    expect(printed).toEqual(Array.from({ length: printed.length }, (_, index) => `line ${998 - 2 * (printed.length - 1 - index)}`));
    const logged = await waitFor('the log file complete', () => {
      const lines = readFileSync(logFile, 'utf8').split('\n');
      return lines.includes('[err] to stderr') && lines.includes('skip 999') ? lines : null;
    }, 10_000);
    expect(logged.filter((line) => /^(line|skip) \d+$/.test(line))).toHaveLength(1000);
    removeTempRoot(root);
  });

  it('writes the command line to the log file without the values of secret-bearing flags', async () => {
    const root = makeTempRoot('procs-test-');
    const logFile = join(root, 'child.log');
    const args = ['-e', '', '--cluster-secret', 'hunter2-secret-value', '--root-password=hunter2-password', '--cluster-secret-file', '/x/cluster.secret'];
    const child = spawnChild('quiet', process.execPath, args, { logFile });
    await child.exited;
    const header = await waitFor('the log header', () => readFileSync(logFile, 'utf8').split('\n')[0] || null, 10_000);
    expect(header).toContain('--cluster-secret <redacted> --root-password=<redacted> --cluster-secret-file /x/cluster.secret');
    expect(header.includes('hunter2')).toBe(false);
    removeTempRoot(root);
  });

  it('refuses a tail bound that is not a positive integer within the limit', () => {
    expect(() => spawnChild('bad', process.execPath, ['-e', ''], { tailLinesMax: 0 })).toThrow(/tailLinesMax must be an integer in 1\.\.1000000, got 0/);
    expect(() => spawnChild('bad', process.execPath, ['-e', ''], { tailLinesMax: 2_000_000 })).toThrow(/tailLinesMax/);
    expect(leftovers().children).toBe(0);
  });
});

describe('bench/procs: ports', () => {
  it('reserves distinct loopback ports that are free after the batch is released', async () => {
    const ports = await reservePorts(6);
    expect(new Set(ports).size).toBe(6);
    for (const port of ports) expect(await bindable(port)).toBe(true);
  });

  it('redraws a batch when a port was taken between the reservation and its re-check', async () => {
    const seen: number[] = [];
    const ports = await reservePorts(3, async (port) => {
      seen.push(port);
      // Someone took the first batch's first port in between: only that check fails.
      return seen.length !== 1;
    });
    expect(seen).toHaveLength(6);
    expect(ports).toEqual(seen.slice(3));
    await expect(reservePorts(2, async () => false)).rejects.toThrow('could not reserve 2 free ports on 127.0.0.1');
  });

  it('finds consecutive free ports outside the ones to avoid', async () => {
    const base = await consecutiveFreePorts(3);
    for (let index = 0; index < 3; index++) expect(await bindable(base + index)).toBe(true);
    const other = await consecutiveFreePorts(3, [base, base + 1, base + 2]);
    expect([other, other + 1, other + 2].some((port) => port >= base && port <= base + 2)).toBe(false);
  });
});

describe('bench/procs: clusters', () => {
  it('a cluster whose replica dies while booting is stopped and its data root removed', async () => {
    const scripts = makeTempRoot('procs-test-');
    const cliPath = join(scripts, 'dies.js');
    writeFileSync(cliPath, 'process.exit(3);\n');
    await expect(VrmetaCluster.start({ kernels: 'ts', replicaCount: 2, cliPath, formTimeoutMs: 20_000, nodeArgs: [] })).rejects.toThrow(/while waiting for vrmeta replica \d \/readyz: vrmeta replica \d exited/);
    expect(leftovers()).toEqual({ children: 0, tempRoots: [scripts] });
    removeTempRoot(scripts);
  });
});

describe('bench/procs: temp roots', () => {
  it('counts temp roots in leftovers and removes them, unless their keep variable is 1', () => {
    const removed = makeTempRoot('procs-test-');
    expect(leftovers().tempRoots).toContain(removed);
    removeTempRoot(removed);
    expect(existsSync(removed)).toBe(false);
    expect(leftovers().tempRoots).not.toContain(removed);

    const variable = 'VRMETA_PROCS_TEST_KEEP';
    const kept = makeTempRoot('procs-test-', variable);
    process.env[variable] = '1';
    try {
      removeTempRoot(kept);
      expect(existsSync(kept)).toBe(true);
      expect(leftovers().tempRoots).not.toContain(kept);
    } finally {
      delete process.env[variable];
      rmSync(kept, { recursive: true, force: true });
    }
  });

  it('SIGKILLs every child group and removes every temp root when the process exits', async () => {
    // A separate node process using the built module (dist/), which exits with a child and a root left.
    const script = `
      const procs = await import(${JSON.stringify(join(REPO_ROOT, 'dist', 'bench', 'procs.js'))});
      const root = procs.makeTempRoot('procs-exit-test-');
      const child = procs.spawnChild('orphan', process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
      console.log(JSON.stringify({ pid: child.pid, root }));
      process.exit(0);
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    const { pid, root } = JSON.parse(result.stdout.trim()) as { pid: number; root: string };
    strays.push(pid);
    expect(existsSync(root)).toBe(false);
    await waitFor('the orphan gone', () => gone(pid), 10_000);
  });
});

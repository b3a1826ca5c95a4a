/**
 * The cluster harness runs its replicas through bench/procs.ts, the process module the benches
 * use: each replica leads its own process group, procs' `leftovers()` counts it and the cluster's
 * temp root, the in-memory log leaves HTTP access lines out (the log file has them), and
 * `stopAll` leaves nothing behind, or keeps the root when VRMETA_CLUSTER_KEEP=1.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { leftovers } from '../../bench/procs.js';
import { Cluster } from './harness.js';

let cluster: Cluster | null = null;

afterEach(async () => {
  await cluster?.stopAll();
  if (cluster !== null) rmSync(cluster.root, { recursive: true, force: true });
  cluster = null;
});

/** The process group of `pid`, from /proc/<pid>/stat (field 5, after the command name). */
function processGroupOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

it('replicas are procs children, each leading its own process group; stopAll leaves no child and no directory', async () => {
  cluster = await Cluster.start({ replicaCount: 1 });
  const pid = cluster.pid(0);
  expect(pid).not.toBeNull();
  expect(processGroupOf(pid!)).toBe(pid);
  expect(leftovers()).toEqual({ children: 1, tempRoots: [cluster.root] });

  // Requests are logged to the file; the lines kept in memory leave them out.
  await cluster.status(0);
  await cluster.explain(() =>
    cluster!.waitFor('the access lines in the log file', () => readFileSync(`${cluster!.root}/replica-0.log`, 'utf8').includes('"msg":"request completed"'), 10_000),
  );
  expect(cluster.lines(0).length).toBeGreaterThan(0);
  expect(cluster.lines(0).some((line) => line.includes('"msg":"request completed"') || line.includes('"msg":"incoming request"'))).toBe(false);

  await cluster.kill9(0);
  expect(cluster.pid(0)).toBeNull();
  expect(leftovers().children).toBe(0);
  await cluster.stopAll();
  expect(existsSync(cluster.root)).toBe(false);
  expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
}, 90_000);

it('VRMETA_CLUSTER_KEEP=1 keeps the temp root (with every log) for a post-mortem', async () => {
  cluster = await Cluster.start({ replicaCount: 1 });
  process.env['VRMETA_CLUSTER_KEEP'] = '1';
  try {
    await cluster.stopAll();
  } finally {
    delete process.env['VRMETA_CLUSTER_KEEP'];
  }
  expect(existsSync(`${cluster.root}/replica-0.log`)).toBe(true);
  expect(leftovers()).toEqual({ children: 0, tempRoots: [] });
}, 90_000);

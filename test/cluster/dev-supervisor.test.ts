/**
 * `npm start` (`vrmeta dev`) supervises its replicas, on real processes: a replica killed with
 * kill -9 is restarted (a new pid, the same command line) while the other two keep serving;
 * writes made while it is down commit, and it has them once it is ready again; SIGINT to the dev
 * process alone stops every replica and leaves no process behind.
 *
 * Replica pids come from /proc (the dev process's children, told apart by `--replica-id` on
 * their command lines), so the test never kills a process it did not identify; the dev
 * process's own `started (pid N)` lines must agree. While the replica is down the dev process
 * is paused (SIGSTOP), so the writes cannot race its restart: "committed while it was down" is
 * then a fact, not a bet on how fast a restart is.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consecutiveFreePorts, makeTempRoot, removeTempRoot } from '../../bench/procs.js';
import { VrmetaClient } from '../../src/client/client.js';
import { assertDistFresh } from './harness.js';
import { killAll, login, readyz, spawnCli, waitUntil, type Spawned } from './security-support.js';

const REPLICA_COUNT = 3;
const STREAMS_WHILE_DOWN = 5;
const WAIT_MS = 60_000;

afterAll(async () => {
  await killAll();
});

interface ProcInfo {
  readonly state: string;
  readonly ppid: number;
  readonly cmdline: readonly string[];
}

/** What /proc says of `pid`, or null once it is gone. A zombie is gone: it runs nothing. */
function procInfo(pid: number): ProcInfo | null {
  let stat: string;
  let cmdline: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return null;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
  const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (state === 'Z' || state === 'X') return null;
  const args = cmdline.split('\0').filter((arg) => arg !== '');
  return { state: state!, ppid: Number(ppid), cmdline: args };
}

/** Every pid the dev process reported for replica `index`, in order. */
function startedPids(dev: Spawned, index: number): number[] {
  const pattern = new RegExp(`^\\[replica ${index}\\] started \\(pid (\\d+)`);
  return dev.lines.flatMap((line) => {
    const match = pattern.exec(line);
    return match === null ? [] : [Number(match[1])];
  });
}

/**
 * Replica `index`'s live process: the dev process's child (found in /proc, whatever the dev
 * process prints) whose command line says `--replica-id index`; null while there is none.
 */
function replicaProcess(dev: Spawned, index: number): { pid: number; info: ProcInfo } | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = procInfo(Number(entry));
    if (info === null || info.ppid !== dev.handle.pid) continue;
    const flag = info.cmdline.indexOf('--replica-id');
    if (flag >= 0 && info.cmdline[flag + 1] === String(index)) return { pid: Number(entry), info };
  }
  return null;
}

/** True when no process is left in the dev process's group (it and every replica it forked). */
function groupEmpty(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

describe('npm start (vrmeta dev): a replica that dies is restarted while the others serve', () => {
  let root: string;
  let httpBase: number;
  let dev: Spawned;
  const http = (index: number) => `127.0.0.1:${httpBase + index}`;

  beforeAll(async () => {
    assertDistFresh();
    root = makeTempRoot('vrmeta-dev-supervisor-', 'VRMETA_CLUSTER_KEEP');
    httpBase = await consecutiveFreePorts(REPLICA_COUNT);
    const taken = [0, 1, 2].map((index) => httpBase + index);
    const replicaBase = await consecutiveFreePorts(REPLICA_COUNT, taken);
    taken.push(...[0, 1, 2].map((index) => replicaBase + index));
    const tcpBase = await consecutiveFreePorts(REPLICA_COUNT, taken);
    dev = spawnCli([
      'dev',
      '--replicas', String(REPLICA_COUNT),
      '--data-dir', join(root, 'data'),
      '--http-port', String(httpBase),
      '--replica-port', String(replicaBase),
      '--tcp-port', String(tcpBase),
      '--log-format', 'json',
      // Little to print while the dev process is paused: its replicas write into its pipes.
      '--log-level', 'warn',
    ]);
    const allReady = async () =>
      (await Promise.all([0, 1, 2].map((index) => readyz(http(index))))).every(Boolean);
    await waitUntil('every dev replica ready', allReady, WAIT_MS, dev);
  }, 90_000);

  afterAll(async () => {
    if (dev !== undefined && dev.handle.exit === null) process.kill(dev.handle.pid, 'SIGCONT');
    await killAll();
    removeTempRoot(root);
  });

  it('kill -9 a replica: writes commit while it is down, it is restarted and catches up; '
    + 'SIGINT stops every replica', async () => {
    const token = await login(http(0));
    const client = (index: number) => new VrmetaClient({ baseUrl: `http://${http(index)}`, token });
    const primary = (await client(0).getClusterStatus()).primary;
    const victim = (primary + 1) % REPLICA_COUNT;
    const before = await waitUntil('every replica pid', () => {
      const found = [0, 1, 2].map((index) => replicaProcess(dev, index));
      return found.every((entry) => entry !== null) ? found.map((entry) => entry!) : null;
    }, WAIT_MS, dev);
    const oldPid = before[victim]!.pid;

    process.kill(dev.handle.pid, 'SIGSTOP');
    process.kill(oldPid, 'SIGKILL');
    await waitUntil('the killed replica gone', () => procInfo(oldPid) === null, WAIT_MS);
    const names = Array.from({ length: STREAMS_WHILE_DOWN }, (_, index) => `while-down-${index}`);
    for (const name of names) expect((await client(primary).createStream(name)).name).toBe(name);
    expect(await readyz(http(victim))).toBe(false);
    // Paused, not dead.
    expect(procInfo(dev.handle.pid)?.state).toBe('T');
    process.kill(dev.handle.pid, 'SIGCONT');

    const restarted = await waitUntil('the killed replica restarted', () => {
      const entry = replicaProcess(dev, victim);
      return entry !== null && entry.pid !== oldPid ? entry : null;
    }, WAIT_MS, dev);
    // Same arguments: same ports, same data directory, same secret file.
    expect(restarted.info.cmdline).toEqual(before[victim]!.info.cmdline);
    await waitUntil('the restarted replica ready', () => readyz(http(victim)), WAIT_MS, dev);
    await waitUntil('the restarted replica has every write made while it was down', async () => {
      const present = new Set((await client(victim).getStreams()).map((stream) => stream.name));
      return names.every((name) => present.has(name));
    }, WAIT_MS, dev);
    expect(dev.handle.exit).toBeNull();
    // Only the killed replica was restarted, once; the others kept their processes throughout,
    // and the dev process named every pid it started.
    for (const index of [0, 1, 2].filter((index) => index !== victim)) {
      expect(replicaProcess(dev, index)?.pid).toBe(before[index]!.pid);
    }
    expect([0, 1, 2].map((index) => startedPids(dev, index))).toEqual([0, 1, 2].map((index) =>
      index === victim ? [oldPid, restarted.pid] : [before[index]!.pid]));
    expect(dev.lines.some((line) =>
      line.startsWith(`[replica ${victim}] exited (SIGKILL, pid ${oldPid},`))).toBe(true);

    // SIGINT to the dev process alone (not its group): it must stop its replicas itself.
    const everyPid = [...before.map((entry) => entry.pid), restarted.pid];
    process.kill(dev.handle.pid, 'SIGINT');
    const exit = await waitUntil('the dev process exited', () => dev.handle.exit, WAIT_MS);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(everyPid.filter((pid) => procInfo(pid) !== null)).toEqual([]);
    expect(groupEmpty(dev.handle.pid)).toBe(true);
    expect(dev.lines.filter((line) => /^\[replica \d\] stopped \(/.test(line)))
      .toHaveLength(REPLICA_COUNT);
  }, 180_000);
});

/**
 * `vrmeta bench restart`: a whole-cluster restart of `vrmeta dev` (what `npm start` runs), timed.
 *
 * Starts a 3-replica dev cluster in a temp directory on free loopback ports, writes `streams`
 * streams, then `rounds` times: a clean stop of every replica (SIGTERM to the group), a fresh
 * `vrmeta dev` on the same data, and the time until `/readyz` answers 200 on every replica. Each
 * round also reports, from the replicas' own log records, when the last replica started listening
 * and when the election from recovery began, so the time splits into process boot and protocol,
 * and each replica's `boot phases` record (where its boot went).
 *
 * It runs the bundled CLI (`dist/bundle/cli.js`, what `npm start` runs). `baselineCli`
 * (`--baseline-cli`) times another entry in the same run (another build's `dist/bundle/cli.js`, or
 * this build's unbundled `dist/src/node/cli.js`):
 * every round restarts the cluster once with each build, alternately, on the same data, so both
 * see the same machine load. Wall-clock figures on a shared machine: compare them within one run.
 */
import {
  BUNDLED_CLI_PATH,
  HOST,
  POLL_MS,
  ROOT_PASSWORD,
  ROOT_USERNAME,
  consecutiveFreePorts,
  makeTempRoot,
  removeTempRoot,
  sleep,
  spawnChild,
  stopChild,
  withTails,
  type ChildHandle,
} from './procs.js';

export interface RestartBenchOptions {
  readonly rounds?: number;
  /** Another build's `dist/src/node/cli.js`, restarted alternately with this one in every round. */
  readonly baselineCli?: string;
  readonly streams?: number;
  readonly log?: (line: string) => void;
}

export interface RestartRound {
  readonly round: number;
  /** `this build` or `baseline` (`baselineCli`). */
  readonly build: 'this build' | 'baseline';
  /** `vrmeta dev` spawned -> every replica's /readyz 200. */
  readonly readyMs: number;
  /** Spawned -> the last replica's HTTP listener up (process boot, module loading, recovery). */
  readonly lastListeningMs: number | null;
  /** Spawned -> the first "starting an election from recovery" record. */
  readonly electionMs: number | null;
  /** Why the replicas left recovery (one per replica that logged it), and after how many unanswered probe rounds. */
  readonly reasons: string[];
  readonly probes: number[];
  /** Each replica's `boot phases` record (ms per phase), in the order they were logged. */
  readonly bootPhases: Record<string, number>[];
  /** Each replica's CPU time (user + system) until its listeners were up (`cpu_ms` of that record). */
  readonly bootCpuMs: number[];
}

export interface RestartReport {
  readonly bench: 'restart';
  readonly replicas: 3;
  readonly streams: number;
  readonly firstStartReadyMs: number;
  readonly rounds: RestartRound[];
}

const READY_TIMEOUT_MS = 60_000;

async function allReady(ports: readonly number[]): Promise<boolean> {
  const answers = await Promise.all(
    ports.map(async (port) => {
      try {
        return (await fetch(`http://${HOST}:${port}/readyz`, { signal: AbortSignal.timeout(1_000) })).status === 200;
      } catch {
        return false;
      }
    }),
  );
  return answers.every(Boolean);
}

/** Starts `vrmeta dev` and waits for every /readyz; returns the child and the elapsed ms. */
async function startCluster(dataDir: string, ports: readonly number[], name: string, cliPath: string = BUNDLED_CLI_PATH): Promise<{ dev: ChildHandle; readyMs: number }> {
  const [http, replica, tcp] = [ports[0]!, ports[3]!, ports[6]!];
  const dev = spawnChild(name, process.execPath, [
    cliPath,
    'dev',
    '--data-dir',
    dataDir,
    '--http-port',
    String(http),
    '--replica-port',
    String(replica),
    '--tcp-port',
    String(tcp),
    '--log-format',
    'json',
  ], { keep: (line) => /listening on http|starting an election from recovery|"phases_ms"/.test(line) });
  const startedAt = Date.now();
  const httpPorts = [http, http + 1, http + 2];
  while (!(await allReady(httpPorts))) {
    if (dev.exit !== null) throw withTails(`vrmeta dev exited before it was ready`, [dev]);
    if (Date.now() - startedAt > READY_TIMEOUT_MS) throw withTails(`vrmeta dev not ready within ${READY_TIMEOUT_MS} ms`, [dev]);
    await sleep(POLL_MS / 2);
  }
  return { dev, readyMs: Date.now() - startedAt };
}

/**
 * Consecutive free ports for HTTP (3), replication (3) and TCP (3). Spread over a few seconds: on
 * a machine busy with loopback connections (a full test run) runs of free ports come and go.
 */
async function consecutivePorts(): Promise<number[]> {
  const first = await consecutiveFreePorts(9);
  return Array.from({ length: 9 }, (_, index) => first + index);
}

async function writeStreams(httpPort: number, count: number): Promise<void> {
  const base = `http://${HOST}:${httpPort}`;
  const login = await fetch(`${base}/users/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: ROOT_USERNAME, password: ROOT_PASSWORD }),
  });
  if (login.status !== 200) throw new Error(`bench restart: login answered ${login.status}`);
  const token = ((await login.json()) as { access_token: { token: string } }).access_token.token;
  for (let index = 0; index < count; index++) {
    const created = await fetch(`${base}/streams`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: `restart-${index}` }),
    });
    if (created.status !== 200 && created.status !== 201) throw new Error(`bench restart: create stream answered ${created.status}: ${await created.text()}`);
  }
}

function roundOf(dev: ChildHandle, round: number, build: RestartRound['build'], readyMs: number, spawnedAt: number): RestartRound {
  let lastListening: number | null = null;
  let election: number | null = null;
  const reasons: string[] = [];
  const probes: number[] = [];
  const bootPhases: Record<string, number>[] = [];
  const bootCpuMs: number[] = [];
  for (const { atMs, line } of dev.kept) {
    const phases = bootPhasesOf(line);
    if (phases !== null) bootPhases.push(phases);
    const cpuMs = /"cpu_ms":(\d+)/.exec(line)?.[1];
    if (phases !== null && cpuMs !== undefined) bootCpuMs.push(Number(cpuMs));
    if (/listening on http/.test(line)) lastListening = Math.max(lastListening ?? 0, atMs - spawnedAt);
    const reason = /"reason":"([a-z_]+)"[^}]*"msg":"starting an election from recovery"/.exec(line)?.[1];
    if (reason !== undefined) {
      election ??= atMs - spawnedAt;
      reasons.push(reason);
      probes.push(Number(/"probes":(\d+)/.exec(line)?.[1] ?? Number.NaN));
    }
  }
  return { round, build, readyMs, lastListeningMs: lastListening, electionMs: election, reasons, probes, bootPhases, bootCpuMs };
}

/** The `phases_ms` of a replica's `boot phases` record (a JSON line, after `vrmeta dev`'s prefix). */
function bootPhasesOf(line: string): Record<string, number> | null {
  const start = line.indexOf('{');
  if (start < 0 || !line.includes('"phases_ms"')) return null;
  try {
    const record = JSON.parse(line.slice(start)) as { phases_ms?: unknown };
    const phases = record.phases_ms;
    if (typeof phases !== 'object' || phases === null) return null;
    const entries = Object.entries(phases);
    return entries.every(([, ms]) => typeof ms === 'number') ? (Object.fromEntries(entries) as Record<string, number>) : null;
  } catch {
    return null;
  }
}

export async function runRestartBench(options: RestartBenchOptions = {}): Promise<RestartReport> {
  const rounds = options.rounds ?? 5;
  const streams = options.streams ?? 50;
  const log = options.log ?? (() => {});
  const root = makeTempRoot('vrmeta-bench-restart-');
  const ports = await consecutivePorts();
  let dev: ChildHandle | null = null;
  try {
    const first = await startCluster(root, ports, 'dev-first');
    dev = first.dev;
    log(`first start: every /readyz 200 after ${first.readyMs} ms; writing ${streams} streams`);
    await writeStreams(ports[0]!, streams);
    const results: RestartRound[] = [];
    const builds: [RestartRound['build'], string][] = [['this build', BUNDLED_CLI_PATH]];
    if (options.baselineCli !== undefined) builds.push(['baseline', options.baselineCli]);
    for (let round = 1; round <= rounds; round++) {
      for (const [build, cliPath] of builds) {
        await stopChild(dev);
        dev = null;
        const spawnedAt = Date.now();
        const started = await startCluster(root, ports, `dev-round-${round}${build === 'baseline' ? '-baseline' : ''}`, cliPath);
        dev = started.dev;
        const result = roundOf(dev, round, build, started.readyMs, spawnedAt);
        log(`round ${round} (${build}): ready ${result.readyMs} ms (last listener ${result.lastListeningMs} ms, election ${result.electionMs} ms: ${result.reasons.join(',')})`);
        results.push(result);
      }
    }
    return { bench: 'restart', replicas: 3, streams, firstStartReadyMs: first.readyMs, rounds: results };
  } finally {
    if (dev !== null) await stopChild(dev);
    removeTempRoot(root);
  }
}

export function formatRestartReport(report: RestartReport): string {
  const lines = [
    `whole-cluster restart of vrmeta dev (3 replicas, ${report.streams} streams); first start ready after ${report.firstStartReadyMs} ms`,
    '',
    '| round | spawn -> last listener (ms) | spawn -> election (ms) | spawn -> every /readyz 200 (ms) | boot CPU per replica (ms) | election reasons (unanswered probe rounds) | build |',
    '|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const round of report.rounds) {
    const cpu = round.bootCpuMs.length === 0 ? '-' : round.bootCpuMs.join(', ');
    lines.push(
      `| ${round.round} | ${round.lastListeningMs ?? '-'} | ${round.electionMs ?? '-'} | ${round.readyMs} | ${cpu} | ${round.reasons.map((reason, index) => `${reason} (${round.probes[index]})`).join(', ')} | ${round.build} |`,
    );
  }
  const withPhases = report.rounds.filter((round) => round.bootPhases.length > 0);
  if (withPhases.length > 0) {
    lines.push('', 'boot phases of the slowest replica of each round (ms, from its `boot phases` record):', '');
    for (const round of withPhases) {
      const slowest = round.bootPhases.reduce((a, b) => (phaseTotal(b) > phaseTotal(a) ? b : a));
      lines.push(`- round ${round.round} (${round.build}): ${Object.entries(slowest).map(([phase, ms]) => `${phase} ${ms}`).join(', ')}`);
    }
  }
  return lines.join('\n');
}

function phaseTotal(phases: Record<string, number>): number {
  return Object.values(phases).reduce((sum, ms) => sum + ms, 0);
}

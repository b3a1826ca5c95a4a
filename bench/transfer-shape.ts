/**
 * The population side of `vrmeta bench transfer` besides the cheapest-bytes one, and its growth
 * curve as a picture.
 *
 * `--shape realistic` builds, through the HTTP API with concurrent writers, what a deployment's
 * metadata looks like: streams of 100 topics with 10 partitions each, and users that each hold a
 * few stream and topic permission entries and one personal access token. At `--scale 1`:
 * 1,000 streams x 100 topics x 10 partitions (100,000 topics, 1,000,000 partitions) and 10,000
 * users. The default scale is 0.1 (100 streams, 10,000 topics, 1,000 users: the same shape,
 * built in a couple of minutes on a loaded 2-core machine).
 *
 * What a user costs: creating one hashes its password with Argon2id at the edge (m = 19 MiB,
 * t = 2: ~30 ms of one core), and a personal access token is created by the user itself, so the
 * bench logs in as each user once (one Argon2id verify, ~30 ms). Logins normally pass the password
 * gate (20 verifies per second); the realistic clusters run with
 * VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY=1 (the login-flood bench's knob) so that the gate does not
 * set the build time. Nothing else is affected by it: restart and catch-up verify no passwords.
 *
 * `transferCurveSvg` draws restart, catch-up and RSS against snapshot size from a report (for
 * `--svg FILE`): a hand-written SVG, no dependency.
 */
import { httpCall, keepAliveAgent, withTails, type VrmetaCluster } from './procs.js';

/** Topics per stream and partitions per topic of the realistic shape (fixed: the scale sets the counts). */
export const REALISTIC_TOPICS_PER_STREAM = 100;
export const REALISTIC_PARTITIONS_PER_TOPIC = 10;
const REALISTIC_STREAMS_FULL = 1000;
const REALISTIC_USERS_FULL = 10_000;
/** Stream entries in a user's permissions, and topic entries within each of them. */
const PERMISSION_STREAMS_PER_USER = 2;
const PERMISSION_TOPICS_PER_STREAM = 2;
/** The knob that lifts the password gate (src/node/main.ts), set on the realistic clusters only. */
export const UNBOUNDED_PASSWORD_VERIFY_ENV = 'VRMETA_BENCH_UNBOUNDED_PASSWORD_VERIFY';
const REALISTIC_WORKERS = 8;

export interface RealisticShape {
  readonly scale: number;
  readonly streams: number;
  readonly topicsPerStream: number;
  readonly topics: number;
  readonly partitionsPerTopic: number;
  readonly partitions: number;
  readonly users: number;
  /** Stream entries and topic entries in each user's permissions. */
  readonly permissionStreamsPerUser: number;
  readonly permissionTopicsPerUser: number;
  /** One personal access token per user. */
  readonly tokens: number;
}

/** The counts at `scale` (1 = 1,000 streams and 10,000 users); at least one stream and one user. */
export function realisticShape(scale: number): RealisticShape {
  if (!Number.isFinite(scale) || scale <= 0 || scale > 1) throw new Error(`realistic scale must be in (0, 1], got ${scale}`);
  const streams = Math.max(1, Math.round(REALISTIC_STREAMS_FULL * scale));
  const users = Math.max(1, Math.round(REALISTIC_USERS_FULL * scale));
  const topics = streams * REALISTIC_TOPICS_PER_STREAM;
  const permissionStreamsPerUser = Math.min(PERMISSION_STREAMS_PER_USER, streams);
  return {
    scale,
    streams,
    topicsPerStream: REALISTIC_TOPICS_PER_STREAM,
    topics,
    partitionsPerTopic: REALISTIC_PARTITIONS_PER_TOPIC,
    partitions: topics * REALISTIC_PARTITIONS_PER_TOPIC,
    users,
    permissionStreamsPerUser,
    permissionTopicsPerUser: permissionStreamsPerUser * PERMISSION_TOPICS_PER_STREAM,
    tokens: users,
  };
}

export interface RealisticBuild {
  /** HTTP writes that changed state (streams, topics, users, tokens); logins are counted apart. */
  readonly writes: number;
  readonly logins: number;
  readonly seconds: number;
}

/** Runs `count` jobs on `workers` concurrent loops, in index order. */
async function pool(count: number, workers: number, job: (index: number, worker: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, count) }, async (_, worker) => {
      while (next < count) await job(next++, worker);
    }),
  );
}

function idOf(text: string, what: string): number {
  const id = (JSON.parse(text) as { id?: unknown }).id;
  if (typeof id !== 'number') throw new Error(`${what}: no numeric id in the reply ${text.slice(0, 200)}`);
  return id;
}

const ALL_TOPIC = { manage_topic: false, read_topic: true, poll_messages: true, send_messages: true };

/** User `index`'s permissions: read streams globally, two streams and two topics in each. */
function userPermissions(index: number, shape: RealisticShape, streamIds: readonly number[], topicIds: readonly number[][]): unknown {
  const streams: Record<string, unknown> = {};
  for (let entry = 0; entry < shape.permissionStreamsPerUser; entry++) {
    const stream = (index + entry) % shape.streams;
    const topics: Record<string, unknown> = {};
    for (let topic = 0; topic < PERMISSION_TOPICS_PER_STREAM; topic++) {
      topics[String(topicIds[stream]![(index + topic) % shape.topicsPerStream]!)] = ALL_TOPIC;
    }
    streams[String(streamIds[stream]!)] = {
      manage_stream: false,
      read_stream: true,
      manage_topics: false,
      read_topics: true,
      poll_messages: false,
      send_messages: false,
      topics,
    };
  }
  return {
    global: {
      manage_servers: false,
      read_servers: false,
      manage_users: false,
      read_users: false,
      manage_streams: false,
      read_streams: true,
      manage_topics: false,
      read_topics: false,
      poll_messages: false,
      send_messages: false,
    },
    streams,
  };
}

/**
 * Builds the realistic shape on `cluster` through the primary's HTTP API: streams `r<i>` with
 * topics `t<j>` of 10 partitions, then users `user<i>` (permissions set at creation) that each log in
 * once and create the token `bench`. Every answer is checked.
 */
export async function buildRealistic(cluster: VrmetaCluster, primary: number, shape: RealisticShape, workers = REALISTIC_WORKERS): Promise<RealisticBuild> {
  const startedMs = performance.now();
  const agent = keepAliveAgent(workers);
  const base = cluster.url(primary);
  const tokens: string[] = [];
  for (let worker = 0; worker < workers; worker++) tokens.push(await cluster.login(primary));
  let writes = 0;
  let logins = 0;
  const call = async (path: string, body: unknown, bearer: string | null): Promise<string> => {
    const answer = await httpCall(agent, 'POST', `${base}${path}`, JSON.stringify(body), bearer === null ? {} : { authorization: `Bearer ${bearer}` });
    if (answer.status !== 200) throw withTails(`POST ${path}: HTTP ${answer.status} ${answer.text.slice(0, 300)}`, cluster.children());
    return answer.text;
  };
  try {
    const streamIds: number[] = new Array<number>(shape.streams).fill(-1);
    await pool(shape.streams, workers, async (stream, worker) => {
      streamIds[stream] = idOf(await call('/streams', { name: `r${stream}` }, tokens[worker]!), `stream r${stream}`);
      writes += 1;
    });
    const topicIds: number[][] = streamIds.map(() => new Array<number>(shape.topicsPerStream).fill(-1));
    await pool(shape.topics, workers, async (index, worker) => {
      const stream = Math.floor(index / shape.topicsPerStream);
      const topic = index % shape.topicsPerStream;
      const text = await call(
        `/streams/${streamIds[stream]}/topics`,
        { name: `t${topic}`, partitions_count: shape.partitionsPerTopic, compression_algorithm: 'none', message_expiry: 0, max_topic_size: 0, replication_factor: 1 },
        tokens[worker]!,
      );
      topicIds[stream]![topic] = idOf(text, `topic r${stream}/t${topic}`);
      writes += 1;
    });
    await pool(shape.users, workers, async (user, worker) => {
      const username = `user${user}`;
      const password = `bench-password-${user}`;
      await call('/users', { username, password, status: 'active', permissions: userPermissions(user, shape, streamIds, topicIds) }, tokens[worker]!);
      const identity = JSON.parse(await call('/users/login', { username, password }, null)) as { access_token: { token: string } };
      logins += 1;
      await call('/personal-access-tokens', { name: 'bench', expiry: 0 }, identity.access_token.token);
      writes += 2;
    });
  } finally {
    agent.destroy();
  }
  return { writes, logins, seconds: (performance.now() - startedMs) / 1000 };
}

// ------------------------------------------------------------------------------ the curve as SVG

export interface CurvePoint {
  readonly kernels: string;
  readonly snapshotMiB: number;
  readonly restartS: number | null;
  readonly catchUpS: number;
  readonly peakRssMiB: number;
  readonly peerRssMiB: number;
  /** RSS of the other backup (no checkpoint payload in memory). */
  readonly backupRssMiB: number;
}

const SVG_W = 360;
const SVG_H = 240;
const PAD = { left: 52, right: 14, top: 28, bottom: 40 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A round upper bound for an axis, at least `max` and at most 1.33x it above 1.5 (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k). */
function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

function panel(originX: number, title: string, unit: string, xMax: number, series: { label: string; points: [number, number][] }[]): string[] {
  const width = SVG_W - PAD.left - PAD.right;
  const height = SVG_H - PAD.top - PAD.bottom;
  const yMax = niceMax(Math.max(0, ...series.flatMap((s) => s.points.map(([, y]) => y))));
  const x = (value: number): number => originX + PAD.left + (value / xMax) * width;
  const y = (value: number): number => PAD.top + height - (value / yMax) * height;
  const out: string[] = [
    `<text x="${originX + PAD.left}" y="16" font-size="12" font-weight="bold">${escapeXml(title)}</text>`,
    `<line x1="${x(0)}" y1="${y(0)}" x2="${x(xMax)}" y2="${y(0)}" stroke="#000"/>`,
    `<line x1="${x(0)}" y1="${y(0)}" x2="${x(0)}" y2="${y(yMax)}" stroke="#000"/>`,
  ];
  for (let tick = 0; tick <= 4; tick++) {
    const xv = (xMax * tick) / 4;
    const yv = (yMax * tick) / 4;
    out.push(
      `<text x="${x(xv).toFixed(1)}" y="${y(0) + 14}" font-size="10" text-anchor="middle">${Number(xv.toPrecision(3))}</text>`,
      `<text x="${x(0) - 4}" y="${(y(yv) + 3).toFixed(1)}" font-size="10" text-anchor="end">${Number(yv.toPrecision(3))}</text>`,
      `<line x1="${x(0)}" y1="${y(yv).toFixed(1)}" x2="${x(xMax)}" y2="${y(yv).toFixed(1)}" stroke="#ddd"/>`,
    );
  }
  out.push(
    `<text x="${x(xMax / 2)}" y="${SVG_H - 8}" font-size="10" text-anchor="middle">snapshot (MiB)</text>`,
    `<text x="${originX + 12}" y="${PAD.top + height / 2}" font-size="10" text-anchor="middle" transform="rotate(-90 ${originX + 12} ${PAD.top + height / 2})">${escapeXml(unit)}</text>`,
  );
  series.forEach((s, index) => {
    const colour = COLOURS[index % COLOURS.length]!;
    const points = s.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`);
    out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${points.join(' ')}"/>`);
    for (const point of points) {
      const [cx, cy] = point.split(',');
      out.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${colour}"/>`);
    }
    out.push(`<text x="${x(0) + 8}" y="${PAD.top + 12 + index * 13}" font-size="10" fill="${colour}">${escapeXml(s.label)}</text>`);
  });
  return out;
}

/** Two panels, time (restart, catch-up) and memory (peak RSS of the rejoined replica, RSS of the primary and of a backup), per kernel mode. */
export function transferCurveSvg(points: readonly CurvePoint[], caption: string): string {
  const xMax = niceMax(Math.max(0, ...points.map((point) => point.snapshotMiB)));
  const kernels = [...new Set(points.map((point) => point.kernels))];
  const series = (pick: (point: CurvePoint) => number | null, label: string): { label: string; points: [number, number][] }[] =>
    kernels.map((mode) => ({
      label: kernels.length > 1 ? `${label} (${mode})` : label,
      points: points
        .filter((point) => point.kernels === mode && pick(point) !== null)
        .sort((a, b) => a.snapshotMiB - b.snapshotMiB)
        .map((point): [number, number] => [point.snapshotMiB, pick(point)!]),
    }));
  const body = [
    ...panel(0, 'restart and catch-up', 'seconds', xMax, [...series((p) => p.restartS, 'restart (full WAL)'), ...series((p) => p.catchUpS, 'catch-up (wiped)')]),
    ...panel(SVG_W, 'memory', 'RSS (MiB)', xMax, [...series((p) => p.peakRssMiB, 'peak RSS, rejoined'), ...series((p) => p.peerRssMiB, 'RSS of the primary'), ...series((p) => p.backupRssMiB, 'RSS of a backup')]),
  ];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${SVG_W * 2}" height="${SVG_H + 16}" viewBox="0 0 ${SVG_W * 2} ${SVG_H + 16}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...body,
    `<text x="${SVG_W}" y="${SVG_H + 10}" font-size="9" text-anchor="middle" fill="#555">${escapeXml(caption)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

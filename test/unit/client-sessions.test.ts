/**
 * The HTTP edge's per-credential session pools (src/node/client-sessions.ts), against a scripted
 * replica: every submitted request is recorded, and the test decides when (and whether) it is
 * answered. Nothing here waits on the wall clock: the idle clock is a variable and the write
 * timeout runs on vitest's fake timers.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Command } from '../../src/constants.js';
import { loadKernels } from '../../src/kernels/index.js';
import { ClientSessions, type SessionLimits } from '../../src/node/client-sessions.js';
import type { WriteOutcome } from '../../src/http/node-api.js';
import { buildFrame } from '../../src/vsr/frame.js';
import { EvictionReason } from '../../src/vsr/header-types.js';
import { Operation, type RequestHeader } from '../../src/vsr/header.js';
import { buildEviction, encodeRegisterPayload, resultBody } from '../../src/vsr/reply.js';

const kernels = loadKernels('ts');
const CLUSTER = 7n;
/** Any replicated operation: the pool does not look at it. */
const WRITE_OPERATION = 200;

interface Submitted {
  readonly header: RequestHeader;
  readonly body: Uint8Array;
  answered: boolean;
}

class ScriptedReplica {
  readonly submitted: Submitted[] = [];
  nowMs = 1_000_000;
  accepting = true;
  private opNext = 1;
  readonly sessions: ClientSessions;

  constructor(limits: SessionLimits) {
    this.sessions = new ClientSessions(
      {
        cluster: CLUSTER,
        kernels,
        submit: (header, body) => this.submitted.push({ header, body: body.slice(), answered: false }),
        canAccept: () => this.accepting,
        nowMs: () => this.nowMs,
      },
      limits,
    );
  }

  /** Requests submitted and not answered yet. */
  open(): Submitted[] {
    return this.submitted.filter((entry) => !entry.answered);
  }

  /** Commits `entry` and sends its reply (a Register's carries the session epoch). */
  answer(entry: Submitted, status = 0): void {
    expect(entry.answered).toBe(false);
    entry.answered = true;
    const op = this.opNext++;
    const { header } = entry;
    const payload = header.operation === Operation.register ? encodeRegisterPayload(header.userId, op) : new TextEncoder().encode(`op ${op}`);
    const frame = buildFrame(
      kernels,
      {
        command: Command.reply,
        cluster: CLUSTER,
        view: 0,
        release: 0,
        replica: 0,
        requestChecksum: header.requestChecksum,
        client: header.client,
        op,
        commit: op,
        timestamp: 0,
        request: header.request,
        operation: header.operation,
        status,
      },
      resultBody(0, payload),
    );
    this.sessions.onClientFrame(header.client, frame);
  }

  evict(client: bigint): void {
    this.sessions.onClientFrame(client, buildEviction(kernels, { cluster: CLUSTER, replica: 0, view: 0, client, reason: EvictionReason.noSession }));
  }

  /** Answers what is open, again and again, until nothing new is submitted. */
  async drain(): Promise<void> {
    for (;;) {
      await settle();
      const open = this.open();
      if (open.length === 0) return;
      for (const entry of open) this.answer(entry);
    }
  }

  clients(): Set<bigint> {
    return new Set(this.submitted.map((entry) => entry.header.client));
  }
}

/** Lets every promise continuation that is ready run (no timers involved). */
async function settle(): Promise<void> {
  for (let round = 0; round < 20; round++) await Promise.resolve();
}

function write(replica: ScriptedReplica, key: string, userId: number, tag: number): Promise<WriteOutcome> {
  return replica.sessions.write(key, userId, WRITE_OPERATION, new Uint8Array([tag & 0xff, tag >> 8]));
}

function tagOf(entry: Submitted): number {
  return entry.body[0]! | (entry.body[1]! << 8);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('HTTP session requests and replies', () => {
  it('submits a sealed request header and reads a denied reply (non-zero status) as unknown', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 4, sessionsPerCredentialMax: 1 });
    const outcome = write(replica, 'k', 1, 1);
    await settle();
    const [register] = replica.open();
    replica.answer(register!);
    await settle();
    const [request] = replica.open();
    // The header the core gets carries the seals buildFrame wrote (read back, not re-verified).
    expect(request!.header.command).toBe(Command.request);
    expect(request!.header.checksumBody).toBe(kernels.xxh3_64(request!.body));
    expect(request!.header.requestChecksum).toBe(kernels.xxh3_64(request!.body));
    expect(request!.header.checksum).not.toBe(0n);
    replica.answer(request!, 3);
    expect(await outcome).toEqual({ kind: 'unknown', reason: 'request denied (status 3)' });
  });
});

describe('HTTP session pool: one credential, concurrent writes', () => {
  it('grows a session per concurrent write, up to the credential bound, and commits every write', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 4 });
    const writes = Array.from({ length: 10 }, (_, index) => write(replica, 'token-a', 5, index));
    await settle();
    // Four sessions register at once; the other six writes wait for one of them.
    const registers = replica.open();
    expect(registers).toHaveLength(4);
    expect(registers.every((entry) => entry.header.operation === Operation.register)).toBe(true);
    expect(new Set(registers.map((entry) => entry.header.client)).size).toBe(4);
    expect(replica.sessions.queued).toBe(6);
    await replica.drain();
    const outcomes = await Promise.all(writes);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(Array(10).fill('committed'));
    expect(replica.clients().size).toBe(4);
    expect(replica.sessions.size).toBe(4);
    // Every write was submitted exactly once, each with its own body.
    const tags = replica.submitted.filter((entry) => entry.header.operation === WRITE_OPERATION).map(tagOf);
    expect(tags.sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, index) => index));
  });

  it('keeps one request in flight per session, with request numbers in order', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 3 });
    const writes = Array.from({ length: 30 }, (_, index) => write(replica, 'token-a', 5, index));
    // Answer one open request at a time, in a shuffled order, checking the invariant each step.
    let step = 0;
    for (;;) {
      await settle();
      const open = replica.open();
      const perClient = new Map<bigint, number>();
      for (const entry of open) perClient.set(entry.header.client, (perClient.get(entry.header.client) ?? 0) + 1);
      expect([...perClient.values()].every((count) => count === 1)).toBe(true);
      if (open.length === 0) break;
      replica.answer(open[(step * 7) % open.length]!);
      step += 1;
    }
    expect((await Promise.all(writes)).every((outcome) => outcome.kind === 'committed')).toBe(true);
    const requests = new Map<bigint, number[]>();
    for (const entry of replica.submitted) requests.set(entry.header.client, [...(requests.get(entry.header.client) ?? []), entry.header.request]);
    expect(requests.size).toBe(3);
    for (const numbers of requests.values()) expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, index) => index));
  });

  it('a write without a reply is sent again with its request number until it times out, never after; later writes take new numbers', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 1, writeTimeoutMs: 1_000 });
    const first = write(replica, 'token-a', 5, 1);
    await replica.drain();
    expect((await first).kind).toBe('committed');
    const lost = write(replica, 'token-a', 5, 2);
    const queued = write(replica, 'token-a', 5, 3);
    await settle();
    expect(replica.open().map(tagOf)).toEqual([2]);
    vi.advanceTimersByTime(1_000);
    const outcome = await lost;
    expect(outcome.kind).toBe('unknown');
    await replica.drain();
    expect((await queued).kind).toBe('committed');
    const writes = replica.submitted.filter((entry) => entry.header.operation === WRITE_OPERATION);
    // The lost write went again once, at WRITE_RETRANSMIT_MS (500 ms), with the same number.
    expect(writes.map(tagOf)).toEqual([1, 2, 2, 3]);
    expect(writes.map((entry) => entry.header.request)).toEqual([1, 2, 2, 3]);
  });
});

describe('HTTP session pool: the node bound', () => {
  it('never takes a busy session of another credential to grow: the write queues, then gets the next free slot', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 2, sessionsPerCredentialMax: 4 });
    const a = Array.from({ length: 6 }, (_, index) => write(replica, 'token-a', 5, index));
    await settle();
    expect(replica.open()).toHaveLength(2);
    const b = write(replica, 'token-b', 6, 100);
    await settle();
    // Both slots are busy with token-a: token-b waits, nothing is dropped.
    expect(replica.open()).toHaveLength(2);
    expect(replica.sessions.evictions.capacity).toBe(0);
    expect(replica.sessions.size).toBe(2);
    let bDone = false;
    void b.then(() => (bDone = true));
    // token-a's first writes commit: a slot goes to token-b while token-a still has writes queued.
    for (let round = 0; round < 3 && !bDone; round++) {
      for (const entry of replica.open()) if (entry.header.userId === 5) replica.answer(entry);
      await settle();
      for (const entry of replica.open()) if (entry.header.userId === 6) replica.answer(entry);
      await settle();
    }
    expect(bDone).toBe(true);
    expect((await b).kind).toBe('committed');
    expect(replica.sessions.size).toBeLessThanOrEqual(2);
    await replica.drain();
    expect((await Promise.all(a)).every((outcome) => outcome.kind === 'committed')).toBe(true);
    expect(replica.sessions.size).toBeLessThanOrEqual(2);
  });

  // At its own bound (3) the busy credential only waits on its own sessions; below it (4) it is
  // owed a slot too, and a credential without any session must still come first.
  it.each([3, 4])('no cross-credential starvation: with every slot taken by one busy credential (bound %i), the others still commit', async (perCredential) => {
    const replica = new ScriptedReplica({ sessionsMax: 3, sessionsPerCredentialMax: perCredential });
    // token-a keeps 3 writes queued behind its 3 sessions at all times.
    let aCommitted = 0;
    const aWrites: Promise<WriteOutcome>[] = [];
    const topUp = (): void => {
      while (aWrites.length - aCommitted < 6) {
        const next = write(replica, 'token-a', 5, aWrites.length);
        next.then((outcome) => {
          if (outcome.kind === 'committed') aCommitted += 1;
        });
        aWrites.push(next);
      }
    };
    topUp();
    await settle();
    const others = [write(replica, 'token-b', 6, 1), write(replica, 'token-c', 7, 1)];
    const done: string[] = [];
    others.forEach((promise, index) => void promise.then((outcome) => done.push(`${index}:${outcome.kind}`)));
    for (let round = 0; round < 20 && done.length < 2; round++) {
      const open = replica.open();
      for (const entry of open) replica.answer(entry);
      await settle();
      topUp();
      await settle();
    }
    expect(done.sort()).toEqual(['0:committed', '1:committed']);
    expect(replica.sessions.size).toBeLessThanOrEqual(3);
    await replica.drain();
    await Promise.all(aWrites);
  });

  it('freed slots go to the credentials without a session first, once each (no churn back to the busy one)', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 3, sessionsPerCredentialMax: 4 });
    const a = Array.from({ length: 8 }, (_, index) => write(replica, 'token-a', 5, index));
    await settle();
    const b = write(replica, 'token-b', 6, 1);
    const c = write(replica, 'token-c', 7, 1);
    await settle();
    // token-a's three sessions register and commit one write each; each release is a free slot.
    for (let step = 0; step < 2; step++) {
      for (const entry of replica.open()) if (entry.header.userId === 5) replica.answer(entry);
      await settle();
    }
    const registers = replica.submitted.filter((entry) => entry.header.operation === Operation.register);
    expect(registers.map((entry) => entry.header.userId).sort()).toEqual([5, 5, 5, 6, 7]);
    expect(replica.sessions.evictions.capacity).toBe(2);
    expect(replica.sessions.entries().filter((entry) => entry.key === 'token-a')).toHaveLength(1);
    await replica.drain();
    expect((await Promise.all([...a, b, c])).every((outcome) => outcome.kind === 'committed')).toBe(true);
  });

  it('a new credential at the node bound takes the least recently used idle session', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 2, sessionsPerCredentialMax: 4 });
    const first = write(replica, 'token-a', 5, 1);
    await replica.drain();
    replica.nowMs += 10;
    const second = write(replica, 'token-b', 6, 1);
    await replica.drain();
    await Promise.all([first, second]);
    replica.nowMs += 10;
    const third = write(replica, 'token-c', 7, 1);
    await replica.drain();
    expect((await third).kind).toBe('committed');
    expect(replica.sessions.evictions.capacity).toBe(1);
    expect(replica.sessions.entries().map((entry) => entry.key).sort()).toEqual(['token-b', 'token-c']);
  });

  it('refuses a write as unavailable when the wait queue is full (it never entered the log)', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 8, sessionsPerCredentialMax: 1, writesQueuedMax: 2 });
    const writes = Array.from({ length: 4 }, (_, index) => write(replica, 'token-a', 5, index));
    await settle();
    const refused = await writes[3]!;
    expect(refused.kind).toBe('unavailable');
    await replica.drain();
    expect((await Promise.all(writes.slice(0, 3))).map((outcome) => outcome.kind)).toEqual(['committed', 'committed', 'committed']);
    expect(replica.submitted.filter((entry) => entry.header.operation === WRITE_OPERATION).map(tagOf)).toEqual([0, 1, 2]);
  });
});

describe('HTTP session pool: idle sessions and ends', () => {
  it('logs out the sessions idle for the timeout, keeping the most recently used one', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 4, idleTimeoutMs: 30_000 });
    const burst = Array.from({ length: 4 }, (_, index) => write(replica, 'token-a', 5, index));
    await replica.drain();
    await Promise.all(burst);
    expect(replica.sessions.size).toBe(4);
    replica.nowMs += 1_000;
    const single = write(replica, 'token-a', 5, 10);
    await replica.drain();
    await single;
    const kept = replica.submitted.at(-1)!.header.client;
    // The burst's sessions have been idle one ms short of the timeout: nothing yet.
    replica.nowMs += 28_999;
    replica.sessions.expireIdle();
    await settle();
    expect(replica.open()).toHaveLength(0);
    replica.nowMs += 1;
    replica.sessions.expireIdle();
    await settle();
    const logouts = replica.open();
    expect(logouts.map((entry) => entry.header.operation)).toEqual([Operation.logout, Operation.logout, Operation.logout]);
    expect(logouts.some((entry) => entry.header.client === kept)).toBe(false);
    await replica.drain();
    expect(replica.sessions.size).toBe(1);
    expect(replica.sessions.entries()[0]!.clientId).toBe(kept);
    expect(replica.sessions.evictions.idle).toBe(3);
    // The last session is never expired: the credential's next write needs no Register.
    replica.nowMs += 3_600_000;
    replica.sessions.expireIdle();
    await settle();
    expect(replica.open()).toHaveLength(0);
  });

  it('logout runs the queued writes first, then logs out every session of the credential', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 2 });
    const writes = Array.from({ length: 4 }, (_, index) => write(replica, 'token-a', 5, index));
    await settle();
    const logout = replica.sessions.logout('token-a');
    await replica.drain();
    await logout;
    expect((await Promise.all(writes)).every((outcome) => outcome.kind === 'committed')).toBe(true);
    const operations = replica.submitted.map((entry) => entry.header.operation);
    expect(operations.filter((operation) => operation === Operation.logout)).toHaveLength(2);
    // Each session's logout is its last request.
    for (const client of replica.clients()) expect(replica.submitted.filter((entry) => entry.header.client === client).at(-1)!.header.operation).toBe(Operation.logout);
    expect(replica.sessions.size).toBe(0);
  });

  it('logout of a credential still waiting for its first slot answers its writes evicted instead of leaving them waiting', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 1, sessionsPerCredentialMax: 2 });
    const a = write(replica, 'token-a', 5, 1);
    await settle();
    const b = write(replica, 'token-b', 6, 1);
    await settle();
    expect(replica.sessions.queued).toBe(1);
    await replica.sessions.logout('token-b');
    expect((await b).kind).toBe('evicted');
    expect(replica.sessions.queued).toBe(0);
    await replica.drain();
    expect((await a).kind).toBe('committed');
    expect(replica.submitted.every((entry) => entry.header.userId === 5)).toBe(true);
  });

  it('an evicted session leaves the pool; the credential keeps writing on the others and new ones', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 64, sessionsPerCredentialMax: 2 });
    const writes = Array.from({ length: 2 }, (_, index) => write(replica, 'token-a', 5, index));
    await replica.drain();
    await Promise.all(writes);
    const victim = replica.submitted[0]!.header.client;
    const inFlight = write(replica, 'token-a', 5, 7);
    await settle();
    const open = replica.open();
    expect(open).toHaveLength(1);
    replica.evict(open[0]!.header.client);
    expect((await inFlight).kind).toBe('evicted');
    expect(replica.sessions.evictions.evicted).toBe(1);
    expect(replica.sessions.size).toBe(1);
    const after = Array.from({ length: 2 }, (_, index) => write(replica, 'token-a', 5, 10 + index));
    await replica.drain();
    expect((await Promise.all(after)).every((outcome) => outcome.kind === 'committed')).toBe(true);
    expect(replica.sessions.size).toBe(2);
    expect(victim).not.toBe(0n);
  });
});

describe('HTTP session pool: one user cannot evict another', () => {
  /** Runs one write with credential `key` of `userId` to its commit. */
  async function committed(replica: ScriptedReplica, key: string, userId: number, tag: number): Promise<void> {
    const outcome = write(replica, key, userId, tag);
    await replica.drain();
    expect((await outcome).kind).toBe('committed');
  }

  it("a user flooding credentials churns only its own idle sessions at its bound; root's stays", async () => {
    const replica = new ScriptedReplica({ sessionsMax: 8, sessionsPerCredentialMax: 4, sessionsPerUserMax: 3 });
    await committed(replica, 'root-token', 0, 1);
    const rootSession = replica.sessions.entries().find((entry) => entry.userId === 0)!.clientId;
    for (let index = 0; index < 20; index++) {
      replica.nowMs += 10;
      await committed(replica, `flood-${index}`, 5, index);
    }
    const entries = replica.sessions.entries();
    expect(entries.filter((entry) => entry.userId === 5)).toHaveLength(3);
    expect(entries.some((entry) => entry.clientId === rootSession)).toBe(true);
    expect(replica.sessions.evictions.capacity).toBe(17);
  });

  it('at the node bound a newcomer takes an idle session of the users holding the most, not an older one of a smaller user', async () => {
    const replica = new ScriptedReplica({ sessionsMax: 4, sessionsPerCredentialMax: 4 });
    await committed(replica, 'root-token', 0, 1);
    const rootSession = replica.sessions.entries()[0]!.clientId;
    for (let index = 0; index < 3; index++) {
      replica.nowMs += 10;
      await committed(replica, `a-${index}`, 5, index);
    }
    replica.nowMs += 10;
    await committed(replica, 'c-token', 7, 1);
    const users = replica.sessions.entries().map((entry) => entry.userId).sort();
    expect(users).toEqual([0, 5, 5, 7]);
    expect(replica.sessions.entries().some((entry) => entry.clientId === rootSession)).toBe(true);
  });

  it("a newcomer waits rather than take a smaller user's idle session while the largest user's are all busy", async () => {
    const replica = new ScriptedReplica({ sessionsMax: 4, sessionsPerCredentialMax: 4 });
    await committed(replica, 'root-token', 0, 1);
    const rootSession = replica.sessions.entries()[0]!.clientId;
    const busy = Array.from({ length: 3 }, (_, index) => write(replica, `a-${index}`, 5, index));
    await settle();
    const waiting = write(replica, 'c-token', 7, 1);
    await settle();
    // user 5's three sessions are registering (busy): c waits, root's idle session stays.
    expect(replica.sessions.entries().some((entry) => entry.clientId === rootSession)).toBe(true);
    expect(replica.sessions.entries().some((entry) => entry.userId === 7)).toBe(false);
    await replica.drain();
    expect((await waiting).kind).toBe('committed');
    await Promise.all(busy);
    expect(replica.sessions.entries().some((entry) => entry.clientId === rootSession)).toBe(true);
  });
});

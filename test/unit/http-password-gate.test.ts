/**
 * The bound on Argon2id verifications (src/http/password-gate.ts): at most 1 runs, at most 20
 * start per second, 8 wait; anything beyond is refused at once with Iggy's error shape and a
 * 429, never reaching Argon2; everything admitted gets its correct answer, in arrival order. No
 * timing is asserted: verifications are held open by the test and released when it chooses, and
 * the rate bound runs on a clock the test moves by hand.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HttpError } from '../../src/http/errors.js';
import { ARGON2_VERIFY_CONCURRENCY_MAX, ARGON2_VERIFY_QUEUE_MAX, ARGON2_VERIFY_STARTS_PER_SECOND_MAX, PasswordGate, type GateClock } from '../../src/http/password-gate.js';
import type { PasswordVerifier } from '../../src/http/secrets.js';
import { expectErrorShape, harness, type Harness, type Reply } from './http-fixtures.js';

/**
 * A verification the test holds open: each call waits until `release()`, then runs `through`
 * (the node's verifier, set once the harness exists: it maps root's genesis marker).
 */
function heldVerifier() {
  let through: PasswordVerifier | null = null;
  const calls: string[] = [];
  let held = false;
  let releaseAll: () => void = () => {};
  let released = Promise.resolve();
  return {
    calls,
    hold() {
      held = true;
      released = new Promise<void>((resolve) => (releaseAll = resolve));
    },
    release() {
      held = false;
      releaseAll();
    },
    through(verifier: PasswordVerifier) {
      through = verifier;
    },
    verify: async (passwordHash: string, password: string): Promise<boolean> => {
      calls.push(password);
      if (held) await released;
      if (through === null) throw new Error('heldVerifier: through() was not called');
      return through(passwordHash, password);
    },
  };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 2000; attempt++) {
    if (await condition()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`never happened: ${what}`);
}

function gauge(metrics: string, name: string): number {
  const match = new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'm').exec(metrics);
  if (match === null) throw new Error(`no ${name} in /metrics`);
  return Number(match[1]);
}

/** A clock that moves only when told; scheduled callbacks run when it passes their time. */
function manualClock(): GateClock & { advance(ms: number): void; pending(): number } {
  let now = 1_000;
  const timers: { at: number; fn: () => void }[] = [];
  return {
    nowMs: () => now,
    schedule: (fn, delayMs) => {
      timers.push({ at: now + delayMs, fn });
    },
    advance(ms) {
      now += ms;
      for (const timer of timers.splice(0).sort((a, b) => a.at - b.at)) {
        if (timer.at <= now) timer.fn();
        else timers.push(timer);
      }
    },
    pending: () => timers.length,
  };
}

describe('PasswordGate', () => {
  it('the defaults: 1 running, 8 waiting, 20 starts per second', () => {
    expect([ARGON2_VERIFY_CONCURRENCY_MAX, ARGON2_VERIFY_QUEUE_MAX, ARGON2_VERIFY_STARTS_PER_SECOND_MAX]).toEqual([1, 8, 20]);
  });

  it('never runs more than the bound, resumes waiters first in first out, and frees the slot of a failure', async () => {
    const gate = new PasswordGate({ concurrencyMax: 2, queueMax: 3, startsPerSecondMax: Infinity });
    let running = 0;
    let runningMax = 0;
    const order: number[] = [];
    const releases: (() => void)[] = [];
    const job = (index: number, fail = false) => async () => {
      running += 1;
      runningMax = Math.max(runningMax, running);
      order.push(index);
      await new Promise<void>((resolve) => releases.push(resolve));
      running -= 1;
      if (fail) throw new Error(`job ${index} failed`);
      return index;
    };
    // The failing job's rejection is observed at once (an unobserved one fails the run).
    const failed = gate.run(job(0, true)).catch((error: unknown) => error);
    const results = [gate.run(job(1)), gate.run(job(2)), gate.run(job(3)), gate.run(job(4))];
    await until(() => releases.length === 2, 'two running');
    expect(gate.stats()).toMatchObject({ running: 2, queued: 3 });
    await expect(gate.run(job(5))).rejects.toBeInstanceOf(HttpError);
    expect(gate.stats().refused).toBe(1);
    while (order.length < 5 || releases.length > 0) {
      await until(() => releases.length > 0, 'a running job');
      releases.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(String(await failed)).toContain('job 0 failed');
    expect(await Promise.all(results)).toEqual([1, 2, 3, 4]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(runningMax).toBe(2);
    expect(gate.stats()).toEqual({ running: 0, queued: 0, refused: 1, completed: 5, loginsRefused: 0 });
  });

  it('starts at most startsPerSecondMax per second: the next one waits its turn, in order, or is refused when the queue is full', async () => {
    const clock = manualClock();
    const gate = new PasswordGate({ concurrencyMax: 4, queueMax: 2, startsPerSecondMax: 10 }, clock);
    const started: number[] = [];
    const job = (index: number) => async () => {
      started.push(index);
      return index;
    };
    const first = gate.run(job(0));
    await first;
    // 100 ms must pass between starts: these wait although slots are free.
    const second = gate.run(job(1));
    const third = gate.run(job(2));
    await expect(gate.run(job(3))).rejects.toBeInstanceOf(HttpError);
    await Promise.resolve();
    expect(started).toEqual([0]);
    expect(gate.stats()).toMatchObject({ running: 0, queued: 2, refused: 1 });
    clock.advance(99);
    await Promise.resolve();
    expect(started).toEqual([0]);
    clock.advance(1);
    expect(await second).toBe(1);
    expect(started).toEqual([0, 1]);
    clock.advance(100);
    expect(await third).toBe(2);
    expect(clock.pending()).toBe(0);
    // Idle long enough: the next one starts at once.
    clock.advance(100);
    expect(await gate.run(job(4))).toBe(4);
    expect(gate.stats()).toEqual({ running: 0, queued: 0, refused: 1, completed: 4, loginsRefused: 0 });
  });
});

describe('logins and password changes under the gate', () => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  it('saturated: 429 at once in Iggy shape with retry-after, Argon2 untouched; admitted ones get their right answers in order', async () => {
    const verifier = heldVerifier();
    // The rate bound is tested above on a manual clock; here only the counts matter.
    h = await harness({ app: { passwordVerifier: verifier.verify, passwordGate: { startsPerSecondMax: Infinity } } });
    verifier.through(h.node.verifyPassword);
    const token = await h.rootToken();
    verifier.calls.length = 0;
    verifier.hold();

    // Fill the gate: 2 run, 8 wait. Even requests carry the right password, odd ones a wrong one.
    const admitted = ARGON2_VERIFY_CONCURRENCY_MAX + ARGON2_VERIFY_QUEUE_MAX;
    const passwords = Array.from({ length: admitted }, (_, index) => (index % 2 === 0 ? 'iggy' : `wrong-${index}`));
    const pending: Promise<Reply>[] = [];
    for (const password of passwords) {
      pending.push(h.request('POST', '/users/login', { body: { username: 'iggy', password } }));
      // One at a time, so arrival order is request order.
      await until(async () => {
        const metrics = (await h.request('GET', '/metrics', { token })).text;
        return gauge(metrics, 'http_password_verifications_running') + gauge(metrics, 'http_password_verifications_queued') === pending.length;
      }, `request ${pending.length} admitted`);
    }
    expect(verifier.calls).toHaveLength(ARGON2_VERIFY_CONCURRENCY_MAX);

    for (const refused of [
      await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'iggy' } }),
      await h.request('POST', '/users/login', { body: { username: 'nobody', password: 'whatever1' } }),
      await h.request('PUT', '/users/0/password', { token, body: { current_password: 'iggy', new_password: 'another-pass' } }),
    ]) {
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');
      expect(expectErrorShape(refused)).toEqual({
        id: 429,
        code: 'too_many_requests',
        reason: 'too many password verifications in progress on this replica; retry later',
        field: null,
      });
    }
    // The refusals never reached Argon2.
    expect(verifier.calls).toHaveLength(ARGON2_VERIFY_CONCURRENCY_MAX);
    expect(gauge((await h.request('GET', '/metrics', { token })).text, 'http_password_verifications_refused_total')).toBe(3);

    verifier.release();
    const replies = await Promise.all(pending);
    expect(verifier.calls).toEqual(passwords);
    replies.forEach((reply, index) => {
      if (index % 2 === 0) {
        expect(reply.status, `login ${index}`).toBe(200);
        expect(typeof reply.json.access_token.token).toBe('string');
      } else {
        expect(reply.status, `login ${index}`).toBe(400);
        expect(expectErrorShape(reply).code).toBe('invalid_credentials');
      }
    });
    // Drained: the next login and password change are served.
    expect((await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'iggy' } })).status).toBe(200);
    expect((await h.request('PUT', '/users/0/password', { token, body: { current_password: 'iggy', new_password: 'another-pass' } })).status).toBe(204);
    const metrics = (await h.request('GET', '/metrics', { token })).text;
    expect(gauge(metrics, 'http_password_verifications_running')).toBe(0);
    expect(gauge(metrics, 'http_password_verifications_queued')).toBe(0);
  });

  it('change-password verifies through the gate too', async () => {
    const verifier = heldVerifier();
    h = await harness({ app: { passwordVerifier: verifier.verify, passwordGate: { concurrencyMax: 1, queueMax: 0, startsPerSecondMax: Infinity } } });
    verifier.through(h.node.verifyPassword);
    const token = await h.rootToken();
    verifier.calls.length = 0;
    verifier.hold();
    const first = h.request('PUT', '/users/0/password', { token, body: { current_password: 'iggy', new_password: 'another-pass' } });
    await until(() => verifier.calls.length === 1, 'the change is verifying');
    expect((await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'iggy' } })).status).toBe(429);
    verifier.release();
    expect((await first).status).toBe(204);
    expect((await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'another-pass' } })).status).toBe(200);
  });
});

describe('the per-user login allowance', () => {
  it('each user gets a burst, then the refill rate; users do not share a bucket', () => {
    const clock = manualClock();
    const gate = new PasswordGate({ concurrencyMax: 1, queueMax: 0, startsPerSecondMax: Infinity, loginsPerUserBurst: 3, loginsPerUserPerSecond: 2 }, clock);
    expect([1, 2, 3, 4].map(() => gate.admitLogin(7))).toEqual([true, true, true, false]);
    expect(gate.admitLogin(0)).toBe(true);
    clock.advance(499);
    expect(gate.admitLogin(7)).toBe(false);
    clock.advance(1);
    expect([gate.admitLogin(7), gate.admitLogin(7)]).toEqual([true, false]);
    clock.advance(10_000);
    expect([1, 2, 3, 4].map(() => gate.admitLogin(7))).toEqual([true, true, true, false]);
    expect(gate.stats().loginsRefused).toBe(4);
  });

  it('HTTP: token logins, password logins and refreshes of one user share it, and past it answer 429', async () => {
    const h = await harness({ app: { passwordGate: { loginsPerUserBurst: 4, loginsPerUserPerSecond: 0.001 } } });
    try {
      const root = await h.rootToken();
      const created = await h.request('POST', '/personal-access-tokens', { token: root, body: { name: 'flood', expiry: 0 } });
      const pat = created.json.token as string;
      const statuses: number[] = [];
      for (let index = 0; index < 2; index++) statuses.push((await h.request('POST', '/personal-access-tokens/login', { body: { token: pat } })).status);
      statuses.push((await h.request('POST', '/users/refresh-token', { body: { token: root } })).status);
      statuses.push((await h.request('POST', '/personal-access-tokens/login', { body: { token: pat } })).status);
      const refused = await h.request('POST', '/users/login', { body: { username: 'iggy', password: 'iggy' } });
      // rootToken() took the first of the four.
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBeDefined();
      expect(expectErrorShape(refused).code).toBe('too_many_requests');
      const metrics = await h.request('GET', '/metrics', { token: root });
      expect(metrics.text).toMatch(/^vrmeta_logins_refused_total\{replica="0"\} 2$/m);
    } finally {
      await h.close();
    }
  });
});

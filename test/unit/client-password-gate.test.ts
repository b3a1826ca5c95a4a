/**
 * The credential gate covers the binary edge too: a password login on the client port runs under
 * the same bound on Argon2id verifications as HTTP's, so a login flood over TCP cannot take the
 * replica's CPU either. Beyond the bound a login is refused at once (the session ends with
 * SessionError; HTTP answers 429), and a gate with room verifies as before. ChangePassword's
 * verification of the current password runs under it as well (it was a guessing oracle as fast
 * as Argon2id), and so does every login's per-user allowance, token logins included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PasswordGate } from '../../src/http/password-gate.js';
import { OP, REASON, RawClient, name, numericId, result } from '../support/iggy-frames.js';
import { startBinaryNode, type BinaryNode } from '../support/binary-node.js';

let server: BinaryNode;
// One verification at a time, none waiting, at most one start per second: a burst of logins
// finds the gate full.
const gate = new PasswordGate({ concurrencyMax: 1, queueMax: 0, startsPerSecondMax: 1 });

beforeAll(async () => {
  server = await startBinaryNode({}, {}, undefined, gate);
});

afterAll(async () => {
  await server?.close();
});

describe('client port: password logins share the node password gate', () => {
  it('a burst of password logins beyond the bound is refused at once with SessionError, never verified', async () => {
    expect(server.node.passwordGate).toBe(gate);
    const clients = await Promise.all(Array.from({ length: 6 }, () => RawClient.connect(server.port)));
    try {
      const replies = await Promise.all(clients.map((client) => client.login('iggy', 'wrong password')));
      const refused = replies.filter((reply) => reply.reason === REASON.sessionError);
      const rejected = replies.filter((reply) => reply.reason === REASON.invalidCredentials);
      // One verification ran (and failed: wrong password); the rest never reached Argon2id.
      expect(rejected.length).toBe(1);
      expect(refused.length).toBe(5);
      expect(gate.stats().refused).toBeGreaterThanOrEqual(5);
      expect(gate.stats().completed).toBe(1);
    } finally {
      for (const client of clients) client.close();
    }
  });

  it('once the gate has room, a correct password logs in', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const client = await RawClient.connect(server.port);
    try {
      expect((await client.login()).status).toBe(0);
    } finally {
      client.close();
    }
  });
});

describe('client port: ChangePassword and the per-user login allowance share the gate', () => {
  let logins: BinaryNode;
  // Room for one verification now (none waiting, one start per second) and three logins a user.
  const small = new PasswordGate({ concurrencyMax: 1, queueMax: 0, startsPerSecondMax: 1, loginsPerUserBurst: 3, loginsPerUserPerSecond: 0.001 });

  beforeAll(async () => {
    logins = await startBinaryNode({}, {}, undefined, small);
  });

  afterAll(async () => {
    await logins?.close();
  });

  it('a burst of ChangePassword guesses beyond the bound is refused before Argon2id, with TransientNotAccepted', { timeout: 10_000 }, async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const client = await RawClient.connect(server.port);
    try {
      expect((await client.login()).status).toBe(0);
      // The login itself was the last verification the gate allowed this second.
      const before = gate.stats().completed;
      const replies = [];
      for (let guess = 0; guess < 5; guess++) {
        replies.push(await client.write(OP.changePassword, Buffer.concat([numericId(0), name(`guess-${guess}-x`), name('new-password-1')])));
      }
      const codes = replies.map((reply) => (reply.status !== 0 ? reply.status : result(reply.body).code));
      expect(codes.filter((code) => code === 58).length).toBeGreaterThanOrEqual(4);
      expect(gate.stats().completed - before).toBeLessThanOrEqual(1);
    } finally {
      client.close();
    }
  });

  it("a user's logins past its allowance end the session with SessionError", async () => {
    const replies = [];
    for (let attempt = 0; attempt < 5; attempt++) {
      const client = await RawClient.connect(logins.port);
      // The Argon2 bound allows one start a second: wait for it, so only the allowance refuses.
      await new Promise((resolve) => setTimeout(resolve, 1_050));
      replies.push(await client.login());
      client.close();
    }
    expect(replies.slice(0, 3).every((reply) => reply.status === 0 && reply.command === 8)).toBe(true);
    expect(replies.slice(3).every((reply) => reply.reason === REASON.sessionError)).toBe(true);
    expect(small.stats().loginsRefused).toBe(2);
  }, 20_000);
});

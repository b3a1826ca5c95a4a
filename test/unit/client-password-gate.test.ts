/**
 * The password gate covers the binary edge too: a password login on the client port runs under
 * the same bound on Argon2id verifications as HTTP's, so a login flood over TCP cannot take the
 * replica's CPU either. Beyond the bound a login is refused at once (the session ends with
 * SessionError; HTTP answers 429), and a gate with room verifies as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PasswordGate } from '../../src/http/password-gate.js';
import { REASON, RawClient } from '../support/iggy-frames.js';
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

/**
 * The client table's eviction under a login flood (src/vsr/client-table.ts): one user's
 * Registers never push out another user's sessions while the table has room for its share, and
 * every choice is a function of committed state alone, so a table restored from its snapshot
 * evicts exactly as the one that lived through the ops.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClientTable, type CachedReply } from '../../src/vsr/client-table.js';

/** The reply bytes the table reads back: command Reply, size, client, commit and request. */
function reply(client: bigint, commit: number, request = 0): CachedReply {
  const bytes = new Uint8Array(256);
  const view = new DataView(bytes.buffer);
  bytes[60] = 8;
  view.setUint32(48, 256, true);
  view.setBigUint64(160, client & 0xffff_ffff_ffff_ffffn, true);
  view.setBigUint64(168, client >> 64n, true);
  view.setBigUint64(184, BigInt(commit), true);
  view.setBigUint64(200, BigInt(request), true);
  return { request, commit, bytes };
}

/** Registers `client` for `userId` at op `commit`; returns the evicted client. */
function register(table: ClientTable, client: bigint, userId: number, commit: number): bigint | null {
  return table.commitRegister(client, userId, reply(client, commit));
}

describe('client table: eviction under a login flood', () => {
  it("a user at its share gives up its own least recent session, never another user's", () => {
    const table = new ClientTable(16, 4);
    register(table, 1n, 0, 1); // root's idle session, the oldest of all
    for (let index = 0; index < 4; index++) expect(register(table, 100n + BigInt(index), 7, 10 + index)).toBeNull();
    // The table has room (5 of 16) but user 7 holds its share: its own oldest (client 100) goes.
    expect(register(table, 200n, 7, 20)).toBe(100n);
    for (let index = 0; index < 50; index++) expect(register(table, 300n + BigInt(index), 7, 30 + index)).not.toBe(1n);
    expect(table.get(1n)).toBeDefined();
    expect(table.sessionsOf(7)).toBe(4);
    expect(table.size).toBe(5);
  });

  it('a full table takes the least recent session among the users holding the most', () => {
    const table = new ClientTable(6);
    register(table, 1n, 0, 1);
    register(table, 2n, 5, 2);
    register(table, 3n, 5, 3);
    register(table, 4n, 3, 4);
    register(table, 5n, 3, 5);
    register(table, 6n, 9, 6);
    // Users 3 and 5 hold two each: the least recent of their four sessions goes (client 2),
    // although root's client 1 is older.
    expect(register(table, 7n, 0, 7)).toBe(2n);
    // Users 0 and 3 now hold two each (5 holds one): root's client 1 is the least recent.
    expect(register(table, 8n, 9, 8)).toBe(1n);
    // Users 3 and 9 hold two: client 4 of user 3.
    expect(register(table, 9n, 5, 9)).toBe(4n);
    expect(table.get(6n)).toBeDefined();
  });

  it('one user alone loses its least recent session first, ties to the lowest slot (as before per-user shares)', () => {
    const table = new ClientTable(3);
    register(table, 1n, 0, 1);
    register(table, 2n, 0, 2);
    register(table, 3n, 0, 3);
    expect(table.commitReply(1n, 0n, reply(1n, 4, 1))).toBe('ok');
    expect(register(table, 4n, 0, 5)).toBe(2n);
  });

  it('a rebind as another user moves the session to that user', () => {
    const table = new ClientTable(8, 2);
    register(table, 1n, 4, 1);
    register(table, 1n, 6, 2);
    expect(table.sessionsOf(4)).toBe(0);
    expect(table.sessionsOf(6)).toBe(1);
  });

  it('a table restored from its snapshot evicts exactly as the one that lived through the ops', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ kind: fc.constant('register' as const), client: fc.integer({ min: 1, max: 40 }), user: fc.integer({ min: 0, max: 4 }) }),
            fc.record({ kind: fc.constant('reply' as const), client: fc.integer({ min: 1, max: 40 }) }),
            fc.record({ kind: fc.constant('remove' as const), client: fc.integer({ min: 1, max: 40 }) }),
            fc.record({ kind: fc.constant('restore' as const) }),
          ),
          { maxLength: 200 },
        ),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        (steps, capacity, shareRaw) => {
          const share = Math.min(capacity, shareRaw);
          const lived = new ClientTable(capacity, share);
          let restored = new ClientTable(capacity, share);
          let commit = 0;
          const request = new Map<bigint, number>();
          for (const step of steps) {
            commit += 1;
            if (step.kind === 'restore') {
              restored = ClientTable.fromSnapshot(restored.toSnapshot(), capacity, share);
              continue;
            }
            const client = BigInt(step.client);
            if (step.kind === 'register') {
              const existing = lived.get(client);
              // A rebind keeps the user in this test (the node refuses another user's session id).
              const user = existing?.userId ?? step.user;
              expect(register(restored, client, user, commit)).toBe(register(lived, client, user, commit));
              expect(restored.sessionsOf(user)).toBeLessThanOrEqual(share);
            } else if (step.kind === 'reply') {
              const next = (request.get(client) ?? 0) + 1;
              request.set(client, next);
              const lhs = lived.commitReply(client, 0n, reply(client, commit, next));
              expect(restored.commitReply(client, 0n, reply(client, commit, next))).toBe(lhs);
            } else {
              expect(restored.remove(client)).toBe(lived.remove(client));
            }
            expect([...restored.entries()].map((entry) => entry.clientId).sort()).toEqual([...lived.entries()].map((entry) => entry.clientId).sort());
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

/**
 * Logout revokes a token on every replica: `DELETE /users/logout` on one replica
 * commits RevokeAccessToken through VSR, every replica then refuses the token (another token of
 * the same user keeps working), and a replica that lost its disk and caught up by state transfer
 * (the revocation is below every peer's checkpoint, so it arrives in the snapshot, not in the log)
 * refuses it too.
 */
import { describe, expect, it } from 'vitest';
import { Cluster, clusterForAll } from './harness.js';
import { getText, login, rootActions } from './security-support.js';
import { writeStreamsUntilOp } from './workload.js';

/** --journal-slots 16 --prepare-queue-depth 2: a checkpoint every 12 ops. */
const CHECKPOINT_INTERVAL = 16 - 2 * 2;

let cluster: Cluster;
clusterForAll({ journalSlots: 16, prepareQueueDepth: 2 }, (started) => (cluster = started));

async function status(index: number, token: string): Promise<number> {
  return (await rootActions(cluster.httpAddress(index), token)).list;
}

describe('logout revokes the token on every replica', () => {
  it('refused everywhere after a logout on one replica, and on a replica that caught up by state transfer', async () => {
    await cluster.explain(async () => {
      const primary = await cluster.primary();
      const backups = cluster.indices().filter((index) => index !== primary);
      const [via, wiped] = backups as [number, number];
      const leaked = await login(cluster.httpAddress(primary));
      const other = await login(cluster.httpAddress(via));
      for (const index of cluster.indices()) expect(await status(index, leaked), `replica ${index} before`).toBe(200);

      // The replica that will lose its disk is down before the logout: it learns of it only by
      // state transfer.
      await cluster.stop(wiped);
      cluster.wipe(wiped);
      const logout = await fetch(`http://${cluster.httpAddress(via)}/users/logout`, { method: 'DELETE', headers: { authorization: `Bearer ${leaked}` } });
      expect(logout.status).toBe(204);
      const revokedAt = (await cluster.status(primary)).commit_max;
      for (const index of [primary, via]) {
        await cluster.waitFor(`replica ${index} refusing the token`, async () => (await status(index, leaked)) === 401, 10_000);
        expect(await status(index, other), `replica ${index}, another token`).toBe(200);
      }

      // Past two checkpoints beyond the revocation: no peer's log holds it any more.
      await writeStreamsUntilOp(cluster, 'after-logout', revokedAt + 3 * CHECKPOINT_INTERVAL, 3);
      await cluster.waitFor(
        'the peers checkpointed past the revocation',
        async () => (await Promise.all([primary, via].map((index) => cluster.status(index)))).every((s) => s.checkpoint_op > revokedAt + 1),
        20_000,
      );
      cluster.start(wiped);
      await cluster.waitFor('state transfer installed', () => cluster.events(wiped, 'state_transfer_installed')[0], 45_000);
      await cluster.waitForConverged(cluster.indices(), 45_000, 'catch-up after the install');
      expect(await status(wiped, leaked)).toBe(401);
      expect(await status(wiped, other)).toBe(200);
      for (const index of cluster.indices()) {
        const metrics = (await getText(`http://${cluster.httpAddress(index)}/metrics`, other)).text;
        expect(metrics, `replica ${index}`).toMatch(/^vsr_revoked_access_tokens\{[^}]*\} 1$/m);
      }
    });
  }, 180_000);
});

/**
 * A cluster configured with `--replicas` alone (no --http-peers, no --tcp-peers): each replica
 * learns its peers' client addresses from their advertisements over the replica connections.
 *   - a write sent to a backup is forwarded to the primary and commits;
 *   - /cluster/metadata on every replica lists every replica's HTTP address and binary TCP port.
 */
import { describe, expect, it } from 'vitest';
import { Cluster, clusterForAll, sleep } from './harness.js';

let cluster: Cluster;
clusterForAll({ peerOverrides: false }, (started) => (cluster = started), 120_000);

describe('cluster set-up from --replicas alone', () => {
  it('forwards a write sent to a backup to the primary', async () => {
    const primary = await cluster.primary();
    const backup = cluster.indices().find((index) => index !== primary)!;
    const client = await cluster.login(backup);
    const stream = await client.createStream('advertised-forwarding');
    expect(stream.name).toBe('advertised-forwarding');
    const onPrimary = await (await cluster.login(primary)).getStream('advertised-forwarding');
    expect(onPrimary.id).toBe(stream.id);
  }, 60_000);

  it("lists every replica's advertised addresses in /cluster/metadata on every replica", async () => {
    const expected = cluster
      .indices()
      .map((index) => ({ ip: '127.0.0.1', http: Number(cluster.httpAddress(index).split(':')[1]), tcp: cluster.tcpPort(index) }));
    for (const index of cluster.indices()) {
      const client = await cluster.login(index);
      let nodes: { ip: string; http: number; tcp: number }[] = [];
      // Advertisements arrive once each connection authenticates; the cluster formed already,
      // so this converges at once, but a poll keeps the test free of timing assumptions.
      for (let attemptIndex = 0; attemptIndex < 50; attemptIndex++) {
        const metadata = await client.getClusterMetadata();
        nodes = metadata.nodes.map((node) => ({ ip: node.ip, http: node.endpoints.http, tcp: node.endpoints.tcp }));
        if (nodes.length === expected.length && nodes.every((node) => node.http !== 0 && node.tcp !== 0)) break;
        await sleep(100);
      }
      expect(nodes).toEqual(expected);
    }
  }, 60_000);
});

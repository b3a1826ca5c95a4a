/**
 * A real single-replica node in this process (its disk in a temp directory, its sockets on
 * 127.0.0.1 with ports from listen(0)), with the Iggy binary client port started: for tests
 * that drive the client plane end to end without spawning processes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { PasswordGate } from '../../src/http/password-gate.js';
import { processOnlySecret, tokenKeyOf } from '../../src/node/cluster-secret.js';
import { resolveConfig, type ConfigKey } from '../../src/node/config.js';
import { ReplicaNode } from '../../src/node/replica-node.js';

export interface BinaryNode {
  readonly node: ReplicaNode;
  readonly port: number;
  /** The HS256 key of this node's access tokens (what `vrmeta start` hands the HTTP app). */
  readonly jwtSecret: Uint8Array;
  close(): Promise<void>;
}

export async function startBinaryNode(
  overrides: Partial<Record<ConfigKey, unknown>> = {},
  listener: Parameters<ReplicaNode['startClientListener']>[0] = {},
  disconnectGraceMs?: number,
  passwordGate?: PasswordGate,
): Promise<BinaryNode> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vrmeta-binary-'));
  const config = resolveConfig({
    replica_id: 0,
    replicas: '127.0.0.1:0',
    http: '127.0.0.1:0',
    tcp: '127.0.0.1:0',
    data_dir: dataDir,
    journal_slots: 256,
    prepare_queue_depth: 8,
    clients_table_max: 64,
    log_level: 'silent',
    insecure: true,
    ...overrides,
  });
  const clusterSecret = processOnlySecret();
  const node = await ReplicaNode.create({
    config,
    clusterSecret,
    logger: pino({ level: 'silent' }),
    ...(passwordGate === undefined ? {} : { passwordGate }),
    ...(disconnectGraceMs === undefined ? {} : { binaryDisconnectGraceMs: disconnectGraceMs }),
  });
  await node.start();
  const address = await node.startClientListener(listener);
  // A single replica is primary of view 0 at once; wait until it admits requests.
  const deadline = Date.now() + 10_000;
  while (!node.core.canAcceptRequests()) {
    if (Date.now() > deadline) throw new Error('the single replica never became an active primary');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return {
    node,
    port: address.port,
    jwtSecret: tokenKeyOf(clusterSecret, node.cluster),
    async close() {
      await node.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

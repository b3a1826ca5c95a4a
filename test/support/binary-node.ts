/**
 * A real single-replica node in this process (its disk in a temp directory, its sockets on
 * 127.0.0.1 with ports from listen(0)), with the Iggy binary client port started: for tests
 * that drive the client plane end to end without spawning processes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { resolveConfig, type ConfigKey } from '../../src/node/config.js';
import { ReplicaNode } from '../../src/node/replica-node.js';

export interface BinaryNode {
  readonly node: ReplicaNode;
  readonly port: number;
  close(): Promise<void>;
}

export async function startBinaryNode(
  overrides: Partial<Record<ConfigKey, unknown>> = {},
  listener: Parameters<ReplicaNode['startClientListener']>[0] = {},
  disconnectGraceMs?: number,
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
    ...overrides,
  });
  const node = await ReplicaNode.create({
    config,
    logger: pino({ level: 'silent' }),
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
    async close() {
      await node.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

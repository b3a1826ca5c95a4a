/**
 * One replica of three driven by hand, for unit tests of the core: its storage requests wait
 * until the test completes them (`flush`), its bus and logger are the test's.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { Prng } from '../../src/stdx/prng.js';
import { TestStateMachine } from '../../src/testing/test-state-machine.js';
import { replicaConfig } from '../../src/vsr/config.js';
import type { Logger, MessageBus, StorageRequest } from '../../src/vsr/io.js';
import { Replica } from '../../src/vsr/replica.js';

export const loneKernels = createTsKernels();

export interface LoneReplicaOptions {
  readonly cluster: bigint;
  readonly bus: MessageBus;
  readonly logger: Logger;
  readonly prngSeed: number;
}

export function loneReplica(options: LoneReplicaOptions) {
  const pending: { id: number; request: StorageRequest<MetadataMachineSnapshot> }[] = [];
  const replica = new Replica({
    config: replicaConfig({
      cluster: options.cluster,
      replica: 0,
      replicaCount: 3,
      viewProbeAttemptsMax: 2,
      timeouts: { requestStartViewMessage: 2 },
    }),
    stateMachine: new TestStateMachine(),
    boot: { vsrState: null, snapshot: null, prepares: [], provableCommit: 0 },
    env: {
      kernels: loneKernels,
      storage: { submit: (id, request) => pending.push({ id, request }) },
      bus: options.bus,
      clock: { realtimeUs: () => 1_700_000_000_000_000 },
      prng: new Prng(options.prngSeed),
      logger: options.logger,
    },
  });
  /** Completes every pending storage request, in order, successfully. */
  const flush = (): void => {
    while (pending.length > 0) replica.onStorageDone(pending.shift()!.id, { ok: true });
  };
  return { replica, pending, flush };
}

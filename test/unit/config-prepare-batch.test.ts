/**
 * `prepare_batch_max`: queued client requests the primary puts into one prepare (src/vsr/batch.ts),
 * its default, its sources and its range (1 disables batching; decode accepts up to
 * BATCH_REQUESTS_MAX whatever the local setting).
 */
import { describe, expect, it } from 'vitest';
import { readConfigEnv } from '../../src/node/config.js';
import { BATCH_REQUESTS_MAX } from '../../src/vsr/batch.js';
import { ConfigError, replicaConfig } from '../../src/vsr/config.js';
import { config, refusal } from './config-fixtures.js';

describe('config: prepare_batch_max', () => {
  it('defaults to 32; the file, the environment and a flag set it, in that precedence', () => {
    expect(config().prepareBatchMax).toBe(32);
    expect(config({ prepare_batch_max: 4 }).prepareBatchMax).toBe(4);
    const env = readConfigEnv({ VRMETA_PREPARE_BATCH_MAX: '8' });
    expect(config({ prepare_batch_max: 4 }, env).prepareBatchMax).toBe(8);
    expect(config({ prepare_batch_max: 4 }, env, { prepare_batch_max: '1' }).prepareBatchMax).toBe(1);
  });

  it('refuses 0, more than BATCH_REQUESTS_MAX and non-integers, naming the key', () => {
    expect(refusal({ prepare_batch_max: 0 })).toBe('prepare_batch_max');
    expect(refusal({ prepare_batch_max: BATCH_REQUESTS_MAX + 1 })).toBe('prepare_batch_max');
    expect(refusal({ prepare_batch_max: 'many' })).toBe('prepare_batch_max');
    expect(config({ prepare_batch_max: BATCH_REQUESTS_MAX }).prepareBatchMax).toBe(BATCH_REQUESTS_MAX);
  });

  it('reaches the replica config, which checks it too', () => {
    expect(replicaConfig({ cluster: 1n, replica: 0, replicaCount: 1 }).prepareBatchMax).toBe(32);
    expect(replicaConfig({ cluster: 1n, replica: 0, replicaCount: 1, prepareBatchMax: 1 }).prepareBatchMax).toBe(1);
    expect(() => replicaConfig({ cluster: 1n, replica: 0, replicaCount: 1, prepareBatchMax: 0 })).toThrow(ConfigError);
  });

  it('prepare_eager_max (replica config): 1 with batching on, the pipeline depth with it off; 1..depth', () => {
    const base = { cluster: 1n, replica: 0, replicaCount: 1, prepareQueueDepth: 8 } as const;
    expect(replicaConfig(base).prepareEagerMax).toBe(1);
    expect(replicaConfig({ ...base, prepareBatchMax: 1 }).prepareEagerMax).toBe(8);
    expect(replicaConfig({ ...base, prepareEagerMax: 8 }).prepareEagerMax).toBe(8);
    for (const bad of [0, 9, 1.5]) {
      expect(() => replicaConfig({ ...base, prepareEagerMax: bad })).toThrow(/^prepare_eager_max: must be 1\.\.8/);
    }
  });
});

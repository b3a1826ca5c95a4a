/**
 * `heartbeat_ms` and `election_timeout_ms`: the failure detector's two settings, their defaults,
 * sources and refusals, and the replica timers they become.
 */
import { describe, expect, it } from 'vitest';
import { nodeTimeouts, readConfigEnv } from '../../src/node/config.js';
import { DEFAULT_TIMEOUT_TICKS, detectorTimeouts, replicaConfig } from '../../src/vsr/config.js';
import { config, refusal, refusalMessage } from './config-fixtures.js';

describe('config: heartbeat_ms and election_timeout_ms', () => {
  it('default to 100 and 500 ms, which are the replica core defaults in ticks', () => {
    const resolved = config();
    expect([resolved.heartbeatMs, resolved.electionTimeoutMs]).toEqual([100, 500]);
    expect(nodeTimeouts(resolved)).toEqual(DEFAULT_TIMEOUT_TICKS);
    expect(detectorTimeouts(10, 50)).toEqual(DEFAULT_TIMEOUT_TICKS);
  });

  it('the file, the environment and a flag set them, in that precedence', () => {
    expect(config({ heartbeat_ms: 50 }).heartbeatMs).toBe(50);
    const env = readConfigEnv({ VRMETA_HEARTBEAT_MS: '200', VRMETA_ELECTION_TIMEOUT_MS: '1000' });
    const fromEnv = config({ heartbeat_ms: 50 }, env);
    expect([fromEnv.heartbeatMs, fromEnv.electionTimeoutMs]).toEqual([200, 1000]);
    const fromFlag = config({ heartbeat_ms: 50 }, env, { election_timeout_ms: '2000' });
    expect([fromFlag.heartbeatMs, fromFlag.electionTimeoutMs]).toEqual([200, 2000]);
  });

  it('become the heartbeat, failure and view-change timers; retransmission keeps its own', () => {
    const timeouts = nodeTimeouts(config({ heartbeat_ms: 200, election_timeout_ms: 1500 }));
    expect(timeouts).toEqual({
      prepare: DEFAULT_TIMEOUT_TICKS.prepare,
      commitMessage: 20,
      normalHeartbeat: 150,
      startViewChangeMessage: 20,
      doViewChangeMessage: 20,
      viewChangeStatus: 300,
      requestStartViewMessage: 40,
      repair: DEFAULT_TIMEOUT_TICKS.repair,
    });
    expect(replicaConfig({ cluster: 1n, replica: 0, replicaCount: 3, timeouts }).timeouts).toEqual(timeouts);
  });

  it('refuses values off the 10 ms tick, out of range or not integers, naming the key', () => {
    expect(refusal({ heartbeat_ms: 105 })).toBe('heartbeat_ms');
    expect(refusalMessage({ heartbeat_ms: 105 })).toMatch(/multiple of the 10 ms tick, got 105/);
    expect(refusal({ election_timeout_ms: 555 })).toBe('election_timeout_ms');
    expect(refusal({ heartbeat_ms: 0 })).toBe('heartbeat_ms');
    expect(refusal({ heartbeat_ms: 20_000 })).toBe('heartbeat_ms');
    expect(refusal({ election_timeout_ms: 'soon' })).toBe('election_timeout_ms');
  });

  it('refuses an election timeout under three heartbeats by its own key, and accepts three', () => {
    expect(refusal({ heartbeat_ms: 100, election_timeout_ms: 290 })).toBe('election_timeout_ms');
    expect(refusalMessage({ heartbeat_ms: 100, election_timeout_ms: 290 })).toMatch(
      /at least 3 heartbeat intervals \(300 ms with heartbeat_ms 100\), got 290/,
    );
    expect(config({ heartbeat_ms: 100, election_timeout_ms: 300 }).electionTimeoutMs).toBe(300);
    // The replica core holds the same floor for configurations built without the node.
    const timeouts = { ...DEFAULT_TIMEOUT_TICKS, normalHeartbeat: 29 };
    expect(() => replicaConfig({ cluster: 1n, replica: 0, replicaCount: 3, timeouts })).toThrow(
      /^timeouts\.normalHeartbeat: must be >= 3 heartbeat intervals \(30 ticks\)/,
    );
  });
});

/**
 * `http_sessions_per_credential`: the bound on one HTTP credential's VSR sessions
 * (src/node/client-sessions.ts), its default, its sources and its range.
 */
import { describe, expect, it } from 'vitest';
import { readConfigEnv } from '../../src/node/config.js';
import { config, refusal } from './config-fixtures.js';


describe('config: http_sessions_per_credential', () => {
  it('defaults to 16; the file, the environment and a flag set it, in that precedence', () => {
    expect(config().httpSessionsPerCredential).toBe(64);
    expect(config({ http_sessions_per_credential: 4 }).httpSessionsPerCredential).toBe(4);
    const env = readConfigEnv({ VRMETA_HTTP_SESSIONS_PER_CREDENTIAL: '8' });
    expect(config({ http_sessions_per_credential: 4 }, env).httpSessionsPerCredential).toBe(8);
    expect(config({ http_sessions_per_credential: 4 }, env, { http_sessions_per_credential: '2' }).httpSessionsPerCredential).toBe(2);
  });

  it('refuses 0, more than 1024 and non-integers, naming the key', () => {
    expect(refusal({ http_sessions_per_credential: 0 })).toBe('http_sessions_per_credential');
    expect(refusal({ http_sessions_per_credential: 1025 })).toBe('http_sessions_per_credential');
    expect(refusal({ http_sessions_per_credential: 'many' })).toBe('http_sessions_per_credential');
    expect(config({ http_sessions_per_credential: 1 }).httpSessionsPerCredential).toBe(1);
  });
});

describe('config: sessions_per_user_max', () => {
  it('defaults to an eighth of clients_table_max; the file, the environment and a flag set it', () => {
    expect(config().sessionsPerUserMax).toBe(1024);
    expect(config({ clients_table_max: 100 }).sessionsPerUserMax).toBe(12);
    expect(config({ clients_table_max: 4 }).sessionsPerUserMax).toBe(1);
    expect(config({ sessions_per_user_max: 20 }).sessionsPerUserMax).toBe(20);
    const env = readConfigEnv({ VRMETA_SESSIONS_PER_USER_MAX: '30' });
    expect(config({ sessions_per_user_max: 20 }, env, { sessions_per_user_max: '40' }).sessionsPerUserMax).toBe(40);
  });

  it('refuses 0, more than clients_table_max and non-integers, naming the key', () => {
    expect(refusal({ sessions_per_user_max: 0 })).toBe('sessions_per_user_max');
    expect(refusal({ clients_table_max: 16, sessions_per_user_max: 17 })).toBe('sessions_per_user_max');
    expect(refusal({ sessions_per_user_max: 'all' })).toBe('sessions_per_user_max');
    expect(config({ clients_table_max: 16, sessions_per_user_max: 16 }).sessionsPerUserMax).toBe(16);
  });
});

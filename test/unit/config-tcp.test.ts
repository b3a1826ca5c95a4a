/**
 * The binary client port's configuration: defaults (DESIGN.md §2.2: 127.0.0.1:8090), the
 * precedence of flags over environment over file, and a refusal naming the key for every
 * invalid value.
 */
import { describe, expect, it } from 'vitest';
import { readConfigEnv } from '../../src/node/config.js';
import { config, refusal } from './config-fixtures.js';


describe('config: metrics_public', () => {
  it('defaults to false (GET /metrics needs a bearer); a flag, the environment or the file turns it on', () => {
    expect(config().metricsPublic).toBe(false);
    expect(config({ metrics_public: true }).metricsPublic).toBe(true);
    expect(config(readConfigEnv({ VRMETA_METRICS_PUBLIC: 'true' })).metricsPublic).toBe(true);
    expect(config({ metrics_public: true }, readConfigEnv({ VRMETA_METRICS_PUBLIC: '0' })).metricsPublic).toBe(false);
    expect(refusal({ metrics_public: 'yes' })).toBe('metrics_public');
  });
});

describe('config: the Iggy binary client port', () => {
  it('defaults to 127.0.0.1:8090, no peers, 10,000 connections, no TLS', () => {
    expect(config()).toMatchObject({ tcp: '127.0.0.1:8090', tcpPeers: null, tcpConnectionsMax: 10_000, tcpTlsCert: null, tcpTlsKey: null });
  });

  it('flag over environment over file', () => {
    const env = readConfigEnv({ VRMETA_TCP: '127.0.0.1:9000', VRMETA_TCP_CONNECTIONS_MAX: '50' });
    expect(config({ tcp: '127.0.0.1:7000' }, env)).toMatchObject({ tcp: '127.0.0.1:9000', tcpConnectionsMax: 50 });
    expect(config({ tcp: '127.0.0.1:7000' }, env, { tcp: '127.0.0.1:8000' })).toMatchObject({ tcp: '127.0.0.1:8000' });
  });

  it('peers: one per replica; TLS: a certificate and a key together; limits in range', () => {
    const replicas = { replicas: '127.0.0.1:1,127.0.0.1:2,127.0.0.1:3' };
    expect(config(replicas, { tcp_peers: '127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092' }).tcpPeers).toHaveLength(3);
    expect(refusal(replicas, { tcp_peers: '127.0.0.1:8090' })).toBe('tcp_peers');
    expect(refusal({ tcp: 'nowhere' })).toBe('tcp');
    expect(refusal({ tcp_tls_cert: '/tmp/cert.pem' })).toBe('tcp_tls_key');
    expect(refusal({ tcp_tls_key: '/tmp/key.pem' })).toBe('tcp_tls_cert');
    expect(config({ tcp_tls_cert: '/c.pem', tcp_tls_key: '/k.pem' })).toMatchObject({ tcpTlsCert: '/c.pem', tcpTlsKey: '/k.pem' });
    expect(refusal({ tcp_connections_max: 0 })).toBe('tcp_connections_max');
    expect(refusal({ tcp_connections_max: 'many' })).toBe('tcp_connections_max');
  });
});

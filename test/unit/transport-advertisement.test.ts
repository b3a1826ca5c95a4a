import { describe, expect, it } from 'vitest';
import {
  ADVERTISEMENT_VERSION,
  AdvertisedKind,
  decodeAdvertisement,
  encodeAdvertisement,
  resolveAdvertisedHost,
} from '../../src/transport/advertisement.js';

function entry(kind: number, text: string): number[] {
  const bytes = [...new TextEncoder().encode(text)];
  return [kind, bytes.length, ...bytes];
}

describe('replica advertisement', () => {
  it('round-trips both addresses, IPv6 included', () => {
    const body = encodeAdvertisement({ http: '127.0.0.1:3000', tcp: '[::1]:8090' });
    expect(decodeAdvertisement(ADVERTISEMENT_VERSION, body)).toEqual({ ok: true, advertisement: { http: '127.0.0.1:3000', tcp: '[::1]:8090' } });
    expect(decodeAdvertisement(ADVERTISEMENT_VERSION, encodeAdvertisement({ http: null, tcp: null }))).toEqual({ ok: true, advertisement: { http: null, tcp: null } });
  });

  it('skips entries of a kind it does not know (a later version may add kinds)', () => {
    const body = new Uint8Array([...entry(9, 'anything'), ...entry(AdvertisedKind.http, 'node-a:3000')]);
    expect(decodeAdvertisement(ADVERTISEMENT_VERSION, body)).toEqual({ ok: true, advertisement: { http: 'node-a:3000', tcp: null } });
  });

  it.each([
    { name: 'another version', version: 2, body: entry(AdvertisedKind.http, 'a:1'), reason: 'version_unsupported' },
    { name: 'an entry header cut short', version: 1, body: [AdvertisedKind.http], reason: 'truncated' },
    { name: 'an entry longer than the body', version: 1, body: [AdvertisedKind.tcp, 10, 0x61], reason: 'truncated' },
    { name: 'the same kind twice', version: 1, body: [...entry(AdvertisedKind.http, 'a:1'), ...entry(AdvertisedKind.http, 'b:2')], reason: 'duplicate_kind' },
    { name: 'port 0', version: 1, body: entry(AdvertisedKind.http, 'a:0'), reason: 'address_invalid' },
    { name: 'no port', version: 1, body: entry(AdvertisedKind.tcp, 'host-only'), reason: 'address_invalid' },
    { name: 'a control byte', version: 1, body: entry(AdvertisedKind.http, 'a\nb:1'), reason: 'address_invalid' },
  ])('refuses $name with reason $reason', ({ version, body, reason }) => {
    expect(decodeAdvertisement(version, new Uint8Array(body))).toEqual({ ok: false, reason });
  });

  it('replaces an unspecified host with the host the peer is reached at', () => {
    expect(resolveAdvertisedHost('0.0.0.0:3000', '10.0.0.7')).toBe('10.0.0.7:3000');
    expect(resolveAdvertisedHost('[::]:3000', '::ffff:10.0.0.7')).toBe('10.0.0.7:3000');
    expect(resolveAdvertisedHost('[::]:3000', 'fd00::7')).toBe('[fd00::7]:3000');
    expect(resolveAdvertisedHost('node-a:3000', '10.0.0.7')).toBe('node-a:3000');
  });
});

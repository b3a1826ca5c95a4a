/**
 * A replica's advertisement: the client-facing addresses it serves (HTTP, Iggy binary TCP), sent
 * to every peer in a ReplicaAdvertise frame right after the replica handshake authenticates the
 * connection (and again if they change). With it a backup forwards writes to the primary and
 * `/cluster/metadata` lists every replica from `--replicas` alone; `--http-peers` and
 * `--tcp-peers` remain overrides.
 *
 * Wire (version 1, the header's `version` field): the body is a sequence of entries
 *   kind u8 | length u8 | `host:port` (length bytes, ASCII)
 * kind 1 = HTTP, 2 = TCP. Each known kind at most once; entries of an unknown kind are skipped
 * (a later version may add kinds without breaking this reader); the body is at most
 * ADVERTISEMENT_SIZE_MAX bytes (the frame checks refuse a larger one). A header `version` other
 * than 1 is refused whole. Every refusal has a reason, counted by the bus; a refused
 * advertisement is ignored (the connection stays: replication does not depend on it).
 *
 * Addresses are the bound ones (a configured port 0 resolved) unless the operator overrides
 * them (`--advertise-http`, `--advertise-tcp`). A host that is the unspecified address
 * (0.0.0.0, ::) is sent as is, and the receiver replaces it with the host it reaches the sender
 * at (`resolveAdvertisedHost`): the host it dialled, or the connection's remote address.
 */
import { ADVERTISEMENT_SIZE_MAX } from '../constants.js';
import { assert } from '../stdx/assert.js';
import { formatHostPort, parseHostPort } from './address.js';
import { zeroedCounters } from '../stdx/counters.js';

export const ADVERTISEMENT_VERSION = 1;

export const AdvertisedKind = { http: 1, tcp: 2 } as const;

export interface Advertisement {
  /** `host:port` of the sender's HTTP listener, null when not advertised. */
  readonly http: string | null;
  /** `host:port` of the sender's Iggy binary client listener, null when not advertised. */
  readonly tcp: string | null;
}

/** Why an advertisement was refused. Stable snake_case strings: metric labels and log fields. */
export const AdvertisementRefusal = {
  versionUnsupported: 'version_unsupported',
  truncated: 'truncated',
  duplicateKind: 'duplicate_kind',
  addressInvalid: 'address_invalid',
} as const;
export type AdvertisementRefusal = (typeof AdvertisementRefusal)[keyof typeof AdvertisementRefusal];

export function advertisementRefusalCounters(): Record<AdvertisementRefusal, number> {
  return zeroedCounters(Object.values(AdvertisementRefusal));
}

const ADDRESS_SIZE_MAX = 255;
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;

/** A concrete `host:port` (port 1..65535, printable ASCII), or null. */
function validAddress(text: string): string | null {
  if (text.length === 0 || text.length > ADDRESS_SIZE_MAX || !PRINTABLE_ASCII.test(text)) return null;
  try {
    const parsed = parseHostPort(text);
    return parsed.port === 0 ? null : formatHostPort(parsed);
  } catch {
    return null;
  }
}

export function encodeAdvertisement(advertisement: Advertisement): Uint8Array {
  const entries: [number, string][] = [];
  if (advertisement.http !== null) entries.push([AdvertisedKind.http, advertisement.http]);
  if (advertisement.tcp !== null) entries.push([AdvertisedKind.tcp, advertisement.tcp]);
  const parts = entries.map(([kind, address]) => {
    assert(validAddress(address) !== null, `advertisement: a concrete host:port, got ${JSON.stringify(address)}`);
    const text = new TextEncoder().encode(address);
    const entry = new Uint8Array(2 + text.byteLength);
    entry[0] = kind;
    entry[1] = text.byteLength;
    entry.set(text, 2);
    return entry;
  });
  const size = parts.reduce((sum, part) => sum + part.byteLength, 0);
  assert(size <= ADVERTISEMENT_SIZE_MAX);
  const body = new Uint8Array(size);
  let offset = 0;
  for (const part of parts) {
    body.set(part, offset);
    offset += part.byteLength;
  }
  return body;
}

export type DecodedAdvertisement =
  | { readonly ok: true; readonly advertisement: Advertisement }
  | { readonly ok: false; readonly reason: AdvertisementRefusal };

/** Never throws: untrusted bytes from an authenticated peer are refused with a reason. */
export function decodeAdvertisement(version: number, body: Uint8Array): DecodedAdvertisement {
  if (version !== ADVERTISEMENT_VERSION) return { ok: false, reason: AdvertisementRefusal.versionUnsupported };
  if (body.byteLength > ADVERTISEMENT_SIZE_MAX) return { ok: false, reason: AdvertisementRefusal.truncated };
  let http: string | null = null;
  let tcp: string | null = null;
  let offset = 0;
  while (offset < body.byteLength) {
    if (offset + 2 > body.byteLength) return { ok: false, reason: AdvertisementRefusal.truncated };
    const kind = body[offset]!;
    const length = body[offset + 1]!;
    const end = offset + 2 + length;
    if (end > body.byteLength) return { ok: false, reason: AdvertisementRefusal.truncated };
    const bytes = body.subarray(offset + 2, end);
    offset = end;
    if (kind !== AdvertisedKind.http && kind !== AdvertisedKind.tcp) continue;
    const address = validAddress(new TextDecoder('latin1').decode(bytes));
    if (address === null) return { ok: false, reason: AdvertisementRefusal.addressInvalid };
    if (kind === AdvertisedKind.http) {
      if (http !== null) return { ok: false, reason: AdvertisementRefusal.duplicateKind };
      http = address;
    } else {
      if (tcp !== null) return { ok: false, reason: AdvertisementRefusal.duplicateKind };
      tcp = address;
    }
  }
  return { ok: true, advertisement: { http, tcp } };
}

/** 0.0.0.0, :: and their spellings: a listener's "every interface", not a reachable host. */
export function isUnspecifiedHost(host: string): boolean {
  return host === '0.0.0.0' || /^[0:]+$/.test(host) || host === '::0';
}

/**
 * An advertised address as the receiver should use it: an unspecified host is replaced with
 * `reachedHost`, the host this replica reaches the sender at. IPv4-mapped IPv6 remote addresses
 * (`::ffff:10.0.0.2`) are unwrapped.
 */
export function resolveAdvertisedHost(address: string, reachedHost: string): string {
  const parsed = parseHostPort(address);
  if (!isUnspecifiedHost(parsed.host)) return address;
  const host = reachedHost.startsWith('::ffff:') && reachedHost.includes('.') ? reachedHost.slice('::ffff:'.length) : reachedHost;
  return formatHostPort({ host, port: parsed.port });
}

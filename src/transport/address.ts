/**
 * Replica addresses as configured (`--replicas host:port,...`): `host:port` or `[v6]:port`.
 */

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** `host:port` or `[v6]:port`; throws a configuration error naming the problem. */
export function parseHostPort(address: string): HostPort {
  const match = /^\[([^\]]+)\]:(\d{1,5})$/.exec(address) ?? /^([^:[\]]+):(\d{1,5})$/.exec(address);
  const port = Number(match?.[2]);
  if (match === null || match[1] === undefined || !(port >= 0 && port <= 0xffff)) {
    throw new Error(`invalid replica address ${JSON.stringify(address)}: expected host:port`);
  }
  return { host: match[1], port };
}

export function formatHostPort(address: HostPort | null): string {
  if (address === null) return '';
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}


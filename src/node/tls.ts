/**
 * TLS for the listeners, as Iggy (`[tcp.tls]`, `[http.tls]`) and etcd (`--cert-file`,
 * `--key-file`, `--trusted-ca-file`, `--peer-*`) offer it: one certificate and key per replica,
 * and a CA for the replica mesh.
 *
 *   --tls-cert + --tls-key : the HTTP listener serves HTTPS (and a backup forwards writes to the
 *                            primary over HTTPS, trusting --tls-ca when given, else the system's CAs);
 *   --tls-ca (with both)   : the replica port runs mutual TLS: each side presents its certificate,
 *                            and only certificates issued by this CA are accepted; the dialling
 *                            side also checks the peer's certificate names the address it dialled.
 *
 * TLS does not replace the cluster secret: the replica handshake (PSK HMAC) still runs inside
 * the TLS stream, so a certificate alone does not make a replica, and TLS adds what the PSK
 * handshake cannot give: confidentiality and integrity of every frame after it.
 *
 * The material is loaded and checked once at startup (a bad file is a configuration error, exit
 * 2); this module is the one place that turns it into server and client options, so the Iggy
 * binary client listener (not built yet) takes its TLS from here too.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { createSecureContext, type ConnectionOptions, type TlsOptions } from 'node:tls';

/** A PEM file larger than this is not a certificate, key or CA bundle we load. */
export const TLS_FILE_SIZE_MAX = 1024 * 1024;
/** Oldest protocol the listeners accept. The replica mesh (both ends ours) takes only 1.3. */
export const TLS_VERSION_MIN = 'TLSv1.2';
export const TLS_MESH_VERSION_MIN = 'TLSv1.3';
/** Sockets of the HTTPS forwarder's keep-alive agent (the forwarder bounds requests in flight). */
const FORWARD_SOCKETS_MAX = 128;

export interface TlsFiles {
  readonly cert: string;
  readonly key: string;
  /** CA bundle for the replica mesh (and the forwarder's trust); null = no mesh TLS. */
  readonly ca: string | null;
}

export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | null;
}

/** Why TLS material was refused; names the file, never its content. */
export class TlsConfigError extends Error {
  override readonly name = 'TlsConfigError';
  /** The configuration key the problem belongs to. */
  readonly key: 'tls_cert' | 'tls_key' | 'tls_ca';

  constructor(key: 'tls_cert' | 'tls_key' | 'tls_ca', message: string) {
    super(message);
    this.key = key;
  }
}

function readPem(key: TlsConfigError['key'], path: string, privateKey: boolean): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY);
  } catch (error) {
    throw new TlsConfigError(key, `cannot open ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new TlsConfigError(key, `${path} is not a regular file`);
    // A private key anyone on the machine can read is not private (group access is common for
    // service accounts, e.g. ssl-cert, and allowed).
    if (privateKey && (stat.mode & 0o004) !== 0) throw new TlsConfigError(key, `${path} is readable by others; run chmod o-r ${path}`);
    if (stat.size > TLS_FILE_SIZE_MAX) throw new TlsConfigError(key, `${path} is ${stat.size} bytes, more than ${TLS_FILE_SIZE_MAX}`);
    const buffer = Buffer.alloc(stat.size);
    let length = 0;
    while (length < buffer.byteLength) {
      const read = readSync(fd, buffer, length, buffer.byteLength - length, null);
      if (read === 0) break;
      length += read;
    }
    const pem = buffer.subarray(0, length);
    if (!pem.includes('-----BEGIN ')) throw new TlsConfigError(key, `${path} holds no PEM block`);
    return pem;
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads and checks the files: each parses, and the key belongs to the certificate (a secure
 * context is built once here so a mismatch fails at startup, not at the first connection).
 */
export function loadTls(files: TlsFiles): TlsMaterial {
  const cert = readPem('tls_cert', files.cert, false);
  const key = readPem('tls_key', files.key, true);
  const ca = files.ca === null ? null : readPem('tls_ca', files.ca, false);
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    throw new TlsConfigError('tls_key', `${files.cert} and ${files.key} are not a certificate and its private key: ${(error as Error).message}`);
  }
  if (ca !== null) {
    try {
      createSecureContext({ ca });
    } catch (error) {
      throw new TlsConfigError('tls_ca', `${files.ca} is not a CA bundle: ${(error as Error).message}`);
    }
  }
  return { cert, key, ca };
}

/** HTTPS (and, later, the TLS client listener): the replica's certificate, no client certificate. */
export function serverTlsOptions(material: TlsMaterial): TlsOptions {
  return { cert: material.cert, key: material.key, minVersion: TLS_VERSION_MIN };
}

export interface ReplicaMeshTls {
  /** The accepting side: requires and verifies the peer's certificate against the CA. */
  readonly server: TlsOptions;
  /** The dialling side: presents its certificate; verifies the acceptor's (CA and name). */
  readonly client: ConnectionOptions;
}

/** Mutual TLS for the replica port; null without a CA (the mesh then runs plain TCP + PSK). */
export function replicaMeshTls(material: TlsMaterial): ReplicaMeshTls | null {
  if (material.ca === null) return null;
  const common = { cert: material.cert, key: material.key, ca: material.ca, minVersion: TLS_MESH_VERSION_MIN } as const;
  return {
    server: { ...common, requestCert: true, rejectUnauthorized: true },
    client: { ...common, rejectUnauthorized: true },
  };
}

/**
 * A `fetch` over node:https for the forwarder (global fetch cannot be given a CA), trusting `ca`
 * when given and the system's CAs otherwise. It answers what the forwarder reads: status,
 * headers and a streamed body; socket errors keep their `code` (ECONNREFUSED is retryable there)
 * and an aborted signal rejects with an AbortError.
 */
export function httpsFetch(ca: Buffer | null): typeof fetch {
  const agent = new HttpsAgent({ keepAlive: true, maxSockets: FORWARD_SOCKETS_MAX, ...(ca === null ? {} : { ca }), minVersion: TLS_VERSION_MIN });
  const call = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): Promise<Response> =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (url.protocol !== 'https:') {
        reject(new TypeError(`httpsFetch: ${url.protocol} URL`));
        return;
      }
      const method = init?.method ?? 'GET';
      const headers: Record<string, string> = {};
      new Headers(init?.headers).forEach((value, name) => {
        headers[name] = value;
      });
      const body = init?.body;
      if (body !== undefined && body !== null && typeof body !== 'string') {
        reject(new TypeError('httpsFetch: only string bodies are forwarded'));
        return;
      }
      if (typeof body === 'string') headers['content-length'] = String(Buffer.byteLength(body));
      const request = httpsRequest(url, { method, headers, agent, ...(init?.signal ? { signal: init.signal } : {}) }, (response) => {
        const status = response.statusCode ?? 502;
        const bodyless = method === 'HEAD' || status === 204 || status === 205 || status === 304;
        if (bodyless) response.resume();
        resolve(
          new Response(bodyless ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>), {
            status,
            statusText: response.statusMessage ?? '',
            headers: toHeaders(response.headers),
          }),
        );
      });
      request.on('error', reject);
      request.end(typeof body === 'string' ? body : undefined);
    });
  return call as typeof fetch;
}

function toHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

/**
 * The client side of Iggy's binary protocol, with VSR session semantics: what `VrmetaClient`
 * speaks when given `tcp` addresses, and what `vrmeta bench cluster` drives.
 *
 * - One connection, one session, one request in flight (calls queue up, as the SDKs do).
 * - Login is a Register for this client's own u128 id; the session is its commit op.
 * - Metadata writes take request numbers 1, 2, 3...; a write is retried with the SAME number
 *   until it gets an answer: on TransientNotAccepted/NotCommitted (57/58) on the same
 *   connection, and after a lost connection on the next replica, where the client first resumes
 *   its session (a login with the same client id keeps the session's dedup watermark), so a
 *   write that did commit before the connection died gets its cached reply instead of running
 *   twice. Reads (non-replicated) are simply re-sent.
 * - Leader following: after each login the client reads GetClusterMetadata and moves to the
 *   healthy leader when that is another endpoint (at most LEADER_REDIRECTS_MAX hops), so writes
 *   skip the backup's forwarding hop.
 *
 * Errors: an Iggy error (a status deny, a committed rejection, or an eviction mapped to its
 * error as the SDK does) throws IggyBinaryError; running out of `timeoutMs` throws the last one.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { HEADER_SIZE, HeaderOffset } from '../constants.js';
import { EvictionReason, Operation } from '../vsr/header-types.js';
import { parseHostPort } from './address.js';
import { encodeLoginBody } from './client-requests.js';
import {
  ClientCommand,
  CommandCode,
  encodeClientRequest,
  isResultFramed,
  readClientReply,
} from './client-wire.js';

/** Iggy error codes this client acts on. */
const TRANSIENT_NOT_COMMITTED = 57;
const TRANSIENT_NOT_ACCEPTED = 58;
const UNAUTHENTICATED = 40;

export const BINARY_CLIENT_TIMEOUT_MS_DEFAULT = 30_000;
/** One attempt's wait for its reply before the connection is presumed dead. */
export const REPLY_TIMEOUT_MS_DEFAULT = 10_000;
export const LEADER_REDIRECTS_MAX = 3;
/** Between replays of a transient answer (the SDK's VSR_RETRY_INTERVAL_MS). */
export const RETRY_INTERVAL_MS = 50;
/** A reply frame larger than this is a broken stream (the SDK's default bound). */
export const REPLY_FRAME_SIZE_MAX = 64 * 1024 * 1024;

export interface BinaryClientOptions {
  /** host:port of any replicas' binary client ports (seeds; the leader is found from them). */
  readonly addresses: readonly string[];
  readonly username?: string;
  readonly password?: string;
  /** A personal access token instead of a username and password. */
  readonly token?: string;
  /** TLS on the client port: the CA (PEM) to trust, or a custom check. */
  readonly tls?: { readonly ca?: string | Buffer; readonly rejectUnauthorized?: boolean; readonly servername?: string };
  readonly followLeader?: boolean;
  readonly timeoutMs?: number;
  readonly replyTimeoutMs?: number;
  /** Resume a known session id (default: a fresh random u128). */
  readonly clientId?: bigint;
}

/** An Iggy error answered by the server (or an eviction, mapped as the SDK maps it). */
export class IggyBinaryError extends Error {
  readonly code: number;
  /** The eviction reason when the session was evicted. */
  readonly evictionReason: number | null;

  constructor(code: number, message: string, evictionReason: number | null = null) {
    super(message);
    this.name = 'IggyBinaryError';
    this.code = code;
    this.evictionReason = evictionReason;
  }
}

/** The SDK's `evictionError` mapping from a reason to the IggyError it surfaces. */
export function evictionErrorCode(reason: number, protocolMax: number, protocolMin: number): number {
  switch (reason) {
    case EvictionReason.invalidCredentials:
      return 42;
    case EvictionReason.invalidToken:
      return 53;
    case EvictionReason.staleClient:
      return 30;
    case EvictionReason.incompatibleProtocol:
      return protocolMin === 0 || protocolMax < protocolMin ? UNAUTHENTICATED : 14003;
    case EvictionReason.malformedLogin:
      return 4;
    case EvictionReason.reserved:
    case EvictionReason.clientReleaseTooLow:
    case EvictionReason.clientReleaseTooHigh:
    case EvictionReason.invalidRequestOperation:
    case EvictionReason.invalidRequestBody:
    case EvictionReason.invalidRequestBodySize:
      return 3;
    default:
      return UNAUTHENTICATED;
  }
}

/** A random non-zero u128 client id, from node:crypto. */
export function randomClientId(): bigint {
  for (;;) {
    const bytes = randomBytes(16);
    const id = bytes.readBigUInt64LE(0) | (bytes.readBigUInt64LE(8) << 64n);
    if (id !== 0n) return id;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

class ConnectionLost extends Error {}

/** One socket and its frame reader. */
class Link {
  readonly address: string;
  private readonly socket: Socket;
  private buffered: Buffer = Buffer.alloc(0);
  private waiter: ((frame: Uint8Array | Error) => void) | null = null;
  private queued: Uint8Array[] = [];
  private failure: Error | null = null;

  private constructor(address: string, socket: Socket) {
    this.address = address;
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error: Error) => this.fail(error));
    socket.on('close', () => this.fail(new ConnectionLost(`connection to ${address} closed`)));
  }

  static open(address: string, options: BinaryClientOptions, timeoutMs: number): Promise<Link> {
    const { host, port } = parseHostPort(address);
    return new Promise((resolve, reject) => {
      const socket = options.tls
        ? tlsConnect({ host, port, ca: options.tls.ca, rejectUnauthorized: options.tls.rejectUnauthorized ?? true, servername: options.tls.servername ?? host })
        : createConnection({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new ConnectionLost(`connect to ${address} timed out`));
      }, timeoutMs);
      socket.once(options.tls ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new Link(address, socket));
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(new ConnectionLost(`connect to ${address}: ${error.message}`));
      });
    });
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= HEADER_SIZE) {
      const size = this.buffered.readUInt32LE(HeaderOffset.size);
      if (size < HEADER_SIZE || size > REPLY_FRAME_SIZE_MAX) {
        this.fail(new ConnectionLost(`reply frame of ${size} bytes`));
        this.socket.destroy();
        return;
      }
      if (this.buffered.length < size) return;
      const frame = new Uint8Array(this.buffered.subarray(0, size));
      this.buffered = this.buffered.subarray(size);
      const waiter = this.waiter;
      this.waiter = null;
      if (waiter !== null) waiter(frame);
      else this.queued.push(frame);
    }
  }

  private fail(error: Error): void {
    if (this.failure !== null) return;
    this.failure = error;
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.(error);
  }

  get alive(): boolean {
    return this.failure === null;
  }

  /** Sends `frame`, resolves with the next frame; rejects ConnectionLost on close or timeout. */
  exchange(frame: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    if (this.failure !== null) return Promise.reject(this.failure);
    // A frame that arrived unasked (a late answer to a timed-out attempt) is stale: drop it.
    this.queued = [];
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        this.socket.destroy();
        reject(new ConnectionLost(`no reply from ${this.address} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = (result) => {
        clearTimeout(timer);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      this.socket.write(frame);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

export class BinaryClient {
  readonly options: BinaryClientOptions;
  /** This client's VSR session id; a reconnect resumes it. */
  readonly clientId: bigint;
  private link: Link | null = null;
  private session = 0n;
  private userIdValue: number | null = null;
  private requestNext = 1n;
  private addressIndex = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(options: BinaryClientOptions) {
    if (options.addresses.length === 0) throw new TypeError('at least one address');
    this.options = options;
    this.clientId = options.clientId ?? randomClientId();
  }

  /** Connects and logs in (following the leader). */
  static async connect(options: BinaryClientOptions): Promise<BinaryClient> {
    const client = new BinaryClient(options);
    await client.run(() => client.ensureSession(Date.now() + client.timeoutMs));
    return client;
  }

  get userId(): number | null {
    return this.userIdValue;
  }

  get currentSession(): bigint {
    return this.session;
  }

  get address(): string | null {
    return this.link?.address ?? null;
  }

  private get timeoutMs(): number {
    return this.options.timeoutMs ?? BINARY_CLIENT_TIMEOUT_MS_DEFAULT;
  }

  private get replyTimeoutMs(): number {
    return this.options.replyTimeoutMs ?? REPLY_TIMEOUT_MS_DEFAULT;
  }

  /** Lockstep: one call at a time on the connection. */
  private run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.queue.then(task, task);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** A non-replicated command (a read, ping); resolves with the response body. */
  read(code: number, body: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
    return this.run(() => this.call(Operation.nonReplicated, code, body));
  }

  /** A replicated metadata command; resolves with the payload after the result section. */
  write(operation: number, body: Uint8Array): Promise<Uint8Array> {
    return this.run(() => this.call(operation, 0, body));
  }

  /** Ends the session (a replicated Logout) and closes the connection. */
  async logout(): Promise<void> {
    await this.run(async () => {
      if (this.link !== null && this.link.alive && this.session !== 0n) {
        const frame = encodeClientRequest({ client: this.clientId, operation: Operation.logout, request: this.requestNext++, session: this.session });
        try {
          await this.link.exchange(frame, this.replyTimeoutMs);
        } catch {
          // Gone already: the server logs a closed connection's session out itself.
        }
      }
      this.session = 0n;
    });
    this.close();
  }

  close(): void {
    this.closed = true;
    this.link?.close();
    this.link = null;
  }

  private async call(operation: number, code: number, body: Uint8Array): Promise<Uint8Array> {
    const deadline = Date.now() + this.timeoutMs;
    const replicated = operation !== Operation.nonReplicated;
    // The request number is fixed for every attempt: that is what makes a retry safe.
    const request = replicated ? this.requestNext++ : 0n;
    let lastError: Error | null = null;
    while (Date.now() < deadline) {
      if (this.closed) throw new Error('client closed');
      try {
        await this.ensureSession(deadline);
        const frame = encodeClientRequest(
          { client: this.clientId, operation, request: replicated ? request : this.requestNext, session: this.session, ...(replicated ? {} : { code }) },
          body,
        );
        const reply = await this.link!.exchange(frame, this.replyTimeoutMs);
        const header = readClientReply(reply);
        if (header.command === ClientCommand.eviction) {
          const view = new DataView(reply.buffer, reply.byteOffset, HEADER_SIZE);
          const error = new IggyBinaryError(
            evictionErrorCode(header.reason, view.getUint32(144, true), view.getUint32(148, true)),
            `session evicted (reason ${header.reason})`,
            header.reason,
          );
          this.session = 0n;
          // The session is gone or superseded: log in again (same client id) and retry.
          if (header.reason === EvictionReason.noSession || header.reason === EvictionReason.sessionTooLow) {
            lastError = error;
            continue;
          }
          throw error;
        }
        if (header.command !== ClientCommand.reply) throw new IggyBinaryError(3, `unexpected frame command ${header.command}`);
        if (header.status === TRANSIENT_NOT_ACCEPTED || header.status === TRANSIENT_NOT_COMMITTED) {
          lastError = new IggyBinaryError(header.status, `transient (${header.status})`);
          await sleep(RETRY_INTERVAL_MS);
          continue;
        }
        if (header.status !== 0) throw new IggyBinaryError(header.status, `error ${header.status}`);
        const replyBody = reply.subarray(HEADER_SIZE, header.size);
        if (!isResultFramed(header.operation)) return replyBody;
        const result = resultOf(replyBody);
        if (result.code === TRANSIENT_NOT_ACCEPTED || result.code === TRANSIENT_NOT_COMMITTED) {
          lastError = new IggyBinaryError(result.code, `transient (${result.code})`);
          await sleep(RETRY_INTERVAL_MS);
          continue;
        }
        if (result.code !== 0) throw new IggyBinaryError(result.code, `error ${result.code}`);
        return result.payload;
      } catch (error) {
        if (!(error instanceof ConnectionLost)) throw error;
        lastError = error;
        this.dropLink();
      }
    }
    throw lastError ?? new Error(`no answer within ${this.timeoutMs} ms`);
  }

  private dropLink(): void {
    this.link?.close();
    this.link = null;
    this.session = 0n;
    this.addressIndex = (this.addressIndex + 1) % this.options.addresses.length;
  }

  /** A live connection with a bound session: connect, log in, follow the leader. */
  private async ensureSession(deadline: number): Promise<void> {
    if (this.link !== null && this.link.alive && this.session !== 0n) return;
    for (let hops = 0; ; hops++) {
      if (this.link === null || !this.link.alive) {
        this.link = await Link.open(this.options.addresses[this.addressIndex]!, this.options, Math.max(1, deadline - Date.now()));
        this.session = 0n;
      }
      await this.login(deadline);
      if (this.options.followLeader === false || hops >= LEADER_REDIRECTS_MAX) return;
      const leader = await this.leaderAddress();
      if (leader === null || leader === this.link.address) return;
      this.link.close();
      this.link = await Link.open(leader, this.options, Math.max(1, deadline - Date.now()));
      this.session = 0n;
    }
  }

  private async login(deadline: number): Promise<void> {
    const frame = encodeClientRequest({ client: this.clientId, operation: Operation.register, request: 0n, session: 0n }, encodeLoginBody(this.options, 'vrmeta-ts', '0.1.0'));
    while (Date.now() < deadline) {
      const reply = await this.link!.exchange(frame, this.replyTimeoutMs);
      const header = readClientReply(reply);
      if (header.command === ClientCommand.eviction) {
        throw new IggyBinaryError(evictionErrorCode(header.reason, 0, 0), `login refused (eviction reason ${header.reason})`, header.reason);
      }
      if (header.status !== 0) throw new IggyBinaryError(header.status, `login refused (${header.status})`);
      const result = resultOf(reply.subarray(HEADER_SIZE, header.size));
      if (result.code === TRANSIENT_NOT_ACCEPTED || result.code === TRANSIENT_NOT_COMMITTED) {
        await sleep(RETRY_INTERVAL_MS);
        continue;
      }
      if (result.code !== 0) throw new IggyBinaryError(result.code, `login refused (${result.code})`);
      const view = new DataView(result.payload.buffer, result.payload.byteOffset, result.payload.byteLength);
      this.userIdValue = view.getUint32(0, true);
      this.session = view.getBigUint64(4, true);
      return;
    }
    throw new ConnectionLost('login did not complete in time');
  }

  /** The healthy leader's binary address from GetClusterMetadata, or null. */
  private async leaderAddress(): Promise<string | null> {
    const frame = encodeClientRequest({ client: this.clientId, operation: Operation.nonReplicated, request: this.requestNext, session: this.session, code: CommandCode.getClusterMetadata });
    const reply = await this.link!.exchange(frame, this.replyTimeoutMs);
    const header = readClientReply(reply);
    if (header.command !== ClientCommand.reply || header.status !== 0) return null;
    const nodes = decodeClusterNodes(reply.subarray(HEADER_SIZE, header.size));
    if (nodes === null || nodes.length <= 1) return null;
    const leader = nodes.find((node) => node.role === 0 && node.status === 0);
    return leader === undefined ? null : `${leader.ip.includes(':') ? `[${leader.ip}]` : leader.ip}:${leader.tcpPort}`;
  }
}

function resultOf(body: Uint8Array): { code: number; payload: Uint8Array } {
  if (body.byteLength < 4) throw new IggyBinaryError(3, 'a result section is missing');
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const count = view.getUint32(0, true);
  if (count === 0) return { code: 0, payload: body.subarray(4) };
  if (body.byteLength < 4 + 8 * count) throw new IggyBinaryError(3, 'a result section is truncated');
  return { code: view.getUint32(8, true), payload: new Uint8Array(0) };
}

/** GetClusterMetadata's nodes (null when the body does not decode). */
export function decodeClusterNodes(body: Uint8Array): { ip: string; tcpPort: number; role: number; status: number }[] | null {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const decoder = new TextDecoder();
  let offset = 0;
  const text = (): string | null => {
    if (offset + 4 > body.byteLength) return null;
    const size = view.getUint32(offset, true);
    if (offset + 4 + size > body.byteLength) return null;
    const value = decoder.decode(body.subarray(offset + 4, offset + 4 + size));
    offset += 4 + size;
    return value;
  };
  if (text() === null || offset + 4 > body.byteLength) return null;
  const count = view.getUint32(offset, true);
  offset += 4;
  const nodes = [];
  for (let index = 0; index < count; index++) {
    if (text() === null) return null;
    const ip = text();
    if (ip === null || offset + 10 > body.byteLength) return null;
    nodes.push({ ip, tcpPort: view.getUint16(offset, true), role: view.getUint8(offset + 8), status: view.getUint8(offset + 9) });
    offset += 10;
  }
  return nodes;
}

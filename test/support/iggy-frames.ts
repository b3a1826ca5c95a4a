/**
 * Client-side frames of Iggy's binary protocol, built by hand from the layouts in apache/iggy
 * cc269ef70 (`core/binary_protocol/src/consensus/header.rs`, `foreign/node/src/wire/vsr/*`,
 * `core/binary_protocol/src/requests/**`), independently of src/transport/client-wire.ts: every
 * offset here is a literal, so a drift in our codec shows up as a mismatch, not as agreement.
 *
 * Also a tiny raw client (one socket, lockstep) for the session and cluster tests.
 */
import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export const CODE = {
  ping: 1,
  getStats: 10,
  getSnapshot: 11,
  getClusterMetadata: 12,
  describeOptions: 13,
  getMe: 20,
  getClient: 21,
  getClients: 22,
  getUser: 31,
  getUsers: 32,
  loginUser: 38,
  getAccessTokens: 41,
  loginWithAccessToken: 44,
  pollMessages: 100,
  flush: 102,
  getOffset: 120,
  getStream: 200,
  getStreams: 201,
  getTopic: 300,
  getTopics: 301,
  getGroup: 600,
  getGroups: 601,
  syncGroup: 606,
} as const;

export const OP = {
  reserved: 0,
  register: 1,
  nonReplicated: 2,
  logout: 3,
  createTopicWithAssignments: 64,
  createStream: 128,
  updateStream: 129,
  deleteStream: 130,
  purgeStream: 131,
  createTopic: 132,
  updateTopic: 133,
  deleteTopic: 134,
  purgeTopic: 135,
  createPartitions: 136,
  deletePartitions: 137,
  deleteSegments: 138,
  createGroup: 139,
  deleteGroup: 140,
  createUser: 141,
  updateUser: 142,
  deleteUser: 143,
  changePassword: 144,
  updatePermissions: 145,
  createToken: 146,
  deleteToken: 147,
  joinGroup: 148,
  leaveGroup: 149,
  sendMessages: 160,
  storeOffset: 161,
} as const;

export const REASON = {
  noSession: 1,
  invalidRequestOperation: 4,
  invalidRequestBody: 5,
  invalidRequestBodySize: 6,
  sessionTooLow: 7,
  invalidCredentials: 9,
  invalidToken: 10,
  userInactive: 11,
  sessionError: 12,
  staleClient: 13,
  incompatibleProtocol: 14,
  malformedLogin: 15,
} as const;

/** pack(0, 11, 0): the protocol version the Node SDK at cc269ef70 announces. */
export const PROTOCOL_0_11 = 11 << 10;

export interface RequestFields {
  readonly client: bigint;
  readonly operation: number;
  readonly request?: bigint;
  readonly session?: bigint;
  readonly code?: number;
  readonly requestChecksum?: bigint;
  /** Declared size override (for hostile frames). */
  readonly size?: number;
}

/** The Node SDK's `encodeRequestHeader`, plus the body. */
export function requestFrame(fields: RequestFields, body: Uint8Array = new Uint8Array(0)): Buffer {
  const frame = Buffer.alloc(256 + body.byteLength);
  frame.writeUInt32LE(fields.size ?? frame.byteLength, 48);
  frame.writeUInt8(5, 60);
  frame.writeBigUInt64LE(fields.client & 0xffff_ffff_ffff_ffffn, 128);
  frame.writeBigUInt64LE(fields.client >> 64n, 136);
  const checksum = fields.requestChecksum ?? 0n;
  frame.writeBigUInt64LE(checksum & 0xffff_ffff_ffff_ffffn, 144);
  frame.writeBigUInt64LE(checksum >> 64n, 152);
  frame.writeBigUInt64LE(fields.request ?? 0n, 168);
  frame.writeUInt8(fields.operation, 176);
  frame.writeBigUInt64LE(fields.session ?? 0n, 184);
  if (fields.code !== undefined) frame.writeUInt32LE(fields.code, 196);
  Buffer.from(body.buffer, body.byteOffset, body.byteLength).copy(frame, 256);
  return frame;
}

export function name(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

export function u32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32LE(value);
  return out;
}

export function u64(value: bigint): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(value);
  return out;
}

export function numericId(id: number): Buffer {
  return Buffer.concat([Buffer.from([1, 4]), u32(id)]);
}

export function stringId(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  return Buffer.concat([Buffer.from([2, bytes.length]), bytes]);
}

export function versionInfo(protocol = PROTOCOL_0_11, sdk = 'node-sdk', version = '0.10.0-edge.4'): Buffer {
  return Buffer.concat([u32(protocol), name(sdk), name(version)]);
}

/** `LoginRegisterRequest` as `serializeLoginRegister` writes it. */
export function loginBody(username: string, password: string, protocol = PROTOCOL_0_11): Buffer {
  const secret = Buffer.from(password, 'utf8');
  return Buffer.concat([versionInfo(protocol), name(username), Buffer.from([secret.length]), secret, u32(0)]);
}

export function tokenLoginBody(token: string): Buffer {
  const secret = Buffer.from(token, 'utf8');
  return Buffer.concat([versionInfo(), Buffer.from([secret.length]), secret, u32(0)]);
}

/** One option TLV pair: string key, typed value. */
export function option(key: string, kind: number, value: Buffer): Buffer {
  const keyBytes = Buffer.from(key, 'utf8');
  return Buffer.concat([Buffer.from([2]), u32(keyBytes.length), keyBytes, Buffer.from([kind]), u32(value.length), value]);
}

export interface ReplyView {
  readonly frame: Buffer;
  readonly command: number;
  readonly size: number;
  readonly client: bigint;
  readonly op: bigint;
  readonly commit: bigint;
  readonly request: bigint;
  readonly operation: number;
  readonly status: number;
  readonly reason: number;
  readonly body: Buffer;
}

/** Reads a reply or eviction the way the Node SDK's `decodeResponse` does. */
export function readReply(frame: Buffer): ReplyView {
  const command = frame.readUInt8(60);
  const eviction = command === 13;
  return {
    frame,
    command,
    size: frame.readUInt32LE(48),
    client: eviction
      ? frame.readBigUInt64LE(128) | (frame.readBigUInt64LE(136) << 64n)
      : frame.readBigUInt64LE(160) | (frame.readBigUInt64LE(168) << 64n),
    op: eviction ? 0n : frame.readBigUInt64LE(176),
    commit: eviction ? 0n : frame.readBigUInt64LE(184),
    request: eviction ? 0n : frame.readBigUInt64LE(200),
    operation: eviction ? 0 : frame.readUInt8(208),
    status: eviction ? 0 : frame.readUInt32LE(216),
    reason: eviction ? frame.readUInt8(255) : 0,
    body: frame.subarray(256),
  };
}

/** The result section the SDK strips for metadata operations: the code, and what follows. */
export function result(body: Buffer): { code: number; payload: Buffer } {
  const count = body.readUInt32LE(0);
  if (count === 0) return { code: 0, payload: body.subarray(4) };
  return { code: body.readUInt32LE(8), payload: body.subarray(4 + 8 * count) };
}

export function randomClientId(): bigint {
  let id = 0n;
  for (let index = 0; index < 4; index++) id = (id << 32n) | BigInt(Math.floor(Math.random() * 0x1_0000_0000));
  return id === 0n ? 1n : id;
}

/** A lockstep client on one socket: send a frame, await the next whole frame. */
export class RawClient {
  readonly socket: Socket;
  private buffered = Buffer.alloc(0);
  private waiters: ((frame: Buffer | null) => void)[] = [];
  private frames: Buffer[] = [];
  closed = false;
  clientId: bigint = randomClientId();
  session = 0n;
  requestNext = 1n;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 256) {
        const size = this.buffered.readUInt32LE(48);
        if (this.buffered.length < size) break;
        const frame = this.buffered.subarray(0, size);
        this.buffered = this.buffered.subarray(size);
        const waiter = this.waiters.shift();
        if (waiter !== undefined) waiter(Buffer.from(frame));
        else this.frames.push(Buffer.from(frame));
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      for (const waiter of this.waiters.splice(0)) waiter(null);
    });
  }

  static async connect(port: number, options: { tls?: { ca: Buffer | string } } = {}): Promise<RawClient> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const socket = options.tls
        ? tlsConnect({ host: '127.0.0.1', port, ca: options.tls.ca, servername: 'localhost' }, () => resolve(socket))
        : createConnection({ host: '127.0.0.1', port }, () => resolve(socket));
      socket.once('error', reject);
    });
    return new RawClient(socket);
  }

  /** The next frame, or null when the socket closed first. */
  next(timeoutMs = 10_000): Promise<Buffer | null> {
    const frame = this.frames.shift();
    if (frame !== undefined) return Promise.resolve(frame);
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no frame within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push((value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
  }

  async call(frame: Buffer, timeoutMs?: number): Promise<ReplyView> {
    this.socket.write(frame);
    const reply = await this.next(timeoutMs);
    if (reply === null) throw new Error('the connection closed before a reply');
    return readReply(reply);
  }

  async login(username = 'iggy', password = 'iggy'): Promise<ReplyView> {
    const reply = await this.call(requestFrame({ client: this.clientId, operation: OP.register }, loginBody(username, password)));
    if (reply.command === 8 && reply.status === 0) {
      const { code, payload } = result(reply.body);
      if (code === 0) this.session = payload.readBigUInt64LE(4);
    }
    return reply;
  }

  /** A metadata write with the next request number. */
  async write(operation: number, body: Buffer, request = this.requestNext++): Promise<ReplyView> {
    return this.call(requestFrame({ client: this.clientId, operation, session: this.session, request }, body));
  }

  /** A non-replicated command (the current request counter, not advanced). */
  async read(code: number, body: Buffer = Buffer.alloc(0)): Promise<ReplyView> {
    return this.call(requestFrame({ client: this.clientId, operation: OP.nonReplicated, code, session: this.session, request: this.requestNext }, body));
  }

  close(): void {
    this.socket.destroy();
  }
}

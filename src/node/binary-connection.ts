/**
 * One client connection of the binary protocol: its frames, run one at a time, and its bound VSR
 * session. The protocol per command is here (login, logout, reads, writes, evictions); the
 * sessions shared by every connection, proposing through the core or the primary, and the reply
 * routing are in ./binary-sessions.ts.
 */
import { HEADER_SIZE } from '../constants.js';
import { encodeLoginRegister, encodeRawPersonalAccessToken, type ClientInfoView } from '../metadata/binary-responses.js';
import { ErrorCode } from '../metadata/errors.js';
import type { Principal } from '../metadata/permissions.js';
import { UserStatus } from '../format/snapshot-model.js';
import { ROOT_USER_ID } from '../metadata/state.js';
import { assert } from '../stdx/assert.js';
import * as bodies from '../transport/client-bodies.js';
import type { ClientDecodeResult } from '../transport/client-frame-decoder.js';
import type { ClientHandle, ClientIo } from '../transport/client-listener.js';
import {
  CommandCode,
  IGGY_PROTOCOL_VERSION,
  encodeClientEviction,
  encodeClientReply,
  isClientMetadataOperation,
  isPartitionOperation,
  isProtocolCompatible,
  readClientReply,
  readClientRequest,
  resultCodeOf,
  resultRejection,
  resultSuccess,
  type ClientRequestHeader,
} from '../transport/client-wire.js';
import { Operation as StateMachineOperation } from '../metadata/operations.js';
import { EvictionReason, Operation } from '../vsr/header.js';
import { encodeRegisterBody } from '../vsr/reply.js';
import { answerRead, translateWrite, type ReadContext } from './binary-commands.js';
import type { BinaryHost, SubmitInput, SubmitOutcome } from './binary-host.js';
import type { EdgeAnswer, PartitionEdge } from './partition-edge.js';
import { PartitionOperation } from '../partition/operations.js';
import { listReadsOf } from '../http/list-reads.js';
import { dummyPasswordHash, personalAccessTokenHash } from '../http/secrets.js';

/** Frames decoded ahead of the one in flight; an SDK sends one at a time, so more is abuse. */
export const CLIENT_QUEUED_FRAMES_MAX = 256;
/** Iggy writes u32::MAX as the user of a connection that has not logged in. */
export const NO_USER = 0xffff_ffff;

export interface BoundSession {
  readonly clientId: bigint;
  readonly userId: number;
  readonly epoch: number;
  /** The user's creation time at bind: user ids are reused, a session must not outlive its user. */
  readonly userCreatedAtUs: number;
}

/**
 * What a connection needs of the sessions that own it (BinarySessions, which creates each
 * connection). Declared here so the owner imports its connections and never the reverse.
 */
export interface ConnectionSessions {
  readonly host: BinaryHost;
  readonly counters: { frames: number; queueOverflows: number };
  readonly edge: PartitionEdge;
  /** Every connection, as GetClients lists them. */
  clients(): ClientInfoView[];
  onConnectionClosed(connection: ClientConnection): void;
  bind(connection: ClientConnection, clientId: bigint, userId: number, epoch: number): void;
  unbind(connection: ClientConnection): void;
  countEviction(reason: number): void;
  scheduleLogout(session: BoundSession, delayMs: number): void;
  /** Proposes in the metadata group (BinarySessions.submit). */
  submit(connection: ClientConnection, input: SubmitInput, body: Uint8Array): Promise<SubmitOutcome>;
}

export class ClientConnection implements ClientHandle {
  readonly id: number;
  readonly io: ClientIo;
  session: BoundSession | null = null;
  private readonly sessions: ConnectionSessions;
  private readonly queue: ClientDecodeResult[] = [];
  private running = false;
  private closed = false;

  constructor(sessions: ConnectionSessions, id: number, io: ClientIo) {
    this.sessions = sessions;
    this.id = id;
    this.io = io;
  }

  info(): ClientInfoView {
    const session = this.session;
    return {
      clientId: this.id,
      userId: session?.userId ?? NO_USER,
      transport: 1,
      address: this.io.address,
      consumerGroups: session === null ? [] : this.sessions.host.state.consumerGroupsOfClient(session.clientId),
    };
  }

  /** A decoded result from the listener. Frames run one at a time, in order. */
  receive(result: ClientDecodeResult): void {
    if (this.closed) return;
    if (this.queue.length >= CLIENT_QUEUED_FRAMES_MAX) {
      this.sessions.counters.queueOverflows += 1;
      this.close(`more than ${CLIENT_QUEUED_FRAMES_MAX} requests queued without waiting for replies`);
      return;
    }
    this.queue.push(result);
    if (!this.running) void this.drain();
  }

  /**
   * Closes the connection from our side: nothing queued runs and nothing more is sent (a socket
   * being ended takes no writes), then the listener flushes what was sent and ends it.
   */
  private close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.io.close(reason);
  }

  /** The socket is gone. */
  onClosed(): void {
    this.closed = true;
    this.queue.length = 0;
    this.sessions.onConnectionClosed(this);
  }

  /** Silent past the stale window: evict like Iggy's heartbeat verifier, then close. */
  onStale(): void {
    if (this.session !== null) this.evict(this.session.clientId, EvictionReason.staleClient);
    this.close('stale client: no request within the heartbeat window');
  }

  /**
   * Sends an eviction (session-terminal: the SDK drops its session). A live session of this
   * connection it names is unbound and logged out, except when the core reported it gone
   * (NoSession) or superseded by a newer binding (SessionTooLow).
   */
  evict(client: bigint, reason: EvictionReason): void {
    const host = this.sessions.host;
    this.sessions.countEviction(reason);
    const session = this.session;
    if (session !== null && session.clientId === client) {
      this.sessions.unbind(this);
      if (reason !== EvictionReason.noSession && reason !== EvictionReason.sessionTooLow) this.sessions.scheduleLogout(session, 0);
    }
    this.io.send(encodeClientEviction({ cluster: host.cluster, view: host.core.view, replica: host.replica, client, reason }));
  }

  private async drain(): Promise<void> {
    this.running = true;
    this.io.pause();
    try {
      let first = true;
      while (this.queue.length > 0 && !this.closed) {
        // Between pipelined requests: a turn of the event loop for everyone else, and no next
        // reply while this client leaves the previous ones unread.
        if (!first) await this.io.ready();
        first = false;
        if (this.closed) break;
        const result = this.queue.shift()!;
        await this.handle(result);
      }
    } finally {
      this.running = false;
      if (!this.closed) this.io.resume();
    }
  }

  private async handle(result: ClientDecodeResult): Promise<void> {
    this.sessions.counters.frames += 1;
    if (result.kind === 'refused') {
      // Debug: a hostile client must not be able to write our log at its own rate.
      this.sessions.host.log('debug', 'client frame refused', { client_conn: this.id, address: this.io.address, reason: result.reason });
      if (result.header !== null && result.eviction !== null) this.evict(readClientRequest(result.header).client, result.eviction);
      this.close(result.reason);
      return;
    }
    if (result.kind === 'skipped') {
      const header = readClientRequest(result.header);
      // Its body found no room in the replica's buffer budget: retryable, session or not.
      if (result.reason === 'over_budget') this.deny(header, ErrorCode.transientNotAccepted);
      else if (this.session === null) this.evict(header.client, EvictionReason.noSession);
      else this.deny(header, ErrorCode.featureUnavailable);
      return;
    }
    const header = readClientRequest(result.frame);
    if (this.io.overBudget()) {
      // Connection buffers are at the replica's budget: no work for a new request until they
      // drain (the SDK retries TransientNotAccepted by itself).
      this.deny(header, ErrorCode.transientNotAccepted);
      return;
    }
    const body = result.frame.subarray(HEADER_SIZE);
    switch (header.operation) {
      case Operation.register:
        return this.register(header, body);
      case Operation.logout:
        return this.logout(header);
      case Operation.nonReplicated:
        return this.nonReplicated(header, body);
      default:
        if (this.session === null) {
          // A replicated request implies the client believes it has a session: it is gone.
          this.evict(header.client, EvictionReason.noSession);
          return;
        }
        if (isPartitionOperation(header.operation)) return this.partitionWrite(header, body);
        if (!isClientMetadataOperation(header.operation)) {
          this.evict(header.client, EvictionReason.invalidRequestOperation);
          return;
        }
        return this.write(header, body);
    }
  }

  // ---------------------------------------------------------------- replies

  private reply(header: ClientRequestHeader, fields: { op: bigint; commit: bigint; status: number; operation?: number }, body?: Uint8Array): void {
    const host = this.sessions.host;
    this.io.send(
      encodeClientReply(
        {
          cluster: host.cluster,
          view: host.core.view,
          replica: host.replica,
          requestChecksum: header.requestChecksum,
          client: header.client,
          op: fields.op,
          commit: fields.commit,
          timestamp: header.timestamp,
          request: header.request,
          operation: fields.operation ?? header.operation,
          status: fields.status,
        },
        body,
      ),
    );
  }

  /** A status deny (Iggy's pre-commit channel): empty body, the code in `status`. */
  private deny(header: ClientRequestHeader, code: number): void {
    assert(code !== 0, 'a deny names its code');
    this.reply(header, { op: this.session === null ? 0n : BigInt(this.session.epoch), commit: BigInt(this.sessions.host.core.commitMax), status: code });
  }

  // ---------------------------------------------------------------- login

  private async register(header: ClientRequestHeader, body: Uint8Array): Promise<void> {
    const host = this.sessions.host;
    const prefix = bodies.decodeClientVersion(body);
    if (!prefix.ok) {
      this.evict(header.client, EvictionReason.malformedLogin);
      return;
    }
    if (!isProtocolCompatible(prefix.value.version.protocolVersion)) {
      this.evict(header.client, EvictionReason.incompatibleProtocol);
      return;
    }
    const verdict = await this.authenticate(prefix.value.rest);
    if (typeof verdict !== 'number') {
      this.evict(header.client, verdict.eviction);
      return;
    }
    const userId = verdict;
    // The user's login allowance (the gate HTTP logins share): past it the session ends, as for
    // any failed login, and the SDK may log in again later.
    if (!host.admitLogin(userId)) {
      this.evict(header.client, EvictionReason.sessionError);
      return;
    }
    if (this.session !== null && this.session.clientId === header.client && this.session.userId === userId) {
      // A repeated login on a bound connection replays its session (Iggy does the same).
      this.loginReply(header, userId, this.session.epoch);
      return;
    }
    const entry = host.core.clientTable.get(header.client);
    if (entry !== undefined && entry.userId !== userId) {
      // Another user's session id: resuming it would act as them.
      this.evict(header.client, EvictionReason.sessionError);
      return;
    }
    const outcome = await this.sessions.submit(
      this,
      { client: header.client, operation: Operation.register, session: 0, request: 0, requestChecksum: 0n, userId },
      encodeRegisterBody(userId),
    );
    if (this.closed) return;
    switch (outcome.kind) {
      case 'reply': {
        const reply = readClientReply(outcome.frame);
        const epoch = Number(reply.op);
        this.sessions.bind(this, header.client, userId, epoch);
        this.loginReply(header, userId, epoch);
        return;
      }
      case 'eviction':
        this.io.send(outcome.frame);
        return;
      case 'timeout':
        // The register may still commit: replaying it on this connection, same client id, rebinds.
        this.reply(header, { op: 0n, commit: BigInt(host.core.commitMax), status: 0 }, resultRejection(ErrorCode.transientNotCommitted));
        return;
      case 'not_accepted':
        this.reply(header, { op: 0n, commit: BigInt(host.core.commitMax), status: 0 }, resultRejection(ErrorCode.transientNotAccepted));
        return;
    }
  }

  private loginReply(header: ClientRequestHeader, userId: number, epoch: number): void {
    const host = this.sessions.host;
    const payload = encodeLoginRegister(userId, epoch, IGGY_PROTOCOL_VERSION, host.serverVersion);
    // The session is the register's commit op: never report a commit behind it (a backup lags).
    const commit = BigInt(Math.max(host.core.commitMax, epoch));
    this.reply(header, { op: BigInt(epoch), commit, status: 0 }, resultSuccess(payload));
  }

  /** The authenticated user id, or the eviction that refuses the login (Iggy's order). */
  private async authenticate(rest: Uint8Array): Promise<number | { eviction: EvictionReason }> {
    const { state } = this.sessions.host;
    let credentialsRejected = false;
    const password = bodies.decodePasswordLogin(rest);
    if (password.ok) {
      const credentials = state.credentials(password.value.username);
      const verified = await this.sessions.host.verifyPassword(credentials?.passwordHash ?? (await dummyPasswordHash()), password.value.password);
      // Too many verifications in flight on this replica (a login flood): the session ends, as
      // for any failed login, and the client may retry; HTTP answers 429 in the same case.
      if (verified === 'busy') return { eviction: EvictionReason.sessionError };
      // An inactive account fails exactly like a wrong password (Iggy `verify_login_credentials`):
      // a login must not tell which accounts exist but are disabled.
      if (credentials !== null && verified && credentials.status === UserStatus.active) return credentials.id;
      credentialsRejected = true;
    }
    const token = bodies.decodeTokenLogin(rest);
    if (token.ok) {
      const found = state.personalAccessTokenByHash(personalAccessTokenHash(token.value.token));
      if (found === null || (found.expiryAtUs !== null && found.expiryAtUs <= Date.now() * 1000)) {
        return { eviction: credentialsRejected ? EvictionReason.invalidCredentials : EvictionReason.invalidToken };
      }
      const user = state.queries.user({ kind: 'id', id: found.userId });
      if (user === null || user.status !== UserStatus.active) return { eviction: EvictionReason.userInactive };
      return found.userId;
    }
    return { eviction: credentialsRejected ? EvictionReason.invalidCredentials : EvictionReason.malformedLogin };
  }

  /** The bound session's principal, or null when its user was deleted, replaced or deactivated. */
  private principal(): Principal | null {
    const session = this.session;
    if (session === null) return null;
    const user = this.sessions.host.state.queries.user({ kind: 'id', id: session.userId });
    // Root's id never names another user (it cannot be deleted); its created_at is set once after
    // genesis (state-machine.ts `stampRoot`), which must not end root's sessions.
    const replaced = session.userId !== ROOT_USER_ID && user?.createdAtUs !== session.userCreatedAtUs;
    if (user === null || replaced || user.status !== UserStatus.active) return null;
    return this.sessions.host.state.principal(session.userId);
  }

  // ---------------------------------------------------------------- logout

  private async logout(header: ClientRequestHeader): Promise<void> {
    const host = this.sessions.host;
    const session = this.session;
    if (session === null) {
      // Already logged out: the desired state holds (the SDK logs out before every re-login).
      this.reply(header, { op: 0n, commit: BigInt(host.core.commitMax), status: 0 });
      return;
    }
    const outcome = await this.sessions.submit(
      this,
      { client: session.clientId, operation: Operation.logout, session: session.epoch, request: Number(header.request), requestChecksum: 0n, userId: session.userId },
      new Uint8Array(0),
    );
    if (this.closed) return;
    switch (outcome.kind) {
      case 'reply':
      case 'eviction': {
        // Committed, or the session was already gone: either way it has ended.
        this.sessions.unbind(this);
        this.reply(header, { op: BigInt(session.epoch), commit: BigInt(host.core.commitMax), status: 0 });
        return;
      }
      case 'timeout':
        this.deny(header, ErrorCode.transientNotCommitted);
        return;
      case 'not_accepted':
        this.deny(header, ErrorCode.transientNotAccepted);
        return;
    }
  }

  // ---------------------------------------------------------------- reads

  private async nonReplicated(header: ClientRequestHeader, body: Uint8Array): Promise<void> {
    const host = this.sessions.host;
    const code = header.code;
    if (code === CommandCode.loginUser || code === CommandCode.loginWithAccessToken) {
      // Pre-register login codes: this server authenticates only through Register.
      this.evict(header.client, EvictionReason.malformedLogin);
      return;
    }
    const commit = BigInt(host.core.commitMax);
    if (code === CommandCode.ping) {
      this.reply(header, { op: header.session, commit, status: 0 });
      return;
    }
    if (this.session === null) {
      // A deny, not an eviction: there is no session to end, and the login is about to come.
      this.reply(header, { op: header.session, commit, status: ErrorCode.unauthenticated });
      return;
    }
    const principal = this.principal();
    if (principal === null) {
      this.evict(this.session.clientId, EvictionReason.userInactive);
      return;
    }
    const session = this.session;
    if (code === CommandCode.pollMessages || code === CommandCode.getConsumerOffset || code === CommandCode.syncConsumerGroup) {
      const caller = { connection: this, client: session.clientId, userId: session.userId, principal };
      const edge = this.sessions.edge;
      let answer: EdgeAnswer;
      if (code === CommandCode.pollMessages) answer = await edge.poll(caller, body);
      else if (code === CommandCode.getConsumerOffset) answer = edge.getOffset(caller, body);
      else answer = edge.syncGroup(caller, body);
      if (this.closed || this.session !== session) return;
      this.reply(header, { op: header.session, commit: BigInt(host.core.commitMax), status: answer.status }, answer.status === 0 ? answer.body : undefined);
      return;
    }
    const context: ReadContext = {
      state: host.state,
      userId: session.userId,
      principal,
      me: () => this.info(),
      clients: () => this.sessions.clients(),
      clusterName: host.clusterName,
      clusterNodes: host.clusterNodes,
      stats: () => host.stats(),
      lists: listReadsOf(host.state),
    };
    const answer = await answerRead(code, body, context);
    // A list read waits for its build: the connection or its session may have ended meanwhile.
    if (this.closed || this.session !== session) return;
    const answeredAt = BigInt(host.core.commitMax);
    if (answer.ok) this.reply(header, { op: header.session, commit: answeredAt, status: 0 }, answer.body);
    else this.reply(header, { op: header.session, commit: answeredAt, status: answer.code });
  }

  // ---------------------------------------------------------------- data plane

  /**
   * What every write of a bound session passes first: a stamped request checksum must match the
   * body it came with (Iggy: InvalidFormat, before anything is proposed), and the session's user
   * must still be active (else it is evicted). The principal, or null once answered.
   */
  private admitWrite(header: ClientRequestHeader, body: Uint8Array): Principal | null {
    const host = this.sessions.host;
    if (header.requestChecksum !== 0n && BigInt(host.kernels.xxh3_64(body)) !== header.requestChecksum) {
      this.deny(header, ErrorCode.invalidFormat);
      return null;
    }
    const principal = this.principal();
    if (principal === null) this.evict(this.session!.clientId, EvictionReason.userInactive);
    return principal;
  }

  /** SendMessages, Store/DeleteConsumerOffset: proposed in the partition's group. */
  private async partitionWrite(header: ClientRequestHeader, body: Uint8Array): Promise<void> {
    const host = this.sessions.host;
    const session = this.session!;
    const principal = this.admitWrite(header, body);
    if (principal === null) return;
    const caller = { connection: this, client: session.clientId, userId: session.userId, principal };
    const edge = this.sessions.edge;
    let answer: EdgeAnswer;
    switch (header.operation) {
      case PartitionOperation.sendMessages:
        answer = await edge.send(caller, body);
        break;
      case PartitionOperation.storeConsumerOffset:
        answer = await edge.storeOffset(caller, body);
        break;
      case PartitionOperation.deleteConsumerOffset:
        answer = await edge.deleteOffset(caller, body);
        break;
      default:
        this.evict(session.clientId, EvictionReason.invalidRequestOperation);
        return;
    }
    if (this.closed) return;
    const fields = { op: BigInt(session.epoch), commit: BigInt(host.core.commitMax), status: answer.status };
    this.reply(header, fields, answer.status === 0 ? answer.body : undefined);
  }

  // ---------------------------------------------------------------- writes

  private async write(header: ClientRequestHeader, body: Uint8Array): Promise<void> {
    const host = this.sessions.host;
    const session = this.session!;
    const principal = this.admitWrite(header, body);
    if (principal === null) return;
    const request = Number(header.request);
    const known = host.core.clientTable.checkRequest(session.clientId, session.epoch, request, header.requestChecksum).kind;
    if (known === 'duplicate' || known === 'already_applied') {
      // A retry of a committed request: the client table answers it (the cached reply), not a
      // second translation, which would judge it against the state it already changed (the
      // stream it created "already exists", the password it changed no longer verifies).
      await this.committedAgain(header, session, request);
      return;
    }
    const translated = await translateWrite(header.operation, body, {
      state: host.state,
      userId: session.userId,
      principal,
      verifyPassword: (passwordHash, password) => host.verifyPassword(passwordHash, password),
    });
    if (this.closed || this.session !== session) return;
    if (translated.kind === 'malformed') {
      host.log('debug', 'client request body refused', { client_conn: this.id, operation: header.operation, reason: translated.reason });
      this.evict(session.clientId, EvictionReason.invalidRequestBody);
      return;
    }
    if (translated.kind === 'refused') {
      this.deny(header, translated.code);
      return;
    }
    // Fast rejection with the code apply would commit, where this replica's state is the
    // primary's (a backup's may lag: the primary decides then). Apply checks again.
    if (host.core.canAcceptRequests()) {
      const code = host.state.precheck(session.userId, header.operation, translated.body, { clientId: session.clientId, timestampUs: Date.now() * 1000 });
      if (code !== ErrorCode.ok) {
        this.deny(header, code);
        return;
      }
    }
    const outcome = await this.sessions.submit(
      this,
      { client: session.clientId, operation: header.operation, session: session.epoch, request: Number(header.request), requestChecksum: header.requestChecksum, userId: session.userId },
      translated.body,
    );
    if (this.closed) return;
    switch (outcome.kind) {
      case 'reply':
        this.io.send(this.clientFrame(header.operation, outcome.frame, translated.token));
        return;
      case 'eviction':
        this.sessions.unbind(this);
        this.io.send(outcome.frame);
        return;
      case 'timeout':
        this.deny(header, ErrorCode.transientNotCommitted);
        return;
      case 'not_accepted':
        this.deny(header, ErrorCode.transientNotAccepted);
        return;
    }
  }

  private async committedAgain(header: ClientRequestHeader, session: BoundSession, request: number): Promise<void> {
    const outcome = await this.sessions.submit(
      this,
      { client: session.clientId, operation: header.operation, session: session.epoch, request, requestChecksum: header.requestChecksum, userId: session.userId },
      new Uint8Array(0),
    );
    if (this.closed) return;
    if (outcome.kind === 'reply') this.io.send(this.clientFrame(header.operation, outcome.frame, null));
    else if (outcome.kind === 'eviction') {
      this.sessions.unbind(this);
      this.io.send(outcome.frame);
    } else this.deny(header, outcome.kind === 'timeout' ? ErrorCode.transientNotCommitted : ErrorCode.transientNotAccepted);
  }

  /**
   * The committed reply as the client receives it: the cached bytes as they are, except where
   * Iggy's edge rewrites them too (deterministically, so a retry still gets the same bytes):
   * a CreatePersonalAccessToken success carries the raw token minted here (only its hash was
   * committed), and a DeleteSegments reply is not result-framed for the SDK.
   */
  private clientFrame(operation: number, frame: Uint8Array, token: string | null): Uint8Array {
    const reply = readClientReply(frame);
    if (reply.status !== 0) return frame;
    const body = frame.subarray(HEADER_SIZE, reply.size);
    if (operation === StateMachineOperation.createPersonalAccessToken && token !== null && resultCodeOf(body) === 0) {
      return withBody(frame, resultSuccess(encodeRawPersonalAccessToken(token)));
    }
    if (operation === StateMachineOperation.deleteSegments) {
      const code = resultCodeOf(body);
      if (code === 0) return withBody(frame, new Uint8Array(0));
      const denied = withBody(frame, new Uint8Array(0));
      new DataView(denied.buffer).setUint32(216, code ?? ErrorCode.invalidFormat, true);
      return denied;
    }
    return frame;
  }
}

/** `frame`'s header with another body (size updated; client frames are unsealed). */
function withBody(frame: Uint8Array, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER_SIZE + body.byteLength);
  out.set(frame.subarray(0, HEADER_SIZE));
  out.fill(0, 0, 32); // checksum and checksum_body described the old bytes
  new DataView(out.buffer).setUint32(48, out.byteLength, true);
  out.set(body, HEADER_SIZE);
  return out;
}

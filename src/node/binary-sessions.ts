/**
 * The binary client plane's sessions: one Iggy SDK connection is one VSR client session in the
 * replicated client table (DESIGN.md §2.4). This module owns what happens between a decoded
 * client frame and the replica core; the socket side is src/transport/client-listener.ts, the
 * wire is src/transport/client-wire.ts, the command meanings are ./binary-commands.ts.
 *
 * Session lifecycle (Iggy `core/server/src/dispatch.rs` and `auth.rs`, cc269ef70):
 * - Register (LoginRegister / LoginRegisterWithAccessToken, operation 1, session 0, request 0):
 *   the version prefix is checked (MalformedLogin, IncompatibleProtocol), credentials are
 *   verified here against the replicated users (InvalidCredentials, InvalidToken, UserInactive),
 *   then a Register carrying the authenticated user id is committed through VSR for the client's
 *   own u128 id. Its commit op is the session (epoch) the reply hands back; the connection is
 *   bound to (client, user, epoch). Every register proposes (a bind fences older epochs).
 * - Replicated requests carry the SDK's request number and the bound epoch; the edge rebuilds a
 *   sealed internal request (the client's own `client` field is ignored once bound, as Iggy
 *   rewrites it) and the committed reply, cached in the client table, is sent back byte for byte.
 *   A retry of a committed request number gets the cached reply (or RequestAlreadyApplied once it
 *   left the ring); the SDK retries on 57/58 with the same frame.
 * - Logout commits a replicated Logout and unbinds. A closed connection's session is logged out
 *   after DISCONNECT_LOGOUT_GRACE_MS, so a client resuming its session elsewhere (login with the
 *   same client id: the entry, and its watermark, survive) wins: the late Logout carries the old
 *   epoch and is fenced.
 * - Evictions: NoSession and SessionTooLow come from the core's client table; the login ones,
 *   StaleClient (a silent connection), InvalidRequestOperation/Body/BodySize (protocol errors)
 *   from here.
 *
 * Writes arriving at a backup are forwarded to the primary as sealed Request frames over the
 * replica bus, stamped with this replica's index; the primary routes the reply (or eviction) back
 * the same way (`ForwardedClients`). SDKs that follow the leader (GetClusterMetadata after login)
 * then talk to the primary directly. A write whose reply does not come within
 * CLIENT_WRITE_TIMEOUT_MS answers TransientNotCommitted (the SDK replays the same request number,
 * which the client table deduplicates); one that could not be proposed anywhere answers
 * TransientNotAccepted.
 *
 * Bounded: one request in flight per connection (the listener stops reading meanwhile), at most
 * CLIENT_QUEUED_FRAMES_MAX frames decoded ahead, FORWARDED_CLIENTS_MAX reply routes, one
 * disconnect Logout timer per closed bound connection.
 */
import { Command } from '../constants.js';
import type { ClientInfoView } from '../metadata/binary-responses.js';
import { assert } from '../stdx/assert.js';
import type { ClientIo } from '../transport/client-listener.js';
import { ClientCommand, readClientReply } from '../transport/client-wire.js';
import { buildFrame, decodeFrame } from '../vsr/frame.js';
import { EvictionReason, Operation, type RequestHeader } from '../vsr/header.js';
import { ClientConnection } from './binary-connection.js';
import type { BinaryHost, SessionCore, SubmitInput, SubmitOutcome, SubmittingConnection } from './binary-host.js';
import type { PartitionEdge } from './partition-edge.js';

/** A proposed request without a committed reply by then answers TransientNotCommitted (57). */
export const CLIENT_WRITE_TIMEOUT_MS = 5_000;
/** How many forwarded clients the primary remembers the reply route of (oldest dropped). */
export const FORWARDED_CLIENTS_MAX = 8192;
/** A closed connection's session is logged out this long after, unless resumed meanwhile. */
export const DISCONNECT_LOGOUT_GRACE_MS = 10_000;
/** Iggy's synthetic request number for a disconnect Logout (u64::MAX there; our u64 limit here). */
export const DISCONNECT_LOGOUT_REQUEST = Number.MAX_SAFE_INTEGER;

interface Pending {
  /** Null for a disconnect Logout, which nobody waits on. */
  readonly connection: SubmittingConnection | null;
  readonly request: number;
  readonly resolve: (outcome: SubmitOutcome) => void;
  readonly timer: NodeJS.Timeout;
}

/** Counters for /metrics and tests. */
export interface BinaryCounters {
  connectionsOpened: number;
  connectionsClosed: number;
  frames: number;
  evictionsSent: Partial<Record<number, number>>;
  writesForwarded: number;
  writesTimedOut: number;
  writesNotAccepted: number;
  writesQueued: number;
  repliesUnrouted: number;
  forwardedRoutesDropped: number;
  queueOverflows: number;
  disconnectLogouts: number;
}

/** Primary side: which replica a forwarded client's replies go back to. Bounded, oldest first. */
export class ForwardedClients {
  private readonly routes = new Map<bigint, number>();
  dropped = 0;

  note(client: bigint, replica: number): void {
    this.routes.delete(client);
    if (this.routes.size >= FORWARDED_CLIENTS_MAX) {
      this.routes.delete(this.routes.keys().next().value!);
      this.dropped += 1;
    }
    this.routes.set(client, replica);
  }

  routeOf(client: bigint): number | undefined {
    return this.routes.get(client);
  }

  forget(client: bigint): void {
    this.routes.delete(client);
  }

  get size(): number {
    return this.routes.size;
  }
}

export class BinarySessions {
  readonly host: BinaryHost;
  /** The data plane's commands (set by the node once its partition groups exist). */
  edge!: PartitionEdge;
  readonly forwarded = new ForwardedClients();
  readonly counters: BinaryCounters = {
    connectionsOpened: 0,
    connectionsClosed: 0,
    frames: 0,
    evictionsSent: {},
    writesForwarded: 0,
    writesTimedOut: 0,
    writesNotAccepted: 0,
    writesQueued: 0,
    repliesUnrouted: 0,
    forwardedRoutesDropped: 0,
    queueOverflows: 0,
    disconnectLogouts: 0,
  };
  private readonly connections = new Map<number, ClientConnection>();
  /** The request in flight per VSR client id (replies and evictions are routed by it). */
  private readonly pending = new Map<bigint, Pending>();
  /** Bound VSR client id -> its connection on this replica. */
  private readonly bound = new Map<bigint, ClientConnection>();
  /**
   * Requests waiting for room in the primary's pipeline and request queue, oldest first. Bounded
   * by the connections (one request in flight each) plus disconnect Logouts; each still times
   * out with its pending entry. Without it, a burst of more clients than the core queues holds
   * would be dropped by the core and each dropped client would wait out its write timeout.
   */
  private readonly waiting: {
    readonly client: bigint;
    readonly request: number;
    readonly header: RequestHeader;
    readonly body: Uint8Array;
    readonly core: SessionCore;
  }[] = [];
  private drainScheduled = false;
  private readonly logoutTimers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(host: BinaryHost) {
    this.host = host;
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  open(io: ClientIo): ClientConnection {
    assert(!this.closed, 'no connection after close');
    let id = this.host.allocateClientId();
    for (let tries = 0; this.connections.has(id); tries++) {
      assert(tries < this.connections.size + 1, 'a free u32 client id exists');
      id = this.host.allocateClientId();
    }
    const connection = new ClientConnection(this, id, io);
    this.connections.set(id, connection);
    this.counters.connectionsOpened += 1;
    return connection;
  }

  /** Every connection, as GetClients and /clients list them. */
  clients(): ClientInfoView[] {
    return [...this.connections.values()].map((connection) => connection.info());
  }

  /** The VSR session (epoch) of connection `id`, 0 before login. */
  sessionOf(id: number): number {
    return this.connections.get(id)?.session?.epoch ?? 0;
  }

  /**
   * A reply or eviction for `client`, from the local core or relayed by the primary. True only
   * when a request of a connection here was waiting for exactly this answer: a session can move
   * (a client resumes it through another replica while its old connection here still exists),
   * so the answer to a request forwarded from elsewhere must not be claimed by an idle binding.
   */
  deliver(client: bigint, frame: Uint8Array): boolean {
    // A commit freed room in the pipeline: the next waiting request may go in.
    this.scheduleDrain();
    const pending = this.pending.get(client);
    if (pending === undefined) return false;
    const header = readClientReply(frame);
    if (header.command === ClientCommand.eviction) {
      this.settle(client, pending, { kind: 'eviction', frame });
      return true;
    }
    if (header.command !== ClientCommand.reply || header.request !== BigInt(pending.request)) {
      this.counters.repliesUnrouted += 1;
      return false;
    }
    this.settle(client, pending, { kind: 'reply', frame });
    return true;
  }

  /** Ends every connection and timer (shutdown). */
  close(): void {
    this.closed = true;
    for (const [client, pending] of this.pending) this.settle(client, pending, { kind: 'not_accepted' });
    this.waiting.length = 0;
    for (const timer of this.logoutTimers) clearTimeout(timer);
    this.logoutTimers.clear();
    for (const connection of [...this.connections.values()]) connection.io.close('server stopping');
  }

  // ------------------------------------------------------------ used by ClientConnection

  onConnectionClosed(connection: ClientConnection): void {
    if (this.connections.get(connection.id) !== connection) return;
    this.connections.delete(connection.id);
    this.counters.connectionsClosed += 1;
    const session = connection.session;
    if (session !== null) {
      this.unbind(connection);
      this.scheduleLogout(session, this.host.disconnectLogoutGraceMs ?? DISCONNECT_LOGOUT_GRACE_MS);
    }
    for (const [client, pending] of this.pending) {
      if (pending.connection === connection) this.settle(client, pending, { kind: 'not_accepted' });
    }
  }

  bind(connection: ClientConnection, clientId: bigint, userId: number, epoch: number): void {
    const previous = this.bound.get(clientId);
    if (previous !== undefined && previous !== connection) {
      // The same client id logged in again on another connection: that session moved here, and
      // the old connection's epoch is fenced by the core anyway. Tell it now rather than later.
      this.unbind(previous);
      previous.evict(clientId, EvictionReason.sessionTooLow);
    }
    const replaced = connection.session;
    if (replaced !== null && replaced.clientId !== clientId) {
      // A login with a new client id on a bound connection: the old session is over.
      this.unbind(connection);
      this.scheduleLogout(replaced, 0);
    }
    const user = this.host.state.queries.user({ kind: 'id', id: userId });
    connection.session = { clientId, userId, epoch, userCreatedAtUs: user?.createdAtUs ?? -1 };
    this.bound.set(clientId, connection);
    connection.io.setAuthenticated(true);
  }

  unbind(connection: ClientConnection): void {
    const session = connection.session;
    if (session === null) return;
    if (this.bound.get(session.clientId) === connection) this.bound.delete(session.clientId);
    connection.session = null;
    connection.io.setAuthenticated(false);
  }

  countEviction(reason: number): void {
    this.counters.evictionsSent[reason] = (this.counters.evictionsSent[reason] ?? 0) + 1;
  }

  /**
   * Proposes an internal request: to the local core when this replica is a caught-up primary,
   * else to the primary over the replica bus. Resolves with the reply or eviction frame, or a
   * transient outcome. `target` is the group to propose in (default: the metadata group); its
   * id goes into the request so the primary's node routes a forward to the same group.
   */
  submit(
    connection: SubmittingConnection | null,
    input: SubmitInput,
    body: Uint8Array,
    target: { readonly core: SessionCore; readonly group: bigint } = { core: this.host.core, group: 0n },
  ): Promise<SubmitOutcome> {
    const { kernels } = this.host;
    const core = target.core;
    const frame = buildFrame(
      kernels,
      {
        command: Command.request,
        cluster: this.host.cluster,
        view: 0,
        release: 0,
        // Routes the reply back here when the primary is another replica.
        replica: this.host.replica,
        client: input.client,
        requestChecksum: input.requestChecksum,
        timestamp: 0,
        request: input.request,
        operation: input.operation,
        session: input.session,
        userId: input.userId,
        legacyCommand: 0,
        group: target.group,
      },
      body,
    );
    const local = core.canAcceptRequests();
    const primary = core.primaryIndex();
    if (!local && (core.status !== 'normal' || primary === this.host.replica)) {
      this.counters.writesNotAccepted += 1;
      return Promise.resolve({ kind: 'not_accepted' });
    }
    const existing = this.pending.get(input.client);
    if (existing !== undefined) this.settle(input.client, existing, { kind: 'not_accepted' });
    const ended = this.host.startRequest?.();
    return new Promise<SubmitOutcome>((resolveSubmit) => {
      const resolve = (outcome: SubmitOutcome): void => {
        ended?.(outcome.kind);
        resolveSubmit(outcome);
      };
      const timer = setTimeout(() => {
        const current = this.pending.get(input.client);
        if (current?.timer === timer) {
          this.counters.writesTimedOut += 1;
          this.settle(input.client, current, { kind: 'timeout' });
        }
      }, CLIENT_WRITE_TIMEOUT_MS);
      this.pending.set(input.client, { connection, request: input.request, resolve, timer });
      if (local) {
        const decoded = decodeFrame(kernels, frame);
        assert(decoded.ok && decoded.header.command === Command.request, 'a built request decodes');
        if (this.waiting.length === 0 && core.hasAdmissionRoom()) core.onRequest(decoded.header, decoded.body);
        else {
          this.counters.writesQueued += 1;
          this.waiting.push({ client: input.client, request: input.request, header: decoded.header, body: decoded.body, core });
          this.scheduleDrain();
        }
      } else {
        this.counters.writesForwarded += 1;
        this.host.sendToReplica(primary, frame);
      }
    });
  }

  /**
   * Submits waiting requests while the core has room. Runs on its own turn, never inside a core
   * callback (a reply is delivered from within the core's apply, which must not be re-entered).
   */
  private scheduleDrain(): void {
    if (this.drainScheduled || this.waiting.length === 0 || this.closed) return;
    this.drainScheduled = true;
    setImmediate(() => {
      this.drainScheduled = false;
      // In order: a request waits behind older ones, whichever group they are for.
      while (this.waiting.length > 0) {
        const next = this.waiting[0]!;
        if (!next.core.canAcceptRequests() || !next.core.hasAdmissionRoom()) break;
        this.waiting.shift();
        // Still wanted: not settled by a timeout or a closed connection meanwhile.
        if (this.pending.get(next.client)?.request === next.request) next.core.onRequest(next.header, next.body);
      }
      // No room yet (or no caught-up primary): look again shortly; each waiting request still
      // answers TransientNotCommitted when its own timeout passes.
      if (this.waiting.length > 0) setTimeout(() => this.scheduleDrain(), 10).unref();
    });
  }

  private settle(client: bigint, pending: Pending, outcome: SubmitOutcome): void {
    if (this.pending.get(client) === pending) this.pending.delete(client);
    if (outcome.kind !== 'reply' && outcome.kind !== 'eviction' && this.waiting.length > 0) {
      // Settled without the core answering: it must not be submitted later.
      const index = this.waiting.findIndex((entry) => entry.client === client && entry.request === pending.request);
      if (index >= 0) this.waiting.splice(index, 1);
    }
    clearTimeout(pending.timer);
    pending.resolve(outcome);
  }

  /**
   * Ends `session` in the replicated table after `delayMs` (a disconnect waits out the grace for a
   * resume; an eviction that ends a live session, such as StaleClient, does it at once), unless
   * it was resumed meanwhile. Frees its table slot and its consumer-group seats on every replica.
   */
  scheduleLogout(session: { readonly clientId: bigint; readonly userId: number; readonly epoch: number }, delayMs: number): void {
    if (this.closed) return;
    const { clientId, userId, epoch } = session;
    const timer = setTimeout(() => {
      this.logoutTimers.delete(timer);
      // Resumed on this replica meanwhile: the new binding owns the session.
      if (this.bound.has(clientId) || this.pending.has(clientId)) return;
      const entry = this.host.core.clientTable.get(clientId);
      // Gone, or re-registered (a higher epoch) anywhere: nothing to end.
      if (entry === undefined || entry.epoch !== epoch) return;
      this.counters.disconnectLogouts += 1;
      void this.submit(null, { client: clientId, operation: Operation.logout, session: epoch, request: DISCONNECT_LOGOUT_REQUEST, requestChecksum: 0n, userId }, new Uint8Array(0));
    }, delayMs);
    timer.unref();
    this.logoutTimers.add(timer);
  }
}

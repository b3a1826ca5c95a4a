/**
 * The binary client plane's shared types: the replica core and the node as the sessions see
 * them, and what a proposal takes and answers. The sessions (binary-sessions.ts), their
 * connections (binary-connection.ts) and the partition edge (partition-edge.ts, which proposes
 * through the sessions) all name them; they live here so that none of the three imports another
 * for a type. Imports among those three run one way: the sessions import the connections they
 * create and the edge they hold, a connection imports the edge, the edge imports neither.
 */
import type { Kernels } from '../kernels/kernel.js';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import type { RequestHeader } from '../vsr/header.js';
import type { ReadContext } from './binary-commands.js';

/** The replica core as the sessions use it. */
export interface SessionCore {
  readonly view: number;
  readonly status: string;
  readonly commitMax: number;
  isPrimary(): boolean;
  primaryIndex(): number;
  canAcceptRequests(): boolean;
  hasAdmissionRoom(): boolean;
  onRequest(header: RequestHeader, body: Uint8Array): void;
  readonly clientTable: {
    get(client: bigint): { readonly userId: number; readonly epoch: number } | undefined;
    checkRequest(client: bigint, epoch: number, request: number, requestChecksum: bigint): { readonly kind: string };
  };
}

export interface BinaryHost {
  readonly cluster: bigint;
  readonly replica: number;
  readonly clusterName: string;
  readonly kernels: Kernels;
  readonly state: MetadataStateMachine;
  readonly core: SessionCore;
  readonly serverVersion: string;
  /** Queues a frame to a peer replica (the forward of a request to the primary). */
  sendToReplica(replica: number, frame: Uint8Array): void;
  /** The cluster roster for GetClusterMetadata. */
  clusterNodes: ReadContext['clusterNodes'];
  /** The GetStats body (needs this node's process facts and client count). */
  stats(): Uint8Array;
  /** Iggy's u32 client id for a new connection (shared with the HTTP sessions' ids). */
  allocateClientId(): number;
  log(level: 'debug' | 'info' | 'warn', event: string, fields?: Record<string, unknown>): void;
  /** Tests shorten the grace before a closed connection's session is logged out. */
  readonly disconnectLogoutGraceMs?: number;
  /** Metrics: a request is submitted now; the returned function is called once when it ended. */
  startRequest?(): (outcome: SubmitOutcome['kind']) => void;
  /**
   * Verifies a password under the node's password gate, the one HTTP logins share: a flood of
   * logins on either edge is refused ('busy') before it reaches Argon2id.
   */
  verifyPassword(passwordHash: string, password: string): Promise<boolean | 'busy'>;
  /**
   * A login that authenticated `userId` may open its session now (the same gate's per-user login
   * bound, shared with HTTP logins): false refuses it.
   */
  admitLogin(userId: number): boolean;
}

/**
 * How a proposal ended: the committed reply or an eviction (frames sent on as they are), no
 * reply within the write timeout, or nowhere to propose it.
 */
export type SubmitOutcome =
  | { readonly kind: 'reply'; readonly frame: Uint8Array }
  | { readonly kind: 'eviction'; readonly frame: Uint8Array }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'not_accepted' };

/** What a proposal names of its internal request; the sessions fill in the rest of the header. */
export interface SubmitInput {
  readonly client: bigint;
  readonly operation: number;
  readonly session: number;
  readonly request: number;
  readonly requestChecksum: bigint;
  readonly userId: number;
}

/**
 * The connection a proposal is made for, as the sessions keep it: only its identity, so that
 * a connection closing settles the request it is waiting on (and no other).
 */
export interface SubmittingConnection {
  readonly id: number;
}

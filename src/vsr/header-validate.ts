/**
 * `validateHeader`: the per-command rules of iggy-metadata-plane.md §1.6, hardened. Runs on a
 * decoded header whose checksums already verified, so every rule here is about a sender that is
 * buggy or hostile, not about line noise.
 *
 * Where vrmeta is stricter than the reference (each is cheap and closes a hole the reference
 * leaves to later layers):
 * - every header-only frame is size-checked (seed review: only Eviction was), and every body is
 *   bounded per command (suffix <= DVC_HEADERS_MAX headers, manifest <= MANIFEST_SIZE_MAX, state
 *   chunk 1..STATE_CHUNK_SIZE_MAX bytes);
 * - reserved and pad bytes must be zero on every command (checked by decodeHeader);
 * - `release == 0` on every replica-to-replica frame, `replica < REPLICAS_MAX` on all;
 * - nonces, incarnations and client ids that correlate sessions must be non-zero;
 * - an empty StateChunk is invalid: the empty-chunk ping-pong of the seed review cannot start.
 */
import {
  HEADER_SIZE,
  MANIFEST_ENTRIES_MAX,
  MANIFEST_SIZE_MAX,
  MANIFEST_SIZE_MIN,
  MESSAGE_BODY_SIZE_MAX,
  MESSAGE_SIZE_MAX,
  REPLICAS_MAX,
  DVC_HEADERS_MAX,
  STATE_CHUNK_SIZE_MAX,
} from '../constants.js';
import { assert, unreachable } from '../stdx/assert.js';
import { FrameRejection } from './frame-reason.js';
import { commandLayout } from './header-layout.js';
import {
  Command,
  EVICTION_REASON_MAX,
  EvictionReason,
  FORWARD_LOGOUT_OUTCOME_MAX,
  FORWARD_REGISTER_OUTCOME_MAX,
  ForwardLogoutOutcome,
  ForwardRegisterOutcome,
  Operation,
  REPLICA_AUTH_MODE_MAX,
  REPLICA_AUTH_STATUS_MAX,
  ReplicaAuthMode,
  StoreRangeStatus,
  ReplicaAuthStatus,
  type DoViewChangeHeader,
  type Header,
  type HeaderOf,
  type RequestHeader,
  type StartViewHeader,
} from './header-types.js';

const U128_MASK = (1n << 128n) - 1n;

function allZero(bytes: Uint8Array): boolean {
  for (let index = 0; index < bytes.byteLength; index++) if (bytes[index] !== 0) return false;
  return true;
}

/** DVC/SV body: a whole number of prepare headers, at most DVC_HEADERS_MAX. Returns the count. */
function suffixCount(bodySize: number): number | FrameRejection {
  if (bodySize % HEADER_SIZE !== 0) return FrameRejection.suffixNotWholeHeaders;
  const count = bodySize / HEADER_SIZE;
  if (count > DVC_HEADERS_MAX) return FrameRejection.suffixTooLong;
  return count;
}

function validateRequest(header: RequestHeader): FrameRejection | null {
  if (header.client === 0n) return FrameRejection.clientRequired;
  if (header.operation === Operation.reserved) return FrameRejection.operationReserved;
  if (header.operation === Operation.batch) return FrameRejection.operationBatchMisplaced;
  if (header.operation === Operation.register) {
    // Register opens the session: the session number is the Register's op, assigned at commit.
    if (header.session !== 0 || header.request !== 0) return FrameRejection.registerSessionNonzero;
  } else if (header.operation !== Operation.nonReplicated) {
    // NonReplicated may be sessionless so that ping works before login.
    if (header.session === 0 || header.request === 0) return FrameRejection.sessionRequired;
  }
  if (header.legacyCommand !== 0 && header.operation !== Operation.nonReplicated) {
    return FrameRejection.legacyCommandUnexpected;
  }
  return null;
}

function validateViewChange(
  header: DoViewChangeHeader | StartViewHeader,
  bodySize: number,
): FrameRejection | null {
  // A DoViewChange reports the sender's commit_max, which may exceed its head on a laggard (vrmeta
  // deviation: reporting min(commit_max, op) would let a later merge nack an op its sender knew
  // was committed). A StartView's log always reaches its commit.
  if (header.command === Command.startView && header.commit > header.op) {
    return FrameRejection.commitAboveOp;
  }
  const count = suffixCount(bodySize);
  if (typeof count === 'string') return count;
  if (header.command === Command.doViewChange) {
    if (header.logView > header.view) return FrameRejection.logViewAboveView;
    if (header.nackUnknown > 1) return FrameRejection.flagInvalid;
    if (header.nackUnknown === 1 && header.nackBitset !== 0n) return FrameRejection.flagInvalid;
    // Applied ops are journaled or below the sender's checkpoint: never above its head.
    if (header.applied > header.op) return FrameRejection.commitAboveOp;
    // Bit i speaks for suffix header i; a bit past the suffix claims an op the sender never sent,
    // which the merge would count toward a nack quorum.
    const beyond = count >= 128 ? 0n : U128_MASK ^ ((1n << BigInt(count)) - 1n);
    const claimed = header.nackBitset | header.presentBitset;
    if ((claimed & beyond) !== 0n) return FrameRejection.bitsetBeyondSuffix;
  }
  return null;
}

/**
 * The §1.6 rules for a decoded header (size, bounds, field relations). Returns a stable reason or
 * null. Never throws on any decoded header.
 */
export function validateHeader(header: Header): FrameRejection | null {
  const layout = commandLayout(header.command);
  assert(layout !== undefined, 'a decoded header has a valid command');
  if (header.size < HEADER_SIZE) return FrameRejection.sizeBelowHeader;
  if (header.size > MESSAGE_SIZE_MAX) return FrameRejection.sizeAboveMax;
  if (header.replica >= REPLICAS_MAX) return FrameRejection.replicaOutOfRange;
  if (layout.control && header.release !== 0) return FrameRejection.releaseNonzero;
  const bodySize = header.size - HEADER_SIZE;
  if (layout.bodySizeMax === 0 && bodySize !== 0) return FrameRejection.sizeNotHeaderOnly;

  const reason = validateCommand(header, bodySize);
  if (reason !== null) return reason;
  // Bodies whose bound has no more specific reason: StateChunk (STATE_CHUNK_SIZE_MAX); for
  // Request, Reply and Prepare the frame bound already implies it.
  if (bodySize > layout.bodySizeMax) return FrameRejection.bodyAboveMax;
  return null;
}

function validateCommand(header: Header, bodySize: number): FrameRejection | null {
  switch (header.command) {
    case Command.ping:
    case Command.pong:
    case Command.pingClient:
    case Command.pongClient:
    case Command.commit:
    case Command.startViewChange:
      return null;

    case Command.request:
      return validateRequest(header);

    case Command.reply:
    case Command.eviction:
      return validateClientAnswer(header);

    case Command.prepare:
    case Command.repairPrepare:
    case Command.prepareOk:
      return validatePrepare(header);

    case Command.doViewChange:
    case Command.startView:
      return validateViewChange(header, bodySize);

    case Command.requestStartView:
    case Command.requestPrepares:
    case Command.repairDone:
    case Command.rangeEvicted:
    case Command.requestStateTransfer:
      return validateRepair(header);

    case Command.stateTransferTarget:
    case Command.requestStateChunk:
    case Command.stateChunk:
      return validateStateTransfer(header, bodySize);

    case Command.requestStoreRange:
    case Command.storeRange:
      return validateStoreRange(header, bodySize);

    case Command.forwardRegister:
    case Command.forwardRegisterResult:
    case Command.forwardLogout:
    case Command.forwardLogoutResult:
      return validateForward(header);

    case Command.replicaHello:
    case Command.replicaChallenge:
    case Command.replicaAdvertise:
    case Command.replicaFinish:
      return validateReplicaAuth(header);

    default:
      return unreachable(header, 'validateHeader: command');
  }
}

/** Reply and Eviction: what the cluster answers a client with. */
function validateClientAnswer(
  header: HeaderOf<typeof Command.reply | typeof Command.eviction>,
): FrameRejection | null {
  if (header.command === Command.reply) {
    if (header.client === 0n) return FrameRejection.clientRequired;
    if (header.operation === Operation.reserved) return FrameRejection.operationReserved;
    // A batch's requests are answered one reply each, with their own operation.
    if (header.operation === Operation.batch) return FrameRejection.operationBatchMisplaced;
    return null;
  }
  if (header.client === 0n) return FrameRejection.clientRequired;
  if (header.reason === EvictionReason.reserved || header.reason > EVICTION_REASON_MAX) {
    return FrameRejection.evictionReasonInvalid;
  }
  const min = header.serverProtocolVersionMin;
  const max = header.serverProtocolVersion;
  if (header.reason === EvictionReason.incompatibleProtocol) {
    if (!(min >= 1 && min <= max)) return FrameRejection.protocolWindowInvalid;
  } else if (min !== 0 || max !== 0) {
    return FrameRejection.protocolWindowInvalid;
  }
  return null;
}

/** Prepare, RepairPrepare and PrepareOk. */
function validatePrepare(
  header: HeaderOf<
    typeof Command.prepare | typeof Command.repairPrepare | typeof Command.prepareOk
  >,
): FrameRejection | null {
  if (header.command === Command.prepareOk) {
    // No commit <= op rule: `commit` is the acking replica's commit_max, which can be ahead of
    // a re-acked op.
    if (header.prepareChecksum === 0n) return FrameRejection.prepareChecksumRequired;
    if (header.operation === Operation.reserved) return FrameRejection.operationReserved;
    return null;
  }
  // The primary stamps commit = commit_max < op. A Reserved operation cannot be applied; the
  // canonical blank header (operation Reserved) lives only inside DVC bodies, never as a frame.
  if (header.commit > header.op) return FrameRejection.commitAboveOp;
  if (header.operation === Operation.reserved) return FrameRejection.operationReserved;
  // A batch names its clients in its envelope (src/vsr/batch.ts, checked with the body): the
  // header fields that name one client are zero, so nothing reads one of them as the batch's.
  const namesOneClient =
    header.client !== 0n ||
    header.request !== 0 ||
    header.requestChecksum !== 0n ||
    header.userId !== 0;
  if (header.operation === Operation.batch && namesOneClient) {
    return FrameRejection.batchHeaderFieldsNonzero;
  }
  return null;
}

/** The repair requests and answers: RequestStartView, RequestPrepares, RepairDone, ... */
function validateRepair(
  header: HeaderOf<
    | typeof Command.requestStartView
    | typeof Command.requestPrepares
    | typeof Command.repairDone
    | typeof Command.rangeEvicted
    | typeof Command.requestStateTransfer
  >,
): FrameRejection | null {
  switch (header.command) {
    case Command.requestStartView:
      // The probe's incarnation is what the answering StartView echoes; 0 means "not a probe".
      if (header.incarnation === 0n) return FrameRejection.incarnationRequired;
      if (header.recovering > 1) return FrameRejection.flagInvalid;
      return null;

    case Command.requestPrepares:
      if (header.nonce === 0n) return FrameRejection.nonceRequired;
      if (!(header.fromOp >= 1 && header.fromOp <= header.toOp)) {
        return FrameRejection.opRangeInvalid;
      }
      if (header.committedOnly > 1) return FrameRejection.flagInvalid;
      return null;

    case Command.repairDone:
    case Command.rangeEvicted:
    case Command.requestStateTransfer:
      if (header.nonce === 0n) return FrameRejection.nonceRequired;
      return null;

    default:
      return unreachable(header, 'validateHeader: command');
  }
}

/** StateTransferTarget, RequestStateChunk and StateChunk. */
function validateStateTransfer(
  header: HeaderOf<
    | typeof Command.stateTransferTarget
    | typeof Command.requestStateChunk
    | typeof Command.stateChunk
  >,
  bodySize: number,
): FrameRejection | null {
  switch (header.command) {
    case Command.stateTransferTarget:
      if (header.nonce === 0n) return FrameRejection.nonceRequired;
      if (header.available > 1 || header.unavailableTransient > 1) {
        return FrameRejection.flagInvalid;
      }
      if (header.available === 1 && header.unavailableTransient === 1) {
        return FrameRejection.targetFlagsConflict;
      }
      if (header.available === 0) {
        if (bodySize !== 0) return FrameRejection.sizeNotHeaderOnly;
      } else if (bodySize < MANIFEST_SIZE_MIN || bodySize > MANIFEST_SIZE_MAX) {
        return FrameRejection.manifestSizeInvalid;
      }
      // commit_op is the server's commit_min, never above its commit_max.
      if (header.commitOp > header.commitMax) return FrameRejection.commitOpAboveCommitMax;
      if ((header.checkpointOp === 0) !== (header.checkpointId === 0n)) {
        return FrameRejection.checkpointInvalid;
      }
      return null;

    case Command.requestStateChunk:
      if (header.nonce === 0n) return FrameRejection.nonceRequired;
      if (header.len === 0) return FrameRejection.chunkLenZero;
      if (header.len > STATE_CHUNK_SIZE_MAX) return FrameRejection.chunkLenAboveMax;
      if (header.artifact >= MANIFEST_ENTRIES_MAX) return FrameRejection.artifactOutOfRange;
      return null;

    case Command.stateChunk:
      if (header.nonce === 0n) return FrameRejection.nonceRequired;
      // Serving never sends an empty chunk; accepting one is how the seed review's transfer
      // ping-ponged forever with both liveness counters pinned at zero.
      if (bodySize === 0) return FrameRejection.chunkEmpty;
      if (header.artifact >= MANIFEST_ENTRIES_MAX) return FrameRejection.artifactOutOfRange;
      return null;

    default:
      return unreachable(header, 'validateHeader: command');
  }
}

/** RequestStoreRange and StoreRange (a ranged read of a state machine store). */
function validateStoreRange(
  header: HeaderOf<typeof Command.requestStoreRange | typeof Command.storeRange>,
  bodySize: number,
): FrameRejection | null {
  if (header.nonce === 0n) return FrameRejection.nonceRequired;
  if (header.command === Command.requestStoreRange) {
    if (header.toOffset <= header.fromOffset) return FrameRejection.storeRangeEmpty;
    if (header.bytesMax === 0) return FrameRejection.chunkLenZero;
    if (header.bytesMax > MESSAGE_BODY_SIZE_MAX) return FrameRejection.chunkLenAboveMax;
    return null;
  }
  switch (header.status) {
    case StoreRangeStatus.records:
      // As for StateChunk: an answer that moves nothing is never sent, and never accepted.
      if (bodySize === 0) return FrameRejection.chunkEmpty;
      if (header.nextOffset <= header.fromOffset) return FrameRejection.storeRangeEmpty;
      return null;
    case StoreRangeStatus.unavailable:
    case StoreRangeStatus.replaced:
      if (bodySize !== 0) return FrameRejection.sizeNotHeaderOnly;
      if (header.nextOffset !== header.fromOffset) return FrameRejection.storeRangeEmpty;
      return null;
    default:
      return FrameRejection.outcomeInvalid;
  }
}

/** A backup's forwarded Register and Logout, and the primary's results. */
function validateForward(
  header: HeaderOf<
    | typeof Command.forwardRegister
    | typeof Command.forwardRegisterResult
    | typeof Command.forwardLogout
    | typeof Command.forwardLogoutResult
  >,
): FrameRejection | null {
  if (header.client === 0n) return FrameRejection.clientRequired;
  if (header.nonce === 0n) return FrameRejection.nonceRequired;
  switch (header.command) {
    case Command.forwardRegister:
      return null;

    case Command.forwardRegisterResult:
      if (header.outcome > FORWARD_REGISTER_OUTCOME_MAX) return FrameRejection.outcomeInvalid;
      if (
        header.outcome !== ForwardRegisterOutcome.ok &&
        (header.epoch !== 0 || header.watermark !== 0)
      ) {
        return FrameRejection.resultFieldsNonzero;
      }
      return null;

    case Command.forwardLogout:
      if (header.session === 0 || header.request === 0) return FrameRejection.sessionRequired;
      return null;

    case Command.forwardLogoutResult:
      if (header.outcome > FORWARD_LOGOUT_OUTCOME_MAX) return FrameRejection.outcomeInvalid;
      if (header.outcome !== ForwardLogoutOutcome.ok && header.commit !== 0) {
        return FrameRejection.resultFieldsNonzero;
      }
      return null;

    default:
      return unreachable(header, 'validateHeader: command');
  }
}

/** The replica handshake: Hello, Challenge, Advertise, Finish. */
function validateReplicaAuth(
  header: HeaderOf<
    | typeof Command.replicaHello
    | typeof Command.replicaChallenge
    | typeof Command.replicaAdvertise
    | typeof Command.replicaFinish
  >,
): FrameRejection | null {
  switch (header.command) {
    case Command.replicaHello:
      if (header.mode > REPLICA_AUTH_MODE_MAX) return FrameRejection.authModeInvalid;
      if (header.peerReplica >= REPLICAS_MAX) return FrameRejection.replicaOutOfRange;
      // An all-zero nonce means a broken RNG; accepting it would make transcripts replayable.
      if (allZero(header.nonce)) return FrameRejection.authNonceRequired;
      if (header.mode === ReplicaAuthMode.none && !allZero(header.mac)) {
        return FrameRejection.authMacUnexpected;
      }
      return null;

    case Command.replicaChallenge: {
      if (header.mode > REPLICA_AUTH_MODE_MAX) return FrameRejection.authModeInvalid;
      if (header.status > REPLICA_AUTH_STATUS_MAX) return FrameRejection.authStatusInvalid;
      const ok = header.status === ReplicaAuthStatus.ok;
      if (ok && allZero(header.nonce)) return FrameRejection.authNonceRequired;
      if ((header.mode === ReplicaAuthMode.none || !ok) && !allZero(header.mac)) {
        return FrameRejection.authMacUnexpected;
      }
      return null;
    }

    case Command.replicaAdvertise:
      // The body is checked by the transport, which knows the versions it reads; an advertisement
      // it cannot read is refused there, counted, and the connection kept.
      return null;

    case Command.replicaFinish:
      if (header.status > REPLICA_AUTH_STATUS_MAX) return FrameRejection.authStatusInvalid;
      if (header.status !== ReplicaAuthStatus.ok && !allZero(header.mac)) {
        return FrameRejection.authMacUnexpected;
      }
      return null;

    default:
      return unreachable(header, 'validateHeader: command');
  }
}

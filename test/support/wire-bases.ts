/**
 * One hand-written valid header per command, for rule tests: each test changes one field of a
 * base and expects one reason, and the base itself must pass, so a test fails if its rule is
 * removed. Values are distinctive non-zero numbers so a mutation to 0 or 1 is never a no-op.
 */
import { HEADER_SIZE, MANIFEST_SIZE_MIN } from '../../src/constants.js';
import { Operation } from '../../src/metadata/operations.js';
import {
  Command,
  EvictionReason,
  ForwardLogoutOutcome,
  ForwardRegisterOutcome,
  ReplicaAuthMode,
  ReplicaAuthStatus,
  type Header,
  type HeaderCommand,
  type HeaderOf,
} from '../../src/vsr/header.js';

const COMMON = {
  checksum: 0n,
  checksumBody: 0n,
  cluster: 0x1234_5678_9abc_def0_0fed_cba9_8765_4321n,
  size: HEADER_SIZE,
  view: 7,
  release: 0,
  replica: 2,
} as const;

const GROUP = 1n << 63n;
const NONCE = 0xfeed_beef_cafe_f00dn;
const CLIENT = 0xc11e_47n;

function bytes32(fill: number): Uint8Array {
  return new Uint8Array(32).fill(fill);
}

type Bases = { readonly [C in HeaderCommand]: () => HeaderOf<C> };

const BASES: Bases = {
  [Command.ping]: () => ({
    ...COMMON,
    command: Command.ping,
    checkpointId: 0n,
    checkpointOp: 0,
    group: GROUP,
  }),
  [Command.pong]: () => ({ ...COMMON, command: Command.pong }),
  [Command.pingClient]: () => ({ ...COMMON, command: Command.pingClient }),
  [Command.pongClient]: () => ({ ...COMMON, command: Command.pongClient }),
  [Command.request]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 10,
    release: 3,
    command: Command.request,
    client: CLIENT,
    requestChecksum: 0x99n,
    timestamp: 1_700_000_000_000_000,
    request: 5,
    operation: Operation.createStream,
    session: 40,
    userId: 1,
    legacyCommand: 0,
    group: 0n,
  }),
  [Command.prepare]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 10,
    release: 3,
    command: Command.prepare,
    client: CLIENT,
    parent: 0xabcn,
    requestChecksum: 0x99n,
    op: 50,
    commit: 48,
    timestamp: 1_700_000_000_000_000,
    request: 5,
    operation: Operation.createStream,
    group: GROUP,
    userId: 1,
  }),
  [Command.repairPrepare]: () => ({ ...BASES[Command.prepare](), command: Command.repairPrepare }),
  [Command.prepareOk]: () => ({
    ...COMMON,
    command: Command.prepareOk,
    parent: 0xabcn,
    prepareChecksum: 0xdefn,
    op: 50,
    commit: 52,
    timestamp: 1_700_000_000_000_000,
    request: 5,
    operation: Operation.createStream,
    group: GROUP,
  }),
  [Command.reply]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 10,
    release: 3,
    command: Command.reply,
    requestChecksum: 0x99n,
    client: CLIENT,
    op: 50,
    commit: 50,
    timestamp: 1_700_000_000_000_000,
    request: 5,
    operation: Operation.createStream,
    status: 0,
  }),
  [Command.commit]: () => ({
    ...COMMON,
    command: Command.commit,
    commitChecksum: 0n,
    timestampMonotonic: 77,
    commit: 48,
    checkpointOp: 0,
    group: GROUP,
  }),
  [Command.startViewChange]: () => ({ ...COMMON, command: Command.startViewChange, group: GROUP }),
  [Command.doViewChange]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 3 * HEADER_SIZE,
    command: Command.doViewChange,
    op: 50,
    commit: 48,
    group: GROUP,
    logView: 6,
    nackUnknown: 0,
    applied: 47,
    nackBitset: 0b001n,
    presentBitset: 0b110n,
  }),
  [Command.startView]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 3 * HEADER_SIZE,
    command: Command.startView,
    op: 50,
    commit: 48,
    group: GROUP,
    incarnation: 0n,
  }),
  [Command.eviction]: () => ({
    ...COMMON,
    release: 3,
    command: Command.eviction,
    client: CLIENT,
    serverProtocolVersion: 0,
    serverProtocolVersionMin: 0,
    reason: EvictionReason.noSession,
  }),
  [Command.replicaHello]: () => ({
    ...COMMON,
    command: Command.replicaHello,
    nonce: bytes32(0x5a),
    mode: ReplicaAuthMode.psk,
    peerReplica: 1,
    mac: bytes32(0x4c),
  }),
  [Command.replicaChallenge]: () => ({
    ...COMMON,
    command: Command.replicaChallenge,
    nonce: bytes32(0x6b),
    mac: bytes32(0x7c),
    mode: ReplicaAuthMode.psk,
    status: ReplicaAuthStatus.ok,
  }),
  [Command.replicaFinish]: () => ({
    ...COMMON,
    command: Command.replicaFinish,
    mac: bytes32(0x8d),
    status: ReplicaAuthStatus.ok,
  }),
  [Command.requestStartView]: () => ({
    ...COMMON,
    command: Command.requestStartView,
    group: GROUP,
    incarnation: 0x1ca2n,
    recovering: 1,
  }),
  [Command.requestPrepares]: () => ({
    ...COMMON,
    command: Command.requestPrepares,
    nonce: NONCE,
    fromOp: 10,
    toOp: 20,
    group: GROUP,
    committedOnly: 1,
  }),
  [Command.repairDone]: () => ({ ...COMMON, command: Command.repairDone, nonce: NONCE, op: 20, group: GROUP, servedChecksum: 0x5eed_5eedn }),
  [Command.rangeEvicted]: () => ({ ...COMMON, command: Command.rangeEvicted, nonce: NONCE, op: 20, group: GROUP }),
  [Command.requestStateTransfer]: () => ({
    ...COMMON,
    command: Command.requestStateTransfer,
    nonce: NONCE,
    group: GROUP,
  }),
  [Command.stateTransferTarget]: () => ({
    ...COMMON,
    size: HEADER_SIZE + MANIFEST_SIZE_MIN + 50,
    command: Command.stateTransferTarget,
    nonce: NONCE,
    commitOp: 40,
    group: GROUP,
    available: 1,
    unavailableTransient: 0,
    commitMax: 48,
    checkpointAnchor: 0x7ab0n,
    checkpointOp: 36,
    checkpointId: 0x5eed_c0de_0000_0036n,
  }),
  [Command.requestStateChunk]: () => ({
    ...COMMON,
    command: Command.requestStateChunk,
    nonce: NONCE,
    offset: 4096,
    group: GROUP,
    len: 1024,
    artifact: 1,
  }),
  [Command.stateChunk]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 1024,
    command: Command.stateChunk,
    nonce: NONCE,
    offset: 4096,
    group: GROUP,
    artifact: 1,
  }),
  [Command.requestStoreRange]: () => ({
    ...COMMON,
    command: Command.requestStoreRange,
    nonce: NONCE,
    group: GROUP,
    store: 77,
    incarnation: 1_700_000_000_000_000,
    fromOffset: 100,
    toOffset: 5000,
    bytesMax: 262_144,
  }),
  [Command.storeRange]: () => ({
    ...COMMON,
    size: HEADER_SIZE + 1024,
    command: Command.storeRange,
    nonce: NONCE,
    group: GROUP,
    store: 77,
    incarnation: 1_700_000_000_000_000,
    fromOffset: 100,
    nextOffset: 164,
    status: 0,
  }),
  [Command.forwardRegister]: () => ({
    ...COMMON,
    command: Command.forwardRegister,
    client: CLIENT,
    nonce: NONCE,
    userId: 3,
  }),
  [Command.forwardRegisterResult]: () => ({
    ...COMMON,
    command: Command.forwardRegisterResult,
    nonce: NONCE,
    client: CLIENT,
    epoch: 41,
    watermark: 9,
    outcome: ForwardRegisterOutcome.ok,
  }),
  [Command.forwardLogout]: () => ({
    ...COMMON,
    command: Command.forwardLogout,
    client: CLIENT,
    nonce: NONCE,
    session: 41,
    request: 9,
  }),
  [Command.forwardLogoutResult]: () => ({
    ...COMMON,
    command: Command.forwardLogoutResult,
    nonce: NONCE,
    client: CLIENT,
    commit: 55,
    outcome: ForwardLogoutOutcome.ok,
  }),
  [Command.replicaAdvertise]: () => ({
    ...COMMON,
    command: Command.replicaAdvertise,
    version: 1,
  }),
};

/** A fresh valid header of `command`. */
export function base<C extends HeaderCommand>(command: C): HeaderOf<C> {
  return (BASES[command] as () => HeaderOf<C>)();
}

/** `base(command)` with some fields replaced (typed loosely so tests can set any value). */
export function mutate<C extends HeaderCommand>(command: C, changes: Partial<Record<string, unknown>>): Header {
  return { ...base(command), ...changes } as Header;
}

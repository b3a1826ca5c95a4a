/**
 * The byte layout of every command's header, as data: field name, offset and kind, plus the
 * reserved/pad ranges that must be zero. Encode, decode and the reserved-bytes check are driven by
 * these tables, so the offsets of iggy-metadata-plane.md §1.4 are written down exactly once.
 *
 * Two checks keep the tables honest:
 * - at compile time, `defineLayout<H>` requires the fields to be exactly the interface's own
 *   fields, each with a kind matching its TS type (bigint <-> u128/u64_big, number <-> u8/u32/u64);
 * - at module load, every layout must tile bytes 128..256 exactly (fields and zero ranges neither
 *   overlap nor leave gaps), so a typo in an offset fails every test at import time instead of
 *   silently aliasing two fields.
 */
import {
  ADVERTISEMENT_SIZE_MAX,
  COMMAND_MAX,
  Command,
  DVC_HEADERS_MAX,
  HEADER_SIZE,
  HeaderOffset,
  MANIFEST_SIZE_MAX,
  MESSAGE_BODY_SIZE_MAX,
  PrepareOffset,
  STATE_CHUNK_SIZE_MAX,
} from '../constants.js';
import { assert } from '../stdx/assert.js';
import type * as T from './header-types.js';
import type { Header, HeaderCommand, HeaderCommon } from './header-types.js';

export const FieldKind = {
  u8: 'u8',
  u32: 'u32',
  /** u64 decoded as a number; values above 2^53 - 1 are rejected. */
  u64: 'u64',
  /** u64 decoded as a bigint (the consensus `group` id: METADATA_GROUP is 2^63). */
  u64Big: 'u64_big',
  u128: 'u128',
  bytes32: 'bytes32',
} as const;
export type FieldKind = (typeof FieldKind)[keyof typeof FieldKind];

export const FIELD_SIZE: Readonly<Record<FieldKind, number>> = {
  u8: 1,
  u32: 4,
  u64: 8,
  u64_big: 8,
  u128: 16,
  bytes32: 32,
};

export interface FieldSpec {
  readonly name: string;
  readonly offset: number;
  readonly kind: FieldKind;
  readonly size: number;
}

/** A reserved or pad range, `[offset, offset + size)`, that must be zero on the wire. */
export interface ZeroRange {
  readonly offset: number;
  readonly size: number;
}

/** How a command's `checksum` is computed (§1.3). */
export type ChecksumKind = 'seal' | 'identity';

export interface CommandLayout {
  readonly command: HeaderCommand;
  readonly name: string;
  /** Command-specific fields (bytes 128..256), sorted by offset. */
  readonly fields: readonly FieldSpec[];
  /** Command-specific reserved and pad ranges, sorted by offset. */
  readonly zero: readonly ZeroRange[];
  readonly checksum: ChecksumKind;
  /**
   * Replica-to-replica frame: `release` must be 0 (the reference has no version channel on
   * control frames; replicas upgrade together).
   */
  readonly control: boolean;
  /** Upper bound of `size - 256`; 0 = header-only. */
  readonly bodySizeMax: number;
}

type KindFor<V> = [V] extends [bigint]
  ? typeof FieldKind.u128 | typeof FieldKind.u64Big
  : [V] extends [number]
    ? typeof FieldKind.u8 | typeof FieldKind.u32 | typeof FieldKind.u64
    : [V] extends [Uint8Array]
      ? typeof FieldKind.bytes32
      : never;
type OwnFields<H> = Omit<H, keyof HeaderCommon | 'command'>;
/** Exactly the command's own fields, each as `[offset, kind]`. */
export type FieldsLayout<H> = {
  readonly [K in keyof OwnFields<H>]-?: readonly [offset: number, kind: KindFor<OwnFields<H>[K]>];
};

interface LayoutDefinition<H extends Header> {
  readonly command: H['command'];
  readonly name: string;
  readonly fields: FieldsLayout<H>;
  /** `[start, end)` byte ranges. */
  readonly zero: readonly (readonly [start: number, end: number])[];
  readonly checksum?: ChecksumKind;
  readonly control: boolean;
  readonly bodySizeMax: number;
}

function defineLayout<H extends Header>(definition: LayoutDefinition<H>): CommandLayout {
  const fields: FieldSpec[] = [];
  const entries = Object.entries(definition.fields) as [string, readonly [number, FieldKind]][];
  for (const [name, spec] of entries) {
    fields.push({ name, offset: spec[0], kind: spec[1], size: FIELD_SIZE[spec[1]] });
  }
  fields.sort((a, b) => a.offset - b.offset);
  const zero = definition.zero
    .map(([start, end]) => ({ offset: start, size: end - start }))
    .sort((a, b) => a.offset - b.offset);
  return {
    command: definition.command,
    name: definition.name,
    fields,
    zero,
    checksum: definition.checksum ?? 'seal',
    control: definition.control,
    bodySizeMax: definition.bodySizeMax,
  };
}

/** Bytes 0..128. `command` is written from the interface's discriminant. */
export const COMMON_FIELDS: readonly FieldSpec[] = [
  { name: 'checksum', offset: HeaderOffset.checksum, kind: FieldKind.u128, size: 16 },
  { name: 'checksumBody', offset: HeaderOffset.checksumBody, kind: FieldKind.u128, size: 16 },
  { name: 'cluster', offset: HeaderOffset.cluster, kind: FieldKind.u128, size: 16 },
  { name: 'size', offset: HeaderOffset.size, kind: FieldKind.u32, size: 4 },
  { name: 'view', offset: HeaderOffset.view, kind: FieldKind.u32, size: 4 },
  { name: 'release', offset: HeaderOffset.release, kind: FieldKind.u32, size: 4 },
  { name: 'command', offset: HeaderOffset.command, kind: FieldKind.u8, size: 1 },
  { name: 'replica', offset: HeaderOffset.replica, kind: FieldKind.u8, size: 1 },
];
export const COMMON_ZERO: ZeroRange = {
  offset: HeaderOffset.reservedFrame,
  size: HeaderOffset.commandSpecific - HeaderOffset.reservedFrame,
};

const SUFFIX_SIZE_MAX = DVC_HEADERS_MAX * HEADER_SIZE;

const prepareFields = {
  client: [128, 'u128'],
  parent: [144, 'u128'],
  requestChecksum: [160, 'u128'],
  op: [176, 'u64'],
  commit: [184, 'u64'],
  timestamp: [192, 'u64'],
  request: [200, 'u64'],
  operation: [208, 'u8'],
  group: [216, 'u64_big'],
  userId: [224, 'u32'],
} as const;
const prepareZero = [
  [209, 216],
  [228, 256],
] as const;

const repairDoneFields = {
  nonce: [128, 'u128'],
  op: [144, 'u64'],
  group: [152, 'u64_big'],
} as const;

const LAYOUTS: readonly CommandLayout[] = [
  defineLayout<T.PingHeader>({
    command: Command.ping,
    name: 'ping',
    fields: {
      checkpointId: [128, 'u128'],
      checkpointOp: [144, 'u64'],
      group: [152, 'u64_big'],
    },
    zero: [[160, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.PongHeader>({
    command: Command.pong,
    name: 'pong',
    fields: {},
    zero: [[128, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.PingClientHeader>({
    command: Command.pingClient,
    name: 'ping_client',
    fields: {},
    zero: [[128, 256]],
    control: false,
    bodySizeMax: 0,
  }),
  defineLayout<T.PongClientHeader>({
    command: Command.pongClient,
    name: 'pong_client',
    fields: {},
    zero: [[128, 256]],
    control: false,
    bodySizeMax: 0,
  }),
  defineLayout<T.RequestHeader>({
    command: Command.request,
    name: 'request',
    fields: {
      client: [128, 'u128'],
      requestChecksum: [144, 'u128'],
      timestamp: [160, 'u64'],
      request: [168, 'u64'],
      operation: [176, 'u8'],
      session: [184, 'u64'],
      userId: [192, 'u32'],
      legacyCommand: [196, 'u32'],
      group: [248, 'u64_big'],
    },
    zero: [
      [177, 184],
      [200, 248],
    ],
    control: false,
    bodySizeMax: MESSAGE_BODY_SIZE_MAX,
  }),
  defineLayout<T.PrepareHeader>({
    command: Command.prepare,
    name: 'prepare',
    fields: prepareFields,
    zero: prepareZero,
    checksum: 'identity',
    control: false,
    bodySizeMax: MESSAGE_BODY_SIZE_MAX,
  }),
  defineLayout<T.PrepareOkHeader>({
    command: Command.prepareOk,
    name: 'prepare_ok',
    fields: {
      parent: [128, 'u128'],
      prepareChecksum: [144, 'u128'],
      op: [160, 'u64'],
      commit: [168, 'u64'],
      timestamp: [176, 'u64'],
      request: [184, 'u64'],
      operation: [192, 'u8'],
      group: [200, 'u64_big'],
    },
    zero: [
      [193, 200],
      [208, 256],
    ],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ReplyHeader>({
    command: Command.reply,
    name: 'reply',
    fields: {
      requestChecksum: [128, 'u128'],
      client: [160, 'u128'],
      op: [176, 'u64'],
      commit: [184, 'u64'],
      timestamp: [192, 'u64'],
      request: [200, 'u64'],
      operation: [208, 'u8'],
      status: [216, 'u32'],
    },
    // 144..160 is `context`, always 0 in the reference: treated as reserved.
    zero: [
      [144, 160],
      [209, 216],
      [220, 256],
    ],
    control: false,
    bodySizeMax: MESSAGE_BODY_SIZE_MAX,
  }),
  defineLayout<T.CommitHeader>({
    command: Command.commit,
    name: 'commit',
    fields: {
      commitChecksum: [128, 'u128'],
      timestampMonotonic: [144, 'u64'],
      commit: [152, 'u64'],
      checkpointOp: [160, 'u64'],
      group: [168, 'u64_big'],
    },
    zero: [[176, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.StartViewChangeHeader>({
    command: Command.startViewChange,
    name: 'start_view_change',
    fields: { group: [128, 'u64_big'] },
    zero: [[136, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.DoViewChangeHeader>({
    command: Command.doViewChange,
    name: 'do_view_change',
    fields: {
      op: [128, 'u64'],
      commit: [136, 'u64'],
      group: [144, 'u64_big'],
      logView: [152, 'u32'],
      nackUnknown: [156, 'u8'],
      applied: [160, 'u64'],
      nackBitset: [224, 'u128'],
      presentBitset: [240, 'u128'],
    },
    zero: [[157, 160], [168, 224]],
    control: true,
    bodySizeMax: SUFFIX_SIZE_MAX,
  }),
  defineLayout<T.StartViewHeader>({
    command: Command.startView,
    name: 'start_view',
    fields: {
      op: [128, 'u64'],
      commit: [136, 'u64'],
      group: [144, 'u64_big'],
      incarnation: [240, 'u128'],
    },
    zero: [[152, 240]],
    control: true,
    bodySizeMax: SUFFIX_SIZE_MAX,
  }),
  defineLayout<T.EvictionHeader>({
    command: Command.eviction,
    name: 'eviction',
    fields: {
      client: [128, 'u128'],
      serverProtocolVersion: [144, 'u32'],
      serverProtocolVersionMin: [148, 'u32'],
      reason: [255, 'u8'],
    },
    zero: [[152, 255]],
    control: false,
    bodySizeMax: 0,
  }),
  defineLayout<T.ReplicaHelloHeader>({
    command: Command.replicaHello,
    name: 'replica_hello',
    fields: {
      nonce: [128, 'bytes32'],
      mode: [160, 'u8'],
      peerReplica: [161, 'u8'],
      mac: [162, 'bytes32'],
    },
    zero: [[194, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ReplicaChallengeHeader>({
    command: Command.replicaChallenge,
    name: 'replica_challenge',
    fields: {
      nonce: [128, 'bytes32'],
      mac: [160, 'bytes32'],
      mode: [192, 'u8'],
      status: [193, 'u8'],
    },
    zero: [[194, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ReplicaFinishHeader>({
    command: Command.replicaFinish,
    name: 'replica_finish',
    fields: { mac: [128, 'bytes32'], status: [160, 'u8'] },
    zero: [[161, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.RequestStartViewHeader>({
    command: Command.requestStartView,
    name: 'request_start_view',
    fields: { group: [128, 'u64_big'], recovering: [136, 'u8'], incarnation: [240, 'u128'] },
    zero: [[137, 240]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.RequestPreparesHeader>({
    command: Command.requestPrepares,
    name: 'request_prepares',
    fields: {
      nonce: [128, 'u128'],
      fromOp: [144, 'u64'],
      toOp: [152, 'u64'],
      group: [160, 'u64_big'],
      committedOnly: [168, 'u8'],
    },
    zero: [[169, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.RepairPrepareHeader>({
    command: Command.repairPrepare,
    name: 'repair_prepare',
    fields: prepareFields,
    zero: prepareZero,
    checksum: 'identity',
    // A repaired prepare is the stored prepare verbatim, so it keeps the client's release.
    control: false,
    bodySizeMax: MESSAGE_BODY_SIZE_MAX,
  }),
  defineLayout<T.RepairDoneHeader>({
    command: Command.repairDone,
    name: 'repair_done',
    fields: { ...repairDoneFields, servedChecksum: [160, 'u128'] },
    zero: [[176, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.RangeEvictedHeader>({
    command: Command.rangeEvicted,
    name: 'range_evicted',
    fields: repairDoneFields,
    zero: [[160, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.RequestStateTransferHeader>({
    command: Command.requestStateTransfer,
    name: 'request_state_transfer',
    fields: { nonce: [128, 'u128'], group: [144, 'u64_big'] },
    zero: [[152, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.StateTransferTargetHeader>({
    command: Command.stateTransferTarget,
    name: 'state_transfer_target',
    fields: {
      nonce: [128, 'u128'],
      commitOp: [144, 'u64'],
      group: [152, 'u64_big'],
      available: [160, 'u8'],
      unavailableTransient: [161, 'u8'],
      commitMax: [168, 'u64'],
      checkpointAnchor: [176, 'u128'],
      checkpointOp: [192, 'u64'],
      checkpointId: [200, 'u64_big'],
    },
    zero: [
      [162, 168],
      [208, 256],
    ],
    control: true,
    bodySizeMax: MANIFEST_SIZE_MAX,
  }),
  defineLayout<T.RequestStateChunkHeader>({
    command: Command.requestStateChunk,
    name: 'request_state_chunk',
    fields: {
      nonce: [128, 'u128'],
      offset: [144, 'u64'],
      group: [152, 'u64_big'],
      len: [160, 'u32'],
      artifact: [164, 'u32'],
    },
    zero: [[168, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.StateChunkHeader>({
    command: Command.stateChunk,
    name: 'state_chunk',
    fields: {
      nonce: [128, 'u128'],
      offset: [144, 'u64'],
      group: [152, 'u64_big'],
      artifact: [160, 'u32'],
    },
    zero: [[164, 256]],
    control: true,
    bodySizeMax: STATE_CHUNK_SIZE_MAX,
  }),
  defineLayout<T.RequestStoreRangeHeader>({
    command: Command.requestStoreRange,
    name: 'request_store_range',
    fields: {
      nonce: [128, 'u128'],
      group: [144, 'u64_big'],
      store: [152, 'u64'],
      incarnation: [160, 'u64'],
      fromOffset: [168, 'u64'],
      toOffset: [176, 'u64'],
      bytesMax: [184, 'u32'],
    },
    zero: [[188, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.StoreRangeHeader>({
    command: Command.storeRange,
    name: 'store_range',
    fields: {
      nonce: [128, 'u128'],
      group: [144, 'u64_big'],
      store: [152, 'u64'],
      incarnation: [160, 'u64'],
      fromOffset: [168, 'u64'],
      nextOffset: [176, 'u64'],
      status: [184, 'u8'],
    },
    zero: [[185, 256]],
    control: true,
    bodySizeMax: MESSAGE_BODY_SIZE_MAX,
  }),
  defineLayout<T.ForwardRegisterHeader>({
    command: Command.forwardRegister,
    name: 'forward_register',
    fields: { client: [128, 'u128'], nonce: [144, 'u128'], userId: [160, 'u32'] },
    zero: [[164, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ForwardRegisterResultHeader>({
    command: Command.forwardRegisterResult,
    name: 'forward_register_result',
    fields: {
      nonce: [128, 'u128'],
      client: [144, 'u128'],
      epoch: [160, 'u64'],
      watermark: [168, 'u64'],
      outcome: [255, 'u8'],
    },
    zero: [[176, 255]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ForwardLogoutHeader>({
    command: Command.forwardLogout,
    name: 'forward_logout',
    fields: {
      client: [128, 'u128'],
      nonce: [144, 'u128'],
      session: [160, 'u64'],
      request: [168, 'u64'],
    },
    zero: [[176, 256]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ForwardLogoutResultHeader>({
    command: Command.forwardLogoutResult,
    name: 'forward_logout_result',
    fields: {
      nonce: [128, 'u128'],
      client: [144, 'u128'],
      commit: [160, 'u64'],
      outcome: [255, 'u8'],
    },
    zero: [[168, 255]],
    control: true,
    bodySizeMax: 0,
  }),
  defineLayout<T.ReplicaAdvertiseHeader>({
    command: Command.replicaAdvertise,
    name: 'replica_advertise',
    fields: { version: [128, 'u8'] },
    zero: [[129, 256]],
    control: true,
    bodySizeMax: ADVERTISEMENT_SIZE_MAX,
  }),
];

/** Indexed by command; index 0 (Reserved) is undefined: it has no layout and is never valid. */
const LAYOUT_BY_COMMAND: readonly (CommandLayout | undefined)[] = (() => {
  const table = new Array<CommandLayout | undefined>(COMMAND_MAX + 1).fill(undefined);
  for (const layout of LAYOUTS) {
    assert(table[layout.command] === undefined, `duplicate layout for command ${layout.command}`);
    table[layout.command] = layout;
  }
  return table;
})();

/** The layout of a command byte read off the wire, or undefined when the byte is invalid. */
export function commandLayout(command: number): CommandLayout | undefined {
  return LAYOUT_BY_COMMAND[command];
}

export function isHeaderCommand(command: number): command is HeaderCommand {
  return LAYOUT_BY_COMMAND[command] !== undefined;
}

export const COMMAND_LAYOUTS: readonly CommandLayout[] = LAYOUTS;

// Load-time proof that every layout describes each byte exactly once.
function assertTiles(name: string, start: number, end: number, ranges: readonly ZeroRange[]): void {
  const sorted = [...ranges].sort((a, b) => a.offset - b.offset);
  let cursor = start;
  for (const range of sorted) {
    assert(range.size > 0, `${name}: empty range at ${range.offset}`);
    const problem = range.offset < cursor ? 'overlap' : 'gap';
    assert(range.offset === cursor, `${name}: ${problem} at byte ${cursor}`);
    cursor = range.offset + range.size;
  }
  assert(cursor === end, `${name}: layout ends at ${cursor}, expected ${end}`);
}

assertTiles('common', 0, HeaderOffset.commandSpecific, [...COMMON_FIELDS, COMMON_ZERO]);
for (let command = 0; command <= COMMAND_MAX; command++) {
  const layout = LAYOUT_BY_COMMAND[command];
  if (command === Command.reserved) {
    assert(layout === undefined, 'Reserved has no layout');
    continue;
  }
  assert(layout !== undefined, `command ${command} has a layout`);
  const ranges = [...layout.fields, ...layout.zero];
  assertTiles(layout.name, HeaderOffset.commandSpecific, HEADER_SIZE, ranges);
  const names = new Set(COMMON_FIELDS.map((field) => field.name));
  for (const field of layout.fields) {
    assert(!names.has(field.name), `${layout.name}: duplicate field ${field.name}`);
    names.add(field.name);
  }
  const bodySizeMax = layout.bodySizeMax;
  assert(bodySizeMax >= 0 && bodySizeMax <= MESSAGE_BODY_SIZE_MAX, `${layout.name}: body bound`);
}

// The shared offset constants (used by the journal scan and WAL fixtures) agree with the table.
{
  const prepare = LAYOUT_BY_COMMAND[Command.prepare];
  assert(prepare !== undefined);
  for (const field of prepare.fields) {
    const offset = (PrepareOffset as Record<string, number>)[field.name];
    assert(offset === field.offset, `PrepareOffset.${field.name} agrees with the layout`);
  }
  assert(prepare.zero.some((range) => range.offset === PrepareOffset.pad && range.size === 7));
  const reserved = PrepareOffset.reserved;
  assert(prepare.zero.some((range) => range.offset === reserved && range.size === 28));
}

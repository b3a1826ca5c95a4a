/**
 * Shared fixtures for the wire-codec tests: the checksum kernels under test, fast-check
 * arbitraries for random headers (round trips) and for valid frames of every command, and
 * builders that seal a header without validating it (to make frames a replica would never send).
 */
import fc from 'fast-check';
import {
  COMMAND_MAX,
  DVC_HEADERS_MAX,
  HEADER_SIZE,
  MANIFEST_ENTRIES_MAX,
  MANIFEST_SIZE_MAX,
  MANIFEST_SIZE_MIN,
  STATE_CHUNK_SIZE_MAX,
} from '../../src/constants.js';
import { xxh3_64 } from '../../src/kernels/xxh3-ts.js';
import { encodeBatch } from '../../src/vsr/batch.js';
import { buildFrame, sealFrame, type ChecksumKernels } from '../../src/vsr/frame.js';
import {
  COMMON_FIELDS,
  Command,
  EvictionReason,
  FieldKind,
  ForwardLogoutOutcome,
  ForwardRegisterOutcome,
  Operation,
  ReplicaAuthMode,
  ReplicaAuthStatus,
  commandLayout,
  encodeHeader,
  type FieldSpec,
  type Header,
  type HeaderCommand,
  type HeaderInput,
} from '../../src/vsr/header.js';

/** The TypeScript XXH3 kernel: the reference every other implementation must match. */
export const tsKernels: ChecksumKernels = { xxh3_64 };

/** TS always; the WASM kernels too when they load on this machine. */
export async function checksumKernelVariants(): Promise<{ label: string; kernels: ChecksumKernels }[]> {
  const variants: { label: string; kernels: ChecksumKernels }[] = [{ label: 'ts', kernels: tsKernels }];
  try {
    const { loadKernels } = await import('../../src/kernels/index.js');
    variants.push({ label: 'wasm', kernels: loadKernels('wasm') });
    return variants;
  } catch {
    // The loader pulls in every kernel; fall back to the WASM adapter alone below.
  }
  try {
    const { createWasmKernels } = await import('../../src/kernels/kernels-wasm.js');
    const { WasmInstance } = await import('../../src/kernels/wasm-instance.js');
    variants.push({ label: 'wasm', kernels: createWasmKernels(new WasmInstance('simd')) });
  } catch {
    // No WASM build on this machine: the TS kernel alone still pins the codec.
  }
  return variants;
}

export const HEADER_COMMANDS: readonly HeaderCommand[] = Array.from({ length: COMMAND_MAX }, (_, index) => {
  const command = index + 1;
  if (commandLayout(command) === undefined) throw new Error(`no layout for ${command}`);
  return command as HeaderCommand;
});

// ---- primitive arbitraries ----

export const u8 = fc.integer({ min: 0, max: 0xff });
export const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
export const u64 = fc.maxSafeNat();
export const u64Big = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
export const u128 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n });
export const u128NonZero = fc.bigInt({ min: 1n, max: (1n << 128n) - 1n });
export const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 });
export const bytes32NonZero = bytes32.map((bytes) => {
  if (bytes.every((byte) => byte === 0)) bytes[0] = 1;
  return bytes;
});
const zero32 = fc.constant(new Uint8Array(32));
const replica = fc.integer({ min: 0, max: 31 });
const body = (maxLength: number) => fc.uint8Array({ maxLength });
/** Operations a Request or Reply may carry: Batch (4) names only a prepare's envelope. */
const requestOperation = (min: number) => fc.integer({ min, max: 255 }).filter((operation) => operation !== Operation.batch);
/** `[low, high]` with low <= high. */
const orderedU64: fc.Arbitrary<readonly [number, number]> = fc
  .tuple(u64, u64)
  .map(([a, b]) => (a <= b ? [a, b] : [b, a]));

function fieldArbitrary(field: FieldSpec): fc.Arbitrary<number | bigint | Uint8Array> {
  switch (field.kind) {
    case FieldKind.u8:
      return u8;
    case FieldKind.u32:
      return u32;
    case FieldKind.u64:
      return u64;
    case FieldKind.u64Big:
      return u64Big;
    case FieldKind.u128:
      return u128;
    case FieldKind.bytes32:
      return bytes32;
  }
}

/** Any representable header of `command` (not necessarily valid): for encode/decode round trips. */
export function anyHeader(command: HeaderCommand): fc.Arbitrary<Header> {
  const layout = commandLayout(command)!;
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of [...COMMON_FIELDS, ...layout.fields]) fields[field.name] = fieldArbitrary(field);
  fields['command'] = fc.constant(command);
  return fc.record(fields) as unknown as fc.Arbitrary<Header>;
}

export const anyHeaderOfAnyCommand: fc.Arbitrary<Header> = fc.constantFrom(...HEADER_COMMANDS).chain(anyHeader);

// ---- valid frames ----

export interface FrameSpec {
  readonly input: HeaderInput;
  readonly body: Uint8Array;
}

function common(control: boolean) {
  return fc.record({ cluster: u128, view: u32, release: control ? fc.constant(0) : u32, replica });
}

function spec<T extends object>(
  control: boolean,
  fields: fc.Arbitrary<T>,
  bodyArbitrary: fc.Arbitrary<Uint8Array> = fc.constant(new Uint8Array(0)),
): fc.Arbitrary<FrameSpec> {
  return fc
    .tuple(common(control), fields, bodyArbitrary)
    .map(([head, own, bytes]) => ({ input: { ...head, ...own } as unknown as HeaderInput, body: bytes }));
}

const requestFields = fc.oneof(
  fc.record({
    operation: fc.constant<number>(Operation.register),
    session: fc.constant(0),
    request: fc.constant(0),
    legacyCommand: fc.constant(0),
  }),
  fc.record({ operation: fc.constant<number>(Operation.nonReplicated), session: u64, request: u64, legacyCommand: u32 }),
  fc.record({
    operation: requestOperation(3),
    session: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    request: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    legacyCommand: fc.constant(0),
  }),
);

const prepareFields = fc
  .record({
    client: u128,
    parent: u128,
    requestChecksum: u128,
    ops: orderedU64,
    timestamp: u64,
    request: u64,
    operation: requestOperation(1),
    group: u64Big,
    userId: u32,
  })
  .map(({ ops, ...rest }) => ({ ...rest, commit: ops[0], op: ops[1] }));

/** A batch prepare (src/vsr/batch.ts): zero client fields in the header, a valid envelope as body. */
const batchRequests = fc.uniqueArray(
  fc.record({
    client: u128NonZero,
    request: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    requestChecksum: u128,
    operation: fc.integer({ min: 5, max: 255 }),
    userId: u32,
    body: body(64),
  }),
  { minLength: 2, maxLength: 6, selector: (request) => request.client },
);
const batchPrepare = fc
  .record({ parent: u128, ops: orderedU64, timestamp: u64, group: u64Big, requests: batchRequests })
  .map(({ ops, requests, ...rest }) => ({
    fields: { ...rest, client: 0n, requestChecksum: 0n, request: 0, operation: Operation.batch, userId: 0, commit: ops[0], op: ops[1] },
    body: encodeBatch(requests),
  }));

function prepareSpec(command: typeof Command.prepare | typeof Command.repairPrepare): fc.Arbitrary<FrameSpec> {
  const batch = fc
    .tuple(common(false), batchPrepare)
    .map(([head, { fields, body: bytes }]) => ({ input: { ...head, command, ...fields } as unknown as HeaderInput, body: bytes }));
  return fc.oneof(spec(false, prepareFields.map((f) => ({ command, ...f })), body(600)), batch);
}

function suffix(count: number): Uint8Array {
  const bytes = new Uint8Array(count * HEADER_SIZE);
  for (let index = 0; index < bytes.byteLength; index++) bytes[index] = (index * 131 + count) & 0xff;
  return bytes;
}

function bitsetBelow(count: number): fc.Arbitrary<bigint> {
  return count === 0 ? fc.constant(0n) : fc.bigInt({ min: 0n, max: (1n << BigInt(count)) - 1n });
}

const dvc = fc.integer({ min: 0, max: 4 }).chain((count) =>
  fc
    .tuple(
      common(true),
      orderedU64,
      u64Big,
      bitsetBelow(count),
      bitsetBelow(count),
      fc.integer({ min: 0, max: 0xffff_ffff }),
    )
    .chain(([head, ops, group, nack, present, logView]) =>
      fc.integer({ min: logView, max: 0xffff_ffff }).map((view) => ({
        input: {
          ...head,
          view,
          command: Command.doViewChange,
          op: ops[1],
          commit: ops[0],
          group,
          logView,
          nackUnknown: 0,
          applied: ops[0],
          nackBitset: nack,
          presentBitset: present,
        } as HeaderInput,
        body: suffix(count),
      })),
    ),
);

const SPECS: { readonly [C in HeaderCommand]: fc.Arbitrary<FrameSpec> } = {
  [Command.ping]: spec(
    true,
    fc.record({
      command: fc.constant(Command.ping),
      checkpointId: u128,
      checkpointOp: u64,
      group: u64Big,
    }),
  ),
  [Command.pong]: spec(true, fc.record({ command: fc.constant(Command.pong) })),
  [Command.pingClient]: spec(false, fc.record({ command: fc.constant(Command.pingClient) })),
  [Command.pongClient]: spec(false, fc.record({ command: fc.constant(Command.pongClient) })),
  [Command.request]: spec(
    false,
    fc
      .tuple(
        fc.record({ client: u128NonZero, requestChecksum: u128, timestamp: u64, userId: u32, group: u64Big }),
        requestFields,
      )
      .map(([a, b]) => ({ command: Command.request, ...a, ...b })),
    body(600),
  ),
  [Command.prepare]: prepareSpec(Command.prepare),
  [Command.repairPrepare]: prepareSpec(Command.repairPrepare),
  [Command.prepareOk]: spec(
    true,
    fc.record({
      command: fc.constant(Command.prepareOk),
      parent: u128,
      prepareChecksum: u128NonZero,
      op: u64,
      commit: u64,
      timestamp: u64,
      request: u64,
      operation: fc.integer({ min: 1, max: 255 }),
      group: u64Big,
    }),
  ),
  [Command.reply]: spec(
    false,
    fc.record({
      command: fc.constant(Command.reply),
      requestChecksum: u128,
      client: u128NonZero,
      op: u64,
      commit: u64,
      timestamp: u64,
      request: u64,
      operation: requestOperation(1),
      status: u32,
    }),
    body(600),
  ),
  [Command.commit]: spec(
    true,
    fc.record({
      command: fc.constant(Command.commit),
      commitChecksum: u128,
      timestampMonotonic: u64,
      commit: u64,
      checkpointOp: u64,
      group: u64Big,
    }),
  ),
  [Command.startViewChange]: spec(true, fc.record({ command: fc.constant(Command.startViewChange), group: u64Big })),
  [Command.doViewChange]: dvc,
  [Command.startView]: fc.integer({ min: 0, max: 4 }).chain((count) =>
    spec(
      true,
      fc
        .record({ ops: orderedU64, group: u64Big, incarnation: u128 })
        .map(({ ops, ...rest }) => ({ command: Command.startView, op: ops[1], commit: ops[0], ...rest })),
      fc.constant(suffix(count)),
    ),
  ),
  [Command.eviction]: spec(
    false,
    fc.oneof(
      fc
        .tuple(fc.integer({ min: 1, max: 0xffff_fffe }), fc.integer({ min: 0, max: 1000 }))
        .map(([min, extra]) => ({
          reason: EvictionReason.incompatibleProtocol as number,
          serverProtocolVersionMin: min,
          serverProtocolVersion: Math.min(0xffff_ffff, min + extra),
        })),
      fc
        .integer({ min: 1, max: 15 })
        .filter((reason) => reason !== EvictionReason.incompatibleProtocol)
        .map((reason) => ({ reason, serverProtocolVersionMin: 0, serverProtocolVersion: 0 })),
    ).chain((fields) => u128NonZero.map((client) => ({ command: Command.eviction, client, ...fields }))),
  ),
  [Command.replicaHello]: spec(
    true,
    fc.oneof(
      fc.record({ nonce: bytes32NonZero, mode: fc.constant<number>(ReplicaAuthMode.psk), peerReplica: replica, mac: bytes32 }),
      fc.record({ nonce: bytes32NonZero, mode: fc.constant<number>(ReplicaAuthMode.none), peerReplica: replica, mac: zero32 }),
    ).map((fields) => ({ command: Command.replicaHello, ...fields })),
  ),
  [Command.replicaChallenge]: spec(
    true,
    fc.oneof(
      fc.record({
        nonce: bytes32NonZero,
        mac: bytes32,
        mode: fc.constant<number>(ReplicaAuthMode.psk),
        status: fc.constant<number>(ReplicaAuthStatus.ok),
      }),
      fc.record({
        nonce: bytes32NonZero,
        mac: zero32,
        mode: fc.constant<number>(ReplicaAuthMode.none),
        status: fc.constant<number>(ReplicaAuthStatus.ok),
      }),
      fc.record({ nonce: bytes32, mac: zero32, mode: fc.integer({ min: 0, max: 1 }), status: fc.integer({ min: 1, max: 3 }) }),
    ).map((fields) => ({ command: Command.replicaChallenge, ...fields })),
  ),
  [Command.replicaFinish]: spec(
    true,
    fc.oneof(
      fc.record({ mac: bytes32, status: fc.constant<number>(ReplicaAuthStatus.ok) }),
      fc.record({ mac: zero32, status: fc.integer({ min: 1, max: 3 }) }),
    ).map((fields) => ({ command: Command.replicaFinish, ...fields })),
  ),
  [Command.requestStartView]: spec(
    true,
    fc.record({ command: fc.constant(Command.requestStartView), group: u64Big, incarnation: u128NonZero, recovering: fc.integer({ min: 0, max: 1 }) }),
  ),
  [Command.requestPrepares]: spec(
    true,
    fc
      .record({ nonce: u128NonZero, ops: orderedU64.filter(([from]) => from >= 1), group: u64Big, committedOnly: fc.integer({ min: 0, max: 1 }) })
      .map(({ ops, ...rest }) => ({ command: Command.requestPrepares, fromOp: ops[0], toOp: ops[1], ...rest })),
  ),
  [Command.repairDone]: spec(
    true,
    fc.record({ command: fc.constant(Command.repairDone), nonce: u128NonZero, op: u64, group: u64Big, servedChecksum: u128 }),
  ),
  [Command.rangeEvicted]: spec(
    true,
    fc.record({ command: fc.constant(Command.rangeEvicted), nonce: u128NonZero, op: u64, group: u64Big }),
  ),
  [Command.requestStateTransfer]: spec(
    true,
    fc.record({ command: fc.constant(Command.requestStateTransfer), nonce: u128NonZero, group: u64Big }),
  ),
  [Command.stateTransferTarget]: fc
    .record({
      head: common(true),
      nonce: u128NonZero,
      ops: orderedU64,
      group: u64Big,
      flags: fc.constantFrom([1, 0], [0, 0], [0, 1]),
      manifestSize: fc.integer({ min: MANIFEST_SIZE_MIN, max: MANIFEST_SIZE_MAX }),
      anchor: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
      checkpoint: fc.oneof(
        fc.constant({ op: 0, id: 0n }),
        fc.record({ op: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), id: fc.bigInt({ min: 1n, max: (1n << 64n) - 1n }) }),
      ),
    })
    .map(({ head, nonce, ops, group, flags, manifestSize, anchor, checkpoint }) => ({
      input: {
        ...head,
        command: Command.stateTransferTarget,
        nonce,
        commitOp: ops[0],
        commitMax: ops[1],
        group,
        available: flags[0]!,
        unavailableTransient: flags[1]!,
        checkpointAnchor: anchor,
        checkpointOp: checkpoint.op,
        checkpointId: checkpoint.id,
      } as HeaderInput,
      body: flags[0] === 1 ? suffix(2).subarray(0, manifestSize).slice() : new Uint8Array(0),
    })),
  [Command.requestStateChunk]: spec(
    true,
    fc.record({
      command: fc.constant(Command.requestStateChunk),
      nonce: u128NonZero,
      offset: u64,
      group: u64Big,
      len: fc.integer({ min: 1, max: STATE_CHUNK_SIZE_MAX }),
      artifact: fc.integer({ min: 0, max: MANIFEST_ENTRIES_MAX - 1 }),
    }),
  ),
  [Command.stateChunk]: spec(
    true,
    fc.record({
      command: fc.constant(Command.stateChunk),
      nonce: u128NonZero,
      offset: u64,
      group: u64Big,
      artifact: fc.integer({ min: 0, max: MANIFEST_ENTRIES_MAX - 1 }),
    }),
    fc.uint8Array({ minLength: 1, maxLength: 1200 }),
  ),
  [Command.requestStoreRange]: spec(
    true,
    fc
      .record({
        command: fc.constant(Command.requestStoreRange),
        nonce: u128NonZero,
        group: u64Big,
        store: u64,
        incarnation: u64,
        fromOffset: fc.integer({ min: 0, max: 2 ** 52 }),
        span: fc.integer({ min: 1, max: 2 ** 40 }),
        bytesMax: fc.integer({ min: 1, max: 1024 * 1024 - 256 }),
      })
      .map(({ span, ...fields }) => ({ ...fields, toOffset: fields.fromOffset + span })),
  ),
  [Command.storeRange]: spec(
    true,
    fc
      .record({
        command: fc.constant(Command.storeRange),
        nonce: u128NonZero,
        group: u64Big,
        store: u64,
        incarnation: u64,
        fromOffset: fc.integer({ min: 0, max: 2 ** 52 }),
        span: fc.integer({ min: 1, max: 2 ** 40 }),
        status: fc.constant(0),
      })
      .map(({ span, ...fields }) => ({ ...fields, nextOffset: fields.fromOffset + span })),
    fc.uint8Array({ minLength: 1, maxLength: 1200 }),
  ),
  [Command.forwardRegister]: spec(
    true,
    fc.record({ command: fc.constant(Command.forwardRegister), client: u128NonZero, nonce: u128NonZero, userId: u32 }),
  ),
  [Command.forwardRegisterResult]: spec(
    true,
    fc
      .record({
        nonce: u128NonZero,
        client: u128NonZero,
        outcome: fc.integer({ min: 0, max: 6 }),
        epoch: u64,
        watermark: u64,
      })
      .map((f) =>
        f.outcome === ForwardRegisterOutcome.ok
          ? { command: Command.forwardRegisterResult, ...f }
          : { command: Command.forwardRegisterResult, ...f, epoch: 0, watermark: 0 },
      ),
  ),
  [Command.forwardLogout]: spec(
    true,
    fc.record({
      command: fc.constant(Command.forwardLogout),
      client: u128NonZero,
      nonce: u128NonZero,
      session: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      request: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    }),
  ),
  [Command.forwardLogoutResult]: spec(
    true,
    fc
      .record({ nonce: u128NonZero, client: u128NonZero, outcome: fc.integer({ min: 0, max: 4 }), commit: u64 })
      .map((f) =>
        f.outcome === ForwardLogoutOutcome.ok
          ? { command: Command.forwardLogoutResult, ...f }
          : { command: Command.forwardLogoutResult, ...f, commit: 0 },
      ),
  ),
  [Command.replicaAdvertise]: spec(
    true,
    fc.record({ command: fc.constant(Command.replicaAdvertise), version: fc.integer({ min: 0, max: 255 }) }),
    fc.uint8Array({ minLength: 0, maxLength: 300 }),
  ),
};

export function validSpec(command: HeaderCommand): fc.Arbitrary<FrameSpec> {
  return SPECS[command];
}

export const validSpecOfAnyCommand: fc.Arbitrary<FrameSpec> = fc.constantFrom(...HEADER_COMMANDS).chain(validSpec);

/** A valid sealed frame (buildFrame asserts validity, so a broken arbitrary fails loudly). */
export function frameOf(kernels: ChecksumKernels, frameSpec: FrameSpec): Uint8Array {
  return buildFrame(kernels, frameSpec.input, frameSpec.body);
}

export const validFrameOfAnyCommand = (kernels: ChecksumKernels): fc.Arbitrary<Uint8Array> =>
  validSpecOfAnyCommand.map((frameSpec) => frameOf(kernels, frameSpec));

/** Encodes and seals `header` + `body` without validating: frames a replica would never send. */
export function sealUnchecked(kernels: ChecksumKernels, header: Header, bodyBytes: Uint8Array = new Uint8Array(0)): Uint8Array {
  const frame = new Uint8Array(HEADER_SIZE + bodyBytes.byteLength);
  encodeHeader({ ...header, size: frame.byteLength }, frame);
  frame.set(bodyBytes, HEADER_SIZE);
  sealFrame(kernels, frame);
  return frame;
}

/** The header `buildFrame` would produce for a spec (size and checksums filled in). */
export function headerOfSpec(frameSpec: FrameSpec): Header {
  return { ...frameSpec.input, size: HEADER_SIZE + frameSpec.body.byteLength, checksum: 0n, checksumBody: 0n } as Header;
}

/** Concatenates frames into one stream. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const total = parts.reduce((sum, part) => sum + part.byteLength, 0);
  const out = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

/** Splits `bytes` at the given cut points (sorted, deduplicated, clamped). */
export function splitAt(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((cut) => Math.max(0, Math.min(bytes.byteLength, cut))))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let start = 0;
  for (const point of points) {
    chunks.push(bytes.subarray(start, point));
    start = point;
  }
  chunks.push(bytes.subarray(start));
  return chunks;
}

export { DVC_HEADERS_MAX, suffix };

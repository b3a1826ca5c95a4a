/**
 * The wire header: layout golden bytes, the layout tables, structural decode rejections, and one
 * test per validate() rule (a valid base header passes, the same header with one field changed
 * fails with exactly that reason).
 */
import { describe, expect, it } from 'vitest';
import {
  COMMAND_MAX,
  DVC_HEADERS_MAX,
  HEADER_SIZE,
  HeaderOffset,
  MANIFEST_ENTRIES_MAX,
  MANIFEST_SIZE_MAX,
  MANIFEST_SIZE_MIN,
  MESSAGE_SIZE_MAX,
  PrepareOffset,
  STATE_CHUNK_SIZE_MAX,
} from '../../src/constants.js';
import { AssertionError } from '../../src/stdx/assert.js';
import {
  COMMAND_LAYOUTS,
  COMMON_FIELDS,
  COMMON_ZERO,
  Command,
  EvictionReason,
  FieldKind,
  FrameRejection,
  Operation,
  ReplicaAuthMode,
  ReplicaAuthStatus,
  commandLayout,
  decodeHeader,
  encodeHeader,
  encodeHeaderBytes,
  validateHeader,
  type Header,
  type HeaderCommand,
  type PrepareHeader,
} from '../../src/vsr/header.js';
import { base, mutate } from '../support/wire-bases.js';
import { HEADER_COMMANDS } from '../support/wire-fixtures.js';

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

function fromHex(text: string): Uint8Array {
  const clean = text.replace(/\s+/g, '');
  return Uint8Array.from(clean.match(/../g)!, (pair) => parseInt(pair, 16));
}

describe('header layout', () => {
  it('golden: a hand-built Prepare lands at the documented offsets, byte for byte', () => {
    const header: PrepareHeader = {
      checksum: 0x0f0e_0d0c_0b0a_0908_0706_0504_0302_0100n,
      checksumBody: 0x1f1e_1d1c_1b1a_1918_1716_1514_1312_1110n,
      cluster: 0x2f2e_2d2c_2b2a_2928_2726_2524_2322_2120n,
      size: 0x3332_3130,
      view: 0x3736_3534,
      release: 0x3b3a_3938,
      command: Command.prepare,
      replica: 0x1d,
      client: 0x8f8e_8d8c_8b8a_8988_8786_8584_8382_8180n,
      parent: 0x9f9e_9d9c_9b9a_9998_9796_9594_9392_9190n,
      requestChecksum: 0xafae_adac_abaa_a9a8_a7a6_a5a4_a3a2_a1a0n,
      op: 0x1f_b5b4_b3b2_b1b0,
      commit: 0x1f_bdbc_bbba_b9b8,
      timestamp: 0x1f_c5c4_c3c2_c1c0,
      request: 0x1f_cdcc_cbca_c9c8,
      operation: 0x80,
      group: 0xdfde_dddc_dbda_d9d8n,
      userId: 0xe3e2_e1e0,
    };
    const expected = fromHex(`
      000102030405060708090a0b0c0d0e0f  101112131415161718191a1b1c1d1e1f
      202122232425262728292a2b2c2d2e2f  303132333435363738393a3b061d0000
      00000000000000000000000000000000  00000000000000000000000000000000
      00000000000000000000000000000000  00000000000000000000000000000000
      808182838485868788898a8b8c8d8e8f  909192939495969798999a9b9c9d9e9f
      a0a1a2a3a4a5a6a7a8a9aaabacadaeaf  b0b1b2b3b4b51f00b8b9babbbcbd1f00
      c0c1c2c3c4c51f00c8c9cacbcccd1f00  8000000000000000d8d9dadbdcdddedf
      e0e1e2e3000000000000000000000000  00000000000000000000000000000000
    `);
    expect(expected.byteLength).toBe(HEADER_SIZE);
    const bytes = encodeHeaderBytes(header);
    expect(hex(bytes)).toBe(hex(expected));
    // The shared offset constants (journal scan, WAL fixtures) name the same bytes.
    expect(bytes[PrepareOffset.operation]).toBe(0x80);
    expect(bytes[PrepareOffset.op]).toBe(0xb0);
    expect(bytes[PrepareOffset.group]).toBe(0xd8);
    expect(bytes[HeaderOffset.command]).toBe(Command.prepare);
    const decoded = decodeHeader(bytes);
    expect(decoded).toEqual({ ok: true, header });
  });

  it('every command 1..29 has a layout that tiles bytes 128..256 exactly', () => {
    expect(commandLayout(0)).toBeUndefined();
    for (let command = 1; command <= COMMAND_MAX; command++) {
      const layout = commandLayout(command)!;
      expect(layout.command).toBe(command);
      const covered = new Uint8Array(HEADER_SIZE);
      for (const range of [...COMMON_FIELDS, COMMON_ZERO, ...layout.fields, ...layout.zero]) {
        for (let index = range.offset; index < range.offset + range.size; index++) covered[index]! += 1;
      }
      expect([...covered].every((count) => count === 1), layout.name).toBe(true);
    }
    expect(COMMAND_LAYOUTS).toHaveLength(COMMAND_MAX);
  });

  it('header-only, control and checksum kinds follow §1.3/§1.6', () => {
    const withBody = COMMAND_LAYOUTS.filter((layout) => layout.bodySizeMax > 0).map((layout) => layout.name);
    expect(withBody.sort()).toEqual(
      [
        'request',
        'prepare',
        'repair_prepare',
        'reply',
        'do_view_change',
        'start_view',
        'state_transfer_target',
        'state_chunk',
        'store_range',
        'replica_advertise',
      ].sort(),
    );
    const identity = COMMAND_LAYOUTS.filter((layout) => layout.checksum === 'identity').map((layout) => layout.command);
    expect(identity).toEqual([Command.prepare, Command.repairPrepare]);
    const clientFacing = COMMAND_LAYOUTS.filter((layout) => !layout.control).map((layout) => layout.command);
    expect(clientFacing.sort((a, b) => a - b)).toEqual([
      Command.pingClient,
      Command.pongClient,
      Command.request,
      Command.prepare,
      Command.reply,
      Command.eviction,
      Command.repairPrepare,
    ]);
  });
});

describe('decodeHeader: structure', () => {
  it('rejects fewer than 256 bytes', () => {
    expect(decodeHeader(new Uint8Array(255))).toEqual({ ok: false, reason: 'header_truncated' });
    const bytes = encodeHeaderBytes(base(Command.commit));
    expect(decodeHeader(bytes, 1)).toEqual({ ok: false, reason: 'header_truncated' });
  });

  it('rejects command Reserved and every command above 29', () => {
    const bytes = encodeHeaderBytes(base(Command.commit));
    for (const command of [0, COMMAND_MAX + 1, 100, 255]) {
      bytes[HeaderOffset.command] = command;
      expect(decodeHeader(bytes)).toEqual({ ok: false, reason: 'command_invalid' });
    }
  });

  it('rejects a non-zero byte in any reserved or pad range of any command', () => {
    for (const command of HEADER_COMMANDS) {
      const layout = commandLayout(command)!;
      const clean = encodeHeaderBytes(base(command));
      expect(decodeHeader(clean).ok).toBe(true);
      for (const range of [COMMON_ZERO, ...layout.zero]) {
        for (let index = range.offset; index < range.offset + range.size; index++) {
          const bytes = clean.slice();
          bytes[index] = 0x40;
          expect(decodeHeader(bytes), `${layout.name} byte ${index}`).toEqual({ ok: false, reason: 'reserved_nonzero' });
        }
      }
    }
  });

  it('rejects a u64 counter above 2^53 - 1 instead of losing precision', () => {
    for (const command of HEADER_COMMANDS) {
      const layout = commandLayout(command)!;
      for (const field of layout.fields.filter((f) => f.kind === FieldKind.u64)) {
        const bytes = encodeHeaderBytes(base(command));
        // 2^53: the smallest unsafe value.
        bytes.fill(0, field.offset, field.offset + 8);
        bytes[field.offset + 6] = 0x20;
        expect(decodeHeader(bytes), `${layout.name}.${field.name}`).toEqual({
          ok: false,
          reason: 'u64_above_safe_integer',
        });
        // 2^53 - 1 is fine.
        bytes.fill(0xff, field.offset, field.offset + 6);
        bytes[field.offset + 6] = 0x1f;
        const decoded = decodeHeader(bytes);
        expect(decoded.ok && (decoded.header as unknown as Record<string, number>)[field.name]).toBe(
          Number.MAX_SAFE_INTEGER,
        );
      }
    }
  });

  it('decodes u64 group and u128 fields as exact bigints at their maximum', () => {
    const header = { ...base(Command.prepare), group: (1n << 64n) - 1n, client: (1n << 128n) - 1n };
    const decoded = decodeHeader(encodeHeaderBytes(header));
    expect(decoded).toEqual({ ok: true, header });
  });

  it('decoded 32-byte fields are copies, not views of the receive buffer', () => {
    const bytes = encodeHeaderBytes(base(Command.replicaHello));
    const decoded = decodeHeader(bytes);
    bytes.fill(0, 128, 160);
    expect(decoded.ok && decoded.header.command === Command.replicaHello && decoded.header.nonce[0]).toBe(0x5a);
  });
});

describe('encodeHeader', () => {
  it('asserts on values its field cannot hold (a caller bug, not network input)', () => {
    const cases: Partial<Record<string, unknown>>[] = [
      { op: -1 },
      { op: 1.5 },
      { op: Number.MAX_SAFE_INTEGER + 1 },
      { operation: 256 },
      { userId: 2 ** 32 },
      { group: 1n << 64n },
      { client: 1n << 128n },
      { client: -1n },
      { view: -1 },
    ];
    for (const change of cases) {
      expect(() => encodeHeaderBytes(mutate(Command.prepare, change)), JSON.stringify(change, (_, v) => String(v))).toThrow(
        AssertionError,
      );
    }
    expect(() => encodeHeader(base(Command.prepare), new Uint8Array(255))).toThrow(AssertionError);
  });

  it('zeroes reserved bytes left over in a reused buffer', () => {
    const bytes = new Uint8Array(HEADER_SIZE).fill(0xee);
    encodeHeader(base(Command.startViewChange), bytes);
    expect(decodeHeader(bytes)).toEqual({ ok: true, header: base(Command.startViewChange) });
  });
});

interface RuleCase {
  readonly name: string;
  readonly header: Header;
  readonly reason: FrameRejection;
}

const HEADER_ONLY: readonly HeaderCommand[] = HEADER_COMMANDS.filter((command) => commandLayout(command)!.bodySizeMax === 0);
const NONCE_COMMANDS = [
  Command.requestPrepares,
  Command.repairDone,
  Command.rangeEvicted,
  Command.requestStateTransfer,
  Command.stateTransferTarget,
  Command.requestStateChunk,
  Command.stateChunk,
  Command.forwardRegister,
  Command.forwardRegisterResult,
  Command.forwardLogout,
  Command.forwardLogoutResult,
] as const;
const CLIENT_COMMANDS = [
  Command.request,
  Command.reply,
  Command.eviction,
  Command.forwardRegister,
  Command.forwardRegisterResult,
  Command.forwardLogout,
  Command.forwardLogoutResult,
] as const;
const CONTROL = COMMAND_LAYOUTS.filter((layout) => layout.control).map((layout) => layout.command);

function suffixSize(count: number): number {
  return HEADER_SIZE + count * HEADER_SIZE;
}

/** The header fields a batch prepare keeps at zero. */
const BATCH_ZERO = { client: 0n, request: 0, requestChecksum: 0n, userId: 0 };

const RULES: readonly RuleCase[] = [
  // Common rules.
  { name: 'size below 256', header: mutate(Command.ping, { size: 255 }), reason: 'size_below_header' },
  { name: 'size above the frame bound', header: mutate(Command.request, { size: MESSAGE_SIZE_MAX + 1 }), reason: 'size_above_max' },
  { name: 'replica index 32', header: mutate(Command.commit, { replica: 32 }), reason: 'replica_out_of_range' },
  ...CONTROL.map((command) => ({
    name: `release on control frame ${command}`,
    header: mutate(command, { release: 1 }),
    reason: FrameRejection.releaseNonzero,
  })),
  ...HEADER_ONLY.map((command) => ({
    name: `header-only ${commandLayout(command)!.name} with a body`,
    header: mutate(command, { size: HEADER_SIZE + 1 }),
    reason: FrameRejection.sizeNotHeaderOnly,
  })),
  ...HEADER_ONLY.map((command) => ({
    name: `header-only ${commandLayout(command)!.name} claiming a full frame`,
    header: mutate(command, { size: MESSAGE_SIZE_MAX }),
    reason: FrameRejection.sizeNotHeaderOnly,
  })),
  ...CLIENT_COMMANDS.map((command) => ({
    name: `${commandLayout(command)!.name} without a client`,
    header: mutate(command, { client: 0n }),
    reason: FrameRejection.clientRequired,
  })),
  ...NONCE_COMMANDS.map((command) => ({
    name: `${commandLayout(command)!.name} without a nonce`,
    header: mutate(command, { nonce: 0n }),
    reason: FrameRejection.nonceRequired,
  })),

  // Request.
  { name: 'request op Reserved', header: mutate(Command.request, { operation: 0 }), reason: 'operation_reserved' },
  {
    name: 'register with a session',
    header: mutate(Command.request, { operation: Operation.register, session: 1, request: 0 }),
    reason: 'register_session_nonzero',
  },
  {
    name: 'register with a request number',
    header: mutate(Command.request, { operation: Operation.register, session: 0, request: 1 }),
    reason: 'register_session_nonzero',
  },
  { name: 'request without session', header: mutate(Command.request, { session: 0 }), reason: 'session_required' },
  { name: 'request without request number', header: mutate(Command.request, { request: 0 }), reason: 'session_required' },
  {
    name: 'legacy command on a replicated op',
    header: mutate(Command.request, { legacyCommand: 5 }),
    reason: 'legacy_command_unexpected',
  },

  // Reply.
  { name: 'reply op Reserved', header: mutate(Command.reply, { operation: 0 }), reason: 'operation_reserved' },

  // Eviction.
  { name: 'eviction reason Reserved', header: mutate(Command.eviction, { reason: 0 }), reason: 'eviction_reason_invalid' },
  { name: 'eviction reason 16', header: mutate(Command.eviction, { reason: 16 }), reason: 'eviction_reason_invalid' },
  {
    name: 'incompatible protocol with min 0',
    header: mutate(Command.eviction, {
      reason: EvictionReason.incompatibleProtocol,
      serverProtocolVersionMin: 0,
      serverProtocolVersion: 3,
    }),
    reason: 'protocol_window_invalid',
  },
  {
    name: 'incompatible protocol with min > max',
    header: mutate(Command.eviction, {
      reason: EvictionReason.incompatibleProtocol,
      serverProtocolVersionMin: 4,
      serverProtocolVersion: 3,
    }),
    reason: 'protocol_window_invalid',
  },
  {
    name: 'protocol window on another reason',
    header: mutate(Command.eviction, { serverProtocolVersion: 1 }),
    reason: 'protocol_window_invalid',
  },
  {
    name: 'protocol min on another reason',
    header: mutate(Command.eviction, { serverProtocolVersionMin: 1, serverProtocolVersion: 1 }),
    reason: 'protocol_window_invalid',
  },

  // Prepare / RepairPrepare / PrepareOk.
  { name: 'prepare commit above op', header: mutate(Command.prepare, { commit: 51 }), reason: 'commit_above_op' },
  { name: 'repair prepare commit above op', header: mutate(Command.repairPrepare, { commit: 51 }), reason: 'commit_above_op' },
  { name: 'prepare op Reserved', header: mutate(Command.prepare, { operation: 0 }), reason: 'operation_reserved' },
  { name: 'prepare ok op Reserved', header: mutate(Command.prepareOk, { operation: 0 }), reason: 'operation_reserved' },
  // A batch prepare (src/vsr/batch.ts) names its clients in the envelope, never in the header.
  ...(['client', 'request', 'requestChecksum', 'userId'] as const).flatMap((field) =>
    [Command.prepare, Command.repairPrepare].map((command) => ({
      name: `${commandLayout(command)!.name} batch with a non-zero ${field}`,
      header: mutate(command, { ...BATCH_ZERO, operation: Operation.batch, [field]: field === 'client' || field === 'requestChecksum' ? 9n : 9 }),
      reason: 'batch_header_fields_nonzero' as const,
    })),
  ),
  { name: 'request with operation Batch', header: mutate(Command.request, { operation: Operation.batch }), reason: 'operation_batch_misplaced' },
  { name: 'reply with operation Batch', header: mutate(Command.reply, { operation: Operation.batch }), reason: 'operation_batch_misplaced' },
  {
    name: 'prepare ok without prepare checksum',
    header: mutate(Command.prepareOk, { prepareChecksum: 0n }),
    reason: 'prepare_checksum_required',
  },

  // DoViewChange / StartView.
  { name: 'DVC log_view above view', header: mutate(Command.doViewChange, { logView: 8 }), reason: 'log_view_above_view' },
  { name: 'SV commit above op', header: mutate(Command.startView, { commit: 51 }), reason: 'commit_above_op' },
  { name: 'DVC applied above op', header: mutate(Command.doViewChange, { applied: 51 }), reason: 'commit_above_op' },
  {
    name: 'DVC suffix not whole headers',
    header: mutate(Command.doViewChange, { size: suffixSize(3) + 100 }),
    reason: 'suffix_not_whole_headers',
  },
  {
    name: 'SV suffix not whole headers',
    header: mutate(Command.startView, { size: suffixSize(1) - 1 }),
    reason: 'suffix_not_whole_headers',
  },
  {
    name: 'DVC suffix of 129 headers',
    header: mutate(Command.doViewChange, { size: suffixSize(DVC_HEADERS_MAX + 1) }),
    reason: 'suffix_too_long',
  },
  {
    name: 'SV suffix of 129 headers',
    header: mutate(Command.startView, { size: suffixSize(DVC_HEADERS_MAX + 1) }),
    reason: 'suffix_too_long',
  },
  {
    name: 'DVC nack bit beyond the suffix',
    header: mutate(Command.doViewChange, { nackBitset: 1n << 3n }),
    reason: 'bitset_beyond_suffix',
  },
  {
    name: 'DVC present bit beyond the suffix',
    header: mutate(Command.doViewChange, { presentBitset: 1n << 127n }),
    reason: 'bitset_beyond_suffix',
  },
  {
    name: 'DVC with an empty suffix and a bit set',
    header: mutate(Command.doViewChange, { size: HEADER_SIZE, nackBitset: 0n, presentBitset: 1n }),
    reason: 'bitset_beyond_suffix',
  },

  // Probe and repair.
  {
    name: 'RequestStartView without incarnation',
    header: mutate(Command.requestStartView, { incarnation: 0n }),
    reason: 'incarnation_required',
  },
  { name: 'RequestPrepares from op 0', header: mutate(Command.requestPrepares, { fromOp: 0 }), reason: 'op_range_invalid' },
  {
    name: 'RequestPrepares from > to',
    header: mutate(Command.requestPrepares, { fromOp: 21, toOp: 20 }),
    reason: 'op_range_invalid',
  },

  // State transfer.
  { name: 'target available = 2', header: mutate(Command.stateTransferTarget, { available: 2 }), reason: 'flag_invalid' },
  { name: 'request prepares committed_only = 2', header: mutate(Command.requestPrepares, { committedOnly: 2 }), reason: 'flag_invalid' },
  { name: 'request start view recovering = 2', header: mutate(Command.requestStartView, { recovering: 2 }), reason: 'flag_invalid' },
  {
    name: 'target unavailable_transient = 2',
    header: mutate(Command.stateTransferTarget, { available: 0, size: HEADER_SIZE, unavailableTransient: 2 }),
    reason: 'flag_invalid',
  },
  {
    name: 'target available and transient',
    header: mutate(Command.stateTransferTarget, { unavailableTransient: 1 }),
    reason: 'target_flags_conflict',
  },
  {
    name: 'target unavailable with a body',
    header: mutate(Command.stateTransferTarget, { available: 0 }),
    reason: 'size_not_header_only',
  },
  {
    name: 'target available without a manifest',
    header: mutate(Command.stateTransferTarget, { size: HEADER_SIZE }),
    reason: 'manifest_size_invalid',
  },
  {
    name: 'target manifest below the minimum',
    header: mutate(Command.stateTransferTarget, { size: HEADER_SIZE + MANIFEST_SIZE_MIN - 1 }),
    reason: 'manifest_size_invalid',
  },
  {
    name: 'target manifest above the maximum',
    header: mutate(Command.stateTransferTarget, { size: HEADER_SIZE + MANIFEST_SIZE_MAX + 1 }),
    reason: 'manifest_size_invalid',
  },
  {
    name: 'target commit_op above commit_max',
    header: mutate(Command.stateTransferTarget, { commitOp: 49 }),
    reason: 'commit_op_above_commit_max',
  },
  { name: 'target checkpoint op without an id', header: mutate(Command.stateTransferTarget, { checkpointId: 0n }), reason: 'checkpoint_invalid' },
  { name: 'target checkpoint id without an op', header: mutate(Command.stateTransferTarget, { checkpointOp: 0 }), reason: 'checkpoint_invalid' },
  { name: 'chunk request len 0', header: mutate(Command.requestStateChunk, { len: 0 }), reason: 'chunk_len_zero' },
  {
    name: 'chunk request above the chunk max',
    header: mutate(Command.requestStateChunk, { len: STATE_CHUNK_SIZE_MAX + 1 }),
    reason: 'chunk_len_above_max',
  },
  {
    name: 'chunk request artifact out of range',
    header: mutate(Command.requestStateChunk, { artifact: MANIFEST_ENTRIES_MAX }),
    reason: 'artifact_out_of_range',
  },
  {
    name: 'chunk artifact out of range',
    header: mutate(Command.stateChunk, { artifact: MANIFEST_ENTRIES_MAX }),
    reason: 'artifact_out_of_range',
  },
  { name: 'empty state chunk', header: mutate(Command.stateChunk, { size: HEADER_SIZE }), reason: 'chunk_empty' },
  { name: 'store range request without a nonce', header: mutate(Command.requestStoreRange, { nonce: 0n }), reason: 'nonce_required' },
  { name: 'store range request naming no offsets', header: mutate(Command.requestStoreRange, { toOffset: 100 }), reason: 'store_range_empty' },
  { name: 'store range request for no bytes', header: mutate(Command.requestStoreRange, { bytesMax: 0 }), reason: 'chunk_len_zero' },
  { name: 'store range request above the body bound', header: mutate(Command.requestStoreRange, { bytesMax: 1024 * 1024 }), reason: 'chunk_len_above_max' },
  { name: 'store range request with a body', header: mutate(Command.requestStoreRange, { size: HEADER_SIZE + 8 }), reason: 'size_not_header_only' },
  { name: 'empty store range', header: mutate(Command.storeRange, { size: HEADER_SIZE }), reason: 'chunk_empty' },
  { name: 'store range that moves no offset', header: mutate(Command.storeRange, { nextOffset: 100 }), reason: 'store_range_empty' },
  { name: 'unavailable store range with records', header: mutate(Command.storeRange, { status: 1, nextOffset: 100 }), reason: 'size_not_header_only' },
  { name: 'unavailable store range that moves', header: mutate(Command.storeRange, { status: 1, size: HEADER_SIZE }), reason: 'store_range_empty' },
  { name: 'store range of an unknown status', header: mutate(Command.storeRange, { status: 3 }), reason: 'outcome_invalid' },
  {
    name: 'state chunk above the chunk max',
    header: mutate(Command.stateChunk, { size: HEADER_SIZE + STATE_CHUNK_SIZE_MAX + 1 }),
    reason: 'body_above_max',
  },

  // Forwarding.
  { name: 'register result outcome 7', header: mutate(Command.forwardRegisterResult, { outcome: 7 }), reason: 'outcome_invalid' },
  {
    name: 'register refusal with an epoch',
    header: mutate(Command.forwardRegisterResult, { outcome: 1, watermark: 0 }),
    reason: 'result_fields_nonzero',
  },
  {
    name: 'register refusal with a watermark',
    header: mutate(Command.forwardRegisterResult, { outcome: 3, epoch: 0 }),
    reason: 'result_fields_nonzero',
  },
  { name: 'logout result outcome 5', header: mutate(Command.forwardLogoutResult, { outcome: 5 }), reason: 'outcome_invalid' },
  {
    name: 'logout refusal with a commit',
    header: mutate(Command.forwardLogoutResult, { outcome: 2 }),
    reason: 'result_fields_nonzero',
  },
  { name: 'forward logout without session', header: mutate(Command.forwardLogout, { session: 0 }), reason: 'session_required' },
  { name: 'forward logout without request', header: mutate(Command.forwardLogout, { request: 0 }), reason: 'session_required' },

  // Replica auth.
  { name: 'hello mode 2', header: mutate(Command.replicaHello, { mode: 2 }), reason: 'auth_mode_invalid' },
  { name: 'challenge mode 2', header: mutate(Command.replicaChallenge, { mode: 2 }), reason: 'auth_mode_invalid' },
  { name: 'hello peer replica 32', header: mutate(Command.replicaHello, { peerReplica: 32 }), reason: 'replica_out_of_range' },
  { name: 'hello zero nonce', header: mutate(Command.replicaHello, { nonce: new Uint8Array(32) }), reason: 'auth_nonce_required' },
  {
    name: 'challenge ok with zero nonce',
    header: mutate(Command.replicaChallenge, { nonce: new Uint8Array(32) }),
    reason: 'auth_nonce_required',
  },
  { name: 'challenge status 4', header: mutate(Command.replicaChallenge, { status: 4 }), reason: 'auth_status_invalid' },
  { name: 'finish status 4', header: mutate(Command.replicaFinish, { status: 4 }), reason: 'auth_status_invalid' },
  {
    name: 'challenge MAC in mode none',
    header: mutate(Command.replicaChallenge, { mode: ReplicaAuthMode.none }),
    reason: 'auth_mac_unexpected',
  },
  {
    name: 'challenge MAC on a refusal',
    header: mutate(Command.replicaChallenge, { status: ReplicaAuthStatus.macMismatch }),
    reason: 'auth_mac_unexpected',
  },
  {
    name: 'finish MAC on a refusal',
    header: mutate(Command.replicaFinish, { status: ReplicaAuthStatus.modeMismatch }),
    reason: 'auth_mac_unexpected',
  },
];

describe('validateHeader', () => {
  it('accepts every base header', () => {
    for (const command of HEADER_COMMANDS) expect(validateHeader(base(command)), commandLayout(command)!.name).toBeNull();
  });

  it.each(RULES.map((rule) => [rule.name, rule] as const))('rejects %s', (_name, rule) => {
    const baseHeader = base(rule.header.command);
    expect(validateHeader(baseHeader)).toBeNull();
    expect(validateHeader(rule.header)).toBe(rule.reason);
  });

  it('covers every validate reason with at least one rule test', () => {
    const covered = new Set(RULES.map((rule) => rule.reason));
    const validateReasons = Object.values(FrameRejection).filter(
      (reason) =>
        ![
          'header_truncated',
          'size_mismatch',
          'command_invalid',
          'seal_mismatch',
          'identity_mismatch',
          'body_checksum_mismatch',
          'reserved_nonzero',
          'u64_above_safe_integer',
          'cluster_mismatch',
          // A body rule (validateBody, after the body checksum): pinned in frame.test.ts.
          'batch_envelope_invalid',
        ].includes(reason),
    );
    expect(validateReasons.filter((reason) => !covered.has(reason))).toEqual([]);
  });

  it('accepts the edges the rules allow', () => {
    const accepted: Header[] = [
      mutate(Command.request, { operation: Operation.register, session: 0, request: 0 }),
      mutate(Command.request, { operation: Operation.nonReplicated, session: 0, request: 0, legacyCommand: 77 }),
      mutate(Command.prepare, { release: 9, commit: 50 }),
      mutate(Command.prepareOk, { commit: 1000 }),
      mutate(Command.prepare, { ...BATCH_ZERO, operation: Operation.batch }),
      mutate(Command.repairPrepare, { ...BATCH_ZERO, operation: Operation.batch }),
      mutate(Command.prepareOk, { operation: Operation.batch }),
      mutate(Command.doViewChange, { logView: 7 }),
      mutate(Command.doViewChange, {
        size: suffixSize(DVC_HEADERS_MAX),
        nackBitset: (1n << 128n) - 1n,
        presentBitset: (1n << 128n) - 1n,
      }),
      mutate(Command.startView, { size: HEADER_SIZE }),
      mutate(Command.requestPrepares, { fromOp: 20, toOp: 20 }),
      mutate(Command.stateTransferTarget, { available: 0, unavailableTransient: 1, size: HEADER_SIZE }),
      mutate(Command.stateTransferTarget, { size: HEADER_SIZE + MANIFEST_SIZE_MAX, commitOp: 48 }),
      mutate(Command.requestStateChunk, { len: STATE_CHUNK_SIZE_MAX, artifact: MANIFEST_ENTRIES_MAX - 1 }),
      mutate(Command.stateChunk, { size: HEADER_SIZE + STATE_CHUNK_SIZE_MAX }),
      mutate(Command.eviction, {
        reason: EvictionReason.incompatibleProtocol,
        serverProtocolVersionMin: 2,
        serverProtocolVersion: 2,
      }),
      mutate(Command.replicaChallenge, { status: ReplicaAuthStatus.replicaMismatch, mac: new Uint8Array(32), nonce: new Uint8Array(32) }),
      mutate(Command.replicaFinish, { mac: new Uint8Array(32) }),
      mutate(Command.commit, { replica: 31 }),
    ];
    for (const header of accepted) expect(validateHeader(header), JSON.stringify(header, (_, v) => String(v))).toBeNull();
  });
});

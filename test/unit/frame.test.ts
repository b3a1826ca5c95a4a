/**
 * Frame checksums (§1.3 plus vrmeta's hardening) and the one-shot decode: seal, prepare identity,
 * body checksum, and the order in which a frame is checked.
 */
import { describe, expect, it } from 'vitest';
import { COMMAND_MAX, HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX } from '../../src/constants.js';
import { prepareIdentityAt } from '../../src/kernels/journal-scan-ts.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { buildPrepare } from '../../src/testing/wal-image.js';
import {
  buildFrame,
  buildFrameHeader,
  decodeFrame,
  frameSeal,
  prepareIdentity,
  sealFrame,
  sealPrepare,
  setPrepareView,
  verifyFrame,
  withPrepareCommand,
} from '../../src/vsr/frame.js';
import {
  Command,
  commandLayout,
  readU64Big,
  writeU128,
  writeU32,
  type Header,
  type HeaderCommand,
  type HeaderInput,
} from '../../src/vsr/header.js';
import { base, mutate } from '../support/wire-bases.js';
import { HEADER_COMMANDS, checksumKernelVariants, sealUnchecked, tsKernels } from '../support/wire-fixtures.js';

const variants = await checksumKernelVariants();

/** XXH3-64 of zero bytes: the body checksum of every header-only frame. */
const XXH3_EMPTY = 0x2d06_8005_38d3_94c2n;

function bodyFor(header: Header): Uint8Array {
  const body = new Uint8Array(header.size - HEADER_SIZE);
  for (let index = 0; index < body.byteLength; index++) body[index] = (index * 7 + 3) & 0xff;
  return body;
}

function baseFrame(command: HeaderCommand, kernels = tsKernels): Uint8Array {
  const header = base(command);
  const { size: _size, checksum: _checksum, checksumBody: _checksumBody, ...input } = header;
  return buildFrame(kernels, input as HeaderInput, bodyFor(header));
}

describe.each(variants.map((variant) => [variant.label, variant.kernels] as const))('checksums (%s kernels)', (_label, kernels) => {
  it('seals every command so that verifyFrame and decodeFrame accept it', () => {
    for (const command of HEADER_COMMANDS) {
      const frame = baseFrame(command, kernels);
      expect(verifyFrame(kernels, frame), commandLayout(command)!.name).toBeNull();
      const result = decodeFrame(kernels, frame);
      expect(result.ok && result.header.command).toBe(command);
    }
  });

  it('seal = XXH3-64 of bytes 16..256 widened to u128; body checksum covers 256..size', () => {
    const frame = baseFrame(Command.stateChunk, kernels);
    expect(readU64Big(frame, 0)).toBe(kernels.xxh3_64(frame.subarray(16, 256), 0n));
    expect(readU64Big(frame, 8)).toBe(0n);
    expect(readU64Big(frame, 16)).toBe(kernels.xxh3_64(frame.subarray(256), 0n));
    expect(readU64Big(frame, 24)).toBe(0n);
    expect(frameSeal(kernels, frame)).toBe(readU64Big(frame, 0));
  });

  it("an empty body's checksum is XXH3-64 of zero bytes, never 0", () => {
    const frame = baseFrame(Command.commit, kernels);
    expect(readU64Big(frame, HeaderOffset.checksumBody)).toBe(XXH3_EMPTY);
    // The reference's "0 = no body checksum" is not accepted, even re-sealed.
    writeU128(frame, HeaderOffset.checksumBody, 0n);
    writeU128(frame, HeaderOffset.checksum, frameSeal(kernels, frame));
    expect(verifyFrame(kernels, frame)).toBe('body_checksum_mismatch');
  });

  it('a zero checksum is never "unsealed": client-facing and control frames alike', () => {
    for (const command of [Command.request, Command.reply, Command.eviction, Command.commit, Command.stateChunk]) {
      const frame = baseFrame(command, kernels);
      writeU128(frame, HeaderOffset.checksum, 0n);
      expect(verifyFrame(kernels, frame)).toBe('seal_mismatch');
    }
    const prepare = baseFrame(Command.prepare, kernels);
    writeU128(prepare, HeaderOffset.checksum, 0n);
    expect(verifyFrame(kernels, prepare)).toBe('identity_mismatch');
  });

  it('the upper 64 bits of checksum and checksum_body must be zero', () => {
    const frame = baseFrame(Command.request, kernels);
    frame[15] = 1;
    expect(verifyFrame(kernels, frame)).toBe('seal_mismatch');
    const other = baseFrame(Command.request, kernels);
    other[31] = 1;
    writeU128(other, HeaderOffset.checksum, frameSeal(kernels, other));
    expect(verifyFrame(kernels, other)).toBe('body_checksum_mismatch');
    const prepare = baseFrame(Command.prepare, kernels);
    prepare[15] = 1;
    expect(verifyFrame(kernels, prepare)).toBe('identity_mismatch');
  });

  it('a body byte flipped is a body checksum mismatch', () => {
    const frame = baseFrame(Command.doViewChange, kernels);
    frame[HEADER_SIZE + 100]! ^= 0x01;
    expect(verifyFrame(kernels, frame)).toBe('body_checksum_mismatch');
  });

  it('prepare identity ignores checksum and view; every other header bit changes it', () => {
    const frame = baseFrame(Command.prepare, kernels);
    const identity = prepareIdentity(kernels, frame);
    expect(readU64Big(frame, 0)).toBe(identity);
    for (let offset = 0; offset < HEADER_SIZE; offset++) {
      const ignored = offset < 16 || (offset >= HeaderOffset.view && offset < HeaderOffset.view + 4);
      for (let bit = 0; bit < 8; bit++) {
        const copy = frame.slice();
        copy[offset]! ^= 1 << bit;
        const changed = prepareIdentity(kernels, copy) !== identity;
        expect(changed, `byte ${offset} bit ${bit}`).toBe(!ignored);
      }
    }
  });

  it('prepare identity is over the header only: the body is covered by checksum_body', () => {
    const frame = baseFrame(Command.prepare, kernels);
    const identity = prepareIdentity(kernels, frame);
    frame[HEADER_SIZE]! ^= 0xff;
    expect(prepareIdentity(kernels, frame)).toBe(identity);
    expect(verifyFrame(kernels, frame)).toBe('body_checksum_mismatch');
  });

  it('a re-stamped view keeps the prepare sealed with the same identity', () => {
    const frame = baseFrame(Command.prepare, kernels);
    const identity = prepareIdentity(kernels, frame);
    setPrepareView(frame, 1234);
    expect(verifyFrame(kernels, frame)).toBeNull();
    expect(prepareIdentity(kernels, frame)).toBe(identity);
    const result = decodeFrame(kernels, frame);
    expect(result.ok && result.header.view).toBe(1234);
    expect(() => setPrepareView(baseFrame(Command.commit, kernels), 1)).toThrow(AssertionError);
  });

  it('a RepairPrepare is the stored prepare verbatim with command 19, under the same identity', () => {
    const prepare = baseFrame(Command.prepare, kernels);
    const repair = withPrepareCommand(prepare, Command.repairPrepare);
    expect(repair[HeaderOffset.command]).toBe(Command.repairPrepare);
    expect(verifyFrame(kernels, repair)).toBeNull();
    expect(prepareIdentity(kernels, repair)).toBe(prepareIdentity(kernels, prepare));
    expect(withPrepareCommand(repair, Command.prepare)).toEqual(prepare);
    // Sealing a RepairPrepare directly yields the same bytes as converting a sealed Prepare.
    const direct = baseFrame(Command.repairPrepare, kernels);
    expect(direct).toEqual(repair);
  });

  it('sealPrepare seals only prepares', () => {
    const frame = baseFrame(Command.prepare, kernels);
    frame.fill(0, 0, 32);
    sealPrepare(kernels, frame);
    expect(verifyFrame(kernels, frame)).toBeNull();
    expect(() => sealPrepare(kernels, baseFrame(Command.commit, kernels))).toThrow(AssertionError);
  });
});

describe('checksum kernels agree', () => {
  it('every available kernel produces the same sealed bytes', () => {
    const reference = HEADER_COMMANDS.map((command) => baseFrame(command, tsKernels));
    for (const variant of variants) {
      expect(HEADER_COMMANDS.map((command) => baseFrame(command, variant.kernels)), variant.label).toEqual(reference);
    }
  });

  it('golden: identity and seal of the base frames are pinned', () => {
    // Pinned from the native reference XXH3-64 (@node-rs/xxhash) on these exact header bytes; a
    // change here means the wire format or the kernel changed.
    const prepare = baseFrame(Command.prepare);
    const commit = baseFrame(Command.commit);
    expect(readU64Big(prepare, 0)).toBe(0x9b84_853d_cb4b_5e53n);
    expect(readU64Big(commit, 0)).toBe(0xd050_9cc9_a2bc_d39en);
  });
});

describe('agreement with independent code', () => {
  it('a WAL fixture prepare (written field by field at the documented offsets) decodes and verifies', () => {
    const parent = 0x1234n;
    const frame = buildPrepare(9, parent, 100, 3);
    const result = decodeFrame(tsKernels, frame);
    expect(result.ok).toBe(true);
    if (!result.ok || result.header.command !== Command.prepare) return;
    expect(result.header).toMatchObject({ op: 9, commit: 8, view: 3, parent, operation: 128, group: 1n << 63n });
    expect(result.body.byteLength).toBe(100);
  });

  it('prepareIdentity equals the journal scan kernel identity', () => {
    const frame = baseFrame(Command.prepare);
    expect(prepareIdentity(tsKernels, frame)).toBe(prepareIdentityAt(frame, 0));
    const image = new Uint8Array(frame.byteLength + 8);
    image.set(frame, 8);
    expect(prepareIdentity(tsKernels, image, 8)).toBe(prepareIdentityAt(image, 8));
  });
});

describe('decodeFrame (one shot)', () => {
  const kernels = tsKernels;

  it('checks the buffer length against size', () => {
    const frame = baseFrame(Command.request);
    expect(decodeFrame(kernels, frame.subarray(0, 255))).toEqual({ ok: false, reason: 'header_truncated' });
    expect(decodeFrame(kernels, frame.subarray(0, frame.byteLength - 1))).toEqual({ ok: false, reason: 'size_mismatch' });
    const longer = new Uint8Array(frame.byteLength + 1);
    longer.set(frame);
    expect(decodeFrame(kernels, longer)).toEqual({ ok: false, reason: 'size_mismatch' });
  });

  it('checks size bounds before anything else', () => {
    const frame = baseFrame(Command.commit);
    writeU32(frame, HeaderOffset.size, 255);
    expect(decodeFrame(kernels, frame)).toEqual({ ok: false, reason: 'size_below_header' });
    writeU32(frame, HeaderOffset.size, MESSAGE_SIZE_MAX + 1);
    expect(decodeFrame(kernels, frame)).toEqual({ ok: false, reason: 'size_above_max' });
    expect(verifyFrame(kernels, frame)).toBe('size_above_max');
  });

  it('rejects an invalid command byte before checking the seal', () => {
    for (const command of [0, COMMAND_MAX + 1, 255]) {
      const frame = baseFrame(Command.commit);
      frame[HeaderOffset.command] = command;
      expect(decodeFrame(kernels, frame)).toEqual({ ok: false, reason: 'command_invalid' });
    }
  });

  it('seed review: a header-only frame that carries a body is rejected even when sealed', () => {
    for (const command of [Command.requestStateTransfer, Command.requestStateChunk, Command.commit, Command.prepareOk]) {
      const frame = sealUnchecked(kernels, base(command), new Uint8Array(64));
      expect(verifyFrame(kernels, frame)).toBeNull();
      expect(decodeFrame(kernels, frame)).toEqual({ ok: false, reason: 'size_not_header_only' });
    }
  });

  it('rejects reserved bytes and unsafe counters even under a valid seal', () => {
    const frame = baseFrame(Command.commit);
    frame[200] = 1;
    sealFrame(kernels, frame);
    expect(decodeFrame(kernels, frame)).toEqual({ ok: false, reason: 'reserved_nonzero' });
    const unsafe = baseFrame(Command.commit);
    unsafe[152 + 7] = 0x80; // commit = 2^63
    sealFrame(kernels, unsafe);
    expect(decodeFrame(kernels, unsafe)).toEqual({ ok: false, reason: 'u64_above_safe_integer' });
  });

  it('rejects frames of another cluster when the cluster is known', () => {
    const frame = baseFrame(Command.commit);
    const cluster = base(Command.commit).cluster;
    expect(decodeFrame(kernels, frame, { cluster }).ok).toBe(true);
    expect(decodeFrame(kernels, frame, { cluster: cluster + 1n })).toEqual({ ok: false, reason: 'cluster_mismatch' });
  });

  it('returns the frame itself and its body as a view', () => {
    const frame = baseFrame(Command.stateChunk);
    const result = decodeFrame(kernels, frame);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.frame).toBe(frame);
    expect(result.body.byteLength).toBe(frame.byteLength - HEADER_SIZE);
    expect(result.body.buffer).toBe(frame.buffer);
    expect(result.header).toEqual({ ...base(Command.stateChunk), checksum: result.header.checksum, checksumBody: result.header.checksumBody });
  });
});

describe('buildFrame and sealFrame', () => {
  it('buildFrame refuses to build a frame its peers would reject', () => {
    const { size: _s, checksum: _c, checksumBody: _b, ...input } = mutate(Command.requestPrepares, { fromOp: 0 });
    expect(() => buildFrame(tsKernels, input as HeaderInput)).toThrow(AssertionError);
  });

  it('sealFrame asserts that size equals the buffer length', () => {
    const frame = baseFrame(Command.commit);
    const longer = new Uint8Array(frame.byteLength + 1);
    longer.set(frame);
    expect(() => sealFrame(tsKernels, longer)).toThrow(AssertionError);
  });
});

describe('buildFrameHeader (a body sent beside its header, never copied into a frame)', () => {
  const header = base(Command.stateChunk);
  const { size: _s, checksum: _c, checksumBody: _b, ...input } = header;
  const body = bodyFor(header);

  it.each(variants.map((variant) => [variant.label, variant.kernels] as const))(
    'given the body sum, it is byte for byte the first 256 bytes buildFrame builds (%s kernels)',
    (_label, kernels) => {
      const whole = buildFrame(kernels, input as HeaderInput, body);
      const head = buildFrameHeader(kernels, input as HeaderInput, body.byteLength, kernels.xxh3_64(body, 0n));
      expect(head.byteLength).toBe(HEADER_SIZE);
      expect(Buffer.from(head).equals(Buffer.from(whole.subarray(0, HEADER_SIZE)))).toBe(true);
      const joined = new Uint8Array(HEADER_SIZE + body.byteLength);
      joined.set(head);
      joined.set(body, HEADER_SIZE);
      expect(verifyFrame(kernels, joined)).toBeNull();
    },
  );

  it('a sum that is not the body\'s makes a frame the receiver rejects', () => {
    const head = buildFrameHeader(tsKernels, input as HeaderInput, body.byteLength, tsKernels.xxh3_64(body, 0n) ^ 1n);
    const joined = new Uint8Array(HEADER_SIZE + body.byteLength);
    joined.set(head);
    joined.set(body, HEADER_SIZE);
    expect(decodeFrame(tsKernels, joined)).toEqual({ ok: false, reason: 'body_checksum_mismatch' });
  });

  it('refuses what buildFrame refuses (an empty state chunk), a sum wider than 64 bits and a prepare', () => {
    expect(() => buildFrameHeader(tsKernels, input as HeaderInput, 0, 0n)).toThrow(AssertionError);
    expect(() => buildFrameHeader(tsKernels, input as HeaderInput, body.byteLength, 1n << 64n)).toThrow(AssertionError);
    const prepare = base(Command.prepare);
    const { size: _ps, checksum: _pc, checksumBody: _pb, ...prepareInput } = prepare;
    expect(() => buildFrameHeader(tsKernels, prepareInput as HeaderInput, prepare.size - HEADER_SIZE, 0n)).toThrow(AssertionError);
  });
});

/**
 * The client wire codec against frames built by hand from Iggy's layouts (test/support/
 * iggy-frames.ts uses literal offsets, the Node SDK's): request headers in, replies and evictions
 * out, and the streaming decoder's bounds.
 */
import { describe, expect, it } from 'vitest';
import { ClientFrameDecoder, type ClientDecodeResult } from '../../src/transport/client-frame-decoder.js';
import {
  CLIENT_FRAME_SIZE_MAX,
  IGGY_PROTOCOL_VERSION,
  IGGY_PROTOCOL_VERSION_MIN,
  encodeClientEviction,
  encodeClientReply,
  isProtocolCompatible,
  isResultFramed,
  readClientRequest,
  validateClientRequest,
} from '../../src/transport/client-wire.js';
import { EvictionReason } from '../../src/vsr/header-types.js';
import { CODE, OP, PROTOCOL_0_11, REASON, loginBody, readReply, requestFrame } from '../support/iggy-frames.js';

const CLIENT = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210n;

function decodeAll(decoder: ClientFrameDecoder, chunks: readonly Uint8Array[]): ClientDecodeResult[] {
  const results: ClientDecodeResult[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (const result of decoder) results.push(result);
  }
  return results;
}

describe('client wire: request header (Iggy RequestHeader, as the Node SDK writes it)', () => {
  it('reads every field at its offset', () => {
    const body = loginBody('iggy', 'iggy');
    const frame = requestFrame({ client: CLIENT, operation: OP.register }, body);
    expect(readClientRequest(frame)).toEqual({
      size: 256 + body.length,
      client: CLIENT,
      requestChecksum: 0n,
      timestamp: 0n,
      request: 0n,
      operation: 1,
      session: 0n,
      code: 0,
    });
    const read = requestFrame({ client: CLIENT, operation: OP.nonReplicated, code: CODE.getStreams, session: 77n, request: 5n, requestChecksum: 1n << 100n });
    expect(readClientRequest(read)).toMatchObject({ operation: 2, code: 201, session: 77n, request: 5n, requestChecksum: 1n << 100n });
  });

  it("validates as Iggy's RequestHeader::validate does, with the eviction each refusal earns", () => {
    const ok = (fields: Parameters<typeof requestFrame>[0]) => validateClientRequest(requestFrame(fields));
    expect(ok({ client: CLIENT, operation: OP.register })).toBeNull();
    expect(ok({ client: CLIENT, operation: OP.nonReplicated, code: CODE.ping })).toBeNull();
    expect(ok({ client: CLIENT, operation: OP.createStream, session: 3n, request: 1n })).toBeNull();
    expect(ok({ client: 0n, operation: OP.register })).toMatchObject({ eviction: null });
    expect(ok({ client: CLIENT, operation: OP.reserved })).toMatchObject({ eviction: EvictionReason.invalidRequestOperation });
    expect(ok({ client: CLIENT, operation: OP.createTopicWithAssignments, session: 1n, request: 1n })).toMatchObject({
      eviction: EvictionReason.invalidRequestOperation,
    });
    expect(ok({ client: CLIENT, operation: 200 })).toMatchObject({ eviction: EvictionReason.invalidRequestOperation });
    // 4 is vrmeta's Batch: a prepare envelope, never a client's request (Iggy has no operation 4).
    expect(ok({ client: CLIENT, operation: 4, session: 1n, request: 1n })).toMatchObject({ eviction: EvictionReason.invalidRequestOperation });
    expect(ok({ client: CLIENT, operation: OP.register, request: 1n })).toMatchObject({ eviction: EvictionReason.invalidRequestBody });
    expect(ok({ client: CLIENT, operation: OP.createStream, session: 0n, request: 1n })).toMatchObject({ eviction: EvictionReason.noSession });
    expect(ok({ client: CLIENT, operation: OP.createStream, session: 1n, request: 1n << 60n })).toMatchObject({
      eviction: EvictionReason.invalidRequestBody,
    });
    const notARequest = requestFrame({ client: CLIENT, operation: OP.register });
    notARequest[60] = 8;
    expect(validateClientRequest(notARequest)).toMatchObject({ eviction: null });
  });

  it('protocol window: 0.11.x accepted, older minor or newer minor refused', () => {
    expect(IGGY_PROTOCOL_VERSION).toBe(PROTOCOL_0_11);
    expect(IGGY_PROTOCOL_VERSION_MIN).toBe(PROTOCOL_0_11);
    expect(isProtocolCompatible(PROTOCOL_0_11)).toBe(true);
    expect(isProtocolCompatible(PROTOCOL_0_11 + 7)).toBe(true);
    expect(isProtocolCompatible(10 << 10)).toBe(false);
    expect(isProtocolCompatible(12 << 10)).toBe(false);
    expect(isProtocolCompatible(0)).toBe(false);
  });

  it('result-framed operations are the metadata ones minus DeleteSegments, plus offset writes', () => {
    expect(isResultFramed(OP.createStream)).toBe(true);
    expect(isResultFramed(OP.leaveGroup)).toBe(true);
    expect(isResultFramed(OP.deleteSegments)).toBe(false);
    expect(isResultFramed(OP.register)).toBe(false);
    expect(isResultFramed(OP.logout)).toBe(false);
    expect(isResultFramed(OP.nonReplicated)).toBe(false);
    expect(isResultFramed(OP.sendMessages)).toBe(false);
    expect(isResultFramed(OP.storeOffset)).toBe(true);
  });
});

describe('client wire: reply and eviction frames (Iggy ReplyHeader / EvictionHeader)', () => {
  it('a reply carries every field where the SDK reads it', () => {
    const body = Buffer.from([0, 0, 0, 0, 9, 9]);
    const frame = Buffer.from(
      encodeClientReply(
        {
          cluster: 5n,
          view: 3,
          replica: 2,
          requestChecksum: 0xabn,
          client: CLIENT,
          op: 41n,
          commit: 42n,
          timestamp: 43n,
          request: 44n,
          operation: OP.createStream,
          status: 0,
        },
        body,
      ),
    );
    const expected = Buffer.alloc(256 + body.length);
    expected.writeBigUInt64LE(5n, 32);
    expected.writeUInt32LE(256 + body.length, 48);
    expected.writeUInt32LE(3, 52);
    expected.writeUInt8(8, 60);
    expected.writeUInt8(2, 61);
    expected.writeBigUInt64LE(0xabn, 128);
    expected.writeBigUInt64LE(CLIENT & 0xffff_ffff_ffff_ffffn, 160);
    expected.writeBigUInt64LE(CLIENT >> 64n, 168);
    expected.writeBigUInt64LE(41n, 176);
    expected.writeBigUInt64LE(42n, 184);
    expected.writeBigUInt64LE(43n, 192);
    expected.writeBigUInt64LE(44n, 200);
    expected.writeUInt8(128, 208);
    body.copy(expected, 256);
    expect(frame).toEqual(expected);
    expect(readReply(frame)).toMatchObject({ command: 8, status: 0, operation: 128, request: 44n, client: CLIENT });
  });

  it('a deny puts the code in status and sends no body', () => {
    const frame = Buffer.from(
      encodeClientReply({ cluster: 0n, view: 0, replica: 0, requestChecksum: 0n, client: CLIENT, op: 0n, commit: 0n, timestamp: 0n, request: 1n, operation: 2, status: 5 }),
    );
    expect(frame.length).toBe(256);
    expect(frame.readUInt32LE(216)).toBe(5);
  });

  it('an eviction is header-only, reason at 255, window only for IncompatibleProtocol', () => {
    const plain = Buffer.from(encodeClientEviction({ cluster: 0n, view: 0, replica: 0, client: CLIENT, reason: EvictionReason.invalidCredentials }));
    const expected = Buffer.alloc(256);
    expected.writeUInt32LE(256, 48);
    expected.writeUInt8(13, 60);
    expected.writeBigUInt64LE(CLIENT & 0xffff_ffff_ffff_ffffn, 128);
    expected.writeBigUInt64LE(CLIENT >> 64n, 136);
    expected.writeUInt8(REASON.invalidCredentials, 255);
    expect(plain).toEqual(expected);
    const window = Buffer.from(encodeClientEviction({ cluster: 0n, view: 0, replica: 0, client: CLIENT, reason: EvictionReason.incompatibleProtocol }));
    expect(window.readUInt32LE(144)).toBe(PROTOCOL_0_11);
    expect(window.readUInt32LE(148)).toBe(PROTOCOL_0_11);
    expect(window.readUInt8(255)).toBe(REASON.incompatibleProtocol);
  });
});

describe('client wire: streaming decoder', () => {
  const frames = [
    requestFrame({ client: CLIENT, operation: OP.register }, loginBody('iggy', 'iggy')),
    requestFrame({ client: CLIENT, operation: OP.nonReplicated, code: CODE.ping }),
    requestFrame({ client: CLIENT, operation: OP.createStream, session: 1n, request: 1n }, Buffer.from([3, 97, 98, 99])),
  ];
  const all = Buffer.concat(frames);

  it('yields the same frames whether bytes arrive at once or one by one', () => {
    const whole = decodeAll(new ClientFrameDecoder(), [all]);
    const bytes = decodeAll(new ClientFrameDecoder(), [...all].map((byte) => Uint8Array.of(byte)));
    expect(whole.map((result) => result.kind)).toEqual(['frame', 'frame', 'frame']);
    expect(bytes).toEqual(whole);
    expect(whole.map((result) => (result.kind === 'frame' ? Buffer.from(result.frame) : null))).toEqual(frames);
  });

  it('reports a frame in progress (the slowloris clock) until it completes', () => {
    const decoder = new ClientFrameDecoder();
    expect(decoder.inFrame).toBe(false);
    expect(decodeAll(decoder, [frames[0]!.subarray(0, 100)])).toEqual([]);
    expect(decoder.inFrame).toBe(true);
    expect(decodeAll(decoder, [frames[0]!.subarray(100)])).toHaveLength(1);
    expect(decoder.inFrame).toBe(false);
  });

  it('refuses a declared size below a header at byte 52, before any body is buffered', () => {
    const frame = requestFrame({ client: CLIENT, operation: OP.register, size: 100 });
    const results = decodeAll(new ClientFrameDecoder(), [frame.subarray(0, 52)]);
    expect(results).toEqual([{ kind: 'refused', reason: 'declared size 100 is below the 256-byte header', header: null, eviction: null }]);
  });

  it('refuses an oversize metadata frame at its header, with InvalidRequestBodySize, and is poisoned', () => {
    const decoder = new ClientFrameDecoder();
    const frame = requestFrame({ client: CLIENT, operation: OP.createStream, session: 1n, request: 1n, size: CLIENT_FRAME_SIZE_MAX + 1 });
    const results = decodeAll(decoder, [frame, frames[1]!]);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ kind: 'refused', eviction: EvictionReason.invalidRequestBodySize });
    expect(decoder.poisoned).toBe(true);
    expect(decoder.bytesDropped).toBe(frames[1]!.length);
  });

  it('reads past an oversize message batch without buffering it, then goes on', () => {
    const decoder = new ClientFrameDecoder();
    const size = CLIENT_FRAME_SIZE_MAX * 3;
    const header = requestFrame({ client: CLIENT, operation: OP.sendMessages, session: 1n, request: 1n, size });
    const filler = new Uint8Array(64 * 1024);
    const chunks: Uint8Array[] = [header];
    for (let sent = 256; sent < size; sent += filler.length) chunks.push(filler.subarray(0, Math.min(filler.length, size - sent)));
    chunks.push(frames[1]!);
    const results = decodeAll(decoder, chunks);
    expect(results.map((result) => result.kind)).toEqual(['skipped', 'frame']);
    expect(decoder.framesSkipped).toBe(1);
  });

  it('refuses a header that does not validate, naming the eviction', () => {
    const results = decodeAll(new ClientFrameDecoder(), [requestFrame({ client: CLIENT, operation: 99 })]);
    expect(results).toEqual([expect.objectContaining({ kind: 'refused', eviction: EvictionReason.invalidRequestOperation })]);
  });
});

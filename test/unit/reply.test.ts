/**
 * A committed reply cached unbuilt (CommittedReply) reads as exactly the bytes `buildReply` gives
 * the same prepare and result, success and rejection alike, and builds them once.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import type { PrepareHeader } from '../../src/vsr/header.js';
import { CommittedReply, buildReply, resultBody } from '../../src/vsr/reply.js';

const prepare: PrepareHeader = {
  checksum: 0x1234n,
  checksumBody: 0x5678n,
  cluster: 7n,
  size: 256 + 30,
  view: 3,
  release: 0,
  command: Command.prepare,
  replica: 1,
  client: 0xabcdn,
  parent: 0x99n,
  requestChecksum: 0x4242n,
  op: 41,
  commit: 40,
  timestamp: 1_700_000_000_000_000,
  request: 9,
  operation: 128, // an application op (the state machine's range starts above vsr's)
  group: METADATA_GROUP,
  userId: 1,
};

describe.each([
  ['ts', createTsKernels()],
  ['wasm', createWasmKernels(new WasmInstance('simd'))],
])('a committed reply built at first read (%s kernels)', (_name, kernels) => {
  it.each([
    ['success', 0, Uint8Array.from({ length: 300 }, (_, index) => index % 251)],
    ['rejection', 1009, new Uint8Array(0)],
  ])('%s: the bytes buildReply gives, built once, request and commit read from the prepare', (_kind, errorCode, payload) => {
    const reply = new CommittedReply(kernels, prepare, errorCode, payload);
    expect(reply.request).toBe(9);
    expect(reply.commit).toBe(41);
    expect(reply.built).toBe(false);
    const bytes = reply.bytes;
    expect(reply.built).toBe(true);
    expect(bytes).toEqual(buildReply(kernels, prepare, resultBody(errorCode, payload)));
    expect(reply.bytes).toBe(bytes);
  });

  it('refuses at commit what resultBody would refuse at the first read', () => {
    expect(() => new CommittedReply(kernels, prepare, 1009, new Uint8Array(1))).toThrow(/rejection carries no payload/);
    expect(() => new CommittedReply(kernels, prepare, -1, new Uint8Array(0))).toThrow(/u32/);
  });
});

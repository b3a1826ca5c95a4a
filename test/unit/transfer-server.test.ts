/**
 * The state-transfer server on its own (src/vsr/transfer-server.ts): a host stub stands in for the
 * replica, recording what the server sends, submits and drops, so each guard is seen by its typed
 * drop reason and each offer by the StateTransferTarget it produced.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { METADATA_GROUP, replicaConfig } from '../../src/vsr/config.js';
import type { DropReason } from '../../src/vsr/drop-reason.js';
import { buildFrame, decodeFrame } from '../../src/vsr/frame.js';
import type {
  HeaderInput,
  RequestStateChunkHeader,
  RequestStateTransferHeader,
} from '../../src/vsr/header.js';
import type { StorageRequest } from '../../src/vsr/io.js';
import type { SendFields } from '../../src/vsr/send.js';
import { decodeManifest } from '../../src/vsr/state-transfer.js';
import {
  TransferServer,
  zeroTransferServerCounters,
  type TransferServerHost,
} from '../../src/vsr/transfer-server.js';

const kernels = createTsKernels();
const CLUSTER = 0x7a_5e_0000n;
const CHUNK_SIZE = 64;
const REPAIR_TICKS = 5;
/** An idle offer's limit, and an offer's whose final chunk was served (transfer-server.ts). */
const IDLE_TICKS_MAX = 10 * REPAIR_TICKS;
const FINAL_IDLE_TICKS_MAX = 3 * REPAIR_TICKS;

type TargetFields = SendFields<typeof Command.stateTransferTarget>;

interface Harness {
  readonly server: TransferServer;
  readonly state: { readyToOffer: boolean; checkpointOp: number; checkpointChecksum: bigint };
  readonly targets: { requester: number; fields: TargetFields; manifest?: Uint8Array | undefined }[];
  readonly chunks: { requester: number; body: Uint8Array }[];
  readonly submitted: StorageRequest[];
  readonly drops: Partial<Record<DropReason, number>>;
}

function harness(): Harness {
  const state = { readyToOffer: true, checkpointOp: 0, checkpointChecksum: 0n };
  const targets: Harness['targets'] = [];
  const chunks: Harness['chunks'] = [];
  const submitted: StorageRequest[] = [];
  const drops: Partial<Record<DropReason, number>> = {};
  const host: TransferServerHost = {
    config: replicaConfig({
      cluster: CLUSTER,
      replica: 0,
      replicaCount: 3,
      stateChunkSize: CHUNK_SIZE,
      timeouts: { repair: REPAIR_TICKS },
    }),
    kernels,
    logger: { log: () => {} },
    counters: zeroTransferServerCounters(),
    view: 1,
    commitMin: 40,
    commitMax: 40,
    get checkpointOp() {
      return state.checkpointOp;
    },
    get checkpointChecksum() {
      return state.checkpointChecksum;
    },
    get readyToOffer() {
      return state.readyToOffer;
    },
    anchorOf: () => 0xa0n,
    sendTarget: (requester, fields, manifest) => targets.push({ requester, fields, manifest }),
    sendChunk: (requester, _header, body) => chunks.push({ requester, body }),
    // Completed never: the check at rest stays in flight, which changes nothing here.
    submit: (request) => submitted.push(request),
    emit: () => {},
    drop: (reason) => {
      drops[reason] = (drops[reason] ?? 0) + 1;
    },
    startSnapshotRepair: () => {},
  };
  return { server: new TransferServer(host), state, targets, chunks, submitted, drops };
}

/** A payload of `len` bytes written as checkpoint `op` (the server offers on it at once). */
function checkpoint(h: Harness, op: number, len: number): bigint {
  const payload = new Uint8Array(len).map((_, index) => (index * 7 + op) & 0xff);
  const sums = kernels.chunkManifest(payload, CHUNK_SIZE);
  h.state.checkpointOp = op;
  h.state.checkpointChecksum = sums.checksum;
  h.server.checkpointWritten(op, sums.checksum, 0xa0n, payload, [...sums.chunkChecksums]);
  return sums.checksum;
}

function decoded<H>(input: Record<string, unknown>): H {
  const common = { cluster: CLUSTER, release: 0, view: 1, group: METADATA_GROUP };
  const full = { ...common, ...input } as unknown as HeaderInput;
  const frame = decodeFrame(kernels, buildFrame(kernels, full));
  if (!frame.ok) throw new Error(`test frame rejected: ${frame.reason}`);
  return frame.header as H;
}

function requestTransfer(from: number, nonce: bigint): RequestStateTransferHeader {
  return decoded({ command: Command.requestStateTransfer, replica: from, nonce });
}

function requestChunk(from: number, nonce: bigint, offset: number, artifact = 0) {
  const input = { command: Command.requestStateChunk, replica: from, nonce, offset, artifact };
  return decoded<RequestStateChunkHeader>({ ...input, len: CHUNK_SIZE });
}

describe('transfer server', () => {
  it('offers the checkpoint it wrote: available, its op and id, and its manifest', () => {
    const h = harness();
    const id = checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    expect(h.targets).toHaveLength(1);
    const { requester, fields, manifest } = h.targets[0]!;
    expect(requester).toBe(1);
    expect(fields).toMatchObject({ nonce: 7n, available: 1, checkpointOp: 32, checkpointId: id });
    const decodedManifest = decodeManifest(kernels, manifest!);
    expect(decodedManifest.ok && decodedManifest.manifest.entries[0]!.len).toBe(150);
    expect(h.server.offerCount).toBe(1);
    expect(h.drops).toEqual({});
  });

  it('refuses with no checkpoint, and when not ready, each by its drop reason', () => {
    const h = harness();
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    expect(h.drops).toEqual({ offer_no_checkpoint: 1 });
    expect(h.targets[0]!.fields).toMatchObject({ available: 0, unavailableTransient: 0 });
    checkpoint(h, 32, 150);
    h.state.readyToOffer = false;
    h.server.onRequestStateTransfer(requestTransfer(2, 8n));
    expect(h.drops).toEqual({ offer_no_checkpoint: 1, offer_not_ready: 1 });
    expect(h.targets[1]!.fields).toMatchObject({ available: 0, unavailableTransient: 1 });
    expect(h.server.offerCount).toBe(0);
  });

  it('a chunk request with no offer for its session drops as chunk_no_offer, refused', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    expect(h.drops).toEqual({ chunk_no_offer: 1 });
    expect(h.chunks).toEqual([]);
    expect(h.targets).toHaveLength(1);
    const refusal = { nonce: 7n, available: 0, unavailableTransient: 1 };
    expect(h.targets[0]!.fields).toMatchObject(refusal);
    // Another session's nonce is no better than none.
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    h.server.onRequestStateChunk(requestChunk(1, 9n, 0));
    expect(h.drops).toEqual({ chunk_no_offer: 2 });
    expect(h.chunks).toEqual([]);
  });

  it('serves the offer\'s chunks; a request past its last chunk drops as chunk_past_end', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (const offset of [0, 64, 128]) h.server.onRequestStateChunk(requestChunk(1, 7n, offset));
    expect(h.chunks.map((chunk) => chunk.body.byteLength)).toEqual([64, 64, 22]);
    // Three chunks of 64 bytes cover 150: offset 192 (the fourth chunk) and 150 are past the end.
    h.server.onRequestStateChunk(requestChunk(1, 7n, 192));
    h.server.onRequestStateChunk(requestChunk(1, 7n, 150));
    expect(h.drops).toEqual({ chunk_past_end: 2 });
    expect(h.chunks).toHaveLength(3);
  });

  it('a chunk request for an artifact the manifest lacks drops as chunk_artifact_unknown', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0, 1));
    expect(h.drops).toEqual({ chunk_artifact_unknown: 1 });
    expect(h.chunks).toEqual([]);
  });

  it('an idle offer expires after its idle limit; its session then gets chunk_no_offer', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (let tick = 1; tick < IDLE_TICKS_MAX; tick++) h.server.tick();
    expect(h.server.offerCount).toBe(1);
    h.server.tick();
    expect(h.server.offerCount).toBe(0);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    expect(h.drops).toEqual({ chunk_no_offer: 1 });
    expect(h.chunks).toEqual([]);
  });

  it('an offer whose final chunk was served expires sooner; serving resets its idle count', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (let tick = 1; tick < IDLE_TICKS_MAX; tick++) h.server.tick();
    h.server.onRequestStateChunk(requestChunk(1, 7n, 128));
    for (let tick = 1; tick < FINAL_IDLE_TICKS_MAX; tick++) h.server.tick();
    expect(h.server.offerCount).toBe(1);
    h.server.tick();
    expect(h.server.offerCount).toBe(0);
  });

  it('checks the file at rest once no fetch is under way, and only once per source', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (let tick = 1; tick < REPAIR_TICKS; tick++) h.server.tick();
    expect(h.submitted).toEqual([]);
    h.server.tick();
    const verify = { kind: 'snapshot_verify', op: 32, checksum: h.state.checkpointChecksum };
    expect(h.submitted).toEqual([verify]);
    for (let tick = 0; tick < IDLE_TICKS_MAX; tick++) h.server.tick();
    expect(h.submitted).toHaveLength(1);
  });

  it('a request from this replica itself drops as own_message, unanswered', () => {
    const h = harness();
    checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(0, 7n));
    expect(h.drops).toEqual({ own_message: 1 });
    expect(h.targets).toEqual([]);
    expect(h.server.offerCount).toBe(0);
  });

  it('a retry with the same nonce gets the first manifest even after a newer checkpoint', () => {
    const h = harness();
    const first = checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    checkpoint(h, 64, 200);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    expect(h.targets.map((target) => target.fields.checkpointOp)).toEqual([32, 32]);
    expect(h.targets[1]!.fields.checkpointId).toBe(first);
    expect(h.targets[1]!.manifest).toBe(h.targets[0]!.manifest);
    h.server.onRequestStateTransfer(requestTransfer(1, 8n));
    expect(h.targets[2]!.fields.checkpointOp).toBe(64);
  });
});

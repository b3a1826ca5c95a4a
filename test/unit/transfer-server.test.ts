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
import type { StorageRequest, StorageResult } from '../../src/vsr/io.js';
import type { SendFields } from '../../src/vsr/send.js';
import { decodeManifest } from '../../src/vsr/state-transfer.js';
import {
  CHUNK_READ_AHEAD,
  CHUNK_READS_PER_OFFER_MAX,
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
  readonly host: TransferServerHost;
  readonly state: { readyToOffer: boolean; checkpointOp: number; checkpointChecksum: bigint };
  readonly targets: { requester: number; fields: TargetFields; manifest?: Uint8Array | undefined }[];
  readonly chunks: { requester: number; header: Uint8Array; body: Uint8Array }[];
  readonly submitted: StorageRequest<never>[];
  readonly drops: Partial<Record<DropReason, number>>;
  /**
   * The snapshot files the storage holds open, by checkpoint id (the last two written, as
   * SNAPSHOT_GENERATIONS_HELD): chunk reads are served from these bytes as they are now.
   */
  readonly files: Map<bigint, Uint8Array>;
  readonly repairs: { count: number };
  /** Every request submitted with its completion (tests complete the ones they name). */
  readonly pending: { request: StorageRequest<never>; done: (result: StorageResult<unknown>) => void }[];
  /** Completes the chunk reads submitted so far, in order (other requests stay in flight). */
  run(): void;
}

function harness(): Harness {
  const state = { readyToOffer: true, checkpointOp: 0, checkpointChecksum: 0n };
  const targets: Harness['targets'] = [];
  const chunks: Harness['chunks'] = [];
  const submitted: StorageRequest<never>[] = [];
  const drops: Partial<Record<DropReason, number>> = {};
  const files = new Map<bigint, Uint8Array>();
  const repairs = { count: 0 };
  const pending: Harness['pending'] = [];
  const reads: { request: Extract<StorageRequest<never>, { kind: 'snapshot_chunk_read' }>; done: (result: StorageResult<unknown>) => void }[] = [];
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
    sendChunk: (requester, header, body) => chunks.push({ requester, header, body }),
    // Chunk reads complete on `run`; anything else never (the check at rest stays in flight,
    // which changes nothing here).
    submit: (request, done) => {
      submitted.push(request);
      pending.push({ request, done });
      if (request.kind === 'snapshot_chunk_read') reads.push({ request, done });
    },
    emit: () => {},
    drop: (reason) => {
      drops[reason] = (drops[reason] ?? 0) + 1;
    },
    startSnapshotRepair: () => {
      repairs.count += 1;
    },
  };
  const run = (): void => {
    for (const { request, done } of reads.splice(0)) {
      const file = files.get(request.checksum);
      done(file === undefined ? { ok: true } : { ok: true, chunk: file.slice(request.offset, request.offset + request.len) });
    }
  };
  const server = new TransferServer(host);
  return { server, host, state, targets, chunks, submitted, drops, files, repairs, pending, run };
}

function payloadOf(op: number, len: number): Uint8Array {
  return new Uint8Array(len).map((_, index) => (index * 7 + op) & 0xff);
}

/** A payload of `len` bytes written as checkpoint `op` (the server offers on it at once). */
function checkpoint(h: Harness, op: number, len: number): bigint {
  const payload = payloadOf(op, len);
  const sums = kernels.chunkManifest(payload, CHUNK_SIZE);
  h.files.set(sums.checksum, payload);
  // The storage holds the file written and the one it replaced, no more.
  while (h.files.size > 2) h.files.delete(h.files.keys().next().value!);
  h.state.checkpointOp = op;
  h.state.checkpointChecksum = sums.checksum;
  h.server.checkpointWritten(op, sums.checksum, 0xa0n, payload, [...sums.chunkChecksums]);
  return sums.checksum;
}

/** A checkpoint whose payload was let go (the primary named it durable): chunks come from the file. */
function released(h: Harness, op: number, len: number): bigint {
  const id = checkpoint(h, op, len);
  h.server.peerHolds(op, id);
  return id;
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
    h.run();
    expect(h.chunks.map((chunk) => chunk.body.byteLength)).toEqual([64, 64, 22]);
    // Three chunks of 64 bytes cover 150: offset 192 (the fourth chunk) and 150 are past the end.
    h.server.onRequestStateChunk(requestChunk(1, 7n, 192));
    h.server.onRequestStateChunk(requestChunk(1, 7n, 150));
    h.run();
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

  it('once released, serves each chunk by reading it from the file, checked against the sum it offered', () => {
    const h = harness();
    const id = released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (const offset of [0, 64, 128]) h.server.onRequestStateChunk(requestChunk(1, 7n, offset));
    // Nothing is sent before its read completes: the bytes come from the file, not from memory.
    expect(h.chunks).toEqual([]);
    const reads = h.submitted.filter((request) => request.kind === 'snapshot_chunk_read');
    expect(reads).toEqual([0, 64, 128].map((offset) => ({ kind: 'snapshot_chunk_read', op: 32, checksum: id, offset, len: Math.min(64, 150 - offset) })));
    expect(h.host.counters.chunkReads).toBe(3);
    h.run();
    const payload = payloadOf(32, 150);
    const sums = kernels.chunkManifest(payload, CHUNK_SIZE).chunkChecksums;
    h.chunks.forEach((chunk, index) => {
      expect(chunk.body).toEqual(payload.subarray(index * 64, Math.min(150, index * 64 + 64)));
      const frame = decodeFrame(kernels, Buffer.concat([chunk.header, chunk.body]));
      expect(frame.ok && frame.header.checksumBody).toBe(sums[index]);
    });
    expect(h.server.source!.payload).toBeNull();
  });

  it('a chunk whose bytes at rest differ from the sum offered is never sent: the offers are withdrawn with a vouch and the file fetched back', () => {
    const h = harness();
    const id = released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    h.server.onRequestStateTransfer(requestTransfer(2, 9n));
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    // The file rots under the offer (the bytes the manifest summed are no longer at rest), in the
    // chunk read ahead for the next request: read-ahead bytes are checked when served, too.
    h.files.get(id)![70]! ^= 0x10;
    h.run();
    expect(h.chunks).toHaveLength(1);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 64));
    h.run();
    expect(h.chunks).toHaveLength(1);
    expect(h.host.counters.snapshotsDamaged).toBe(1);
    expect(h.server.damaged).toMatchObject({ op: 32 });
    expect(h.server.damaged!.cause).toMatch(/^chunk 1 at rest hashes to [0-9a-f]+, its checkpoint's sum is [0-9a-f]+$/);
    expect(h.repairs.count).toBe(1);
    expect(h.server.offerCount).toBe(0);
    // Both requesters are told, with a vouch for the id (another server's copy is good).
    const refusals = h.targets.slice(-2).map((target) => [target.requester, target.fields]);
    const vouch = { available: 0, unavailableTransient: 1, checkpointOp: 32, checkpointId: id };
    expect(refusals).toEqual([[1, expect.objectContaining({ nonce: 7n, ...vouch })], [2, expect.objectContaining({ nonce: 9n, ...vouch })]]);
  });

  it('a fetch that began before a newer checkpoint finishes from the file it began on', () => {
    const h = harness();
    released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    checkpoint(h, 64, 200);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 128));
    h.run();
    expect(h.chunks.map((chunk) => chunk.body)).toEqual([payloadOf(32, 150).subarray(128)]);
    expect(h.server.offerCount).toBe(1);
  });

  it('an offer whose checkpoint the storage no longer holds is withdrawn, transiently and without damage; its requester restarts on the newest', () => {
    const h = harness();
    released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    checkpoint(h, 64, 200);
    checkpoint(h, 96, 250);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    h.run();
    expect(h.chunks).toEqual([]);
    expect(h.host.counters.offersReleased).toBe(1);
    expect(h.host.counters.snapshotsDamaged).toBe(0);
    expect(h.server.damaged).toBeNull();
    expect(h.repairs.count).toBe(0);
    expect(h.targets.at(-1)!.fields).toMatchObject({ nonce: 7n, available: 0, unavailableTransient: 1, checkpointOp: 0 });
    h.server.onRequestStateTransfer(requestTransfer(1, 8n));
    expect(h.targets.at(-1)!.fields).toMatchObject({ nonce: 8n, available: 1, checkpointOp: 96 });
  });

  it('chunk reads queued for one offer are bounded: duplicates beyond CHUNK_READS_PER_OFFER_MAX drop as chunk_reads_busy', () => {
    const h = harness();
    released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (let index = 0; index < CHUNK_READS_PER_OFFER_MAX + 3; index++) h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    // The first request also read chunks 1 and 2 ahead; each duplicate queued one more read.
    const ahead = 2;
    const reads = () => h.submitted.filter((request) => request.kind === 'snapshot_chunk_read');
    expect(reads()).toHaveLength(CHUNK_READS_PER_OFFER_MAX);
    expect(h.drops).toEqual({ chunk_reads_busy: 3 + ahead });
    h.run();
    expect(h.chunks).toHaveLength(CHUNK_READS_PER_OFFER_MAX - ahead);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    h.run();
    expect(h.chunks).toHaveLength(CHUNK_READS_PER_OFFER_MAX - ahead + 1);
  });

  it(`a released payload's next CHUNK_READ_AHEAD chunks are read ahead of the receiver: its requests are served without waiting for a read, each chunk read once`, () => {
    const h = harness();
    const id = released(h, 32, 64 * 12 + 10);
    const payload = h.files.get(id)!.slice();
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    const reads = () => h.submitted.filter((request) => request.kind === 'snapshot_chunk_read');
    h.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    expect(reads().map((request) => request.kind === 'snapshot_chunk_read' && request.offset)).toEqual([0, 64, 128, 192, 256]);
    h.run();
    expect(h.chunks).toHaveLength(1);
    for (let index = 1; index <= 12; index++) {
      h.server.onRequestStateChunk(requestChunk(1, 7n, index * 64));
      // Read ahead and completed: sent at once, before the storage runs again.
      expect(h.chunks, `chunk ${index}`).toHaveLength(index + 1);
      h.run();
    }
    expect(h.chunks.map((chunk) => chunk.body)).toEqual(Array.from({ length: 13 }, (_, index) => payload.subarray(index * 64, index * 64 + 64)));
    expect(reads()).toHaveLength(13);
    expect(h.host.counters.chunkReads).toBe(13);
    // A request whose read ahead is still in the storage queue waits for it: no second read.
    const h2 = harness();
    const id2 = released(h2, 32, 64 * 12 + 10);
    h2.server.onRequestStateTransfer(requestTransfer(1, 7n));
    h2.server.onRequestStateChunk(requestChunk(1, 7n, 0));
    h2.server.onRequestStateChunk(requestChunk(1, 7n, 64));
    expect(h2.submitted.filter((request) => request.kind === 'snapshot_chunk_read')).toHaveLength(1 + CHUNK_READ_AHEAD + 1);
    h2.run();
    expect(h2.chunks.map((chunk) => chunk.body)).toEqual([h2.files.get(id2)!.subarray(0, 64), h2.files.get(id2)!.subarray(64, 128)]);
  });

  it('a restarted server offers on the chunk sums its boot computed, and holds the payload it read', () => {
    const h = harness();
    const payload = payloadOf(32, 150);
    const sums = kernels.chunkManifest(payload, CHUNK_SIZE);
    h.files.set(sums.checksum, payload);
    h.state.checkpointOp = 32;
    h.state.checkpointChecksum = sums.checksum;
    h.server.bootPayload(32, sums.checksum, payload);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    // Held until a peer is known to hold it: the boot's payload serves at once.
    expect(h.server.source!.payload).toBe(payload);
    const decodedManifest = decodeManifest(kernels, h.targets[0]!.manifest!);
    expect(decodedManifest.ok && decodedManifest.manifest.entries[0]!.chunkChecksums).toEqual([...sums.chunkChecksums]);
    expect(h.submitted).toEqual([]);
    expect(h.host.counters.offerSourceReads).toBe(0);
  });

  it('holds the payload it wrote until its primary names the same checkpoint: until then chunks are views of it', () => {
    const h = harness();
    const id = checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    h.server.onRequestStateChunk(requestChunk(1, 7n, 64));
    // Served in the same step, from memory: no read submitted.
    expect(h.chunks.map((chunk) => chunk.body)).toEqual([payloadOf(32, 150).subarray(64, 128)]);
    expect(h.submitted).toEqual([]);
    // Another checkpoint, or another id at the same op, is no evidence.
    h.server.peerHolds(31, id);
    h.server.peerHolds(32, id ^ 1n);
    expect(h.server.source!.payload).not.toBeNull();
    h.server.peerHolds(32, id);
    expect(h.server.source!.payload).toBeNull();
    expect(h.host.counters.payloadsReleased).toBe(1);
    h.server.onRequestStateChunk(requestChunk(1, 7n, 128));
    expect(h.submitted.map((request) => request.kind)).toEqual(['snapshot_chunk_read']);
    h.run();
    expect(h.chunks).toHaveLength(2);
  });

  it('a holder of the payload heals its rotten file from it: offers stay, nothing is refused', () => {
    const h = harness();
    const id = checkpoint(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    // The fetch ends (its last chunk served), so the check at rest starts.
    h.server.onRequestStateChunk(requestChunk(1, 7n, 128));
    for (let tick = 0; tick < REPAIR_TICKS; tick++) h.server.tick();
    expect(h.submitted.map((request) => request.kind)).toEqual(['snapshot_verify']);
    const verify = h.pending.find((entry) => entry.request.kind === 'snapshot_verify')!;
    verify.done({ ok: false, error: 'snapshot.bin: trailer says X, payload hashes to Y' });
    const rewrite = h.pending.find((entry) => entry.request.kind === 'snapshot_rewrite')!;
    expect(rewrite.request).toEqual({ kind: 'snapshot_rewrite', op: 32, checksum: id, payload: payloadOf(32, 150) });
    expect(h.server.damaged).toBeNull();
    expect(h.repairs.count).toBe(0);
    expect(h.server.offerCount).toBe(1);
    rewrite.done({ ok: true });
    expect(h.host.counters.snapshotsRewritten).toBe(1);
    expect(h.host.counters.snapshotsDamaged).toBe(0);
    expect(h.targets.filter((target) => target.fields.available === 0)).toEqual([]);
    h.server.onRequestStateTransfer(requestTransfer(2, 9n));
    expect(h.targets.at(-1)!.fields).toMatchObject({ available: 1, checkpointOp: 32 });
  });

  it('a released payload cannot heal: a rotten file is refused with a vouch and fetched back from a peer', () => {
    const h = harness();
    const id = released(h, 32, 150);
    h.server.onRequestStateTransfer(requestTransfer(1, 7n));
    for (let tick = 0; tick < REPAIR_TICKS; tick++) h.server.tick();
    const verify = h.pending.find((entry) => entry.request.kind === 'snapshot_verify')!;
    verify.done({ ok: false, error: 'snapshot.bin: trailer says X, payload hashes to Y' });
    expect(h.submitted.map((request) => request.kind)).toEqual(['snapshot_verify']);
    expect(h.server.damaged).toMatchObject({ op: 32 });
    expect(h.repairs.count).toBe(1);
    expect(h.targets.at(-1)!.fields).toMatchObject({ nonce: 7n, available: 0, checkpointOp: 32, checkpointId: id });
  });
});

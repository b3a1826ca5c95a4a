/**
 * Client sessions through checkpoints and state transfer, named like specs. A binary client's
 * session is a VSR session like any other (the SDK picks its u128 client id, Register makes the
 * session, each request number is deduplicated by the client table), and the client table rides
 * in every checkpoint and every state transfer: so a client whose reply was cached by a replica
 * that then lost its disk gets that same reply, byte for byte, from the replica once it rejoined
 * by state transfer and leads, without the request running twice.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { TestOperation } from '../../src/testing/test-state-machine.js';
import { ClusterSim } from '../../src/testing/vopr.js';
import { buildFrame, decodeFrame } from '../../src/vsr/frame.js';
import { Operation } from '../../src/vsr/header.js';
import { encodeRegisterBody } from '../../src/vsr/reply.js';

const kernels = createWasmKernels(new WasmInstance('simd'));
/** What an SDK sends: a random u128 of its own choosing. */
const SDK_CLIENT = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834n;

function normal(cluster: ClusterSim): boolean {
  return cluster.replicas.every((entry) => entry.replica === null || entry.replica.status === 'normal');
}

describe('client sessions across a wipe and a state transfer', () => {
  it("a client's cached reply survives its replica's lost disk: the rejoined replica, leading, replays it byte for byte", () => {
    const cluster = new ClusterSim(scenarioOptions({ clientCount: 3, requestsPerClient: 60, journalSlots: 16, prepareQueueDepth: 2, stateChunkSize: 64 }), kernels);
    expect(cluster.runUntil(() => cluster.replicas.every((entry) => entry.replica!.status === 'normal' && entry.replica!.logView >= 1), 5_000)).toBe(true);
    const frames: { replica: number; frame: Uint8Array }[] = [];
    cluster.onClientFrame = (replica, client, frame) => {
      if (client === SDK_CLIENT) frames.push({ replica, frame });
    };
    const send = (to: number, operation: number, session: number, request: number, body: Uint8Array): void => {
      const frame = buildFrame(kernels, {
        command: Command.request,
        cluster: cluster.replica(to).config.cluster,
        view: 0,
        release: 0,
        replica: 0,
        client: SDK_CLIENT,
        requestChecksum: operation === Operation.register ? 0n : kernels.xxh3_64(body),
        timestamp: 0,
        request,
        operation,
        session,
        userId: 0,
        legacyCommand: 0,
        group: 0n,
      }, body);
      const decoded = decodeFrame(kernels, frame);
      if (!decoded.ok) throw new Error(decoded.reason);
      cluster.replica(to).onMessage(decoded);
    };
    const answer = (from: number): Uint8Array => {
      expect(cluster.runUntil(() => frames.some((entry) => entry.replica === from), 2_000), cluster.describe()).toBe(true);
      const index = frames.findIndex((entry) => entry.replica === from);
      return frames.splice(index, 1)[0]!.frame;
    };

    // The session and one committed request, answered by the primary it talks to.
    const home = cluster.replica(0).primaryIndex();
    send(home, Operation.register, 0, 0, encodeRegisterBody(0));
    const registered = decodeFrame(kernels, answer(home));
    expect(registered.ok && registered.header.command === Command.reply).toBe(true);
    const session = registered.ok && registered.header.command === Command.reply ? registered.header.op : 0;
    const body = new TextEncoder().encode('sdk-stream');
    send(home, TestOperation.createStream, session, 1, body);
    const original = answer(home);
    const decodedOriginal = decodeFrame(kernels, original);
    const originalOp = decodedOriginal.ok && decodedOriginal.header.command === Command.reply ? decodedOriginal.header.op : -1;
    expect(originalOp).toBeGreaterThan(session);

    // The client's replica loses its disk; the cluster moves three checkpoints on without it.
    cluster.crash(home);
    cluster.loseDisk(home);
    const survivor = (home + 1) % 3;
    const interval = cluster.replica(survivor).config.checkpointInterval;
    const target = cluster.replica(survivor).commitMax + 3 * interval;
    expect(cluster.runUntil(() => cluster.replica(survivor).commitMax >= target, 40_000), cluster.describe()).toBe(true);
    // The reply now lives only in checkpoints: the op that made it is below the survivors' WALs.
    expect(cluster.replica(survivor).checkpointOp).toBeGreaterThan(originalOp + interval);

    // It rejoins by state transfer: the session and its cached reply come with the checkpoint.
    cluster.restart(home);
    cluster.converge();
    expect(cluster.replica(home).counters.stateTransfersInstalled).toBeGreaterThan(0);
    const entry = cluster.replica(home).clientTable.get(SDK_CLIENT);
    expect(entry?.epoch).toBe(session);
    expect(entry?.ring.some((reply) => Buffer.from(reply.bytes).equals(Buffer.from(original)))).toBe(true);

    // Make it the primary again (crash whoever leads until the view rotates to it).
    for (let rounds = 0; cluster.replica(survivor).primaryIndex() !== home; rounds++) {
      expect(rounds).toBeLessThan(6);
      const leader = cluster.replica(home).primaryIndex();
      cluster.crash(leader);
      expect(cluster.runUntil(() => normal(cluster) && cluster.replica(home).primaryIndex() !== leader, 20_000), cluster.describe()).toBe(true);
      cluster.restart(leader);
      cluster.converge();
    }
    expect(cluster.runUntil(() => cluster.replica(home).canAcceptRequests(), 10_000), cluster.describe()).toBe(true);

    // The retry (same session, same request number) is answered from the table: the same bytes,
    // and nothing is committed for it again.
    const before = cluster.replica(home).commitMax;
    frames.length = 0;
    send(home, TestOperation.createStream, session, 1, body);
    const replayed = answer(home);
    expect(Buffer.from(replayed)).toEqual(Buffer.from(original));
    cluster.converge();
    const leader = cluster.replica(home);
    for (let op = before + 1; op <= leader.commitMax; op++) expect(leader.journal.get(op)?.header.client).not.toBe(SDK_CLIENT);
    expect(frames).toHaveLength(0);
    cluster.checkFinal();
  });
});

/**
 * State transfer, named like specs: the transfer scenarios of MD §5 and one test per defect the seed
 * review (seed-pr-3765-review.txt) names, each of which fails without its fix. Clusters are built
 * fault-free (scenarioOptions) with tiny WALs and tiny chunks, so a lagging replica falls below
 * every peer's checkpoint and a snapshot takes many chunks; then the scenario injects exactly the
 * fault it names and requires convergence with every checker green.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { describe, expect, it } from 'vitest';
import { Command, HEADER_SIZE } from '../../src/constants.js';
import { TRAILER_SIZE } from '../../src/kernels/kernel.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { idOf } from '../../src/metadata/operations.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { CLIENT_NODE_BASE } from '../../src/testing/network-sim.js';
import { scenarioOptions } from '../../src/testing/swarm.js';
import { TestStateMachine } from '../../src/testing/test-state-machine.js';
import { ClusterSim } from '../../src/testing/vopr.js';
import { ClientTable } from '../../src/vsr/client-table.js';
import { buildFrame, decodeFrame, sealFrame, verifyFrame, type FrameResult } from '../../src/vsr/frame.js';
import { FrameRejection } from '../../src/vsr/frame-reason.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import type { ReplicaEnv } from '../../src/vsr/io.js';
import type { Replica } from '../../src/vsr/replica.js';
import { STATE_CHUNKS_IN_FLIGHT_MAX, STATE_CHUNKS_UNWRITTEN_MAX, TransferStageMachine, encodeManifest, decodeManifest, type Manifest } from '../../src/vsr/state-transfer.js';
import { Driver, ROOT, req } from '../unit/metadata-fixtures.js';
import { formed, smallSim as sim } from '../support/sim-scenarios.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

function commitMax(cluster: ClusterSim): number {
  return Math.max(...cluster.replicas.map((entry) => entry.replica?.commitMax ?? 0));
}

function installs(cluster: ClusterSim): number {
  return cluster.events.get('state_transfer_installed') ?? 0;
}

/**
 * A backup, crashed until the cluster moved two checkpoints past it. Without `pings`, the primary
 * never hears that the other backup holds its checkpoints (see dropPings) and keeps its payload.
 */
function lagBehindCheckpoints(cluster: ClusterSim, { pings = true } = {}): number {
  if (!pings) dropPings(cluster);
  formed(cluster);
  const backup = (cluster.replica(0).primaryIndex() + 1) % 3;
  cluster.crash(backup);
  const interval = cluster.replicas[(backup + 1) % 3]!.replica!.config.checkpointInterval;
  expect(cluster.runUntil(() => commitMax(cluster) >= 3 * interval, 20_000), cluster.describe()).toBe(true);
  return backup;
}

/**
 * Rots `server`'s snapshot at rest the moment a transfer request reaches it (later checkpoints
 * would rewrite an earlier rot away). Returns whether it happened yet.
 */
function rotOnTransferRequest(cluster: ClusterSim, server: number): { rotted: boolean } {
  const rot = { rotted: false };
  cluster.network.filter = ({ to, frame }) => {
    const decoded = decodeFrame(kernels, frame);
    const request = decoded.ok && decoded.header.command === Command.requestStateTransfer;
    if (!rot.rotted && to === server && request) {
      rot.rotted = true;
      cluster.replicas[server]!.store.disk.corrupt(SNAPSHOT_FILE, 40);
    }
    return 'deliver';
  };
  return rot;
}

/**
 * Drops every ping (a backup's answer to its primary's heartbeat, naming the checkpoint it holds)
 * on top of the network's filter: the primary never learns that another replica holds its
 * checkpoint, so it keeps the payload, as when the one backup at its checkpoint lost its disk.
 */
function dropPings(cluster: ClusterSim): void {
  const inner = cluster.network.filter;
  cluster.network.filter = (packet) => {
    const decoded = decodeFrame(kernels, packet.frame);
    if (decoded.ok && decoded.header.command === Command.ping) return 'drop';
    return inner === null ? 'deliver' : inner(packet);
  };
}

describe('state transfer scenarios', () => {
  it('a restart with an intact WAL below every peer checkpoint catches up by state transfer', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    cluster.converge();
    expect(installs(cluster)).toBeGreaterThan(0);
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('a fresh late joiner with an empty data directory catches up by state transfer', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.loseDisk(backup);
    cluster.restart(backup);
    expect(cluster.replica(backup).nackUnknown).toBe(true);
    cluster.converge();
    expect(cluster.replica(backup).nackUnknown).toBe(false);
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('a stale rejoin after an election: the old primary, wiped, never acts as primary of view 1', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    formed(cluster);
    const oldPrimary = cluster.replica(0).primaryIndex();
    cluster.runUntil(() => commitMax(cluster) >= 10, 5_000);
    cluster.crash(oldPrimary);
    const survivors = [0, 1, 2].filter((index) => index !== oldPrimary);
    expect(cluster.runUntil(() => survivors.some((index) => cluster.replica(index).isPrimary() && cluster.replica(index).status === 'normal' && cluster.replica(index).view > 1), 10_000)).toBe(true);
    cluster.runUntil(() => commitMax(cluster) >= 40, 20_000);
    cluster.loseDisk(oldPrimary);
    cluster.restart(oldPrimary);
    // It boots probing (never as a primary) and leaves view 0 by adopting the live view.
    expect(cluster.replica(oldPrimary).status).toBe('recovering');
    cluster.converge();
    expect(cluster.replica(oldPrimary).view).toBeGreaterThan(1);
    expect(cluster.replica(oldPrimary).counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('the serving replica dies mid-transfer: the receiver resumes from another voucher', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    expect(cluster.runUntil(() => receiver.stateTransferProgress().stage === 'fetching' && receiver.stateTransferProgress().bytesDone > 0, 5_000)).toBe(true);
    const server = receiver.stateTransferProgress().peer!;
    const bytesBefore = receiver.stateTransferProgress().bytesDone;
    cluster.crash(server);
    expect(cluster.runUntil(() => receiver.counters.stateTransfersInstalled > 0, 5_000), cluster.describe()).toBe(true);
    // Resumed at the verified offset, not from zero: the installed transfer kept those bytes.
    expect(bytesBefore).toBeGreaterThan(0);
    expect(receiver.counters.stateTransfersStarted).toBe(1);
    cluster.converge();
  });

  it('several checkpoint generations pass during one transfer', () => {
    const cluster = sim({ clientCount: 4, requestsPerClient: 60 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    cluster.runUntil(() => receiver.stateTransfer.transferring, 5_000);
    const checkpointAtStart = cluster.replica((backup + 1) % 3).checkpointOp;
    // Slow the transfer down (every other chunk lost) while the cluster keeps checkpointing.
    let chunk = 0;
    cluster.network.filter = ({ to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to === backup && decoded.ok && decoded.header.command === Command.stateChunk && chunk++ % 2 === 0) return 'drop';
      return 'deliver';
    };
    cluster.runUntil(() => cluster.replica((backup + 1) % 3).checkpointOp >= checkpointAtStart + 2 * receiver.config.checkpointInterval, 30_000);
    cluster.network.filter = null;
    cluster.converge();
    expect(receiver.counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('a second restart right after an install boots from the installed checkpoint', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 5_000);
    const installed = cluster.replica(backup).checkpointOp;
    cluster.runUntil(() => cluster.replicas[backup]!.storage.inFlight === 0, 100);
    cluster.crash(backup);
    cluster.restart(backup);
    expect(cluster.replica(backup).commitMin).toBeGreaterThanOrEqual(installed);
    cluster.converge();
  });

  it('a restart right after an install, with nothing journaled above it, still knows the chain anchor', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    // No repaired prepare lands above the installed checkpoint: its WAL holds nothing there.
    cluster.network.filter = ({ to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to !== backup || !decoded.ok) return 'deliver';
      const command = decoded.header.command;
      return command === Command.repairPrepare || command === Command.prepare ? 'drop' : 'deliver';
    };
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 5_000), cluster.describe()).toBe(true);
    cluster.runUntil(() => cluster.replicas[backup]!.storage.inFlight === 0, 100);
    const installed = cluster.replica(backup).checkpointOp;
    cluster.crash(backup);
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    expect(receiver.commitMin).toBe(installed);
    expect(receiver.commitChecksum).toBe(cluster.checker.canonicalChecksum(installed));
    cluster.network.filter = null;
    cluster.converge();
  });

  it('corruption of the serving replica\'s snapshot at rest is refused there, never re-sealed on the receiver', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    // One server's snapshot rots; the other is healthy (a voucher quorum is two replicas).
    const rotten = (backup + 1) % 3;
    rotOnTransferRequest(cluster, rotten);
    cluster.restart(backup);
    cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000);
    cluster.network.filter = null;
    cluster.converge();
    expect(cluster.replica(rotten).counters.offersRefused).toBeGreaterThan(0);
    expect(cluster.events.get('offer_refused_snapshot_unreadable') ?? 0).toBeGreaterThan(0);
    // The receiver's file holds exactly one trailer over the payload the healthy server shipped.
    const file = cluster.replicas[backup]!.store.disk.readAll(SNAPSHOT_FILE);
    const split = kernels.trailerSplit(file);
    expect(split.status).toBe('valid');
    expect(kernels.trailerSplit(split.payload).status).toBe('no_trailer');
  });

  it('the primary\'s snapshot rots at rest while no backup is known to hold it: it rewrites the file from the payload it holds, keeps serving, and the lagging backup catches up', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster, { pings: false });
    // No checkpoint after the rot (it would write the file anew): the clients are done first.
    expect(cluster.runUntil(() => cluster.clients.every((client) => client.idle), 20_000)).toBe(true);
    const primary = cluster.replica((backup + 1) % 3).primaryIndex();
    const rot = rotOnTransferRequest(cluster, primary);
    dropPings(cluster);
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    expect(cluster.runUntil(() => cluster.replica(primary).counters.snapshotsRewritten > 0, 5_000), cluster.describe()).toBe(true);
    cluster.network.filter = null;
    const server = cluster.replica(primary);
    expect(rot.rotted).toBe(true);
    expect(server.counters.snapshotsDamaged).toBe(0);
    expect(server.counters.offersRefused).toBe(0);
    expect(server.counters.snapshotRepairs).toBe(0);
    cluster.runUntil(() => cluster.replicas[primary]!.storage.inFlight === 0, 100);
    // The file at rest verifies again, as the checkpoint it pairs with (unless a newer one replaced it).
    const file = cluster.replicas[primary]!.store.disk.readAll(SNAPSHOT_FILE);
    const split = kernels.trailerSplit(file);
    expect(split.status).toBe('valid');
    if (split.status === 'valid') expect(split.checksum).toBe(server.checkpointChecksum);
    cluster.converge();
  });

  it('a flipped byte in a chunk in flight is rejected on arrival and re-requested', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    let flipped = 0;
    // Re-seal the damaged frame, as a faulty server would: only the manifest's chunk checksum
    // can catch it.
    cluster.network.filter = ({ to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to !== backup || !decoded.ok || decoded.header.command !== Command.stateChunk || flipped >= 2) return 'deliver';
      flipped += 1;
      const body = decoded.body.slice();
      body[0]! ^= 0xff;
      const { checksum: _c, checksumBody: _b, size: _s, ...input } = decoded.header;
      return buildFrame(kernels, input, body);
    };
    cluster.restart(backup);
    cluster.converge();
    expect(flipped).toBe(2);
    expect(cluster.replica(backup).counters.stateChunksDamaged).toBe(2);
    expect(cluster.replica(backup).counters.drops['chunk_damaged']).toBe(2);
    // With 64-byte chunks the cluster may checkpoint past the installed op again before the
    // receiver repaired up to it: then it installs the next checkpoint too.
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThanOrEqual(1);
  });

  it('chunks that overtake a lost one are verified and held, never re-requested, and the window stays bounded', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    const requests = new Map<number, number>();
    let lost = false;
    let heldMax = 0;
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (!decoded.ok) return 'deliver';
      if (from === backup && decoded.header.command === Command.requestStateChunk) {
        requests.set(decoded.header.offset, (requests.get(decoded.header.offset) ?? 0) + 1);
      }
      if (to !== backup || decoded.header.command !== Command.stateChunk) return 'deliver';
      heldMax = Math.max(heldMax, cluster.replica(backup).stateTransfer.sessionAny?.ahead.size ?? 0);
      // Lose the first chunk once: the three behind it in the window arrive before its retry.
      if (decoded.header.offset === 0 && !lost) {
        lost = true;
        return 'drop';
      }
      return 'deliver';
    };
    cluster.restart(backup);
    cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000);
    cluster.network.filter = null;
    cluster.converge();
    expect(lost).toBe(true);
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThan(0);
    // The lost chunk was asked for twice; the window's other chunks once each.
    expect(requests.get(0)).toBe(2);
    for (const offset of [64, 128, 192]) expect(requests.get(offset), `offset ${offset}`).toBe(1);
    expect(heldMax).toBe(STATE_CHUNKS_IN_FLIGHT_MAX - 1);
  });

  it('message loss, duplication and reordering during every stage still converge', () => {
    const cluster = sim({
      clientCount: 3,
      requestsPerClient: 40,
      network: { ...scenarioOptions().network, lossProbability: 0.1, duplicateProbability: 0.2, delayMeanTicks: 6 },
    });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 20_000);
    cluster.converge();
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('at rest exactly at a checkpoint: a retry is answered from the transferred table, byte for byte', () => {
    // One client: register (op 1) and 23 requests (ops 2..24): the cluster stops at the second
    // checkpoint (interval 12), so the transfer carries the last reply and nothing follows it.
    const cluster = sim({ clientCount: 1, requestsPerClient: 23 });
    formed(cluster);
    const primary = cluster.replica(0).primaryIndex();
    const backup = (primary + 1) % 3; // the primary of the next view
    cluster.crash(backup);
    const replies: { from: number; frame: Uint8Array }[] = [];
    let withhold = true;
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to < CLIENT_NODE_BASE || !decoded.ok || decoded.header.command !== Command.reply || decoded.header.request !== 23) return 'deliver';
      replies.push({ from, frame });
      return withhold ? 'drop' : 'deliver';
    };
    const interval = cluster.replica(primary).config.checkpointInterval;
    expect(cluster.runUntil(() => replies.length > 0 && cluster.replica(primary).checkpointOp === 2 * interval, 20_000), cluster.describe()).toBe(true);
    expect(cluster.replica(primary).commitMax).toBe(2 * interval);
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 5_000), cluster.describe()).toBe(true);
    expect(cluster.replica(backup).commitMin).toBe(2 * interval);
    // The old primary dies; the transferred replica leads the next view and answers the retry.
    cluster.crash(primary);
    expect(cluster.runUntil(() => cluster.replica(backup).status === 'normal' && cluster.replica(backup).isPrimary(), 5_000), cluster.describe()).toBe(true);
    withhold = false;
    expect(cluster.runUntil(() => replies.some((reply) => reply.from === backup), 5_000), cluster.describe()).toBe(true);
    const original = Buffer.from(replies[0]!.frame);
    const fromTransferred = replies.find((reply) => reply.from === backup)!;
    expect(Buffer.compare(original, Buffer.from(fromTransferred.frame))).toBe(0);
    cluster.network.filter = null;
    cluster.converge();
  });

  it('a session registered below the first floor resumes after a transfer, retries deduplicated', () => {
    const cluster = sim({ clientCount: 2, requestsPerClient: 60 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    cluster.converge();
    // The clients registered at the first ops (below every floor) kept working throughout, and
    // the checkers (exactly-once, replies == canonical) held across the install.
    expect(cluster.clients.every((client) => client.evictions === 0 && client.session > 0 && client.session < cluster.replica(backup).config.checkpointInterval)).toBe(true);
    expect(cluster.replica(backup).clientTable.get(cluster.clients[0]!.client)).toBeDefined();
  });
});

/** What a serving replica exposes to these tests (private fields, read only). */
interface ServerView {
  readonly env: ReplicaEnv<MetadataMachineSnapshot>;
  readonly transferServer: { readonly source: { readonly manifest: Manifest; readonly payload: Uint8Array | null } | null };
  readonly counters: { readonly offerSourceChecks: number; readonly chunkReads: number; readonly payloadsReleased: number };
}

interface ServedChunk {
  readonly server: number;
  readonly header: Uint8Array;
  readonly body: Uint8Array;
  /** The offset the frame names (decoded from the header). */
  readonly offset: number;
  /** The server's snapshot file at rest when it sent the chunk, payload only. */
  readonly atRest: Uint8Array;
  /** The payload the server held in memory when it sent the chunk (null: released). */
  readonly held: Uint8Array | null;
  /** The server's chunk reads from its file when it sent the chunk. */
  readonly reads: number;
  readonly manifest: Manifest;
  /** The server's at-rest checks when it served this chunk. */
  readonly checks: number;
}

/**
 * Gives every replica but `backup` the production bus's `sendToReplicaParts` (the simulated network
 * has none, so the core joins the parts for it): each chunk served is recorded with what the server
 * held, then joined for the simulated wire.
 */
function recordServedChunks(cluster: ClusterSim, backup: number): ServedChunk[] {
  const served: ServedChunk[] = [];
  for (const server of [0, 1, 2].filter((index) => index !== backup)) {
    const replica = cluster.replica(server) as unknown as ServerView;
    replica.env.bus.sendToReplicaParts = (target, header, body) => {
      const source = replica.transferServer.source!;
      const decoded = decodeFrame(kernels, Buffer.concat([header, body]));
      const offset = decoded.ok && decoded.header.command === Command.stateChunk ? decoded.header.offset : -1;
      const file = cluster.replicas[server]!.store.disk.readAll(SNAPSHOT_FILE);
      const atRest = file.subarray(0, file.byteLength - TRAILER_SIZE);
      const { offerSourceChecks: checks, chunkReads: reads } = replica.counters;
      served.push({ server, header, body, offset, atRest, held: source.payload, reads, manifest: source.manifest, checks });
      const frame = new Uint8Array(header.byteLength + body.byteLength);
      frame.set(header);
      frame.set(body, header.byteLength);
      cluster.network.send(server, target, frame);
    };
  }
  return served;
}

describe('state transfer: serving chunks at the network\'s speed', () => {
  it.each([
    { server: 'the primary', held: true },
    { server: 'the other backup', held: false },
  ])('a served chunk is the checkpoint\'s bytes sealed with its manifest sum, served by $server (payload held: $held)', ({ held }) => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    // The primary holds its payload while no ping told it that the other backup holds the same
    // checkpoint; that backup let its own go when the primary's heartbeat named it.
    const backup = lagBehindCheckpoints(cluster, { pings: !held });
    // The file at rest stays the served checkpoint's: no checkpoint during the fetch.
    expect(cluster.runUntil(() => cluster.clients.every((client) => client.idle), 20_000)).toBe(true);
    const served = recordServedChunks(cluster, backup);
    const primaryAtStart = cluster.replica((backup + 1) % 3).primaryIndex();
    // Chunks from the primary or from the other backup: the other is never asked.
    cluster.network.filter = ({ to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (!decoded.ok || decoded.header.command !== Command.requestStateChunk) return 'deliver';
      return (to === primaryAtStart) === held ? 'deliver' : 'drop';
    };
    if (held) dropPings(cluster);
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    cluster.network.filter = null;
    expect(served.length).toBeGreaterThan(10);
    expect(served.every((chunk) => (chunk.held !== null) === held)).toBe(true);
    for (const chunk of served) {
      const decoded = decodeFrame(kernels, Buffer.concat([chunk.header, chunk.body]));
      expect(decoded.ok && decoded.header.command).toBe(Command.stateChunk);
      if (!decoded.ok || decoded.header.command !== Command.stateChunk) continue;
      const offset = decoded.header.offset;
      // The bytes of the server's file at rest, at the chunk's offset.
      expect(chunk.body).toEqual(chunk.atRest.subarray(offset, offset + chunk.body.byteLength));
      if (chunk.held !== null) {
        // Held: a view of the payload, never copied into a frame.
        expect(chunk.body.buffer).toBe(chunk.held.buffer);
        expect(chunk.body.byteOffset).toBe(chunk.held.byteOffset + offset);
      } else {
        // Released: read from the file for this request.
        expect(chunk.reads).toBeGreaterThan(0);
      }
      // Sealed with the manifest's sum of that chunk (what the receiver checks it against).
      expect(decoded.header.checksumBody).toBe(chunk.manifest.entries[0]!.chunkChecksums[offset / chunk.manifest.chunkSize]);
    }
    cluster.converge();
    // At rest, pings flowing: no replica holds a payload. Every backup let its own go once the
    // primary's heartbeat named the same checkpoint, the primary once a backup's ping did, and
    // the installed one never held one.
    for (const index of [0, 1, 2]) {
      const source = (cluster.replica(index) as unknown as ServerView).transferServer.source;
      if (source !== null) expect(source.payload, `replica ${index}`).toBeNull();
    }
  });

  it('a primary lets its payload go only once a backup of its view pings the same checkpoint id', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    dropPings(cluster);
    formed(cluster);
    expect(cluster.runUntil(() => cluster.clients.every((client) => client.idle), 20_000)).toBe(true);
    const primary = cluster.replica(0).primaryIndex();
    const backup = (primary + 1) % 3;
    const server: Replica<MetadataMachineSnapshot> = cluster.replica(primary);
    const held = (): Uint8Array | null | undefined => (server as unknown as ServerView).transferServer.source?.payload;
    expect(server.checkpointOp).toBeGreaterThan(0);
    // No ping heard: the primary may be the one holder of its checkpoint.
    expect(held()).not.toBeNull();
    expect(server.counters.payloadsReleased).toBe(0);
    const ping = (fields: { view?: number; checkpointId: bigint; checkpointOp: number }) => {
      const frame = buildFrame(kernels, {
        command: Command.ping,
        cluster: server.config.cluster,
        view: fields.view ?? server.view,
        release: 0,
        replica: backup,
        checkpointId: fields.checkpointId,
        checkpointOp: fields.checkpointOp,
        group: METADATA_GROUP,
      });
      const decoded = decodeFrame(kernels, frame);
      expect(decoded.ok).toBe(true);
      if (decoded.ok) server.onMessage(decoded);
    };
    const op = server.checkpointOp;
    const id = server.checkpointChecksum;
    const divergences = server.counters.divergences;
    // Another id at our checkpoint op: a divergent backup, reported; it holds nothing of ours.
    ping({ checkpointId: id ^ 1n, checkpointOp: op });
    expect(server.counters.divergences).toBe(divergences + 1);
    // An older checkpoint, or a ping of an older view: neither names the payload we hold.
    ping({ checkpointId: server.checkpointIds.get(op - server.config.checkpointInterval)!, checkpointOp: op - server.config.checkpointInterval });
    ping({ view: server.view - 1, checkpointId: id, checkpointOp: op });
    expect(server.counters.drops['older_view']).toBeGreaterThan(0);
    expect(held()).not.toBeNull();
    expect(server.counters.payloadsReleased).toBe(0);
    // The backup's own answer to a heartbeat, once pings flow again.
    cluster.network.filter = null;
    expect(cluster.runUntil(() => server.counters.payloadsReleased > 0, 1_000), cluster.describe()).toBe(true);
    expect(held()).toBeNull();
    expect(server.counters.divergences).toBe(divergences + 1);
  });

  it('a backup pings a checkpoint once per heartbeat interval under a lone writer, and a new checkpoint at its next heartbeat', () => {
    // One writer: the primary's pipeline drains after every commit, so it announces each commit as
    // a heartbeat at once (counters.commitsAnnounced). A ping answering every one of them doubled
    // the messages of a write on the wire.
    const cluster = sim({ clientCount: 1, requestsPerClient: 120 });
    const pings: { from: number; tick: number; checkpointOp: number }[] = [];
    const heartbeats = [0, 0, 0];
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (decoded.ok && decoded.header.command === Command.ping) pings.push({ from, tick: cluster.tickNow, checkpointOp: decoded.header.checkpointOp });
      if (decoded.ok && decoded.header.command === Command.commit && to < 3) heartbeats[to]! += 1;
      return 'deliver';
    };
    formed(cluster);
    const ticksAtStart = cluster.tickNow;
    expect(cluster.runUntil(() => cluster.clients.every((client) => client.idle), 20_000), cluster.describe()).toBe(true);
    const primary = cluster.replica(0).primaryIndex();
    const interval = cluster.replica(primary).config.timeouts.commitMessage;
    // The checkpoint the last writes reached is named at the next heartbeat, within an interval.
    const backups = [0, 1, 2].filter((index) => index !== primary);
    const named = () => backups.every((backup) => pings.some((ping) => ping.from === backup && ping.checkpointOp === cluster.replica(backup).checkpointOp));
    expect(cluster.runUntil(named, 3 * interval), cluster.describe()).toBe(true);
    const ticks = cluster.tickNow - ticksAtStart;
    expect(cluster.replica(primary).counters.commitsAnnounced).toBeGreaterThan(60);
    for (const backup of backups) {
      const replica = cluster.replica(backup);
      const sent = pings.filter((ping) => ping.from === backup);
      const checkpoints = new Set(sent.map((ping) => ping.checkpointOp));
      // Fewer pings than heartbeats heard: one per interval, plus one per checkpoint reached (the
      // simulator's interval is 10 ticks, a write a few: in a real cluster the gap is far wider).
      expect(heartbeats[backup]).toBeGreaterThan(1.5 * sent.length);
      expect(sent.length).toBeLessThanOrEqual(Math.ceil(ticks / interval) + checkpoints.size + 2);
      expect(replica.counters.pingsDeferred).toBeGreaterThan(0);
      // Every checkpoint the backup reached was named to the primary, its last one included.
      expect(replica.checkpointOp).toBeGreaterThan(2 * replica.config.checkpointInterval);
      expect(checkpoints.has(replica.checkpointOp), `backup ${backup} pinged ${[...checkpoints].join(', ')}`).toBe(true);
      for (let op = replica.config.checkpointInterval; op <= replica.checkpointOp; op += replica.config.checkpointInterval) {
        expect(checkpoints.has(op), `backup ${backup} pinged checkpoint ${op}`).toBe(true);
      }
    }
    // And the primary heard enough: it let its payload go.
    expect(cluster.replica(primary).counters.payloadsReleased).toBeGreaterThan(0);
  });

  it('the serving replica checks its file at rest only once its fetch is over, never mid-fetch', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    const served = recordServedChunks(cluster, backup);
    // Slow links: a few ticks between chunk requests, as a loaded receiver has.
    cluster.network.options = { ...cluster.network.options, delayMinTicks: 3 };
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    const servers = new Set(served.map((chunk) => chunk.server));
    expect(servers.size).toBeGreaterThan(0);
    for (const server of servers) {
      const chunks = served.filter((chunk) => chunk.server === server);
      const len = chunks[0]!.manifest.entries[0]!.len;
      const final = chunks.findIndex((chunk) => chunk.offset + chunk.body.byteLength === len);
      expect(final, `replica ${server} served the final chunk`).toBeGreaterThan(0);
      // No check before the final chunk was asked for: the whole-file read never stalls a fetch.
      expect(chunks.slice(0, final + 1).map((chunk) => chunk.checks)).toEqual(chunks.slice(0, final + 1).map(() => 0));
    }
    cluster.network.options = { ...cluster.network.options, delayMinTicks: 1 };
    cluster.converge();
    // It is still checked, when the fetch is over (and again for each later checkpoint offered).
    for (const server of servers) expect((cluster.replica(server) as unknown as ServerView).counters.offerSourceChecks).toBeGreaterThan(0);
  });
});

describe('state transfer: a fetch holds a bounded number of chunks, whatever the disk does', () => {
  it('writes held up (a slow fsync ahead of them) stop the requests after STATE_CHUNKS_UNWRITTEN_MAX chunks; they resume once writes complete', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    // From the first chunk request on, the receiver's storage completes nothing for 60 ticks (three
    // stall intervals: the session survives), as if a superblock's fsync held the queue.
    const storage = cluster.replicas[backup]!.storage;
    const tick = storage.tick.bind(storage);
    let holdTicks = -1;
    storage.tick = (store, done) => {
      if (holdTicks > 0) {
        holdTicks -= 1;
        return;
      }
      tick(store, done);
    };
    const requestedWhileHeld = new Set<number>();
    cluster.network.filter = ({ from, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (from !== backup || !decoded.ok || decoded.header.command !== Command.requestStateChunk) return 'deliver';
      if (holdTicks === -1) holdTicks = 60;
      if (holdTicks > 0) requestedWhileHeld.add(decoded.header.offset);
      return 'deliver';
    };
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    // Nothing was written while held: what was asked for is all the fetch ever held in memory.
    expect(requestedWhileHeld.size).toBe(STATE_CHUNKS_UNWRITTEN_MAX);
    expect(cluster.replica(backup).counters.stateTransfersAbandoned).toBe(0);
    cluster.network.filter = null;
    cluster.converge();
  });
});

describe('state transfer: each defect of the seed review is impossible', () => {
  /** The decoder's reason for refusing a frame, or null when it decodes. */
  const rejection = (result: FrameResult): FrameRejection | null => (result.ok ? null : result.reason);

  it('1. only legal stage transitions exist, and clearing the stage drops the session', () => {
    const machine = new TransferStageMachine();
    expect(() => machine.beginInstall()).toThrow(/illegal|install whole/);
    const session = machine.arm(7n, 0);
    expect(machine.session(7n, 'awaiting_target')).toBe(session);
    expect(machine.session(8n, 'awaiting_target')).toBeNull();
    machine.accept({ op: 8, checksum: 1n, manifest: { chunkSize: 4, entries: [] }, entry: { kind: 0, frontier: 8, len: 8, checksum: 1n, chunkChecksums: [2n, 3n] }, servers: [1] });
    expect(() => machine.arm(9n, 0)).toThrow(/illegal/);
    machine.clear();
    expect(machine.stage).toBe('idle');
    expect(machine.sessionAny).toBeNull();
    // Late chunks find no session in any stage: nothing can reach Installing.
    expect(machine.session(7n, 'fetching')).toBeNull();
    expect(() => machine.beginInstall()).toThrow();
    // Every guard before it passes on a second install of a whole artifact: only the table of legal
    // edges (installing -> installing is not one) refuses it.
    const whole = new TransferStageMachine();
    whole.arm(10n, 0);
    whole.accept({ op: 8, checksum: 1n, manifest: { chunkSize: 4, entries: [] }, entry: { kind: 0, frontier: 8, len: 8, checksum: 1n, chunkChecksums: [2n, 3n] }, servers: [1] });
    whole.sessionAny!.received = 8;
    whole.beginInstall();
    expect(whole.stage).toBe('installing');
    expect(() => whole.beginInstall()).toThrow(/illegal state transfer stage installing -> installing/);
  });

  it('1. an abandoned transfer ignores late chunks and never installs, also once a new session is fetching', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    const held: { from: number; frame: Uint8Array }[] = [];
    let holding = true;
    // Swallow every chunk until the receiver gives up, then deliver them all late.
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (holding && to === backup && decoded.ok && decoded.header.command === Command.stateChunk) {
        held.push({ from, frame });
        return 'drop';
      }
      return 'deliver';
    };
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    expect(cluster.runUntil(() => receiver.counters.stateTransfersAbandoned > 0, 20_000), cluster.describe()).toBe(true);
    holding = false;
    const deliverHeld = (): void => {
      for (const { frame } of held) {
        const decoded = decodeFrame(kernels, frame);
        if (decoded.ok) receiver.onMessage(decoded);
      }
    };
    const installedBefore = receiver.counters.stateTransfersInstalled;
    deliverHeld();
    expect(receiver.counters.stateTransfersInstalled).toBe(installedBefore);
    expect(held.length).toBeGreaterThan(0);
    // The receiver falls back to repair, which re-arms a new session. The abandoned session's chunks
    // carry its nonce: they must not feed the new one, even where offset and bytes would fit.
    const abandoned = decodeFrame(kernels, held[0]!.frame);
    expect(abandoned.ok).toBe(true);
    const abandonedNonce = abandoned.ok && abandoned.header.command === Command.stateChunk ? abandoned.header.nonce : 0n;
    expect(
      cluster.runUntil(() => receiver.stateTransfer.stage === 'fetching' && receiver.stateTransfer.sessionAny!.nonce !== abandonedNonce, 5_000),
      cluster.describe(),
    ).toBe(true);
    const session = receiver.stateTransfer.sessionAny!;
    const progress = { received: session.received, requested: session.requested, ahead: session.ahead.size };
    const damagedBefore = receiver.counters.stateChunksDamaged;
    deliverHeld();
    expect({ received: session.received, requested: session.requested, ahead: session.ahead.size }).toEqual(progress);
    expect(receiver.counters.stateChunksDamaged).toBe(damagedBefore);
    expect(receiver.counters.stateTransfersInstalled).toBe(installedBefore);
    cluster.network.filter = null;
    cluster.converge();
  });

  it('2. one stats registry survives a restore: survivors keep their counters, the dead are pruned, a reused id starts at zero', () => {
    // The install restores the replica's state machine in place (`restore`); for the metadata state
    // machine that must keep the one registry the data plane holds counter objects of.
    const history = (driver: Driver): void => {
      driver.created(ROOT, req.createStream('s0'));
      driver.created(ROOT, req.createTopic(0, 't0', 2));
      driver.created(ROOT, req.createStream('s1'));
      driver.created(ROOT, req.createTopic(1, 't0', 2));
    };
    const behind = new Driver();
    history(behind);
    const registry = behind.sm.stats;
    const survivor = behind.sm.partitionStats(1, 0, 0)!;
    survivor.add({ sizeBytes: 42, messagesCount: 4, segmentsCount: 1 });
    survivor.setCurrentOffset(3);
    behind.sm.bumpPartitionStats(1, 0, 1, { sizeBytes: 8, messagesCount: 1 });
    const dead = behind.sm.partitionStats(0, 0, 0)!;
    dead.add({ sizeBytes: 100, messagesCount: 10, segmentsCount: 2 });
    const deadStream = behind.sm.snapshot().streams.find((stream) => stream.id === 0)!;
    // The cluster moved on while this replica was behind: stream 0 was deleted and its slab id 0
    // reused by a new stream, and stream 1 lost its second partition.
    const ahead = new Driver();
    history(ahead);
    ahead.timestampUs += 50_000_000;
    expect(ahead.code(ROOT, req.deleteStream(0))).toBe(0);
    expect(ahead.created(ROOT, req.createStream('reborn'))).toBe(0);
    expect(ahead.created(ROOT, req.createTopic(0, 't0', 2))).toBe(0);
    expect(ahead.code(ROOT, req.deletePartitions(1, 0, 1))).toBe(0);

    behind.sm.restore(ahead.sm.snapshot());

    // One registry, before and after, and the queries read that one.
    expect(behind.sm.stats).toBe(registry);
    // The survivor keeps its counter object and its values; its parents lost exactly the pruned
    // partition's amounts.
    expect(behind.sm.partitionStats(1, 0, 0)).toBe(survivor);
    expect([survivor.sizeBytes, survivor.messagesCount, survivor.segmentsCount, survivor.currentOffset]).toEqual([42, 4, 1, 3]);
    expect(behind.sm.queries.topic(idOf(1), idOf(0))).toMatchObject({ sizeBytes: 42, messagesCount: 4 });
    expect(behind.sm.queries.stream(idOf(1))).toMatchObject({ sizeBytes: 42, messagesCount: 4 });
    // The dead are pruned: the removed partition and every entry of the deleted stream.
    expect(registry.entryCounts()).toEqual({ streams: 1, topics: 1, partitions: 1 });
    expect(registry.streamGet(deadStream)).toBeUndefined();
    // The new stream on the reused id starts at zero, with counter objects of its own.
    expect(behind.sm.queries.stream(idOf(0))).toMatchObject({ name: 'reborn', sizeBytes: 0, messagesCount: 0 });
    const reborn = behind.sm.partitionStats(0, 0, 0)!;
    expect(reborn).not.toBe(dead);
    expect([reborn.sizeBytes, reborn.messagesCount, reborn.segmentsCount]).toEqual([0, 0, 0]);
  });

  it('3. the offer is built when the checkpoint is written and served from it, never read back, to repeated requests', () => {
    // 3 x (register + 14 requests) = 45 ops: the cluster comes to rest above its third checkpoint
    // (36), so every offer below is of one checkpoint.
    const cluster = sim({ clientCount: 3, requestsPerClient: 14 });
    const backup = lagBehindCheckpoints(cluster);
    const servers = [0, 1, 2].filter((i) => i !== backup);
    // Each server built one source per checkpoint it wrote, before anyone asked.
    for (const index of servers) {
      const replica = cluster.replica(index);
      expect(replica.checkpointOp).toBeGreaterThan(0);
      expect(replica.counters.offerSourcesBuilt).toBe(replica.checkpointOp / replica.config.checkpointInterval);
    }
    // Duplicate every message, RequestStateTransfer included.
    cluster.network.filter = ({ frame }) => frame;
    cluster.network.options = { ...cluster.network.options, duplicateProbability: 1 };
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    cluster.network.options = { ...cluster.network.options, duplicateProbability: 0 };
    for (const index of servers) {
      const replica = cluster.replica(index);
      // Requests built nothing: one source per checkpoint written, the cluster kept checkpointing.
      expect(replica.counters.offerSourcesBuilt).toBe(replica.checkpointOp / replica.config.checkpointInterval);
      expect(replica.counters.offerSourceReads).toBe(0);
      // The file at rest was checked once, in the background, for the one source offered.
      expect(replica.counters.offerSourceChecks).toBeLessThanOrEqual(1);
      expect(replica.checkpointOp).toBe(cluster.replica(backup).checkpointOp);
    }
    // A second requester (a new session, so no cached offer of its own) asks for the same
    // checkpoint: it is offered at once, in the same step, from the source built at the checkpoint.
    const [server, other] = servers as [number, number];
    const replica = cluster.replica(server);
    const built = replica.counters.offerSourcesBuilt;
    const served = replica.counters.offersServed;
    const request = buildFrame(kernels, {
      command: Command.requestStateTransfer,
      cluster: replica.config.cluster,
      view: replica.view,
      release: 0,
      replica: other,
      nonce: 0xfeedn,
      group: METADATA_GROUP,
    });
    const decoded = decodeFrame(kernels, request);
    expect(decoded.ok).toBe(true);
    if (decoded.ok) replica.onMessage(decoded);
    expect(replica.counters.offersServed).toBe(served + 1);
    cluster.runUntil(() => cluster.replicas[server]!.storage.inFlight === 0, 100);
    expect(replica.counters.offerSourcesBuilt).toBe(built);
    expect(replica.counters.offerSourceReads).toBe(0);
    cluster.network.filter = null;
    cluster.converge();
  });

  it('3. a restarted server offers from the payload its boot read, without reading the file again', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 14 });
    const backup = lagBehindCheckpoints(cluster);
    const server = (backup + 1) % 3;
    cluster.runUntil(() => cluster.replicas[server]!.storage.inFlight === 0, 100);
    cluster.crash(server);
    cluster.restart(server);
    expect(cluster.runUntil(() => cluster.replica(server).status === 'normal', 5_000), cluster.describe()).toBe(true);
    cluster.restart(backup);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 10_000), cluster.describe()).toBe(true);
    const replica = cluster.replica(server);
    expect(replica.counters.offersServed).toBeGreaterThan(0);
    expect(replica.counters.offerSourcesBuilt).toBe(1);
    expect(replica.counters.offerSourceReads).toBe(0);
    cluster.converge();
  });

  it('4. a chunk request at or past the artifact end is refused, never answered with an empty chunk', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const backup = lagBehindCheckpoints(cluster);
    let rewritten = 0;
    let emptyChunks = 0;
    let pastEndAnswered = 0;
    const pastEnd = new Map<string, number>();
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (!decoded.ok) return 'deliver';
      const header = decoded.header;
      if (from === backup && header.command === Command.requestStateChunk && rewritten < 3) {
        // Ask for the byte just past the end (offset = 1 GiB is past any artifact here).
        rewritten += 1;
        const { checksum: _c, checksumBody: _b, size: _s, ...input } = header;
        pastEnd.set(`${to}:${header.nonce}`, 1 << 30);
        return buildFrame(kernels, { ...input, offset: 1 << 30 });
      }
      if (header.command === Command.stateChunk) {
        if (decoded.body.byteLength === 0) emptyChunks += 1;
        if (header.offset >= 1 << 30) pastEndAnswered += 1;
      }
      return 'deliver';
    };
    cluster.restart(backup);
    cluster.converge();
    expect(rewritten).toBe(3);
    expect(emptyChunks).toBe(0);
    expect(pastEndAnswered).toBe(0);
    expect(cluster.replica(backup).counters.stateTransfersInstalled).toBeGreaterThan(0);
  });

  it('4. a zero-byte chunk is not a frame: the codec rejects it before any liveness counter', () => {
    const frame = buildFrame(kernels, {
      command: Command.stateChunk,
      cluster: 1n,
      view: 1,
      release: 0,
      replica: 0,
      nonce: 5n,
      offset: 0,
      group: METADATA_GROUP,
      artifact: 0,
    } as never, new Uint8Array(1));
    // The same header without its body, resealed (size, body checksum, seal): a well-formed frame
    // whose only fault is the empty chunk, so only the chunk rule can refuse it.
    const empty = frame.slice(0, HEADER_SIZE);
    new DataView(empty.buffer).setUint32(48, HEADER_SIZE, true);
    sealFrame(kernels, empty);
    expect(verifyFrame(kernels, empty)).toBeNull();
    expect(rejection(decodeFrame(kernels, empty))).toBe(FrameRejection.chunkEmpty);
  });

  it('4. offers are first-wins per (requester, nonce): a retry after a new checkpoint gets the same manifest', () => {
    const cluster = sim({ clientCount: 4, requestsPerClient: 60 });
    const backup = lagBehindCheckpoints(cluster);
    const peer = (backup + 1) % 3;
    const targets = new Map<string, { body: string; checkpointOp: number }>();
    let mismatches = 0;
    // Retries (same server, same nonce) answered after the server's checkpoint moved on.
    let retriesAcrossCheckpoints = 0;
    let holdTargets = true;
    cluster.network.filter = ({ from, to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to === backup && decoded.ok && decoded.header.command === Command.stateTransferTarget && decoded.header.available === 1) {
        const key = `${from}:${decoded.header.nonce}`;
        const body = Buffer.from(decoded.body).toString('hex');
        const checkpointOp = cluster.replica(from).checkpointOp;
        const first = targets.get(key);
        if (first === undefined) targets.set(key, { body, checkpointOp });
        else {
          if (first.body !== body) mismatches += 1;
          if (checkpointOp > first.checkpointOp) retriesAcrossCheckpoints += 1;
        }
        // Lose the first targets: the receiver retries with the same nonce while checkpoints move.
        if (holdTargets) return 'drop';
      }
      return 'deliver';
    };
    cluster.restart(backup);
    // The premise: a server answered the same (requester, nonce) again after a new checkpoint.
    expect(cluster.runUntil(() => retriesAcrossCheckpoints > 0, 20_000), cluster.describe()).toBe(true);
    expect(cluster.replica(peer).checkpointOp).toBeGreaterThan(0);
    holdTargets = false;
    cluster.converge();
    expect(targets.size).toBeGreaterThan(0);
    expect(mismatches).toBe(0);
  });

  it('5. StartView, Commit and DoViewChange mid-fetch walk no commits; the install then restores the state machine', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    // Prepares of the first ops, as the primary sent them.
    const prepares = new Map<number, Uint8Array>();
    cluster.network.filter = ({ frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (decoded.ok && decoded.header.command === Command.prepare && !prepares.has(decoded.header.op)) prepares.set(decoded.header.op, frame);
      return 'deliver';
    };
    const backup = lagBehindCheckpoints(cluster);
    cluster.network.filter = null;
    // Count the receiver's state-machine restores: an install that kept the old state machine and
    // swapped only the client table (the reference's silent "table-only" install) restores nothing.
    let restores = 0;
    cluster.stateMachineFactory = (index) => {
      const stateMachine = new TestStateMachine();
      if (index !== backup) return stateMachine;
      const restore = stateMachine.restore.bind(stateMachine);
      stateMachine.restore = (snapshot) => {
        restores += 1;
        restore(snapshot);
      };
      return stateMachine;
    };
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    expect(
      cluster.runUntil(() => receiver.stateTransferProgress().stage === 'fetching' && receiver.stateTransferProgress().bytesDone > 0, 5_000),
      cluster.describe(),
    ).toBe(true);
    const snapshotOp = receiver.stateTransferProgress().checkpointOp!;
    const commitMin = receiver.commitMin;
    const restoresBefore = restores;
    expect(snapshotOp).toBeGreaterThan(commitMin);
    const deliver = (frame: Uint8Array): void => {
      const decoded = decodeFrame(kernels, frame);
      expect(rejection(decoded)).toBeNull();
      if (decoded.ok) receiver.onMessage(decoded);
    };
    const common = { cluster: receiver.config.cluster, release: 0, group: METADATA_GROUP };
    const commit = receiver.commitMax;
    expect(commit).toBeGreaterThan(snapshotOp);
    // A StartView of a newer view, from that view's primary, committing past the snapshot op.
    let view = receiver.view + 1;
    while (receiver.primaryIndex(view) === backup) view += 1;
    const primary = receiver.primaryIndex(view);
    deliver(buildFrame(kernels, { ...common, command: Command.startView, view, replica: primary, op: commit, commit, incarnation: 0n }));
    expect(receiver.view).toBe(view);
    expect(receiver.commitMin).toBe(commitMin);
    // The receiver holds the bodies right above its commit point, so any commit walk that runs
    // would apply them. (Live prepares are refused while transferring, so the receiver is handed
    // the prepares it would have journaled just before its transfer armed; after the StartView,
    // which reconciles the journal against its own log and would drop them.)
    for (let op = commitMin + 1; op <= commitMin + 4; op++) {
      const decoded = decodeFrame(kernels, prepares.get(op)!);
      expect(decoded.ok && decoded.header.command === Command.prepare).toBe(true);
      if (!decoded.ok || decoded.header.command !== Command.prepare) return;
      receiver.journal.put({ op, header: decoded.header, checksum: decoded.header.checksum, frame: decoded.frame, durable: true });
    }
    // That primary's heartbeat (newer than any before it), which walks the commit point of a
    // replica that is not transferring.
    expect([receiver.status, receiver.isPrimary(), receiver.primaryIndex()]).toEqual(['normal', false, primary]);
    deliver(
      buildFrame(kernels, {
        ...common,
        command: Command.commit,
        view,
        replica: primary,
        commitChecksum: 0n,
        timestampMonotonic: Number.MAX_SAFE_INTEGER,
        commit: Math.max(commit, commitMax(cluster)),
        checkpointOp: 0,
      }),
    );
    expect(receiver.stateTransfer.stage).toBe('fetching');
    expect(receiver.commitMin).toBe(commitMin);
    // A DoViewChange of the next view the receiver would lead, from a peer.
    let nextView = view + 1;
    while (receiver.primaryIndex(nextView) !== backup) nextView += 1;
    const peer = cluster.replica(primary);
    deliver(
      buildFrame(kernels, {
        ...common,
        command: Command.doViewChange,
        view: nextView,
        replica: peer.config.replica,
        op: peer.op,
        commit: peer.commitMax,
        logView: peer.logView,
        nackUnknown: 0,
        applied: Math.min(peer.commitMin, peer.op),
        nackBitset: 0n,
        presentBitset: 0n,
      }),
    );
    expect(receiver.commitMin).toBe(commitMin);
    // commit_min holds until the install jumps it to the snapshot op, and the install restored the
    // state machine (a real install, not the "behind the local frontier" path).
    let moved = false;
    let installedAt: number | null = null;
    expect(
      cluster.runUntil(() => {
        if (receiver.stateTransfer.transferring && receiver.commitMin !== commitMin) moved = true;
        if (receiver.counters.stateTransfersInstalled > 0 && installedAt === null) installedAt = receiver.commitMin;
        return installedAt !== null;
      }, 10_000),
      cluster.describe(),
    ).toBe(true);
    expect(moved).toBe(false);
    expect(installedAt).toBe(snapshotOp);
    expect(restores - restoresBefore).toBe(1);
    expect(cluster.events.get('state_transfer_behind_frontier') ?? 0).toBe(0);
    cluster.converge();
    expect(receiver.counters.stateTransfersInstalled).toBeGreaterThanOrEqual(1);
  });

  it('6. stale or wrong-primary StartViews neither mint a nonce nor reset the retry budget', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 40 });
    const startViews: Uint8Array[] = [];
    cluster.network.filter = ({ frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (decoded.ok && decoded.header.command === Command.startView) startViews.push(frame);
      return 'deliver';
    };
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    cluster.runUntil(() => receiver.stateTransfer.transferring, 5_000);
    const session = receiver.stateTransfer.sessionAny!;
    const nonce = session.nonce;
    const stalls = session.stalls;
    for (const frame of startViews) {
      const decoded = decodeFrame(kernels, frame);
      if (decoded.ok) receiver.onMessage(decoded);
    }
    expect(receiver.stateTransfer.sessionAny?.nonce).toBe(nonce);
    expect(receiver.stateTransfer.sessionAny?.stalls).toBe(stalls);
    expect(startViews.length).toBeGreaterThan(0);
    cluster.network.filter = null;
    cluster.converge();
  });

  it('7. header-only transfer frames are size-checked', () => {
    const base = { cluster: 1n, view: 1, release: 0, replica: 0, nonce: 5n, group: METADATA_GROUP };
    const request = buildFrame(kernels, { ...base, command: Command.requestStateTransfer });
    const chunkRequest = buildFrame(kernels, { ...base, command: Command.requestStateChunk, offset: 0, len: 64, artifact: 0 });
    const refusal = buildFrame(kernels, { ...base, command: Command.stateTransferTarget, commitOp: 0, available: 0, unavailableTransient: 1, commitMax: 0, checkpointAnchor: 0n, checkpointOp: 0, checkpointId: 0n });
    for (const frame of [request, chunkRequest, refusal]) {
      expect(rejection(decodeFrame(kernels, frame))).toBeNull();
      // The same header claiming an 8-byte body, resealed (size, body checksum, seal): intact as
      // bytes, so only the header-only size rule can refuse it.
      const grown = new Uint8Array(frame.byteLength + 8);
      grown.set(frame);
      new DataView(grown.buffer).setUint32(48, grown.byteLength, true);
      sealFrame(kernels, grown);
      expect(verifyFrame(kernels, grown)).toBeNull();
      expect(rejection(decodeFrame(kernels, grown))).toBe(FrameRejection.sizeNotHeaderOnly);
    }
  });

  it('8. a received client table decodes at the configured capacity and grows to fit, never a default', () => {
    const cluster = sim({ clientCount: 4, requestsPerClient: 10, clientsTableMax: 3, replicaCount: 1 });
    cluster.converge();
    const snapshot = cluster.replica(0).clientTable.toSnapshot();
    expect(snapshot.length).toBeGreaterThan(0);
    expect(ClientTable.fromSnapshot(snapshot, 3).capacity).toBe(3);
    const wide = snapshot.map((entry, index) => ({ ...entry, slot: 5 + index }));
    expect(ClientTable.fromSnapshot(wide, 3).capacity).toBe(5 + wide.length);
  });

  it('8. the install and the boot from an installed checkpoint both build the client table at the configured capacity', () => {
    // clients_table_max 3, far below the compile-time default; two clients never fill it.
    const cluster = sim({ clientCount: 2, requestsPerClient: 40, clientsTableMax: 3 });
    const backup = lagBehindCheckpoints(cluster);
    cluster.restart(backup);
    expect(cluster.replica(backup).checkpointOp).toBe(0);
    expect(cluster.runUntil(() => cluster.replica(backup).counters.stateTransfersInstalled > 0, 5_000), cluster.describe()).toBe(true);
    // The install site: the table came from the transferred snapshot.
    const installed = cluster.replica(backup);
    expect(installed.clientTable.size).toBeGreaterThan(0);
    expect(installed.clientTable.capacity).toBe(3);
    // The boot site: a restart right after the install boots from that checkpoint and its table.
    cluster.runUntil(() => cluster.replicas[backup]!.storage.inFlight === 0, 100);
    const checkpointOp = installed.checkpointOp;
    cluster.crash(backup);
    cluster.restart(backup);
    const booted = cluster.replica(backup);
    expect(booted.checkpointOp).toBe(checkpointOp);
    expect(booted.clientTable.size).toBeGreaterThan(0);
    expect(booted.clientTable.capacity).toBe(3);
    cluster.converge();
  });

  it('9. a snapshot behind the local applied frontier is never restored: local state kept', () => {
    const cluster = sim({ clientCount: 3, requestsPerClient: 60 });
    formed(cluster);
    const backup = (cluster.replica(0).primaryIndex() + 1) % 3;
    // Let the backup take a checkpoint of its own, then crash it until the cluster moved on.
    expect(cluster.runUntil(() => cluster.replica(backup).checkpointOp > 0, 20_000), cluster.describe()).toBe(true);
    cluster.crash(backup);
    const interval = cluster.replicas[(backup + 1) % 3]!.replica!.config.checkpointInterval;
    const base = commitMax(cluster);
    expect(cluster.runUntil(() => commitMax(cluster) >= base + 3 * interval, 20_000), cluster.describe()).toBe(true);
    cluster.restart(backup);
    const receiver = cluster.replica(backup);
    const frontier = receiver.checkpointOp;
    const localId = receiver.checkpointIds.get(frontier);
    expect(frontier).toBeGreaterThan(0);
    expect(localId).toBeDefined();
    // Every peer answers with a checkpoint at the receiver's own frontier (as peers that are
    // themselves that far behind would): an honest id, but nothing newer than what it has.
    cluster.network.filter = ({ to, frame }) => {
      const decoded = decodeFrame(kernels, frame);
      if (to !== backup || !decoded.ok || decoded.header.command !== Command.stateTransferTarget || decoded.header.available !== 1) return 'deliver';
      const parsed = decodeManifest(kernels, decoded.body);
      if (!parsed.ok) return 'deliver';
      const manifest = {
        ...parsed.manifest,
        entries: parsed.manifest.entries.map((entry) => ({ ...entry, frontier, checksum: localId! })),
      };
      const { checksum: _c, checksumBody: _b, size: _s, ...input } = decoded.header;
      return buildFrame(kernels, { ...input, checkpointOp: frontier, checkpointId: localId! }, encodeManifest(kernels, manifest));
    };
    const commitMinBefore = receiver.commitMin;
    expect(
      cluster.runUntil(() => (cluster.events.get('state_transfer_behind_frontier') ?? 0) > 0, 10_000),
      cluster.describe(),
    ).toBe(true);
    expect(receiver.commitMin).toBeGreaterThanOrEqual(commitMinBefore);
    expect(receiver.counters.stateTransfersInstalled).toBe(0);
    expect(cluster.events.get('state_transfer_install_refused') ?? 0).toBe(0);
    cluster.network.filter = null;
    cluster.converge();
  });
});

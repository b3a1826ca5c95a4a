/**
 * Crash consistency of the whole storage stack on the simulated disk.
 *
 * A random workload drives the real WAL, superblock and snapshot file the way a replica does
 * (appends, divergent-suffix truncations, view changes, commits, checkpoints = snapshot ->
 * superblock pairing -> drain). A crash point fires at a random mutating call, possibly inside
 * a multi-step write, or an fsync fails; then the power is cut (unsynced writes lost, applied or
 * torn; un-synced directory operations kept or lost) and the replica recovers, sometimes crashing
 * again during recovery itself, with transient read faults on. Checked after every recovery:
 * - recovery throws nothing at all (no corruption was injected, so a refusal is a bug);
 * - nothing acknowledged is lost: every prepare whose append returned (and was not truncated) is
 *   replayed with the same identity, the superblock holds the last acknowledged state, the
 *   snapshot the last acknowledged checkpoint;
 * - what recovers is a valid prefix of what was acknowledged: besides acknowledged data, only
 *   the single in-flight operation may show, and only as itself.
 * The workload then continues on the recovered handles and crashes again (two cycles per run).
 *
 * A second property injects real corruption (a bit flip at rest) after the crash: recovery then
 * either refuses with a StorageRefusal or recovers, and never hands back a prepare, superblock
 * state or snapshot that was not written.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Kernels } from '../../src/kernels/kernel.js';
import { DiskError } from '../../src/storage/disk.js';
import { DurableWriteError, StoragePoisoned } from '../../src/storage/durable-file.js';
import { StorageRefusal } from '../../src/storage/refusal.js';
import { recover, type Recovered, type RecoveryConfig } from '../../src/storage/recovery.js';
import { SimDisk, SimulatedCrash } from '../../src/storage/sim-disk.js';
import { SNAPSHOT_FILE } from '../../src/storage/snapshot-file.js';
import { SUPERBLOCK_FILES } from '../../src/storage/superblock.js';
import { WAL_FILE } from '../../src/storage/wal.js';
import { Prng } from '../../src/stdx/prng.js';
import type { VsrState } from '../../src/vsr/io.js';
import { CLUSTER, kernelVariants, prepare, snapshotPayload } from '../unit/storage-fixtures.js';

const SLOTS = 8;
const CONFIG: RecoveryConfig = { cluster: CLUSTER, replica: 0, replicaCount: 3, journalSlots: SLOTS };
const CRASH_FAULTS = {
  tornWriteProbability: 0.3,
  lostWriteProbability: 0.3,
  tornGarbageProbability: 0.5,
  lostDirectoryOperationProbability: 0.5,
} as const;

type Inflight =
  | { readonly kind: 'append'; readonly op: number; readonly identity: bigint }
  | { readonly kind: 'truncate'; readonly fromOp: number }
  | { readonly kind: 'drain'; readonly keepFromOp: number }
  | { readonly kind: 'superblock'; readonly state: VsrState }
  | { readonly kind: 'snapshot'; readonly op: number; readonly checksum: bigint };

/** What the storage acknowledged: every call that returned. */
interface Model {
  superblock: VsrState | null;
  snapshot: { op: number; checksum: bigint } | null;
  /** Acknowledged WAL entries: op -> identity. */
  wal: Map<number, bigint>;
  head: number;
  headIdentity: bigint;
  /** A truncation makes later prepares of the same ops differ (a new body size). */
  generation: number;
  view: number;
  commitMax: number;
  /** The pairing the superblock carries forward. */
  pairing: { op: number; checksum: bigint };
}

function modelFrom(recovered: Recovered<MetadataMachineSnapshot>, generation: number): Model {
  const wal = new Map<number, bigint>();
  for (const entry of recovered.wal.entries()) wal.set(entry.op, entry.identity);
  const head = recovered.headOp;
  const state = recovered.vsrState;
  const headEntry = recovered.wal.get(head);
  return {
    superblock: state === null ? null : coreState(state),
    snapshot: recovered.snapshot === null ? null : { op: recovered.snapshot.sequenceNumber, checksum: recovered.snapshot.checksum },
    wal,
    head,
    headIdentity: headEntry?.identity ?? 0n,
    generation,
    view: state?.view ?? 0,
    commitMax: Math.max(state?.commitMax ?? 0, recovered.checkpointOp),
    pairing: { op: state?.checkpointOp ?? 0, checksum: state?.checkpointChecksum ?? 0n },
  };
}

function coreState(state: VsrState): VsrState {
  const { cluster, replica, replicaCount, view, logView, commitMax, checkpointOp, checkpointChecksum, flags } = state;
  return { cluster, replica, replicaCount, view, logView, commitMax, checkpointOp, checkpointChecksum, flags };
}

/** True for the failures a workload stops at: the crash point, or an injected IO failure. */
function isInjectedFailure(error: unknown): boolean {
  return error instanceof SimulatedCrash || error instanceof DiskError || error instanceof DurableWriteError || error instanceof StoragePoisoned;
}

/** Runs `actions` until done or the first injected failure; returns the in-flight operation. */
function runWorkload(kernels: Kernels, recovered: Recovered<MetadataMachineSnapshot>, model: Model, actions: readonly number[]): Inflight | null {
  const { wal, superblock, snapshotFile } = recovered;
  let inflight: Inflight | null = null;
  const writeSuperblock = (state: VsrState): void => {
    inflight = { kind: 'superblock', state };
    superblock.write(state);
    model.superblock = state;
  };
  const state = (): VsrState => ({
    cluster: CLUSTER,
    replica: 0,
    replicaCount: 3,
    view: model.view,
    logView: model.view,
    commitMax: model.commitMax,
    checkpointOp: model.pairing.op,
    checkpointChecksum: model.pairing.checksum,
    flags: 0,
  });
  try {
    for (const action of actions) {
      const kind = action % 8;
      if (kind <= 2 || kind === 7) {
        const op = model.head + 1;
        if (!wal.hasRoomFor(op)) continue;
        const next = prepare(op, model.headIdentity, model.generation);
        inflight = { kind: 'append', op, identity: next.identity };
        wal.append(next.frame);
        model.wal.set(op, next.identity);
        model.head = op;
        model.headIdentity = next.identity;
      } else if (kind === 3) {
        model.view += 1;
        writeSuperblock(state());
      } else if (kind === 4) {
        if (model.head <= model.commitMax) continue;
        model.commitMax = model.head;
        writeSuperblock(state());
      } else if (kind === 5) {
        const checkpointOp = model.commitMax;
        if (checkpointOp <= wal.checkpointOp) continue;
        const payload = snapshotPayload(kernels, checkpointOp);
        inflight = { kind: 'snapshot', op: checkpointOp, checksum: kernels.xxh3_64(payload) };
        const checksum = snapshotFile.write(payload);
        model.snapshot = { op: checkpointOp, checksum };
        model.pairing = { op: checkpointOp, checksum };
        writeSuperblock(state());
        inflight = { kind: 'drain', keepFromOp: checkpointOp };
        wal.drain(checkpointOp);
        for (const op of [...model.wal.keys()]) if (op < checkpointOp) model.wal.delete(op);
      } else {
        // A divergent suffix above the commit point is discarded (view change).
        if (model.head <= model.commitMax) continue;
        const fromOp = model.commitMax + 1 + (Math.floor(action / 8) % (model.head - model.commitMax));
        inflight = { kind: 'truncate', fromOp };
        wal.truncateFrom(fromOp);
        for (const op of [...model.wal.keys()]) if (op >= fromOp) model.wal.delete(op);
        model.head = fromOp - 1;
        model.headIdentity = wal.get(model.head)?.identity ?? 0n;
        model.generation += 1;
      }
      inflight = null;
    }
  } catch (error) {
    if (!isInjectedFailure(error)) throw error;
    return inflight;
  }
  return null;
}

/** Recovers, optionally crashing inside recovery first; transient read faults are on. */
function recoverAfterCrash(disk: SimDisk, kernels: Kernels, crashInRecovery: number): Recovered<MetadataMachineSnapshot> {
  disk.setFaults({ fsyncFailureProbability: 0, readBitFlipProbability: 0.02 });
  if (crashInRecovery > 0) {
    disk.crashAtOperation(crashInRecovery);
    try {
      recover(disk, kernels, CONFIG);
    } catch (error) {
      if (!(error instanceof SimulatedCrash)) throw error;
      disk.crash();
    }
    disk.clearCrashPoint();
  }
  const recovered = recover(disk, kernels, CONFIG);
  disk.setFaults({ readBitFlipProbability: 0 });
  return recovered;
}

function checkRecovered(recovered: Recovered<MetadataMachineSnapshot>, model: Model, inflight: Inflight | null): void {
  // The superblock: the last acknowledged state, or the in-flight one.
  const state = recovered.vsrState === null ? null : coreState(recovered.vsrState);
  const superblockOptions = [model.superblock, ...(inflight?.kind === 'superblock' ? [inflight.state] : [])];
  expect(superblockOptions).toContainEqual(state);
  // The snapshot: the last acknowledged checkpoint, or the in-flight one.
  const snapshot = recovered.snapshot === null ? null : { op: recovered.snapshot.sequenceNumber, checksum: recovered.snapshot.checksum };
  const snapshotOptions = [model.snapshot, ...(inflight?.kind === 'snapshot' ? [{ op: inflight.op, checksum: inflight.checksum }] : [])];
  expect(snapshotOptions).toContainEqual(snapshot);
  // The WAL above the snapshot: every acknowledged prepare, nothing else but the in-flight one.
  const floor = recovered.checkpointOp;
  const replayed = new Map(recovered.prepares.map((entry) => [entry.op, entry.identity]));
  for (const [op, identity] of model.wal) {
    if (op <= floor) continue;
    const mayBeGone = inflight?.kind === 'truncate' && op >= inflight.fromOp;
    if (!mayBeGone) expect(replayed.get(op), `acknowledged op ${op} lost`).toBe(identity);
  }
  for (const [op, identity] of replayed) {
    const acknowledged = model.wal.get(op) === identity;
    const inflightAppend = inflight?.kind === 'append' && inflight.op === op && inflight.identity === identity;
    expect(acknowledged || inflightAppend, `op ${op} was never acknowledged`).toBe(true);
  }
  // Consecutive and chained from the snapshot op (recovery's own contract, re-checked).
  recovered.prepares.forEach((entry, index) => expect(entry.op).toBe(floor + 1 + index));
  expect(recovered.commitProvable).toBeGreaterThanOrEqual(floor);
  expect(recovered.commitProvable).toBeLessThanOrEqual(recovered.headOp);
}

/**
 * Runs the workload on a copy of the disk to count its mutating calls, then arms the real disk's
 * crash point at `permille` of them (1000: after the last, so the power cut finds no call in
 * flight). Aiming this way spreads crash points over every step of every operation.
 */
function aimCrashPoint(disk: SimDisk, kernels: Kernels, model: Model, actions: readonly number[], permille: number): void {
  const copy = disk.clone(new Prng(1));
  copy.setFaults({ fsyncFailureProbability: 0 });
  const recovered = recover(copy, kernels, CONFIG);
  const before = copy.mutatingOperationCount;
  runWorkload(kernels, recovered, structuredClone(model), actions);
  const count = copy.mutatingOperationCount - before;
  if (permille < 1000 && count > 0) disk.crashAtOperation(1 + Math.floor((permille * count) / 1000));
}

const workloadArbitrary = fc.record({
  seed: fc.nat(),
  cycles: fc.array(
    fc.record({
      actions: fc.array(fc.nat(1000), { minLength: 1, maxLength: 60 }),
      /** Where the crash point falls, as a fraction of the cycle's mutating calls (1 = after). */
      crashAt: fc.integer({ min: 0, max: 1000 }),
      fsyncFailures: fc.boolean(),
      crashInRecovery: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 6 })),
    }),
    { minLength: 2, maxLength: 2 },
  ),
});

describe.each(kernelVariants())('storage crash consistency ($label kernels)', ({ kernels }) => {
  it('recovers every acknowledged write and nothing else, across crashes anywhere', () => {
    fc.assert(
      fc.property(workloadArbitrary, ({ seed, cycles }) => {
        const disk = new SimDisk(new Prng(seed), CRASH_FAULTS);
        let recovered = recover(disk, kernels, CONFIG);
        let model = modelFrom(recovered, 0);
        for (const cycle of cycles) {
          disk.setFaults({ fsyncFailureProbability: cycle.fsyncFailures ? 0.02 : 0 });
          aimCrashPoint(disk, kernels, model, cycle.actions, cycle.crashAt);
          const inflight = runWorkload(kernels, recovered, model, cycle.actions);
          disk.clearCrashPoint();
          disk.crash();
          recovered = recoverAfterCrash(disk, kernels, cycle.crashInRecovery);
          checkRecovered(recovered, model, inflight);
          model = modelFrom(recovered, model.generation + 1);
          expect(model.commitMax).toBeLessThanOrEqual(model.head);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('injected corruption is refused or cut away, never returned as data', () => {
    fc.assert(
      fc.property(
        workloadArbitrary,
        fc.constantFrom(WAL_FILE, SNAPSHOT_FILE, ...SUPERBLOCK_FILES),
        fc.nat(),
        ({ seed, cycles }, file, offsetSeed) => {
          const disk = new SimDisk(new Prng(seed), CRASH_FAULTS);
          const recovered = recover(disk, kernels, CONFIG);
          const model = modelFrom(recovered, 0);
          const cycle = cycles[0]!;
          aimCrashPoint(disk, kernels, model, cycle.actions, cycle.crashAt);
          const inflight = runWorkload(kernels, recovered, model, cycle.actions);
          disk.clearCrashPoint();
          disk.crash();
          if (!disk.exists(file) || disk.size(file) === 0) return;
          disk.corrupt(file, offsetSeed % disk.size(file));
          let after: Recovered<MetadataMachineSnapshot>;
          try {
            after = recover(disk, kernels, CONFIG);
          } catch (error) {
            if (error instanceof StorageRefusal) return;
            throw error;
          }
          // Recovered<MetadataMachineSnapshot> despite the flip (it hit the WAL's last entry, a stale entry, or bytes a
          // torn tail discards): whatever came back was written and acknowledged (or in flight).
          const state = after.vsrState === null ? null : coreState(after.vsrState);
          expect([model.superblock, ...(inflight?.kind === 'superblock' ? [inflight.state] : [])]).toContainEqual(state);
          for (const entry of after.prepares) {
            const known = model.wal.get(entry.op) === entry.identity || (inflight?.kind === 'append' && inflight.identity === entry.identity);
            expect(known, `op ${entry.op} is not a prepare that was written`).toBe(true);
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});

/**
 * The simulator over a fixed set of seeds (the CI gate; `vrmeta simulate --seeds K` runs random
 * ones). Each seed picks its own fault mix (swarm testing): replica count 1-5, packet loss,
 * duplication, reordering, partitions, clogging, crashes and restarts, superblock write failures,
 * tiny WALs and client tables so checkpoints, repairs, evictions and state transfers happen many
 * times. A failure prints the seed and the command that replays it.
 */
import { describe, expect, it } from 'vitest';
import { createTsKernels } from '../../src/kernels/kernels-ts.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { LATER_FAULTS_OFF, TARGETED_FAULTS_OFF, rulesOfThen } from '../../src/testing/swarm.js';
import { simulateSeed, type SimResult } from '../../src/testing/vopr.js';

const SEED_COUNT = Number(process.env['VRMETA_SIM_SEEDS'] ?? 200);

function report(result: SimResult): string {
  return [
    `seed ${result.seed} failed: ${result.failure}`,
    `replay: npx vrmeta simulate --seed ${result.seed}`,
    ...result.log.slice(-40),
  ].join('\n');
}

describe.each([
  { mode: 'wasm', kernels: () => createWasmKernels(new WasmInstance('simd')), seeds: SEED_COUNT, offset: 0 },
  // The TS kernels run the same protocol: fewer seeds (slower checksums), different ones.
  { mode: 'ts', kernels: () => createTsKernels(), seeds: Math.ceil(SEED_COUNT / 4), offset: 100_000 },
])('simulator ($mode kernels)', ({ kernels, seeds, offset }) => {
  it(`${seeds} seeds: safety under faults, then convergence after healing`, () => {
    const loaded = kernels();
    const failures: string[] = [];
    let transfers = 0;
    let viewChanges = 0;
    for (let index = 1; index <= seeds; index++) {
      const result = simulateSeed(offset + index, loaded);
      if (!result.ok) failures.push(report(result));
      transfers += result.transfers;
      viewChanges += result.viewChanges;
    }
    expect(failures).toEqual([]);
    // The seeds must exercise the paths they exist for.
    expect(viewChanges).toBeGreaterThan(seeds);
    expect(transfers).toBeGreaterThan(0);
    // CPU bound: about 30 s on an idle 2-core machine, more when it is shared.
  }, 240_000);
});

/**
 * Seeds that once failed, replayed on every run with the kernels they failed with (WASM): each
 * names the defect it found. They replay the schedule they failed with: the targeted faults
 * added since draw from a stream of their own and are off here, and every request prepares at
 * once while the pipeline has room and every replica serving transfers from a payload it keeps
 * (`rulesOfThen`, the rules before prepares waited and the payload stayed on the primary only).
 */
describe('regression seeds', () => {
  const kernels = createWasmKernels(new WasmInstance('simd'));
  it.each([
    [100_003, 'late starters of a new cluster mistaken for lost disks wedged every view change'],
    [3_530_378_188_510, 'a restart shortened the log claimed for an adopted log view'],
    [70_837, 'a state-transfer install truncated the last copy of a committed prepare'],
    [70_823, 'committed repair of parked headers asked only peers that had applied them'],
    [72_186, 'the chain anchor of a transferred checkpoint was lost on restart'],
    [1_282_654_390_171, 'a primary-elect adopted the merged log view without persisting its parked headers'],
  ])('seed %i: %s', (seed) => {
    const result = simulateSeed(seed, kernels, { ...TARGETED_FAULTS_OFF, ...rulesOfThen(seed) });
    expect(result.ok, result.ok ? '' : report(result)).toBe(true);
  });

  // Found by the targeted faults, replayed with them (and without those added since).
  it.each([
    [2_644_958_924_859, 'a lagging replica adopting a StartView dropped committed prepares it could not verify; a lost disk then lost them'],
    [1_786_574_930_811, 'adopting a newer log view truncated verified committed bodies above an unverifiable entry; a lost disk then lost them'],
  ])('seed %i (targeted faults): %s', (seed) => {
    const result = simulateSeed(seed, kernels, { ...LATER_FAULTS_OFF, ...rulesOfThen(seed) });
    expect(result.ok, result.ok ? '' : report(result)).toBe(true);
  });

  // Found with every fault the simulator has now (whole-cluster restarts included).
  it.each([
    [3_551_023_059_979, 'a replica adopting a newer log view dropped a committed body the StartView could not vouch for; a lost disk then lost the op'],
    [3_161_429_547_486, 'a lagging replica parked a newer log view\'s headers and claimed them for the log view it kept'],
    [4_320_883_123_812, 'a primary-elect adopted the merged log view without persisting its parked headers (found again after the schedules moved)'],
    [1_086_421_619_296, 'a merge waited forever for a committed op that only a caught-up lost disk of an older log view had applied'],
    [619_636_282_819, 'a lagging follower that applied its view\'s head never claimed the log view; its primary then lost its disk and the survivors wedged'],
    [2_689_289_529_624, 'a server answered a repair of its own checkpoint op, held only as state, with nothing: the lagging follower retried forever instead of pulling the checkpoint'],
    [4_201_942_244_488, 'a primary-elect missing a committed op that no live replica had applied asked only for applied ops and never started its view'],
  ])('seed %i (all faults): %s', (seed) => {
    const result = simulateSeed(seed, kernels, rulesOfThen(seed));
    expect(result.ok, result.ok ? '' : report(result)).toBe(true);
  });

  // Found under the rules of their day (prepares that wait, the payload on the primary alone,
  // pings once per heartbeat interval), replayed with the rules the simulator runs now: when
  // those change, the schedule moves, and the scenario that pins the defect stays.
  it.each([
    [428_996_525_595, 'a late answer to a canonical repair, chained onto the same parent, was applied by a committed repair of the op that replaced it'],
    [307_435_973_307, 'two empty replicas of four missed the first StartView, timed out into later views and never learned the cluster was new: no nack quorum, 190 view changes'],
    [3_507_385_961_706, 'two empty replicas of four never heard each other probe from view 0 and missed the first view: no nack quorum, 190 view changes'],
    [2_451_952_207_327, "a lagging follower that applied its view's head never claimed the log view (A13, found again after the schedules moved: its fix reverted, a replica stays behind its commit)"],
    [730_075_348_166, 'a primary at its checkpoint whose anchor was lost with a crash after an install, among peers holding that op only as state, led forever and admitted nothing'],
    [3_789_050_367_638, 'a backup that had committed a prepare a new primary re-replicated never acknowledged it: that primary waited forever for a quorum'],
  ])('seed %i (all faults, current rules): %s', (seed) => {
    const result = simulateSeed(seed, kernels);
    expect(result.ok, result.ok ? '' : report(result)).toBe(true);
  });
});

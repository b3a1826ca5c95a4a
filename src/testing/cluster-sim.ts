/**
 * The simulator's entry before it was split (issue 16): `vopr.ts` (run loop, verdict),
 * `swarm.ts` (options from a seed), `faults.ts` (fault schedule), `cluster.ts` (harness).
 * Re-exported here so that tests written against the old entry on branches still in flight keep
 * compiling after they merge; new code imports the modules above directly.
 */
export { SIM_TIMEOUTS, type SimHooks } from './cluster.js';
export {
  LATER_FAULTS_OFF,
  TARGETED_FAULTS_OFF,
  scenarioOptions,
  swarmOptions,
  type SimOptions,
} from './swarm.js';
export { ClusterSim, simulateSeed, type SimResult } from './vopr.js';

/**
 * Deterministic schedules for fixes whose regression seeds stopped reaching them when other
 * changes moved every simulator schedule (README, "Pins after the schedules moved"). Each is
 * built by hand in a fault-free simulated cluster with exactly the faults it names, and asserts
 * the fix's own effect, so reverting the fix (scripts/mutations.mjs, the id in each title) fails it.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { createWasmKernels } from '../../src/kernels/kernels-wasm.js';
import { WasmInstance } from '../../src/kernels/wasm-instance.js';
import { CLIENT_NODE_BASE } from '../../src/testing/network-sim.js';
import { decodeFrame } from '../../src/vsr/frame.js';
import { formed, smallSim as sim } from '../support/sim-scenarios.js';

const kernels = createWasmKernels(new WasmInstance('simd'));

/** The command and op of a replica frame (null for a client's or an undecodable one). */
function peek(frame: Uint8Array): { command: number; op: number } | null {
  const decoded = decodeFrame(kernels, frame);
  if (!decoded.ok) return null;
  const header = decoded.header as { command: number; op?: number };
  return { command: header.command, op: header.op ?? -1 };
}

describe('A5: a primary-elect persists the parked headers of the log it merged', () => {
  it('a restart between the merge and the repair of a parked header still holds that header', () => {
    const cluster = sim({ clientCount: 1, requestsPerClient: 30 });
    formed(cluster);
    const primary = cluster.replica(0).primaryIndex();
    // E: the next view's primary-elect; H: the only backup that holds the newest op.
    const elect = (primary + 1) % 3;
    const holder = (primary + 2) % 3;
    const p = cluster.replica(primary);
    expect(cluster.runUntil(() => p.commitMin >= 4 && cluster.replica(elect).commitMin >= 4, 10_000), cluster.describe()).toBe(true);
    const newest = p.op + 1;
    expect(newest).toBeLessThan(12); // below the first checkpoint: the schedule is about the WAL
    let holdClients = false;
    let isolateElect = false;
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) return holdClients ? 'drop' : 'deliver';
      const header = peek(frame);
      if (header === null) return 'deliver';
      if (isolateElect && (to === elect || from === elect)) return 'drop';
      // The newest op reaches H but never E: not as a prepare, not by repair.
      const body = header.command === Command.prepare || header.command === Command.repairPrepare;
      if (to === elect && body && header.op >= newest) return 'drop';
      return 'deliver';
    };
    expect(cluster.runUntil(() => cluster.checker.ackedOpMax >= newest, 10_000), cluster.describe()).toBe(true);
    holdClients = true;
    cluster.crash(primary);
    const e = cluster.replica(elect);
    const holderChecksum = cluster.replica(holder).journal.get(newest)?.checksum;
    expect(holderChecksum).toBeDefined();
    expect(e.journal.get(newest)).toBeUndefined();
    // E merges H's DoViewChange: same log view, a longer log. It parks the newest header (its
    // repair is lost) and, with the fix, persists it with its view.
    expect(
      cluster.runUntil(() => e.journal.get(newest)?.checksum === holderChecksum && e.logView === cluster.replica(holder).logView, 10_000),
      cluster.describe(),
    ).toBe(true);
    expect(e.journal.get(newest)?.frame).toBeNull();
    // Long enough for a superblock write the merge submitted to complete (storage answers within
    // a tick here), short of the view-change timeout: E is still the primary-elect, waiting for
    // the body.
    cluster.runUntil(() => false, 10);
    expect(e.status).toBe('view_change');
    expect(e.primaryIndex()).toBe(elect);
    // E restarts before the repair, and hears nobody while it recovers.
    isolateElect = true;
    cluster.crash(elect);
    cluster.restart(elect);
    const restarted = cluster.replica(elect);
    expect(cluster.runUntil(() => restarted.status !== 'recovering', 2_000), cluster.describe()).toBe(true);
    // From its superblock alone: the header of the log view it claims is still there.
    expect(restarted.journal.get(newest)?.checksum).toBe(holderChecksum);
    isolateElect = false;
    holdClients = false;
    cluster.network.filter = null;
    cluster.restart(primary);
    cluster.converge();
    expect(cluster.checker.canonicalChecksum(newest)).toBe(holderChecksum);
  });
});

describe('A10: a primary-elect holding committed bodies the merged log cannot vouch for forfeits', () => {
  it('it keeps its body and lets a replica of the merged log view lead', () => {
    const cluster = sim({ clientCount: 1, requestsPerClient: 60 });
    formed(cluster);
    const primary = cluster.replica(0).primaryIndex();
    // E leads the view two after this one; P and B go on without E in between.
    const e = cluster.replica((primary + 2) % 3);
    const eIndex = e.config.replica;
    const b = cluster.replica((primary + 1) % 3);
    const p = cluster.replica(primary);
    expect(p.config.checkpointInterval).toBe(12);
    // E's last body: committed in P's log (P's next checkpoint covers it), applied nowhere on E.
    const body = 21;
    let phase: 'feed' | 'isolate' | 'depose' | 'merge' = 'feed';
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) return 'deliver';
      const header = peek(frame);
      if (header === null) return 'deliver';
      const commit = (decodeFrame(kernels, frame) as { header: { commit?: number } }).header.commit ?? 0;
      if (phase === 'feed') {
        // E gets every body up to `body` and never hears that `body` committed.
        if (to === eIndex && header.op > body && (header.command === Command.prepare || header.command === Command.repairPrepare)) return 'drop';
        if (to === eIndex && commit >= body) return 'drop';
        return 'deliver';
      }
      if (from === eIndex || to === eIndex) return phase === 'merge' ? 'deliver' : 'drop';
      // B stops hearing P lead (no prepares, no commits) and elects itself with P's vote.
      const leads = header.command === Command.prepare || header.command === Command.commit;
      if (phase === 'depose' && from === p.config.replica && to === b.config.replica && leads) return 'drop';
      return 'deliver';
    };
    expect(cluster.runUntil(() => e.journal.get(body)?.durable === true && p.commitMin >= body, 10_000), cluster.describe()).toBe(true);
    phase = 'depose';
    const view = p.view;
    expect(cluster.runUntil(() => b.status === 'normal' && b.view > view && b.isPrimary(), 10_000), cluster.describe()).toBe(true);
    phase = 'isolate';
    expect(cluster.runUntil(() => b.checkpointOp >= 24 && p.checkpointOp >= 24 && p.op >= 25 && p.commitMin >= 25, 20_000), cluster.describe()).toBe(true);
    // P and B moved on: a newer log view, and journals that start at checkpoint 24, above E's body.
    expect(p.logView).toBeGreaterThan(e.logView);
    expect(p.journal.floor).toBe(24);
    expect(e.commitMin).toBe(body - 1);
    // B goes down; P and E elect, E the primary-elect: the merged log (P's) cannot vouch for E's
    // body at op 21, which it committed. E must not drop it, so it forfeits the view.
    cluster.crash(b.config.replica);
    phase = 'merge';
    const forfeits = (): number => e.counters.viewChangesByReason['forfeit_unvouched_bodies'] ?? 0;
    expect(cluster.runUntil(() => forfeits() > 0, 5_000), cluster.describe() + '\n' + cluster.recentLog.join('\n')).toBe(true);
    expect(e.journal.get(body)?.durable).toBe(true);
    expect(e.journal.get(body)?.frame).not.toBeNull();
    expect(e.logView).toBe(view);
    // P leads the next view; E follows it as a lagging replica and catches up.
    cluster.network.filter = null;
    cluster.restart(b.config.replica);
    cluster.converge();
    expect(cluster.checker.canonicalChecksum(body)).toBeDefined();
  });
});

/**
 * The StartView twin of A10: E holds its last committed body (op 21) while P and B change view
 * without it and checkpoint past it (their journals start at 24), then E restarts and adopts the
 * new primary's StartView, whose suffix stops above op 21. `runUp` is how far P and B run first.
 */
function unvouchedStartView(runUp: number) {
  const cluster = sim({ clientCount: 1, requestsPerClient: 60 });
  formed(cluster);
  const primary = cluster.replica(0).primaryIndex();
  const eIndex = (primary + 2) % 3;
  const e = cluster.replica(eIndex);
  const b = cluster.replica((primary + 1) % 3);
  const p = cluster.replica(primary);
  expect(p.config.checkpointInterval).toBe(12);
  const body = 21;
  let phase: 'feed' | 'depose' | 'run' | 'rejoin' = 'feed';
  let holdClients = false;
  cluster.network.filter = ({ from, to, frame }) => {
    if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) return holdClients ? 'drop' : 'deliver';
    const header = peek(frame);
    if (header === null) return 'deliver';
    if (phase === 'feed') {
      // E gets every body up to `body` and never hears that `body` committed.
      const commit = (decodeFrame(kernels, frame) as { header: { commit?: number } }).header.commit ?? 0;
      if (to === eIndex && header.op > body && (header.command === Command.prepare || header.command === Command.repairPrepare)) return 'drop';
      if (to === eIndex && commit >= body) return 'drop';
      return 'deliver';
    }
    // B stops hearing P lead (no prepares, no commits) and elects itself with P's vote.
    const leads = header.command === Command.prepare || header.command === Command.commit;
    if (phase === 'depose' && from === p.config.replica && to === b.config.replica && leads) return 'drop';
    return 'deliver';
  };
  expect(cluster.runUntil(() => e.journal.get(body)?.durable === true && p.commitMin >= body, 10_000), cluster.describe()).toBe(true);
  const view = e.logView;
  // E goes down holding the body; P and B go on without it in a view B leads.
  cluster.crash(eIndex);
  phase = 'depose';
  expect(cluster.runUntil(() => b.status === 'normal' && b.view > view && b.isPrimary(), 10_000), cluster.describe()).toBe(true);
  phase = 'run';
  const ran = () => b.checkpointOp >= 24 && p.checkpointOp >= 24 && b.op >= runUp && b.commitMin >= b.op && p.commitMin >= b.op;
  expect(cluster.runUntil(ran, 20_000), cluster.describe()).toBe(true);
  holdClients = true;
  phase = 'rejoin';
  cluster.restart(eIndex);
  const restarted = cluster.replica(eIndex);
  expect(cluster.runUntil(() => restarted.status === 'normal' && restarted.view === b.view, 5_000), cluster.describe() + '\n' + cluster.recentLog.join('\n')).toBe(true);
  return { cluster, e: restarted, b, p, view, body };
}

/**
 * The fix's effect in A6 and A9: E kept its log view and the committed body the StartView could
 * not vouch for (not applied yet); healed, it applies past it and adopts the view's log view.
 */
function keptBodyThenConverged(run: ReturnType<typeof unvouchedStartView>): void {
  const { cluster, e, b, view, body } = run;
  expect(e.logView).toBe(view);
  expect(e.commitMin).toBe(body - 1);
  expect(e.journal.get(body)?.frame).toBeInstanceOf(Uint8Array);
  expect(e.journal.get(body)?.checksum).toBe(cluster.checker.canonicalChecksum(body));
  cluster.network.filter = null;
  cluster.converge();
  expect(e.logView).toBe(b.logView);
}

describe('A6: a lagging replica keeps the committed prepares a StartView cannot vouch for', () => {
  it('a replica more than a WAL behind the view keeps its committed body and catches up past it', () => {
    const unvouched = unvouchedStartView(28);
    const { e, b } = unvouched;
    // E cannot hold the view's log (its journal starts at checkpoint 12, the view's head is a WAL
    // past it): it follows as a lagging replica, keeping its log view, and keeps the body that the
    // StartView (whose suffix starts at 24) cannot vouch for, committed but not applied here.
    expect(e.journal.floor).toBe(12);
    expect(e.journal.hasRoom(b.op)).toBe(false);
    keptBodyThenConverged(unvouched);
  });
});

describe('A9: a replica holding committed bodies a StartView cannot vouch for follows without adopting its log view', () => {
  it('it keeps its body and its log view until committed repair has applied past it', () => {
    const unvouched = unvouchedStartView(25);
    const { e, b } = unvouched;
    // E's journal could hold the view's log: only the unvouched body makes it lag.
    expect(e.journal.hasRoom(b.op)).toBe(true);
    expect(b.journal.floor).toBe(24);
    expect(e.view).toBe(b.view);
    keptBodyThenConverged(unvouched);
  });
});

describe('A11: a lagging replica parks none of the new log\'s headers', () => {
  it('its journal stays canonical for the log view it keeps: no header of the newer log view is parked', () => {
    const unvouched = unvouchedStartView(25);
    const { e, b } = unvouched;
    expect(e.logView).toBeLessThan(b.logView);
    // The StartView's suffix names ops of B's log view (at and above 24); a lagging replica that
    // parked them would claim them for the log view it kept in its next DoViewChange.
    const newer = e.journal.ops().filter((op) => e.journal.get(op)!.header.view > e.logView);
    expect(newer).toEqual([]);
    keptBodyThenConverged(unvouched);
  });
});

describe('A8: a replica adopting a new log discards only the entries it cannot vouch for', () => {
  it('verified committed bodies above an unverifiable parked header stay', () => {
    const cluster = sim({ clientCount: 1, requestsPerClient: 60 });
    formed(cluster);
    const primary = cluster.replica(0).primaryIndex();
    const rIndex = (primary + 2) % 3;
    const b = cluster.replica((primary + 1) % 3);
    const p = cluster.replica(primary);
    const bodies = (command: number) => command === Command.prepare || command === Command.repairPrepare;
    const transfer = (command: number) =>
      command === Command.rangeEvicted || command === Command.stateTransferTarget || command === Command.stateChunk;
    let phase: 'feed' | 'park' | 'gap' | 'depose' = 'feed';
    let holdClients = false;
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) {
        // P prepares up to 26 in the gap phase, and not one op more, whatever the timing.
        return holdClients || (phase === 'gap' && p.op >= 26) ? 'drop' : 'deliver';
      }
      const header = peek(frame);
      if (header === null || phase === 'feed') return 'deliver';
      if (to === rIndex) {
        // R never gets a body below 25 nor a checkpoint: its parked headers stay header-only and
        // the ops between them and 25 stay absent.
        if (bodies(header.command) && header.op <= 24) return 'drop';
        if (transfer(header.command)) return 'drop';
        // While the gap opens, no fresh StartView of the same log view parks its headers.
        if (phase === 'gap' && header.command === Command.startView) return 'drop';
      }
      // B stops hearing P lead (no prepares, no commits) and elects itself with P's vote.
      const leads = header.command === Command.prepare || header.command === Command.commit;
      if (phase === 'depose' && from === p.config.replica && to === b.config.replica && leads) return 'drop';
      return 'deliver';
    };
    // R goes down once it checkpointed op 12 (its journal then holds ops up to 27).
    let r = cluster.replica(rIndex);
    expect(cluster.runUntil(() => r.checkpointOp === 12 && r.commitMin === r.op, 10_000), cluster.describe()).toBe(true);
    const rHead = r.op;
    cluster.crash(rIndex);
    expect(cluster.runUntil(() => p.op >= rHead + 3 && p.commitMin === p.op, 10_000), cluster.describe()).toBe(true);
    holdClients = true;
    cluster.runUntil(() => false, 20);
    const parked = p.op;
    expect(parked).toBeLessThan(23);
    // R restarts into the same view: the StartView that answers its probe parks the headers of
    // the ops it lacks, (rHead, parked], whose bodies never arrive.
    phase = 'park';
    cluster.restart(rIndex);
    r = cluster.replica(rIndex);
    expect(cluster.runUntil(() => r.status === 'normal' && r.journal.get(parked) !== undefined, 5_000), cluster.describe()).toBe(true);
    expect(r.commitMin).toBe(rHead);
    for (let op = rHead + 1; op <= parked; op++) expect(r.journal.get(op)?.frame).toBeNull();
    // P prepares up to 26 and checkpoints 24; R takes only the prepares of 25 and 26.
    phase = 'gap';
    holdClients = false;
    const fed = () => r.journal.get(26)?.durable === true && p.checkpointOp >= 24 && b.checkpointOp >= 24 && b.commitMin >= 26;
    expect(cluster.runUntil(fed, 20_000), cluster.describe()).toBe(true);
    holdClients = true;
    // R: bodies up to its commit point, parked headers above it, nothing up to 24, and the
    // verified bodies of 25-26 (committed by P and B, whose journals now start at checkpoint 24).
    expect(p.op).toBe(26);
    expect(r.commitMin).toBe(rHead);
    expect(p.journal.floor).toBe(24);
    expect(b.journal.floor).toBe(24);
    for (let op = parked + 1; op <= 24; op++) expect(r.journal.get(op)).toBeUndefined();
    for (const op of [25, 26]) expect(r.journal.get(op)?.checksum).toBe(cluster.checker.canonicalChecksum(op));
    // B leads the next view. Its StartView (suffix from 24) cannot vouch for R's parked headers
    // below R's gap: they go, R adopts the log view (header-only entries hold no body, so it need
    // not lag), and the verified bodies above them stay.
    phase = 'depose';
    const view = p.view;
    expect(cluster.runUntil(() => r.view > view && r.status === 'normal', 10_000), cluster.describe()).toBe(true);
    expect(b.isPrimary()).toBe(true);
    expect(r.view).toBe(b.view);
    expect(r.logView).toBe(b.view);
    expect(r.journal.get(rHead + 1)).toBeUndefined();
    for (const op of [25, 26]) {
      expect(r.journal.get(op)?.frame).toBeInstanceOf(Uint8Array);
      expect(r.journal.get(op)?.checksum).toBe(cluster.checker.canonicalChecksum(op));
    }
    cluster.network.filter = null;
    cluster.converge();
    expect(r.commitMin).toBeGreaterThanOrEqual(26);
  });
});

describe('A14: a repair of the checkpoint op a server holds only as state is answered with an eviction', () => {
  it('a follower one op below the checkpoint a peer installed pulls the checkpoint and catches up', () => {
    // Four replicas: two (the primary and B) commit on their own while P and F are down.
    const cluster = sim({ replicaCount: 4, clientCount: 1, requestsPerClient: 60 });
    formed(cluster);
    const primary = cluster.replica(0).primaryIndex();
    const pIndex = (primary + 1) % 4;
    const fIndex = (primary + 2) % 4;
    const lead = cluster.replica(primary);
    const b = cluster.replica((primary + 3) % 4);
    expect(lead.config.checkpointInterval).toBe(12);
    expect(lead.config.quorumReplication).toBe(2);
    // C: the checkpoint P installs by state transfer; F's last body lies just below it.
    const checkpoint = 24;
    let phase: 'feed' | 'install' | 'repair' = 'feed';
    let holdClients = false;
    const evictions: number[] = [];
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) return holdClients ? 'drop' : 'deliver';
      const header = peek(frame);
      if (header === null) return 'deliver';
      const body = header.command === Command.prepare || header.command === Command.repairPrepare;
      if (phase === 'feed' && to === fIndex && body && header.op >= checkpoint) return 'drop';
      if (phase === 'repair') {
        if (from === pIndex && to === fIndex && header.command === Command.rangeEvicted) evictions.push(header.op);
        // F can reach only P for repair: P is the one peer it may get op C from.
        if (from === fIndex && to !== pIndex && header.command === Command.requestPrepares) return 'drop';
      }
      return 'deliver';
    };
    // P goes down at once; F goes down once it journaled every body below C.
    cluster.crash(pIndex);
    let f = cluster.replica(fIndex);
    expect(cluster.runUntil(() => f.journal.prepare(checkpoint - 1)?.durable === true, 10_000), cluster.describe()).toBe(true);
    cluster.crash(fIndex);
    // The primary and B commit past C and checkpoint it (their journals keep its body).
    const ran = () => lead.checkpointOp === checkpoint && b.checkpointOp === checkpoint && lead.op >= checkpoint + 2 && b.commitMin >= lead.op;
    expect(cluster.runUntil(ran, 20_000), cluster.describe()).toBe(true);
    holdClients = true;
    cluster.runUntil(() => false, 20);
    const head = lead.op;
    expect(lead.commitMin).toBe(head);
    expect(lead.journal.prepare(checkpoint)?.durable).toBe(true);
    // P restarts more than a WAL behind: it installs checkpoint C by state transfer, so it holds
    // op C only as state (an installed checkpoint keeps no body for its own op).
    phase = 'install';
    cluster.restart(pIndex);
    const p = cluster.replica(pIndex);
    const installed = () => p.status === 'normal' && p.checkpointOp === checkpoint && p.commitMin === head;
    expect(cluster.runUntil(installed, 10_000), cluster.describe()).toBe(true);
    expect(p.counters.stateTransfersStarted).toBeGreaterThan(0);
    expect(p.journal.floor).toBe(checkpoint);
    expect(p.journal.prepare(checkpoint)).toBeUndefined();
    // F restarts holding bodies up to C - 1 and must get op C from P: P answers with an eviction
    // naming C + 1, and F pulls the checkpoint instead of asking for op C forever.
    phase = 'repair';
    cluster.restart(fIndex);
    f = cluster.replica(fIndex);
    expect(cluster.runUntil(() => f.status === 'normal', 5_000), cluster.describe()).toBe(true);
    expect(f.commitMin).toBeLessThan(checkpoint);
    expect(cluster.runUntil(() => f.commitMin >= head, 10_000), cluster.describe()).toBe(true);
    expect(evictions).toContain(checkpoint + 1);
    expect(f.counters.rangeEvicted).toBeGreaterThan(0);
    expect(f.counters.stateTransfersStarted).toBeGreaterThan(0);
    expect(f.checkpointOp).toBeGreaterThanOrEqual(checkpoint);
    cluster.network.filter = null;
    holdClients = false;
    cluster.converge();
    expect(cluster.checker.canonicalChecksum(checkpoint)).toBeDefined();
  });
});

describe('A15: a primary-elect repairs a committed op vouched only by its successor from any peer that journaled it', () => {
  it('the op\'s one live holder never applied it: the primary-elect fetches it by canonical repair and starts its view', () => {
    // Four replicas, as in seed 4201942244488. X leads, applies every op and goes down; E and F
    // follow X's newer log view without op 21; H journaled op 21 but never applied it.
    const cluster = sim({ replicaCount: 4, clientCount: 1, requestsPerClient: 60 });
    formed(cluster);
    const xIndex = cluster.replica(0).primaryIndex();
    const eIndex = (xIndex + 1) % 4;
    const fIndex = (xIndex + 2) % 4;
    const hIndex = (xIndex + 3) % 4;
    const x = cluster.replica(xIndex);
    const e = cluster.replica(eIndex);
    const f = cluster.replica(fIndex);
    let h = cluster.replica(hIndex);
    expect(x.config.checkpointInterval).toBe(12);
    expect(x.config.quorumReplication).toBe(2);
    // The op above E's commit point; X's next checkpoint (24) lies above it.
    const missing = 21;
    const view = x.view;
    // X leads again four views on: its StartView's suffix then starts at its checkpoint, 24.
    const logView = view + 4;
    let phase: 'feed' | 'relead' | 'elect' = 'feed';
    let holdClients = false;
    // E's repair requests in the views after X's, and the ops H served it.
    type Request = { view: number; fromOp: number; toOp: number; committedOnly: number };
    const requests: Request[] = [];
    const served: number[] = [];
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) return holdClients ? 'drop' : 'deliver';
      const header = peek(frame);
      if (header === null) return 'deliver';
      const fields = (decodeFrame(kernels, frame) as { header: Request }).header;
      const body = header.command === Command.prepare || header.command === Command.repairPrepare;
      if (phase !== 'elect') {
        // H never gets op 20 (so it applies nothing past 19), E and F never get op 21, and nobody
        // repairs: X, once its journal starts at 24, would send E and F to a state transfer.
        if (to === hIndex && body && header.op === missing - 1) return 'drop';
        if ((to === eIndex || to === fIndex) && body && header.op === missing) return 'drop';
        if (header.command === Command.requestPrepares && from !== xIndex) return 'drop';
      }
      if (phase === 'relead') {
        // E and F stop hearing X lead; only the view X leads next merges.
        const leads = header.command === Command.prepare || header.command === Command.commit;
        if (from === xIndex && leads && fields.view === view) return 'drop';
        if (header.command === Command.doViewChange && fields.view !== logView) return 'drop';
      }
      if (phase === 'elect') {
        // H never leads: as primary-elect it would take op 20 from an applied history and apply
        // its own op 21, fix or not (in the seed its journal could not hold the merged log).
        if (header.command === Command.doViewChange && to === hIndex) return 'drop';
        if (header.command === Command.requestPrepares && from === eIndex && fields.view > logView) {
          const { fromOp, toOp, committedOnly } = fields;
          requests.push({ view: fields.view, fromOp, toOp, committedOnly });
        }
        if (header.command === Command.repairPrepare && from === hIndex && to === eIndex) served.push(header.op);
      }
      return 'deliver';
    };
    // X prepares up to 25 and checkpoints 24. Op 20 commits with E and F, op 21 with H alone.
    expect(cluster.runUntil(() => x.op >= 25, 20_000), cluster.describe()).toBe(true);
    holdClients = true;
    const head = x.op;
    const journaled = (r: typeof x) => r.journal.get(head)?.durable === true;
    const settled = () => x.commitMin === head && x.checkpointOp === 24 && [e, f, h].every(journaled);
    expect(cluster.runUntil(settled, 5_000), cluster.describe()).toBe(true);
    expect(h.commitMin).toBe(missing - 2);
    expect(h.journal.get(missing)?.durable).toBe(true);
    // H goes down; X leads its next view with E and F. X's DoViewChange and StartView start at
    // its checkpoint, 24, and E's and F's have a blank at 21: E and F adopt the new log view
    // without any header for op 21 (they verify 22 and 23 by the parents above them).
    cluster.crash(hIndex);
    phase = 'relead';
    const relead = () => [x, e, f].every((r) => r.status === 'normal' && r.view === logView);
    expect(cluster.runUntil(relead, 10_000), cluster.describe()).toBe(true);
    expect(x.journal.floor).toBe(24);
    const checksum = cluster.checker.canonicalChecksum(missing);
    expect(checksum).toBeDefined();
    for (const r of [e, f]) {
      expect(r.logView).toBe(logView);
      expect(r.commitMin).toBe(missing - 1);
      expect(r.journal.get(missing)).toBeUndefined();
      // Op 21 is vouched for only by its successor's parent.
      expect(r.journal.get(missing + 1)?.header.parent).toBe(checksum);
    }
    // X goes down for good (nobody alive applied op 21) and H restarts in its older log view.
    cluster.crash(xIndex);
    phase = 'elect';
    cluster.restart(hIndex);
    h = cluster.replica(hIndex);
    // E leads the next view. Its merged log (E's and F's log view) has no header at op 21 and its
    // journal no entry: E must fetch op 21 from H, which journaled it and applied nothing past 19
    // (H's log view is older, so its header of op 21 is not in the merged log).
    expect(cluster.runUntil(() => requests.length > 0, 2_000), cluster.describe()).toBe(true);
    expect(e.status).toBe('view_change');
    expect(e.primaryIndex()).toBe(eIndex);
    expect(e.journal.get(missing)).toBeUndefined();
    expect(h.logView).toBe(view);
    expect(h.commitMin).toBe(missing - 2);
    // Reverted, E asks only for applied ops, nobody alive applied op 21, and no view ever starts.
    const started = () => [e, f, h].some((r) => r.status === 'normal' && r.view > logView);
    expect(cluster.runUntil(started, 3_000), cluster.describe()).toBe(true);
    expect(e.isPrimary()).toBe(true);
    expect(e.view).toBe(logView + 1);
    expect(requests[0]).toMatchObject({ view: logView + 1, fromOp: missing, toOp: missing, committedOnly: 0 });
    expect(served).toContain(missing);
    expect(e.commitMin).toBe(head);
    cluster.network.filter = null;
    holdClients = false;
    cluster.converge();
    expect(cluster.checker.canonicalChecksum(missing)).toBe(checksum);
  });
});

describe('F6: a primary that does not know its checkpoint anchor forfeits the view', () => {
  it('a replica rebooted at a checkpoint it installed without its anchor lets a replica that knows the anchor lead', () => {
    // Four replicas, as in seed 730075348166. L leads and B follows it past the checkpoint; Q and
    // R install that checkpoint by state transfer, and R loses the superblock write that pairs it
    // with its anchor (the checksum of the checkpoint op's prepare, the parent of the next op).
    const cluster = sim({ replicaCount: 4, clientCount: 1, requestsPerClient: 60 });
    formed(cluster);
    const lIndex = cluster.replica(0).primaryIndex();
    // R leads the view after L's; B the one after R's.
    const rIndex = (lIndex + 1) % 4;
    const bIndex = (lIndex + 2) % 4;
    const qIndex = (lIndex + 3) % 4;
    const l = cluster.replica(lIndex);
    const b = cluster.replica(bIndex);
    expect(l.config.checkpointInterval).toBe(12);
    expect(l.config.quorumReplication).toBe(2);
    const checkpoint = 24;
    let phase: 'feed' | 'lead' = 'feed';
    let holdClients = false;
    const evictions: number[] = [];
    cluster.network.filter = ({ from, to, frame }) => {
      if (from >= CLIENT_NODE_BASE || to >= CLIENT_NODE_BASE) {
        // L prepares up to the checkpoint op and not one op more, whatever the timing.
        return holdClients || (phase === 'feed' && l.op >= checkpoint) ? 'drop' : 'deliver';
      }
      const header = peek(frame);
      if (header === null) return 'deliver';
      if (phase === 'lead') {
        if (from === qIndex && to === rIndex && header.command === Command.rangeEvicted) evictions.push(header.op);
        // R can reach only Q for repair: B (as L) journaled the checkpoint op, Q holds it only as
        // state, as every peer did in the seed.
        if (from === rIndex && to !== qIndex && header.command === Command.requestPrepares) return 'drop';
      }
      return 'deliver';
    };
    // R and Q go down at once; L and B commit up to the checkpoint op and checkpoint it.
    cluster.crash(rIndex);
    cluster.crash(qIndex);
    const ran = () => [l, b].every((replica) => replica.checkpointOp === checkpoint && replica.commitMin === checkpoint);
    expect(cluster.runUntil(ran, 20_000), cluster.describe()).toBe(true);
    cluster.runUntil(() => false, 20);
    expect(l.op).toBe(checkpoint);
    expect(b.journal.prepare(checkpoint)?.durable).toBe(true);
    // Q restarts more than a WAL behind and installs the checkpoint: it holds op 24 only as state.
    cluster.restart(qIndex);
    const q = cluster.replica(qIndex);
    const qInstalled = () => q.status === 'normal' && q.checkpointOp === checkpoint && q.commitMin === checkpoint;
    expect(cluster.runUntil(qInstalled, 10_000), cluster.describe()).toBe(true);
    expect(q.counters.stateTransfersInstalled).toBeGreaterThan(0);
    expect(q.journal.get(checkpoint)).toBeUndefined();
    // R restarts and installs it too while every superblock write of its fails; it goes down once
    // installed: snapshot.bin holds checkpoint 24, the superblock still names checkpoint 0.
    cluster.restart(rIndex);
    cluster.replicas[rIndex]!.storage.failKinds.add('superblock_write');
    let r = cluster.replica(rIndex);
    const rInstalled = () => r.checkpointOp === checkpoint && r.commitMin === checkpoint;
    expect(cluster.runUntil(rInstalled, 10_000), cluster.describe()).toBe(true);
    expect(r.counters.stateTransfersInstalled).toBe(1);
    expect(cluster.replicas[rIndex]!.storage.pendingKinds).toContain('superblock_write');
    cluster.crash(rIndex);
    cluster.restart(rIndex);
    r = cluster.replica(rIndex);
    // Rebooted from the snapshot alone: at the checkpoint, no anchor, no journal entry at 24.
    expect(r.checkpointOp).toBe(checkpoint);
    expect(r.commitMin).toBe(checkpoint);
    expect(r.commitChecksum).toBeNull();
    expect(r.journal.get(checkpoint)).toBeUndefined();
    expect(cluster.runUntil(() => r.status === 'normal', 5_000), cluster.describe()).toBe(true);
    // L goes down: R leads the next view at head = commit = checkpoint 24, admitting nothing
    // (head unknown) until it learns its anchor, which Q cannot give it.
    holdClients = true;
    phase = 'lead';
    const view = l.view;
    cluster.crash(lIndex);
    const leads = () => r.status === 'normal' && r.view === view + 1 && r.isPrimary();
    expect(cluster.runUntil(leads, 5_000), cluster.describe()).toBe(true);
    expect(r.op).toBe(checkpoint);
    expect(r.canAcceptRequests()).toBe(false);
    // The client's next request commits: reverted, R leads forever and it is never answered.
    holdClients = false;
    const committed = () => cluster.checker.ackedOpMax > checkpoint;
    expect(cluster.runUntil(committed, 3_000), cluster.describe()).toBe(true);
    expect(evictions).toContain(checkpoint + 1);
    expect(r.counters.viewChangesByReason['forfeit_anchor_unknown'] ?? 0).toBeGreaterThan(0);
    expect(r.view).toBeGreaterThan(view + 1);
    expect(b.isPrimary()).toBe(true);
    cluster.network.filter = null;
    cluster.converge();
    expect(cluster.checker.canonicalChecksum(checkpoint + 1)).toBeDefined();
  });
});

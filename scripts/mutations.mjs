#!/usr/bin/env node
/**
 * The mutation check: every fix of the nine defects that the review of the reference's
 * state-transfer PR named (seed-pr-3765-review.txt, docs/testing.md "The seed review, pinned"), and of the
 * outside audit's defects A-E (test/sim/scenarios-audit.test.ts), is reverted in turn, and the
 * test that pins it must then fail. A pin that still passes with its fix reverted pins nothing.
 *
 *   npm run test:mutations                 every mutation
 *   npm run test:mutations -- --only 4,5a  defects 4 and mutation 5a
 *   npm run test:mutations -- --markdown   also print the table as Markdown
 *   npm run test:mutations -- --only A,B,C,D,E --simulate 5000 [--base B]
 *       instead of the pins, build each mutated tree and run `vrmeta simulate --seeds 5000`
 *       on it (and on the unmutated tree first): does the simulator find the reverted defect
 *       on its own, and in how many seeds?
 *
 * Each mutation is a list of (file, exact search string, replacement) edits, applied to a copy of
 * the tree in a temporary directory (src/ and test/ copied, node_modules and build/ linked), so
 * the working tree is never mutated, not even by a crash. A search string must occur exactly once
 * in the current source: when the code moves under a mutation, the check says "mutation site not
 * found" and fails rather than silently testing nothing. Before any mutation, the pins must pass
 * on the unmutated copy. A mutation counts as killed only when a pinned test ran and failed; a
 * suite that does not even load is an error, not a kill.
 *
 * Exit status: 0 only if every mutation was killed. Not part of `npm test` (about a minute).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const TRANSFER = 'test/sim/scenarios-transfer.test.ts';
const BLOCK = 'state transfer: each defect of the seed review is impossible';
const RUN_TIMEOUT_MS = 300_000;

/** A test of the seed-review block, by its title. */
const pin = (title) => ({ file: TRANSFER, name: `${BLOCK} ${title}` });

const PIN = {
  stages: pin('1. only legal stage transitions exist, and clearing the stage drops the session'),
  lateChunks: pin('1. an abandoned transfer ignores late chunks and never installs, also once a new session is fetching'),
  registry: pin('2. one stats registry survives a restore: survivors keep their counters, the dead are pruned, a reused id starts at zero'),
  offerCache: pin('3. the offer is built when the checkpoint is written and served from it, never read back, to repeated requests'),
  corruptAtRest: {
    file: TRANSFER,
    name: "state transfer scenarios corruption of the serving replica's snapshot at rest is refused there, never re-sealed on the receiver",
  },
  pastEnd: pin('4. a chunk request at or past the artifact end is refused, never answered with an empty chunk'),
  emptyChunk: pin('4. a zero-byte chunk is not a frame: the codec rejects it before any liveness counter'),
  firstWins: pin('4. offers are first-wins per (requester, nonce): a retry after a new checkpoint gets the same manifest'),
  walks: pin('5. StartView, Commit and DoViewChange mid-fetch walk no commits; the install then restores the state machine'),
  startViews: pin('6. stale or wrong-primary StartViews neither mint a nonce nor reset the retry budget'),
  headerOnly: pin('7. header-only transfer frames are size-checked'),
  capacity: pin('8. the install and the boot from an installed checkpoint both build the client table at the configured capacity'),
  behind: pin('9. a snapshot behind the local applied frontier is never restored: local state kept'),
};

const AUDIT = 'test/sim/scenarios-audit.test.ts';
/** A test of the audit's scenarios (defects A-E), by its describe block and title. */
const audit = (block, title) => ({ file: AUDIT, name: `${block} ${title}`, title });
/** A regression seed of test/sim/seeds.test.ts; `faults`: '' (targeted off), 'targeted faults' or 'all faults'. */
const seed = (number, faults, label) => {
  const test = faults === '' ? `seed ${number}` : `seed ${number} (${faults})`;
  return { file: 'test/sim/seeds.test.ts', name: `regression seeds ${test}: ${label}`, title: `regression ${test}` };
};
const PINS = 'test/sim/scenarios-pins.test.ts';
/** A deterministic schedule of test/sim/scenarios-pins.test.ts, by its describe block and title. */
const scheduled = (block, title) => ({ file: PINS, name: `${block} ${title}`, title });
/**
 * The regression seed that once pinned A6, A9 and A10 (with any of them reverted it lost a committed
 * op or wedged). The schedules moved since and it no longer fails with them reverted; it stays
 * listed as a second pin, and the deterministic schedules above each entry are what kill them.
 */
const SEED_UNVOUCHED = seed(3551023059979, 'all faults', 'a replica adopting a newer log view dropped a committed body the StartView could not vouch for; a lost disk then lost the op');
const AUDIT_PIN = {
  a: audit('audit defect A: an install during a view change never drops an op this replica reported present', 'the only holder of an acknowledged op transfers a checkpoint mid view change and the op survives'),
  aServe: audit('audit defect A: an install during a view change never drops an op this replica reported present', 'a transferring replica serves the prepare it reported present, so the view starts before its install'),
  aFence: audit('audit defect A, the other half: what an install keeps is applied only as far as proven committed', "a stale prepare kept above the installed checkpoint is never applied on a newer view's commit number"),
  b: audit('audit defect B: an install supersedes a checkpoint whose superblock pairing is failing', 'the commit walk resumes after an install that lands while the own checkpoint retries its superblock write'),
  c: audit('audit defect C: adopting a view mid-transfer resets the heartbeat watermark', 'a replica that adopts a new view while fetching follows its primary without deposing it'),
  d: audit('audit defect D: a wiped replica that caught up counts again when the primary dies', 'the primary dies while a wiped replica transfers: the survivors elect a primary without it (payload on every replica, as found)'),
  eVouch: audit('audit defect E: a corrupt snapshot at rest on the primary does not keep a wiped replica down', "the primary vouches for the checkpoint id it cannot serve, so the other backup's copy is installed"),
  eRepair: audit('audit defect E: a corrupt snapshot at rest on the primary does not keep a wiped replica down', 'the replica whose snapshot at rest is damaged fetches it back from a peer and serves again'),
  divergence: audit('audit, also: fail-stop on own divergence, no ignored storage failure', 'a committed prepare that does not chain onto the applied history stops the replica with DivergenceFailure'),
  discard: audit('audit, also: fail-stop on own divergence, no ignored storage failure', 'a failed transfer_discard is logged, not ignored'),
};

const REPLICA = 'src/vsr/replica.ts';
const SERVER = 'src/vsr/transfer-server.ts';
const STAGES = 'src/vsr/state-transfer.ts';
const VALIDATE = 'src/vsr/header-validate.ts';
const METADATA = 'src/metadata/state-machine.ts';
const REGISTRY = 'src/metadata/stats-registry.ts';
const SNAPSHOT_FILE = 'src/storage/snapshot-file.ts';

/** One mutation per fix (or half of a fix) in the README's seed-review table. */
const MUTATIONS = [
  {
    id: '1a',
    defect: 1,
    reverts: 'clearing the stage drops the session',
    edits: [{ file: STAGES, search: "    this.move('idle');\n    this.active = null;\n", replace: "    this.move('idle');\n" }],
    pins: [PIN.stages],
  },
  {
    id: '1b',
    defect: 1,
    reverts: 'stage transitions are a checked table',
    edits: [{ file: STAGES, search: '      LEGAL[this.current].includes(next),\n', replace: '      true,\n' }],
    pins: [PIN.stages],
  },
  {
    id: '1c',
    defect: 1,
    reverts: 'a chunk finds its session by nonce and stage',
    edits: [{ file: REPLICA, search: "const session = repair ?? this.stateTransfer.session(header.nonce, 'fetching');", replace: 'const session = repair ?? this.stateTransfer.sessionAny;' }],
    pins: [PIN.lateChunks],
  },
  {
    id: '2a',
    defect: 2,
    reverts: 'restore keeps the one registry (reference: a fresh registry per restore)',
    edits: [{ file: METADATA, search: '    this.stats.retain(snapshot.streams);\n', replace: '    (this as { stats: StatsRegistry }).stats = new StatsRegistry();\n' }],
    pins: [PIN.registry],
  },
  {
    id: '2b',
    defect: 2,
    reverts: 'restore prunes the registry to the snapshot',
    edits: [{ file: METADATA, search: '    this.stats.retain(snapshot.streams);\n', replace: '' }],
    pins: [PIN.registry],
  },
  {
    id: '2c',
    defect: 2,
    reverts: 'pruning keeps the survivors\' partition entries',
    edits: [
      {
        file: REGISTRY,
        search: '          if (partitionCreatedAtUs(topic, id) === createdAtUs) continue;\n',
        replace: '',
      },
    ],
    pins: [PIN.registry],
  },
  {
    id: '2d',
    defect: 2,
    reverts: 'pruning compares incarnations, not reused slab ids',
    edits: [
      {
        file: REGISTRY,
        search: '      if (stream === undefined || stream.createdAtUs !== streamEntry.ref.createdAtUs) {\n',
        replace: '      if (stream === undefined) {\n',
      },
    ],
    pins: [PIN.registry],
  },
  {
    id: '3a',
    defect: 3,
    reverts: 'the offer source is built once per checkpoint',
    edits: [{ file: SERVER, search: '    if (this.offerSource !== null && this.offerSource.op === host.checkpointOp) {\n', replace: '    if (false) {\n' }],
    pins: [PIN.offerCache],
  },
  {
    id: '3b',
    defect: 3,
    reverts: 'the served snapshot is verified at rest (reference: raw read, re-sealed downstream)',
    edits: [
      {
        file: SNAPSHOT_FILE,
        search: "      case 'checksum_mismatch':\n",
        replace: "      case 'checksum_mismatch':\n        return { ok: true, payload: split.payload.slice(), checksum: split.expected };\n",
      },
    ],
    pins: [PIN.corruptAtRest],
  },
  {
    id: '3c',
    defect: 3,
    reverts: 'each chunk read from the file is checked against the sum offered before it is sent',
    edits: [{ file: SERVER, search: '      if (actual !== expected) {\n', replace: '      if (false) {\n' }],
    pins: [
      {
        file: 'test/unit/transfer-server.test.ts',
        name: 'transfer server a chunk whose bytes at rest differ from the sum offered is never sent: the offers are withdrawn with a vouch and the file fetched back',
      },
    ],
  },
  {
    id: '3d',
    defect: 3,
    reverts: 'a primary lets its payload go only on a ping of its own checkpoint id (not of the op alone)',
    edits: [
      {
        file: SERVER,
        search: '      if (held === null || held.op !== op || held.checksum !== checksum) continue;\n',
        replace: '      if (held === null || held.op !== op) continue;\n',
      },
    ],
    pins: [
      {
        file: TRANSFER,
        name: "state transfer: serving chunks at the network's speed a primary lets its payload go only once a backup of its view pings the same checkpoint id",
      },
    ],
  },
  {
    id: '3e',
    defect: 3,
    reverts: 'a backup answers its primary\'s heartbeat with a ping naming its durable checkpoint',
    edits: [
      {
        file: REPLICA,
        search: '    this.sendCheckpointPing(header.replica);\n',
        replace: '',
      },
    ],
    pins: [
      {
        file: TRANSFER,
        name: "state transfer: serving chunks at the network's speed a primary lets its payload go only once a backup of its view pings the same checkpoint id",
      },
    ],
  },
  {
    id: '3f',
    defect: 3,
    reverts: 'a released payload\'s next chunks are read ahead of the receiver',
    edits: [{ file: SERVER, search: 'export const CHUNK_READ_AHEAD = 4;\n', replace: 'export const CHUNK_READ_AHEAD = 0;\n' }],
    pins: [
      {
        file: 'test/unit/transfer-server.test.ts',
        name: "transfer server a released payload's next CHUNK_READ_AHEAD chunks are read ahead of the receiver: its requests are served without waiting for a read, each chunk read once",
      },
    ],
  },
  {
    id: '3g',
    defect: 3,
    reverts: 'a backup pings a checkpoint once per heartbeat interval, not on every heartbeat',
    edits: [
      {
        file: REPLICA,
        search: '      this.ticks - last.tick < this.config.timeouts.commitMessage\n',
        replace: '      false\n',
      },
    ],
    pins: [
      {
        file: TRANSFER,
        name: "state transfer: serving chunks at the network's speed a backup pings a checkpoint once per heartbeat interval under a lone writer, and a new checkpoint at its next heartbeat",
      },
    ],
  },
  {
    id: '4a',
    defect: 4,
    reverts: 'a chunk request at or past the end is refused',
    edits: [{ file: SERVER, search: "    if (header.offset >= entry.len) return this.host.drop('chunk_past_end', header);\n", replace: '' }],
    pins: [PIN.pastEnd],
  },
  {
    id: '4b',
    defect: 4,
    reverts: 'a zero-byte chunk is not a valid frame',
    edits: [{ file: VALIDATE, search: '      if (bodySize === 0) return FrameRejection.chunkEmpty;\n', replace: '' }],
    pins: [PIN.emptyChunk],
  },
  {
    id: '4c',
    defect: 4,
    reverts: 'offers are first-wins per (requester, nonce)',
    edits: [{ file: SERVER, search: '    if (existing !== undefined && existing.nonce === header.nonce) {\n', replace: '    if (false) {\n' }],
    pins: [PIN.firstWins],
  },
  {
    id: '5a',
    defect: 5,
    reverts: 'every commit walk is gated while transferring',
    edits: [
      {
        file: REPLICA,
        search: '    // commit_min must not move under an install that is about to jump it (seed review, defect 5).\n    if (this.stateTransfer.transferring) return;\n',
        replace: '    // commit_min must not move under an install that is about to jump it (seed review, defect 5).\n',
      },
    ],
    pins: [PIN.walks],
  },
  {
    id: '5b',
    defect: 5,
    reverts: 'the install restores the state machine (reference: a silent table-only install)',
    edits: [{ file: REPLICA, search: '    this.stateMachine.restore({\n      users: snapshot.users,\n      streams: snapshot.streams,\n      revokedTokens: snapshot.revokedTokens,\n    });\n', replace: '' }],
    pins: [PIN.walks],
  },
  {
    id: '6',
    defect: 6,
    reverts: 'no StartView arms a transfer (reference: re-arm on any StartView while awaiting a target)',
    edits: [
      {
        file: REPLICA,
        search: '  private onStartView(header: StartViewHeader, body: Uint8Array): void {\n',
        replace:
          '  private onStartView(header: StartViewHeader, body: Uint8Array): void {\n' +
          "    if (this.stateTransfer.stage === 'awaiting_target') {\n" +
          '      this.stateTransfer.clear();\n' +
          '      this.armStateTransfer();\n' +
          '    }\n',
      },
    ],
    pins: [PIN.startViews],
  },
  {
    id: '7a',
    defect: 7,
    reverts: 'header-only frames require size == 256',
    edits: [{ file: VALIDATE, search: '  if (layout.bodySizeMax === 0 && bodySize !== 0) return FrameRejection.sizeNotHeaderOnly;\n', replace: '' }],
    pins: [PIN.headerOnly],
  },
  {
    id: '7b',
    defect: 7,
    reverts: 'a refusal target (available = 0) is header-only',
    edits: [
      {
        file: VALIDATE,
        search: '      if (header.available === 0) {\n        if (bodySize !== 0) return FrameRejection.sizeNotHeaderOnly;\n      } else if',
        replace: '      if (header.available === 0) {\n      } else if',
      },
    ],
    pins: [PIN.headerOnly],
  },
  {
    id: '8a',
    defect: 8,
    reverts: 'the install decodes the table at the configured capacity (reference: the default)',
    edits: [
      {
        file: REPLICA,
        search: '    this.clientTable = ClientTable.fromSnapshot(\n      snapshot.clientTable,\n      this.config.clientsTableMax,\n    );\n',
        replace: '    this.clientTable = ClientTable.fromSnapshot(\n      snapshot.clientTable,\n      8192,\n    );\n',
      },
    ],
    pins: [PIN.capacity],
  },
  {
    id: '8b',
    defect: 8,
    reverts: 'boot decodes the table at the configured capacity (reference: the default)',
    edits: [
      {
        file: REPLICA,
        search: '    this.clientTable = ClientTable.fromSnapshot(\n      snapshot.decoded.clientTable,\n      this.config.clientsTableMax,\n    );\n',
        replace: '    this.clientTable = ClientTable.fromSnapshot(\n      snapshot.decoded.clientTable,\n      8192,\n    );\n',
      },
    ],
    pins: [PIN.capacity],
  },
  {
    id: '9',
    defect: 9,
    reverts: 'a snapshot at or behind commit_min is refused',
    edits: [{ file: REPLICA, search: '    if (best.op <= this.commitMin) {\n', replace: '    if (false) {\n' }],
    pins: [PIN.behind],
  },
  // The outside audit's defects, pinned in test/sim/scenarios-audit.test.ts.
  {
    id: 'A1',
    defect: 'A',
    reverts: 'an install keeps the journal above the checkpoint (reference: truncate above the applied op in a view change)',
    edits: [
      {
        file: REPLICA,
        search: '    if (anchor !== null && atCheckpoint !== undefined && atCheckpoint.checksum !== anchor) {\n',
        replace:
          "    if (this.status === 'view_change' && this.journal.head > this.commitMin) this.truncateFrom(this.commitMin + 1);\n    if (anchor !== null && atCheckpoint !== undefined && atCheckpoint.checksum !== anchor) {\n",
      },
    ],
    pins: [AUDIT_PIN.a],
  },
  {
    id: 'A2',
    defect: 'A',
    reverts: 'a transferring replica serves the prepares it reported present',
    edits: [
      {
        file: REPLICA,
        search: "    if (this.status === 'recovering') return this.drop('status_recovering', header);\n    let from = header.fromOp;",
        replace: "    if (this.status === 'recovering' || this.stateTransfer.transferring) return this.drop('status_recovering', header);\n    let from = header.fromOp;",
      },
    ],
    pins: [AUDIT_PIN.aServe],
  },
  {
    id: 'A3',
    defect: 'A',
    reverts: 'the commit walk stops at commit_canonical (reference: at commit_max)',
    edits: [
      { file: REPLICA, search: '    while (this.commitMin < this.commitCanonical) {\n', replace: '    while (this.commitMin < this.commitMax) {\n' },
      {
        file: REPLICA,
        search:
          '    assert(\n' +
          '      this.commitMin <= this.commitCanonical && this.commitCanonical <= this.commitMax,\n' +
          "      'commit_min <= commit_canonical <= commit_max',\n" +
          '    );\n',
        replace: '',
      },
    ],
    pins: [AUDIT_PIN.aFence],
  },
  {
    id: 'A4',
    defect: 'A',
    reverts: "a primary counts acks from commit_canonical (a foreign commit_max skipped its own pipeline)",
    edits: [
      { file: REPLICA, search: '    let committed = this.commitCanonical;\n', replace: '    let committed = this.commitMax;\n' },
      { file: REPLICA, search: '    if (committed > this.commitCanonical) {\n      this.advanceCommitCanonical(committed);', replace: '    if (committed > this.commitMax) {\n      this.advanceCommitCanonical(committed);' },
    ],
    pins: [audit('found by the widened simulator', 'a primary whose commit_max rose from outside its log still commits its own pipeline')],
  },
  {
    id: 'A5',
    defect: 'A',
    reverts: 'a primary-elect persists the parked headers of the log view it adopts from the merge',
    edits: [{ file: REPLICA, search: '    this.noteViewHeaders(logViewChanged);\n    if (logViewChanged || this.viewHeaders.size > 0) this.persistView();\n', replace: '    if (logViewChanged) this.persistView();\n' }],
    pins: [
      scheduled('A5: a primary-elect persists the parked headers of the log it merged', 'a restart between the merge and the repair of a parked header still holds that header'),
      seed(1282654390171, '', 'a primary-elect adopted the merged log view without persisting its parked headers'),
      seed(4320883123812, 'all faults', 'a primary-elect adopted the merged log view without persisting its parked headers (found again after the schedules moved)'),
    ],
  },
  {
    id: 'A6',
    defect: 'A',
    reverts: 'a lagging replica keeps the committed prepares a StartView cannot vouch for',
    edits: [{ file: REPLICA, search: '    const keepUnverifiedThrough = lagging ? commit : -1;\n', replace: '    const keepUnverifiedThrough = -1;\n' }],
    pins: [
      scheduled('A6: a lagging replica keeps the committed prepares a StartView cannot vouch for', 'a replica more than a WAL behind the view keeps its committed body and catches up past it'),
      seed(2644958924859, 'targeted faults', 'a lagging replica adopting a StartView dropped committed prepares it could not verify; a lost disk then lost them'),
      SEED_UNVOUCHED,
    ],
  },
  {
    id: 'A8',
    defect: 'A',
    reverts: 'a replica adopting a new log discards only the entries it cannot vouch for, not the verified ones above them',
    edits: [{ file: REPLICA, search: '    if (this.journal.ops().every((op) => op < lowest || removed.has(op))) {\n', replace: '    if (true) {\n' }],
    pins: [
      scheduled('A8: a replica adopting a new log discards only the entries it cannot vouch for', 'verified committed bodies above an unverifiable parked header stay'),
      seed(1786574930811, 'targeted faults', 'adopting a newer log view truncated verified committed bodies above an unverifiable entry; a lost disk then lost them'),
    ],
  },
  {
    id: 'A7',
    defect: 'A',
    reverts: 'an empty data directory claims no knowledge until it learned whether the cluster had history',
    edits: [{ file: REPLICA, search: '    return this.nackUnknown || this.pristine;\n', replace: '    return this.nackUnknown;\n' }],
    pins: [audit('an empty data directory started without --rejoin', 'claims no knowledge in a view change until it learned whether the cluster had history')],
  },
  {
    id: 'A9',
    defect: 'A',
    reverts: 'a replica holding committed bodies a StartView cannot vouch for follows without adopting its log view',
    edits: [{ file: REPLICA, search: '    const lagging = !this.journal.hasRoom(header.op) || unvouched;\n', replace: '    const lagging = !this.journal.hasRoom(header.op) || (unvouched && false);\n' }],
    pins: [
      scheduled('A9: a replica holding committed bodies a StartView cannot vouch for follows without adopting its log view', 'it keeps its body and its log view until committed repair has applied past it'),
      SEED_UNVOUCHED,
    ],
  },
  {
    id: 'A10',
    defect: 'A',
    reverts: 'a primary-elect holding committed bodies the merged log cannot vouch for forfeits instead of dropping them',
    edits: [{ file: REPLICA, search: '    if (this.logView !== outcome.logView && unvouched()) {\n', replace: '    if (this.logView !== outcome.logView && unvouched() && false) {\n' }],
    pins: [
      scheduled('A10: a primary-elect holding committed bodies the merged log cannot vouch for forfeits', 'it keeps its body and lets a replica of the merged log view lead'),
      SEED_UNVOUCHED,
    ],
  },
  {
    id: 'A11',
    defect: 'A',
    reverts: 'a lagging replica parks none of the new log\'s headers (its journal stays canonical for the log view it keeps)',
    edits: [{ file: REPLICA, search: '    if (!parkCanonical) return keptLowest;\n', replace: '' }],
    pins: [
      seed(3161429547486, 'all faults', "a lagging replica parked a newer log view's headers and claimed them for the log view it kept"),
      scheduled("A11: a lagging replica parks none of the new log's headers", 'its journal stays canonical for the log view it keeps: no header of the newer log view is parked'),
    ],
  },
  {
    id: 'A13',
    defect: 'A',
    reverts: 'a lagging follower that applied the head of its view adopts the log view without a fresh StartView',
    edits: [{ file: REPLICA, search: '    this.maybeCaughtUp();\n    this.maybeAdoptLogView();\n', replace: '    this.maybeCaughtUp();\n' }],
    pins: [
      seed(619636282819, 'all faults', "a lagging follower that applied its view's head never claimed the log view; its primary then lost its disk and the survivors wedged"),
      seed(2451952207327, 'all faults, current rules', "a lagging follower that applied its view's head never claimed the log view (A13, found again after the schedules moved: its fix reverted, a replica stays behind its commit)"),
    ],
  },
  {
    id: 'A14',
    defect: 'A',
    reverts: 'a repair of the checkpoint op a server holds only as state is answered with an eviction',
    edits: [
      {
        file: REPLICA,
        search: '      floorServed || this.journal.floor === 0 ? this.journal.floor : this.journal.floor + 1;\n',
        replace: '      floorServed || true ? this.journal.floor : this.journal.floor + 1;\n',
      },
    ],
    pins: [
      scheduled('A14: a repair of the checkpoint op a server holds only as state is answered with an eviction', 'a follower one op below the checkpoint a peer installed pulls the checkpoint and catches up'),
      seed(2689289529624, 'all faults', 'a server answered a repair of its own checkpoint op, held only as state, with nothing: the lagging follower retried forever instead of pulling the checkpoint'),
    ],
  },
  {
    id: 'A15',
    defect: 'A',
    reverts: 'a primary-elect repairs the committed bodies it lacks against the merged log, not only from applied histories',
    edits: [
      {
        file: REPLICA,
        search: '    const committedWalk = !primaryElect || this.journal.get(this.commitMin + 1) !== undefined;\n',
        replace: '    const committedWalk = true;\n',
      },
    ],
    pins: [
      scheduled('A15: a primary-elect repairs a committed op vouched only by its successor from any peer that journaled it', "the op's one live holder never applied it: the primary-elect fetches it by canonical repair and starts its view"),
      seed(4201942244488, 'all faults', 'a primary-elect missing a committed op that no live replica had applied asked only for applied ops and never started its view'),
    ],
  },
  {
    id: 'A12',
    defect: 'A',
    reverts: 'a merge extends a canonical log short of a known commit with the ops another sender applied',
    edits: [
      {
        file: 'src/vsr/view-change.ts',
        search: '    head < commitMax\n      ? appliedExtension(records, canonical, head, commitMax)\n',
        replace: '    false\n      ? appliedExtension(records, canonical, head, commitMax)\n',
      },
    ],
    pins: [
      { file: 'test/sim/scenarios-core.test.ts', name: 'view change a canonical log short of a known commit is extended by the ops another sender applied', title: 'a canonical log short of a known commit is extended by the ops another sender applied' },
      seed(1086421619296, 'all faults', 'a merge waited forever for a committed op that only a caught-up lost disk of an older log view had applied'),
    ],
  },
  {
    id: 'R1',
    defect: 'also',
    reverts: 'replicas that hear every peer recovering elect at once (reference: after their probes)',
    edits: [{ file: REPLICA, search: '      if (this.recoveringPeers.size === this.config.replicaCount - 1) {\n', replace: '      if (false) {\n' }],
    pins: [{ file: 'test/sim/scenarios-core.test.ts', name: 'whole-cluster restart replicas that hear every peer recovering elect at once, not after their probes', title: 'replicas that hear every peer recovering elect at once' }],
  },
  {
    id: 'R2',
    defect: 'also',
    reverts: 'a recovering view-change quorum elects after one probe round',
    edits: [{ file: REPLICA, search: '    if (this.recoveringPeers.size + 1 >= this.config.quorumViewChange && this.view > 0) {\n', replace: '    if (false) {\n' }],
    pins: [{ file: 'test/sim/scenarios-core.test.ts', name: 'whole-cluster restart a recovering view-change quorum elects after one unanswered probe round', title: 'a recovering view-change quorum elects after one unanswered probe round' }],
  },
  {
    id: 'R3',
    defect: 'also',
    reverts: 'a primary whose pipeline drains tells the backups the commit at once',
    edits: [{ file: REPLICA, search: '      if (this.pipeline.length === 0 && this.primaryActive()) {\n', replace: '      if (false) {\n' }],
    pins: [
      {
        file: 'test/sim/scenarios-core.test.ts',
        name: 'backups apply a commit without waiting for the next message every write is applied on every backup one network hop after the primary applied it',
        title: 'every write is applied on every backup one network hop after the primary applied it',
      },
    ],
  },
  {
    id: 'R4',
    defect: 'also',
    reverts: 'ready for reads only with every known commit applied (reference: within 64 ops)',
    edits: [{ file: REPLICA, search: '      this.commitMin >= this.commitMax\n', replace: '      this.commitMax - this.commitMin <= 64\n' }],
    pins: [{ file: 'test/sim/scenarios-core.test.ts', name: 'readiness a backup that knows of commits it has not applied is not ready for reads', title: 'a backup that knows of commits it has not applied is not ready for reads' }],
  },
  {
    id: 'A*',
    defect: 'A',
    reverts: 'all of A at once: the install truncates in a view change, a transferring replica serves nothing, the walk runs to commit_max',
    edits: [],
    pins: [AUDIT_PIN.a],
  },
  {
    id: 'B',
    defect: 'B',
    reverts: 'an install supersedes a checkpoint waiting for its superblock pairing',
    edits: [{ file: REPLICA, search: '    if (superseded !== null) {\n', replace: '    if (superseded !== null && false) {\n' }],
    pins: [AUDIT_PIN.b],
  },
  {
    id: 'C',
    defect: 'C',
    reverts: 'a StartView adopted mid-transfer takes the normal path (reference: view only, heartbeat watermark kept)',
    edits: [
      {
        file: REPLICA,
        search: "    if (suffix.length === 0 && header.op > this.commitMin && header.op > header.commit) {\n      return this.drop('start_view_suffix_empty', header);\n    }\n",
        replace: [
          '    if (suffix.length === 0 && header.op > this.commitMin && header.op > header.commit) {',
          "      return this.drop('start_view_suffix_empty', header);",
          '    }',
          '    if (this.stateTransfer.transferring) {',
          "      if (header.view > this.view || this.status !== 'normal') {",
          '        this.view = header.view;',
          "        this.status = 'normal';",
          '        this.pipeline = [];',
          '        this.requestQueue = [];',
          '        this.pendingView = null;',
          '        for (const timeout of this.timeouts()) timeout.stop();',
          '        this.timeoutNormalHeartbeat.start();',
          '        this.persistView();',
          '      }',
          '      this.advanceCommitMax(header.commit);',
          '      return;',
          '    }',
          '',
        ].join('\n'),
      },
    ],
    pins: [AUDIT_PIN.c],
  },
  {
    id: 'D',
    defect: 'D',
    reverts: 'a wiped replica counts once it applied the adopted head, in any status (reference: only in its own log view)',
    edits: [
      {
        file: REPLICA,
        search: '    if (this.commitMin < this.catchUpTarget) {\n',
        replace: "    if (this.status !== 'normal' || this.logView !== this.view) return;\n    if (this.commitMin < this.catchUpTarget) {\n",
      },
    ],
    pins: [AUDIT_PIN.d],
  },
  {
    id: 'D2',
    defect: 'D',
    reverts: 'a lost disk in a view change keeps catching up by committed repair',
    edits: [{ file: REPLICA, search: '    if (catchingUp && !primaryElect) {\n', replace: '    if (catchingUp && !primaryElect && false) {\n' }],
    pins: [AUDIT_PIN.d],
  },
  {
    id: 'E1',
    defect: 'E',
    reverts: 'a refusal that names a checkpoint vouches for it',
    edits: [{ file: 'src/vsr/state-transfer.ts', search: '    const vouchers = servers.length + (vouches.get(key) ?? 0);\n', replace: '    const vouchers = servers.length;\n' }],
    pins: [
      { file: 'test/unit/transfer-vote.test.ts', name: 'voteTarget a refusal naming the id vouches for an offer of it, but never stands alone', title: 'a refusal naming the id vouches for an offer of it' },
      AUDIT_PIN.eVouch,
    ],
  },
  {
    id: 'E2',
    defect: 'E',
    reverts: 'a replica repairs its damaged snapshot file from a peer',
    edits: [{ file: REPLICA, search: '    if (damaged === null || damaged.op !== this.checkpointOp', replace: '    if (true || damaged === null || damaged.op !== this.checkpointOp' }],
    pins: [AUDIT_PIN.eRepair],
  },
  {
    id: 'E*',
    defect: 'E',
    reverts: 'all of E at once: no vouch for an id that cannot be served, no repair of a damaged snapshot',
    edits: [],
    pins: [
      { file: 'test/unit/transfer-vote.test.ts', name: 'voteTarget a refusal naming the id vouches for an offer of it, but never stands alone', title: 'a refusal naming the id vouches for an offer of it' },
      AUDIT_PIN.eVouch,
    ],
  },
  {
    id: 'F1',
    defect: 'also',
    reverts: 'own divergence is fail-stop (reference: counted, the walk stalls)',
    edits: [
      {
        file: REPLICA,
        search: "        this.failStop('committed prepare does not chain onto the applied history', op);\n",
        replace: "        this.reportDivergence('committed prepare does not chain onto the applied history', op);\n        break;\n",
      },
    ],
    pins: [AUDIT_PIN.divergence],
  },
  {
    id: 'F2',
    defect: 'also',
    reverts: 'a failed transfer_discard is logged',
    edits: [{ file: REPLICA, search: "      if (!result.ok) this.emit('warn', 'state_transfer_discard_failed'", replace: "      if (false) this.emit('warn', 'state_transfer_discard_failed'" }],
    pins: [AUDIT_PIN.discard],
  },
  {
    id: 'F3',
    defect: 'also',
    reverts: 'committed repair applies only the run its RepairDone names (seed 428996525595)',
    edits: [
      {
        file: REPLICA,
        search: '    if (!session.committed) this.drainCanonicalRepair(session);\n',
        replace: '    if (session.committed) this.drainCommittedRepair(session);\n    else this.drainCanonicalRepair(session);\n',
      },
    ],
    pins: [
      {
        file: 'test/sim/scenarios-core.test.ts',
        name: 'restart and repair committed repair applies only the run its RepairDone names: a late prepare of another session that chains onto the same parent is dropped',
      },
    ],
  },
  {
    id: 'F4',
    defect: 'also',
    reverts: 'a replica in a view change asks the heartbeating primary of that view for its StartView (seed 307435973307)',
    edits: [
      {
        file: REPLICA,
        search: '      this.sendRequestStartView(header.replica);\n      return this.drop(\'status_not_normal\', header);\n',
        replace: '      return this.drop(\'status_not_normal\', header);\n',
      },
    ],
    pins: [
      {
        file: 'test/sim/scenarios-core.test.ts',
        name: "view change 4 replicas: a replica that lost the StartView of the view it changes to asks that view's primary for it on its heartbeat",
      },
    ],
  },
  {
    id: 'F5',
    defect: 'also',
    reverts: 'an empty replica counts a peer whose DoViewChange reports log view 0 as a witness of a new cluster (seed 3507385961706)',
    edits: [
      {
        file: REPLICA,
        search: '    if (this.pristine && header.logView === 0 && header.replica !== this.config.replica) {\n',
        replace: '    if (false && this.pristine && header.logView === 0 && header.replica !== this.config.replica) {\n',
      },
    ],
    pins: [
      {
        file: 'test/sim/scenarios-core.test.ts',
        name: "view change two empty replicas of four that never heard each other probe learn from each other's DoViewChange that the cluster was new",
      },
    ],
  },
  {
    id: 'F6',
    defect: 'also',
    reverts: 'a primary that does not know its checkpoint anchor, answered that a peer holds the op only as state, forfeits the view (seed 730075348166)',
    edits: [
      {
        file: REPLICA,
        search: '    if (this.anchorEvicted(header)) {\n',
        replace: '    if (false && this.anchorEvicted(header)) {\n',
      },
    ],
    pins: [
      scheduled('F6: a primary that does not know its checkpoint anchor forfeits the view', 'a replica rebooted at a checkpoint it installed without its anchor lets a replica that knows the anchor lead'),
      seed(730075348166, 'all faults, current rules', 'a primary at its checkpoint whose anchor was lost with a crash after an install, among peers holding that op only as state, led forever and admitted nothing'),
    ],
  },
  {
    id: 'F7',
    defect: 'also',
    reverts: 'a backup acknowledges a re-replicated prepare at or below its commit that it holds durably (seed 3789050367638)',
    edits: [
      {
        file: REPLICA,
        search: "      if (!held) return this.drop('prepare_committed_not_held', header);\n      this.sendPrepareOkFor(header);\n",
        replace: "      if (!held) return this.drop('prepare_committed_not_held', header);\n",
      },
    ],
    pins: [
      seed(3789050367638, 'all faults, current rules', 'a backup that had committed a prepare a new primary re-replicated never acknowledged it: that primary waited forever for a quorum'),
    ],
  },
];

// A fix with several halves, reverted whole: the simulator is asked to find the defect itself.
for (const [whole, parts] of [['A*', ['A1', 'A2', 'A3']], ['E*', ['E1', 'E2']]]) {
  MUTATIONS.find((mutation) => mutation.id === whole).edits = parts.flatMap((id) => MUTATIONS.find((mutation) => mutation.id === id).edits);
}

function parseArgs(argv) {
  const options = { only: null, markdown: false, simulate: 0, base: 1 };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    if (arg === '--markdown') options.markdown = true;
    else if (arg === '--only') options.only = (argv[++index] ?? '').split(',').filter((part) => part !== '');
    else if (arg === '--simulate') options.simulate = Number(argv[++index]);
    else if (arg === '--base') options.base = Number(argv[++index]);
    else throw new Error(`unknown argument ${arg} (use --only 4,5a, --markdown, --simulate N [--base B])`);
  }
  if (!Number.isSafeInteger(options.simulate) || options.simulate < 0) throw new Error('--simulate takes a seed count');
  return options;
}

/**
 * Builds the (mutated) workspace and runs the simulator over `seeds` seeds from `base`: the
 * failing seeds and the first failure, or the build's error.
 */
function simulateWorkspace(dir, seeds, base) {
  // Unused-symbol checks off: a reverted fix may leave its helper unused; the code still runs.
  const build = spawnSync(join(dir, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--noUnusedLocals', 'false', '--noUnusedParameters', 'false'], {
    cwd: dir,
    encoding: 'utf8',
  });
  if (!existsSync(join(dir, 'dist', 'src', 'node', 'cli.js'))) return { error: `build failed: ${firstLine(build.stdout || build.stderr)}` };
  const run = spawnSync(process.execPath, [join(dir, 'dist', 'src', 'node', 'cli.js'), 'simulate', '--seeds', String(seeds), '--base', String(base)], {
    cwd: dir,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  const lines = (run.stdout ?? '').split('\n');
  const summary = lines.find((line) => line.startsWith('seeds='));
  if (summary === undefined) return { error: `no summary: ${firstLine(run.stderr || run.stdout)}` };
  const failures = Number(/failures=(\d+)/.exec(summary)[1]);
  const failed = lines.filter((line) => line.startsWith('seed=') && line.includes('FAILED')).map((line) => Number(/seed=(\d+)/.exec(line)[1]));
  const firstFailure = lines.find((line) => line.startsWith('  failure: ')) ?? '';
  const kinds = new Map();
  for (const line of lines.filter((candidate) => candidate.startsWith('  failure: '))) {
    const kind = /liveness: the core|liveness: r\d+ stuck|liveness: r\d+ deposed|liveness: no convergence|CheckFailure: replica \d+ applied|AssertionError|CheckFailure/.exec(line)?.[0] ?? 'other';
    const key = kind.replace(/r\d+/g, 'r').replace(/replica \d+/, 'replica');
    kinds.set(key, (kinds.get(key) ?? 0) + 1);
  }
  return { failures, failed, firstFailure: firstFailure.replace('  failure: ', '').slice(0, 160), kinds, summary, targeted: lines.find((line) => line.startsWith('targeted:')) ?? '' };
}

function mainSimulate(options, mutations) {
  const dir = makeWorkspace();
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  const rows = [];
  try {
    const runs = [{ id: 'none', reverts: 'every fix in place', edits: [] }, ...mutations];
    for (const mutation of runs) {
      const started = Date.now();
      const originals = new Map();
      let result;
      try {
        for (const edit of mutation.edits) {
          const path = join(dir, edit.file);
          if (occurrences(readFileSync(path, 'utf8'), edit.search) !== 1) throw new Error(`MUTATION SITE NOT FOUND: ${edit.file}: ${edit.search.trim().slice(0, 80)}`);
          if (!originals.has(path)) originals.set(path, readFileSync(path, 'utf8'));
          writeFileSync(path, readFileSync(path, 'utf8').replace(edit.search, () => edit.replace));
        }
        rmSync(join(dir, 'dist'), { recursive: true, force: true });
        result = simulateWorkspace(dir, options.simulate, options.base);
      } finally {
        for (const [path, text] of originals) writeFileSync(path, text);
      }
      const seconds = ((Date.now() - started) / 1000).toFixed(0);
      const kinds = result.kinds === undefined ? '' : [...result.kinds].map(([kind, count]) => `${kind} x${count}`).join(', ');
      const row = { id: mutation.id, reverts: mutation.reverts, result, seconds, kinds };
      rows.push(row);
      console.log(`${mutation.id.padEnd(4)} ${result.error ?? `${result.failures}/${options.simulate} seeds fail`}  ${seconds}s  ${kinds}`);
      if (result.failed !== undefined && result.failed.length > 0) console.log(`     first: seed ${result.failed[0]}: ${result.firstFailure}`);
      if (mutation.id === 'none' && result.targeted !== undefined) console.log(`     ${result.summary}\n     ${result.targeted}`);
    }
  } finally {
    cleanup();
  }
  console.log(`\n| mutation | fix reverted | seeds that fail (of ${options.simulate}, --base ${options.base}) | how they fail | first failing seed |`);
  console.log('|---|---|---:|---|---|');
  for (const row of rows) {
    const failing = row.result.error ?? String(row.result.failures);
    console.log(`| ${row.id} | ${row.reverts} | ${failing} | ${row.kinds} | ${row.result.failed?.[0] ?? ''} |`);
  }
  const baseline = rows[0].result;
  const missed = rows.slice(1).filter((row) => row.result.error !== undefined || row.result.failures === 0);
  if (baseline.error !== undefined || baseline.failures > 0 || missed.length > 0) process.exitCode = 1;
}

function selected(mutation, only) {
  if (only === null) return true;
  return only.some((wanted) => wanted === mutation.id || wanted === String(mutation.defect));
}

function occurrences(text, search) {
  let count = 0;
  for (let at = text.indexOf(search); at >= 0; at = text.indexOf(search, at + 1)) count += 1;
  return count;
}

function escapeRegex(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A workspace that shares node_modules and the WASM build but owns its src/ and test/. */
function makeWorkspace() {
  const dir = mkdtempSync(join(tmpdir(), 'vrmeta-mutations-'));
  for (const entry of ['src', 'test', 'bench']) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  for (const file of ['package.json', 'vitest.config.ts', 'tsconfig.json', 'tsconfig.test.json']) {
    if (existsSync(join(ROOT, file))) cpSync(join(ROOT, file), join(dir, file));
  }
  for (const entry of ['node_modules', 'build']) symlinkSync(join(ROOT, entry), join(dir, entry), 'dir');
  return dir;
}

/**
 * Runs `pins` in `dir`; returns each pin's status ('passed', 'failed', or 'missing' when it did
 * not run) with the first line of its failure, and the suite's own error if it did not load.
 */
function runPins(dir, pins) {
  const files = [...new Set(pins.map((entry) => entry.file))];
  const pattern = `^(${pins.map((entry) => escapeRegex(entry.name)).join('|')})$`;
  const report = join(dir, 'vitest-report.json');
  rmSync(report, { force: true });
  const run = spawnSync(
    join(dir, 'node_modules', '.bin', 'vitest'),
    ['run', ...files, '-t', pattern, '--reporter=json', `--outputFile=${report}`],
    { cwd: dir, encoding: 'utf8', timeout: RUN_TIMEOUT_MS, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } },
  );
  const results = new Map(pins.map((entry) => [entry.name, { status: 'missing', failure: '' }]));
  let suiteError = '';
  if (run.error !== undefined) suiteError = `vitest did not finish: ${run.error.message}`;
  if (existsSync(report)) {
    const parsed = JSON.parse(readFileSync(report, 'utf8'));
    for (const file of parsed.testResults) {
      if (file.status === 'failed' && file.assertionResults.length === 0) suiteError ||= firstLine(file.message);
      for (const assertion of file.assertionResults) {
        if (!results.has(assertion.fullName)) continue;
        if (assertion.status !== 'passed' && assertion.status !== 'failed') continue;
        results.set(assertion.fullName, { status: assertion.status, failure: firstLine(assertion.failureMessages?.[0] ?? '') });
      }
    }
  } else {
    suiteError ||= `no report (exit ${run.status}): ${firstLine(run.stderr || run.stdout || '')}`;
  }
  return { results, suiteError };
}

/** A pin's title without its describe block. */
function shortName(entry) {
  if (entry.title !== undefined) return entry.title;
  return entry.name.startsWith(BLOCK) ? entry.name.slice(BLOCK.length + 1) : entry.name;
}

function firstLine(text) {
  return String(text).split('\n').find((line) => line.trim() !== '')?.trim().slice(0, 140) ?? '';
}

function printTable(rows) {
  const header = ['#', 'id', 'fix reverted', 'file', 'pin', 'result'];
  const body = rows.map((row) => [String(row.defect), row.id, row.reverts, row.files, row.pins, row.result]);
  const widths = header.map((title, column) => Math.min(80, Math.max(title.length, ...body.map((cells) => cells[column].length))));
  const line = (cells) => cells.map((cell, column) => cell.padEnd(widths[column])).join('  ');
  console.log(line(header));
  console.log(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const cells of body) console.log(line(cells));
}

function printMarkdown(rows) {
  console.log('| # | mutation | fix reverted | pin | result |');
  console.log('|---|---|---|---|---|');
  for (const row of rows) console.log(`| ${row.defect} | ${row.id} | ${row.reverts} | ${row.pins} | ${row.result} |`);
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  const mutations = MUTATIONS.filter((mutation) => selected(mutation, options.only));
  if (mutations.length === 0) throw new Error(`--only ${options.only?.join(',')} selects no mutation`);
  if (options.simulate > 0) {
    mainSimulate(options, mutations);
    return;
  }

  // Every site must exist exactly once in the current tree, or the mutation tests nothing.
  const siteErrors = new Map();
  for (const mutation of mutations) {
    for (const edit of mutation.edits) {
      const count = occurrences(readFileSync(join(ROOT, edit.file), 'utf8'), edit.search);
      if (count !== 1) {
        const message = `MUTATION SITE NOT FOUND: ${edit.file} has ${count} occurrences of ${JSON.stringify(edit.search.trim().slice(0, 80))}`;
        console.error(`mutation ${mutation.id}: ${message}`);
        siteErrors.set(mutation.id, message);
      }
    }
  }

  const dir = makeWorkspace();
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  const rows = [];
  try {
    // The pins must pass before anything is reverted, or a "kill" proves nothing.
    const allPins = [...new Map(mutations.flatMap((mutation) => mutation.pins).map((entry) => [entry.name, entry])).values()];
    console.log(`baseline: ${allPins.length} pinned tests on the unmutated tree (${dir})`);
    const baseline = runPins(dir, allPins);
    const broken = [...baseline.results].filter(([, result]) => result.status !== 'passed');
    if (baseline.suiteError !== '' || broken.length > 0) {
      console.error(`baseline failed: ${baseline.suiteError}`);
      for (const [name, result] of broken) console.error(`  ${result.status}: ${name} ${result.failure}`);
      process.exitCode = 2;
      return;
    }

    for (const mutation of mutations) {
      const started = Date.now();
      const row = {
        defect: mutation.defect,
        id: mutation.id,
        reverts: mutation.reverts,
        files: [...new Set(mutation.edits.map((edit) => edit.file))].join(', '),
        pins: mutation.pins.map((entry) => `\`${shortName(entry)}\``).join('; '),
        result: '',
        killed: false,
        detail: '',
      };
      rows.push(row);
      if (siteErrors.has(mutation.id)) {
        row.result = 'ERROR: mutation site not found';
        row.detail = siteErrors.get(mutation.id);
        continue;
      }
      const originals = new Map();
      try {
        for (const edit of mutation.edits) {
          const path = join(dir, edit.file);
          if (!originals.has(path)) originals.set(path, readFileSync(path, 'utf8'));
          writeFileSync(path, readFileSync(path, 'utf8').replace(edit.search, () => edit.replace));
        }
        const { results, suiteError } = runPins(dir, mutation.pins);
        const failed = [...results.values()].filter((result) => result.status === 'failed');
        const missing = [...results].filter(([, result]) => result.status === 'missing').map(([name]) => name);
        if (failed.length > 0) {
          row.killed = true;
          row.result = 'killed';
          row.detail = failed[0].failure;
        } else if (suiteError !== '' || missing.length > 0) {
          row.result = 'ERROR: pin did not run';
          row.detail = suiteError || `missing: ${missing.join('; ')}`;
        } else {
          row.result = 'SURVIVED';
        }
      } finally {
        for (const [path, text] of originals) writeFileSync(path, text);
      }
      console.log(`${mutation.id.padEnd(3)} ${row.result.padEnd(8)} ${((Date.now() - started) / 1000).toFixed(1)}s  ${row.detail}`);
    }
  } finally {
    cleanup();
  }

  console.log('');
  printTable(rows);
  if (options.markdown) {
    console.log('');
    printMarkdown(rows);
  }
  const killed = rows.filter((row) => row.killed).length;
  console.log(`\n${killed}/${rows.length} mutations killed`);
  for (const [id, message] of siteErrors) {
    console.error(`mutation ${id}: ${message} (the code moved: update the mutation in scripts/mutations.mjs)`);
  }
  if (killed !== rows.length) process.exitCode = 1;
}

main();

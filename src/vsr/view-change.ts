/**
 * The DoViewChange merge: from a view-change quorum of DVCs, the new primary computes the log of
 * the new view. Pure and deterministic; the replica feeds it DVCs and acts on the outcome.
 *
 * Why it is safe (VRR §4.2 with Protocol-Aware Recovery's nack rule):
 * - A committed op was durable on a replication quorum, and replication + view-change quorums
 *   intersect, so some DVC in any view-change quorum holds every committed op.
 * - Within one log view, all logs are prefixes of (or have gaps relative to) the log of that
 *   view's primary, so the DVCs with the highest log view ("canonical") agree on every header
 *   they share, and the longest canonical log contains every op committed before the view change.
 *   Non-canonical logs never win: this is what stops a lagging replica with a truncated log from
 *   erasing committed ops (the VR Revisited state-transfer flaw).
 * - An uncommitted op is discarded only with a nack quorum: replicas proving they never durably
 *   prepared it. With nack quorum = n - q_replication + 1, at most q_replication - 1 replicas can
 *   have acknowledged it, so it cannot have committed. A replica that merely lacks the body (a
 *   gap) nacks; a replica that has the body reports it present and never nacks.
 */
import { assert } from '../stdx/assert.js';
import type { PrepareHeader } from './header.js';

/** One suffix slot of a DoViewChange: a prepare header, or a blank for an op the sender lacks. */
export interface SuffixSlot {
  readonly op: number;
  /** null for a blank (the sender has no header for this op). */
  readonly header: PrepareHeader | null;
  /** The sender holds this prepare durably and can serve its body. */
  readonly present: boolean;
  /** The sender proves it never durably prepared this op. */
  readonly nack: boolean;
}

export interface DoViewChangeRecord {
  readonly replica: number;
  readonly logView: number;
  /** The sender lost its disk and has not caught up: it proves nothing about what it acked. */
  readonly nackUnknown: boolean;
  /** The sender's head op. */
  readonly op: number;
  /** The sender's commit number (min(commit_max, op)). */
  readonly commit: number;
  /** The sender's commit_min: its ops up to here are applied, so committed and canonical. */
  readonly applied: number;
  /** Slots high to low op, from `op` down. */
  readonly suffix: readonly SuffixSlot[];
}

export type MergeOutcome =
  | { readonly kind: 'awaiting_quorum' }
  /** Undecidable with these DVCs: neither a body nor a nack quorum for `op`; more DVCs may help. */
  | { readonly kind: 'undecided'; readonly op: number }
  | {
      readonly kind: 'ready';
      readonly head: number;
      readonly commitMax: number;
      /** The canonical log view the merged log comes from. */
      readonly logView: number;
      /** Canonical headers up to `head` known from the canonical DVCs, keyed by op; every op of
       * (commitMax, head] is present. */
      readonly headers: ReadonlyMap<number, PrepareHeader>;
      /** For each op with a header, the replicas that can serve its body. */
      readonly sources: ReadonlyMap<number, readonly number[]>;
    };

function slotAt(record: DoViewChangeRecord, op: number): SuffixSlot | undefined {
  const index = record.op - op;
  if (index < 0 || index >= record.suffix.length) return undefined;
  const slot = record.suffix[index]!;
  assert(slot.op === op, 'suffix slots are consecutive, high to low');
  return slot;
}

/** Whether `record`'s sender provably never durably prepared `header`. */
function nacks(record: DoViewChangeRecord, header: PrepareHeader): boolean {
  if (record.nackUnknown) return false; // it may have acked this op before its disk was lost
  if (record.commit >= header.op) return false; // it committed this op: it had it
  if (record.op < header.op) return true; // its log never reached this op
  const slot = slotAt(record, header.op);
  if (slot === undefined) return false; // outside its suffix: no proof either way
  if (slot.header !== null && slot.header.checksum === header.checksum) {
    return !slot.present && slot.nack;
  }
  // A different prepare (or none) at this op: it never held this one durably.
  return slot.header === null ? slot.nack : true;
}

export function mergeDoViewChanges(
  records: readonly DoViewChangeRecord[],
  quorumViewChange: number,
  quorumNack: number,
): MergeOutcome {
  if (records.length < quorumViewChange) return { kind: 'awaiting_quorum' };
  // A replica that lost its disk cannot stand in for the intersection argument above: the
  // committed op the quorum must contain may have been on its lost disk. The senders that kept
  // their disks must intersect every replication quorum on their own (n - q_replication + 1 of
  // them, the nack quorum), unless the cluster never prepared anything (every sender at log view
  // 0, op 0): that is how a brand-new cluster of empty data directories elects its first primary.
  const knowledgeable = records.filter((record) => !record.nackUnknown).length;
  const virgin = records.every(
    (record) => record.logView === 0 && record.op === 0 && record.commit === 0,
  );
  if (knowledgeable < quorumNack && !virgin) return { kind: 'awaiting_quorum' };
  const { commitMax, logViewMax } = commitAndLogViewMax(records);
  // The canonical log: the longest among the highest log view (ties to the lowest replica).
  const canonical = records
    .filter((record) => record.logView === logViewMax)
    .sort((a, b) => b.op - a.op || a.replica - b.replica);
  const best = canonical[0]!;
  let head = best.op;
  // Ops committed in an older view were carried into every later log, so with every sender in
  // hand the canonical head reaches every commit number any sender reports. A quorum whose
  // canonical logs stop short (their holders lost or could not verify entries) must wait for more
  // DVCs rather than elect a log that lacks committed ops, unless a sender applied the missing
  // ops: applied ops are committed, hence the same in every log, whatever that sender's log view
  // (a lost disk that caught up while following a view it could not adopt, seed 1086421619296).
  const extension =
    head < commitMax
      ? appliedExtension(records, canonical, head, commitMax)
      : new Map<number, PrepareHeader>();
  if (head < commitMax && extension.size !== commitMax - head) {
    return { kind: 'undecided', op: head + 1 };
  }
  head = Math.max(head, commitMax);

  const headers = canonicalHeaders(records, canonical, head);
  for (const [op, header] of extension) headers.set(op, header);
  const decided = decideUncommitted(records, headers, commitMax, head, quorumNack);
  if (decided.kind === 'undecided') return decided;
  head = decided.head;
  const sources = decided.sources;
  assert(head >= commitMax, 'the merge never discards a committed op');
  for (const op of [...headers.keys()]) if (op > head) headers.delete(op);
  // Where committed bodies can be fetched: senders that report them present.
  for (const [op, header] of headers) {
    if (sources.has(op)) continue;
    const present = records
      .filter((record) => holdsPresent(record, op, header))
      .map((record) => record.replica);
    sources.set(op, present);
  }
  return { kind: 'ready', head, commitMax, logView: logViewMax, headers, sources };
}

/** The highest commit number any sender reports, and the highest log view among the senders. */
function commitAndLogViewMax(records: readonly DoViewChangeRecord[]): {
  commitMax: number;
  logViewMax: number;
} {
  let commitMax = 0;
  let logViewMax = 0;
  for (const record of records) {
    commitMax = Math.max(commitMax, record.commit);
    logViewMax = Math.max(logViewMax, record.logView);
    // A prepare's stamped commit is the primary's commit_max when it was sent.
    for (const slot of record.suffix) {
      if (slot.header !== null) commitMax = Math.max(commitMax, slot.header.commit);
    }
  }
  return { commitMax, logViewMax };
}

/**
 * Every header the canonical DVCs report up to the head is canonical for the new view: it
 * anchors the new primary's verification of its own journal (including committed ops it has
 * not applied yet) and of the bodies it repairs.
 */
function canonicalHeaders(
  records: readonly DoViewChangeRecord[],
  canonical: readonly DoViewChangeRecord[],
  head: number,
): Map<number, PrepareHeader> {
  const headers = new Map<number, PrepareHeader>();
  for (const record of canonical) {
    for (const slot of record.suffix) {
      if (slot.header === null || slot.op > head) continue;
      const known = headers.get(slot.op);
      if (known === undefined) headers.set(slot.op, slot.header);
      else {
        assert(
          known.checksum === slot.header.checksum,
          `canonical DVCs disagree at op ${slot.op}: ${describeRecords(records)}`,
        );
      }
    }
  }
  return headers;
}

/** The DVCs in brief for an assertion message: replica, log view, op and each slot's checksum. */
function describeRecords(records: readonly DoViewChangeRecord[]): string {
  const slotText = (slot: SuffixSlot): string => {
    const checksum = slot.header?.checksum.toString(16).slice(0, 6) ?? '-';
    return `${slot.op}=${checksum}${slot.present ? 'p' : ''}`;
  };
  return records
    .map((r) => `r${r.replica}:lv${r.logView}:op${r.op}:${r.suffix.map(slotText).join(',')}`)
    .join(' | ');
}

/**
 * Decides each op of (commitMax, head]: kept when a sender holds its body (those senders are its
 * sources), cut with everything after it when no DVC knows it or a nack quorum proves it never
 * committed, undecided otherwise.
 */
function decideUncommitted(
  records: readonly DoViewChangeRecord[],
  headers: ReadonlyMap<number, PrepareHeader>,
  commitMax: number,
  headMax: number,
  quorumNack: number,
):
  | { readonly kind: 'undecided'; readonly op: number }
  | { readonly kind: 'decided'; readonly head: number; readonly sources: Map<number, number[]> } {
  let head = headMax;
  const sources = new Map<number, number[]>();
  for (let op = commitMax + 1; op <= head; op++) {
    const header = headers.get(op);
    if (header === undefined) {
      // No DVC in a quorum knows this op: it cannot have committed, nor anything after it.
      head = op - 1;
      break;
    }
    const present: number[] = [];
    let nackCount = 0;
    for (const record of records) {
      if (holdsPresent(record, op, header)) present.push(record.replica);
      else if (nacks(record, header)) nackCount += 1;
    }
    if (present.length === 0) {
      if (nackCount >= quorumNack) {
        head = op - 1;
        break;
      }
      return { kind: 'undecided', op };
    }
    sources.set(op, present);
  }
  return { kind: 'decided', head, sources };
}

/** Whether `record`'s sender holds `header` at `op` durably and can serve its body. */
function holdsPresent(record: DoViewChangeRecord, op: number, header: PrepareHeader): boolean {
  const slot = slotAt(record, op);
  return slot?.header != null && slot.header.checksum === header.checksum && slot.present;
}

/**
 * The headers of ops (head, commitMax] taken from senders that applied them, chained onto the
 * canonical log's header at `head` when that is known. Empty as soon as one op has no such header:
 * then the merge must wait for more DoViewChanges.
 */
function appliedExtension(
  records: readonly DoViewChangeRecord[],
  canonical: readonly DoViewChangeRecord[],
  head: number,
  commitMax: number,
): Map<number, PrepareHeader> {
  const extension = new Map<number, PrepareHeader>();
  let parent: bigint | null = null;
  for (const record of canonical) {
    const slot = slotAt(record, head);
    if (slot?.header != null) parent = slot.header.checksum;
  }
  for (let op = head + 1; op <= commitMax; op++) {
    let found: PrepareHeader | null = null;
    for (const record of records) {
      if (record.applied < op) continue;
      const header = slotAt(record, op)?.header ?? null;
      if (header !== null && (parent === null || header.parent === parent)) {
        found = header;
        break;
      }
    }
    if (found === null) return new Map();
    extension.set(op, found);
    parent = found.checksum;
  }
  return extension;
}

/**
 * The replica's in-memory view of its WAL: for every op from the checkpoint op (kept: it is the
 * commit point a DoViewChange may need) up to the head, either a prepare whose bytes are known or
 * only its canonical header (learned from a StartView suffix or a view-change merge) while the
 * body is being repaired.
 *
 * The replica keeps one invariant over this structure: every entry above commit_min is canonical
 * for the replica's log view (it came from that view's primary, from its StartView, or from a
 * repair verified against a canonical successor's `parent`). Entries it cannot verify are
 * truncated, never kept "just in case": a stale prepare from an older view chains onto the same
 * parent as the canonical one, so a forward chain check alone cannot tell them apart.
 *
 * The journal mirrors `journal.wal`: an entry becomes `durable` when its WAL append completed,
 * and only durable entries are acknowledged (PrepareOk) or reported present in a DoViewChange.
 * Bounded by `journal_slots`: an op may be journaled only while op - floor < journalSlots.
 */
import { assert } from '../stdx/assert.js';
import type { PrepareHeader } from './header.js';

export interface JournalEntry {
  readonly op: number;
  readonly header: PrepareHeader;
  /** The prepare's identity checksum (header.checksum). */
  readonly checksum: bigint;
  /** The sealed prepare frame, or null when only the canonical header is known. */
  frame: Uint8Array | null;
  /** The WAL append of `frame` completed. */
  durable: boolean;
}

export class Journal {
  private readonly entries = new Map<number, JournalEntry>();
  readonly slotCount: number;
  /** Lowest op retained (the durable checkpoint op after a drain, 0 at genesis). */
  floor: number;
  private headCache = -1;

  constructor(slotCount: number, floor: number) {
    assert(slotCount >= 4, 'journal has slots');
    assert(floor >= 0, 'journal floor is an op');
    this.slotCount = slotCount;
    this.floor = floor;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Highest op with an entry, or the floor when empty. */
  get head(): number {
    if (this.headCache < 0) {
      let head = this.floor;
      for (const op of this.entries.keys()) if (op > head) head = op;
      this.headCache = head;
    }
    return this.headCache;
  }

  /** Whether `op` fits without overwriting a slot that is not yet checkpointed. */
  hasRoom(op: number): boolean {
    return op - this.floor < this.slotCount;
  }

  get(op: number): JournalEntry | undefined {
    return this.entries.get(op);
  }

  /** The entry at `op` when its body is known. */
  prepare(op: number): JournalEntry | undefined {
    const entry = this.entries.get(op);
    return entry !== undefined && entry.frame !== null ? entry : undefined;
  }

  put(entry: JournalEntry): void {
    assert(entry.op >= this.floor, `journal put below the floor: ${entry.op} < ${this.floor}`);
    assert(this.hasRoom(entry.op), `journal full: op ${entry.op}, floor ${this.floor}`);
    assert(
      entry.header.op === entry.op && entry.header.checksum === entry.checksum,
      'entry agrees with header',
    );
    this.entries.set(entry.op, entry);
    if (entry.op > this.headCache && this.headCache >= 0) this.headCache = entry.op;
  }

  /** Removes every entry with op >= fromOp (a divergent suffix). */
  removeFrom(fromOp: number): void {
    for (const op of [...this.entries.keys()]) if (op >= fromOp) this.entries.delete(op);
    this.headCache = -1;
  }

  /** Removes the entries at `ops` (entries a new log cannot vouch for). */
  remove(ops: readonly number[]): void {
    for (const op of ops) this.entries.delete(op);
    this.headCache = -1;
  }

  /** Drops entries below the new floor (after a durable checkpoint). */
  removeBelow(floor: number): void {
    assert(floor >= this.floor, 'the journal floor never moves back');
    for (const op of [...this.entries.keys()]) if (op < floor) this.entries.delete(op);
    this.floor = floor;
    this.headCache = -1;
  }

  /** Forgets everything and restarts at `floor` (a state-transfer install). */
  reset(floor: number): void {
    this.entries.clear();
    this.floor = floor;
    this.headCache = -1;
  }

  /** Ops in (from, to] whose body is missing or not yet durable. */
  missing(from: number, to: number): number[] {
    const out: number[] = [];
    for (let op = from + 1; op <= to; op++) {
      const entry = this.entries.get(op);
      if (entry === undefined || entry.frame === null) out.push(op);
    }
    return out;
  }

  ops(): number[] {
    return [...this.entries.keys()].sort((a, b) => a - b);
  }
}

/**
 * Store backfill: how a replica gets the messages a partition group's checkpoint names but its
 * stores lack, from a peer.
 *
 * A partition group's checkpoint names each partition's next offset and consumer offsets, not its
 * messages: those live in the segment stores, identical on every replica (committed batches are
 * stamped at apply, in commit order). Two cases need them from a peer:
 * - before an install (`prepareInstall`): a state transfer fetched a checkpoint whose ops this
 *   replica never applied. The journal the install replaces may be its only copy of some of
 *   those messages, so the replica installs only once it holds them all: for each partition the
 *   offsets beyond its store (from where the store ends, or from 0) are fetched into a staging
 *   log that then starts there, and `restore` appends it to the store (`appendStaging`);
 * - after a restore (`reset`): a store shorter than its checkpoint (its disk lost flushed bytes)
 *   keeps what it holds as the start of a staging log and restarts at the checkpoint's offset;
 *   the rest of its start is fetched, and the staging log is then moved in front of the store
 *   (`adoptStaging`), so the log is whole again.
 * Either way the bytes go to disk as they arrive (bounded memory: one answer per fetch in
 * flight, at most BACKFILL_FETCHES_MAX fetches at once), fsynced per answer, so a restart
 * continues where it stopped.
 *
 * Trust. Every record an answer carries is verified before anything is staged: each batch's frame
 * and batch checksums (the kernel), its partition id, its base offset (dense from where the
 * staging log ends), its timestamp (never before the previous batch's), and the answer's range
 * (from where we asked, never past the store's start). An answer that fails any check stages
 * nothing and the next peer is asked. Committed bytes are the same on every replica, so any peer
 * that holds the range may serve it: no vote is needed.
 *
 * The seed review's transfer defects, and why none can happen here:
 * - late answers after a fetch was reset: each fetch has a nonce from the replica's PRNG, every
 *   answer must name it, its store, its incarnation and the offset the staging log ends at; a
 *   restore replaces every fetch (new nonces), so an answer from before is stale and dropped;
 * - an answer that moves nothing: refused by frame validation (an empty body, or a next offset
 *   not above the start), and a server never sends one; the stall counter is reset only by
 *   records staged;
 * - a served artifact rebuilt between requests: there is no offer; each answer is read from the
 *   committed log on request and verified record by record on arrival;
 * - errors swallowed: an unreadable range is answered `unavailable` and logged where it was read;
 * - statistics after an install: the machine's `onChanged` runs for the partition once the
 *   segments are adopted, so the node recounts it from the whole log.
 */
import { batchLastOffset, readBatchHeader, type BatchHeader } from '../format/message-batch.js';
import { assert } from '../stdx/assert.js';
import {
  StoreRangeStatus,
  type RequestStoreRangeHeader,
  type StoreRangeHeader,
} from '../vsr/header-types.js';
import type { StoreRangeHost } from '../vsr/state-machine.js';
import type { Kernels } from '../kernels/kernel.js';
import type { PartitionStore, PartitionStores, StoreKey } from './store.js';

/** Stores fetched at once; the others wait their turn (memory: one answer each in flight). */
export const BACKFILL_FETCHES_MAX = 4;
/** The body bound a fetch asks for; one batch larger than it is still sent whole. */
export const BACKFILL_BYTES_MAX = 256 * 1024;

/** A store that lacks its log below `end` (where it starts). */
export interface BackfillTarget {
  readonly key: StoreKey;
  /** The partition's first offset: where its staging log starts. */
  readonly from: number;
  readonly end: number;
}

/**
 * What a checkpoint about to be installed names beyond a store: offsets [from, end), fetched
 * into the staging log (which then starts at `from`), whose first batch may not be older than
 * `floorTimestampUs` (the store's newest, which it will follow).
 */
export interface PrefetchTarget {
  readonly key: StoreKey;
  readonly from: number;
  readonly end: number;
  readonly floorTimestampUs: number;
}

/** What the server side reads: a committed partition's store and its committed next offset. */
export interface ServedStore {
  readonly store: PartitionStore;
  readonly nextOffset: number;
}

export interface BackfillOptions {
  /** Only the batch check: naming the machine's kernel set would import the machine it serves. */
  readonly kernels: Pick<Kernels, 'messageBatchVerify'>;
  readonly stores: PartitionStores;
  /**
   * The committed store of (namespace, incarnation); 'replaced' when the committed state holds a
   * newer incarnation of the namespace (and no longer this one's store); null otherwise.
   */
  readonly served: (namespace: number, incarnation: number) => ServedStore | 'replaced' | null;
  /** The body bound each request asks for (BACKFILL_BYTES_MAX). */
  readonly bytesMax?: number;
  /** A store's log is whole again: `store` holds it (its statistics changed). */
  readonly completed: (namespace: number, store: PartitionStore) => void;
}

interface Fetch {
  readonly key: StoreKey;
  /** Where the staging log starts: the partition's first offset, or a prefetch's `from`. */
  readonly start: number;
  readonly end: number;
  /** For a checkpoint not installed yet: the staging log waits for its install (no adoption). */
  readonly forInstall: boolean;
  readonly floorTimestampUs: number;
  /** Open while the fetch is active (null while it waits its turn). */
  staged: PartitionStore | null;
  nonce: bigint;
  /** The peer asked last; rotates on refusals, bad answers and stalls. */
  peer: number;
  /** A request is out (cleared by an answer, which may schedule the next request). */
  waiting: boolean;
  idleTicks: number;
  /** Ticks before the next request goes out (a round of refusals backs off). */
  holdTicks: number;
  /** Peers that refused or failed in a row (reset by records staged). */
  failures: number;
}

/** What one answer's records are, or why they cannot be staged. */
type Checked =
  | { readonly ok: true; readonly batches: readonly Uint8Array[] }
  | { readonly ok: false; readonly reason: string };

export class StoreBackfill {
  private readonly options: BackfillOptions;
  private host: StoreRangeHost | null = null;
  /** By namespace, in the order they were scheduled. */
  private fetches = new Map<number, Fetch>();

  constructor(options: BackfillOptions) {
    this.options = options;
  }

  attach(host: StoreRangeHost): void {
    assert(this.host === null, 'store ranges attach once');
    this.host = host;
  }

  get pending(): number {
    return this.fetches.size;
  }

  /** The stores being fetched, by namespace: where each staging log ends, and its target. */
  progress(): ReadonlyMap<number, { readonly fetched: number; readonly end: number }> {
    const progress = new Map<number, { fetched: number; end: number }>();
    for (const [namespace, fetch] of this.fetches) {
      progress.set(namespace, { fetched: fetch.staged?.nextOffset ?? 0, end: fetch.end });
    }
    return progress;
  }

  /**
   * Replaces every fetch with `targets` (a restore: the state may be a different checkpoint's).
   * Staging logs of stores no longer targeted are removed; a target's own is kept and continued
   * (it is a verified prefix of the same log).
   */
  reset(targets: readonly BackfillTarget[]): void {
    this.fetches = new Map();
    const wanted = new Set(targets.map((target) => nameOf(target.key)));
    for (const key of this.options.stores.listStaging()) {
      if (!wanted.has(nameOf(key))) this.options.stores.removeStaging(key);
    }
    for (const target of targets) {
      assert(target.end > target.from, 'a backfill target lacks offsets');
      const fetch = this.newFetch(target.key, target.from, target.end, false, 0);
      this.fetches.set(target.key.namespace, fetch);
    }
  }

  /**
   * A checkpoint is about to be installed: fetch what it names beyond each store. Each target
   * replaces the store's fetch, if any (its staging log is continued when it starts where the
   * target does); `installReady` holds once all are staged.
   */
  prepareInstall(targets: readonly PrefetchTarget[]): void {
    // First in line: the install waits for these, and at most BACKFILL_FETCHES_MAX run at once.
    const fetches = new Map<number, Fetch>();
    for (const target of targets) {
      assert(target.end > target.from, 'a prefetch names offsets');
      const { key, from, end, floorTimestampUs } = target;
      fetches.set(key.namespace, this.newFetch(key, from, end, true, floorTimestampUs));
    }
    for (const [namespace, fetch] of this.fetches) {
      if (!fetches.has(namespace)) fetches.set(namespace, fetch);
    }
    this.fetches = fetches;
  }

  get installReady(): boolean {
    for (const fetch of this.fetches.values()) if (fetch.forInstall) return false;
    return true;
  }

  /** A newer incarnation replaced the partition's store: its fetch, if any, goes. */
  cancel(namespace: number): void {
    const fetch = this.fetches.get(namespace);
    if (fetch === undefined) return;
    this.fetches.delete(namespace);
    this.options.stores.removeStaging(fetch.key);
  }

  tick(): void {
    const host = this.host;
    if (host === null || this.fetches.size === 0) return;
    let active = 0;
    for (const fetch of this.fetches.values()) {
      if (active === BACKFILL_FETCHES_MAX) break;
      active += 1;
      if (fetch.staged === null && !this.activate(fetch)) continue;
      if (fetch.waiting) {
        fetch.idleTicks += 1;
        if (fetch.idleTicks < host.retryTicks) continue;
        // Unanswered: ask the next peer (the answer, if it comes late, is stale by its peer).
        this.failed(fetch);
      }
      if (fetch.holdTicks > 0) {
        fetch.holdTicks -= 1;
        continue;
      }
      this.request(fetch);
    }
  }

  // ---------------------------------------------------------------- serving

  onRequest(header: RequestStoreRangeHeader): void {
    const host = this.host;
    if (host === null) return;
    const answer = this.read(header);
    const fields = {
      nonce: header.nonce,
      store: header.store,
      incarnation: header.incarnation,
      fromOffset: header.fromOffset,
    };
    if (answer === null || answer === 'replaced') {
      const refusal = { ...fields, nextOffset: header.fromOffset };
      const status = answer === null ? StoreRangeStatus.unavailable : StoreRangeStatus.replaced;
      host.sendRange(header.replica, { ...refusal, status }, EMPTY);
      return host.drop('store_range_unavailable', header);
    }
    const records = { ...fields, nextOffset: answer.nextOffset, status: StoreRangeStatus.records };
    host.sendRange(header.replica, records, answer.body);
  }

  /** Whole committed batches from `fromOffset`, below `toOffset`; null when we do not hold it. */
  private read(
    header: RequestStoreRangeHeader,
  ): { body: Uint8Array; nextOffset: number } | 'replaced' | null {
    const served = this.options.served(header.store, header.incarnation);
    if (served === 'replaced') return served;
    if (served === null || header.toOffset > served.nextOffset) return null;
    const store = served.store;
    if (store.stats().startOffset > header.fromOffset) return null;
    const last = header.toOffset - 1;
    const count = header.toOffset - header.fromOffset;
    const read = store.readFrom(header.fromOffset, count, last, header.bytesMax);
    if (!read.ok) {
      const fields = { namespace: header.store, ...read.fault };
      this.host!.emit('error', 'store_range_unreadable', fields);
      return null;
    }
    const batches: Uint8Array[] = [];
    let nextOffset = header.fromOffset;
    for (const batch of read.batches) {
      const parsed = readBatchHeader(batch);
      assert(parsed.ok, 'a store returns verified batches');
      // A range starts and ends on batch boundaries of the committed log, the same everywhere.
      if (parsed.header.baseOffset !== nextOffset || batchLastOffset(parsed.header) > last) break;
      batches.push(batch);
      nextOffset = batchLastOffset(parsed.header) + 1;
    }
    if (batches.length === 0) return null;
    return { body: concat(batches), nextOffset };
  }

  // ---------------------------------------------------------------- fetching

  onRange(header: StoreRangeHeader, body: Uint8Array): void {
    const host = this.host;
    if (host === null) return;
    const fetch = this.fetches.get(header.store);
    const staged = fetch?.staged ?? null;
    if (
      fetch === undefined ||
      staged === null ||
      !fetch.waiting ||
      header.nonce !== fetch.nonce ||
      header.replica !== fetch.peer ||
      header.incarnation !== fetch.key.incarnation ||
      header.fromOffset !== staged.nextOffset
    ) {
      return host.drop('store_range_stale', header);
    }
    fetch.waiting = false;
    if (header.status === StoreRangeStatus.replaced) return this.obsolete(fetch, header.replica);
    if (header.status === StoreRangeStatus.unavailable) {
      this.failed(fetch);
      return host.drop('store_range_refused', header);
    }
    const checked = this.check(fetch, staged, header, body);
    if (!checked.ok) {
      const { namespace } = fetch.key;
      const fields = { namespace, peer: header.replica, reason: checked.reason };
      host.emit('warn', 'store_backfill_refused', fields);
      this.failed(fetch);
      return host.drop('store_range_invalid', header);
    }
    for (const batch of checked.batches) staged.append(batch);
    // Durable per answer: a restart continues from here instead of from offset 0.
    staged.flush();
    fetch.failures = 0;
    fetch.idleTicks = 0;
    if (staged.nextOffset === fetch.end) return this.complete(fetch);
    this.request(fetch);
  }

  /** The answer's records, each verified and in place; or the first reason they are not. */
  private check(
    fetch: Fetch,
    staged: PartitionStore,
    header: StoreRangeHeader,
    body: Uint8Array,
  ): Checked {
    const batches: Uint8Array[] = [];
    let nextOffset = staged.nextOffset;
    let timestampUs = Math.max(staged.lastTimestampUs, fetch.floorTimestampUs);
    for (let at = 0; at < body.byteLength; ) {
      const parsed = readBatchHeader(body, at);
      if (!parsed.ok) return { ok: false, reason: `batch at byte ${at}: ${parsed.fault}` };
      const batch = body.subarray(at, at + parsed.header.batchLength);
      const problem = this.batchProblem(fetch, batch, parsed.header, nextOffset, timestampUs);
      if (problem !== null) return { ok: false, reason: `batch at ${nextOffset}: ${problem}` };
      batches.push(batch);
      nextOffset = batchLastOffset(parsed.header) + 1;
      timestampUs = parsed.header.baseTimestampUs;
      at += parsed.header.batchLength;
    }
    if (nextOffset !== header.nextOffset) {
      const reason = `records end at ${nextOffset}, the answer says ${header.nextOffset}`;
      return { ok: false, reason };
    }
    return { ok: true, batches };
  }

  private batchProblem(
    fetch: Fetch,
    batch: Uint8Array,
    header: BatchHeader,
    nextOffset: number,
    timestampUs: number,
  ): string | null {
    const verified = this.options.kernels.messageBatchVerify(batch);
    if (verified.status !== 'valid') return `does not verify (${verified.status})`;
    if (verified.messageCount === 0) return 'holds no message';
    if (header.partitionId !== fetch.key.partitionId) return `of partition ${header.partitionId}`;
    if (header.baseOffset !== nextOffset) return `starts at ${header.baseOffset}`;
    if (batchLastOffset(header) >= fetch.end) return `reaches past the store's start ${fetch.end}`;
    if (header.baseTimestampUs < timestampUs) return 'goes back in time';
    return null;
  }

  private complete(fetch: Fetch): void {
    const host = this.host!;
    if (fetch.forInstall) {
      // Staged and durable: the install appends it to the store (PartitionStores.appendStaging).
      this.fetches.delete(fetch.key.namespace);
      const { namespace, incarnation } = fetch.key;
      const fields = { namespace, incarnation, offsets: fetch.end - fetch.start };
      host.emit('info', 'store_backfill_completed', { ...fields, before_install: true });
      return;
    }
    const live = this.options.stores.open(fetch.key);
    const first = live.readFrom(fetch.end, 1, fetch.end);
    const firstBatch = first.ok ? (first.batches[0] ?? null) : null;
    const firstHeader = firstBatch === null ? null : readBatchHeader(firstBatch);
    const liveTimestampUs = firstHeader?.ok === true ? firstHeader.header.baseTimestampUs : null;
    if (liveTimestampUs !== null && liveTimestampUs < fetch.staged!.lastTimestampUs) {
      // Cannot come from a peer holding this log: start over from another.
      const fields = { namespace: fetch.key.namespace, reason: 'newer than the store it precedes' };
      host.emit('warn', 'store_backfill_refused', fields);
      this.options.stores.removeStaging(fetch.key);
      fetch.staged = null;
      this.failed(fetch);
      return;
    }
    const whole = this.options.stores.adoptStaging(fetch.key);
    this.fetches.delete(fetch.key.namespace);
    host.emit('info', 'store_backfill_completed', {
      namespace: fetch.key.namespace,
      incarnation: fetch.key.incarnation,
      offsets: fetch.end,
    });
    this.options.completed(fetch.key.namespace, whole);
  }

  /**
   * A peer's committed state replaced the store with a newer incarnation: nobody reads its
   * messages again (this replica's journal replaces it too), so the fetch stops. Before an
   * install, what was staged is appended as far as it goes; after one, the store stays short
   * until the journal's replacing op retires it.
   */
  private obsolete(fetch: Fetch, peer: number): void {
    this.fetches.delete(fetch.key.namespace);
    const { namespace, incarnation } = fetch.key;
    this.host!.emit('info', 'store_backfill_obsolete', { namespace, incarnation, peer });
  }

  /** Opens the fetch's staging log; false when it cannot start now. */
  private activate(fetch: Fetch): boolean {
    const host = this.host!;
    fetch.nonce = host.nonce();
    fetch.peer = nextPeer(host.replica, host.replica, host.replicaCount);
    const stores = this.options.stores;
    let staged = stores.openStaging(fetch.key);
    // A staging log is continued only when it stays below end and starts where this fetch does
    // (a store's start may also begin below it: retention took nothing of it yet).
    const stagedStart = staged.stats().startOffset;
    const starts = fetch.forInstall ? stagedStart === fetch.start : stagedStart <= fetch.start;
    if (!starts || staged.nextOffset > fetch.end || staged.nextOffset < fetch.start) {
      stores.removeStaging(fetch.key);
      staged = stores.openStaging(fetch.key);
      if (fetch.start > 0) staged.purge(fetch.start);
    }
    fetch.staged = staged;
    const fields = {
      namespace: fetch.key.namespace,
      incarnation: fetch.key.incarnation,
      from: staged.nextOffset,
      end: fetch.end,
      before_install: fetch.forInstall,
    };
    host.emit('info', 'store_backfill_started', fields);
    // A crash between adopting the staging log's segments left it ending at the store's start.
    if (staged.nextOffset === fetch.end) {
      this.complete(fetch);
      return false;
    }
    return true;
  }

  private request(fetch: Fetch): void {
    const host = this.host!;
    const staged = fetch.staged!;
    fetch.waiting = true;
    fetch.idleTicks = 0;
    host.sendRequest(fetch.peer, {
      nonce: fetch.nonce,
      store: fetch.key.namespace,
      incarnation: fetch.key.incarnation,
      fromOffset: staged.nextOffset,
      toOffset: fetch.end,
      bytesMax: this.options.bytesMax ?? BACKFILL_BYTES_MAX,
    });
  }

  /**
   * The peer refused, failed or stalled: the next one is asked. Once every peer failed in a row
   * the fetch waits a retry interval before the next round, so refusals never spin.
   */
  private failed(fetch: Fetch): void {
    const host = this.host!;
    fetch.waiting = false;
    fetch.failures += 1;
    fetch.peer = nextPeer(fetch.peer, host.replica, host.replicaCount);
    const round = fetch.failures >= host.replicaCount - 1;
    fetch.holdTicks = round ? host.retryTicks : 0;
    if (round) fetch.failures = 0;
  }

  private newFetch(
    key: StoreKey,
    start: number,
    end: number,
    forInstall: boolean,
    floorTimestampUs: number,
  ): Fetch {
    // The nonce and the first peer are the host's, drawn when the fetch starts.
    const fetch = { key, start, end, forInstall, floorTimestampUs, staged: null, nonce: 0n };
    return { ...fetch, peer: -1, waiting: false, idleTicks: 0, holdTicks: 0, failures: 0 };
  }
}

const EMPTY = new Uint8Array(0);

function nameOf(key: StoreKey): string {
  return `${key.namespace}.${key.incarnation}`;
}

/** The replica after `peer` in ring order, skipping `self` (itself when it is alone). */
function nextPeer(peer: number, self: number, count: number): number {
  if (count <= 1) return self;
  let next = (peer + 1) % count;
  if (next === self) next = (next + 1) % count;
  return next;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const total = parts.reduce((sum, part) => sum + part.byteLength, 0);
  const joined = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.byteLength;
  }
  return joined;
}

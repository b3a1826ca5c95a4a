/**
 * One full garbage collection once the replica is idle after something left payload-sized garbage.
 *
 * A checkpoint's payload is tens to hundreds of MiB in one buffer, handed to the main thread by
 * the encoding worker (a transferred buffer, which V8 does not even count as this isolate's
 * external memory). Once the transfer server lets it go (a peer holds the checkpoint too), it is
 * garbage; so is a whole snapshot read to check the file at rest. An idle process never collects
 * them: no allocation, so no collection. Measured in isolation: a worker hands the main thread
 * three 256 MiB buffers in turn, the last reference is dropped, and RSS stays at 565 MiB after 3 s
 * idle; one full collection (5 ms) brings it to 53 MiB within 0.5 s. In `bench transfer` at 64
 * MiB, a backup sampled after 12 s idle still counted 151 MiB of external memory where a heap
 * snapshot (which collects first) found 78 MiB live. Under load the collector runs anyway, so
 * this collects only once the commit number has not moved for one whole check interval and no
 * fetch or repair is served or made (`busy`), and only once per change of what it watches.
 *
 * Node exposes no collection without `--expose-gc`; V8 accepts the flag at run time, and a
 * context created afterwards has `gc` (`fullCollection`). Without it, nothing is collected.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

/** What the collector watches on the replica (its core's counters and commit number). */
export interface IdleCollectorView {
  /** Grows whenever payload-sized garbage may have been left (the caller's choice of counters). */
  readonly released: number;
  readonly commit: number;
  /**
   * Work that moves no commit: a peer fetching a checkpoint from this replica (and repairing the
   * ops above it), or this replica fetching one. A collection then would pause it.
   */
  readonly busy: boolean;
}

export class IdleCollector {
  /** Full collections run. */
  collections = 0;
  private readonly collect: () => void;
  /** `released` when the last collection ran (or at start): nothing to collect until it moves. */
  private releasedCollected: number;
  /** The commit number at the previous check: unchanged for one interval means idle. */
  private commitLast: number;

  constructor(collect: () => void, start: IdleCollectorView) {
    this.collect = collect;
    this.releasedCollected = start.released;
    this.commitLast = start.commit;
  }

  /** Called once per check interval; returns whether it collected. */
  check(view: IdleCollectorView): boolean {
    const idle = view.commit === this.commitLast && !view.busy;
    this.commitLast = view.commit;
    if (!idle || view.released === this.releasedCollected) return false;
    this.releasedCollected = view.released;
    this.collections += 1;
    this.collect();
    return true;
  }
}

/**
 * While this replica fetches a checkpoint, one young-generation collection each time `everyBytes`
 * more arrived. Every socket read of an accepted connection lands in a fresh 64 KiB buffer of
 * Node's (`onread` exists only for sockets a process dials) that only a collection frees, and V8
 * counted them as external memory long before it collected: +31 MiB of RSS growth over a 64 MiB
 * fetch (`bench transfer`), against +4 to +14 MiB with a collection every 4 to 8 MiB (each one
 * 0.5 to 1.2 ms here).
 */
export class FetchCollector {
  /** Young-generation collections run. */
  collections = 0;
  private readonly collect: () => void;
  private readonly everyBytes: number;
  /** The fetch's bytes received at the last collection (0: none yet in this session). */
  private collectedAt = 0;

  constructor(collect: () => void, everyBytes: number) {
    this.collect = collect;
    this.everyBytes = everyBytes;
  }

  /** Called once per tick with the fetch's progress; returns whether it collected. */
  check(progress: { readonly stage: string; readonly bytesDone: number }): boolean {
    if (progress.stage !== 'fetching') {
      this.collectedAt = 0;
      return false;
    }
    if (progress.bytesDone < this.collectedAt) this.collectedAt = 0; // a new session
    if (progress.bytesDone - this.collectedAt < this.everyBytes) return false;
    this.collectedAt = progress.bytesDone;
    this.collections += 1;
    this.collect();
    return true;
  }
}

/** V8's young-generation collection through the exposed `gc` (see `fullCollection`). */
export function minorCollection(gc: () => void): () => void {
  return () => (gc as (options: { type: 'minor' }) => void)({ type: 'minor' });
}

/** V8's full collection, exposed at run time; null if this runtime refuses. */
export function fullCollection(): (() => void) | null {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc: unknown = vm.runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}

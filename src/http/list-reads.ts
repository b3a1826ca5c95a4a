/**
 * The whole-state list reads (GetStreams and GetUsers over the binary protocol, `GET /streams`
 * and `GET /users` over HTTP): built in slices, one build at a time per list, and shared by
 * every read of the same state version.
 *
 * A list of every stream is the most expensive read there is (1,024 streams cost about 2.5 ms
 * to encode; the table holds up to a million), and it has no pagination in Iggy's protocol, so
 * an ordinary read-only user pipelining it, or asking for it from a few connections at once, held
 * a replica's event loop for seconds: its heartbeats stopped and the cluster changed view.
 * Three rules bound what any number of such readers cost:
 *   - A build runs in slices of LIST_SLICE entries with a turn of the event loop between them,
 *     so no list read holds the loop for longer than one slice (the replica's own messages, the
 *     other clients' requests and the commit path all run in between).
 *   - Reads at one state version (`MetadataStateMachine.version`) share one body: forty
 *     pipelined GetStreams build it once, and so do forty connections.
 *   - One build at a time per list: a read that arrives while an older version's build runs
 *     waits for it and then reads anew, so a stream of writes cannot stack up builds.
 *
 * Every read is answered from state at least as new as the state it arrived at, so a client
 * always sees its own committed writes. A build that spans writes (a large list under load) reads
 * each entry as it is when its slice runs, in ascending id order: entries that existed throughout
 * appear once each; ones created or deleted meanwhile may or may not. The body is the same bytes
 * a one-shot encoding of the same entries gives (test/unit/list-reads.test.ts).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BodyWriter } from '../metadata/body-io.js';
import { writeStreams, writeUsers } from '../metadata/binary-responses.js';
import type { StreamView, UserView } from '../metadata/queries.js';
import type { MetadataStateMachine } from '../metadata/state-machine.js';
import { assert } from '../stdx/assert.js';

/**
 * The content type of a list's JSON text, fastify's own for a serialized object: fastify sends a
 * string with a JSON content type as it is, without serializing it again.
 */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** Entries per slice: ~2-3 ms of encoding, well inside the replica's heartbeat budget. */
export const LIST_SLICE = 1_024;

/** How a list's entries are read, a slice at a time, and folded into one body. */
export interface ListSpec<V, A, T> {
  /** At most `limit` entries with ids `>= fromId`, ascending. */
  page(fromId: number, limit: number): V[];
  idOf(view: V): number;
  start(): A;
  add(accumulator: A, views: V[]): void;
  finish(accumulator: A): T;
}

/** Reads every entry of `spec` in slices of `slice`, yielding the event loop between them. */
export async function buildSliced<V, A, T>(spec: ListSpec<V, A, T>, slice = LIST_SLICE): Promise<T> {
  assert(Number.isSafeInteger(slice) && slice >= 1, 'a slice holds at least one entry');
  const accumulator = spec.start();
  let fromId = 0;
  for (;;) {
    const views = spec.page(fromId, slice);
    spec.add(accumulator, views);
    if (views.length < slice) return spec.finish(accumulator);
    fromId = spec.idOf(views[views.length - 1]!) + 1;
    await nextTurn();
  }
}

/** One list's body, shared per state version, built by at most one build at a time. */
export class SharedList<T> {
  private done: { readonly version: number; readonly value: T } | null = null;
  private running: { readonly version: number; readonly promise: Promise<T> } | null = null;
  /** Builds started (for tests and metrics: reads at one version share one). */
  builds = 0;

  private readonly version: () => number;
  private readonly build: () => Promise<T>;

  constructor(version: () => number, build: () => Promise<T>) {
    this.version = version;
    this.build = build;
  }

  get(): Promise<T> {
    const version = this.version();
    if (this.done !== null && this.done.version === version) return Promise.resolve(this.done.value);
    const running = this.running;
    if (running !== null) {
      if (running.version === version) return running.promise;
      // An older version's build: wait for it, then read anew (from a build at least as new).
      const again = (): Promise<T> => this.get();
      return running.promise.then(again, again);
    }
    this.builds += 1;
    const promise = this.build().then(
      (value) => {
        this.running = null;
        // Filed under the version it started at: a write during the build makes it stale.
        this.done = { version, value };
        return value;
      },
      (error: unknown) => {
        this.running = null;
        throw error;
      },
    );
    this.running = { version, promise };
    return promise;
  }
}

/** The binary bodies of GetStreams and GetUsers, and JSON texts of the HTTP routes. */
export class ListReads {
  readonly streamsBody: SharedList<Uint8Array>;
  readonly usersBody: SharedList<Uint8Array>;
  private readonly state: MetadataStateMachine;
  private readonly json = new Map<string, SharedList<string>>();

  constructor(state: MetadataStateMachine) {
    this.state = state;
    const version = (): number => state.version;
    const { queries } = state;
    this.streamsBody = new SharedList(version, () =>
      buildSliced(binarySpec<StreamView>((from, limit) => queries.streamsPage(from, limit), writeStreams)),
    );
    this.usersBody = new SharedList(version, () =>
      buildSliced(binarySpec<UserView>((from, limit) => queries.usersPage(from, limit), writeUsers)),
    );
  }

  /**
   * A JSON array of every stream, rendered and serialized entry by entry by `render` (one
   * element's JSON text each), under `key` (one list per route).
   */
  streamsJson(key: string, render: (view: StreamView) => string): Promise<string> {
    const { queries } = this.state;
    return this.jsonList(key, (from, limit) => queries.streamsPage(from, limit), render).get();
  }

  usersJson(key: string, render: (view: UserView) => string): Promise<string> {
    const { queries } = this.state;
    return this.jsonList(key, (from, limit) => queries.usersPage(from, limit), render).get();
  }

  private jsonList<V extends { readonly id: number }>(
    key: string,
    page: (fromId: number, limit: number) => V[],
    render: (view: V) => string,
  ): SharedList<string> {
    let list = this.json.get(key);
    if (list === undefined) {
      const spec: ListSpec<V, string[], string> = {
        page,
        idOf: (view) => view.id,
        start: () => [],
        add: (parts, views) => {
          for (const view of views) parts.push(render(view));
        },
        finish: (parts) => `[${parts.join(',')}]`,
      };
      list = new SharedList(() => this.state.version, () => buildSliced(spec));
      this.json.set(key, list);
    }
    return list;
  }
}

function binarySpec<V extends { readonly id: number }>(
  page: (fromId: number, limit: number) => V[],
  write: (writer: BodyWriter, views: readonly V[]) => void,
): ListSpec<V, BodyWriter, Uint8Array> {
  return {
    page,
    idOf: (view) => view.id,
    start: () => new BodyWriter(),
    add: (writer, views) => write(writer, views),
    finish: (writer) => writer.finish(),
  };
}

const instances = new WeakMap<MetadataStateMachine, ListReads>();

/**
 * The list reads of `state`, one per state machine: both edges of a replica (the binary port and
 * HTTP) share its builds without either having to be handed the other's.
 */
export function listReadsOf(state: MetadataStateMachine): ListReads {
  let reads = instances.get(state);
  if (reads === undefined) {
    reads = new ListReads(state);
    instances.set(state, reads);
  }
  return reads;
}

/**
 * A tiny deterministic state machine behind the real `StateMachine` interface, so the VSR core
 * can be simulated independently of the full metadata state machine (TigerBeetle's
 * `-Dvopr-state-machine=testing`). It keeps named streams and supports two operations:
 *
 * - CreateStream (128): body = UTF-8 name (1..64 bytes). Reply payload: the new id (u32 LE).
 *   Rejects a duplicate name with error 1012 (stream_name_already_exists).
 * - DeleteStream (130): body = id (u32 LE). Rejects an unknown id with 1009 (stream_id_not_found).
 *
 * Ids reuse the lowest free value, like the reference's slab. Its snapshot uses the real model
 * (streams without topics), so checkpoints exercise the real canonical encoder.
 */
import type { StreamSnapshot } from '../format/snapshot-model.js';
import { assert } from '../stdx/assert.js';
import type {
  ApplyInput,
  ApplyResult,
  StateMachine,
} from '../vsr/state-machine.js';
import type { MetadataMachineSnapshot } from '../format/snapshot-model.js';

export const TestOperation = { createStream: 128, deleteStream: 130 } as const;
export const TEST_ERROR_NAME_EXISTS = 1012;
export const TEST_ERROR_NOT_FOUND = 1009;
export const TEST_ERROR_INVALID = 1013;
const NAME_SIZE_MAX = 64;
const STREAMS_MAX = 10_000;

const decoder = new TextDecoder('utf-8', { fatal: true });
const EMPTY = new Uint8Array(0);

export class TestStateMachine implements StateMachine<MetadataMachineSnapshot> {
  private streams = new Map<number, StreamSnapshot>();
  /** Clients removed by logout or eviction, in order (what the checkers compare). */
  removedClients: bigint[] = [];

  apply(input: ApplyInput): ApplyResult {
    switch (input.operation) {
      case TestOperation.createStream: {
        let name: string;
        try {
          name = decoder.decode(input.body);
        } catch {
          return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
        }
        if (name.length === 0 || input.body.byteLength > NAME_SIZE_MAX) {
          return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
        }
        for (const stream of this.streams.values()) {
          if (stream.name === name) return { errorCode: TEST_ERROR_NAME_EXISTS, payload: EMPTY };
        }
        if (this.streams.size >= STREAMS_MAX) {
          return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
        }
        let id = 0;
        while (this.streams.has(id)) id += 1;
        this.streams.set(id, { id, name, createdAtUs: input.timestampUs, topics: [] });
        const payload = new Uint8Array(4);
        new DataView(payload.buffer).setUint32(0, id, true);
        return { errorCode: 0, payload };
      }
      case TestOperation.deleteStream: {
        if (input.body.byteLength !== 4) return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
        const id = new DataView(input.body.buffer, input.body.byteOffset, 4).getUint32(0, true);
        if (!this.streams.delete(id)) return { errorCode: TEST_ERROR_NOT_FOUND, payload: EMPTY };
        return { errorCode: 0, payload: EMPTY };
      }
      default:
        return { errorCode: TEST_ERROR_INVALID, payload: EMPTY };
    }
  }

  onClientRemoved(clientId: bigint): void {
    this.removedClients.push(clientId);
  }

  snapshot(): MetadataMachineSnapshot {
    const streams = [...this.streams.values()].sort((a, b) => a.id - b.id);
    return { users: [], streams, revokedTokens: [] };
  }

  restore(snapshot: MetadataMachineSnapshot): void {
    assert(
      snapshot.users.length === 0 && snapshot.revokedTokens.length === 0,
      'the test state machine has no users or tokens',
    );
    this.streams = new Map(snapshot.streams.map((stream) => [stream.id, stream]));
    this.removedClients = [];
  }

  get streamCount(): number {
    return this.streams.size;
  }
}

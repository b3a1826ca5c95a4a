/**
 * Handler discipline: a guard that holds names its reason, counted in `counters.drops` and logged
 * at debug level with that reason, and the debug record is not even built when debug is off.
 * One replica of three, fed hand-built frames.
 */
import { describe, expect, it } from 'vitest';
import { Command } from '../../src/constants.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import { DROP_REASONS } from '../../src/vsr/drop-reason.js';
import { buildFrame, decodeFrame, type DecodedFrame } from '../../src/vsr/frame.js';
import type { HeaderInput } from '../../src/vsr/header.js';
import type { LogLevel } from '../../src/vsr/io.js';
import { loneKernels, loneReplica } from '../support/lone-replica.js';

const kernels = loneKernels;
const CLUSTER = 0xd0_0b_0000n;

interface LogRecord {
  readonly level: LogLevel;
  readonly event: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

function harness(debugEnabled: boolean) {
  const records: LogRecord[] = [];
  const { replica, flush } = loneReplica({
    cluster: CLUSTER,
    bus: { sendToReplica: () => {}, sendToClient: () => {} },
    logger: { debugEnabled, log: (level, event, fields = {}) => records.push({ level, event, fields }) },
    prngSeed: 11,
  });
  return { replica, records, flush };
}

/** A sealed, decoded frame from `replica` in `view`, as the transport hands it to the core. */
type FrameInput = { command: number; view: number; replica: number } & Record<string, unknown>;

function frame(input: FrameInput): DecodedFrame {
  const common = { cluster: CLUSTER, release: 0, group: METADATA_GROUP };
  const full = { ...common, ...input } as unknown as HeaderInput;
  const decoded = decodeFrame(kernels, buildFrame(kernels, full));
  if (!decoded.ok) throw new Error(`test frame rejected: ${decoded.reason}`);
  return decoded;
}

const svc = (view: number, replica: number): DecodedFrame =>
  frame({ command: Command.startViewChange, view, replica });

function debugReasons(records: readonly LogRecord[]): unknown[] {
  const debug = records.filter((record) => record.level === 'debug');
  return debug.map((record) => record.fields['reason']);
}

describe('replica handlers name the guard that held', () => {
  it('a recovering replica drops a StartViewChange as status_recovering', () => {
    const { replica, records } = harness(true);
    expect(replica.status).toBe('recovering');
    replica.onMessage(svc(0, 1));
    expect(replica.counters.drops).toEqual({ status_recovering: 1 });
    expect(debugReasons(records)).toEqual(['status_recovering']);
    const record = records.find((candidate) => candidate.level === 'debug')!;
    expect(record.fields).toMatchObject({ command: 'startViewChange', from: 1, message_view: 0 });
    expect(record.fields).toMatchObject({ status: 'recovering', view: 0 });
  });

  it('a replica in a view change drops an older view\'s vote as older_view, counting each', () => {
    const { replica, records, flush } = harness(true);
    for (let tick = 0; tick < 100 && replica.status === 'recovering'; tick++) replica.tick();
    flush();
    expect(replica.status).toBe('view_change');
    expect(replica.view).toBe(1);
    replica.onMessage(svc(0, 1));
    replica.onMessage(svc(0, 2));
    expect(replica.counters.drops['older_view']).toBe(2);
    expect(debugReasons(records).filter((reason) => reason === 'older_view')).toHaveLength(2);
    // A vote for our view is counted, not dropped.
    const before = { ...replica.counters.drops };
    replica.onMessage(svc(1, 1));
    expect(replica.counters.drops).toEqual(before);
  });

  it('a StartView from a replica that does not lead its view: sender_not_primary', () => {
    const { replica } = harness(true);
    // View 2's primary is replica 2 (2 mod 3); replica 1 claims it.
    const fields = { op: 0, commit: 0, incarnation: 1n };
    const startView = frame({ command: Command.startView, view: 2, replica: 1, ...fields });
    replica.onMessage(startView);
    expect(replica.counters.drops).toEqual({ sender_not_primary: 1 });
    expect(replica.view).toBe(0);
  });

  it('the transfer server drops through the replica: refusals named, counted, debug-logged', () => {
    const { replica, records } = harness(true);
    const chunk = { offset: 0, len: 64, artifact: 0, nonce: 5n };
    replica.onMessage(frame({ command: Command.requestStateChunk, view: 0, replica: 1, ...chunk }));
    const transfer = { command: Command.requestStateTransfer, view: 0, replica: 2, nonce: 6n };
    replica.onMessage(frame(transfer));
    expect(replica.counters.drops).toEqual({ chunk_no_offer: 1, offer_not_ready: 1 });
    expect(replica.counters.offersRefused).toBe(2);
    expect(debugReasons(records)).toEqual(['chunk_no_offer', 'offer_not_ready']);
  });

  it('with debug off, drops are counted and no debug record is built', () => {
    const { replica, records } = harness(false);
    replica.onMessage(svc(0, 1));
    replica.onMessage(svc(0, 2));
    expect(replica.counters.drops).toEqual({ status_recovering: 2 });
    expect(records.filter((record) => record.level === 'debug')).toEqual([]);
  });

  it('drop reasons are stable, distinct snake_case strings', () => {
    expect(new Set(DROP_REASONS).size).toBe(DROP_REASONS.length);
    for (const reason of DROP_REASONS) expect(reason).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });
});

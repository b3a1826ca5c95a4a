/**
 * The replica's one send path: common header fields filled in one place, and persist-before-send
 * asserted for every command that advertises the view (src/vsr/send.ts). One replica of three,
 * driven by hand: its storage completes only when the test says so, its bus records frames.
 */
import type { MetadataMachineSnapshot } from '../../src/format/snapshot-model.js';
import { describe, expect, it } from 'vitest';
import { Command, HEADER_SIZE, HeaderOffset } from '../../src/constants.js';
import { AssertionError } from '../../src/stdx/assert.js';
import { METADATA_GROUP } from '../../src/vsr/config.js';
import { decodeFrame } from '../../src/vsr/frame.js';
import type { Header } from '../../src/vsr/header.js';
import { Replica } from '../../src/vsr/replica.js';
import { VIEW_FENCE } from '../../src/vsr/send.js';
import { loneKernels, loneReplica } from '../support/lone-replica.js';

const kernels = loneKernels;
const CLUSTER = 0x5e_9d_0000n;

/** A replica whose storage requests wait in `pending` and whose sends land in `sent`. */
function harness() {
  const sent: { target: number; frame: Uint8Array }[] = [];
  const { replica, pending, flush } = loneReplica({
    cluster: CLUSTER,
    bus: { sendToReplica: (target, frame) => sent.push({ target, frame }), sendToClient: () => {} },
    logger: { log: () => {} },
    prngSeed: 7,
  });
  const commands = (): number[] => sent.map((entry) => headerOf(entry.frame).command);
  return { replica, pending, sent, flush, commands };
}

function headerOf(frame: Uint8Array): Header {
  const decoded = decodeFrame(kernels, frame);
  if (!decoded.ok) throw new Error(`the replica sent an undecodable frame: ${decoded.reason}`);
  return decoded.header;
}

/** Ticks a recovering replica until its probes run out and it starts a view change. */
function electFromRecovery(replica: Replica<MetadataMachineSnapshot>): void {
  for (let tick = 0; tick < 100 && replica.status === 'recovering'; tick++) replica.tick();
  expect(replica.status).toBe('view_change');
}

describe('replica send path', () => {
  it('fills the common header fields of every frame it sends', () => {
    const { replica, sent } = harness();
    // A booting replica probes for a live view: RequestStartView to both peers.
    expect(sent.map((entry) => entry.target)).toEqual([1, 2]);
    for (const { frame } of sent) {
      expect(headerOf(frame)).toMatchObject({
        command: Command.requestStartView,
        cluster: CLUSTER,
        view: replica.view,
        release: 0,
        replica: 0,
        group: METADATA_GROUP,
      });
      expect(frame.byteLength).toBe(HEADER_SIZE);
    }
  });

  it('probes before the superblock is durable: RequestStartView advertises no view', () => {
    const { pending, commands } = harness();
    expect(pending.map((entry) => entry.request.kind)).toEqual(['superblock_write']);
    expect(commands()).toEqual([Command.requestStartView, Command.requestStartView]);
    expect(VIEW_FENCE[Command.requestStartView]).toBe(false);
  });

  it('withholds StartViewChange until the new view is durable, then sends it', () => {
    const { replica, sent, flush, commands } = harness();
    electFromRecovery(replica);
    expect(replica.view).toBe(1);
    expect(commands()).not.toContain(Command.startViewChange);
    flush();
    const command = (frame: Uint8Array): number | undefined => frame[HeaderOffset.command];
    const svc = sent.filter((entry) => command(entry.frame) === Command.startViewChange);
    expect(svc.map((entry) => entry.target)).toEqual([1, 2]);
    for (const { frame } of svc) expect(headerOf(frame).view).toBe(1);
  });

  it('asserts persist-before-send: a view-advertising frame before a durable view fires', () => {
    const { replica, sent, flush } = harness();
    electFromRecovery(replica);
    const before = sent.length;
    // Called directly, past the guard that withholds it: the one assertion stops it unsent.
    expect(() => replica['send']('peers', Command.startViewChange, {})).toThrow(AssertionError);
    const svc = (): void => replica['send']('peers', Command.startViewChange, {});
    expect(svc).toThrow(/persist-before-send/);
    expect(sent.length).toBe(before);
    // A command that carries the view as routing information only is not fenced.
    const range = { nonce: 5n, fromOp: 1, toOp: 1, committedOnly: 1 };
    replica['send'](1, Command.requestPrepares, range);
    expect(sent.length).toBe(before + 1);
    flush();
    // Durable now: the same send passes the fence.
    const durable = sent.length;
    replica['send']('peers', Command.startViewChange, {});
    expect(sent.length).toBe(durable + 2);
  });

  it('asserts the sender state of a fenced command even when the view is durable', () => {
    const { replica, flush } = harness();
    electFromRecovery(replica);
    flush();
    // In a view change, durable: a Commit heartbeat is an active primary's only.
    const commit = { commitChecksum: 0n, timestampMonotonic: 1, commit: 0, checkpointOp: 0 };
    const send = (): void => replica['send']('peers', Command.commit, commit);
    expect(send).toThrow(/only an active primary/);
  });

  it('lists every view-advertising command of the protocol in the fence table', () => {
    const fenced = Object.entries(VIEW_FENCE)
      .filter(([, fence]) => fence)
      .map(([command]) => Number(command))
      .sort((a, b) => a - b);
    expect(fenced).toEqual([
      Command.prepare,
      Command.prepareOk,
      Command.commit,
      Command.startViewChange,
      Command.doViewChange,
      Command.startView,
    ]);
  });
});

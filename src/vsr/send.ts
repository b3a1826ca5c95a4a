/**
 * What the replica's one send path (`Replica.send`) needs to know about each command it sends to
 * a peer. Every such command is listed, so a new one cannot be sent without deciding whether it
 * advertises the sender's view.
 */
import { Command } from '../constants.js';
import type { HeaderInputOf } from './header-types.js';

/**
 * Commands that advertise the sender's view (and log view) as a promise: "I am in view v and my
 * log is that of log view lv". A replica that sends one and then crashes before its superblock
 * holds v could restart in an older view and contradict it (vote twice, ack a prepare the new
 * view replaced). So each is sent only while the superblock durably holds the current view and
 * log view: persist-before-send, asserted by `Replica.send`. The others carry the view as routing
 * information only: a recovering replica probes before its first superblock write, repair and
 * state transfer serve or fetch bytes verified end to end, and a served prepare keeps the view it
 * was prepared in.
 */
export const VIEW_FENCE = {
  [Command.prepare]: true,
  [Command.prepareOk]: true,
  [Command.commit]: true,
  [Command.startViewChange]: true,
  [Command.doViewChange]: true,
  [Command.startView]: true,
  [Command.ping]: false,
  [Command.requestStartView]: false,
  [Command.requestPrepares]: false,
  [Command.repairPrepare]: false,
  [Command.repairDone]: false,
  [Command.rangeEvicted]: false,
  [Command.requestStateTransfer]: false,
  [Command.stateTransferTarget]: false,
  [Command.requestStateChunk]: false,
  [Command.stateChunk]: false,
  [Command.requestStoreRange]: false,
  [Command.storeRange]: false,
} as const;

/** The commands a replica sends to its peers. */
export type ReplicaSendCommand = keyof typeof VIEW_FENCE;

export function isReplicaSendCommand(command: number): command is ReplicaSendCommand {
  return Object.hasOwn(VIEW_FENCE, command);
}

/** Header fields `Replica.send` fills in for every frame: the sender's identity and view. */
export type CommonSendField = 'command' | 'cluster' | 'view' | 'release' | 'replica' | 'group';

/** What a caller of `Replica.send` supplies: the command's own fields. */
export type SendFields<C extends ReplicaSendCommand> = Omit<HeaderInputOf<C>, CommonSendField>;

/** A peer's replica index, or every peer but the sender. */
export type SendTarget = number | 'peers';

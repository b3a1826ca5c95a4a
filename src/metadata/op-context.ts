/**
 * What an operation handler sees, and the results it returns.
 *
 * Every handler runs all of its checks before its first mutation and returns before mutating
 * when `commit` is false. The primary's precheck and every replica's apply therefore run the same
 * code path and cannot disagree on a verdict for the same state, and a rejected operation leaves
 * the state untouched (a committed no-op).
 */
import type { ApplyResult } from '../vsr/state-machine.js';
import { ErrorCode } from './errors.js';
import type { MetadataState, UserState } from './state.js';
import type { StatsRegistry } from './stats-registry.js';

export interface OpContext {
  readonly state: MetadataState;
  readonly stats: StatsRegistry;
  /** The acting user, resolved from `ApplyInput.userId` (never from the body). */
  readonly actor: UserState;
  readonly clientId: bigint;
  readonly timestampUs: number;
  readonly op: number;
  /** False for precheck: validate only. */
  readonly commit: boolean;
}

const EMPTY = new Uint8Array(0);

export const OK: ApplyResult = Object.freeze({ errorCode: ErrorCode.ok, payload: EMPTY });

export function rejected(errorCode: ErrorCode): ApplyResult {
  return { errorCode, payload: new Uint8Array(0) };
}

/** Runs `checks` in order and returns the first non-ok code. */
export function firstError(...codes: readonly ErrorCode[]): ErrorCode {
  for (const code of codes) if (code !== ErrorCode.ok) return code;
  return ErrorCode.ok;
}

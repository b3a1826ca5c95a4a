/**
 * The receiver's target vote (src/vsr/state-transfer.ts `voteTarget`), pure: which checkpoint a
 * replica pulling state accepts from the offers and vouches of one session.
 */
import { describe, expect, it } from 'vitest';
import { voteTarget, type TransferSession } from '../../src/vsr/state-transfer.js';

type Session = Pick<TransferSession, 'targets' | 'vouchers'>;

function session(offers: [replica: number, op: number, id: bigint][], vouches: [replica: number, op: number, id: bigint][] = []): Session {
  const manifest = { chunkSize: 256, entries: [] };
  return {
    targets: new Map(offers.map(([replica, op, checksum]) => [replica, { op, checksum, commitMax: op, anchor: 1n, manifest }])),
    vouchers: new Map(vouches.map(([replica, op, checksum]) => [replica, { op, checksum }])),
  };
}

describe('voteTarget', () => {
  it('one offer is not enough under a quorum of two; two offers of the same id are', () => {
    expect(voteTarget(session([[1, 12, 0xan]]), 2, -1).best).toBeNull();
    expect(voteTarget(session([[1, 12, 0xan], [2, 12, 0xan]]), 2, -1).best).toEqual({ op: 12, checksum: 0xan, servers: [1, 2] });
  });

  it('a refusal naming the id vouches for an offer of it, but never stands alone', () => {
    expect(voteTarget(session([[1, 12, 0xan]], [[2, 12, 0xan]]), 2, -1).best).toEqual({ op: 12, checksum: 0xan, servers: [1] });
    expect(voteTarget(session([], [[1, 12, 0xan], [2, 12, 0xan]]), 2, -1).best).toBeNull();
  });

  it('a replica that offers and vouches counts once', () => {
    expect(voteTarget(session([[1, 12, 0xan]], [[1, 12, 0xan]]), 2, -1).best).toBeNull();
  });

  it('the newest checkpoint with a quorum wins', () => {
    const vote = voteTarget(session([[1, 12, 0xan], [2, 12, 0xan], [3, 24, 0xbn], [4, 24, 0xbn], [0, 36, 0xcn]]), 2, -1);
    expect(vote.best).toEqual({ op: 24, checksum: 0xbn, servers: [3, 4] });
    expect(vote.divergentOps).toEqual([]);
  });

  it('two ids for one op are a divergence: reported, never picked, also when one has a quorum', () => {
    const vote = voteTarget(session([[1, 12, 0xan], [2, 12, 0xan]], [[3, 12, 0xbn]]), 2, -1);
    expect(vote.best).toBeNull();
    expect(vote.divergentOps).toEqual([12]);
  });

  it('the fallback replica (the primary after stalls) is accepted alone', () => {
    expect(voteTarget(session([[1, 12, 0xan], [2, 24, 0xbn]]), 2, 2).best).toEqual({ op: 24, checksum: 0xbn, servers: [2] });
    expect(voteTarget(session([[1, 12, 0xan]]), 2, 2).best).toBeNull();
  });
});

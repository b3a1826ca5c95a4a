/**
 * A checkpoint captures the state machine's model at its op and the storage encodes it later (the
 * node on a worker thread, after more ops applied): the captured model must not see those ops.
 */
import { describe, expect, it } from 'vitest';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { Driver, ROOT, fullSnapshot, req } from './metadata-fixtures.js';

describe('checkpoint capture', () => {
  it('applying ops after the capture leaves the captured model encoding the same bytes', () => {
    const driver = new Driver();
    driver.created(ROOT, req.createStream('s1'));
    driver.created(ROOT, req.createTopic('s1', 't1', 4));
    driver.created(ROOT, req.createTopic('s1', 't2', 2));
    driver.created(ROOT, req.createGroup('s1', 't1', 'g'));
    expect(driver.code(ROOT, req.joinGroup('s1', 't1', 'g'), 10n)).toBe(0);
    const alice = driver.created(ROOT, req.createUser('alice', { global: 1, streams: [] }));
    expect(driver.code(alice, req.createPat('pat-a', 3))).toBe(0);
    const captured = fullSnapshot(driver.sm.snapshot(), 7);
    const before = snapshotEncodeTs(captured);

    // Every kind of write the model shares with the state: partitions added and deleted in place,
    // topics and streams renamed and removed, members rebalanced, users and tokens changed.
    // Deleting then adding rewrites the captured range of t1's column unless it is copied first.
    expect(driver.code(ROOT, req.deletePartitions('s1', 't1', 2))).toBe(0);
    expect(driver.code(ROOT, req.createPartitions('s1', 't1', 1))).toBe(0);
    expect(driver.code(ROOT, req.createPartitions('s1', 't1', 5))).toBe(0);
    expect(driver.code(ROOT, req.deletePartitions('s1', 't2', 1))).toBe(0);
    expect(driver.code(ROOT, req.joinGroup('s1', 't1', 'g'), 20n)).toBe(0);
    expect(driver.code(ROOT, req.updateTopic('s1', 't1', 't1b', { replicationFactor: 3 }))).toBe(0);
    expect(driver.code(ROOT, req.updateStream('s1', 's1b'))).toBe(0);
    expect(driver.code(ROOT, req.updatePermissions('alice', { global: 3, streams: [] }))).toBe(0);
    expect(driver.code(alice, req.createPat('pat-b', 4))).toBe(0);
    expect(driver.code(alice, req.deletePat('pat-a'))).toBe(0);
    expect(driver.code(ROOT, req.updateUser('alice', 'alice2'))).toBe(0);
    expect(driver.code(ROOT, req.deleteTopic('s1b', 't2'))).toBe(0);
    driver.created(ROOT, req.createStream('s2'));

    expect(snapshotEncodeTs(captured)).toEqual(before);
    // And the state did move on (the ops were not no-ops).
    expect(snapshotEncodeTs(fullSnapshot(driver.sm.snapshot(), 7))).not.toEqual(before);
  });
});

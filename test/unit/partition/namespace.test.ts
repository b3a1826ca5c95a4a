/**
 * Namespace packing (iggy-partition-plane.md §1.1: 20/12/20 bits, `stream << 32 | topic << 20 |
 * partition`) and the partition group assignment (docs/partition-plane.md). Expected packings are
 * worked out by hand from the layout.
 */
import { xxh32 as referenceXxh32 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import {
  METADATA_GROUP,
  PACKED_NAMESPACE_MAX,
  namespaceBytes,
  packNamespace,
  partitionGroupOf,
  unpackNamespace,
  type NamespaceParts,
} from '../../../src/partition/namespace.js';

function packed(streamId: number, topicId: number, partitionId: number): number {
  const result = packNamespace({ streamId, topicId, partitionId });
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

function refusal(parts: NamespaceParts): string {
  const result = packNamespace(parts);
  return result.ok ? 'packed' : result.reason;
}

describe('namespace', () => {
  it('packs stream into bits 32..51, topic into 20..31, partition into 0..19', () => {
    expect(packed(0, 0, 0)).toBe(0);
    expect(packed(0, 0, 1)).toBe(1);
    expect(packed(0, 1, 0)).toBe(0x10_0000);
    expect(packed(1, 0, 0)).toBe(0x1_0000_0000);
    expect(packed(5, 2, 7)).toBe(0x5_0020_0007);
    // Stream 4096 needs the 13th stream bit, which a 12-bit stream field would lose.
    expect(packed(4096, 0, 0)).toBe(0x1000_0000_0000);
    // 999,999 = 0xF423F; 4095 << 20 = 0xFFF0_0000; (2^20 - 1) << 32 = 0xF_FFFF_0000_0000.
    expect(packed(2 ** 20 - 1, 4095, 999_999)).toBe(0xf_ffff_ffff_423f);
  });

  it('refuses a component at or above its maximum instead of masking it', () => {
    expect(refusal({ streamId: 2 ** 20, topicId: 0, partitionId: 0 })).toBe(
      'stream id 1048576 out of range',
    );
    expect(refusal({ streamId: 0, topicId: 4096, partitionId: 0 })).toBe(
      'topic id 4096 out of range',
    );
    expect(refusal({ streamId: 0, topicId: 0, partitionId: 1_000_000 })).toBe(
      'partition id 1000000 out of range',
    );
    expect(refusal({ streamId: -1, topicId: 0, partitionId: 0 })).toBe('stream id -1 out of range');
    expect(refusal({ streamId: 0, topicId: 1.5, partitionId: 0 })).toBe(
      'topic id 1.5 out of range',
    );
  });

  it('unpacks what it packs', () => {
    for (const parts of [
      { streamId: 0, topicId: 0, partitionId: 0 },
      { streamId: 5, topicId: 2, partitionId: 7 },
      { streamId: 2 ** 20 - 1, topicId: 4095, partitionId: 999_999 },
      { streamId: 123_456, topicId: 17, partitionId: 654_321 },
    ]) {
      const group = BigInt(packed(parts.streamId, parts.topicId, parts.partitionId));
      expect(unpackNamespace(group)).toEqual({ ok: true, value: parts });
    }
  });

  it('unpack refuses the metadata group, bits above 52 and a partition field the max forbids', () => {
    expect(unpackNamespace(METADATA_GROUP)).toEqual({
      ok: false,
      reason: `group ${METADATA_GROUP} is not a partition namespace`,
    });
    expect(unpackNamespace(1n << 52n)).toEqual({
      ok: false,
      reason: `group ${1n << 52n} is not a partition namespace`,
    });
    expect(unpackNamespace(-1n).ok).toBe(false);
    // 0xFFFFF is a valid 20-bit field but partition 1,048,575 is not below 1,000,000.
    expect(unpackNamespace(0xf_ffffn)).toEqual({
      ok: false,
      reason: 'partition id 1048575 out of range',
    });
    expect(unpackNamespace(BigInt(PACKED_NAMESPACE_MAX)).ok).toBe(false);
  });

  it('encodes the namespace as 8 little-endian bytes', () => {
    expect([...namespaceBytes(0x5_0020_0007)]).toEqual([0x07, 0x00, 0x20, 0x00, 0x05, 0, 0, 0]);
  });

  it('a partition group is xxh32 of the 8 LE bytes mod G', () => {
    // Independent: the reference hash over bytes built here.
    const bytes = Buffer.alloc(8);
    bytes.writeBigUInt64LE(0x5_0020_0007n);
    expect(partitionGroupOf(packed(5, 2, 7), 16)).toBe(referenceXxh32(bytes, 0) % 16);
    // Eight zero bytes hash to 3736311059 (@node-rs/xxhash); mod 7 is 5.
    expect(partitionGroupOf(0, 7)).toBe(5);
    expect(partitionGroupOf(packed(5, 2, 7), 1)).toBe(0);
  });

  it('partition 0 of many topics spreads over a power-of-two group count', () => {
    const used = new Set<number>();
    for (let topic = 0; topic < 64; topic += 1) used.add(partitionGroupOf(packed(1, topic, 0), 8));
    expect(used.size).toBeGreaterThan(4);
  });

  it('a group count below 1 is a programming error', () => {
    expect(() => partitionGroupOf(0, 0)).toThrow();
  });
});

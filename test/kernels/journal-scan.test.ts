/**
 * Journal-scan kernel conformance: on clean, torn and corrupted WAL images every implementation
 * finds exactly the valid prefix and classifies the first failure as a torn tail (safe to
 * truncate) or interior corruption (refuse boot). Images are built field by field in
 * journal-fixtures.ts, independent of the wire codec.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HEADER_SIZE, HeaderOffset, MESSAGE_SIZE_MAX, PrepareOffset } from '../../src/constants.js';
import type { JournalScan, Kernels } from '../../src/kernels/kernel.js';
import { implementations } from './implementations.js';
import { buildImage, buildPrepare, consecutive, identityOf } from '../../src/testing/wal-image.js';

/** Re-seals an entry's identity after a deliberate field edit, to reach the later checks. */
function reseal(image: Uint8Array, offset: number): void {
  const header = image.subarray(offset, offset + HEADER_SIZE);
  new DataView(image.buffer, image.byteOffset + offset).setBigUint64(0, identityOf(header), true);
}

function expectClean(scan: JournalScan, length: number, count: number, lastOp: number): void {
  expect(scan).toEqual({ validEnd: length, entryCount: count, lastOp, failure: null });
}

describe.each(implementations)('journal scan ($label)', ({ kernels }) => {
  it('accepts an empty image', () => {
    expectClean(kernels.journalScan(new Uint8Array(0)), 0, 0, -1);
  });

  it('accepts a clean hash-chained image', () => {
    const { image } = buildImage(consecutive(50, 7));
    expectClean(kernels.journalScan(image), image.byteLength, 50, 56);
  });

  it('accepts header-only prepares and duplicate ops (the WAL layer applies last-wins)', () => {
    const { image } = buildImage([
      { op: 1, bodySize: 0 },
      { op: 2 },
      { op: 2 },
      { op: 3, bodySize: 0 },
    ]);
    expectClean(kernels.journalScan(image), image.byteLength, 4, 3);
  });

  it('classifies every truncation inside the last entry as a torn tail', () => {
    const { image, offsets } = buildImage(consecutive(6));
    const lastStart = offsets[5]!;
    for (let end = lastStart + 1; end < image.byteLength; end++) {
      const scan = kernels.journalScan(image.subarray(0, end));
      expect(scan.validEnd).toBe(lastStart);
      expect(scan.entryCount).toBe(5);
      expect(scan.lastOp).toBe(5);
      expect(scan.failure?.kind).toBe('torn_tail');
      expect(scan.failure?.offset).toBe(lastStart);
      const expected = end - lastStart < HEADER_SIZE ? 'header_truncated' : 'body_truncated';
      expect(scan.failure?.reason).toBe(expected);
    }
  });

  it('classifies a flipped byte in an interior entry as interior corruption', () => {
    const { image, offsets } = buildImage(consecutive(8));
    for (const [at, reason] of [
      [offsets[3]! + 5, 'identity'],
      [offsets[3]! + HeaderOffset.view, 'parent'], // the view is outside the identity
      [offsets[3]! + HEADER_SIZE + 3, 'body'],
    ] as const) {
      const damaged = image.slice();
      damaged[at]! ^= 0x04;
      const scan = kernels.journalScan(damaged);
      if (reason === 'parent') {
        // A re-stamped view keeps the identity: the entry is still valid.
        expectClean(scan, image.byteLength, 8, 8);
        continue;
      }
      expect(scan.validEnd).toBe(offsets[3]);
      expect(scan.entryCount).toBe(3);
      expect(scan.failure).toEqual({ offset: offsets[3], reason, kind: 'interior' });
    }
  });

  it('classifies a flipped byte in the last entry as a torn tail', () => {
    const { image, offsets } = buildImage(consecutive(4));
    const damaged = image.slice();
    damaged[offsets[3]! + HEADER_SIZE]! ^= 0x01;
    const scan = kernels.journalScan(damaged);
    expect(scan.failure).toEqual({ offset: offsets[3], reason: 'body', kind: 'torn_tail' });
  });

  it('classifies a zeroed block in the middle as interior corruption', () => {
    const { image, offsets } = buildImage(consecutive(10, 1, () => 900));
    const damaged = image.slice();
    damaged.fill(0, offsets[4]! + 100, offsets[4]! + 612);
    const scan = kernels.journalScan(damaged);
    expect(scan.failure?.kind).toBe('interior');
    expect(scan.failure?.offset).toBe(offsets[4]);
    expect(scan.entryCount).toBe(4);
  });

  it('detects a broken hash chain', () => {
    const { image, offsets } = buildImage([{ op: 1 }, { op: 2 }, { op: 3, parent: 42n }, { op: 4 }]);
    const scan = kernels.journalScan(image);
    expect(scan.failure).toEqual({ offset: offsets[2], reason: 'parent', kind: 'interior' });
    expect(scan.lastOp).toBe(2);
  });

  it('rejects sealed entries with a wrong command, size or non-zero reserved bytes', () => {
    const cases: [number, (view: DataView, frame: Uint8Array) => void, string][] = [
      [0, (_view, frame) => (frame[HeaderOffset.command] = 19), 'command'],
      [0, (view) => view.setUint32(HeaderOffset.size, MESSAGE_SIZE_MAX + 1, true), 'size'],
      [0, (view) => view.setUint32(HeaderOffset.size, 255, true), 'size'],
      [0, (_view, frame) => (frame[HeaderOffset.reservedFrame + 3] = 1), 'reserved'],
      [0, (_view, frame) => (frame[PrepareOffset.pad + 2] = 1), 'reserved'],
      [0, (_view, frame) => (frame[PrepareOffset.reserved + 27] = 1), 'reserved'],
    ];
    for (const [, edit, reason] of cases) {
      const { image, offsets } = buildImage(consecutive(3));
      const entry = image.subarray(offsets[1]!, offsets[2]!);
      edit(new DataView(entry.buffer, entry.byteOffset), entry);
      reseal(image, offsets[1]!);
      const scan = kernels.journalScan(image);
      expect(scan.failure?.reason).toBe(reason);
      expect(scan.failure?.offset).toBe(offsets[1]);
      expect(scan.failure?.kind).toBe('interior');
    }
  });

  it('never accepts an all-zero region as an entry', () => {
    const scan = kernels.journalScan(new Uint8Array(4096));
    expect(scan.failure).toEqual({ offset: 0, reason: 'identity', kind: 'torn_tail' });
  });

  it('scans unaligned input and input already in kernel memory', () => {
    const { image } = buildImage(consecutive(20));
    const host = new Uint8Array(image.byteLength + 9);
    host.set(image, 5);
    expectClean(kernels.journalScan(host.subarray(5, 5 + image.byteLength)), image.byteLength, 20, 20);
    const buffer = kernels.allocate(image.byteLength);
    buffer.bytes().set(image);
    expectClean(kernels.journalScan(buffer.bytes()), image.byteLength, 20, 20);
    buffer.release();
  });
});

/** The valid prefix of an image built from `count` entries with a fault applied. */
function scanAll(image: Uint8Array): JournalScan[] {
  return implementations.map(({ kernels }: { kernels: Kernels }) => kernels.journalScan(image));
}

describe('journal scan: random WALs with a torn tail or a flipped byte', () => {
  const entries = fc.array(fc.integer({ min: 0, max: 700 }), { minLength: 1, maxLength: 24 });

  it('a random torn tail leaves exactly the complete entries, classified torn_tail', () => {
    fc.assert(
      fc.property(entries, fc.double({ min: 0, max: 1, noNaN: true }), (sizes, cut) => {
        const { image, offsets } = buildImage(sizes.map((bodySize, index) => ({ op: index + 1, bodySize })));
        const end = Math.floor(cut * image.byteLength);
        const complete = offsets.filter((offset) => offset <= end).length - 1;
        const scans = scanAll(image.subarray(0, end));
        for (const scan of scans) {
          expect(scan.validEnd).toBe(offsets[complete]);
          expect(scan.entryCount).toBe(complete);
          expect(scan.lastOp).toBe(complete === 0 ? -1 : complete);
          if (end === offsets[complete]) expect(scan.failure).toBeNull();
          else expect(scan.failure?.kind).toBe('torn_tail');
          expect(scan).toEqual(scans[0]);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('a random flipped byte stops the scan at its entry, interior unless it is the last', () => {
    fc.assert(
      fc.property(entries, fc.nat(), fc.integer({ min: 1, max: 255 }), (sizes, at, mask) => {
        const { image, offsets } = buildImage(sizes.map((bodySize, index) => ({ op: index + 1, bodySize })));
        const flip = at % image.byteLength;
        const entry = offsets.findIndex((offset, index) => flip >= offset && flip < offsets[index + 1]!);
        const inView = flip - offsets[entry]! >= HeaderOffset.view && flip - offsets[entry]! < HeaderOffset.view + 4;
        const damaged = image.slice();
        damaged[flip]! ^= mask;
        const scans = scanAll(damaged);
        for (const scan of scans) {
          expect(scan).toEqual(scans[0]);
          if (inView) {
            expect(scan.failure).toBeNull();
            continue;
          }
          expect(scan.validEnd).toBe(offsets[entry]);
          expect(scan.entryCount).toBe(entry);
          expect(scan.failure?.offset).toBe(offsets[entry]);
          expect(scan.failure?.kind).toBe(entry === sizes.length - 1 ? 'torn_tail' : 'interior');
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a single prepare built by the fixture verifies on its own', () => {
    const frame = buildPrepare(1, 0n, 10);
    for (const scan of scanAll(frame)) expect(scan.failure).toBeNull();
  });
});

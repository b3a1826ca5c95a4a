/**
 * `vrmeta inspect snapshot|wal|superblock|partition PATH [--json]`: verify a data file (or a
 * partition directory) without changing it and print what it holds. Uses the same verification as
 * boot (journal scan, trailer split, the superblock verdict, the segment walk and its judgement),
 * so "inspect says valid" means "boot accepts it".
 *
 * Exit codes: 0 valid (including a WAL or last segment with a torn tail, which boot truncates, and
 * an index boot rebuilds; the report says so), 1 corrupt (boot would refuse), 2 usage error
 * (unknown kind, nothing at PATH).
 */
import type { Kernels } from '../kernels/kernel.js';
import { decodeSnapshot, peekSnapshotVersion, SnapshotDecodeError } from '../format/snapshot-codec.js';
import { SNAPSHOT_FORMAT_VERSIONS_READABLE, isReadableSnapshotVersion } from '../format/snapshot-model.js';
import { HEADER_SIZE } from '../constants.js';
import type { Disk } from './disk.js';
import { FsDisk, resolveDataPath } from './fs-disk.js';
import { hex, readPrepareFields } from './prepare-frame.js';
import { REFUSAL_REMEDY } from './refusal.js';
import { SNAPSHOT_FILE } from './snapshot-file.js';
import { judgeSuperblock, readSlot, SUPERBLOCK_FILES, type SlotRead, type StoredVsrState } from './superblock.js';
import { WAL_FILE } from './wal.js';
import { judgeScanFailure, scanSegment } from './partition-scan.js';
import { parseSegmentName, readBatchAt, segmentLogName } from './partition-segment.js';
import { decodeOffsetRecord, OFFSET_RECORD_SIZE, parseOffsetFileName } from './partition-offsets.js';

export const INSPECT_KINDS = ['snapshot', 'wal', 'superblock', 'partition'] as const;
export type InspectKind = (typeof INSPECT_KINDS)[number];

export const InspectExit = { valid: 0, corrupt: 1, usage: 2 } as const;
export type InspectExit = (typeof InspectExit)[keyof typeof InspectExit];

/** `--json` lists at most this many WAL entries; the summary covers the rest. */
export const INSPECT_WAL_ENTRIES_MAX = 1024;
/** The report lists at most this many segments and offset files; the summary covers the rest. */
export const INSPECT_PARTITION_ITEMS_MAX = 1024;

export interface InspectResult {
  readonly exitCode: InspectExit;
  /** JSON-safe (bigints as hex strings). */
  readonly report: Record<string, unknown>;
  /** What the CLI prints: the report as text, or as JSON with `--json`. */
  readonly output: string;
}

/**
 * The CLI entry point. `kind` and `path` come straight from argv; `path` is a file, or a data
 * directory (then the default file name, or both superblock slots, are used).
 */
export function runInspect(kind: string, path: string, options: { json: boolean; kernels: Kernels }): InspectResult {
  if (!(INSPECT_KINDS as readonly string[]).includes(kind)) {
    return usage(`unknown kind ${JSON.stringify(kind)}: expected ${INSPECT_KINDS.join(', ')}`, options.json);
  }
  const resolved = resolveDataPath(path);
  if (!resolved.exists) return usage(`nothing at ${path}`, options.json);
  if (kind === 'partition' && resolved.name !== null) return usage(`${path} is not a partition directory`, options.json);
  const disk = new FsDisk(resolved.directory);
  try {
    const typed = kind as InspectKind;
    if (typed === 'partition') {
      const { exitCode, report } = inspectPartition(disk, options.kernels);
      return { exitCode, report, output: options.json ? JSON.stringify(report, null, 2) : formatText(report) };
    }
    const defaultName = typed === 'wal' ? WAL_FILE : SNAPSHOT_FILE;
    const name = resolved.name ?? defaultName;
    if (typed !== 'superblock' && !disk.exists(name)) return usage(`no ${name} in ${resolved.directory}`, options.json);
    const { exitCode, report } =
      typed === 'wal'
        ? inspectWal(disk, name, options.kernels)
        : typed === 'snapshot'
          ? inspectSnapshot(disk, name, options.kernels)
          : inspectSuperblock(disk, options.kernels);
    return { exitCode, report, output: options.json ? JSON.stringify(report, null, 2) : formatText(report) };
  } finally {
    disk.close();
  }
}

function usage(message: string, json: boolean): InspectResult {
  const report = { status: 'usage_error', error: message };
  return { exitCode: InspectExit.usage, report, output: json ? JSON.stringify(report, null, 2) : `error: ${message}` };
}

// -------------------------------------------------------------------------------------------------

export function inspectWal(disk: Disk, name: string, kernels: Kernels): { exitCode: InspectExit; report: Record<string, unknown> } {
  const image = disk.readAll(name);
  const scan = kernels.journalScan(image);
  const entries: Record<string, unknown>[] = [];
  const opsSeen = new Set<number>();
  let duplicateOpCount = 0;
  let firstOp: number | null = null;
  let lastOp: number | null = null;
  let minOp: number | null = null;
  let maxOp: number | null = null;
  let commitMax: number | null = null;
  let offset = 0;
  while (offset + HEADER_SIZE <= scan.validEnd) {
    const fields = readPrepareFields(image.subarray(offset, offset + HEADER_SIZE));
    if (opsSeen.has(fields.op)) duplicateOpCount += 1;
    // Bounded by the file: one entry per verified frame of at least 256 bytes.
    opsSeen.add(fields.op);
    firstOp ??= fields.op;
    lastOp = fields.op;
    minOp = minOp === null ? fields.op : Math.min(minOp, fields.op);
    maxOp = maxOp === null ? fields.op : Math.max(maxOp, fields.op);
    commitMax = commitMax === null ? fields.commit : Math.max(commitMax, fields.commit);
    if (entries.length < INSPECT_WAL_ENTRIES_MAX) {
      entries.push({
        op: fields.op,
        offset,
        sizeBytes: fields.sizeBytes,
        view: fields.view,
        commit: fields.commit,
        identity: hex(fields.identity),
        parent: hex(fields.parent),
      });
    }
    offset += fields.sizeBytes;
  }
  let gapCount = 0;
  if (minOp !== null && maxOp !== null) gapCount = maxOp - minOp + 1 - opsSeen.size;
  const failure = scan.failure;
  const status = failure === null ? 'valid' : failure.kind === 'torn_tail' ? 'torn_tail' : 'corrupt';
  const report = {
    kind: 'wal',
    file: name,
    status,
    sizeBytes: image.byteLength,
    validEnd: scan.validEnd,
    entryCount: scan.entryCount,
    firstOp,
    lastOp,
    minOp,
    maxOp,
    distinctOpCount: opsSeen.size,
    duplicateOpCount,
    gapCount,
    commitMax,
    failure: failure === null ? null : { offset: failure.offset, reason: failure.reason, kind: failure.kind },
    note:
      status === 'torn_tail'
        ? `boot truncates ${image.byteLength - scan.validEnd} bytes (a torn final append)`
        : status === 'corrupt'
          ? `interior corruption: boot refuses; remedy: ${REFUSAL_REMEDY}`
          : null,
    entries,
    entriesTruncated: scan.entryCount > entries.length,
  };
  return { exitCode: status === 'corrupt' ? InspectExit.corrupt : InspectExit.valid, report };
}

export function inspectSnapshot(
  disk: Disk,
  name: string,
  kernels: Kernels,
): { exitCode: InspectExit; report: Record<string, unknown> } {
  const file = disk.readAll(name);
  const split = kernels.trailerSplit(file);
  const report: Record<string, unknown> = {
    kind: 'snapshot',
    file: name,
    status: 'corrupt', // Decided below; declared first so the text output leads with it.
    sizeBytes: file.byteLength,
    payloadSizeBytes: split.payload.byteLength,
    trailer: split.status === 'no_trailer' ? 'missing' : split.status,
  };
  const problems: string[] = [];
  if (split.status === 'valid') report['checksum'] = hex(split.checksum);
  if (split.status === 'checksum_mismatch') {
    report['trailerChecksum'] = hex(split.expected);
    report['payloadChecksum'] = hex(split.actual);
    problems.push('trailer checksum does not match the payload');
  }
  if (split.status === 'no_trailer') problems.push('no "ISNP" trailer (vrmeta always writes one)');
  if (split.status !== 'no_trailer') {
    try {
      const version = peekSnapshotVersion(split.payload);
      report['version'] = version;
      if (!isReadableSnapshotVersion(version)) problems.push(`format version ${String(version)}, this build reads ${SNAPSHOT_FORMAT_VERSIONS_READABLE.join(' and ')}`);
      else {
        const snapshot = decodeSnapshot(split.payload);
        report['sequenceNumber'] = snapshot.sequenceNumber;
        report['createdAtUs'] = snapshot.createdAtUs;
        report['writerRelease'] = snapshot.writerRelease;
        report['users'] = snapshot.users.length;
        report['streams'] = snapshot.streams.length;
        report['revokedTokens'] = snapshot.revokedTokens.length;
        report['clientTableEntries'] = snapshot.clientTable.length;
      }
    } catch (error) {
      if (!(error instanceof SnapshotDecodeError)) throw error;
      problems.push(`payload does not decode: ${error.message}`);
    }
  }
  report['status'] = problems.length === 0 ? 'valid' : 'corrupt';
  report['problems'] = problems;
  if (problems.length > 0) report['note'] = `boot refuses; remedy: ${REFUSAL_REMEDY}`;
  return { exitCode: problems.length === 0 ? InspectExit.valid : InspectExit.corrupt, report };
}

function stateReport(state: StoredVsrState): Record<string, unknown> {
  return {
    cluster: hex(state.cluster),
    replica: state.replica,
    replicaCount: state.replicaCount,
    view: state.view,
    logView: state.logView,
    commitMax: state.commitMax,
    checkpointOp: state.checkpointOp,
    checkpointChecksum: hex(state.checkpointChecksum),
    flags: state.flags,
    viewHeaderOps: viewHeaderOps(state.viewHeaders),
  };
}

/** The ops of the persisted view headers (canonical headers whose bodies the WAL lacks). */
function viewHeaderOps(bytes: Uint8Array | undefined): number[] {
  const ops: number[] = [];
  if (bytes === undefined) return ops;
  for (let offset = 0; offset + HEADER_SIZE <= bytes.byteLength; offset += HEADER_SIZE) {
    ops.push(readPrepareFields(bytes.subarray(offset, offset + HEADER_SIZE)).op);
  }
  return ops;
}

function slotReport(name: string, slot: SlotRead): Record<string, unknown> {
  switch (slot.status) {
    case 'absent':
      return { file: name, status: 'absent' };
    case 'corrupt':
      return { file: name, status: 'corrupt', sizeBytes: slot.sizeBytes, reason: slot.reason, detail: slot.detail };
    case 'valid':
      return {
        file: name,
        status: 'valid',
        sequence: slot.record.sequence,
        checksum: hex(slot.record.checksum, 8),
        parentChecksum: hex(slot.record.parentChecksum, 8),
        state: stateReport(slot.record.state),
      };
  }
}

export function inspectSuperblock(disk: Disk, kernels: Kernels): { exitCode: InspectExit; report: Record<string, unknown> } {
  const slots = [readSlot(disk, kernels, SUPERBLOCK_FILES[0]), readSlot(disk, kernels, SUPERBLOCK_FILES[1])] as const;
  const verdict = judgeSuperblock(slots);
  const report: Record<string, unknown> = {
    kind: 'superblock',
    status: 'corrupt', // Decided below; declared first so the text output leads with it.
    slots: slots.map((slot, index) => slotReport(SUPERBLOCK_FILES[index]!, slot)),
  };
  switch (verdict.status) {
    case 'fresh':
      report['status'] = 'fresh';
      report['note'] = 'no slot written yet: a fresh replica';
      return { exitCode: InspectExit.valid, report };
    case 'valid':
      report['status'] = 'valid';
      report['newest'] = SUPERBLOCK_FILES[verdict.slotIndex];
      report['sequence'] = verdict.newest.sequence;
      report['state'] = stateReport(verdict.newest.state);
      return { exitCode: InspectExit.valid, report };
    case 'refused':
      report['status'] = 'corrupt';
      report['refusal'] = { file: verdict.file, reason: verdict.reason, detail: verdict.detail };
      report['note'] = `boot refuses; remedy: ${REFUSAL_REMEDY}`;
      return { exitCode: InspectExit.corrupt, report };
  }
}

// -------------------------------------------------------------------------------------------------

/** The partition id boot would check every batch against: the first batch's, when it reads. */
function peekPartitionId(disk: Disk, kernels: Kernels, firstStart: number | undefined): number {
  if (firstStart === undefined) return 0;
  const file = segmentLogName(firstStart);
  const first = readBatchAt(disk, kernels, file, 0, disk.size(file));
  return first.ok ? first.header.partitionId : 0;
}

/**
 * A partition directory, read-only: every segment walked and judged as boot judges it, the
 * contiguity between segments, the indexes boot would rebuild, and the consumer offset files.
 */
export function inspectPartition(disk: Disk, kernels: Kernels): { exitCode: InspectExit; report: Record<string, unknown> } {
  const names = disk.list();
  const starts = names.map((name) => parseSegmentName(name, 'log')).filter((start) => start !== null);
  starts.sort((a, b) => a - b);
  const logStarts = new Set(starts);
  const orphanIndexes = names.filter((name) => {
    const start = parseSegmentName(name, 'index');
    return start !== null && !logStarts.has(start);
  });
  const partitionId = peekPartitionId(disk, kernels, starts[0]);
  const problems: string[] = [];
  const notes: string[] = [];
  const segments: Record<string, unknown>[] = [];
  let previousLast: number | null = null;
  let newestTimestampUs = 0;
  let messagesCount = 0;
  let sizeBytes = 0;
  for (const [ordinal, start] of starts.entries()) {
    const file = segmentLogName(start);
    if (previousLast !== null && start !== previousLast + 1) {
      problems.push(`${file}: segment_discontinuity: starts at ${start}, the previous segment ends at ${previousLast}`);
    }
    const scan = scanSegment(disk, kernels, start, partitionId, newestTimestampUs);
    if (scan.batchCount > 0) newestTimestampUs = scan.maxTimestampUs;
    let status = 'valid';
    if (scan.failure !== null) {
      const judged = judgeScanFailure(scan, ordinal === starts.length - 1);
      const at = `at ${scan.failure.position}`;
      if (judged.verdict === 'refuse') {
        status = judged.reason;
        problems.push(`${file}: ${judged.reason} ${at}: ${judged.detail}`);
      } else {
        status = 'torn_tail';
        notes.push(`${file}: torn tail ${at} (${scan.failure.reason}): boot truncates ${scan.fileSizeBytes - scan.validEnd} bytes`);
      }
    }
    if (scan.indexProblem !== null) notes.push(`${file}: index ${scan.indexProblem}: boot rebuilds it from the log`);
    if (segments.length < INSPECT_PARTITION_ITEMS_MAX) {
      segments.push({
        file,
        status,
        startOffset: start,
        lastOffset: scan.lastOffset,
        batches: scan.batchCount,
        messages: scan.messageCount,
        sizeBytes: scan.validEnd,
        maxTimestampUs: scan.maxTimestampUs,
        index: scan.indexProblem ?? 'ok',
      });
    }
    previousLast = scan.lastOffset;
    messagesCount += scan.messageCount;
    sizeBytes += scan.validEnd;
  }
  for (const name of orphanIndexes) notes.push(`${name}: no .log: boot removes it`);
  if (starts.length === 0) notes.push('no segment: boot creates an empty one at offset 0');
  const offsets = inspectOffsetFiles(disk, kernels, names, problems);
  const report: Record<string, unknown> = {
    kind: 'partition',
    status: problems.length > 0 ? 'corrupt' : 'valid',
    partitionId,
    segmentsCount: starts.length,
    messagesCount,
    sizeBytes,
    startOffset: starts[0] ?? null,
    endOffset: previousLast !== null && previousLast >= 0 ? previousLast : null,
    segments,
    offsets,
    problems,
    notes,
  };
  if (problems.length > 0) report['note'] = `boot refuses; remedy: ${REFUSAL_REMEDY}`;
  return { exitCode: problems.length > 0 ? InspectExit.corrupt : InspectExit.valid, report };
}

function inspectOffsetFiles(disk: Disk, kernels: Kernels, names: readonly string[], problems: string[]): Record<string, unknown>[] {
  const offsets: Record<string, unknown>[] = [];
  for (const name of names) {
    const key = parseOffsetFileName(name);
    if (key === null) continue;
    const size = disk.size(name);
    const read = size === OFFSET_RECORD_SIZE ? decodeOffsetRecord(kernels, disk.readAll(name)) : null;
    if (read === null || !read.ok) {
      const detail = read === null ? `${size} bytes, expected ${OFFSET_RECORD_SIZE}` : read.reason;
      problems.push(`${name}: consumer_offset_corrupt: ${detail}`);
      continue;
    }
    if (offsets.length < INSPECT_PARTITION_ITEMS_MAX) offsets.push({ file: name, kind: key.kind, id: key.id, offset: read.offset });
  }
  return offsets;
}

// -------------------------------------------------------------------------------------------------

/** `key: value` lines; nested objects indented, entry lists summarized. */
function formatText(report: Record<string, unknown>, indent = ''): string {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(report)) {
    if (key === 'entries') continue;
    if (value === null || value === undefined) continue;
    if (Array.isArray(value)) {
      if (value.length === 0) continue;
      lines.push(`${indent}${key}:`);
      for (const item of value) {
        if (typeof item === 'object' && item !== null) {
          lines.push(`${indent}  -`);
          lines.push(formatText(item as Record<string, unknown>, `${indent}    `));
        } else {
          lines.push(`${indent}  - ${String(item)}`);
        }
      }
    } else if (typeof value === 'object') {
      lines.push(`${indent}${key}:`);
      lines.push(formatText(value as Record<string, unknown>, `${indent}  `));
    } else {
      lines.push(`${indent}${key}: ${String(value)}`);
    }
  }
  return lines.join('\n');
}

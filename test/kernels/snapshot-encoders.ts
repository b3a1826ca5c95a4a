/**
 * Every snapshot encoder, for the conformance and property suites, plus the model's positional
 * form as generic msgpack libraries see it (the independent reference for the encoders).
 *
 * The WASM builds are required (a suite that silently skipped them would prove nothing).
 * VRMETA_TEST_WASM_DIR points at another build directory, for testing a kernel built privately
 * while the shared assembly/index.ts does not compile.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { snapshotEncodeTs } from '../../src/kernels/snapshot-encode-ts.js';
import { snapshotEncodeWasm } from '../../src/kernels/snapshot-encode-wasm.js';
import { WasmInstance, type WasmFlavor } from '../../src/kernels/wasm-instance.js';
import type { MetadataSnapshot } from '../../src/format/snapshot-model.js';

export interface SnapshotEncoder {
  readonly label: 'ts' | 'wasm-simd' | 'wasm-scalar';
  readonly encode: (snapshot: MetadataSnapshot) => Uint8Array;
  readonly instance: WasmInstance | null;
}

function wasmInstance(flavor: WasmFlavor): WasmInstance {
  const directory = process.env['VRMETA_TEST_WASM_DIR'];
  if (directory === undefined || directory === '') return new WasmInstance(flavor);
  return new WasmInstance(flavor, readFileSync(join(directory, flavor === 'simd' ? 'kernels-simd.wasm' : 'kernels.wasm')));
}

function wasmEncoder(label: 'wasm-simd' | 'wasm-scalar', flavor: WasmFlavor): SnapshotEncoder {
  const instance = wasmInstance(flavor);
  return { label, instance, encode: (snapshot) => snapshotEncodeWasm(instance, snapshot) };
}

/** A new encoder of the same kind: WASM ones get their own instance (fresh memory and sizes). */
export function freshSnapshotEncoder(label: SnapshotEncoder['label']): SnapshotEncoder {
  if (label === 'ts') return { label, encode: snapshotEncodeTs, instance: null };
  return wasmEncoder(label, label === 'wasm-simd' ? 'simd' : 'scalar');
}

export const snapshotEncoders: readonly SnapshotEncoder[] = [
  freshSnapshotEncoder('ts'),
  freshSnapshotEncoder('wasm-simd'),
  freshSnapshotEncoder('wasm-scalar'),
];

const TWO_POW_32 = 0x1_0000_0000;

/** Integers as msgpackr's `unpack` returns them: below 2^32 a number, from 2^32 up a bigint. */
function int(value: number | bigint): number | bigint {
  if (typeof value === 'bigint') return value < BigInt(TWO_POW_32) ? Number(value) : value;
  return value < TWO_POW_32 ? value : BigInt(value);
}

export function u128Bytes(value: bigint): Uint8Array {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, value >> 64n);
  view.setBigUint64(8, BigInt.asUintN(64, value));
  return bytes;
}

/**
 * The snapshot as the positional arrays of snapshot-model.ts. msgpackr's `unpack` of a canonical
 * encoding returns exactly this, and `@msgpack/msgpack`'s `encode(…, { useBigInt64: true })` of it
 * writes the canonical bytes (its bigints become uint64, its small numbers the smallest ints).
 */
export function positional(snapshot: MetadataSnapshot): unknown[] {
  return [
    int(snapshot.version),
    int(snapshot.createdAtUs),
    int(snapshot.sequenceNumber),
    snapshot.users.map((user) => [
      int(user.id),
      user.username,
      user.passwordHash,
      int(user.status),
      int(user.createdAtUs),
      user.permissions === null
        ? null
        : [
            int(user.permissions.global),
            user.permissions.streams.map((stream) => [
              int(stream.streamId),
              int(stream.bits),
              stream.topics.map((topic) => [int(topic.topicId), int(topic.bits)]),
            ]),
          ],
      user.tokens.map((token) => [token.name, token.tokenHash, token.expiryAtUs === null ? null : int(token.expiryAtUs)]),
    ]),
    snapshot.streams.map((stream) => [
      int(stream.id),
      stream.name,
      int(stream.createdAtUs),
      stream.topics.map((topic) => [
        int(topic.id),
        topic.name,
        int(topic.createdAtUs),
        int(topic.messageExpiryUs),
        int(topic.compressionAlgorithm),
        int(topic.maxTopicSizeBytes),
        int(topic.replicationFactor),
        // Version 4: the createdAtUs column as one bin (u64 little-endian, ids implicit).
        topic.partitionsCreatedAtUs,
        topic.consumerGroups.map((group) => [
          int(group.id),
          group.name,
          int(group.generation),
          group.members.map((member) => [int(member.id), u128Bytes(member.clientId), member.partitions.map(int)]),
        ]),
        // Version 3: the topic's explicit options.
        topic.options.map((option) => [option.key, option.value]),
        // Version 5: the topic's last purge.
        int(topic.purgedAtUs),
      ]),
    ]),
    snapshot.clientTable.map((client) => [
      int(client.slot),
      u128Bytes(client.clientId),
      int(client.epoch),
      int(client.userId),
      int(client.watermark),
      u128Bytes(client.watermarkChecksum),
      client.reply,
    ]),
    int(snapshot.writerRelease),
    snapshot.revokedTokens.map((token) => [token.jti, int(token.userId), int(token.expiryAtUs)]),
  ];
}

export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

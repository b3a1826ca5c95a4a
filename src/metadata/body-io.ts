/**
 * Little-endian readers and writers for operation bodies.
 *
 * The reader never throws: the first failure records a reason and every later read returns a
 * zero value, so a decoder reads straight through and asks `finish()` once. That keeps decoding of
 * untrusted bytes total without exceptions on the hot path.
 */
import { assert } from '../stdx/assert.js';
import type { Identifier } from './operations.js';
import { NAME_SIZE_MAX, PASSWORD_HASH_SIZE_MAX, isWellFormed } from './validation.js';

export const IdentifierKind = { numeric: 1, name: 2 } as const;

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

export class BodyReader {
  private readonly source: Uint8Array;
  private readonly view: DataView;
  private offset = 0;
  private reason: string | null = null;

  constructor(source: Uint8Array) {
    this.source = source;
    this.view = new DataView(source.buffer, source.byteOffset, source.byteLength);
  }

  get ok(): boolean {
    return this.reason === null;
  }

  /**
   * Records `reason` unless an earlier failure already did (the first reason is the useful one).
   */
  check(condition: boolean, reason: string): void {
    if (!condition && this.reason === null) this.reason = reason;
  }

  /** The failure reason, or null when every read succeeded and no byte is left over. */
  finish(): string | null {
    if (this.reason === null && this.offset !== this.source.byteLength) {
      this.reason = `${this.source.byteLength - this.offset} trailing bytes`;
    }
    return this.reason;
  }

  private take(size: number, field: string): number {
    if (this.reason !== null) return -1;
    if (this.offset + size > this.source.byteLength) {
      this.reason = `${field}: truncated`;
      return -1;
    }
    const at = this.offset;
    this.offset += size;
    return at;
  }

  u8(field: string): number {
    const at = this.take(1, field);
    return at < 0 ? 0 : this.view.getUint8(at);
  }

  u16(field: string): number {
    const at = this.take(2, field);
    return at < 0 ? 0 : this.view.getUint16(at, true);
  }

  u32(field: string): number {
    const at = this.take(4, field);
    return at < 0 ? 0 : this.view.getUint32(at, true);
  }

  u64(field: string): bigint {
    const at = this.take(8, field);
    return at < 0 ? 0n : this.view.getBigUint64(at, true);
  }

  /** A flag byte: only the bits in `known` may be set, so one meaning has one encoding. */
  flags(field: string, known: number): number {
    const value = this.u8(field);
    this.check((value & ~known) === 0, `${field}: unknown flag bits`);
    return value & known;
  }

  /** Absent optional fields must be zero for the same reason. */
  zeroUnless(present: boolean, value: number | bigint, field: string): void {
    this.check(present || value === 0 || value === 0n, `${field}: set while marked absent`);
  }

  /** Bytes not read yet (0 after a failure). */
  get remaining(): number {
    return this.reason === null ? this.source.byteLength - this.offset : 0;
  }

  /** Everything left: for a trailing block that runs to the end of the body. */
  rest(field: string): Uint8Array {
    return this.bytes(this.remaining, field);
  }

  bytes(size: number, field: string): Uint8Array {
    const at = this.take(size, field);
    return at < 0 ? new Uint8Array(size) : this.source.slice(at, at + size);
  }

  private text(size: number, field: string): string {
    const at = this.take(size, field);
    if (at < 0) return '';
    try {
      return decoder.decode(this.source.subarray(at, at + size));
    } catch {
      this.check(false, `${field}: invalid UTF-8`);
      return '';
    }
  }

  /** u32 size + UTF-8, bounded by `sizeMax` (a client context, a login's legacy version). */
  text32(field: string, sizeMax: number): string {
    const size = this.u32(field);
    this.check(size <= sizeMax, `${field}: ${size} bytes exceeds ${sizeMax}`);
    return this.reason === null ? this.text(size, field) : '';
  }

  /** u8 size + UTF-8. */
  name(field: string): string {
    return this.text(this.u8(field), field);
  }

  /** u16 size + UTF-8, bounded by PASSWORD_HASH_SIZE_MAX. */
  hash(field: string): string {
    const size = this.u16(field);
    this.check(size <= PASSWORD_HASH_SIZE_MAX, `${field}: exceeds PASSWORD_HASH_SIZE_MAX`);
    return this.reason === null ? this.text(size, field) : '';
  }

  identifier(field: string): Identifier {
    const kind = this.u8(field);
    const size = this.u8(field);
    if (kind === IdentifierKind.numeric) {
      this.check(size === 4, `${field}: numeric identifier size ${size}`);
      return { kind: 'id', id: this.reason === null ? this.u32(field) : 0 };
    }
    this.check(kind === IdentifierKind.name, `${field}: identifier kind ${kind}`);
    this.check(size >= 1, `${field}: empty identifier`);
    return { kind: 'name', name: this.reason === null ? this.text(size, field) : '' };
  }
}

export class BodyWriter {
  private buffer = new Uint8Array(256);
  private view = new DataView(this.buffer.buffer);
  private offset = 0;

  private ensure(size: number): void {
    if (this.offset + size <= this.buffer.byteLength) return;
    let capacity = this.buffer.byteLength * 2;
    while (capacity < this.offset + size) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.buffer.subarray(0, this.offset));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
  }

  u8(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 0xff, 'u8 in range');
    this.ensure(1);
    this.view.setUint8(this.offset, value);
    this.offset += 1;
  }

  u16(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 0xffff, 'u16 in range');
    this.ensure(2);
    this.view.setUint16(this.offset, value, true);
    this.offset += 2;
  }

  u32(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 0xffff_ffff, 'u32 in range');
    this.ensure(4);
    this.view.setUint32(this.offset, value, true);
    this.offset += 4;
  }

  u64(value: bigint): void {
    assert(value >= 0n && value <= 0xffff_ffff_ffff_ffffn, 'u64 in range');
    this.ensure(8);
    this.view.setBigUint64(this.offset, value, true);
    this.offset += 8;
  }

  f32(value: number): void {
    this.ensure(4);
    this.view.setFloat32(this.offset, value, true);
    this.offset += 4;
  }

  /** u32 size + UTF-8 (Iggy's length-prefixed strings in stats, clients, cluster metadata). */
  text32(value: string): void {
    const encoded = this.utf8(value);
    this.u32(encoded.byteLength);
    this.bytes(encoded);
  }

  bytes(value: Uint8Array): void {
    this.ensure(value.byteLength);
    this.buffer.set(value, this.offset);
    this.offset += value.byteLength;
  }

  private utf8(value: string): Uint8Array {
    // TextEncoder would silently replace a lone surrogate, changing the text that gets committed.
    assert(isWellFormed(value), 'text is well-formed UTF-16');
    return encoder.encode(value);
  }

  name(value: string): void {
    const encoded = this.utf8(value);
    assert(encoded.byteLength <= NAME_SIZE_MAX, 'name fits a u8 size');
    this.u8(encoded.byteLength);
    this.bytes(encoded);
  }

  hash(value: string): void {
    const encoded = this.utf8(value);
    assert(encoded.byteLength <= PASSWORD_HASH_SIZE_MAX, 'hash within PASSWORD_HASH_SIZE_MAX');
    this.u16(encoded.byteLength);
    this.bytes(encoded);
  }

  identifier(value: Identifier): void {
    if (value.kind === 'id') {
      this.u8(IdentifierKind.numeric);
      this.u8(4);
      this.u32(value.id);
      return;
    }
    const encoded = this.utf8(value.name);
    assert(
      encoded.byteLength >= 1 && encoded.byteLength <= NAME_SIZE_MAX,
      'identifier name size 1..=255',
    );
    this.u8(IdentifierKind.name);
    this.u8(encoded.byteLength);
    this.bytes(encoded);
  }

  finish(): Uint8Array {
    return this.buffer.slice(0, this.offset);
  }
}

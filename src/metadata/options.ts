/**
 * Resource options (Iggy `core/common/src/types/options/mod.rs`, cc269ef70): the option catalog per
 * scope, the parsing of client-sent string values by Iggy's config-file rules, and the stored form.
 *
 * Catalog. Topics accept eight keys; streams and users none yet (every key is refused by name,
 * never stored and ignored). Three topic keys are settings vrmeta already holds in typed fields
 * (compression_algorithm, message_expiry, max_topic_size): their values live only there. The other
 * five (partition runtime knobs) are create-only and stored as canonical text.
 *
 * Stored form (`TopicOptionEntry`): the keys the client set explicitly, ascending, keys unique;
 * `value` is the canonical text of a key without a typed field, null for a key whose value is the
 * typed field. A key not stored is derived: its value is the typed field or the catalog default.
 * Defaults are build constants (Iggy: "a build constant rather than a per-node value"), so every
 * replica renders the same derived values.
 */
import { ErrorCode } from './errors.js';
import { CompressionAlgorithm, U64_MAX } from '../format/snapshot-model.js';

export const OptionsScope = { topic: 1, stream: 2, user: 3 } as const;
export type OptionsScope = (typeof OptionsScope)[keyof typeof OptionsScope];

/** Iggy `OptionsScope::from_str`: exact lowercase names; null (InvalidCommand) otherwise. */
export function optionsScopeOf(name: string): OptionsScope | null {
  switch (name) {
    case 'topic':
      return OptionsScope.topic;
    case 'stream':
      return OptionsScope.stream;
    case 'user':
      return OptionsScope.user;
    default:
      return null;
  }
}

export const TopicOptionKey = {
  compressionAlgorithm: 'compression_algorithm',
  messageExpiry: 'message_expiry',
  maxTopicSize: 'max_topic_size',
  segmentSize: 'segment_size',
  enforceFsync: 'enforce_fsync',
  messagesRequiredToSave: 'messages_required_to_save',
  sizeOfMessagesRequiredToSave: 'size_of_messages_required_to_save',
  preallocateSegments: 'preallocate_segments',
} as const;
export type TopicOptionKey = (typeof TopicOptionKey)[keyof typeof TopicOptionKey];

/** Keys whose value is a typed field of the topic (stored once, there). */
export const TOPIC_FIELD_OPTION_KEYS: readonly string[] = [TopicOptionKey.compressionAlgorithm, TopicOptionKey.maxTopicSize, TopicOptionKey.messageExpiry];
/** Iggy `UPDATABLE_TOPIC_OPTION_KEYS`: the runtime knobs are create-only. */
export const UPDATABLE_TOPIC_OPTION_KEYS: readonly string[] = TOPIC_FIELD_OPTION_KEYS;

/** Iggy's bounds (mod.rs): segment size is a 512-byte multiple in 1 MiB..=1 GiB. */
export const MIN_TOPIC_SEGMENT_SIZE = 1024n * 1024n;
export const MAX_TOPIC_SEGMENT_SIZE = 1024n * 1024n * 1024n;
export const MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE = 1024n * 1024n * 1024n;
export const MAX_MESSAGES_REQUIRED_TO_SAVE = 16 * 1024 * 1024;
export const MAX_PREALLOCATED_TOPIC_BYTES = 64n * 1024n * 1024n * 1024n;

export const DEFAULT_SEGMENT_SIZE = 1024n * 1024n * 1024n;
export const DEFAULT_ENFORCE_FSYNC = false;
export const DEFAULT_MESSAGES_REQUIRED_TO_SAVE = 1024;
export const DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE = 1024n * 1024n;
export const DEFAULT_PREALLOCATE_SEGMENTS = false;

/** Iggy `HeaderKind` names (serde snake_case) and codes. */
export const OptionKind = { string: 2, bool: 3, uint32: 11, uint64: 12 } as const;
export type OptionKindCode = (typeof OptionKind)[keyof typeof OptionKind];
export const OPTION_KIND_NAMES: Readonly<Record<OptionKindCode, string>> = { 2: 'string', 3: 'bool', 11: 'uint32', 12: 'uint64' };

/** One catalog entry (Iggy `OptionSpec`): the default in the kind's little-endian encoding. */
export interface OptionSpec {
  readonly key: string;
  readonly kind: OptionKindCode;
  readonly defaultValue: Uint8Array;
  readonly description: string;
}

function u64Le(value: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return bytes;
}

function u32Le(value: number): Uint8Array {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, true);
  return bytes;
}

/** Iggy's topic catalog, in Iggy's order, with its descriptions (responses.rs). */
const TOPIC_CATALOG: readonly OptionSpec[] = Object.freeze([
  { key: TopicOptionKey.compressionAlgorithm, kind: OptionKind.string, defaultValue: new TextEncoder().encode('none'), description: 'Compression algorithm (none, gzip)' },
  {
    key: TopicOptionKey.messageExpiry,
    kind: OptionKind.uint64,
    defaultValue: u64Le(U64_MAX),
    description: 'Message expiry in microseconds, or a humantime string (e.g. 7 days)',
  },
  {
    key: TopicOptionKey.maxTopicSize,
    kind: OptionKind.uint64,
    defaultValue: u64Le(U64_MAX),
    description: 'Topic size cap in bytes, or a byte-size string (e.g. 1 GiB); must be at least the segment size',
  },
  {
    key: TopicOptionKey.segmentSize,
    kind: OptionKind.uint64,
    defaultValue: u64Le(DEFAULT_SEGMENT_SIZE),
    description: `Segment size in bytes, or a byte-size string (e.g. 128 MiB); a 512-byte multiple within ${MIN_TOPIC_SEGMENT_SIZE}..=${MAX_TOPIC_SEGMENT_SIZE}`,
  },
  { key: TopicOptionKey.enforceFsync, kind: OptionKind.bool, defaultValue: Uint8Array.of(0), description: "Whether writes to this topic's partitions fsync" },
  {
    key: TopicOptionKey.messagesRequiredToSave,
    kind: OptionKind.uint32,
    defaultValue: u32Le(DEFAULT_MESSAGES_REQUIRED_TO_SAVE),
    description: `Flush the journal once it holds this many messages; 1..=${MAX_MESSAGES_REQUIRED_TO_SAVE}. A threshold no segment can reach leaves committed messages in the journal, which a crash does not preserve`,
  },
  {
    key: TopicOptionKey.sizeOfMessagesRequiredToSave,
    kind: OptionKind.uint64,
    defaultValue: u64Le(DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE),
    description: `Flush the journal once it holds this many bytes, or a byte-size string; whichever threshold trips first flushes. At most ${MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE}`,
  },
  {
    key: TopicOptionKey.preallocateSegments,
    kind: OptionKind.bool,
    defaultValue: Uint8Array.of(0),
    description: `Reserve each segment's bytes up front where the filesystem supports it; pairs with segment_size. The reservation is real disk and runs inline on the owning shard, at every rotation and once per owned partition at boot, so segment_size * partitions_count is capped at ${MAX_PREALLOCATED_TOPIC_BYTES} bytes`,
  },
]);

/** The catalog of `scope` (Iggy `DescribeOptions`): streams and users have no keys yet. */
export function optionCatalog(scope: OptionsScope): readonly OptionSpec[] {
  return scope === OptionsScope.topic ? TOPIC_CATALOG : [];
}

/** Every topic catalog key, ascending (the order options render in). */
export const TOPIC_OPTION_KEYS_SORTED: readonly string[] = TOPIC_CATALOG.map((spec) => spec.key).sort();

/** A stored explicit option (module comment). */
export interface TopicOptionEntry {
  readonly key: string;
  readonly value: string | null;
}

/** Bound of a stored option list: one entry per catalog key. */
export const TOPIC_OPTIONS_MAX = TOPIC_CATALOG.length;

/** A refusal: Iggy's code (4041 unsupported key, 4042 invalid value, ...) and the key it names. */
export interface OptionRefusal {
  readonly code: ErrorCode;
  readonly key: string;
}

/** Iggy echoes at most this many characters of a refused key (`ERROR_KEY_PREVIEW_LEN`). */
export const OPTION_KEY_PREVIEW_LENGTH = 64;

export function keyPreview(key: string): string {
  return Array.from(key).slice(0, OPTION_KEY_PREVIEW_LENGTH).join('');
}

// ------------------------------------------------------------------------------------------
// Value parsers (Iggy's FromStr rules). Each returns null for a value Iggy refuses.

const BYTE_UNITS: Readonly<Record<string, bigint>> = {
  '': 1n,
  b: 1n,
  k: 1000n,
  kb: 1000n,
  ki: 1024n,
  kib: 1024n,
  m: 1000n ** 2n,
  mb: 1000n ** 2n,
  mi: 1024n ** 2n,
  mib: 1024n ** 2n,
  g: 1000n ** 3n,
  gb: 1000n ** 3n,
  gi: 1024n ** 3n,
  gib: 1024n ** 3n,
  t: 1000n ** 4n,
  tb: 1000n ** 4n,
  ti: 1024n ** 4n,
  tib: 1024n ** 4n,
  p: 1000n ** 5n,
  pb: 1000n ** 5n,
  pi: 1024n ** 5n,
  pib: 1024n ** 5n,
  e: 1000n ** 6n,
  eb: 1000n ** 6n,
  ei: 1024n ** 6n,
  eib: 1024n ** 6n,
};

/**
 * A byte size (Iggy `IggyByteSize::from_str`, the byte-unit crate): "0", "unlimited" and "none"
 * are 0; otherwise a decimal number, optional spaces and an optional unit (B, KB..EB decimal,
 * KiB..EiB binary, case-insensitive), whose product must be a whole number of bytes in u64.
 */
export function parseByteSize(text: string): bigint | null {
  if (text === '0' || text === 'unlimited' || text === 'Unlimited' || text === 'none' || text === 'None') return 0n;
  const match = /^\s*([0-9]+)(?:\.([0-9]+))?\s*([A-Za-z]*)\s*$/.exec(text);
  if (match === null) return null;
  const unit = BYTE_UNITS[match[3]!.toLowerCase()];
  if (unit === undefined) return null;
  const fraction = match[2] ?? '';
  const scale = 10n ** BigInt(fraction.length);
  const scaled = BigInt(match[1]! + fraction) * unit;
  if (scaled % scale !== 0n) return null;
  const bytes = scaled / scale;
  return bytes <= U64_MAX ? bytes : null;
}

/** humantime's units in nanoseconds (`parse_duration`; months and years as humantime counts them). */
const DURATION_UNITS_NS: Readonly<Record<string, bigint>> = (() => {
  const second = 1_000_000_000n;
  const table: Record<string, bigint> = {};
  const add = (names: string[], ns: bigint): void => {
    for (const name of names) table[name] = ns;
  };
  add(['nsec', 'ns'], 1n);
  add(['usec', 'us', 'µs'], 1000n);
  add(['msec', 'ms'], 1_000_000n);
  add(['seconds', 'second', 'sec', 's'], second);
  add(['minutes', 'minute', 'min', 'mins', 'm'], 60n * second);
  add(['hours', 'hour', 'hr', 'hrs', 'h'], 3600n * second);
  add(['days', 'day', 'd'], 86_400n * second);
  add(['weeks', 'week', 'w'], 604_800n * second);
  add(['months', 'month', 'M'], 2_630_016n * second);
  add(['years', 'year', 'y'], 31_557_600n * second);
  return table;
})();

/** Iggy caps an expiry at u32::MAX seconds (`IggyExpiry::from_str`). */
const EXPIRY_SECONDS_MAX = 0xffff_ffffn;

/**
 * A message expiry in µs (Iggy `IggyExpiry::from_str`): "unlimited"/"none"/"never_expire" are
 * u64::MAX, "default"/"server_default" are 0 (server default); otherwise a humantime duration
 * ("5s", "7 days", "1h 30m": integers with units, no bare number) of at most u32::MAX seconds.
 */
export function parseExpiry(text: string): bigint | null {
  switch (text) {
    case 'unlimited':
    case 'none':
    case 'None':
    case 'Unlimited':
    case 'never_expire':
      return U64_MAX;
    case 'default':
    case 'server_default':
    case 'Default':
    case 'Server_default':
      return 0n;
    default:
      break;
  }
  const trimmed = text.trim();
  if (trimmed.length === 0) return null;
  let totalNs = 0n;
  const pattern = /([0-9]+)\s*([A-Za-zµ]+)\s*/y;
  let at = 0;
  while (at < trimmed.length) {
    pattern.lastIndex = at;
    const match = pattern.exec(trimmed);
    if (match === null) return null;
    const unit = DURATION_UNITS_NS[match[2]!];
    if (unit === undefined) return null;
    totalNs += BigInt(match[1]!) * unit;
    at = pattern.lastIndex;
  }
  if (totalNs / 1_000_000_000n > EXPIRY_SECONDS_MAX) return null;
  return totalNs / 1000n;
}

/** Iggy `MaxTopicSize::from_str`: "unlimited" is u64::MAX, "0"/"server_default" 0, else a byte size. */
export function parseMaxTopicSize(text: string): bigint | null {
  if (text === 'unlimited') return U64_MAX;
  if (text === 'server_default') return 0n;
  return parseByteSize(text);
}

/** Rust `bool::from_str`: exactly "true" or "false". */
export function parseBool(text: string): boolean | null {
  return text === 'true' ? true : text === 'false' ? false : null;
}

/** Rust `u32::from_str`: ASCII digits with an optional leading '+'. */
export function parseU32(text: string): number | null {
  if (!/^\+?[0-9]+$/.test(text)) return null;
  const value = BigInt(text.startsWith('+') ? text.slice(1) : text);
  return value <= 0xffff_ffffn ? Number(value) : null;
}

/** Iggy `CompressionAlgorithm::from_str` (case-insensitive). */
export function parseCompression(text: string): CompressionAlgorithm | null {
  switch (text.toLowerCase()) {
    case 'none':
      return CompressionAlgorithm.none;
    case 'gzip':
      return CompressionAlgorithm.gzip;
    default:
      return null;
  }
}

// ------------------------------------------------------------------------------------------
// Create and update

/** Iggy `HeaderKey`/`HeaderValue` bounds: 1..=255 UTF-8 bytes. */
const OPTION_TEXT_SIZE_MAX = 255;

function utf8Size(text: string): number {
  return new TextEncoder().encode(text).byteLength;
}

/** A topic create's options, parsed: typed settings (null = server default) and the stored entries. */
export interface TopicCreateOptions {
  readonly compressionAlgorithm: number | null;
  readonly messageExpiryUs: bigint | null;
  readonly maxTopicSizeBytes: bigint | null;
  /** Explicit entries, ascending by key (the stored form). */
  readonly entries: readonly TopicOptionEntry[];
}

export interface TopicCreateInput {
  /** The string map of the request body (`options`), unsorted. */
  readonly raw: Readonly<Record<string, string>>;
  /** Typed body fields that are set (not the default / 0 sentinel): they win over `raw`. */
  readonly compressionAlgorithm: number | null;
  readonly messageExpiryUs: bigint | null;
  readonly maxTopicSizeBytes: bigint | null;
  readonly partitionsCount: number;
}

function refuse(code: ErrorCode, key: string): OptionRefusal {
  return { code, key: keyPreview(key) };
}

/**
 * Iggy's create admission (handlers.rs `create_topic`, `TopicCreateOptions::parse`): keys in
 * ascending order, the first that fails decides the answer: a key outside the catalog is 4041, a
 * value that does not parse or breaks its bound 4042; zero sentinels mean "server default" and are
 * not stored. Then the cross-key rules: the preallocation cap (4042 preallocate_segments) and the
 * topic size floor (InvalidTopicSize, checked by the caller with `topicSegmentSizeBytes`).
 */
export function parseTopicCreateOptions(input: TopicCreateInput): TopicCreateOptions | OptionRefusal {
  const keys = Object.keys(input.raw).sort();
  let compressionAlgorithm: number | null = null;
  let messageExpiryUs: bigint | null = null;
  let maxTopicSizeBytes: bigint | null = null;
  const entries: TopicOptionEntry[] = [];
  for (const key of keys) {
    const text = input.raw[key]!;
    const keySize = utf8Size(key);
    if (keySize === 0 || keySize > OPTION_TEXT_SIZE_MAX) return refuse(ErrorCode.unsupportedOptionKey, key);
    const valueSize = utf8Size(text);
    if (valueSize === 0 || valueSize > OPTION_TEXT_SIZE_MAX) return refuse(ErrorCode.invalidOptionValue, key);
    const parsed = parseTopicOptionValue(key, text);
    if (typeof parsed !== 'object') return refuse(parsed, key);
    switch (key) {
      case TopicOptionKey.compressionAlgorithm:
        compressionAlgorithm = parsed.compression;
        break;
      case TopicOptionKey.messageExpiry:
        messageExpiryUs = parsed.u64;
        break;
      case TopicOptionKey.maxTopicSize:
        maxTopicSizeBytes = parsed.u64;
        break;
      default:
        if (parsed.text !== null) entries.push({ key, value: parsed.text });
    }
  }
  // The typed body fields win on collision (Iggy inserts them after the raw entries).
  if (input.compressionAlgorithm !== null) compressionAlgorithm = input.compressionAlgorithm;
  if (input.messageExpiryUs !== null && input.messageExpiryUs !== 0n) messageExpiryUs = input.messageExpiryUs;
  if (input.maxTopicSizeBytes !== null && input.maxTopicSizeBytes !== 0n) maxTopicSizeBytes = input.maxTopicSizeBytes;
  // A zero sentinel resolves to the default: stored as derived, never as an explicit 0.
  if (messageExpiryUs === 0n) messageExpiryUs = null;
  if (maxTopicSizeBytes === 0n) maxTopicSizeBytes = null;
  if (compressionAlgorithm !== null) entries.push({ key: TopicOptionKey.compressionAlgorithm, value: null });
  if (messageExpiryUs !== null) entries.push({ key: TopicOptionKey.messageExpiry, value: null });
  if (maxTopicSizeBytes !== null) entries.push({ key: TopicOptionKey.maxTopicSize, value: null });
  entries.sort((left, right) => (left.key < right.key ? -1 : 1));
  const refusal = checkTopicOptionsTogether(entries, input.partitionsCount);
  if (refusal !== null) return refusal;
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes, entries: Object.freeze(entries) };
}

interface ParsedValue {
  readonly compression: number | null;
  readonly u64: bigint | null;
  /** The canonical stored text of a runtime knob; null when the value is the "default" sentinel. */
  readonly text: string | null;
}

const NO_VALUE: ParsedValue = { compression: null, u64: null, text: null };

/** One key's value by Iggy's rules (`absorb_strict`), or the refusal code. */
function parseTopicOptionValue(key: string, text: string): ParsedValue | ErrorCode {
  switch (key) {
    case TopicOptionKey.compressionAlgorithm: {
      const compression = parseCompression(text);
      return compression === null ? ErrorCode.invalidOptionValue : { ...NO_VALUE, compression };
    }
    case TopicOptionKey.messageExpiry: {
      const u64 = parseExpiry(text);
      return u64 === null ? ErrorCode.invalidOptionValue : { ...NO_VALUE, u64 };
    }
    case TopicOptionKey.maxTopicSize: {
      const u64 = parseMaxTopicSize(text);
      return u64 === null ? ErrorCode.invalidOptionValue : { ...NO_VALUE, u64 };
    }
    case TopicOptionKey.segmentSize: {
      const size = parseByteSize(text);
      if (size === null) return ErrorCode.invalidOptionValue;
      if (size === 0n) return NO_VALUE;
      if (size < MIN_TOPIC_SEGMENT_SIZE || size > MAX_TOPIC_SEGMENT_SIZE || size % 512n !== 0n) return ErrorCode.invalidOptionValue;
      return { ...NO_VALUE, text: size.toString() };
    }
    case TopicOptionKey.sizeOfMessagesRequiredToSave: {
      const size = parseByteSize(text);
      if (size === null || size > MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE) return ErrorCode.invalidOptionValue;
      return size === 0n ? NO_VALUE : { ...NO_VALUE, text: size.toString() };
    }
    case TopicOptionKey.messagesRequiredToSave: {
      const count = parseU32(text);
      if (count === null || count === 0 || count > MAX_MESSAGES_REQUIRED_TO_SAVE) return ErrorCode.invalidOptionValue;
      return { ...NO_VALUE, text: String(count) };
    }
    case TopicOptionKey.enforceFsync:
    case TopicOptionKey.preallocateSegments: {
      const flag = parseBool(text);
      return flag === null ? ErrorCode.invalidOptionValue : { ...NO_VALUE, text: String(flag) };
    }
    default:
      return ErrorCode.unsupportedOptionKey;
  }
}

function entryValue(entries: readonly TopicOptionEntry[], key: string): string | null {
  for (const entry of entries) if (entry.key === key) return entry.value;
  return null;
}

/** The topic's effective segment size (explicit entry or the default): the max_topic_size floor. */
export function topicSegmentSizeBytes(entries: readonly TopicOptionEntry[]): bigint {
  const value = entryValue(entries, TopicOptionKey.segmentSize);
  return value === null ? DEFAULT_SEGMENT_SIZE : BigInt(value);
}

/** Iggy `validate_preallocated_topic_bytes`, for a topic whose effective preallocation is on. */
function checkTopicOptionsTogether(entries: readonly TopicOptionEntry[], partitionsCount: number): OptionRefusal | null {
  const preallocate = entryValue(entries, TopicOptionKey.preallocateSegments);
  if ((preallocate ?? String(DEFAULT_PREALLOCATE_SEGMENTS)) === 'true') {
    if (topicSegmentSizeBytes(entries) * BigInt(partitionsCount) > MAX_PREALLOCATED_TOPIC_BYTES) {
      return refuse(ErrorCode.invalidOptionValue, TopicOptionKey.preallocateSegments);
    }
  }
  return null;
}

/**
 * The committed-body rule for stored entries (apply and the snapshot decoder both hold it): keys
 * strictly ascending and in the catalog, a field key without text, a knob key with its canonical
 * text (re-parsing it gives the same text), and the cross-key caps. ok or the refusal code.
 */
export function validateTopicOptionEntries(entries: readonly TopicOptionEntry[], partitionsCount: number): ErrorCode {
  if (entries.length > TOPIC_OPTIONS_MAX) return ErrorCode.unsupportedOptionKey;
  let previous = '';
  for (const entry of entries) {
    if (!(entry.key > previous)) return ErrorCode.invalidOptionValue;
    previous = entry.key;
    if (!TOPIC_OPTION_KEYS_SORTED.includes(entry.key)) return ErrorCode.unsupportedOptionKey;
    const isField = TOPIC_FIELD_OPTION_KEYS.includes(entry.key);
    if (isField !== (entry.value === null)) return ErrorCode.invalidOptionValue;
    if (entry.value !== null) {
      const parsed = parseTopicOptionValue(entry.key, entry.value);
      if (typeof parsed !== 'object' || parsed.text !== entry.value) return ErrorCode.invalidOptionValue;
    }
  }
  return checkTopicOptionsTogether(entries, partitionsCount)?.code ?? ErrorCode.ok;
}

/**
 * An update's options map (Iggy `TopicUpdateOptions`): only the updatable keys (4041 for any
 * other, first in key order), values by the create rules. Typed body fields win on collision.
 */
export interface TopicUpdateOptions {
  readonly compressionAlgorithm: number | null;
  readonly messageExpiryUs: bigint | null;
  readonly maxTopicSizeBytes: bigint | null;
}

export function parseTopicUpdateOptions(raw: Readonly<Record<string, string>>): TopicUpdateOptions | OptionRefusal {
  let compressionAlgorithm: number | null = null;
  let messageExpiryUs: bigint | null = null;
  let maxTopicSizeBytes: bigint | null = null;
  for (const key of Object.keys(raw).sort()) {
    const text = raw[key]!;
    const keySize = utf8Size(key);
    if (keySize === 0 || keySize > OPTION_TEXT_SIZE_MAX || !UPDATABLE_TOPIC_OPTION_KEYS.includes(key)) {
      return refuse(ErrorCode.unsupportedOptionKey, key);
    }
    const valueSize = utf8Size(text);
    if (valueSize === 0 || valueSize > OPTION_TEXT_SIZE_MAX) return refuse(ErrorCode.invalidOptionValue, key);
    const parsed = parseTopicOptionValue(key, text);
    if (typeof parsed !== 'object') return refuse(parsed, key);
    if (key === TopicOptionKey.compressionAlgorithm) compressionAlgorithm = parsed.compression;
    else if (key === TopicOptionKey.messageExpiry) messageExpiryUs = parsed.u64;
    else maxTopicSizeBytes = parsed.u64;
  }
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes };
}

/** Streams and users have no catalog keys: the first key (in order) is refused by name. */
export function refuseAnyOption(raw: Readonly<Record<string, string>> | undefined): OptionRefusal | null {
  if (raw === undefined) return null;
  const keys = Object.keys(raw).sort();
  return keys.length === 0 ? null : refuse(ErrorCode.unsupportedOptionKey, keys[0]!);
}

/** Marks the keys an update set as explicit (their values are the typed fields). */
export function withExplicitFields(entries: readonly TopicOptionEntry[], keys: readonly string[]): readonly TopicOptionEntry[] {
  const missing = keys.filter((key) => !entries.some((entry) => entry.key === key));
  if (missing.length === 0) return entries;
  const merged = [...entries, ...missing.map((key) => ({ key, value: null }))];
  merged.sort((left, right) => (left.key < right.key ? -1 : 1));
  return Object.freeze(merged);
}

// ------------------------------------------------------------------------------------------
// Rendering

/** The settings a topic holds in typed fields. */
export interface TopicFieldSettings {
  readonly compressionAlgorithm: number;
  readonly messageExpiryUs: bigint;
  readonly maxTopicSizeBytes: bigint;
}

const RUNTIME_DEFAULTS: Readonly<Record<string, string>> = {
  [TopicOptionKey.segmentSize]: DEFAULT_SEGMENT_SIZE.toString(),
  [TopicOptionKey.enforceFsync]: String(DEFAULT_ENFORCE_FSYNC),
  [TopicOptionKey.messagesRequiredToSave]: String(DEFAULT_MESSAGES_REQUIRED_TO_SAVE),
  [TopicOptionKey.sizeOfMessagesRequiredToSave]: DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE.toString(),
  [TopicOptionKey.preallocateSegments]: String(DEFAULT_PREALLOCATE_SEGMENTS),
};

export interface ResolvedOption {
  readonly key: string;
  /** Iggy's readable string form (`HeaderValue::to_string_value`): decimal numbers, true/false. */
  readonly value: string;
  readonly explicit: boolean;
}

/** Every catalog key of a topic with its effective value and provenance, ascending by key. */
export function resolveTopicOptions(fields: TopicFieldSettings, entries: readonly TopicOptionEntry[]): ResolvedOption[] {
  return TOPIC_OPTION_KEYS_SORTED.map((key) => {
    const entry = entries.find((candidate) => candidate.key === key);
    let value: string;
    if (key === TopicOptionKey.compressionAlgorithm) value = fields.compressionAlgorithm === CompressionAlgorithm.gzip ? 'gzip' : 'none';
    else if (key === TopicOptionKey.messageExpiry) value = fields.messageExpiryUs.toString();
    else if (key === TopicOptionKey.maxTopicSize) value = fields.maxTopicSizeBytes.toString();
    else value = entry?.value ?? RUNTIME_DEFAULTS[key]!;
    return { key, value, explicit: entry !== undefined };
  });
}

/**
 * The stored form of topic options and the rules a stored entry list obeys (Iggy
 * `core/common/src/types/options/mod.rs`, cc269ef70): the eight topic keys, their bounds and
 * defaults, and the parsing of values by Iggy's config-file rules. Pure and below the state
 * machine because the snapshot decoder (snapshot-codec.ts) holds a decoded topic to the same rule
 * that apply does; src/metadata/options.ts builds the catalog, admission and rendering on top and
 * maps a `TopicOptionFault` to its Iggy error code.
 *
 * Stored form (`TopicOptionEntry`): the keys the client set explicitly, ascending, keys unique;
 * `value` is the canonical text of a key without a typed field, null for a key whose value is the
 * typed field (compression_algorithm, message_expiry, max_topic_size).
 */
import { CompressionAlgorithm, U64_MAX } from './snapshot-model.js';

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
export const TOPIC_FIELD_OPTION_KEYS: readonly string[] = [
  TopicOptionKey.compressionAlgorithm,
  TopicOptionKey.maxTopicSize,
  TopicOptionKey.messageExpiry,
];

/** Every topic key, ascending (the order options are stored and render in). */
export const TOPIC_OPTION_KEYS_SORTED: readonly string[] = Object.values(TopicOptionKey).sort();

/** Bound of a stored option list: one entry per topic key. */
export const TOPIC_OPTIONS_MAX = TOPIC_OPTION_KEYS_SORTED.length;

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

/** A stored explicit option (module comment). */
export interface TopicOptionEntry {
  readonly key: string;
  readonly value: string | null;
}

/**
 * Why a key or value is refused, before it is an Iggy error code (metadata/options.ts maps
 * `unsupported_key` to 4041 UnsupportedOptionKey and `invalid_value` to 4042 InvalidOptionValue).
 */
export const TopicOptionFault = {
  unsupportedKey: 'unsupported_key',
  invalidValue: 'invalid_value',
} as const;
export type TopicOptionFault = (typeof TopicOptionFault)[keyof typeof TopicOptionFault];

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

/** The spellings Iggy's byte size reads as 0 ("no limit"). */
const BYTE_SIZE_ZERO: ReadonlySet<string> = new Set([
  '0',
  'unlimited',
  'Unlimited',
  'none',
  'None',
]);

/**
 * A byte size (Iggy `IggyByteSize::from_str`, the byte-unit crate): "0", "unlimited" and "none"
 * are 0; otherwise a decimal number, optional spaces and an optional unit (B, KB..EB decimal,
 * KiB..EiB binary, case-insensitive), whose product must be a whole number of bytes in u64.
 */
export function parseByteSize(text: string): bigint | null {
  if (BYTE_SIZE_ZERO.has(text)) return 0n;
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

/**
 * humantime's units in nanoseconds (`parse_duration`; months and years as humantime counts
 * them).
 */
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

/**
 * Iggy `MaxTopicSize::from_str`: "unlimited" is u64::MAX, "0"/"server_default" 0, else a byte
 * size.
 */
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
// One key's value, and a stored entry list as a whole

export interface ParsedTopicOptionValue {
  readonly compression: number | null;
  readonly u64: bigint | null;
  /** The canonical stored text of a runtime knob; null when the value is the "default" sentinel. */
  readonly text: string | null;
}

const NO_VALUE: ParsedTopicOptionValue = { compression: null, u64: null, text: null };

/** A typed-field key's value by Iggy's rules, or the fault; null for a key without a field. */
function parseFieldValue(
  key: string,
  text: string,
): ParsedTopicOptionValue | TopicOptionFault | null {
  switch (key) {
    case TopicOptionKey.compressionAlgorithm: {
      const compression = parseCompression(text);
      return compression === null ? TopicOptionFault.invalidValue : { ...NO_VALUE, compression };
    }
    case TopicOptionKey.messageExpiry: {
      const u64 = parseExpiry(text);
      return u64 === null ? TopicOptionFault.invalidValue : { ...NO_VALUE, u64 };
    }
    case TopicOptionKey.maxTopicSize: {
      const u64 = parseMaxTopicSize(text);
      return u64 === null ? TopicOptionFault.invalidValue : { ...NO_VALUE, u64 };
    }
    default:
      return null;
  }
}

/** A runtime knob's value by Iggy's rules (canonical text), or the fault. */
function parseKnobValue(key: string, text: string): ParsedTopicOptionValue | TopicOptionFault {
  const invalid = TopicOptionFault.invalidValue;
  switch (key) {
    case TopicOptionKey.segmentSize: {
      const size = parseByteSize(text);
      if (size === null) return invalid;
      if (size === 0n) return NO_VALUE;
      const inRange = size >= MIN_TOPIC_SEGMENT_SIZE && size <= MAX_TOPIC_SEGMENT_SIZE;
      if (!inRange || size % 512n !== 0n) return invalid;
      return { ...NO_VALUE, text: size.toString() };
    }
    case TopicOptionKey.sizeOfMessagesRequiredToSave: {
      const size = parseByteSize(text);
      if (size === null || size > MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE) return invalid;
      return size === 0n ? NO_VALUE : { ...NO_VALUE, text: size.toString() };
    }
    case TopicOptionKey.messagesRequiredToSave: {
      const count = parseU32(text);
      if (count === null || count === 0 || count > MAX_MESSAGES_REQUIRED_TO_SAVE) return invalid;
      return { ...NO_VALUE, text: String(count) };
    }
    case TopicOptionKey.enforceFsync:
    case TopicOptionKey.preallocateSegments: {
      const flag = parseBool(text);
      return flag === null ? invalid : { ...NO_VALUE, text: String(flag) };
    }
    default:
      return TopicOptionFault.unsupportedKey;
  }
}

/** One key's value by Iggy's rules (`absorb_strict`), or the fault. */
export function parseTopicOptionValue(
  key: string,
  text: string,
): ParsedTopicOptionValue | TopicOptionFault {
  return parseFieldValue(key, text) ?? parseKnobValue(key, text);
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

/**
 * Iggy `validate_preallocated_topic_bytes`: true when the effective preallocation is on and
 * segment_size * partitions_count exceeds the cap (refused as preallocate_segments).
 */
export function preallocationExceeded(
  entries: readonly TopicOptionEntry[],
  partitionsCount: number,
): boolean {
  const preallocate = entryValue(entries, TopicOptionKey.preallocateSegments);
  if ((preallocate ?? String(DEFAULT_PREALLOCATE_SEGMENTS)) !== 'true') return false;
  return topicSegmentSizeBytes(entries) * BigInt(partitionsCount) > MAX_PREALLOCATED_TOPIC_BYTES;
}

/**
 * The committed-body rule for stored entries (apply and the snapshot decoder both hold it): keys
 * strictly ascending and known, a field key without text, a knob key with its canonical text
 * (re-parsing it gives the same text), and the cross-key caps. Null when they hold, else the fault.
 */
export function topicOptionEntriesFault(
  entries: readonly TopicOptionEntry[],
  partitionsCount: number,
): TopicOptionFault | null {
  if (entries.length > TOPIC_OPTIONS_MAX) return TopicOptionFault.unsupportedKey;
  let previous = '';
  for (const entry of entries) {
    if (!(entry.key > previous)) return TopicOptionFault.invalidValue;
    previous = entry.key;
    if (!TOPIC_OPTION_KEYS_SORTED.includes(entry.key)) return TopicOptionFault.unsupportedKey;
    const isField = TOPIC_FIELD_OPTION_KEYS.includes(entry.key);
    if (isField !== (entry.value === null)) return TopicOptionFault.invalidValue;
    if (entry.value !== null) {
      const parsed = parseTopicOptionValue(entry.key, entry.value);
      if (typeof parsed !== 'object' || parsed.text !== entry.value) {
        return TopicOptionFault.invalidValue;
      }
    }
  }
  return preallocationExceeded(entries, partitionsCount) ? TopicOptionFault.invalidValue : null;
}

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
import {
  DEFAULT_ENFORCE_FSYNC,
  DEFAULT_MESSAGES_REQUIRED_TO_SAVE,
  DEFAULT_PREALLOCATE_SEGMENTS,
  DEFAULT_SEGMENT_SIZE,
  DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE,
  MAX_MESSAGES_REQUIRED_TO_SAVE,
  MAX_PREALLOCATED_TOPIC_BYTES,
  MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE,
  MAX_TOPIC_SEGMENT_SIZE,
  MIN_TOPIC_SEGMENT_SIZE,
  parseTopicOptionValue as parseStoredTopicOptionValue,
  preallocationExceeded,
  TOPIC_FIELD_OPTION_KEYS,
  TOPIC_OPTION_KEYS_SORTED,
  topicOptionEntriesFault,
  TopicOptionFault,
  TopicOptionKey,
  type ParsedTopicOptionValue,
  type TopicOptionEntry,
} from '../format/topic-options.js';

// The stored form's keys, bounds, defaults and value parsers live in the format layer (the
// snapshot decoder holds decoded topics to the same rules); re-exported so the state machine's
// callers name options from one place (this module's own definitions win over a same name).
export * from '../format/topic-options.js';

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

/** Iggy `UPDATABLE_TOPIC_OPTION_KEYS`: the runtime knobs are create-only. */
export const UPDATABLE_TOPIC_OPTION_KEYS: readonly string[] = TOPIC_FIELD_OPTION_KEYS;

/** Iggy `HeaderKind` names (serde snake_case) and codes. */
export const OptionKind = { string: 2, bool: 3, uint32: 11, uint64: 12 } as const;
export type OptionKindCode = (typeof OptionKind)[keyof typeof OptionKind];
export const OPTION_KIND_NAMES: Readonly<Record<OptionKindCode, string>> = {
  2: 'string',
  3: 'bool',
  11: 'uint32',
  12: 'uint64',
};

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
  {
    key: TopicOptionKey.compressionAlgorithm,
    kind: OptionKind.string,
    defaultValue: new TextEncoder().encode('none'),
    description: 'Compression algorithm (none, gzip)',
  },
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
    description:
      'Topic size cap in bytes, or a byte-size string (e.g. 1 GiB); ' +
      'must be at least the segment size',
  },
  {
    key: TopicOptionKey.segmentSize,
    kind: OptionKind.uint64,
    defaultValue: u64Le(DEFAULT_SEGMENT_SIZE),
    description:
      'Segment size in bytes, or a byte-size string (e.g. 128 MiB); ' +
      `a 512-byte multiple within ${MIN_TOPIC_SEGMENT_SIZE}..=${MAX_TOPIC_SEGMENT_SIZE}`,
  },
  {
    key: TopicOptionKey.enforceFsync,
    kind: OptionKind.bool,
    defaultValue: Uint8Array.of(0),
    description: "Whether writes to this topic's partitions fsync",
  },
  {
    key: TopicOptionKey.messagesRequiredToSave,
    kind: OptionKind.uint32,
    defaultValue: u32Le(DEFAULT_MESSAGES_REQUIRED_TO_SAVE),
    description:
      `Flush the journal once it holds this many messages; 1..=${MAX_MESSAGES_REQUIRED_TO_SAVE}. ` +
      'A threshold no segment can reach leaves committed messages in the journal, ' +
      'which a crash does not preserve',
  },
  {
    key: TopicOptionKey.sizeOfMessagesRequiredToSave,
    kind: OptionKind.uint64,
    defaultValue: u64Le(DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE),
    description:
      'Flush the journal once it holds this many bytes, or a byte-size string; ' +
      `whichever threshold trips first flushes. At most ${MAX_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE}`,
  },
  {
    key: TopicOptionKey.preallocateSegments,
    kind: OptionKind.bool,
    defaultValue: Uint8Array.of(0),
    description:
      "Reserve each segment's bytes up front where the filesystem supports it; " +
      'pairs with segment_size. The reservation is real disk and runs inline on the owning ' +
      'shard, at every rotation and once per owned partition at boot, so ' +
      `segment_size * partitions_count is capped at ${MAX_PREALLOCATED_TOPIC_BYTES} bytes`,
  },
]);

/** The catalog of `scope` (Iggy `DescribeOptions`): streams and users have no keys yet. */
export function optionCatalog(scope: OptionsScope): readonly OptionSpec[] {
  return scope === OptionsScope.topic ? TOPIC_CATALOG : [];
}

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
// Create and update

/** Iggy `HeaderKey`/`HeaderValue` bounds: 1..=255 UTF-8 bytes. */
const OPTION_TEXT_SIZE_MAX = 255;

function utf8Size(text: string): number {
  return new TextEncoder().encode(text).byteLength;
}

/** An option key or value is 1..=OPTION_TEXT_SIZE_MAX bytes of UTF-8. */
function optionTextFits(text: string): boolean {
  const size = utf8Size(text);
  return size !== 0 && size <= OPTION_TEXT_SIZE_MAX;
}

/**
 * A topic create's options, parsed: typed settings (null = server default) and the stored entries.
 */
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
export function parseTopicCreateOptions(
  input: TopicCreateInput,
): TopicCreateOptions | OptionRefusal {
  const keys = Object.keys(input.raw).sort();
  let compressionAlgorithm: number | null = null;
  let messageExpiryUs: bigint | null = null;
  let maxTopicSizeBytes: bigint | null = null;
  const entries: TopicOptionEntry[] = [];
  for (const key of keys) {
    const text = input.raw[key]!;
    if (!optionTextFits(key)) return refuse(ErrorCode.unsupportedOptionKey, key);
    if (!optionTextFits(text)) return refuse(ErrorCode.invalidOptionValue, key);
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
  if (input.messageExpiryUs !== null && input.messageExpiryUs !== 0n) {
    messageExpiryUs = input.messageExpiryUs;
  }
  if (input.maxTopicSizeBytes !== null && input.maxTopicSizeBytes !== 0n) {
    maxTopicSizeBytes = input.maxTopicSizeBytes;
  }
  // A zero sentinel resolves to the default: stored as derived, never as an explicit 0.
  if (messageExpiryUs === 0n) messageExpiryUs = null;
  if (maxTopicSizeBytes === 0n) maxTopicSizeBytes = null;
  if (compressionAlgorithm !== null) {
    entries.push({ key: TopicOptionKey.compressionAlgorithm, value: null });
  }
  if (messageExpiryUs !== null) entries.push({ key: TopicOptionKey.messageExpiry, value: null });
  if (maxTopicSizeBytes !== null) entries.push({ key: TopicOptionKey.maxTopicSize, value: null });
  entries.sort((left, right) => (left.key < right.key ? -1 : 1));
  const refusal = checkTopicOptionsTogether(entries, input.partitionsCount);
  if (refusal !== null) return refusal;
  const stored = Object.freeze(entries);
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes, entries: stored };
}

/** Iggy's code for each fault of the stored form's rules. */
const FAULT_CODE: Readonly<Record<TopicOptionFault, ErrorCode>> = {
  [TopicOptionFault.unsupportedKey]: ErrorCode.unsupportedOptionKey,
  [TopicOptionFault.invalidValue]: ErrorCode.invalidOptionValue,
};

/** One key's value by Iggy's rules (`absorb_strict`), or the refusal code. */
function parseTopicOptionValue(key: string, text: string): ParsedTopicOptionValue | ErrorCode {
  const parsed = parseStoredTopicOptionValue(key, text);
  return typeof parsed === 'object' ? parsed : FAULT_CODE[parsed];
}

/** Iggy `validate_preallocated_topic_bytes`, for a topic whose effective preallocation is on. */
function checkTopicOptionsTogether(
  entries: readonly TopicOptionEntry[],
  partitionsCount: number,
): OptionRefusal | null {
  if (preallocationExceeded(entries, partitionsCount)) {
    return refuse(ErrorCode.invalidOptionValue, TopicOptionKey.preallocateSegments);
  }
  return null;
}

/**
 * The committed-body rule for stored entries (apply and the snapshot decoder both hold it): keys
 * strictly ascending and in the catalog, a field key without text, a knob key with its canonical
 * text (re-parsing it gives the same text), and the cross-key caps. ok or the refusal code.
 */
export function validateTopicOptionEntries(
  entries: readonly TopicOptionEntry[],
  partitionsCount: number,
): ErrorCode {
  const fault = topicOptionEntriesFault(entries, partitionsCount);
  return fault === null ? ErrorCode.ok : FAULT_CODE[fault];
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

export function parseTopicUpdateOptions(
  raw: Readonly<Record<string, string>>,
): TopicUpdateOptions | OptionRefusal {
  let compressionAlgorithm: number | null = null;
  let messageExpiryUs: bigint | null = null;
  let maxTopicSizeBytes: bigint | null = null;
  for (const key of Object.keys(raw).sort()) {
    const text = raw[key]!;
    if (!optionTextFits(key) || !UPDATABLE_TOPIC_OPTION_KEYS.includes(key)) {
      return refuse(ErrorCode.unsupportedOptionKey, key);
    }
    if (!optionTextFits(text)) return refuse(ErrorCode.invalidOptionValue, key);
    const parsed = parseTopicOptionValue(key, text);
    if (typeof parsed !== 'object') return refuse(parsed, key);
    if (key === TopicOptionKey.compressionAlgorithm) compressionAlgorithm = parsed.compression;
    else if (key === TopicOptionKey.messageExpiry) messageExpiryUs = parsed.u64;
    else maxTopicSizeBytes = parsed.u64;
  }
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes };
}

/** Streams and users have no catalog keys: the first key (in order) is refused by name. */
export function refuseAnyOption(
  raw: Readonly<Record<string, string>> | undefined,
): OptionRefusal | null {
  if (raw === undefined) return null;
  const keys = Object.keys(raw).sort();
  return keys.length === 0 ? null : refuse(ErrorCode.unsupportedOptionKey, keys[0]!);
}

/** Marks the keys an update set as explicit (their values are the typed fields). */
export function withExplicitFields(
  entries: readonly TopicOptionEntry[],
  keys: readonly string[],
): readonly TopicOptionEntry[] {
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
  [TopicOptionKey.sizeOfMessagesRequiredToSave]:
    DEFAULT_SIZE_OF_MESSAGES_REQUIRED_TO_SAVE.toString(),
  [TopicOptionKey.preallocateSegments]: String(DEFAULT_PREALLOCATE_SEGMENTS),
};

export interface ResolvedOption {
  readonly key: string;
  /** Iggy's readable string form (`HeaderValue::to_string_value`): decimal numbers, true/false. */
  readonly value: string;
  readonly explicit: boolean;
}

/** Every catalog key of a topic with its effective value and provenance, ascending by key. */
export function resolveTopicOptions(
  fields: TopicFieldSettings,
  entries: readonly TopicOptionEntry[],
): ResolvedOption[] {
  return TOPIC_OPTION_KEYS_SORTED.map((key) => {
    const entry = entries.find((candidate) => candidate.key === key);
    let value: string;
    if (key === TopicOptionKey.compressionAlgorithm) {
      value = fields.compressionAlgorithm === CompressionAlgorithm.gzip ? 'gzip' : 'none';
    } else if (key === TopicOptionKey.messageExpiry) {
      value = fields.messageExpiryUs.toString();
    } else if (key === TopicOptionKey.maxTopicSize) {
      value = fields.maxTopicSizeBytes.toString();
    } else {
      value = entry?.value ?? RUNTIME_DEFAULTS[key]!;
    }
    return { key, value, explicit: entry !== undefined };
  });
}

/**
 * The option catalog's parsers (Iggy's config-file rules), create/update admission, the stored
 * form's rule, and the CreateTopic body that carries it through the log.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/metadata/errors.js';
import { decodeRequest, encodeRequest } from '../../src/metadata/operation-codec.js';
import { Operation, idOf, type CreateTopicRequest } from '../../src/metadata/operations.js';
import {
  OptionsScope,
  optionCatalog,
  parseByteSize,
  parseExpiry,
  parseMaxTopicSize,
  parseTopicCreateOptions,
  parseTopicUpdateOptions,
  validateTopicOptionEntries,
  withExplicitFields,
} from '../../src/metadata/options.js';
import { U64_MAX } from '../../src/format/snapshot-model.js';
import { TOPIC_OPTION_KEYS_SORTED, TOPIC_OPTIONS_MAX } from '../../src/format/topic-options.js';

const NONE = { compressionAlgorithm: null, messageExpiryUs: null, maxTopicSizeBytes: null, partitionsCount: 1 };

describe('option value parsers', () => {
  it('byte sizes: decimal and binary units, spaces, fractions that land on a byte; 0/unlimited/none are 0', () => {
    expect(parseByteSize('128MiB')).toBe(134_217_728n);
    expect(parseByteSize('128 MiB')).toBe(134_217_728n);
    expect(parseByteSize('2 GB')).toBe(2_000_000_000n);
    expect(parseByteSize('1.5KB')).toBe(1500n);
    expect(parseByteSize('4096')).toBe(4096n);
    expect(parseByteSize('1gib')).toBe(1_073_741_824n);
    expect(parseByteSize('unlimited')).toBe(0n);
    expect(parseByteSize('1.0001B')).toBeNull();
    expect(parseByteSize('12 parsecs')).toBeNull();
    expect(parseByteSize('-1')).toBeNull();
    expect(parseByteSize('16EiB')).toBeNull();
  });

  it('expiry: humantime durations in µs, keywords for never and default, no bare numbers', () => {
    expect(parseExpiry('5s')).toBe(5_000_000n);
    expect(parseExpiry('7 days')).toBe(7n * 86_400n * 1_000_000n);
    expect(parseExpiry('1h 30m')).toBe(5_400_000_000n);
    expect(parseExpiry('never_expire')).toBe(U64_MAX);
    expect(parseExpiry('server_default')).toBe(0n);
    expect(parseExpiry('1000')).toBeNull();
    expect(parseExpiry('5 fortnights')).toBeNull();
    expect(parseExpiry('200 years')).toBeNull();
  });

  it('max topic size: unlimited is u64::MAX, server_default 0, else a byte size', () => {
    expect(parseMaxTopicSize('unlimited')).toBe(U64_MAX);
    expect(parseMaxTopicSize('server_default')).toBe(0n);
    expect(parseMaxTopicSize('2GiB')).toBe(2_147_483_648n);
  });
});

describe('topic option admission', () => {
  it('refuses the first failing key in key order, with its code', () => {
    expect(parseTopicCreateOptions({ ...NONE, raw: { zzz: '1', segment_size: 'bad' } })).toEqual({ code: ErrorCode.invalidOptionValue, key: 'segment_size' });
    expect(parseTopicCreateOptions({ ...NONE, raw: { aaa: '1', segment_size: 'bad' } })).toEqual({ code: ErrorCode.unsupportedOptionKey, key: 'aaa' });
    expect(parseTopicCreateOptions({ ...NONE, raw: { enforce_fsync: '' } })).toEqual({ code: ErrorCode.invalidOptionValue, key: 'enforce_fsync' });
    expect(parseTopicCreateOptions({ ...NONE, raw: { ['k'.repeat(300)]: '1' } })).toEqual({ code: ErrorCode.unsupportedOptionKey, key: 'k'.repeat(64) });
  });

  it('stores canonical text for knobs and nil for typed-field keys; zero sentinels stay derived', () => {
    const parsed = parseTopicCreateOptions({
      ...NONE,
      messageExpiryUs: 0n,
      raw: { segment_size: '0', max_topic_size: 'unlimited', size_of_messages_required_to_save: '4KiB', compression_algorithm: 'GZIP' },
    });
    expect(parsed).toEqual({
      compressionAlgorithm: 2,
      messageExpiryUs: null,
      maxTopicSizeBytes: U64_MAX,
      entries: [
        { key: 'compression_algorithm', value: null },
        { key: 'max_topic_size', value: null },
        { key: 'size_of_messages_required_to_save', value: '4096' },
      ],
    });
    // A set named field wins over the same key in the map.
    const typed = parseTopicCreateOptions({ ...NONE, messageExpiryUs: 7n, raw: { message_expiry: '5s' } });
    expect(typed).toMatchObject({ messageExpiryUs: 7n });
  });

  it('updates accept only the three updatable keys', () => {
    expect(parseTopicUpdateOptions({ max_topic_size: '2GB' })).toEqual({ compressionAlgorithm: null, messageExpiryUs: null, maxTopicSizeBytes: 2_000_000_000n });
    expect(parseTopicUpdateOptions({ enforce_fsync: 'true' })).toEqual({ code: ErrorCode.unsupportedOptionKey, key: 'enforce_fsync' });
  });

  it('the stored-form rule refuses disorder, unknown keys, non-canonical text and text on a field key', () => {
    expect(validateTopicOptionEntries([{ key: 'enforce_fsync', value: 'true' }, { key: 'segment_size', value: '1048576' }], 1)).toBe(ErrorCode.ok);
    expect(validateTopicOptionEntries([{ key: 'segment_size', value: '1048576' }, { key: 'enforce_fsync', value: 'true' }], 1)).toBe(ErrorCode.invalidOptionValue);
    expect(validateTopicOptionEntries([{ key: 'partitions_count', value: '1' }], 1)).toBe(ErrorCode.unsupportedOptionKey);
    expect(validateTopicOptionEntries([{ key: 'segment_size', value: '1MiB' }], 1)).toBe(ErrorCode.invalidOptionValue);
    expect(validateTopicOptionEntries([{ key: 'message_expiry', value: '5' }], 1)).toBe(ErrorCode.invalidOptionValue);
    expect(validateTopicOptionEntries([{ key: 'preallocate_segments', value: 'true' }], 65)).toBe(ErrorCode.invalidOptionValue);
  });

  it('the catalog lists exactly the keys the stored form (src/format, read by the snapshot decoder) accepts', () => {
    const catalogKeys = optionCatalog(OptionsScope.topic).map((spec) => spec.key);
    expect([...catalogKeys].sort()).toEqual(TOPIC_OPTION_KEYS_SORTED);
    expect(catalogKeys.length).toBe(TOPIC_OPTIONS_MAX);
  });

  it('an update marks its keys explicit once, in key order', () => {
    const entries = withExplicitFields([{ key: 'segment_size', value: '1048576' }], ['message_expiry', 'compression_algorithm']);
    expect(entries.map((entry) => entry.key)).toEqual(['compression_algorithm', 'message_expiry', 'segment_size']);
    expect(withExplicitFields(entries, ['message_expiry'])).toBe(entries);
  });

  it('streams and users have empty catalogs', () => {
    expect(optionCatalog(OptionsScope.stream)).toEqual([]);
    expect(optionCatalog(OptionsScope.user)).toEqual([]);
    expect(optionCatalog(OptionsScope.topic)).toHaveLength(8);
  });
});

describe('CreateTopic body options', () => {
  const request: CreateTopicRequest = {
    operation: Operation.createTopic,
    streamId: idOf(1),
    partitionsCount: 1,
    compressionAlgorithm: 1,
    messageExpiryUs: U64_MAX,
    maxTopicSizeBytes: U64_MAX,
    replicationFactor: 1,
    name: 't',
    options: [
      { key: 'compression_algorithm', value: null },
      { key: 'segment_size', value: '134217728' },
    ],
  };

  it('round-trips and refuses keys out of order or a bad presence flag', () => {
    const body = encodeRequest(request);
    expect(decodeRequest(Operation.createTopic, body)).toEqual({ ok: true, request });
    // Tail: count 2, [21 'compression_algorithm', 0], [12 'segment_size', 1, 9 '134217728'].
    const swapped = encodeRequest({ ...request, options: [] });
    const tail = Buffer.concat([
      Buffer.from([2, 12]),
      Buffer.from('segment_size'),
      Buffer.from([1, 9]),
      Buffer.from('134217728'),
      Buffer.from([21]),
      Buffer.from('compression_algorithm'),
      Buffer.from([0]),
    ]);
    const unordered = Buffer.concat([Buffer.from(swapped.subarray(0, swapped.byteLength - 1)), tail]);
    expect(decodeRequest(Operation.createTopic, unordered)).toEqual({ ok: false, reason: 'options: keys are not strictly ascending' });
    const badFlag = Buffer.from(body);
    badFlag[badFlag.byteLength - 1 - 9 - 1 - 12 - 1 - 1] = 2;
    expect(decodeRequest(Operation.createTopic, badFlag)).toMatchObject({ ok: false });
  });
});

/**
 * Limits and the request-shape rules of the metadata plane, with Iggy's error codes.
 *
 * Rules (apache/iggy cc269ef70, `core/common/src/http/**` `Validatable` impls and the metadata
 * apply handlers): stream, topic and consumer-group names are 1..=255 UTF-8 bytes; usernames
 * 3..=50 bytes; passwords 3..=100 bytes (checked on the receiving node, which alone sees the
 * plaintext); personal-access-token names 3..=30 bytes; at most 100 tokens per user; a topic has
 * 0..=1000 partitions at creation and a create/delete-partitions request moves 1..=1000.
 *
 * These rules are pure functions of the request, so the primary's precheck and every replica's
 * apply reach the same verdict. Lengths are UTF-8 byte lengths, as in Iggy (`str::len`).
 */
import { ErrorCode } from './errors.js';

/** Iggy `MAX_NAME_LENGTH` (also the u8 length prefix of a wire name). */
export const NAME_SIZE_MAX = 255;
export const USERNAME_SIZE_MIN = 3;
export const USERNAME_SIZE_MAX = 50;
export const PASSWORD_SIZE_MIN = 3;
export const PASSWORD_SIZE_MAX = 100;
export const PAT_NAME_SIZE_MIN = 3;
export const PAT_NAME_SIZE_MAX = 30;
/** Iggy `[personal_access_token] max_tokens_per_user` default; a constant here because a
 * config-dependent branch in apply would fork replicas configured differently. */
export const PATS_PER_USER_MAX = 100;
/** Iggy `MAX_PARTITIONS_COUNT` / `MAX_PARTITIONS_PER_REQUEST`. */
export const PARTITIONS_PER_REQUEST_MAX = 1000;

/**
 * An Argon2id PHC string is ~100 bytes with the default parameters; 256 leaves room for larger
 * salts and outputs while keeping a user record bounded.
 */
export const PASSWORD_HASH_SIZE_MAX = 256;
/** SHA-256 of the raw personal access token. */
export const PAT_TOKEN_HASH_SIZE = 32;

/**
 * Collection bounds. Each is a compile-time constant in production: apply branches on them, and a
 * bound that came from node configuration would fork two replicas configured differently. Tests
 * may construct a state machine with smaller limits to reach every "full" error cheaply.
 */
export interface MetadataLimits {
  /** Iggy `MAX_STREAMS` (the packed-namespace ceiling). Full: TooManyStreams. */
  readonly streamsMax: number;
  /** Iggy `MAX_TOPICS`, per stream. Full: TooManyTopics. */
  readonly topicsPerStreamMax: number;
  /** Iggy `MAX_PARTITIONS`, per topic. Full: PartitionIdSpaceExhausted. */
  readonly partitionsPerTopicMax: number;
  /** Full: UsersLimitReached. Iggy allows u32::MAX; vrmeta keeps the users table bounded. */
  readonly usersMax: number;
  /** Full: PersonalAccessTokensLimitReached. */
  readonly patsPerUserMax: number;
  /** Per topic. Full: ConsumerGroupsLimitReached (vrmeta extension). */
  readonly consumerGroupsPerTopicMax: number;
  /**
   * Per group. A member is a client session, so the client table's slot ceiling (65,536) bounds
   * this already; the explicit bound turns a stale-member bug into an error, not unbounded growth.
   */
  readonly consumerGroupMembersMax: number;
  /**
   * Revoked access tokens kept until they expire (a logout each). Full: RevokedTokensLimitReached,
   * and the logged-out token stays valid until its own expiry (at most an hour by default).
   */
  readonly revokedTokensMax: number;
  /** Per user, so one user logging in and out in a loop cannot fill the list for everyone. */
  readonly revokedTokensPerUserMax: number;
}

export const METADATA_LIMITS: MetadataLimits = Object.freeze({
  streamsMax: 1 << 20,
  topicsPerStreamMax: 4096,
  partitionsPerTopicMax: 1_000_000,
  usersMax: 1 << 16,
  patsPerUserMax: PATS_PER_USER_MAX,
  consumerGroupsPerTopicMax: 4096,
  consumerGroupMembersMax: 1 << 16,
  revokedTokensMax: 1 << 16,
  revokedTokensPerUserMax: 1024,
});

/**
 * A revocation names an expiry at most this far past the op's timestamp: tokens live an hour by
 * default, so anything later is not a token of this cluster, and an entry cannot be planted to
 * outlive every token.
 */
export const REVOKED_TOKEN_EXPIRY_AHEAD_MAX_US = 24 * 3600 * 1_000_000;

/**
 * Permission entries in one user's permissions: one per stream (bounded like the streams table's
 * practical size) and one per topic within it (bounded by topics per stream).
 */
export const PERMISSION_STREAMS_MAX = 4096;
export const PERMISSION_TOPICS_MAX = 4096;

const utf8 = new TextEncoder();

/**
 * True when `text` has no lone surrogate. Such a string has no UTF-8 form: TextEncoder would
 * silently replace it, so the committed name would differ from the requested one.
 */
export function isWellFormed(text: string): boolean {
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (unit >= 0xdc00) return false;
    const next = text.charCodeAt(index + 1);
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
    index++;
  }
  return true;
}

/** UTF-8 byte length (no allocation for ASCII), or -1 for text with a lone surrogate. */
export function utf8Size(text: string): number {
  let ascii = true;
  for (let index = 0; index < text.length; index++) {
    if (text.charCodeAt(index) > 0x7f) {
      ascii = false;
      break;
    }
  }
  if (ascii) return text.length;
  return isWellFormed(text) ? utf8.encode(text).byteLength : -1;
}

function sizeWithin(text: string, min: number, max: number): boolean {
  const size = utf8Size(text);
  return size >= min && size <= max;
}

export function validateStreamName(name: string): ErrorCode {
  return sizeWithin(name, 1, NAME_SIZE_MAX) ? ErrorCode.ok : ErrorCode.invalidStreamName;
}

export function validateTopicName(name: string): ErrorCode {
  return sizeWithin(name, 1, NAME_SIZE_MAX) ? ErrorCode.ok : ErrorCode.invalidTopicName;
}

export function validateConsumerGroupName(name: string): ErrorCode {
  return sizeWithin(name, 1, NAME_SIZE_MAX) ? ErrorCode.ok : ErrorCode.invalidConsumerGroupName;
}

export function validateUsername(username: string): ErrorCode {
  const fits = sizeWithin(username, USERNAME_SIZE_MIN, USERNAME_SIZE_MAX);
  return fits ? ErrorCode.ok : ErrorCode.invalidUsername;
}

/** Plaintext rule, applied on the receiving node before hashing (src/http/secrets.ts). */
export function validatePassword(password: string): ErrorCode {
  const fits = sizeWithin(password, PASSWORD_SIZE_MIN, PASSWORD_SIZE_MAX);
  return fits ? ErrorCode.ok : ErrorCode.invalidPassword;
}

export function validatePatName(name: string): ErrorCode {
  return sizeWithin(name, PAT_NAME_SIZE_MIN, PAT_NAME_SIZE_MAX)
    ? ErrorCode.ok
    : ErrorCode.invalidPersonalAccessTokenName;
}

export function validateUserStatus(status: number): ErrorCode {
  return status === 1 || status === 2 ? ErrorCode.ok : ErrorCode.invalidUserStatus;
}

/**
 * What the replicated log may hold in place of a password: an Argon2id PHC string
 * (`$argon2id$v=19$m=..,t=..,p=..$salt$hash`). Anything else is refused with InvalidPassword, so a
 * bug that put a plaintext password in an op body can never persist it.
 */
const ARGON2ID_PHC = new RegExp(
  '^\\$argon2id\\$v=19\\$m=\\d{1,10},t=\\d{1,10},p=\\d{1,3}' +
    '\\$[A-Za-z0-9+/]{11,}\\$[A-Za-z0-9+/]{16,}$',
);

export function isArgon2idPhc(hash: string): boolean {
  return hash.length <= PASSWORD_HASH_SIZE_MAX && ARGON2ID_PHC.test(hash);
}

/** CreateUser's hash and ChangePassword's new one: Argon2id only, never the genesis marker. */
export function validatePasswordHash(hash: string): ErrorCode {
  return isArgon2idPhc(hash) ? ErrorCode.ok : ErrorCode.invalidPassword;
}

/**
 * Root's password as each replica was configured with it, until root changes it. Stored as root's
 * password hash at genesis instead of a hash: every replica's genesis state must be byte-identical,
 * so a hash there would need a salt every replica derives alike, which made every cluster with the
 * default password store the same hash. Each replica hashes its configured password with a random
 * salt in memory instead (src/http/secrets.ts `createPasswordVerifier` maps the marker to it).
 * Not a PHC string (no `$argon2id$` prefix), so nothing mistakes it for one.
 */
export const GENESIS_PASSWORD_MARKER = '$vrmeta$genesis$v1';

/**
 * ChangePassword's current hash names what is stored, and root's stored hash may be the marker:
 * accepted here only, so no op can ever store the marker for anyone.
 */
export function validateCurrentPasswordHash(hash: string): ErrorCode {
  return hash === GENESIS_PASSWORD_MARKER ? ErrorCode.ok : validatePasswordHash(hash);
}

/** CreateTopic admits 0..=1000 partitions (a topic without partitions is legal in Iggy). */
export function validateTopicPartitionsCount(count: number): ErrorCode {
  const fits = count >= 0 && count <= PARTITIONS_PER_REQUEST_MAX;
  return fits ? ErrorCode.ok : ErrorCode.tooManyPartitions;
}

/**
 * Create/DeletePartitions move 1..=1000: a zero-partition change would burn a log entry for
 * nothing.
 */
export function validatePartitionsChangeCount(count: number): ErrorCode {
  const fits = count >= 1 && count <= PARTITIONS_PER_REQUEST_MAX;
  return fits ? ErrorCode.ok : ErrorCode.tooManyPartitions;
}

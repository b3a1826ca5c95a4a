/**
 * Resolving a node configuration in tests: every configuration needs a cluster secret (secure by default),
 * which these fixtures supply so that each test speaks only of the keys it is about.
 */
import { ConfigError, resolveConfig } from '../../src/node/config.js';

export const SECRET = { cluster_secret: 'a cluster secret of at least 32 characters' };

export function config(...layers: Parameters<typeof resolveConfig>): ReturnType<typeof resolveConfig> {
  return resolveConfig(SECRET, ...layers);
}

/** The key a configuration is refused for, or 'accepted'. */
export function refusal(...layers: Parameters<typeof resolveConfig>): string {
  try {
    config(...layers);
  } catch (error) {
    if (error instanceof ConfigError) return error.key;
    throw error;
  }
  return 'accepted';
}

/** The message a configuration is refused with (`key: reason`), or 'accepted'. */
export function refusalMessage(...layers: Parameters<typeof resolveConfig>): string {
  try {
    config(...layers);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return 'accepted';
}

/**
 * A zeroed counter per key: metrics that must show every label from the start (a reason that
 * never happened exports 0, not nothing) build their maps with this.
 */
export function zeroedCounters<K extends string>(keys: readonly K[]): Record<K, number> {
  const counters = {} as Record<K, number>;
  for (const key of keys) counters[key] = 0;
  return counters;
}

/**
 * Reading a Prometheus text scrape in tests: the sum of a metric's samples by exact name and label
 * subset (no suffix matching, so `x` never picks up `x_total`).
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const pairs = new Map([...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)].map((pair) => [pair[1]!, pair[2]!]));
    if (Object.entries(labels).some(([key, value]) => pairs.get(key) !== value)) continue;
    sum += Number(match[3]);
    found = true;
  }
  if (!found) throw new Error(`no sample ${name}${JSON.stringify(labels)} in the scrape`);
  return sum;
}

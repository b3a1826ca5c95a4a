/**
 * How `vrmeta dev` prints its replicas' log lines: pino's JSON as it comes (for a file or a log
 * shipper), or one readable, coloured line per record for a person at a terminal (pino-pretty).
 * `auto` picks pretty exactly when stdout is a terminal; NO_COLOR turns the colours off.
 */
import { createRequire } from 'node:module';

// pino-pretty (~150 ms to load) only when a person reads the lines: `vrmeta dev` with JSON lines
// (a bench, a log shipper) must not delay spawning its replicas for it.
const requireCjs = createRequire(import.meta.url);

export type LogFormat = 'pretty' | 'json';
export const LOG_FORMAT_CHOICES = ['auto', 'pretty', 'json'] as const;

export function chooseLogFormat(option: string, stdoutIsTty: boolean): LogFormat {
  switch (option) {
    case 'auto':
      return stdoutIsTty ? 'pretty' : 'json';
    case 'pretty':
    case 'json':
      return option;
    default:
      throw new Error(`--log-format must be one of ${LOG_FORMAT_CHOICES.join(', ')} (got ${JSON.stringify(option)})`);
  }
}

/** Renders one line a replica printed; lines that are not pino records pass through unchanged. */
export function lineFormatter(format: LogFormat, options: { readonly colorize: boolean }): (line: string) => string {
  if (format === 'json') return (line) => line;
  const { prettyFactory } = requireCjs('pino-pretty') as typeof import('pino-pretty');
  const pretty = prettyFactory({
    colorize: options.colorize,
    singleLine: true,
    translateTime: 'HH:MM:ss.l',
    ignore: 'pid,hostname,replica',
  });
  return (line) => {
    if (!line.startsWith('{')) return line;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      return line;
    }
    if (typeof record !== 'object' || record === null || !('level' in record)) return line;
    return pretty(record).replace(/\n+$/, '');
  };
}

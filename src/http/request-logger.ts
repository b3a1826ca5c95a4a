/**
 * A request's logger, made only when the request logs something at an enabled level.
 *
 * fastify gives every request a child of the app's logger (`request.log`), and ours binds the view
 * the request was served in. A pino child per request was ~2% of a busy primary's CPU at 64 HTTP
 * writers (`vrmeta bench cluster`, profiled), while a replica at its default level logs nothing
 * per request but failures: fastify's "incoming request" and "request completed" lines are info,
 * and below the bench's warn. This stands in for the child: the bindings (the view read when the
 * request arrived) are kept as numbers, and the pino child is made at the first line whose level
 * the parent enables, with the same bindings and options, so what is written is unchanged.
 */
import type { FastifyBaseLogger } from 'fastify';

type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogArguments = Parameters<FastifyBaseLogger['info']>;

/** pino's check; a logger without it (a test double) is taken to enable every level. */
function enables(logger: FastifyBaseLogger, level: Level): boolean {
  const check = (logger as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
  return check === undefined ? true : check.call(logger, level);
}

export class LazyRequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #view: number;
  readonly #options: ChildOptions;
  #child: FastifyBaseLogger | null = null;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, view: number, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#view = view;
    this.#options = options;
  }

  /** Made already: a child with a level of its own answers for its levels, not the parent. */
  get materialized(): boolean {
    return this.#child !== null;
  }

  get level(): string {
    return this.#child?.level ?? this.#options?.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.logger().level = level;
  }

  fatal(...args: LogArguments): void {
    this.write('fatal', args);
  }

  error(...args: LogArguments): void {
    this.write('error', args);
  }

  warn(...args: LogArguments): void {
    this.write('warn', args);
  }

  info(...args: LogArguments): void {
    this.write('info', args);
  }

  debug(...args: LogArguments): void {
    this.write('debug', args);
  }

  trace(...args: LogArguments): void {
    this.write('trace', args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.logger().child(bindings, options);
  }

  private write(level: Level, args: LogArguments): void {
    // A route-level log level (fastify's `logLevel`) is the child's own: make it to ask it.
    if (this.#child === null && this.#options?.level === undefined && !enables(this.#parent, level)) return;
    const logger = this.logger();
    (logger[level] as (...args: LogArguments) => void).apply(logger, args);
  }

  private logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child({ ...this.#bindings, view: this.#view }, this.#options);
    return this.#child;
  }
}

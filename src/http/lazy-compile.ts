/**
 * Route schemas compiled at a route's first use instead of at `ready` (compiling every schema
 * up front was a large share of a replica's boot time).
 *
 * Fastify compiles every route's validators and response serializers while it gets ready, that
 * is before the listener is up: ~150 ms of a replica's boot for ~60 routes, most of which a
 * restarted replica never serves. Wrapped here, each schema part compiles once, at the first
 * request that needs it, with the very compiler fastify would have used: the results are the
 * same functions, only built later.
 */
import { createRequire } from 'node:module';

/** `compile(args)` is called at most once, when the returned function is first called. */
export function compileOnFirstUse<Args, Value, Result>(compile: (args: Args) => (value: Value) => Result): (args: Args) => (value: Value) => Result {
  return (args) => {
    let compiled: ((value: Value) => Result) | null = null;
    return (value) => {
      compiled ??= compile(args);
      return compiled(value);
    };
  };
}

type SerializerCompiler = (args: { schema?: unknown }) => (data: unknown) => string;
type SerializerFactory = (externalSchemas: unknown, serializerOptions: unknown) => SerializerCompiler;

/**
 * Fastify's own default serializer factory (fast-json-stringify), resolved from fastify's own
 * location: the module and the version fastify itself loads when no factory is given, not a
 * dependency of ours.
 */
function fastifyDefaultSerializerFactory(): SerializerFactory {
  const fastifyEntry = createRequire(import.meta.url).resolve('fastify');
  const selector = createRequire(fastifyEntry)('@fastify/fast-json-stringify-compiler') as () => SerializerFactory;
  return selector();
}

/**
 * For `Fastify({ schemaController: { compilersFactory: { buildSerializer } } })`. Fastify's factory
 * itself (fast-json-stringify and its schema tooling, ~30 ms of module loading at boot) is loaded
 * at the first compile too, that is at the first response with a schema: the probes (/livez,
 * /readyz) write with JSON.stringify and /metrics is text, so a restarted replica reports ready
 * without it.
 */
export function lazySerializerFactory(): SerializerFactory {
  return (externalSchemas, serializerOptions) => {
    let compiler: SerializerCompiler | null = null;
    return compileOnFirstUse((args: { schema?: unknown }) => {
      compiler ??= fastifyDefaultSerializerFactory()(externalSchemas, serializerOptions);
      return compiler(args);
    });
  };
}

type TypeBoxProvider = typeof import('@fastify/type-provider-typebox');
type ValidatorCompiler = TypeBoxProvider['TypeBoxValidatorCompiler'];

/**
 * TypeBox's validator compiler (`typebox/compile` and `typebox/value`, ~300 ES modules, ~100 ms
 * of a replica's boot), loaded at the first request that has something to validate. The gate,
 * a `preValidation` hook on every route, holds such a request until the module is in; once it
 * is (and for routes with nothing to validate: /readyz, /metrics) it passes at once. The
 * compiler then runs synchronously, as fastify requires, with the module already loaded.
 */
export class DeferredTypeBoxCompiler {
  private provider: TypeBoxProvider | null = null;
  private loading: Promise<TypeBoxProvider> | null = null;

  get loaded(): boolean {
    return this.provider !== null;
  }

  load(): Promise<TypeBoxProvider> {
    this.loading ??= import('@fastify/type-provider-typebox').then((provider) => {
      this.provider = provider;
      return provider;
    });
    return this.loading;
  }

  /** For `setValidatorCompiler`: each schema part compiles at its first use, after the gate. */
  readonly compiler: ValidatorCompiler = compileOnFirstUse((args: Parameters<ValidatorCompiler>[0]) => {
    if (this.provider === null) throw new Error('the TypeBox compiler was used before the preValidation gate loaded it');
    return this.provider.TypeBoxValidatorCompiler(args);
  }) as ValidatorCompiler;

  /** For `addHook('preValidation', ...)` on the root instance, before any route. */
  readonly gate = (request: { routeOptions: { schema?: object | undefined } }, _reply: unknown, done: (error?: Error) => void): void => {
    const schema = request.routeOptions.schema as Record<string, unknown> | undefined;
    const validates = schema !== undefined && ['body', 'querystring', 'params', 'headers'].some((part) => schema[part] !== undefined);
    if (this.provider !== null || !validates) {
      done();
      return;
    }
    this.load().then(
      () => done(),
      (error: unknown) => done(error as Error),
    );
  };
}

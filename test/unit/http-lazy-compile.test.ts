/**
 * Route schemas compiled at first use (src/http/lazy-compile.ts): nothing compiles before a route
 * is used, each part compiles once, and the compiled functions are fastify's and TypeBox's own.
 */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { DeferredTypeBoxCompiler, compileOnFirstUse, lazySerializerFactory } from '../../src/http/lazy-compile.js';

describe('compileOnFirstUse', () => {
  it('compiles at the first call, once, and answers with the compiled function', () => {
    const compiled: string[] = [];
    const compiler = compileOnFirstUse((schema: string) => {
      compiled.push(schema);
      return (value: number) => `${schema}:${value}`;
    });
    const route = compiler('a');
    expect(compiled).toEqual([]);
    expect(route(1)).toBe('a:1');
    expect(route(2)).toBe('a:2');
    expect(compiled).toEqual(['a']);
  });
});

describe('lazySerializerFactory', () => {
  it("is fastify's serializer (fast-json-stringify), compiled at the first reply", () => {
    const compiler = lazySerializerFactory()({}, {});
    const serialize = compiler({ schema: { type: 'object', properties: { a: { type: 'integer' } } } });
    expect(serialize({ a: 1, b: 2 })).toBe('{"a":1}');
    // A schema fast-json-stringify refuses: no error until the first reply needs it.
    const broken = compiler({ schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } });
    expect(() => broken({ a: 1 })).toThrow();
  });
});

describe('DeferredTypeBoxCompiler', () => {
  const body = Type.Object({ name: Type.String() });

  it('lets requests without a schema to validate through without loading the compiler', () => {
    const deferred = new DeferredTypeBoxCompiler();
    let passed = 0;
    deferred.gate({ routeOptions: { schema: { response: { 200: body } } } }, null, (error) => {
      expect(error).toBeUndefined();
      passed++;
    });
    deferred.gate({ routeOptions: {} }, null, () => passed++);
    expect(passed).toBe(2);
    expect(deferred.loaded).toBe(false);
  });

  it('holds a request with a body schema until the compiler is loaded, then validates with it', async () => {
    const deferred = new DeferredTypeBoxCompiler();
    const validate = deferred.compiler({ schema: body, method: 'POST', url: '/x', httpPart: 'body' });
    expect(() => validate({ name: 'a' })).toThrow(/before the preValidation gate loaded it/);
    await new Promise<void>((resolve, reject) => deferred.gate({ routeOptions: { schema: { body } } }, null, (error) => (error === undefined ? resolve() : reject(error))));
    expect(deferred.loaded).toBe(true);
    expect(validate({ name: 'a' })).toEqual({ value: { name: 'a' } });
    expect(validate({ name: 1 })).toHaveProperty('error');
  });
});

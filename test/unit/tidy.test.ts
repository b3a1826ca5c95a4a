/**
 * Tidy: the module boundaries that keep the core deterministic (STYLE.md "Layout and
 * boundaries"). `src/vsr` and `src/metadata` run under the seeded simulator, so they may not
 * touch the clock, randomness, timers, the process, real IO or async (nor may the snapshot format
 * under them, nor the partition plane's wire codecs in `src/partition`, which every replica runs
 * on the same bytes); imports point downward only, along LAYER_ORDER, and no module of src/
 * imports itself back through others (a cycle, even of types, makes two modules one).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { Operation as StateMachineOperation } from '../../src/metadata/operations.js';
import { Operation as ProtocolOperation, STATE_MACHINE_OPERATION_MIN } from '../../src/vsr/header-types.js';

const root = new URL('../../', import.meta.url).pathname;

function sources(directory: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(directory)) {
    const path = join(directory, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** Strips comments and string contents so prose like "no Date" does not trip the checks. */
function code(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/`(?:\\.|[^`\\])*`/g, '``')
    .replace(/'(?:\\.|[^'\\])*'/g, "''");
}

function importsOf(text: string): string[] {
  const pattern = /(?:import|export)[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm;
  return [...text.matchAll(pattern)].map((match) => match[1] ?? match[2] ?? match[3]!);
}

/** Packages the pure layers may use: deterministic, no IO. */
const PURE_PACKAGES = new Set(['msgpackr']);

const FORBIDDEN_GLOBALS = [
  /\bDate\b/,
  /\bMath\.random\b/,
  /\bsetTimeout\b/,
  /\bsetInterval\b/,
  /\bsetImmediate\b/,
  /\bqueueMicrotask\b/,
  /\bprocess\b/,
  /\bperformance\b/,
  /\basync\b/,
  /\bawait\b/,
  /\bWeakRef\b/,
  /\bFinalizationRegistry\b/,
];

/**
 * The layers of src/, bottom-up: a module may import its own layer and any layer listed before it,
 * never one after (DESIGN.md §1, "imports point downward only"). A newcomer reading src/ top-down
 * meets format/kernels (the snapshot format, its encoder and decoder), then the protocol core and
 * storage (which persists the core's state and checks snapshot files with the format's decoder,
 * knowing nothing of the state machine), the state machine, the wire and HTTP, then the process
 * that wires them. `partition` (the data plane's wire codecs) sits on the metadata layer's body
 * reader, under the wire that calls it. `testing` (the simulator) sits under `node`, which runs it
 * for `vrmeta simulate`. `client` (the package's typed client) sits over the whole server, which
 * never imports it, so a server module cannot come to depend on the client's view of the API;
 * `index.ts` is the package entry over everything.
 */
const LAYER_ORDER = [
  'stdx',
  'constants.ts',
  'format',
  'kernels',
  'vsr',
  'storage',
  'metadata',
  'partition',
  'transport',
  'http',
  'testing',
  'node',
  'client',
  'index.ts',
] as const;

/** The layer of a path relative to src/ (its top-level folder, or the file itself), or null. */
function layerOf(path: string): string | null {
  const top = path.split('/')[0]!;
  return (LAYER_ORDER as readonly string[]).includes(top) ? top : null;
}

/** Every relative import of every module under src/, resolved to a path relative to src/. */
function relativeImports(): { from: string; target: string }[] {
  const out: { from: string; target: string }[] = [];
  for (const file of sources(join(root, 'src'))) {
    for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const target = relative(join(root, 'src'), join(file, '..', specifier)).replace(/\.js$/, '.ts');
      out.push({ from: relative(join(root, 'src'), file), target });
    }
  }
  return out;
}

/**
 * What the VSR core may name of the metadata snapshot model: only the client table's entry (the
 * client table is the replica's). The core runs every plane's state machine (metadata, partition
 * groups) through `StateMachine<S>` and `CheckpointModel<S>`; naming the metadata snapshot, its
 * format version or its codec would tie the protocol to one plane again.
 */
const VSR_SNAPSHOT_NAMES_ALLOWED = new Set(['ClientEntrySnapshot']);

/** The snapshot-format modules of src/format (the model and its codec). */
function isSnapshotFormatModule(target: string): boolean {
  return /^format\/snapshot-[^/]*\.ts$/.test(target);
}

/** Problems of src/vsr's imports from the snapshot format, one line per offending name. */
function vsrSnapshotProblems(files: readonly { name: string; text: string }[]): string[] {
  const problems: string[] = [];
  for (const { name, text } of files) {
    const sourceFile = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
    for (const statement of sourceFile.statements) {
      const isImport = ts.isImportDeclaration(statement);
      if (!isImport && !ts.isExportDeclaration(statement)) continue;
      const specifier = statement.moduleSpecifier;
      if (specifier === undefined || !ts.isStringLiteral(specifier)) continue;
      const target = relative(join(root, 'src'), join(root, 'src', name, '..', specifier.text));
      if (!isSnapshotFormatModule(target.replace(/\.js$/, '.ts'))) continue;
      const names: string[] = [];
      let whole = false;
      if (isImport) {
        const clause = statement.importClause;
        const bindings = clause?.namedBindings;
        if (clause === undefined || clause.name !== undefined) whole = true;
        if (bindings !== undefined && ts.isNamespaceImport(bindings)) whole = true;
        if (bindings !== undefined && ts.isNamedImports(bindings)) {
          for (const element of bindings.elements) names.push((element.propertyName ?? element.name).text);
        }
      } else {
        const clause = statement.exportClause;
        if (clause === undefined || !ts.isNamedExports(clause)) whole = true;
        else for (const element of clause.elements) names.push((element.propertyName ?? element.name).text);
      }
      if (whole) problems.push(`src/${name} imports all of ${specifier.text}`);
      for (const imported of names) {
        if (!VSR_SNAPSHOT_NAMES_ALLOWED.has(imported)) problems.push(`src/${name} imports ${imported} from ${specifier.text}`);
      }
    }
  }
  return problems;
}

/**
 * What src/partition may import, narrower than its rank: the codecs need the batch layout, the
 * body reader and the identifier type, nothing of the state machine's behaviour. Importing more
 * of src/metadata would let a wire decoder depend on metadata state, which a partition group's
 * replicas do not share; kernels arrive as callbacks so the codecs stay testable without WASM.
 */
const PARTITION_IMPORTS_ALLOWED: readonly RegExp[] = [
  /^stdx\/[^/]+\.ts$/,
  /^format\/[^/]+\.ts$/,
  /^partition\/[^/]+\.ts$/,
  /^metadata\/body-io\.ts$/,
  // The wire enums of the store-range frames a partition group's backfill answers and reads.
  /^vsr\/header-types\.ts$/,
];
/**
 * Modules src/partition may import types from, and nothing else: the state machine boundary it
 * implements, the kernels and the checkpoint codec shape it is handed (as ports, never built
 * here), and the metadata operation types the codecs share.
 */
const PARTITION_TYPE_IMPORTS_ALLOWED = new Set([
  'metadata/operations.ts',
  'vsr/state-machine.ts',
  'kernels/kernel.ts',
  'storage/checkpoint-codec.ts',
]);

/** Problems of src/partition's imports, one line per offending import. */
function partitionImportProblems(files: readonly { name: string; text: string }[]): string[] {
  const problems: string[] = [];
  for (const { name, text } of files) {
    const sourceFile = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
    for (const statement of sourceFile.statements) {
      const isImport = ts.isImportDeclaration(statement);
      if (!isImport && !ts.isExportDeclaration(statement)) continue;
      const specifier = statement.moduleSpecifier;
      if (specifier === undefined || !ts.isStringLiteral(specifier)) continue;
      if (!specifier.text.startsWith('.')) continue;
      const target = relative(join(root, 'src'), join(root, 'src', name, '..', specifier.text))
        .replace(/\.js$/, '.ts');
      if (PARTITION_IMPORTS_ALLOWED.some((pattern) => pattern.test(target))) continue;
      const typeOnly = isImport
        ? statement.importClause?.isTypeOnly === true
        : (statement as ts.ExportDeclaration).isTypeOnly;
      if (typeOnly && PARTITION_TYPE_IMPORTS_ALLOWED.has(target)) continue;
      problems.push(`src/${name} imports ${typeOnly ? 'types of ' : ''}${target}`);
    }
  }
  return problems;
}

/** Problems of an import graph against LAYER_ORDER, one line per offending import. */
function layerProblems(imports: readonly { from: string; target: string }[]): string[] {
  const problems: string[] = [];
  for (const { from, target } of imports) {
    const fromLayer = layerOf(from);
    const targetLayer = target.startsWith('..') ? null : layerOf(target);
    if (fromLayer === null || targetLayer === null) {
      problems.push(`src/${from} imports ${target}, which is in no layer of src/`);
      continue;
    }
    const fromRank = LAYER_ORDER.indexOf(fromLayer as (typeof LAYER_ORDER)[number]);
    const targetRank = LAYER_ORDER.indexOf(targetLayer as (typeof LAYER_ORDER)[number]);
    if (targetRank > fromRank) {
      const allowed = LAYER_ORDER.slice(0, fromRank + 1).join(', ');
      problems.push(`src/${from} imports ${target}: ${fromLayer} may import only ${allowed}`);
    }
  }
  return problems;
}

/**
 * Who outside src/client may import it: the package entry, which exports the client, and the
 * tests and benchmarks that drive a server through it (paths relative to src/, so test/ and
 * bench/ are not scanned). A server module that imported the client would couple the server to
 * the client's view of its own API, and make the client impossible to ship or change alone.
 */
const CLIENT_IMPORTERS_ALLOWED = new Set(['index.ts']);

/** Problems of an import graph against CLIENT_IMPORTERS_ALLOWED, one line per import. */
function clientImportProblems(imports: readonly { from: string; target: string }[]): string[] {
  return imports
    .filter(({ from, target }) => target.startsWith('client/') && !from.startsWith('client/'))
    .filter(({ from }) => !CLIENT_IMPORTERS_ALLOWED.has(from))
    .map(({ from, target }) => `src/${from} imports ${target}: the server may not use the client`);
}

/**
 * Imports left out of the cycle check, each `from -> target` (paths under src/). Temporary:
 * src/vsr is being edited elsewhere at the moment. io.ts names state-machine.ts's
 * CheckpointModel and state-machine.ts names io.ts's LogLevel (both type-only); moving LogLevel
 * to a module of its own ends the cycle, and then this list is empty. Exempting an edge rather
 * than a cycle keeps the check sound: any other cycle through these modules is still found.
 */
const IMPORT_CYCLE_EDGES_EXEMPT: ReadonlySet<string> = new Set([
  'vsr/state-machine.ts -> vsr/io.ts',
]);

/**
 * Import cycles of a graph (type-only imports included: a type cycle still ties two modules
 * together), each as `a -> b -> a`, found by a depth-first search: every back edge closes one.
 * Imports that leave the graph (a missing file, ../bench) are not followed.
 */
function importCycles(
  imports: readonly { from: string; target: string }[],
  exempt: ReadonlySet<string> = IMPORT_CYCLE_EDGES_EXEMPT,
): string[] {
  const edges = new Map<string, string[]>();
  for (const { from } of imports) edges.set(from, []);
  for (const { from, target } of imports) {
    if (edges.has(target) && !exempt.has(`${from} -> ${target}`)) edges.get(from)!.push(target);
  }
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (module: string): void => {
    path.push(module);
    for (const target of edges.get(module)!) {
      const start = path.indexOf(target);
      if (start >= 0) cycles.push([...path.slice(start), target].join(' -> '));
      else if (!done.has(target)) visit(target);
    }
    path.pop();
    done.add(module);
  };
  for (const module of [...edges.keys()].sort()) if (!done.has(module)) visit(module);
  return cycles;
}

const COLUMNS_MAX = 100;
const FUNCTION_LINES_MAX = 70;

/**
 * Core modules held to the column and function-length limits (paths under src/). A folder holds
 * every file in it, so whatever lands in src/format, src/vsr, src/metadata, src/partition or
 * src/testing (the simulator) is held from its first commit; there is no exception. Single files are held too:
 * `vrmeta dev`'s supervision (dev.ts and the two modules it runs on) is what someone reads while
 * a replica keeps dying, so it stays in short lines and functions.
 */
const HELD_TO_LIMITS = [
  'format',
  'vsr',
  'metadata',
  'partition',
  'testing',
  'node/dev.ts',
  'node/restart-policy.ts',
  'node/supervisor.ts',
] as const;

/** Lines over COLUMNS_MAX and functions over FUNCTION_LINES_MAX in `text`, named by `name`. */
function limitProblems(name: string, text: string): string[] {
  const problems: string[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.length > COLUMNS_MAX) {
      problems.push(`${name}:${index + 1} is ${line.length} columns (max ${COLUMNS_MAX})`);
    }
  });
  const sourceFile = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
  const lineOf = (position: number) => sourceFile.getLineAndCharacterOfPosition(position).line;
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const lines = lineOf(node.end) - lineOf(node.getStart(sourceFile)) + 1;
      if (lines > FUNCTION_LINES_MAX) {
        const label = node.name?.getText(sourceFile) ?? `function at line ${lineOf(node.getStart(sourceFile)) + 1}`;
        problems.push(`${name}: ${label} is ${lines} lines (max ${FUNCTION_LINES_MAX})`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return problems;
}

/** The files under src/ that `entry` (a folder or a file, relative to src/) names. */
function filesOf(entry: string): string[] {
  const path = join(root, 'src', entry);
  return statSync(path).isDirectory() ? sources(path) : [path];
}

describe('tidy', () => {
  for (const layer of ['format', 'vsr', 'metadata', 'partition'] as const) {
    it(`src/${layer} is pure: no node:*, clock, randomness, timers, process or async`, () => {
      const problems: string[] = [];
      for (const file of sources(join(root, 'src', layer))) {
        const text = code(readFileSync(file, 'utf8'));
        const name = relative(root, file);
        for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
          if (!specifier.startsWith('.') && !PURE_PACKAGES.has(specifier)) {
            problems.push(`${name} imports ${specifier}`);
          }
        }
        for (const pattern of FORBIDDEN_GLOBALS) {
          if (pattern.test(text)) problems.push(`${name} uses ${pattern.source}`);
        }
      }
      expect(problems).toEqual([]);
    });
  }

  it('every module under src/ is in a layer', () => {
    const stray = sources(join(root, 'src'))
      .map((file) => relative(join(root, 'src'), file))
      .filter((path) => layerOf(path) === null);
    expect(stray).toEqual([]);
  });

  it(`imports point down the layers (${LAYER_ORDER.join(' < ')}), with no exceptions`, () => {
    expect(layerProblems(relativeImports())).toEqual([]);
  });

  it('the layer check names an import that points up or out of src/', () => {
    expect(
      layerProblems([
        { from: 'kernels/kernel.ts', target: 'metadata/snapshot-model.ts' },
        { from: 'http/app.ts', target: 'node/secrets.ts' },
        { from: 'node/cli.ts', target: '../bench/cli.ts' },
        { from: 'vsr/io.ts', target: 'format/snapshot-model.ts' },
        { from: 'storage/wal.ts', target: 'storage/disk.ts' },
        { from: 'storage/inspect.ts', target: 'metadata/snapshot-codec.ts' },
      ]),
    ).toEqual([
      'src/kernels/kernel.ts imports metadata/snapshot-model.ts: kernels may import only stdx, constants.ts, format, kernels',
      'src/http/app.ts imports node/secrets.ts: http may import only stdx, constants.ts, format, kernels, vsr, storage, metadata, partition, transport, http',
      'src/node/cli.ts imports ../bench/cli.ts, which is in no layer of src/',
      'src/storage/inspect.ts imports metadata/snapshot-codec.ts: storage may import only stdx, constants.ts, format, kernels, vsr, storage',
    ]);
  });

  it('nothing outside src/client imports it but the package entry (and test/, bench/)', () => {
    expect(clientImportProblems(relativeImports())).toEqual([]);
  });

  it('the client import check names a server module that imports the client', () => {
    expect(
      clientImportProblems([
        { from: 'index.ts', target: 'client/client.ts' },
        { from: 'client/client.ts', target: 'client/client-binary.ts' },
        { from: 'client/client.ts', target: 'http/json.ts' },
        { from: 'node/cli.ts', target: 'client/client.ts' },
        { from: 'testing/cluster.ts', target: 'client/client-binary.ts' },
      ]),
    ).toEqual([
      'src/node/cli.ts imports client/client.ts: the server may not use the client',
      'src/testing/cluster.ts imports client/client-binary.ts: the server may not use the client',
    ]);
  });

  it('no import cycles among the modules of src/, type-only imports included', () => {
    expect(importCycles(relativeImports())).toEqual([]);
  });

  it('the cycle check names a cycle and a self-import, not a diamond; type imports count', () => {
    const imports = [
      { from: 'a.ts', target: 'b.ts' },
      { from: 'b.ts', target: 'c.ts' },
      { from: 'c.ts', target: 'a.ts' },
      { from: 'd.ts', target: 'd.ts' },
      { from: 'e.ts', target: 'f.ts' },
      { from: 'e.ts', target: 'g.ts' },
      { from: 'f.ts', target: 'h.ts' },
      { from: 'g.ts', target: 'h.ts' },
      { from: 'h.ts', target: '../bench/cli.ts' },
    ];
    expect(importCycles(imports, new Set())).toEqual([
      'a.ts -> b.ts -> c.ts -> a.ts',
      'd.ts -> d.ts',
    ]);
    expect(importCycles(imports, new Set(['c.ts -> a.ts', 'd.ts -> d.ts']))).toEqual([]);
    // Type-only imports and re-exports are edges like any other.
    const typeOnly = "import type { A } from './a.js';\nexport type * from './b.js';";
    expect(importsOf(typeOnly)).toEqual(['./a.js', './b.js']);
  });

  it('src/partition imports only stdx, format, the body reader and identifier types', () => {
    const files = sources(join(root, 'src', 'partition')).map((file) => ({
      name: relative(join(root, 'src'), file),
      text: readFileSync(file, 'utf8'),
    }));
    expect(files.length).toBeGreaterThan(0);
    expect(partitionImportProblems(files)).toEqual([]);
  });

  it('the partition import check names a value import of operations and any other module', () => {
    const text = [
      "import { assert } from '../stdx/assert.js';",
      "import { walkBatch } from '../format/message-batch.js';",
      "import { BodyReader } from '../metadata/body-io.js';",
      "import type { Identifier } from '../metadata/operations.js';",
      "import { idOf } from '../metadata/operations.js';",
      "import type { Kernels } from '../kernels/kernel.js';",
      "import type { Disk } from '../storage/disk.js';",
      "import { loadKernels } from '../kernels/index.js';",
      "import { ErrorCode } from '../metadata/errors.js';",
    ].join('\n');
    expect(partitionImportProblems([{ name: 'partition/x.ts', text }])).toEqual([
      'src/partition/x.ts imports metadata/operations.ts',
      'src/partition/x.ts imports types of storage/disk.ts',
      'src/partition/x.ts imports kernels/index.ts',
      'src/partition/x.ts imports metadata/errors.ts',
    ]);
  });

  it('src/vsr names nothing of the metadata snapshot format but the client table entry', () => {
    const files = sources(join(root, 'src', 'vsr')).map((file) => ({
      name: relative(join(root, 'src'), file),
      text: readFileSync(file, 'utf8'),
    }));
    expect(files.length).toBeGreaterThan(10);
    expect(vsrSnapshotProblems(files)).toEqual([]);
  });

  it('the snapshot coupling check names every metadata name the core imports', () => {
    const text = [
      "import type { ClientEntrySnapshot } from '../format/snapshot-model.js';",
      "import { SNAPSHOT_FORMAT_VERSION, type MetadataSnapshot } from '../format/snapshot-model.js';",
      "import { decodeSnapshot as decode } from '../format/snapshot-codec.js';",
      "import * as model from '../format/snapshot-model.js';",
      "export type { MetadataMachineSnapshot } from '../format/snapshot-model.js';",
      "import { Command } from '../constants.js';",
    ].join('\n');
    expect(vsrSnapshotProblems([{ name: 'vsr/replica.ts', text }])).toEqual([
      'src/vsr/replica.ts imports SNAPSHOT_FORMAT_VERSION from ../format/snapshot-model.js',
      'src/vsr/replica.ts imports MetadataSnapshot from ../format/snapshot-model.js',
      'src/vsr/replica.ts imports decodeSnapshot from ../format/snapshot-codec.js',
      'src/vsr/replica.ts imports all of ../format/snapshot-model.js',
      'src/vsr/replica.ts imports MetadataMachineSnapshot from ../format/snapshot-model.js',
    ]);
  });

  it('one Operation table per owner: the protocol its codes, the state machine its own', () => {
    const definitions: string[] = [];
    for (const file of sources(join(root, 'src'))) {
      if (/\bexport\s+const\s+Operation\s*=/.test(code(readFileSync(file, 'utf8')))) {
        definitions.push(relative(root, file));
      }
    }
    expect(definitions.sort()).toEqual(['src/metadata/operations.ts', 'src/vsr/header-types.ts']);
    // Each code is defined once, on its owner's side of the bound.
    const protocol = Object.values(ProtocolOperation) as number[];
    const machine = Object.values(StateMachineOperation) as number[];
    expect(protocol.filter((value) => value >= STATE_MACHINE_OPERATION_MIN)).toEqual([]);
    expect(machine.filter((value) => value < STATE_MACHINE_OPERATION_MIN || value > 0xff)).toEqual([]);
    expect(new Set([...protocol, ...machine]).size).toBe(protocol.length + machine.length);
  });

  it("src/vsr names none of the state machine's operations", () => {
    const names = Object.keys(StateMachineOperation).join('|');
    const pattern = new RegExp(`\\bOperation\\.(?:${names})\\b`, 'g');
    const problems: string[] = [];
    for (const file of sources(join(root, 'src', 'vsr'))) {
      for (const match of code(readFileSync(file, 'utf8')).matchAll(pattern)) {
        problems.push(`${relative(root, file)} names ${match[0]}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it(`held core modules keep to ${COLUMNS_MAX} columns and ${FUNCTION_LINES_MAX}-line functions`, () => {
    const problems: string[] = [];
    for (const entry of HELD_TO_LIMITS) {
      for (const file of filesOf(entry)) {
        problems.push(...limitProblems(relative(root, file), readFileSync(file, 'utf8')));
      }
    }
    expect(problems).toEqual([]);
  });

  it('the limit check names an over-long line and an over-long function', () => {
    const body = Array.from({ length: FUNCTION_LINES_MAX - 1 }, (_, index) => `  const v${index} = ${index};`);
    const text = [`function long(): void {`, ...body, '}', `const wide = '${'x'.repeat(COLUMNS_MAX)}';`].join('\n');
    expect(limitProblems('example.ts', text)).toEqual([
      `example.ts:${FUNCTION_LINES_MAX + 2} is ${COLUMNS_MAX + 16} columns (max ${COLUMNS_MAX})`,
      `example.ts: long is ${FUNCTION_LINES_MAX + 1} lines (max ${FUNCTION_LINES_MAX})`,
    ]);
    expect(limitProblems('example.ts', [`function short(): void {`, ...body.slice(1), '}'].join('\n'))).toEqual([]);
  });

  it('test/cluster and bench start long-lived child processes only through bench/procs.ts', () => {
    // One module kills whole process groups, bounds log tails, removes temp roots and counts what
    // is left, so no run leaves children behind: a second copy drifts (the harness once killed
    // only the leader). Children that are waited for on the spot (spawnSync, execFileSync,
    // execSync) cannot leak.
    const SYNC_ONLY = new Set(['spawnSync', 'execFileSync', 'execSync']);
    const problems: string[] = [];
    for (const directory of ['test/cluster', 'bench']) {
      for (const file of sources(join(root, directory))) {
        const name = relative(root, file);
        if (name === 'bench/procs.ts') continue;
        const text = readFileSync(file, 'utf8');
        if (/import\(\s*'node:child_process'\s*\)|require\(\s*'node:child_process'\s*\)/.test(text)) problems.push(`${name} loads node:child_process dynamically`);
        for (const match of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'(?:node:)?child_process'/g)) {
          for (const imported of match[1]!.split(',').map((part) => part.trim()).filter((part) => part.length > 0 && !part.startsWith('type '))) {
            if (!SYNC_ONLY.has(imported.split(/\s+as\s+/)[0]!)) problems.push(`${name} imports ${imported} from node:child_process`);
          }
        }
        if (/import\s+(?:\*\s+as\s+\w+|\w+)\s+from\s*'(?:node:)?child_process'/.test(text)) problems.push(`${name} imports all of node:child_process`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the server seeds every PRNG from node:crypto, never from a number (nonces must not be guessable)', () => {
    // A numeric seed carries at most 32 bits (and a clock-derived one far fewer): only the
    // simulator may replay a seed. Real replicas take Prng.fromSeedBytes(randomBytes(16)).
    const problems: string[] = [];
    for (const file of sources(join(root, 'src', 'node'))) {
      if (/new\s+Prng\s*\(/.test(code(readFileSync(file, 'utf8')))) problems.push(relative(root, file));
    }
    expect(problems).toEqual([]);
  });
});
